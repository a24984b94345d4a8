/* Section "overhead": host cost of clcrt_run against a bare cuLaunchKernelEx. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

extern const char *k_scale_src;

/* One call of contender `which` (see bench_overhead). */
typedef struct {
  clcrt_kernel *k, *kf;
  const clcrt_kernel *kv;
  const void *args;
  size_t args_size;
  clcrt__params *p;
} oh_ctx;
static void one_call(const oh_ctx *o, int which) {
  if (which == 1 || which == 3) {
    if (clcrt_run(st, which == 1 ? o->k : o->kf, (clcrt_dim3){1, 1, 1}, o->args, o->args_size) != CLCRT_OK) exit(1);
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
  void *kp[2] = {(void *)o->args, o->p};
  CK(cu->cuLaunchKernelEx(&cfg, which == 4 ? o->k->fn : which == 5 ? (CUfunction)o->kv->kern : o->kv->fn, kp, NULL));
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
/* The median of v[0..n) (sorts v). */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

/* Host cost per call: clcrt_run against a bare cuLaunchKernelEx of the same CUfunction
 * with the same configuration, each timed on the CPU over batches of 200 calls (a 1-tile
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
  /* The parameters of the same 1-tile STEAL run, on the stream's own claim sets: a launch
   * equivalent to clcrt_run's without the library around it. */
  clcrt__params p;
  memset(&p, 0, sizeof p);
  p.tiles[0] = p.tiles[1] = p.tiles[2] = 1;
  p.units[0] = p.units[1] = p.units[2] = 1;
  p.num_units = p.num_clusters = 1;
  p.active = 1, p.chunk_cycles = 8000;
  /* The one cluster's unit is its own (a persistent grid): the run claims nothing, so clcrt_run
   * launches it without the scheduler's response ring, and so does this bare launch. */
  p.claim_base = 1;
  CUdeviceptr counter;
  CK(cu->cuMemAlloc(&counter, 8192));
  static const unsigned char zeros[8192];
  bench_put(counter, zeros, sizeof zeros);
  p.state = counter;
  /* The function clcrt_run launches for this run: it claims nothing, so the short variant. */
  const clcrt_kernel *kv = NULL;
  if (clcrt_kernel_variant(k, CLCRT_USE_SHORT, &kv) != CLCRT_OK) {
    fprintf(stderr, "bench: short variant: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  clcrt_kernel *kf = reg2(k_scale_src, "scale_tile", "ScaleArgs", CLCRT_SCHED_FIXED, CLCRT_GRID_AUTO, 1, "-DPER=1", NULL);
  /* Contenders, timed in turn within every batch round:
   *   0 bare cuLaunchKernelEx of the short variant's CUfunction (as a user launches a kernel)
   *   1 clcrt_run (STEAL)
   *   2 the same bare launch after the driver queries clcrt_run makes (the current context, and
   *     whether the stream is being captured): the driver's share of the difference
   *   3 clcrt_run of a FIXED kernel (no capture query, no sequence lock)
   *   4 bare launch of the registered kernel (the function the first rounds of this section used)
   *   5 bare launch of the short variant's context-independent CUkernel, which runs in the
   *     stream's context and would spare clcrt_run the context query, were it not dearer */
  enum { NC = 6 };
  static const char *const names[NC] = {"bare launch", "clcrt_run", "bare + queries", "clcrt_run FIXED",
                                        "bare (registered fn)", "bare (CUkernel)"};
  const int batches = 41, per = 200;
  double t[NC][41];
  oh_ctx o = {k, kf, kv, &args, sizeof args, &p};
  for (int b = 0; b < batches; b++) {
    for (int which = 0; which < NC; which++) {
      CK(cu->cuStreamSynchronize(cs));
      double t0 = clcrt__now_ms();
      for (int i = 0; i < per; i++) one_call(&o, which);
      t[which][b] = (clcrt__now_ms() - t0) * 1e3 / per;
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
         "launches the kernel's short variant):\n",
         batches, per);
  for (int c = 0; c < NC; c++)
    printf("  %-22s %.3f us   median paired difference from the bare launch %+.3f us\n", names[c], med[c], dmed[c]);
  printf("  clcrt_run against a bare cuLaunchKernelEx of the same kernel (its CUfunction): %+.3f us (difference of medians %+.3f us)\n",
         dmed[1], med[1] - med[0]);
  emit_json("\"workload\":\"host-overhead\",\"bare_launch_us\":%.4f,\"clcrt_run_us\":%.4f,\"paired_diff_us\":%.4f,"
            "\"bare_with_queries_diff_us\":%.4f,\"fixed_run_diff_us\":%.4f,\"registered_fn_diff_us\":%.4f,"
            "\"cukernel_diff_us\":%.4f",
            med[0], med[1], dmed[1], dmed[2], dmed[3], dmed[4], dmed[5]);
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
      double t0 = clcrt__now_ms();
      one_call(&o, c);
      pc[c][r] = (clcrt__now_ms() - t0) * 1e3;
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
            "\"registered_fn_diff_us\":%.4f,\"cukernel_diff_us\":%.4f",
            cmed[0], cmed[1], cdiff[1], cdiff[2], cdiff[3], cdiff[4], cdiff[5]);
  /* The driver queries alone, timed the same way (clcrt_run makes the first and the last). */
  double ctx[41], cap[41], isc[41];
  for (int b = 0; b < batches; b++) {
    double t0 = clcrt__now_ms();
    for (int i = 0; i < per; i++) {
      CUcontext c;
      CK(cu->cuCtxGetCurrent(&c));
    }
    double t1 = clcrt__now_ms();
    for (int i = 0; i < per; i++) {
      CUstreamCaptureStatus cst;
      CK(cu->cuStreamGetCaptureInfo(cs, &cst, NULL, NULL, NULL, NULL, NULL));
    }
    double t2 = clcrt__now_ms();
    for (int i = 0; i < per; i++) {
      CUstreamCaptureStatus cst;
      CK(cu->cuStreamIsCapturing(cs, &cst));
    }
    double t3 = clcrt__now_ms();
    ctx[b] = (t1 - t0) * 1e3 / per, cap[b] = (t2 - t1) * 1e3 / per, isc[b] = (t3 - t2) * 1e3 / per;
  }
  const double mctx = median(ctx, batches), mcap = median(cap, batches), misc = median(isc, batches);
  printf("  driver queries alone: cuCtxGetCurrent %.3f us, cuStreamGetCaptureInfo %.3f us, cuStreamIsCapturing %.3f us\n",
         mctx, mcap, misc);
  emit_json("\"workload\":\"host-queries\",\"ctx_get_current_us\":%.4f,\"stream_capture_info_us\":%.4f,"
            "\"stream_is_capturing_us\":%.4f",
            mctx, mcap, misc);
  cu->cuMemFree(x), cu->cuMemFree(y), cu->cuMemFree(counter);
}

