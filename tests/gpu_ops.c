/* The op library's differential test on the GPU: clcrt_gemm (include/clcrt_ops.h) against
 * cuBLAS, on random sequences of problems, because the state that once gave wrong answers
 * (a stream's stream-K workspace) lives between calls.
 *
 * Dense: threads run random GEMMs (M from 1 to 16384, N and K spread log-uniformly, odd N,
 * operands at random 16-byte offsets inside wider rows, every variant, scheduler and split) on
 * their streams, two threads sharing one stream; some runs are captured into CUDA graphs and
 * replayed between eager runs of other shapes. Grouped and masked: random group counts and
 * sizes (empty groups, a buffer longer than the groups), and sizes that add up to more rows
 * than the buffer has, which must compute what fits, touch nothing past it and make the next
 * call fail.
 *
 * Every output and a guard band around it are poisoned (bf16 NaN) first; a comparison kernel
 * checks each element against cuBLAS's fp32 product (|d - ref| <= 2^-7 |ref| + 1e-3: bf16's
 * rounding and summation order; NaN fails) and the guard still poisoned, counting mismatches
 * per problem on the device. Zero mismatches pass. cuBLAS is not always right: an element off
 * its product is judged again against the fp64 dot product of its row and column, and passes
 * only within the same margin of that (the test reports how often cuBLAS was the one off; on
 * the H200, 2026-11-29, its bf16 GEMM with fp32 output got 31,331 of 44,800 elements of
 * 10x4480x39432 wrong, where fp32 matmul and the op agreed with fp64).
 *
 * Half the dense problems also pass clcrt_gemm_desc.done: afterwards every 64-row block's
 * counter must have grown by exactly (runs) x (the block's rows) x n.
 *
 * The problems are drawn from fixed seeds, so that a failure replays. CLCRT_TEST_SEED=N draws
 * other sequences (every stream of problems mixed with N; the run prints it): what a longer
 * search for wrong answers runs, seed after seed. */
#include <check.h>
#include <cublas_v2.h>
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clcrt.h"
#include "clcrt_ops.h"
#include "common/gpu.h"

/* ---- helper kernels (tile functions run with FIXED) ------------------------------------------ */

static const char *const HELP_SRC =
    "struct FillArgs { unsigned short *x; unsigned long long n; unsigned long long seed; };\n"
    "__device__ void fill_tile(const clcrt::Tile &t, const FillArgs &a) {\n"
    "  unsigned long long i = (unsigned long long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i >= a.n) return;\n"
    "  unsigned long long h = (i + 1) * 0x9E3779B97F4A7C15ull ^ a.seed;\n"
    "  h ^= h >> 31; h *= 0xBF58476D1CE4E5B9ull; h ^= h >> 29;\n"
    "  float f = (float)(h >> 40) / 16777216.0f * 2.0f - 1.0f;\n"
    "  a.x[i] = (unsigned short)(__float_as_uint(f) >> 16);\n"
    "}\n"
    "struct CmpArgs { const unsigned short *d; const float *r; unsigned long long rows, n, ldd, guard_rows;\n"
    "                 unsigned *bad; float atol;\n"
    "                 const unsigned short *a, *b; unsigned long long lda, ldb, k; unsigned *blas_off; };\n"
    "__device__ float bf(unsigned short x) { return __uint_as_float((unsigned)x << 16); }\n"
    "// Rows [0, rows) x columns [0, n): against r (rows x n, fp32), within a bf16 rounding (and a\n"
    "// margin) of r plus atol. Columns [n, ldd) of those rows and guard_rows whole rows after them:\n"
    "// still 0xffff. An element off r is judged again against its fp64 dot product of a's row and\n"
    "// b's (a not null; the first 2^20 such elements): within the same margin of it, it passes and\n"
    "// counts into blas_off[0] (the reference was the one off); blas_off[1] counts the tries.\n"
    "__device__ void cmp_tile(const clcrt::Tile &t, const CmpArgs &a) {\n"
    "  unsigned long long i = (unsigned long long)t.linear * blockDim.x + threadIdx.x;\n"
    "  unsigned long long row = i / a.ldd, col = i % a.ldd;\n"
    "  if (row >= a.rows + a.guard_rows) return;\n"
    "  unsigned short v = a.d[row * a.ldd + col];\n"
    "  bool ok;\n"
    "  if (row < a.rows && col < a.n) {\n"
    "    float got = bf(v), ref = a.r[row * a.n + col];\n"
    "    ok = fabsf(got - ref) <= 0.0078125f * fabsf(ref) + a.atol;\n"
    "    if (!ok && a.a && atomicAdd(a.blas_off + 1, 1u) < (1u << 20)) {\n"
    "      double s = 0;\n"
    "      for (unsigned long long kk = 0; kk < a.k; kk++)\n"
    "        s += (double)bf(a.a[row * a.lda + kk]) * (double)bf(a.b[col * a.ldb + kk]);\n"
    "      ok = fabs((double)got - s) <= 0.0078125 * fabs(s) + (double)a.atol;\n"
    "      if (ok) atomicAdd(a.blas_off, 1u);\n"
    "    }\n"
    "  } else {\n"
    "    ok = v == 0xffff;\n"
    "  }\n"
    "  if (!ok) atomicAdd(a.bad, 1u);\n"
    "}\n";
typedef struct {
  CUdeviceptr x;
  unsigned long long n, seed;
} FillArgs;
typedef struct {
  CUdeviceptr d, r;
  unsigned long long rows, n, ldd, guard_rows;
  CUdeviceptr bad;
  float atol;
  CUdeviceptr a, b; /* the operands for the fp64 second opinion (0: none) */
  unsigned long long lda, ldb, k;
  CUdeviceptr blas_off;
} CmpArgs;

