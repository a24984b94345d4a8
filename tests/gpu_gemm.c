/* GPU suite for the bf16 GEMM tile functions (ops/gemm.cu) against cuBLAS, on
 * shapes that are awkward for a 128 x 256 x 64 tile: M, N, K not multiples of the tile, K
 * smaller than one k-block, M = 1, N = 8, odd N, N even but not a multiple of 8 (no 16-byte
 * stores), one CTA's tile of a 2-CTA cluster past the edge; stream-K (clcrt_streamk.cuh) with
 * the plan's decompositions and explicit ones (units spanning several tiles, one unit for
 * everything, more units than SMs), its bits compared across 10 runs, the three schedulers
 * and two streams at once; operands at 16-byte offsets (the shifted k-blocks); then the
 * grouped GEMM on awkward group lists (empty groups, groups smaller than a tile, one group, a
 * thousand tiny groups, all empty, a token buffer longer than the groups' rows) and the
 * masked layout replayed from a CUDA graph with new counts; the plan's measured mode (timed
 * once, kept in the store, read back by a second runtime with no timing). Every variant it
 * covers under STEAL, STATIC and FIXED.
 *
 * Every output is poisoned (NaN) before each run, checked element by element to be written
 * where it must and untouched where it must not, compared with cuBLAS (relative Frobenius
 * error at most 1e-2, a bound for bf16 outputs; NaN fails) and, on a sample, with an fp64 dot
 * product on the CPU (which also checks the cuBLAS call). Each problem runs twice on the same
 * stream: the ring state and the stream-K counters carry over from run to run. */
#include <check.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_internal.h" /* the op's internals: variants, plan, Args */
#include "clcrt.h"
#include "clcrt_ops.h"
#include "common/gpu.h"

static const clcrt_sched SCHEDS[] = {CLCRT_SCHED_STEAL, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};
#define NUM_SCHEDS 3
#define DENSE_VARIANTS 3   /* 128x256, 128x256c2, 128x128 */
#define GROUPED_VARIANTS 2 /* 128x256, 128x256c2 */

static uint64_t rng;
static float urand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static unsigned urand_n(unsigned n) { return (unsigned)((urand() * 0.5f + 0.5f) * n) % (n ? n : 1); }

static uint16_t *random_bf16(size_t n) {
  uint16_t *h = malloc((n ? n : 1) * 2);
  ck_assert_ptr_nonnull(h);
  for (size_t i = 0; i < n; i++) h[i] = gemm_f2bf(urand());
  return h;
}

typedef struct ctx {
  clcrt_runtime *rt;
  clcrt_stream *s;
  cublasHandle_t blas;
} ctx;

/* With CLCRT_TEST_PROGRESS set, each problem's name and the time since the process began
 * (on stderr, unbuffered): where a slow or stuck run is. */
static void progress(const char *what) {
  static double t0 = -1;
  if (!getenv("CLCRT_TEST_PROGRESS")) return;
  double now = clcrt__now_ms();
  if (t0 < 0) t0 = now;
  fprintf(stderr, "gpu_gemm: %8.0f ms  %s\n", now - t0, what);
}

static void ctx_open(ctx *c) {
  c->rt = gpu_runtime();
  ck_assert_int_eq(clcrt_stream_create(c->rt, NULL, &c->s), CLCRT_OK);
  ck_assert_int_eq(cublasCreate(&c->blas), CUBLAS_STATUS_SUCCESS);
  ck_assert_int_eq(cublasSetStream(c->blas, clcrt_stream_cu(c->s)), CUBLAS_STATUS_SUCCESS);
}
static void ctx_close(ctx *c) {
  cublasDestroy(c->blas);
  clcrt_stream_destroy(c->s);
  clcrt_runtime_destroy(c->rt);
}

/* D (m x n, row stride ldd) = A (m x k) . B (n x k)^T in cuBLAS's column-major terms:
 * D^T (n x m) = B^T' . A^T' with B and A read as k x n and k x m column-major matrices. */
static void ref_gemm(ctx *c, CUdeviceptr A, CUdeviceptr B, CUdeviceptr D, int m, int n, int k, int ldd) {
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t st = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, (const void *)B, CUDA_R_16BF, k,
                                   (const void *)A, CUDA_R_16BF, k, &zero, (void *)D, CUDA_R_16BF, ldd,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  ck_assert_msg(st == CUBLAS_STATUS_SUCCESS, "cublasGemmEx(%d x %d x %d): status %d", m, n, k, (int)st);
}

/* Rows [0, rows) of got against ref (both rows x n, row-major): every element written (no
 * NaN) and the relative Frobenius error at most 1e-2. */
static void compare(const uint16_t *got, const uint16_t *ref, size_t rows, size_t n, const char *what) {
  double num = 0, den = 0;
  for (size_t i = 0; i < rows * n; i++) {
    float g = gemm_bf2f(got[i]), r = gemm_bf2f(ref[i]);
    GPU_CHECK(g == g, "%s: D[%zu][%zu] not written (NaN)", what, i / n, i % n);
    GPU_CHECK(r == r, "%s: cuBLAS's D[%zu][%zu] is NaN", what, i / n, i % n);
    num += (double)(g - r) * (g - r);
    den += (double)r * r;
  }
  double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  ck_assert_msg(rel <= 1e-2, "%s: relative Frobenius error %.3g against cuBLAS", what, rel);
}

/* A few elements against an fp64 dot product: checks the kernel and the cuBLAS call alike. */
static void sample_fp64(const uint16_t *d, size_t ldd, const uint16_t *a, const uint16_t *b, size_t a_row0,
                        size_t b_row0, size_t rows, size_t n, size_t k, const char *what) {
  if (rows == 0) return;
  for (int t = 0; t < 24; t++) {
    size_t i = urand_n((unsigned)rows), j = urand_n((unsigned)n);
    double ref = 0, mag = 0;
    for (size_t q = 0; q < k; q++) {
      double p = (double)gemm_bf2f(a[(a_row0 + i) * k + q]) * gemm_bf2f(b[(b_row0 + j) * k + q]);
      ref += p, mag += fabs(p);
    }
    double got = gemm_bf2f(d[(a_row0 + i) * ldd + j]);
    ck_assert_msg(fabs(got - ref) <= 8e-3 * fabs(ref) + 1e-4 * mag + 1e-6, "%s: D[%zu][%zu] = %.6g, fp64 %.6g", what,
                  a_row0 + i, j, got, ref);
  }
}

/* ---- dense ---- */

/* How a problem's tiles are shared: the plan's rule for the variant, whole tiles, every tile
 * shared over the SMs, or exactly the stream-K numbers given (clamped by clcrt_sk_make). */
enum { PLAN_RULE, WHOLE, ALL, EXPLICIT, EXPLICIT_TAIL /* the shared tiles last (order 1) */ };

typedef struct shape {
  unsigned m, n, k;
  int mode;
  unsigned sk_tiles, sk_units; /* EXPLICIT */
} shape;

