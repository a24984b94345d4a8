/* Stand-alone probe (not part of the build): what a toolkit header costs a tile function's
 * cold compile. A one-line tile function, alone and after each header, registered nine times
 * in a compile-only sm_90a runtime with no disk cache (each source differs by a constant, so
 * every registration runs NVRTC); prints the median, fastest and slowest NVRTC time of each.
 *   cc -std=c11 -Iinclude bench/probes/nvrtc_headers.c build/libclcrt.a \
 *      -L/usr/local/cuda/lib64 -lnvrtc -Wl,-rpath,/usr/local/cuda/lib64 -l:libuv_a.a -ldl -lm -pthread \
 *      -o /tmp/nvrtc_headers && /tmp/nvrtc_headers
 * Results are quoted in docs/results.md (Compile, first runs, background builds). */
#include <stdio.h>
#include <stdlib.h>

#include "clcrt.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(void) {
  static const char *const headers[] = {NULL, "math_constants.h", "cuda_fp16.h", "cuda_bf16.h", "cuda/std/limits",
                                        "cuda/ptx", "cooperative_groups.h"};
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = "sm_90a";
  o.cache_dir = "";
  clcrt_runtime *rt = NULL;
  if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) {
    fprintf(stderr, "%s\n", clcrt_errmsg(rt));
    return 1;
  }
  for (size_t h = 0; h < sizeof headers / sizeof headers[0]; h++) {
    double ms[9];
    for (int rep = 0; rep < 9; rep++) {
      char src[512], inc[64] = "";
      if (headers[h]) snprintf(inc, sizeof inc, "#include <%s>\n", headers[h]);
      snprintf(src, sizeof src,
               "%sstruct A { float *x; int n; };\n"
               "__device__ void f(const clcrt::Tile &t, const A &a) { a.x[t.linear] = %d.0f + a.n; }\n",
               inc, rep * 10 + (int)h);
      clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
      d.source = src, d.tile_fn = "f", d.args_type = "A", d.block = (clcrt_dim3){128, 1, 1};
      clcrt_kernel *k = NULL;
      clcrt_kernel_info i = CLCRT_KERNEL_INFO_INIT;
      if (clcrt_register(rt, &d, &k) != CLCRT_OK || clcrt_kernel_info_get(k, &i) != CLCRT_OK) {
        fprintf(stderr, "%s\n", clcrt_errmsg(rt));
        return 1;
      }
      ms[rep] = i.compile_ms;
    }
    qsort(ms, 9, sizeof ms[0], cmp);
    printf("%-22s median %4.0f ms (%.0f-%.0f)\n", headers[h] ? headers[h] : "(no header)", ms[4], ms[0], ms[8]);
  }
  clcrt_runtime_destroy(rt);
  return 0;
}
