/* clcrt_run: gather what the run depends on, plan it (plan.c, a pure function), launch.
 *
 * What a run costs on the host outside graph capture: the argument checks, the current
 * context check, for STEAL one capture query and a per-stream lock around the sequence
 * number and the launch, then cuLaunchKernelEx. No other launch and no memory operation:
 * the run's claim set was zeroed by the stream's previous run (sched_state.h). A run that
 * needs a variant of the kernel (traced or with statistics on, captured into a graph and
 * claiming, preemptible, or short: claiming nothing; register.c, clcrt__kernel_variant)
 * launches it once it is built. No run builds one: the variants are built before runs need
 * them (the observed ones when a stream starts to trace or keep statistics, the yielding ones
 * once streams of two priorities live), or in the background (builder.c) after the first run
 * that wanted one, which launches the plan's fallback (plan.c) meanwhile. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "builder.h"
#include "checks.h"
#include "plan.h"
#include "sched_state.h"
#include "stream.h"
#include "variants.h"

/* Long units. One cluster per unit, handed out by the GPU's block scheduler as clusters finish
 * (FIXED's grid, launched as the SHORT variant: no claim code), beats a persistent grid on units
 * that last long enough for a launch to cost little beside them: a persistent cluster pays for
 * its claims in instructions every warp issues per unit (a wait, a read, a release: 2-4% of a
 * 12 us compute tile on the H100) and its CTAs wait for each other, where a cluster that leaves
 * makes room for a fresh one. Short units are the other way round (a launch per unit of 1 us
 * cost the README demo 5%). A run cannot know its units' length before it runs; a claiming
 * run's first clusters leave how many cycles their units took in the kernel's words of mapped
 * host memory (nvrtc_src/clcrt_steal.cuh: finish), and a run whose kernel measured at least
 * long_cycles per CTA of its cluster (cluster launches cost more) launches one cluster per
 * unit. Every CLCRT__HW_RECHECK-th such run goes persistent instead, so that the words stay
 * current when the kernel's units change. Such a run needs no yielding to be preempted
 * either: its clusters leave after every unit, and the block scheduler starts the clusters of
 * more urgent streams first (stream priorities), as it does for FIXED. Only kernels with
 * nothing made per CTA (no prologue, no state): a prologue's cost is paid once per cluster on a
 * persistent grid, once per unit otherwise.
 * Plain loads of a few words the device wrote (possibly still writing): a hint, not a
 * contract, and any value gives a correct run. Whether the run then counts (and so whether it
 * is the one in CLCRT__HW_RECHECK that goes persistent) the plan decides; clcrt_run counts. */
static int long_measured(const clcrt_runtime *rt, const clcrt_kernel *k0) {
  const volatile uint32_t *w = k0->unit_cycles;
  unsigned long long sum = 0;
  unsigned n = 0;
  for (unsigned i = 0; i < CLCRT__HINT_WORDS; i++) {
    uint32_t c = w[i];
    sum += c;
    n += c != 0;
  }
  return n && sum >= (unsigned long long)n * rt->long_cycles * k0->cluster_size;
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


/* A traced run launched without the observed variant (plan.c: obs_lost; its build failed
 * when tracing was enabled or the kernel registered, which reported it): its tiles are counted
 * as dropped records, so that the trace says what it lacks. */
static void obs_lost(clcrt_stream *s, const clcrt_kernel *k0, clcrt_dim3 tiles) {
  /* Atomic: several threads may run on one stream. */
  if (s->trace) __atomic_add_fetch(&s->trace_lost, (unsigned long long)tiles.x * tiles.y * tiles.z, __ATOMIC_RELAXED);
  if (!__atomic_exchange_n(&s->obs_lost_logged, 1, __ATOMIC_RELAXED)) {
    clcrt__log(s->rt, CLCRT_LOG_WARN,
               "kernel %s has no observed variant: its runs on a traced stream (or one with statistics on) record "
               "nothing, and their tiles count as dropped records; clcrt_kernel_prepare(k, CLCRT_USE_TRACE) says why",
               k0->name);
  }
}

/* The caller's arguments, checked before anything else is read. */
static clcrt_status check_args(const clcrt_stream *s, const clcrt_kernel *k, const void *args, size_t args_size) {
  if (!s) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_run: the stream is NULL");
  clcrt_runtime *rt = s->rt;
  if (!k) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_run: the kernel is NULL");
  if (k->rt != rt) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_run: kernel %s belongs to another runtime", k->name);
  if (args_size != k->args_size)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_run(%s): args_size is %zu bytes but the kernel's Args parameter is %zu: pass "
                       "sizeof(your Args mirror) and keep it identical to the device struct",
                       k->name, args_size, k->args_size);
  if (!args) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_run(%s): args is NULL", k->name);
  return CLCRT_OK;
}

