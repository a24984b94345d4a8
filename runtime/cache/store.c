/* The persistent store: clcrt_store_put / clcrt_store_get. The format and the rules are in
 * store.h; the directory, the atomic write and the checksum follow the compile cache's
 * (diskcache.h), whose folder-making it shares. */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "diskcache.h"
#include "internal.h"
#include "sha256.h"

#define TMP_PREFIX ".tmp-"
#define NAME_HEX (2 * CLCRT__SHA256_BYTES)
#define FILE_LEN (NAME_HEX + sizeof CLCRT__ST_SUFFIX - 1)
/* No whole entry is larger; a larger file is damaged, and is not read. */
#define MAX_FILE \
  ((uint64_t)CLCRT__ST_FIXED + CLCRT__ST_SCOPE_MAX + 2 * CLCRT_STORE_MAX_NAME + CLCRT_STORE_MAX_VALUE + CLCRT__ST_SUM)

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

void clcrt__st_meta_free(clcrt__st_meta *m) {
  if (!m) return;
  clcrt__free(m->scope); /* one block holds scope, namespace and key */
  m->scope = m->ns = m->key = NULL;
}

char *clcrt__st_dir(const char *cache_dir) {
  size_t n = strlen(cache_dir) + sizeof "/" CLCRT__ST_SUBDIR;
  char *p = clcrt__malloc(n);
  if (p) snprintf(p, n, "%s/%s", cache_dir, CLCRT__ST_SUBDIR);
  return p;
}

/* Why a namespace or key cannot be used, or NULL. They are hashed into the file name, so
 * no character could escape the folder; '/' and control characters are refused anyway, so
 * that names read the same in `clcrt cache ls` as in the program. */
static const char *bad_name(const char *s) {
  if (!s) return "is NULL";
  if (!*s) return "is empty";
  size_t n = strlen(s);
  if (n > CLCRT_STORE_MAX_NAME) return "is longer than CLCRT_STORE_MAX_NAME (255 bytes)";
  if (strchr(s, '/')) return "contains '/'";
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return "contains a control character";
  return NULL;
}

/* The entry's file name: hex of SHA-256(scope, ns, key) plus the suffix. */
static void file_name(const char *scope, size_t sl, const char *ns, size_t nl, const char *key, size_t kl,
                      char out[FILE_LEN + 1]) {
  clcrt__sha256_ctx c;
  uint8_t h[CLCRT__SHA256_BYTES];
  clcrt__sha256_init(&c);
  clcrt__sha256_field(&c, scope, sl);
  clcrt__sha256_field(&c, ns, nl);
  clcrt__sha256_field(&c, key, kl);
  clcrt__sha256_final(&c, h);
  clcrt__hex(h, sizeof h, out);
  memcpy(out + NAME_HEX, CLCRT__ST_SUFFIX, sizeof CLCRT__ST_SUFFIX);
}

