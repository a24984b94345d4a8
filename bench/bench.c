/* `make bench`: clcrt's schedulers side by side with hand-written reference kernels, in
 * one process on the GPU.
 *
 * Contenders: "ref-block" (one block per tile) and "ref-persist" (a grid-stride persistent
 * kernel), both written directly as __global__ functions and compiled with NVRTC outside
 * the template; clcrt STEAL (persistent and full grid), STATIC and FIXED.
 * Workloads:
 *   scale   y = a*x over 1 GiB of float32 (1 GiB read + 1 GiB written), tiles of 4/16/64 KiB,
 *           with a device-to-device copy of the same bytes as the ceiling;
 *   skew    compute tiles, about 5% of them 50x the others;
 *   ramp    compute tiles, tile i costs in proportion to i (like causal attention);
 * each at cluster sizes 1, 2 and 4. Every contender's output is checked against a CPU
 * reference on random data (output poisoned first) before it is timed; times are the
 * median of 30 runs after 5 warm-ups, with events. Ratios are to the best reference
 * (ref time / contender time: above 1 is faster). Also measured: host overhead of
 * clcrt_run against a bare cuLaunchKernelEx of the same kernel.
 * Usage: bench [--json FILE] [--quick] [--only scale|work|overhead] */
#include <math.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clcrt.h"
#include "internal.h"

#define WARMUP 5
#define REPS 30

static const clcrt__driver *cu;
static clcrt_runtime *rt;
static clcrt_stream *st;
static CUstream cs;
static FILE *json;
static int json_first = 1;
static const char *dump_dir; /* --dump DIR: write every kernel's cubin there (for nvdisasm) */

static void dump_cubin(const char *name, const void *data, size_t size) {
  if (!dump_dir) return;
  char path[512];
  snprintf(path, sizeof path, "%s/%s.cubin", dump_dir, name);
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(data, 1, size, f);
    fclose(f);
  }
}

#define CK(x)                                                                         \
  do {                                                                                \
    CUresult r_ = (x);                                                                \
    if (r_ != CUDA_SUCCESS) {                                                         \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x, clcrt__cu_name(rt, r_)); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

/* ---------------- device sources ---------------- */

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

static const char *k_scale_src = SCALE_COMMON
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) { scale_body(t.linear, a); }\n";

static const char *k_scale_ref = SCALE_COMMON
    "extern \"C\" __global__ void __launch_bounds__(256) ref_block(const __grid_constant__ ScaleArgs a) {\n"
    "  scale_body(blockIdx.x, a);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) ref_persist(const __grid_constant__ ScaleArgs a, unsigned "
    "long long ntiles) {\n"
    "  for (unsigned long long t = blockIdx.x; t < ntiles; t += gridDim.x) scale_body(t, a);\n"
    "}\n";

/* A tile's cost: `base` dependent FMAs per thread, times 50 for about 5% of the tiles
 * (mode 0), or times 2i/n for tile i (mode 1, mean 1). */
static const char *k_work_common =
    "struct WorkArgs { float *out; unsigned long long ntiles; unsigned base; unsigned mode; };\n"
    "__device__ __forceinline__ unsigned work_cost(unsigned long long i, const WorkArgs &a) {\n"
    "  if (a.mode == 0) { unsigned h = (unsigned)i * 2654435761u; h ^= h >> 15; return (h % 20u == 0) ? 50u * a.base : a.base; }\n"
    "  return (unsigned)((2ull * a.base * (i + 1)) / a.ntiles) + 1;\n"
    "}\n"
    "__device__ __forceinline__ void work_body(unsigned long long i, const WorkArgs &a) {\n"
    "  unsigned n = work_cost(i, a);\n"
    "  float v = __fadd_rn(__fmul_rn((float)threadIdx.x, 1e-3f), (float)(i % 1024));\n"
    "#pragma unroll 8\n"
    "  for (unsigned k = 0; k < n; k++) v = fmaf(v, 0.99990f, 0.00013f);\n"
    "  a.out[i * blockDim.x + threadIdx.x] = v;\n"
    "}\n";
static const char *k_work_tile = "__device__ void work_tile(const clcrt::Tile &t, const WorkArgs &a) { work_body(t.linear, a); }\n";
static const char *k_work_ref =
    "extern \"C\" __global__ void __launch_bounds__(256) ref_block(const __grid_constant__ WorkArgs a) {\n"
    "  work_body(blockIdx.x, a);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) ref_persist(const __grid_constant__ WorkArgs a, unsigned "
    "long long ntiles) {\n"
    "  for (unsigned long long t = blockIdx.x; t < ntiles; t += gridDim.x) work_body(t, a);\n"
    "}\n";

