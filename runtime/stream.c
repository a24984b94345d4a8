/* Streams and launches. A clcrt_stream owns its scheduler context on the device: the two
 * counter words STEAL claims from (restored by the last cluster of every run, so a run
 * adds no launch of its own and graph replays find it ready) and, optionally, statistics. */
#include <stdio.h>
#include <string.h>

#include "async.h"
#include "checks.h"
#include "internal.h"

#define STATS_SMS 1024 /* %smid is masked into this many slots */
#define STATS_WORDS (4 + STATS_SMS)

struct clcrt_stream {
  clcrt_runtime *rt;
  CUstream cu;
  int owned;
  CUdeviceptr counter; /* 2 x u32: next unit, clusters finished */
  CUdeviceptr stats;   /* STATS_WORDS x u64, 0 when off */
  unsigned long long host_stats[STATS_WORDS];
  unsigned long long runs;
};

clcrt_runtime *clcrt__stream_runtime(const clcrt_stream *s) { return s ? s->rt : NULL; }
CUstream clcrt_stream_cu(const clcrt_stream *s) { return s ? s->cu : NULL; }

static clcrt_status zero_device(clcrt_runtime *rt, CUdeviceptr p, size_t bytes) {
  /* A synchronous copy, not a memset on the legacy stream: a non-blocking stream would
   * not be ordered after that memset. Runs once per stream, never per run. */
  static const unsigned char zeros[4096];
  for (size_t off = 0; off < bytes; off += sizeof zeros) {
    size_t n = bytes - off < sizeof zeros ? bytes - off : sizeof zeros;
    CU_CHECK(rt, cuMemcpyHtoD(p + off, zeros, n));
  }
  return CLCRT_OK;
}

clcrt_status clcrt_stream_create(clcrt_runtime *rt, CUstream cu, clcrt_stream **out) {
  if (!rt) return CLCRT_E_INVALID;
  if (!out) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_stream_create: out is NULL");
  *out = NULL;
  if (rt->compile_only)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "this runtime only compiles (target_arch %s): create one without target_arch to run kernels",
                       rt->arch);
  clcrt_status st = clcrt__ctx_enter(rt);
  if (st != CLCRT_OK) return st;
  clcrt_stream *s = clcrt__calloc(1, sizeof *s);
  if (!s) return clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory allocating a stream");
  s->rt = rt;
  if (cu) {
    s->cu = cu;
  } else {
    CU_CHECK_GOTO(rt, cuStreamCreate(&s->cu, CU_STREAM_NON_BLOCKING), st, fail);
    s->owned = 1;
  }
  CU_CHECK_GOTO(rt, cuMemAlloc(&s->counter, 16), st, fail);
  if ((st = zero_device(rt, s->counter, 16)) != CLCRT_OK) goto fail;
  *out = s;
  return CLCRT_OK;
fail:
  if (s->counter) rt->cu->cuMemFree(s->counter);
  if (s->owned) rt->cu->cuStreamDestroy(s->cu);
  clcrt__free(s);
  return st;
}

void clcrt_stream_destroy(clcrt_stream *s) {
  if (!s) return;
  clcrt_runtime *rt = s->rt;
  if (clcrt__ctx_enter(rt) == CLCRT_OK) {
    /* Wait for the stream's runs: they use the counter we are about to free. A faulted
     * context returns an error at once rather than hanging; nothing more to do then. */
    /* After a fault, notifications still pending will never fire: fail them on their loops. */
    if (rt->cu->cuStreamSynchronize(s->cu) != CUDA_SUCCESS) clcrt__notify_fail(s, CLCRT_E_CUDA);
    if (s->stats) rt->cu->cuMemFree(s->stats);
    rt->cu->cuMemFree(s->counter);
    if (s->owned) rt->cu->cuStreamDestroy(s->cu);
  }
  clcrt__free(s);
}

