/* `make bench-gemm`: clcrt's bf16 GEMM (the op, include/clcrt_ops.h) against cuBLAS, side by
 * side in one process on the GPU.
 *
 * Dense D[M x N] = A[M x K] . B[N x K]^T, bf16 in and out, fp32 accumulation. Per shape:
 *   - cuBLASLt: cublasLtMatmul with the heuristic's first algorithm, 32 MiB of workspace;
 *   - the default: what a user gets, clcrt_gemm(ops, stream, &desc) with a descriptor made by
 *     CLCRT_GEMM_DESC_INIT (no variant, split or scheduler asked for), on the rotated operand
 *     windows, so that its host path (check, plan, cached tensor maps, workspace, launch) is
 *     in the time. Its calls have an ops of their own: its tensor-map cache (64 entries) holds
 *     only its own windows' maps, as a user's holds its layers'. Up to 16 windows of A and B
 *     are 32 operands to that cache, which may miss where a user's steady state would hit;
 *   - the oracle's candidates, beside the default and never instead of it: the variants
 *     128x256, 128x256c2, 128x128 (and 128x64 for M <= 64, 128x128c2 for loads that are not
 *     128-byte aligned) with whole tiles, the plan's stream-K tail and every tile shared, under
 *     STEAL, and the plan's decomposition under STATIC; each a clcrt_gemm through a second ops,
 *     forced by the descriptor's variant, split and sched. Every candidate so far can be said
 *     that way; clcrt_gemm_plan_get checks that the op plans what the candidate means (JSON
 *     "as_meant"). "oracle" is the best of all of them (the default included), known only
 *     after measuring them all.
 * Shapes come in classes (bench/lib/gemm_classes.c lists them and their sources): bench (this
 * benchmark's first 11 shapes), model (projections of public model layers, M from 64 to
 * 16384), odd (every dimension divides by no tile), gemv (M <= 16), decode (decode projections
 * of eleven public models, M from 1 to 64), vocab (language-model heads: N the vocabulary, M
 * from 1 to 3000), align16 (A and B each at a random 16-byte offset past a 128-byte line, as
 * row slices of a tensor give; cuBLAS gets the same operands) and gen (shapes drawn from the
 * sizes real layers have). M <= 16 is also reported as bandwidth: B's bytes over the time,
 * against a device-to-device copy of 1 GiB measured in the same process (the target's
 * yardstick), and against a copy of B's own bytes timed back to back beside cuBLAS and the
 * default (a stream of that size pays the same launch, ramp and tail; cuBLAS's share beside).
 *
 * The seed: align16's offsets and the gen shapes are drawn from it, and every dense JSON row
 * carries it. --seed N replays a run; --seed random draws one from the clock; without it the
 * seed is BGEMM_SEED_DEFAULT, so that runs compare shape for shape. The run prints it first.
 *
 * Method: every contender of a shape runs once per round, rounds one after another (WARMUP
 * rounds, then --reps), each run timed with events and the stream idle between runs; the
 * median per contender. So the contenders of a shape share the card's clock and temperature
 * changes instead of taking turns at them. Then cuBLAS and the default also run back to back:
 * batches of R runs between one event pair, R so that a batch lasts about 1 ms, the two
 * taking turns batch by batch (gemm_timing.c). Short kernels differ between the two: in the
 * rounds each run pays the launch and a GPU gone idle before it (measured on an H100: up to 25% between
 * two invocations, and cuBLAS at 0.076 ms in the rounds against 0.060 ms alone). Back to back
 * is how users run them (a layer stack, a loop; host time per call printed beside it, since a
 * host slower than the kernel is what such a batch would then measure).
 *   WHICH FIGURE THE TARGETS USE: a shape whose cuBLAS run takes under 100 us in the rounds
 *   (BGEMM_SHORT_MS) is judged by its back-to-back ratio, a longer one by the rounds'. The
 *   per-class geo-mean of min(ratio, 1) and the worst, in the summary and in the JSON rows
 *   "dense-classes", use that figure ("target"); the rounds' geo-mean and worst stand beside
 *   them. The oracle has the rounds' figure only.
 * Inputs: windows of one pool of pseudo-random bf16 values in [-1, 1) (never zeros; made on
 * the device by a hash that the host recomputes for its fp64 checks); where a shape's
 * operands are smaller than 128 MiB the runs rotate over enough windows that no run finds its
 * operands in the 50 MiB L2. The pool is as large as the largest operand that runs (at most
 * 12 GiB; a larger --shape is skipped, as is a shape whose outputs do not fit the memory left,
 * each saying why). Every clcrt output is poisoned (NaN) and checked on the GPU against
 * cuBLAS's (relative Frobenius error at most 1e-2, every element written) before it is timed;
 * cuBLAS itself is checked on 16 elements against fp64 dot products.
 * TFLOP/s = 2 M N K / time; ratio = cuBLAS time / contender time (above 1 is faster).
 *
 * Grouped (mixture-of-experts layers): G experts share N and K; the routed rows lie one
 * expert after another in A (T x K) and D (T x N), the weights stacked (G*N x K), the rows
 * per expert (int32) in device memory. Contenders: a loop of one cublasGemmEx per non-empty
 * expert (needs the counts on the host; that copy is not timed), cublasGemmGroupedBatchedEx,
 * and clcrt's grouped tile function (all experts in one clcrt_run, the tiles found on the
 * device) under STEAL, STATIC and FIXED, interleaved in rounds like the dense shapes. Decode
 * problems also run the masked layout (every expert a fixed R rows, counts on the device) as
 * a replayed CUDA graph, which serves any routing.
 *
 * Usage: bench_gemm [--json FILE] [--quick] [--only compile|dense|grouped] [--class LIST]
 *                   [--shape MxNxK[@A,B]]... [--seed N|random] [--gen N] [--reps N] [--align BYTES]
 *                   [--no-oracle] [--wide] [--wide-only NAME,...] [--wide-trace] [--blocks] [--list]
 * --class: a comma-separated list of bench, model, odd, gemv, decode, vocab, align16, gen
 * (default: all). --quick: a few shapes of each class asked for (BGEMM_GEN_QUICK gen shapes
 * unless --gen says). --gen N: N generated shapes (default BGEMM_GEN_DEFAULT). --list: print
 * the dense shapes that would run, with align16's offsets, and exit (no GPU needed).
 * --shape MxNxK@A,B: A and B at A and B bytes past a 128-byte line (multiples of 16), as
 * align16 places them. Wherever operands are off 128-byte lines (align16, @A,B, --align below
 * 128) the default also runs on aligned windows of the same shape, and the summary reports
 * the offsets' speed over the aligned one (JSON "dense-aligned").
 * --blocks: the grouped problems' STEAL and STATIC also timed the way this benchmark first did,
 * each in a block of runs after the other, to compare the two methods. --wide-only: --wide over
 * the tile shapes named only ("64x160,64x160c2"; each in both orientations where it applies).
 * --wide-trace: --wide, each candidate also traced (trace_candidate: late starts, long tiles,
 * gaps between runs; with BENCH_TRACE_DIR set, each trace saved there as Perfetto JSON); tracing
 * compiles the traced variant of every kernel built, so use it with --wide-only and few shapes. */
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
#include <pthread.h>

#include <cuda.h> /* types only: the calls go through the runtime's driver table */

#include "gemm_internal.h" /* the op's internals: variants, plan, Args */
#include "clcrt.h"
#include "clcrt_ops.h"
#include "lib/gemm_bench.h" /* the shape classes and the timing */

#define WARMUP 3
static int reps = 20;

static const clcrt_driver *cu;
static clcrt_runtime *rt;
static double peak_bw; /* clcrt_runtime_mem_bandwidth(rt): the plan's model (gemm_model_for) */
static clcrt_stream *st;
static CUstream cs;
static FILE *json;
static int json_first = 1;
static int failures;
static int oracle = 1;
static int wide = 0; /* --wide: every tile shape timed back to back (the cost model's data) */
static const char *wide_only = NULL; /* --wide-only LIST: those tile shapes only (comma-separated names) */

