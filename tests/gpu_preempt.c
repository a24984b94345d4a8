/* GPU suite: preemption. While work of a higher priority runs, STEAL runs of a
 * lower priority stop claiming units after their current ones and leave their SMs; the
 * clusters not yet started finish the rest. Checked here: the mechanism itself (a run told
 * to yield from its start runs exactly one unit per cluster), exactly-once under many
 * interleaved urgent runs and several low-priority streams, nesting, graph capture, two
 * runtimes in one process, and the API's refusals. Latencies are measured by `make bench`. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clcrt.h"
#include "env.h"
#include "internal.h"
#include "variants.h"
#include "common/gpu.h"
#include "common/sched_check.h"

static clcrt_stream *stream_prio(clcrt_runtime *rt, int greatest, CUstream *own) {
  int least = 0, most = 0;
  ck_assert_int_eq(gpu_cu()->cuCtxGetStreamPriorityRange(&least, &most), CUDA_SUCCESS);
  ck_assert_int_eq(gpu_cu()->cuStreamCreateWithPriority(own, CU_STREAM_NON_BLOCKING, greatest ? most : least),
                   CUDA_SUCCESS);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, *own, &s), CLCRT_OK);
  return s;
}

static clcrt_kernel *reg(clcrt_runtime *rt, clcrt_sched sched, clcrt_dim3 cl) {
  return sched_check_reg(rt, sched, CLCRT_GRID_AUTO, cl, (clcrt_dim3){64, 1, 1}, 0, 0, NULL, NULL, NULL);
}

/* Clusters of the launched kernel that fit at once: runs with statistics on (these tests')
 * that can be preempted launch the kernel's variant with both, which has its own occupancy. */
static unsigned resident(const clcrt_kernel *k) {
  const struct clcrt_kernel *v = k->vars->var[CLCRT_USE_TRACE | CLCRT_USE_PREEMPT];
  ck_assert_msg(v != NULL, "a preemptible run with statistics on did not launch the variant with both");
  ck_assert_int_gt(v->occ.clusters, 0);
  return (unsigned)v->occ.clusters;
}

/* The mechanism, deterministically: with the urgent stream inside clcrt_preempt_begin (its
 * word written before the run starts), every cluster of a low-priority run makes its first
 * claim and leaves while a whole wave of the grid's reserve has not started. Without
 * yielding, the clusters that fit at once claim every unit and the reserve finds nothing
 * (at most `resident` clusters run a unit); yielding, more than twice that many do, those
 * that leave after one unit, and the grid is `resident` times 1 + CLCRT_PREEMPT_WAVES
 * (default 2), not one cluster per unit. After clcrt_preempt_end the run steals. 512-thread blocks: few
 * clusters fit at once, so the tile counts stay small enough for compute-sanitizer. */
