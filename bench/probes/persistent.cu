// Stand-alone probe (not part of the build): why a persistent grid loses to one block per tile
// on issue-bound compute tiles, and what a minimal dynamic scheduler costs. The bench's work
// tile (a chain of dependent FMAs per thread, cost from a table) under one block per tile, a
// grid-stride persistent grid (also with the next cost prefetched, a __syncthreads per tile,
// reversed order), a block-wide claim (atomicAdd by thread 0, two __syncthreads per tile; also
// with the claim issued before the tile), and a miniature of STEAL's 1-CTA protocol (a two-slot
// ring with full/empty mbarriers, the claim made by lane 0 of warp 7 or warp 0 after its part
// of the tile, waits polling or sleeping), on uniform, ramp and lognormal costs.
//   nvcc -O3 -arch=sm_90a -o probe bench/probes/persistent.cu && ./probe
// Results are quoted in docs/results.md (What limits STEAL).
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cmath>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
struct A { float *out; const unsigned *cost; unsigned long long ntiles; unsigned *ctr; };
__device__ __forceinline__ void body(unsigned long long i, unsigned n, const A &a) {
  float v = __fadd_rn(__fmul_rn((float)threadIdx.x, 1e-3f), (float)(i % 1024));
#pragma unroll 8
  for (unsigned k = 0; k < n; k++) v = fmaf(v, 0.99990f, 0.00013f);
  a.out[i * blockDim.x + threadIdx.x] = v;
}
__global__ void __launch_bounds__(256) k_block(const __grid_constant__ A a) { body(blockIdx.x, a.cost[blockIdx.x], a); }
__global__ void __launch_bounds__(256) k_persist(const __grid_constant__ A a) {
  for (unsigned long long t = blockIdx.x; t < a.ntiles; t += gridDim.x) body(t, a.cost[t], a);
}
__global__ void __launch_bounds__(256) k_persist_pf(const __grid_constant__ A a) {
  unsigned long long t = blockIdx.x;
  unsigned n = t < a.ntiles ? a.cost[t] : 0;
  for (; t < a.ntiles; t += gridDim.x) {
    unsigned long long nt = t + gridDim.x;
    unsigned nn = nt < a.ntiles ? a.cost[nt] : 0;
    body(t, n, a);
    n = nn;
  }
}
__global__ void __launch_bounds__(256) k_persist_sync(const __grid_constant__ A a) {
  for (unsigned long long t = blockIdx.x; t < a.ntiles; t += gridDim.x) { body(t, a.cost[t], a); __syncthreads(); }
}
__global__ void __launch_bounds__(256) k_persist_rev(const __grid_constant__ A a) {
  // warps of a CTA in reverse tile order across CTAs: CTA b takes tiles from the end
  for (long long t = (long long)a.ntiles - 1 - blockIdx.x; t >= 0; t -= gridDim.x) body(t, a.cost[t], a);
}
__global__ void __launch_bounds__(256) k_steal(const __grid_constant__ A a) {
  __shared__ unsigned next;
  unsigned t = blockIdx.x;
  for (;;) {
    if (t >= a.ntiles) break;
    body(t, a.cost[t], a);
    __syncthreads();
    if (threadIdx.x == 0) next = gridDim.x + atomicAdd(a.ctr, 1u);
    __syncthreads();
    t = next;
  }
}
__global__ void __launch_bounds__(256) k_steal_ahead(const __grid_constant__ A a) {
  __shared__ unsigned next[2];
  unsigned t = blockIdx.x, i = 0;
  if (threadIdx.x == 0) next[0] = gridDim.x + atomicAdd(a.ctr, 1u);
  __syncthreads();
  for (;;) {
    if (t >= a.ntiles) break;
    unsigned c = 0;
    if (threadIdx.x == 0) c = atomicAdd(a.ctr, 1u);  // in flight while the tile runs
    body(t, a.cost[t], a);
    if (threadIdx.x == 0) next[(i + 1) & 1] = gridDim.x + c;
    __syncthreads();
    t = next[i & 1];
    i++;
  }
}