static const shape SHAPES[] = {
    {1, 8, 8, PLAN_RULE, 0, 0},       /* M = 1, N = 8, K < one k-block */
    {1, 4096, 512, PLAN_RULE, 0, 0},  /* one row: a GEMV, every tile shared */
    {7, 13, 40, PLAN_RULE, 0, 0},     /* odd N: 2-byte stores at the edge */
    {130, 264, 72, PLAN_RULE, 0, 0},  /* just past the tile on every side */
    {255, 511, 1000, PLAN_RULE, 0, 0}, /* K not a multiple of 64, N odd */
    {384, 512, 256, WHOLE, 0, 0},     /* exact tiles; 3 m-tiles: a 2-CTA cluster's second tile is past the edge */
    {1000, 1000, 64, PLAN_RULE, 0, 0}, /* one k-block exactly */
    {128, 1024, 8192, PLAN_RULE, 0, 0}, /* few tiles, long K: shared over every SM */
    {257, 520, 2048, EXPLICIT, 3, 7}, /* 3 of the tiles shared by 7 units, edge tiles */
    {64, 256, 128, ALL, 0, 0},        /* more units than k-blocks: clamped to them (2) */
    {1536, 2304, 1024, PLAN_RULE, 0, 0},
    {200, 1002, 136, PLAN_RULE, 0, 0}, /* even N, not a multiple of 8: no 16-byte stores (the 4-byte path) */
    {130, 998, 4096, ALL, 0, 0},      /* shared tiles with the same: the last piece writes element by element */
    {96, 4104, 512, PLAN_RULE, 0, 0}, /* N a multiple of 8 past the tile: a 16-byte group alone in its chunk */
    {16, 12288, 1032, ALL, 0, 0},     /* GEMV, K not a multiple of 64: units span tiles */
    {2999, 2040, 520, ALL, 0, 0},     /* 1.5 waves, every tile shared */
    {4096, 4352, 264, EXPLICIT, 148, 132}, /* 4.1 waves of 5 k-blocks, the tail shared: units over several tiles */
    {700, 1500, 2056, EXPLICIT, 1000, 1}, /* one unit runs every tile as segments */
    {700, 1500, 2056, EXPLICIT, 17, 29},
    {4096, 4352, 264, EXPLICIT_TAIL, 16, 64}, /* the last 16 tiles in 4 slices, after 528 whole ones */
    {1000, 3000, 4000, EXPLICIT_TAIL, 9, 31}, /* the last 9 tiles shared by 31 units (ranges across tiles) */
};
#define NUM_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

/* The plan for variant vi of a shape (loads aligned). */
static gemm_plan shape_plan(const shape *sh, int vi, int sms) {
  gemm_plan p = gemm_plan_dense(sh->m, sh->n, sh->k, 128, sms, 0);
  p.variant = vi, p.trans = 0;
  gemm_share share = sh->mode == WHOLE ? GEMM_SHARE_WHOLE : sh->mode == ALL ? GEMM_SHARE_ALL : GEMM_SHARE_TAIL;
  gemm_plan_share(&p, share, sh->m, sh->n, sh->k, sms, 0);
  if (sh->mode == EXPLICIT || sh->mode == EXPLICIT_TAIL)
    p.sk_tiles = sh->sk_tiles, p.sk_units = sh->sk_units, p.sk_tail = sh->mode == EXPLICIT_TAIL;
  return p;
}

/* A dense problem's device buffers, its args and its stream-K workspace. */
typedef struct dense {
  unsigned m, n, k;
  uint16_t *ha, *hb, *hd, *hr;
  CUdeviceptr A, B, D, R, ws, ctr;
  const gemm_variant *v;
  gemm_args a;
  char what[160];
} dense;

static void dense_open(ctx *c, dense *d, const gemm_plan *p, unsigned m, unsigned n, unsigned k, const char *tag) {
  memset(d, 0, sizeof *d);
  d->m = m, d->n = n, d->k = k;
  size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
  d->ha = random_bf16(na), d->hb = random_bf16(nb), d->hd = malloc(nd * 2), d->hr = malloc(nd * 2);
  ck_assert(d->hd && d->hr);
  d->A = gpu_alloc(na * 2), d->B = gpu_alloc(nb * 2), d->D = gpu_alloc(nd * 2), d->R = gpu_alloc(nd * 2);
  gpu_put(d->A, d->ha, na * 2);
  gpu_put(d->B, d->hb, nb * 2);
  d->v = gemm_variant_at(p->variant);
  ck_assert_int_eq(gemm_dense_args(c->rt, p, &d->a, d->A, d->B, d->D, m, n, k, 0, 0), CLCRT_OK);
  if (d->a.sk_units) {
    d->ws = gpu_alloc(gemm_ws_bytes(d->v, &d->a));
    d->ctr = gpu_alloc(gemm_ctr_bytes(d->v, &d->a));
    gpu_fill_u8(d->ctr, 0, gemm_ctr_bytes(d->v, &d->a));
    gpu_fill_u8(d->ws, 0xff, gemm_ws_bytes(d->v, &d->a)); /* NaN: no partial may be read before it is written */
    d->a.ws = d->ws, d->a.ctr = d->ctr;
  }
  snprintf(d->what, sizeof d->what, "%s %u x %u x %u (stream-K %u tiles over %u units of %u%s)", tag, m, n, k,
           d->a.sk_tiles, d->a.sk_units, gemm_dense_tiles(d->v, &d->a).x / d->v->cm, d->a.sk_tail ? ", last" : "");
  progress(d->what);
  ref_gemm(c, d->A, d->B, d->R, (int)m, (int)n, (int)k, (int)n);
  ck_assert_int_eq(clcrt_stream_sync(c->s), CLCRT_OK);
  gpu_get(d->hr, d->R, nd * 2);
}

/* One run on stream s into D, poisoned first; the output lands in d->hd. */
static void dense_run(ctx *c, dense *d, clcrt_stream *s, clcrt_kernel *k) {
  gpu_fill_u8(d->D, 0xff, (size_t)d->m * d->n * 2); /* NaN */
  ck_assert_msg(clcrt_run(s, k, gemm_dense_tiles(d->v, &d->a), &d->a, sizeof d->a) == CLCRT_OK, "%s: %s", d->what,
                clcrt_errmsg(c->rt));
  ck_assert_msg(clcrt_stream_sync(s) == CLCRT_OK, "%s: %s", d->what, clcrt_errmsg(c->rt));
  gpu_get(d->hd, d->D, (size_t)d->m * d->n * 2);
}

/* The counters are back at zero: the next run may share them. */
static void dense_check_counters(dense *d) {
  if (!d->a.sk_units) return;
  size_t bytes = gemm_ctr_bytes(d->v, &d->a);
  unsigned *h = malloc(bytes);
  ck_assert_ptr_nonnull(h);
  gpu_get(h, d->ctr, bytes);
  for (size_t i = 0; i < bytes / 4; i++) GPU_CHECK(h[i] == 0, "%s: counter %zu = %u", d->what, i, h[i]);
  free(h);
}

static void dense_close(dense *d) {
  gpu_free(d->A), gpu_free(d->B), gpu_free(d->D), gpu_free(d->R), gpu_free(d->ws), gpu_free(d->ctr);
  free(d->ha), free(d->hb), free(d->hd), free(d->hr);
}

/* Two runs on the same stream into poisoned outputs, each against cuBLAS and fp64 samples; then
 * the stream-K counters back at zero, and the problem closed. */
static void dense_check_close(ctx *c, dense *d, clcrt_kernel *k) {
  for (int rep = 0; rep < 2; rep++) {
    dense_run(c, d, c->s, k);
    compare(d->hd, d->hr, d->m, d->n, d->what);
    sample_fp64(d->hd, d->n, d->ha, d->hb, 0, 0, d->m, d->n, d->k, d->what);
  }
  dense_check_counters(d);
  dense_close(d);
}