/* ---------------- helpers ---------------- */

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

typedef void (*launch_fn)(void *ctx);

/* Median time in ms of REPS launches after WARMUP, with events around each. */
static double time_median(launch_fn f, void *ctx) {
  CUevent e0, e1;
  CK(cu->cuEventCreate(&e0, 0));
  CK(cu->cuEventCreate(&e1, 0));
  for (int i = 0; i < WARMUP; i++) f(ctx);
  float ms[REPS];
  for (int i = 0; i < REPS; i++) {
    CK(cu->cuEventRecord(e0, cs));
    f(ctx);
    CK(cu->cuEventRecord(e1, cs));
    CK(cu->cuEventSynchronize(e1));
    CK(cu->cuEventElapsedTime(&ms[i], e0, e1));
  }
  cu->cuEventDestroy(e0);
  cu->cuEventDestroy(e1);
  qsort(ms, REPS, sizeof ms[0], cmp_float);
  return (ms[REPS / 2 - 1] + ms[REPS / 2]) / 2;
}

/* The references: compiled straight with NVRTC, no template. */
static CUlibrary compile_ref(const char *src, const char *define) {
  nvrtcProgram p;
  char arch[64];
  snprintf(arch, sizeof arch, "--gpu-architecture=%s", rt->arch);
  const char *opts[] = {arch, "-std=c++17", define};
  if (nvrtcCreateProgram(&p, src, "ref.cu", 0, NULL, NULL) != NVRTC_SUCCESS) exit(1);
  if (nvrtcCompileProgram(p, define ? 3 : 2, opts) != NVRTC_SUCCESS) {
    size_t n;
    nvrtcGetProgramLogSize(p, &n);
    char *log = malloc(n);
    nvrtcGetProgramLog(p, log);
    fprintf(stderr, "reference kernel: %s\n", log);
    exit(1);
  }
  size_t n;
  nvrtcGetCUBINSize(p, &n);
  char *cubin = malloc(n);
  nvrtcGetCUBIN(p, cubin);
  nvrtcDestroyProgram(&p);
  char name[96];
  snprintf(name, sizeof name, "ref_%s%s", strstr(src, "WorkArgs") ? "work" : "scale", define ? define + 2 : "");
  dump_cubin(name, cubin, n);
  CUlibrary lib;
  CK(cu->cuLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
  free(cubin);
  return lib;
}

static CUfunction lib_fn(CUlibrary lib, const char *name) {
  CUkernel k;
  CUfunction f;
  CK(cu->cuLibraryGetKernel(&k, lib, name));
  CK(cu->cuKernelGetFunction(&f, k));
  return f;
}

static clcrt_kernel *reg2(const char *src, const char *fn, const char *args, clcrt_sched sched, clcrt_grid grid,
                          unsigned cl, const char *define, const char *define2) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = src, d.tile_fn = fn, d.args_type = args;
  d.block = (clcrt_dim3){256, 1, 1};
  d.cluster = (clcrt_dim3){cl, 1, 1};
  d.sched = sched, d.grid = grid;
  const char *opts[2];
  int no = 0;
  if (define) opts[no++] = define;
  if (define2) opts[no++] = define2;
  d.options = opts, d.num_options = no;
  clcrt_kernel *k = NULL;
  if (clcrt_register(rt, &d, &k) != CLCRT_OK) {
    fprintf(stderr, "register %s: %s\n", fn, clcrt_errmsg(rt));
    exit(1);
  }
  const void *cubin;
  size_t size;
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  if (dump_dir && clcrt_kernel_cubin(k, &cubin, &size) == CLCRT_OK && clcrt_kernel_info_get(k, &info) == CLCRT_OK) {
    char name[160];
    snprintf(name, sizeof name, "%s_c%u%s", info.name, cl, define ? define + 2 : "");
    dump_cubin(name, cubin, size);
  }
  return k;
}

static clcrt_kernel *reg(const char *src, const char *fn, const char *args, clcrt_sched sched, clcrt_grid grid,
                         unsigned cl, const char *define) {
  return reg2(src, fn, args, sched, grid, cl, define, NULL);
}

/* ---------------- launches ---------------- */

typedef struct lctx {
  CUfunction fn;
  unsigned grid;
  void *args;
  size_t args_size;
  unsigned long long ntiles;
  clcrt_kernel *k;
  CUdeviceptr src, dst;
  size_t bytes;
} lctx;

