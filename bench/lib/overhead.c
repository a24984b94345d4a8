/* Section "overhead": host cost of clcrt_run against a bare cuLaunchKernelEx. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "clcrt_ops.h"

extern const char *k_scale_src;

/* What a bare launch launches: the same 1-tile scale as a plain kernel with clcrt's parameter
 * layout (Args, then a 128-byte block where clcrt's kernels take their scheduler parameters),
 * so that the driver is handed the same parameter bytes, grid and block as clcrt_run hands it. */
static const char *const k_bare_src =
    "struct ScaleArgs { const float4 *x; float4 *y; unsigned long long n4; float a; };\n"
    "struct BareParams { unsigned w[32]; };\n"
    "extern \"C\" __global__ void __launch_bounds__(256) bare_scale(const __grid_constant__ ScaleArgs a,\n"
    "                                                               const __grid_constant__ BareParams p) {\n"
    "  unsigned long long i = p.w[0] * 256ull + threadIdx.x;\n"
    "  if (i < a.n4) { float4 v = a.x[i]; a.y[i] = make_float4(a.a * v.x, a.a * v.y, a.a * v.z, a.a * v.w); }\n"
    "}\n"
    /* The GEMM op's parameter bytes: its 384-byte Args (two tensor maps and the problem), then
     * the same 128-byte block. */
    "struct BigArgs { unsigned long long w[48]; };\n"
    "extern \"C\" __global__ void __launch_bounds__(256) bare_big(const __grid_constant__ BigArgs a,\n"
    "                                                             const __grid_constant__ BareParams p) {\n"
    "  if (threadIdx.x == 0 && p.w[0] == 1u) *(unsigned long long *)a.w[0] = a.w[1];\n"
    "}\n";

/* One call of contender `which` (see bench_overhead). */
typedef struct {
  clcrt_kernel *k, *kf;
  CUfunction fn;      /* the plain kernel's */
  CUfunction big;     /* the plain kernel of the GEMM op's parameter bytes */
  clcrt_ops *ops;     /* the GEMM op and a 1 x 256 x 256 problem */
  const clcrt_gemm_desc *g;
  CUkernel kern;      /* ... and its context-independent handle */
  const void *args;
  size_t args_size;
  const void *params; /* 128 bytes */
} oh_ctx;
static void one_call(const oh_ctx *o, int which) {
  if (which == 1 || which == 3) {
    if (clcrt_run(st, which == 1 ? o->k : o->kf, (clcrt_dim3){1, 1, 1}, o->args, o->args_size) != CLCRT_OK) exit(1);
    return;
  }
  if (which == 7) {
    if (clcrt_gemm(o->ops, st, o->g) != CLCRT_OK) exit(1);
    return;
  }
  if (which == 2) {
    CUcontext c;
    CUstreamCaptureStatus cst;
    CK(cu->cuCtxGetCurrent(&c));
    CK(cu->cuStreamIsCapturing(cs, &cst));
  }
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 256, cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = cs;
  CUlaunchAttribute attr;
  if (which == 5) { /* programmatic dependent launch, as clcrt_run_ex asks for it (CLCRT_RUN_PDL) */
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr, cfg.numAttrs = 1;
  }
  static const unsigned long long big[48];
  void *kp[2] = {which == 6 ? (void *)big : (void *)o->args, (void *)o->params};
  CK(cu->cuLaunchKernelEx(&cfg, which == 4 ? (CUfunction)o->kern : which == 6 ? o->big : o->fn, kp, NULL));
}

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return v[n / 2];
}

/* Host cost per call: clcrt_run against a bare cuLaunchKernelEx of an equivalent plain kernel
 * with the same configuration and parameter bytes, each timed on the CPU over batches of 200 calls (a 1-tile
 * STEAL run, synchronised between batches so the launch queue never fills), with the parts
 * of the difference measured beside it. */
