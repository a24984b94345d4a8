/* GPU suite: sharing the GPU. Streams with an SM budget run on a green context of
 * that many SMs, and their persistent grids are sized for it. Checked on the device:
 *   - with a budget of N SMs (N in 16, 64, 120), a traced run's tiles ran on at most N distinct
 *     SMs, under STEAL, STATIC and FIXED; the persistent grid is the partition's (the CTAs the
 *     kernel saw launched: clusters derived for the partition x CTAs per cluster);
 *   - every tile runs exactly once on budget streams, on the remainder side of a budget, and on
 *     a CUstream of a green context the test made itself, under STEAL (with and without a
 *     prologue), STATIC and FIXED with 1- and 2-CTA clusters;
 *   - two budgeted streams running at once (a budget and its remainder: disjoint SMs; two
 *     streams of one budget: the same partition), each tile once;
 *   - a probe of cluster occupancy in a green context: what cuOccupancyMaxActiveClusters says
 *     for the kernel (CUfunction and CUkernel, with the partition's stream, and with the green
 *     context current), what clcrt derives, and how many clusters were measured resident at
 *     once (printed); the derived count must be the measured one on budgets of whole groups
 *     (the remainder of a budget is an estimate, printed apart);
 *   - throughput of uniform compute tiles on N SMs against the whole device (printed, not
 *     asserted: targets live in `make bench`, section share).
 * Skips, saying why, without a GPU or without green contexts. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clcrt.h"
#include "common/gpu.h"
#include "common/sched_check.h"
#include "green.h"
#include "internal.h"
#include "stream.h"

static clcrt_stream *budget_stream(clcrt_runtime *rt, unsigned n, unsigned flags) {
  clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
  o.sm_budget = n, o.flags = flags;
  clcrt_stream *s = NULL;
  clcrt_status st = clcrt_stream_create_ex(rt, &o, &s);
  ck_assert_msg(st == CLCRT_OK, "a budget of %u SMs (flags %u): %s", n, flags, clcrt_errmsg(rt));
  return s;
}

/* A green context of the test's own (as a user makes one) and a stream on it. */
typedef struct user_green {
  CUgreenCtx g;
  CUstream cu;
  unsigned sms;
} user_green;
static void user_green_make(clcrt_runtime *rt, unsigned want, user_green *u) {
  const clcrt__driver *cu = gpu_cu();
  CUdevResource dev, grp;
  unsigned nb = 1;
  ck_assert_int_eq(cu->cuDeviceGetDevResource(rt->dev, &dev, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
  ck_assert_int_eq(cu->cuDevSmResourceSplitByCount(&grp, &nb, &dev, NULL, 0, want), CUDA_SUCCESS);
  ck_assert_uint_eq(nb, 1);
  CUdevResourceDesc d;
  ck_assert_int_eq(cu->cuDevResourceGenerateDesc(&d, &grp, 1), CUDA_SUCCESS);
  ck_assert_int_eq(cu->cuGreenCtxCreate(&u->g, d, rt->dev, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
  ck_assert_int_eq(cu->cuGreenCtxStreamCreate(&u->cu, u->g, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  u->sms = grp.sm.smCount;
}
static void user_green_free(user_green *u) {
  gpu_cu()->cuStreamDestroy(u->cu);
  gpu_cu()->cuGreenCtxDestroy(u->g);
}

static clcrt_kernel *reg(clcrt_runtime *rt, clcrt_sched sched, unsigned cl, int prologue) {
  return sched_check_reg(rt, sched, CLCRT_GRID_AUTO, (clcrt_dim3){cl, 1, 1}, (clcrt_dim3){64, 1, 1}, prologue, 0, NULL,
                         NULL, NULL);
}

/* The SMs a trace's records ran on: a bitmap of CLCRT_TRACE_MAX_SMS, and their count. */
static unsigned trace_sms(const clcrt_trace *tr, unsigned char *seen) {
  size_t n = 0;
  const clcrt_trace_record *r = clcrt_trace_records(tr, &n);
  unsigned distinct = 0;
  memset(seen, 0, CLCRT_TRACE_MAX_SMS);
  for (size_t i = 0; i < n; i++)
    if (!seen[r[i].sm]) seen[r[i].sm] = 1, distinct++;
  return distinct;
}

/* One traced run of k over `tiles` on s: every tile once; returns the distinct SMs (and their
 * bitmap in seen). */
static unsigned traced_run(clcrt_stream *s, clcrt_kernel *k, unsigned cl, unsigned tiles, int prologue,
                           unsigned char *seen, const char *what) {
  const clcrt_dim3 t = {tiles, 1, 1}, c = {cl, 1, 1};
  bufs b;
  bufs_make(&b, t, c, 64, tiles);
  ck_assert_int_eq(clcrt_stream_trace_enable(s, (size_t)tiles + 1024), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
  clcrt_trace *tr = NULL;
  ck_assert_msg(clcrt_stream_trace_read(s, &tr) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(s->rt));
  bufs_check(&b, c, 1, prologue, what);
  size_t n = 0;
  clcrt_trace_records(tr, &n);
  ck_assert_uint_eq(n, tiles);
  ck_assert_uint_eq(clcrt_trace_dropped(tr), 0);
  unsigned d = trace_sms(tr, seen);
  clcrt_trace_destroy(tr);
  ck_assert_int_eq(clcrt_stream_trace_enable(s, 0), CLCRT_OK);
  bufs_free(&b);
  return d;
}

/* Budgets of 16, 64 and 120 SMs: the tiles stay on at most that many SMs, under every
 * scheduler; the persistent grid (a STEAL kernel with a prologue: always persistent) is the
 * partition's. */
START_TEST(test_budget_stays_on_its_sms) {
  static const unsigned budgets[] = {16, 64, 120};
  const unsigned n = budgets[_i];
  clcrt_runtime *rt = gpu_runtime();
  clcrt_stream *s = budget_stream(rt, n, CLCRT_STREAM_SM_ROUND_DOWN);
  const int sms = clcrt_stream_sms(s);
  printf("gpu_share: a budget of %u SMs made a partition of %d SMs (the device has %d)\n", n, sms, rt->num_sms);
  ck_assert_int_le(sms, (int)n);
  ck_assert_int_gt(sms, 0);
  const unsigned tiles = gpu_under_sanitizer() ? 3001u : 40009u;
  static const clcrt_sched scheds[] = {CLCRT_SCHED_STEAL, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};
  unsigned char seen[CLCRT_TRACE_MAX_SMS];
  for (int si = 0; si < 3; si++)
    for (unsigned cl = 1; cl <= 2; cl++) {
      char what[96];
      snprintf(what, sizeof what, "budget %u, %s, %u-CTA clusters", n, clcrt__sched_name(scheds[si]), cl);
      clcrt_kernel *k = reg(rt, scheds[si], cl, 0);
      unsigned d = traced_run(s, k, cl, tiles, 0, seen, what);
      printf("gpu_share: %s: tiles ran on %u distinct SMs\n", what, d);
      ck_assert_msg(d <= (unsigned)sms, "%s: tiles ran on %u SMs, more than the partition's %d", what, d, sms);
    }
  /* The grid: the CTAs CTA 0 saw launched, against the clusters derived for the partition. */
  for (unsigned cl = 1; cl <= 2; cl++) {
    clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, cl, 1);
    const clcrt_dim3 t = {tiles, 1, 1}, c = {cl, 1, 1};
    bufs b;
    bufs_make(&b, t, c, 64, 77);
    ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
    ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
    bufs_check(&b, c, 1, 1, "budget, prologue");
    unsigned grid = 0;
    gpu_get(&grid, b.a.grid_ctas, 4);
    const int dev = k->occ.clusters; /* the device-wide occupancy, memoised at load */
    const int want = clcrt__stream_clusters(s, &k->occ, cl);
    printf("gpu_share: budget %u, STEAL with a prologue, %u-CTA clusters: a grid of %u CTAs; %d clusters fit on the "
           "device (%d CTAs per SM), %d derived for %d SMs in groups of %u\n",
           n, cl, grid, dev, k->occ.blocks_per_sm, want, sms, s->part.align);
    const unsigned units = (tiles + cl - 1) / cl;
    ck_assert_uint_eq(grid, ((unsigned)want < units ? (unsigned)want : units) * cl);
    bufs_free(&b);
  }
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Exactly once everywhere a stream may live: a budget, the rest of a budget, a user's green
 * context; every scheduler, 1- and 2-CTA clusters, STEAL with a prologue; two runs each. */
START_TEST(test_exactly_once) {
  clcrt_runtime *rt = gpu_runtime();
  user_green u;
  user_green_make(rt, 24, &u);
  clcrt_stream *user = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, u.cu, &user), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sms(user), (int)u.sms);
  clcrt_stream *streams[3] = {budget_stream(rt, 16, 0), budget_stream(rt, 16, CLCRT_STREAM_SM_REST), user};
  const char *names[3] = {"budget 16", "rest of 16", "user green context"};
  const unsigned tiles = gpu_under_sanitizer() ? 2003u : 30011u;
  struct {
    clcrt_sched sched;
    int prologue;
  } kinds[] = {{CLCRT_SCHED_STEAL, 0}, {CLCRT_SCHED_STEAL, 1}, {CLCRT_SCHED_STATIC, 0}, {CLCRT_SCHED_FIXED, 0}};
  for (int si = 0; si < 3; si++)
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++)
      for (unsigned cl = 1; cl <= 2; cl++) {
        clcrt_kernel *k = reg(rt, kinds[ki].sched, cl, kinds[ki].prologue);
        const clcrt_dim3 t = {tiles, 3, 1}, c = {cl, 1, 1};
        bufs b;
        bufs_make(&b, t, c, 64, 100 + ki);
        for (int r = 0; r < 2; r++) ck_assert_int_eq(clcrt_run(streams[si], k, t, &b.a, sizeof b.a), CLCRT_OK);
        ck_assert_int_eq(clcrt_stream_sync(streams[si]), CLCRT_OK);
        char what[128];
        snprintf(what, sizeof what, "%s (%d SMs), %s%s, %u-CTA clusters", names[si], clcrt_stream_sms(streams[si]),
                 clcrt__sched_name(kinds[ki].sched), kinds[ki].prologue ? " with a prologue" : "", cl);
        bufs_check(&b, c, 2, 0, what);
        bufs_free(&b);
      }
  for (int si = 0; si < 3; si++) clcrt_stream_destroy(streams[si]);
  user_green_free(&u);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Two budgeted streams at once: a budget and its remainder (disjoint SMs), and two streams of
 * one budget (the same partition); long runs enqueued on both before either is waited for. */
START_TEST(test_two_budgets_at_once) {
  clcrt_runtime *rt = gpu_runtime();
  const int same = _i;
  clcrt_stream *a = budget_stream(rt, 64, 0), *b = budget_stream(rt, 64, same ? 0 : CLCRT_STREAM_SM_REST);
  const unsigned tiles = gpu_under_sanitizer() ? 4001u : 200003u;
  clcrt_kernel *ka = reg(rt, CLCRT_SCHED_STEAL, 1, 0), *kb = reg(rt, CLCRT_SCHED_STEAL, 2, 0);
  const clcrt_dim3 t = {tiles, 1, 1}, c1 = {1, 1, 1}, c2 = {2, 1, 1};
  bufs ba, bb;
  bufs_make(&ba, t, c1, 64, 1);
  bufs_make(&bb, t, c2, 64, 2);
  ck_assert_int_eq(clcrt_stream_trace_enable(a, (size_t)tiles * 3 + 1024), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_trace_enable(b, (size_t)tiles * 3 + 1024), CLCRT_OK);
  for (int r = 0; r < 3; r++) {
    ck_assert_int_eq(clcrt_run(a, ka, t, &ba.a, sizeof ba.a), CLCRT_OK);
    ck_assert_int_eq(clcrt_run(b, kb, t, &bb.a, sizeof bb.a), CLCRT_OK);
  }
  clcrt_trace *ta = NULL, *tb = NULL;
  ck_assert_int_eq(clcrt_stream_trace_read(a, &ta), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_trace_read(b, &tb), CLCRT_OK);
  bufs_check(&ba, c1, 3, 0, "first budgeted stream");
  bufs_check(&bb, c2, 3, 0, same ? "second stream of the same budget" : "the remainder of the budget");
  unsigned char sa[CLCRT_TRACE_MAX_SMS], sb[CLCRT_TRACE_MAX_SMS];
  unsigned da = trace_sms(ta, sa), db = trace_sms(tb, sb), both = 0;
  for (int i = 0; i < CLCRT_TRACE_MAX_SMS; i++) both += sa[i] && sb[i];
  /* Whether they overlapped in time: the latest first start before the earliest last end. */
  size_t na = 0, nb = 0;
  const clcrt_trace_record *ra = clcrt_trace_records(ta, &na), *rb = clcrt_trace_records(tb, &nb);
  uint64_t end_a = 0, end_b = 0;
  for (size_t i = 0; i < na; i++) end_a = ra[i].end_ns > end_a ? ra[i].end_ns : end_a;
  for (size_t i = 0; i < nb; i++) end_b = rb[i].end_ns > end_b ? rb[i].end_ns : end_b;
  uint64_t start = ra[0].start_ns > rb[0].start_ns ? ra[0].start_ns : rb[0].start_ns;
  uint64_t end = end_a < end_b ? end_a : end_b;
  printf("gpu_share: %s: %u and %u distinct SMs (%d and %d in the partitions), %u in both; the streams ran "
         "together for %.1f us\n",
         same ? "two streams of one budget of 64" : "a budget of 64 and its remainder", da, db, clcrt_stream_sms(a),
         clcrt_stream_sms(b), both, end > start ? (double)(end - start) / 1e3 : 0.0);
  ck_assert_uint_le(da, (unsigned)clcrt_stream_sms(a));
  ck_assert_uint_le(db, (unsigned)clcrt_stream_sms(b));
  if (!same) ck_assert_msg(both == 0, "a budget and its remainder shared %u SMs", both);
  clcrt_trace_destroy(ta);
  clcrt_trace_destroy(tb);
  bufs_free(&ba);
  bufs_free(&bb);
  clcrt_stream_destroy(a);
  clcrt_stream_destroy(b);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- the probe: cluster occupancy in a green context --------------------------------- */

/* Each cluster's rank-0 CTA counts the clusters alive at once, every CTA holds its SM for
 * hold_ns: the peak is how many clusters the partition runs at once. */
static const char *const k_probe_src =
    "struct ProbeArgs { unsigned *live, *peak, *hits; unsigned long long hold_ns; unsigned ntiles; };\n"
    "__device__ void probe_tile(const clcrt::Tile &t, const ProbeArgs &a) {\n"
    "  unsigned long long t0, now;\n"
    "  if (t.cta_rank == 0 && threadIdx.x == 0) { unsigned v = atomicAdd(a.live, 1u) + 1u; atomicMax(a.peak, v); }\n"
    "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "  do { asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(now)); } while (now - t0 < a.hold_ns);\n"
    "  if (threadIdx.x == 0 && t.linear < a.ntiles) atomicAdd(&a.hits[t.linear], 1u);\n"
    "  __syncthreads();\n"
    "  if (t.cta_rank == 0 && threadIdx.x == 0) atomicSub(a.live, 1u);\n"
    "}\n";
typedef struct {
  CUdeviceptr live, peak, hits;
  unsigned long long hold_ns;
  unsigned ntiles;
} ProbeArgs;

/* Clusters resident at once, measured: a FIXED run of 3x `guess` clusters holding their SMs. */
static unsigned measure_resident(clcrt_stream *s, clcrt_kernel *k, unsigned cl, unsigned guess) {
  const unsigned units = 3 * guess + 3, tiles = units * cl;
  ProbeArgs a = {gpu_alloc(4), gpu_alloc(4), gpu_alloc((size_t)tiles * 4), 200000, tiles};
  gpu_fill_u8(a.live, 0, 4), gpu_fill_u8(a.peak, 0, 4), gpu_fill_u8(a.hits, 0, (size_t)tiles * 4);
  ck_assert_int_eq(clcrt_run(s, k, (clcrt_dim3){tiles, 1, 1}, &a, sizeof a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
  unsigned peak = 0, *hits = malloc((size_t)tiles * 4);
  gpu_get(&peak, a.peak, 4);
  gpu_get(hits, a.hits, (size_t)tiles * 4);
  for (unsigned i = 0; i < tiles; i++) GPU_CHECK(hits[i] == 1, "probe: tile %u ran %u times", i, hits[i]);
  free(hits);
  gpu_free(a.live), gpu_free(a.peak), gpu_free(a.hits);
  return peak;
}

static int occupancy(CUfunction f, unsigned cl, unsigned threads, unsigned smem, CUstream hs, CUresult *r) {
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = cl * 132, cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = threads, cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = smem;
  cfg.hStream = hs;
  CUlaunchAttribute at;
  if (cl > 1) {
    /* The kernel's cluster shape is compiled in; the query still wants it for a CUkernel. */
    at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at.value.clusterDim.x = cl, at.value.clusterDim.y = at.value.clusterDim.z = 1;
    cfg.attrs = &at, cfg.numAttrs = 1;
  }
  int n = -1;
  *r = cl > 1 ? gpu_cu()->cuOccupancyMaxActiveClusters(&n, f, &cfg)
              : gpu_cu()->cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, (int)threads, smem);
  return *r == CUDA_SUCCESS ? n : -1;
}

/* clcrt's derivation (green.h: clcrt__partition_clusters, from the kernel's CTAs per SM in whole
 * co-scheduled groups) against the clusters measured resident at once, on budgets of 16, 64 and
 * 120 SMs and on the remainder of a budget of 16 (116 SMs, not whole groups: an estimate there,
 * counted apart). The occupancy query with the partition's stream in cfg.hStream, which
 * answered what was measured on the budgets (lead's H100 run), is printed beside it. */
START_TEST(test_probe_cluster_occupancy) {
  clcrt_runtime *rt = gpu_runtime();
  const clcrt__driver *cu = gpu_cu();
  clcrt_stream *whole = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &whole), CLCRT_OK);
  static const unsigned budgets[] = {16, 64, 120, 16};
  enum { NBUD = 4, REST = 3 }; /* the last: CLCRT_STREAM_SM_REST of 16 */
  /* Shared memory per CTA: none (16 CTAs of 128 threads per SM), 100 KiB (2 per SM), 200 KiB (1). */
  static const unsigned smems[] = {0, 100u << 10, 200u << 10};
  enum { NSMEM = 3 };
  printf("gpu_share probe: cluster occupancy in green contexts; columns: budget, SMs, cluster, smem KiB; "
         "occupancy query for the CUfunction (whole device / with the partition's stream), for the CUkernel (with "
         "the stream / with the green context current); clcrt's derived clusters (from the CTAs per SM clcrt "
         "queried at load); measured resident clusters (1-CTA: the queries are blocks per SM)\n");
  int mismatches = 0, rows = 0, est_off = 0, est_rows = 0, q_off = 0;
  for (unsigned cl = 1; cl <= 4; cl *= 2)
    for (int mi = 0; mi < NSMEM; mi++) {
      clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
      d.source = k_probe_src, d.tile_fn = "probe_tile", d.args_type = "ProbeArgs";
      d.block = (clcrt_dim3){128, 1, 1}, d.cluster = (clcrt_dim3){cl, 1, 1};
      d.sched = CLCRT_SCHED_FIXED, d.smem_bytes = smems[mi];
      clcrt_kernel *k = NULL;
      ck_assert_msg(clcrt_register(rt, &d, &k) == CLCRT_OK, "%s", clcrt_errmsg(rt));
      CUresult r;
      int dev_q = occupancy(k->fn, cl, 128, smems[mi], NULL, &r);
      int dev_clusters = cl > 1 ? dev_q : dev_q * rt->num_sms;
      /* What clcrt records at load for STEAL and STATIC kernels (this one is FIXED). */
      clcrt__occ occ;
      memset(&occ, 0, sizeof occ);
      ck_assert_msg(clcrt__kernel_occupancy(rt, k, &occ) == CLCRT_OK, "%s", clcrt_errmsg(rt));
      unsigned dev_meas = gpu_under_sanitizer() ? 0 : measure_resident(whole, k, cl, (unsigned)dev_clusters);
      printf("  whole   %3d SMs  c%u %3u KiB: query %d%s (clcrt: %d clusters, %d CTAs per SM%s); measured %u\n",
             rt->num_sms, cl, smems[mi] >> 10, dev_q, cl > 1 ? " clusters" : " blocks/SM", occ.clusters,
             occ.blocks_per_sm, occ.blocks_per_sm ? "" : ": the driver did not say", dev_meas);
      for (int bi = 0; bi < NBUD; bi++) {
        clcrt_stream *s = budget_stream(rt, budgets[bi], bi == REST ? CLCRT_STREAM_SM_REST : CLCRT_STREAM_SM_ROUND_DOWN);
        const int sms = clcrt_stream_sms(s);
        CUcontext pctx = NULL;
        CUgreenCtx g = NULL;
        ck_assert_int_eq(cu->cuStreamGetCtx_v2(clcrt_stream_cu(s), &pctx, &g), CUDA_SUCCESS);
        ck_assert_ptr_nonnull(g);
        CUresult r1, r2, r3;
        int q_fn = occupancy(k->fn, cl, 128, smems[mi], clcrt_stream_cu(s), &r1);
        /* The CUkernel is queried as it is: cuFuncSetAttribute refuses a CUkernel handle
         * (CUDA_ERROR_INVALID_HANDLE on the H100's driver, which compute-sanitizer reports as an
         * API error), so its shared memory is not opted in and the query says what it says. */
        int q_kern = occupancy((CUfunction)k->kern, cl, 128, smems[mi], clcrt_stream_cu(s), &r2);
        CUcontext gctx = NULL;
        int q_cur = -1;
        r3 = cu->cuCtxFromGreenCtx(&gctx, g);
        if (r3 == CUDA_SUCCESS && (r3 = cu->cuCtxSetCurrent(gctx)) == CUDA_SUCCESS) {
          q_cur = occupancy((CUfunction)k->kern, cl, 128, smems[mi], NULL, &r3);
        }
        ck_assert_int_eq(cu->cuCtxSetCurrent(rt->ctx), CUDA_SUCCESS);
        const int derived = clcrt__stream_clusters(s, &occ, cl);
        /* Measured with room for more than the derivation says, so that a short count shows. */
        const int q_clusters = cl > 1 ? q_fn : q_fn * sms;
        unsigned guess = (unsigned)(derived > q_clusters ? derived : q_clusters);
        unsigned meas = gpu_under_sanitizer() ? 0 : measure_resident(s, k, cl, guess);
        int ok = gpu_under_sanitizer() || meas == (unsigned)derived;
        int q_ok = gpu_under_sanitizer() || r1 != CUDA_SUCCESS || meas == (unsigned)q_clusters;
        const int grouped = s->part.align > 1 && sms % (int)s->part.align == 0;
        if (bi == REST || !grouped)
          est_off += !ok, est_rows++; /* not whole groups: an estimate, counted apart */
        else
          mismatches += !ok, rows++;
        q_off += !q_ok;
        printf("  %s %3u %3d SMs (groups of %u) c%u %3u KiB: fn %d / %d%s, kernel %d%s / current %d%s; derived %d; "
               "measured %u%s%s\n",
               bi == REST ? "rest of" : "budget ", budgets[bi], sms, s->part.align, cl, smems[mi] >> 10, dev_q, q_fn,
               r1 == CUDA_SUCCESS ? "" : " (failed)", q_kern, r2 == CUDA_SUCCESS ? "" : " (failed)", q_cur,
               r3 == CUDA_SUCCESS ? "" : " (failed)", derived, meas,
               ok ? "" : bi == REST || !grouped ? "  (estimate off)" : "  MISMATCH",
               q_ok ? "" : "  (the stream's query differs)");
        clcrt_stream_destroy(s);
      }
    }
  printf("gpu_share probe: %d of %d derived counts on whole groups differ from the measured ones; estimates (not "
         "whole groups) off in %d of %d; the stream's occupancy query differs from the measured count in %d of %d%s\n",
         mismatches, rows, est_off, est_rows, q_off, rows + est_rows,
         gpu_under_sanitizer() ? " (not measured under compute-sanitizer)" : "");
  /* The derivation is what sizes budget streams' persistent grids: on whole groups it must be
   * what the device runs. */
  ck_assert_msg(mismatches == 0, "%d of %d derived cluster counts on whole groups differ from the measured ones",
                mismatches, rows);
  clcrt_stream_destroy(whole);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- throughput on uniform tiles, printed ------------------------------------------------ */

static const char *const k_fma_src =
    "struct FmaArgs { float *out; unsigned n; unsigned long long ntiles; };\n"
    "__device__ void fma_tile(const clcrt::Tile &t, const FmaArgs &a) {\n"
    "  float v = (float)threadIdx.x * 1e-3f + (float)(t.linear % 1024);\n"
    "#pragma unroll 8\n"
    "  for (unsigned k = 0; k < a.n; k++) v = fmaf(v, 0.99990f, 0.00013f);\n"
    "  a.out[t.linear * blockDim.x + threadIdx.x] = v;\n"
    "}\n";
typedef struct {
  CUdeviceptr out;
  unsigned n;
  unsigned long long ntiles;
} FmaArgs;

static double time_run(clcrt_stream *s, clcrt_kernel *k, unsigned tiles, FmaArgs *a) {
  const clcrt__driver *cu = gpu_cu();
  CUevent e0, e1;
  ck_assert_int_eq(cu->cuEventCreate(&e0, 0), CUDA_SUCCESS);
  ck_assert_int_eq(cu->cuEventCreate(&e1, 0), CUDA_SUCCESS);
  float best = 1e30f;
  for (int r = 0; r < 7; r++) {
    ck_assert_int_eq(cu->cuEventRecord(e0, clcrt_stream_cu(s)), CUDA_SUCCESS);
    ck_assert_int_eq(clcrt_run(s, k, (clcrt_dim3){tiles, 1, 1}, a, sizeof *a), CLCRT_OK);
    ck_assert_int_eq(cu->cuEventRecord(e1, clcrt_stream_cu(s)), CUDA_SUCCESS);
    ck_assert_int_eq(cu->cuEventSynchronize(e1), CUDA_SUCCESS);
    float ms = 0;
    ck_assert_int_eq(cu->cuEventElapsedTime(&ms, e0, e1), CUDA_SUCCESS);
    if (r >= 2 && ms < best) best = ms; /* two warm-ups */
  }
  cu->cuEventDestroy(e0), cu->cuEventDestroy(e1);
  return best;
}

START_TEST(test_throughput_printed) {
  clcrt_runtime *rt = gpu_runtime();
  const unsigned tiles = gpu_under_sanitizer() ? 500u : 40000u;
  FmaArgs a = {gpu_alloc((size_t)tiles * 256 * 4), gpu_under_sanitizer() ? 10u : 1000u, tiles};
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = k_fma_src, d.tile_fn = "fma_tile", d.args_type = "FmaArgs";
  d.block = (clcrt_dim3){256, 1, 1};
  clcrt_stream *whole = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &whole), CLCRT_OK);
  static const struct {
    const char *name;
    clcrt_sched sched;
    clcrt_grid grid;
  } ks[] = {{"steal", CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO},
            {"steal-persist", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT},
            {"static", CLCRT_SCHED_STATIC, CLCRT_GRID_AUTO},
            {"fixed", CLCRT_SCHED_FIXED, CLCRT_GRID_AUTO}};
  static const unsigned budgets[] = {16, 64, 120};
  /* Under compute-sanitizer one contender and one budget: the timing means nothing there. */
  const size_t nks = gpu_under_sanitizer() ? 1 : sizeof ks / sizeof ks[0];
  const int nbud = gpu_under_sanitizer() ? 1 : 3;
  for (size_t ki = 0; ki < nks; ki++) {
    d.sched = ks[ki].sched, d.grid = ks[ki].grid;
    clcrt_kernel *k = NULL;
    ck_assert_msg(clcrt_register(rt, &d, &k) == CLCRT_OK, "%s", clcrt_errmsg(rt));
    double full = time_run(whole, k, tiles, &a);
    printf("gpu_share: uniform tiles (%u x 1000 FMAs x 256 threads), %-13s whole device (%d SMs) %.3f ms", tiles,
           ks[ki].name, rt->num_sms, full);
    for (int bi = 0; bi < nbud; bi++) {
      clcrt_stream *s = budget_stream(rt, budgets[bi], CLCRT_STREAM_SM_ROUND_DOWN);
      double t = time_run(s, k, tiles, &a);
      double share = (double)clcrt_stream_sms(s) / rt->num_sms;
      printf("; %d SMs %.3f ms = %.3f x (SMs / %d)", clcrt_stream_sms(s), t, full / t / share, rt->num_sms);
      clcrt_stream_destroy(s);
    }
    printf("\n");
  }
  /* The last run's output: no tile lost (poison first, then one run on a budget). */
  float *h = malloc((size_t)tiles * 256 * 4);
  gpu_fill_u8(a.out, 0xff, (size_t)tiles * 256 * 4);
  clcrt_stream *s = budget_stream(rt, 16, 0);
  clcrt_kernel *k = NULL;
  d.sched = CLCRT_SCHED_STEAL, d.grid = CLCRT_GRID_PERSISTENT;
  ck_assert_int_eq(clcrt_register(rt, &d, &k), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(s, k, (clcrt_dim3){tiles, 1, 1}, &a, sizeof a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
  gpu_get(h, a.out, (size_t)tiles * 256 * 4);
  for (size_t i = 0; i < (size_t)tiles * 256; i++) GPU_CHECK(h[i] == h[i], "uniform tiles: element %zu not written", i);
  free(h);
  clcrt_stream_destroy(s);
  clcrt_stream_destroy(whole);
  gpu_free(a.out);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Skips the suite, saying why, when the device cannot make a partition (checked in a child:
 * CUDA must not be initialised before Check forks). */
static void skip_without_green_contexts(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    clcrt_runtime *rt = NULL;
    if (clcrt_runtime_create(&rt, NULL) != CLCRT_OK) _exit(0);
    clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
    o.sm_budget = 16;
    clcrt_stream *s = NULL;
    clcrt_status st = clcrt_stream_create_ex(rt, &o, &s);
    if (st == CLCRT_E_UNSUPPORTED) {
      printf("gpu_share: SKIP: no green contexts here (%s)\n", clcrt_errmsg(rt));
      fflush(stdout);
      _exit(3);
    }
    clcrt_stream_destroy(s);
    clcrt_runtime_destroy(rt);
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
    printf("gpu_share: SKIP: the green-context probe process failed\n");
    exit(0);
  }
  if (WEXITSTATUS(status) == 3) exit(0);
}

int main(void) {
  gpu_skip_if_absent("gpu_share");
  skip_without_green_contexts();
  Suite *su = suite_create("gpu_share");
  TCase *tc = tcase_create("share");
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, test_budget_stays_on_its_sms, 0, 3);
  tcase_add_test(tc, test_exactly_once);
  tcase_add_loop_test(tc, test_two_budgets_at_once, 0, 2);
  tcase_add_test(tc, test_probe_cluster_occupancy);
  tcase_add_test(tc, test_throughput_printed);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