static void launch_ref(void *p) {
  lctx *c = p;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = c->grid, cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 256, cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = cs;
  void *kp[2] = {c->args, &c->ntiles};
  CK(cu->cuLaunchKernelEx(&cfg, c->fn, kp, NULL));
}
static void launch_clcrt(void *p) {
  lctx *c = p;
  if (clcrt_run(st, c->k, (clcrt_dim3){(unsigned)c->ntiles, 1, 1}, c->args, c->args_size) != CLCRT_OK) {
    fprintf(stderr, "clcrt_run: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
}
static void launch_copy(void *p) {
  lctx *c = p;
  CK(cu->cuMemcpyDtoDAsync(c->dst, c->src, c->bytes, cs));
}

static int occupancy_blocks(CUfunction f) {
  /* Blocks per SM of the persistent reference, from the real block size. */
  int n = 0;
  CK(cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, 256, 0));
  if (n < 1) {
    fprintf(stderr, "reference kernel does not fit on an SM\n");
    exit(1);
  }
  return n;
}

static void emit(const char *workload, const char *param, unsigned cl, const char *who, double ms, double ratio,
                 double pct_copy) {
  printf("  %-7s %-7s c%u %-16s %9.4f ms  %6.3fx", workload, param, cl, who, ms, ratio);
  if (pct_copy > 0) printf("  %5.1f%% of copy", pct_copy);
  printf("\n");
  if (json) {
    fprintf(json, "%s\n  {\"workload\":\"%s\",\"param\":\"%s\",\"cluster\":%u,\"contender\":\"%s\",\"median_ms\":%.5f,"
                  "\"ratio_to_best_ref\":%.4f,\"pct_of_copy\":%.2f}",
            json_first ? "" : ",", workload, param, cl, who, ms, ratio, pct_copy);
    json_first = 0;
  }
}

static const struct {
  const char *name;
  clcrt_sched sched;
  clcrt_grid grid;
  const char *define;
} k_contenders[] = {
    {"steal-persist", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, NULL},
    {"steal-full", CLCRT_SCHED_STEAL, CLCRT_GRID_FULL, NULL},
    {"static", CLCRT_SCHED_STATIC, CLCRT_GRID_AUTO, NULL},
    {"fixed", CLCRT_SCHED_FIXED, CLCRT_GRID_AUTO, NULL},
    {"steal-early", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, "-DCLCRT_STEAL_EARLY=1"},
};
#define NCONT 5

/* ---------------- workloads ---------------- */

static void bench_scale(int quick) {
  const size_t bytes = quick ? (256ull << 20) : (1ull << 30);
  const unsigned long long n4 = bytes / 16;
  float *hx = malloc(bytes), *hy = malloc(bytes);
  srand(1);
  for (size_t i = 0; i < bytes / 4; i++) hx[i] = (float)rand() / RAND_MAX - 0.5f;
  CUdeviceptr x, y;
  CK(cu->cuMemAlloc(&x, bytes));
  CK(cu->cuMemAlloc(&y, bytes));
  CK(cu->cuMemcpyHtoD(x, hx, bytes));
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
    CUlibrary lib = compile_ref(k_scale_ref, define);
    lctx rb = {.fn = lib_fn(lib, "ref_block"), .grid = (unsigned)ntiles, .args = &args, .ntiles = ntiles};
    lctx rp = {.fn = lib_fn(lib, "ref_persist"), .args = &args, .ntiles = ntiles};
    rp.grid = (unsigned)(occupancy_blocks(rp.fn) * rt->num_sms);
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
      for (int c = 0; c < NCONT; c++) {
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

static double work_ref_value(unsigned long long i, unsigned tid, const unsigned base, unsigned mode,
                             unsigned long long ntiles) {
  unsigned n;
  if (mode == 0) {
    unsigned h = (unsigned)i * 2654435761u;
    h ^= h >> 15;
    n = (h % 20u == 0) ? 50u * base : base;
  } else {
    n = (unsigned)((2ull * base * (i + 1)) / ntiles) + 1;
  }
  float v = tid * 1e-3f + (float)(i % 1024);
  for (unsigned k = 0; k < n; k++) v = fmaf(v, 0.99990f, 0.00013f);
  return v;
}

static void bench_work(int quick) {
  const unsigned long long ntiles = quick ? 4000 : 20000;
  const unsigned base = 1000;
  float *hy = malloc(ntiles * 256 * 4);
  CUdeviceptr out;
  CK(cu->cuMemAlloc(&out, ntiles * 256 * 4));
  char *src = malloc(strlen(k_work_common) + strlen(k_work_ref) + strlen(k_work_tile) + 1);
  strcpy(src, k_work_common);
  strcat(src, k_work_ref);
  CUlibrary lib = compile_ref(src, NULL);
  strcpy(src, k_work_common);
  strcat(src, k_work_tile);
  const char *mode_names[2] = {"skew", "ramp"};
  printf("\ncompute tiles of unequal cost: %llu tiles x 256 threads, base %u dependent FMAs per thread\n", ntiles,
         base);
  for (unsigned mode = 0; mode < 2; mode++) {
    struct {
      CUdeviceptr out;
      unsigned long long ntiles;
      unsigned base, mode;
    } args = {out, ntiles, base, mode};
    lctx rb = {.fn = lib_fn(lib, "ref_block"), .grid = (unsigned)ntiles, .args = &args, .ntiles = ntiles};
    lctx rp = {.fn = lib_fn(lib, "ref_persist"), .args = &args, .ntiles = ntiles};
    rp.grid = (unsigned)(occupancy_blocks(rp.fn) * rt->num_sms);
    /* The CPU reference on a sample of tiles (every tile would take long at 50x). */
    lctx *refs[2] = {&rb, &rp};
    double tref[2];
    for (int r = 0; r < 2; r++) {
      CK(cu->cuMemsetD32Async(out, 0x7fc00000u, ntiles * 256, cs));
      launch_ref(refs[r]);
      CK(cu->cuStreamSynchronize(cs));
      tref[r] = time_median(launch_ref, refs[r]);
    }
    CK(cu->cuMemcpyDtoH(hy, out, ntiles * 256 * 4));
    for (unsigned long long i = 0; i < ntiles; i += 97)
      if (hy[i * 256 + 5] != (float)work_ref_value(i, 5, base, mode, ntiles)) {
        fprintf(stderr, "work reference wrong at tile %llu\n", i);
        exit(1);
      }
    double best = tref[0] < tref[1] ? tref[0] : tref[1];
    emit(mode_names[mode], "-", 1, "ref-block", tref[0], best / tref[0], 0);
    emit(mode_names[mode], "-", 1, "ref-persist", tref[1], best / tref[1], 0);
    for (unsigned cl = 1; cl <= 4; cl *= 2)
      for (int c = 0; c < NCONT; c++) {
        lctx lc = {.k = reg2(src, "work_tile", "WorkArgs", k_contenders[c].sched, k_contenders[c].grid, cl, NULL,
                             k_contenders[c].define),
                   .args = &args,
                   .args_size = sizeof args,
                   .ntiles = ntiles};
        CK(cu->cuMemsetD32Async(out, 0x7fc00000u, ntiles * 256, cs));
        launch_clcrt(&lc);
        CK(cu->cuStreamSynchronize(cs));
        CK(cu->cuMemcpyDtoH(hy, out, ntiles * 256 * 4));
        for (unsigned long long i = 0; i < ntiles; i++)
          for (unsigned t = 0; t < 256; t += 85)
            if (!(hy[i * 256 + t] == hy[i * 256 + t]) ||
                (i % 97 == 0 && t == 85 && hy[i * 256 + t] != (float)work_ref_value(i, t, base, mode, ntiles))) {
              fprintf(stderr, "%s %s c%u wrong at tile %llu\n", mode_names[mode], k_contenders[c].name, cl, i);
              exit(1);
            }
        double t = time_median(launch_clcrt, &lc);
        emit(mode_names[mode], "-", cl, k_contenders[c].name, t, best / t, 0);
      }
  }
  cu->cuLibraryUnload(lib);
  cu->cuMemFree(out);
  free(hy), free(src);
}

/* Host cost per call: clcrt_run against a bare cuLaunchKernelEx of the same CUfunction
 * with the same configuration, each timed on the CPU over batches of 200 calls (a 1-tile
 * FIXED kernel, synchronised between batches so the launch queue never fills). */
static void bench_overhead(void) {
  clcrt_kernel *k = reg(k_scale_src, "scale_tile", "ScaleArgs", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, 1, "-DPER=1");
  CUdeviceptr x, y;
  CK(cu->cuMemAlloc(&x, 4096));
  CK(cu->cuMemAlloc(&y, 4096));
  struct {
    CUdeviceptr x, y;
    unsigned long long n4;
    float a;
  } args = {x, y, 256, 2.0f};
  /* The parameters of the same 1-tile STEAL run, on the stream's own claim sets: a launch
   * equivalent to clcrt_run's without the library around it. */
  clcrt__params p;
  memset(&p, 0, sizeof p);
  p.tiles[0] = p.tiles[1] = p.tiles[2] = 1;
  p.units[0] = p.units[1] = p.units[2] = 1;
  p.num_units = p.num_clusters = 1;
  p.active = 1, p.chunk_cycles = 8000, p.early_min = 2;
  CUdeviceptr counter;
  CK(cu->cuMemAlloc(&counter, 8192));
  static const unsigned char zeros[8192];
  CK(cu->cuMemcpyHtoD(counter, zeros, sizeof zeros));
  p.state = counter;
  const int batches = 41, per = 200;
  double bare[41], lib[41];
  for (int b = 0; b < batches; b++) {
    for (int which = 0; which < 2; which++) {
      CK(cu->cuStreamSynchronize(cs));
      double t0 = clcrt__now_ms();
      for (int i = 0; i < per; i++) {
        if (which == 0) {
          CUlaunchConfig cfg;
          memset(&cfg, 0, sizeof cfg);
          cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
          cfg.blockDimX = 256, cfg.blockDimY = cfg.blockDimZ = 1;
          cfg.hStream = cs;
          void *kp[2] = {&args, &p};
          CK(cu->cuLaunchKernelEx(&cfg, k->fn, kp, NULL));
        } else if (clcrt_run(st, k, (clcrt_dim3){1, 1, 1}, &args, sizeof args) != CLCRT_OK) {
          exit(1);
        }
      }
      double us = (clcrt__now_ms() - t0) * 1e3 / per;
      (which ? lib : bare)[b] = us;
    }
  }
  CK(cu->cuStreamSynchronize(cs));
  /* medians */
  for (int i = 0; i < batches; i++)
    for (int j = i + 1; j < batches; j++) {
      if (bare[j] < bare[i]) { double t = bare[i]; bare[i] = bare[j]; bare[j] = t; }
      if (lib[j] < lib[i]) { double t = lib[i]; lib[i] = lib[j]; lib[j] = t; }
    }
  printf("\nhost overhead per launch (median of %d batches of %d calls, CPU clock):\n", batches, per);
  printf("  bare cuLaunchKernelEx %.3f us, clcrt_run %.3f us, difference %.3f us\n", bare[batches / 2],
         lib[batches / 2], lib[batches / 2] - bare[batches / 2]);
  if (json) {
    fprintf(json, "%s\n  {\"workload\":\"host-overhead\",\"bare_launch_us\":%.4f,\"clcrt_run_us\":%.4f}",
            json_first ? "" : ",", bare[batches / 2], lib[batches / 2]);
    json_first = 0;
  }
  cu->cuMemFree(x), cu->cuMemFree(y), cu->cuMemFree(counter);
}

int main(int argc, char **argv) {
  const char *json_path = NULL;
  int quick = 0;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else if (!strcmp(argv[i], "--dump") && i + 1 < argc)
      dump_dir = argv[++i];
    else {
      fprintf(stderr, "usage: bench [--json FILE] [--quick] [--dump DIR] [--only scale|work|overhead]\n");
      return 2;
    }
  }
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = "";
  if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) {
    printf("bench: SKIP: %s\n", clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
    return 0;
  }
  cu = rt->cu;
  CK(cu->cuCtxSetCurrent(rt->ctx));
  if (clcrt_stream_create(rt, NULL, &st) != CLCRT_OK) return 1;
  cs = clcrt_stream_cu(st);
  char name[256] = "";
  cu->cuDeviceGetName(name, sizeof name, rt->dev);
  if (json_path && !(json = fopen(json_path, "w"))) {
    perror(json_path);
    return 1;
  }
  if (json) fprintf(json, "{\"device\":\"%s\",\"arch\":\"%s\",\"sms\":%d,\"results\":[", name, rt->arch, rt->num_sms);
  printf("clcrt bench on %s (%s, %d SMs): median of %d runs after %d warm-ups; ratio = best reference / contender\n",
         name, rt->arch, rt->num_sms, REPS, WARMUP);
  if (!only || !strcmp(only, "scale")) bench_scale(quick);
  if (!only || !strcmp(only, "work")) bench_work(quick);
  if (!only || !strcmp(only, "overhead")) bench_overhead();
  if (json) {
    fprintf(json, "\n]}\n");
    fclose(json);
  }
  clcrt_stream_destroy(st);
  clcrt_runtime_destroy(rt);
  return 0;
}
