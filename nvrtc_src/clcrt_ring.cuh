// clcrt device template: the response ring, the protocol by which STEAL (clcrt_steal.cuh)
// and CLC (clcrt_clc.cuh) hand a cluster its next run of units. This is the one place the
// protocol is described; runtime/ and the README point here.
//
// A response is 16 bytes that land in the same slot of every CTA of the cluster. CLC's come
// from clusterlaunchcontrol.try_cancel ... multicast::cluster::all (one unit each: the
// canceled cluster's); STEAL's leader claims a run of units with an atomic and writes
// {start, count, 0, 0} into every CTA of its cluster with st.async ...
// mbarrier::complete_tx::bytes (publish). A kernel launched without clusters (1-CTA STEAL)
// may not use st.async: its leader writes the slot with an ordinary store and arrives on
// the full barrier (release). Each CTA has NSLOT = 2 slots and two mbarriers per slot:
//   full[s]   per CTA, arrival count 1: armed by the CTA itself (arrive.expect_tx 16) one
//             use ahead, completed by the 16 response bytes;
//   empty[s]  in the leader CTA (rank 0), one arrival per warp of the cluster: lane 0 of a
//             warp reads slot s (one 128-bit load), fences generic->async proxy, arrives,
//             and broadcasts the response to its warp; the producer waits on empty[s] (and
//             fences too) before the next request may write slot s again. Without clusters
//             every thread reads the slot and arrives itself (empty[s] counts every thread).
// Response n goes to slot n % NSLOT; a CTA's k-th read waits for phase k / NSLOT of full.
// No cluster-wide barrier is needed per unit, and waiting warps sleep (try_wait with a
// suspend-time hint, CLCRT_WAIT_HINT).
//
// Invariants, and the test that checks each (tests/gpu_*.c run on the H100, under `make
// sanitize-gpu` too: memcheck, racecheck, synccheck; CLC's request runs only on sm_100, which
// this project has no GPU of, so CLC is checked by compile-only tests and what it shares):
//   1. Every CTA's barriers are initialised, and every slot's first phase armed, before any
//      request can write a slot: thread 0 of each CTA does both, then a cluster barrier
//      (init_ring). gpu_sched.c test_matrix (every cluster shape, exactly once).
//   2. A response is read only after its CTA's own full barrier completed, with one 128-bit
//      load, so it is never torn. gpu_sched.c test_stress, test_matrix (exactly once).
//   3. A slot is rewritten only after every warp of the cluster read it: the producer waits
//      on empty[s], which counts one arrival per warp of every CTA (every thread without
//      clusters). gpu_sched.c test_stress (a response overwritten before it was read runs
//      a unit 0 or 2 times); racecheck runs of gpu_sched.c.
//   4. Between a generic-proxy read of a slot and the next async-proxy write into it, both
//      the reader (before its arrive) and the producer (after its wait) fence
//      generic->async. Not tested: no test fails without the fences on the H100.
//   5. Every warp of the cluster decodes the same response for the same request (the k-th
//      read of every warp is response k, its decoded value broadcast from lane 0), so all
//      warps see the same units and the same end. gpu_sched.c test_cluster_order (every CTA
//      of a cluster runs the same units in the same order) and test_matrix.
//   6. After a failed request (count 0) no thread issues another: STEAL's leader publishes
//      the empty response and marks the ring exhausted; CLC's loop ends before its next
//      request. gpu_preempt.c test_yield_mechanism (a yielding cluster's claim fails and it
//      leaves after one unit, exactly once); CLC: not tested on hardware.
//   7. The producer publishes at most one response ahead of its own CTA's reads, so NSLOT =
//      2 slots suffice and the CTAs of a cluster drift apart by at most one run of units.
//      Not tested (gpu_sched.c test_cluster_order prints how far ranks ran ahead).
//   8. No CTA leaves while another CTA of its cluster may still arrive on its barriers or
//      write its slots: every scheduler ends with a cluster barrier (Cta::leave). memcheck
//      runs of gpu_sched.c test_matrix and test_cluster_order.
//   9. A 1-CTA STEAL kernel (no async proxy) orders its responses by the leader's release
//      arrive and every thread's own acquire wait and arrive. racecheck runs of gpu_sched.c
//      test_matrix and test_stress (1-CTA clusters).
#pragma once

