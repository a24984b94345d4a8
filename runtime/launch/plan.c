/* The plan of a run (plan.h): a pure function, so that every decision clcrt_run makes can be
 * tested as a table without a GPU, and so that the launch itself (launch.c) is only gathering,
 * this, and cuLaunchKernelEx.
 *
 * Variants (CLCRT_USE_* bits: nvrtc_src/clcrt_abi.h, register.c). A STEAL run wants the variant
 * W with the code it may use: trace and statistics (TRACE) when the stream records them,
 * yielding (PREEMPT) on a full grid that something of higher priority can preempt. Variants
 * differ in registers and so in occupancy, which sizes the grid; the grid in turn decides
 * whether the run claims at all (more units than clusters that start with one of their own). So:
 *   - W's grid claims, and the kernel's units measured long: one cluster per unit, the variant
 *     without claim code (SHORT) on a full grid (launch.c: long units);
 *   - W's grid claims under graph capture: W with GRAPH (claims from the graph table);
 *   - W's grid claims nothing: SHORT, if its own grid claims nothing either (it has fewer
 *     registers, so usually more clusters fit), else W claiming nothing.
 * The plan never waits for a variant that is not built: it names it in `missing` (launch.c
 * sees to its build) and plans a fallback that is correct everywhere instead: the
 * observed or the registered kernel on a full grid with claim_base = num_units, every cluster
 * running the one unit of its own (nvrtc_src/clcrt_steal.cuh: claims() is false, own_first()
 * true for every cluster). It claims nothing, so it needs no graph state under capture (nor
 * any claim line: launch.c gives it none) and no yielding code (its clusters leave
 * after their unit, and the GPU's block scheduler starts the clusters of more urgent streams
 * first, as for FIXED). */
#include "plan.h"

#include "env.h"
#include "green.h"

/* A 1-CTA cluster's claims last up to CLCRT__CHUNK_FULL_SM times chunk_cycles, in 32 bits. */
_Static_assert(CLCRT__CHUNK_CYCLES_MAX <= 0xffffffffu / CLCRT__CHUNK_FULL_SM, "chunk_cycles x 8 overflows");

/* The plan runs on every clcrt_run, in tens of nanoseconds: its steps below are inlined into
 * clcrt__plan, where the values they hand each other stay in registers. */
#define PLAN_STEP static inline __attribute__((always_inline))

/* The grid of a STEAL run of a variant with `occ` clusters resident at once. */
typedef struct {
  unsigned clusters, resident, claim_base;
} sizing;

PLAN_STEP sizing size_steal(const clcrt__plan_in *in, clcrt_grid grid, int occ, int one_per_unit, unsigned units) {
  sizing z;
  z.resident = (unsigned)occ < units ? (unsigned)occ : units;
  z.clusters = units;
  const int auto_yield = in->preemptible && in->k->grid == CLCRT_GRID_AUTO;
  if (!one_per_unit) {
    if (grid == CLCRT_GRID_PERSISTENT) z.clusters = z.resident;
    /* AUTO's grid that may yield: the clusters that fit at once and preempt_waves more waves of
     * reserve, not one cluster per unit. A cluster leaves only while a whole wave has not started
     * (nvrtc_src/clcrt_variant.cuh, may_leave), so each of up to that many urgent episodes finds
     * a full wave to take over; after them the run no longer yields. Reserve clusters that start
     * after every unit was claimed leave at once: a few microseconds a wave, where one cluster
     * per unit cost 1-5% of a compute-bound run (docs/results.md, Preemption). */
    if (auto_yield) {
      unsigned long long cap = (unsigned long long)z.resident * (1ull + in->preempt_waves);
      if (cap < z.clusters) z.clusters = (unsigned)cap;
    }
  }
  /* A persistent grid's clusters start with a unit of their own, claimed by no one; an
   * explicitly full grid claims every unit, so that the clusters that have started can take the
   * work of those that have not (and yield it back). AUTO's grid that may yield: the clusters
   * that fit at once start on a unit of their own, as on a persistent grid; only the reserve
   * claims its first. One cluster per unit: each its own. */
  z.claim_base = grid == CLCRT_GRID_PERSISTENT ? z.clusters : 0;
  if (auto_yield) z.claim_base = z.resident < z.clusters ? z.resident : z.clusters;
  if (one_per_unit) z.claim_base = z.clusters;
  return z;
}