template <int HINT>
__device__ __forceinline__ void mwait(unsigned bar, unsigned parity) {
  if (HINT)
    asm volatile("{\n\t.reg .pred p;\nW%=:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1, %2;\n\t@!p bra W%=;\n}" ::"r"(bar), "r"(parity), "n"(10000000) : "memory");
  else
    asm volatile("{\n\t.reg .pred p;\nW%=:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t@!p bra W%=;\n}" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ unsigned saddr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
// our 1-CTA protocol in miniature: warp 7 lane 0 claims after its part, 2-slot ring, full/empty mbarriers
template <int HINT, int LEADER_WARP>
__global__ void __launch_bounds__(256) k_mbar(const __grid_constant__ A a) {
  __shared__ unsigned slot[2];
  __shared__ unsigned long long full[2], empty[2];
  const unsigned tid = threadIdx.x;
  const bool leader = tid == LEADER_WARP * 32;
  if (tid == 0) {
    for (int s = 0; s < 2; s++) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(&full[s])), "r"(1));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(&empty[s])), "r"(256));
    }
  }
  __syncthreads();
  unsigned t = blockIdx.x, k = 0, pub = 0;
  for (;;) {
    if (t >= a.ntiles) break;
    body(t, a.cost[t], a);
    if (leader) {
      unsigned n = pub++, s = n & 1;
      unsigned v = gridDim.x + atomicAdd(a.ctr, 1u);
      if (n >= 2) mwait<HINT>(saddr(&empty[s]), ((n >> 1) - 1) & 1);
      slot[s] = v;
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(saddr(&full[s])) : "memory");
    }
    unsigned s = k & 1;
    mwait<HINT>(saddr(&full[s]), (k >> 1) & 1);
    t = *(volatile unsigned *)&slot[s];
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(saddr(&empty[s])) : "memory");
    k++;
  }
}
typedef void (*kfn)(A);
int main(int argc, char **argv) {
  int dev = 0, sms; CK(cudaSetDevice(dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const unsigned long long N = 20000;
  A a; a.ntiles = N;
  CK(cudaMalloc(&a.out, N * 256 * 4)); CK(cudaMalloc((void **)&a.cost, N * 4)); CK(cudaMalloc(&a.ctr, 4));
  std::vector<unsigned> hc(N);
  const char *cls[] = {"uniform", "ramp", "lognormal"};
  struct K { const char *name; kfn f; int persist; } ks[] = {
    {"block", k_block, 0}, {"persist", k_persist, 1}, {"persist-prefetch", k_persist_pf, 1},
    {"persist-sync", k_persist_sync, 1}, {"persist-reverse", k_persist_rev, 1},
    {"steal-min", k_steal, 1}, {"steal-min-ahead", k_steal_ahead, 1},
    {"mbar-poll-w7", k_mbar<0, 7>, 1}, {"mbar-hint-w7", k_mbar<1, 7>, 1}, {"mbar-poll-w0", k_mbar<0, 0>, 1},
    {"mbar-hint-w0", k_mbar<1, 0>, 1}};
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int c = 0; c < 3; c++) {
    unsigned long long seed = 12345;
    for (unsigned long long i = 0; i < N; i++) {
      double v = 1000;
      if (c == 1) v = 2000.0 * (i + 1) / N;
      if (c == 2) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull; double u1 = ((seed >> 11) + 0.5) / 9007199254740992.0;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull; double u2 = ((seed >> 11) + 0.5) / 9007199254740992.0;
        double z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2); v = 1000 * exp(z - 0.5);
      }
      hc[i] = v < 1 ? 1 : (unsigned)v;
    }
    CK(cudaMemcpy((void *)a.cost, hc.data(), N * 4, cudaMemcpyHostToDevice));
    double tb = 0;
    for (auto &k : ks) {
      int occ; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k.f, 256, 0));
      unsigned grid = k.persist ? occ * sms : N;
      std::vector<float> t;
      for (int r = 0; r < 40; r++) {
        CK(cudaMemset(a.ctr, 0, 4));
        cudaEventRecord(e0); k.f<<<grid, 256>>>(a); cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
        float ms; cudaEventElapsedTime(&ms, e0, e1); if (r >= 5) t.push_back(ms);
      }
      std::sort(t.begin(), t.end()); double med = t[t.size() / 2];
      if (!tb) tb = med;
      printf("%-10s %-18s grid %6u  %.4f ms  %.3fx block\n", cls[c], k.name, grid, med, tb / med);
    }
  }
  return 0;
}
