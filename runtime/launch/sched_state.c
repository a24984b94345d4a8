/* Scheduler state shared by the runtimes of a process: one per CUDA context. See
 * sched_state.h for what lives in it and why. */
#include "sched_state.h"

#include <pthread.h>
#include <string.h>

#include "checks.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static clcrt__devstate *g_states;

/* A copy from pageable host memory returns once the bytes are staged, before the DMA to the
 * device has landed, and it runs on the legacy stream, which clcrt's non-blocking streams do
 * not wait for: a run launched right after could read the old bytes (a stale claim counter
 * loses tiles). Waiting for the legacy stream makes the copy complete. */
clcrt_status clcrt__put_device(clcrt_runtime *rt, CUdeviceptr p, const void *src, size_t bytes) {
  CU_CHECK(rt, cuMemcpyHtoD(p, src, bytes));
  CU_CHECK(rt, cuStreamSynchronize(CU_STREAM_LEGACY));
  return CLCRT_OK;
}

clcrt_status clcrt__zero_device(clcrt_runtime *rt, CUdeviceptr p, size_t bytes) {
  static const unsigned char zeros[4096];
  for (size_t off = 0; off < bytes; off += sizeof zeros) {
    size_t n = bytes - off < sizeof zeros ? bytes - off : sizeof zeros;
    CU_CHECK(rt, cuMemcpyHtoD(p + off, zeros, n));
  }
  CU_CHECK(rt, cuStreamSynchronize(CU_STREAM_LEGACY)); /* see clcrt__put_device */
  return CLCRT_OK;
}

clcrt_status clcrt__devstate_acquire(clcrt_runtime *rt) {
  clcrt_status st = CLCRT_OK;
  pthread_mutex_lock(&g_lock);
  clcrt__devstate *d;
  for (d = g_states; d; d = d->next)
    if (d->ctx == rt->ctx) break;
  if (d) {
    d->refs++;
    rt->devstate = d;
    goto out;
  }
  d = clcrt__calloc(1, sizeof *d);
  if (!d) {
    st = clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory for the scheduler's device state");
    goto out;
  }
  d->ctx = rt->ctx;
  d->refs = 1;
  CU_CHECK_GOTO(rt, cuMemAlloc(&d->table, CLCRT__TABLE_BYTES), st, fail);
  CU_CHECK_GOTO(rt, cuMemAlloc(&d->yield, CLCRT__YIELD_SLOTS * 4), st, fail);
  if ((st = clcrt__zero_device(rt, d->table, CLCRT__TABLE_BYTES)) != CLCRT_OK) goto fail;
  if ((st = clcrt__zero_device(rt, d->yield, CLCRT__YIELD_SLOTS * 4)) != CLCRT_OK) goto fail;
  d->next = g_states;
  g_states = d;
  rt->devstate = d;
  goto out;
fail:
  if (d->yield) rt->cu->cuMemFree(d->yield);
  if (d->table) rt->cu->cuMemFree(d->table);
  clcrt__free(d);
out:
  pthread_mutex_unlock(&g_lock);
  return st;
}

void clcrt__devstate_release(clcrt_runtime *rt) {
  clcrt__devstate *d = rt->devstate;
  if (!d) return;
  rt->devstate = NULL;
  pthread_mutex_lock(&g_lock);
  if (--d->refs == 0) {
    for (clcrt__devstate **pp = &g_states; *pp; pp = &(*pp)->next)
      if (*pp == d) {
        *pp = d->next;
        break;
      }
    /* The caller made the context current. Graphs that still hold runs of this context
     * must not be launched after the last runtime is gone (docs/design.md: CUDA graphs). */
    rt->cu->cuMemFree(d->table);
    rt->cu->cuMemFree(d->yield);
    clcrt__free(d);
  }
  pthread_mutex_unlock(&g_lock);
}

unsigned clcrt__devstate_stream_add(clcrt__devstate *d, unsigned level) {
  pthread_mutex_lock(&g_lock);
  /* Streams of the lowest level preempt nothing: counted (clcrt__devstate_mixed), no word. */
  unsigned slot = level ? __atomic_fetch_add(&d->next_slot, 1u, __ATOMIC_RELAXED) % CLCRT__YIELD_SLOTS : 0;
  __atomic_add_fetch(&d->live[level], 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&g_lock);
  return slot;
}

void clcrt__devstate_stream_remove(clcrt__devstate *d, unsigned level) {
  __atomic_sub_fetch(&d->live[level], 1, __ATOMIC_RELAXED);
}

int clcrt__devstate_higher(const clcrt__devstate *d, unsigned level) {
  for (unsigned l = level + 1; l <= CLCRT__MAX_LEVEL; l++)
    if (__atomic_load_n(&d->live[l], __ATOMIC_RELAXED) > 0) return 1;
  return 0;
}

int clcrt__devstate_mixed(const clcrt__devstate *d) {
  int levels = 0;
  for (unsigned l = 0; l <= CLCRT__MAX_LEVEL; l++) levels += __atomic_load_n(&d->live[l], __ATOMIC_RELAXED) > 0;
  return levels > 1;
}

/* Pages of mapped host memory for kernels' measured unit times. */
struct clcrt__hint_page {
  struct clcrt__hint_page *next;
  void *host;
  uint64_t dev;
};

const char *clcrt__hint_slot(clcrt_runtime *rt, const volatile uint32_t **host, uint64_t *dev) {
  struct clcrt__hint_page *pg = rt->hint_pages;
  if (!pg || rt->hint_used + CLCRT__HINT_STRIDE > CLCRT__HINT_PAGE) {
    struct clcrt__hint_page *n = clcrt__calloc(1, sizeof *n);
    if (!n) return "out of memory";
    CUresult r = rt->cu->cuMemHostAlloc(&n->host, CLCRT__HINT_PAGE, CU_MEMHOSTALLOC_DEVICEMAP);
    CUdeviceptr d = 0;
    if (r == CUDA_SUCCESS && (r = rt->cu->cuMemHostGetDevicePointer(&d, n->host, 0)) != CUDA_SUCCESS)
      rt->cu->cuMemFreeHost(n->host);
    if (r != CUDA_SUCCESS) {
      clcrt__free(n);
      return clcrt__cu_name(rt, r);
    }
    memset(n->host, 0, CLCRT__HINT_PAGE);
    n->dev = d;
    n->next = rt->hint_pages;
    rt->hint_pages = pg = n;
    rt->hint_used = 0;
  }
  *host = (const volatile uint32_t *)((char *)pg->host + rt->hint_used);
  *dev = pg->dev + rt->hint_used;
  rt->hint_used += CLCRT__HINT_STRIDE;
  return NULL;
}

void clcrt__hint_free(clcrt_runtime *rt) {
  for (struct clcrt__hint_page *pg = rt->hint_pages, *next; pg; pg = next) {
    next = pg->next;
    rt->cu->cuMemFreeHost(pg->host);
    clcrt__free(pg);
  }
  rt->hint_pages = NULL;
}