/* Gathers what the plan depends on (plan.h) from the runtime, the stream and the registered
 * kernel k0. For STEAL this asks the driver whether the stream is being captured, the one
 * driver call of a run besides its launch. */
static clcrt_status gather_plan_in(const clcrt_stream *s, const clcrt_kernel *k0, clcrt_dim3 tiles,
                                   clcrt__plan_in *in) {
  clcrt_runtime *rt = s->rt;
  clcrt__variants *vs = k0->vars;
  in->k = k0;
  in->occ = vs->occ;
  in->tiles = tiles;
  in->traced = s->trace != 0;
  in->stats = s->stats != 0;
  in->preemptible = in->graph = in->long_measured = in->long_recheck = 0;
  in->preempt_waves = rt->preempt_waves;
  in->chunk_cycles = rt->chunk_cycles; /* CLCRT_STEAL_CHUNK_CYCLES, default 8000: ~4 us on an H100 */
  /* The stream's SMs (an SM budget's partition, or opts.grid_sms): persistent grids are sized
   * for them, each variant's device-wide occupancy scaled to them in the plan. */
  in->dev_sms = rt->num_sms;
  in->grid_sms = s->grid_sms;
  in->grid_align = s->grid_align;
  if (k0->sched == CLCRT_SCHED_STEAL) {
    /* A STEAL run may yield only if something can preempt it. */
    in->preemptible = (unsigned char)clcrt__devstate_higher(rt->devstate, s->level);
    /* Captured into a graph, a STEAL run may be replayed anywhere, any number of times at
     * once: it claims from its own slot of the context's table instead of the stream's sets
     * (sched_state.h). */
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    CU_CHECK(rt, cuStreamIsCapturing(s->cu, &cap)); /* a little cheaper than cuStreamGetCaptureInfo */
    if (cap == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
      return clcrt__fail(rt, CLCRT_E_INVALID,
                         "clcrt_run(%s): the stream's graph capture was invalidated by an earlier error; end the "
                         "capture (cuStreamEndCapture) and start again",
                         k0->name);
    in->graph = cap == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (rt->long_cycles && k0->unit_cycles && long_measured(rt, k0)) {
      in->long_measured = 1;
      in->long_recheck = (__atomic_load_n(&vs->hw_runs, __ATOMIC_RELAXED) + 1) % CLCRT__HW_RECHECK == 0;
    }
  }
  in->ready = __atomic_load_n(&vs->ready, __ATOMIC_ACQUIRE);
  return CLCRT_OK;
}

static clcrt_status fail_too_many_units(clcrt_runtime *rt, const clcrt_kernel *k0, clcrt_dim3 tiles,
                                        const clcrt__plan_out *pl) {
  unsigned long long units = (unsigned long long)pl->p.units[0] * pl->p.units[1] * pl->p.units[2];
  return clcrt__fail(rt, CLCRT_E_INVALID,
                     "clcrt_run(%s): tile grid (%u,%u,%u) makes %llu work units of (%u,%u,%u) tiles: at most "
                     "%llu fit in one run; split the grid over several runs",
                     k0->name, tiles.x, tiles.y, tiles.z, units, k0->cluster.x, k0->cluster.y, k0->cluster.z,
                     0x7fffffffull / k0->cluster.x);
}

/* What the plan reports and leaves to the run (plan.h): a background build of the variant it
 * would rather have launched, the records a traced run without its observed variant drops, and
 * the count of runs of long units. No run compiles, nor waits for a compile: once asked for, a
 * build is one load here, and the plan's fallback runs now. */
static void apply_plan_reports(clcrt_stream *s, const clcrt_kernel *k0, clcrt_dim3 tiles,
                               const clcrt__plan_out *pl) {
  if (pl->missing) {
    clcrt__builder_request(k0, pl->missing, 0);
    if (pl->obs_lost) obs_lost(s, k0, tiles);
  }
  clcrt__variants *vs = k0->vars;
  if (pl->count_long) /* racy on purpose: a count, not a lock */
    __atomic_store_n(&vs->hw_runs, __atomic_load_n(&vs->hw_runs, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* The scheduler parameters that belong to the stream, not the plan: its priority, its trace
 * and statistics for an observed variant, and for STEAL the unit times, the yield words for a
 * yielding variant and the claim line of a run that claims. The sequence number comes with the
 * launch (launch_run). */
static void add_stream_params(const clcrt_stream *s, const clcrt_kernel *k0, const clcrt_kernel *kl, int claims,
                              int graph, clcrt__params *p) {
  clcrt_runtime *rt = s->rt;
  p->prio = s->level;
  if (kl->variant & CLCRT_USE_TRACE) {
    p->stats = s->stats;
    p->trace = s->trace;
    p->run = s->trace_runs;
  }
  if (k0->sched == CLCRT_SCHED_STEAL) {
    p->unit_cycles = k0->unit_cycles_dev; /* written by claiming runs only */
    if (kl->variant & CLCRT_USE_PREEMPT) {
      p->yield = rt->devstate->yield;
      /* Only the words handed out so far are read (slots are handed out in order). */
      unsigned used = __atomic_load_n(&rt->devstate->next_slot, __ATOMIC_RELAXED);
      if (used > CLCRT__YIELD_SLOTS) used = CLCRT__YIELD_SLOTS;
      p->yield_words = (used + 3u) & ~3u;
    }
    /* Only a run that claims has a claim line (nvrtc_src/clcrt_steal.cuh, claim 2). */
    if (claims) p->state = graph ? rt->devstate->table : s->state;
  }
}

/* Launches kl as planned: one cuLaunchKernelEx, bracketed by the stream's preemption word
 * where the stream is above the lowest priority, and under the stream's launch lock where the
 * run claims outside a graph (it takes a sequence number). */
static clcrt_status launch_run(clcrt_stream *s, const clcrt_kernel *k0, const clcrt_kernel *kl,
                               clcrt__plan_out *pl, const void *args, int claims, int graph, unsigned flags) {
  clcrt_runtime *rt = s->rt;
  clcrt__params *p = &pl->p;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = pl->grid[0];
  cfg.gridDimY = pl->grid[1];
  cfg.gridDimZ = pl->grid[2];
  cfg.blockDimX = k0->block.x;
  cfg.blockDimY = k0->block.y;
  cfg.blockDimZ = k0->block.z;
  cfg.sharedMemBytes = pl->smem;
  cfg.hStream = s->cu;
  /* A cluster shape of more than one CTA is compiled into the kernel (__cluster_dims__);
   * 1-CTA kernels are plain grids. Either way no launch attribute is needed for it.
   * Programmatic dependent launch (sm_90+): the run's grid may start launching while the grid
   * before it on the stream finishes; every clcrt kernel's first statement waits for that grid
   * to complete (griddepcontrol.wait, runtime/compile/compile.c), and each CTA lets the next
   * grid launch once its units are done (nvrtc_src/clcrt_loop.cuh). Only the launch latency
   * overlaps, never a memory access. In a captured graph the edge becomes a programmatic one.
   * Asked for per run (CLCRT_RUN_PDL: it pays on short runs only, include/clcrt.h); CLCRT_PDL=0
   * turns it off. */
  CUlaunchAttribute attr[1];
  if ((flags & CLCRT_RUN_PDL) && rt->pdl && rt->sm >= 90) {
    memset(attr, 0, sizeof attr);
    attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr[0].value.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  void *kp[2] = {(void *)args, p};

  /* A run on a stream above the lowest priority preempts lower-priority STEAL runs while
   * it executes (unless the caller already bracketed it with clcrt_preempt_begin/end). */
  clcrt_status st;
  int bracket = s->level > 0 && s->preempt_depth == 0;
  if (bracket && (st = clcrt__stream_preempt_write(s, s->level)) != CLCRT_OK) return st;
  CUresult r;
  if (claims && !graph) {
    /* The sequence number picks the claim line, and the run zeroes the other one for the
     * next run that claims: numbers must reach the stream in the order they were handed out.
     * A run that claims nothing takes none and touches neither line, so its kernel needs no
     * parameter of the stream's (measured on the H100: zeroing the next line from such runs
     * cost 0.07 us per short run, the store's address holding up every thread's first load). */
    spin_lock(&s->launch_lock);
    p->seq = s->seq;
    r = rt->cu->cuLaunchKernelEx(&cfg, kl->fn, kp, NULL);
    if (r == CUDA_SUCCESS) s->seq++;
    spin_unlock(&s->launch_lock);
  } else {
    r = rt->cu->cuLaunchKernelEx(&cfg, kl->fn, kp, NULL);
  }
  clcrt_status st_end = bracket ? clcrt__stream_preempt_write(s, 0) : CLCRT_OK;
  if (r != CUDA_SUCCESS)
    return clcrt__fail(rt, CLCRT_E_CUDA,
                       "cuLaunchKernelEx(%s) failed with %s: grid (%u,%u,%u) of clusters (%u,%u,%u), block "
                       "(%u,%u,%u), %u bytes of dynamic shared memory",
                       k0->name, clcrt__cu_name(rt, r), cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, k0->cluster.x,
                       k0->cluster.y, k0->cluster.z, k0->block.x, k0->block.y, k0->block.z, cfg.sharedMemBytes);
  return st_end;
}

static clcrt_status run_entered(clcrt_stream *s, const clcrt_kernel *k, clcrt_dim3 tiles, const void *args,
                                unsigned flags);

clcrt_status clcrt_run(clcrt_stream *s, const clcrt_kernel *k, clcrt_dim3 tiles, const void *args,
                       size_t args_size) {
  return clcrt_run_ex(s, k, tiles, args, args_size, 0);
}

clcrt_status clcrt_run_ex(clcrt_stream *s, const clcrt_kernel *k, clcrt_dim3 tiles, const void *args,
                          size_t args_size, unsigned flags) {
  clcrt_status st = check_args(s, k, args, args_size);
  if (st != CLCRT_OK) return st;
  if (flags & ~CLCRT_RUN_PDL)
    return clcrt__fail(s->rt, CLCRT_E_INVALID, "clcrt_run_ex: flags 0x%x: only CLCRT_RUN_PDL (0x%x) exists", flags,
                       CLCRT_RUN_PDL);
  if (tiles.x == 0 || tiles.y == 0 || tiles.z == 0) return CLCRT_OK; /* an empty tile grid is a no-op */
  /* Launching the context-independent CUkernel instead (which runs in the stream's context,
   * cuda.h) would spare this query, but measured on the H100 host such launches cost more than
   * the query (bench, overhead section: "bare (CUkernel)"). A caller whose thread has another
   * device's context current gets it back (clcrt__ctx_push). */
  clcrt__ctx_saved sv;
  if ((st = clcrt__ctx_push(s->rt, &sv)) != CLCRT_OK) return st;
  st = run_entered(s, k, tiles, args, flags);
  clcrt__ctx_leave(s->rt, &sv);
  return st;
}

/* clcrt_run_ex's launch, checked, in the runtime's context. */
static clcrt_status run_entered(clcrt_stream *s, const clcrt_kernel *k, clcrt_dim3 tiles, const void *args,
                                unsigned flags) {
  clcrt_runtime *rt = s->rt;
  clcrt_status st;
  /* From the registered kernel: variants only add bits, and k may be a variant a caller got
   * from clcrt_kernel_variant (a short one would run only the units of its own). */
  const clcrt_kernel *k0 = k->base;
  clcrt__plan_in in;
  if ((st = gather_plan_in(s, k0, tiles, &in)) != CLCRT_OK) return st;
  clcrt__plan_out pl;
  if (clcrt__plan(&in, &pl) != CLCRT__PLAN_OK) return fail_too_many_units(rt, k0, tiles, &pl);
  apply_plan_reports(s, k0, tiles, &pl);

  const clcrt_kernel *kl = pl.variant ? __atomic_load_n(&k0->vars->var[pl.variant], __ATOMIC_ACQUIRE) : k0;
  const int claims = k0->sched == CLCRT_SCHED_STEAL && pl.p.claim_base < pl.p.num_units;
  add_stream_params(s, k0, kl, claims, in.graph, &pl.p);
  if ((st = launch_run(s, k0, kl, &pl, args, claims, in.graph, flags)) != CLCRT_OK) return st;
  s->runs++;
  if (s->trace) s->trace_runs++;
  return CLCRT_OK;
}
