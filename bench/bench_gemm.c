/* `make bench-gemm`: clcrt's bf16 GEMM tile functions (examples/gemm/gemm.cu) against cuBLAS,
 * side by side in one process on the GPU.
 *
 * Dense D[M x N] = A[M x K] . B[N x K]^T, bf16 in and out, fp32 accumulation. Contenders:
 * cuBLASLt (cublasLtMatmul with the heuristic's first algorithm, 32 MiB of workspace) and
 * every clcrt variant (gemm.h: tile shape, 2-CTA clusters with multicast) under STEAL, STATIC
 * and FIXED, split-K picked by gemm_pick_splits (marked *) and, where the tiles leave SMs idle,
 * swept over 1, 2, 4, 8, 16. Shapes: 4096^3, 8192^3 and the LLM layers
 * M in {128, 1024, 8192} x (N, K) in {(8192, 8192), (28672, 8192), (8192, 28672)}.
 *
 * Inputs are windows of one pool of random bf16 values in [-1, 1) (never zeros), a different
 * window per shape. Every clcrt output is poisoned (NaN) first and checked against cuBLAS's
 * (relative Frobenius error at most 1e-2, every element written) before it is timed; cuBLAS
 * itself is checked on a sample against fp64 dot products. Times: CUDA events, median of REPS
 * runs after WARMUP. TFLOP/s = 2 M N K / time; ratio = cuBLAS time / contender time (above 1
 * is faster). Also the cold compile time of the tile function and a disk-cache hit.
 *
 * Grouped (mixture-of-experts layers): G experts share N and K; the routed rows of all experts
 * lie one expert after another in A (T x K) and D (T x N), the weights stacked (G*N x K), the
 * rows per expert (int32) in device memory. Contenders: clcrt's grouped tile function (every
 * group in one clcrt_run, the tiles found on the device from the counts) under STEAL, STATIC
 * and FIXED; a loop of one cublasGemmEx per non-empty expert; cublasGemmGroupedBatchedEx
 * (one problem per non-empty expert; if it refuses bf16 in and out with fp32 compute, the
 * combinations it takes are tried and reported). Both cuBLAS paths need the counts on the
 * host, which clcrt does not (that copy is not timed). Routing: Mixtral-like (8 experts,
 * N 14336, K 4096, 8192 tokens top-2), DeepSeek-like (32 experts, N 4096, K 7168, 4096 tokens
 * top-8, some experts never chosen), each Zipf-skewed (s = 1.2) and uniform, and a decode
 * step (8 tokens top-8: 64 rows over 32 experts). The loop's output is the reference (itself
 * checked on a sample against fp64).
 *
 * Usage: bench_gemm [--json FILE] [--quick] [--only compile|dense|grouped] [--variants NAME,...]
 *                   [--shape MxNxK]... [--reps N] [--align BYTES] */
/* cublasLt.h declares cublasLtLoggerForceDisable() without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cublas_v2.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h> /* types only: the calls go through the runtime's driver table */

#include "../examples/gemm/gemm.h"
#include "clcrt.h"

#define WARMUP 5
static int reps = 20;

static const clcrt_driver *cu;
static clcrt_runtime *rt;
static clcrt_stream *st;
static CUstream cs;
static FILE *json;
static int json_first = 1;
static int failures;

static const char *cu_name(CUresult r) {
  const char *s = NULL;
  return cu && cu->cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "an unknown CUDA error";
}
static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

#define CK(x)                                                                                     \
  do {                                                                                            \
    CUresult r_ = (x);                                                                            \
    if (r_ != CUDA_SUCCESS) {                                                                     \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x, cu_name(r_));            \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)