clcrt_status clcrt_stream_sync(clcrt_stream *s) {
  if (!s) return CLCRT_E_INVALID;
  clcrt_status st = clcrt__ctx_enter(s->rt);
  if (st != CLCRT_OK) return st;
  CUresult r = s->rt->cu->cuStreamSynchronize(s->cu);
  if (r != CUDA_SUCCESS) {
    /* After a fault the driver never runs the host functions behind clcrt_run_notify. */
    clcrt__notify_fail(s, CLCRT_E_CUDA);
    return clcrt__fail(s->rt, CLCRT_E_CUDA,
                       "the stream's work failed with %s: a tile function faulted or the launch was invalid; the "
                       "CUDA context is unusable after a fault (destroy the runtime)",
                       clcrt__cu_name(s->rt, r));
  }
  return CLCRT_OK;
}

/* Clusters of this kernel that fit on the device at once, from the real block size and
 * shared memory; computed once per kernel. */
static clcrt_status max_clusters(clcrt_runtime *rt, clcrt_kernel *k, int *out) {
  int n = __atomic_load_n(&k->max_clusters, __ATOMIC_RELAXED);
  if (n > 0) {
    *out = n;
    return CLCRT_OK;
  }
  if (k->cluster_size == 1) {
    /* 1-CTA kernels are launched without a cluster, for which the cluster query says 0. */
    CU_CHECK(rt, cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, k->fn, (int)k->nthreads, k->smem_bytes));
    n *= rt->num_sms;
  } else {
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = k->cluster.x * (unsigned)rt->num_sms; /* any multiple of the cluster shape */
    cfg.gridDimY = k->cluster.y;
    cfg.gridDimZ = k->cluster.z;
    cfg.blockDimX = k->block.x;
    cfg.blockDimY = k->block.y;
    cfg.blockDimZ = k->block.z;
    cfg.sharedMemBytes = k->smem_bytes;
    CU_CHECK(rt, cuOccupancyMaxActiveClusters(&n, k->fn, &cfg));
  }
  if (n <= 0)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "kernel %s: no cluster of %u CTAs x %u threads with %u bytes of dynamic shared memory fits on "
                       "this device (registers %d per thread)",
                       k->name, k->cluster_size, k->nthreads, k->smem_bytes, k->kinfo->registers);
  __atomic_store_n(&k->max_clusters, n, __ATOMIC_RELAXED);
  *out = n;
  return CLCRT_OK;
}

clcrt_status clcrt_run(clcrt_stream *s, const clcrt_kernel *kc, clcrt_dim3 tiles, const void *args,
                       size_t args_size) {
  if (!s) return CLCRT_E_INVALID;
  clcrt_runtime *rt = s->rt;
  if (!kc) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_run: the kernel is NULL");
  clcrt_kernel *k = (clcrt_kernel *)kc; /* only the occupancy memo is written */
  if (k->rt != rt) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_run: kernel %s belongs to another runtime", k->name);
  if (args_size != k->args_size)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_run(%s): args_size is %zu bytes but the kernel's Args parameter is %zu: pass "
                       "sizeof(your Args mirror) and keep it identical to the device struct",
                       k->name, args_size, k->args_size);
  if (!args) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_run(%s): args is NULL", k->name);
  if (tiles.x == 0 || tiles.y == 0 || tiles.z == 0) return CLCRT_OK; /* an empty tile grid is a no-op */

  clcrt__params p;
  memset(&p, 0, sizeof p);
  p.tiles[0] = tiles.x, p.tiles[1] = tiles.y, p.tiles[2] = tiles.z;
  p.units[0] = (tiles.x - 1) / k->cluster.x + 1;
  p.units[1] = (tiles.y - 1) / k->cluster.y + 1;
  p.units[2] = (tiles.z - 1) / k->cluster.z + 1;
  unsigned long long units = (unsigned long long)p.units[0] * p.units[1] * p.units[2];
  if (units >= 0xffffffffull || units * k->cluster.x > 0x7fffffffull)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_run(%s): tile grid (%u,%u,%u) makes %llu clusters of (%u,%u,%u): at most %llu fit in "
                       "one launch",
                       k->name, tiles.x, tiles.y, tiles.z, units, k->cluster.x, k->cluster.y, k->cluster.z,
                       0x7fffffffull / k->cluster.x);
  p.num_units = (uint32_t)units;
  clcrt_status st = clcrt__ctx_enter(rt);
  if (st != CLCRT_OK) return st;
  unsigned clusters = p.num_units;
  if (k->grid == CLCRT_GRID_PERSISTENT) {
    int mc = 0;
    if ((st = max_clusters(rt, k, &mc)) != CLCRT_OK) return st;
    if ((unsigned)mc < clusters) clusters = (unsigned)mc;
  }
  p.num_clusters = clusters;
  p.state = s->counter;
  p.stats = s->stats;

  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = clusters * k->cluster.x;
  cfg.gridDimY = k->cluster.y;
  cfg.gridDimZ = k->cluster.z;
  cfg.blockDimX = k->block.x;
  cfg.blockDimY = k->block.y;
  cfg.blockDimZ = k->block.z;
  cfg.sharedMemBytes = k->smem_bytes;
  cfg.hStream = s->cu;
  /* A cluster shape of more than one CTA is compiled into the kernel (__cluster_dims__);
   * 1-CTA kernels are plain grids. Either way no launch attribute is needed. */
  void *kp[2] = {(void *)args, &p};
  CUresult r = rt->cu->cuLaunchKernelEx(&cfg, k->fn, kp, NULL);
  if (r != CUDA_SUCCESS)
    return clcrt__fail(rt, CLCRT_E_CUDA,
                       "cuLaunchKernelEx(%s) failed with %s: grid (%u,%u,%u) of clusters (%u,%u,%u), block "
                       "(%u,%u,%u), %u bytes of dynamic shared memory",
                       k->name, clcrt__cu_name(rt, r), cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, k->cluster.x,
                       k->cluster.y, k->cluster.z, k->block.x, k->block.y, k->block.z, k->smem_bytes);
  s->runs++;
  return CLCRT_OK;
}