static clcrt_runtime *g_rt;
static clcrt_ops *g_ops;
static clcrt_kernel *g_fill, *g_cmp;
static CUdeviceptr g_A, g_B; /* random bf16 pools the operands are cut from */
static size_t g_pool_a, g_pool_b; /* elements */

static clcrt_kernel *reg(const char *fn, const char *args) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = HELP_SRC, d.tile_fn = fn, d.args_type = args, d.block = (clcrt_dim3){256, 1, 1};
  d.sched = CLCRT_SCHED_FIXED;
  clcrt_kernel *k = NULL;
  ck_assert_msg(clcrt_register(g_rt, &d, &k) == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
  return k;
}

static unsigned cdiv(unsigned long long a, unsigned b) { return (unsigned)((a + b - 1) / b); }

static void fill(clcrt_stream *s, CUdeviceptr x, size_t n, unsigned long long seed) {
  FillArgs a = {x, n, seed};
  ck_assert_int_eq(clcrt_run(s, g_fill, (clcrt_dim3){cdiv(n, 256), 1, 1}, &a, sizeof a), CLCRT_OK);
}

/* With CLCRT_TEST_PROGRESS set: where a run is (stderr, unbuffered). */
static void progress(const char *what) {
  if (getenv("CLCRT_TEST_PROGRESS")) fprintf(stderr, "gpu_ops: %s\n", what);
}

static void setup(void) {
  progress("setup");
  g_rt = gpu_runtime();
  ck_assert_int_eq(clcrt_ops_create(g_rt, &g_ops), CLCRT_OK);
  g_fill = reg("fill_tile", "FillArgs");
  g_cmp = reg("cmp_tile", "CmpArgs");
  const int small = gpu_under_sanitizer();
  g_pool_a = small ? (1u << 22) : (size_t)16384 * 8256 + 4096;
  g_pool_b = small ? (1u << 22) : (size_t)5184 * 40968 + 4096; /* random_dense's long decode problems */
  g_A = gpu_alloc(g_pool_a * 2), g_B = gpu_alloc(g_pool_b * 2);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s), CLCRT_OK);
  fill(s, g_A, g_pool_a, 1), fill(s, g_B, g_pool_b, 2);
  ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
  clcrt_stream_destroy(s);
}

static void teardown(void) {
  gpu_free(g_A), gpu_free(g_B);
  clcrt_ops_destroy(g_ops);
  clcrt_runtime_destroy(g_rt);
}

/* ---- one problem ------------------------------------------------------------------------------ */

typedef struct rng_t {
  uint64_t s;
} rng_t;
/* A generator's start: its fixed seed, mixed with CLCRT_TEST_SEED where that is set. */
static uint64_t g_seed;
static rng_t rng_from(uint64_t fixed) {
  rng_t r = {fixed ^ (g_seed * 0x9E3779B97F4A7C15ull)};
  if (!r.s) r.s = fixed ? fixed : 1; /* xorshift stays at zero */
  return r;
}
static uint64_t next(rng_t *r) {
  r->s ^= r->s << 13, r->s ^= r->s >> 7, r->s ^= r->s << 17;
  return r->s;
}
static unsigned below(rng_t *r, unsigned n) { return n ? (unsigned)(next(r) % n) : 0; }
/* Log-uniform in [lo, hi]. */
static unsigned logu(rng_t *r, unsigned lo, unsigned hi) {
  double u = (double)(next(r) >> 11) / 9007199254740992.0;
  unsigned v = (unsigned)exp(log((double)lo) + u * (log((double)hi + 1) - log((double)lo)));
  return v < lo ? lo : v > hi ? hi : v;
}

typedef struct problem {
  clcrt_gemm_desc g;
  char what[160];
} problem;

/* The measured variants and some generated tile shapes (block N a multiple of 16, block M 64),
 * among them the deepest rings: 64x32 in 16 stages, 64x48c2 in 14, 64x64 in 12. */
static const char *const VARS[] = {NULL,      "128x256", "128x256c2", "128x128", "128x128c2", "128x64",
                                   "128x256e0", "128x256s3", "64x96",  "128x176c2", "64x16",     "128x48",
                                   "64x256",    "64x32",     "64x48c2", "64x64"};
#define NVARS ((unsigned)(sizeof VARS / sizeof VARS[0]))
static const clcrt_sched SCHEDS[] = {CLCRT_SCHED_AUTO, CLCRT_SCHED_STEAL, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};

