/* A bf16 GEMM with clcrt's op library, as a user calls it: D = A . B^T with A (M x K) and B
 * (N x K) row-major, fp32 accumulation, bf16 output (torch.nn.functional.linear(A, B)).
 *
 *   gemm [M N K]        default 4096 4096 4096; K a multiple of 8
 *
 * clcrt_gemm plans the problem (variant, scheduler, whole tiles or stream-K) and runs it.
 * GEMM_VARIANT (a variant's name) and GEMM_SCHED (steal, static or fixed) override the plan's
 * choice; GEMM_MEASURED=1 asks for the measured plan (timed once per shape class on these
 * operands, kept in clcrt's store, read back by the next process).
 *
 * Prints the plan, checks 256 elements against a CPU fp64 dot product, and times 20 runs
 * with events. Device memory and events go through the runtime's driver table
 * (clcrt_runtime_driver), so the program needs no libcuda to link. Exit status: 0 right (or
 * no GPU to run on), 1 wrong or failed, 2 bad arguments. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h> /* types only: the calls go through the runtime's driver table */

#include "clcrt.h"
#include "clcrt_ops.h"

#define CHECK_CU(x)                                    \
  do {                                                 \
    CUresult r_ = (x);                                 \
    if (r_ != CUDA_SUCCESS) {                          \
      fprintf(stderr, "%s failed: %d\n", #x, (int)r_); \
      return 1;                                        \
    }                                                  \
  } while (0)
#define CHECK(x)                                                  \
  do {                                                            \
    if ((x) != CLCRT_OK) {                                        \
      fprintf(stderr, "%s failed: %s\n", #x, clcrt_errmsg(rt)); \
      return 1;                                                   \
    }                                                             \
  } while (0)

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand(void) { /* [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* bf16 <-> float (round to nearest even). */
static uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
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
  clcrt_ops *ops = NULL;
  clcrt_stream *s = NULL;
  CHECK(clcrt_ops_create(rt, &ops));
  CHECK(clcrt_stream_create(rt, NULL, &s));

  size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
  CUdeviceptr A, B, D;
  CHECK_CU(cu->cuMemAlloc(&A, na * 2));
  CHECK_CU(cu->cuMemAlloc(&B, nb * 2));
  CHECK_CU(cu->cuMemAlloc(&D, nd * 2));
  uint16_t *ha = malloc(na * 2), *hb = malloc(nb * 2), *hd = malloc(nd * 2);
  if (!ha || !hb || !hd) return 1;
  for (size_t i = 0; i < na; i++) ha[i] = f2bf(urand());
  for (size_t i = 0; i < nb; i++) hb[i] = f2bf(urand());
  CHECK_CU(cu->cuMemcpyHtoD(A, ha, na * 2));
  CHECK_CU(cu->cuMemcpyHtoD(B, hb, nb * 2));
  CHECK_CU(cu->cuMemsetD8(D, 0xff, nd * 2)); /* NaN: every element must be written */
  CHECK_CU(cu->cuStreamSynchronize(CU_STREAM_LEGACY));

  clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
  g.m = m, g.n = n, g.k = k, g.a = A, g.b = B, g.d = D; /* packed rows: lda = ldb = k, ldd = n */
  g.variant = getenv("GEMM_VARIANT");
  const char *sched = getenv("GEMM_SCHED"), *measured = getenv("GEMM_MEASURED");
  if (sched) g.sched = !strcmp(sched, "static") ? CLCRT_SCHED_STATIC : !strcmp(sched, "fixed") ? CLCRT_SCHED_FIXED
                                                                                               : CLCRT_SCHED_STEAL;
  if (measured && !strcmp(measured, "1")) g.flags |= CLCRT_GEMM_MEASURED;

  /* Compiles the kernel (or loads it from the disk cache) and the variant a short STEAL run
   * launches, so that the runs timed below are the kernel's, not a fallback's. */
  CHECK(clcrt_gemm_prepare(ops, s, &g, CLCRT_USE_SHORT));
  CHECK(clcrt_gemm(ops, s, &g)); /* the measured mode times its candidates here, once per class */
  CHECK(clcrt_stream_sync(s));
  clcrt_gemm_plan_info plan = CLCRT_GEMM_PLAN_INFO_INIT;
  CHECK(clcrt_gemm_plan_get(ops, s, &g, &plan));
  printf("plan: %s, %s, ", plan.variant, clcrt_sched_name(plan.sched));
  if (plan.splits > 1)
    printf("stream-K: %u tiles cut into %u slices each\n", plan.shared_tiles, plan.splits);
  else
    printf("whole tiles\n");
  CHECK_CU(cu->cuMemcpyDtoH(hd, D, nd * 2));
  /* 256 elements against fp64: bf16 output, so within a few bf16 ulps of the exact sum. */
  int bad = 0;
  for (int t = 0; t < 256; t++) {
    size_t i = (size_t)((urand() * 0.5f + 0.5f) * (m - 1)), j = (size_t)((urand() * 0.5f + 0.5f) * (n - 1));
    double ref = 0, mag = 0;
    for (size_t q = 0; q < k; q++) {
      double p = (double)bf2f(ha[i * k + q]) * bf2f(hb[j * k + q]);
      ref += p, mag += fabs(p);
    }
    double got = bf2f(hd[i * n + j]);
    if (!(fabs(got - ref) <= 1e-2 * fabs(ref) + 1e-3 * mag + 1e-6) && bad++ < 5)
      printf("  D[%zu][%zu] = %g, expected %g\n", i, j, got, ref);
  }
  printf("check: %s (256 elements against fp64)\n", bad ? "FAILED" : "ok");

  CUevent e0, e1;
  float ms = 0;
  CHECK_CU(cu->cuEventCreate(&e0, 0));
  CHECK_CU(cu->cuEventCreate(&e1, 0));
  CHECK_CU(cu->cuEventRecord(e0, clcrt_stream_cu(s)));
  for (int r = 0; r < 20; r++) CHECK(clcrt_gemm(ops, s, &g));
  CHECK_CU(cu->cuEventRecord(e1, clcrt_stream_cu(s)));
  CHECK_CU(cu->cuEventSynchronize(e1));
  CHECK_CU(cu->cuEventElapsedTime(&ms, e0, e1));
  printf("%u x %u x %u: %.3f ms per run, %.1f TFLOP/s\n", m, n, k, ms / 20, 2.0 * m * n * k / (ms / 20 * 1e9));

  cu->cuEventDestroy(e0), cu->cuEventDestroy(e1);
  clcrt_stream_destroy(s);
  clcrt_ops_destroy(ops);
  cu->cuMemFree(A), cu->cuMemFree(B), cu->cuMemFree(D);
  free(ha), free(hb), free(hd);
  clcrt_runtime_destroy(rt);
  return bad ? 1 : 0;
}
