/* Registration: validate, look up the memory cache, the disk cache, compile, load.
 * The memory cache is the runtime's kernel list keyed by the content hash; a kernel being
 * built is in the list already, so concurrent registrations of one key wait for it and
 * compile once. */
#include <string.h>

#include "cache.h"
#include "checks.h"
#include "internal.h"

static clcrt_kernel *find_key(clcrt_runtime *rt, const uint8_t *key) {
  for (clcrt_kernel *k = rt->kernels; k; k = k->next)
    if (k->cacheable && k->state != CLCRT__K_FAILED && memcmp(k->key, key, CLCRT__KEY_BYTES) == 0) return k;
  return NULL;
}

static void unlink_kernel(clcrt_runtime *rt, clcrt_kernel *k) {
  for (clcrt_kernel **pp = &rt->kernels; *pp; pp = &(*pp)->next)
    if (*pp == k) {
      *pp = k->next;
      return;
    }
}

/* Moves a compiled or cached build into k and reads (and, with a device, loads) it. */
static clcrt_status adopt(clcrt_runtime *rt, clcrt_kernel *k, clcrt__build *b, int from_disk) {
  k->name = b->name, b->name = NULL;
  k->cubin = b->cubin, b->cubin = NULL;
  k->cubin_size = b->cubin_size;
  k->ptx = b->ptx, b->ptx = NULL;
  k->sched = b->sched;
  k->grid = b->grid;
  k->min_blocks = b->min_blocks;
  k->block = b->block;
  k->cluster = b->cluster;
  k->smem_bytes = b->smem_bytes;
  k->ring_bytes = b->sched == CLCRT_SCHED_STEAL || b->sched == CLCRT_SCHED_CLC
                      ? CLCRT__RING_OFF(b->smem_bytes) - b->smem_bytes + CLCRT__RING_BYTES
                      : 0;
  k->nthreads = b->block.x * b->block.y * b->block.z;
  k->cluster_size = b->cluster.x * b->cluster.y * b->cluster.z;
  k->compile_ms = from_disk ? 0 : b->compile_ms;
  k->from_cache = from_disk ? 2 : 0;
  return clcrt__kernel_finish(rt, k);
}

/* Undoes adopt after a failed read of the cubin (nothing was loaded): the name goes back
 * to the build, which compiles next; the cached cubin and PTX are dropped. */
static void unadopt(clcrt_kernel *k, clcrt__build *b) {
  clcrt__cubin_free(&k->info);
  k->kinfo = NULL;
  b->name = k->name, k->name = NULL;
  clcrt__free(k->cubin), k->cubin = NULL, k->cubin_size = 0;
  clcrt__free(k->ptx), k->ptx = NULL;
  b->cubin = NULL, b->ptx = NULL, b->cubin_size = 0;
}

clcrt_status clcrt_register(clcrt_runtime *rt, const clcrt_tile_desc *d, clcrt_kernel **out) {
  if (!rt) return CLCRT_E_INVALID;
  if (!out) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_register: out is NULL");
  *out = NULL;
  if (!d) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_register: the tile descriptor is NULL");

  /* Fast path: the same description again. Keyed by the description itself, so neither
   * the translation unit nor the content key is built (see clcrt__desc_key for why only
   * kernels with a cacheable content key carry one). */
  uint8_t dk[CLCRT__KEY_BYTES];
  int have_dk = clcrt__desc_key(d, dk);
  if (have_dk) {
    pthread_mutex_lock(&rt->lock);
    for (clcrt_kernel *k = rt->kernels; k; k = k->next)
      if (k->has_desc_key && k->state == CLCRT__K_READY && memcmp(k->desc_key, dk, sizeof dk) == 0) {
        rt->cstats.mem_hits++;
        pthread_mutex_unlock(&rt->lock);
        *out = k;
        return CLCRT_OK;
      }
    pthread_mutex_unlock(&rt->lock);
  }

  clcrt__build b;
  clcrt_status st = clcrt__build_prepare(rt, d, &b);
  if (st != CLCRT_OK) return st;

  uint8_t key[CLCRT__KEY_BYTES] = {0};
  int cacheable = clcrt__cache_key(rt, &b, key);

  pthread_mutex_lock(&rt->lock);
  if (cacheable) {
    clcrt_kernel *hit;
    while ((hit = find_key(rt, key)) && hit->state == CLCRT__K_BUILDING) pthread_cond_wait(&rt->cond, &rt->lock);
    if (hit) {
      rt->cstats.mem_hits++;
      pthread_mutex_unlock(&rt->lock);
      clcrt__build_free(&b);
      *out = hit;
      return CLCRT_OK;
    }
  }
  clcrt_kernel *k = clcrt__calloc(1, sizeof *k);
  if (!k) {
    pthread_mutex_unlock(&rt->lock);
    clcrt__build_free(&b);
    return clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory allocating a kernel");
  }
  k->rt = rt;
  k->state = CLCRT__K_BUILDING;
  k->cacheable = cacheable;
  memcpy(k->key, key, sizeof key);
  k->next = rt->kernels;
  rt->kernels = k;
  pthread_mutex_unlock(&rt->lock);

  int from_disk = cacheable && clcrt__disk_get(rt, key, &b);
  if (from_disk) {
    st = adopt(rt, k, &b, 1);
    /* An entry whose checksum holds but whose cubin cannot be read (written by a buggy
     * or foreign writer) is a miss like any damaged entry: compile, and the store below
     * replaces it. */
    if (st == CLCRT_E_CORRUPT) {
      clcrt__log(rt, CLCRT_LOG_WARN, "disk cache entry for %s is unusable (%s): compiling again", k->name,
                 clcrt__err_get(rt) ? clcrt__err_get(rt) : "unreadable cubin");
      unadopt(k, &b);
      from_disk = 0;
    }
  }
  if (!from_disk) {
    st = clcrt__build_compile(rt, &b);
    if (st == CLCRT_OK && cacheable) clcrt__disk_put(rt, key, &b);
    if (st == CLCRT_OK) st = adopt(rt, k, &b, 0);
  }
  clcrt__build_free(&b);

  pthread_mutex_lock(&rt->lock);
  if (st == CLCRT_OK) {
    k->state = CLCRT__K_READY;
    if (cacheable && have_dk) {
      memcpy(k->desc_key, dk, sizeof dk);
      k->has_desc_key = 1;
    }
    if (from_disk)
      rt->cstats.disk_hits++;
    else if (cacheable)
      rt->cstats.misses++;
    else
      rt->cstats.uncached++;
    rt->cstats.compile_ms += k->compile_ms;
  } else {
    unlink_kernel(rt, k);
  }
  pthread_cond_broadcast(&rt->cond);
  pthread_mutex_unlock(&rt->lock);
  if (st != CLCRT_OK) {
    clcrt__kernel_free(k);
    return st;
  }
  *out = k;
  return CLCRT_OK;
}
