// clcrt device template: the code of the variant features (clcrt_abi.h: CLCRT_USE_*), each
// compiled only into the variants that use it. STEAL's graph claims (CLCRT_USE_GRAPH) and
// yielding (CLCRT_USE_PREEMPT) are called from clcrt_steal.cuh; the timeline trace and the
// statistics (CLCRT_USE_TRACE) from the tile loop (clcrt_loop.cuh).
#pragma once

// -DCLCRT_TRACE=0 compiles the timeline trace's recording out of the observed variant too.
#ifndef CLCRT_TRACE
#define CLCRT_TRACE 1
#endif

namespace clcrt {

// ---- Graph claims ------------------------------------------------------------------------
// A run captured into a graph may be replayed on any stream, several times at once: it
// cannot claim from its stream's claim lines. It claims from a slot of the context's table
// (clcrt_abi.h: CLCRT__TABLE_*, CLCRT__SLOT_*), found by its launch's %gridid.
//   1. %gridid tells apart the grids in flight (gpu_graph.c test_launch_identity), but later
//      launches reuse it (measured on an H100, driver 580), so a slot belongs to the launch
//      written in it only while that launch has clusters left to leave: {left, clusters} in
//      one 64-bit word, read at once. Every cluster of a launch finds the same slot, and the
//      last one to leave gives it up (Steal::finish). gpu_graph.c test_concurrent_replays,
//      test_table_churn, test_instantiated_twice, test_capture_modes (exactly once; every
//      slot given up).
//   2. A launch takes the first slot not live from its hash position (open addressing),
//      under the table's lock (held for a few loads and stores by a running thread, so
//      waiting for it never waits for a cluster to start), and raises the table's reach (the
//      longest probe any launch ever needed) to its distance. So a launch's slot is never
//      further from its hash position than the reach, and a cluster looks only that far: a
//      few slots, where a scan to the first never-used slot crossed all 256 once they had
//      all been used (about 1.7 ms per graph run, measured on the H100). gpu_graph.c
//      test_table_churn (the reach stays below the launches ever live at once; the lock is
//      free after).
//   3. A cluster first looks without the lock (relaxed loads; a candidate is checked with
//      acquire loads: live before and after the owner is read, so it cannot have changed
//      hands in between, and this cluster's claims and its count on leaving are ordered
//      after the slot's setup); failing that, it takes the lock and looks again (the reach
//      read under the lock is current), and takes a slot if its launch has none yet. A
//      cluster that finds the lock held waits for it to be released and looks again without
//      it: the holder is usually a cluster of its own launch setting up the slot, so the
//      clusters of a launch do not queue on the lock one after another. gpu_graph.c
//      test_concurrent_replays, test_table_churn.
//   4. There is always a free slot: a device runs at most 128 grids at once, the table has
//      256 slots. Not tested (would need 128 captured launches in flight at once).
__device__ __forceinline__ bool slot_live(unsigned long long st) { return (unsigned)st < (unsigned)(st >> 32); }

__device__ __forceinline__ unsigned *table_slot(unsigned *table, unsigned i) {
  return table + CLCRT__LINE_WORDS + (i & (CLCRT__TABLE_SLOTS - 1)) * CLCRT__SLOT_WORDS;
}
// The launch's live slot among the reach + 1 slots from h, or null.
__device__ __forceinline__ unsigned *find_slot(unsigned *table, unsigned long long g, unsigned h, unsigned reach) {
#pragma unroll 1
  for (unsigned i = 0; i <= reach && i < CLCRT__TABLE_SLOTS; i++) {
    unsigned *s = table_slot(table, h + i);
    unsigned long long st = ptx::ld_relaxed_gpu_u64((const unsigned long long *)(s + CLCRT__SLOT_COUNT));
    unsigned long long owner = ptx::ld_relaxed_gpu_u64((const unsigned long long *)(s + CLCRT__SLOT_GRIDID));
    if (slot_live(st) && owner == g &&
        slot_live(ptx::ld_acquire_gpu_u64((const unsigned long long *)(s + CLCRT__SLOT_COUNT))) &&
        ptx::ld_acquire_gpu_u64((const unsigned long long *)(s + CLCRT__SLOT_GRIDID)) == g &&
        slot_live(ptx::ld_acquire_gpu_u64((const unsigned long long *)(s + CLCRT__SLOT_COUNT))))
      return s;
    if (st == 0 && owner == 0) break;  // never used: no launch's probe went past it
  }
  return nullptr;
}

// The launch's slot, taken if it has none yet. Not inlined: it runs once per cluster.
// Static: emitted only into the variants that call it (CLCRT_USE_GRAPH).
static __device__ __noinline__ unsigned *graph_slot(unsigned *table, unsigned num_clusters) {
  const unsigned long long g = ptx::sreg_gridid();
  const unsigned h = (unsigned)(g * 0x9E3779B97F4A7C15ull >> 56);
  bool locked = false;
#pragma unroll 1
  for (;;) {
    // The reach is written only under the lock.
    const unsigned reach = locked ? *(volatile unsigned *)(table + CLCRT__TABLE_REACH)
                                  : ptx::ld_acquire_gpu(table + CLCRT__TABLE_REACH);
    unsigned *s = find_slot(table, g, h, reach);
    if (!s && locked) {
      unsigned i = 0;
#pragma unroll 1
      for (; i < CLCRT__TABLE_SLOTS - 1; i++)
        if (!slot_live(
                ptx::ld_acquire_gpu_u64((const unsigned long long *)(table_slot(table, h + i) + CLCRT__SLOT_COUNT))))
          break;
      s = table_slot(table, h + i);
      ptx::zero_claims(s + CLCRT__SLOT_CLAIMS);
      *(volatile unsigned long long *)(s + CLCRT__SLOT_GRIDID) = g;
      ptx::st_release_gpu_u64((unsigned long long *)(s + CLCRT__SLOT_COUNT), (unsigned long long)num_clusters << 32);
      if (i > reach) *(volatile unsigned *)(table + CLCRT__TABLE_REACH) = i;
    }
    if (s) {
      if (locked) ptx::st_release_gpu(table + CLCRT__TABLE_LOCK, 0u);
      return s;
    }
    if (ptx::atom_cas_acquire_gpu(table + CLCRT__TABLE_LOCK, 0u, 1u) == 0u) {
      locked = true;
      continue;
    }
#pragma unroll 1
    while (ptx::ld_relaxed_gpu(table + CLCRT__TABLE_LOCK) != 0u) ptx::nanosleep(64);
  }
}

// ---- Yielding ----------------------------------------------------------------------------
// A STEAL run that may be preempted stops claiming while a higher priority is active, and
// its clusters leave; the clusters not yet started finish its units.
//   1. A cluster's first unit is run even while the run is told to yield (a unit of its own,
//      or its first claim), so every cluster that starts does at least one unit; and the
//      last cluster to start with work left never leaves (may_leave), so every unit is
//      claimed by someone. gpu_preempt.c test_yield_mechanism, test_exactly_once_interleaved,
//      test_graph_capture, test_two_runtimes (exactly once).

// Whether a higher priority than this run's is active on the device (preemption). Only the
// words handed out so far are read: one 16-byte load while at most four streams of higher
// priority were ever created (the usual case).
__device__ __forceinline__ bool must_yield(const Params &p) {
  unsigned hi = 0;
#pragma unroll 1
  for (unsigned i = 0; i < p.yield_words; i += 4) {
    uint4 v = ptx::ld_relaxed_gpu_v4(p.yield + i);
    hi = max(hi, max(max(v.x, v.y), max(v.z, v.w)));
  }
  return hi > p.prio;
}
// Whether this cluster may leave: only while at least a wave of clusters (as many as run at
// once) has not started, so the units it leaves are picked up at full width. `line` is the
// run's claim line, whose CLCRT__LINE_STARTED word counts the clusters that started with
// work left (a cluster that started after every unit was claimed is not counted: nothing is
// left then, and nothing is ever left again).
__device__ __forceinline__ bool may_leave(const Params &p, const unsigned *line) {
  return ptx::ld_relaxed_gpu(line + CLCRT__LINE_STARTED) + p.active <= p.num_clusters;
}

// ---- Timeline trace ----------------------------------------------------------------------
// One trace record (include/clcrt.h: clcrt_trace_record), written as three 16-byte stores
// into the stream's buffer (clcrt_abi.h: CLCRT__TRACE_*). One counter for the whole device
// keeps exactly the first `capacity` records however the tiles spread over SMs (per-SM
// counters cut busy SMs short, and a fallback pool cost every kernel 8 registers per thread,
// traced or not); past the capacity a record is only counted. gpu_trace.c
// test_every_tile_once, test_overflow_counted, test_two_streams_apart.
__device__ __forceinline__ void trace_record(const Params &p, unsigned long long t0, unsigned long long t1,
                                            unsigned long long linear, unsigned unit, unsigned cluster,
                                            unsigned rank, bool stolen) {
  unsigned *hdr = (unsigned *)p.trace;
  unsigned idx = ptx::atom_add_relaxed_gpu(hdr + CLCRT__TRACE_HDR_WORDS, 1u);
  if (idx >= hdr[0]) return;  // counted, not written: the host reports count - capacity as dropped
  uint4 *rec = (uint4 *)(p.trace + CLCRT__TRACE_RECORDS + (unsigned long long)CLCRT__TRACE_RECORD_BYTES * idx);
  rec[0] = make_uint4((unsigned)t0, (unsigned)(t0 >> 32), (unsigned)t1, (unsigned)(t1 >> 32));
  rec[1] = make_uint4((unsigned)linear, (unsigned)(linear >> 32), unit, cluster);
  rec[2] = make_uint4(p.run, (ptx::sreg_smid() & 0xffffu) | (rank << 16) | ((stolen ? 1u : 0u) << 24), 0u, 0u);
}

// ---- Statistics --------------------------------------------------------------------------
// A CTA's share of the run's statistics (clcrt__params.stats), once, as it leaves: its tiles
// (overall and on its SM) and, from rank 0, its cluster's units. cta: its scheduler (Cta's
// p, rank, units_run). gpu_sched.c test_stats.
template <class C>
__device__ __forceinline__ void record_stats(const C &cta, unsigned tiles_here) {
  unsigned long long *st = cta.p.stats;
  atomicAdd(&st[0], (unsigned long long)tiles_here);
  atomicAdd(&st[4 + (ptx::sreg_smid() & 1023u)], (unsigned long long)tiles_here);
  if (cta.rank == 0 && cta.units_run > 0) {
    atomicAdd(&st[1], (unsigned long long)(cta.units_run - 1));
    atomicAdd(&st[2], 1ull);
    atomicMax(&st[3], (unsigned long long)cta.units_run);
  }
}

}  // namespace clcrt