namespace clcrt {

// Response slots: a response is published at most one ahead of the leader's CTA (invariant 7).
enum : unsigned { NSLOT = 2 };

// The ring in dynamic shared memory (CLCRT__RING_BYTES at CLCRT__RING_OFF), followed by
// STEAL's claim state, which only the leader touches (kept out of registers, which every
// thread of the CTA would pay for while the tile function runs: more registers, fewer CTAs
// per SM). The launch gives a kernel the ring (runtime/launch/launch.c) for every CLC run,
// and for a STEAL run that claims or is traced (trace_t0): a run whose units are all some
// cluster's own launches with no shared memory of the scheduler's (measured on the H100,
// shared memory in a kernel costs short back-to-back runs about 0.3 us each).
struct Ring {
  uint4 slot[NSLOT];
  unsigned long long full[NSLOT];
  unsigned long long empty[NSLOT];
  // Read and written by STEAL's leader alone (see Steal::lead_ready for how other warps skip them).
  unsigned *ctr;                   // the run's claim counter (its claim line)
  unsigned long long *slot_state;  // graph runs: the table slot's {clusters that left, clusters}
  long long t0;                    // clock64 when the leader's current units began (lead_publish)
  unsigned long long trace_t0;     // trace: %globaltimer when thread 0 called the tile function
  unsigned pub;                    // responses published
  unsigned remaining;              // units left after the last claim, as that claim saw it
  unsigned t_unit;                 // cycles per unit, as the leader measured them (0: unknown)
  unsigned exhausted;              // a failed claim was published: never claim again
  unsigned late;                   // the cluster started after every unit was claimed
};
static_assert(sizeof(Ring) <= CLCRT__RING_BYTES, "the response ring outgrew CLCRT__RING_BYTES");

// The ring as a scheduler sees it. TX: responses arrive as async-proxy transactions
// (st.async, try_cancel); false only for 1-CTA STEAL kernels, launched without a cluster.
template <unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V, bool TX>
struct ResponseRing : Cta<CX, CY, CZ, NTHREADS, V> {
  using Base = Cta<CX, CY, CZ, NTHREADS, V>;
  using Base::CS;
  using Base::NWARPS;
  using Base::k;
  using Base::rank;
  using Base::rbase;
  using Base::ring;
  using Base::tid;
  enum : bool { RING = true };

  __device__ __forceinline__ ResponseRing(const Params &params, Ring *r) : Base(params, r) {}

  // Shared-memory addresses of the ring's parts, from its 32-bit base (a generic pointer
  // converted on every use costs a dozen instructions per unit in every warp). Ring is
  // slot[NSLOT] (16 bytes each), then full[NSLOT] and empty[NSLOT] (8 bytes each).
  __device__ __forceinline__ unsigned slot_addr(unsigned s) const { return rbase + 16 * s; }
  __device__ __forceinline__ unsigned full_addr(unsigned s) const { return rbase + 16 * NSLOT + 8 * s; }
  __device__ __forceinline__ unsigned empty_addr(unsigned s) const { return rbase + 24 * NSLOT + 8 * s; }

  // Invariant 1: barriers initialised and every slot's first phase armed in every CTA, then
  // a cluster barrier (a CTA barrier without clusters), before any request.
  __device__ __forceinline__ void init_ring() {
    if (tid == 0) {
#pragma unroll
      for (unsigned s = 0; s < NSLOT; s++) {
        ptx::mbar_init(full_addr(s), 1);
        // Released by one lane per warp of every CTA; without clusters, by every thread.
        if (rank == 0) ptx::mbar_init(empty_addr(s), TX ? CS * NWARPS : NTHREADS);
      }
      ptx::fence_mbar_init();
      if (TX) {
#pragma unroll
        for (unsigned s = 0; s < NSLOT; s++) ptx::arrive_expect_tx(full_addr(s), 16);
      }
    }
    if (CS > 1)
      ptx::cluster_sync();
    else
      __syncthreads();
  }

