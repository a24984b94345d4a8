/* GPU suite for the bf16 GEMM tile functions (examples/gemm/gemm.cu) against cuBLAS, on
 * shapes that are awkward for a 128 x 256 x 64 tile: M, N, K not multiples of the tile, K
 * smaller than one k-block, M = 1, N = 8, odd N, N even but not a multiple of 8 (no 16-byte
 * stores), split-K with uneven k-ranges, one CTA's tile
 * of a 2-CTA cluster past the edge; then the grouped GEMM on awkward group lists (empty
 * groups, groups smaller than a tile, one group, a thousand tiny groups, all empty, a token
 * buffer longer than the groups' rows). Every variant under STEAL, STATIC and FIXED.
 *
 * Every output is poisoned (NaN) before each run, checked element by element to be written
 * where it must and untouched where it must not, compared with cuBLAS (relative Frobenius
 * error at most 1e-2, a bound for bf16 outputs; NaN fails) and, on a sample, with an fp64 dot
 * product on the CPU (which also checks the cuBLAS call). Each problem runs twice on the same
 * stream: the ring state and the split-K counters carry over from run to run. */
#include <check.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../examples/gemm/gemm.h"
#include "clcrt.h"
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

typedef struct shape {
  unsigned m, n, k, splits; /* splits 0: the helper's pick */
} shape;

static const shape SHAPES[] = {
    {1, 8, 8, 0},         /* M = 1, N = 8, K < one k-block */
    {1, 4096, 512, 0},    /* one row */
    {7, 13, 40, 0},       /* odd N: 2-byte stores at the edge */
    {130, 264, 72, 0},    /* just past the tile on every side */
    {255, 511, 1000, 0},  /* K not a multiple of 64, N odd */
    {384, 512, 256, 0},   /* exact tiles; 3 m-tiles: a 2-CTA cluster's second tile is past the edge */
    {1000, 1000, 64, 0},  /* one k-block exactly */
    {128, 1024, 8192, 0}, /* split-K picked: few tiles, long K */
    {257, 520, 2048, 3},  /* split-K forced, uneven k-ranges, edge tiles */
    {64, 256, 128, 5},    /* more splits than fit: clamped to the k-blocks (2) */
    {1536, 2304, 1024, 0},
    {200, 1002, 136, 0},  /* even N, not a multiple of 8: no 16-byte stores (the 4-byte path) */
    {130, 998, 4096, 4},  /* split-K with the same: the last split writes element by element */
    {96, 4104, 512, 0},   /* N a multiple of 8 past the tile: a 16-byte group alone in its chunk */
};
#define NUM_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

static void run_dense(ctx *c, clcrt_kernel *k, const gemm_variant *v, const shape *sh, const char *tag) {
  unsigned m = sh->m, n = sh->n, kk = sh->k;
  size_t na = (size_t)m * kk, nb = (size_t)n * kk, nd = (size_t)m * n;
  uint16_t *ha = random_bf16(na), *hb = random_bf16(nb), *hd = malloc(nd * 2), *hr = malloc(nd * 2);
  ck_assert(hd && hr);
  CUdeviceptr A = gpu_alloc(na * 2), B = gpu_alloc(nb * 2), D = gpu_alloc(nd * 2), R = gpu_alloc(nd * 2);
  gpu_put(A, ha, na * 2);
  gpu_put(B, hb, nb * 2);
  unsigned splits = sh->splits ? sh->splits : gemm_pick_splits(v, m, n, kk, c->rt->num_sms);
  gemm_args a;
  ck_assert_int_eq(gemm_dense_args(c->rt, v, &a, A, B, D, m, n, kk, splits, 0, 0), CLCRT_OK);
  CUdeviceptr ws = 0, ctr = 0;
  if (a.splits > 1) {
    ws = gpu_alloc(gemm_ws_bytes(v, &a));
    ctr = gpu_alloc(gemm_ctr_bytes(v, &a));
    gpu_fill_u8(ctr, 0, gemm_ctr_bytes(v, &a));
    gpu_fill_u8(ws, 0, gemm_ws_bytes(v, &a));
    a.ws = ws, a.ctr = ctr;
  }
  char what[160];
  snprintf(what, sizeof what, "%s %u x %u x %u (%u split%s)", tag, m, n, kk, a.splits, a.splits > 1 ? "s" : "");
  progress(what);
  ref_gemm(c, A, B, R, (int)m, (int)n, (int)kk, (int)n);
  ck_assert_int_eq(clcrt_stream_sync(c->s), CLCRT_OK);
  gpu_get(hr, R, nd * 2);
  for (int rep = 0; rep < 2; rep++) {
    gpu_fill_u8(D, 0xff, nd * 2); /* NaN */
    ck_assert_msg(clcrt_run(c->s, k, gemm_dense_tiles(v, &a), &a, sizeof a) == CLCRT_OK, "%s: %s", what,
                  clcrt_errmsg(c->rt));
    ck_assert_msg(clcrt_stream_sync(c->s) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(c->rt));
    gpu_get(hd, D, nd * 2);
    compare(hd, hr, m, n, what);
    sample_fp64(hd, n, ha, hb, 0, 0, m, n, kk, what);
  }
  if (a.splits > 1) { /* the counters and the workspace are back at zero for the next run */
    unsigned *h = malloc(gemm_ctr_bytes(v, &a));
    ck_assert_ptr_nonnull(h);
    gpu_get(h, ctr, gemm_ctr_bytes(v, &a));
    for (size_t i = 0; i < gemm_ctr_bytes(v, &a) / 4; i++) GPU_CHECK(h[i] == 0, "%s: counter %zu = %u", what, i, h[i]);
    free(h);
    unsigned *w = malloc(gemm_ws_bytes(v, &a));
    ck_assert_ptr_nonnull(w);
    gpu_get(w, ws, gemm_ws_bytes(v, &a));
    for (size_t i = 0; i < gemm_ws_bytes(v, &a) / 4; i++)
      GPU_CHECK(w[i] == 0, "%s: workspace word %zu = 0x%08x", what, i, w[i]);
    free(w);
  }
  gpu_free(A), gpu_free(B), gpu_free(D), gpu_free(R), gpu_free(ws), gpu_free(ctr);
  free(ha), free(hb), free(hd), free(hr);
}

