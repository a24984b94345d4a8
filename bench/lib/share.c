/* Section "share": sharing the GPU (SM budgets and yielding), in three parts.
 *
 * scaling  uniform compute tiles (the work section's, 1000 FMAs per thread) on a stream with an
 *          SM budget of N SMs (16, 64, 120) against the whole device: the throughput as a
 *          fraction of N/132 of the whole device's, per scheduler.
 * grid     whether the right-sized grid matters: on a budget of N SMs (16, 64), each workload
 *          with the persistent grid sized for the partition (clcrt's default) and for the whole
 *          device (opts.grid_sms = the device's SMs: today's grid, oversubscribed N/132 times
 *          less), on unequal tiles (skew, lognormal), clusters (skew with 2-CTA clusters) and a
 *          prologue kernel (the classes section's 32 KiB table). STEAL on an explicit persistent
 *          grid (AUTO would run the compute tiles one cluster per unit, where no grid is sized)
 *          and STATIC; ratio = time on the device's grid / time on the partition's.
 * overlap  a clcrt GEMM (ops/gemm.cu, the default variant 128x256, 8192^3, bf16; AUTO: STEAL)
 *          and a communication-like kernel (a bandwidth-bound copy on COMM_CTAS CTAs, sized to
 *          take about as long as the GEMM alone) on two streams, enqueued back to back (the
 *          GEMM first; the copy's stream waits for the GEMM's start event, so both start
 *          together), each mode timed from the GEMM's start to the later end:
 *            serial        the GEMM, then the copy, on one stream;
 *            concurrent    two streams of the same (lowest) priority, no budget;
 *            priority      the copy on a stream of the highest priority that clcrt does not
 *                          know, so the GEMM's grid stays persistent (priorities alone);
 *            budget N      the GEMM on a budget of N SMs, the copy on the rest of the same
 *                          split (CLCRT_STREAM_SM_REST), for several N;
 *            yield         the copy on a clcrt stream of the highest priority between
 *                          clcrt_preempt_begin and _end: STEAL's reserve grid gives SMs to the
 *                          copy while it runs and takes them back after;
 *          against the sum of the two alone (what serial costs) and the ideal (the longer of
 *          the two alone). Then the same modes with the copy enqueued a third of the GEMM's
 *          time after the GEMM started (communication that arrives during the GEMM: a fixed
 *          budget leaves its SMs idle before and after), against its own ideal.
 * Every output is checked: the GEMM's against fp64 dot products on a sample (and for NaN
 * everywhere: it is poisoned first), the copy's on a sample, the tiles' as in their sections. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "gemm_internal.h" /* the op's internals: variants, plan, Args */
#include "clcrt_ops.h"
#include "bench.h"

/* The copy's CTAs each ask for COMM_SMEM bytes of dynamic shared memory they do not use, so
 * that one CTA fits per SM and none beside a GEMM CTA: as a collective's channels each hold an
 * SM of their own. Without it (the first H100 run of this section, 2026-11-25), a copy
 * launched while the GEMM held every SM started on the first SMs the GEMM freed, four CTAs to
 * an SM, and took 6.4 ms on 8 SMs instead of 1.4 ms on 32. */
enum { COMM_CTAS = 32, COMM_THREADS = 512, COMM_SMEM = 120 << 10, SHARE_REPS = 11 };

