/* The plan of a run: which variant of the kernel clcrt_run launches, on what grid, with what
 * claim parameters, flags and shared memory. A pure function of what clcrt_run gathers (the
 * kernel's facts, the stream's state, the tile grid, the capture status, which variants are
 * built and their occupancy): no driver call, no allocation, no global, no side effect. What
 * a run changes (the kernel's count of runs of long units, a background build of a variant
 * it would rather have launched) the plan only reports; launch.c does it. Tested as a table
 * in tests/test_launch.c. */
#ifndef CLCRT_PLAN_H
#define CLCRT_PLAN_H
#include "internal.h"

/* n / d as umulhi(n, mul) >> shr for every n < 2^31 (Granlund and Montgomery; CUTLASS's
 * FastDivmod): the device decomposes unit indices without a hardware division. */
static inline void clcrt__fastdiv(uint32_t d, uint32_t *mul, uint32_t *shr) {
  if (d <= 1) {
    *mul = 0, *shr = 0;
    return;
  }
  uint32_t l = 32u - (uint32_t)__builtin_clz(d - 1); /* ceil(log2 d) */
  *mul = (uint32_t)(((1ull << (31 + l)) + d - 1) / d);
  *shr = l - 1;
}

/* The CTAs per SM at which a 1-CTA STEAL cluster's claims last chunk_cycles; with fewer CTAs
 * per SM they claim proportionally more (plan.c). */
#define CLCRT__CHUNK_FULL_SM 8u

typedef struct clcrt__plan_in {
  /* The registered kernel: scheduler, grid kind, cluster shape, shared memory (its variants
   * share all of them; they differ in code and occupancy). Read, never written. */
  const clcrt_kernel *k;
  /* Variants: bit v of `ready` is set once variant v (CLCRT_USE_* bits) is built, and then
   * occ[v] holds its occupancy. Bit 0 (the registered kernel) is always set. */
  unsigned ready;
  const clcrt__occ *occ;
  clcrt_dim3 tiles;
  /* The stream and the device. */
  unsigned char traced;         /* the stream records a trace */
  unsigned char stats;          /* the stream keeps statistics */
  unsigned char preemptible;    /* STEAL: a live stream of higher priority exists */
  unsigned char graph;          /* STEAL: the stream is being captured into a graph */
  unsigned char long_measured;  /* STEAL: the kernel's claiming runs measured long units (launch.c) */
  unsigned char long_recheck;   /* ... and this run is the one in CLCRT__HW_RECHECK that measures again */
  unsigned preempt_waves;       /* reserve waves of a grid that may yield */
  unsigned chunk_cycles;        /* STEAL: cycles a claim's units last (1-CTA clusters: at
                                   CLCRT__CHUNK_FULL_SM CTAs per SM or more) */
  /* The SMs the stream's persistent grids are sized for (clcrt_stream_create_ex: an SM budget's
   * green context, or opts.grid_sms): occ[] counts clusters on all dev_sms of the device, and a
   * stream with grid_sms < dev_sms gets its share (green.h: clcrt__partition_clusters), in
   * co-scheduled groups of grid_align SMs where grid_sms is its partition's (0: not grouped). */
  int dev_sms, grid_sms;
  unsigned grid_align;
} clcrt__plan_in;

typedef struct clcrt__plan_out {
  /* The scheduler parameters, less what belongs to the stream (seq, state, stats, trace,
   * yield, run, prio, unit_cycles), which launch.c adds: the tile grid, units, fast
   * divisions, clusters, claim base, active clusters with their guided bound, the cycles a
   * claim's units last, and the flags CLCRT__PF_GRID3 and CLCRT__PF_GRAPH. */
  clcrt__params p;
  unsigned variant;   /* CLCRT_USE_* bits of the kernel to launch: always a built one */
  unsigned grid[3];   /* the launch grid, in CTAs */
  unsigned smem;      /* dynamic shared memory per CTA: the tile function's, and the response ring where used */
  unsigned missing;   /* a variant the run would rather have launched, not built yet (0: none) */
  unsigned char count_long;  /* the run could have gone one cluster per unit: count it (launch.c: hw_runs) */
  unsigned char obs_lost;    /* traced or with statistics on, but no observed variant is built: nothing recorded */
} clcrt__plan_out;

typedef enum {
  CLCRT__PLAN_OK = 0,
  CLCRT__PLAN_TOO_MANY_UNITS /* more than 2^31 - 1 units, or CTAs along x; out->p.units is filled */
} clcrt__plan_status;

clcrt__plan_status clcrt__plan(const clcrt__plan_in *in, clcrt__plan_out *out);
#endif
