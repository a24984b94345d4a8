/* The files a compile read from disk; see deps.h. */
#include "deps.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "embedded.h"
#include "json_parse.h"
#include "sha256.h"

/* ---- scanning text as the preprocessor reads it ------------------------------------ */

/* Bytes of a line splice at p: a backslash (or the trigraph ??/, in case a mode honours
 * trigraphs) before the end of a line. 0 when there is none. */
static size_t splice_at(const char *p, const char *end) {
  size_t b = p < end && *p == '\\' ? 1 : end - p >= 3 && p[0] == '?' && p[1] == '?' && p[2] == '/' ? 3 : 0;
  if (!b) return 0;
  if (end - p > (ptrdiff_t)b && p[b] == '\n') return b + 1;
  if (end - p > (ptrdiff_t)b + 1 && p[b] == '\r' && p[b + 1] == '\n') return b + 2;
  return 0;
}

static const char *skip_splices(const char *p, const char *end) {
  for (size_t s; (s = splice_at(p, end)) != 0;) p += s;
  return p;
}

static int ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Calls fn for every identifier of text (line splices joined) with its spelling (cut at
 * 31 bytes; len is the whole length) and where it starts and ends in the raw text; stops
 * when fn returns nonzero, and returns that. ucn: return 1 at a universal character name
 * (\u or \U), which could spell an identifier that is not there in plain letters. */
typedef int (*ident_fn)(const char *text, const char *end, const char *id, size_t len, const char *s, const char *e);
static int scan_idents(const char *text, size_t n, int ucn, ident_fn fn) {
  const char *p = text, *end = text + n;
  char id[32];
  while ((p = skip_splices(p, end)) < end) {
    if (ucn && *p == '\\' && end - p > 1 && (p[1] == 'u' || p[1] == 'U')) return 1;
    if (!ident_char(*p)) {
      p++;
      continue;
    }
    const char *s = p;
    size_t len = 0;
    while (p < end && ident_char(*p)) {
      if (len < sizeof id) id[len] = *p;
      len++;
      p = skip_splices(p + 1, end);
    }
    if (len >= sizeof id) continue;
    int r = fn(text, end, id, len, s, p);
    if (r) return r;
  }
  return 0;
}

static int is_embedded(const char *name, size_t n) {
  for (const clcrt__embedded_file *f = clcrt__embedded; f->name; f++)
    if (strlen(f->name) == n && !memcmp(f->name, name, n)) return 1;
  return 0;
}

/* Whether a header name from an angle-bracket include can only be found in the toolkit's
 * include directories: NVRTC searches nothing else for <...> when the user gave no -I (it
 * says "no directories in search list" without one), unless the name is absolute or climbs
 * out with "..". */
static int toolkit_name(const char *name, size_t n) {
  if (!n || name[0] == '/') return 0;
  for (size_t i = 0; i < n; i++) {
    if (name[i] == '\\' || name[i] == '"') return 0;
    if (name[i] == '.' && i + 1 < n && name[i + 1] == '.' && (i == 0 || name[i - 1] == '/') &&
        (i + 2 == n || name[i + 2] == '/'))
      return 0;
  }
  return 1;
}

/* Whether the identifier at [s, e) is the "include" of a line that is exactly
 *   #include "<a header of clcrt's template>"   or   #include <a toolkit header>
 * (spaces and tabs allowed around the #, the name and at the end of the line; no splice,
 * no comment, nothing else): the first NVRTC takes from memory, the second from the
 * toolkit, which the key covers; neither reads a file the manifest would need. */
