/* The compile cache: content-addressed keys, the disk cache, counters. The memory cache
 * (key -> loaded kernel) lives in register.c with the runtime's kernel list. */
#ifndef CLCRT_CACHE_H
#define CLCRT_CACHE_H
#include <stdint.h>

#include "internal.h"

/* Resolves the disk cache directory (opts.cache_dir, $CLCRT_CACHE_DIR, $XDG_CACHE_HOME/clcrt,
 * ~/.cache/clcrt; "" or CLCRT_CACHE_DISABLE=1: off) into rt->disk_dir. Never fails the
 * runtime: an unusable directory means no disk cache and a message through the log. */
clcrt_status clcrt__cache_init(clcrt_runtime *rt);
void clcrt__cache_fini(clcrt_runtime *rt);

/* The key of a prepared build. Returns 1 when the build can be cached, 0 when it cannot
 * (headers the runtime cannot cover and no include_digest). Sets b->want_deps when the
 * compile must tell which headers it reads (deps.h). */
int clcrt__cache_key(clcrt_runtime *rt, clcrt__build *b, uint8_t key[CLCRT__KEY_BYTES]);

/* For register.c's fast path: a key of the description itself, so that a
 * memory hit can skip clcrt__build_prepare and clcrt__cache_key (see cache.c for when it
 * may be used). 1 on success, 0 when d cannot be hashed. */
int clcrt__desc_key(const clcrt_tile_desc *d, uint8_t key[CLCRT__KEY_BYTES]);

/* Looks the key up on disk. Returns 1 on a hit, with b->cubin (and b->ptx when stored)
 * filled through clcrt__malloc, and b->deps the headers it was compiled from; 0 on a miss
 * (a damaged entry, or one whose headers changed, is a miss). */
int clcrt__disk_get(clcrt_runtime *rt, const uint8_t key[CLCRT__KEY_BYTES], clcrt__build *b);
/* Stores a compiled build. Failures are logged, never returned. */
void clcrt__disk_put(clcrt_runtime *rt, const uint8_t key[CLCRT__KEY_BYTES], const clcrt__build *b);
#endif
