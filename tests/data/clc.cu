// Test fixture (sm_100a only): a kernel that issues clusterlaunchcontrol.try_cancel in its
// multicast form, so that the cubin carries UGETNEXTWORKID.BROADCAST; a second one uses the
// CTA-local form (.SELFCAST).
#include <stdint.h>

__device__ __forceinline__ void mbar_init(uint64_t *bar, unsigned count) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect(uint64_t *bar, unsigned bytes) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(a), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, unsigned phase) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}" ::"r"(a),
      "r"(phase)
      : "memory");
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) clc_multicast(int *out) {
  __shared__ __align__(16) uint4 resp;
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) mbar_init(&bar, 1);
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
  unsigned phase = 0;
  int n = 0;
  for (;;) {
    if (threadIdx.x == 0) {
      mbar_expect(&bar, 16);
      unsigned cta_rank;
      asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(cta_rank));
      if (cta_rank == 0) {
        unsigned r = (unsigned)__cvta_generic_to_shared(&resp), b = (unsigned)__cvta_generic_to_shared(&bar);
        asm volatile(
            "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 "
            "[%0], [%1];" ::"r"(r),
            "r"(b)
            : "memory");
      }
    }
    mbar_wait(&bar, phase);
    phase ^= 1;
    unsigned ok;
    asm volatile(
        "{\n .reg .b128 r;\n .reg .pred p;\n ld.shared.b128 r, [%1];\n"
        " clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, r;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(ok)
        : "r"((unsigned)__cvta_generic_to_shared(&resp)));
    if (!ok) break;
    ++n;
    asm volatile("fence.proxy.async.shared::cta;\nbarrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
  }
  if (threadIdx.x == 0) out[blockIdx.x] = n;
}

extern "C" __global__ void clc_selfcast(int *out) {
  __shared__ __align__(16) uint4 resp;
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) {
    mbar_init(&bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    mbar_expect(&bar, 16);
    unsigned r = (unsigned)__cvta_generic_to_shared(&resp), b = (unsigned)__cvta_generic_to_shared(&bar);
    asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];" ::"r"(r),
                 "r"(b)
                 : "memory");
  }
  __syncthreads();
  mbar_wait(&bar, 0);
  if (threadIdx.x == 0) out[blockIdx.x] = resp.x;
}