/* One test per (variant, scheduler): every shape, twice on the same stream (the ring state
 * and the stream-K counters carry over from run to run). */
START_TEST(test_dense) {
  const int vi = _i / NUM_SCHEDS;
  clcrt_sched sched = SCHEDS[_i % NUM_SCHEDS];
  rng = 0x5eed0000ull + (uint64_t)_i;
  ctx c;
  ctx_open(&c);
  clcrt_kernel *k = NULL;
  ck_assert_msg(gemm_register(c.rt, clcrt_gemm_source(), &GEMM_VARIANTS[vi], sched, 0, &k) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
  char tag[64];
  snprintf(tag, sizeof tag, "%s %s", GEMM_VARIANTS[vi].name, clcrt__sched_name(sched));
  int n = gpu_under_sanitizer() ? 8 : NUM_SHAPES;
  for (int i = 0; i < n; i++) {
    const shape *sh = &SHAPES[gpu_under_sanitizer() ? (i * 5) % NUM_SHAPES : i];
    gemm_plan p = shape_plan(sh, vi, c.rt->num_sms);
    dense d;
    dense_open(&c, &d, &p, sh->m, sh->n, sh->k, tag);
    dense_check_close(&c, &d, k);
  }
  ctx_close(&c);
}
END_TEST

/* The transposed kernels (A and B swapped, D^T computed; what the plan takes for a vocabulary
 * head at a few hundred rows, and 64x16 for GEMVs): shapes with rows and columns past the
 * tiles (odd M, M under 16, M past one tile of columns), whole tiles, the model's tail and every tile in slices, twice
 * each on one stream, against cuBLAS and fp64 samples; outputs poisoned first. */
static const shape TRANS_SHAPES[] = {
    {300, 1000, 1032, WHOLE, 0, 0}, {300, 1000, 1032, ALL, 0, 0},  {1, 700, 512, PLAN_RULE, 0, 0},
    {7, 129, 64, WHOLE, 0, 0},      {259, 3584, 256, PLAN_RULE, 0, 0}, {445, 520, 2056, ALL, 0, 0},
    {130, 4100, 320, PLAN_RULE, 0, 0},   {61, 2000, 4104, ALL, 0, 0},
};
START_TEST(test_dense_trans) {
  static const char *const names[] = {"128x160c2", "128x256", "64x16c2", "128x48", "64x96", "64x16"};
  const int vi = gemm_variant_find(names[_i]);
  ck_assert_int_ge(vi, 0);
  rng = 0x7a115ull + (uint64_t)_i;
  ctx c;
  ctx_open(&c);
  clcrt_kernel *k = NULL;
  ck_assert_msg(gemm_register_opt(c.rt, clcrt_gemm_source(), gemm_variant_at(vi), CLCRT_SCHED_STEAL, 0,
                                  "-DGEMM_TRANS=1", &k) == CLCRT_OK,
                "%s", clcrt_errmsg(c.rt));
  char tag[64];
  snprintf(tag, sizeof tag, "%st steal", names[_i]);
  const int n = gpu_under_sanitizer() ? 3 : (int)(sizeof TRANS_SHAPES / sizeof TRANS_SHAPES[0]);
  for (int i = 0; i < n; i++) {
    const shape *sh = &TRANS_SHAPES[gpu_under_sanitizer() ? i * 3 : i];
    gemm_plan p = shape_plan(sh, vi, c.rt->num_sms);
    p.trans = 1; /* the decomposition of the swapped problem */
    gemm_plan_share(&p, sh->mode == WHOLE ? GEMM_SHARE_WHOLE : sh->mode == ALL ? GEMM_SHARE_ALL : GEMM_SHARE_TAIL, sh->n,
                    sh->m, sh->k, c.rt->num_sms, 0);
    dense d;
    dense_open(&c, &d, &p, sh->m, sh->n, sh->k, tag);
    ck_assert_uint_eq(d.a.trans, 1);
    dense_check_close(&c, &d, k);
  }
  ctx_close(&c);
}
END_TEST

/* Stream-K's outputs are the same bits on every run and under every scheduler: 10 runs each
 * under STEAL (a persistent grid smaller than the units where they are more than the SMs),
 * STATIC (likewise) and FIXED (a grid larger than what is resident), then one run on each of
 * two streams at once (each with its own workspace), all against the first run's bits. */
static const shape DETERMINISM[] = {
    {1, 12288, 1032, ALL, 0, 0},          /* a GEMV: 48 tiles shared by every SM */
    {2999, 2040, 520, EXPLICIT, 192, 132}, /* 1.5 waves, all shared */
    {4096, 4352, 264, EXPLICIT, 148, 132}, /* the tail (16 + 132 tiles) shared, 528 units: more than the SMs */
    {700, 1500, 2056, EXPLICIT, 17, 29},
    {128, 1024, 8192, ALL, 0, 0},
    {4096, 4352, 264, EXPLICIT_TAIL, 16, 64},
};
#define NUM_DETERMINISM ((int)(sizeof DETERMINISM / sizeof DETERMINISM[0]))

START_TEST(test_streamk_determinism) {
  const int vi = _i % 2; /* 128x256, 128x256c2 */
  const shape *sh = &DETERMINISM[_i / 2];
  rng = 0xde7e0000ull + (uint64_t)_i;
  ctx c;
  ctx_open(&c);
  clcrt_kernel *k[NUM_SCHEDS];
  for (int s = 0; s < NUM_SCHEDS; s++)
    ck_assert_msg(gemm_register(c.rt, clcrt_gemm_source(), &GEMM_VARIANTS[vi], SCHEDS[s], 0, &k[s]) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
  gemm_plan p = shape_plan(sh, vi, c.rt->num_sms);
  dense d;
  dense_open(&c, &d, &p, sh->m, sh->n, sh->k, GEMM_VARIANTS[vi].name);
  ck_assert_msg(d.a.sk_units > 0, "%s: no tile is shared", d.what);
  const size_t nd = (size_t)d.m * d.n;
  uint16_t *first = malloc(nd * 2);
  ck_assert_ptr_nonnull(first);
  const int runs = gpu_under_sanitizer() ? 2 : 10;
  for (int s = 0; s < NUM_SCHEDS; s++)
    for (int r = 0; r < runs; r++) {
      dense_run(&c, &d, c.s, k[s]);
      if (s == 0 && r == 0) {
        compare(d.hd, d.hr, d.m, d.n, d.what);
        memcpy(first, d.hd, nd * 2);
        continue;
      }
      for (size_t i = 0; i < nd; i++)
        GPU_CHECK(d.hd[i] == first[i], "%s: %s run %d: D[%zu][%zu] = 0x%04x, the first run's 0x%04x", d.what,
                  clcrt__sched_name(SCHEDS[s]), r, i / d.n, i % d.n, d.hd[i], first[i]);
    }
  dense_check_counters(&d);
  /* Two streams at once, each run with its own output, workspace and counters. */
  clcrt_stream *s2 = NULL;
  ck_assert_int_eq(clcrt_stream_create(c.rt, NULL, &s2), CLCRT_OK);
  gemm_args a2 = d.a;
  CUdeviceptr D2 = gpu_alloc(nd * 2), ws2 = gpu_alloc(gemm_ws_bytes(d.v, &d.a)), ctr2 = gpu_alloc(gemm_ctr_bytes(d.v, &d.a));
  gpu_fill_u8(ctr2, 0, gemm_ctr_bytes(d.v, &d.a));
  gpu_fill_u8(D2, 0xff, nd * 2);
  gpu_fill_u8(d.D, 0xff, nd * 2);
  a2.d = D2, a2.ws = ws2, a2.ctr = ctr2;
  clcrt_dim3 tiles = gemm_dense_tiles(d.v, &d.a);
  for (int r = 0; r < 3; r++) {
    ck_assert_int_eq(clcrt_run(c.s, k[0], tiles, &d.a, sizeof d.a), CLCRT_OK);
    ck_assert_int_eq(clcrt_run(s2, k[1], tiles, &a2, sizeof a2), CLCRT_OK);
  }
  ck_assert_int_eq(clcrt_stream_sync(c.s), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(s2), CLCRT_OK);
  for (int which = 0; which < 2; which++) {
    gpu_get(d.hd, which ? D2 : d.D, nd * 2);
    for (size_t i = 0; i < nd; i++)
      GPU_CHECK(d.hd[i] == first[i], "%s: stream %d of two: D[%zu][%zu] = 0x%04x, the first run's 0x%04x", d.what,
                which, i / d.n, i % d.n, d.hd[i], first[i]);
  }
  clcrt_stream_destroy(s2);
  gpu_free(D2), gpu_free(ws2), gpu_free(ctr2);
  dense_check_counters(&d);
  free(first);
  dense_close(&d);
  ctx_close(&c);
}
END_TEST

/* Operands at 16-byte offsets (tensor views): A, B and D placed that many bytes into larger
 * buffers. With rows a multiple of 128 bytes apart the k-blocks are shifted to align the
 * operand whose box has the more rows (B in 128x256 and, on the tie, 128x256c2; A in 128x192c2
 * and 128x64; B in 64x160c2), and the other with it when the offsets agree; otherwise nothing
 * is shifted. 64-row tiles (64x64, 64x16, 64x256, 64x160c2, and 64x32 transposed) align the
 * tiles' B and start A's boxes apart on A's own lines where the offsets differ (Args.ashift: the
 * A-shift kernel reads each k-block of A from two boxes). Checked against cuBLAS on the same
 * operands. */
START_TEST(test_dense_offsets) {
  static const struct {
    unsigned m, n, k, oa, ob, od;
  } cases[] = {
      {300, 700, 1024, 16, 16, 0},   /* the same offset: both aligned by the shift */
      {300, 700, 1024, 16, 48, 0},   /* different offsets: one aligned, the other not */
      {129, 520, 576, 112, 96, 16},  /* D at 16 bytes too */
      {1, 2048, 2048, 80, 80, 0},    /* a GEMV, every tile shared */
      {64, 600, 1000, 32, 64, 2},    /* rows 2000 bytes apart: no shift; D at 2 bytes (the element path) */
      {2000, 1024, 192, 16, 112, 0}, /* the shift adds a k-block */
  };
  static const char *const names[] = {"128x256", "128x256c2", "128x192c2", "64x64", "128x64",
                                      "64x160c2", "64x16",     "64x256",    "64x32"};
  const int trans = _i == 8;
  const int vi = gemm_variant_find(names[_i]);
  ck_assert_msg(vi >= 0, "no variant %s", names[_i]);
  const gemm_variant *v = gemm_variant_at(vi);
  /* apart: 64-row tiles, whose A's boxes may start apart from B's (gemm_ashift) */
  const int apart = v->bm == 64, shift_a = v->bm > v->bn / v->cm;
  ck_assert_int_eq(shift_a, _i == 2 || _i == 4 || _i == 6 || _i == 8);
  rng = 0x0ff5e7ull + (uint64_t)_i;
  ctx c;
  ctx_open(&c);
  clcrt_kernel *ks[GEMM_KINDS] = {NULL};
  for (unsigned ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const unsigned m = cases[ci].m, n = cases[ci].n, kk = cases[ci].k;
    size_t na = (size_t)m * kk, nb = (size_t)n * kk, nd = (size_t)m * n;
    uint16_t *ha = random_bf16(na), *hb = random_bf16(nb), *hd = malloc(nd * 2), *hr = malloc(nd * 2);
    ck_assert(hd && hr);
    CUdeviceptr A0 = gpu_alloc(na * 2 + 256), B0 = gpu_alloc(nb * 2 + 256), D0 = gpu_alloc(nd * 2 + 256),
                R = gpu_alloc(nd * 2);
    CUdeviceptr A = A0 + cases[ci].oa, B = B0 + cases[ci].ob, D = D0 + cases[ci].od;
    gpu_put(A, ha, na * 2);
    gpu_put(B, hb, nb * 2);
    unsigned align = gemm_load_align(A, B, kk);
    gemm_plan p = gemm_plan_dense(m, n, kk, align, c.rt->num_sms, 0);
    p.variant = vi, p.trans = trans;
    gemm_plan_share(&p, GEMM_SHARE_TAIL, trans ? n : m, trans ? m : n, kk, c.rt->num_sms, 0);
    gemm_args a;
    ck_assert_int_eq(gemm_dense_args(c.rt, &p, &a, A, B, D, m, n, kk, 0, 0), CLCRT_OK);
    CUdeviceptr ws = 0, ctr = 0;
    if (a.sk_units) {
      ws = gpu_alloc(gemm_ws_bytes(v, &a)), ctr = gpu_alloc(gemm_ctr_bytes(v, &a));
      gpu_fill_u8(ctr, 0, gemm_ctr_bytes(v, &a));
      a.ws = ws, a.ctr = ctr;
    }
    char what[224];
    snprintf(what, sizeof what, "%s%s %u x %u x %u, A +%u B +%u D +%u bytes: shift %u, A %u before, loads %u-byte aligned",
             v->name, trans ? "t" : "", m, n, kk, cases[ci].oa, cases[ci].ob, cases[ci].od, a.kshift, a.ashift, align);
    progress(what);
    /* The tiles' A and B: the call's B and A when transposed. */
    const unsigned ta = trans ? cases[ci].ob : cases[ci].oa, tb = trans ? cases[ci].oa : cases[ci].ob;
    if ((kk * 2) % 128 == 0) {
      ck_assert_msg(a.kshift == ((shift_a && !apart ? ta : tb) % 128) / 2, "%s: shift", what);
      ck_assert_msg(a.ashift == (apart ? ((ta - tb) & 127u) / 2 : 0u), "%s: A's boxes", what);
      ck_assert_msg((align == 128) == (cases[ci].oa % 128 == cases[ci].ob % 128), "%s", what);
    } else {
      ck_assert_msg(a.kshift == 0 && a.ashift == 0, "%s: shifted rows of no common offset", what);
    }
    const int kind = gemm_kind_dense(&a); /* the A-shift kernel where A's boxes lie apart from B's */
    ck_assert_int_eq(kind, a.ashift ? (trans ? GEMM_KIND_ASHIFT_TRANS : GEMM_KIND_ASHIFT)
                                    : (trans ? GEMM_KIND_TRANS : GEMM_KIND_DENSE));
    if (!ks[kind])
      ck_assert_msg(gemm_register_kind(c.rt, clcrt_gemm_source(), v, CLCRT_SCHED_STEAL, kind, NULL, &ks[kind]) == CLCRT_OK,
                    "%s", clcrt_errmsg(c.rt));
    ref_gemm(&c, A, B, R, (int)m, (int)n, (int)kk, (int)n);
    ck_assert_int_eq(clcrt_stream_sync(c.s), CLCRT_OK);
    gpu_get(hr, R, nd * 2);
    gpu_fill_u8(D0, 0xff, nd * 2 + 256);
    ck_assert_msg(clcrt_run(c.s, ks[kind], gemm_dense_tiles(v, &a), &a, sizeof a) == CLCRT_OK, "%s: %s", what,
                  clcrt_errmsg(c.rt));
    ck_assert_msg(clcrt_stream_sync(c.s) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(c.rt));
    gpu_get(hd, D, nd * 2);
    compare(hd, hr, m, n, what);
    sample_fp64(hd, n, ha, hb, 0, 0, m, n, kk, what);
    uint16_t edge[2];
    gpu_get(edge, D0 + cases[ci].od - (cases[ci].od ? 2 : 0), 2); /* the element before D, where there is one */
    gpu_get(edge + 1, D + nd * 2, 2);                               /* the element after D */
    ck_assert_msg((cases[ci].od == 0 || edge[0] == 0xffff) && edge[1] == 0xffff, "%s: wrote outside D", what);
    gpu_free(A0), gpu_free(B0), gpu_free(D0), gpu_free(R), gpu_free(ws), gpu_free(ctr);
    free(ha), free(hb), free(hd), free(hr);
  }
  ctx_close(&c);
}
END_TEST

/* Problems of different shapes back to back on one stream without a sync between them: each
 * run starts its ring where the CTA's State begins (a fresh launch), never where the previous
 * run left off; the outputs must all be right at the end. */
START_TEST(test_dense_back_to_back) {
  rng = 0xb2bull;
  ctx c;
  ctx_open(&c);
  const gemm_variant *v = &GEMM_VARIANTS[0];
  clcrt_kernel *k = NULL;
  ck_assert_msg(gemm_register(c.rt, clcrt_gemm_source(), v, CLCRT_SCHED_STEAL, 0, &k) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
  enum { N = 6 };
  const shape sh[N] = {{300, 600, 264, PLAN_RULE, 0, 0},  {1, 8, 8, PLAN_RULE, 0, 0},
                       {1024, 512, 512, PLAN_RULE, 0, 0}, {77, 1000, 1024, EXPLICIT, 4, 9},
                       {512, 96, 64, PLAN_RULE, 0, 0},    {130, 264, 72, PLAN_RULE, 0, 0}};
  dense d[N];
  for (int i = 0; i < N; i++) {
    gemm_plan p = shape_plan(&sh[i], 0, c.rt->num_sms);
    char tag[32];
    snprintf(tag, sizeof tag, "back to back #%d", i);
    dense_open(&c, &d[i], &p, sh[i].m, sh[i].n, sh[i].k, tag);
    gpu_fill_u8(d[i].D, 0xff, (size_t)sh[i].m * sh[i].n * 2);
  }
  for (int rep = 0; rep < 3; rep++)
    for (int i = 0; i < N; i++)
      ck_assert_msg(clcrt_run(c.s, k, gemm_dense_tiles(v, &d[i].a), &d[i].a, sizeof d[i].a) == CLCRT_OK, "%s",
                    clcrt_errmsg(c.rt));
  ck_assert_msg(clcrt_stream_sync(c.s) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
  for (int i = 0; i < N; i++) {
    gpu_get(d[i].hd, d[i].D, (size_t)sh[i].m * sh[i].n * 2);
    compare(d[i].hd, d[i].hr, sh[i].m, sh[i].n, d[i].what);
    dense_check_counters(&d[i]);
    dense_close(&d[i]);
  }
  ctx_close(&c);
}
END_TEST

/* ---- grouped ---- */

/* Group lists: the sizes, and how many rows the token buffer has beyond their sum. */
typedef struct glist {
  const char *name;
  unsigned groups;
  unsigned sizes[1000];
  unsigned extra_rows;
} glist;

static void make_glist(int kind, glist *g) {
  memset(g, 0, sizeof *g);
  switch (kind) {
    case 0: {
      static const unsigned s[] = {0, 5, 0, 300, 128, 0, 1, 0, 257};
      g->name = "mixed with empty groups";
      g->groups = 9;
      memcpy(g->sizes, s, sizeof s);
      break;
    }
    case 1:
      g->name = "every group smaller than a tile";
      g->groups = 24;
      for (unsigned i = 0; i < g->groups; i++) g->sizes[i] = 1 + urand_n(127);
      break;
    case 2:
      g->name = "one group";
      g->groups = 1;
      g->sizes[0] = 777;
      break;
    case 3:
      /* Under racecheck a thousand groups (their kernel and the reference's cuBLAS call per
       * group) took the tool past the host's 128 GiB and the kernel's OOM killer ended the run
       * (H200, 2026-11-28: 20 GB of resident memory before this case, then about 2 GB a second);
       * a hundred under a sanitizer. */
      g->name = gpu_under_sanitizer() ? "a hundred tiny groups" : "a thousand tiny groups";
      g->groups = gpu_under_sanitizer() ? 100 : 1000;
      for (unsigned i = 0; i < g->groups; i++) g->sizes[i] = urand_n(4);
      break;
    case 4:
      g->name = "all empty";
      g->groups = 4;
      g->extra_rows = 3;
      break;
    default:
      g->name = "buffer longer than the groups";
      g->groups = 6;
      for (unsigned i = 0; i < g->groups; i++) g->sizes[i] = urand_n(400);
      g->extra_rows = 150;
      break;
  }
}
#define NUM_GLISTS 6

static void run_grouped(ctx *c, clcrt_kernel *k, const gemm_variant *v, const glist *g, const char *tag) {
  const unsigned n = 264, kk = 136; /* two n-tiles, the second mostly past N; K not a multiple of 64 */
  unsigned rows = 0;
  for (unsigned i = 0; i < g->groups; i++) rows += g->sizes[i];
  const unsigned total = rows + g->extra_rows;
  const size_t na = (size_t)(total ? total : 1) * kk, nb = (size_t)g->groups * n * kk, nd = (size_t)(total ? total : 1) * n;
  uint16_t *ha = random_bf16(na), *hb = random_bf16(nb), *hd = malloc(nd * 2), *hr = malloc(nd * 2);
  ck_assert(hd && hr);
  CUdeviceptr A = gpu_alloc(na * 2), B = gpu_alloc(nb * 2), D = gpu_alloc(nd * 2), R = gpu_alloc(nd * 2);
  CUdeviceptr S = gpu_alloc(g->groups * 4);
  gpu_put(A, ha, na * 2), gpu_put(B, hb, nb * 2);
  int sizes[1000];
  for (unsigned i = 0; i < g->groups; i++) sizes[i] = (int)g->sizes[i];
  gpu_put(S, sizes, g->groups * 4);
  /* The reference: one cuBLAS call per non-empty group. */
  gpu_fill_u8(R, 0xff, nd * 2);
  unsigned row0 = 0;
  for (unsigned i = 0; i < g->groups; i++) {
    if (g->sizes[i])
      ref_gemm(c, A + (size_t)row0 * kk * 2, B + (size_t)i * n * kk * 2, R + (size_t)row0 * n * 2, (int)g->sizes[i],
               (int)n, (int)kk, (int)n);
    row0 += g->sizes[i];
  }
  ck_assert_int_eq(clcrt_stream_sync(c->s), CLCRT_OK);
  gpu_get(hr, R, nd * 2);
  gemm_args a;
  ck_assert_int_eq(gemm_grouped_args(c->rt, v, &a, A, B, D, total, n, kk, g->groups, S, 0), CLCRT_OK);
  char what[160];
  snprintf(what, sizeof what, "%s, %s: %u groups, %u rows (+%u)", tag, g->name, g->groups, rows, g->extra_rows);
  progress(what);
  for (int rep = 0; rep < 2; rep++) {
    gpu_fill_u8(D, 0xff, nd * 2);
    ck_assert_msg(clcrt_run(c->s, k, gemm_grouped_tiles(v, &a), &a, sizeof a) == CLCRT_OK, "%s: %s", what,
                  clcrt_errmsg(c->rt));
    ck_assert_msg(clcrt_stream_sync(c->s) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(c->rt));
    gpu_get(hd, D, nd * 2);
    compare(hd, hr, rows, n, what);
    for (size_t i = (size_t)rows * n; i < (size_t)total * n; i++)
      GPU_CHECK(hd[i] == 0xffff, "%s: row %zu past the groups was written", what, i / n);
    row0 = 0;
    for (unsigned i = 0; i < g->groups; i++) {
      if (g->sizes[i] && (i % 97 == 0 || g->groups < 50))
        sample_fp64(hd, n, ha, hb + (size_t)i * n * kk, row0, 0, g->sizes[i], n, kk, what);
      row0 += g->sizes[i];
    }
  }
  gpu_free(A), gpu_free(B), gpu_free(D), gpu_free(R), gpu_free(S);
  free(ha), free(hb), free(hd), free(hr);
}

START_TEST(test_grouped) {
  const gemm_variant *v = &GEMM_VARIANTS[_i / NUM_SCHEDS];
  clcrt_sched sched = SCHEDS[_i % NUM_SCHEDS];
  rng = 0x9a0000ull + (uint64_t)_i;
  ctx c;
  ctx_open(&c);
  clcrt_kernel *k = NULL;
  ck_assert_msg(gemm_register(c.rt, clcrt_gemm_source(), v, sched, 1, &k) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
  char tag[64];
  snprintf(tag, sizeof tag, "grouped %s %s", v->name, clcrt__sched_name(sched));
  static glist g;
  for (int kind = 0; kind < NUM_GLISTS; kind++) {
    make_glist(kind, &g);
    run_grouped(&c, k, v, &g, tag);
  }
  ctx_close(&c);
}
END_TEST

/* The masked layout (decode under CUDA graphs): group g's rows at row g * R of A and D, the
 * counts in device memory (some above R: clamped), rows past a group's count untouched. The
 * run is captured into a graph once and replayed with new counts written between replays;
 * every replay's output is checked against one cuBLAS call per group. */
START_TEST(test_grouped_masked) {
  const gemm_variant *v = &GEMM_VARIANTS[_i / NUM_SCHEDS];
  clcrt_sched sched = SCHEDS[_i % NUM_SCHEDS];
  rng = 0x3a5c0000ull + (uint64_t)_i;
  ctx c;
  ctx_open(&c);
  clcrt_kernel *k = NULL;
  ck_assert_msg(gemm_register(c.rt, clcrt_gemm_source(), v, sched, 1, &k) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
  const unsigned G = 37, R = 150, n = 520, kk = 264;
  const size_t na = (size_t)G * R * kk, nb = (size_t)G * n * kk, nd = (size_t)G * R * n;
  uint16_t *ha = random_bf16(na), *hb = random_bf16(nb), *hd = malloc(nd * 2), *hr = malloc(nd * 2);
  ck_assert(hd && hr);
  CUdeviceptr A = gpu_alloc(na * 2), B = gpu_alloc(nb * 2), D = gpu_alloc(nd * 2), Rf = gpu_alloc(nd * 2);
  CUdeviceptr S = gpu_alloc(G * 4);
  gpu_put(A, ha, na * 2), gpu_put(B, hb, nb * 2);
  gemm_args a;
  ck_assert_int_eq(gemm_grouped_args(c.rt, v, &a, A, B, D, 0, n, kk, G, S, R), CLCRT_OK);
  const clcrt_dim3 tiles = gemm_grouped_tiles(v, &a);
  ck_assert_uint_eq(tiles.x, G * gemm_cdiv(gemm_cdiv(R, v->bm), v->cm) * gemm_cdiv(n, v->bn) * v->cm);
  /* Capture one run; the counts are read by the kernel when the graph runs. STEAL's graph
   * variant is built first, so that the graph claims from the graph table rather than holding
   * the fallback clcrt launches while it builds that variant (one cluster per unit, which
   * tests/gpu_graph.c covers). */
  ck_assert_msg(clcrt_kernel_prepare(k, CLCRT_USE_GRAPH) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
  const clcrt__driver *cu = gpu_cu();
  int sizes[37];
  for (unsigned g = 0; g < G; g++) sizes[g] = 0;
  gpu_put(S, sizes, G * 4);
  CUgraph graph;
  CUgraphExec exec;
  ck_assert_int_eq(cu->cuStreamBeginCapture(clcrt_stream_cu(c.s), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  ck_assert_msg(clcrt_run(c.s, k, tiles, &a, sizeof a) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
  ck_assert_int_eq(cu->cuStreamEndCapture(clcrt_stream_cu(c.s), &graph), CUDA_SUCCESS);
  ck_assert_int_eq(cu->cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  for (int rep = 0; rep < 4; rep++) {
    for (unsigned g = 0; g < G; g++)
      sizes[g] = rep == 3 ? (int)R : urand_n(5) == 0 ? 0 : urand_n(4) == 0 ? (int)(R + 1 + urand_n(100)) : (int)urand_n(R);
    gpu_put(S, sizes, G * 4);
    gpu_fill_u8(Rf, 0xff, nd * 2);
    for (unsigned g = 0; g < G; g++) {
      unsigned rows = (unsigned)sizes[g] < R ? (unsigned)sizes[g] : R;
      if (rows)
        ref_gemm(&c, A + (size_t)g * R * kk * 2, B + (size_t)g * n * kk * 2, Rf + (size_t)g * R * n * 2, (int)rows,
                 (int)n, (int)kk, (int)n);
    }
    ck_assert_int_eq(clcrt_stream_sync(c.s), CLCRT_OK);
    gpu_get(hr, Rf, nd * 2);
    gpu_fill_u8(D, 0xff, nd * 2);
    ck_assert_int_eq(cu->cuGraphLaunch(exec, clcrt_stream_cu(c.s)), CUDA_SUCCESS);
    ck_assert_msg(clcrt_stream_sync(c.s) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
    gpu_get(hd, D, nd * 2);
    char what[128];
    snprintf(what, sizeof what, "masked %s %s, replay %d", v->name, clcrt__sched_name(sched), rep);
    for (unsigned g = 0; g < G; g++) {
      unsigned rows = (unsigned)sizes[g] < R ? (unsigned)sizes[g] : R;
      const size_t o = (size_t)g * R * n;
      compare(hd + o, hr + o, rows, n, what);
      for (size_t i = (size_t)rows * n; i < (size_t)R * n; i++)
        GPU_CHECK(hd[o + i] == 0xffff, "%s: group %u row %zu past its %u rows was written", what, g, i / n, rows);
      if (rows && g % 9 == 0) sample_fp64(hd, n, ha, hb + (size_t)g * n * kk, (size_t)g * R, 0, rows, n, kk, what);
    }
  }
  cu->cuGraphExecDestroy(exec);
  cu->cuGraphDestroy(graph);
  gpu_free(A), gpu_free(B), gpu_free(D), gpu_free(Rf), gpu_free(S);
  free(ha), free(hb), free(hd), free(hr);
  ctx_close(&c);
}
END_TEST

/* ---- the measured mode ---- */

/* Times a plan on the test's operands with CUDA events: 2 runs to warm up, the median of 5. */
typedef struct gpu_timer {
  clcrt_runtime *rt;
  clcrt_stream *s;
  CUdeviceptr A, B, D;
  unsigned m, n, k, calls;
} gpu_timer;

static double gpu_time(void *user, const gemm_plan *p) {
  gpu_timer *t = user;
  t->calls++;
  const gemm_variant *v = gemm_variant_at(p->variant);
  clcrt_kernel *k = NULL;
  ck_assert_msg(gemm_register(t->rt, clcrt_gemm_source(), v, p->sched, 0, &k) == CLCRT_OK, "%s", clcrt_errmsg(t->rt));
  /* Timed runs launch the short variant, not the fallback that runs while it is built. */
  ck_assert_msg(clcrt_kernel_prepare(k, CLCRT_USE_SHORT) == CLCRT_OK, "%s", clcrt_errmsg(t->rt));
  gemm_args a;
  ck_assert_int_eq(gemm_dense_args(t->rt, p, &a, t->A, t->B, t->D, t->m, t->n, t->k, 0, 0), CLCRT_OK);
  CUdeviceptr ws = 0, ctr = 0;
  if (a.sk_units) {
    ws = gpu_alloc(gemm_ws_bytes(v, &a)), ctr = gpu_alloc(gemm_ctr_bytes(v, &a));
    gpu_fill_u8(ctr, 0, gemm_ctr_bytes(v, &a));
    a.ws = ws, a.ctr = ctr;
  }
  const clcrt__driver *cu = gpu_cu();
  CUevent e0, e1;
  ck_assert_int_eq(cu->cuEventCreate(&e0, 0), CUDA_SUCCESS);
  ck_assert_int_eq(cu->cuEventCreate(&e1, 0), CUDA_SUCCESS);
  float ms[5];
  for (int r = 0; r < 7; r++) {
    ck_assert_int_eq(cu->cuEventRecord(e0, clcrt_stream_cu(t->s)), CUDA_SUCCESS);
    ck_assert_int_eq(clcrt_run(t->s, k, gemm_dense_tiles(v, &a), &a, sizeof a), CLCRT_OK);
    ck_assert_int_eq(cu->cuEventRecord(e1, clcrt_stream_cu(t->s)), CUDA_SUCCESS);
    ck_assert_int_eq(cu->cuEventSynchronize(e1), CUDA_SUCCESS);
    if (r >= 2) ck_assert_int_eq(cu->cuEventElapsedTime(&ms[r - 2], e0, e1), CUDA_SUCCESS);
  }
  cu->cuEventDestroy(e0), cu->cuEventDestroy(e1);
  gpu_free(ws), gpu_free(ctr);
  for (int i = 1; i < 5; i++) /* insertion sort of 5 */
    for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
      float x = ms[j];
      ms[j] = ms[j - 1], ms[j - 1] = x;
    }
  return ms[2];
}

static double no_time(void *user, const gemm_plan *p) {
  (void)p;
  ((gpu_timer *)user)->calls++;
  ck_abort_msg("a stored plan was timed again");
  return -1;
}

static clcrt_runtime *runtime_in(const char *dir) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = dir;
  clcrt_runtime *rt = NULL;
  ck_assert_msg(clcrt_runtime_create(&rt, &o) == CLCRT_OK, "runtime: %s", clcrt_errmsg(rt));
  ck_assert_int_eq(rt->cu->cuCtxSetCurrent(rt->ctx), CUDA_SUCCESS);
  return rt;
}

/* The first runtime times the candidates on its operands and stores the winner; a second
 * runtime on the same cache directory (what a second process sees) gets the same rule with no
 * timing run, in under a millisecond; both plans' outputs match cuBLAS. */
START_TEST(test_measured_mode) {
  rng = 0x3ea5u;
  char dir[] = "/tmp/clcrt-gpu-measured-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ctx c;
  ctx_open(&c); /* cuBLAS and the reference */
  const unsigned m = 300, n = 3584, kk = 4096;
  const size_t na = (size_t)m * kk, nb = (size_t)n * kk, nd = (size_t)m * n;
  uint16_t *ha = random_bf16(na), *hb = random_bf16(nb), *hd = malloc(nd * 2), *hr = malloc(nd * 2);
  ck_assert(hd && hr);
  CUdeviceptr A = gpu_alloc(na * 2), B = gpu_alloc(nb * 2), D = gpu_alloc(nd * 2), R = gpu_alloc(nd * 2);
  gpu_put(A, ha, na * 2), gpu_put(B, hb, nb * 2);
  ref_gemm(&c, A, B, R, (int)m, (int)n, (int)kk, (int)n);
  ck_assert_int_eq(clcrt_stream_sync(c.s), CLCRT_OK);
  gpu_get(hr, R, nd * 2);
  gemm_plan first;
  for (int pass = 0; pass < 2; pass++) {
    clcrt_runtime *rt = runtime_in(dir);
    gpu_timer t = {rt, NULL, A, B, D, m, n, kk, 0};
    ck_assert_int_eq(clcrt_stream_create(rt, NULL, &t.s), CLCRT_OK);
    gemm_plan p;
    unsigned timed = 0;
    int stored = 0;
    double t0 = clcrt__now_ms();
    ck_assert_int_eq(gemm_plan_measured(rt, m, n, kk, gemm_load_align(A, B, kk), rt->num_sms,
                                        pass ? no_time : gpu_time, &t, &p, &timed, &stored),
                     CLCRT_OK);
    double dt = clcrt__now_ms() - t0;
    printf("gpu_gemm: measured mode, runtime %d: %u plans timed, %s (%s, %u/%u units), %.3f ms\n", pass + 1, timed,
           stored ? "stored" : "not stored", gemm_variant_at(p.variant)->name, p.sk_tiles, p.sk_units, dt);
    if (pass == 0) {
      ck_assert_msg(timed >= 3 && stored, "%u timed, stored %d", timed, stored);
      first = p;
    } else {
      ck_assert_msg(timed == 0 && t.calls == 0 && stored, "second runtime: %u timed", timed);
      ck_assert(p.variant == first.variant && p.sched == first.sched && p.sk_tiles == first.sk_tiles &&
                p.sk_units == first.sk_units);
      if (!gpu_under_sanitizer()) ck_assert_msg(dt < 1.0, "a stored plan took %.3f ms", dt);
    }
    /* The plan's output. */
    gpu_fill_u8(D, 0xff, nd * 2);
    t.calls = 0;
    gpu_time(&t, &p);
    ck_assert_int_eq(clcrt_stream_sync(t.s), CLCRT_OK);
    gpu_get(hd, D, nd * 2);
    compare(hd, hr, m, n, "measured plan");
    clcrt_stream_destroy(t.s);
    clcrt_runtime_destroy(rt);
    ck_assert_int_eq(gpu_cu()->cuCtxSetCurrent(c.rt->ctx), CUDA_SUCCESS);
  }
  gpu_free(A), gpu_free(B), gpu_free(D), gpu_free(R);
  free(ha), free(hb), free(hd), free(hr);
  ctx_close(&c);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* B's edge (the tiles' view): the part of B that crosses it loads one box of its valid rows
 * (GEMM_B_EDGE_ROWS; Args.b_sub 1) where they round to fewer than the part, and a 2-CTA cluster's part that lies wholly past it
 * loads nothing. The rows of the ring those parts leave unloaded hold earlier k-blocks' data,
 * which must meet only D's columns past the edge: checked against cuBLAS, with B's buffer
 * holding NaN past its rows and D poisoned, in and around. */
START_TEST(test_b_edge) {
  static const struct {
    const char *v;
    int trans;
    unsigned m, n, k, sub; /* sub: Args.b_sub expected */
  } cases[] = {
      {"128x256", 0, 300, 570, 1024, 1},   /* 58 valid rows: a 64-row box for 256 */
      {"128x256", 0, 200, 868, 640, 1},    /* 100: 104 rows */
      {"128x256", 0, 260, 506, 512, 0},    /* 250: rounds to the part, whole */
      {"64x208c2", 0, 150, 456, 768, 1},   /* rank 0: 40 of 104 valid; rank 1: past the edge */
      {"64x208c2", 0, 130, 566, 768, 1},   /* rank 0 whole, rank 1: 46 valid, 48 rows */
      {"128x176c2", 0, 270, 558, 896, 1},  /* rank 0: 30 of 88 valid, 32 rows; rank 1: past the edge */
      {"128x176c2", 0, 270, 612, 896, 0},  /* rank 0: 84 of 88, whole; rank 1: past the edge */
      {"128x256", 1, 570, 300, 1024, 1},   /* transposed: the call's A is the tiles' B */
      {"64x16", 1, 3, 4096, 2048, 1},      /* a decode GEMM: 3 rows of activations, an 8-row box */
      {"64x240", 0, 100, 2 * 240 + 10, 2048, 1},
  };
  rng = 0xb0ed6eull;
  ctx c;
  ctx_open(&c);
  for (unsigned ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const unsigned m = cases[ci].m, n = cases[ci].n, kk = cases[ci].k, trans = (unsigned)cases[ci].trans;
    const int vi = gemm_variant_find(cases[ci].v);
    ck_assert_msg(vi >= 0, "no variant %s", cases[ci].v);
    const gemm_variant *v = gemm_variant_at(vi);
    const size_t na = (size_t)m * kk, nb = (size_t)n * kk, nd = (size_t)m * n, past = (size_t)256 * kk;
    uint16_t *ha = random_bf16(na), *hb = random_bf16(nb), *hd = malloc(nd * 2), *hr = malloc(nd * 2);
    ck_assert(hd && hr);
    /* Both operands with 256 rows of NaN after them (either may be the tiles' B). */
    CUdeviceptr A = gpu_alloc((na + past) * 2), B = gpu_alloc((nb + past) * 2), D0 = gpu_alloc(nd * 2 + 256),
                R = gpu_alloc(nd * 2), D = D0 + 128;
    gpu_fill_u8(A, 0xff, (na + past) * 2);
    gpu_fill_u8(B, 0xff, (nb + past) * 2);
    gpu_put(A, ha, na * 2);
    gpu_put(B, hb, nb * 2);
    gemm_plan p = gemm_plan_dense(m, n, kk, gemm_load_align(A, B, kk), c.rt->num_sms, 0);
    p.variant = vi, p.trans = trans;
    gemm_plan_share(&p, GEMM_SHARE_TAIL, trans ? n : m, trans ? m : n, kk, c.rt->num_sms, 0);
    gemm_args a;
    ck_assert_int_eq(gemm_dense_args(c.rt, &p, &a, A, B, D, m, n, kk, 0, 0), CLCRT_OK);
    char what[160];
    snprintf(what, sizeof what, "%s%s %u x %u x %u: B's edge part %u of %u rows, b_sub %u", v->name, trans ? "t" : "",
             m, n, kk, a.n % (v->bn / v->cm), v->bn / v->cm, a.b_sub);
    progress(what);
    ck_assert_msg(a.n == (trans ? m : n), "%s: the tiles' B rows", what);
    ck_assert_msg(a.b_sub == cases[ci].sub, "%s: expected b_sub %u", what, cases[ci].sub);
    CUdeviceptr ws = 0, ctr = 0;
    if (a.sk_units) {
      ws = gpu_alloc(gemm_ws_bytes(v, &a)), ctr = gpu_alloc(gemm_ctr_bytes(v, &a));
      gpu_fill_u8(ctr, 0, gemm_ctr_bytes(v, &a));
      a.ws = ws, a.ctr = ctr;
    }
    clcrt_kernel *k = NULL;
    const int kind = gemm_kind_dense(&a);
    ck_assert_msg(gemm_register_kind(c.rt, clcrt_gemm_source(), v, CLCRT_SCHED_STEAL, kind, NULL, &k) == CLCRT_OK, "%s",
                  clcrt_errmsg(c.rt));
    ref_gemm(&c, A, B, R, (int)m, (int)n, (int)kk, (int)n);
    ck_assert_int_eq(clcrt_stream_sync(c.s), CLCRT_OK);
    gpu_get(hr, R, nd * 2);
    gpu_fill_u8(D0, 0xff, nd * 2 + 256);
    ck_assert_msg(clcrt_run(c.s, k, gemm_dense_tiles(v, &a), &a, sizeof a) == CLCRT_OK, "%s: %s", what,
                  clcrt_errmsg(c.rt));
    ck_assert_msg(clcrt_stream_sync(c.s) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(c.rt));
    gpu_get(hd, D, nd * 2);
    compare(hd, hr, m, n, what);
    sample_fp64(hd, n, ha, hb, 0, 0, m, n, kk, what);
    uint16_t guard[64];
    gpu_get(guard, D0, 128);
    for (int i = 0; i < 64; i++) ck_assert_msg(guard[i] == 0xffff, "%s: wrote before D", what);
    gpu_get(guard, D + nd * 2, 128);
    for (int i = 0; i < 64; i++) ck_assert_msg(guard[i] == 0xffff, "%s: wrote after D", what);
    gpu_free(A), gpu_free(B), gpu_free(D0), gpu_free(R), gpu_free(ws), gpu_free(ctr);
    free(ha), free(hb), free(hd), free(hr);
  }
  ctx_close(&c);
}
END_TEST

static Suite *gemm_gpu_suite(void) {
  Suite *s = suite_create("gpu_gemm");
  TCase *tc = tcase_create("gemm");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_dense, 0, DENSE_VARIANTS * NUM_SCHEDS);
  tcase_add_loop_test(tc, test_streamk_determinism, 0, 2 * NUM_DETERMINISM);
  tcase_add_loop_test(tc, test_dense_trans, 0, 6);
  tcase_add_test(tc, test_dense_back_to_back);
  tcase_add_loop_test(tc, test_grouped, 0, GROUPED_VARIANTS * NUM_SCHEDS);
  tcase_add_loop_test(tc, test_grouped_masked, 0, GROUPED_VARIANTS * NUM_SCHEDS);
  tcase_add_test(tc, test_measured_mode);
  suite_add_tcase(s, tc);
  /* A case of its own, so that CK_RUN_CASE=offsets runs it alone. */
  TCase *to = tcase_create("offsets");
  tcase_set_timeout(to, 120);
  tcase_add_loop_test(to, test_dense_offsets, 0, 9);
  tcase_add_test(to, test_b_edge);
  suite_add_tcase(s, to);
  return s;
}

int main(void) {
  gpu_skip_if_absent("gpu_gemm");
  SRunner *sr = srunner_create(gemm_gpu_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
