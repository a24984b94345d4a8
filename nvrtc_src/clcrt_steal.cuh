// clcrt device template: STEAL, the software scheduler (sm_90+). The cluster's leader claims
// runs of units from the run's claim line with an atomic and publishes them to its cluster
// through the response ring (clcrt_ring.cuh), so STEAL and CLC share one protocol.
//
// Claims, and the test that checks each:
//   1. One counter per run (CLCRT__LINE_CTR of the run's claim line), advanced only by
//      atomics, so no unit is claimed twice and every unit below num_units is claimed once.
//      gpu_sched.c test_matrix, test_stress, test_sizes (exactly once).
//   2. A run's claim line needs no reset launch: a run on a stream claims from line seq % 2
//      and zeroes line (seq + 1) % 2, which the run before it used and the run after it will
//      use (runs on one stream execute one after another). Only runs that claim take a
//      sequence number (runtime/launch/launch.c); a run that claims nothing touches neither
//      line (no parameter of its own, no store: its kernel is FIXED's). A run captured into a
//      graph claims from its own slot of the graph table (clcrt_variant.cuh). gpu_sched.c
//      test_sizes and test_matrix (runs back to back, claiming or not), test_graph_replay;
//      gpu_graph.c test_variant_builds (a captured run that claims nothing leaves the
//      stream's lines alone).
//   3. A claim takes a chunk of units sized by time: the leader measures how long its units
//      take (clock64) and takes enough of them to last about chunk_cycles, at least 1 and at
//      most remaining / (2 * clusters running at once) (guided, so the tail is still handed
//      out unit by unit). Units of microseconds are claimed one at a time and balance like
//      one block per tile; tiny units are claimed by the dozen, so the atomic stays cheap.
//      Performance only: `make bench`.
//   4. A cluster of several CTAs issues its next claim before its current units run and
//      publishes it after the leader's part of them (its latency hides behind them); 1-CTA
//      clusters, and every cluster at the tail, claim when the current units are done, so
//      nothing is held back from other clusters (the CTA's other warps and the SM's other
//      CTAs cover the round trip; short units amortise it over a chunk). gpu_sched.c
//      test_cluster_order (unequal units: exactly once, same order in every CTA).
//   5. Per response the warps other than the leader's run only the wait, the read, the
//      release and their units. Performance only: `make bench`.
#pragma once

// -DCLCRT_STEAL_EARLY=1: 1-CTA clusters claim ahead too (for the benchmark's comparison).
#ifndef CLCRT_STEAL_EARLY
#define CLCRT_STEAL_EARLY 0
#endif

namespace clcrt {

template <unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V>
struct Steal : ResponseRing<CX, CY, CZ, NTHREADS, V, (CX * CY * CZ > 1)> {
  // A 1-CTA STEAL kernel is launched without a cluster, where st.async is not allowed: its
  // leader writes the slot with an ordinary store and a release-arrive (TX false).
  using Base = ResponseRing<CX, CY, CZ, NTHREADS, V, (CX * CY * CZ > 1)>;
  using Base::CS;
  using Base::cluster_id;
  using Base::consume;
  using Base::k;
  using Base::leader;
  using Base::leader_warp;
  using Base::p;
  using Base::publish;
  using Base::ring;
  enum : bool {
    USE_GRAPH = (V & CLCRT_USE_GRAPH) != 0,
    USE_PREEMPT = (V & CLCRT_USE_PREEMPT) != 0,
    // Without claims: every cluster runs the unit of its own and leaves, as under FIXED (runs
    // launched with one cluster per unit: runtime/launch/launch.c); none of the claim code is
    // compiled.
    USE_SHORT = (V & CLCRT_USE_SHORT) != 0
  };
  enum : bool { ONE_UNIT = USE_SHORT };  // the SHORT variant takes the loop's one-unit path, as FIXED
  // Whether the leader ever claims ahead (claim 4): clusters of several CTAs do (a claim made
  // when needed would keep every CTA of the cluster waiting for it); a 1-CTA cluster does not
  // (unless compiled with -DCLCRT_STEAL_EARLY=1): its claim's latency is then the leader
  // warp's alone, and the CTA's other warps and the SM's other CTAs cover it.
  enum : bool { AHEAD = CS > 1 || CLCRT_STEAL_EARLY };

  __device__ __forceinline__ Steal(const Params &params, Ring *r) : Base(params, r) {}