static int embedded_include(const char *text, const char *end, const char *s, const char *e) {
  if (e - s != 7) return 0; /* a splice inside the word */
  const char *q = s;
  while (q > text && (q[-1] == ' ' || q[-1] == '\t')) q--;
  if (q == text || q[-1] != '#') return 0;
  q--;
  while (q > text && (q[-1] == ' ' || q[-1] == '\t')) q--;
  if (q > text) {
    /* At the start of a line that does not continue the one before. */
    if (q[-1] != '\n') return 0;
    const char *b = q - 1;
    if (b > text && b[-1] == '\r') b--;
    if (b > text && b[-1] == '\\') return 0;                                 /* a splice */
    if (b - text >= 3 && b[-1] == '/' && b[-2] == '?' && b[-3] == '?') return 0; /* the trigraph ??/ */
  }
  q = e;
  while (q < end && (*q == ' ' || *q == '\t')) q++;
  if (q >= end || (*q != '"' && *q != '<')) return 0;
  char close = *q == '"' ? '"' : '>';
  const char *name = ++q;
  while (q < end && *q != close && *q != '\n' && *q != '\\') q++;
  if (q >= end || *q != close) return 0;
  size_t n = (size_t)(q - name);
  if (close == '"' ? !is_embedded(name, n) : !toolkit_name(name, n)) return 0;
  for (q++; q < end && (*q == ' ' || *q == '\t' || *q == '\r'); q++) {
  }
  return q == end || *q == '\n';
}

static int reads_file(const char *text, const char *end, const char *id, size_t len, const char *s, const char *e) {
  if (len == 7 && !memcmp(id, "include", 7)) return !embedded_include(text, end, s, e);
  return (len == 12 && !memcmp(id, "include_next", 12)) || (len == 6 && !memcmp(id, "import", 6));
}

static int probes_file(const char *text, const char *end, const char *id, size_t len, const char *s, const char *e) {
  (void)text, (void)end, (void)s, (void)e;
  return (len == 13 && !memcmp(id, "__has_include", 13)) || (len == 18 && !memcmp(id, "__has_include_next", 18)) ||
         (len == 11 && !memcmp(id, "__has_embed", 11));
}

int clcrt__text_may_read_files(const char *text, size_t n) { return scan_idents(text, n, 1, reads_file); }
int clcrt__text_probes_files(const char *text, size_t n) { return scan_idents(text, n, 0, probes_file); }

/* ---- hashing one file ---------------------------------------------------------------- */

static int64_t ts_ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

static void set_stat(clcrt__dep *d, const struct stat *s) {
  d->have_stat = 1;
  d->ino = (uint64_t)s->st_ino;
  d->dev = (uint64_t)s->st_dev;
  d->mtime_ns = ts_ns(s->st_mtim);
  d->ctime_ns = ts_ns(s->st_ctim);
}

static int stat_matches(const clcrt__dep *d, const struct stat *s) {
  return d->have_stat && d->ino == (uint64_t)s->st_ino && d->dev == (uint64_t)s->st_dev &&
         d->size == (uint64_t)s->st_size && d->mtime_ns == ts_ns(s->st_mtim) && d->ctime_ns == ts_ns(s->st_ctim);
}

/* Reads path whole and hashes it. 0 on success with *text (clcrt__malloc'ed, for scans)
 * when text is not NULL; else an errno value (EFBIG: too large, EINVAL: not a regular file,
 * ENOMEM). */
static int hash_file(const char *path, uint8_t sha[32], uint64_t *size, struct stat *st, char **text) {
  /* O_NONBLOCK: a FIFO in a header's place must not block the open. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return errno;
  int e = 0;
  char *buf = NULL;
  if (fstat(fd, st) != 0) e = errno;
  else if (!S_ISREG(st->st_mode)) e = EINVAL;
  else if ((uint64_t)st->st_size > CLCRT__DEPS_MAX_FILE) e = EFBIG;
  else if (!(buf = clcrt__malloc((size_t)st->st_size + 1))) e = ENOMEM;
  size_t got = 0, want = e ? 0 : (size_t)st->st_size;
  while (!e && got < want) {
    ssize_t r = read(fd, buf + got, want - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) e = errno;
    else if (r == 0) break; /* shorter than it was: hash what is there, the stat check below sees it */
    else got += (size_t)r;
  }
  close(fd);
  if (e) {
    clcrt__free(buf);
    return e;
  }
  clcrt__sha256_once(buf, got, sha);
  *size = got;
  if (text) {
    buf[got] = 0;
    *text = buf;
  } else {
    clcrt__free(buf);
  }
  return 0;
}

/* ---- the manifest ---------------------------------------------------------------------- */

void clcrt__deps_free(clcrt__deps *d) {
  if (!d) return;
  for (size_t i = 0; i < d->n; i++) clcrt__free(d->v[i].path);
  clcrt__free(d->v);
  clcrt__free(d);
}