PLAN_STEP int has(const clcrt__plan_in *in, unsigned v) { return (in->ready >> v) & 1u; }

/* Clusters of variant v resident at once on the SMs the stream sizes its grids for: the
 * occupancy of the whole device, or the share of a partition (or of opts.grid_sms). */
PLAN_STEP int fit(const clcrt__plan_in *in, unsigned v) {
  if (in->grid_sms >= in->dev_sms) return in->occ[v].clusters;
  return clcrt__partition_clusters(&in->occ[v], in->k->cluster_size, in->dev_sms, in->grid_sms, in->grid_align);
}

/* The run's units: cluster-shaped blocks of tiles, u[0] x u[1] x u[2] of them, n in all. */
typedef struct {
  unsigned u[3], n;
  int fits; /* 0: more units than the device counts (n is then 0) */
} unit_grid;

/* The run's units into p, with the fast divisions by which the device decomposes a unit's
 * index. Units are counted in 31 bits on the device (its fast division and claim counters), and
 * a full grid launches one cluster per unit along x. */
PLAN_STEP unit_grid plan_units(const clcrt_kernel *k, clcrt_dim3 t, clcrt__params *p) {
  unit_grid r = {{t.x, t.y, t.z}, 0, 0}; /* 1-CTA clusters (the usual case) without a division */
  if (k->cluster_size != 1) {
    r.u[0] = (t.x - 1) / k->cluster.x + 1;
    r.u[1] = (t.y - 1) / k->cluster.y + 1;
    r.u[2] = (t.z - 1) / k->cluster.z + 1;
  }
  p->tiles[0] = t.x, p->tiles[1] = t.y, p->tiles[2] = t.z;
  p->units[0] = r.u[0], p->units[1] = r.u[1], p->units[2] = r.u[2];
  unsigned long long units = (unsigned long long)r.u[0] * r.u[1] * r.u[2];
  if (units > 0x7fffffffull || units * k->cluster.x > 0x7fffffffull) return r;
  r.n = (unsigned)units;
  r.fits = 1;
  p->num_units = r.n;
  /* The device's u / units[0]: for a 1-D grid (every u < units[0]) it is 0, which mul 1, shr 31
   * gives with no division here (umulhi(u, 1) = 0). */
  if (r.u[1] == 1 && r.u[2] == 1)
    p->div1_mul = 1, p->div1_shr = 31;
  else
    clcrt__fastdiv(r.u[0], &p->div1_mul, &p->div1_shr);
  clcrt__fastdiv(r.u[1], &p->div2_mul, &p->div2_shr);
  return r;
}

/* Traced or with statistics on: the observed variant, which the enabling call built (and
 * registration builds while a stream of the runtime observes). Should it be missing all the
 * same, the run is not refused: it runs without, and launch.c counts its records as dropped.
 * Returns the observed bit the run keeps (0: none). */
PLAN_STEP unsigned observed_bit(const clcrt__plan_in *in, clcrt__plan_out *out) {
  unsigned obs = in->traced || in->stats ? CLCRT_USE_TRACE : 0;
  if (obs && !has(in, obs)) {
    out->obs_lost = 1;
    out->missing = obs;
    obs = 0;
  }
  return obs;
}

/* The variant a STEAL run launches on a grid of kind `grid`, and whether it runs one cluster per
 * unit (the fallback, or long units). A variant it would rather have launched goes to
 * out->missing; a run that could have gone one cluster per unit is counted (out->count_long). */
