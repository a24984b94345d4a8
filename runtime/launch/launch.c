/* clcrt_run: the scheduler parameters of a run and its launch.
 *
 * What a run costs on the host outside graph capture: the argument checks, the current
 * context check, for STEAL one capture query and a per-stream lock around the sequence
 * number and the launch, then cuLaunchKernelEx. No other launch and no memory operation:
 * the run's claim set was zeroed by the stream's previous run (sched_state.h). A run that
 * needs a variant of the kernel (traced or with statistics on, captured into a graph and
 * claiming, preemptible, or short: claiming nothing; register.c, clcrt__kernel_variant)
 * launches it, and the first such run builds it, which can take as long as a registration. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "env.h"
#include "sched_state.h"
#include "stream.h"

/* n / d as umulhi(n, mul) >> shr for every n < 2^31 (Granlund and Montgomery; CUTLASS's
 * FastDivmod): the device decomposes unit indices without a hardware division. */
static void fastdiv(uint32_t d, uint32_t *mul, uint32_t *shr) {
  if (d <= 1) {
    *mul = 0, *shr = 0;
    return;
  }
  uint32_t l = 32u - (uint32_t)__builtin_clz(d - 1); /* ceil(log2 d) */
  *mul = (uint32_t)(((1ull << (31 + l)) + d - 1) / d);
  *shr = l - 1;
}

/* Clusters of this kernel that fit on the device at once, from the real block size and
 * shared memory; computed once per kernel. */
static clcrt_status max_clusters(clcrt_runtime *rt, clcrt_kernel *k, int *out) {
  int n = __atomic_load_n(&k->max_clusters, __ATOMIC_ACQUIRE);
  if (n > 0) {
    *out = n;
    return CLCRT_OK;
  }
  /* Counted with the response ring, which a run that claims needs (a run that does not
   * has no more units than clusters fit at once). */
  size_t smem = k->smem_bytes + k->ring_bytes;
  if (k->cluster_size == 1) {
    /* 1-CTA kernels are launched without a cluster, for which the cluster query says 0. */
    CU_CHECK(rt, cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, k->fn, (int)k->nthreads, smem));
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
    cfg.sharedMemBytes = (unsigned)smem;
    CU_CHECK(rt, cuOccupancyMaxActiveClusters(&n, k->fn, &cfg));
  }
  if (n <= 0)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "kernel %s: no cluster of %u CTAs x %u threads with %u bytes of dynamic shared memory fits on "
                       "this device (registers %d per thread)",
                       k->name, k->cluster_size, k->nthreads, k->smem_bytes, k->kinfo->registers);
  /* A claiming run's guided bound divides by 2 * n (launch below): once per kernel, not per run. */
  uint32_t gm, gs;
  fastdiv(2u * (uint32_t)n, &gm, &gs);
  __atomic_store_n(&k->guide_mul, gm, __ATOMIC_RELAXED);
  __atomic_store_n(&k->guide_shr, gs, __ATOMIC_RELAXED);
  __atomic_store_n(&k->max_clusters, n, __ATOMIC_RELEASE);
  *out = n;
  return CLCRT_OK;
}

/* Long units. One cluster per unit, handed out by the GPU's block scheduler as clusters finish
 * (FIXED's grid, launched as the SHORT variant: no claim code), beats a persistent grid on units
 * that last long enough for a launch to cost little beside them: a persistent cluster pays for
 * its claims in instructions every warp issues per unit (a wait, a read, a release: 2-4% of a
 * 12 us compute tile on the H100) and its CTAs wait for each other, where a cluster that leaves
 * makes room for a fresh one. Short units are the other way round (a launch per unit of 1 us
 * cost the README demo 5%). A run cannot know its units' length before it runs; a claiming
 * run's first clusters leave how many cycles their units took in the kernel's words of mapped
 * host memory (nvrtc_src/clcrt_steal.cuh: finish), and a run whose kernel measured at least
 * long_cycles per CTA of its cluster (cluster launches cost more) launches one cluster per unit. Every
 * CLCRT__HW_RECHECK-th such run goes persistent instead, so that the words stay current when
 * the kernel's units change. Such a run needs no yielding to be preempted either: its clusters
 * leave after every unit, and the block scheduler starts the clusters of more urgent streams
 * first (stream priorities), as it does for FIXED. Only kernels with nothing made per CTA (no
 * prologue, no state): a prologue's cost is paid once per cluster on a persistent grid, once
 * per unit otherwise.
 * Plain loads of a few words the device wrote (possibly still writing): a hint, not a
 * contract, and any value gives a correct run. */