static const char *k_comm_src =
    "extern \"C\" __global__ void __launch_bounds__(512) comm_copy(const float4 *__restrict__ src, "
    "float4 *__restrict__ dst, unsigned long long n4) {\n"
    "  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "  for (; i + 3 * stride < n4; i += 4 * stride) {\n"
    "    float4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];\n"
    "    dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;\n"
    "  }\n"
    "  for (; i < n4; i += stride) dst[i] = src[i];\n"
    "}\n";

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A clcrt stream with these options, or NULL (and why, printed) when refused. */
static clcrt_stream *share_stream(unsigned budget, unsigned flags, unsigned prio, unsigned grid_sms) {
  clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
  o.sm_budget = budget, o.flags = flags, o.priority = prio, o.grid_sms = grid_sms;
  clcrt_stream *s = NULL;
  if (clcrt_stream_create_ex(rt, &o, &s) != CLCRT_OK) {
    printf("  share     (a stream with a budget of %u SMs, flags %u: %s)\n", budget, flags, clcrt_errmsg(rt));
    return NULL;
  }
  return s;
}

/* Median of REPS launches on s after WARMUP, events on s's own CUstream (time_median's are on cs). */
static double time_on(clcrt_stream *s, launch_fn f, void *ctx) {
  CUstream c = clcrt_stream_cu(s);
  CUevent e0, e1;
  CK(cu->cuEventCreate(&e0, 0));
  CK(cu->cuEventCreate(&e1, 0));
  for (int i = 0; i < WARMUP; i++) f(ctx);
  double ms[REPS];
  for (int i = 0; i < REPS; i++) {
    float m = 0;
    CK(cu->cuEventRecord(e0, c));
    f(ctx);
    CK(cu->cuEventRecord(e1, c));
    CK(cu->cuEventSynchronize(e1));
    CK(cu->cuEventElapsedTime(&m, e0, e1));
    ms[i] = m;
  }
  cu->cuEventDestroy(e0), cu->cuEventDestroy(e1);
  return median(ms, REPS);
}

/* ---- compute tiles (work.c) and the prologue table (classes.c) on a stream --------------- */

typedef struct {
  CUdeviceptr out, cost;
  unsigned long long ntiles;
} WorkArgs;
typedef struct {
  CUdeviceptr x, y;
  unsigned long long n;
} TabArgs;

/* One run of lc on its stream after poisoning the output: no NaN anywhere, sampled values right. */
static void check_work(lctx *lc, const WorkArgs *a, const unsigned *cost, float *hy, const char *what) {
  clcrt_stream *s = lc->s;
  CK(cu->cuMemsetD32Async(a->out, 0x7fc00000u, a->ntiles * 256, clcrt_stream_cu(s)));
  launch_clcrt(lc);
  CK(cu->cuStreamSynchronize(clcrt_stream_cu(s)));
  CK(cu->cuMemcpyDtoH(hy, a->out, a->ntiles * 256 * 4));
  for (unsigned long long i = 0; i < a->ntiles; i++)
    for (unsigned t = 0; t < 256; t += 51)
      if (!(hy[i * 256 + t] == hy[i * 256 + t]) ||
          (i % 97 == 0 && t == 51 && hy[i * 256 + t] != work_value(i, t, cost[i]))) {
        fprintf(stderr, "share: %s wrong at tile %llu\n", what, i);
        exit(1);
      }
}
static void check_table(lctx *lc, const TabArgs *a, const float *hx, float *hy, const char *what) {
  clcrt_stream *s = lc->s;
  CK(cu->cuMemsetD32Async(a->y, 0x7fc00000u, a->n, clcrt_stream_cu(s)));
  launch_clcrt(lc);
  CK(cu->cuStreamSynchronize(clcrt_stream_cu(s)));
  CK(cu->cuMemcpyDtoH(hy, a->y, a->n * 4));
  for (unsigned long long i = 0; i < a->n; i += 1 + i % 13) {
    float want = hx[i] * table_value((unsigned)(i * 2654435761u) & 8191u);
    if (!(fabsf(hy[i] - want) <= 2e-3f * (1.f + fabsf(want)))) {
      fprintf(stderr, "share: %s wrong at %llu: %g, want %g\n", what, i, hy[i], want);
      exit(1);
    }
  }
}

static void share_scaling(void) {
  const unsigned long long n = quick ? 4000 : 20000;
  unsigned *hc = make_costs(UNIFORM, n, 1000);
  WorkArgs a = {0, 0, n};
  CK(cu->cuMemAlloc(&a.out, n * 256 * 4));
  CK(cu->cuMemAlloc(&a.cost, n * 4));
  bench_put(a.cost, hc, n * 4);
  float *hy = malloc(n * 256 * 4);
  printf("\nshare scaling: uniform compute tiles (%llu x 256 threads x 1000 FMAs) on a budget of N SMs against the "
         "whole device; throughput = (whole-device time / time on N SMs) / (N / %d)\n",
         n, clcrt_runtime_num_sms(rt));
  static const unsigned budgets[] = {16, 64, 120};
  clcrt_stream *bs[3];
  for (int b = 0; b < 3; b++) bs[b] = share_stream(budgets[b], CLCRT_STREAM_SM_ROUND_DOWN, 0, 0);
  static const struct {
    const char *name;
    clcrt_sched sched;
    clcrt_grid grid;
  } ks[] = {{"steal", CLCRT_SCHED_AUTO, CLCRT_GRID_AUTO},
            {"steal-persist", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT},
            {"static", CLCRT_SCHED_STATIC, CLCRT_GRID_AUTO},
            {"fixed", CLCRT_SCHED_FIXED, CLCRT_GRID_AUTO}};
  for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
    lctx lc = {.k = reg2(k_work_tile, "work_tile", "WorkArgs", ks[ki].sched, ks[ki].grid, 1, NULL, NULL),
               .args = &a,
               .args_size = sizeof a,
               .ntiles = n,
               .s = st};
    check_work(&lc, &a, hc, hy, ks[ki].name);
    double whole = time_on(st, launch_clcrt, &lc);
    for (int b = 0; b < 3; b++) {
      if (!bs[b]) continue;
      lc.s = bs[b];
      check_work(&lc, &a, hc, hy, ks[ki].name);
      double t = time_on(bs[b], launch_clcrt, &lc);
      int sms = clcrt_stream_sms(bs[b]);
      double thr = whole / t / ((double)sms / clcrt_runtime_num_sms(rt));
      printf("  share     scaling  uniform  c1 %-14s %3d SMs %9.4f ms  whole device %9.4f ms  throughput %.3fx of "
             "%d/%d\n",
             ks[ki].name, sms, t, whole, thr, sms, clcrt_runtime_num_sms(rt));
      emit_json("\"workload\":\"share-scaling\",\"class\":\"uniform\",\"contender\":\"%s\",\"sms\":%d,\"median_ms\":%.5f,"
                "\"whole_ms\":%.5f,\"throughput_vs_share\":%.4f",
                ks[ki].name, sms, t, whole, thr);
    }
  }
  for (int b = 0; b < 3; b++) clcrt_stream_destroy(bs[b]);
  cu->cuMemFree(a.out), cu->cuMemFree(a.cost);
  free(hy), free(hc);
}

