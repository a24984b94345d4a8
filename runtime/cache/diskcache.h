/* The on-disk compile cache: one file per entry in one flat directory. Used by the
 * runtime (cache.c) and by the `clcrt cache ls|info|clear` tool; nothing here needs a
 * runtime handle, a GPU or NVRTC.
 *
 * File name: <64 lower-case hex digits of the key>.clce. Every entry file is complete:
 * writers build it in a temporary file of the same directory (".tmp-<key prefix>-XXXXXX")
 * and rename() it into place, so a reader, in this process or another, sees either no
 * file, an older complete file or the new complete file, never a half-written one.
 * Readers take no lock. There is no fsync: after a crash an entry may be truncated or
 * hold garbage, and that is what the checksum is for (a damaged entry is a miss and is
 * rewritten by the next compile).
 *
 * Format, schema 2 (1 had no list of headers; its files read as damaged). All integers
 * little-endian.
 *
 *   offset  bytes  field
 *        0      8  magic "CLCRTCE\n"
 *        8      4  schema (1)
 *       12      4  H: header bytes, fixed part and strings, = 136 + name + arch + options + deps
 *       16     32  key (must equal the file name's key)
 *       48      8  cubin bytes (> 0)
 *       56      8  ptx bytes (0: no PTX stored; no terminating NUL on disk)
 *       64      8  created, seconds since the Unix epoch
 *       72      4  sched (clcrt_sched, resolved: never AUTO)
 *       76      4  grid (clcrt_grid)
 *       80     12  block x, y, z
 *       92     12  cluster x, y, z
 *      104      4  dynamic shared memory bytes
 *      108      4  NVRTC version, major << 16 | minor
 *      112      4  compile time in microseconds (saturates)
 *      116      2  name bytes (the entry symbol, 1..1023, no NUL)
 *      118      2  arch bytes (e.g. "sm_90a", 1..31)
 *      120      4  options bytes (the canonical NVRTC options joined with '\n'; for people)
 *      124      4  minimum CTAs per SM of __launch_bounds__ (0: none)
 *      128      4  deps bytes: the headers the compile read outside the key, in deps.h's text
 *                   form (one "<sha-256 hex> <size> <path>" line each; 0: none)
 *      132      4  reserved, 0
 *      136         name, arch, options, deps
 *        H         cubin, then PTX
 *   end-32     32  SHA-256 of every byte before it
 *
 * The file's size must be exactly H + cubin + ptx + 32. Any disagreement (size, magic,
 * schema, key, lengths, checksum) makes the file "damaged": a miss, never an error.
 *
 * Eviction is least recently used by modification time: a hit sets the entry's mtime to
 * now (atime is unreliable under relatime/noatime). After each write the directory is
 * trimmed to the byte cap, oldest first; temporary files older than an hour, left by
 * writers that died, are removed on the way. */
#ifndef CLCRT_DISKCACHE_H
#define CLCRT_DISKCACHE_H
#include <stddef.h>
#include <stdint.h>

#include "clcrt.h"

#define CLCRT__DC_MAGIC "CLCRTCE\n"
#define CLCRT__DC_SCHEMA 2u
#define CLCRT__DC_FIXED 136u
#define CLCRT__DC_SUM 32u
#define CLCRT__DC_KEY 32u
#define CLCRT__DC_SUFFIX ".clce"
#define CLCRT__DC_NAME_MAX 1023u
#define CLCRT__DC_ARCH_MAX 31u
/* Entry file name length: 64 hex digits + ".clce" (no NUL). */
#define CLCRT__DC_FILE_LEN (2 * CLCRT__DC_KEY + sizeof CLCRT__DC_SUFFIX - 1)
/* Bytes of the path buffers (directory, '/', file name, NUL): a directory whose entries'
 * paths do not fit is not used (clcrt__cache_init says so once). */
#define CLCRT__DC_PATH_BYTES 4096

/* An entry's header. Strings are NUL-terminated and owned (clcrt__dc_meta_free). */
typedef struct clcrt__dc_meta {
  uint8_t key[CLCRT__DC_KEY];
  uint32_t schema;
  clcrt_sched sched;
  clcrt_grid grid;
  clcrt_dim3 block, cluster;
  unsigned smem_bytes;
  unsigned min_blocks;   /* clcrt_tile_desc.min_blocks_per_sm as compiled */
  int nvrtc_major, nvrtc_minor;
  double compile_ms;
  int64_t created;       /* Unix seconds, as written */
  int64_t last_used;     /* the file's mtime, Unix seconds (filled by the readers) */
  uint64_t cubin_size, ptx_size;
  uint64_t file_size;    /* filled by the readers */
  char *name, *arch, *options;
  char *deps;            /* the headers' manifest (deps.h text form), "" when none */
} clcrt__dc_meta;

