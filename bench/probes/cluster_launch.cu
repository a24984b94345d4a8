// What a thread-block cluster costs a short kernel, apart from any GEMM: back-to-back launches
// of a kernel whose CTAs each spin for a fixed time, launched without the cluster attribute and
// with clusters of 1, 2, 4 and 8 CTAs, with and without cluster barriers at the start and end,
// at a small and at a large dynamic shared-memory size (one CTA per SM).
//   nvcc -O2 -arch=sm_90a -o cluster_launch bench/probes/cluster_launch.cu && ./cluster_launch
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
namespace cg = cooperative_groups;

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}

template <bool SYNC>
__global__ void spin(unsigned ns, int *sink) {
  extern __shared__ int smem[];
  if (SYNC) cg::this_cluster().sync();
  unsigned long long t0 = gtime();
  while (gtime() - t0 < ns) { }
  if (threadIdx.x == 0) smem[0] = blockIdx.x;
  if (SYNC) cg::this_cluster().sync();
  if (threadIdx.x == 0 && smem[0] == -1) *sink = 1;
}

static float run(int cluster, bool sync, int grid, size_t smem, unsigned ns, int reps, int *sink) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1];
  cfg.gridDim = dim3(grid); cfg.blockDim = dim3(384); cfg.dynamicSmemBytes = smem;
  cfg.attrs = at; cfg.numAttrs = 0;
  if (cluster > 0) {
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = cluster; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
    cfg.numAttrs = 1;
  }
  auto k = sync ? spin<true> : spin<false>;
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> v;
  for (int round = 0; round < 9; round++) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < reps; i++) CK(cudaLaunchKernelEx(&cfg, k, ns, sink));
    CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); v.push_back(ms * 1000.f / reps);
  }
  std::sort(v.begin(), v.end());
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
  return v[v.size() / 2];
}

int main() {
  int *sink; CK(cudaMalloc(&sink, 4));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  size_t big = 200 * 1024;
  CK(cudaFuncSetAttribute(spin<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)big));
  CK(cudaFuncSetAttribute(spin<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)big));
  CK(cudaFuncSetAttribute(spin<true>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CK(cudaFuncSetAttribute(spin<false>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  printf("%d SMs; us per launch, median of 9 rounds of 200 back-to-back launches, 384 threads a CTA\n", sms);
  printf("| spin us | CTAs | smem KB | no attr | c1 | c2 | c4 | c8 | c2 sync | c4 sync | c8 sync |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  unsigned spins[] = {0, 5000, 10000};
  int grids[] = {112, 2 * sms};
  size_t smems[] = {1024, big};
  for (unsigned ns : spins)
    for (int g : grids)
      for (size_t sm : smems) {
        printf("| %.0f | %d | %zu |", ns / 1000.0, g, sm / 1024);
        printf(" %.2f |", run(0, false, g, sm, ns, 200, sink));
        int cs[] = {1, 2, 4, 8};
        for (int c : cs) printf(" %.2f |", run(c, false, g, sm, ns, 200, sink));
        for (int c : {2, 4, 8}) printf(" %.2f |", run(c, true, g, sm, ns, 200, sink));
        printf("\n");
        fflush(stdout);
      }
  int n = 0;
  for (int c : {1, 2, 4, 8}) {
    cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute at[1];
    cfg.gridDim = dim3(2 * sms); cfg.blockDim = dim3(384); cfg.dynamicSmemBytes = big;
    at[0].id = cudaLaunchAttributeClusterDimension; at[0].val.clusterDim.x = c;
    at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1; cfg.attrs = at; cfg.numAttrs = 1;
    CK(cudaOccupancyMaxActiveClusters(&n, spin<true>, &cfg));
    printf("max active clusters of %d at %zu KB: %d (%d CTAs)\n", c, big / 1024, n, n * c);
  }
  return 0;
}