#define CKB(x)                                                                        \
  do {                                                                                \
    cublasStatus_t s_ = (x);                                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                \
      fprintf(stderr, "%s:%d: %s failed: status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)
#define CKC(x)                                                                                  \
  do {                                                                                          \
    if ((x) != CLCRT_OK) {                                                                      \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x, clcrt_errmsg(rt));     \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

static const clcrt_sched SCHEDS[] = {CLCRT_SCHED_STEAL, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};
#define NUM_SCHEDS 3

/* ---------------- helpers ---------------- */

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

typedef void (*launch_fn)(void *ctx);

/* Median time in ms of `reps` runs after WARMUP, with events around each. */
static double time_median(launch_fn f, void *ctx) {
  CUevent e0, e1;
  CK(cu->cuEventCreate(&e0, 0));
  CK(cu->cuEventCreate(&e1, 0));
  for (int i = 0; i < WARMUP; i++) f(ctx);
  float *ms = malloc(sizeof(float) * (size_t)reps);
  for (int i = 0; i < reps; i++) {
    CK(cu->cuEventRecord(e0, cs));
    f(ctx);
    CK(cu->cuEventRecord(e1, cs));
    CK(cu->cuEventSynchronize(e1));
    CK(cu->cuEventElapsedTime(&ms[i], e0, e1));
  }
  cu->cuEventDestroy(e0);
  cu->cuEventDestroy(e1);
  qsort(ms, (size_t)reps, sizeof ms[0], cmp_float);
  double med = reps % 2 ? ms[reps / 2] : (ms[reps / 2 - 1] + ms[reps / 2]) / 2;
  free(ms);
  return med;
}

/* The input pool: random bf16 in [-1, 1), on the host (for fp64 checks) and the device. */
static uint16_t *pool_h;
static CUdeviceptr pool_d;
static size_t pool_n;

/* cuMemcpyHtoD that has landed when it returns (from pageable memory it returns before its
 * DMA lands, on the legacy stream, which the benchmark's stream does not wait for). */
static void put(CUdeviceptr dst, const void *src, size_t bytes) {
  CK(cu->cuMemcpyHtoD(dst, src, bytes));
  CK(cu->cuStreamSynchronize(CU_STREAM_LEGACY));
}

static void pool_make(size_t n) {
  pool_n = n;
  pool_h = malloc(n * 2);
  if (!pool_h) {
    fprintf(stderr, "out of host memory for the %zu-element input pool\n", n);
    exit(1);
  }
  uint64_t s = 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    pool_h[i] = gemm_f2bf((float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0));
  }
  CK(cu->cuMemAlloc(&pool_d, n * 2));
  put(pool_d, pool_h, n * 2);
}
/* Alignment in bytes of the operand windows (--align; at least 16, what TMA needs). 1024 by
 * default, like any allocator's: the first run used 16-byte aligned windows, whose 128-byte
 * rows straddle two L2 lines, and both TMA and cuBLAS pay for that (--align 16 measures it). */
static size_t window_align = 1024;

/* A window of `count` elements at a window_align-aligned offset picked by `salt`. */
static size_t pool_window(size_t count, uint64_t salt) {
  if (count > pool_n) {
    fprintf(stderr, "a matrix of %zu elements does not fit the pool of %zu\n", count, pool_n);
    exit(1);
  }
  size_t room = pool_n - count;
  uint64_t h = salt * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  size_t mask = window_align / 2 - 1; /* in elements */
  return room ? (size_t)(h % room) & ~mask : 0;
}

static void json_row(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void json_row(const char *fmt, ...) {
  if (!json) return;
  fprintf(json, "%s\n  ", json_first ? "" : ",");
  json_first = 0;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(json, fmt, ap);
  va_end(ap);
}

/* Relative Frobenius error of got against ref (n elements); -1 when got has a NaN. */
static double rel_error(const uint16_t *got, const uint16_t *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    float g = gemm_bf2f(got[i]), r = gemm_bf2f(ref[i]);
    if (g != g) return -1;
    num += (double)(g - r) * (g - r);
    den += (double)r * r;
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---------------- cuBLASLt ---------------- */

static cublasLtHandle_t lt;
static CUdeviceptr lt_ws;
static const size_t LT_WS_BYTES = 32u << 20;

typedef struct lt_gemm {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  CUdeviceptr A, B, D;
} lt_gemm;

/* Row-major D = A . B^T is column-major D^T (n x m) = op(B)(n x k) . A^T(k x m): cuBLAS's
 * "A" is our B read as a k x n column-major matrix, transposed; its "B" is our A as k x m. */
static int lt_setup(lt_gemm *g, CUdeviceptr A, CUdeviceptr B, CUdeviceptr D, unsigned m, unsigned n, unsigned k) {
  g->A = A, g->B = B, g->D = D;
  CKB(cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CKB(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CKB(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CKB(cublasLtMatrixLayoutCreate(&g->la, CUDA_R_16BF, k, n, k));
  CKB(cublasLtMatrixLayoutCreate(&g->lb, CUDA_R_16BF, k, m, k));
  CKB(cublasLtMatrixLayoutCreate(&g->lc, CUDA_R_16BF, n, m, n));
  cublasLtMatmulPreference_t pref;
  CKB(cublasLtMatmulPreferenceCreate(&pref));
  size_t wsb = LT_WS_BYTES;
  CKB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
  cublasLtMatmulHeuristicResult_t res;
  int count = 0;
  cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, g->op, g->la, g->lb, g->lc, g->lc, pref, 1, &res, &count);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS || count == 0) {
    fprintf(stderr, "cublasLt: no algorithm for %u x %u x %u (status %d)\n", m, n, k, (int)s);
    return -1;
  }
  g->algo = res.algo;
  return 0;
}
static void lt_free(lt_gemm *g) {
  cublasLtMatrixLayoutDestroy(g->la), cublasLtMatrixLayoutDestroy(g->lb), cublasLtMatrixLayoutDestroy(g->lc);
  cublasLtMatmulDescDestroy(g->op);
}
static void lt_launch(void *p) {
  lt_gemm *g = p;
  const float one = 1.0f, zero = 0.0f;
  CKB(cublasLtMatmul(lt, g->op, &one, (const void *)g->B, g->la, (const void *)g->A, g->lb, &zero, (const void *)g->D,
                     g->lc, (void *)g->D, g->lc, &g->algo, (void *)lt_ws, LT_WS_BYTES, cs));
}

/* ---------------- clcrt ---------------- */

typedef struct run_ctx {
  clcrt_kernel *k;
  clcrt_dim3 tiles;
  gemm_args a;
} run_ctx;

static void clcrt_launch(void *p) {
  run_ctx *c = p;
  if (clcrt_run(st, c->k, c->tiles, &c->a, sizeof c->a) != CLCRT_OK) {
    fprintf(stderr, "clcrt_run: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
}

/* Kernels are registered once per (variant, scheduler, dense/grouped) and kept. */
static clcrt_kernel *kernels[GEMM_NUM_VARIANTS][NUM_SCHEDS][2];
static clcrt_kernel *kernel_for(int v, int s, int grouped) {
  if (!kernels[v][s][grouped]) CKC(gemm_register(rt, &GEMM_VARIANTS[v], SCHEDS[s], grouped, &kernels[v][s][grouped]));
  return kernels[v][s][grouped];
}

static int variant_on[GEMM_NUM_VARIANTS];

/* ---------------- compile ---------------- */

/* Cold compile of the default variant into an empty disk cache, then a disk-cache hit from a
 * second runtime (a new process would see the same: nothing in memory, the entry on disk). */
static void bench_compile(void) {
  char dir[] = "/tmp/clcrt-bench-gemm-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return;
  }
  printf("\ncompile: the GEMM tile function (%s), cold and from the disk cache\n", GEMM_VARIANTS[0].name);
  for (int s = 0; s < NUM_SCHEDS; s++) {
    double cold = 0, hit = 0;
    int from = -1;
    for (int pass = 0; pass < 2; pass++) {
      clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
      o.cache_dir = dir;
      clcrt_runtime *r2 = NULL;
      CKC(clcrt_runtime_create(&r2, &o));
      clcrt_kernel *k = NULL;
      double t0 = now_ms();
      if (gemm_register(r2, &GEMM_VARIANTS[0], SCHEDS[s], 0, &k) != CLCRT_OK) {
        fprintf(stderr, "register: %s\n", clcrt_errmsg(r2));
        exit(1);
      }
      double t = now_ms() - t0;
      clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
      CKC(clcrt_kernel_info_get(k, &info));
      if (pass == 0) {
        cold = t;
        printf("  %-7s cold %7.1f ms (NVRTC %.1f ms), %d registers, %u + %u bytes shared\n",
               clcrt_sched_name(SCHEDS[s]), cold, info.compile_ms, info.registers, info.static_smem,
               info.dynamic_smem);
      } else {
        hit = t;
        from = info.from_cache;
        printf("  %-7s disk-cache hit %.3f ms (from_cache %d: 2 = disk)\n", clcrt_sched_name(SCHEDS[s]), hit, from);
      }
      clcrt_runtime_destroy(r2);
    }
    json_row("{\"section\":\"compile\",\"contender\":\"%s\",\"variant\":\"%s\",\"cold_ms\":%.2f,\"disk_hit_ms\":%.4f,"
             "\"from_cache\":%d}",
             clcrt_sched_name(SCHEDS[s]), GEMM_VARIANTS[0].name, cold, hit, from);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* ---------------- dense ---------------- */

typedef struct dshape {
  const char *label;
  unsigned m, n, k;
} dshape;

static const dshape DENSE_SHAPES[] = {
    {"square", 4096, 4096, 4096},  {"square", 8192, 8192, 8192},  {"llm", 128, 8192, 8192},
    {"llm", 128, 28672, 8192},     {"llm", 128, 8192, 28672},     {"llm", 1024, 8192, 8192},
    {"llm", 1024, 28672, 8192},    {"llm", 1024, 8192, 28672},    {"llm", 8192, 8192, 8192},
    {"llm", 8192, 28672, 8192},    {"llm", 8192, 8192, 28672},
};
static const dshape QUICK_SHAPES[] = {
    {"square", 4096, 4096, 4096},
    {"llm", 128, 8192, 8192},
    {"llm", 1024, 28672, 8192},
};

typedef struct summary {
  char shape[48];
  const char *label;
  double cublas_tflops;
  double best_ratio[NUM_SCHEDS];
  const char *best_variant[NUM_SCHEDS];
  unsigned best_splits[NUM_SCHEDS];
  double var_ratio[GEMM_NUM_VARIANTS]; /* per variant: best over schedulers and splits */
  unsigned var_splits[GEMM_NUM_VARIANTS];
} summary;

static summary summaries[64];
static int num_summaries;

static void bench_dense_shape(const dshape *sh, int idx) {
  const unsigned m = sh->m, n = sh->n, k = sh->k;
  const double flop = 2.0 * m * n * k;
  size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
  size_t oa = pool_window(na, 2 * (uint64_t)idx + 1), ob = pool_window(nb, 2 * (uint64_t)idx + 2);
  CUdeviceptr A = pool_d + oa * 2, B = pool_d + ob * 2, D, R;
  CK(cu->cuMemAlloc(&D, nd * 2));
  CK(cu->cuMemAlloc(&R, nd * 2));
  uint16_t *hd = malloc(nd * 2), *hr = malloc(nd * 2);
  if (!hd || !hr) {
    fprintf(stderr, "out of host memory\n");
    exit(1);
  }
  summary *sum = &summaries[num_summaries++];
  memset(sum, 0, sizeof *sum);
  snprintf(sum->shape, sizeof sum->shape, "%ux%ux%u", m, n, k);
  sum->label = sh->label;

  /* cuBLAS first: the reference output and the reference time. */
  lt_gemm g;
  if (lt_setup(&g, A, B, R, m, n, k) != 0) exit(1);
  CK(cu->cuMemsetD8Async(R, 0xff, nd * 2, cs));
  lt_launch(&g);
  CK(cu->cuStreamSynchronize(cs));
  CK(cu->cuMemcpyDtoH(hr, R, nd * 2));
  int lt_bad = 0;
  uint64_t s = 0x1234 + (uint64_t)idx;
  for (int t = 0; t < 32; t++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    size_t i = (size_t)(s % m), j = (size_t)((s >> 32) % n);
    double ref = 0, mag = 0;
    for (size_t q = 0; q < k; q++) {
      double p = (double)gemm_bf2f(pool_h[oa + i * k + q]) * gemm_bf2f(pool_h[ob + j * k + q]);
      ref += p, mag += fabs(p);
    }
    double got = gemm_bf2f(hr[i * n + j]);
    if (!(fabs(got - ref) <= 8e-3 * fabs(ref) + 1e-4 * mag + 1e-6)) lt_bad++;
  }
  if (lt_bad) {
    printf("  cuBLAS disagrees with fp64 on %d of 32 sampled elements: its call is wrong\n", lt_bad);
    failures++;
  }
  double t_ref = time_median(lt_launch, &g);
  sum->cublas_tflops = flop / (t_ref * 1e9);
  printf("\n%ux%ux%u (%s): cuBLASLt %.4f ms = %.1f TFLOP/s\n", m, n, k, sh->label, t_ref, sum->cublas_tflops);
  json_row("{\"section\":\"dense\",\"label\":\"%s\",\"shape\":\"%s\",\"m\":%u,\"n\":%u,\"k\":%u,\"contender\":\"cublas\","
           "\"variant\":\"cublasLt\",\"splits\":1,\"median_ms\":%.5f,\"tflops\":%.2f,\"ratio_to_cublas\":1.0,"
           "\"rel_err\":0,\"ok\":%s}",
           sh->label, sum->shape, m, n, k, t_ref, sum->cublas_tflops, lt_bad ? "false" : "true");

  for (int v = 0; v < GEMM_NUM_VARIANTS; v++) {
    if (!variant_on[v]) continue;
    const gemm_variant *var = &GEMM_VARIANTS[v];
    /* Split-K: the helper's pick, and where the tiles leave SMs idle, a sweep around it so
     * that one run shows which factor is best. */
    unsigned pick = gemm_pick_splits(var, m, n, k, clcrt_runtime_num_sms(rt)), cand[8], nc = 0;
    unsigned tiles = gemm_cdiv(m, var->bm) * gemm_cdiv(n, var->bn), nk = gemm_cdiv(k, GEMM_BK);
    cand[nc++] = pick;
    if (tiles < (unsigned)clcrt_runtime_num_sms(rt))
      for (unsigned sp = 1; sp <= 16; sp *= 2)
        if (sp != pick && (sp == 1 || sp <= nk / 8)) cand[nc++] = sp;
    for (unsigned ci = 0; ci < nc; ci++) {
      run_ctx c;
      CKC(gemm_dense_args(rt, var, &c.a, A, B, D, m, n, k, cand[ci], 0, 0));
      CUdeviceptr ws = 0, ctr = 0;
      if (c.a.splits > 1) {
        CK(cu->cuMemAlloc(&ws, gemm_ws_bytes(var, &c.a)));
        CK(cu->cuMemAlloc(&ctr, gemm_ctr_bytes(var, &c.a)));
        CK(cu->cuMemsetD8(ctr, 0, gemm_ctr_bytes(var, &c.a)));
        CK(cu->cuMemsetD8(ws, 0, gemm_ws_bytes(var, &c.a)));
        c.a.ws = ws, c.a.ctr = ctr;
      }
      c.tiles = gemm_dense_tiles(var, &c.a);
      for (int si = 0; si < NUM_SCHEDS; si++) {
        c.k = kernel_for(v, si, 0);
        CK(cu->cuMemsetD8Async(D, 0xff, nd * 2, cs));
        clcrt_launch(&c);
        CK(cu->cuStreamSynchronize(cs));
        CK(cu->cuMemcpyDtoH(hd, D, nd * 2));
        double err = rel_error(hd, hr, nd);
        int ok = err >= 0 && err <= 1e-2;
        if (!ok) failures++;
        double t = time_median(clcrt_launch, &c);
        double tf = flop / (t * 1e9), ratio = t_ref / t;
        printf("  %-10s %-7s splits %-2u%s %9.4f ms %7.1f TFLOP/s %6.3fx cuBLAS  err %.2e%s\n", var->name,
               clcrt_sched_name(SCHEDS[si]), c.a.splits, ci == 0 ? "*" : " ", t, tf, ratio, err, ok ? "" : "  WRONG");
        json_row("{\"section\":\"dense\",\"label\":\"%s\",\"shape\":\"%s\",\"m\":%u,\"n\":%u,\"k\":%u,"
                 "\"contender\":\"%s\",\"variant\":\"%s\",\"splits\":%u,\"picked\":%s,\"median_ms\":%.5f,"
                 "\"tflops\":%.2f,\"ratio_to_cublas\":%.4f,\"rel_err\":%.3e,\"ok\":%s}",
                 sh->label, sum->shape, m, n, k, clcrt_sched_name(SCHEDS[si]), var->name, c.a.splits,
                 ci == 0 ? "true" : "false", t, tf, ratio, err, ok ? "true" : "false");
        if (ok && ratio > sum->var_ratio[v]) sum->var_ratio[v] = ratio, sum->var_splits[v] = c.a.splits;
        if (ok && ratio > sum->best_ratio[si]) {
          sum->best_ratio[si] = ratio;
          sum->best_variant[si] = var->name;
          sum->best_splits[si] = c.a.splits;
        }
      }
      if (ws) cu->cuMemFree(ws), cu->cuMemFree(ctr);
    }
  }
  lt_free(&g);
  cu->cuMemFree(D), cu->cuMemFree(R);
  free(hd), free(hr);
}


/* ---------------- grouped ---------------- */

typedef struct gshape {
  const char *name, *routing;
  unsigned experts, n, k, tokens, topk;
  double zipf;      /* 0: uniform */
  unsigned never;   /* experts no token is routed to */
  int skewed;       /* counts as skewed routing for the targets */
} gshape;

static const gshape GROUPED_SHAPES[] = {
    {"mixtral", "zipf 1.2", 8, 14336, 4096, 8192, 2, 1.2, 0, 1},
    {"mixtral", "uniform", 8, 14336, 4096, 8192, 2, 0.0, 0, 0},
    {"deepseek", "zipf 1.2, 4 unused", 32, 4096, 7168, 4096, 8, 1.2, 4, 1},
    {"deepseek", "uniform", 32, 4096, 7168, 4096, 8, 0.0, 0, 0},
    {"decode", "uniform", 32, 4096, 7168, 8, 8, 0.0, 0, 0},
};
static const gshape QUICK_GROUPED[] = {
    {"deepseek", "zipf 1.2, 4 unused", 32, 4096, 7168, 4096, 8, 1.2, 4, 1},
    {"decode", "uniform", 32, 4096, 7168, 8, 8, 0.0, 0, 0},
};

/* Rows per expert: each token picks topk distinct experts, expert e with weight (r_e + 1)^-s
 * for a fixed random rank r_e (s = 0: uniform); `never` experts get weight 0. */
static void route(const gshape *g, uint64_t seed, unsigned *rows) {
  double w[1024];
  unsigned rank[1024];
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
#define NEXT() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, s)
  for (unsigned e = 0; e < g->experts; e++) rank[e] = e;
  for (unsigned e = g->experts - 1; e > 0; e--) { /* a random ranking of the experts */
    unsigned j = (unsigned)(NEXT() % (e + 1)), tmp = rank[e];
    rank[e] = rank[j], rank[j] = tmp;
  }
  for (unsigned e = 0; e < g->experts; e++) {
    w[e] = g->zipf > 0 ? pow((double)rank[e] + 1.0, -g->zipf) : 1.0;
    if (rank[e] >= g->experts - g->never) w[e] = 0;
    rows[e] = 0;
  }
  for (unsigned t = 0; t < g->tokens; t++) {
    double left[1024], total = 0;
    for (unsigned e = 0; e < g->experts; e++) left[e] = w[e], total += w[e];
    for (unsigned c = 0; c < g->topk; c++) {
      double x = (double)(NEXT() >> 11) / 9007199254740992.0 * total;
      unsigned e = g->experts, last = 0;
      for (unsigned i = 0; i < g->experts && e == g->experts; i++) {
        if (left[i] <= 0) continue;
        last = i;
        if (x < left[i]) e = i;
        x -= left[i];
      }
      if (e == g->experts) e = last; /* rounding ran past the end: the last expert still free */
      rows[e]++;
      total -= left[e];
      left[e] = 0;
    }
  }
#undef NEXT
}

static cublasHandle_t blas;

typedef struct loop_ctx {
  unsigned groups, n, k;
  const unsigned *rows;
  CUdeviceptr A, B, D;
} loop_ctx;

/* One cublasGemmEx per non-empty expert (D_g = A_g . B_g^T, see lt_setup for the layout). */
static void loop_launch(void *p) {
  loop_ctx *c = p;
  const float one = 1.0f, zero = 0.0f;
  size_t row0 = 0;
  for (unsigned g = 0; g < c->groups; g++) {
    if (c->rows[g])
      CKB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)c->n, (int)c->rows[g], (int)c->k, &one,
                       (const void *)(c->B + (size_t)g * c->n * c->k * 2), CUDA_R_16BF, (int)c->k,
                       (const void *)(c->A + row0 * c->k * 2), CUDA_R_16BF, (int)c->k, &zero,
                       (void *)(c->D + row0 * c->n * 2), CUDA_R_16BF, (int)c->n, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT));
    row0 += c->rows[g];
  }
}

typedef struct gb_ctx {
  int count;
  cublasOperation_t *ta, *tb;
  int *m, *n, *k, *lda, *ldb, *ldc, *size;
  float *alpha, *beta;
  CUdeviceptr pa, pb, pc; /* device arrays of pointers */
  cudaDataType_t ctype;
  cublasComputeType_t compute;
} gb_ctx;

static cublasStatus_t gb_call(gb_ctx *c) {
  return cublasGemmGroupedBatchedEx(blas, c->ta, c->tb, c->m, c->n, c->k, c->alpha, (const void *const *)c->pa,
                                    CUDA_R_16BF, c->lda, (const void *const *)c->pb, CUDA_R_16BF, c->ldb, c->beta,
                                    (void *const *)c->pc, c->ctype, c->ldc, c->count, c->size, c->compute);
}
static void gb_launch(void *p) { CKB(gb_call(p)); }

typedef struct gsummary {
  char name[64];
  int skewed;
  double loop_tflops, gb_tflops, best[NUM_SCHEDS];
  const char *best_variant[NUM_SCHEDS];
} gsummary;
static gsummary gsums[16];
static int num_gsums;

static void bench_grouped_shape(const gshape *g, int idx) {
  unsigned rows[1024];
  route(g, 1000 + (uint64_t)idx, rows);
  unsigned total = 0, used = 0, max_rows = 0;
  for (unsigned e = 0; e < g->experts; e++) {
    total += rows[e];
    used += rows[e] > 0;
    if (rows[e] > max_rows) max_rows = rows[e];
  }
  const double flop = 2.0 * total * g->n * g->k;
  const size_t na = (size_t)total * g->k, nb = (size_t)g->experts * g->n * g->k, nd = (size_t)total * g->n;
  size_t oa = pool_window(na, 77 + 2 * (uint64_t)idx), ob = pool_window(nb, 78 + 2 * (uint64_t)idx);
  CUdeviceptr A = pool_d + oa * 2, B = pool_d + ob * 2, D, R, S, DF = 0;
  CK(cu->cuMemAlloc(&D, nd * 2));
  CK(cu->cuMemAlloc(&R, nd * 2));
  CK(cu->cuMemAlloc(&S, g->experts * 4));
  int sizes[1024];
  for (unsigned e = 0; e < g->experts; e++) sizes[e] = (int)rows[e];
  put(S, sizes, g->experts * 4);
  uint16_t *hd = malloc(nd * 2), *hr = malloc(nd * 2);
  if (!hd || !hr) {
    fprintf(stderr, "out of host memory\n");
    exit(1);
  }
  gsummary *sum = &gsums[num_gsums++];
  memset(sum, 0, sizeof *sum);
  snprintf(sum->name, sizeof sum->name, "%s %s", g->name, g->routing);
  sum->skewed = g->skewed;
  char rows_txt[160] = "";
  if (g->experts <= 8) {
    for (unsigned e = 0, o = 0; e < g->experts && o < sizeof rows_txt - 12; e++)
      o += (unsigned)snprintf(rows_txt + o, sizeof rows_txt - o, "%s%u", e ? " " : "", rows[e]);
  } else {
    snprintf(rows_txt, sizeof rows_txt, "largest %u, %u of %u experts used", max_rows, used, g->experts);
  }
  printf("\ngrouped %s (%s): %u experts, N %u, K %u, %u tokens top-%u = %u rows (%s)\n", g->name, g->routing,
         g->experts, g->n, g->k, g->tokens, g->topk, total, rows_txt);

  /* The per-expert loop: the reference output and a contender. */
  loop_ctx lc = {g->experts, g->n, g->k, rows, A, B, R};
  CK(cu->cuMemsetD8Async(R, 0xff, nd * 2, cs));
  loop_launch(&lc);
  CK(cu->cuStreamSynchronize(cs));
  CK(cu->cuMemcpyDtoH(hr, R, nd * 2));
  int bad = 0;
  uint64_t s = 0x777 + (uint64_t)idx;
  for (int t = 0; t < 32 && total; t++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    size_t i = (size_t)(s % total), j = (size_t)((s >> 32) % g->n), e = 0, r0 = 0;
    while (i >= r0 + rows[e]) r0 += rows[e], e++;
    double ref = 0, mag = 0;
    for (size_t q = 0; q < g->k; q++) {
      double pr = (double)gemm_bf2f(pool_h[oa + i * g->k + q]) * gemm_bf2f(pool_h[ob + (e * g->n + j) * g->k + q]);
      ref += pr, mag += fabs(pr);
    }
    double got = gemm_bf2f(hr[i * g->n + j]);
    if (!(fabs(got - ref) <= 8e-3 * fabs(ref) + 1e-4 * mag + 1e-6)) bad++;
  }
  if (bad) {
    printf("  the cuBLAS loop disagrees with fp64 on %d of 32 sampled elements\n", bad);
    failures++;
  }
  double t_loop = time_median(loop_launch, &lc);
  sum->loop_tflops = flop / (t_loop * 1e9);
  printf("  %-24s %9.4f ms %7.1f TFLOP/s  (%u calls)\n", "cuBLAS loop (GemmEx)", t_loop, sum->loop_tflops, used);
  json_row("{\"section\":\"grouped\",\"shape\":\"%s\",\"routing\":\"%s\",\"skewed\":%s,\"experts\":%u,\"n\":%u,"
           "\"k\":%u,\"rows\":%u,\"contender\":\"cublas-loop\",\"variant\":\"cublasGemmEx\",\"median_ms\":%.5f,"
           "\"tflops\":%.2f,\"ratio_to_loop\":1.0,\"rel_err\":0,\"ok\":%s}",
           sum->name, g->routing, g->skewed ? "true" : "false", g->experts, g->n, g->k, total, t_loop,
           sum->loop_tflops, bad ? "false" : "true");

  /* cublasGemmGroupedBatchedEx: one problem per non-empty expert. */
  gb_ctx gb;
  memset(&gb, 0, sizeof gb);
  gb.count = (int)used;
  gb.ta = malloc(used * sizeof *gb.ta), gb.tb = malloc(used * sizeof *gb.tb);
  gb.m = malloc(used * sizeof(int)), gb.n = malloc(used * sizeof(int)), gb.k = malloc(used * sizeof(int));
  gb.lda = malloc(used * sizeof(int)), gb.ldb = malloc(used * sizeof(int)), gb.ldc = malloc(used * sizeof(int));
  gb.size = malloc(used * sizeof(int)), gb.alpha = malloc(used * sizeof(float)), gb.beta = malloc(used * sizeof(float));
  uint64_t *pa = malloc(used * 8), *pb = malloc(used * 8), *pc = malloc(used * 8), *pcf = malloc(used * 8);
  CK(cu->cuMemAlloc(&DF, nd * 4));
  size_t row0 = 0;
  for (unsigned e = 0, i = 0; e < g->experts; e++) {
    if (rows[e]) {
      gb.ta[i] = CUBLAS_OP_T, gb.tb[i] = CUBLAS_OP_N;
      gb.m[i] = (int)g->n, gb.n[i] = (int)rows[e], gb.k[i] = (int)g->k;
      gb.lda[i] = (int)g->k, gb.ldb[i] = (int)g->k, gb.ldc[i] = (int)g->n;
      gb.size[i] = 1, gb.alpha[i] = 1.0f, gb.beta[i] = 0.0f;
      pa[i] = B + (size_t)e * g->n * g->k * 2, pb[i] = A + row0 * g->k * 2, pc[i] = D + row0 * g->n * 2;
      pcf[i] = DF + row0 * g->n * 4;
      i++;
    }
    row0 += rows[e];
  }
  CK(cu->cuMemAlloc(&gb.pa, used * 8 + 8));
  CK(cu->cuMemAlloc(&gb.pb, used * 8 + 8));
  CK(cu->cuMemAlloc(&gb.pc, used * 8 + 8));
  put(gb.pa, pa, used * 8);
  put(gb.pb, pb, used * 8);
  put(gb.pc, pc, used * 8);
  /* bf16 in and out with fp32 compute first; then what else it may take. */
  static const struct {
    cudaDataType_t ctype;
    cublasComputeType_t compute;
    const char *what;
  } tries[] = {{CUDA_R_16BF, CUBLAS_COMPUTE_32F, "bf16 in, bf16 out, fp32 compute"},
               {CUDA_R_32F, CUBLAS_COMPUTE_32F, "bf16 in, fp32 out, fp32 compute"}};
  int took = -1;
  cublasStatus_t first = CUBLAS_STATUS_SUCCESS;
  for (int ti = 0; ti < 2 && took < 0; ti++) {
    gb.ctype = tries[ti].ctype, gb.compute = tries[ti].compute;
    if (ti == 1) put(gb.pc, pcf, used * 8);
    cublasStatus_t r = used ? gb_call(&gb) : CUBLAS_STATUS_SUCCESS;
    if (ti == 0) first = r;
    if (r == CUBLAS_STATUS_SUCCESS) took = ti;
  }
  CK(cu->cuStreamSynchronize(cs));
  if (took < 0) {
    printf("  cublasGemmGroupedBatchedEx: refused %s (status %d) and %s\n", tries[0].what, (int)first, tries[1].what);
  } else {
    if (took > 0)
      printf("  cublasGemmGroupedBatchedEx refused %s (status %d); it took %s\n", tries[0].what, (int)first,
             tries[took].what);
    double err = 0;
    if (took == 0) {
      CK(cu->cuMemsetD8Async(D, 0xff, nd * 2, cs));
      gb_launch(&gb);
      CK(cu->cuStreamSynchronize(cs));
      CK(cu->cuMemcpyDtoH(hd, D, nd * 2));
      err = rel_error(hd, hr, nd);
    }
    int ok = err >= 0 && err <= 1e-2;
    if (!ok) failures++;
    double t = time_median(gb_launch, &gb);
    sum->gb_tflops = flop / (t * 1e9);
    printf("  %-24s %9.4f ms %7.1f TFLOP/s %6.3fx loop  %s%s\n", "cublasGemmGroupedBatched", t, sum->gb_tflops,
           t_loop / t, took == 0 ? "" : "(fp32 out, not checked) ", ok ? "" : "WRONG");
    json_row("{\"section\":\"grouped\",\"shape\":\"%s\",\"routing\":\"%s\",\"skewed\":%s,\"experts\":%u,\"n\":%u,"
             "\"k\":%u,\"rows\":%u,\"contender\":\"cublas-grouped\",\"variant\":\"%s\",\"median_ms\":%.5f,"
             "\"tflops\":%.2f,\"ratio_to_loop\":%.4f,\"rel_err\":%.3e,\"ok\":%s}",
             sum->name, g->routing, g->skewed ? "true" : "false", g->experts, g->n, g->k, total, tries[took].what, t,
             sum->gb_tflops, t_loop / t, err, ok ? "true" : "false");
  }

  /* clcrt: every expert in one run, the tiles found on the device from the counts. */
  for (int v = 0; v < GEMM_NUM_VARIANTS; v++) {
    if (!variant_on[v]) continue;
    const gemm_variant *var = &GEMM_VARIANTS[v];
    run_ctx c;
    CKC(gemm_grouped_args(rt, var, &c.a, A, B, D, total, g->n, g->k, g->experts, S));
    c.tiles = gemm_grouped_tiles(var, &c.a);
    for (int si = 0; si < NUM_SCHEDS; si++) {
      c.k = kernel_for(v, si, 1);
      CK(cu->cuMemsetD8Async(D, 0xff, nd * 2, cs));
      clcrt_launch(&c);
      CK(cu->cuStreamSynchronize(cs));
      CK(cu->cuMemcpyDtoH(hd, D, nd * 2));
      double err = rel_error(hd, hr, nd);
      int ok = err >= 0 && err <= 1e-2;
      if (!ok) failures++;
      double t = time_median(clcrt_launch, &c);
      double tf = flop / (t * 1e9);
      printf("  %-10s %-7s %9.4f ms %7.1f TFLOP/s %6.3fx loop %6.3fx grouped  err %.2e%s\n", var->name,
             clcrt_sched_name(SCHEDS[si]), t, tf, t_loop / t, sum->gb_tflops > 0 ? tf / sum->gb_tflops : 0, err,
             ok ? "" : "  WRONG");
      json_row("{\"section\":\"grouped\",\"shape\":\"%s\",\"routing\":\"%s\",\"skewed\":%s,\"experts\":%u,\"n\":%u,"
               "\"k\":%u,\"rows\":%u,\"contender\":\"%s\",\"variant\":\"%s\",\"launched_tiles\":%u,\"median_ms\":%.5f,"
               "\"tflops\":%.2f,\"ratio_to_loop\":%.4f,\"rel_err\":%.3e,\"ok\":%s}",
               sum->name, g->routing, g->skewed ? "true" : "false", g->experts, g->n, g->k, total,
               clcrt_sched_name(SCHEDS[si]), var->name, c.tiles.x, t, tf, t_loop / t, err, ok ? "true" : "false");
      if (ok && tf > sum->best[si]) sum->best[si] = tf, sum->best_variant[si] = var->name;
    }
  }
  cu->cuMemFree(gb.pa), cu->cuMemFree(gb.pb), cu->cuMemFree(gb.pc), cu->cuMemFree(DF);
  free(gb.ta), free(gb.tb), free(gb.m), free(gb.n), free(gb.k), free(gb.lda), free(gb.ldb), free(gb.ldc);
  free(gb.size), free(gb.alpha), free(gb.beta), free(pa), free(pb), free(pc), free(pcf);
  cu->cuMemFree(D), cu->cuMemFree(R), cu->cuMemFree(S);
  free(hd), free(hr);
}

static void print_grouped_summary(void) {
  if (!num_gsums) return;
  printf("\ngrouped summary: TFLOP/s; clcrt = best variant per scheduler; x loop / x grouped = STEAL's speed-up\n");
  printf("  %-30s %8s %8s %8s %8s %8s  %7s %9s %12s\n", "problem", "loop", "grouped", "STEAL", "STATIC", "FIXED",
         "x loop", "x grouped", "STEAL/STATIC");
  for (int i = 0; i < num_gsums; i++) {
    gsummary *s = &gsums[i];
    printf("  %-30s %8.1f %8.1f %8.1f %8.1f %8.1f  %7.3f %9.3f %12.3f\n", s->name, s->loop_tflops, s->gb_tflops,
           s->best[0], s->best[1], s->best[2], s->loop_tflops > 0 ? s->best[0] / s->loop_tflops : 0,
           s->gb_tflops > 0 ? s->best[0] / s->gb_tflops : 0, s->best[1] > 0 ? s->best[0] / s->best[1] : 0);
  }
}

static void print_summary(void) {
  if (!num_summaries) return;
  printf("\nsummary: best variant per scheduler, ratio = cuBLAS time / clcrt time (above 1 is faster)\n");
  printf("  %-18s %-7s %9s  %-22s %-22s %-22s %s\n", "shape", "kind", "cuBLAS TF", "STEAL", "STATIC", "FIXED",
         "STEAL/STATIC");
  double log_sum = 0;
  int llm = 0;
  for (int i = 0; i < num_summaries; i++) {
    summary *s = &summaries[i];
    char cell[NUM_SCHEDS][40];
    for (int k = 0; k < NUM_SCHEDS; k++) {
      char sk[16] = "";
      if (s->best_splits[k] > 1) snprintf(sk, sizeof sk, " sk%u", s->best_splits[k]);
      snprintf(cell[k], sizeof cell[k], "%.3f %s%s", s->best_ratio[k], s->best_variant[k] ? s->best_variant[k] : "-",
               sk);
    }
    double ss = s->best_ratio[1] > 0 ? s->best_ratio[0] / s->best_ratio[1] : 0;
    printf("  %-18s %-7s %9.1f  %-22s %-22s %-22s %.3f\n", s->shape, s->label, s->cublas_tflops, cell[0], cell[1],
           cell[2], ss);
    if (!strcmp(s->label, "llm") && s->best_ratio[0] > 0) log_sum += log(s->best_ratio[0]), llm++;
  }
  if (llm) printf("  geometric mean of STEAL's ratio over the %d LLM shapes: %.3f\n", llm, exp(log_sum / llm));
  /* One column per variant measured: what each tile shape, cluster and epilogue is worth. */
  printf("\nvariants: ratio to cuBLAS, best over schedulers and splits (skN: split-K N)\n  %-18s", "shape");
  for (int v = 0; v < GEMM_NUM_VARIANTS; v++)
    if (variant_on[v]) printf(" %14s", GEMM_VARIANTS[v].name);
  printf("\n");
  for (int i = 0; i < num_summaries; i++) {
    summary *s = &summaries[i];
    printf("  %-18s", s->shape);
    for (int v = 0; v < GEMM_NUM_VARIANTS; v++) {
      if (!variant_on[v]) continue;
      char cell[32];
      if (s->var_splits[v] > 1)
        snprintf(cell, sizeof cell, "%.3f sk%u", s->var_ratio[v], s->var_splits[v]);
      else
        snprintf(cell, sizeof cell, "%.3f", s->var_ratio[v]);
      printf(" %14s", cell);
    }
    printf("\n");
  }
}

int main(int argc, char **argv) {
  const char *json_path = NULL, *only = NULL, *variants = NULL;
  int quick = 0;
  dshape custom[16];
  int ncustom = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!strcmp(argv[i], "--variants") && i + 1 < argc)
      variants = argv[++i];
    else if (!strcmp(argv[i], "--align") && i + 1 < argc) {
      long al = atol(argv[++i]);
      if (al < 16 || (al & (al - 1))) {
        fprintf(stderr, "--align BYTES: a power of two, at least 16\n");
        return 2;
      }
      window_align = (size_t)al;
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc && ncustom < 16) {
      dshape *d = &custom[ncustom];
      d->label = "custom";
      if (sscanf(argv[++i], "%ux%ux%u", &d->m, &d->n, &d->k) != 3 || !d->m || !d->n || !d->k || d->k % 8) {
        fprintf(stderr, "--shape MxNxK (K a multiple of 8)\n");
        return 2;
      }
      ncustom++;
    } else if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else {
      fprintf(stderr,
              "usage: bench_gemm [--json FILE] [--quick] [--only compile|dense|grouped] [--variants NAME,...] "
              "[--shape MxNxK]... [--reps N] [--align BYTES]\n");
      return 2;
    }
  }
  if (reps < 3) reps = 3;
  for (int v = 0; v < GEMM_NUM_VARIANTS; v++) {
    if (variants) {
      const char *p = strstr(variants, GEMM_VARIANTS[v].name);
      size_t l = strlen(GEMM_VARIANTS[v].name);
      variant_on[v] = p && (p == variants || p[-1] == ',') && (p[l] == 0 || p[l] == ',');
    } else {
      variant_on[v] = !quick || v < 2;
    }
  }
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) {
    printf("bench_gemm: SKIP: %s\n", clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
    return 0;
  }
  cu = clcrt_runtime_driver(rt);
  CK(cu->cuCtxSetCurrent(clcrt_runtime_context(rt)));
  CKC(clcrt_stream_create(rt, NULL, &st));
  cs = clcrt_stream_cu(st);
  CKB(cublasLtCreate(&lt));
  CK(cu->cuMemAlloc(&lt_ws, LT_WS_BYTES));
  char name[256] = "";
  CUdevice dev = 0;
  if (cu->cuDeviceGet(&dev, o.device) == CUDA_SUCCESS) cu->cuDeviceGetName(name, sizeof name, dev);
  char date[32];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
  if (json_path && !(json = fopen(json_path, "w"))) {
    perror(json_path);
    return 1;
  }
  if (json)
    fprintf(json, "{\"bench\":\"gemm\",\"device\":\"%s\",\"arch\":\"%s\",\"sms\":%d,\"date\":\"%s\",\"cublasLt\":%zu,"
                  "\"reps\":%d,\"align\":%zu,\"results\":[",
            name, clcrt_runtime_arch(rt), clcrt_runtime_num_sms(rt), date, cublasLtGetVersion(), reps, window_align);
  printf("clcrt bench-gemm on %s (%s, %d SMs), %s, cuBLASLt %zu: bf16 in/out, fp32 accumulation; median of %d runs "
         "after %d warm-ups; operands %zu-byte aligned\n",
         name, clcrt_runtime_arch(rt), clcrt_runtime_num_sms(rt), date, cublasLtGetVersion(), reps, WARMUP, window_align);

  if (!only || !strcmp(only, "compile")) bench_compile();
  const int do_dense = !only || !strcmp(only, "dense"), do_grouped = !only || !strcmp(only, "grouped");
  const dshape *shapes = ncustom ? custom : quick ? QUICK_SHAPES : DENSE_SHAPES;
  int ns = ncustom ? ncustom
                   : quick ? (int)(sizeof QUICK_SHAPES / sizeof QUICK_SHAPES[0])
                           : (int)(sizeof DENSE_SHAPES / sizeof DENSE_SHAPES[0]);
  const gshape *gshapes = quick ? QUICK_GROUPED : GROUPED_SHAPES;
  int ngs = ncustom ? 0
                    : quick ? (int)(sizeof QUICK_GROUPED / sizeof QUICK_GROUPED[0])
                            : (int)(sizeof GROUPED_SHAPES / sizeof GROUPED_SHAPES[0]);
  /* One pool of random inputs, as large as the largest operand of the sections that run. */
  size_t need = 0;
  for (int i = 0; do_dense && i < ns; i++) {
    size_t a = (size_t)shapes[i].m * shapes[i].k, b = (size_t)shapes[i].n * shapes[i].k;
    if (a > need) need = a;
    if (b > need) need = b;
  }
  for (int i = 0; do_grouped && i < ngs; i++) {
    size_t a = (size_t)gshapes[i].tokens * gshapes[i].topk * gshapes[i].k;
    size_t b = (size_t)gshapes[i].experts * gshapes[i].n * gshapes[i].k;
    if (a > need) need = a;
    if (b > need) need = b;
  }
  if (need) pool_make(need + (need >> 3) + 4096);
  if (do_dense) {
    for (int i = 0; i < ns; i++) bench_dense_shape(&shapes[i], i);
    print_summary();
  }
  if (do_grouped && ngs) {
    CKB(cublasCreate(&blas));
    CKB(cublasSetStream(blas, cs));
    CKB(cublasSetWorkspace(blas, (void *)lt_ws, LT_WS_BYTES));
    for (int i = 0; i < ngs; i++) bench_grouped_shape(&gshapes[i], i);
    print_grouped_summary();
    cublasDestroy(blas);
  }
  if (json) {
    fprintf(json, "\n]}\n");
    fclose(json);
  }
  if (failures) printf("\nbench_gemm: %d check(s) FAILED (see WRONG above)\n", failures);
  cu->cuMemFree(lt_ws);
  if (pool_d) cu->cuMemFree(pool_d);
  free(pool_h);
  cublasLtDestroy(lt);
  clcrt_stream_destroy(st);
  clcrt_runtime_destroy(rt);
  return failures ? 1 : 0;
}