PLAN_STEP unsigned steal_variant(const clcrt__plan_in *in, clcrt_grid grid, unsigned obs, unsigned n,
                                 clcrt__plan_out *out, int *one_per_unit) {
  const unsigned want = obs | (in->preemptible && grid == CLCRT_GRID_FULL ? CLCRT_USE_PREEMPT : 0);
  const unsigned one = obs | CLCRT_USE_SHORT;
  unsigned v = obs;
  *one_per_unit = 0;
  if (!has(in, want)) {
    out->missing = want;
    /* A short run needs no yielding anyway: SHORT where its grid claims nothing. */
    if (has(in, one) && size_steal(in, grid, fit(in, one), 0, n).claim_base >= n)
      v = one;
    else
      *one_per_unit = 1;
  } else if (size_steal(in, grid, fit(in, want), 0, n).claim_base < n) {
    v = want;
    /* Long units: counted here, launched one cluster per unit but on every CLCRT__HW_RECHECK-th
     * run (launch.c). Before the graph variant: one cluster per unit needs no graph state. */
    if (in->long_measured && (out->count_long = 1, !in->long_recheck)) {
      *one_per_unit = 1;
      if (has(in, one))
        v = one;
      else
        out->missing = one;
    } else if (in->graph) {
      if (has(in, want | CLCRT_USE_GRAPH))
        v = want | CLCRT_USE_GRAPH;
      else
        out->missing = want | CLCRT_USE_GRAPH, *one_per_unit = 1;
    }
  } else {
    /* Claims nothing: the variant without claim code, if it claims nothing on its own grid
     * (it fits at least as many clusters, usually). */
    v = want;
    if (!has(in, one))
      out->missing = one;
    else if (size_steal(in, grid, fit(in, one), 0, n).claim_base >= n)
      v = one;
  }
  /* The fallback keeps what observes, drops what it would have claimed or yielded with. */
  if (*one_per_unit && !(v & CLCRT_USE_SHORT)) v = obs;
  return v;
}

/* The cycles a claim's units last. A claim takes units lasting about chunk_cycles, but never
 * more than remaining / (2 * clusters running), so that the tail is handed out unit by unit: the
 * guided bound. A 1-CTA cluster claims when its units are done (clcrt_steal.cuh, claim 4): its
 * CTA waits for the leader's round trip and every warp for the response, while the SM's other
 * CTAs keep it busy. With fewer than CLCRT__CHUNK_FULL_SM CTAs resident per SM, fewer cover that
 * wait, so its claims take proportionally longer runs of units. Measured on the H100: tiny
 * uniform tiles behind a prologue at 3 CTAs per SM ran 0.92x STATIC's speed with 8000 cycles and
 * 1.00x with 32000, while at 8 CTAs per SM 32000 lost 5% to the tail. Clusters of several CTAs
 * claim ahead, their round trip hidden behind the current units: longer claims only cost them
 * balance (64 KiB tiles, 4-CTA clusters at 2 CTAs per SM: 0.97x -> 0.93x), so theirs stay as
 * they are (docs/results.md, STEAL round two). */
PLAN_STEP unsigned claim_cycles(const clcrt__plan_in *in, int fit_v, int claims) {
  if (in->k->cluster_size == 1 && claims) {
    /* grid_sms >= 1 (stream.c); chunk_cycles <= CLCRT__CHUNK_CYCLES_MAX, so 8x fits. */
    const unsigned per_sm = (unsigned)fit_v / (unsigned)in->grid_sms;
    if (per_sm < CLCRT__CHUNK_FULL_SM) return in->chunk_cycles * CLCRT__CHUNK_FULL_SM / (per_sm ? per_sm : 1u);
  }
  return in->chunk_cycles;
}

/* What a scheduler's branch of the plan decides for the launch. */
typedef struct {
  unsigned variant;  /* CLCRT_USE_* bits of the kernel to launch */
  unsigned clusters; /* clusters launched */
  unsigned flags;    /* CLCRT__PF_GRAPH so far; the launch grid adds CLCRT__PF_GRID3 */
  int claims;        /* some unit is claimed (a STEAL run beyond claim_base) */
} plan_shape;

/* STEAL: the variant, the grid and the claim parameters (claim base, the cycles a claim's units
 * last, the clusters active at once and their guided bound). */