clcrt_status clcrt_stream_stats_enable(clcrt_stream *s, int on) {
  if (!s) return CLCRT_E_INVALID;
  clcrt_runtime *rt = s->rt;
  clcrt_status st = clcrt__ctx_enter(rt);
  if (st != CLCRT_OK) return st;
  if (on && !s->stats) {
    CU_CHECK(rt, cuStreamSynchronize(s->cu));
    CU_CHECK(rt, cuMemAlloc(&s->stats, STATS_WORDS * 8));
    if ((st = zero_device(rt, s->stats, STATS_WORDS * 8)) != CLCRT_OK) {
      rt->cu->cuMemFree(s->stats);
      s->stats = 0;
      return st;
    }
    s->runs = 0;
  } else if (!on && s->stats) {
    CU_CHECK(rt, cuStreamSynchronize(s->cu));
    rt->cu->cuMemFree(s->stats);
    s->stats = 0;
  }
  return CLCRT_OK;
}

clcrt_status clcrt_stream_stats_read(clcrt_stream *s, clcrt_stream_stats *out) {
  if (!s || !out || out->size < sizeof(size_t) || out->size > sizeof *out) return CLCRT_E_INVALID;
  clcrt_runtime *rt = s->rt;
  if (!s->stats)
    return clcrt__fail(rt, CLCRT_E_INVALID, "statistics are off on this stream: call clcrt_stream_stats_enable first");
  clcrt_status st = clcrt__ctx_enter(rt);
  if (st != CLCRT_OK) return st;
  if ((st = clcrt_stream_sync(s)) != CLCRT_OK) return st;
  CU_CHECK(rt, cuMemcpyDtoH(s->host_stats, s->stats, sizeof s->host_stats));
  if ((st = zero_device(rt, s->stats, STATS_WORDS * 8)) != CLCRT_OK) return st;
  unsigned nsm = (unsigned)rt->num_sms;
  for (unsigned i = 0; i < STATS_SMS; i++)
    if (s->host_stats[4 + i] && i + 1 > nsm) nsm = i + 1;
  clcrt_stream_stats v;
  memset(&v, 0, sizeof v);
  v.size = out->size;
  v.runs = s->runs;
  v.tiles = s->host_stats[0];
  v.steals = s->host_stats[1];
  v.clusters = s->host_stats[2];
  v.max_units_per_cluster = s->host_stats[3];
  v.num_sms = nsm;
  v.tiles_per_sm = &s->host_stats[4];
  memcpy(out, &v, out->size);
  s->runs = 0;
  return CLCRT_OK;
}