/* One workload on a budget, grid by partition and by device; prints and records the pair. */
static void grid_pair(const char *workload, unsigned cl, const char *who, lctx *lc, clcrt_stream *part,
                      clcrt_stream *dev, void (*check)(lctx *, const void *), const void *cctx) {
  lc->s = part;
  check(lc, cctx);
  double tp = time_on(part, launch_clcrt, lc);
  lc->s = dev;
  check(lc, cctx);
  double td = time_on(dev, launch_clcrt, lc);
  int sms = clcrt_stream_sms(part);
  printf("  share     grid     %-9s c%u %-14s %3d SMs: grid for the partition %9.4f ms, for the whole device "
         "%9.4f ms: %.3fx\n",
         workload, cl, who, sms, tp, td, td / tp);
  emit_json("\"workload\":\"share-grid\",\"class\":\"%s\",\"cluster\":%u,\"contender\":\"%s\",\"sms\":%d,"
            "\"partition_grid_ms\":%.5f,\"device_grid_ms\":%.5f",
            workload, cl, who, sms, tp, td);
}

typedef struct {
  const WorkArgs *a;
  const unsigned *cost;
  float *hy;
} work_check_ctx;
static void work_check(lctx *lc, const void *p) {
  const work_check_ctx *c = p;
  check_work(lc, c->a, c->cost, c->hy, "grid");
}
typedef struct {
  const TabArgs *a;
  const float *hx;
  float *hy;
} tab_check_ctx;
static void tab_check(lctx *lc, const void *p) {
  const tab_check_ctx *c = p;
  check_table(lc, c->a, c->hx, c->hy, "grid, prologue");
}

