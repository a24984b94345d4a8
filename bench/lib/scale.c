/* Section "scale": y = a*x over 1 GiB of float32 (1 GiB read + 1 GiB written; 256 MiB with
 * --quick), tiles of 4, 16 and 64 KiB, cluster sizes 1, 2 and 4, with a device-to-device copy
 * of the same bytes as the ceiling: uniform memory-bound tiles. */
#include <string.h>

#include "bench.h"

/* PER float4 per thread, 256 threads: a tile is PER * 4 KiB. Loads first, then stores, so
 * PER independent 16-byte loads are in flight per thread. */
#define SCALE_COMMON \
  "struct ScaleArgs { const float4 *x; float4 *y; unsigned long long n4; float a; };\n" \
  "__device__ __forceinline__ void scale_body(unsigned long long tile, const ScaleArgs &a) {\n" \
  "  unsigned long long base = tile * (PER * 256ull) + threadIdx.x;\n" \
  "  float4 v[PER];\n" \
  "#pragma unroll\n" \
  "  for (int j = 0; j < PER; j++) { unsigned long long i = base + j * 256ull; if (i < a.n4) v[j] = a.x[i]; }\n" \
  "#pragma unroll\n" \
  "  for (int j = 0; j < PER; j++) { unsigned long long i = base + j * 256ull;\n" \
  "    if (i < a.n4) a.y[i] = make_float4(a.a * v[j].x, a.a * v[j].y, a.a * v[j].z, a.a * v[j].w); }\n" \
  "}\n"

const char *k_scale_src = SCALE_COMMON
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "#ifdef EXP_SMEM\n"
    "  __shared__ unsigned exp_smem[32];\n"
    "  if (a.n4 == 0) { exp_smem[threadIdx.x & 31] = 1; __syncwarp(); a.y[0].x = exp_smem[(threadIdx.x + 1) & 31]; }\n"
    "#endif\n"
    "#ifdef EXP_MBAR\n"
    "  if (a.n4 == 0) asm volatile(\"mbarrier.init.shared::cta.b64 [%0], 1;\" :: \"r\"((unsigned)__cvta_generic_to_shared(clcrt::smem())));\n"
    "#endif\n"
    "  scale_body(t.linear, a);\n"
    "}\n";

const char *k_scale_ref = SCALE_COMMON
    "extern \"C\" __global__ void __launch_bounds__(256) ref_block(const __grid_constant__ ScaleArgs a) {\n"
    "  scale_body(blockIdx.x, a);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) ref_persist(const __grid_constant__ ScaleArgs a, unsigned "
    "long long ntiles) {\n"
    "  for (unsigned long long t = blockIdx.x; t < ntiles; t += gridDim.x) scale_body(t, a);\n"
    "}\n";

void bench_scale(void) {
  const size_t bytes = quick ? (256ull << 20) : (1ull << 30);
  const unsigned long long n4 = bytes / 16;
  float *hx = malloc(bytes), *hy = malloc(bytes);
  srand(1);
  for (size_t i = 0; i < bytes / 4; i++) hx[i] = (float)rand() / RAND_MAX - 0.5f;
  CUdeviceptr x, y;
  CK(cu->cuMemAlloc(&x, bytes));
  CK(cu->cuMemAlloc(&y, bytes));
  bench_put(x, hx, bytes);
  lctx copy = {.src = x, .dst = y, .bytes = bytes};
  double copy_ms = time_median(launch_copy, &copy);
  printf("\nscale: y = a*x over %zu MiB float32; device-to-device copy of the same bytes: %.4f ms = %.0f GB/s "
         "(read + write)\n",
         bytes >> 20, copy_ms, 2.0 * bytes / (copy_ms * 1e6));
  emit("scale", "copy", 1, "copy", copy_ms, 0, 100.0);
  struct {
    CUdeviceptr x, y;
    unsigned long long n4;
    float a;
  } args = {x, y, n4, 1.75f};
  const unsigned pers[] = {1, 4, 16}; /* 4, 16, 64 KiB tiles */
  for (int pi = 0; pi < 3; pi++) {
    char define[32], param[16];
    snprintf(define, sizeof define, "-DPER=%u", pers[pi]);
    snprintf(param, sizeof param, "%uKiB", pers[pi] * 4);
    unsigned long long ntiles = (n4 + pers[pi] * 256 - 1) / (pers[pi] * 256);
    CUlibrary lib = compile_ref(k_scale_ref, define, "scale");
    lctx rb = {.fn = lib_fn(lib, "ref_block"), .grid = (unsigned)ntiles, .args = &args, .ntiles = ntiles};
    lctx rp = {.fn = lib_fn(lib, "ref_persist"), .args = &args, .ntiles = ntiles};
    rp.grid = (unsigned)(occupancy_blocks(rp.fn, 256, 0) * clcrt_runtime_num_sms(rt));
    rp.ntiles_param = 1;
    /* Check every contender on fresh poison before timing it. */
    lctx *refs[2] = {&rb, &rp};
    double tref[2];
    for (int r = 0; r < 2; r++) {
      CK(cu->cuMemsetD32Async(y, 0x7fc00000u, bytes / 4, cs));
      launch_ref(refs[r]);
      CK(cu->cuStreamSynchronize(cs));
      CK(cu->cuMemcpyDtoH(hy, y, bytes));
      for (size_t i = 0; i < bytes / 4; i++)
        if (hy[i] != 1.75f * hx[i]) {
          fprintf(stderr, "scale reference %d wrong at %zu\n", r, i);
          exit(1);
        }
      tref[r] = time_median(launch_ref, refs[r]);
    }
    double best = tref[0] < tref[1] ? tref[0] : tref[1];
    emit("scale", param, 1, "ref-block", tref[0], best / tref[0], 100 * copy_ms / tref[0]);
    emit("scale", param, 1, "ref-persist", tref[1], best / tref[1], 100 * copy_ms / tref[1]);
    for (unsigned cl = 1; cl <= 4; cl *= 2)
      for (int c = 0; c < k_ncontenders; c++) {
        lctx lc = {.k = reg2(k_scale_src, "scale_tile", "ScaleArgs", k_contenders[c].sched, k_contenders[c].grid, cl,
                             define, k_contenders[c].define),
                   .args = &args,
                   .args_size = sizeof args,
                   .ntiles = ntiles};
        CK(cu->cuMemsetD32Async(y, 0x7fc00000u, bytes / 4, cs));
        launch_clcrt(&lc);
        CK(cu->cuStreamSynchronize(cs));
        CK(cu->cuMemcpyDtoH(hy, y, bytes));
        for (size_t i = 0; i < bytes / 4; i++)
          if (hy[i] != 1.75f * hx[i]) {
            fprintf(stderr, "scale %s c%u wrong at %zu\n", k_contenders[c].name, cl, i);
            exit(1);
          }
        double t = time_median(launch_clcrt, &lc);
        emit("scale", param, cl, k_contenders[c].name, t, best / t, 100 * copy_ms / t);
      }
    cu->cuLibraryUnload(lib);
  }
  cu->cuMemFree(x);
  cu->cuMemFree(y);
  free(hx), free(hy);
}