/* Whether --wide-only lets tile shape `name` into the sweep. */
static int wide_wanted(const char *name) { return !wide_only || bench_listed(wide_only, name); }
static int wide_trace = 0; /* --wide-trace: each candidate also traced, a line of where its time goes */
static int blocks = 0; /* --blocks: grouped STEAL and STATIC also timed the old way */

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
#define CKB(x)                                                                           \
  do {                                                                                   \
    cublasStatus_t s_ = (x);                                                             \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      fprintf(stderr, "%s:%d: %s failed: status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)
#define CKC(x)                                                                              \
  do {                                                                                      \
    if ((x) != CLCRT_OK) {                                                                  \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x, clcrt_errmsg(rt)); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

static const clcrt_sched SCHEDS[] = {CLCRT_SCHED_STEAL, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};
#define NUM_SCHEDS 3
static const char *sched_name(clcrt_sched s) { return clcrt_sched_name(s); }
static int sched_index(clcrt_sched s) { return s == CLCRT_SCHED_STATIC ? 1 : s == CLCRT_SCHED_FIXED ? 2 : 0; }

static void json_row(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void json_row(const char *fmt, ...) {
  if (!json) return;
  fprintf(json, "%s\n  ", json_first ? "" : ",");
  json_first = 0;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(json, fmt, ap);
  va_end(ap);
  fflush(json); /* a run cut short by a time limit keeps the rows it made */
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---------------- device helpers: the input pool, the check, the copy ---------------- */

/* Value i of the pool: a hash of i to 24 random bits, as a float in [-1, 1), rounded to bf16
 * the way gemm_f2bf does. The device's fill (POOL_SRC) computes the same bits. */
static uint16_t pool_val(uint64_t i) {
  uint64_t h = i * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  h ^= h >> 31, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 29;
  float x = (float)(uint32_t)(h >> 40) * (1.0f / 8388608.0f) - 1.0f;
  uint32_t u;
  memcpy(&u, &x, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static const char *DEV_SRC =
    "struct FillArgs { unsigned short *p; unsigned long long n; };\n"
    "__device__ void fill_tile(const clcrt::Tile &t, const FillArgs &a) {\n"
    "  unsigned long long i0 = t.linear * 256ull * 64ull + threadIdx.x;\n"
    "  for (unsigned j = 0; j < 64; j++) {\n"
    "    unsigned long long i = i0 + 256ull * j;\n"
    "    if (i >= a.n) return;\n"
    "    unsigned long long h = i * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;\n"
    "    h ^= h >> 31; h *= 0xBF58476D1CE4E5B9ull; h ^= h >> 29;\n"
    "    float x = (float)(unsigned)(h >> 40) * (1.0f / 8388608.0f) - 1.0f;\n"
    "    unsigned u = __float_as_uint(x);\n"
    "    u += 0x7fffu + ((u >> 16) & 1u);\n"
    "    a.p[i] = (unsigned short)(u >> 16);\n"
    "  }\n"
    "}\n"
    "struct CmpArgs { const unsigned short *got, *ref; unsigned long long n; double *sums; unsigned *nan; };\n"
    "__device__ void cmp_tile(const clcrt::Tile &t, const CmpArgs &a) {\n"
    "  double num = 0, den = 0; unsigned nan = 0;\n"
    "  unsigned long long i0 = t.linear * 256ull * 64ull + threadIdx.x;\n"
    "  for (unsigned j = 0; j < 64; j++) {\n"
    "    unsigned long long i = i0 + 256ull * j;\n"
    "    if (i >= a.n) break;\n"
    "    float g = __uint_as_float((unsigned)a.got[i] << 16), r = __uint_as_float((unsigned)a.ref[i] << 16);\n"
    "    if (g != g || r != r) { nan++; continue; }\n"
    "    num += (double)(g - r) * (double)(g - r); den += (double)r * (double)r;\n"
    "  }\n"
    "  for (int o = 16; o; o >>= 1) {\n"
    "    num += __shfl_xor_sync(0xffffffffu, num, o); den += __shfl_xor_sync(0xffffffffu, den, o);\n"
    "    nan += __shfl_xor_sync(0xffffffffu, nan, o);\n"
    "  }\n"
    "  if ((threadIdx.x & 31) == 0) { atomicAdd(&a.sums[0], num); atomicAdd(&a.sums[1], den); atomicAdd(a.nan, nan); }\n"
    "}\n";

static clcrt_kernel *fill_k, *cmp_k;
static CUdeviceptr cmp_buf; /* two doubles and a count */

static void dev_helpers(void) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = DEV_SRC;
  d.block = (clcrt_dim3){256, 1, 1};
  d.sched = CLCRT_SCHED_FIXED;
  d.tile_fn = "fill_tile", d.args_type = "FillArgs";
  CKC(clcrt_register(rt, &d, &fill_k));
  d.tile_fn = "cmp_tile", d.args_type = "CmpArgs";
  CKC(clcrt_register(rt, &d, &cmp_k));
  CK(cu->cuMemAlloc(&cmp_buf, 24));
}

/* Relative Frobenius error of got against ref (n bf16 each, on the device); -1 when either
 * has a NaN (an element not written). */
static double dev_rel_error(CUdeviceptr got, CUdeviceptr ref, size_t n) {
  struct {
    uint64_t got, ref, n, sums, nan;
  } a = {got, ref, n, cmp_buf, cmp_buf + 16};
  CK(cu->cuMemsetD8Async(cmp_buf, 0, 24, cs));
  CKC(clcrt_run(st, cmp_k, (clcrt_dim3){(unsigned)((n + 16383) / 16384), 1, 1}, &a, sizeof a));
  unsigned char h[24];
  CK(cu->cuMemcpyDtoHAsync(h, cmp_buf, 24, cs));
  CK(cu->cuStreamSynchronize(cs));
  double num, den;
  unsigned nan;
  memcpy(&num, h, 8), memcpy(&den, h + 8, 8), memcpy(&nan, h + 16, 4);
  if (nan) return -1;
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static CUdeviceptr pool_d;
static size_t pool_n;

static void pool_make(size_t n) {
  pool_n = n;
  CK(cu->cuMemAlloc(&pool_d, n * 2));
  struct {
    uint64_t p, n;
  } a = {pool_d, n};
  CKC(clcrt_run(st, fill_k, (clcrt_dim3){(unsigned)((n + 16383) / 16384), 1, 1}, &a, sizeof a));
  CK(cu->cuStreamSynchronize(cs));
  uint16_t probe[4];
  size_t at[4] = {0, 1, n / 2, n - 1};
  for (int i = 0; i < 4; i++) {
    CK(cu->cuMemcpyDtoH(&probe[i], pool_d + at[i] * 2, 2));
    if (probe[i] != pool_val(at[i])) {
      fprintf(stderr, "the device's pool differs from the host's hash at %zu: 0x%04x, 0x%04x\n", at[i], probe[i],
              pool_val(at[i]));
      exit(1);
    }
  }
}

/* Alignment in bytes of the operand windows (--align; at least 16, what TMA needs). 1024 by
 * default, like any allocator's; the align16 class places operands at 16-byte offsets. */
static size_t window_align = 1024;

/* A window of `count` elements picked by `salt`: an offset that is a multiple of `align`
 * bytes plus `extra` bytes (extra < align). */
static size_t pool_window(size_t count, uint64_t salt, size_t align, size_t extra) {
  if (count + (align + extra) / 2 > pool_n) {
    fprintf(stderr, "a matrix of %zu elements does not fit the pool of %zu\n", count, pool_n);
    exit(1);
  }
  size_t room = pool_n - count - (align + extra) / 2;
  uint64_t h = salt * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  size_t mask = align / 2 - 1; /* in elements */
  return (room ? (size_t)(h % room) & ~mask : 0) + extra / 2;
}

/* Device-to-device copy bandwidth (bytes read + written per second) of a 1 GiB copy. */
static double copy_bw;
static void measure_copy(void) {
  size_t bytes = 1ull << 30;
  CUdeviceptr a, b;
  CK(cu->cuMemAlloc(&a, bytes));
  CK(cu->cuMemAlloc(&b, bytes));
  CK(cu->cuMemsetD8Async(a, 0x3c, bytes, cs));
  CUevent e0, e1;
  CK(cu->cuEventCreate(&e0, 0));
  CK(cu->cuEventCreate(&e1, 0));
  double t[15];
  for (int i = 0; i < 18; i++) {
    CK(cu->cuEventRecord(e0, cs));
    CK(cu->cuMemcpyDtoDAsync(b, a, bytes, cs));
    CK(cu->cuEventRecord(e1, cs));
    CK(cu->cuEventSynchronize(e1));
    float ms;
    CK(cu->cuEventElapsedTime(&ms, e0, e1));
    if (i >= 3) t[i - 3] = ms;
  }
  copy_bw = 2.0 * bytes / (median(t, 15) * 1e-3);
  printf("\ndevice-to-device copy of 1 GiB: %.0f GB/s (bytes read + written), median of 15\n", copy_bw / 1e9);
  json_row("{\"section\":\"copy\",\"bytes\":%zu,\"gbs\":%.1f}", bytes, copy_bw / 1e9);
  cu->cuEventDestroy(e0), cu->cuEventDestroy(e1);
  cu->cuMemFree(a), cu->cuMemFree(b);
}

/* ---------------- timing (bench/lib/gemm_timing.c) ---------------- */

typedef bgemm_timed contender;
static bgemm_timer timer; /* the driver, the stream, WARMUP and reps: set in main */

/* Every contender once per round: WARMUP rounds, then reps timed ones; medians in c[i].ms. */
static void time_rounds(contender *c, int n) { bgemm_time_rounds(&timer, c, n); }

/* ---------------- cuBLASLt ---------------- */

static cublasLtHandle_t lt;
static CUdeviceptr lt_ws;
static const size_t LT_WS_BYTES = 32u << 20;
#define MAX_ROT 16

typedef struct lt_gemm {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  CUdeviceptr A[MAX_ROT], B[MAX_ROT], D;
  int rot, next;
} lt_gemm;

/* Row-major D = A . B^T is column-major D^T (n x m) = op(B)(n x k) . A^T(k x m): cuBLAS's
 * "A" is our B read as a k x n column-major matrix, transposed; its "B" is our A as k x m. */
static void lt_setup(lt_gemm *g, unsigned m, unsigned n, unsigned k) {
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
    exit(1);
  }
  g->algo = res.algo;
}
static void lt_free(lt_gemm *g) {
  cublasLtMatrixLayoutDestroy(g->la), cublasLtMatrixLayoutDestroy(g->lb), cublasLtMatrixLayoutDestroy(g->lc);
  cublasLtMatmulDescDestroy(g->op);
}
/* The rotation window a contender's next run takes, stepping it: every launcher below keeps
 * `next` over its `rot` windows. */
static int next_window(int *next, int rot) {
  const int i = *next;
  *next = (i + 1) % rot;
  return i;
}

static void lt_launch(void *p) {
  lt_gemm *g = p;
  const float one = 1.0f, zero = 0.0f;
  const int i = next_window(&g->next, g->rot);
  CKB(cublasLtMatmul(lt, g->op, &one, (const void *)g->B[i], g->la, (const void *)g->A[i], g->lb, &zero,
                     (const void *)g->D, g->lc, (void *)g->D, g->lc, &g->algo, (void *)lt_ws, LT_WS_BYTES, cs));
}

/* A copy of B's bytes, from B's rotation windows into one buffer: for M <= 16, the yardstick of
 * a stream of that size run back to back (its launch, ramp and tail), beside the 1 GiB copy. */
typedef struct copy_ctx {
  CUdeviceptr src[MAX_ROT], dst;
  size_t bytes;
  int rot, next;
} copy_ctx;

static void copy_launch(void *p) {
  copy_ctx *c = p;
  const int i = next_window(&c->next, c->rot);
  CK(cu->cuMemcpyDtoDAsync(c->dst, c->src[i], c->bytes, cs));
}

/* ---------------- clcrt ---------------- */

/* The grouped problems' kernels (the dense shapes run through the op, clcrt_gemm, which
 * registers and prepares its own). Registered once per (variant, scheduler) and kept, with the
 * variants their runs launch built at once: a STEAL run whose grid claims nothing launches the
 * short variant, and the masked grouped run captured into a graph the graph variant. clcrt
 * builds a variant in the background on a run's first need and launches a fallback meanwhile
 * (one cluster per unit); prepared here, no timed run and no captured graph is the fallback's.
 * Other schedulers have no such variants (the call costs nothing there). */
static clcrt_kernel *kernels[GEMM_NUM_VARIANTS][NUM_SCHEDS][2];
static clcrt_kernel *kernel_for(int v, clcrt_sched s, int grouped) {
  int si = sched_index(s);
  if (!kernels[v][si][grouped]) {
    CKC(gemm_register(rt, clcrt_gemm_source(), &GEMM_VARIANTS[v], s, grouped, &kernels[v][si][grouped]));
    CKC(clcrt_kernel_prepare(kernels[v][si][grouped], CLCRT_USE_SHORT | (grouped ? CLCRT_USE_GRAPH : 0)));
  }
  return kernels[v][si][grouped];
}

typedef struct run_ctx {
  clcrt_kernel *k;
  clcrt_dim3 tiles;
  gemm_args a[MAX_ROT];
  int rot, next;
  CUdeviceptr ws, ctr;
} run_ctx;

static void clcrt_launch(void *p) {
  run_ctx *c = p;
  const int i = next_window(&c->next, c->rot);
  if (clcrt_run(st, c->k, c->tiles, &c->a[i], sizeof c->a[i]) != CLCRT_OK) {
    fprintf(stderr, "clcrt_run: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
}

/* ---------------- dense ---------------- */

static uint64_t run_seed = BGEMM_SEED_DEFAULT; /* --seed: align16's offsets and the gen class */
/* The default's calls go through an ops of their own, so that its cache of tensor maps and its
 * workspace hold what one layer's calls leave there, not the oracle's candidates' (a user does
 * not interleave 20 variants of one GEMM). */
static clcrt_ops *ops_def, *ops_orc;

typedef bgemm_summary summary; /* one per dense shape, for the summary (gemm_report.c) */
static summary *summaries;
static int num_summaries;

/* A clcrt contender of a dense shape: one clcrt_gemm per run, with the next rotation window's
 * operands in its descriptor. */
typedef struct op_ctx {
  clcrt_ops *ops;
  clcrt_gemm_desc d;
  uint64_t A[MAX_ROT], B[MAX_ROT];
  int rot, next;
} op_ctx;

static void op_launch(void *p) {
  op_ctx *c = p;
  const int i = next_window(&c->next, c->rot);
  c->d.a = c->A[i], c->d.b = c->B[i];
  if (clcrt_gemm(c->ops, st, &c->d) != CLCRT_OK) {
    fprintf(stderr, "clcrt_gemm: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
}

typedef struct dcont {
  gemm_plan p;  /* the plan meant: the default's (gemm_plan_dense), or a candidate's */
  gemm_args a;  /* its args on window 0, without tensor maps: stream-K, the shift */
  clcrt_gemm_plan_info info; /* what the op plans for it (clcrt_gemm_plan_get) */
  int as_meant;               /* info names p's variant, scheduler, stream-K and grid */
  op_ctx c;
  char what[64];
  double err;
  int ok;
} dcont;

static void plan_name(const gemm_plan *p, const gemm_args *a, char *out, size_t n) {
  char sk[32] = "whole";
  if (a->sk_units) snprintf(sk, sizeof sk, "sk %u/%u%s", a->sk_tiles, a->sk_units, a->sk_tail ? " last" : "");
  snprintf(out, n, "%s %s %s", gemm_plan_variant_name(p), sched_name(p->sched), sk);
}

/* A contender through the public op: the default (variant NULL, split AUTO, sched AUTO, as a
 * user's descriptor has them), or an oracle candidate forced through the descriptor's variant,
 * split and sched. p is the plan the benchmark means it to run, made with gemm_plan.h's
 * functions as the op makes it; clcrt_gemm_plan_get says whether the op agrees. */
static void dcont_setup(dcont *dc, clcrt_ops *ops, const gemm_plan *p, const char *variant, clcrt_gemm_split split,
                        clcrt_sched sched, const uint64_t *A, const uint64_t *B, int rot, CUdeviceptr D, unsigned m,
                        unsigned n, unsigned k) {
  memset(dc, 0, sizeof *dc);
  dc->p = *p;
  CKC(gemm_dense_args(NULL, p, &dc->a, A[0], B[0], D, m, n, k, 0, 0));
  const clcrt_gemm_desc d0 = CLCRT_GEMM_DESC_INIT;
  op_ctx *c = &dc->c;
  c->ops = ops, c->d = d0;
  c->d.m = m, c->d.n = n, c->d.k = k, c->d.a = A[0], c->d.b = B[0], c->d.d = D;
  c->d.variant = variant, c->d.split = split, c->d.sched = sched;
  c->rot = rot;
  for (int i = 0; i < rot; i++) c->A[i] = A[i], c->B[i] = B[i];
  const clcrt_gemm_plan_info i0 = CLCRT_GEMM_PLAN_INFO_INIT;
  clcrt_gemm_plan_info *info = &dc->info;
  *info = i0;
  CKC(clcrt_gemm_plan_get(ops, st, &c->d, info));
  /* Built now, with the variant a grid that claims nothing launches: no timed run is the
   * fallback's. */
  CKC(clcrt_gemm_prepare(ops, st, &c->d, CLCRT_USE_SHORT));
  const gemm_variant *v = gemm_variant_at(p->variant);
  dc->as_meant = !strcmp(info->variant, gemm_plan_variant_name(p)) &&
                 info->sched == p->sched && info->shared_tiles == dc->a.sk_tiles &&
                 info->units == dc->a.sk_units &&
                 info->tiles.x == gemm_dense_tiles(v, &dc->a).x;
  if (dc->as_meant)
    plan_name(p, &dc->a, dc->what, sizeof dc->what);
  else
    snprintf(dc->what, sizeof dc->what, "%s %s sk %u/%u (op)", info->variant, sched_name(info->sched),
             info->shared_tiles, info->units);
}
/* One run of the contender on window 0 into D, poisoned first, against cuBLAS's output R
 * (relative Frobenius error at most 1e-2, every element written); a wrong one counts as a
 * failure of the run. Returns dc->ok. */
static int dcont_check(dcont *dc, CUdeviceptr D, CUdeviceptr R, size_t nd) {
  CK(cu->cuMemsetD8Async(D, 0xff, nd * 2, cs));
  dc->c.next = 0;
  op_launch(&dc->c);
  dc->c.next = 0;
  dc->err = dev_rel_error(D, R, nd);
  dc->ok = dc->err >= 0 && dc->err <= 1e-2;
  if (!dc->ok) failures++;
  return dc->ok;
}

static int same_plan(const gemm_plan *a, const gemm_plan *b) {
  return a->variant == b->variant && a->trans == b->trans && a->sched == b->sched && a->sk_tiles == b->sk_tiles &&
         a->sk_units == b->sk_units && a->sk_tail == b->sk_tail;
}

static int try_alloc(CUdeviceptr *p, size_t bytes) {
  CUresult r = cu->cuMemAlloc(p, bytes);
  if (r == CUDA_SUCCESS) return 1;
  if (r != CUDA_ERROR_OUT_OF_MEMORY) CK(r);
  *p = 0;
  return 0;
}

static void skip_shape(summary *sum, const char *why) {
  const bgemm_shape *sh = sum->sh;
  sum->skipped = 1;
  printf("\n%s (%s, %s): skipped: %s\n", sum->shape, sh->cls, sh->label, why);
  json_row("{\"section\":\"dense-skip\",\"class\":\"%s\",\"label\":\"%s\",\"shape\":\"%s\",\"seed\":%llu,"
           "\"why\":\"%s\"}",
           sh->cls, sh->label, sum->shape, (unsigned long long)run_seed, why);
}

/* --wide-trace: six traced runs of the candidate back to back (the traced variant: an atomic
 * per tile more); of the last three, the median over runs of: the span from the first tile's
 * start to the last tile's end, the gap from the run before's last end, the tiles' starts after
 * the first (median and max) and their durations (median and max). Where a run's time goes:
 * tiles that start late (launch, cluster placement), long tiles, or the gaps between runs. */
static void trace_candidate(dcont *d) {
  enum { RUNS = 6, KEEP = 3, FIELDS = 6 };
  CKC(clcrt_stream_trace_enable(st, 1 << 16));
  d->c.next = 0;
  for (int r = 0; r < RUNS; r++) op_launch(&d->c);
  clcrt_trace *tr = NULL;
  CKC(clcrt_stream_trace_read(st, &tr));
  CKC(clcrt_stream_trace_enable(st, 0));
  size_t n = 0;
  const clcrt_trace_record *rec = clcrt_trace_records(tr, &n);
  uint64_t t0[RUNS], t1[RUNS];
  for (int r = 0; r < RUNS; r++) t0[r] = UINT64_MAX, t1[r] = 0;
  for (size_t i = 0; i < n; i++) {
    const unsigned r = rec[i].run;
    if (r >= RUNS) continue;
    if (rec[i].start_ns < t0[r]) t0[r] = rec[i].start_ns;
    if (rec[i].end_ns > t1[r]) t1[r] = rec[i].end_ns;
  }
  double f[FIELDS][KEEP] = {{0}}; /* per field, its value in each kept run (0 where a run recorded nothing) */
  double *starts = malloc((n + 1) * sizeof *starts), *durs = malloc((n + 1) * sizeof *durs);
  if (!starts || !durs) {
    fprintf(stderr, "trace: out of memory for %zu records\n", n);
    free(starts), free(durs), clcrt_trace_destroy(tr);
    return;
  }
  for (int k = 0; k < KEEP; k++) {
    const unsigned r = RUNS - KEEP + (unsigned)k;
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
      if (rec[i].run == r)
        starts[c] = (double)(rec[i].start_ns - t0[r]), durs[c] = (double)(rec[i].end_ns - rec[i].start_ns), c++;
    if (!c) continue;
    qsort(starts, c, sizeof *starts, bench_cmp_double), qsort(durs, c, sizeof *durs, bench_cmp_double);
    const double v[FIELDS] = {(double)(t1[r] - t0[r]), (double)t0[r] - (double)t1[r - 1], starts[c / 2],
                              starts[c - 1], durs[c / 2], durs[c - 1]};
    for (int j = 0; j < FIELDS; j++) f[j][k] = v[j];
  }
  free(starts), free(durs);
  for (int j = 0; j < FIELDS; j++) qsort(f[j], KEEP, sizeof f[j][0], bench_cmp_double); /* f[j][KEEP / 2]: median */
  printf("  trace %-34s span %6.1f us  gap %5.1f  starts +%4.1f/+%4.1f  tiles %5.1f/%5.1f us (%zu records)\n", d->what,
         f[0][KEEP / 2] / 1e3, f[1][KEEP / 2] / 1e3, f[2][KEEP / 2] / 1e3, f[3][KEEP / 2] / 1e3, f[4][KEEP / 2] / 1e3,
         f[5][KEEP / 2] / 1e3, n);
  const char *dir = getenv("BENCH_TRACE_DIR"); /* each candidate's trace as Perfetto JSON there */
  if (dir && *dir) {
    char path[512];
    const int w = snprintf(path, sizeof path, "%s/%ux%ux%u-%s.json", dir, d->c.d.m, d->c.d.n, d->c.d.k, d->what);
    if (w < 0 || (size_t)w >= sizeof path) {
      fprintf(stderr, "trace: BENCH_TRACE_DIR is too long a path\n");
    } else {
      for (char *q = path + strlen(dir) + 1; *q; q++) /* the file name: no spaces or slashes */
        if (*q == ' ' || *q == '/') *q = '_';
      if (clcrt_trace_save_json(tr, path) != CLCRT_OK) fprintf(stderr, "trace: %s\n", clcrt_errmsg(NULL));
    }
  }
  clcrt_trace_destroy(tr);
}

/* --wide, transposed (A and B swapped, the tiles' columns along M): up to WIDE_TRANS_M rows, the
 * tile shapes whose block N covers the problem in one block (the narrowest that does) or in two;
 * the model's transposed costs for such problems are what the sweep measures. With more rows,
 * every tile shape that can run transposed, those the model (its transposed epilogue counted)
 * puts within WIDE_TRANS_NEAR of its plan: the choice between the two orientations is what the
 * sweep measures there. */
#define WIDE_TRANS_M 256u
#define WIDE_TRANS_NEAR 1.5
static int wide_trans_candidate(const gemm_variant *v, unsigned m) {
  if (!gemm_trans_ok(v)) return 0;
  if (m > WIDE_TRANS_M) return 1;
  const unsigned one = gemm_cover_bn(m);
  return v->bn == one || (v->bn < one && gemm_cdiv(m, v->bn) == 2u);
}

/* --wide: every tile shape the op has (the measured variants but the ablations, and every
 * generated one), each with whole tiles and with the cost model's stream-K tail where that
 * differs, checked against cuBLAS's output and timed back to back with cuBLAS in the same
 * batches. The rows ("dense-wide") are what the cost model is fitted to; the default does
 * not depend on them. Their "align" is gemm_load_align's: bit 0 (GEMM_ALIGN_ROWS_OFF) set where
 * the rows of both operands are off their lines, bit 1 (GEMM_ALIGN_APART) where they are on
 * lines at offsets that differ. */
static void wide_sweep(const bgemm_shape *sh, lt_gemm *g, const uint64_t *A, const uint64_t *B, int rot,
                       CUdeviceptr D, CUdeviceptr R, size_t nd, int runs) {
  const unsigned m = sh->m, n = sh->n, k = sh->k;
  const int sms = clcrt_stream_grid_sms(st);
  const unsigned align = gemm_load_align(A[0], B[0], k);
  enum { WMAX = 6 * GEMM_ALL_VARIANTS };
  dcont *dc = calloc(WMAX, sizeof *dc);
  contender *ct = calloc(WMAX + 1, sizeof *ct);
  int nc = 0;
  /* cuBLAS's output of window 0 again: its timed runs since wrote other windows' into R. */
  g->next = 0;
  lt_launch(g);
  g->next = 0;
  CK(cu->cuStreamSynchronize(cs));
  /* Candidates the model puts past 4x its plan are left out (a 64x16 tile on a large problem
   * would take most of the sweep's time and teach nothing). */
  const double best_cost = gemm_plan_dense(m, n, k, align, sms, peak_bw).cost;
  for (int trans = 0; trans < 2; trans++)
    for (int vi = 0; vi < GEMM_ALL_VARIANTS; vi++) {
      const gemm_variant *v = gemm_plan_candidate(vi);
      if (!v || (trans && !wide_trans_candidate(v, m)) || !wide_wanted(v->name)) continue;
      for (int share = 0; share < 3; share++) {
        gemm_plan p;
        memset(&p, 0, sizeof p);
        p.variant = vi, p.sched = CLCRT_SCHED_STEAL, p.shift = 1, p.trans = trans;
        static const gemm_share shares[3] = {GEMM_SHARE_WHOLE, GEMM_SHARE_TAIL, GEMM_SHARE_ALL};
        static const clcrt_gemm_split splits[3] = {CLCRT_GEMM_SPLIT_NONE, CLCRT_GEMM_SPLIT_AUTO,
                                                   CLCRT_GEMM_SPLIT_ALL};
        /* Transposed, the tiles' view is the swapped problem (n rows, m columns). */
        const unsigned tm = trans ? n : m, tn = trans ? m : n;
        gemm_plan_share(&p, shares[share], tm, tn, k, sms, peak_bw);
        if (share && !p.sk_units) continue;
        /* Every tile in slices: only where the tiles are fewer than two waves. */
        if (share == 2 && gemm_work_tiles(v, tm, tn) >= 2u * (unsigned)sms / v->cm) continue;
        /* The model's cost of a transposed plan of few rows is what the sweep is to calibrate:
         * not a filter there. */
        const double epi = trans ? gemm_plan_trans_epi(v, m, n, sms) : 0.0;
        if (!trans && p.cost > 4 * best_cost) continue;
        if (trans && m > WIDE_TRANS_M && p.cost + epi > WIDE_TRANS_NEAR * best_cost) continue;
        dcont_setup(&dc[nc], ops_orc, &p, gemm_plan_variant_name(&p), splits[share], CLCRT_SCHED_STEAL, A, B, rot,
                    D, m, n, k);
        if (!dcont_check(&dc[nc], D, R, nd)) printf("  wide %-34s WRONG: err %.2e\n", dc[nc].what, dc[nc].err);
        nc++;
      }
    }
  int nt = 0;
  int *map = calloc(WMAX + 1, sizeof *map);
  ct[nt] = (contender){.fn = lt_launch, .ctx = g}, map[nt++] = -1;
  for (int i = 0; i < nc; i++)
    if (dc[i].ok) ct[nt] = (contender){.fn = op_launch, .ctx = &dc[i].c}, map[nt++] = i;
  bgemm_time_b2b(&timer, ct, nt, runs);
  const double tr = ct[0].b2b_ms;
  int bi = -1;
  for (int t = 1; t < nt; t++) {
    dcont *d = &dc[map[t]];
    const gemm_variant *v = gemm_variant_at(d->p.variant);
    if (bi < 0 || ct[t].b2b_ms < ct[bi].b2b_ms) bi = t;
    json_row("{\"section\":\"dense-wide\",\"class\":\"%s\",\"shape\":\"%ux%ux%u\",\"m\":%u,\"n\":%u,\"k\":%u,"
             "\"align\":%u,\"sms\":%d,\"mem_bw\":%.6g,\"variant\":\"%s\",\"trans\":%d,\"bm\":%u,\"bn\":%u,\"cm\":%u,"
             "\"stages\":%u,"
             "\"sk_tiles\":%u,\"sk_units\":%u,\"model_cost\":%.2f,\"trans_epi\":%.2f,\"b2b_ms\":%.5f,\"b2b_min_ms\":%.5f,"
             "\"cublas_b2b_ms\":%.5f,\"ratio\":%.4f}",
             sh->cls, m, n, k, m, n, k, align, sms, peak_bw, v->name, d->p.trans, v->bm, v->bn, v->cm, v->stages,
             d->a.sk_tiles, d->a.sk_units, d->p.cost,
             d->p.trans ? gemm_plan_trans_epi(v, m, n, sms) : 0.0, ct[t].b2b_ms, ct[t].b2b_min, tr, tr / ct[t].b2b_ms);
  }
  if (wide_trace)
    for (int t = 1; t < nt; t++) trace_candidate(&dc[map[t]]);
  if (bi > 0)
    printf("  wide: %d candidates back to back; best %s %.4f ms = %.3fx cuBLAS (%.4f ms)\n", nt - 1,
           dc[map[bi]].what, ct[bi].b2b_ms, tr / ct[bi].b2b_ms, tr);
  free(map), free(ct), free(dc);
}

/* --wide: every tile shape built before the sweep, on as many threads as the host has cores
 * (each a separate NVRTC compile; the disk cache keeps them for the next run). */
typedef struct warm_job {
  int next;
  pthread_mutex_t lock;
} warm_job;
static void *warm_thread(void *p) {
  warm_job *j = p;
  for (;;) {
    pthread_mutex_lock(&j->lock);
    int vi = j->next++;
    pthread_mutex_unlock(&j->lock);
    if (vi >= 2 * GEMM_ALL_VARIANTS) return NULL;
    /* The normal kernels, then the transposed ones (the sweep's problems of few rows). */
    const int trans = vi >= GEMM_ALL_VARIANTS;
    if (trans) vi -= GEMM_ALL_VARIANTS;
    const gemm_variant *v = gemm_plan_candidate(vi);
    if (!v || (trans && !gemm_trans_ok(v)) || !wide_wanted(v->name)) continue;
    const char *name = trans ? gemm_variant_name_t(vi) : v->name;
    const clcrt_kernel *kk;
    if (clcrt_gemm_kernel(ops_orc, name, CLCRT_SCHED_STEAL, CLCRT_GEMM_DENSE, &kk) != CLCRT_OK ||
        clcrt_kernel_prepare(kk, CLCRT_USE_SHORT) != CLCRT_OK)
      fprintf(stderr, "wide: %s: %s\n", name, clcrt_errmsg(rt));
  }
}
static void wide_warm(void) {
  warm_job j = {.next = 0};
  pthread_mutex_init(&j.lock, NULL);
  long nth = sysconf(_SC_NPROCESSORS_ONLN);
  if (nth < 1) nth = 1;
  if (nth > 32) nth = 32;
  pthread_t th[32];
  const double t0 = now_ms();
  for (long i = 0; i < nth; i++) pthread_create(&th[i], NULL, warm_thread, &j);
  for (long i = 0; i < nth; i++) pthread_join(th[i], NULL);
  printf("wide: every tile shape built in %.1f s on %ld threads\n", (now_ms() - t0) / 1e3, nth);
}

/* Operands off 128-byte lines (align16, --align below 128): the default once more on windows
 * 1024-byte aligned (the plan the op makes there), against the default at the offsets, in
 * the figure the targets use (back to back for short shapes, else the rounds; the two timed
 * together). Checked first against cuBLAS on the aligned windows (R is cuBLAS's output of the
 * offset windows again afterwards). Sets sum->vs_aligned = aligned time / offset time. */
static void aligned_twin(summary *sum, const bgemm_shape *sh, int idx, dcont *def, lt_gemm *g, int rot, CUdeviceptr D,
                         CUdeviceptr R, int sms, int runs) {
  const unsigned m = sh->m, n = sh->n, k = sh->k;
  const size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
  uint64_t A2[MAX_ROT], B2[MAX_ROT];
  for (int i = 0; i < rot; i++) {
    A2[i] = pool_d + pool_window(na, 100 * (uint64_t)idx + 2 * i + 51, 1024, 0) * 2;
    B2[i] = pool_d + pool_window(nb, 100 * (uint64_t)idx + 2 * i + 52, 1024, 0) * 2;
  }
  const gemm_plan p2 = gemm_plan_dense(m, n, k, gemm_load_align(A2[0], B2[0], k), sms, peak_bw);
  dcont *tw = calloc(1, sizeof *tw);
  if (!tw) {
    fprintf(stderr, "bench_gemm: out of host memory\n");
    exit(1);
  }
  /* A default descriptor through the oracle's ops, so that the default's tensor-map cache holds
   * the same maps in this comparison as in its own timing. */
  dcont_setup(tw, ops_orc, &p2, NULL, CLCRT_GEMM_SPLIT_AUTO, CLCRT_SCHED_AUTO, A2, B2, rot, D, m, n, k);
  lt_gemm g2 = *g;
  g2.next = 0;
  for (int i = 0; i < rot; i++) g2.A[i] = A2[i], g2.B[i] = B2[i];
  CK(cu->cuMemsetD8Async(R, 0xff, nd * 2, cs));
  lt_launch(&g2);
  const int ok = dcont_check(tw, D, R, nd);
  g->next = 0; /* R back to cuBLAS's output of the offset windows, for the sweep */
  lt_launch(g);
  g->next = 0;
  CK(cu->cuStreamSynchronize(cs));
  if (!ok) {
    printf("  aligned  %-34s WRONG: err %.2e\n", tw->what, tw->err);
    free(tw);
    return;
  }
  contender c[2] = {{.fn = op_launch, .ctx = &def->c}, {.fn = op_launch, .ctx = &tw->c}};
  def->c.next = 0, tw->c.next = 0;
  double t_off, t_al;
  if (sum->is_short) {
    bgemm_time_b2b(&timer, c, 2, runs);
    t_off = c[0].b2b_ms, t_al = c[1].b2b_ms;
  } else {
    time_rounds(c, 2);
    t_off = c[0].ms, t_al = c[1].ms;
  }
  sum->vs_aligned = t_al / t_off;
  printf("  aligned  %-34s %9.4f ms against %.4f ms at the offsets (%s): offsets at %.3fx the aligned speed\n",
         tw->what, t_al, t_off, sum->is_short ? "back to back" : "rounds", sum->vs_aligned);
  json_row("{\"section\":\"dense-aligned\",\"class\":\"%s\",\"label\":\"%s\",\"shape\":\"%s\",\"seed\":%llu,"
           "\"a_off\":%u,\"b_off\":%u,\"variant\":\"%s\",\"kshift\":%u,\"ashift\":%u,\"aligned_variant\":\"%s\",\"timing\":\"%s\","
           "\"offset_ms\":%.5f,\"aligned_ms\":%.5f,\"vs_aligned\":%.4f}",
           sh->cls, sh->label, sum->shape, (unsigned long long)run_seed, sum->a_off, sum->b_off, def->info.variant,
           def->a.kshift, def->a.ashift, tw->info.variant, sum->is_short ? "b2b" : "rounds", t_off, t_al, sum->vs_aligned);
  free(tw);
}

static void bench_dense_shape(const bgemm_shape *sh, int idx) {
  const unsigned m = sh->m, n = sh->n, k = sh->k;
  const double flop = 2.0 * m * n * k;
  const size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
  const int a16 = !strcmp(sh->cls, "align16") || sh->offs;
  summary *sum = &summaries[num_summaries++];
  memset(sum, 0, sizeof *sum);
  snprintf(sum->shape, sizeof sum->shape, "%ux%ux%u", m, n, k);
  sum->sh = sh;
  if (na + 64 > pool_n || nb + 64 > pool_n) {
    char why[128];
    snprintf(why, sizeof why, "an operand of %.1f GB is larger than the pool (%.1f GB, capped)",
             (double)(na > nb ? na : nb) * 2e-9, (double)pool_n * 2e-9);
    skip_shape(sum, why);
    return;
  }
  CUdeviceptr D = 0, R = 0;
  if (!try_alloc(&D, nd * 2) || !try_alloc(&R, nd * 2)) {
    char why[128];
    snprintf(why, sizeof why, "its output and cuBLAS's (2 x %.1f GB) do not fit the free device memory",
             (double)nd * 2e-9);
    if (D) cu->cuMemFree(D);
    skip_shape(sum, why);
    return;
  }
  /* Rotation: enough windows that the operands of one run are out of L2 by its next. */
  const size_t opb = (na + nb) * 2;
  int rot = opb >= (128u << 20) ? 1 : (int)((128u << 20) / opb + 1);
  if (rot > MAX_ROT) rot = MAX_ROT;
  /* align16: A and B each at a random 16-byte offset past a 128-byte line, the same in every
   * window (a row slice of one tensor keeps its offset). */
  if (sh->offs)
    sum->a_off = sh->a_off, sum->b_off = sh->b_off;
  else if (a16)
    bgemm_offsets16(run_seed, sh, &sum->a_off, &sum->b_off);
  uint64_t A[MAX_ROT], B[MAX_ROT];
  for (int i = 0; i < rot; i++) {
    size_t oa = pool_window(na, 100 * (uint64_t)idx + 2 * i + 1, a16 ? 128 : window_align, sum->a_off);
    size_t ob = pool_window(nb, 100 * (uint64_t)idx + 2 * i + 2, a16 ? 128 : window_align, sum->b_off);
    A[i] = pool_d + oa * 2, B[i] = pool_d + ob * 2;
  }
  /* --align below 128: each window at its own offset; the rows record window 0's. */
  if (!a16 && window_align < 128) sum->a_off = (unsigned)(A[0] % 128u), sum->b_off = (unsigned)(B[0] % 128u);

  /* cuBLAS: the reference output (window 0), checked on 16 elements against fp64. */
  lt_gemm g;
  memset(&g, 0, sizeof g);
  lt_setup(&g, m, n, k);
  g.rot = rot, g.D = R;
  for (int i = 0; i < rot; i++) g.A[i] = A[i], g.B[i] = B[i];
  CK(cu->cuMemsetD8Async(R, 0xff, nd * 2, cs));
  lt_launch(&g);
  g.next = 0;
  CK(cu->cuStreamSynchronize(cs));
  const size_t oa0 = (A[0] - pool_d) / 2, ob0 = (B[0] - pool_d) / 2;
  int lt_bad = 0;
  uint64_t s = 0x1234 + (uint64_t)idx;
  for (int t = 0; t < 16; t++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    size_t i = (size_t)(s % m), j = (size_t)((s >> 32) % n);
    double ref = 0, mag = 0;
    for (size_t q = 0; q < k; q++) {
      double pr = (double)gemm_bf2f(pool_val(oa0 + i * k + q)) * gemm_bf2f(pool_val(ob0 + j * k + q));
      ref += pr, mag += fabs(pr);
    }
    uint16_t h;
    CK(cu->cuMemcpyDtoH(&h, R + (i * n + j) * 2, 2));
    double got = gemm_bf2f(h);
    if (!(fabs(got - ref) <= 8e-3 * fabs(ref) + 1e-4 * mag + 1e-6)) lt_bad++;
  }
  if (lt_bad) {
    printf("  cuBLAS disagrees with fp64 on %d of 16 sampled elements: its call is wrong\n", lt_bad);
    failures++;
  }

  /* The default, then the oracle's candidates (different from it and from each other). */
  const unsigned align = gemm_load_align(A[0], B[0], k);
  dcont *dc = calloc(24, sizeof *dc);
  int nc = 0;
  const int sms = clcrt_stream_grid_sms(st);
  gemm_plan def = gemm_plan_dense(m, n, k, align, sms, peak_bw);
  dcont_setup(&dc[nc++], ops_def, &def, NULL, CLCRT_GEMM_SPLIT_AUTO, CLCRT_SCHED_AUTO, A, B, rot, D, m, n, k);
  if (oracle) {
    const char *vars[5] = {"128x256", "128x256c2", "128x128", NULL, NULL};
    int nv = 3;
    if (m <= 64) vars[nv++] = "128x64";
    if (align < 128) vars[nv++] = "128x128c2";
    static const clcrt_gemm_split splits[3] = {CLCRT_GEMM_SPLIT_NONE, CLCRT_GEMM_SPLIT_AUTO, CLCRT_GEMM_SPLIT_ALL};
    for (int vi = 0; vi < nv; vi++)
      for (int share = 0; share < 3; share++)
        for (int si = 0; si < 2; si++) {
          if (si == 1 && share != (int)GEMM_SHARE_TAIL) continue; /* STATIC: the model's decomposition */
          if (si == 1 && vi > 1) continue;
          gemm_plan p = def;
          p.variant = gemm_variant_index(vars[vi]);
          p.trans = 0;
          /* Every tile in slices: only where the tiles are fewer than two waves. */
          if (share == GEMM_SHARE_ALL &&
              gemm_work_tiles(gemm_variant_at(p.variant), m, n) >= 2u * (unsigned)sms / gemm_variant_at(p.variant)->cm)
            continue;
          p.sched = si ? CLCRT_SCHED_STATIC : CLCRT_SCHED_STEAL;
          gemm_plan_share(&p, (gemm_share)share, m, n, k, sms, peak_bw);
          int dup = 0;
          for (int q = 0; q < nc; q++) dup |= same_plan(&dc[q].p, &p);
          if (!dup && nc < 24)
            dcont_setup(&dc[nc++], ops_orc, &p, vars[vi], splits[share], p.sched, A, B, rot, D, m, n, k);
        }
  }
  if (oracle) {
    /* The model's best plan of the other orientation (transposed where the default is not, and
     * the reverse), forced by its name: what the choice between them gained or lost. */
    gemm_plan o = gemm_plan_dense_as(m, n, k, align, sms, peak_bw, !def.trans);
    const char *tname = gemm_plan_variant_name(&o);
    int dup = !tname;
    for (int q = 0; q < nc; q++) dup |= same_plan(&dc[q].p, &o);
    if (!dup && nc < 24) dcont_setup(&dc[nc++], ops_orc, &o, tname, CLCRT_GEMM_SPLIT_AUTO, CLCRT_SCHED_STEAL, A, B, rot,
                                     D, m, n, k);
  }
  /* Checks, on window 0. */
  for (int i = 0; i < nc; i++) dcont_check(&dc[i], D, R, nd);
  /* Timing: cuBLAS and every clcrt contender that passed, in rounds; then cuBLAS and the default
   * back to back, in batches of about BGEMM_B2B_MS. */
  contender ct[25];
  int map[25], nt = 0;
  ct[nt] = (contender){.fn = lt_launch, .ctx = &g}, map[nt++] = -1;
  for (int i = 0; i < nc; i++)
    if (dc[i].ok) ct[nt] = (contender){.fn = op_launch, .ctx = &dc[i].c}, map[nt++] = i;
  time_rounds(ct, nt);
  const double t_ref = ct[0].ms;
  const int runs = bgemm_b2b_runs(t_ref);
  contender bb[3] = {{.fn = lt_launch, .ctx = &g}, {.fn = op_launch, .ctx = &dc[0].c}, {.fn = NULL}};
  int nbb = dc[0].ok ? 2 : 1;
  copy_ctx cc = {.bytes = nb * 2, .rot = rot};
  if (m <= 16 && dc[0].ok && try_alloc(&cc.dst, cc.bytes)) {
    for (int i = 0; i < rot; i++) cc.src[i] = B[i];
    bb[nbb++] = (contender){.fn = copy_launch, .ctx = &cc};
  }
  bgemm_time_b2b(&timer, bb, nbb, runs);
  if (cc.dst) CK(cu->cuMemFree(cc.dst));
  sum->cublas_ms = t_ref;
  sum->cublas_tflops = flop / (t_ref * 1e9);
  sum->is_short = t_ref < BGEMM_SHORT_MS;
  char offs[48] = "";
  if (a16) snprintf(offs, sizeof offs, " (A at +%u, B at +%u bytes)", sum->a_off, sum->b_off);
  printf("\n%s (%s, %s): cuBLASLt %.4f ms = %.1f TFLOP/s (fastest %.4f); back to back %.4f ms (%d a batch, host %.1f "
         "us a call); loads %u-byte aligned%s%s%s\n",
         sum->shape, sh->cls, sh->label, t_ref, sum->cublas_tflops, ct[0].min, bb[0].b2b_ms, runs, bb[0].host_us,
         align & ~(GEMM_ALIGN_ROWS_OFF | GEMM_ALIGN_APART),
         align & GEMM_ALIGN_ROWS_OFF ? " (rows of both operands off their lines)" : "",
         offs, rot > 1 ? "; operands rotated" : "");
  json_row("{\"section\":\"dense\",\"class\":\"%s\",\"label\":\"%s\",\"shape\":\"%s\",\"m\":%u,\"n\":%u,\"k\":%u,"
           "\"seed\":%llu,\"a_off\":%u,\"b_off\":%u,\"contender\":\"cublas\",\"variant\":\"cublasLt\",\"median_ms\":%.5f,"
           "\"min_ms\":%.5f,\"b2b_ms\":%.5f,\"b2b_min_ms\":%.5f,\"b2b_runs\":%d,\"host_us\":%.2f,\"tflops\":%.2f,"
           "\"ratio_to_cublas\":1.0,\"ok\":%s}",
           sh->cls, sh->label, sum->shape, m, n, k, (unsigned long long)run_seed, sum->a_off, sum->b_off, t_ref, ct[0].min,
           bb[0].b2b_ms, bb[0].b2b_min, runs, bb[0].host_us, sum->cublas_tflops, lt_bad ? "false" : "true");
  double best = 0;
  for (int ti = 1; ti < nt; ti++) {
    dcont *d = &dc[map[ti]];
    double t = ct[ti].ms, ratio = t_ref / t, tf = flop / (t * 1e9);
    const int is_def = map[ti] == 0;
    printf("  %-8s %-34s %9.4f ms (fastest %.4f) %7.1f TFLOP/s %6.3fx cuBLAS  err %.2e%s\n", is_def ? "default" : "",
           d->what, t, ct[ti].min, tf, ratio, d->err, d->as_meant ? "" : "  (not the plan meant)");
    char b2b[256] = "";
    if (is_def) {
      sum->def_ratio = ratio;
      sum->def_b2b_ratio = bb[0].b2b_ms / bb[1].b2b_ms;
      sum->target_ratio = sum->is_short ? sum->def_b2b_ratio : ratio;
      snprintf(sum->def_what, sizeof sum->def_what, "%s", d->what);
      printf("  %-8s %-34s %9.4f ms (fastest %.4f) %7s %-15s %6.3fx cuBLAS  (host %.1f us a call; targets: %s)\n", "",
             "back to back", bb[1].b2b_ms, bb[1].b2b_min, "", "", sum->def_b2b_ratio, bb[1].host_us,
             sum->is_short ? "back to back" : "rounds");
      snprintf(b2b, sizeof b2b,
               "\"path\":\"clcrt_gemm\",\"b2b_ms\":%.5f,\"b2b_min_ms\":%.5f,\"b2b_runs\":%d,\"host_us\":%.2f,"
               "\"ratio_b2b\":%.4f,\"target_ratio\":%.4f,\"target_timing\":\"%s\",",
               bb[1].b2b_ms, bb[1].b2b_min, runs, bb[1].host_us, sum->def_b2b_ratio, sum->target_ratio,
               sum->is_short ? "b2b" : "rounds");
      if (m <= 16) { /* memory-bound: B's bytes over the time the targets use, against the copy */
        const double td = sum->is_short ? bb[1].b2b_ms : t, tr = sum->is_short ? bb[0].b2b_ms : t_ref;
        const double bw = (double)nb * 2 / (td * 1e-3);
        sum->gemv_frac = bw / copy_bw;
        printf("  default streams B at %.0f GB/s: %.3f of the copy's %.0f GB/s (cuBLAS %.0f GB/s)\n", bw / 1e9,
               sum->gemv_frac, copy_bw / 1e9, (double)nb * 2 / (tr * 1e-3) / 1e9);
        if (nbb == 3) { /* all three back to back, whatever the targets' figure */
          const double same = 2.0 * (double)nb * 2 / (bb[2].b2b_ms * 1e-3);
          sum->gemv_frac_same = (double)nb * 2 / (bb[1].b2b_ms * 1e-3) / same;
          sum->cublas_frac_same = (double)nb * 2 / (bb[0].b2b_ms * 1e-3) / same;
          printf("  a copy of B's %.1f MB back to back: %.4f ms, %.0f GB/s (read + written); back to back the "
                 "default streams B at %.3f of it, cuBLAS at %.3f\n",
                 (double)nb * 2e-6, bb[2].b2b_ms, same / 1e9, sum->gemv_frac_same, sum->cublas_frac_same);
        }
      }
    } else {
      snprintf(b2b, sizeof b2b, "\"path\":\"clcrt_gemm forced\",");
    }
    json_row("{\"section\":\"dense\",\"class\":\"%s\",\"label\":\"%s\",\"shape\":\"%s\",\"m\":%u,\"n\":%u,\"k\":%u,"
             "\"seed\":%llu,\"contender\":\"%s\",\"variant\":\"%s\",\"sched\":\"%s\",\"sk_tiles\":%u,\"sk_units\":%u,"
             "\"sk_tail\":%u,\"kshift\":%u,\"ashift\":%u,\"as_meant\":%s,%s"
             "\"plan_cost\":%.1f,\"median_ms\":%.5f,\"min_ms\":%.5f,\"tflops\":%.2f,\"ratio_to_cublas\":%.4f,"
             "\"rel_err\":%.3e,\"ok\":true}",
             sh->cls, sh->label, sum->shape, m, n, k, (unsigned long long)run_seed, is_def ? "default" : "candidate",
             d->info.variant, sched_name(d->info.sched), d->info.shared_tiles, d->info.units,
             d->a.sk_tail,
             d->a.kshift, d->a.ashift, d->as_meant ? "true" : "false", b2b, d->p.cost, t, ct[ti].min, tf, ratio, d->err);
    if (ratio > best) best = ratio, snprintf(sum->oracle_what, sizeof sum->oracle_what, "%s", d->what);
  }
  for (int i = 0; i < nc; i++)
    if (!dc[i].ok) printf("  %-8s %-34s WRONG: err %.2e\n", i == 0 ? "default" : "", dc[i].what, dc[i].err);
  if ((a16 || window_align < 128) && dc[0].ok) aligned_twin(sum, sh, idx, &dc[0], &g, rot, D, R, sms, runs);
  sum->oracle_ratio = best;
  json_row("{\"section\":\"dense-summary\",\"class\":\"%s\",\"label\":\"%s\",\"shape\":\"%s\",\"seed\":%llu,"
           "\"cublas_ms\":%.5f,\"cublas_tflops\":%.2f,\"default\":\"%s\",\"default_ratio\":%.4f,"
           "\"default_ratio_b2b\":%.4f,\"target_ratio\":%.4f,\"target_timing\":\"%s\",\"oracle\":\"%s\","
           "\"oracle_ratio\":%.4f,\"gemv_of_copy\":%.4f,\"gemv_of_same_copy\":%.4f,"
           "\"cublas_of_same_copy\":%.4f}",
           sh->cls, sh->label, sum->shape, (unsigned long long)run_seed, t_ref, sum->cublas_tflops, sum->def_what,
           sum->def_ratio, sum->def_b2b_ratio, sum->target_ratio, sum->is_short ? "b2b" : "rounds", sum->oracle_what,
           sum->oracle_ratio, sum->gemv_frac, sum->gemv_frac_same, sum->cublas_frac_same);
  free(dc);
  if (wide) wide_sweep(sh, &g, A, B, rot, D, R, nd, runs);
  lt_free(&g);
  cu->cuMemFree(D), cu->cuMemFree(R);
}

static void print_dense_summary(void) { bgemm_summary_print(summaries, num_summaries, run_seed, json_row); }

/* ---------------- grouped ---------------- */

typedef struct gshape {
  const char *name, *routing;
  unsigned experts, n, k, tokens, topk;
  double zipf;     /* 0: uniform */
  unsigned never;  /* experts no token is routed to */
  unsigned masked; /* decode: also the masked layout with this many rows per expert */
} gshape;

static const gshape GROUPED_SHAPES[] = {
    {"mixtral", "zipf 1.2", 8, 14336, 4096, 8192, 2, 1.2, 0, 0},
    {"mixtral", "uniform", 8, 14336, 4096, 8192, 2, 0.0, 0, 0},
    {"deepseek-32", "zipf 1.2, 4 unused", 32, 4096, 7168, 4096, 8, 1.2, 4, 0},
    {"deepseek-32", "uniform", 32, 4096, 7168, 4096, 8, 0.0, 0, 0},
    {"deepseek-32 decode", "uniform", 32, 4096, 7168, 8, 8, 0.0, 0, 16},
    {"dsv3-256 prefill", "zipf 0.8", 256, 7168, 2048, 4096, 8, 0.8, 0, 0},
    {"dsv3-256 prefill", "uniform", 256, 7168, 2048, 4096, 8, 0.0, 0, 0},
    {"dsv3-256 decode", "uniform", 256, 7168, 2048, 64, 8, 0.0, 0, 16},
    {"qwen3-128 prefill", "zipf 0.8", 128, 3072, 4096, 4096, 8, 0.8, 0, 0},
    {"qwen3-128 decode", "zipf 0.8", 128, 3072, 4096, 128, 8, 0.8, 0, 32},
};
static const int QUICK_GROUPED[] = {2, 4, 7};

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
  unsigned groups, n, k, stride; /* stride: rows between experts (masked), 0: one after another */
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
    row0 += c->stride ? c->stride : c->rows[g];
  }
}

typedef struct gb_ctx {
  int count;
  cublasOperation_t *ta, *tb;
  int *m, *n, *k, *lda, *ldb, *ldc, *size;
  float *alpha, *beta;
  CUdeviceptr pa, pb, pc; /* device arrays of pointers */
} gb_ctx;

static cublasStatus_t gb_call(gb_ctx *c) {
  return cublasGemmGroupedBatchedEx(blas, c->ta, c->tb, c->m, c->n, c->k, c->alpha, (const void *const *)c->pa,
                                    CUDA_R_16BF, c->lda, (const void *const *)c->pb, CUDA_R_16BF, c->ldb, c->beta,
                                    (void *const *)c->pc, CUDA_R_16BF, c->ldc, c->count, c->size, CUBLAS_COMPUTE_32F);
}
static void gb_launch(void *p) { CKB(gb_call(p)); }

typedef struct graph_ctx {
  CUgraphExec exec;
} graph_ctx;
static void graph_launch(void *p) { CK(cu->cuGraphLaunch(((graph_ctx *)p)->exec, cs)); }

typedef struct gsummary {
  char name[64];
  unsigned avg_rows;
  double loop_tflops, gb_tflops, best[NUM_SCHEDS], masked_tflops;
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
  const unsigned mrows = g->masked ? g->experts * g->masked : 0; /* rows of the masked buffers */
  const size_t arows = total > mrows ? total : mrows;
  const size_t na = arows * g->k, nb = (size_t)g->experts * g->n * g->k, nd = (size_t)total * g->n;
  size_t oa = pool_window(na, 77 + 2 * (uint64_t)idx, window_align, 0);
  size_t ob = pool_window(nb, 78 + 2 * (uint64_t)idx, window_align, 0);
  CUdeviceptr A = pool_d + oa * 2, B = pool_d + ob * 2, D, R, S;
  CK(cu->cuMemAlloc(&D, nd * 2));
  CK(cu->cuMemAlloc(&R, nd * 2));
  CK(cu->cuMemAlloc(&S, g->experts * 4));
  int sizes[1024];
  for (unsigned e = 0; e < g->experts; e++) sizes[e] = (int)rows[e];
  CK(cu->cuMemcpyHtoD(S, sizes, g->experts * 4));
  CK(cu->cuStreamSynchronize(CU_STREAM_LEGACY));
  gsummary *sum = &gsums[num_gsums++];
  memset(sum, 0, sizeof *sum);
  snprintf(sum->name, sizeof sum->name, "%s %s", g->name, g->routing);
  sum->avg_rows = used ? total / g->experts : 0;
  printf("\ngrouped %s (%s): %u experts, N %u, K %u, %u tokens top-%u = %u rows (largest %u, average %.1f, %u of %u "
         "experts used)\n",
         g->name, g->routing, g->experts, g->n, g->k, g->tokens, g->topk, total, max_rows,
         (double)total / g->experts, used, g->experts);

  /* The per-expert loop: the reference output, checked on a sample against fp64. */
  loop_ctx lc = {g->experts, g->n, g->k, 0, rows, A, B, R};
  CK(cu->cuMemsetD8Async(R, 0xff, nd * 2, cs));
  loop_launch(&lc);
  uint16_t *hr = malloc(nd * 2 + 2);
  CK(cu->cuMemcpyDtoHAsync(hr, R, nd * 2, cs));
  CK(cu->cuStreamSynchronize(cs));
  int bad = 0;
  uint64_t s = 0x777 + (uint64_t)idx;
  for (int t = 0; t < 16 && total; t++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    size_t i = (size_t)(s % total), j = (size_t)((s >> 32) % g->n), e = 0, r0 = 0;
    while (i >= r0 + rows[e]) r0 += rows[e], e++;
    double ref = 0, mag = 0;
    for (size_t q = 0; q < g->k; q++) {
      double pr = (double)gemm_bf2f(pool_val(oa + i * g->k + q)) * gemm_bf2f(pool_val(ob + (e * g->n + j) * g->k + q));
      ref += pr, mag += fabs(pr);
    }
    double got = gemm_bf2f(hr[i * g->n + j]);
    if (!(fabs(got - ref) <= 8e-3 * fabs(ref) + 1e-4 * mag + 1e-6)) bad++;
  }
  free(hr);
  if (bad) {
    printf("  the cuBLAS loop disagrees with fp64 on %d of 16 sampled elements\n", bad);
    failures++;
  }

  /* cublasGemmGroupedBatchedEx: one problem per non-empty expert. */
  gb_ctx gb;
  memset(&gb, 0, sizeof gb);
  gb.count = (int)used;
  gb.ta = malloc(used * sizeof *gb.ta), gb.tb = malloc(used * sizeof *gb.tb);
  gb.m = malloc(used * sizeof(int)), gb.n = malloc(used * sizeof(int)), gb.k = malloc(used * sizeof(int));
  gb.lda = malloc(used * sizeof(int)), gb.ldb = malloc(used * sizeof(int)), gb.ldc = malloc(used * sizeof(int));
  gb.size = malloc(used * sizeof(int)), gb.alpha = malloc(used * sizeof(float)), gb.beta = malloc(used * sizeof(float));
  uint64_t *pa = malloc(used * 8 + 8), *pb = malloc(used * 8 + 8), *pc = malloc(used * 8 + 8);
  size_t row0 = 0;
  for (unsigned e = 0, i = 0; e < g->experts; e++) {
    if (rows[e]) {
      gb.ta[i] = CUBLAS_OP_T, gb.tb[i] = CUBLAS_OP_N;
      gb.m[i] = (int)g->n, gb.n[i] = (int)rows[e], gb.k[i] = (int)g->k;
      gb.lda[i] = (int)g->k, gb.ldb[i] = (int)g->k, gb.ldc[i] = (int)g->n;
      gb.size[i] = 1, gb.alpha[i] = 1.0f, gb.beta[i] = 0.0f;
      pa[i] = B + (size_t)e * g->n * g->k * 2, pb[i] = A + row0 * g->k * 2, pc[i] = D + row0 * g->n * 2;
      i++;
    }
    row0 += rows[e];
  }
  CK(cu->cuMemAlloc(&gb.pa, used * 8 + 8));
  CK(cu->cuMemAlloc(&gb.pb, used * 8 + 8));
  CK(cu->cuMemAlloc(&gb.pc, used * 8 + 8));
  CK(cu->cuMemcpyHtoD(gb.pa, pa, used * 8 + 8));
  CK(cu->cuMemcpyHtoD(gb.pb, pb, used * 8 + 8));
  CK(cu->cuMemcpyHtoD(gb.pc, pc, used * 8 + 8));
  CK(cu->cuStreamSynchronize(CU_STREAM_LEGACY));
  CK(cu->cuMemsetD8Async(D, 0xff, nd * 2, cs));
  int gb_ok = used && gb_call(&gb) == CUBLAS_STATUS_SUCCESS;
  double gb_err = gb_ok ? dev_rel_error(D, R, nd) : -1;
  if (used && !(gb_err >= 0 && gb_err <= 1e-2)) {
    printf("  cublasGemmGroupedBatchedEx: %s\n", gb_ok ? "WRONG" : "refused bf16 in and out with fp32 compute");
    gb_ok = 0;
  }

  /* clcrt: every expert in one run; 128x256 and 128x256c2 under each scheduler. */
  enum { NV = 2 };
  static const char *vars[NV] = {"128x256", "128x256c2"};
  run_ctx rc[NV * NUM_SCHEDS];
  double err[NV * NUM_SCHEDS];
  for (int v = 0; v < NV; v++)
    for (int si = 0; si < NUM_SCHEDS; si++) {
      run_ctx *c = &rc[v * NUM_SCHEDS + si];
      memset(c, 0, sizeof *c);
      int vi = gemm_variant_index(vars[v]);
      CKC(gemm_grouped_args(rt, &GEMM_VARIANTS[vi], &c->a[0], A, B, D, total, g->n, g->k, g->experts, S, 0));
      c->tiles = gemm_grouped_tiles(&GEMM_VARIANTS[vi], &c->a[0]);
      c->k = kernel_for(vi, SCHEDS[si], 1);
      c->rot = 1;
      CK(cu->cuMemsetD8Async(D, 0xff, nd * 2, cs));
      clcrt_launch(c);
      c->next = 0;
      err[v * NUM_SCHEDS + si] = dev_rel_error(D, R, nd);
      if (!(err[v * NUM_SCHEDS + si] >= 0 && err[v * NUM_SCHEDS + si] <= 1e-2)) failures++;
    }
  /* The masked layout as a graph (decode): expert e's rows at row e * R of A' and D'. Its
   * output is checked expert by expert against the loop's after a permutation-free copy. */
  graph_ctx gc = {0};
  CUdeviceptr DM = 0, SM = 0;
  CUgraph graph = NULL;
  double merr = -1;
  if (g->masked) {
    CK(cu->cuMemAlloc(&DM, (size_t)mrows * g->n * 2));
    CK(cu->cuMemAlloc(&SM, g->experts * 4));
    int capped[1024];
    unsigned over = 0;
    for (unsigned e = 0; e < g->experts; e++) {
      capped[e] = (int)(rows[e] < g->masked ? rows[e] : g->masked);
      over += rows[e] > g->masked;
    }
    if (over) printf("  masked: %u experts have more than %u rows; clamped (checked as clamped)\n", over, g->masked);
    CK(cu->cuMemcpyHtoD(SM, capped, g->experts * 4));
    CK(cu->cuStreamSynchronize(CU_STREAM_LEGACY));
    run_ctx mc;
    memset(&mc, 0, sizeof mc);
    const int vi = gemm_variant_index("128x256");
    CKC(gemm_grouped_args(rt, &GEMM_VARIANTS[vi], &mc.a[0], A, B, DM, 0, g->n, g->k, g->experts, SM, g->masked));
    mc.tiles = gemm_grouped_tiles(&GEMM_VARIANTS[vi], &mc.a[0]);
    mc.k = kernel_for(vi, CLCRT_SCHED_STEAL, 1);
    mc.rot = 1;
    CK(cu->cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    clcrt_launch(&mc);
    CK(cu->cuStreamEndCapture(cs, &graph));
    CK(cu->cuGraphInstantiateWithFlags(&gc.exec, graph, 0));
    /* Check: the reference of the masked layout is the loop on the same buffers. */
    CUdeviceptr RM;
    CK(cu->cuMemAlloc(&RM, (size_t)mrows * g->n * 2));
    CK(cu->cuMemsetD8Async(RM, 0xff, (size_t)mrows * g->n * 2, cs));
    CK(cu->cuMemsetD8Async(DM, 0xff, (size_t)mrows * g->n * 2, cs));
    unsigned crow[1024];
    for (unsigned e = 0; e < g->experts; e++) crow[e] = (unsigned)capped[e];
    loop_ctx ml = {g->experts, g->n, g->k, g->masked, crow, A, B, RM};
    loop_launch(&ml);
    graph_launch(&gc);
    /* Rows past each expert's count stay NaN in both: compare only where the loop wrote. */
    uint16_t *h1 = malloc((size_t)mrows * g->n * 2), *h2 = malloc((size_t)mrows * g->n * 2);
    CK(cu->cuMemcpyDtoHAsync(h1, DM, (size_t)mrows * g->n * 2, cs));
    CK(cu->cuMemcpyDtoHAsync(h2, RM, (size_t)mrows * g->n * 2, cs));
    CK(cu->cuStreamSynchronize(cs));
    double num = 0, den = 0;
    int nan_bad = 0;
    for (unsigned e = 0; e < g->experts; e++)
      for (size_t i = (size_t)e * g->masked * g->n; i < ((size_t)e * g->masked + g->masked) * g->n; i++) {
        const int written = (i / g->n) - (size_t)e * g->masked < crow[e];
        float a = gemm_bf2f(h1[i]), b = gemm_bf2f(h2[i]);
        if (!written) {
          nan_bad += h1[i] != 0xffff;
          continue;
        }
        if (a != a) nan_bad++;
        num += (double)(a - b) * (a - b), den += (double)b * b;
      }
    merr = nan_bad ? -1 : den > 0 ? sqrt(num / den) : sqrt(num);
    if (!(merr >= 0 && merr <= 1e-2)) failures++;
    free(h1), free(h2);
    cu->cuMemFree(RM);
  }

  /* Timing, in rounds: loop, GroupedBatched, clcrt, masked graph. */
  contender ct[16];
  int nt = 0, at_gb = -1, at_rc = 0, at_m = -1;
  ct[nt].fn = loop_launch, ct[nt++].ctx = &lc;
  lc.D = D; /* the loop writes D too while timed (its reference copy R is done) */
  if (gb_ok) at_gb = nt, ct[nt].fn = gb_launch, ct[nt++].ctx = &gb;
  at_rc = nt;
  for (int i = 0; i < NV * NUM_SCHEDS; i++) ct[nt].fn = clcrt_launch, ct[nt++].ctx = &rc[i];
  if (g->masked && merr >= 0 && merr <= 1e-2) at_m = nt, ct[nt].fn = graph_launch, ct[nt++].ctx = &gc;
  if (blocks) {
    /* How this benchmark used to time: each contender's runs in one block, one contender after
     * another. STEAL and STATIC (128x256) in blocks ordered ABBAAB, each block's median. */
    printf("  blocks of %d runs (the old method), 128x256:", reps);
    for (int b = 0; b < 6; b++) {
      const int steal = (b == 0 || b == 3 || b == 4);
      contender one = {.fn = clcrt_launch, .ctx = &rc[steal ? 0 : 1]};
      time_rounds(&one, 1);
      printf(" %s %.4f", steal ? "STEAL" : "STATIC", one.ms);
      json_row("{\"section\":\"grouped-blocks\",\"shape\":\"%s\",\"block\":%d,\"contender\":\"%s\","
               "\"median_ms\":%.5f}",
               sum->name, b, steal ? "steal" : "static", one.ms);
    }
    printf(" ms\n");
  }
  time_rounds(ct, nt);
  const double t_loop = ct[0].ms;
  sum->loop_tflops = flop / (t_loop * 1e9);
  printf("  %-26s %9.4f ms %7.1f TFLOP/s  (%u calls)\n", "cuBLAS loop (GemmEx)", t_loop, sum->loop_tflops, used);
  json_row("{\"section\":\"grouped\",\"shape\":\"%s\",\"experts\":%u,\"n\":%u,\"k\":%u,\"rows\":%u,"
           "\"contender\":\"cublas-loop\",\"variant\":\"cublasGemmEx\",\"median_ms\":%.5f,\"tflops\":%.2f,"
           "\"ratio_to_loop\":1.0,\"ok\":%s}",
           sum->name, g->experts, g->n, g->k, total, t_loop, sum->loop_tflops, bad ? "false" : "true");
  if (at_gb >= 0) {
    double t = ct[at_gb].ms;
    sum->gb_tflops = flop / (t * 1e9);
    printf("  %-26s %9.4f ms %7.1f TFLOP/s %6.3fx loop\n", "cublasGemmGroupedBatched", t, sum->gb_tflops, t_loop / t);
    json_row("{\"section\":\"grouped\",\"shape\":\"%s\",\"contender\":\"cublas-grouped\",\"variant\":"
             "\"cublasGemmGroupedBatchedEx\",\"median_ms\":%.5f,\"tflops\":%.2f,\"ratio_to_loop\":%.4f,\"ok\":true}",
             sum->name, t, sum->gb_tflops, t_loop / t);
  }
  for (int v = 0; v < NV; v++)
    for (int si = 0; si < NUM_SCHEDS; si++) {
      int i = v * NUM_SCHEDS + si;
      double t = ct[at_rc + i].ms, tf = flop / (t * 1e9);
      int ok = err[i] >= 0 && err[i] <= 1e-2;
      printf("  %-10s %-15s %9.4f ms %7.1f TFLOP/s %6.3fx loop  err %.2e%s\n", vars[v], sched_name(SCHEDS[si]), t, tf,
             t_loop / t, err[i], ok ? "" : "  WRONG");
      json_row("{\"section\":\"grouped\",\"shape\":\"%s\",\"contender\":\"%s\",\"variant\":\"%s\",\"launched_tiles\":%u,"
               "\"median_ms\":%.5f,\"tflops\":%.2f,\"ratio_to_loop\":%.4f,\"rel_err\":%.3e,\"ok\":%s}",
               sum->name, sched_name(SCHEDS[si]), vars[v], rc[i].tiles.x, t, tf, t_loop / t, err[i],
               ok ? "true" : "false");
      if (ok && tf > sum->best[si]) sum->best[si] = tf, sum->best_variant[si] = vars[v];
    }
  if (at_m >= 0) {
    double t = ct[at_m].ms;
    sum->masked_tflops = flop / (t * 1e9);
    printf("  %-26s %9.4f ms %7.1f TFLOP/s %6.3fx loop  err %.2e (%u rows per expert, one graph for any routing)\n",
           "masked, graph replay", t, sum->masked_tflops, t_loop / t, merr, g->masked);
    json_row("{\"section\":\"grouped\",\"shape\":\"%s\",\"contender\":\"masked-graph\",\"variant\":\"128x256\","
             "\"rows_per_expert\":%u,\"median_ms\":%.5f,\"tflops\":%.2f,\"ratio_to_loop\":%.4f,\"rel_err\":%.3e,"
             "\"ok\":true}",
             sum->name, g->masked, t, sum->masked_tflops, t_loop / t, merr);
  } else if (g->masked) {
    printf("  masked layout WRONG (err %.2e)\n", merr);
  }
  if (gc.exec) cu->cuGraphExecDestroy(gc.exec), cu->cuGraphDestroy(graph);
  if (DM) cu->cuMemFree(DM), cu->cuMemFree(SM);
  cu->cuMemFree(gb.pa), cu->cuMemFree(gb.pb), cu->cuMemFree(gb.pc);
  free(gb.ta), free(gb.tb), free(gb.m), free(gb.n), free(gb.k), free(gb.lda), free(gb.ldb), free(gb.ldc);
  free(gb.size), free(gb.alpha), free(gb.beta), free(pa), free(pb), free(pc);
  cu->cuMemFree(D), cu->cuMemFree(R), cu->cuMemFree(S);
}

static void print_grouped_summary(void) {
  if (!num_gsums) return;
  printf("\ngrouped summary: TFLOP/s; clcrt = best variant per scheduler; x loop = STEAL's speed-up over the loop\n");
  printf("  %-34s %7s %8s %8s %8s %8s %8s %8s  %7s %12s %8s\n", "problem", "avg rows", "loop", "grouped", "STEAL",
         "STATIC", "FIXED", "masked", "x loop", "STEAL/STATIC", "masked x");
  for (int i = 0; i < num_gsums; i++) {
    gsummary *s = &gsums[i];
    printf("  %-34s %7u %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f  %7.3f %12.3f %8.3f\n", s->name, s->avg_rows,
           s->loop_tflops, s->gb_tflops, s->best[0], s->best[1], s->best[2], s->masked_tflops,
           s->loop_tflops > 0 ? s->best[0] / s->loop_tflops : 0, s->best[1] > 0 ? s->best[0] / s->best[1] : 0,
           s->loop_tflops > 0 ? s->masked_tflops / s->loop_tflops : 0);
  }
}

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
      if (gemm_register(r2, clcrt_gemm_source(), &GEMM_VARIANTS[0], SCHEDS[s], 0, &k) != CLCRT_OK) {
        fprintf(stderr, "register: %s\n", clcrt_errmsg(r2));
        exit(1);
      }
      double t = now_ms() - t0;
      clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
      CKC(clcrt_kernel_info_get(k, &info));
      if (pass == 0) {
        cold = t;
        printf("  %-7s cold %7.1f ms (NVRTC %.1f ms), %d registers, %d bytes stack, %u + %u bytes shared\n",
               sched_name(SCHEDS[s]), cold, info.compile_ms, info.registers, info.stack_bytes, info.static_smem,
               info.dynamic_smem);
      } else {
        hit = t;
        from = info.from_cache;
        printf("  %-7s disk-cache hit %.3f ms (from_cache %d: 2 = disk)\n", sched_name(SCHEDS[s]), hit, from);
      }
      clcrt_runtime_destroy(r2);
    }
    json_row("{\"section\":\"compile\",\"contender\":\"%s\",\"variant\":\"%s\",\"cold_ms\":%.2f,\"disk_hit_ms\":%.4f,"
             "\"from_cache\":%d}",
             sched_name(SCHEDS[s]), GEMM_VARIANTS[0].name, cold, hit, from);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* The pool holds at most this many elements (12 GiB): a --shape with a larger operand is
 * skipped, saying so, rather than taking the card's memory from the outputs. The largest
 * operand of the classes is Gemma-2-27B's head, 256000 x 4608 (2.4 GB). */
#define POOL_MAX_ELEMS (6ull << 30)

static void usage(void) {
  fprintf(stderr,
          "usage: bench_gemm [--json FILE] [--quick] [--only compile|dense|grouped] [--class LIST] [--shape MxNxK[@A,B]]...\n"
          "                  [--seed N|random] [--gen N] [--reps N] [--align BYTES] [--no-oracle] [--wide] [--blocks] [--list]\n"
          "                  [--wide-only NAME,...] (--wide over those tile shapes only) [--wide-trace]\n"
          "  --class: a comma-separated list of bench, model, odd, gemv, decode, vocab, align16, gen\n");
}

int main(int argc, char **argv) {
  const char *json_path = NULL, *only = NULL, *classes = NULL;
  int quick = 0, gen_set = 0, list = 0;
  unsigned gen = BGEMM_GEN_DEFAULT;
  bgemm_shape custom[64];
  int ncustom = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!strcmp(argv[i], "--class") && i + 1 < argc) {
      classes = argv[++i];
      char bad[64];
      if (bgemm_classes_check(classes, bad, sizeof bad)) {
        fprintf(stderr, "--class: no class \"%s\"\n", bad);
        usage();
        return 2;
      }
    } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
      if (!bgemm_seed_parse(argv[++i], &run_seed)) {
        fprintf(stderr, "--seed: a number or \"random\", not \"%s\"\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--gen") && i + 1 < argc) {
      long g = atol(argv[++i]);
      if (g < 0 || g > 1000) {
        fprintf(stderr, "--gen N: 0 to 1000 generated shapes\n");
        return 2;
      }
      gen = (unsigned)g, gen_set = 1;
    } else if (!strcmp(argv[i], "--no-oracle"))
      oracle = 0;
    else if (!strcmp(argv[i], "--wide"))
      wide = 1;
    else if (!strcmp(argv[i], "--wide-only") && i + 1 < argc)
      wide = 1, wide_only = argv[++i];
    else if (!strcmp(argv[i], "--wide-trace"))
      wide = 1, wide_trace = 1;
    else if (!strcmp(argv[i], "--blocks"))
      blocks = 1;
    else if (!strcmp(argv[i], "--align") && i + 1 < argc) {
      long al = atol(argv[++i]);
      if (al < 16 || (al & (al - 1))) {
        fprintf(stderr, "--align BYTES: a power of two, at least 16\n");
        return 2;
      }
      window_align = (size_t)al;
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc && ncustom < 64) {
      bgemm_shape *d = &custom[ncustom];
      memset(d, 0, sizeof *d);
      d->cls = "custom";
      snprintf(d->label, sizeof d->label, "custom");
      const char *arg = argv[++i];
      int used = 0;
      if (sscanf(arg, "%ux%ux%u%n", &d->m, &d->n, &d->k, &used) != 3 || !d->m || !d->n || !d->k || d->k % 8 ||
          (arg[used] && (sscanf(arg + used, "@%u,%u", &d->a_off, &d->b_off) != 2 || d->a_off % 16 ||
                         d->b_off % 16 || d->a_off >= 128 || d->b_off >= 128))) {
        fprintf(stderr, "--shape MxNxK[@A,B] (K a multiple of 8; A and B: bytes past a 128-byte line, multiples "
                        "of 16 below 128)\n");
        return 2;
      }
      d->offs = arg[used] != 0;
      if (d->offs) snprintf(d->label, sizeof d->label, "custom @%u,%u", d->a_off, d->b_off);
      ncustom++;
    } else if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else if (!strcmp(argv[i], "--list"))
      list = 1;
    else {
      usage();
      return 2;
    }
  }
  if (reps < 3) reps = 3;
  if (quick && !gen_set) gen = BGEMM_GEN_QUICK;
  /* The dense shapes that run: --shape, or the classes asked for (quick: a few of each). */
  const int cap = ncustom ? ncustom : bgemm_select_bound(gen);
  bgemm_shape *shapes = calloc((size_t)cap, sizeof *shapes);
  summaries = calloc((size_t)cap, sizeof *summaries);
  if (!shapes || !summaries) {
    fprintf(stderr, "bench_gemm: out of memory\n");
    return 1;
  }
  int ns = 0;
  if (ncustom)
    for (int i = 0; i < ncustom; i++) shapes[ns++] = custom[i];
  else
    ns = bgemm_select(classes, quick, gen, run_seed, shapes, cap);
  if (list) { /* what would run, without a GPU */
    printf("seed %llu: %d dense shapes\n", (unsigned long long)run_seed, ns);
    for (int i = 0; i < ns; i++) {
      char offs[40] = "";
      unsigned oa, ob;
      if (!strcmp(shapes[i].cls, "align16"))
        bgemm_offsets16(run_seed, &shapes[i], &oa, &ob), snprintf(offs, sizeof offs, "  A at +%u, B at +%u", oa, ob);
      printf("  %-8s %-26s %6u x %6u x %6u%s\n", shapes[i].cls, shapes[i].label, shapes[i].m, shapes[i].n, shapes[i].k,
             offs);
    }
    free(shapes), free(summaries);
    return 0;
  }

  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) {
    printf("bench_gemm: SKIP: %s\n", clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
    return 0;
  }
  peak_bw = clcrt_runtime_mem_bandwidth(rt);
  cu = clcrt_runtime_driver(rt);
  CK(cu->cuCtxSetCurrent(clcrt_runtime_context(rt)));
  CKC(clcrt_stream_create(rt, NULL, &st));
  cs = clcrt_stream_cu(st);
  timer = (bgemm_timer){.cu = cu, .cs = cs, .warmup = WARMUP, .reps = reps};
  CKC(clcrt_ops_create(rt, &ops_def));
  CKC(clcrt_ops_create(rt, &ops_orc));
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
    fprintf(json, "{\"bench\":\"gemm\",\"device\":\"%s\",\"arch\":\"%s\",\"sms\":%d,\"mem_bw\":%.6g,\"date\":\"%s\","
                  "\"cublasLt\":%zu,\"reps\":%d,\"align\":%zu,\"seed\":%llu,\"gen\":%u,\"b2b_ms\":%.2f,\"short_ms\":%.3f,"
                  "\"results\":[",
            name, clcrt_runtime_arch(rt), clcrt_runtime_num_sms(rt), peak_bw, date, cublasLtGetVersion(), reps,
            window_align, (unsigned long long)run_seed, gen, BGEMM_B2B_MS, BGEMM_SHORT_MS);
  printf("clcrt bench-gemm on %s (%s, %d SMs), %s, cuBLASLt %zu: bf16 in/out, fp32 accumulation; median of %d rounds "
         "after %d, and of %d back-to-back batches of about %.0f ms; operands %zu-byte aligned (align16: each at a "
         "random 16-byte offset past a 128-byte line)\n",
         name, clcrt_runtime_arch(rt), clcrt_runtime_num_sms(rt), date, cublasLtGetVersion(), reps, WARMUP,
         BGEMM_B2B_REPS, BGEMM_B2B_MS, window_align);
  printf("seed %llu (--seed %llu draws this run's align16 offsets and %u gen shapes again)\n", (unsigned long long)run_seed,
         (unsigned long long)run_seed, gen);
  dev_helpers();

  if (!only || !strcmp(only, "compile")) bench_compile();
  const int do_dense = !only || !strcmp(only, "dense"), do_grouped = !only || !strcmp(only, "grouped");
  int gidx[16], ngs = 0;
  if (!ncustom && do_grouped) {
    if (quick)
      for (unsigned i = 0; i < sizeof QUICK_GROUPED / sizeof QUICK_GROUPED[0]; i++) gidx[ngs++] = QUICK_GROUPED[i];
    else
      for (unsigned i = 0; i < sizeof GROUPED_SHAPES / sizeof GROUPED_SHAPES[0]; i++) gidx[ngs++] = (int)i;
  }
  /* One pool, as large as the largest operand of the sections that run (plus room for windows),
   * up to POOL_MAX_ELEMS. */
  size_t need = 0;
  for (int i = 0; do_dense && i < ns; i++) {
    size_t a = (size_t)shapes[i].m * shapes[i].k, b = (size_t)shapes[i].n * shapes[i].k;
    if (a > need && a <= POOL_MAX_ELEMS) need = a;
    if (b > need && b <= POOL_MAX_ELEMS) need = b;
  }
  for (int i = 0; i < ngs; i++) {
    const gshape *g = &GROUPED_SHAPES[gidx[i]];
    size_t rows = (size_t)g->tokens * g->topk, mr = (size_t)g->experts * g->masked;
    size_t a = (rows > mr ? rows : mr) * g->k, b = (size_t)g->experts * g->n * g->k;
    if (a > need) need = a;
    if (b > need) need = b;
  }
  if (need < (256u << 20)) need = 256u << 20; /* room to rotate small operands */
  pool_make(need + (need >> 3) + 4096);
  measure_copy();
  if (do_dense && ns) {
    if (wide) wide_warm();
    for (int i = 0; i < ns; i++) bench_dense_shape(&shapes[i], i);
    print_dense_summary();
  }
  if (ngs) {
    CKB(cublasCreate(&blas));
    CKB(cublasSetStream(blas, cs));
    CKB(cublasSetWorkspace(blas, (void *)lt_ws, LT_WS_BYTES));
    for (int i = 0; i < ngs; i++) bench_grouped_shape(&GROUPED_SHAPES[gidx[i]], gidx[i]);
    print_grouped_summary();
    cublasDestroy(blas);
  }
  if (json) {
    fprintf(json, "\n]}\n");
    fclose(json);
  }
  if (failures) printf("\nbench_gemm: %d check(s) FAILED (see WRONG above)\n", failures);
  clcrt_ops_destroy(ops_orc);
  clcrt_ops_destroy(ops_def);
  cu->cuMemFree(lt_ws);
  if (pool_d) cu->cuMemFree(pool_d);
  cublasLtDestroy(lt);
  clcrt_stream_destroy(st);
  clcrt_runtime_destroy(rt);
  free(shapes), free(summaries);
  return failures ? 1 : 0;
}