static int long_units(const clcrt_runtime *rt, clcrt_kernel *k0) {
  const volatile uint32_t *w = k0->unit_cycles;
  unsigned long long sum = 0;
  unsigned n = 0;
  for (unsigned i = 0; i < CLCRT__HINT_WORDS; i++) {
    uint32_t c = w[i];
    sum += c;
    n += c != 0;
  }
  if (!n || sum < (unsigned long long)n * rt->long_cycles * k0->cluster_size) return 0;
  unsigned r = __atomic_load_n(&k0->hw_runs, __ATOMIC_RELAXED);
  __atomic_store_n(&k0->hw_runs, r + 1, __ATOMIC_RELAXED); /* racy on purpose: a count, not a lock */
  return (r + 1) % CLCRT__HW_RECHECK != 0;
}

/* Held only around handing out a sequence number and one cuLaunchKernelEx: a spin lock
 * costs a few nanoseconds where a mutex costs tens. */
static void spin_lock(int *l) {
  while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
    while (__atomic_load_n(l, __ATOMIC_RELAXED)) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#else
      sched_yield();
#endif
    }
}
static void spin_unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

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
  /* Copied from a zero constant (vector moves) rather than zeroed in place (rep stos, the
   * hottest instruction of this function on the host's profile). */
  static const clcrt__params zero;
  clcrt__params p = zero;
  p.tiles[0] = tiles.x, p.tiles[1] = tiles.y, p.tiles[2] = tiles.z;
  /* 1-CTA clusters (the usual case) without a division. */
  if (k->cluster_size == 1) {
    p.units[0] = tiles.x, p.units[1] = tiles.y, p.units[2] = tiles.z;
  } else {
    p.units[0] = (tiles.x - 1) / k->cluster.x + 1;
    p.units[1] = (tiles.y - 1) / k->cluster.y + 1;
    p.units[2] = (tiles.z - 1) / k->cluster.z + 1;
  }
  /* Units are counted in 31 bits on the device (its fast division and claim counters), and
   * a full grid launches one cluster per unit along x. */
  unsigned long long units = (unsigned long long)p.units[0] * p.units[1] * p.units[2];
  if (units > 0x7fffffffull || units * k->cluster.x > 0x7fffffffull)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_run(%s): tile grid (%u,%u,%u) makes %llu work units of (%u,%u,%u) tiles: at most %llu "
                       "fit in one run; split the grid over several runs",
                       k->name, tiles.x, tiles.y, tiles.z, units, k->cluster.x, k->cluster.y, k->cluster.z,
                       0x7fffffffull / k->cluster.x);
  p.num_units = (uint32_t)units;
  /* The device's u / units[0]: for a 1-D grid (every u < units[0]) it is 0, which mul 1,
   * shr 31 gives with no division here (umulhi(u, 1) = 0). */
  if (p.units[1] == 1 && p.units[2] == 1)
    p.div1_mul = 1, p.div1_shr = 31;
  else
    fastdiv(p.units[0], &p.div1_mul, &p.div1_shr);
  fastdiv(p.units[1], &p.div2_mul, &p.div2_shr);
  /* Launching the context-independent CUkernel instead (which runs in the stream's context,
   * cuda.h) would spare this query, but measured on the H100 host such launches cost more than
   * the query (bench, overhead section: "bare (CUkernel)"). */
  clcrt_status st = clcrt__ctx_enter(rt);
  if (st != CLCRT_OK) return st;

  int steal = k->sched == CLCRT_SCHED_STEAL;
  /* A STEAL run may yield only if it launches a full grid (the clusters not yet started
   * pick up what the yielding ones leave) and only if something can preempt it. */
  int preemptible = steal && clcrt__devstate_higher(rt->devstate, s->level);
  clcrt_grid grid = k->grid;
  if (grid == CLCRT_GRID_AUTO) grid = preemptible ? CLCRT_GRID_FULL : CLCRT_GRID_PERSISTENT; /* STEAL's AUTO */
  /* Captured into a graph, a STEAL run may be replayed anywhere, any number of times at
   * once: it claims from its own slot of the context's table instead of the stream's sets
   * (sched_state.h). */
  int graph = 0;
  if (steal) {
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    CU_CHECK(rt, cuStreamIsCapturing(s->cu, &cap)); /* a little cheaper than cuStreamGetCaptureInfo */
    if (cap == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
      return clcrt__fail(rt, CLCRT_E_INVALID,
                         "clcrt_run(%s): the stream's graph capture was invalidated by an earlier error; end the "
                         "capture (cuStreamEndCapture) and start again",
                         k->name);
    graph = cap == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  }
  /* The variant the run needs (the registered kernel has none of this code), built by the
   * first run that needs it. Variants differ in registers and so in occupancy: chosen before
   * the grid is sized. Whether a STEAL run claims at all (more units than clusters start
   * with one of their own) is known only once the grid is sized: a run that claims nothing
   * launches the variant with no claim code (CLCRT_USE_SHORT: a short run pays for the code a kernel
   * carries), and a captured run that claims, the graph variant; each switch sizes the grid
   * again (the variant may fit more or fewer clusters), and none is made twice. */
  const unsigned wanted = (s->trace || s->stats ? CLCRT_USE_TRACE : 0) |
                          (preemptible && grid == CLCRT_GRID_FULL ? CLCRT_USE_PREEMPT : 0);
  unsigned variant = wanted;
  int tried_one = 0, hw = 0;
  /* From the registered kernel: variants only add bits, and k may be a variant a caller got
   * from clcrt_kernel_variant (a short one would run only the units of its own). */
  clcrt_kernel *k0 = k->base;
  unsigned clusters, resident;
  int mc = 0; /* the launched kernel's max_clusters (STEAL and persistent grids) */
  for (;;) {
    k = k0;
    if (variant && (st = clcrt__kernel_variant(k0, variant, &k)) != CLCRT_OK) return st;
    clusters = resident = p.num_units;
    if (steal || grid == CLCRT_GRID_PERSISTENT) {
      if ((st = max_clusters(rt, k, &mc)) != CLCRT_OK) return st;
      if ((unsigned)mc < resident) resident = (unsigned)mc;
      if (grid == CLCRT_GRID_PERSISTENT && !hw) clusters = resident;
      /* AUTO's grid that may yield: the clusters that fit at once and CLCRT_PREEMPT_WAVES more
       * waves of reserve, not one cluster per unit. A cluster leaves only while a whole wave
       * has not started (nvrtc_src/clcrt_variant.cuh, may_leave), so each of up to that many urgent episodes
       * finds a full wave to take over; after them the run no longer yields. Reserve clusters
       * that start after every unit was claimed leave at once: a few microseconds a wave,
       * where one cluster per unit cost 1-5% of a compute-bound run (README, Preemption). */
      if (preemptible && k->grid == CLCRT_GRID_AUTO && !hw) {
        unsigned long long cap = (unsigned long long)resident * (1ull + clcrt__env_get()->preempt_waves);
        if (cap < clusters) clusters = (unsigned)cap;
      }
    }
    /* STEAL: a persistent grid's clusters start with a unit of their own, claimed by no one
     * (a run with as many clusters as units claims nothing at all); an explicitly full grid
     * claims every unit, so that the clusters that have started can take the work of those
     * that have not (and yield it back). AUTO's grid that may yield: the clusters that fit at
     * once start on a unit of their own, as on a persistent grid; only the reserve claims its
     * first. */
    if (steal) {
      p.claim_base = grid == CLCRT_GRID_PERSISTENT ? clusters : 0;
      if (preemptible && k->grid == CLCRT_GRID_AUTO) p.claim_base = resident < clusters ? resident : clusters;
      if (hw) p.claim_base = clusters; /* one cluster per unit, each its own */
    }
    int claims = steal && p.claim_base < p.num_units;
    /* Long units: one cluster per unit (the SHORT variant on a full grid; see long_units). */
    if (claims && !tried_one && rt->long_cycles && k0->unit_cycles && long_units(rt, k0)) {
      tried_one = hw = 1;
      variant = (wanted & CLCRT_USE_TRACE) | CLCRT_USE_SHORT;
      continue;
    }
    if (steal && !claims && !tried_one) { /* variant has no SHORT yet: only this sets it */
      tried_one = 1;
      variant = (wanted & CLCRT_USE_TRACE) | CLCRT_USE_SHORT;
      continue;
    }
    if (claims && (variant & CLCRT_USE_SHORT)) { /* it fits fewer clusters than the units */
      variant = wanted;
      continue;
    }
    if (claims && graph && !(variant & CLCRT_USE_GRAPH)) {
      variant |= CLCRT_USE_GRAPH;
      continue;
    }
    break;
  }
  p.num_clusters = clusters;
  p.stats = s->stats;
  p.trace = s->trace;
  p.run = s->trace_runs;
  p.prio = s->level;

  if (steal) {
    /* A claim takes units that last about CLCRT_STEAL_CHUNK_CYCLES (a few microseconds: a claim
     * costs about one, and the single counter serves a claim every few nanoseconds, so
     * even thousands of clusters claiming that often do not queue on it), but never more
     * than remaining / (2 * clusters running), so the tail is handed out unit by unit. */
    p.active = resident;
    p.chunk_cycles = rt->chunk_cycles; /* CLCRT_STEAL_CHUNK_CYCLES, default 8000: ~4 us on an H100 */
    if ((int)resident == mc) { /* a claiming run's (it has more units than fit): memoised with mc */
      p.guide_mul = __atomic_load_n(&k->guide_mul, __ATOMIC_RELAXED);
      p.guide_shr = __atomic_load_n(&k->guide_shr, __ATOMIC_RELAXED);
    } else {
      fastdiv(2 * resident, &p.guide_mul, &p.guide_shr);
    }
    p.unit_cycles = k0->unit_cycles_dev; /* written by claiming runs only */
    if (preemptible && grid == CLCRT_GRID_FULL) {
      p.yield = rt->devstate->yield;
      /* Only the words handed out so far are read (slots are handed out in order). */
      unsigned used = __atomic_load_n(&rt->devstate->next_slot, __ATOMIC_RELAXED);
      if (used > CLCRT__YIELD_SLOTS) used = CLCRT__YIELD_SLOTS;
      p.yield_words = (used + 3u) & ~3u;
    }
    /* A captured run that claims nothing (launched without the graph variant) still tells
     * the kernel it is captured: it must not zero the stream's claim set for the stream's
     * next run, which may be running while the graph replays. */
    if (graph) {
      p.state = rt->devstate->table;
      p.flags |= CLCRT__PF_GRAPH;
    } else {
      p.state = s->state;
    }
  }

  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = clusters * k->cluster.x;
  cfg.gridDimY = k->cluster.y;
  cfg.gridDimZ = k->cluster.z;
  /* FIXED (and STEAL's SHORT variant, which runs as FIXED does, with one cluster per unit) as a
   * 3-D grid of units where y and z fit (65535): the kernel reads its unit's coordinate from
   * %ctaid / %clusterid instead of dividing (CLCRT__PF_GRID3). */
  if ((k->sched == CLCRT_SCHED_FIXED || (k->variant & CLCRT_USE_SHORT)) &&
      (unsigned long long)p.units[1] * k->cluster.y <= 65535u &&
      (unsigned long long)p.units[2] * k->cluster.z <= 65535u) {
    cfg.gridDimX = p.units[0] * k->cluster.x;
    cfg.gridDimY = p.units[1] * k->cluster.y;
    cfg.gridDimZ = p.units[2] * k->cluster.z;
    p.flags |= CLCRT__PF_GRID3;
  }
  cfg.blockDimX = k->block.x;
  cfg.blockDimY = k->block.y;
  cfg.blockDimZ = k->block.z;
  cfg.sharedMemBytes = k->smem_bytes;
  /* STEAL's and CLC's response ring, after the tile function's shared memory: every CLC
   * run; a STEAL run that claims, or records a trace (nvrtc_src/clcrt_ring.cuh). */
  if (k->ring_bytes && (k->sched == CLCRT_SCHED_CLC || p.claim_base < p.num_units || p.trace))
    cfg.sharedMemBytes += k->ring_bytes;
  cfg.hStream = s->cu;
  /* A cluster shape of more than one CTA is compiled into the kernel (__cluster_dims__);
   * 1-CTA kernels are plain grids. Either way no launch attribute is needed. */
  void *kp[2] = {(void *)args, &p};

  /* A run on a stream above the lowest priority preempts lower-priority STEAL runs while
   * it executes (unless the caller already bracketed it with clcrt_preempt_begin/end). */
  int bracket = s->level > 0 && s->preempt_depth == 0;
  if (bracket && (st = clcrt__stream_preempt_write(s, s->level)) != CLCRT_OK) return st;
  CUresult r;
  if (steal && !graph) {
    /* The sequence number picks the claim set, and the run zeroes the other one for the
     * next run: numbers must reach the stream in the order they were handed out. */
    spin_lock(&s->launch_lock);
    p.seq = s->seq;
    r = rt->cu->cuLaunchKernelEx(&cfg, k->fn, kp, NULL);
    if (r == CUDA_SUCCESS) s->seq++;
    spin_unlock(&s->launch_lock);
  } else {
    r = rt->cu->cuLaunchKernelEx(&cfg, k->fn, kp, NULL);
  }
  clcrt_status st_end = bracket ? clcrt__stream_preempt_write(s, 0) : CLCRT_OK;
  if (r != CUDA_SUCCESS)
    return clcrt__fail(rt, CLCRT_E_CUDA,
                       "cuLaunchKernelEx(%s) failed with %s: grid (%u,%u,%u) of clusters (%u,%u,%u), block "
                       "(%u,%u,%u), %u bytes of dynamic shared memory",
                       k->name, clcrt__cu_name(rt, r), cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, k->cluster.x,
                       k->cluster.y, k->cluster.z, k->block.x, k->block.y, k->block.z, k->smem_bytes);
  if (st_end != CLCRT_OK) return st_end;
  s->runs++;
  if (s->trace) s->trace_runs++;
  return CLCRT_OK;
}