  // Cluster c < claim_base starts with unit c (no claim, as FIXED and CLC do), and claims
  // hand out the units from claim_base on. A persistent grid's clusters all have a unit of
  // their own (claim_base = clusters); a grid that may yield gives one to the clusters that
  // fit at once, and its reserve clusters claim every unit they run, so the clusters not yet
  // started can be stolen from. An explicitly full grid claims every unit. USE_SHORT:
  // launched only for runs that claim nothing (claim_base = num_units).
  __device__ __forceinline__ bool own_first() const { return USE_SHORT || cluster_id() < p.claim_base; }
  __device__ __forceinline__ bool claims() const { return !USE_SHORT && p.claim_base < p.num_units; }
  // A run captured into a graph that claims (only a GRAPH variant is launched so; see init for
  // one that does not), and one that may yield (only a PREEMPT variant is launched with
  // preemption words).
  __device__ __forceinline__ bool graph_run() const { return USE_GRAPH && (p.flags & CLCRT__PF_GRAPH); }
  __device__ __forceinline__ bool yields() const { return USE_PREEMPT && p.yield != nullptr; }

  // The leader finds the run's claim line first and tells its cluster whether anything is
  // left: a cluster that starts after every unit was claimed (most of a full grid's) leaves
  // after one load and the ring's barrier. Returns whether the cluster has work to look for.
  __device__ __forceinline__ bool init() {
    // Every unit is some cluster's own: nothing to claim, no ring (none was launched unless
    // the run is traced), no claim line (claim 2).
    if (!claims()) return true;
    if (leader) {
      if (USE_GRAPH) ring->slot_state = nullptr;
      ring->pub = ring->remaining = ring->t_unit = ring->exhausted = 0;
      ring->t0 = clock64();
      locate_state();
      // A cluster of several CTAs learns it the ordinary way (a failed first claim): its
      // other CTAs' shared memory may not be written before the cluster barrier. A cluster
      // with a unit of its own is never late.
      if (CS == 1)
        ring->late = ring->exhausted =
            !own_first() && ptx::ld_relaxed_gpu(ring->ctr) >= p.num_units - p.claim_base ? 1u : 0u;
      // A run that may yield counts the clusters that started with work left (no result
      // needed): see may_leave.
      if (yields() && !(CS == 1 && ring->late)) ptx::red_add_relaxed_gpu(ring->ctr + CLCRT__LINE_STARTED, 1u);
    }
    this->init_ring();
    return !(CS == 1 && ring->late);
  }

  __device__ __forceinline__ void locate_state() {
    if (graph_run()) {
      unsigned *s = graph_slot((unsigned *)p.state, p.num_clusters);
      ring->slot_state = (unsigned long long *)(s + CLCRT__SLOT_COUNT);
      ring->ctr = s + CLCRT__SLOT_CLAIMS;
    } else {
      unsigned *lines = (unsigned *)p.state;
      ring->ctr = lines + (p.seq & 1u) * CLCRT__LINE_WORDS;
      zero_next_claims();
    }
  }
  // The stream's claim line of its next claiming run (they alternate between two). The
  // previous claiming run on this stream, which used it, has finished; the next one will use
  // it. Any cluster may reset it at any time during this run: cluster 0 does.
  __device__ __forceinline__ unsigned *next_claims() const {
    return (unsigned *)p.state + ((p.seq + 1u) & 1u) * CLCRT__LINE_WORDS;
  }
  __device__ __forceinline__ void zero_next_claims() const {
    if (cluster_id() == 0) ptx::zero_claims(next_claims());
  }

  // Claims the next run of units for the cluster. A cluster's first unit is run even while
  // the run is told to yield (a unit of its own, or its first claim, pub == 0), so every
  // cluster that starts does at least one unit.
  // In two halves so that a claim made ahead can be in flight while the leader runs its
  // units: issue() returns {counter value, units asked for} ({NONE, 0}: no claim), and
  // result() turns that into the response.
  __device__ __forceinline__ uint2 issue() {
    if (yields() && (ring->pub != 0 || own_first()) && must_yield(p) && may_leave(p, ring->ctr))
      return make_uint2(NONE, 0);
    // Units that last chunk_cycles or more are claimed one at a time: no division for them.
    unsigned want = 1, t_unit = ring->t_unit;
    if (t_unit && t_unit < p.chunk_cycles) {
      want = min(p.chunk_cycles / t_unit, fastdiv(ring->remaining, p.guide_mul, p.guide_shr));
      if (want == 0) want = 1;
    }
    return make_uint2(ptx::atom_add_relaxed_gpu(ring->ctr, want), want);
  }
  __device__ __forceinline__ bool ahead_pending(uint2 a) const { return a.x != NONE || a.y != 0; }
  // Whether the leader must claim for the next response (nothing published ahead, nothing
  // exhausted). Volatile loads: the compiler would otherwise hoist them out of the leader's
  // branch into every warp's path, for every unit.
  __device__ __forceinline__ bool lead_ready() const {
    return *(volatile unsigned *)&ring->exhausted == 0 && *(volatile unsigned *)&ring->pub == k;
  }
  __device__ __forceinline__ uint2 result(uint2 c) {
    if (c.x == NONE || c.x >= p.num_units - p.claim_base) return make_uint2(0, 0);
    unsigned u = c.x + p.claim_base, got = min(c.y, p.num_units - u);
    ring->remaining = p.num_units - u - got;
    return make_uint2(u, got);
  }