static clcrt__dep *deps_add(clcrt__deps *d, const char *path, size_t len) {
  clcrt__dep *v = clcrt__realloc(d->v, (d->n + 1) * sizeof *v);
  if (!v) return NULL;
  d->v = v;
  clcrt__dep *x = &v[d->n];
  memset(x, 0, sizeof *x);
  if (!(x->path = clcrt__malloc(len + 1))) return NULL;
  memcpy(x->path, path, len);
  x->path[len] = 0;
  d->n++;
  return x;
}


/* One name from the trace: skipped (the key covers it), added to d, or the reason the
 * compile cannot be cached (CLCRT_E_UNSUPPORTED). */
static clcrt_status take_file(clcrt__deps *d, const char *name, const clcrt__deps_ctx *ctx, char *why, size_t wn) {
  for (size_t i = 0; i < d->n; i++)
    if (!strcmp(d->v[i].path, name)) return CLCRT_OK; /* included again */
  /* NVRTC's built-in headers, clcrt's template, the user's source and the entry live in
   * memory, under names NVRTC finds before any file of the same name. */
  if (!strchr(name, '/') && (!strncmp(name, "__nv_nvrtc_builtin", 18) || is_embedded(name, strlen(name))))
    return CLCRT_OK;
  for (int i = 0; i < ctx->num_mem_names; i++)
    if (!strcmp(name, ctx->mem_names[i])) return CLCRT_OK;
  for (const char *p = name; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) {
      snprintf(why, wn, "a header's path holds a control character");
      return CLCRT_E_UNSUPPORTED;
    }
  char real[PATH_MAX];
  if (!realpath(name, real)) {
    snprintf(why, wn, "NVRTC read \"%.300s\", which cannot be found now (%s)", name, strerror(errno));
    return CLCRT_E_UNSUPPORTED;
  }
  size_t tl = ctx->toolkit_inc ? strlen(ctx->toolkit_inc) : 0;
  if (tl && !strncmp(real, ctx->toolkit_inc, tl) && real[tl] == '/') return CLCRT_OK; /* the toolkit's */
  uint8_t sha[32];
  uint64_t size = 0;
  struct stat st;
  char *text = NULL;
  int e = hash_file(name, sha, &size, &st, &text);
  if (e == ENOMEM) return CLCRT_E_NOMEM;
  if (e) {
    snprintf(why, wn, "the header \"%.300s\" cannot be hashed (%s)", name,
             e == EFBIG ? "larger than 64 MiB" : e == EINVAL ? "not a regular file" : strerror(e));
    return CLCRT_E_UNSUPPORTED;
  }
  int probes = clcrt__text_probes_files(text, (size_t)size);
  clcrt__free(text);
  if (probes) {
    snprintf(why, wn, "the header \"%.300s\" uses __has_include, whose answer depends on files never read", name);
    return CLCRT_E_UNSUPPORTED;
  }
  /* The content hashed now must be the content NVRTC read: a file changed since the
   * compile started (or just before it, within the file clock's lag) may not be. */
  int64_t settled = ts_ns(ctx->started) - (int64_t)CLCRT__DEPS_SETTLE_MS * 1000000;
  if (ts_ns(st.st_mtim) >= settled || ts_ns(st.st_ctim) >= settled) {
    snprintf(why, wn, "the header \"%.300s\" was modified while it was being compiled, or just before", name);
    return CLCRT_E_UNSUPPORTED;
  }
  clcrt__dep *x = deps_add(d, name, strlen(name));
  if (!x) return CLCRT_E_NOMEM;
  memcpy(x->sha, sha, sizeof sha);
  x->size = size;
  set_stat(x, &st);
  return CLCRT_OK;
}

/* A JSON string span, unescaped into buf (n bytes). 0 on success; -1 for an escape a path
 * does not need (\uXXXX: NVRTC writes control characters that way, and such a path is
 * refused anyway) or a string that does not fit. */
