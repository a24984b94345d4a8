/* GPU suite: timeline traces. Every tile of a run appears in its stream's trace
 * exactly once with a consistent unit, CTA rank, cluster and SM; the times are monotone
 * within each CTA; records past the capacity are counted, not written; two streams tracing
 * at once keep their records apart (and a stream without tracing records nothing); a real
 * trace survives the JSON round trip and its summary agrees with the records. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clcrt.h"
#include "common/gpu.h"
#include "common/sched_check.h"
#include "builder.h"
#include "variants.h"

static clcrt_kernel *reg(clcrt_runtime *rt, clcrt_sched sched, clcrt_dim3 cl) {
  return sched_check_reg(rt, sched, CLCRT_GRID_AUTO, cl, (clcrt_dim3){64, 1, 1}, 0, 0, NULL, NULL, NULL);
}

static int cmp_cta_time(const void *pa, const void *pb) {
  const clcrt_trace_record *a = pa, *b = pb;
  if (a->run != b->run) return a->run < b->run ? -1 : 1;
  if (a->cluster != b->cluster) return a->cluster < b->cluster ? -1 : 1;
  if (a->cta_rank != b->cta_rank) return a->cta_rank < b->cta_rank ? -1 : 1;
  if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns ? -1 : 1;
  return a->end_ns < b->end_ns ? -1 : a->end_ns > b->end_ns;
}

/* Checks one stream's trace of `runs` runs over tile grid t with cluster shape cl: each tile
 * once per run, fields consistent with the tile, times monotone per CTA, the sort order, the
 * stolen flags. Returns the number of stolen records. */
static unsigned long long check_trace(const clcrt_trace *tr, clcrt_dim3 t, clcrt_dim3 cl, unsigned runs,
                                      unsigned first_run, int num_sms, clcrt_sched sched, const char *what) {
  size_t n = 0;
  const clcrt_trace_record *r = clcrt_trace_records(tr, &n);
  const size_t ntiles = (size_t)t.x * t.y * t.z;
  ck_assert_msg(n == ntiles * runs, "%s: %zu records for %zu tiles x %u runs", what, n, ntiles, runs);
  ck_assert_uint_eq(clcrt_trace_dropped(tr), 0);
  unsigned char *seen = calloc(ntiles * runs, 1);
  ck_assert_ptr_nonnull(seen);
  const unsigned ux = (t.x + cl.x - 1) / cl.x, uy = (t.y + cl.y - 1) / cl.y;
  unsigned long long stolen = 0;
  for (size_t i = 0; i < n; i++) {
    if (i) GPU_CHECK(r[i - 1].start_ns <= r[i].start_ns, "%s: records not sorted by start", what);
    GPU_CHECK(r[i].end_ns >= r[i].start_ns, "%s: record %zu ends before it starts", what, i);
    GPU_CHECK(r[i].run >= first_run && r[i].run < first_run + runs, "%s: run %u", what, r[i].run);
    GPU_CHECK(r[i].tile < ntiles, "%s: tile %llu of %zu", what, (unsigned long long)r[i].tile, ntiles);
    GPU_CHECK(r[i].sm < num_sms, "%s: SM %u of %d", what, r[i].sm, num_sms);
    GPU_CHECK(r[i].reserved == 0, "%s: reserved %u", what, r[i].reserved);
    size_t k = (size_t)(r[i].run - first_run) * ntiles + r[i].tile;
    GPU_CHECK(!seen[k], "%s: tile %llu recorded twice in run %u", what, (unsigned long long)r[i].tile, r[i].run);
    seen[k] = 1;
    unsigned x = (unsigned)(r[i].tile % t.x), y = (unsigned)(r[i].tile / t.x % t.y),
             z = (unsigned)(r[i].tile / t.x / t.y);
    unsigned unit = x / cl.x + ux * (y / cl.y + uy * (z / cl.z));
    unsigned rank = x % cl.x + cl.x * (y % cl.y + cl.y * (z % cl.z));
    GPU_CHECK(r[i].unit == unit, "%s: tile %llu in unit %u, expected %u", what, (unsigned long long)r[i].tile,
                  r[i].unit, unit);
    GPU_CHECK(r[i].cta_rank == rank, "%s: tile %llu at rank %u, expected %u", what,
                  (unsigned long long)r[i].tile, r[i].cta_rank, rank);
    if (sched == CLCRT_SCHED_FIXED) GPU_CHECK(r[i].cluster == unit, "%s: FIXED ran unit %u in cluster %u", what, unit, r[i].cluster);
    GPU_CHECK((r[i].flags & ~CLCRT_TRACE_STOLEN) == 0, "%s: flags 0x%x", what, r[i].flags);
    stolen += r[i].flags & CLCRT_TRACE_STOLEN;
  }
  for (size_t k = 0; k < ntiles * runs; k++) GPU_CHECK(seen[k], "%s: tile %zu of run %zu missing", what, k % ntiles, k / ntiles);
  free(seen);
  /* Per CTA (run, cluster, rank): one tile after another, the first one not stolen, the rest
   * stolen under STEAL (no cluster here has padded tiles); STATIC's later units are its own. */
  clcrt_trace_record *c = malloc(n * sizeof *c);
  ck_assert_ptr_nonnull(c);
  memcpy(c, r, n * sizeof *c);
  qsort(c, n, sizeof *c, cmp_cta_time);
  for (size_t i = 0; i < n; i++) {
    int same = i && c[i - 1].run == c[i].run && c[i - 1].cluster == c[i].cluster && c[i - 1].cta_rank == c[i].cta_rank;
    if (same) {
      GPU_CHECK(c[i].start_ns >= c[i - 1].end_ns, "%s: CTA (run %u cluster %u rank %u): a tile starts at %llu "
                    "before the previous one ended at %llu", what, c[i].run, c[i].cluster, c[i].cta_rank,
                    (unsigned long long)c[i].start_ns, (unsigned long long)c[i - 1].end_ns);
      GPU_CHECK(!(c[i].flags & CLCRT_TRACE_STOLEN) == (sched != CLCRT_SCHED_STEAL),
                "%s: a later tile of a CTA %s stolen", what, sched == CLCRT_SCHED_STEAL ? "not marked" : "marked");
      GPU_CHECK(c[i].sm == c[i - 1].sm, "%s: a CTA moved from SM %u to %u", what, c[i - 1].sm, c[i].sm);
    } else {
      GPU_CHECK(!(c[i].flags & CLCRT_TRACE_STOLEN), "%s: a CTA's first tile marked stolen", what);
    }
  }
  free(c);
  return stolen;
}