  // The leader publishes a claim after running `units` units (0: none yet): the one made ahead
  // (*ahead), or one it makes now (null), after the timing so that it is sized by it. First its own
  // view of how long a unit takes, for the size of its next claims: the cycles since its mark
  // (ring->t0, set when its units began: after the publish that handed them out, or when a
  // claim ahead was issued before them) over those units. Then the mark for the next units,
  // so the claim's round trip is never timed in (timed in, it shrank the claims of tiny units:
  // 4 KiB tiles 0.993 -> 0.958x). Only the leader's own branches run this: no other warp
  // executes any of it.
  __device__ __forceinline__ void lead_publish(unsigned units, const uint2 *ahead) {
    if (units) {
      unsigned e = (unsigned)min(clock64() - ring->t0, 0x7fffffffll), per = units == 1 ? e : e / units;
      unsigned t = ring->t_unit;
      ring->t_unit = t ? (t + per + 1) / 2 : max(per, 1u);
    }
    publish(result(ahead ? *ahead : issue()));
    ring->t0 = clock64();
  }

  // Whether the leader claims ahead now: never at the tail (nothing is held back from other
  // clusters there).
  __device__ __forceinline__ bool claim_ahead() const {
    if (!AHEAD || ring->exhausted || ring->pub != k) return false;
    return ring->remaining > 2 * p.active;
  }

  // ---- The tile loop's operations (clcrt_loop.cuh) ----

  // The leader claims at the top of a pass: the cluster's first units, unless it has a unit
  // of its own (own_first), and, with nothing claimed ahead, the next ones.
  enum : bool { LEADER_CLAIMS = true };
  // Bit 1 of the loop's flags: the run claims.
  __device__ __forceinline__ unsigned loop_bits() const { return claims() ? 2u : 0u; }
  // At the top of a pass that needs a response (the first, or, with nothing claimed ahead,
  // the next one): the leader claims now and publishes; every warp reads the response.
  // r: the units just run (none before a cluster's first claim).
  __device__ __forceinline__ void receive(uint2 &r) {
    if (leader_warp && leader && lead_ready()) lead_publish(r.y, nullptr);
    r = consume(DecodeRun());
  }
  // Before the units run: a claim in flight while they run.
  __device__ __forceinline__ void request(const uint2 &, uint2 &ahead) {
    if (AHEAD && leader_warp && leader && claims() && claim_ahead()) {
      ahead = issue();
      ring->t0 = clock64();
    }
  }
  // After them: the claim made before they ran is published.
  __device__ __forceinline__ void retire(const uint2 &r, const uint2 &ahead) {
    if (AHEAD && leader_warp && leader && ahead_pending(ahead)) lead_publish(r.y, &ahead);
  }
  // A run that claims nothing is done after the cluster's own unit; one that claims reads
  // its next response at the top of the next pass.
  enum : bool { MAY_END = true };
  __device__ __forceinline__ bool done(unsigned flags) const { return USE_SHORT || !(flags & 2u); }

  // A graph run's clusters count themselves out of their table slot. The first clusters of
  // a claiming run report how long their units took (each its own word: no atomics); the
  // runtime reads them when it sizes the kernel's next runs.
  __device__ __forceinline__ void finish() {
    if (USE_GRAPH && claims() && leader && ring->slot_state) ptx::red_add_release_gpu_u64(ring->slot_state, 1ull);
    if (claims() && leader && p.unit_cycles) {
      const unsigned c = cluster_id(), t = ring->t_unit;
      if (c < CLCRT__HINT_WORDS && t) ptx::st_relaxed_sys(p.unit_cycles + c, t);
    }
    this->leave();
  }
};

}  // namespace clcrt