void bench_overhead(void) {
  clcrt_kernel *k = reg2(k_scale_src, "scale_tile", "ScaleArgs", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, 1, "-DPER=1", NULL);
  CUdeviceptr x, y;
  CK(cu->cuMemAlloc(&x, 4096));
  CK(cu->cuMemAlloc(&y, 4096));
  struct {
    CUdeviceptr x, y;
    unsigned long long n4;
    float a;
  } args = {x, y, 256, 2.0f};
  /* The bare launches' 128-byte parameter block: zero (tile 0). */
  static const unsigned params[32];
  CUlibrary lib = compile_ref(k_bare_src, NULL, "bare");
  CUkernel kern;
  CK(cu->cuLibraryGetKernel(&kern, lib, "bare_scale"));
  clcrt_kernel *kf = reg2(k_scale_src, "scale_tile", "ScaleArgs", CLCRT_SCHED_FIXED, CLCRT_GRID_AUTO, 1, "-DPER=1", NULL);
  /* Contenders, timed in turn within every batch round:
   *   0 bare cuLaunchKernelEx of a plain kernel with the same parameters, grid and block (as a
   *     user launches a kernel)
   *   1 clcrt_run (STEAL: a 1-tile run claims nothing, so it launches the short variant)
   *   2 the same bare launch after the driver queries clcrt_run makes (the current context, and
   *     whether the stream is being captured): the driver's share of the difference
   *   3 clcrt_run of a FIXED kernel (no capture query, no sequence lock)
   *   4 bare launch of the plain kernel's context-independent CUkernel, which runs in the
   *     stream's context and would spare clcrt_run the context query, were it not dearer
   *   5 the bare launch with the programmatic-dependent-launch attribute, which the GEMM op
   *     asks for on short runs
   *   6 a bare launch of a plain kernel of the GEMM op's 512 parameter bytes
   *   7 clcrt_gemm of a 1 x 256 x 256 problem (the op's host path and its launch; what the
   *     Python op adds to it, python/bench/overhead.py measures) */
  enum { NC = 8 };
  static const char *const names[NC] = {"bare launch",     "clcrt_run",   "bare + queries", "clcrt_run FIXED",
                                        "bare (CUkernel)", "bare + PDL",  "bare, 512 B",    "clcrt_gemm 1x256x256"};
  clcrt_ops *ops;
  CUdeviceptr ga, gb, gd;
  if (clcrt_ops_create(rt, &ops) != CLCRT_OK) exit(1);
  CK(cu->cuMemAlloc(&ga, 256 * 2));
  CK(cu->cuMemAlloc(&gb, 256 * 256 * 2));
  CK(cu->cuMemAlloc(&gd, 256 * 2));
  CK(cu->cuMemsetD8(ga, 0x3c, 256 * 2)); /* 0x3c3c: a bf16 near 0.012, never zeros */
  CK(cu->cuMemsetD8(gb, 0x3c, 256 * 256 * 2));
  clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
  g.m = 1, g.n = 256, g.k = 256, g.a = ga, g.b = gb, g.d = gd;
  if (clcrt_gemm_prepare(ops, st, &g, CLCRT_USE_SHORT) != CLCRT_OK || clcrt_gemm(ops, st, &g) != CLCRT_OK) {
    fprintf(stderr, "overhead: clcrt_gemm: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  const int batches = 41, per = 200;
  double t[NC][41];
  oh_ctx o = {k, kf, lib_fn(lib, "bare_scale"), lib_fn(lib, "bare_big"), ops, &g, kern, &args, sizeof args, params};
  for (int b = 0; b < batches; b++) {
    for (int which = 0; which < NC; which++) {
      CK(cu->cuStreamSynchronize(cs));
      double t0 = bench_now_ms();
      for (int i = 0; i < per; i++) one_call(&o, which);
      t[which][b] = (bench_now_ms() - t0) * 1e3 / per;
    }
  }
  CK(cu->cuStreamSynchronize(cs));
  /* Each contender's batch is paired with the bare batch of its round: the median of those
   * differences moves less with the host's launch rate than a difference of medians. */
  double diff[NC][41], med[NC], dmed[NC];
  for (int c = NC - 1; c >= 0; c--) { /* the bare launch (0) last: the others subtract its times */
    for (int b = 0; b < batches; b++) diff[c][b] = t[c][b] - t[0][b];
    med[c] = median(t[c], batches), dmed[c] = median(diff[c], batches);
  }
  printf("\nhost overhead per launch (median of %d batches of %d calls, CPU clock; a 1-tile STEAL run, which "
         "launches the kernel's short variant; the bare launches, a plain kernel of the same parameters):\n",
         batches, per);
  for (int c = 0; c < NC; c++)
    printf("  %-22s %.3f us   median paired difference from the bare launch %+.3f us\n", names[c], med[c], dmed[c]);
  printf("  clcrt_run against a bare cuLaunchKernelEx of the same parameters: %+.3f us (difference of medians %+.3f us)\n",
         dmed[1], med[1] - med[0]);
  emit_json("\"workload\":\"host-overhead\",\"bare_launch_us\":%.4f,\"clcrt_run_us\":%.4f,\"paired_diff_us\":%.4f,"
            "\"bare_with_queries_diff_us\":%.4f,\"fixed_run_diff_us\":%.4f,\"cukernel_diff_us\":%.4f,"
            "\"pdl_diff_us\":%.4f,\"bytes512_diff_us\":%.4f,\"gemm_us\":%.4f,\"gemm_diff_us\":%.4f",
            med[0], med[1], dmed[1], dmed[2], dmed[3], dmed[4], dmed[5], dmed[6], med[7], dmed[7]);
  /* The same contenders call by call: every round makes one call of each (in an order that
   * rotates), each timed on its own, so that the host's drifts, which move whole batches, fall
   * on every contender alike; medians of the calls and of each round's difference from the
   * bare launch. */
  enum { ROUNDS = 4100, PER_SYNC = 100 };
  static double pc[NC][ROUNDS], pd[NC][ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    if (r % PER_SYNC == 0) CK(cu->cuStreamSynchronize(cs));
    for (int j = 0; j < NC; j++) {
      int c = (j + r) % NC;
      double t0 = bench_now_ms();
      one_call(&o, c);
      pc[c][r] = (bench_now_ms() - t0) * 1e3;
    }
  }
  CK(cu->cuStreamSynchronize(cs));
  double cmed[NC], cdiff[NC];
  for (int c = NC - 1; c >= 0; c--) { /* the bare launch (0) last, as above */
    for (int r = 0; r < ROUNDS; r++) pd[c][r] = pc[c][r] - pc[0][r];
    cmed[c] = median(pc[c], ROUNDS), cdiff[c] = median(pd[c], ROUNDS);
  }
  printf("  call by call (%d rounds of one call each, order rotating; CPU clock around each call):\n", ROUNDS);
  for (int c = 0; c < NC; c++)
    printf("  %-22s %.3f us   median difference from the bare launch in its round %+.3f us\n", names[c], cmed[c],
           cdiff[c]);
  emit_json("\"workload\":\"host-overhead-per-call\",\"bare_launch_us\":%.4f,\"clcrt_run_us\":%.4f,"
            "\"paired_diff_us\":%.4f,\"bare_with_queries_diff_us\":%.4f,\"fixed_run_diff_us\":%.4f,"
            "\"cukernel_diff_us\":%.4f,\"pdl_diff_us\":%.4f,\"bytes512_diff_us\":%.4f,\"gemm_us\":%.4f,"
            "\"gemm_diff_us\":%.4f",
            cmed[0], cmed[1], cdiff[1], cdiff[2], cdiff[3], cdiff[4], cdiff[5], cdiff[6], cmed[7], cdiff[7]);
  /* The driver queries alone, timed the same way (clcrt_run makes the first and the last). */
  double ctx[41], cap[41], isc[41];
  for (int b = 0; b < batches; b++) {
    double t0 = bench_now_ms();
    for (int i = 0; i < per; i++) {
      CUcontext c;
      CK(cu->cuCtxGetCurrent(&c));
    }
    double t1 = bench_now_ms();
    for (int i = 0; i < per; i++) {
      CUstreamCaptureStatus cst;
      CK(cu->cuStreamGetCaptureInfo(cs, &cst, NULL, NULL, NULL, NULL, NULL));
    }
    double t2 = bench_now_ms();
    for (int i = 0; i < per; i++) {
      CUstreamCaptureStatus cst;
      CK(cu->cuStreamIsCapturing(cs, &cst));
    }
    double t3 = bench_now_ms();
    ctx[b] = (t1 - t0) * 1e3 / per, cap[b] = (t2 - t1) * 1e3 / per, isc[b] = (t3 - t2) * 1e3 / per;
  }
  const double mctx = median(ctx, batches), mcap = median(cap, batches), misc = median(isc, batches);
  printf("  driver queries alone: cuCtxGetCurrent %.3f us, cuStreamGetCaptureInfo %.3f us, cuStreamIsCapturing %.3f us\n",
         mctx, mcap, misc);
  emit_json("\"workload\":\"host-queries\",\"ctx_get_current_us\":%.4f,\"stream_capture_info_us\":%.4f,"
            "\"stream_is_capturing_us\":%.4f",
            mctx, mcap, misc);
  CK(cu->cuStreamSynchronize(cs));
  clcrt_ops_destroy(ops);
  cu->cuMemFree(x), cu->cuMemFree(y), cu->cuMemFree(ga), cu->cuMemFree(gb), cu->cuMemFree(gd);
  cu->cuLibraryUnload(lib);
}