static int unescape(clcrt__jp_span s, char *buf, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < s.n; i++) {
    char c = s.s[i];
    if (c == '\\') {
      if (++i >= s.n) return -1;
      switch (s.s[i]) {
        case '"': c = '"'; break;
        case '\\': c = '\\'; break;
        case '/': c = '/'; break;
        default: return -1;
      }
    }
    if (o + 1 >= n) return -1;
    buf[o++] = c;
  }
  buf[o] = 0;
  return 0;
}

/* Calls back for every "detail" of a "Processing Header File" event; stops at the first
 * status that is not CLCRT_OK. */
static clcrt_status walk_trace(clcrt__jp *j, clcrt__deps *d, const clcrt__deps_ctx *ctx, int *canary, char *why,
                               size_t wn) {
  clcrt__jp_span key;
  int first = 1, rc, found = 0;
  if (clcrt__jp_object_begin(j)) return CLCRT_E_CORRUPT;
  while ((rc = clcrt__jp_object_next(j, &key, &first)) == 1) {
    if (!clcrt__jp_eq(key, "traceEvents") || clcrt__jp_peek(j) != CLCRT__JP_ARRAY) {
      if (clcrt__jp_skip(j)) return CLCRT_E_CORRUPT;
      continue;
    }
    found = 1;
    int afirst = 1, arc;
    if (clcrt__jp_array_begin(j)) return CLCRT_E_CORRUPT;
    while ((arc = clcrt__jp_array_next(j, &afirst)) == 1) {
      if (clcrt__jp_peek(j) != CLCRT__JP_OBJECT) {
        if (clcrt__jp_skip(j)) return CLCRT_E_CORRUPT;
        continue;
      }
      clcrt__jp_span ekey, detail = {0};
      int efirst = 1, erc, header = 0, have_detail = 0;
      if (clcrt__jp_object_begin(j)) return CLCRT_E_CORRUPT;
      while ((erc = clcrt__jp_object_next(j, &ekey, &efirst)) == 1) {
        if (clcrt__jp_eq(ekey, "name") && clcrt__jp_peek(j) == CLCRT__JP_STRING) {
          clcrt__jp_span name;
          if (clcrt__jp_string(j, &name)) return CLCRT_E_CORRUPT;
          header = clcrt__jp_eq(name, "Processing Header File");
        } else if (clcrt__jp_eq(ekey, "args") && clcrt__jp_peek(j) == CLCRT__JP_OBJECT) {
          clcrt__jp_span akey;
          int afirst2 = 1, arc2;
          if (clcrt__jp_object_begin(j)) return CLCRT_E_CORRUPT;
          while ((arc2 = clcrt__jp_object_next(j, &akey, &afirst2)) == 1) {
            if (clcrt__jp_eq(akey, "detail") && clcrt__jp_peek(j) == CLCRT__JP_STRING) {
              if (clcrt__jp_string(j, &detail)) return CLCRT_E_CORRUPT;
              have_detail = 1;
            } else if (clcrt__jp_skip(j)) {
              return CLCRT_E_CORRUPT;
            }
          }
          if (arc2 < 0) return CLCRT_E_CORRUPT;
        } else if (clcrt__jp_skip(j)) {
          return CLCRT_E_CORRUPT;
        }
      }
      if (erc < 0) return CLCRT_E_CORRUPT;
      if (!header) continue;
      char path[PATH_MAX];
      if (!have_detail || unescape(detail, path, sizeof path)) {
        snprintf(why, wn, "NVRTC's time trace names a header this library cannot read back");
        return CLCRT_E_UNSUPPORTED;
      }
      if (!strcmp(path, ctx->canary)) *canary = 1;
      clcrt_status st = take_file(d, path, ctx, why, wn);
      if (st != CLCRT_OK) return st;
    }
    if (arc < 0) return CLCRT_E_CORRUPT;
  }
  if (rc < 0 || !found) return CLCRT_E_CORRUPT;
  return CLCRT_OK;
}

