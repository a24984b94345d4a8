/* The on-disk compile cache; the format and the rules are in diskcache.h. */
#include "diskcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "env.h"
#include "sha256.h"

#define TMP_PREFIX ".tmp-"
#define STALE_TMP_SECONDS 3600
/* No compiled kernel comes near this; a bigger file is not ours, and is not read. */
#define MAX_ENTRY_BYTES (1ull << 31)

static clcrt_status why_set(char *why, size_t n, clcrt_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static clcrt_status why_set(char *why, size_t n, clcrt_status st, const char *fmt, ...) {
  if (why && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
  }
  return st;
}

static void put16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static int read_at(int fd, void *buf, size_t n, off_t off) {
  uint8_t *p = buf;
  while (n) {
    ssize_t r = pread(fd, p, n, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r == 0 ? EIO : errno; /* 0: the file shrank under us */
    p += r, n -= (size_t)r, off += r;
  }
  return 0;
}

static int write_all(int fd, const void *buf, size_t n) {
  const uint8_t *p = buf;
  while (n) {
    ssize_t r = write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    p += r, n -= (size_t)r;
  }
  return 0;
}

static int is_entry_name(const char *name) {
  if (strlen(name) != CLCRT__DC_FILE_LEN || strcmp(name + 2 * CLCRT__DC_KEY, CLCRT__DC_SUFFIX) != 0) return 0;
  for (unsigned i = 0; i < 2 * CLCRT__DC_KEY; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return 0;
  return 1;
}

int clcrt__dc_path(const char *dir, const uint8_t key[CLCRT__DC_KEY], char *out, size_t n) {
  char hex[2 * CLCRT__DC_KEY + 1];
  clcrt__hex(key, CLCRT__DC_KEY, hex);
  int len = snprintf(out, n, "%s/%s%s", dir, hex, CLCRT__DC_SUFFIX);
  return len > 0 && (size_t)len < n;
}

void clcrt__dc_meta_free(clcrt__dc_meta *m) {
  if (!m) return;
  clcrt__free(m->name); /* one block holds name, arch, options and deps */
  m->name = m->arch = m->options = m->deps = NULL;
}

void clcrt__dc_entry_free(clcrt__dc_entry *e) {
  if (!e) return;
  clcrt__dc_meta_free(&e->meta);
  clcrt__free(e->cubin);
  clcrt__free(e->ptx);
  e->cubin = NULL;
  e->ptx = NULL;
}

/* Parses the header in h (at least the H bytes it announces, hlen available) of a file of
 * file_size bytes into m, checking every field that can be checked without the payload. */
static clcrt_status parse_header(const uint8_t *h, size_t hlen, uint64_t file_size, clcrt__dc_meta *m, char *why,
                                 size_t wn) {
  memset(m, 0, sizeof *m);
  if (hlen < CLCRT__DC_FIXED || file_size < CLCRT__DC_FIXED + CLCRT__DC_SUM)
    return why_set(why, wn, CLCRT_E_CORRUPT, "truncated: %llu bytes", (unsigned long long)file_size);
  if (memcmp(h, CLCRT__DC_MAGIC, 8) != 0) return why_set(why, wn, CLCRT_E_CORRUPT, "not a clcrt cache entry (magic)");
  m->schema = get32(h + 8);
  if (m->schema != CLCRT__DC_SCHEMA)
    return why_set(why, wn, CLCRT_E_CORRUPT, "schema %u, this library reads %u", m->schema, CLCRT__DC_SCHEMA);
  uint32_t hbytes = get32(h + 12);
  memcpy(m->key, h + 16, CLCRT__DC_KEY);
  m->cubin_size = get64(h + 48);
  m->ptx_size = get64(h + 56);
  m->created = (int64_t)get64(h + 64);
  m->sched = (clcrt_sched)get32(h + 72);
  m->grid = (clcrt_grid)get32(h + 76);
  m->block = (clcrt_dim3){get32(h + 80), get32(h + 84), get32(h + 88)};
  m->cluster = (clcrt_dim3){get32(h + 92), get32(h + 96), get32(h + 100)};
  m->smem_bytes = get32(h + 104);
  uint32_t nv = get32(h + 108);
  m->nvrtc_major = (int)(nv >> 16), m->nvrtc_minor = (int)(nv & 0xffff);
  m->compile_ms = get32(h + 112) / 1000.0;
  uint32_t nl = get16(h + 116), al = get16(h + 118), ol = get32(h + 120), dl = get32(h + 128);
  m->file_size = file_size;
  m->min_blocks = get32(h + 124);
  if (nl < 1 || nl > CLCRT__DC_NAME_MAX || al < 1 || al > CLCRT__DC_ARCH_MAX || get32(h + 132) != 0 ||
      (uint64_t)hbytes != (uint64_t)CLCRT__DC_FIXED + nl + al + ol + dl)
    return why_set(why, wn, CLCRT_E_CORRUPT, "inconsistent header lengths");
  if ((uint32_t)m->sched < CLCRT_SCHED_CLC || (uint32_t)m->sched > CLCRT_SCHED_FIXED ||
      (uint32_t)m->grid > CLCRT_GRID_PERSISTENT)
    return why_set(why, wn, CLCRT_E_CORRUPT, "scheduler %u or grid %u out of range", (unsigned)m->sched,
                   (unsigned)m->grid);
  if (m->cubin_size == 0 || m->cubin_size > file_size || m->ptx_size > file_size ||
      (uint64_t)hbytes + m->cubin_size + m->ptx_size + CLCRT__DC_SUM != file_size)
    return why_set(why, wn, CLCRT_E_CORRUPT, "size %llu does not match the header (truncated or foreign)",
                   (unsigned long long)file_size);
  if (hlen < hbytes) return why_set(why, wn, CLCRT_E_CORRUPT, "truncated header");
  const char *s = (const char *)h + CLCRT__DC_FIXED;
  size_t strs = (size_t)nl + al + ol + dl;
  if (memchr(s, 0, strs)) return why_set(why, wn, CLCRT_E_CORRUPT, "NUL byte in a header string");
  char *block = clcrt__malloc(strs + 4);
  if (!block) return why_set(why, wn, CLCRT_E_NOMEM, "out of memory");
  m->name = block;
  memcpy(m->name, s, nl), m->name[nl] = 0;
  m->arch = m->name + nl + 1;
  memcpy(m->arch, s + nl, al), m->arch[al] = 0;
  m->options = m->arch + al + 1;
  memcpy(m->options, s + nl + al, ol), m->options[ol] = 0;
  m->deps = m->options + ol + 1;
  memcpy(m->deps, s + nl + al + ol, dl), m->deps[dl] = 0;
  return CLCRT_OK;
}

static clcrt_status open_entry(const char *path, int *fd, struct stat *stt, char *why, size_t wn) {
  /* O_NONBLOCK: a FIFO (or a device) planted under an entry's name must not block the
   * open for ever; it is refused below as not a regular file. Reads of regular files
   * ignore the flag. */
  *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (*fd < 0)
    return errno == ENOENT ? why_set(why, wn, CLCRT_E_NOT_FOUND, "no entry")
                           : why_set(why, wn, CLCRT_E_IO, "open %s: %s", path, strerror(errno));
  if (fstat(*fd, stt) != 0 || !S_ISREG(stt->st_mode)) {
    close(*fd);
    *fd = -1;
    return why_set(why, wn, CLCRT_E_CORRUPT, "%s is not a regular file", path);
  }
  if ((uint64_t)stt->st_size > MAX_ENTRY_BYTES) {
    close(*fd);
    *fd = -1;
    return why_set(why, wn, CLCRT_E_CORRUPT, "%lld bytes: too large to be an entry", (long long)stt->st_size);
  }
  return CLCRT_OK;
}

clcrt_status clcrt__dc_read(const char *dir, const uint8_t key[CLCRT__DC_KEY], clcrt__dc_entry *out, char *why,
                            size_t wn) {
  memset(out, 0, sizeof *out);
  char path[CLCRT__DC_PATH_BYTES];
  if (!clcrt__dc_path(dir, key, path, sizeof path)) return why_set(why, wn, CLCRT_E_IO, "path too long");
  int fd;
  struct stat stt;
  clcrt_status st = open_entry(path, &fd, &stt, why, wn);
  if (st != CLCRT_OK) return st;
  size_t size = (size_t)stt.st_size;
  uint8_t *buf = size >= CLCRT__DC_FIXED + CLCRT__DC_SUM ? clcrt__malloc(size) : NULL;
  if (size < CLCRT__DC_FIXED + CLCRT__DC_SUM) {
    st = why_set(why, wn, CLCRT_E_CORRUPT, "truncated: %zu bytes", size);
    goto out_fd;
  }
  if (!buf) {
    st = why_set(why, wn, CLCRT_E_NOMEM, "out of memory for a %zu-byte entry", size);
    goto out_fd;
  }
  int e = read_at(fd, buf, size, 0);
  if (e) {
    st = why_set(why, wn, CLCRT_E_IO, "read %s: %s", path, strerror(e));
    goto out_buf;
  }
  if ((st = parse_header(buf, size, size, &out->meta, why, wn)) != CLCRT_OK) goto out_meta;
  if (memcmp(out->meta.key, key, CLCRT__DC_KEY) != 0) {
    st = why_set(why, wn, CLCRT_E_CORRUPT, "the key inside differs from the file name");
    goto out_meta;
  }
  uint8_t sum[CLCRT__SHA256_BYTES];
  clcrt__sha256_once(buf, size - CLCRT__DC_SUM, sum);
  if (memcmp(sum, buf + size - CLCRT__DC_SUM, CLCRT__DC_SUM) != 0) {
    st = why_set(why, wn, CLCRT_E_CORRUPT, "checksum mismatch");
    goto out_meta;
  }
  size_t hb = get32(buf + 12), cs = (size_t)out->meta.cubin_size, ps = (size_t)out->meta.ptx_size;
  out->cubin = clcrt__malloc(cs);
  out->ptx = ps ? clcrt__malloc(ps + 1) : NULL;
  if (!out->cubin || (ps && !out->ptx)) {
    st = why_set(why, wn, CLCRT_E_NOMEM, "out of memory");
    goto out_meta;
  }
  memcpy(out->cubin, buf + hb, cs);
  if (ps) memcpy(out->ptx, buf + hb + cs, ps), out->ptx[ps] = 0;
  out->meta.last_used = (int64_t)time(NULL);
  /* Least recently used means used, not written: a hit moves the entry to the back of
   * the eviction queue. In a directory we may read but not write this fails; fine. */
  (void)futimens(fd, NULL);
  clcrt__free(buf);
  close(fd);
  return CLCRT_OK;
out_meta:
  clcrt__dc_entry_free(out);
out_buf:
  clcrt__free(buf);
out_fd:
  close(fd);
  return st;
}

clcrt_status clcrt__dc_read_meta(const char *path, int verify, clcrt__dc_meta *out, char *why, size_t wn) {
  memset(out, 0, sizeof *out);
  int fd;
  struct stat stt;
  clcrt_status st = open_entry(path, &fd, &stt, why, wn);
  if (st != CLCRT_OK) return st;
  uint64_t size = (uint64_t)stt.st_size;
  uint8_t fixed[CLCRT__DC_FIXED], *h = NULL;
  if (size < CLCRT__DC_FIXED + CLCRT__DC_SUM) {
    st = why_set(why, wn, CLCRT_E_CORRUPT, "truncated: %llu bytes", (unsigned long long)size);
    goto out_fd;
  }
  int e = read_at(fd, fixed, sizeof fixed, 0);
  if (e) {
    st = why_set(why, wn, CLCRT_E_IO, "read %s: %s", path, strerror(e));
    goto out_fd;
  }
  /* The fixed part alone says how long the header is; bound it by the file first. */
  uint64_t hb = get32(fixed + 12);
  if (hb < CLCRT__DC_FIXED || hb > size - CLCRT__DC_SUM) hb = CLCRT__DC_FIXED;
  h = clcrt__malloc((size_t)hb);
  if (!h) {
    st = why_set(why, wn, CLCRT_E_NOMEM, "out of memory");
    goto out_fd;
  }
  if ((e = read_at(fd, h, (size_t)hb, 0)) != 0) {
    st = why_set(why, wn, CLCRT_E_IO, "read %s: %s", path, strerror(e));
    goto out_h;
  }
  if ((st = parse_header(h, (size_t)hb, size, out, why, wn)) != CLCRT_OK) goto out_meta;
  out->last_used = (int64_t)stt.st_mtime;
  if (verify) {
    /* Stream the file through the hash in modest pieces: entries can be large. */
    clcrt__sha256_ctx c;
    clcrt__sha256_init(&c);
    uint8_t chunk[16384], sum[CLCRT__SHA256_BYTES];
    for (uint64_t off = 0, left = size - CLCRT__DC_SUM; left;) {
      size_t n = left < sizeof chunk ? (size_t)left : sizeof chunk;
      if ((e = read_at(fd, chunk, n, (off_t)off)) != 0) {
        st = why_set(why, wn, CLCRT_E_IO, "read %s: %s", path, strerror(e));
        goto out_meta;
      }
      clcrt__sha256_update(&c, chunk, n);
      off += n, left -= n;
    }
    clcrt__sha256_final(&c, sum);
    if ((e = read_at(fd, chunk, CLCRT__DC_SUM, (off_t)(size - CLCRT__DC_SUM))) != 0) {
      st = why_set(why, wn, CLCRT_E_IO, "read %s: %s", path, strerror(e));
      goto out_meta;
    }
    if (memcmp(sum, chunk, CLCRT__DC_SUM) != 0) {
      st = why_set(why, wn, CLCRT_E_CORRUPT, "checksum mismatch");
      goto out_meta;
    }
  }
  clcrt__free(h);
  close(fd);
  return CLCRT_OK;
out_meta:
  clcrt__dc_meta_free(out);
out_h:
  clcrt__free(h);
out_fd:
  close(fd);
  return st;
}

clcrt_status clcrt__dc_write(const char *dir, const clcrt__dc_meta *m, const void *cubin, size_t cubin_size,
                             const char *ptx, size_t ptx_size, unsigned long long max_bytes, char *why,
                             size_t wn) {
  size_t nl = m->name ? strlen(m->name) : 0, al = m->arch ? strlen(m->arch) : 0;
  size_t ol = m->options ? strlen(m->options) : 0, dl = m->deps ? strlen(m->deps) : 0;
  if (!cubin || !cubin_size) return why_set(why, wn, CLCRT_E_INVALID, "no cubin to store");
  if (nl < 1 || nl > CLCRT__DC_NAME_MAX || al < 1 || al > CLCRT__DC_ARCH_MAX || ol > UINT32_MAX / 4 ||
      dl > UINT32_MAX / 4)
    return why_set(why, wn, CLCRT_E_UNSUPPORTED, "entry name or architecture too long to store");
  size_t hb = CLCRT__DC_FIXED + nl + al + ol + dl;
  unsigned long long total = (unsigned long long)hb + cubin_size + ptx_size + CLCRT__DC_SUM;
  if ((max_bytes && total > max_bytes) || total > MAX_ENTRY_BYTES)
    return why_set(why, wn, CLCRT_E_UNSUPPORTED, "entry of %llu bytes exceeds the cache cap of %llu bytes", total,
                   max_bytes);

  char path[CLCRT__DC_PATH_BYTES], tmp[CLCRT__DC_PATH_BYTES], hex[2 * CLCRT__DC_KEY + 1];
  clcrt__hex(m->key, CLCRT__DC_KEY, hex);
  if (!clcrt__dc_path(dir, m->key, path, sizeof path) ||
      snprintf(tmp, sizeof tmp, "%s/" TMP_PREFIX "%.16s-XXXXXX", dir, hex) >= (int)sizeof tmp)
    return why_set(why, wn, CLCRT_E_IO, "path too long");

  clcrt_status st = CLCRT_OK;
  uint8_t *h = clcrt__calloc(1, hb);
  if (!h) return why_set(why, wn, CLCRT_E_NOMEM, "out of memory");
  memcpy(h, CLCRT__DC_MAGIC, 8);
  put32(h + 8, CLCRT__DC_SCHEMA);
  put32(h + 12, (uint32_t)hb);
  memcpy(h + 16, m->key, CLCRT__DC_KEY);
  put64(h + 48, cubin_size);
  put64(h + 56, ptx_size);
  put64(h + 64, (uint64_t)time(NULL));
  put32(h + 72, (uint32_t)m->sched);
  put32(h + 76, (uint32_t)m->grid);
  put32(h + 80, m->block.x), put32(h + 84, m->block.y), put32(h + 88, m->block.z);
  put32(h + 92, m->cluster.x), put32(h + 96, m->cluster.y), put32(h + 100, m->cluster.z);
  put32(h + 104, m->smem_bytes);
  put32(h + 124, m->min_blocks);
  put32(h + 108, (uint32_t)m->nvrtc_major << 16 | ((uint32_t)m->nvrtc_minor & 0xffff));
  double us = m->compile_ms * 1000.0;
  put32(h + 112, us <= 0 ? 0 : us >= 4294967295.0 ? UINT32_MAX : (uint32_t)us);
  put16(h + 116, (uint32_t)nl), put16(h + 118, (uint32_t)al), put32(h + 120, (uint32_t)ol);
  put32(h + 128, (uint32_t)dl);
  memcpy(h + CLCRT__DC_FIXED, m->name, nl);
  memcpy(h + CLCRT__DC_FIXED + nl, m->arch, al);
  if (ol) memcpy(h + CLCRT__DC_FIXED + nl + al, m->options, ol);
  if (dl) memcpy(h + CLCRT__DC_FIXED + nl + al + ol, m->deps, dl);

  uint8_t sum[CLCRT__SHA256_BYTES];
  clcrt__sha256_ctx c;
  clcrt__sha256_init(&c);
  clcrt__sha256_update(&c, h, hb);
  clcrt__sha256_update(&c, cubin, cubin_size);
  if (ptx_size) clcrt__sha256_update(&c, ptx, ptx_size);
  clcrt__sha256_final(&c, sum);

  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) {
    st = why_set(why, wn, CLCRT_E_IO, "cannot create a file in %s: %s", dir, strerror(errno));
    goto out_h;
  }
  int e = write_all(fd, h, hb);
  if (!e) e = write_all(fd, cubin, cubin_size);
  if (!e && ptx_size) e = write_all(fd, ptx, ptx_size);
  if (!e) e = write_all(fd, sum, sizeof sum);
  if (close(fd) != 0 && !e) e = errno;
  if (e) {
    st = why_set(why, wn, CLCRT_E_IO, "write %s: %s", tmp, strerror(e));
    goto out_tmp;
  }
  /* The rename is the commit point: readers see the old file or the whole new one. */
  if (rename(tmp, path) != 0) {
    st = why_set(why, wn, CLCRT_E_IO, "rename to %s: %s", path, strerror(errno));
    goto out_tmp;
  }
  clcrt__free(h);
  if (max_bytes) clcrt__dc_evict(dir, max_bytes, path + strlen(path) - CLCRT__DC_FILE_LEN, NULL);
  return CLCRT_OK;
out_tmp:
  unlink(tmp);
out_h:
  clcrt__free(h);
  return st;
}

typedef struct dc_file {
  char name[CLCRT__DC_FILE_LEN + 1];
  struct timespec mtime;
  unsigned long long size;
} dc_file;

static int by_mtime(const void *a, const void *b) {
  const dc_file *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Lists the entry files of dir; removes temporary files older than stale_tmp seconds
 * (0: every temporary file, -1: none). */
static clcrt_status scan(const char *dir, long stale_tmp, dc_file **files, size_t *count, unsigned long *tmp_removed) {
  *files = NULL;
  *count = 0;
  DIR *d = opendir(dir);
  if (!d) return errno == ENOENT ? CLCRT_OK : CLCRT_E_IO;
  size_t cap = 0;
  time_t now = time(NULL);
  clcrt_status st = CLCRT_OK;
  for (struct dirent *de; (de = readdir(d)) != NULL;) {
    struct stat s;
    if (strncmp(de->d_name, TMP_PREFIX, sizeof TMP_PREFIX - 1) == 0) {
      /* "Every temporary" must not depend on the clock: a file's mtime comes from the
       * kernel's coarse clock and can read a second ahead of time(NULL). */
      if (stale_tmp >= 0 && fstatat(dirfd(d), de->d_name, &s, AT_SYMLINK_NOFOLLOW) == 0 &&
          (stale_tmp == 0 || now - s.st_mtime >= stale_tmp) && unlinkat(dirfd(d), de->d_name, 0) == 0 && tmp_removed)
        ++*tmp_removed;
      continue;
    }
    if (!is_entry_name(de->d_name)) continue;
    if (fstatat(dirfd(d), de->d_name, &s, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(s.st_mode)) continue;
    if (*count == cap) {
      size_t ncap = cap ? 2 * cap : 64;
      dc_file *nf = clcrt__realloc(*files, ncap * sizeof *nf);
      if (!nf) {
        st = CLCRT_E_NOMEM;
        break;
      }
      *files = nf, cap = ncap;
    }
    dc_file *f = &(*files)[(*count)++];
    memcpy(f->name, de->d_name, sizeof f->name);
    f->mtime = s.st_mtim;
    f->size = (unsigned long long)s.st_size;
  }
  closedir(d);
  if (st != CLCRT_OK) {
    clcrt__free(*files);
    *files = NULL;
    *count = 0;
  }
  return st;
}

clcrt_status clcrt__dc_evict(const char *dir, unsigned long long max_bytes, const char *keep, unsigned long *removed) {
  if (removed) *removed = 0;
  dc_file *f;
  size_t n;
  clcrt_status st = scan(dir, STALE_TMP_SECONDS, &f, &n, NULL);
  if (st != CLCRT_OK) return st;
  unsigned long long total = 0;
  for (size_t i = 0; i < n; i++) total += f[i].size;
  if (total > max_bytes) {
    qsort(f, n, sizeof *f, by_mtime);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; dfd >= 0 && i < n && total > max_bytes; i++) {
      if (keep && strcmp(keep, f[i].name) == 0) continue;
      /* Another process may have removed it first; either way it is gone. */
      if (unlinkat(dfd, f[i].name, 0) == 0 || errno == ENOENT) {
        total -= f[i].size;
        if (removed) ++*removed;
      }
    }
    if (dfd < 0) st = CLCRT_E_IO;
    else close(dfd);
  }
  clcrt__free(f);
  return st;
}

clcrt_status clcrt__dc_clear(const char *dir, unsigned long *removed) {
  if (removed) *removed = 0;
  dc_file *f;
  size_t n;
  unsigned long tmps = 0;
  clcrt_status st = scan(dir, 0, &f, &n, &tmps);
  if (st != CLCRT_OK) return st;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  unsigned long count = 0;
  for (size_t i = 0; dfd >= 0 && i < n; i++)
    if (unlinkat(dfd, f[i].name, 0) == 0) count++;
    else if (errno != ENOENT) st = CLCRT_E_IO;
  if (dfd >= 0) close(dfd);
  else if (n) st = CLCRT_E_IO;
  clcrt__free(f);
  if (removed) *removed = count + tmps;
  return st;
}

clcrt_status clcrt__dc_usage(const char *dir, unsigned long *entries, unsigned long long *bytes) {
  dc_file *f;
  size_t n;
  clcrt_status st = scan(dir, -1, &f, &n, NULL);
  unsigned long long total = 0;
  for (size_t i = 0; i < n; i++) total += f[i].size;
  clcrt__free(f);
  if (entries) *entries = (unsigned long)n;
  if (bytes) *bytes = total;
  return st;
}

clcrt_status clcrt__dc_foreach(const char *dir, int verify, clcrt__dc_visit_fn fn, void *user) {
  dc_file *f;
  size_t n;
  clcrt_status st = scan(dir, -1, &f, &n, NULL);
  if (st != CLCRT_OK) return st;
  char path[CLCRT__DC_PATH_BYTES], why[256];
  for (size_t i = 0; i < n; i++) {
    clcrt__dc_meta m;
    why[0] = 0;
    /* A truncated path would name another file: report the entry as unreadable. */
    clcrt_status rs = snprintf(path, sizeof path, "%s/%s", dir, f[i].name) >= (int)sizeof path
                          ? why_set(why, sizeof why, CLCRT_E_IO, "path too long")
                          : clcrt__dc_read_meta(path, verify, &m, why, sizeof why);
    if (rs == CLCRT_E_NOT_FOUND) continue; /* removed since the scan */
    int stop = fn(user, path, rs == CLCRT_OK ? &m : NULL, rs, why);
    if (rs == CLCRT_OK) clcrt__dc_meta_free(&m);
    if (stop) break;
  }
  clcrt__free(f);
  return CLCRT_OK;
}

static char *join(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *p = clcrt__malloc(la + lb + 1);
  if (p) memcpy(p, a, la), memcpy(p + la, b, lb + 1);
  return p;
}

clcrt_status clcrt__dc_resolve_dir(const char *opt_dir, char **out, const char **why) {
  const clcrt__env *env = clcrt__env_get();
  const char *w = NULL;
  *out = NULL;
  if (env->cache_disable) w = "CLCRT_CACHE_DISABLE is set";
  else if (opt_dir && !*opt_dir) w = "clcrt_runtime_opts.cache_dir is \"\"";
  else if (opt_dir) *out = clcrt__strdup(opt_dir);
  else if (env->cache_dir && !*env->cache_dir) w = "CLCRT_CACHE_DIR is empty";
  else if (env->cache_dir) *out = clcrt__strdup(env->cache_dir);
  else if (env->xdg_cache_home) *out = join(env->xdg_cache_home, "/clcrt");
  else if (env->home) *out = join(env->home, "/.cache/clcrt");
  else w = "neither CLCRT_CACHE_DIR, an absolute XDG_CACHE_HOME nor an absolute HOME is set";
  if (why) *why = w;
  return w || *out ? CLCRT_OK : CLCRT_E_NOMEM;
}

const char *clcrt__dc_path_problem(const char *dir, char *buf, size_t n) {
  size_t len = strlen(dir);
  if (dir[0] != '/') {
    /* A relative directory is made absolute once it exists (cache.c): count the working
     * directory too. One that cannot be read is judged by the relative path alone. */
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd)) len += strlen(cwd) + 1;
  }
  size_t limit = CLCRT__DC_PATH_BYTES < PATH_MAX ? CLCRT__DC_PATH_BYTES : PATH_MAX;
  if (len + 1 + CLCRT__DC_FILE_LEN + 1 > limit) {
    snprintf(buf, n,
             "its path is too long for the entries' paths (%zu bytes with the working directory; an entry adds %zu, "
             "and a path holds at most %zu)",
             len, (size_t)CLCRT__DC_FILE_LEN + 1, limit - 1);
    return buf;
  }
  for (const char *p = dir; *p;) {
    size_t c = strcspn(p, "/");
    if (c > NAME_MAX) {
      snprintf(buf, n, "its component \"%.32s...\" is %zu bytes long, and a file name holds at most %d", p, c,
               NAME_MAX);
      return buf;
    }
    p += c;
    p += strspn(p, "/");
  }
  return NULL;
}

int clcrt__dc_mkdirs(const char *dir) {
  size_t n = strlen(dir);
  char *p = clcrt__malloc(n + 1);
  if (!p) return ENOMEM;
  memcpy(p, dir, n + 1);
  int e = 0;
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s) continue;
    char c = *s;
    *s = 0;
    /* An existing directory is fine whatever mkdir says about it (EROFS, EACCES). */
    struct stat ps;
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
      int me = errno;
      if (stat(p, &ps) != 0 || !S_ISDIR(ps.st_mode)) e = me;
    }
    *s = c;
    if (e || !c) break;
  }
  struct stat st;
  if (!e && stat(dir, &st) != 0) e = errno; /* ELOOP, ENAMETOOLONG, ... */
  if (!e && !S_ISDIR(st.st_mode)) e = ENOTDIR;
  clcrt__free(p);
  return e;
}