START_TEST(test_yield_mechanism) {
  clcrt_runtime *rt = gpu_runtime();
  /* The yielding mechanism of persistent grids: no runs of one cluster per unit (launch.c: long
   * units), which the units would choose if they measured long (under the sanitizer they do). */
  rt->long_cycles = 0;
  CUstream chi, clo;
  clcrt_stream *hi = stream_prio(rt, 1, &chi), *lo = stream_prio(rt, 0, &clo);
  ck_assert_int_gt(clcrt_stream_priority(hi), 0);
  ck_assert_int_eq(clcrt_stream_priority(lo), 0);
  clcrt_dim3 cl = {_i ? 2u : 1u, 1, 1};
  clcrt_kernel *k = sched_check_reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO, cl, (clcrt_dim3){512, 1, 1}, 0, 0, NULL,
                                    NULL, NULL);
  /* The yielding variants now, not in the background: this test is about how they yield (the
   * fallback before they are built: test_fallback_under_preemption). */
  ck_assert_int_eq(clcrt_kernel_prepare(k, CLCRT_USE_TRACE | CLCRT_USE_PREEMPT), CLCRT_OK);
  const clcrt_dim3 t = {gpu_under_sanitizer() ? 3001u : 20001u, 1, 1};
  const unsigned long long units = (t.x + cl.x - 1) / cl.x;
  bufs b;
  bufs_make(&b, t, cl, 512, 5);
  ck_assert_int_eq(clcrt_stream_stats_enable(lo, 1), CLCRT_OK);
  ck_assert_int_eq(clcrt_preempt_begin(hi), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(hi), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(lo, k, t, &b.a, sizeof b.a), CLCRT_OK);
  clcrt_stream_stats st = CLCRT_STREAM_STATS_INIT;
  ck_assert_int_eq(clcrt_stream_stats_read(lo, &st), CLCRT_OK);
  bufs_check(&b, cl, 1, 0, "yielding run");
  const unsigned long long r = resident(k), cap = r * (1 + CLCRT__PREEMPT_WAVES_DEFAULT),
                           grid = units < cap ? units : cap;
  printf("gpu_preempt: yielding run: %llu of %llu clusters ran units (%llu fit at once) for %llu units, at most %llu "
         "units per cluster\n",
         st.clusters, grid, r, units, st.max_units_per_cluster);
  ck_assert_uint_gt(units, 2 * r); /* the test's premise: a reserve to yield to */
  ck_assert_uint_gt(st.clusters, 2 * r);
  ck_assert_uint_le(st.clusters, grid);
  ck_assert_int_eq(clcrt_preempt_end(hi), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(hi), CLCRT_OK);
  bufs_reset_hits(&b);
  ck_assert_int_eq(clcrt_run(lo, k, t, &b.a, sizeof b.a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_stats_read(lo, &st), CLCRT_OK);
  bufs_check(&b, cl, 1, 0, "after preempt_end");
  printf("gpu_preempt: after preempt_end: %llu clusters, at most %llu units per cluster\n", st.clusters,
         st.max_units_per_cluster);
  /* Clusters that started early took the units of those not yet started: the run no longer
   * yields. Under compute-sanitizer every cluster may start before any claims a second unit
   * (the tool serialises and slows the kernel), so there it is printed, not checked. */
  if (!gpu_under_sanitizer()) ck_assert_uint_gt(st.max_units_per_cluster, 1);
  bufs_free(&b);
  clcrt_stream_destroy(hi);
  clcrt_stream_destroy(lo);
  gpu_cu()->cuStreamDestroy(chi);
  gpu_cu()->cuStreamDestroy(clo);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Exactly once under 100 urgent runs (clcrt runs, nested pairs and foreign kernels between
 * clcrt_preempt_begin/end) interleaved with long low-priority runs on three streams. */
START_TEST(test_exactly_once_interleaved) {
  clcrt_runtime *rt = gpu_runtime();
  enum { NL = 3 };
  CUstream chi, clo[NL];
  clcrt_stream *hi = stream_prio(rt, 1, &chi), *lo[NL];
  for (int i = 0; i < NL; i++) lo[i] = stream_prio(rt, 0, &clo[i]);
  const clcrt_dim3 cls[NL] = {{1, 1, 1}, {2, 1, 1}, {1, 1, 1}};
  const clcrt_dim3 t = {gpu_under_sanitizer() ? 20011u : 400009u, 1, 1};
  bufs b[NL], bh;
  clcrt_kernel *k[NL];
  for (int i = 0; i < NL; i++) {
    k[i] = reg(rt, CLCRT_SCHED_STEAL, cls[i]);
    bufs_make(&b[i], t, cls[i], 64, 50 + i);
  }
  const clcrt_dim3 th = {264, 1, 1};
  clcrt_kernel *kh = reg(rt, CLCRT_SCHED_AUTO, (clcrt_dim3){1, 1, 1});
  clcrt_kernel *kf = reg(rt, CLCRT_SCHED_FIXED, (clcrt_dim3){1, 1, 1});
  bufs_make(&bh, th, (clcrt_dim3){1, 1, 1}, 64, 60);
  const unsigned lo_reps = gpu_under_sanitizer() ? 1 : 3, hi_runs = gpu_under_sanitizer() ? 10 : 100;
  for (unsigned r = 0; r < lo_reps; r++)
    for (int i = 0; i < NL; i++) ck_assert_int_eq(clcrt_run(lo[i], k[i], t, &b[i].a, sizeof b[i].a), CLCRT_OK);
  unsigned hits = 0;
  for (unsigned r = 0; r < hi_runs; r++) {
    switch (r % 4) {
      case 0: /* a clcrt run brackets itself */
        ck_assert_int_eq(clcrt_run(hi, kh, th, &bh.a, sizeof bh.a), CLCRT_OK);
        hits++;
        break;
      case 1: /* foreign work between begin and end (here a FIXED kernel standing for it) */
        ck_assert_int_eq(clcrt_preempt_begin(hi), CLCRT_OK);
        ck_assert_int_eq(clcrt_run(hi, kf, th, &bh.a, sizeof bh.a), CLCRT_OK);
        ck_assert_int_eq(clcrt_preempt_end(hi), CLCRT_OK);
        hits++;
        break;
      case 2: /* nested pairs */
        ck_assert_int_eq(clcrt_preempt_begin(hi), CLCRT_OK);
        ck_assert_int_eq(clcrt_preempt_begin(hi), CLCRT_OK);
        ck_assert_int_eq(clcrt_run(hi, kh, th, &bh.a, sizeof bh.a), CLCRT_OK);
        ck_assert_int_eq(clcrt_preempt_end(hi), CLCRT_OK);
        ck_assert_int_eq(clcrt_run(hi, kf, th, &bh.a, sizeof bh.a), CLCRT_OK);
        ck_assert_int_eq(clcrt_preempt_end(hi), CLCRT_OK);
        hits += 2;
        break;
      default: /* back to back */
        ck_assert_int_eq(clcrt_run(hi, kh, th, &bh.a, sizeof bh.a), CLCRT_OK);
        ck_assert_int_eq(clcrt_run(hi, kh, th, &bh.a, sizeof bh.a), CLCRT_OK);
        hits += 2;
    }
  }
  ck_assert_int_eq(clcrt_stream_sync(hi), CLCRT_OK);
  for (int i = 0; i < NL; i++) ck_assert_int_eq(clcrt_stream_sync(lo[i]), CLCRT_OK);
  for (int i = 0; i < NL; i++) {
    char what[96];
    snprintf(what, sizeof what, "low-priority runs under preemption (stream %d, %u-CTA clusters)", i, cls[i].x);
    bufs_check(&b[i], cls[i], lo_reps, 0, what);
  }
  bufs_check(&bh, (clcrt_dim3){1, 1, 1}, hits, 0, "urgent runs");
  for (int i = 0; i < NL; i++) {
    bufs_free(&b[i]);
    clcrt_stream_destroy(lo[i]);
    gpu_cu()->cuStreamDestroy(clo[i]);
  }
  bufs_free(&bh);
  clcrt_stream_destroy(hi);
  gpu_cu()->cuStreamDestroy(chi);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Graph capture: the urgent stream's bracket is captured with its run, and a preemptible
 * low-priority run is captured too (it then claims from the graph table); both replayed
 * while the other kind runs live. */
START_TEST(test_graph_capture) {
  clcrt_runtime *rt = gpu_runtime();
  const clcrt__driver *cu = gpu_cu();
  CUstream chi, clo;
  clcrt_stream *hi = stream_prio(rt, 1, &chi), *lo = stream_prio(rt, 0, &clo);
  clcrt_dim3 cl = {1, 1, 1};
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, cl);
  /* Built now, so that the captured run claims from the graph table and the runs with
   * statistics yield (the fallbacks do neither). */
  ck_assert_int_eq(clcrt_kernel_prepare(k, CLCRT_USE_TRACE | CLCRT_USE_GRAPH | CLCRT_USE_PREEMPT), CLCRT_OK);
  rt->long_cycles = 0; /* the last check looks for stealing, not one cluster per unit */
  const clcrt_dim3 t = {gpu_under_sanitizer() ? 5003u : 100003u, 1, 1}, th = {264, 1, 1};
  bufs bl, bh;
  bufs_make(&bl, t, cl, 64, 70);
  bufs_make(&bh, th, cl, 64, 71);
  CUgraph gh = NULL, gl = NULL;
  CUgraphExec eh = NULL, el = NULL;
  ck_assert_int_eq(cu->cuStreamBeginCapture(chi, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  ck_assert_int_eq(clcrt_preempt_begin(hi), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(hi, k, th, &bh.a, sizeof bh.a), CLCRT_OK);
  ck_assert_int_eq(clcrt_preempt_end(hi), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(hi, k, th, &bh.a, sizeof bh.a), CLCRT_OK);
  ck_assert_int_eq(cu->cuStreamEndCapture(chi, &gh), CUDA_SUCCESS);
  ck_assert_int_eq(cu->cuStreamBeginCapture(clo, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  ck_assert_int_eq(clcrt_run(lo, k, t, &bl.a, sizeof bl.a), CLCRT_OK);
  ck_assert_int_eq(cu->cuStreamEndCapture(clo, &gl), CUDA_SUCCESS);
  ck_assert_int_eq(cu->cuGraphInstantiateWithFlags(&eh, gh, 0), CUDA_SUCCESS);
  ck_assert_int_eq(cu->cuGraphInstantiateWithFlags(&el, gl, 0), CUDA_SUCCESS);
  const unsigned reps = gpu_under_sanitizer() ? 2 : 10;
  for (unsigned r = 0; r < reps; r++) {
    ck_assert_int_eq(cu->cuGraphLaunch(el, clo), CUDA_SUCCESS);
    ck_assert_int_eq(clcrt_run(lo, k, t, &bl.a, sizeof bl.a), CLCRT_OK);
    for (int j = 0; j < 5; j++) ck_assert_int_eq(cu->cuGraphLaunch(eh, chi), CUDA_SUCCESS);
  }
  ck_assert_int_eq(clcrt_stream_sync(hi), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(lo), CLCRT_OK);
  bufs_check(&bl, cl, 2 * reps, 0, "low-priority replays and runs");
  bufs_check(&bh, cl, 10 * reps, 0, "urgent replays");
  /* The yield words are all back to 0: a run now steals freely. */
  ck_assert_int_eq(clcrt_stream_stats_enable(lo, 1), CLCRT_OK);
  bufs_reset_hits(&bl);
  ck_assert_int_eq(clcrt_run(lo, k, t, &bl.a, sizeof bl.a), CLCRT_OK);
  clcrt_stream_stats st = CLCRT_STREAM_STATS_INIT;
  ck_assert_int_eq(clcrt_stream_stats_read(lo, &st), CLCRT_OK);
  ck_assert_uint_gt(st.max_units_per_cluster, 1);
  bufs_check(&bl, cl, 1, 0, "after the replays");
  cu->cuGraphExecDestroy(eh), cu->cuGraphExecDestroy(el);
  cu->cuGraphDestroy(gh), cu->cuGraphDestroy(gl);
  bufs_free(&bl), bufs_free(&bh);
  clcrt_stream_destroy(hi);
  clcrt_stream_destroy(lo);
  cu->cuStreamDestroy(chi), cu->cuStreamDestroy(clo);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Two runtimes in one process share the context's preemption words: an urgent stream of
 * one makes the other's runs yield. */
START_TEST(test_two_runtimes) {
  clcrt_runtime *rt1 = gpu_runtime(), *rt2 = gpu_runtime();
  rt1->long_cycles = 0; /* as in test_yield_mechanism */
  CUstream chi, clo;
  clcrt_stream *hi = stream_prio(rt2, 1, &chi), *lo = stream_prio(rt1, 0, &clo);
  clcrt_kernel *k = sched_check_reg(rt1, CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO, (clcrt_dim3){1, 1, 1},
                                    (clcrt_dim3){512, 1, 1}, 0, 0, NULL, NULL, NULL);
  ck_assert_int_eq(clcrt_kernel_prepare(k, CLCRT_USE_TRACE | CLCRT_USE_PREEMPT), CLCRT_OK); /* as above */
  const clcrt_dim3 t = {gpu_under_sanitizer() ? 3001u : 10001u, 1, 1};
  bufs b;
  bufs_make(&b, t, (clcrt_dim3){1, 1, 1}, 512, 80);
  ck_assert_int_eq(clcrt_stream_stats_enable(lo, 1), CLCRT_OK);
  ck_assert_int_eq(clcrt_preempt_begin(hi), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(hi), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(lo, k, t, &b.a, sizeof b.a), CLCRT_OK);
  clcrt_stream_stats st = CLCRT_STREAM_STATS_INIT;
  ck_assert_int_eq(clcrt_stream_stats_read(lo, &st), CLCRT_OK);
  ck_assert_uint_gt(st.clusters, 2ull * resident(k)); /* yielded: see test_yield_mechanism */
  bufs_check(&b, (clcrt_dim3){1, 1, 1}, 1, 0, "run of runtime 1 preempted by runtime 2");
  ck_assert_int_eq(clcrt_preempt_end(hi), CLCRT_OK);
  /* Destroying a stream inside begin lifts its preemption. */
  ck_assert_int_eq(clcrt_preempt_begin(hi), CLCRT_OK);
  clcrt_stream_destroy(hi);
  bufs_reset_hits(&b);
  ck_assert_int_eq(clcrt_run(lo, k, t, &b.a, sizeof b.a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_stats_read(lo, &st), CLCRT_OK);
  if (!gpu_under_sanitizer()) ck_assert_uint_gt(st.max_units_per_cluster, 1); /* as in test_yield_mechanism */
  bufs_check(&b, (clcrt_dim3){1, 1, 1}, 1, 0, "after the urgent stream went");
  bufs_free(&b);
  clcrt_stream_destroy(lo);
  gpu_cu()->cuStreamDestroy(chi);
  gpu_cu()->cuStreamDestroy(clo);
  clcrt_runtime_destroy(rt2);
  clcrt_runtime_destroy(rt1);
}
END_TEST

/* Runs that can be preempted before their yielding variants are built launch the fallback
 * (runtime/launch/plan.c): the registered (here observed) kernel on a full grid, every cluster
 * one unit of its own and no claims, which yields by itself: its clusters leave after their
 * unit, and the block scheduler starts the urgent stream's clusters first. The kernels' builds
 * are held back here (as if they took for ever), so every low-priority run is the fallback: on
 * two streams, 1- and 2-CTA clusters, plain and captured (no graph variant either), under
 * urgent runs and brackets. Every tile once, one unit per cluster, nothing built. */
START_TEST(test_fallback_under_preemption) {
  clcrt_runtime *rt = gpu_runtime();
  const clcrt__driver *cu = gpu_cu();
  rt->long_cycles = 0;
  enum { NL = 2 };
  const clcrt_dim3 cls[NL] = {{1, 1, 1}, {2, 1, 1}};
  const clcrt_dim3 t = {gpu_under_sanitizer() ? 4001u : 100003u, 1, 1}, th = {264, 1, 1};
  clcrt_kernel *k[NL];
  bufs b[NL], bg[NL], bh;
  /* Registered before a stream of higher priority exists: nothing asks for their yielding
   * variants; then every variant marked as asked for, so that none is ever built. */
  for (int i = 0; i < NL; i++) {
    k[i] = sched_check_reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO, cls[i], (clcrt_dim3){64, 1, 1}, 0, 0, NULL, NULL,
                           NULL);
    k[i]->vars->requested = ~0u;
    bufs_make(&b[i], t, cls[i], 64, 90 + i);
    bufs_make(&bg[i], t, cls[i], 64, 92 + i);
  }
  clcrt_kernel *kf = sched_check_reg(rt, CLCRT_SCHED_FIXED, CLCRT_GRID_AUTO, (clcrt_dim3){1, 1, 1},
                                     (clcrt_dim3){64, 1, 1}, 0, 0, NULL, NULL, NULL);
  bufs_make(&bh, th, (clcrt_dim3){1, 1, 1}, 64, 94);
  CUstream chi, clo[NL];
  clcrt_stream *hi = stream_prio(rt, 1, &chi), *lo[NL];
  for (int i = 0; i < NL; i++) {
    lo[i] = stream_prio(rt, 0, &clo[i]);
    ck_assert_int_eq(clcrt_stream_stats_enable(lo[i], 1), CLCRT_OK); /* builds the observed variants, now */
  }
  /* Captured low-priority runs: the fallback again (it needs no graph state). */
  CUgraph g[NL];
  CUgraphExec e[NL];
  for (int i = 0; i < NL; i++) {
    ck_assert_int_eq(cu->cuStreamBeginCapture(clo[i], CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    ck_assert_int_eq(clcrt_run(lo[i], k[i], t, &bg[i].a, sizeof bg[i].a), CLCRT_OK);
    ck_assert_int_eq(cu->cuStreamEndCapture(clo[i], &g[i]), CUDA_SUCCESS);
    ck_assert_int_eq(cu->cuGraphInstantiateWithFlags(&e[i], g[i], 0), CUDA_SUCCESS);
  }
  /* Discard the statistics of the captures (none: they did not run). */
  clcrt_stream_stats st = CLCRT_STREAM_STATS_INIT;
  const unsigned reps = gpu_under_sanitizer() ? 1 : 3;
  unsigned hits = 0;
  for (unsigned r = 0; r < reps; r++) {
    for (int i = 0; i < NL; i++) {
      ck_assert_int_eq(clcrt_run(lo[i], k[i], t, &b[i].a, sizeof b[i].a), CLCRT_OK);
      ck_assert_int_eq(cu->cuGraphLaunch(e[i], clo[i]), CUDA_SUCCESS);
    }
    for (int j = 0; j < 20; j++) {
      if (j % 2) {
        ck_assert_int_eq(clcrt_run(hi, kf, th, &bh.a, sizeof bh.a), CLCRT_OK);
      } else {
        ck_assert_int_eq(clcrt_preempt_begin(hi), CLCRT_OK);
        ck_assert_int_eq(clcrt_run(hi, kf, th, &bh.a, sizeof bh.a), CLCRT_OK);
        ck_assert_int_eq(clcrt_preempt_end(hi), CLCRT_OK);
      }
      hits++;
    }
  }
  ck_assert_int_eq(clcrt_stream_sync(hi), CLCRT_OK);
  for (int i = 0; i < NL; i++) {
    ck_assert_int_eq(clcrt_stream_stats_read(lo[i], &st), CLCRT_OK);
    const unsigned long long units = (t.x + cls[i].x - 1) / cls[i].x;
    /* Runs and replays alike: one cluster per unit, each cluster one unit, no steals. */
    ck_assert_msg(st.clusters == 2 * reps * units && st.steals == 0 && st.max_units_per_cluster == 1,
                  "stream %d: %llu clusters, %llu steals, at most %llu units per cluster, for %u x %llu units", i,
                  st.clusters, st.steals, st.max_units_per_cluster, 2 * reps, units);
    char what[96];
    snprintf(what, sizeof what, "fallback runs under preemption (%u-CTA clusters)", cls[i].x);
    bufs_check(&b[i], cls[i], reps, 0, what);
    snprintf(what, sizeof what, "captured fallback replayed under preemption (%u-CTA clusters)", cls[i].x);
    bufs_check(&bg[i], cls[i], reps, 0, what);
    ck_assert_ptr_null(k[i]->vars->var[CLCRT_USE_PREEMPT]);
    ck_assert_ptr_null(k[i]->vars->var[CLCRT_USE_TRACE | CLCRT_USE_PREEMPT]);
  }
  bufs_check(&bh, (clcrt_dim3){1, 1, 1}, hits, 0, "urgent runs");
  for (int i = 0; i < NL; i++) {
    cu->cuGraphExecDestroy(e[i]);
    cu->cuGraphDestroy(g[i]);
    bufs_free(&b[i]);
    bufs_free(&bg[i]);
    clcrt_stream_destroy(lo[i]);
    cu->cuStreamDestroy(clo[i]);
  }
  bufs_free(&bh);
  clcrt_stream_destroy(hi);
  cu->cuStreamDestroy(chi);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_refusals) {
  clcrt_runtime *rt = gpu_runtime();
  CUstream chi, clo;
  clcrt_stream *hi = stream_prio(rt, 1, &chi), *lo = stream_prio(rt, 0, &clo);
  ck_assert_int_eq(clcrt_preempt_end(hi), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "without a matching"), "%s", clcrt_errmsg(rt));
  ck_assert_int_eq(clcrt_preempt_begin(lo), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "lowest priority"), "%s", clcrt_errmsg(rt));
  ck_assert_int_eq(clcrt_preempt_end(lo), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_preempt_begin(NULL), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_preempt_end(NULL), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_stream_priority(NULL), -1);
  ck_assert_int_eq(clcrt_preempt_begin(hi), CLCRT_OK);
  ck_assert_int_eq(clcrt_preempt_end(hi), CLCRT_OK);
  ck_assert_int_eq(clcrt_preempt_end(hi), CLCRT_E_INVALID);
  clcrt_stream_destroy(hi);
  clcrt_stream_destroy(lo);
  gpu_cu()->cuStreamDestroy(chi);
  gpu_cu()->cuStreamDestroy(clo);
  clcrt_runtime_destroy(rt);
}
END_TEST

int main(void) {
  gpu_skip_if_absent("gpu_preempt");
  Suite *su = suite_create("gpu_preempt");
  TCase *tc = tcase_create("preempt");
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, test_yield_mechanism, 0, 2);
  tcase_add_test(tc, test_exactly_once_interleaved);
  tcase_add_test(tc, test_graph_capture);
  tcase_add_test(tc, test_two_runtimes);
  tcase_add_test(tc, test_fallback_under_preemption);
  tcase_add_test(tc, test_refusals);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
