/* A bf16 GEMM through clcrt, as a user writes it: D = A . B^T with A (M x K) and B (N x K)
 * row-major, fp32 accumulation, bf16 output. The tile function is examples/gemm/gemm.cu
 * (embedded into this program); examples/gemm/gemm.h builds its tensor maps and Args.
 *
 *   gemm [M N K]        default 4096 4096 4096; K a multiple of 8
 *
 * The plan (gemm_plan_dense in gemm_plan.h) picks the variant, the scheduler and the
 * decomposition (whole tiles, or stream-K); GEMM_VARIANT (a name from GEMM_VARIANTS) and
 * GEMM_SCHED (steal, static or fixed) override its variant and scheduler. GEMM_MEASURED=1
 * uses the measured mode instead (gemm_measure.h): the first run of a shape class times the
 * candidate plans on these operands and keeps the fastest in clcrt's store (the disk cache
 * directory); the next process reads it back and times nothing.
 *
 * Prints the kernel's resources and compile time, checks 256 elements against a CPU fp64
 * dot product, and times 20 runs with events. Device memory and events go through the
 * runtime's driver table (clcrt_runtime_driver), like examples/demo.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h> /* types only: the calls go through the runtime's driver table */

#include "clcrt.h"
#include "gemm.h"

/* The driver's name for an error, e.g. "CUDA_ERROR_OUT_OF_MEMORY". */
static const char *cu_name(const clcrt_runtime *rt, CUresult r) {
  const clcrt_driver *cu = clcrt_runtime_driver(rt);
  const char *s = NULL;
  return cu && cu->cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "an unknown CUDA error";
}