static int is_entry_name(const char *name) {
  if (strlen(name) != FILE_LEN || strcmp(name + NAME_HEX, CLCRT__ST_SUFFIX) != 0) return 0;
  for (unsigned i = 0; i < NAME_HEX; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return 0;
  return 1;
}

/* The parts of a whole entry, pointing into the file's bytes. */
typedef struct parts {
  const char *scope, *ns, *key;
  const uint8_t *value;
  uint32_t sl, nl, kl;
  uint64_t vl;
} parts;

/* Checks the n bytes of an entry file named name (its base name); NULL when it is whole,
 * else why not. */
static const char *parse(const uint8_t *b, size_t n, const char *name, parts *p) {
  if (n < CLCRT__ST_FIXED + CLCRT__ST_SUM) return "truncated";
  if (memcmp(b, CLCRT__ST_MAGIC, 8) != 0) return "not a clcrt store entry (magic)";
  if (get32(b + 8) != CLCRT__ST_SCHEMA) return "a schema this library does not read";
  p->sl = get32(b + 12), p->nl = get32(b + 16), p->kl = get32(b + 20), p->vl = get64(b + 24);
  if (p->sl < 1 || p->sl > CLCRT__ST_SCOPE_MAX || p->nl < 1 || p->nl > CLCRT_STORE_MAX_NAME || p->kl < 1 ||
      p->kl > CLCRT_STORE_MAX_NAME || p->vl > CLCRT_STORE_MAX_VALUE)
    return "lengths out of range";
  if ((uint64_t)CLCRT__ST_FIXED + p->sl + p->nl + p->kl + p->vl + CLCRT__ST_SUM != n)
    return "its size does not match its header (truncated or foreign)";
  for (unsigned i = 32; i < CLCRT__ST_FIXED; i++)
    if (b[i]) return "reserved bytes are not zero";
  uint8_t sum[CLCRT__SHA256_BYTES];
  clcrt__sha256_once(b, n - CLCRT__ST_SUM, sum);
  if (memcmp(sum, b + n - CLCRT__ST_SUM, CLCRT__ST_SUM) != 0) return "checksum mismatch";
  p->scope = (const char *)b + CLCRT__ST_FIXED;
  p->ns = p->scope + p->sl;
  p->key = p->ns + p->nl;
  p->value = (const uint8_t *)p->key + p->kl;
  if (memchr(p->scope, 0, (size_t)p->sl + p->nl + p->kl)) return "a NUL byte in its names";
  char want[FILE_LEN + 1];
  file_name(p->scope, p->sl, p->ns, p->nl, p->key, p->kl, want);
  if (name && strcmp(name, want) != 0) return "its file name is not the hash of its names (moved or forged)";
  return NULL;
}

/* Reads a whole entry file into a clcrt__malloc'ed buffer. CLCRT_E_NOT_FOUND (no file),
 * CLCRT_E_CORRUPT (not a regular file, or too large to be an entry), CLCRT_E_IO, CLCRT_E_NOMEM;
 * why says which, except for CLCRT_E_NOMEM. st_out gets the file's stat. */
static clcrt_status read_entry(const char *path, uint8_t **buf, size_t *n, struct stat *st_out, const char **why) {
  *buf = NULL;
  *n = 0;
  /* O_NONBLOCK: a FIFO planted under an entry's name must not block the open. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *why = strerror(errno);
    return errno == ENOENT ? CLCRT_E_NOT_FOUND : CLCRT_E_IO;
  }
  clcrt_status st = CLCRT_OK;
  if (fstat(fd, st_out) != 0) st = CLCRT_E_IO, *why = strerror(errno);
  else if (!S_ISREG(st_out->st_mode)) st = CLCRT_E_CORRUPT, *why = "not a regular file";
  else if ((uint64_t)st_out->st_size > MAX_FILE) st = CLCRT_E_CORRUPT, *why = "too large to be an entry";
  size_t size = st == CLCRT_OK ? (size_t)st_out->st_size : 0;
  uint8_t *b = st == CLCRT_OK ? clcrt__malloc(size ? size : 1) : NULL;
  if (st == CLCRT_OK && !b) st = CLCRT_E_NOMEM;
  size_t got = 0;
  while (st == CLCRT_OK && got < size) {
    ssize_t r = pread(fd, b + got, size - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) st = CLCRT_E_IO, *why = strerror(errno);
    if (r <= 0) break; /* 0: the file shrank, which the size check below sees */
    got += (size_t)r;
  }
  close(fd);
  if (st != CLCRT_OK) {
    clcrt__free(b);
    return st;
  }
  *buf = b;
  *n = got;
  return CLCRT_OK;
}

/* This runtime's scope: its architecture and, with a device, the device's name and SM count. */
static clcrt_status scope_of(clcrt_runtime *rt, const char *call, char *out, size_t n) {
  if (rt->compile_only || !rt->cu) {
    snprintf(out, n, "%s", rt->arch);
    return CLCRT_OK;
  }
  char name[257] = "";
  CUresult r = rt->cu->cuDeviceGetName(name, (int)sizeof name - 1, rt->dev);
  if (r != CUDA_SUCCESS)
    return clcrt__fail(rt, CLCRT_E_CUDA, "%s: cuDeviceGetName failed (%s), so this device's entries cannot be told "
                       "from another's", call, clcrt__cu_name(rt, r));
  snprintf(out, n, "%s|%s|%d", rt->arch, name, rt->num_sms);
  return CLCRT_OK;
}

