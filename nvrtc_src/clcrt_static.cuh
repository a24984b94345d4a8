// clcrt device template: STATIC, the persistent grid-stride scheduler (any architecture). A
// persistent grid (as many clusters as fit at once) starts each cluster on its own unit and
// strides by the number of clusters: no requests, no shared memory of the scheduler's, and
// no load balance when units differ in cost.
#pragma once

namespace clcrt {

template <unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V>
struct Static : Cta<CX, CY, CZ, NTHREADS, V> {
  using Base = Cta<CX, CY, CZ, NTHREADS, V>;
  using Base::CS;
  using Base::p;

  __device__ __forceinline__ explicit Static(const Params &params) : Base(params, nullptr) {}

  __device__ __forceinline__ bool init() { return true; }

  // ---- The tile loop's operations (clcrt_loop.cuh) ----

  // The next unit: this one plus the number of clusters, while it is a unit of the run (and
  // the sum did not wrap).
  __device__ __forceinline__ void advance(uint2 &r) {
    unsigned n = r.x + (CS > 1 ? ptx::sreg_nclusterid_x() : gridDim.x);
    r = make_uint2(n, n < p.num_units && n > r.x ? 1u : 0u);
  }

  __device__ __forceinline__ void finish() { this->leave(); }
};

}  // namespace clcrt
