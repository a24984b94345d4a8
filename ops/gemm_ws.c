/* The GEMM op's workspaces: stream-K's partials and counters, per stream and per graph, and
 * the word where grouped runs report sizes that did not fit. The invariants are the numbered
 * list of include/clcrt_ops.h; here is why each holds.
 *
 * 1. One workspace per CUstream is enough because runs on one stream are ordered: a run starts
 *    after the previous one on that stream ended, so they never hold the workspace at once.
 *    Counters and partials are separate allocations: a shape whose partials are smaller than an
 *    earlier shape's must not find its counters inside the earlier shape's leftover partials
 *    (the defect this layout replaced: counters placed right after *this* shape's partials in one
 *    buffer). CU_STREAM_PER_THREAD names one stream per thread, so it is keyed by thread too.
 * 2. Counters are zeroed by a memset enqueued on the stream itself, so it is ordered before the
 *    stream's first run that uses them; the kernel's last piece of each shared tile stores 0
 *    back (clcrt_streamk.cuh, sk_arrive_warp), so they are zero again when the run ends. Growth
 *    synchronises the stream before freeing the old buffers, since earlier runs may still use them.
 * 3. A run captured into a graph replays later, in any order with the stream's eager runs (and on
 *    any stream), so it must not share their workspace; and its counters must be zero when the
 *    graph first runs, which a memset in the stream's order (not yet executed at capture time)
 *    cannot promise to eager runs either. So each (capture, stream) gets buffers of its own,
 *    zeroed at once on a private stream, and a CUDA user object retained by the graph owns
 *    them: they live exactly as long as the graph. Launches of one graph exec are ordered
 *    behind each other by CUDA, so its replays share them safely.
 * 4. The kernel clamps group sizes itself (clcrt_tilemap.cuh, grouped_map_build) and writes
 *    what it saw to mapped host memory, which a later call reads without a synchronisation.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_ops.h"

CUresult gemm__relaxed_begin(const clcrt_driver *cu, CUstreamCaptureMode *saved) {
  *saved = CU_STREAM_CAPTURE_MODE_RELAXED;
  return cu->cuThreadExchangeStreamCaptureMode(saved);
}

void gemm__relaxed_end(const clcrt_driver *cu, CUstreamCaptureMode *saved) {
  (void)cu->cuThreadExchangeStreamCaptureMode(saved);
}

static clcrt_status cu_fail(clcrt_ops *ops, CUresult r, const char *call) {
  const char *name = NULL;
  if (ops->cu->cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "an unknown CUDA error";
  return clcrt_errmsg_set(ops->rt, r == CUDA_ERROR_OUT_OF_MEMORY ? CLCRT_E_NOMEM : CLCRT_E_CUDA,
                          "gemm: %s failed: %s", call, name);
}

static unsigned long long thread_key(CUstream cu) {
  return cu == CU_STREAM_PER_THREAD ? (unsigned long long)pthread_self() : 0ull;
}

clcrt_status gemm__ws_stream(clcrt_ops *ops, clcrt_stream *s, gemm_ws **out) {
  CUstream cu = clcrt_stream_cu(s);
  unsigned long long tk = thread_key(cu);
  *out = NULL;
  pthread_mutex_lock(&ops->lock);
  gemm__ws_collect(ops);
  gemm_ws *w = ops->ws;
  while (w && (w->cu != cu || w->thread != tk)) w = w->next;
  if (!w) {
    w = calloc(1, sizeof *w);
    if (!w) {
      pthread_mutex_unlock(&ops->lock);
      return clcrt_errmsg_set(ops->rt, CLCRT_E_NOMEM, "gemm: out of memory for a stream's workspace record");
    }
    w->cu = cu, w->thread = tk;
    pthread_mutex_init(&w->lock, NULL);
    w->next = ops->ws, ops->ws = w;
  }
  pthread_mutex_unlock(&ops->lock);
  /* The record is never freed before clcrt_ops_destroy, so it may be locked outside ops->lock. */
  pthread_mutex_lock(&w->lock);
  *out = w;
  return CLCRT_OK;
}

clcrt_status gemm__ws_capturing(clcrt_ops *ops, gemm_ws *w, const char *who, int *capturing) {
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = ops->cu->cuStreamIsCapturing(w->cu, &cs);
  if (r != CUDA_SUCCESS) return clcrt_errmsg_set(ops->rt, CLCRT_E_CUDA, "%s: cuStreamIsCapturing failed (%d)", who, r);
  *capturing = cs != CU_STREAM_CAPTURE_STATUS_NONE;
  return CLCRT_OK;
}

void gemm__ws_unlock(gemm_ws *w) {
  if (w) pthread_mutex_unlock(&w->lock);
}