/* Checks the arguments both calls share and finds the entry's folder and path. */
static clcrt_status locate(clcrt_runtime *rt, const char *call, const char *ns, const char *key, char *scope,
                           char *sdir, char *path) {
  const char *bad;
  if ((bad = bad_name(ns)) != NULL) return clcrt__fail(rt, CLCRT_E_INVALID, "%s: the namespace %s", call, bad);
  if ((bad = bad_name(key)) != NULL) return clcrt__fail(rt, CLCRT_E_INVALID, "%s: the key %s", call, bad);
  clcrt_status st = scope_of(rt, call, scope, CLCRT__ST_SCOPE_MAX + 1);
  if (st != CLCRT_OK) return st;
  char name[FILE_LEN + 1];
  file_name(scope, strlen(scope), ns, strlen(ns), key, strlen(key), name);
  if (!rt->disk_dir) return CLCRT_OK; /* the callers say what "off" means for them */
  if (snprintf(sdir, CLCRT__DC_PATH_BYTES, "%s/%s", rt->disk_dir, CLCRT__ST_SUBDIR) >= CLCRT__DC_PATH_BYTES ||
      snprintf(path, CLCRT__DC_PATH_BYTES, "%s/%s", sdir, name) >= CLCRT__DC_PATH_BYTES)
    return clcrt__fail(rt, CLCRT_E_IO, "%s: the cache directory's path is too long for the store's files", call);
  return CLCRT_OK;
}

#define STORE_OFF                                                                                              \
  "the store lives in the disk cache's directory, and this runtime has no disk cache (opts.cache_dir or " \
  "CLCRT_CACHE_DIR is \"\", CLCRT_CACHE_DISABLE=1, or the directory was unusable: opts.log said why)"

clcrt_status clcrt_store_put(clcrt_runtime *rt, const char *ns, const char *key, const void *value, size_t size) {
  static const char call[] = "clcrt_store_put";
  if (!rt) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_store_put: rt is NULL");
  if (!value && size) return clcrt__fail(rt, CLCRT_E_INVALID, "%s: value is NULL and size %zu", call, size);
  if (size > CLCRT_STORE_MAX_VALUE)
    return clcrt__fail(rt, CLCRT_E_INVALID, "%s: the value is %zu bytes, more than CLCRT_STORE_MAX_VALUE (%u)", call,
                       size, CLCRT_STORE_MAX_VALUE);
  char scope[CLCRT__ST_SCOPE_MAX + 1], sdir[CLCRT__DC_PATH_BYTES], path[CLCRT__DC_PATH_BYTES];
  clcrt_status st = locate(rt, call, ns, key, scope, sdir, path);
  if (st != CLCRT_OK) return st;
  if (!rt->disk_dir) return clcrt__fail(rt, CLCRT_E_UNSUPPORTED, "%s: nothing was kept: %s", call, STORE_OFF);
  int e = clcrt__dc_mkdirs(sdir);
  if (e) return clcrt__fail(rt, e == ENOMEM ? CLCRT_E_NOMEM : CLCRT_E_IO, "%s: cannot create %s: %s", call, sdir,
                           e == ENOMEM ? "out of memory" : strerror(e));

  size_t sl = strlen(scope), nl = strlen(ns), kl = strlen(key);
  size_t n = CLCRT__ST_FIXED + sl + nl + kl + size + CLCRT__ST_SUM;
  uint8_t *b = clcrt__calloc(1, n);
  if (!b) return clcrt__fail(rt, CLCRT_E_NOMEM, "%s: out of memory for a %zu-byte entry", call, n);
  memcpy(b, CLCRT__ST_MAGIC, 8);
  put32(b + 8, CLCRT__ST_SCHEMA);
  put32(b + 12, (uint32_t)sl), put32(b + 16, (uint32_t)nl), put32(b + 20, (uint32_t)kl), put64(b + 24, size);
  uint8_t *p = b + CLCRT__ST_FIXED;
  memcpy(p, scope, sl), p += sl;
  memcpy(p, ns, nl), p += nl;
  memcpy(p, key, kl), p += kl;
  if (size) memcpy(p, value, size);
  clcrt__sha256_once(b, n - CLCRT__ST_SUM, b + n - CLCRT__ST_SUM);

  char tmp[CLCRT__DC_PATH_BYTES];
  const char *base = path + strlen(sdir) + 1;
  if (snprintf(tmp, sizeof tmp, "%s/" TMP_PREFIX "%.16s-XXXXXX", sdir, base) >= (int)sizeof tmp) {
    clcrt__free(b);
    return clcrt__fail(rt, CLCRT_E_IO, "%s: the cache directory's path is too long for the store's files", call);
  }
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) {
    e = errno;
    clcrt__free(b);
    return clcrt__fail(rt, CLCRT_E_IO, "%s: cannot create a file in %s: %s (the store needs a cache directory it may "
                       "write; entries already there can still be read)", call, sdir, strerror(e));
  }
  size_t done = 0;
  e = 0;
  while (done < n) {
    ssize_t r = write(fd, b + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      e = errno;
      break;
    }
    done += (size_t)r;
  }
  if (close(fd) != 0 && !e) e = errno;
  clcrt__free(b);
  /* The rename is the commit point: a reader sees the old entry or the whole new one. */
  if (!e && rename(tmp, path) != 0) e = errno;
  if (e) {
    unlink(tmp);
    return clcrt__fail(rt, CLCRT_E_IO, "%s: cannot write %s: %s", call, path, strerror(e));
  }
  return CLCRT_OK;
}