static void share_grid(void) {
  const unsigned long long n = quick ? 4000 : 20000, ntab = quick ? 4096 : 16384, nel = ntab * 4096;
  printf("\nshare grid: on a budget of N SMs, the persistent grid sized for the partition (default) against one "
         "sized for the whole device (grid_sms %d: the grid before budgets); ratio = whole-device grid's time / "
         "partition grid's (above 1: the right size is faster)\n",
         clcrt_runtime_num_sms(rt));
  WorkArgs a = {0, 0, n};
  CK(cu->cuMemAlloc(&a.out, n * 256 * 4));
  CK(cu->cuMemAlloc(&a.cost, n * 4));
  float *hy = malloc(n * 256 * 4 > nel * 4 ? n * 256 * 4 : nel * 4);
  TabArgs ta = {0, 0, nel};
  CK(cu->cuMemAlloc(&ta.x, nel * 4));
  CK(cu->cuMemAlloc(&ta.y, nel * 4));
  float *hx = malloc(nel * 4);
  unsigned long long seed = 17;
  for (unsigned long long i = 0; i < nel; i++) hx[i] = (float)bench_urand(&seed);
  bench_put(ta.x, hx, nel * 4);
  static const unsigned budgets[] = {16, 64};
  for (int b = 0; b < 2; b++) {
    clcrt_stream *part = share_stream(budgets[b], 0, 0, 0), *dev = share_stream(budgets[b], 0, 0, (unsigned)clcrt_runtime_num_sms(rt));
    if (!part || !dev) {
      clcrt_stream_destroy(part), clcrt_stream_destroy(dev);
      continue;
    }
    static const struct {
      int cls;
      unsigned cl;
    } loads[] = {{SKEW, 1}, {SKEW, 2}, {LOGNORMAL, 1}};
    for (size_t li = 0; li < sizeof loads / sizeof loads[0]; li++) {
      unsigned *hc = make_costs(loads[li].cls, n, 1000);
      bench_put(a.cost, hc, n * 4);
      work_check_ctx wc = {&a, hc, hy};
      static const struct {
        const char *name;
        clcrt_sched sched;
        clcrt_grid grid;
      } ks[] = {{"steal-persist", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT}, {"static", CLCRT_SCHED_STATIC, CLCRT_GRID_AUTO}};
      for (int ki = 0; ki < 2; ki++) {
        lctx lc = {.k = reg2(k_work_tile, "work_tile", "WorkArgs", ks[ki].sched, ks[ki].grid, loads[li].cl, NULL, NULL),
                   .args = &a,
                   .args_size = sizeof a,
                   .ntiles = n};
        grid_pair(k_class_names[loads[li].cls], loads[li].cl, ks[ki].name, &lc, part, dev, work_check, &wc);
      }
      free(hc);
    }
    tab_check_ctx tc = {&ta, hx, hy};
    static const struct {
      const char *name;
      clcrt_sched sched;
    } tk[] = {{"steal", CLCRT_SCHED_AUTO}, {"static", CLCRT_SCHED_STATIC}};
    for (int ki = 0; ki < 2; ki++) {
      clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
      d.source = k_table_tile, d.tile_fn = "table_tile", d.args_type = "TabArgs";
      d.state_type = "TabState", d.prologue_fn = "table_prologue";
      d.block = (clcrt_dim3){256, 1, 1};
      d.smem_bytes = 32768;
      d.sched = tk[ki].sched;
      lctx lc = {.k = reg_desc(&d, "table_tile"), .args = &ta, .args_size = sizeof ta, .ntiles = ntab};
      grid_pair("prologue", 1, tk[ki].name, &lc, part, dev, tab_check, &tc);
    }
    clcrt_stream_destroy(part);
    clcrt_stream_destroy(dev);
  }
  cu->cuMemFree(a.out), cu->cuMemFree(a.cost), cu->cuMemFree(ta.x), cu->cuMemFree(ta.y);
  free(hx), free(hy);
}

/* ---- overlap: a GEMM and a communication-like copy ------------------------------------ */

typedef struct ov {
  clcrt_kernel *gemm;
  gemm_args ga;
  clcrt_dim3 gt;
  CUfunction copy;
  CUdeviceptr src, dst;
  unsigned long long n4;
} ov;

