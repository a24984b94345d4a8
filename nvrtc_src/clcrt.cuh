// clcrt device-side scheduler template. Embedded into libclcrt at build time and compiled
// by NVRTC together with the user's tile function; never read from disk at run time.
//
// Self-contained on purpose: inline PTX only, no <cuda/ptx> and no cooperative groups,
// which cost 100+ ms of NVRTC time on every cold compile.
//
// One loop, four sources of work. A work unit is one cluster-shaped block of tiles: unit u
// names cluster position (u % UX, u / UX % UY, u / (UX*UY)) in the tile grid padded up to a
// multiple of the cluster shape; each CTA of the cluster takes the tile at that position
// plus its own coordinate in the cluster, and padded tiles are skipped. Work is handed out
// as responses, each a run of consecutive units [start, start + count):
//
//   FIXED   one unit per launched cluster: its own position
//   STATIC  persistent grid: its own position, then += number of clusters
//   STEAL   software: the cluster's leader claims a run of units from the run's claim
//           counters with an atomic and writes the 16-byte response into every CTA of its
//           cluster (st.async ... mbarrier::complete_tx::bytes, or a plain store and a
//           release-arrive when the kernel is launched without clusters)
//   CLC     hardware (sm_100+): the first unit is the cluster's own; the next ones come
//           from clusterlaunchcontrol.try_cancel ... multicast::cluster::all, one unit each
//
// STEAL and CLC share one protocol over a ring of two response slots per CTA:
//   full[s]   per CTA, arrival count 1: armed by the CTA itself (arrive.expect_tx 16) one
//             use ahead, completed by the 16 response bytes;
//   empty[s]  in the leader CTA (rank 0), one arrival per warp of the cluster: lane 0 of
//             a warp reads slot s (one 128-bit load), fences generic->async proxy, arrives,
//             and broadcasts the response to its warp; the leader waits on empty[s] (and
//             fences too) before the next request may write slot s again. A kernel launched
//             without clusters (1-CTA STEAL) has no async proxy in the way: every thread
//             reads the slot and arrives itself (empty[s] counts every thread).
// So a response is overwritten only after every warp of the cluster read it, no cluster-wide
// barrier is needed per unit, and every warp decodes the same slot for the same request, so
// all see the same end. After a failed request no thread issues another.
//
// STEAL's claims (the leader is lane 0 of the last warp of the cluster's rank-0 CTA, so a
// producer warp placed last in a warp-specialised tile function claims the next tile as
// soon as it has issued the current one's loads):
//   - one counter per run, advanced only by atomics, so no unit is claimed twice;
//   - a claim takes a chunk of units sized by time: the leader measures how long its units
//     take (clock64) and takes enough of them to last about chunk_cycles, at least 1 and at
//     most remaining / (2 * clusters running at once) (guided, so the tail is still handed
//     out unit by unit). Units of microseconds are claimed one at a time and balance like
//     one block per tile; tiny units are claimed by the dozen, so the atomic stays cheap;
//   - a cluster of several CTAs issues its next claim before its current units run and
//     publishes it after the leader's part of them (its latency hides behind them; a response
//     is published at most one ahead, so the CTAs drift apart by at most one unit); 1-CTA
//     clusters, and every cluster at the tail, claim when the current units are done, so
//     nothing is held back from other clusters (the CTA's other warps and the SM's other CTAs
//     cover the round trip; short units amortise it over a chunk).
//   - waiting warps sleep (try_wait with a suspend-time hint), and per response the warps
//     other than the leader's run only the wait, the read, the release and their units.
// The claim state of a run is per run and needs no reset launch: a run on a stream uses one
// of the stream's two counters, chosen by the run's sequence number, and zeroes the other
// for the next run (runs on a stream execute one after another); a run captured into a graph
// claims from its own slot of the context's table, found by its launch's %gridid, and gives
// the slot up when its last cluster leaves. See runtime/launch/sched_state.h for the layout.
#pragma once
#include "clcrt_abi.h"

#ifndef CLCRT_STEAL_EARLY
#define CLCRT_STEAL_EARLY 0
#endif
// The suspend-time hint of the scheduler's mbarrier waits, in ns: a waiting warp sleeps until
// the phase completes (or this long) instead of polling. 0: no hint (the hardware's own
// limit, after which the wait loop polls again; kept for the benchmark's comparison).
#ifndef CLCRT_WAIT_HINT
#define CLCRT_WAIT_HINT 10000000
#endif
// -DCLCRT_TRACE=0 compiles the timeline trace's recording out of the observed variant too.
#ifndef CLCRT_TRACE
#define CLCRT_TRACE 1
#endif

