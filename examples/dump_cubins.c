/* Writes the README example's cubins, one per scheduler and architecture, into a folder:
 * the input for nvdisasm / cuobjdump when checking what the scheduler compiles to.
 * Usage: dump_cubins DIR */
#include <stdio.h>

#include "clcrt.h"

static const char *k_source =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= a.alpha;\n"
    "}\n";

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: dump_cubins DIR\n");
    return 2;
  }
  const char *archs[] = {"sm_90a", "sm_100a"};
  const clcrt_dim3 clusters[] = {{1, 1, 1}, {2, 1, 1}};
  for (int a = 0; a < 2; a++) {
    clcrt_runtime *rt = NULL;
    clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
    o.target_arch = archs[a];
    o.cache_dir = "";
    if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) {
      fprintf(stderr, "%s\n", clcrt_errmsg(rt));
      return 1;
    }
    for (int s = CLCRT_SCHED_CLC; s <= CLCRT_SCHED_FIXED; s++)
      for (int c = 0; c < 2; c++) {
        clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
        d.source = k_source, d.tile_fn = "scale_tile", d.args_type = "ScaleArgs";
        d.block = (clcrt_dim3){256, 1, 1};
        d.cluster = clusters[c];
        d.sched = (clcrt_sched)s;
        clcrt_kernel *k = NULL;
        if (clcrt_register(rt, &d, &k) != CLCRT_OK) continue; /* CLC on sm_90a */
        const void *data;
        size_t size;
        clcrt_kernel_cubin(k, &data, &size);
        clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
        clcrt_kernel_info_get(k, &info);
        char path[512];
        snprintf(path, sizeof path, "%s/%s_%s_c%u.cubin", argv[1], archs[a], info.name, clusters[c].x);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(data, 1, size, f) != size || fclose(f)) {
          perror(path);
          return 1;
        }
        const char *ptx;
        if (clcrt_kernel_ptx(k, &ptx) == CLCRT_OK) {
          snprintf(path, sizeof path, "%s/%s_%s_c%u.ptx", argv[1], archs[a], info.name, clusters[c].x);
          f = fopen(path, "w");
          if (f) fputs(ptx, f), fclose(f);
        }
      }
    clcrt_runtime_destroy(rt);
  }
  return 0;
}