/* A random dense problem whose operands fit the pools and whose D fits dcap elements. */
static problem random_dense(rng_t *r, size_t dcap) {
  problem p;
  const int small = gpu_under_sanitizer();
  for (;;) {
    clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
    g.m = below(r, 8) == 0 ? 1 + below(r, 16) : logu(r, 1, small ? 300 : 16384);
    g.n = below(r, 4) == 0 ? 1 + below(r, 200) : logu(r, 8, small ? 600 : 8192);
    g.k = 8 * logu(r, 1, small ? 64 : 1024);
    if (below(r, 4) == 0) g.k = 64 * logu(r, 1, small ? 8 : 128); /* rows on 128-byte lines: the shifts */
    g.lda = below(r, 3) ? 0 : g.k + 8 * below(r, 4);
    g.ldb = below(r, 3) ? 0 : g.k + 8 * below(r, 4);
    g.ldd = below(r, 3) ? 0 : g.n + 1 + below(r, 9);
    const unsigned long long lda = g.lda ? g.lda : g.k, ldb = g.ldb ? g.ldb : g.k, ldd = g.ldd ? g.ldd : g.n;
    const unsigned off_a = 8 * below(r, 16), off_b = 8 * below(r, 16);
    if ((unsigned long long)g.m * lda + off_a > g_pool_a || (unsigned long long)g.n * ldb + off_b > g_pool_b ||
        ((unsigned long long)g.m + 4) * ldd > dcap)
      continue;
    if ((double)g.m * g.n * g.k > (small ? 3e7 : 1.2e11)) continue; /* the test's time, not a limit of the op */
    g.a = g_A + 2ull * off_a, g.b = g_B + 2ull * off_b;
    g.variant = VARS[below(r, NVARS)];
    g.sched = SCHEDS[below(r, 4)];
    g.split = (clcrt_gemm_split)below(r, 3);
    if (small && below(r, 3) == 0) {
      /* Under a sanitizer, whose few problems would seldom reach them: the A-shift kernels,
       * 64-row tiles with rows on lines (the offsets decide, gemm_ashift). */
      static const char *const SHIFTED[] = {"64x16", "64x32", "64x64", "64x256", "64x48c2", "64x128c2"};
      if ((g.k * 2) % 128) continue;
      g.variant = SHIFTED[below(r, 6)];
    }
    if (!small && below(r, 16) == 0) {
      /* A long decode projection with the plan's decomposition: at most 48 rows, 40 to 82
       * transposed tiles, K of 16k to 40k, where the plan shares every tile out over the SMs in
       * ranges of k-blocks that cross tiles (gemm_plan.h, GEMM_SK_SMS_MAX_FILL). */
      g.m = 1 + below(r, 48), g.n = 2560 + 64 * below(r, 43), g.k = 8 * (2048 + below(r, 3073));
      g.lda = g.ldb = 0, g.ldd = below(r, 2) ? 0 : g.n + 8;
      g.a = g_A + 2ull * off_a, g.b = g_B + 2ull * off_b;
      g.variant = NULL, g.split = CLCRT_GEMM_SPLIT_AUTO;
      if ((unsigned long long)g.m * g.k + off_a > g_pool_a || (unsigned long long)g.n * g.k + off_b > g_pool_b ||
          ((unsigned long long)g.m + 4) * (g.ldd ? g.ldd : g.n) > dcap)
        continue;
    }
    p.g = g;
    snprintf(p.what, sizeof p.what, "%ux%ux%u lda %llu ldb %llu ldd %llu a+%u b+%u %s %s split %d", g.m, g.n, g.k,
             g.lda ? g.lda : g.k, g.ldb ? g.ldb : g.k, g.ldd ? g.ldd : g.n, off_a, off_b,
             g.variant ? g.variant : "plan", clcrt_sched_name(g.sched), (int)g.split);
    return p;
  }
}

/* cuBLAS's fp32 product of rows [0, m) into R (m x n, row-major): D^T = B A^T, column-major. */
static void reference(cublasHandle_t h, const clcrt_gemm_desc *g, CUdeviceptr A, unsigned m, CUdeviceptr B,
                      CUdeviceptr R) {
  const float one = 1, zero = 0;
  if (m == 0) return;
  cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)g->n, (int)m, (int)g->k, &one, (const void *)B,
                                   CUDA_R_16BF, (int)(g->ldb ? g->ldb : g->k), (const void *)A, CUDA_R_16BF,
                                   (int)(g->lda ? g->lda : g->k), &zero, (void *)R, CUDA_R_32F, (int)g->n,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  ck_assert_msg(st == CUBLAS_STATUS_SUCCESS, "cublasGemmEx: %d", (int)st);
}

/* The absolute margin for sums over k products of values in [-1, 1): two fp32 sums of the same
 * terms in other orders (the op's k-blocks and slices, cuBLAS's) differ by about 2^-24 x sqrt(k)
 * x the partial sums' size, sqrt(k / 9): in proportion to k. 1e-3 up to k = 8192, as before. */
static float atol_for(unsigned k) { return 1e-3f * (k > 8192 ? (float)k / 8192.0f : 1.0f); }

/* The operands of the rows compared, for the comparison's fp64 second opinion where an element
 * is off the reference (cmp_tile), and where it counts the elements the reference was off. */
typedef struct opnds {
  CUdeviceptr a, b;
  unsigned long long lda, ldb;
  CUdeviceptr off; /* two counters: elements where the reference was off, second opinions */
} opnds;

static void compare(clcrt_stream *s, CUdeviceptr D, CUdeviceptr R, unsigned rows, unsigned n, unsigned long long ldd,
                    unsigned guard, CUdeviceptr bad, unsigned k, const opnds *o) {
  CmpArgs c = {D, R, rows, n, ldd, guard, bad, atol_for(k), o ? o->a : 0, o ? o->b : 0, o ? o->lda : 0,
               o ? o->ldb : 0, k, o ? o->off : 0};
  unsigned long long elems = ((unsigned long long)rows + guard) * ldd;
  if (elems) ck_assert_int_eq(clcrt_run(s, g_cmp, (clcrt_dim3){cdiv(elems, 256), 1, 1}, &c, sizeof c), CLCRT_OK);
}

/* ---- dense, random sequences on threads ------------------------------------------------------ */

enum { THREADS = 4, GUARD = 4, DONE_PER = 256 /* ceil(16384 / 64) */ };
/* A problem's counters, unsigned each: elements wrong, elements where cuBLAS was off fp64 and the
 * op was not, fp64 second opinions taken (compare's opnds.off points at the second). */