/* Grows the stream's own buffers to the sizes asked for (invariants 1 and 2). */
static clcrt_status grow_stream(clcrt_ops *ops, gemm_ws *w, size_t part_bytes, size_t ctr_bytes) {
  const clcrt_driver *cu = ops->cu;
  CUstreamCaptureMode mode;
  CUresult r = gemm__relaxed_begin(cu, &mode);
  if (r != CUDA_SUCCESS) return cu_fail(ops, r, "cuThreadExchangeStreamCaptureMode");
  clcrt_status st = CLCRT_OK;
  const int grow_part = part_bytes > w->part_bytes, grow_ctr = ctr_bytes > w->ctr_bytes;
  /* Earlier runs on the stream may still read the old buffers. */
  if ((grow_part && w->part) || (grow_ctr && w->ctr)) {
    if ((r = cu->cuStreamSynchronize(w->cu)) != CUDA_SUCCESS) {
      st = cu_fail(ops, r, "cuStreamSynchronize (before growing a workspace)");
      goto out;
    }
  }
  if (grow_part) {
    /* Twice what is asked, up to 64 MiB beyond, so that a sequence of growing shapes grows it
     * a few times only. */
    size_t want = part_bytes + (part_bytes < (64u << 20) ? part_bytes : (64u << 20));
    CUdeviceptr p = 0;
    if (w->part) (void)cu->cuMemFree(w->part), w->part = 0, w->part_bytes = 0;
    if ((r = cu->cuMemAlloc(&p, want)) != CUDA_SUCCESS) {
      want = part_bytes; /* the slack is a convenience, not a need */
      if ((r = cu->cuMemAlloc(&p, want)) != CUDA_SUCCESS) {
        st = cu_fail(ops, r, "cuMemAlloc (stream-K partials)");
        goto out;
      }
    }
    w->part = p, w->part_bytes = want;
  }
  if (grow_ctr) {
    size_t want = ctr_bytes < 4096 ? 4096 : 2 * ctr_bytes;
    CUdeviceptr c = 0;
    if (w->ctr) (void)cu->cuMemFree(w->ctr), w->ctr = 0, w->ctr_bytes = 0;
    if ((r = cu->cuMemAlloc(&c, want)) != CUDA_SUCCESS) {
      st = cu_fail(ops, r, "cuMemAlloc (stream-K counters)");
      goto out;
    }
    /* Ordered before every later run on the stream (invariant 2). */
    if ((r = cu->cuMemsetD8Async(c, 0, want, w->cu)) != CUDA_SUCCESS) {
      (void)cu->cuMemFree(c);
      st = cu_fail(ops, r, "cuMemsetD8Async (stream-K counters)");
      goto out;
    }
    w->ctr = c, w->ctr_bytes = want;
  }
out:
  gemm__relaxed_end(cu, &mode);
  return st;
}

static void cap_release(void *p) {
  gemm_cap_ws *c = p;
  atomic_store((_Atomic int *)&c->dead, 1);
  if (atomic_fetch_sub((_Atomic int *)&c->refs, 1) == 1) free(c); /* the ops is gone: its memory stays */
}