void clcrt__dc_meta_free(clcrt__dc_meta *m);

/* A whole entry: meta plus cubin and PTX (NUL-terminated, or NULL), each its own
 * clcrt__malloc block so the caller can take them over (set the pointer to NULL). */
typedef struct clcrt__dc_entry {
  clcrt__dc_meta meta;
  void *cubin;
  char *ptx;
} clcrt__dc_entry;

void clcrt__dc_entry_free(clcrt__dc_entry *e);

/* "<dir>/<hex key>.clce" into out; returns 0 when it does not fit. */
int clcrt__dc_path(const char *dir, const uint8_t key[CLCRT__DC_KEY], char *out, size_t n);

/* Reads and fully validates the entry for key. CLCRT_OK; CLCRT_E_NOT_FOUND (no file);
 * CLCRT_E_CORRUPT (damaged: truncated, foreign, wrong key or checksum); CLCRT_E_IO;
 * CLCRT_E_NOMEM. A hit marks the entry used (mtime). why, when not NULL, gets a sentence. */
clcrt_status clcrt__dc_read(const char *dir, const uint8_t key[CLCRT__DC_KEY], clcrt__dc_entry *out, char *why,
                            size_t whylen);

/* Reads the header of one entry file (any path). verify: also check the size and the
 * checksum (reads the whole file). Does not mark the entry used. Statuses as above. */
clcrt_status clcrt__dc_read_meta(const char *path, int verify, clcrt__dc_meta *out, char *why, size_t whylen);

/* Writes an entry atomically (temporary file + rename), then trims the directory to
 * max_bytes (0: no cap), never removing the entry just written. An entry larger than the
 * cap is not written (CLCRT_E_UNSUPPORTED). meta supplies key and metadata; its sizes,
 * created and file fields are ignored. */
clcrt_status clcrt__dc_write(const char *dir, const clcrt__dc_meta *meta, const void *cubin, size_t cubin_size,
                             const char *ptx, size_t ptx_size, unsigned long long max_bytes, char *why,
                             size_t whylen);

/* Calls fn for every entry file (by name) in dir, in no particular order: with the
 * header when st is CLCRT_OK, else with meta NULL and the reason. fn returns nonzero
 * to stop. verify as in clcrt__dc_read_meta. A missing directory has no entries. */
typedef int (*clcrt__dc_visit_fn)(void *user, const char *path, const clcrt__dc_meta *meta, clcrt_status st,
                                  const char *why);
clcrt_status clcrt__dc_foreach(const char *dir, int verify, clcrt__dc_visit_fn fn, void *user);

/* Number and total bytes of the entry files in dir. */
clcrt_status clcrt__dc_usage(const char *dir, unsigned long *entries, unsigned long long *bytes);

/* Removes entries, oldest first, until the entry files total at most max_bytes; keep
 * (an entry file name, or NULL) is never removed. Also removes stale temporary files.
 * removed (may be NULL) gets the number of entries removed. */
clcrt_status clcrt__dc_evict(const char *dir, unsigned long long max_bytes, const char *keep,
                             unsigned long *removed);

/* Removes every entry and temporary file in dir (other files are left alone). */
clcrt_status clcrt__dc_clear(const char *dir, unsigned long *removed);

/* The directory the runtime would use for opt_dir (clcrt_runtime_opts.cache_dir):
 * opt_dir, else $CLCRT_CACHE_DIR, else $XDG_CACHE_HOME/clcrt, else $HOME/.cache/clcrt.
 * *out is a clcrt__malloc'ed path, or NULL when the disk cache is off ("" or
 * CLCRT_CACHE_DISABLE=1, or no HOME); why says which. CLCRT_E_NOMEM on failure.
 * XDG_CACHE_HOME and HOME count only when absolute (env.c). */
clcrt_status clcrt__dc_resolve_dir(const char *opt_dir, char **out, const char **why);

/* Why dir cannot hold entries because of its path alone, or NULL: the path of an entry in
 * it (made absolute against the working directory when dir is relative) would not fit
 * CLCRT__DC_PATH_BYTES or PATH_MAX, or one of its components is longer than NAME_MAX. A
 * sentence, in buf. Checked before anything is created, so that a path that can never work
 * leaves no directories behind. */
const char *clcrt__dc_path_problem(const char *dir, char *buf, size_t n);

/* Creates dir and its parents (mode 0700). 0 on success, else an errno value. */
int clcrt__dc_mkdirs(const char *dir);
#endif