enum { CTRS = 3 };
typedef struct worker {
  int id, count;
  clcrt_stream *s;
  cublasHandle_t blas;
  CUdeviceptr D, R, bad; /* bad: one counter per problem */
  CUdeviceptr done;      /* DONE_PER counters per problem, zeroed before the sequence */
  unsigned *runs;        /* runs of each problem that counted into its done (0: none passed) */
  size_t dcap;
  problem *probs;
  int graphs, replays, own_stream;
  int sk_sms; /* problems whose plan shares every tile out over the SMs in crossing ranges */
  int ashift; /* problems run by the A-shift kernels (Args.ashift) */
  char err[256];
} worker;

static void poison(worker *w, const clcrt_gemm_desc *g) {
  const unsigned long long ldd = g->ldd ? g->ldd : g->n;
  CUstream cu = clcrt_stream_cu(w->s);
  ck_assert_int_eq(gpu_cu()->cuMemsetD8Async(w->D, 0xff, ((unsigned long long)g->m + GUARD) * ldd * 2, cu), CUDA_SUCCESS);
}

static void *work(void *arg) {
  worker *w = arg;
  const clcrt__driver *cu = gpu_cu();
  cu->cuCtxSetCurrent(clcrt_runtime_context(g_rt));
  rng_t r = rng_from(0x1234567ull * (uint64_t)(w->id + 1));
  CUstream cs = clcrt_stream_cu(w->s);
  for (int i = 0; i < w->count; i++) {
    problem *p = &w->probs[i];
    *p = random_dense(&r, w->dcap);
    p->g.d = w->D;
    const unsigned long long ldd = p->g.ldd ? p->g.ldd : p->g.n;
    /* Only a thread with a stream of its own captures: another thread's work enqueued on a
     * stream while it is captured would join (and break) the capture. */
    const int graph = w->own_stream && below(&r, 12) == 0 && !gpu_under_sanitizer();
    if (below(&r, 2)) {
      p->g.done = w->done + 4ull * DONE_PER * i;
      w->runs[i] = graph ? 2 : 1; /* a capture runs nothing; its graph is replayed twice */
      snprintf(p->what + strlen(p->what), sizeof p->what - strlen(p->what), " done");
    }
    clcrt_gemm_plan_info pi = CLCRT_GEMM_PLAN_INFO_INIT;
    const int planned = clcrt_gemm_plan_get(g_ops, w->s, &p->g, &pi) == CLCRT_OK;
    if (planned && pi.units && pi.units % pi.shared_tiles) w->sk_sms++;
    /* 64-row tiles whose operands lie at different offsets of lines they are on: the A-shift
     * kernels, A read from two boxes a k-block (gemm_ashift). */
    const unsigned long long lda = p->g.lda ? p->g.lda : p->g.k, ldb = p->g.ldb ? p->g.ldb : p->g.k;
    if (planned && pi.bm == 64 && (lda * 2) % 128 == 0 && (ldb * 2) % 128 == 0 &&
        (p->g.a - p->g.b) % 128 != 0)
      w->ashift++;
    if (!graph) {
      poison(w, &p->g);
      clcrt_status st = clcrt_gemm(g_ops, w->s, &p->g);
      if (st != CLCRT_OK) {
        snprintf(w->err, sizeof w->err, "%s: %s", p->what, clcrt_errmsg(g_rt));
        return NULL;
      }
    } else {
      /* Captured: the poison and the GEMM, replayed twice with eager GEMMs of other shapes
       * between (into a scratch row past the guard, so D stays this problem's). */
      CUgraph gr = NULL;
      CUgraphExec ex = NULL;
      ck_assert_int_eq(cu->cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
      poison(w, &p->g);
      clcrt_status st = clcrt_gemm(g_ops, w->s, &p->g);
      ck_assert_int_eq(cu->cuStreamEndCapture(cs, &gr), CUDA_SUCCESS);
      if (st != CLCRT_OK) {
        snprintf(w->err, sizeof w->err, "captured %s: %s", p->what, clcrt_errmsg(g_rt));
        return NULL;
      }
      ck_assert_int_eq(cu->cuGraphInstantiateWithFlags(&ex, gr, 0), CUDA_SUCCESS);
      for (int rep = 0; rep < 2; rep++) {
        problem other = random_dense(&r, w->dcap / 2);
        other.g.d = w->R; /* R is written by the reference after this, so it is free now */
        if (clcrt_gemm(g_ops, w->s, &other.g) != CLCRT_OK) {
          snprintf(w->err, sizeof w->err, "between replays, %s: %s", other.what, clcrt_errmsg(g_rt));
          return NULL;
        }
        ck_assert_int_eq(cu->cuGraphLaunch(ex, cs), CUDA_SUCCESS);
        w->replays++;
      }
      w->graphs++;
      cu->cuGraphExecDestroy(ex);
      cu->cuGraphDestroy(gr);
      snprintf(p->what + strlen(p->what), sizeof p->what - strlen(p->what), " (graph)");
    }
    reference(w->blas, &p->g, p->g.a, p->g.m, p->g.b, w->R);
    const opnds o = {p->g.a, p->g.b, p->g.lda ? p->g.lda : p->g.k, p->g.ldb ? p->g.ldb : p->g.k,
                     w->bad + 4ull * (CTRS * i + 1)};
    compare(w->s, w->D, w->R, p->g.m, p->g.n, ldd, GUARD, w->bad + 4ull * CTRS * i, p->g.k, &o);
  }
  return NULL;
}

/* Problem j of worker w (thread id), which `bad` elements got wrong: what it was, its plan, the
 * problem before it; then run again alone (every thread is done: wrong again, or only in
 * sequence?), its own rows (and the columns past n) counted apart from the guard rows after them.
 * Uses the first four of w->bad's counters, which the caller has read. */
static void report_wrong(worker *w, int id, int j, unsigned bad) {
  clcrt_gemm_desc g = w->probs[j].g;
  clcrt_gemm_plan_info pi = CLCRT_GEMM_PLAN_INFO_INIT;
  const int ok = clcrt_gemm_plan_get(g_ops, w->s, &g, &pi) == CLCRT_OK;
  printf("gpu_ops: WRONG %s: %u elements (plan %s, sk %u/%u; thread %d, problem %d, after %s)\n", w->probs[j].what,
         bad, ok ? pi.variant : "?", pi.shared_tiles, pi.units, id, j, j ? w->probs[j - 1].what : "none");
  const unsigned long long ldd = g.ldd ? g.ldd : g.n;
  g.done = 0;
  gpu_fill_u8(w->bad, 0, 16);
  poison(w, &g);
  ck_assert_int_eq(clcrt_gemm(g_ops, w->s, &g), CLCRT_OK);
  reference(w->blas, &g, g.a, g.m, g.b, w->R);
  const opnds o = {g.a, g.b, g.lda ? g.lda : g.k, g.ldb ? g.ldb : g.k, w->bad + 8};
  compare(w->s, w->D, w->R, g.m, g.n, ldd, 0, w->bad, g.k, &o);
  compare(w->s, w->D + 2ull * g.m * ldd, w->R, 0, g.n, ldd, GUARD, w->bad + 4, g.k, NULL);
  ck_assert_int_eq(clcrt_stream_sync(w->s), CLCRT_OK);
  unsigned again[3] = {0, 0, 0};
  gpu_get(again, w->bad, 12);
  printf("gpu_ops:   alone again: %u elements wrong in its rows, %u in the %d guard rows after them (%u where "
         "cuBLAS was off fp64)\n",
         again[0], again[1], GUARD, again[2]);
  fflush(stdout);
}

START_TEST(test_dense_random_sequences) {
  const clcrt__driver *cu = gpu_cu();
  /* The default plans follow the device's peak memory bandwidth (gemm_model_for), which a real
   * device reports. */
  const double bw = clcrt_runtime_mem_bandwidth(g_rt);
  printf("gpu_ops: the plans are the model's for a peak memory bandwidth of %.0f GB/s\n", bw * 1e-9);
  ck_assert_msg(bw > 5e11 && bw < 5e13, "peak memory bandwidth %g bytes/s", bw);
  const int per = gpu_under_sanitizer() ? 12 : 600;
  CUstream raw[3];
  clcrt_stream *s[3];
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(cu->cuStreamCreate(&raw[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ck_assert_int_eq(clcrt_stream_create(g_rt, raw[i], &s[i]), CLCRT_OK);
  }
  worker w[THREADS];
  pthread_t t[THREADS];
  memset(w, 0, sizeof w);
  for (int i = 0; i < THREADS; i++) {
    w[i].id = i, w[i].count = per;
    w[i].s = s[i < 2 ? i : 2]; /* threads 2 and 3 share a stream */
    w[i].own_stream = i < 2;
    w[i].dcap = gpu_under_sanitizer() ? (1u << 22) : (size_t)(16384 + GUARD) * 8201;
    w[i].D = gpu_alloc(w[i].dcap * 2), w[i].R = gpu_alloc(w[i].dcap * 4);
    w[i].bad = gpu_alloc(4ull * CTRS * per);
    gpu_fill_u8(w[i].bad, 0, 4ull * CTRS * per);
    w[i].done = gpu_alloc(4ull * DONE_PER * per);
    gpu_fill_u8(w[i].done, 0, 4ull * DONE_PER * per);
    w[i].runs = calloc((size_t)per, sizeof(unsigned));
    w[i].probs = calloc((size_t)per, sizeof(problem));
    ck_assert(cublasCreate(&w[i].blas) == CUBLAS_STATUS_SUCCESS);
    ck_assert(cublasSetStream(w[i].blas, clcrt_stream_cu(w[i].s)) == CUBLAS_STATUS_SUCCESS);
  }
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, work, &w[i]);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 3; i++) ck_assert_int_eq(clcrt_stream_sync(s[i]), CLCRT_OK);
  int total = 0, wrong = 0, graphs = 0, replays = 0, counted = 0, miscounted = 0, sk_sms = 0, blas_off = 0;
  int ashift = 0;
  unsigned long long blas_off_elems = 0;
  for (int i = 0; i < THREADS; i++) {
    ck_assert_msg(!w[i].err[0], "thread %d: %s", i, w[i].err);
    ashift += w[i].ashift;
    unsigned *bad = malloc(4ull * CTRS * per), *done = malloc(4ull * DONE_PER * per);
    gpu_get(bad, w[i].bad, 4ull * CTRS * per);
    gpu_get(done, w[i].done, 4ull * DONE_PER * per);
    for (int j = 0; j < per; j++) {
      total++;
      if (bad[CTRS * j + 1]) {
        blas_off++, blas_off_elems += bad[CTRS * j + 1];
        if (blas_off <= 5)
          printf("gpu_ops: cuBLAS's reference off fp64 in %u elements of %s, where the op was within the margin of "
                 "fp64\n", bad[CTRS * j + 1], w[i].probs[j].what);
      }
      if (bad[CTRS * j]) {
        if (wrong++ < 40) report_wrong(&w[i], i, j, bad[CTRS * j]);
      }
      const clcrt_gemm_desc *g = &w[i].probs[j].g;
      for (unsigned b = 0; b < DONE_PER; b++) {
        const unsigned rows = 64u * b < g->m ? (g->m - 64u * b < 64u ? g->m - 64u * b : 64u) : 0u;
        const unsigned want = w[i].runs[j] * rows * g->n, got = done[(size_t)DONE_PER * j + b];
        if (got != want && miscounted++ < 10)
          printf("gpu_ops: done[%u] of %s: %u, not %u\n", b, w[i].probs[j].what, got, want);
      }
      counted += w[i].runs[j] > 0;
    }
    free(done), free(w[i].runs);
    gpu_free(w[i].done);
    graphs += w[i].graphs, replays += w[i].replays, sk_sms += w[i].sk_sms;
    free(bad);
    cublasDestroy(w[i].blas);
    gpu_free(w[i].D), gpu_free(w[i].R), gpu_free(w[i].bad);
    free(w[i].probs);
  }
  printf("gpu_ops: dense: %d GEMMs on 4 threads and 3 streams (%d captured in graphs, replayed %d times between "
         "eager runs): %d wrong; %d counted their rows into done: %d counters off; %d planned as stream-K over "
         "every SM in ranges that cross tiles; %d ran the A-shift kernels (64-row tiles, offsets apart); %d where "
         "cuBLAS's reference was off fp64 (%llu elements) and the op was not\n",
         total, graphs, replays, wrong, counted, miscounted, sk_sms, ashift, blas_off, blas_off_elems);
  ck_assert_int_eq(wrong, 0);
  ck_assert_int_eq(miscounted, 0);
  if (!gpu_under_sanitizer()) ck_assert_int_gt(sk_sms, 0); /* the long decode draws reach that plan */
  ck_assert_int_gt(ashift, 0);
  for (int i = 0; i < 3; i++) clcrt_stream_destroy(s[i]), cu->cuStreamDestroy(raw[i]);
}
END_TEST

/* ---- the calling thread's context ---------------------------------------------------------------- */

/* Random problems from a thread whose current context is not the runtime's at each call: none
 * (a fresh thread), or another device's primary context (a PyTorch thread whose current device
 * is another GPU). The op must allocate, zero and launch on its own device, and leave the
 * thread's context as it found it (none: the runtime's stays current). Before the op entered
 * its runtime's context, the second case allocated stream-K counters on the other device and
 * faulted (an illegal address). The test's own driver and cuBLAS calls push the runtime's
 * context around themselves. */
typedef struct ctx_job {
  CUcontext other; /* NULL: no context current at each call */
  clcrt_stream *s;
  cublasHandle_t blas;
  CUdeviceptr D, R, bad;
  size_t dcap;
  int problems, left_wrong; /* calls that left another context current than they found */
} ctx_job;

static void ctx_push(void) { ck_assert_int_eq(gpu_cu()->cuCtxPushCurrent(clcrt_runtime_context(g_rt)), CUDA_SUCCESS); }
static void ctx_pop(void) {
  CUcontext c;
  ck_assert_int_eq(gpu_cu()->cuCtxPopCurrent(&c), CUDA_SUCCESS);
}

static void *ctx_work(void *arg) {
  ctx_job *j = arg;
  const clcrt__driver *cu = gpu_cu();
  const CUcontext mine = clcrt_runtime_context(g_rt);
  CUstream cs = clcrt_stream_cu(j->s);
  rng_t r = rng_from(0xC0FFEEull + (j->other != NULL));
  for (int i = 0; i < j->problems; i++) {
    problem p = random_dense(&r, j->dcap);
    p.g.d = j->D;
    const unsigned long long ldd = p.g.ldd ? p.g.ldd : p.g.n;
    ctx_push();
    ck_assert_int_eq(cu->cuMemsetD8Async(j->D, 0xff, ((unsigned long long)p.g.m + GUARD) * ldd * 2, cs), CUDA_SUCCESS);
    ctx_pop();
    ck_assert_int_eq(cu->cuCtxSetCurrent(j->other), CUDA_SUCCESS);
    const clcrt_status st = clcrt_gemm(g_ops, j->s, &p.g);
    ck_assert_msg(st == CLCRT_OK, "%s: %s", p.what, clcrt_errmsg(g_rt));
    CUcontext now = NULL;
    ck_assert_int_eq(cu->cuCtxGetCurrent(&now), CUDA_SUCCESS);
    j->left_wrong += now != (j->other ? j->other : mine);
    ctx_push();
    reference(j->blas, &p.g, p.g.a, p.g.m, p.g.b, j->R);
    const opnds o = {p.g.a, p.g.b, p.g.lda ? p.g.lda : p.g.k, p.g.ldb ? p.g.ldb : p.g.k, j->bad + 4};
    compare(j->s, j->D, j->R, p.g.m, p.g.n, ldd, GUARD, j->bad, p.g.k, &o);
    ck_assert_int_eq(cu->cuStreamSynchronize(cs), CUDA_SUCCESS);
    ctx_pop();
  }
  return NULL;
}

START_TEST(test_other_context) {
  const clcrt__driver *cu = gpu_cu();
  int count = 0;
  ck_assert_int_eq(cu->cuDeviceGetCount(&count), CUDA_SUCCESS);
  CUcontext other = NULL;
  CUdevice odev = 0;
  if (count >= 2) {
    ck_assert_int_eq(cu->cuDeviceGet(&odev, (g_rt->opts.device + 1) % count), CUDA_SUCCESS);
    ck_assert_int_eq(cu->cuDevicePrimaryCtxRetain(&other, odev), CUDA_SUCCESS);
  } else {
    printf("gpu_ops: one GPU: the calls from another device's context are not run (two GPUs are needed)\n");
  }
  const int per = gpu_under_sanitizer() ? 6 : 120;
  int total = 0, wrong = 0, left_wrong = 0;
  for (int kind = 0; kind < (other ? 2 : 1); kind++) {
    ctx_job j;
    memset(&j, 0, sizeof j);
    j.other = kind ? other : NULL;
    j.problems = per;
    j.dcap = gpu_under_sanitizer() ? (1u << 22) : (size_t)(16384 + GUARD) * 8201;
    ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &j.s), CLCRT_OK);
    j.D = gpu_alloc(j.dcap * 2), j.R = gpu_alloc(j.dcap * 4), j.bad = gpu_alloc(4ull * CTRS);
    gpu_fill_u8(j.bad, 0, 4ull * CTRS);
    ck_assert(cublasCreate(&j.blas) == CUBLAS_STATUS_SUCCESS);
    ck_assert(cublasSetStream(j.blas, clcrt_stream_cu(j.s)) == CUBLAS_STATUS_SUCCESS);
    pthread_t t;
    pthread_create(&t, NULL, ctx_work, &j);
    pthread_join(t, NULL);
    unsigned bad[CTRS];
    gpu_get(bad, j.bad, sizeof bad);
    printf("gpu_ops: %d GEMMs from a thread with %s current: %u elements wrong, %d calls left another context "
           "current than they found\n",
           per, kind ? "another device's context" : "no context", bad[0], j.left_wrong);
    total += per, wrong += (int)bad[0], left_wrong += j.left_wrong;
    cublasDestroy(j.blas);
    gpu_free(j.D), gpu_free(j.R), gpu_free(j.bad);
    clcrt_stream_destroy(j.s);
  }
  if (other) {
    cu->cuDevicePrimaryCtxRelease(odev);
    /* A runtime of the other GPU made and destroyed while this one's context is current, its
     * release the other primary context's last: this thread's context is current again, and
     * usable. */
    const CUcontext mine = clcrt_runtime_context(g_rt);
    ck_assert_int_eq(cu->cuCtxSetCurrent(mine), CUDA_SUCCESS);
    clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
    o.device = (g_rt->opts.device + 1) % count;
    clcrt_runtime *rt1 = NULL;
    ck_assert_msg(clcrt_runtime_create(&rt1, &o) == CLCRT_OK, "%s", clcrt_errmsg(rt1));
    CUcontext now = NULL;
    ck_assert_int_eq(cu->cuCtxGetCurrent(&now), CUDA_SUCCESS);
    ck_assert_ptr_eq(now, mine);
    clcrt_stream *s1 = NULL;
    ck_assert_int_eq(clcrt_stream_create(rt1, NULL, &s1), CLCRT_OK);
    clcrt_stream_destroy(s1);
    clcrt_runtime_destroy(rt1);
    ck_assert_int_eq(cu->cuCtxGetCurrent(&now), CUDA_SUCCESS);
    ck_assert_ptr_eq(now, mine);
    CUdeviceptr p = gpu_alloc(256);
    gpu_fill_u8(p, 7, 256);
    gpu_free(p);
    printf("gpu_ops: a runtime of the other GPU made and destroyed from this one's context: the context kept\n");
  }
  ck_assert_int_gt(total, 0);
  ck_assert_int_eq(wrong, 0);
  ck_assert_int_eq(left_wrong, 0);
}
END_TEST