/* A graph's buffers for (capture, stream), made and handed to the graph (invariant 3). */
static clcrt_status capture_ws(clcrt_ops *ops, gemm_ws *w, size_t part_bytes, size_t ctr_bytes, CUdeviceptr *part,
                               CUdeviceptr *ctr) {
  const clcrt_driver *cu = ops->cu;
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUgraph graph = NULL;
  CUresult r = cu->cuStreamGetCaptureInfo(w->cu, &cs, &id, &graph, NULL, NULL, NULL);
  if (r != CUDA_SUCCESS) return cu_fail(ops, r, "cuStreamGetCaptureInfo");
  if (cs != CU_STREAM_CAPTURE_STATUS_ACTIVE || !graph)
    return clcrt_errmsg_set(ops->rt, CLCRT_E_INVALID, "gemm: the stream's capture was invalidated before this run");
  pthread_mutex_lock(&ops->lock);
  for (gemm_cap_ws *c = ops->caps; c; c = c->next)
    if (c->capture == id && c->cu == w->cu && c->part_bytes >= part_bytes && c->ctr_bytes >= ctr_bytes) {
      *part = c->part, *ctr = c->ctr;
      pthread_mutex_unlock(&ops->lock);
      return CLCRT_OK;
    }
  pthread_mutex_unlock(&ops->lock);
  gemm_cap_ws *c = calloc(1, sizeof *c);
  if (!c) return clcrt_errmsg_set(ops->rt, CLCRT_E_NOMEM, "gemm: out of memory for a graph's workspace record");
  c->capture = id, c->cu = w->cu, c->part_bytes = part_bytes, c->ctr_bytes = ctr_bytes < 256 ? 256 : ctr_bytes;
  CUstreamCaptureMode mode;
  clcrt_status st = CLCRT_OK;
  CUuserObject obj = NULL;
  if ((r = gemm__relaxed_begin(cu, &mode)) != CUDA_SUCCESS) {
    free(c);
    return cu_fail(ops, r, "cuThreadExchangeStreamCaptureMode");
  }
  if (!ops->zero && (r = cu->cuStreamCreate(&ops->zero, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
    ops->zero = NULL;
    st = cu_fail(ops, r, "cuStreamCreate (the stream that zeroes graph workspaces)");
    goto fail;
  }
  if (c->part_bytes && (r = cu->cuMemAlloc(&c->part, c->part_bytes)) != CUDA_SUCCESS) {
    st = cu_fail(ops, r, "cuMemAlloc (a graph's stream-K partials)");
    goto fail;
  }
  if ((r = cu->cuMemAlloc(&c->ctr, c->ctr_bytes)) != CUDA_SUCCESS ||
      (r = cu->cuMemsetD8Async(c->ctr, 0, c->ctr_bytes, ops->zero)) != CUDA_SUCCESS ||
      (r = cu->cuStreamSynchronize(ops->zero)) != CUDA_SUCCESS) {
    st = cu_fail(ops, r, "cuMemAlloc + cuMemsetD8Async (a graph's stream-K counters)");
    goto fail;
  }
  c->refs = 2;
  if ((r = cu->cuUserObjectCreate(&obj, c, cap_release, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)) != CUDA_SUCCESS) {
    st = cu_fail(ops, r, "cuUserObjectCreate (a graph's workspace)");
    goto fail;
  }
  /* The graph takes the one reference: destroying the graph (and its execs) releases it. */
  if ((r = cu->cuGraphRetainUserObject(graph, obj, 1, CU_GRAPH_USER_OBJECT_MOVE)) != CUDA_SUCCESS) {
    /* The reference is still ours: its release runs cap_release (maybe later, on another
     * thread), which then owns the record alone. */
    st = cu_fail(ops, r, "cuGraphRetainUserObject (a graph's workspace)");
    if (c->part) (void)cu->cuMemFree(c->part);
    (void)cu->cuMemFree(c->ctr);
    c->refs = 1;
    gemm__relaxed_end(cu, &mode);
    (void)cu->cuUserObjectRelease(obj, 1);
    return st;
  }
  gemm__relaxed_end(cu, &mode);
  pthread_mutex_lock(&ops->lock);
  c->next = ops->caps, ops->caps = c;
  pthread_mutex_unlock(&ops->lock);
  *part = c->part, *ctr = c->ctr;
  return CLCRT_OK;
fail:
  if (c->part) (void)cu->cuMemFree(c->part);
  if (c->ctr) (void)cu->cuMemFree(c->ctr);
  gemm__relaxed_end(cu, &mode);
  free(c);
  return st;
}

clcrt_status gemm__ws_reserve(clcrt_ops *ops, gemm_ws *w, int capturing, size_t part_bytes, size_t ctr_bytes,
                              CUdeviceptr *part, CUdeviceptr *ctr) {
  *part = *ctr = 0;
  if (capturing) return capture_ws(ops, w, part_bytes, ctr_bytes, part, ctr);
  if (part_bytes > w->part_bytes || ctr_bytes > w->ctr_bytes) {
    clcrt_status st = grow_stream(ops, w, part_bytes, ctr_bytes);
    if (st != CLCRT_OK) return st;
  }
  *part = w->part, *ctr = w->ctr;
  return CLCRT_OK;
}

clcrt_status gemm__ws_misuse(clcrt_ops *ops, gemm_ws *w, unsigned rows, const char *when) {
  if (!w->misuse) {
    /* Made on the first grouped call of the stream: 2 words of mapped host memory. */
    CUstreamCaptureMode mode;
    void *h = NULL;
    CUresult r = gemm__relaxed_begin(ops->cu, &mode);
    if (r == CUDA_SUCCESS) {
      r = ops->cu->cuMemHostAlloc(&h, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
      if (r == CUDA_SUCCESS && (r = ops->cu->cuMemHostGetDevicePointer(&w->misuse_dev, h, 0)) != CUDA_SUCCESS)
        (void)ops->cu->cuMemFreeHost(h), h = NULL;
      gemm__relaxed_end(ops->cu, &mode);
    }
    if (r != CUDA_SUCCESS) return cu_fail(ops, r, "cuMemHostAlloc (the grouped GEMM's misuse word)");
    memset(h, 0, 64);
    w->misuse = h;
    return CLCRT_OK;
  }
  const unsigned why = w->misuse[0];
  if (!why) return CLCRT_OK;
  const unsigned seen = w->misuse[1];
  w->misuse[0] = 0, w->misuse[1] = 0;
  if (why & GEMM_MISUSE_ROWS)
    return clcrt_errmsg_set(ops->rt, CLCRT_E_INVALID,
                            "grouped gemm: %s on this stream had group sizes adding up to %u%s rows, more than the %u "
                            "rows of a and out: only the rows that fit were computed%s; make the sizes add up to at most "
                            "the rows of a",
                            when, seen, seen == 0xffffffffu ? " or more" : "", rows,
                            why & GEMM_MISUSE_NEGATIVE ? ", and a negative size was taken as 0" : "");
  return clcrt_errmsg_set(ops->rt, CLCRT_E_INVALID,
                          "grouped gemm: %s on this stream had a negative group size, taken as 0; sizes must be >= 0",
                          when);
}

void gemm__ws_collect(clcrt_ops *ops) {
  gemm_cap_ws **pp = &ops->caps;
  while (*pp) {
    gemm_cap_ws *c = *pp;
    if (!atomic_load((_Atomic int *)&c->dead)) {
      pp = &c->next;
      continue;
    }
    *pp = c->next;
    CUstreamCaptureMode mode;
    if (gemm__relaxed_begin(ops->cu, &mode) == CUDA_SUCCESS) {
      if (c->part) (void)ops->cu->cuMemFree(c->part);
      if (c->ctr) (void)ops->cu->cuMemFree(c->ctr);
      gemm__relaxed_end(ops->cu, &mode);
    }
    if (atomic_fetch_sub((_Atomic int *)&c->refs, 1) == 1) free(c);
  }
}

/* Frees what a stream's workspace holds. sync: wait for the stream's runs first (it must be
 * alive); otherwise cuMemFree and cuMemFreeHost, which wait for the device's work before
 * they free, are the wait, so that a stream destroyed before the ops is never touched. */
static void ws_free(clcrt_ops *ops, gemm_ws *w, int sync) {
  if (sync && (w->part || w->ctr || w->misuse)) (void)ops->cu->cuStreamSynchronize(w->cu);
  if (w->part) (void)ops->cu->cuMemFree(w->part);
  if (w->ctr) (void)ops->cu->cuMemFree(w->ctr);
  if (w->misuse) (void)ops->cu->cuMemFreeHost((void *)w->misuse);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

clcrt_status clcrt_ops_stream_release(clcrt_ops *ops, clcrt_stream *s) {
  if (!ops || !s) return clcrt_errmsg_set(ops ? ops->rt : NULL, CLCRT_E_INVALID, "clcrt_ops_stream_release: NULL");
  if (!ops->cu) return CLCRT_OK;
  CUstream cu = clcrt_stream_cu(s);
  const unsigned long long tk = thread_key(cu);
  pthread_mutex_lock(&ops->lock);
  gemm_ws **pp = &ops->ws, *w = NULL;
  while (*pp && ((*pp)->cu != cu || (*pp)->thread != tk)) pp = &(*pp)->next;
  if (*pp) w = *pp, *pp = w->next;
  pthread_mutex_unlock(&ops->lock);
  if (!w) return CLCRT_OK;
  /* A call in flight on the stream holds its lock: wait for it. */
  pthread_mutex_lock(&w->lock);
  pthread_mutex_unlock(&w->lock);
  gemm_ctx cx;
  const int entered = gemm__ctx_enter(ops, &cx) == CLCRT_OK; /* the frees need the buffers' context */
  CUstreamCaptureMode mode;
  int relaxed = gemm__relaxed_begin(ops->cu, &mode) == CUDA_SUCCESS;
  ws_free(ops, w, 1);
  if (relaxed) gemm__relaxed_end(ops->cu, &mode);
  if (entered) gemm__ctx_leave(ops, &cx);
  return CLCRT_OK;
}

void gemm__ws_destroy_all(clcrt_ops *ops) {
  if (!ops->cu) return;
  CUstreamCaptureMode mode;
  int relaxed = gemm__relaxed_begin(ops->cu, &mode) == CUDA_SUCCESS;
  for (gemm_ws *w = ops->ws, *next; w; w = next) {
    next = w->next;
    ws_free(ops, w, 0); /* the streams may be gone: the frees wait for the device */
  }
  ops->ws = NULL;
  gemm__ws_collect(ops);
  /* Graphs still alive keep their buffers (they may replay after this); the records go to
   * cap_release, which frees them when the graph lets go. */
  for (gemm_cap_ws *c = ops->caps, *next; c; c = next) {
    next = c->next;
    if (atomic_fetch_sub((_Atomic int *)&c->refs, 1) == 1) free(c);
  }
  ops->caps = NULL;
  if (ops->zero) (void)ops->cu->cuStreamDestroy(ops->zero), ops->zero = NULL;
  if (relaxed) gemm__relaxed_end(ops->cu, &mode);
}