clcrt_status clcrt__deps_from_trace(const char *json, size_t n, const clcrt__deps_ctx *ctx, clcrt__deps **out,
                                    char *why, size_t wn) {
  *out = NULL;
  clcrt__deps *d = clcrt__calloc(1, sizeof *d);
  if (!d) return CLCRT_E_NOMEM;
  clcrt__jp j;
  clcrt__jp_init(&j, json, n);
  int canary = 0;
  clcrt_status st = walk_trace(&j, d, ctx, &canary, why, wn);
  if (st == CLCRT_E_CORRUPT) {
    char where[96];
    clcrt__jp_where(&j, j.err_at, where, sizeof where);
    snprintf(why, wn, "NVRTC's time trace is not in a form this library reads (%s at %s)",
             j.err[0] ? j.err : "no traceEvents", where);
    st = CLCRT_E_UNSUPPORTED;
  } else if (st == CLCRT_OK && !canary) {
    /* Every compile includes the template's header: a trace that does not list it does
     * not list headers the way this library expects, and an empty list would be a lie. */
    snprintf(why, wn, "NVRTC's time trace does not list the headers it read (no \"%s\")", ctx->canary);
    st = CLCRT_E_UNSUPPORTED;
  }
  if (st != CLCRT_OK) {
    clcrt__deps_free(d);
    return st;
  }
  *out = d;
  return CLCRT_OK;
}

int clcrt__deps_check(clcrt__deps *d, int quick, int record, char *why, size_t wn) {
  for (size_t i = 0; d && i < d->n; i++) {
    clcrt__dep *x = &d->v[i];
    struct stat st;
    if (quick && stat(x->path, &st) == 0 && stat_matches(x, &st)) continue;
    uint8_t sha[32];
    uint64_t size = 0;
    int e = hash_file(x->path, sha, &size, &st, NULL);
    if (e) {
      snprintf(why, wn, "the header \"%.300s\" cannot be read now (%s)", x->path,
               e == ENOENT ? "it is gone" : e == EINVAL ? "not a regular file" : strerror(e));
      return 0;
    }
    if (size != x->size || memcmp(sha, x->sha, sizeof sha) != 0) {
      snprintf(why, wn, "the header \"%.300s\" changed", x->path);
      return 0;
    }
    if (record) set_stat(x, &st);
  }
  return 1;
}

char *clcrt__deps_encode(const clcrt__deps *d) {
  size_t len = 1;
  for (size_t i = 0; d && i < d->n; i++) len += 64 + 1 + 20 + 1 + strlen(d->v[i].path) + 1;
  char *s = clcrt__malloc(len), *p = s;
  if (!s) return NULL;
  *p = 0;
  for (size_t i = 0; d && i < d->n; i++) {
    clcrt__hex(d->v[i].sha, 32, p);
    p += 64;
    p += snprintf(p, len - (size_t)(p - s), " %llu %s\n", (unsigned long long)d->v[i].size, d->v[i].path);
  }
  return s;
}

static int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

clcrt_status clcrt__deps_decode(const char *text, clcrt__deps **out) {
  *out = NULL;
  clcrt__deps *d = clcrt__calloc(1, sizeof *d);
  if (!d) return CLCRT_E_NOMEM;
  clcrt_status st = CLCRT_OK;
  for (const char *p = text; *p && st == CLCRT_OK;) {
    const char *nl = strchr(p, '\n');
    uint8_t sha[32];
    int ok = nl && nl - p > 64 + 3 && p[64] == ' ';
    for (int i = 0; ok && i < 32; i++) {
      int hi = hex_digit(p[2 * i]), lo = hex_digit(p[2 * i + 1]);
      ok = hi >= 0 && lo >= 0;
      sha[i] = (uint8_t)(hi << 4 | lo);
    }
    const char *q = p + 65;
    unsigned long long size = 0;
    int digits = 0;
    for (; ok && q < nl && *q >= '0' && *q <= '9' && digits < 20; q++, digits++)
      size = size * 10 + (unsigned)(*q - '0');
    ok = ok && digits > 0 && q < nl && *q == ' ' && q + 1 < nl;
    if (!ok) {
      st = CLCRT_E_CORRUPT;
      break;
    }
    clcrt__dep *x = deps_add(d, q + 1, (size_t)(nl - q - 1));
    if (!x) {
      st = CLCRT_E_NOMEM;
      break;
    }
    memcpy(x->sha, sha, sizeof sha);
    x->size = size;
    p = nl + 1;
  }
  if (st != CLCRT_OK) {
    clcrt__deps_free(d);
    return st;
  }
  *out = d;
  return CLCRT_OK;
}