namespace clcrt {

struct Tile {
  uint3 coord;               // the tile's coordinate in the tile grid
  unsigned long long linear; // coord.x + tiles.x * (coord.y + tiles.y * coord.z)
  unsigned cta_rank;         // this CTA's rank in its cluster
  unsigned unit;             // the work unit (cluster-shaped block of tiles) it belongs to
  unsigned iteration;        // how many units this CTA ran before this one
};

// The scheduler parameters, the layout of the state runs claim from and record into, and the
// variant bits: the ABI with the runtime, declared once (clcrt_abi.h, included above).
typedef ::clcrt__params Params;

enum { SCHED_CLC = 1, SCHED_STEAL = 2, SCHED_STATIC = 3, SCHED_FIXED = 4 };
enum : unsigned { NONE = 0xffffffffu };

namespace ptx {

__device__ __forceinline__ unsigned smem_addr(const void *p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
__device__ __forceinline__ unsigned sreg_cluster_ctarank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint3 sreg_cluster_ctaid() {
  uint3 r;
  asm("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(r.x));
  asm("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(r.y));
  asm("mov.u32 %0, %%cluster_ctaid.z;" : "=r"(r.z));
  return r;
}
__device__ __forceinline__ unsigned sreg_clusterid_x() {
  unsigned r;
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint3 sreg_clusterid() {
  uint3 r;
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(r.x));
  asm("mov.u32 %0, %%clusterid.y;" : "=r"(r.y));
  asm("mov.u32 %0, %%clusterid.z;" : "=r"(r.z));
  return r;
}
__device__ __forceinline__ unsigned sreg_nclusterid_x() {
  unsigned r;
  asm("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned sreg_smid() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned long long sreg_gridid() {
  unsigned long long r;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(r));
  return r;
}
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long r;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(r)::"memory");
  return r;
}
// The address of the same shared-memory variable in the CTA of rank `rank`.
__device__ __forceinline__ unsigned mapa(unsigned addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits for the phase of parity `parity` to complete (acquire, CTA scope).
__device__ __forceinline__ void wait_parity(unsigned bar, unsigned parity) {
#if CLCRT_WAIT_HINT
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "W%=:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1, %2;\n\t@!p bra W%=;\n}" ::"r"(bar),
      "r"(parity), "n"(CLCRT_WAIT_HINT)
      : "memory");
#else
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "W%=:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t@!p bra W%=;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}
// Arrive on an mbarrier in any CTA of the cluster (address from mapa). Default semantics
// (release, CTA scope), as CUTLASS's ClusterBarrier does for consumer releases: a
// cluster-scope release compiles to MEMBAR.ALL.GPU, which we must not pay per unit. The
// arrive only has to order this warp's earlier reads of the slot before the leader's next
// write into it, and the proxy fence before it orders them against the async proxy.
__device__ __forceinline__ void arrive_remote(unsigned cluster_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(cluster_bar) : "memory");
}
__device__ __forceinline__ void st_shared_v4(unsigned addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void arrive_local(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Orders this thread's generic-proxy accesses to shared memory before later async-proxy
// writes (st.async, try_cancel) to it.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ uint4 ld_shared_v4(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
// Writes 16 bytes into the shared memory of a CTA of the cluster and completes 16 bytes of
// transaction on that CTA's mbarrier.
__device__ __forceinline__ void st_async_v4(unsigned cluster_addr, uint4 v, unsigned cluster_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                   cluster_addr),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(cluster_bar)
               : "memory");
}
__device__ __forceinline__ unsigned ld_relaxed_gpu(const unsigned *p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned atom_add_relaxed_gpu(unsigned *p, unsigned v) {
  unsigned r;
  asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
  return r;
}
__device__ __forceinline__ void st_relaxed_gpu(unsigned *p, unsigned v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// A word the host reads while the device may write it (mapped host memory).
__device__ __forceinline__ void st_relaxed_sys(unsigned *p, unsigned v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// Zeroes a claim line's counter and its started count (words 0 and 1) in one store.
__device__ __forceinline__ void zero_claims(unsigned *line) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(line), "l"(0ull) : "memory");
}
__device__ __forceinline__ void zero_claims_if(bool c, unsigned *line) {
  asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %0, 0;\n\t@q st.relaxed.gpu.global.u64 [%1], %2;\n}" ::"r"(
                   (unsigned)c),
               "l"(line), "l"(0ull)
               : "memory");
}
__device__ __forceinline__ void red_add_relaxed_gpu(unsigned *p, unsigned v) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint4 ld_relaxed_gpu_v4(const unsigned *p) {
  uint4 v;
  asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long ld_relaxed_gpu_u64(const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// The graph table's ownership protocol: acquire/release at GPU scope, once per cluster.
__device__ __forceinline__ unsigned long long ld_acquire_gpu_u64(const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu_u64(unsigned long long *p, unsigned long long v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_release_gpu(unsigned *p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned atom_cas_acquire_gpu(unsigned *p, unsigned cmp, unsigned v) {
  unsigned r;
  asm volatile("atom.acquire.gpu.global.cas.b32 %0, [%1], %2, %3;" : "=r"(r) : "l"(p), "r"(cmp), "r"(v) : "memory");
  return r;
}
__device__ __forceinline__ void red_add_release_gpu_u64(unsigned long long *p, unsigned long long v) {
  asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void nanosleep(unsigned ns) { asm volatile("nanosleep.u32 %0;" ::"r"(ns)); }
__device__ __forceinline__ unsigned umulhi(unsigned a, unsigned b) {
  unsigned r;
  asm("mul.hi.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
// Cancels a cluster that has not started; the 16-byte response lands in the same slot of
// every CTA of the cluster and completes each CTA's own mbarrier.
__device__ __forceinline__ void clc_try_cancel_multicast(unsigned slot, unsigned bar) {
  asm volatile(
      "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 "
      "[%0], [%1];" ::"r"(slot),
      "r"(bar)
      : "memory");
}
__device__ __forceinline__ void clc_try_cancel(unsigned slot, unsigned bar) {
  asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];" ::"r"(
                   slot),
               "r"(bar)
               : "memory");
}
// Decodes a response: the x ctaid of the canceled cluster's first CTA, or NONE.
__device__ __forceinline__ unsigned clc_first_ctaid_x(uint4 r) {
  unsigned ok, x;
  asm volatile(
      "{\n\t.reg .b128 resp;\n\t.reg .pred p;\n\t"
      "mov.b128 resp, {%2, %3, %4, %5};\n\t"
      "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, resp;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t"
      "@p clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %1, resp;\n}"
      : "=r"(ok), "=r"(x)
      : "r"(r.x), "r"(r.y), "r"(r.z), "r"(r.w));
  return ok ? x : NONE;
}
#endif
}  // namespace ptx

// n / d for n < 2^31, with (mul, shr) from the host (runtime/launch/stream.c fastdiv): mul 0
// means d == 1.
__device__ __forceinline__ unsigned fastdiv(unsigned n, unsigned mul, unsigned shr) {
  return mul ? ptx::umulhi(n, mul) >> shr : n;
}

// One trace record (include/clcrt.h: clcrt_trace_record), written as three 16-byte stores.
// The buffer (runtime/trace/stream_trace.c): a header line ([0] capacity), the counter's line, then
// the records. One counter for the whole device keeps exactly the first `capacity` records
// however the tiles spread over SMs (per-SM counters cut busy SMs short, and a fallback pool
// cost every kernel 8 registers per thread, traced or not); past the capacity a record is
// only counted.
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

// A graph run's slot in the context's table (runtime/launch/sched_state.h), found by the launch's
// %gridid. %gridid tells apart the grids in flight (checked by tests/gpu_graph.c on every run
// of the suite) but is reused by later launches (measured on an H100, driver 580), so a slot
// belongs to the launch written in it only while that launch has clusters left to leave:
// {left, clusters} in one 64-bit word, read at once.
//
// A launch takes the first slot not live from its hash position (open addressing), under the
// table's lock (word 0 of the table's first line, held for a few loads and stores by a running
// thread, so waiting for it never waits for a cluster to start), and raises the table's reach
// (word 1: the longest probe any launch ever needed) to its distance. So a launch's slot is
// never further from its hash position than the reach, and a cluster looks only that far:
// a few slots, where a scan to the first never-used slot crossed all 256 once they had all
// been used (about 1.7 ms per graph run, measured on the H100). A cluster first looks without
// the lock (relaxed loads; a candidate is checked with acquire loads: live before and after
// the owner is read, so it cannot have changed hands in between, and this cluster's claims
// and its count on leaving are ordered after the slot's setup); failing that, it takes the
// lock and looks again (the reach read under the lock is current), and takes a slot if its
// launch has none yet. A cluster that finds the lock held waits for it to be released and
// looks again without it: the holder is usually a cluster of its own launch setting up the
// slot, so the clusters of a launch do not queue on the lock one after another. There is
// always a free slot: a device runs at most 128 grids at once, the table has 256 slots. Not
// inlined: it runs once per cluster.
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
    if (slot_live(st) && owner == g && slot_live(ptx::ld_acquire_gpu_u64((const unsigned long long *)(s + CLCRT__SLOT_COUNT))) &&
        ptx::ld_acquire_gpu_u64((const unsigned long long *)(s + CLCRT__SLOT_GRIDID)) == g &&
        slot_live(ptx::ld_acquire_gpu_u64((const unsigned long long *)(s + CLCRT__SLOT_COUNT))))
      return s;
    if (st == 0 && owner == 0) break;  // never used: no launch's probe went past it
  }
  return nullptr;
}

// Static: emitted only into the variants that call it (CLCRT_USE_GRAPH).
static __device__ __noinline__ unsigned *graph_slot(unsigned *table, unsigned num_clusters) {
  const unsigned long long g = ptx::sreg_gridid();
  const unsigned h = (unsigned)(g * 0x9E3779B97F4A7C15ull >> 56);
  bool locked = false;
#pragma unroll 1
  for (;;) {
    // The reach is written only under the lock.
    const unsigned reach = locked ? *(volatile unsigned *)(table + CLCRT__TABLE_REACH) : ptx::ld_acquire_gpu(table + CLCRT__TABLE_REACH);
    unsigned *s = find_slot(table, g, h, reach);
    if (!s && locked) {
      unsigned i = 0;
#pragma unroll 1
      for (; i < CLCRT__TABLE_SLOTS - 1; i++)
        if (!slot_live(ptx::ld_acquire_gpu_u64((const unsigned long long *)(table_slot(table, h + i) + CLCRT__SLOT_COUNT)))) break;
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

// V: the variant (CLCRT_USE_TRACE, CLCRT_USE_GRAPH, CLCRT_USE_PREEMPT above). OBS, the observed variant, records the
// timeline trace and the statistics when a run asks for them; a kernel compiled without has
// no code for them at all (their mere presence cost FIXED about 8% on the README demo and
// 9-11% on short runs on the H100). GRAPH and YIELD exist only in STEAL kernels.
template <int SCHED, unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V>
struct Scheduler {
  // Enumerators, not static constexpr members: NVRTC emits each of those as a global
  // variable in every cubin (a relocation and a load-time allocation apiece).
  enum : unsigned { CS = CX * CY * CZ, NWARPS = (NTHREADS + 31) / 32, LEADER_TID = (NWARPS - 1) * 32 };
  enum : bool {
    OBS = (V & CLCRT_USE_TRACE) != 0,
    GRAPH = SCHED == SCHED_STEAL && (V & CLCRT_USE_GRAPH) != 0,
    YIELD = SCHED == SCHED_STEAL && (V & CLCRT_USE_PREEMPT) != 0,
    ONE = SCHED == SCHED_STEAL && (V & CLCRT_USE_SHORT) != 0
  };
  enum : bool { REQUESTS = SCHED == SCHED_STEAL || SCHED == SCHED_CLC };
  // Whether responses arrive as async-proxy transactions (st.async, try_cancel). A 1-CTA
  // STEAL kernel is launched without a cluster, where st.async is not allowed: its leader
  // writes the slot with an ordinary store and a release-arrive on the full barrier.
  enum : bool { TX = !(SCHED == SCHED_STEAL && CS == 1) };
  // Response slots: a response is published at most one ahead of the leader's CTA.
  enum : unsigned { NSLOT = 2 };

  // In shared memory: the response ring, and STEAL's claim state, which only the leader
  // touches (kept out of registers, which every thread of the CTA would pay for while the
  // tile function runs: more registers, fewer CTAs per SM).
  struct Ring {
    uint4 slot[NSLOT];
    unsigned long long full[NSLOT];
    unsigned long long empty[NSLOT];
    // Read and written by the leader alone (see lead_ready for how other warps skip them).
    unsigned * ctr;                  // the run's claim counter
    unsigned long long * slot_state; // graph runs (GRAPH): the table slot's {clusters that left, clusters}
    long long t0;                   // clock64 when the leader's current units began (lead_publish)
    unsigned long long trace_t0;    // trace: %globaltimer when thread 0 called the tile function
    unsigned pub;                   // responses published
    unsigned remaining;             // units left after the last claim, as that claim saw it
    unsigned t_unit;                // cycles per unit, as the leader measured them (0: unknown)
    unsigned exhausted;             // a failed claim was published: never claim again
    unsigned late;                  // the cluster started after every unit was claimed
  };

  // Where the launch gave it one (RING_BYTES after the tile function's dynamic shared
  // memory): always for CLC; for STEAL only when the run claims (claims()) or is traced
  // (trace_t0). A run whose units are all some cluster's own launches with no shared
  // memory of the scheduler's: measured on the H100, shared memory in a kernel costs short
  // back-to-back runs about 0.3 us each.
  enum : unsigned { RING_BYTES = CLCRT__RING_BYTES };

  const Params &p;
  Ring *ring;
  unsigned rbase;    // ring's shared-memory address
  unsigned tid, rank;
  uint3 rcoord;      // this CTA's coordinate in its cluster
  unsigned k;        // responses consumed so far by this CTA
  unsigned units_run;
  bool leader;       // the one thread of the cluster that makes requests
  bool leader_warp;  // its warp (the same for every lane: a uniform branch skips the leader's work)

  __device__ __forceinline__ Scheduler(const Params &params, Ring *r) : p(params), ring(r), k(0), units_run(0) {
    rbase = r ? ptx::smem_addr(r) : 0;
    tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    if (CS > 1) {
      rank = ptx::sreg_cluster_ctarank();
      rcoord = ptx::sreg_cluster_ctaid();
    } else {
      rank = 0;
      rcoord = make_uint3(0, 0, 0);
    }
    leader = rank == 0 && tid == LEADER_TID;
    leader_warp = rank == 0 && tid / 32 == NWARPS - 1;
  }

  __device__ __forceinline__ unsigned cluster_id() const { return CS > 1 ? ptx::sreg_clusterid_x() : blockIdx.x; }
  // STEAL: cluster c < claim_base starts with unit c (no claim, as FIXED and CLC do), and
  // claims hand out the units from claim_base on. A persistent grid's clusters all have a
  // unit of their own (claim_base = clusters); a grid that may yield gives one to the
  // clusters that fit at once, and its reserve clusters claim every unit they run, so the
  // clusters not yet started can be stolen from. An explicitly full grid claims every unit.
  // ONE: launched only for runs that claim nothing (claim_base = num_units).
  __device__ __forceinline__ bool own_first() const {
    return SCHED == SCHED_STEAL && (ONE || cluster_id() < p.claim_base);
  }
  __device__ __forceinline__ bool claims() const { return SCHED != SCHED_STEAL || (!ONE && p.claim_base < p.num_units); }
  // The lanes of this thread's warp: a block whose size is not a multiple of 32 has a
  // partial last warp.
  __device__ __forceinline__ unsigned warp_mask() const {
    return NTHREADS % 32 == 0 || tid / 32 < NWARPS - 1 ? 0xffffffffu : (1u << (NTHREADS % 32)) - 1u;
  }
  __device__ __forceinline__ bool thread0() const { return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0; }
  // A run captured into a graph that claims (only a GRAPH variant is launched so; see init for
  // one that does not), and one that may yield (only a YIELD variant is launched with
  // preemption words).
  __device__ __forceinline__ bool graph_run() const { return GRAPH && (p.flags & CLCRT__PF_GRAPH); }
  __device__ __forceinline__ bool yields() const { return YIELD && p.yield != nullptr; }


  // Shared-memory addresses of the ring's parts, from its 32-bit base (a generic pointer
  // converted on every use costs a dozen instructions per unit in every warp). Ring is
  // slot[NSLOT] (16 bytes each), then full[NSLOT] and empty[NSLOT] (8 bytes each).
  __device__ __forceinline__ unsigned slot_addr(unsigned s) const { return rbase + 16 * s; }
  __device__ __forceinline__ unsigned full_addr(unsigned s) const { return rbase + 16 * NSLOT + 8 * s; }
  __device__ __forceinline__ unsigned empty_addr(unsigned s) const { return rbase + 24 * NSLOT + 8 * s; }

  // Barriers initialised and every slot's first phase armed in every CTA before any
  // request can be made: a cluster barrier orders it. STEAL's leader finds the run's
  // counter first and tells its cluster whether anything is left: a cluster that starts
  // after every unit was claimed (most of a full grid's) leaves after one load and this
  // barrier. Returns whether the cluster has work to look for.
  __device__ __forceinline__ bool init() {
    if (!REQUESTS) return true;
    if (SCHED == SCHED_STEAL && !claims()) {
      // Every unit is some cluster's own: nothing to claim, no ring (none was launched
      // unless the run is traced). The stream's counter for the next run is still zeroed
      // (as locate_state does), unless the run was captured into a graph: such a run is
      // launched without the graph variant (the runtime's clcrt_run), and replays of it may
      // run beside the stream's own runs. Thread x 0 of the CTAs at x 0 (more than one on a
      // 2-D or 3-D grid: the same zero, and nothing else writes that counter during this run):
      // a cheaper test than the leader's, which every thread of every CTA of a run of one
      // cluster per unit evaluates (tid, rank: about a dozen instructions per tile).
      // A predicated store, not a branch: a branch around it costs these kernels a
      // convergence region (BSSY/BSYNC) ahead of the tile's first load.
      ptx::zero_claims_if(threadIdx.x == 0 && blockIdx.x == 0 && !(p.flags & CLCRT__PF_GRAPH), next_claims());
      return true;
    }
    if (SCHED == SCHED_STEAL && leader) {
      if (GRAPH) ring->slot_state = nullptr;
      ring->pub = ring->remaining = ring->t_unit = ring->exhausted = 0;
      ring->t0 = clock64();
      locate_state();
      // A cluster of several CTAs learns it the ordinary way (a failed first claim): its
      // other CTAs' shared memory may not be written before the cluster barrier. A cluster
      // with a unit of its own is never late.
      if (CS == 1)
        ring->late = ring->exhausted =
            !own_first() && ptx::ld_relaxed_gpu(ring->ctr) >= p.num_units - p.claim_base ? 1u : 0u;
      // A run that may yield counts the clusters that started with work left (the word after
      // the counter; no result needed): see may_leave.
      if (yields() && !(CS == 1 && ring->late)) ptx::red_add_relaxed_gpu(ring->ctr + CLCRT__LINE_STARTED, 1u);
    }
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
    return !(SCHED == SCHED_STEAL && CS == 1 && ring->late);
  }

  // ---- STEAL ------------------------------------------------------------------------

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
  // The previous run on this stream, which used the other counter, has finished; the next
  // one will use it. Any cluster may reset it at any time during this run: cluster 0 does.
  // The stream's claim line of its next run (runs alternate between two).
  __device__ __forceinline__ unsigned *next_claims() const {
    return (unsigned *)p.state + ((p.seq + 1u) & 1u) * CLCRT__LINE_WORDS;
  }
  __device__ __forceinline__ void zero_next_claims() const {
    if (cluster_id() == 0) ptx::zero_claims(next_claims());
  }

  // Whether a higher priority than this run's is active on the device (preemption). Only
  // the words handed out so far are read: one 16-byte load while at most four streams of
  // higher priority were ever created (the usual case).
  __device__ __forceinline__ bool must_yield() const {
    unsigned hi = 0;
#pragma unroll 1
    for (unsigned i = 0; i < p.yield_words; i += 4) {
      uint4 v = ptx::ld_relaxed_gpu_v4(p.yield + i);
      hi = max(hi, max(max(v.x, v.y), max(v.z, v.w)));
    }
    return hi > p.prio;
  }
  // Whether this cluster may leave: only while at least a wave of clusters (as many as run
  // at once) has not started, so the units it leaves are picked up at full width. The last
  // cluster to start with work left never leaves, so every unit is claimed by someone. (A
  // cluster that started after every unit was claimed is not counted: nothing is left then,
  // and nothing is ever left again.)
  __device__ __forceinline__ bool may_leave() const {
    return ptx::ld_relaxed_gpu(ring->ctr + CLCRT__LINE_STARTED) + p.active <= p.num_clusters;
  }

  // Claims the next run of units for the cluster. A cluster's first unit is run even while
  // the run is told to yield (a unit of its own, or its first claim, pub == 0), so every
  // cluster that starts does at least one unit.
  // In two halves so that a claim made ahead can be in flight while the leader runs its
  // units: issue() returns {counter value, units asked for} ({NONE, 0}: no claim), and
  // result() turns that into the response.
  __device__ __forceinline__ uint2 issue() {
    if (yields() && (ring->pub != 0 || own_first()) && must_yield() && may_leave()) return make_uint2(NONE, 0);
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

  // STEAL: the leader publishes response number pub (the run of units r) to every CTA.
  __device__ __forceinline__ void publish(uint2 r) {
    if (r.y == 0) ring->exhausted = 1;
    unsigned n = ring->pub++, s = n % NSLOT;
    if (n >= NSLOT) ptx::wait_parity(empty_addr(s), (n / NSLOT - 1) & 1);
    uint4 v = make_uint4(r.x, r.y, 0, 0);
    if (!TX) {
      ptx::st_shared_v4(slot_addr(s), v);
      ptx::arrive_local(full_addr(s));  // release: the store is seen by whoever waits
      return;
    }
    // The slot was read through the generic proxy; order those reads (acquired through the
    // empty barrier) before this async-proxy write.
    ptx::fence_proxy_async();
#pragma unroll
    for (unsigned c = 0; c < CS; c++)
      ptx::st_async_v4(ptx::mapa(slot_addr(s), c), v, ptx::mapa(full_addr(s), c));
  }

  // Reads response number k from this CTA's ring and hands the slot back. With responses
  // through the async proxy, lane 0 of each warp reads the 16 bytes with one 128-bit load
  // after its CTA's barrier completed and broadcasts the decoded run of units; without (a
  // 1-CTA STEAL kernel), every thread reads them. All lanes of all warps decode the same response.
  __device__ __forceinline__ uint2 consume() {
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
      return make_uint2(v.x, v.y | v.z | v.w);
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
      start = v.x;
      count = v.y | v.z | v.w;  // z and w are 0: keeps the load one 128-bit LDS
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
      if (SCHED == SCHED_CLC) {
        unsigned x = ptx::clc_first_ctaid_x(v);
        start = x == NONE ? 0 : x / CX;
        count = x == NONE ? 0 : 1;
      }
#endif
    }
    k++;
    return make_uint2(__shfl_sync(warp_mask(), start, 0), __shfl_sync(warp_mask(), count, 0));
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

  // Whether the leader claims ahead: the claim is issued before the current units run and
  // published after them, so its latency hides behind them. Never at the tail (nothing is
  // held back from other clusters there). Clusters of several CTAs do (a claim made when
  // needed would keep every CTA of the cluster waiting for it); a 1-CTA cluster does not
  // (unless compiled with -DCLCRT_STEAL_EARLY=1): its claim's latency is then the leader
  // warp's alone, and the CTA's other warps and the SM's other CTAs cover it.
  enum : bool { AHEAD = CS > 1 || CLCRT_STEAL_EARLY };  // whether the leader ever claims ahead
  __device__ __forceinline__ bool claim_ahead() const {
    if (!AHEAD || ring->exhausted || ring->pub != k) return false;
    return ring->remaining > 2 * p.active;
  }

  // The first run of units of a cluster that makes no requests (CLC's first is its own too).
  __device__ __forceinline__ uint2 own() const {
    unsigned own = cluster_id();
    return make_uint2(own, own < p.num_units ? 1u : 0u);
  }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  // CLC: request the next unit before the current one runs; its latency hides behind it.
  __device__ __forceinline__ void clc_request() {
    unsigned s = k % NSLOT;
    if (k >= NSLOT) ptx::wait_parity(empty_addr(s), (k / NSLOT - 1) & 1);
    ptx::fence_proxy_async();
    if (CS > 1)
      ptx::clc_try_cancel_multicast(slot_addr(s), full_addr(s));
    else
      ptx::clc_try_cancel(slot_addr(s), full_addr(s));
  }
#endif

  // One unit: this CTA's tile of it, unless padded. Returns 1 when the tile function ran.
  template <class Body>
  __device__ __forceinline__ unsigned run_unit(unsigned u, bool traced, Body &body) {
    unsigned ux, uy, uz;
    decompose(u, ux, uy, uz);
    return run_at(u, ux, uy, uz, traced, body);
  }
  // Unit u's coordinate in the grid of units. No branch for 1-D grids: the general
  // decomposition costs a few multiplications, less than the instructions a branch's
  // predicated other side issues anyway.
  __device__ __forceinline__ void decompose(unsigned u, unsigned &ux, unsigned &uy, unsigned &uz) const {
    unsigned t = fastdiv(u, p.div1_mul, p.div1_shr);
    ux = u - t * p.units[0];
    uz = fastdiv(t, p.div2_mul, p.div2_shr);
    uy = t - uz * p.units[1];
  }
  // Unit u at unit coordinate (ux, uy, uz).
  template <class Body>
  __device__ __forceinline__ unsigned run_at(unsigned u, unsigned ux, unsigned uy, unsigned uz, bool traced,
                                            Body &body) {
    Tile tile;
    tile.coord = make_uint3(ux * CX + rcoord.x, uy * CY + rcoord.y, uz * CZ + rcoord.z);
    tile.cta_rank = rank;
    tile.unit = u;
    tile.iteration = units_run++;
    // Padded tiles exist only when the grid does not divide by the cluster shape.
    if (CS > 1 && !(tile.coord.x < p.tiles[0] && tile.coord.y < p.tiles[1] && tile.coord.z < p.tiles[2])) return 0;
    // With 1-CTA clusters the unit is the tile (units == tiles), so its index is the linear
    // one: no multiplications, and a tile function that reads only linear leaves the unit's
    // decomposition to dead-code elimination.
    tile.linear = CS == 1 ? (unsigned long long)u
                          : tile.coord.x + (unsigned long long)p.tiles[0] *
                                               (tile.coord.y + (unsigned long long)p.tiles[1] * tile.coord.z);
    // Thread 0 keeps the start time in the ring's shared memory where there is one (not in
    // a register every thread would hold while the tile function runs).
    unsigned long long t0 = 0;
    if (traced) {
      t0 = ptx::globaltimer();
      if (REQUESTS) ring->trace_t0 = t0;
    }
    body(tile);
    if (traced)
      trace_record(p, REQUESTS ? ring->trace_t0 : t0, ptx::globaltimer(), tile.linear, u,
                   SCHED == SCHED_FIXED || ONE ? u : cluster_id(), rank, REQUESTS && tile.iteration > 0);
    return 1;
  }

  template <class Body>
  __device__ __forceinline__ void run(Body &&body) {
    if (init()) work(body);
    finish();  // one call site: each inlined copy costs NVRTC time
  }

  // The units of this CTA (init() found work to look for).
  template <class Body>
  __device__ __forceinline__ void work(Body &body) {
    unsigned tiles_here = 0;  // differs from units_run only where clusters have padded tiles
    // Only the observed variant records (the runtime launches it for traced runs).
    const bool traced = OBS && CLCRT_TRACE && p.trace && thread0();
    if constexpr (SCHED == SCHED_FIXED || ONE) {
      // One unit per cluster (the grid has one cluster per unit): no loop around the tile
      // function, as in a hand-written kernel. STEAL's ONE variant runs as FIXED does: its
      // runs have one cluster per unit (a short run's clusters all fit at once; a run of long
      // units the GPU's block scheduler hands out, see runtime/launch/launch.c).
      // Launched as a 3-D grid of units where it fits (CLCRT__PF_GRID3): the unit's coordinate is
      // the cluster's, with no division, as in a hand-written kernel.
      unsigned u, ux, uy, uz;
      if (p.flags & CLCRT__PF_GRID3) {
        uint3 c = CS > 1 ? ptx::sreg_clusterid() : blockIdx;
        ux = c.x, uy = c.y, uz = c.z;
        u = ux + p.units[0] * (uy + p.units[1] * uz);
      } else {
        u = cluster_id();
        decompose(u, ux, uy, uz);
      }
      tiles_here = run_at(u, ux, uy, uz, traced, body);
      if (OBS && p.stats && thread0()) record(tiles_here);
      return;
    }
    // Kept in a register: the compiler would otherwise reload the parameters behind them for
    // every unit. Bit 0: traced; bit 1: a STEAL run that claims.
    unsigned flags = (traced ? 1u : 0u) | (SCHED == SCHED_STEAL && claims() ? 2u : 0u);
    asm volatile("" : "+r"(flags));
    uint2 r = make_uint2(0, 0);
    bool need = SCHED == SCHED_STEAL && !own_first();  // the next step reads a response
    if (!need) r = own();
#pragma unroll 1
    for (;;) {
      // One pass per response: the other warps run only the wait, the read and the units.
      if (SCHED == SCHED_STEAL && need) {
        // The first response, or (with nothing claimed ahead) the next one: claim now.
        // r: the units just run (none before a cluster's first claim).
        if (leader_warp && leader && lead_ready()) lead_publish(r.y, nullptr);
        r = consume();
      }
      if (r.y == 0) break;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
      if (SCHED == SCHED_CLC && leader) clc_request();
#endif
      uint2 ahead = make_uint2(NONE, 0);  // a STEAL claim in flight while the units run
      if (SCHED == SCHED_STEAL && AHEAD && leader_warp && leader && claims() && claim_ahead()) {
        ahead = issue();
        ring->t0 = clock64();
      }
      // Not unrolled: the optimiser would copy the tile function into every unrolled path,
      // multiplying NVRTC's time and the code.
#pragma unroll 1
      for (unsigned i = 0; i < r.y; i++) tiles_here += run_unit(r.x + i, OBS && (flags & 1u), body);
      if (SCHED == SCHED_STEAL && AHEAD && leader_warp && leader && ahead_pending(ahead))
        lead_publish(r.y, &ahead);  // claimed before these units ran
      if (SCHED == SCHED_STEAL && (ONE || !(flags & 2u))) break;
      if (SCHED == SCHED_STATIC) {
        unsigned n = r.x + (CS > 1 ? ptx::sreg_nclusterid_x() : gridDim.x);
        r = make_uint2(n, n < p.num_units && n > r.x ? 1u : 0u);
      } else {
        need = true;  // STEAL and CLC read the next response
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
        if (SCHED == SCHED_CLC) {
          r = consume();
          need = false;
        }
#endif
      }
    }
    if (OBS && p.stats && thread0()) record(tiles_here);
  }

  // No CTA of a cluster leaves while another may still reach into its shared memory: the
  // scheduler's barriers, and whatever the tile function shares across the cluster (a
  // pipeline's barriers, multicast loads), under every scheduler. A graph run's clusters
  // count themselves out of their table slot.
  __device__ __forceinline__ void finish() {
    if (GRAPH && claims() && leader && ring->slot_state)
      ptx::red_add_release_gpu_u64(ring->slot_state, 1ull);
    // The first clusters of a claiming run report how long their units took (each its own
    // word: no atomics); the runtime reads them when it sizes the kernel's next runs.
    if (SCHED == SCHED_STEAL && claims() && leader && p.unit_cycles) {
      const unsigned c = cluster_id(), t = ring->t_unit;
      if (c < CLCRT__HINT_WORDS && t) ptx::st_relaxed_sys(p.unit_cycles + c, t);
    }
    if (CS > 1) ptx::cluster_sync();
  }

  __device__ __forceinline__ void record(unsigned tiles_here) {
    unsigned long long *st = p.stats;
    atomicAdd(&st[0], (unsigned long long)tiles_here);
    atomicAdd(&st[4 + (ptx::sreg_smid() & 1023u)], (unsigned long long)tiles_here);
    if (rank == 0 && units_run > 0) {
      atomicAdd(&st[1], (unsigned long long)(units_run - 1));
      atomicAdd(&st[2], 1ull);
      atomicMax(&st[3], (unsigned long long)units_run);
    }
  }
};

// The dynamic shared memory the tile function may use (smem_bytes of the descriptor).
__device__ __forceinline__ void *smem() {
  extern __shared__ __align__(128) unsigned char clcrt__dyn_smem[];
  return clcrt__dyn_smem;
}

// RING_OFF: where STEAL's and CLC's response ring starts in dynamic shared memory, after the
// tile function's smem_bytes (a constant, so that its addresses cost no registers).
template <int SCHED, unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned RING_OFF, unsigned V,
          class Body>
__device__ __forceinline__ void run(const Params &p, Body &&body) {
  using S = Scheduler<SCHED, CX, CY, CZ, NTHREADS, V>;
  if (SCHED == SCHED_STEAL || SCHED == SCHED_CLC) {
    static_assert(sizeof(typename S::Ring) <= S::RING_BYTES, "the response ring outgrew CLCRT__RING_BYTES");
    S s(p, (typename S::Ring *)((unsigned char *)smem() + RING_OFF));
    s.run(body);
  } else {
    S s(p, nullptr);
    s.run(body);
  }
}

}  // namespace clcrt
