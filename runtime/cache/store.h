/* The persistent store (clcrt_store_put / clcrt_store_get): small values a program measures
 * once and reuses in later processes, kept in the disk cache's directory, in its subfolder
 * "store". Used by the runtime (store.c) and by `clcrt cache ls|info|clear`; nothing here but
 * the two public calls needs a runtime.
 *
 * One file per entry, named <64 lower-case hex digits>.clcs: the SHA-256 of the scope, the
 * namespace and the key (each length-prefixed). As in the compile cache (diskcache.h), every
 * file is written to a temporary file of the same folder (".tmp-<name prefix>-XXXXXX") and
 * renamed into place, so a reader sees no file, a whole old one or a whole new one; there is
 * no lock and no fsync, and a checksum catches what a crash leaves.
 *
 * The scope keeps one device's entries from another's: "sm_90a|NVIDIA H100 80GB HBM3|132"
 * (architecture, device name, SM count), or "sm_90a" in compile-only mode.
 *
 * Format, schema 1. All integers little-endian.
 *
 *   offset  bytes  field
 *        0      8  magic "CLCRTST\n"
 *        8      4  schema (1)
 *       12      4  scope bytes S (1..CLCRT__ST_SCOPE_MAX)
 *       16      4  namespace bytes N (1..CLCRT_STORE_MAX_NAME)
 *       20      4  key bytes K (1..CLCRT_STORE_MAX_NAME)
 *       24      8  value bytes V (0..CLCRT_STORE_MAX_VALUE)
 *       32     16  reserved, zero
 *       48         scope, namespace, key (no NULs), then the value
 *   end-32     32  SHA-256 of every byte before it
 *
 * The file's size must be exactly 48 + S + N + K + V + 32, the scope, namespace and key inside
 * must be the ones asked for (the name is only their hash), and the checksum must match; any
 * disagreement makes the entry damaged, which reads as not found and is removed.
 *
 * Entries are not evicted (they are small, and a program writes one per thing it measured);
 * `clcrt cache clear` removes them with the compile cache's entries. */
#ifndef CLCRT_STORE_H
#define CLCRT_STORE_H
#include <stddef.h>
#include <stdint.h>

#include "clcrt.h"

#define CLCRT__ST_MAGIC "CLCRTST\n"
#define CLCRT__ST_SCHEMA 1u
#define CLCRT__ST_FIXED 48u
#define CLCRT__ST_SUM 32u
#define CLCRT__ST_SUBDIR "store"
#define CLCRT__ST_SUFFIX ".clcs"
#define CLCRT__ST_SCOPE_MAX 512u /* architecture, device name (at most 256 bytes) and SM count */

/* An entry as the tool lists it. Strings are NUL-terminated and owned
 * (clcrt__st_meta_free). */
typedef struct clcrt__st_meta {
  char *scope, *ns, *key;
  uint64_t value_size;
  uint64_t file_size;
  int64_t modified;      /* the file's mtime, Unix seconds: when it was written */
} clcrt__st_meta;

void clcrt__st_meta_free(clcrt__st_meta *m);

/* "<cache dir>/store" into a clcrt__malloc'ed string, or NULL when out of memory. */
char *clcrt__st_dir(const char *cache_dir);

/* Calls fn for every entry file in the store folder sdir (clcrt__st_dir), in no particular
 * order: with the entry's header when it is whole (st CLCRT_OK), else with meta NULL and the
 * reason. fn returns nonzero to stop. A missing folder has no entries. Nothing is removed. */
typedef int (*clcrt__st_visit_fn)(void *user, const char *path, const clcrt__st_meta *meta, clcrt_status st,
                                  const char *why);
clcrt_status clcrt__st_foreach(const char *sdir, clcrt__st_visit_fn fn, void *user);

/* Removes every entry and temporary file in the store folder sdir (nothing else); removed
 * (may be NULL) gets how many files went. A missing folder is empty. */
clcrt_status clcrt__st_clear(const char *sdir, unsigned long *removed);
#endif