#define CHECK_CU(x)                                                                          \
  do {                                                                                       \
    CUresult r_ = (x);                                                                       \
    if (r_ != CUDA_SUCCESS) {                                                                \
      fprintf(stderr, "%s failed: %s\n", #x, cu_name(rt, r_));                              \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)
#define CHECK(x)                                                  \
  do {                                                            \
    if ((x) != CLCRT_OK) {                                        \
      fprintf(stderr, "%s failed: %s\n", #x, clcrt_errmsg(rt)); \
      return 1;                                                   \
    }                                                             \
  } while (0)

/* Wall-clock milliseconds, for the measured mode's first-call cost. */
static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand(void) { /* [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* The measured mode's timer: plan p on the operands, 2 runs to warm up, the median of 5, with
 * CUDA events; -1 when it cannot run (the candidate is dropped). */
typedef struct timer {
  clcrt_runtime *rt;
  clcrt_stream *s;
  CUdeviceptr A, B, D;
  unsigned m, n, k;
} timer;

static double time_plan(void *user, const gemm_plan *p) {
  timer *t = user;
  const clcrt_driver *cu = clcrt_runtime_driver(t->rt);
  const gemm_variant *v = &GEMM_VARIANTS[p->variant];
  clcrt_kernel *k = NULL;
  gemm_args a;
  /* With the short variant built now: a STEAL run whose grid claims nothing launches it, and
   * clcrt would otherwise time its fallback while it builds that variant in the background. */
  if (gemm_register(t->rt, v, p->sched, 0, &k) != CLCRT_OK || clcrt_kernel_prepare(k, CLCRT_USE_SHORT) != CLCRT_OK ||
      gemm_dense_args(t->rt, p, &a, t->A, t->B, t->D, t->m, t->n, t->k, 0, 0) != CLCRT_OK)
    return -1;
  CUdeviceptr ws = 0, ctr = 0;
  CUevent e0 = NULL, e1 = NULL;
  float ms[5] = {0};
  double r = -1;
  if (a.sk_units) {
    if (cu->cuMemAlloc(&ws, gemm_ws_bytes(v, &a)) || cu->cuMemAlloc(&ctr, gemm_ctr_bytes(v, &a)) ||
        cu->cuMemsetD8(ctr, 0, gemm_ctr_bytes(v, &a)))
      goto out;
    a.ws = ws, a.ctr = ctr;
  }
  if (cu->cuEventCreate(&e0, 0) || cu->cuEventCreate(&e1, 0)) goto out;
  for (int i = 0; i < 7; i++) {
    if (cu->cuEventRecord(e0, clcrt_stream_cu(t->s)) ||
        clcrt_run(t->s, k, gemm_dense_tiles(v, &a), &a, sizeof a) != CLCRT_OK ||
        cu->cuEventRecord(e1, clcrt_stream_cu(t->s)) || cu->cuEventSynchronize(e1) ||
        (i >= 2 && cu->cuEventElapsedTime(&ms[i - 2], e0, e1)))
      goto out;
  }
  for (int i = 1; i < 5; i++)
    for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
      float x = ms[j];
      ms[j] = ms[j - 1], ms[j - 1] = x;
    }
  r = ms[2];
out:
  if (e0) cu->cuEventDestroy(e0);
  if (e1) cu->cuEventDestroy(e1);
  if (ws) cu->cuMemFree(ws);
  if (ctr) cu->cuMemFree(ctr);
  return r;
}

int main(int argc, char **argv) {
  unsigned m = 4096, n = 4096, k = 4096;
  if (argc == 4) m = (unsigned)atoi(argv[1]), n = (unsigned)atoi(argv[2]), k = (unsigned)atoi(argv[3]);
  if (m == 0 || n == 0 || k == 0 || k % 8) {
    fprintf(stderr, "usage: gemm [M N K] (K a multiple of 8)\n");
    return 2;
  }
  clcrt_runtime *rt = NULL;
  if (clcrt_runtime_create(&rt, NULL) != CLCRT_OK) {
    printf("gemm: no GPU: %s\n", clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
    return 0;
  }
  const clcrt_driver *cu = clcrt_runtime_driver(rt);
  CHECK_CU(cu->cuCtxSetCurrent(clcrt_runtime_context(rt)));

  size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
  CUdeviceptr A, B, D, ws = 0, ctr = 0;
  CHECK_CU(cu->cuMemAlloc(&A, na * 2));
  CHECK_CU(cu->cuMemAlloc(&B, nb * 2));
  CHECK_CU(cu->cuMemAlloc(&D, nd * 2));

  uint16_t *ha = malloc(na * 2), *hb = malloc(nb * 2), *hd = malloc(nd * 2);
  if (!ha || !hb || !hd) return 1;
  for (size_t i = 0; i < na; i++) ha[i] = gemm_f2bf(urand());
  for (size_t i = 0; i < nb; i++) hb[i] = gemm_f2bf(urand());
  CHECK_CU(cu->cuMemcpyHtoD(A, ha, na * 2));
  CHECK_CU(cu->cuStreamSynchronize(CU_STREAM_LEGACY)); /* the copy has landed */
  CHECK_CU(cu->cuMemcpyHtoD(B, hb, nb * 2));
  CHECK_CU(cu->cuStreamSynchronize(CU_STREAM_LEGACY)); /* the copy has landed */

  gemm_plan plan = gemm_plan_dense(m, n, k, gemm_load_align(A, B, k), clcrt_runtime_num_sms(rt));
  const char *measured = getenv("GEMM_MEASURED");
  if (measured && !strcmp(measured, "1")) {
    timer t = {rt, NULL, A, B, D, m, n, k};
    CHECK(clcrt_stream_create(rt, NULL, &t.s));
    unsigned timed = 0;
    int stored = 0;
    double t0 = now_ms();
    CHECK(gemm_plan_measured(rt, m, n, k, gemm_load_align(A, B, k), clcrt_runtime_num_sms(rt), time_plan, &t,
                             &plan, &timed, &stored));
    printf("measured mode: %u plans timed, %.3f ms in all, the winner %s the store\n", timed,
           now_ms() - t0, timed ? (stored ? "kept in" : "not kept in") : "read from");
    clcrt_stream_destroy(t.s);
  }
  const char *want = getenv("GEMM_VARIANT"), *sname = getenv("GEMM_SCHED");
  if (want) {
    int vi = -1;
    for (int i = 0; i < GEMM_NUM_VARIANTS; i++)
      if (!strcmp(GEMM_VARIANTS[i].name, want)) vi = i;
    if (vi < 0) {
      fprintf(stderr, "gemm: no variant %s\n", want);
      return 2;
    }
    /* The same decomposition rule for the variant asked for. */
    plan.variant = vi;
    gemm_plan_share(&plan, GEMM_SHARE_TAIL, m, n, k, clcrt_runtime_num_sms(rt));
  }
  if (sname && !strcmp(sname, "steal")) plan.sched = CLCRT_SCHED_STEAL;
  if (sname && !strcmp(sname, "static")) plan.sched = CLCRT_SCHED_STATIC;
  if (sname && !strcmp(sname, "fixed")) plan.sched = CLCRT_SCHED_FIXED;
  const gemm_variant *v = &GEMM_VARIANTS[plan.variant];
  printf("plan: %s, %s, ", v->name,
         plan.sched == CLCRT_SCHED_STATIC ? "static" : plan.sched == CLCRT_SCHED_FIXED ? "fixed" : "steal");
  if (plan.sk_units)
    printf("stream-K: %u tiles cut into %u slices each (%u units)\n", plan.sk_tiles, plan.sk_units / plan.sk_tiles,
           plan.sk_units);
  else
    printf("whole tiles\n");
  clcrt_kernel *kern = NULL;
  CHECK(gemm_register(rt, v, plan.sched, 0, &kern));
  /* The variant a STEAL run whose grid claims nothing launches, built before the runs are
   * timed (clcrt builds it in the background otherwise, and runs a fallback meanwhile). */
  CHECK(clcrt_kernel_prepare(kern, CLCRT_USE_SHORT));
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  CHECK(clcrt_kernel_info_get(kern, &info));
  printf("%s (%s): %d registers, %d bytes stack, %u + %u bytes shared memory, compiled in %.0f ms%s\n", info.name,
         v->name, info.registers, info.stack_bytes, info.static_smem, info.dynamic_smem, info.compile_ms,
         info.from_cache ? " (from the cache)" : "");

  CHECK_CU(cu->cuMemsetD8(D, 0xff, nd * 2)); /* NaN: every element must be written */

  gemm_args a;
  CHECK(gemm_dense_args(rt, &plan, &a, A, B, D, m, n, k, 0, 0));
  if (a.sk_units) { /* stream-K's workspace: partials, and counters zeroed once */
    CHECK_CU(cu->cuMemAlloc(&ws, gemm_ws_bytes(v, &a)));
    CHECK_CU(cu->cuMemAlloc(&ctr, gemm_ctr_bytes(v, &a)));
    CHECK_CU(cu->cuMemsetD8(ctr, 0, gemm_ctr_bytes(v, &a)));
    a.ws = ws, a.ctr = ctr;
  }
  clcrt_stream *s = NULL;
  CHECK(clcrt_stream_create(rt, NULL, &s));
  clcrt_dim3 tiles = gemm_dense_tiles(v, &a);
  CHECK(clcrt_run(s, kern, tiles, &a, sizeof a));
  CHECK(clcrt_stream_sync(s));
  CHECK_CU(cu->cuMemcpyDtoH(hd, D, nd * 2));

  /* 256 elements against fp64: bf16 output, so within a few bf16 ulps of the exact sum. */
  int bad = 0;
  for (int t = 0; t < 256; t++) {
    size_t i = (size_t)((urand() * 0.5f + 0.5f) * (m - 1)), j = (size_t)((urand() * 0.5f + 0.5f) * (n - 1));
    double ref = 0, mag = 0;
    for (size_t q = 0; q < k; q++) {
      double p = (double)gemm_bf2f(ha[i * k + q]) * gemm_bf2f(hb[j * k + q]);
      ref += p;
      mag += fabs(p);
    }
    double got = gemm_bf2f(hd[i * n + j]);
    if (!(fabs(got - ref) <= 1e-2 * fabs(ref) + 1e-3 * mag + 1e-6)) {
      if (bad++ < 5) printf("  D[%zu][%zu] = %g, expected %g\n", i, j, got, ref);
    }
  }
  printf("check: %s (256 elements against fp64)\n", bad ? "FAILED" : "ok");

  CUevent e0, e1;
  CHECK_CU(cu->cuEventCreate(&e0, 0));
  CHECK_CU(cu->cuEventCreate(&e1, 0));
  CHECK_CU(cu->cuEventRecord(e0, clcrt_stream_cu(s)));
  for (int r = 0; r < 20; r++) CHECK(clcrt_run(s, kern, tiles, &a, sizeof a));
  CHECK_CU(cu->cuEventRecord(e1, clcrt_stream_cu(s)));
  CHECK_CU(cu->cuEventSynchronize(e1));
  float ms = 0;
  CHECK_CU(cu->cuEventElapsedTime(&ms, e0, e1));
  printf("%u x %u x %u: %.3f ms per run, %.1f TFLOP/s\n", m, n, k, ms / 20, 2.0 * m * n * k / (ms / 20 * 1e9));

  cu->cuEventDestroy(e0), cu->cuEventDestroy(e1);
  clcrt_stream_destroy(s);
  cu->cuMemFree(A), cu->cuMemFree(B), cu->cuMemFree(D);
  if (ws) cu->cuMemFree(ws), cu->cuMemFree(ctr);
  free(ha), free(hb), free(hd);
  clcrt_runtime_destroy(rt);
  return bad ? 1 : 0;
}