static void read_trace(clcrt_stream *s, clcrt_trace **tr) {
  *tr = NULL;
  clcrt_status st = clcrt_stream_trace_read(s, tr);
  ck_assert_msg(st == CLCRT_OK, "trace_read: %s", clcrt_errmsg(NULL));
  ck_assert_ptr_nonnull(*tr);
}

/* Every tile once, per scheduler and cluster shape, on 1-, 2- and 3-D tile grids; two runs
 * in one trace whose capacity is exactly their tiles (SMs run unequal numbers of them); the
 * summary agrees; the JSON round trip is exact. */
START_TEST(test_every_tile_once) {
  static const clcrt_sched scheds[] = {CLCRT_SCHED_STEAL, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};
  static const char *const names[] = {"STEAL", "STATIC", "FIXED"};
  clcrt_runtime *rt = gpu_runtime();
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  const int big = !gpu_under_sanitizer();
  const clcrt_dim3 grids[] = {{big ? 20012u : 2002u, 1, 1}, {big ? 162u : 42u, 62, 1}, {38, 14, big ? 9u : 3u}};
  const clcrt_dim3 cls[] = {{1, 1, 1}, {2, 1, 1}};
  for (unsigned si = 0; si < 3; si++)
    for (unsigned ci = 0; ci < 2; ci++)
      for (unsigned gi = 0; gi < 3; gi++) {
        clcrt_dim3 t = grids[gi], cl = cls[ci];
        char what[96];
        snprintf(what, sizeof what, "%s cluster %u grid %ux%ux%u", names[si], cl.x, t.x, t.y, t.z);
        clcrt_kernel *k = reg(rt, scheds[si], cl);
        bufs b;
        bufs_make(&b, t, cl, 64, 7 + gi);
        ck_assert_int_eq(clcrt_stream_trace_enable(s, (size_t)t.x * t.y * t.z * 2), CLCRT_OK);
        ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
        ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
        clcrt_trace *tr;
        read_trace(s, &tr);
        bufs_check(&b, cl, 2, 0, what);
        unsigned long long stolen = check_trace(tr, t, cl, 2, 0, rt->num_sms, scheds[si], what);
        clcrt_trace_summary sum = CLCRT_TRACE_SUMMARY_INIT;
        ck_assert_int_eq(clcrt_trace_summarize(tr, &sum), CLCRT_OK);
        ck_assert_uint_eq(sum.tiles, 2ull * t.x * t.y * t.z);
        ck_assert_uint_eq(sum.steals, stolen);
        ck_assert_uint_eq(sum.runs, 2);
        ck_assert_uint_eq(sum.dropped, 0);
        ck_assert(sum.span_ns > 0 && sum.busy_mean > 0 && sum.busy_mean <= 1.0 + 1e-9);
        ck_assert(sum.imbalance >= 1.0 - 1e-9);
        if (si == 0 && ci == 0 && gi == 0) {
          /* The timer's granularity as the records show it: the gcd of every time's offset. */
          size_t nr = 0;
          const clcrt_trace_record *rr = clcrt_trace_records(tr, &nr);
          unsigned long long g = 0;
          for (size_t i = 0; i < nr; i++) {
            unsigned long long d[2] = {rr[i].start_ns - rr[0].start_ns, rr[i].end_ns - rr[0].start_ns};
            for (int j = 0; j < 2; j++) {
              unsigned long long u = g, v = d[j];
              while (v) {
                unsigned long long w = u % v;
                u = v, v = w;
              }
              g = u;
            }
          }
          printf("gpu_trace: %%globaltimer granularity in these records: %llu ns\n", g);
          printf("gpu_trace: %s: %llu tiles, %llu stolen, span %.1f us, tail %.1f us, imbalance %.3f, busy %.3f, "
                 "%u SMs\n",
                 what, sum.tiles, sum.steals, sum.span_ns / 1e3, sum.tail_ns / 1e3, sum.imbalance, sum.busy_mean,
                 sum.num_sms);
          char path[] = "/tmp/clcrt_gpu_trace_XXXXXX";
          int fd = mkstemp(path);
          ck_assert_int_ge(fd, 0);
          close(fd);
          ck_assert_int_eq(clcrt_trace_save_json(tr, path), CLCRT_OK);
          clcrt_trace *back = NULL;
          ck_assert_int_eq(clcrt_trace_load_json(path, &back), CLCRT_OK);
          size_t n1, n2;
          const clcrt_trace_record *r1 = clcrt_trace_records(tr, &n1), *r2 = clcrt_trace_records(back, &n2);
          ck_assert_uint_eq(n1, n2);
          ck_assert(memcmp(r1, r2, n1 * sizeof *r1) == 0);
          clcrt_trace_destroy(back);
          unlink(path);
        }
        if (scheds[si] == CLCRT_SCHED_FIXED) ck_assert_uint_eq(stolen, 0);
        clcrt_trace_destroy(tr);
        /* The read emptied the buffer: the next run is run 2 and alone. */
        ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
        read_trace(s, &tr);
        check_trace(tr, t, cl, 1, 2, rt->num_sms, scheds[si], what);
        clcrt_trace_destroy(tr);
        bufs_free(&b);
      }
  ck_assert_int_eq(clcrt_stream_trace_enable(s, 0), CLCRT_OK);
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* A kernel's first traced run made while its stream is being captured (global mode, the
 * strictest): nothing is compiled inside the capture. The observed variant was built when
 * tracing was enabled; the one that also claims from the graph table is not built yet, so the
 * capture holds the fallback (the observed variant on a full grid, one unit per cluster) and
 * asks for it; captured again once it is built, the run claims. Both graphs replayed: every
 * tile recorded once per run. Then an untraced plain run of the same kernel. */