/* ---- grouped and masked ------------------------------------------------------------------------- */

/* One grouped (or masked) problem: the sizes, the op, a reference per group, the comparison of
 * every group's rows and of the rows past them (still poisoned). over: make the sizes add up
 * to more rows than the buffer has. Returns the mismatches, or -1 when the problem drawn does
 * not fit the test's buffers (drawn again). */
static int grouped_once(clcrt_stream *s, cublasHandle_t h, rng_t *r, int masked, int over, CUdeviceptr D,
                        CUdeviceptr R, size_t dcap, CUdeviceptr sizes_dev, CUdeviceptr bad, char *what, size_t wn,
                        unsigned *blas_off) {
  const int small = gpu_under_sanitizer();
  const unsigned G = 1 + below(r, small ? 8 : 64), n = logu(r, 8, small ? 512 : 4096), k = 8 * logu(r, 1, small ? 32 : 512);
  int sizes[1024];
  unsigned long long sum = 0;
  const unsigned cap = masked ? logu(r, 1, small ? 128 : 1024) : 0;
  for (unsigned g = 0; g < G; g++) {
    sizes[g] = below(r, 5) == 0 ? 0 : (int)logu(r, 1, small ? 200 : 1500);
    sum += (unsigned)sizes[g];
  }
  unsigned T = masked ? G * cap : (unsigned)sum + below(r, 3) * below(r, 300);
  if (over && !masked) T = (unsigned)(sum / 2);
  if (T == 0) T = 1;
  if ((unsigned long long)T * k > g_pool_a || (unsigned long long)G * n * k > g_pool_b ||
      ((unsigned long long)T + GUARD) * n > dcap)
    return -1;
  gpu_put(sizes_dev, sizes, 4ull * G);
  const unsigned long long guard_rows = GUARD;
  ck_assert_int_eq(gpu_cu()->cuMemsetD8Async(D, 0xff, ((unsigned long long)T + guard_rows) * n * 2, clcrt_stream_cu(s)),
                   CUDA_SUCCESS);
  clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
  g.layout = masked ? CLCRT_GEMM_MASKED : CLCRT_GEMM_GROUPED;
  g.m = masked ? cap : T, g.n = n, g.k = k, g.a = g_A, g.b = g_B, g.d = D, g.groups = G, g.group_sizes = sizes_dev;
  g.variant = VARS[below(r, NVARS)], g.sched = SCHEDS[below(r, 4)];
  if (g.variant && !strcmp(g.variant, "128x64")) g.variant = NULL; /* grouped: the 2 KiB map and 8 stages */
  snprintf(what, wn, "%s G %u n %u k %u T %u sum %llu%s %s %s", masked ? "masked" : "grouped", G, n, k, T, sum,
           over ? " (over)" : "", g.variant ? g.variant : "plan", clcrt_sched_name(g.sched));
  progress(what);
  clcrt_status st = clcrt_gemm(g_ops, s, &g);
  ck_assert_msg(st == CLCRT_OK, "%s: %s", what, clcrt_errmsg(g_rt));
  /* The reference, group by group, for the rows the op must have computed: clamped to T. */
  unsigned row = 0;
  for (unsigned gi = 0; gi < G; gi++) {
    unsigned rows = (unsigned)sizes[gi];
    unsigned start = masked ? gi * cap : row;
    if (masked && rows > cap) rows = cap;
    if (!masked && start + rows > T) rows = start < T ? T - start : 0;
    clcrt_gemm_desc one = g;
    reference(h, &one, g_A + 2ull * start * k, rows, g_B + 2ull * gi * n * k, R + 4ull * start * n);
    const opnds o = {g_A + 2ull * start * k, g_B + 2ull * gi * n * k, k, k, bad + 4};
    /* Masked: rows past the group's count up to cap stay poisoned: compare [start, start + cap). */
    compare(s, D + 2ull * start * n, R + 4ull * start * n, rows, n, n, masked ? cap - rows : 0, bad, k, &o);
    if (!masked) row += (unsigned)sizes[gi];
  }
  /* The rows past the groups' (grouped: up to T, when the sizes add up to fewer) and the guard
   * after the buffer: still poisoned. */
  const unsigned done = masked ? G * cap : (unsigned)(sum < T ? sum : T);
  compare(s, D + 2ull * done * n, R, 0, n, n, (masked ? 0 : T - done) + guard_rows, bad, k, NULL);
  ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
  unsigned b[2] = {0, 0};
  gpu_get(b, bad, 8);
  gpu_fill_u8(bad, 0, 4ull * CTRS);
  *blas_off += b[1];
  (void)wn;
  /* Sizes that did not fit: the next grouped call on the stream fails, once, and runs nothing. */
  st = clcrt_gemm(g_ops, s, &g);
  if (over && !masked && sum > T) {
    ck_assert_msg(st == CLCRT_E_INVALID, "%s: the next call gave %s", what, clcrt_status_name(st));
    ck_assert_msg(strstr(clcrt_errmsg(g_rt), "adding up to"), "%s", clcrt_errmsg(g_rt));
  } else {
    ck_assert_msg(st == CLCRT_OK, "%s: the next call: %s", what, clcrt_errmsg(g_rt));
  }
  ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
  return (int)b[0];
}

