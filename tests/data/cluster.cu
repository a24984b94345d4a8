// Test fixture: a __cluster_dims__ kernel with static shared memory, a required block size,
// distributed shared memory across the cluster and an mbarrier.
#include <stdint.h>
struct Args {
  float *x;
  long n;
  float alpha;
  int pad[5];
};

extern "C" __global__ void __cluster_dims__(2, 2, 1) __launch_bounds__(256)
    cluster_kernel(const __grid_constant__ Args a) {
  __shared__ float buf[1024];
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) {
    unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
  }
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < a.n ? a.x[i] : 0.0f;
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
  unsigned peer;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(peer));
  peer ^= 1;
  unsigned local = (unsigned)__cvta_generic_to_shared(&buf[threadIdx.x]), remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(peer));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote));
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
  if (i < a.n) a.x[i] = v * a.alpha;
}

extern "C" __global__ void plain_kernel(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