  // The software producer (STEAL's leader): publishes response number pub (the run of units
  // r) to every CTA of the cluster. An empty run marks the ring exhausted (invariant 6).
  __device__ __forceinline__ void publish(uint2 r) {
    if (r.y == 0) ring->exhausted = 1;
    unsigned n = ring->pub++, s = n % NSLOT;
    if (n >= NSLOT) ptx::wait_parity(empty_addr(s), (n / NSLOT - 1) & 1);  // invariant 3
    uint4 v = make_uint4(r.x, r.y, 0, 0);
    if (!TX) {
      ptx::st_shared_v4(slot_addr(s), v);
      ptx::arrive_local(full_addr(s));  // release: the store is seen by whoever waits
      return;
    }
    // The slot was read through the generic proxy; order those reads (acquired through the
    // empty barrier) before this async-proxy write (invariant 4).
    ptx::fence_proxy_async();
#pragma unroll
    for (unsigned c = 0; c < CS; c++)
      ptx::st_async_v4(ptx::mapa(slot_addr(s), c), v, ptx::mapa(full_addr(s), c));
  }

  // Reads response number k from this CTA's ring, hands the slot back and returns the run of
  // units decode(response) makes of it. With responses through the async proxy, lane 0 of
  // each warp reads the 16 bytes with one 128-bit load after its CTA's barrier completed and
  // broadcasts the decoded run of units; without (a 1-CTA STEAL kernel), every thread reads
  // them. All lanes of all warps decode the same response (invariant 5).
  template <class Decode>
  __device__ __forceinline__ uint2 consume(Decode decode) {
    unsigned s = k % NSLOT, start = 0, count = 0;
    if (!TX) {
      // The leader wrote the slot with an ordinary store: every thread waits, reads it (one
      // broadcast load per warp) and hands it back itself (the empty barrier counts every
      // thread of the CTA), so each read is released by its own thread's arrive. (Lane 0 alone
      // reading and broadcasting with shuffles cost 4-9% on 1-CTA compute tiles; every lane
      // reading with one arrive after a __syncwarp was as fast, but compute-sanitizer's
      // racecheck reported it, not following the chain through __syncwarp.)
      ptx::wait_parity(full_addr(s), (k / NSLOT) & 1);
      uint4 v = ptx::ld_shared_v4(slot_addr(s));
      ptx::arrive_local(empty_addr(s));
      k++;
      return decode(v);
    }
    if ((tid & 31) == 0) {
      ptx::wait_parity(full_addr(s), (k / NSLOT) & 1);
      uint4 v = ptx::ld_shared_v4(slot_addr(s));
      // The next write into this slot comes through the async proxy (st.async from the
      // leader, or try_cancel): order this generic read before it.
      if (TX) ptx::fence_proxy_async();
      if (TX && tid == 0) ptx::arrive_expect_tx(full_addr(s), 16);  // arm the slot's next use
      if (CS > 1)
        ptx::arrive_remote(ptx::mapa(empty_addr(s), 0));
      else
        ptx::arrive_local(empty_addr(s));
      uint2 r = decode(v);
      start = r.x;
      count = r.y;
    }
    k++;
    return make_uint2(__shfl_sync(this->warp_mask(), start, 0), __shfl_sync(this->warp_mask(), count, 0));
  }

  // A traced tile's start time waits in the ring while the tile function runs (thread 0's,
  // not a register every thread would hold).
  __device__ __forceinline__ void keep_t0(unsigned long long t0) { ring->trace_t0 = t0; }
  __device__ __forceinline__ unsigned long long kept_t0(unsigned long long) const { return ring->trace_t0; }
};

// A software response {start, count, 0, 0} as a run of units. z and w are 0: or-ing them in
// keeps the read one 128-bit load.
struct DecodeRun {
  __device__ __forceinline__ uint2 operator()(uint4 v) const { return make_uint2(v.x, v.y | v.z | v.w); }
};

}  // namespace clcrt