/* Tracing's cost on the scale workload (trace.c): 16 KiB tiles with 1- and 4-CTA clusters,
 * and 4 KiB tiles (four times the records per byte). */
void bench_trace_scale(void) {
  const size_t bytes = quick ? (256ull << 20) : (1ull << 30);
  CUdeviceptr x, y;
  CK(cu->cuMemAlloc(&x, bytes));
  CK(cu->cuMemAlloc(&y, bytes));
  CK(cu->cuMemsetD32Async(x, 0x3f800000u, bytes / 4, cs)); /* 1.0f: not zeros */
  struct {
    CUdeviceptr x, y;
    unsigned long long n4;
    float a;
  } args = {x, y, bytes / 16, 1.75f};
  static const clcrt_sched scheds[] = {CLCRT_SCHED_AUTO, CLCRT_SCHED_STATIC};
  static const char *const names[] = {"steal", "static"};
  static const struct { unsigned per, cl; const char *name; } cases[] = {
      {4, 1, "scale16K"}, {4, 4, "scale16K"}, {1, 1, "scale4K"}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int i = 0; i < 2; i++) {
      char define[32];
      snprintf(define, sizeof define, "-DPER=%u", cases[c].per);
      const unsigned cl = cases[c].cl;
      lctx out = {.k = reg2(k_scale_src, "scale_tile", "ScaleArgs", scheds[i], CLCRT_GRID_AUTO, cl, define,
                            "-DCLCRT_TRACE=0"),
                  .args = &args,
                  .args_size = sizeof args,
                  .ntiles = bytes / 16 / (cases[c].per * 256)};
      lctx in = out;
      in.k = reg2(k_scale_src, "scale_tile", "ScaleArgs", scheds[i], CLCRT_GRID_AUTO, cl, define, NULL);
      trace_overhead(cases[c].name, names[i], cl, &out, &in);
    }
  cu->cuMemFree(x);
  cu->cuMemFree(y);
}

/* The armed section on memory-bound tiles: 1, 4 and 16 KiB tiles (the README demo's size
 * and the scale section's smaller two) over 1 GiB, 1-CTA, 2-CTA and 4-CTA clusters. */
void bench_armed_scale(void) {
  const size_t bytes = quick ? (256ull << 20) : (1ull << 30);
  const unsigned long long n4 = bytes / 16;
  CUdeviceptr x, y;
  CK(cu->cuMemAlloc(&x, bytes));
  CK(cu->cuMemAlloc(&y, bytes));
  CK(cu->cuMemsetD32Async(x, 0x3f800000u, bytes / 4, cs)); /* 1.0f: nothing is timed on zeros */
  struct {
    CUdeviceptr x, y;
    unsigned long long n4;
    float a;
  } args = {x, y, n4, 1.75f};
  static const struct {
    const char *define, *name;
    unsigned per4, cl; /* quarter-float4s per thread x 4 = tile KiB; cluster size */
  } cases[] = {{"-DPER=1", "scale4K", 4, 1}, {"-DPER=4", "scale16K", 16, 2}, {"-DPER=4", "scale16K", 16, 4}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned long long ntiles = (n4 + cases[i].per4 / 4 * 256 - 1) / (cases[i].per4 / 4 * 256);
    lctx lc = {.k = reg2(k_scale_src, "scale_tile", "ScaleArgs", CLCRT_SCHED_AUTO, CLCRT_GRID_AUTO, cases[i].cl,
                         cases[i].define, NULL),
               .args = &args,
               .args_size = sizeof args,
               .ntiles = ntiles};
    char param[8];
    snprintf(param, sizeof param, "c%u", cases[i].cl);
    armed_pair(cases[i].name, param, &lc);
  }
  cu->cuMemFree(x), cu->cuMemFree(y);
}
