// clcrt device template: the tile loop, which names no scheduler, and the kernel's entry
// run<>, which picks one. A scheduler S (clcrt_steal.cuh, clcrt_clc.cuh, clcrt_static.cuh,
// clcrt_fixed.cuh) derives from Cta (clcrt_cta.cuh) and offers:
//   init()     sets up; whether the cluster has work to look for
//   finish()   after the units; ends with the cluster barrier (Cta::leave)
//   ONE_UNIT   one cluster per unit: the loop runs the launched unit and nothing else;
// otherwise the loop's operations, in the order one pass of the loop calls them:
//   loop_bits()          bits the loop keeps in a register for done (bit 0 is the loop's)
//   own_first()          LEADER_CLAIMS only: the cluster starts with its own unit, not a claim
//   receive(r)           LEADER_CLAIMS only, at the top of a pass that needs a response: the
//                        leader claims and publishes, every warp reads the response into r
//   request(r, ahead)    before the units r run: the next request (CLC's try_cancel, a
//                        claim in flight into ahead)
//   retire(r, ahead)     after they ran: what request started is finished
//   done(flags)          MAY_END only: whether the cluster ends after this pass
//   advance(r)           not LEADER_CLAIMS: the next units into r (STATIC's stride, CLC's
//                        response)
// and the traits RING (responses through the ring: a traced tile's start time is kept there,
// units after the first are stolen), LEADER_CLAIMS (the cluster's leader claims its units at
// the top of a pass), MAY_END and USE_TRACE (the observed variant).
//
// The generated code of this loop is byte for byte that of the one-class template it
// replaced (scripts/compare_cubins.sh), which constrains its form: a trait that is false
// leaves no branch at all (a branch folded away later cost a loop its nounroll mark in the
// PTX), `need` is tested and set here rather than in a scheduler's function, and runs of
// units pass by reference (by value, or with the tests inside the callee, the optimiser
// placed the same instructions in another order).
#pragma once