/* One test per (variant, scheduler): every shape. */
START_TEST(test_dense) {
  const gemm_variant *v = &GEMM_VARIANTS[_i / NUM_SCHEDS];
  clcrt_sched sched = SCHEDS[_i % NUM_SCHEDS];
  rng = 0x5eed0000ull + (uint64_t)_i;
  ctx c;
  ctx_open(&c);
  clcrt_kernel *k = NULL;
  ck_assert_msg(gemm_register(c.rt, v, sched, 0, &k) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
  char tag[64];
  snprintf(tag, sizeof tag, "%s %s", v->name, clcrt__sched_name(sched));
  int n = gpu_under_sanitizer() ? 6 : NUM_SHAPES;
  for (int i = 0; i < n; i++) run_dense(&c, k, v, &SHAPES[i], tag);
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
  ck_assert_msg(gemm_register(c.rt, v, CLCRT_SCHED_STEAL, 0, &k) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
  enum { N = 6 };
  const shape sh[N] = {{300, 600, 264, 0}, {1, 8, 8, 0}, {1024, 512, 512, 0}, {77, 1000, 1024, 4}, {512, 96, 64, 0},
                       {130, 264, 72, 0}};
  CUdeviceptr A[N], B[N], D[N], R[N], ws[N] = {0}, ctr[N] = {0};
  uint16_t *hd[N], *hr[N];
  gemm_args a[N];
  for (int i = 0; i < N; i++) {
    size_t na = (size_t)sh[i].m * sh[i].k, nb = (size_t)sh[i].n * sh[i].k, nd = (size_t)sh[i].m * sh[i].n;
    uint16_t *ha = random_bf16(na), *hb = random_bf16(nb);
    A[i] = gpu_alloc(na * 2), B[i] = gpu_alloc(nb * 2), D[i] = gpu_alloc(nd * 2), R[i] = gpu_alloc(nd * 2);
    gpu_put(A[i], ha, na * 2), gpu_put(B[i], hb, nb * 2);
    gpu_fill_u8(D[i], 0xff, nd * 2);
    hd[i] = malloc(nd * 2), hr[i] = malloc(nd * 2);
    ck_assert(hd[i] && hr[i]);
    ck_assert_int_eq(gemm_dense_args(c.rt, v, &a[i], A[i], B[i], D[i], sh[i].m, sh[i].n, sh[i].k,
                                     sh[i].splits ? sh[i].splits : 1, 0, 0),
                     CLCRT_OK);
    if (a[i].splits > 1) {
      ws[i] = gpu_alloc(gemm_ws_bytes(v, &a[i])), ctr[i] = gpu_alloc(gemm_ctr_bytes(v, &a[i]));
      gpu_fill_u8(ctr[i], 0, gemm_ctr_bytes(v, &a[i]));
      gpu_fill_u8(ws[i], 0, gemm_ws_bytes(v, &a[i]));
      a[i].ws = ws[i], a[i].ctr = ctr[i];
    }
    ref_gemm(&c, A[i], B[i], R[i], (int)sh[i].m, (int)sh[i].n, (int)sh[i].k, (int)sh[i].n);
    free(ha), free(hb);
  }
  for (int rep = 0; rep < 3; rep++)
    for (int i = 0; i < N; i++)
      ck_assert_msg(clcrt_run(c.s, k, gemm_dense_tiles(v, &a[i]), &a[i], sizeof a[i]) == CLCRT_OK, "%s",
                    clcrt_errmsg(c.rt));
  ck_assert_msg(clcrt_stream_sync(c.s) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
  for (int i = 0; i < N; i++) {
    size_t nd = (size_t)sh[i].m * sh[i].n;
    gpu_get(hd[i], D[i], nd * 2), gpu_get(hr[i], R[i], nd * 2);
    char what[96];
    snprintf(what, sizeof what, "back to back #%d %u x %u x %u", i, sh[i].m, sh[i].n, sh[i].k);
    compare(hd[i], hr[i], sh[i].m, sh[i].n, what);
    gpu_free(A[i]), gpu_free(B[i]), gpu_free(D[i]), gpu_free(R[i]), gpu_free(ws[i]), gpu_free(ctr[i]);
    free(hd[i]), free(hr[i]);
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
      g->name = "a thousand tiny groups";
      g->groups = 1000;
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
  ck_assert_int_eq(gemm_grouped_args(c->rt, v, &a, A, B, D, total, n, kk, g->groups, S), CLCRT_OK);
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
  ck_assert_msg(gemm_register(c.rt, v, sched, 1, &k) == CLCRT_OK, "%s", clcrt_errmsg(c.rt));
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

static Suite *gemm_gpu_suite(void) {
  Suite *s = suite_create("gpu_gemm");
  TCase *tc = tcase_create("gemm");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_dense, 0, DENSE_VARIANTS * NUM_SCHEDS);
  tcase_add_test(tc, test_dense_back_to_back);
  tcase_add_loop_test(tc, test_grouped, 0, GROUPED_VARIANTS * NUM_SCHEDS);
  suite_add_tcase(s, tc);
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