START_TEST(test_traced_capture) {
  clcrt_runtime *rt = gpu_runtime();
  const clcrt__driver *cu = gpu_cu();
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  clcrt_dim3 cl = {1, 1, 1}, t = {5003, 1, 1};
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, cl);
  rt->long_cycles = 0;
  bufs b;
  bufs_make(&b, t, cl, 64, 13);
  ck_assert_int_eq(clcrt_stream_trace_enable(s, 4 * (size_t)t.x), CLCRT_OK);
  ck_assert_ptr_nonnull(k->vars->var[CLCRT_USE_TRACE]); /* built by the enable */
  CUgraph g[2] = {NULL, NULL};
  CUgraphExec e[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    if (i == 1) {
      clcrt__builder_wait(rt);
      ck_assert_ptr_nonnull(k->vars->var[CLCRT_USE_TRACE | CLCRT_USE_GRAPH]);
    }
    ck_assert_int_eq(cu->cuStreamBeginCapture(clcrt_stream_cu(s), CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    clcrt_status st = clcrt_run(s, k, t, &b.a, sizeof b.a);
    ck_assert_int_eq(cu->cuStreamEndCapture(clcrt_stream_cu(s), &g[i]), CUDA_SUCCESS);
    ck_assert_msg(st == CLCRT_OK, "traced run under capture: %s: %s", clcrt_status_name(st), clcrt_errmsg(rt));
    if (i == 0) ck_assert_uint_eq(k->vars->requested & (1u << (CLCRT_USE_TRACE | CLCRT_USE_GRAPH)),
                                  1u << (CLCRT_USE_TRACE | CLCRT_USE_GRAPH));
    ck_assert_int_eq(cu->cuGraphInstantiateWithFlags(&e[i], g[i], 0), CUDA_SUCCESS);
  }
  for (int i = 0; i < 2; i++) ck_assert_int_eq(cu->cuGraphLaunch(e[i], clcrt_stream_cu(s)), CUDA_SUCCESS);
  clcrt_trace *tr;
  read_trace(s, &tr);
  size_t n = 0;
  const clcrt_trace_record *r = clcrt_trace_records(tr, &n);
  ck_assert_uint_eq(n, 2 * t.x);
  unsigned char *seen = calloc(2 * t.x, 1);
  unsigned long long stolen = 0;
  for (size_t i = 0; i < n; i++) {
    GPU_CHECK(r[i].run < 2 && r[i].tile < t.x && !seen[r[i].run * t.x + r[i].tile],
              "traced capture: run %u tile %llu twice or out of range", r[i].run, (unsigned long long)r[i].tile);
    seen[r[i].run * t.x + r[i].tile] = 1;
    GPU_CHECK(r[i].run == 1 || !(r[i].flags & CLCRT_TRACE_STOLEN), "traced capture: the fallback stole a unit");
    stolen += r[i].flags & CLCRT_TRACE_STOLEN;
  }
  printf("gpu_trace: traced captures: the fallback, then the graph variant (%llu units stolen)\n", stolen);
  free(seen);
  clcrt_trace_destroy(tr);
  ck_assert_int_eq(clcrt_stream_trace_enable(s, 0), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
  bufs_check(&b, cl, 3, 0, "traced captures, then a plain run");
  for (int i = 0; i < 2; i++) {
    cu->cuGraphExecDestroy(e[i]);
    cu->cuGraphDestroy(g[i]);
  }
  bufs_free(&b);
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* A capacity far below the tiles: exactly the capacity is kept, the rest counted (memcheck
 * runs of this suite see any write past the buffer); the next read starts empty. (A
 * capacity of exactly the tiles traced keeps them all: test_every_tile_once.) */
START_TEST(test_overflow_counted) {
  clcrt_runtime *rt = gpu_runtime();
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  clcrt_dim3 cl = {1, 1, 1}, t = {gpu_under_sanitizer() ? 4001u : 40001u, 1, 1};
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, cl);
  bufs b;
  bufs_make(&b, t, cl, 64, 11);
  const size_t cap = 1000;
  ck_assert_int_eq(clcrt_stream_trace_enable(s, cap), CLCRT_OK);

  for (unsigned rep = 0; rep < 2; rep++) {
    ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
    clcrt_trace *tr;
    read_trace(s, &tr);
    size_t n = 0;
    const clcrt_trace_record *r = clcrt_trace_records(tr, &n);
    printf("gpu_trace: capacity %zu: %zu records kept, %llu dropped of %u tiles\n", cap, n,
           clcrt_trace_dropped(tr), t.x);
    ck_assert_uint_eq(n, cap); /* exactly the capacity, however the tiles spread */
    ck_assert_uint_eq(n + clcrt_trace_dropped(tr), t.x);
    for (size_t i = 0; i < n; i++) {
      GPU_CHECK(r[i].tile < t.x, "overflow: tile %llu of %u", (unsigned long long)r[i].tile, t.x);
      GPU_CHECK(r[i].run == rep, "overflow: run %u, expected %u", r[i].run, rep);
    }
    clcrt_trace_destroy(tr);
  }
  bufs_check(&b, cl, 2, 0, "overflow");
  bufs_free(&b);
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Two streams tracing at once and a third not tracing, runs interleaved: each trace holds
 * exactly its own stream's tiles. */
START_TEST(test_two_streams_apart) {
  clcrt_runtime *rt = gpu_runtime();
  enum { NS = 3 };
  CUstream cu[NS];
  clcrt_stream *s[NS];
  for (int i = 0; i < NS; i++) {
    ck_assert_int_eq(gpu_cu()->cuStreamCreate(&cu[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ck_assert_int_eq(clcrt_stream_create(rt, cu[i], &s[i]), CLCRT_OK);
  }
  const int big = !gpu_under_sanitizer();
  const clcrt_dim3 t[NS] = {{big ? 50003u : 5003u, 1, 1}, {big ? 70002u : 7002u, 1, 1}, {big ? 30011u : 3011u, 1, 1}};
  const clcrt_dim3 cl[NS] = {{1, 1, 1}, {2, 1, 1}, {1, 1, 1}};
  clcrt_kernel *k[NS];
  bufs b[NS];
  for (int i = 0; i < NS; i++) {
    k[i] = reg(rt, CLCRT_SCHED_STEAL, cl[i]);
    bufs_make(&b[i], t[i], cl[i], 64, 20 + i);
  }
  ck_assert_int_eq(clcrt_stream_trace_enable(s[0], 4 * (size_t)t[0].x + 8192), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_trace_enable(s[1], 4 * (size_t)t[1].x + 8192), CLCRT_OK);
  const unsigned reps = 3;
  for (unsigned r = 0; r < reps; r++)
    for (int i = 0; i < NS; i++) ck_assert_int_eq(clcrt_run(s[i], k[i], t[i], &b[i].a, sizeof b[i].a), CLCRT_OK);
  for (int i = 0; i < 2; i++) {
    clcrt_trace *tr;
    read_trace(s[i], &tr);
    char what[32];
    snprintf(what, sizeof what, "stream %d", i);
    check_trace(tr, t[i], cl[i], reps, 0, rt->num_sms, CLCRT_SCHED_STEAL, what);
    clcrt_trace_destroy(tr);
  }
  clcrt_trace *tr = NULL;
  ck_assert_int_eq(clcrt_stream_trace_read(s[2], &tr), CLCRT_E_INVALID);
  ck_assert_ptr_null(tr);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "trace_enable"), "%s", clcrt_errmsg(rt));
  for (int i = 0; i < NS; i++) {
    ck_assert_int_eq(clcrt_stream_sync(s[i]), CLCRT_OK);
    bufs_check(&b[i], cl[i], reps, 0, "two streams");
    bufs_free(&b[i]);
    clcrt_stream_destroy(s[i]);
    gpu_cu()->cuStreamDestroy(cu[i]);
  }
  clcrt_runtime_destroy(rt);
}
END_TEST

/* The API's refusals and switching tracing off and on. */
START_TEST(test_api) {
  clcrt_runtime *rt = gpu_runtime();
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  clcrt_trace *tr = NULL;
  ck_assert_int_eq(clcrt_stream_trace_enable(NULL, 10), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_stream_trace_read(NULL, &tr), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_stream_trace_read(s, NULL), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_stream_trace_read(s, &tr), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_stream_trace_enable(s, (size_t)1 << 62), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "too large"), "%s", clcrt_errmsg(rt));
  clcrt_dim3 cl = {1, 1, 1}, t = {3001, 1, 1};
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, cl);
  bufs b;
  bufs_make(&b, t, cl, 64, 31);
  /* on, run, off (buffer freed), run untraced, on again: an empty trace, then one run */
  ck_assert_int_eq(clcrt_stream_trace_enable(s, 10000), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_trace_enable(s, 0), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_trace_read(s, &tr), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_stream_trace_enable(s, 10000), CLCRT_OK);
  read_trace(s, &tr);
  size_t n = 99;
  ck_assert_ptr_null(clcrt_trace_records(tr, &n));
  ck_assert_uint_eq(n, 0);
  clcrt_trace_destroy(tr);
  ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
  read_trace(s, &tr);
  check_trace(tr, t, cl, 1, 0, rt->num_sms, CLCRT_SCHED_STEAL, "re-enabled");
  clcrt_trace_destroy(tr);
  bufs_check(&b, cl, 3, 0, "api");
  bufs_free(&b);
  clcrt_stream_destroy(s); /* with tracing on: frees the buffer */
  clcrt_runtime_destroy(rt);
}
END_TEST

int main(void) {
  gpu_skip_if_absent("gpu_trace");
  Suite *su = suite_create("gpu_trace");
  TCase *tc = tcase_create("trace");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_every_tile_once);
  tcase_add_test(tc, test_overflow_counted);
  tcase_add_test(tc, test_traced_capture);
  tcase_add_test(tc, test_two_streams_apart);
  tcase_add_test(tc, test_api);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
