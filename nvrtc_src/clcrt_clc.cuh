// clcrt device template: CLC, the hardware scheduler (Cluster Launch Control, sm_100+). A
// cluster's first unit is its own; each next one is a cluster that has not started yet,
// canceled with clusterlaunchcontrol.try_cancel ... multicast::cluster::all, whose response
// lands in every CTA of the cluster through the response ring (clcrt_ring.cuh). A request
// fails when no cluster is left or when a higher-priority kernel wants the SMs; either way
// the cluster leaves, and the clusters not yet launched finish the work.
//
// The request is issued before the current unit runs, so its latency hides behind it. The
// runtime compiles CLC only for sm_100 and later (it refuses CLC below): elsewhere the
// request and the decoding are compiled out.
#pragma once

namespace clcrt {

template <unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V>
struct Clc : ResponseRing<CX, CY, CZ, NTHREADS, V, true> {
  using Base = ResponseRing<CX, CY, CZ, NTHREADS, V, true>;
  using Base::CS;
  using Base::k;
  using Base::leader;

  __device__ __forceinline__ Clc(const Params &params, Ring *r) : Base(params, r) {}

  __device__ __forceinline__ bool init() {
    this->init_ring();
    return true;
  }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  // Request k's slot is free once every warp read its previous response (ring invariant 3).
  __device__ __forceinline__ void clc_request() {
    unsigned s = k % NSLOT;
    if (k >= NSLOT) ptx::wait_parity(this->empty_addr(s), (k / NSLOT - 1) & 1);
    ptx::fence_proxy_async();
    if (CS > 1)
      ptx::clc_try_cancel_multicast(this->slot_addr(s), this->full_addr(s));
    else
      ptx::clc_try_cancel(this->slot_addr(s), this->full_addr(s));
  }
  // A response as a run of units: the canceled cluster's unit, or none.
  struct Decode {
    __device__ __forceinline__ uint2 operator()(uint4 v) const {
      unsigned x = ptx::clc_first_ctaid_x(v);
      return make_uint2(x == NONE ? 0 : x / CX, x == NONE ? 0 : 1);
    }
  };
#endif

  // ---- The tile loop's operations (clcrt_loop.cuh) ----

  // Before the units run: the leader requests the next unit.
  __device__ __forceinline__ void request(const uint2 &, uint2 &) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
    if (leader) clc_request();
#endif
  }
  // The next unit: the response to the request made before this one ran.
  __device__ __forceinline__ void advance(uint2 &r) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
    r = this->consume(Decode());
#else
    r = make_uint2(0, 0);
#endif
  }

  __device__ __forceinline__ void finish() { this->leave(); }
};

}  // namespace clcrt