clcrt_status clcrt_store_get(clcrt_runtime *rt, const char *ns, const char *key, void *value, size_t cap,
                             size_t *size) {
  static const char call[] = "clcrt_store_get";
  if (size) *size = 0;
  if (!rt) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_store_get: rt is NULL");
  if (!value && cap) return clcrt__fail(rt, CLCRT_E_INVALID, "%s: value is NULL and cap %zu", call, cap);
  char scope[CLCRT__ST_SCOPE_MAX + 1], sdir[CLCRT__DC_PATH_BYTES], path[CLCRT__DC_PATH_BYTES];
  clcrt_status st = locate(rt, call, ns, key, scope, sdir, path);
  if (st != CLCRT_OK) return st;
  if (!rt->disk_dir) return clcrt__fail(rt, CLCRT_E_NOT_FOUND, "%s: no entry %s/%s: %s", call, ns, key, STORE_OFF);
  uint8_t *b;
  size_t n;
  struct stat fst;
  const char *why = NULL;
  st = read_entry(path, &b, &n, &fst, &why);
  if (st == CLCRT_E_NOT_FOUND)
    return clcrt__fail(rt, st, "%s: no entry %s/%s for this device (%s) in %s", call, ns, key, scope, sdir);
  if (st == CLCRT_E_IO) return clcrt__fail(rt, st, "%s: cannot read %s: %s", call, path, why);
  if (st == CLCRT_E_NOMEM) return clcrt__fail(rt, st, "%s: out of memory reading %s", call, path);
  parts p;
  if (st == CLCRT_OK) {
    why = parse(b, n, path + strlen(sdir) + 1, &p);
    /* The name is a hash: another scope, namespace or key with the same name would be a
     * collision, or a copy; either way it is not this entry. */
    if (!why && (p.sl != strlen(scope) || memcmp(p.scope, scope, p.sl) != 0 || p.nl != strlen(ns) ||
                 memcmp(p.ns, ns, p.nl) != 0 || p.kl != strlen(key) || memcmp(p.key, key, p.kl) != 0))
      why = "it holds another entry's names";
  }
  if (why) {
    /* Damaged: removed, so that the next put starts clean, but only if the name still
     * points at the file we read (a writer may have renamed a whole entry over it since). */
    struct stat now;
    int removed = stat(path, &now) == 0 && now.st_ino == fst.st_ino && now.st_dev == fst.st_dev && unlink(path) == 0;
    clcrt__free(b);
    return clcrt__fail(rt, CLCRT_E_NOT_FOUND, "%s: the entry %s/%s in %s was damaged (%s) and %s", call, ns, key, sdir,
                       why, removed ? "has been removed" : "could not be removed");
  }
  if (size) *size = (size_t)p.vl;
  if (p.vl > cap) {
    clcrt__free(b);
    return clcrt__fail(rt, CLCRT_E_INVALID, "%s: the value of %s/%s is %llu bytes, more than cap (%zu)", call, ns, key,
                       (unsigned long long)p.vl, cap);
  }
  if (p.vl) memcpy(value, p.value, (size_t)p.vl);
  clcrt__free(b);
  return CLCRT_OK;
}

