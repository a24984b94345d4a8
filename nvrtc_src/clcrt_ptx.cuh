// clcrt device template: the inline PTX the schedulers use (namespace clcrt::ptx). Inline
// PTX rather than <cuda/ptx> or cooperative groups: those headers cost 100+ ms of NVRTC time
// on every cold compile. Each wrapper is one instruction (or one wait loop) with the memory
// semantics its name says; why a given ordering is needed is said where it is used
// (clcrt_ring.cuh for the response ring, clcrt_variant.cuh for the graph table).
#pragma once

// The suspend-time hint of the scheduler's mbarrier waits, in ns: a waiting warp sleeps until
// the phase completes (or this long) instead of polling. 0: no hint (the hardware's own
// limit, after which the wait loop polls again; kept for the benchmark's comparison).
#ifndef CLCRT_WAIT_HINT
#define CLCRT_WAIT_HINT 10000000
#endif

namespace clcrt {

// No unit, no claim, no canceled cluster.
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
__device__ __forceinline__ uint3 sreg_nclusterid() {
  uint3 r;
  asm("mov.u32 %0, %%nclusterid.x;" : "=r"(r.x));
  asm("mov.u32 %0, %%nclusterid.y;" : "=r"(r.y));
  asm("mov.u32 %0, %%nclusterid.z;" : "=r"(r.z));
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

// Programmatic dependent launch (sm_90+; runtime/launch/launch.c says when a run is launched
// with it). grid_dep_wait: returns once every grid this one depends on has completed and its
// memory operations are visible; a grid launched without the attribute has nothing to wait for
// and passes at once. grid_dep_launch: this CTA lets the stream's next grid start launching
// (once every CTA of this grid has said so or exited); it orders nothing, so where it stands
// decides only when the next grid's CTAs take SM resources, never what they read.
__device__ __forceinline__ void grid_dep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dep_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
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

}  // namespace clcrt
