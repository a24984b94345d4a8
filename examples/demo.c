/* `make demo`: the README example. Compiles the scale tile function for sm_90a and sm_100a
 * with no GPU (compile-only runtimes) and prints each kernel's resources, whether it holds
 * the Cluster Launch Control instruction, and its cold compile time. Where a GPU is
 * present it then runs the example under every scheduler the device supports, checks the
 * result against the CPU and prints the time of each next to its compile time.
 *
 * The device buffers and timing events go through the runtime's own driver table
 * (clcrt_runtime_driver) so that this program also starts on machines without libcuda. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h> /* types only: the calls go through the runtime's driver table */

#include "clcrt.h"

static const char *k_source =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= a.alpha;\n"
    "}\n";

typedef struct ScaleArgs {
  float *x;
  long n;
  float alpha;
} ScaleArgs;

static clcrt_tile_desc scale_desc(clcrt_sched sched) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = k_source;
  d.tile_fn = "scale_tile";
  d.args_type = "ScaleArgs";
  d.block = (clcrt_dim3){256, 1, 1};
  d.sched = sched;
  return d;
}

static const clcrt_sched k_scheds[] = {CLCRT_SCHED_CLC, CLCRT_SCHED_STEAL, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};

static int compile_only(const char *arch) {
  clcrt_runtime *rt = NULL;
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = arch;
  o.cache_dir = ""; /* cold compiles: the demo shows NVRTC's time */
  if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) {
    printf("%s: %s\n", arch, clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
    return 1;
  }
  for (size_t i = 0; i < sizeof k_scheds / sizeof k_scheds[0]; i++) {
    clcrt_tile_desc d = scale_desc(k_scheds[i]);
    clcrt_kernel *k = NULL;
    clcrt_status st = clcrt_register(rt, &d, &k);
    if (st == CLCRT_E_UNSUPPORTED) {
      printf("  %-8s %-7s  not available: %s\n", arch, clcrt_sched_name(k_scheds[i]), clcrt_errmsg(rt));
      continue;
    }
    if (st != CLCRT_OK) {
      printf("  %-8s %-7s  %s: %s\n", arch, clcrt_sched_name(k_scheds[i]), clcrt_status_name(st), clcrt_errmsg(rt));
      clcrt_runtime_destroy(rt);
      return 1;
    }
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    clcrt_kernel_info_get(k, &info);
    printf("  %-8s %-7s  %-26s regs %3d  stack %3d B  smem %5u B  CLC instruction %-3s  cold compile %6.1f ms\n", arch,
           clcrt_sched_name(info.sched), info.name, info.registers, info.stack_bytes, info.static_smem,
           info.has_clc ? "yes" : "no", info.compile_ms);
  }
  clcrt_runtime_destroy(rt);
  return 0;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static int run_on_gpu(void) {
  clcrt_runtime *rt = NULL;
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = "";
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  if (st != CLCRT_OK) {
    printf("\nNo GPU run: %s\n", clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
    return 0;
  }
  const clcrt_driver *cu = clcrt_runtime_driver(rt);
  cu->cuCtxSetCurrent(clcrt_runtime_context(rt));
  const long n = 1l << 26; /* 64 Mi floats: 256 MiB read + 256 MiB written per run */
  float *hx = malloc((size_t)n * 4), *hy = malloc((size_t)n * 4);
  for (long i = 0; i < n; i++) hx[i] = (float)((i * 2654435761u) % 1000003) / 1000003.0f - 0.5f;
  CUdeviceptr dx = 0;
  int rc = 1;
  clcrt_stream *s = NULL;
  CUevent e0 = NULL, e1 = NULL;
  if (!hx || !hy || cu->cuMemAlloc(&dx, (size_t)n * 4) != CUDA_SUCCESS) goto out;
  if (clcrt_stream_create(rt, NULL, &s) != CLCRT_OK) goto out;
  cu->cuEventCreate(&e0, 0);
  cu->cuEventCreate(&e1, 0);
  printf("\nRunning on the GPU (%s, %d SMs): x *= 1.5 over %ld floats, 256 threads per tile\n",
         clcrt_runtime_arch(rt), clcrt_runtime_num_sms(rt), n);
  printf("  %-7s %10s %10s %12s %8s\n", "sched", "compile", "median", "bandwidth", "result");
  for (size_t i = 0; i < sizeof k_scheds / sizeof k_scheds[0]; i++) {
    clcrt_tile_desc d = scale_desc(k_scheds[i]);
    clcrt_kernel *k = NULL;
    if (clcrt_register(rt, &d, &k) != CLCRT_OK) {
      printf("  %-7s not available: %s\n", clcrt_sched_name(k_scheds[i]), clcrt_errmsg(rt));
      continue;
    }
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    clcrt_kernel_info_get(k, &info);
    ScaleArgs a = {(float *)(uintptr_t)dx, n, 1.5f};
    clcrt_dim3 tiles = {(unsigned)((n + 255) / 256), 1, 1};
    /* Correctness: one run on fresh data against the CPU. */
    cu->cuMemcpyHtoD(dx, hx, (size_t)n * 4);
    cu->cuStreamSynchronize(CU_STREAM_LEGACY); /* a pageable copy returns before it has landed */
    if (clcrt_run(s, k, tiles, &a, sizeof a) != CLCRT_OK || clcrt_stream_sync(s) != CLCRT_OK) {
      printf("  %-7s failed: %s\n", clcrt_sched_name(k_scheds[i]), clcrt_errmsg(rt));
      goto out;
    }
    cu->cuMemcpyDtoH(hy, dx, (size_t)n * 4);
    long bad = 0;
    for (long j = 0; j < n; j++) bad += hy[j] != hx[j] * 1.5f;
    /* Timing: warm up, then the median of 30 runs timed with events. */
    float ms[30];
    for (int w = 0; w < 5; w++) clcrt_run(s, k, tiles, &a, sizeof a);
    for (int r = 0; r < 30; r++) {
      cu->cuEventRecord(e0, clcrt_stream_cu(s));
      clcrt_run(s, k, tiles, &a, sizeof a);
      cu->cuEventRecord(e1, clcrt_stream_cu(s));
      cu->cuEventSynchronize(e1);
      cu->cuEventElapsedTime(&ms[r], e0, e1);
    }
    qsort(ms, 30, sizeof ms[0], cmp_float);
    double med = ms[15];
    printf("  %-7s %8.1f ms %7.3f ms %8.0f GB/s %8s\n", clcrt_sched_name(info.sched), info.compile_ms, med,
           2.0 * n * 4 / (med * 1e6), bad ? "WRONG" : "ok");
    if (bad) goto out;
  }
  rc = 0;
out:
  if (e0) cu->cuEventDestroy(e0);
  if (e1) cu->cuEventDestroy(e1);
  clcrt_stream_destroy(s);
  if (dx) cu->cuMemFree(dx);
  free(hx), free(hy);
  clcrt_runtime_destroy(rt);
  return rc;
}

int main(void) {
  printf("clcrt demo: the README's scale_tile, compiled with no GPU needed\n");
  if (compile_only("sm_90a") || compile_only("sm_100a")) return 1;
  return run_on_gpu();
}