clcrt_status clcrt__st_foreach(const char *sdir, clcrt__st_visit_fn fn, void *user) {
  DIR *d = opendir(sdir);
  if (!d) return errno == ENOENT ? CLCRT_OK : CLCRT_E_IO;
  clcrt_status st = CLCRT_OK;
  char path[CLCRT__DC_PATH_BYTES];
  for (struct dirent *de; (de = readdir(d)) != NULL;) {
    if (!is_entry_name(de->d_name)) continue;
    if (snprintf(path, sizeof path, "%s/%s", sdir, de->d_name) >= (int)sizeof path) {
      if (fn(user, de->d_name, NULL, CLCRT_E_IO, "path too long")) break;
      continue;
    }
    uint8_t *b;
    size_t n;
    struct stat fst;
    const char *why = NULL;
    clcrt_status rs = read_entry(path, &b, &n, &fst, &why);
    if (rs == CLCRT_E_NOT_FOUND) continue; /* removed since the listing */
    if (rs == CLCRT_E_NOMEM) {
      st = rs;
      break;
    }
    parts p;
    if (rs == CLCRT_OK && (why = parse(b, n, de->d_name, &p)) != NULL) rs = CLCRT_E_CORRUPT;
    clcrt__st_meta m = {0};
    if (rs == CLCRT_OK) {
      m.scope = clcrt__malloc((size_t)p.sl + p.nl + p.kl + 3);
      if (!m.scope) {
        clcrt__free(b);
        st = CLCRT_E_NOMEM;
        break;
      }
      memcpy(m.scope, p.scope, p.sl), m.scope[p.sl] = 0;
      m.ns = m.scope + p.sl + 1;
      memcpy(m.ns, p.ns, p.nl), m.ns[p.nl] = 0;
      m.key = m.ns + p.nl + 1;
      memcpy(m.key, p.key, p.kl), m.key[p.kl] = 0;
      m.value_size = p.vl;
      m.file_size = n;
      m.modified = (int64_t)fst.st_mtime;
    }
    clcrt__free(b);
    int stop = fn(user, path, rs == CLCRT_OK ? &m : NULL, rs, rs == CLCRT_OK ? NULL : why ? why : clcrt_status_str(rs));
    clcrt__st_meta_free(&m);
    if (stop) break;
  }
  closedir(d);
  return st;
}

clcrt_status clcrt__st_clear(const char *sdir, unsigned long *removed) {
  if (removed) *removed = 0;
  DIR *d = opendir(sdir);
  if (!d) return errno == ENOENT ? CLCRT_OK : CLCRT_E_IO;
  clcrt_status st = CLCRT_OK;
  for (struct dirent *de; (de = readdir(d)) != NULL;) {
    if (!is_entry_name(de->d_name) && strncmp(de->d_name, TMP_PREFIX, sizeof TMP_PREFIX - 1) != 0) continue;
    if (unlinkat(dirfd(d), de->d_name, 0) == 0) {
      if (removed) ++*removed;
    } else if (errno != ENOENT) {
      st = CLCRT_E_IO;
    }
  }
  closedir(d);
  return st;
}