START_TEST(test_grouped_random) {
  const int count = gpu_under_sanitizer() ? 6 : 150;
  clcrt_stream *s;
  cublasHandle_t h;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s), CLCRT_OK);
  ck_assert(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  ck_assert(cublasSetStream(h, clcrt_stream_cu(s)) == CUBLAS_STATUS_SUCCESS);
  const size_t cap = gpu_under_sanitizer() ? (1u << 22) : (size_t)70000 * 4096;
  CUdeviceptr D = gpu_alloc(cap * 2), R = gpu_alloc(cap * 4), sizes = gpu_alloc(4096), bad = gpu_alloc(4ull * CTRS);
  gpu_fill_u8(bad, 0, 4ull * CTRS);
  rng_t r = rng_from(0xfeedull);
  int total = 0, wrong = 0, over = 0;
  unsigned blas_off = 0;
  for (int i = 0; i < count; i++) {
    char what[200];
    const int masked = i % 3 == 2, o = !masked && i % 5 == 4;
    int b = grouped_once(s, h, &r, masked, o, D, R, cap, sizes, bad, what, sizeof what, &blas_off);
    if (b < 0) {
      i--;
      continue;
    }
    total++, over += o;
    if (b && wrong++ < 10) printf("gpu_ops: WRONG %s: %d elements\n", what, b);
  }
  printf("gpu_ops: grouped: %d grouped and masked GEMMs (%d with sizes past the buffer): %d wrong; %u elements where "
         "cuBLAS's reference was off fp64 and the op was not\n",
         total, over, wrong, blas_off);
  ck_assert_int_eq(wrong, 0);
  cublasDestroy(h);
  gpu_free(D), gpu_free(R), gpu_free(sizes), gpu_free(bad);
  clcrt_stream_destroy(s);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("gpu_ops");
  TCase *tc = tcase_create("differential");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_dense_random_sequences);
  tcase_add_test(tc, test_grouped_random);
  tcase_add_test(tc, test_other_context);
  suite_add_tcase(s, tc);
  return s;
}

/* A crash on the host prints its stack (addresses: addr2line -e gpu_ops names them). */
static void on_crash(int sig) {
  void *pc[64];
  int n = backtrace(pc, 64);
  static const char msg[] = "gpu_ops: crashed; the stack:\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(128 + sig);
  backtrace_symbols_fd(pc, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

int main(void) {
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);
  gpu_skip_if_absent("gpu_ops");
  g_seed = gpu_test_seed("gpu_ops");
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