PLAN_STEP plan_shape plan_steal(const clcrt__plan_in *in, unsigned obs, unsigned n, clcrt__params *p,
                                clcrt__plan_out *out) {
  const clcrt_grid grid = in->k->grid == CLCRT_GRID_AUTO ? (in->preemptible ? CLCRT_GRID_FULL : CLCRT_GRID_PERSISTENT)
                                                         : in->k->grid;
  int one_per_unit; /* the fallback, or long units */
  plan_shape sh;
  sh.variant = steal_variant(in, grid, obs, n, out, &one_per_unit);
  const unsigned v = sh.variant;
  const int fit_v = fit(in, v);
  const sizing z = size_steal(in, grid, fit_v, one_per_unit, n);
  sh.clusters = z.clusters;
  p->claim_base = z.claim_base;
  sh.claims = z.claim_base < n;
  p->chunk_cycles = claim_cycles(in, fit_v, sh.claims);
  p->active = z.resident;
  if ((int)z.resident == in->occ[v].clusters) {
    p->guide_mul = in->occ[v].guide_mul, p->guide_shr = in->occ[v].guide_shr;
  } else {
    clcrt__fastdiv(2 * z.resident, &p->guide_mul, &p->guide_shr);
  }
  /* Every captured run says so, claiming or not (a run that claims nothing reads no claim
   * line and takes no sequence number: launch.c). */
  sh.flags = in->graph ? CLCRT__PF_GRAPH : 0;
  return sh;
}

/* STATIC, FIXED and CLC: the observed variant or the registered kernel, one cluster per unit
 * but on STATIC's persistent grid (at most the clusters resident at once). */
PLAN_STEP plan_shape plan_others(const clcrt__plan_in *in, unsigned obs, unsigned n) {
  plan_shape sh = {obs, n, 0, 0};
  if (in->k->grid == CLCRT_GRID_PERSISTENT) { /* STATIC */
    const unsigned c = (unsigned)fit(in, obs);
    sh.clusters = c < n ? c : n;
  }
  return sh;
}

/* The launch grid in CTAs: clusters along x. FIXED (and STEAL's SHORT variant, which runs as
 * FIXED does, with one cluster per unit) as a 3-D grid of units where y and z fit (65535): the
 * kernel reads its unit's coordinate from %ctaid / %clusterid instead of dividing. Returns
 * CLCRT__PF_GRID3 for that grid, else 0. */
PLAN_STEP unsigned launch_grid(const clcrt_kernel *k, unsigned v, const unsigned u[3], unsigned clusters,
                               unsigned grid[3]) {
  if ((k->sched == CLCRT_SCHED_FIXED || (v & CLCRT_USE_SHORT)) && (unsigned long long)u[1] * k->cluster.y <= 65535u &&
      (unsigned long long)u[2] * k->cluster.z <= 65535u) {
    grid[0] = u[0] * k->cluster.x;
    grid[1] = u[1] * k->cluster.y;
    grid[2] = u[2] * k->cluster.z;
    return CLCRT__PF_GRID3;
  }
  grid[0] = clusters * k->cluster.x;
  grid[1] = k->cluster.y;
  grid[2] = k->cluster.z;
  return 0;
}

clcrt__plan_status clcrt__plan(const clcrt__plan_in *in, clcrt__plan_out *out) {
  const clcrt_kernel *k = in->k;
  /* Copied from a zero constant (vector moves) rather than zeroed in place (rep stos, once the
   * hottest instruction of clcrt_run on the host's profile). */
  static const clcrt__params zero;
  clcrt__params *p = &out->p;
  *p = zero;
  out->missing = 0;
  out->count_long = out->obs_lost = 0;
  /* Computed in registers and stored once: reading fields back from *p right after storing
   * them piecewise stalls on store forwarding (measured: half of this function's time). */
  const unit_grid un = plan_units(k, in->tiles, p);
  if (!un.fits) return CLCRT__PLAN_TOO_MANY_UNITS;
  const unsigned n = un.n;
  const unsigned obs = observed_bit(in, out);
  plan_shape sh;
  if (k->sched == CLCRT_SCHED_STEAL)
    sh = plan_steal(in, obs, n, p, out);
  else
    sh = plan_others(in, obs, n);
  out->variant = sh.variant;
  p->num_clusters = sh.clusters;
  p->flags = sh.flags | launch_grid(k, sh.variant, un.u, sh.clusters, out->grid);
  /* STEAL's and CLC's response ring, after the tile function's shared memory: every CLC run; a
   * STEAL run that claims, or records a trace (nvrtc_src/clcrt_ring.cuh; CLCRT__RING_BYTES). */
  out->smem = k->smem_bytes;
  if (k->ring_bytes &&
      (k->sched == CLCRT_SCHED_CLC || sh.claims || (in->traced && (sh.variant & CLCRT_USE_TRACE))))
    out->smem += k->ring_bytes;
  return CLCRT__PLAN_OK;
}
