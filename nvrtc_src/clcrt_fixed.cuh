// clcrt device template: FIXED, one cluster per unit (any architecture): every cluster runs
// the unit it was launched for and leaves, with no loop around the tile function, as in a
// hand-written kernel (the tile loop's one-unit path, clcrt_loop.cuh). STEAL's SHORT variant
// runs the same way.
#pragma once

namespace clcrt {

template <unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V>
struct Fixed : Cta<CX, CY, CZ, NTHREADS, V> {
  using Base = Cta<CX, CY, CZ, NTHREADS, V>;
  enum : bool { ONE_UNIT = true };

  __device__ __forceinline__ explicit Fixed(const Params &params) : Base(params, nullptr) {}

  __device__ __forceinline__ bool init() { return true; }
  __device__ __forceinline__ void finish() { this->leave(); }
};

}  // namespace clcrt