static void copy_on(const ov *o, CUstream c) {
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = COMM_CTAS, cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = COMM_THREADS, cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = COMM_SMEM;
  cfg.hStream = c;
  void *kp[3] = {(void *)&o->src, (void *)&o->dst, (void *)&o->n4};
  CK(cu->cuLaunchKernelEx(&cfg, o->copy, kp, NULL));
}
static void gemm_on(ov *o, clcrt_stream *s) {
  if (clcrt_run(s, o->gemm, o->gt, &o->ga, sizeof o->ga) != CLCRT_OK) {
    fprintf(stderr, "share: GEMM: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
}

static double host_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

typedef struct times {
  double total, gemm, copy;
} times;

/* One episode: the GEMM on a, the copy on the CUstream b (on a's after the GEMM when b is a's),
 * its stream waiting for the GEMM's start; with delay_ms > 0 the copy is enqueued that long after
 * the GEMM started on the device; with urgent, the copy is bracketed by clcrt_preempt_begin/end
 * on that stream (b is its CUstream). Total: from the GEMM's start to the later end. */
static times episode(ov *o, clcrt_stream *a, CUstream b, clcrt_stream *urgent, double delay_ms) {
  CUstream ca = clcrt_stream_cu(a);
  CUevent a0, a1, b0, b1;
  CK(cu->cuEventCreate(&a0, 0));
  CK(cu->cuEventCreate(&a1, 0));
  CK(cu->cuEventCreate(&b0, 0));
  CK(cu->cuEventCreate(&b1, 0));
  CK(cu->cuStreamSynchronize(ca));
  CK(cu->cuStreamSynchronize(b));
  CK(cu->cuEventRecord(a0, ca));
  gemm_on(o, a);
  CK(cu->cuEventRecord(a1, ca));
  if (delay_ms > 0) {
    while (cu->cuEventQuery(a0) != CUDA_SUCCESS) {
    }
    double t = host_now_ms();
    while (host_now_ms() - t < delay_ms) {
    }
  }
  if (b != ca) CK(cu->cuStreamWaitEvent(b, a0, 0));
  CK(cu->cuEventRecord(b0, b));
  if (urgent && clcrt_preempt_begin(urgent) != CLCRT_OK) exit(1);
  copy_on(o, b);
  if (urgent && clcrt_preempt_end(urgent) != CLCRT_OK) exit(1);
  CK(cu->cuEventRecord(b1, b));
  CK(cu->cuEventSynchronize(a1));
  CK(cu->cuEventSynchronize(b1));
  float g = 0, c = 0, e = 0;
  CK(cu->cuEventElapsedTime(&g, a0, a1));
  CK(cu->cuEventElapsedTime(&c, b0, b1));
  CK(cu->cuEventElapsedTime(&e, a0, b1));
  cu->cuEventDestroy(a0), cu->cuEventDestroy(a1), cu->cuEventDestroy(b0), cu->cuEventDestroy(b1);
  times t = {g > e ? g : e, g, c};
  return t;
}

/* SHARE_REPS episodes after two warm-ups: the medians of each time. */
static times episodes(ov *o, clcrt_stream *a, CUstream b, clcrt_stream *urgent, double delay_ms) {
  double tt[SHARE_REPS], tg[SHARE_REPS], tc[SHARE_REPS];
  for (int i = 0; i < 2; i++) episode(o, a, b, urgent, delay_ms);
  for (int i = 0; i < SHARE_REPS; i++) {
    times t = episode(o, a, b, urgent, delay_ms);
    tt[i] = t.total, tg[i] = t.gemm, tc[i] = t.copy;
  }
  times m = {median(tt, SHARE_REPS), median(tg, SHARE_REPS), median(tc, SHARE_REPS)};
  return m;
}

/* The GEMM's output against fp64 dot products on a sample, and no NaN anywhere; the copy's
 * destination against its source on a sample. Both were poisoned before the mode ran. */
typedef struct ref {
  const uint16_t *ha, *hb;
  unsigned m, n, k;
  uint16_t *hd;
  float *hs; /* the copy's source repeats these 2^20 words */
  size_t nsample;
} ref;
/* On cs, waited for: a memset on the legacy stream would not be ordered before the runs on
 * the non-blocking streams of the modes. */
static void poison(ov *o) {
  CK(cu->cuMemsetD8Async(o->ga.d, 0xff, (size_t)o->ga.m * o->ga.n * 2, cs));
  CK(cu->cuMemsetD8Async(o->dst, 0xff, o->n4 * 16, cs));
  CK(cu->cuStreamSynchronize(cs));
}
static void verify(ov *o, ref *r, const char *mode) {
  size_t nd = (size_t)r->m * r->n;
  CK(cu->cuMemcpyDtoH(r->hd, o->ga.d, nd * 2));
  for (size_t i = 0; i < nd; i++)
    if ((r->hd[i] & 0x7fffu) > 0x7f80u) {
      fprintf(stderr, "share: %s: GEMM output %zu is NaN (not written)\n", mode, i);
      exit(1);
    }
  unsigned long long seed = 99;
  for (int s = 0; s < 64; s++) {
    unsigned i = (unsigned)(bench_rand(&seed) % r->m), j = (unsigned)(bench_rand(&seed) % r->n);
    double want = 0, mag = 0;
    for (unsigned kk = 0; kk < r->k; kk++) {
      double p = (double)gemm_bf2f(r->ha[(size_t)i * r->k + kk]) * gemm_bf2f(r->hb[(size_t)j * r->k + kk]);
      want += p, mag += fabs(p);
    }
    double got = gemm_bf2f(r->hd[(size_t)i * r->n + j]);
    if (!(fabs(got - want) <= 1e-2 * fabs(want) + 1e-3 * mag + 1e-2)) {
      fprintf(stderr, "share: %s: D[%u][%u] = %g, want %g\n", mode, i, j, got, want);
      exit(1);
    }
  }
  for (size_t s = 0; s < r->nsample; s++) {
    size_t w = (size_t)(bench_rand(&seed) % (o->n4 * 4));
    float got;
    CK(cu->cuMemcpyDtoH(&got, o->dst + w * 4, 4));
    if (memcmp(&got, &r->hs[w % (1u << 20)], 4) != 0) {
      fprintf(stderr, "share: %s: copy wrong at word %zu\n", mode, w);
      exit(1);
    }
  }
}

/* Median of REPS copies alone on c. */
static double copy_alone(const ov *o, CUstream c) {
  CUevent e0, e1;
  CK(cu->cuEventCreate(&e0, 0));
  CK(cu->cuEventCreate(&e1, 0));
  for (int i = 0; i < WARMUP; i++) copy_on(o, c);
  double ms[REPS];
  for (int i = 0; i < REPS; i++) {
    float m = 0;
    CK(cu->cuEventRecord(e0, c));
    copy_on(o, c);
    CK(cu->cuEventRecord(e1, c));
    CK(cu->cuEventSynchronize(e1));
    CK(cu->cuEventElapsedTime(&m, e0, e1));
    ms[i] = m;
  }
  cu->cuEventDestroy(e0), cu->cuEventDestroy(e1);
  return median(ms, REPS);
}
static void launch_gemm(void *p) { gemm_on(p, st); }

typedef struct base {
  double gemm, copy, serial, delay;
} base;

static void report(const char *mode, const char *param, const times *t, const base *b) {
  const double sum = b->gemm + b->copy;
  const double ideal = b->gemm > b->delay + b->copy ? b->gemm : b->delay + b->copy;
  printf("  share     overlap  %-10s %-9s total %8.3f ms (GEMM %8.3f, copy %8.3f)  serial/total %.3fx  sum/total "
         "%.3fx  ideal/total %.3f\n",
         mode, param, t->total, t->gemm, t->copy, b->serial / t->total, sum / t->total, ideal / t->total);
  emit_json("\"workload\":\"share-overlap\",\"mode\":\"%s\",\"param\":\"%s\",\"delay_ms\":%.4f,\"total_ms\":%.5f,"
            "\"gemm_ms\":%.5f,\"copy_ms\":%.5f,\"gemm_alone_ms\":%.5f,\"copy_alone_ms\":%.5f,\"serial_ms\":%.5f,"
            "\"sum_ms\":%.5f,\"ideal_ms\":%.5f",
            mode, param, b->delay, t->total, t->gemm, t->copy, b->gemm, b->copy, b->serial, sum, ideal);
}

/* One mode: poison, SHARE_REPS episodes, check, report. Returns the median total. */
static double mode_run(ov *o, ref *r, const char *mode, const char *param, clcrt_stream *a, CUstream b,
                       clcrt_stream *urgent, const base *bs) {
  poison(o);
  times t = episodes(o, a, b, urgent, bs->delay);
  char what[64];
  snprintf(what, sizeof what, "%s %s", mode, param);
  verify(o, r, what);
  report(mode, param, &t, bs);
  return t.total;
}

static const unsigned k_budgets[] = {96, 104, 112, 120};
enum { NBUDGETS = 4 };

/* Every concurrent mode once, with the copy enqueued bs->delay ms after the GEMM started. */
static void overlap_modes(ov *o, ref *r, const base *bs, CUstream plain, CUstream raw_hi) {
  mode_run(o, r, "concurrent", "-", st, plain, NULL, bs);
  mode_run(o, r, "priority", "-", st, raw_hi, NULL, bs);
  double best = 1e30;
  unsigned best_n = 0;
  for (int i = 0; i < NBUDGETS; i++) {
    clcrt_stream *ga = share_stream(k_budgets[i], 0, 0, 0), *gb = share_stream(k_budgets[i], CLCRT_STREAM_SM_REST, 0, 0);
    if (ga && gb) {
      char param[32];
      snprintf(param, sizeof param, "%d+%d", clcrt_stream_sms(ga), clcrt_stream_sms(gb));
      double t = mode_run(o, r, "budget", param, ga, clcrt_stream_cu(gb), NULL, bs);
      if (t < best) best = t, best_n = k_budgets[i];
    }
    clcrt_stream_destroy(ga), clcrt_stream_destroy(gb);
  }
  /* Yielding: a clcrt stream of the highest priority makes the GEMM's AUTO grid the reserve
   * grid that yields (only while it exists: made here, destroyed after). */
  clcrt_stream *hi = share_stream(0, 0, 7, 0);
  if (!hi) exit(1);
  double ty = mode_run(o, r, "yield", "-", st, clcrt_stream_cu(hi), hi, bs);
  clcrt_stream_destroy(hi);
  if (best_n) {
    printf("  share     overlap  yield / best fixed budget (%u SMs for the GEMM): %.3fx (above 1: yielding is "
           "faster)\n",
           best_n, best / ty);
    emit_json("\"workload\":\"share-overlap-summary\",\"delay_ms\":%.4f,\"best_budget\":%u,\"best_budget_ms\":%.5f,"
              "\"yield_ms\":%.5f",
              bs->delay, best_n, best, ty);
  }
}

static void share_overlap(void) {
  const gemm_variant *v = &GEMM_VARIANTS[0];
  const unsigned m = quick ? 4096 : 8192, n = m, k = m;
  const size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
  ov o;
  memset(&o, 0, sizeof o);
  if (gemm_register(rt, clcrt_gemm_source(), v, CLCRT_SCHED_AUTO, 0, &o.gemm) != CLCRT_OK) {
    printf("\nshare overlap: SKIP: the GEMM did not register: %s\n", clcrt_errmsg(rt));
    return;
  }
  /* The yielding variant now, not inside a timed episode. */
  if (clcrt_kernel_prepare(o.gemm, CLCRT_USE_PREEMPT) != CLCRT_OK) {
    fprintf(stderr, "share: GEMM variants: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  ref r = {0};
  uint16_t *ha = malloc(na * 2), *hb = malloc(nb * 2);
  r.hd = malloc(nd * 2);
  unsigned long long seed = 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < na; i++) ha[i] = gemm_f2bf((float)(bench_urand(&seed) * 2.0 - 1.0));
  for (size_t i = 0; i < nb; i++) hb[i] = gemm_f2bf((float)(bench_urand(&seed) * 2.0 - 1.0));
  r.ha = ha, r.hb = hb, r.m = m, r.n = n, r.k = k, r.nsample = 4096;
  CUdeviceptr A, B, D;
  CK(cu->cuMemAlloc(&A, na * 2));
  CK(cu->cuMemAlloc(&B, nb * 2));
  CK(cu->cuMemAlloc(&D, nd * 2));
  bench_put(A, ha, na * 2);
  bench_put(B, hb, nb * 2);
  /* Whole tiles of this variant (no stream-K workspace to manage). */
  gemm_plan plan;
  memset(&plan, 0, sizeof plan);
  plan.variant = (int)(v - GEMM_VARIANTS);
  plan.shift = 1;
  if (gemm_dense_args(rt, &plan, &o.ga, A, B, D, m, n, k, 0, 0) != CLCRT_OK) {
    fprintf(stderr, "share: GEMM args: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  o.gt = gemm_dense_tiles(v, &o.ga);
  CUlibrary lib = compile_ref(k_comm_src, NULL, "comm");
  o.copy = lib_fn(lib, "comm_copy");
  CK(cu->cuFuncSetAttribute(o.copy, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, COMM_SMEM));
  clcrt_stream *plain = share_stream(0, 0, 0, 0);
  int least = 0, greatest = 0;
  CK(cu->cuCtxGetStreamPriorityRange(&least, &greatest));
  CUstream raw_hi;
  CK(cu->cuStreamCreateWithPriority(&raw_hi, CU_STREAM_NON_BLOCKING, greatest));
  if (!plain) exit(1);

  base bs = {0, 0, 0, 0};
  bs.gemm = time_on(st, launch_gemm, &o);
  /* The copy: timed on 256 MiB, then sized to last about as long as the GEMM (at most 3 GiB). */
  r.hs = malloc((1u << 20) * 4);
  for (unsigned i = 0; i < (1u << 20); i++) r.hs[i] = (float)i * 0.25f - 7.0f;
  unsigned long long bytes = 256ull << 20;
  for (int pass = 0; pass < 2; pass++) {
    if (o.src) cu->cuMemFree(o.src), cu->cuMemFree(o.dst);
    o.n4 = bytes / 16;
    CK(cu->cuMemAlloc(&o.src, bytes));
    CK(cu->cuMemAlloc(&o.dst, bytes));
    bench_put(o.src, r.hs, 4u << 20);
    for (unsigned long long have = 4u << 20; have < bytes; have *= 2) {
      unsigned long long c = have < bytes - have ? have : bytes - have;
      CK(cu->cuMemcpyDtoDAsync(o.src + have, o.src, c, cs));
    }
    CK(cu->cuStreamSynchronize(cs));
    bs.copy = copy_alone(&o, clcrt_stream_cu(plain));
    if (pass == 0) {
      double want = (double)bytes * bs.gemm / bs.copy;
      if (want > (3ull << 30)) want = 3ull << 30;
      bytes = ((unsigned long long)want + (4u << 20) - 1) / (4u << 20) * (4u << 20);
    }
  }
  printf("\nshare overlap: GEMM %ux%ux%u bf16 (%s, STEAL) alone %.3f ms (%.0f TFLOP/s); copy of %.2f GiB on %d CTAs "
         "of %d threads alone %.3f ms (%.0f GB/s read + written); %d episodes each, medians; ratios: serial/total "
         "and sum/total (above 1: faster than one after the other), ideal/total (the longer alone over the total: "
         "1 is perfect overlap)\n",
         m, n, k, v->name, bs.gemm, 2.0 * m * n * k / bs.gemm / 1e9, (double)bytes / (1u << 30), COMM_CTAS,
         COMM_THREADS, bs.copy, 2.0 * (double)bytes / bs.copy / 1e6, SHARE_REPS);
  emit_json("\"workload\":\"share-overlap-alone\",\"gemm\":\"%ux%ux%u\",\"gemm_ms\":%.5f,\"copy_bytes\":%llu,"
            "\"copy_ctas\":%d,\"copy_ms\":%.5f",
            m, n, k, bs.gemm, bytes, COMM_CTAS, bs.copy);
  /* Serial: the GEMM, then the copy, on the benchmark's stream (its time is the others' yardstick). */
  poison(&o);
  times ts = episodes(&o, st, cs, NULL, 0);
  bs.serial = ts.total;
  verify(&o, &r, "serial");
  report("serial", "-", &ts, &bs);
  overlap_modes(&o, &r, &bs, clcrt_stream_cu(plain), raw_hi);
  /* Communication that arrives during the GEMM: the copy a third of the GEMM's time in. */
  bs.delay = bs.gemm / 3;
  printf("  share     overlap  the copy enqueued %.3f ms after the GEMM started (ideal: the longer of the GEMM and "
         "the delay + the copy; serial as above)\n",
         bs.delay);
  overlap_modes(&o, &r, &bs, clcrt_stream_cu(plain), raw_hi);

  clcrt_stream_destroy(plain);
  cu->cuStreamDestroy(raw_hi);
  cu->cuLibraryUnload(lib);
  cu->cuMemFree(o.src), cu->cuMemFree(o.dst), cu->cuMemFree(A), cu->cuMemFree(B), cu->cuMemFree(D);
  free(ha), free(hb), free(r.hd), free(r.hs);
}

void bench_share(void) {
  /* A budget needs green contexts: without them the section says so and skips. */
  clcrt_stream *probe = share_stream(16, 0, 0, 0);
  if (!probe) {
    printf("\nshare: SKIP: no SM budgets on this device or driver\n");
    return;
  }
  clcrt_stream_destroy(probe);
  const char *part = getenv("CLCRT_BENCH_SHARE"); /* one part: scaling, grid or overlap */
  if (!part || !strcmp(part, "scaling")) share_scaling();
  if (!part || !strcmp(part, "grid")) share_grid();
  if (!part || !strcmp(part, "overlap")) share_overlap();
}