namespace clcrt {

// Unit u at unit coordinate (ux, uy, uz): this CTA's tile of it, unless padded. Returns 1
// when the tile function ran.
template <class S, class Body>
__device__ __forceinline__ unsigned run_at(S &s, unsigned u, unsigned ux, unsigned uy, unsigned uz, bool traced,
                                          Body &body) {
  // s.p throughout, not a local reference to it: one changed the generated code (the
  // padding test below lost its speculated loads), and the cubins must not change.
  Tile tile;
  tile.coord = s.tile_coord(ux, uy, uz);
  tile.cta_rank = s.rank;
  tile.unit = u;
  tile.iteration = s.units_run++;
  // Padded tiles exist only when the grid does not divide by the cluster shape.
  if (S::CS > 1 && !(tile.coord.x < s.p.tiles[0] && tile.coord.y < s.p.tiles[1] && tile.coord.z < s.p.tiles[2]))
    return 0;
  // With 1-CTA clusters the unit is the tile (units == tiles), so its index is the linear
  // one: no multiplications, and a tile function that reads only linear leaves the unit's
  // decomposition to dead-code elimination.
  tile.linear = S::CS == 1 ? (unsigned long long)u
                           : tile.coord.x + (unsigned long long)s.p.tiles[0] *
                                                (tile.coord.y + (unsigned long long)s.p.tiles[1] * tile.coord.z);
  // Thread 0 keeps the start time where the scheduler says (Cta::keep_t0).
  unsigned long long t0 = 0;
  if (traced) {
    t0 = ptx::globaltimer();
    s.keep_t0(t0);
  }
  body(tile);
  if (traced)
    trace_record(s.p, s.kept_t0(t0), ptx::globaltimer(), tile.linear, u, S::ONE_UNIT ? u : s.cluster_id(), s.rank,
                 S::RING && tile.iteration > 0);
  return 1;
}

// Unit u: this CTA's tile of it, unless padded.
template <class S, class Body>
__device__ __forceinline__ unsigned run_unit(S &s, unsigned u, bool traced, Body &body) {
  unsigned ux, uy, uz;
  s.decompose(u, ux, uy, uz);
  return run_at(s, u, ux, uy, uz, traced, body);
}

// The units of this CTA (init() found work to look for).
template <class S, class Body>
__device__ __forceinline__ void work(S &s, Body &body) {
  unsigned tiles_here = 0;  // differs from units_run only where clusters have padded tiles
  // Only the observed variant records (the runtime launches it for traced runs).
  const bool traced = S::USE_TRACE && CLCRT_TRACE && s.p.trace && s.thread0();
  if constexpr (S::ONE_UNIT) {
    // One unit per cluster (the grid has one cluster per unit): no loop around the tile
    // function, as in a hand-written kernel.
    unsigned ux, uy, uz;
    const unsigned u = s.launched_unit(ux, uy, uz);
    tiles_here = run_at(s, u, ux, uy, uz, traced, body);
  } else {
    // Kept in a register: the compiler would otherwise reload the parameters behind them for
    // every unit. Bit 0: traced; the scheduler's bits above it.
    unsigned flags = (traced ? 1u : 0u) | s.loop_bits();
    asm volatile("" : "+r"(flags));
    uint2 r = make_uint2(0, 0);
    bool need = S::LEADER_CLAIMS && !s.own_first();  // the next step reads a response
    if (!need) r = s.own();
#pragma unroll 1
    for (;;) {
      // One pass per run of units: the warps other than the leader's run only the wait, the
      // read and the units.
      if (S::LEADER_CLAIMS && need) s.receive(r);
      if (r.y == 0) break;
      uint2 ahead = make_uint2(NONE, 0);
      s.request(r, ahead);
      // Not unrolled: the optimiser would copy the tile function into every unrolled path,
      // multiplying NVRTC's time and the code.
#pragma unroll 1
      for (unsigned i = 0; i < r.y; i++) tiles_here += run_unit(s, r.x + i, S::USE_TRACE && (flags & 1u), body);
      s.retire(r, ahead);
      // A constant test first: a scheduler that never ends here has no branch at all (a
      // branch folded away later cost the loop its nounroll mark in the PTX).
      if (S::MAY_END && s.done(flags)) break;
      if (S::LEADER_CLAIMS)
        need = true;
      else
        s.advance(r);
    }
  }
  if (S::USE_TRACE && s.p.stats && s.thread0()) record_stats(s, tiles_here);
}

// The stream's next grid may start launching once this CTA has run its units: what is left
// (finish) waits only on CTAs of this grid, all resident by then, so the next grid's CTAs,
// which hold their SMs at their own grid_dep_wait (the generated entry's first statement,
// runtime/compile/compile.c), cannot starve anything this grid still needs.
template <class S, class Body>
__device__ __forceinline__ void tile_loop(S &s, Body &body) {
  if (s.init()) work(s, body);
  ptx::grid_dep_launch();
  s.finish();  // one call site: each inlined copy costs NVRTC time
}

// The scheduler of the generated entry's SCHED (include/clcrt.h: clcrt_sched's values).
enum { SCHED_CLC = 1, SCHED_STEAL = 2, SCHED_STATIC = 3, SCHED_FIXED = 4 };
template <int SCHED, unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V>
struct SchedulerOf;
template <unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V>
struct SchedulerOf<SCHED_CLC, CX, CY, CZ, NTHREADS, V> {
  typedef Clc<CX, CY, CZ, NTHREADS, V> type;
};
template <unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V>
struct SchedulerOf<SCHED_STEAL, CX, CY, CZ, NTHREADS, V> {
  typedef Steal<CX, CY, CZ, NTHREADS, V> type;
};
template <unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V>
struct SchedulerOf<SCHED_STATIC, CX, CY, CZ, NTHREADS, V> {
  typedef Static<CX, CY, CZ, NTHREADS, V> type;
};
template <unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V>
struct SchedulerOf<SCHED_FIXED, CX, CY, CZ, NTHREADS, V> {
  typedef Fixed<CX, CY, CZ, NTHREADS, V> type;
};

// The kernel's body (the generated entry, runtime/compile/compile.c, calls it): the tile
// function under scheduler SCHED, clusters of CX x CY x CZ CTAs of NTHREADS threads, variant
// V. RING_OFF: where the response ring starts in dynamic shared memory, after the tile
// function's smem_bytes (CLCRT__RING_OFF; a constant, so that its addresses cost no
// registers).
template <int SCHED, unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned RING_OFF, unsigned V,
          class Body>
__device__ __forceinline__ void run(const Params &p, Body &&body) {
  typedef typename SchedulerOf<SCHED, CX, CY, CZ, NTHREADS, V>::type S;
  if constexpr (S::RING) {
    S s(p, (Ring *)((unsigned char *)smem() + RING_OFF));
    tile_loop(s, body);
  } else {
    S s(p);
    tile_loop(s, body);
  }
}

}  // namespace clcrt
