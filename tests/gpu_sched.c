/* GPU suite: every scheduler the device supports x cluster shapes x tile grids x block
 * shapes. Every tile must run exactly once, with the right coordinate, linear index and
 * CTA rank; results equal a CPU reference on random data with the output poisoned first;
 * the prologue runs once per CTA. Plus two streams at once, graph capture and replay,
 * faults, argument sizes, statistics, big shared memory and 16-CTA clusters. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clcrt.h"
#include "common/gpu.h"
#include "common/sched_check.h"

typedef struct variant {
  const char *name;
  clcrt_sched sched;
  clcrt_grid grid;
} variant;

static const variant k_variants[] = {
    {"steal-persistent", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT},
    {"steal-full", CLCRT_SCHED_STEAL, CLCRT_GRID_FULL},
    {"static", CLCRT_SCHED_STATIC, CLCRT_GRID_AUTO},
    {"fixed", CLCRT_SCHED_FIXED, CLCRT_GRID_AUTO},
    {"clc", CLCRT_SCHED_CLC, CLCRT_GRID_AUTO},
};
static const clcrt_dim3 k_clusters[] = {{1, 1, 1}, {2, 1, 1}, {4, 1, 1}, {2, 2, 1}};
#define NVAR (int)(sizeof k_variants / sizeof k_variants[0])
#define NCLU (int)(sizeof k_clusters / sizeof k_clusters[0])

static clcrt_kernel *reg(clcrt_runtime *rt, clcrt_sched sched, clcrt_grid grid, clcrt_dim3 cluster, clcrt_dim3 block,
                         int prologue, unsigned smem, const char *src, const char *fn) {
  return sched_check_reg(rt, sched, grid, cluster, block, prologue, smem, src, fn, NULL);
}

static int variant_supported(clcrt_runtime *rt, const variant *v) { return v->sched != CLCRT_SCHED_CLC || rt->sm >= 100; }

/* One test per (variant, cluster shape): every grid, both block shapes. */
START_TEST(test_matrix) {
  const variant *v = &k_variants[_i / NCLU];
  clcrt_dim3 cl = k_clusters[_i % NCLU];
  clcrt_runtime *rt = gpu_runtime();
  if (!variant_supported(rt, v)) {
    printf("gpu_sched: %s not supported on %s, skipped\n", v->name, rt->arch);
    clcrt_runtime_destroy(rt);
    return;
  }
  int san = gpu_under_sanitizer();
  /* {2, 66001, 1}: more units along y than a grid's y extent allows (65535), so FIXED falls
   * back from its 3-D launch to the 1-D one. */
  clcrt_dim3 grids[] = {{1, 1, 1}, {7, 1, 1},   {1000, 1, 1},  {san ? 20011u : 100003u, 1, 1},
                        {37, 53, 1}, {5, 6, 7}, {2, 66001, 1}};
  clcrt_dim3 blocks[] = {{128, 1, 1}, {16, 8, 1}};
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  for (int bi = 0; bi < 2; bi++) {
    int prologue = bi == 0;
    clcrt_kernel *k = reg(rt, v->sched, v->grid, cl, blocks[bi], prologue, 0, NULL, NULL);
    unsigned nt = blocks[bi].x * blocks[bi].y * blocks[bi].z;
    for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++) {
      char what[160];
      snprintf(what, sizeof what, "%s cluster(%u,%u,%u) block(%u,%u,1) tiles(%u,%u,%u)", v->name, cl.x, cl.y, cl.z,
               blocks[bi].x, blocks[bi].y, grids[gi].x, grids[gi].y, grids[gi].z);
      bufs b;
      bufs_make(&b, grids[gi], cl, nt, (uint64_t)(_i * 100 + gi * 10 + bi));
      ck_assert_msg(clcrt_run(s, k, grids[gi], &b.a, sizeof b.a) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(rt));
      ck_assert_msg(clcrt_stream_sync(s) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(rt));
      bufs_check(&b, cl, 1, prologue, what);
      /* A second run on the same stream finds the counter restored. */
      if (gi == 2) {
        ck_assert_int_eq(clcrt_run(s, k, grids[gi], &b.a, sizeof b.a), CLCRT_OK);
        ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
        bufs_check(&b, cl, 2, 0, what);
      }
      bufs_free(&b);
    }
  }
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_two_streams) {
  clcrt_runtime *rt = gpu_runtime();
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, (clcrt_dim3){2, 1, 1}, (clcrt_dim3){128, 1, 1},
                        0, 0, NULL, NULL);
  clcrt_kernel *kf = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_FULL, (clcrt_dim3){2, 1, 1}, (clcrt_dim3){128, 1, 1}, 0,
                         0, NULL, NULL);
  clcrt_stream *s1 = NULL, *s2 = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s1), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s2), CLCRT_OK);
  clcrt_dim3 t1 = {30011, 1, 1}, t2 = {777, 3, 1};
  bufs b1, b2;
  bufs_make(&b1, t1, (clcrt_dim3){2, 1, 1}, 128, 1);
  bufs_make(&b2, t2, (clcrt_dim3){2, 1, 1}, 128, 2);
  const unsigned reps = 25;
  for (unsigned r = 0; r < reps; r++) {
    ck_assert_int_eq(clcrt_run(s1, r % 2 ? k : kf, t1, &b1.a, sizeof b1.a), CLCRT_OK);
    ck_assert_int_eq(clcrt_run(s2, r % 3 ? kf : k, t2, &b2.a, sizeof b2.a), CLCRT_OK);
  }
  ck_assert_int_eq(clcrt_stream_sync(s1), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(s2), CLCRT_OK);
  bufs_check(&b1, (clcrt_dim3){2, 1, 1}, reps, 0, "stream 1");
  bufs_check(&b2, (clcrt_dim3){2, 1, 1}, reps, 0, "stream 2");
  bufs_free(&b1), bufs_free(&b2);
  clcrt_stream_destroy(s1);
  clcrt_stream_destroy(s2);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Many back-to-back runs of large grids: a response overwritten before it was read, or a
 * claim set not zeroed for the next run, shows up as a tile run 0 or 2 times. */
START_TEST(test_stress) {
  clcrt_runtime *rt = gpu_runtime();
  clcrt_dim3 cls[] = {{1, 1, 1}, {2, 1, 1}, {4, 1, 1}};
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  for (int c = 0; c < 3; c++) {
    clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, cls[c], (clcrt_dim3){64, 1, 1}, 0, 0, NULL, NULL);
    clcrt_dim3 t = {gpu_under_sanitizer() ? 4099u : 200003u, 1, 1};
    const unsigned reps = gpu_under_sanitizer() ? 3 : 40;
    bufs b;
    bufs_make(&b, t, cls[c], 64, 7 + c);
    for (unsigned r = 0; r < reps; r++) ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
    ck_assert_msg(clcrt_stream_sync(s) == CLCRT_OK, "%s", clcrt_errmsg(rt));
    bufs_check(&b, cls[c], reps, 0, "stress");
    bufs_free(&b);
  }
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Grid sizes around the claim machinery's boundaries (nvrtc_src/clcrt_steal.cuh): fewer units
 * than clusters, one unit per shard, shard remainders, sizes just past powers of two, with a
 * prologue, on every cluster shape and both STEAL grids, several runs back to back on one
 * stream (each run uses one of the stream's two claim sets and zeroes the other). */
START_TEST(test_sizes) {
  clcrt_dim3 cl = k_clusters[_i % NCLU];
  clcrt_grid grid = _i / NCLU ? CLCRT_GRID_FULL : CLCRT_GRID_PERSISTENT;
  clcrt_runtime *rt = gpu_runtime();
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, grid, cl, (clcrt_dim3){96, 1, 1}, 1, 0, NULL, NULL);
  unsigned sizes[] = {1, 2, 3, 15, 16, 17, 33, 64, 65, 127, 129, 257, 1023, 1025, 4097, 8191, 16385};
  const unsigned n = gpu_under_sanitizer() ? 9 : (unsigned)(sizeof sizes / sizeof sizes[0]);
  for (unsigned si = 0; si < n; si++) {
    clcrt_dim3 t = {sizes[si] * cl.x, si % 3 == 2 ? cl.y + 1 : 1, 1};
    char what[128];
    snprintf(what, sizeof what, "%s cluster(%u,%u,%u) tiles(%u,%u,1)", grid == CLCRT_GRID_FULL ? "full" : "persistent",
             cl.x, cl.y, cl.z, t.x, t.y);
    const unsigned reps = 3;
    bufs b;
    bufs_make(&b, t, cl, 96, 40 + si);
    for (unsigned r = 0; r < reps; r++) ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
    ck_assert_msg(clcrt_stream_sync(s) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(rt));
    bufs_check(&b, cl, reps, 0, what);
    bufs_free(&b);
  }
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Captures two runs on s (k1, then k2, over the same tiles and arguments) into a graph and
 * instantiates it; *g is the graph, to destroy with the returned executable. */
static CUgraphExec capture_two(clcrt_stream *s, clcrt_kernel *k1, clcrt_kernel *k2, clcrt_dim3 t, bufs *b, CUgraph *g) {
  const clcrt__driver *cu = gpu_cu();
  CUgraphExec ge = NULL;
  ck_assert_int_eq(cu->cuStreamBeginCapture(clcrt_stream_cu(s), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  ck_assert_int_eq(clcrt_run(s, k1, t, &b->a, sizeof b->a), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(s, k2, t, &b->a, sizeof b->a), CLCRT_OK);
  ck_assert_int_eq(cu->cuStreamEndCapture(clcrt_stream_cu(s), g), CUDA_SUCCESS);
  ck_assert_int_eq(cu->cuGraphInstantiateWithFlags(&ge, *g, 0), CUDA_SUCCESS);
  return ge;
}

START_TEST(test_graph_replay) {
  clcrt_runtime *rt = gpu_runtime();
  const clcrt__driver *cu = gpu_cu();
  clcrt_dim3 cl = {2, 1, 1};
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, cl, (clcrt_dim3){64, 1, 1}, 0, 0, NULL, NULL);
  clcrt_kernel *kf = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_FULL, cl, (clcrt_dim3){64, 1, 1}, 0, 0, NULL, NULL);
  /* k's graph variant built now: its captured run claims from the graph table. kf's is not: its
   * captured run is the fallback (one unit per cluster, no claims); the graph holds both. */
  ck_assert_int_eq(clcrt_kernel_prepare(k, CLCRT_USE_GRAPH), CLCRT_OK);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  clcrt_dim3 t = {5003, 1, 1};
  bufs b;
  bufs_make(&b, t, cl, 64, 3);
  CUgraph g = NULL;
  CUgraphExec ge = capture_two(s, k, kf, t, &b, &g);
  const unsigned reps = 60;
  for (unsigned r = 0; r < reps; r++) ck_assert_int_eq(cu->cuGraphLaunch(ge, clcrt_stream_cu(s)), CUDA_SUCCESS);
  /* And a plain run after the replays still finds the counter ready. */
  ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
  bufs_check(&b, cl, 2 * reps + 1, 0, "graph replay");
  cu->cuGraphExecDestroy(ge);
  cu->cuGraphDestroy(g);
  bufs_free(&b);
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_fault) {
  if (gpu_under_sanitizer()) return; /* the fault is deliberate; memcheck would report it */
  clcrt_runtime *rt = gpu_runtime();
  static const char *src = "struct FaultArgs { int *p; };\n"
                           "__device__ void fault_tile(const clcrt::Tile &t, const FaultArgs &a) {\n"
                           "  if (t.linear == 5 && threadIdx.x == 0) *(volatile int *)(a.p + 0x10) = 1;\n"
                           "}\n";
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = src, d.tile_fn = "fault_tile", d.args_type = "FaultArgs", d.block = (clcrt_dim3){32, 1, 1};
  clcrt_kernel *k = NULL;
  ck_assert_int_eq(clcrt_register(rt, &d, &k), CLCRT_OK);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  struct {
    void *p;
  } a = {NULL};
  ck_assert_int_eq(clcrt_run(s, k, (clcrt_dim3){100, 1, 1}, &a, sizeof a), CLCRT_OK);
  clcrt_status st = clcrt_stream_sync(s);
  ck_assert_int_eq(st, CLCRT_E_CUDA);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "CUDA_ERROR_ILLEGAL_ADDRESS"), "message: %s", clcrt_errmsg(rt));
  st = clcrt_run(s, k, (clcrt_dim3){100, 1, 1}, &a, sizeof a);
  ck_assert_int_eq(st, CLCRT_E_CUDA);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "CUDA_ERROR"), "message: %s", clcrt_errmsg(rt));
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt); /* must not hang: the test has a timeout */
}
END_TEST

START_TEST(test_args_size_and_misuse) {
  clcrt_runtime *rt = gpu_runtime();
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO, (clcrt_dim3){1, 1, 1}, (clcrt_dim3){32, 1, 1}, 0, 0,
                        NULL, NULL);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  CheckArgs a;
  memset(&a, 0, sizeof a);
  size_t sizes[] = {sizeof a + 4, sizeof a - 8, 0, 1};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(clcrt_run(s, k, (clcrt_dim3){10, 1, 1}, &a, sizes[i]), CLCRT_E_INVALID);
    char want[64];
    snprintf(want, sizeof want, "args_size is %zu bytes", sizes[i]);
    ck_assert_msg(strstr(clcrt_errmsg(rt), want), "message: %s", clcrt_errmsg(rt));
    snprintf(want, sizeof want, "parameter is %zu", sizeof a);
    ck_assert_msg(strstr(clcrt_errmsg(rt), want), "message: %s", clcrt_errmsg(rt));
  }
  ck_assert_int_eq(clcrt_run(s, k, (clcrt_dim3){10, 1, 1}, NULL, sizeof a), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_run(s, NULL, (clcrt_dim3){10, 1, 1}, &a, sizeof a), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_run(NULL, k, (clcrt_dim3){10, 1, 1}, &a, sizeof a), CLCRT_E_INVALID);
  /* Empty grids are no-ops: nothing is launched, so the NULL pointers are never used. */
  ck_assert_int_eq(clcrt_run(s, k, (clcrt_dim3){0, 5, 1}, &a, sizeof a), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(s, k, (clcrt_dim3){5, 1, 0}, &a, sizeof a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
  /* A kernel of another runtime. */
  clcrt_runtime *rt2 = gpu_runtime();
  clcrt_kernel *k2 = reg(rt2, CLCRT_SCHED_FIXED, CLCRT_GRID_AUTO, (clcrt_dim3){1, 1, 1}, (clcrt_dim3){32, 1, 1}, 0, 0,
                         NULL, NULL);
  ck_assert_int_eq(clcrt_run(s, k2, (clcrt_dim3){10, 1, 1}, &a, sizeof a), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "another runtime"), "message: %s", clcrt_errmsg(rt));
  clcrt_runtime_destroy(rt2);
  if (rt->sm < 100) {
    clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
    d.source = sched_check_src, d.tile_fn = "check_tile", d.args_type = "CheckArgs", d.block = (clcrt_dim3){32, 1, 1};
    d.sched = CLCRT_SCHED_CLC;
    clcrt_kernel *kc = NULL;
    ck_assert_int_eq(clcrt_register(rt, &d, &kc), CLCRT_E_UNSUPPORTED);
    ck_assert_msg(strstr(clcrt_errmsg(rt), rt->arch), "message: %s", clcrt_errmsg(rt));
  }
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_stats) {
  clcrt_runtime *rt = gpu_runtime();
  clcrt_dim3 cl = {2, 1, 1};
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, cl, (clcrt_dim3){128, 1, 1}, 0, 0, NULL, NULL);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  clcrt_stream_stats st = CLCRT_STREAM_STATS_INIT;
  ck_assert_int_eq(clcrt_stream_stats_read(s, &st), CLCRT_E_INVALID); /* off */
  ck_assert_int_eq(clcrt_stream_stats_enable(s, 1), CLCRT_OK);
  clcrt_dim3 t = {10001, 1, 1};
  bufs b;
  bufs_make(&b, t, cl, 128, 4);
  ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_stats_read(s, &st), CLCRT_OK);
  ck_assert_uint_eq(st.runs, 2);
  ck_assert_uint_eq(st.tiles, 2 * 10001);
  unsigned long long sum = 0;
  for (unsigned i = 0; i < st.num_sms; i++) sum += st.tiles_per_sm[i];
  ck_assert_uint_eq(sum, 2 * 10001);
  ck_assert_uint_gt(st.clusters, 0);
  /* Units: 5001 per run, each cluster's first unit is not a steal. */
  ck_assert_uint_eq(st.steals + st.clusters, 2 * 5001);
  ck_assert_uint_ge(st.max_units_per_cluster, 5001 / st.clusters);
  printf("gpu_sched: stats: %llu tiles on %u SMs, %llu clusters, %llu steals, at most %llu units per cluster\n",
         st.tiles, st.num_sms, st.clusters, st.steals, st.max_units_per_cluster);
  bufs_check(&b, cl, 2, 0, "stats");
  ck_assert_int_eq(clcrt_stream_stats_read(s, &st), CLCRT_OK); /* reset by the read */
  ck_assert_uint_eq(st.tiles, 0);
  ck_assert_int_eq(clcrt_stream_stats_enable(s, 0), CLCRT_OK);
  bufs_free(&b);
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_big_cluster_and_smem) {
  clcrt_runtime *rt = gpu_runtime();
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  /* 16 CTAs per cluster: non-portable, allowed on H100. */
  clcrt_dim3 cl = {16, 1, 1};
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, cl, (clcrt_dim3){64, 1, 1}, 0, 0, NULL, NULL);
  clcrt_dim3 t = {1001, 1, 1};
  bufs b;
  bufs_make(&b, t, cl, 64, 5);
  clcrt_status st = clcrt_run(s, k, t, &b.a, sizeof b.a);
  if (st == CLCRT_OK) {
    ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
    bufs_check(&b, cl, 1, 0, "cluster 16");
  } else {
    ck_assert_int_eq(st, CLCRT_E_INVALID);
    printf("gpu_sched: 16-CTA clusters refused: %s\n", clcrt_errmsg(rt));
  }
  bufs_free(&b);
  /* 100 KiB of dynamic shared memory, used by the tile. */
  static const char *src =
      "struct SmemArgs { const float *x; float *y; };\n"
      "__device__ void smem_tile(const clcrt::Tile &t, const SmemArgs &a) {\n"
      "  float *sm = (float *)clcrt::smem();\n"
      "  const unsigned n = 100 * 1024 / 4;\n"
      "  __syncthreads();\n"
      "  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) sm[i] = a.x[t.linear * n + i];\n"
      "  __syncthreads();\n"
      "  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) a.y[t.linear * n + i] = 2.f * sm[n - 1 - i];\n"
      "}\n";
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = src, d.tile_fn = "smem_tile", d.args_type = "SmemArgs", d.block = (clcrt_dim3){256, 1, 1};
  d.smem_bytes = 100 * 1024;
  d.sched = CLCRT_SCHED_STEAL;
  clcrt_kernel *ks = NULL;
  ck_assert_msg(clcrt_register(rt, &d, &ks) == CLCRT_OK, "%s", clcrt_errmsg(rt));
  const unsigned ntile = 300, n = 100 * 1024 / 4;
  float *hx = malloc((size_t)ntile * n * 4), *hy = malloc((size_t)ntile * n * 4);
  fill_random(hx, (size_t)ntile * n, 9);
  struct {
    CUdeviceptr x, y;
  } sa = {gpu_alloc((size_t)ntile * n * 4), gpu_alloc((size_t)ntile * n * 4)};
  gpu_put(sa.x, hx, (size_t)ntile * n * 4);
  gpu_fill_u8(sa.y, 0xff, (size_t)ntile * n * 4);
  ck_assert_int_eq(clcrt_run(s, ks, (clcrt_dim3){ntile, 1, 1}, &sa, sizeof sa), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
  gpu_get(hy, sa.y, (size_t)ntile * n * 4);
  for (size_t tl = 0; tl < ntile; tl++)
    for (size_t i = 0; i < n; i++)
      if (hy[tl * n + i] != 2.f * hx[tl * n + n - 1 - i]) ck_abort_msg("smem tile %zu element %zu", tl, i);
  gpu_free(sa.x), gpu_free(sa.y), free(hx), free(hy);
  /* Over the device's limit: an error naming both numbers. */
  d.smem_bytes = 300 * 1024;
  ck_assert_int_eq(clcrt_register(rt, &d, &ks), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "307200"), "message: %s", clcrt_errmsg(rt));
  char lim[32];
  snprintf(lim, sizeof lim, "%d", rt->max_smem_optin);
  ck_assert_msg(strstr(clcrt_errmsg(rt), lim), "message: %s", clcrt_errmsg(rt));
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* STEAL with clusters of several CTAs whose tiles cost different amounts: rank 0 spins on one
 * unit in eight, the other ranks never, and each tile syncs its CTA (a tile function's
 * __syncthreads). Checked: every tile once, and every CTA of a cluster runs the same units in
 * the same order (what a tile function that shares data across the cluster relies on). How
 * far the other ranks ran ahead of rank 0 is printed: a response is published at most one
 * ahead of the leader's CTA (nvrtc_src/clcrt_ring.cuh, invariant 7), so at most one unit, or one claim's
 * units, plus the ones in progress. */
static const char *k_order_src =
    "struct OrderArgs { unsigned *hits; unsigned *seq; unsigned long long *t0; unsigned max_iter, spin_ns; };\n"
    "__device__ void order_tile(const clcrt::Tile &t, const OrderArgs &a) {\n"
    "  unsigned cid, cs;\n"
    "  asm volatile(\"mov.u32 %0, %%clusterid.x;\" : \"=r\"(cid));\n"
    "  asm volatile(\"mov.u32 %0, %%cluster_nctarank;\" : \"=r\"(cs));\n"
    "  if (threadIdx.x == 0) {\n"
    "    unsigned long long t0;\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "    if (t.iteration < a.max_iter) {\n"
    "      unsigned long long i = ((unsigned long long)cid * cs + t.cta_rank) * a.max_iter + t.iteration;\n"
    "      a.seq[i] = t.unit + 1;\n"
    "      a.t0[i] = t0;\n"
    "    }\n"
    "    atomicAdd(&a.hits[t.linear], 1u);\n"
    "    if (t.cta_rank == 0 && ((t.unit * 2654435761u) >> 29) == 0) {\n"
    "      unsigned long long now = t0;\n"
    "      while (now - t0 < a.spin_ns) asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(now));\n"
    "    }\n"
    "  }\n"
    "  __syncthreads();\n"
    "}\n";

typedef struct {
  CUdeviceptr hits, seq, t0;
  unsigned max_iter, spin_ns;
} OrderArgs;

START_TEST(test_cluster_order) {
  clcrt_runtime *rt = gpu_runtime();
  const int san = gpu_under_sanitizer();
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  const clcrt_dim3 cls[] = {{2, 1, 1}, {4, 1, 1}};
  const clcrt_grid grids[] = {CLCRT_GRID_PERSISTENT, CLCRT_GRID_FULL};
  for (int gi = 0; gi < 2; gi++)
    for (int ci = 0; ci < 2; ci++) {
      /* Cluster ids stay below the units (a grid has at most one cluster per unit). */
      const unsigned cs = cls[ci].x, units = san ? 3001u : 20011u, max_iter = 128;
      const size_t max_clusters = units, nrec = max_clusters * cs * max_iter;
      clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
      d.source = k_order_src, d.tile_fn = "order_tile", d.args_type = "OrderArgs";
      d.block = (clcrt_dim3){256, 1, 1}, d.cluster = cls[ci], d.sched = CLCRT_SCHED_STEAL, d.grid = grids[gi];
      clcrt_kernel *k = NULL;
      ck_assert_msg(clcrt_register(rt, &d, &k) == CLCRT_OK, "%s", clcrt_errmsg(rt));
      OrderArgs a = {gpu_alloc((size_t)units * cs * 4), gpu_alloc(nrec * 4), gpu_alloc(nrec * 8), max_iter,
                     san ? 2000u : 20000u};
      gpu_fill_u8(a.hits, 0, (size_t)units * cs * 4);
      gpu_fill_u8(a.seq, 0, nrec * 4);
      ck_assert_int_eq(clcrt_run(s, k, (clcrt_dim3){units * cs, 1, 1}, &a, sizeof a), CLCRT_OK);
      ck_assert_msg(clcrt_stream_sync(s) == CLCRT_OK, "%s", clcrt_errmsg(rt));
      unsigned *hits = malloc((size_t)units * cs * 4), *seq = malloc(nrec * 4);
      unsigned long long *t0 = malloc(nrec * 8);
      gpu_get(hits, a.hits, (size_t)units * cs * 4);
      gpu_get(seq, a.seq, nrec * 4);
      gpu_get(t0, a.t0, nrec * 8);
      for (size_t i = 0; i < (size_t)units * cs; i++)
        ck_assert_msg(hits[i] == 1, "%u-CTA clusters, grid %d: tile %zu ran %u times", cs, gi, i, hits[i]);
      unsigned max_ahead = 0, clusters = 0;
      for (size_t c = 0; c < max_clusters; c++) {
        const unsigned *s0 = seq + c * cs * max_iter;
        if (s0[0]) clusters++;
        for (unsigned r = 1; r < cs; r++) {
          const unsigned *sr = s0 + (size_t)r * max_iter;
          for (unsigned i = 0; i < max_iter; i++)
            ck_assert_msg(sr[i] == s0[i], "%u-CTA clusters, grid %d: cluster %zu rank %u ran unit %d as its unit %u, rank 0 %d",
                          cs, gi, c, r, (int)sr[i] - 1, i, (int)s0[i] - 1);
          /* How far rank r was ahead of rank 0 when it began each unit: its unit's index minus
           * the last one rank 0 had begun by then. */
          const unsigned long long *tr = t0 + (c * cs + r) * max_iter, *tz = t0 + c * cs * max_iter;
          unsigned j = 0;
          for (unsigned i = 0; i < max_iter && sr[i]; i++) {
            while (j + 1 < max_iter && s0[j + 1] && tz[j + 1] <= tr[i]) j++;
            if (i > j && i - j > max_ahead) max_ahead = i - j;
          }
        }
      }
      printf("gpu_sched: %u-CTA clusters, %s grid: %u clusters ran units; ranks ran up to %u units ahead of rank 0\n",
             cs, gi ? "full" : "persistent", clusters, max_ahead);
      free(hits), free(seq), free(t0);
      gpu_free(a.hits), gpu_free(a.seq), gpu_free(a.t0);
    }
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Long units: a STEAL kernel on an AUTO grid whose claiming runs measured long units runs one
 * cluster per unit (the short variant on a full grid, handed out by the block scheduler; see
 * runtime/launch/launch.c). Its first run is persistent and claims; the next ones (statistics: as many
 * clusters as units, no steals) are not; every tile runs exactly once on every cluster shape,
 * 1-D and 2-D tile grids (padded where the cluster does not divide them), on the stream and
 * replayed from a graph, and a persistent run after them still finds its counter ready. */
static const char *const k_slow_tail =
    "__device__ void slow_tile(const clcrt::Tile &t, const CheckArgs &a) {\n"
    "  const long long t0 = clock64();\n"
    "  while (clock64() - t0 < 40000) {}\n"
    "  check_tile(t, a);\n"
    "}\n";

START_TEST(test_long_units) {
  clcrt_runtime *rt = gpu_runtime();
  const clcrt__driver *cu = gpu_cu();
  const int san = gpu_under_sanitizer();
  char *src = malloc(strlen(sched_check_src) + strlen(k_slow_tail) + 1);
  strcpy(src, sched_check_src);
  strcat(src, k_slow_tail);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_stats_enable(s, 1), CLCRT_OK);
  for (int ci = 0; ci < NCLU; ci++) {
    const clcrt_dim3 cl = k_clusters[ci];
    clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO, cl, (clcrt_dim3){128, 1, 1}, 0, 0, src, "slow_tile");
    char what[96];
    /* 1-D: more units than fit at once (16 CTAs of 128 threads per SM at most). */
    clcrt_dim3 t = {(san ? 4001u : 30011u) * cl.x, cl.y, cl.z};
    const unsigned long long units =
        (unsigned long long)((t.x + cl.x - 1) / cl.x) * ((t.y + cl.y - 1) / cl.y) * ((t.z + cl.z - 1) / cl.z);
    bufs b;
    bufs_make(&b, t, cl, 128, 40 + ci);
    clcrt_stream_stats st = CLCRT_STREAM_STATS_INIT;
    snprintf(what, sizeof what, "long units, cluster(%u,%u,%u), first run", cl.x, cl.y, cl.z);
    ck_assert_msg(clcrt_run(s, k, t, &b.a, sizeof b.a) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(rt));
    ck_assert_msg(clcrt_stream_stats_read(s, &st) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(rt));
    ck_assert_msg(st.clusters < units && st.steals > 0, "%s: %llu clusters, %llu steals for %llu units", what,
                  st.clusters, st.steals, units);
    snprintf(what, sizeof what, "long units, cluster(%u,%u,%u), second run", cl.x, cl.y, cl.z);
    ck_assert_msg(clcrt_run(s, k, t, &b.a, sizeof b.a) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(rt));
    ck_assert_msg(clcrt_stream_stats_read(s, &st) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(rt));
    ck_assert_msg(st.clusters == units && st.steals == 0 && st.max_units_per_cluster == 1,
                  "%s: %llu clusters, %llu steals, at most %llu units per cluster, for %llu units", what, st.clusters,
                  st.steals, st.max_units_per_cluster, units);
    ck_assert_uint_eq(st.tiles, (unsigned long long)t.x * t.y * t.z);
    bufs_check(&b, cl, 2, 0, what);
    bufs_free(&b);
    printf("gpu_sched: long units, %ux%ux%u clusters: first run persistent, then %llu clusters for %llu units\n",
           cl.x, cl.y, cl.z, st.clusters, units);
    /* 2-D, not divided by the cluster shape; then replayed from a graph, twice per launch. */
    t = (clcrt_dim3){san ? 67u : 201u, 53, 1};
    bufs_make(&b, t, cl, 128, 50 + ci);
    snprintf(what, sizeof what, "long units, cluster(%u,%u,%u), 2-D", cl.x, cl.y, cl.z);
    ck_assert_msg(clcrt_run(s, k, t, &b.a, sizeof b.a) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(rt));
    ck_assert_msg(clcrt_stream_sync(s) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(rt));
    bufs_check(&b, cl, 1, 0, what);
    ck_assert_int_eq(clcrt_stream_stats_enable(s, 0), CLCRT_OK);
    CUgraph g = NULL;
    CUgraphExec ge = capture_two(s, k, k, t, &b, &g);
    const unsigned reps = san ? 2 : 5;
    for (unsigned r = 0; r < reps; r++) ck_assert_int_eq(cu->cuGraphLaunch(ge, clcrt_stream_cu(s)), CUDA_SUCCESS);
    /* A persistent run of the same kernel on the stream after them (explicitly persistent:
     * the stream's claim counter must have been kept ready by the runs before). */
    clcrt_kernel *kp = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, cl, (clcrt_dim3){128, 1, 1}, 0, 0, NULL, NULL);
    ck_assert_int_eq(clcrt_run(s, kp, t, &b.a, sizeof b.a), CLCRT_OK);
    ck_assert_msg(clcrt_stream_sync(s) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(rt));
    bufs_check(&b, cl, 1 + 2 * reps + 1, 0, "long units, graph replays");
    cu->cuGraphExecDestroy(ge);
    cu->cuGraphDestroy(g);
    bufs_free(&b);
    ck_assert_int_eq(clcrt_stream_stats_enable(s, 1), CLCRT_OK);
  }
  free(src);
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

int main(void) {
  gpu_skip_if_absent("gpu_sched");
  Suite *su = suite_create("gpu_sched");
  TCase *tc = tcase_create("schedulers");
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, test_matrix, 0, NVAR * NCLU);
  tcase_add_test(tc, test_stress);
  tcase_add_loop_test(tc, test_sizes, 0, 2 * NCLU);
  tcase_add_test(tc, test_two_streams);
  tcase_add_test(tc, test_graph_replay);
  tcase_add_test(tc, test_fault);
  tcase_add_test(tc, test_args_size_and_misuse);
  tcase_add_test(tc, test_stats);
  tcase_add_test(tc, test_big_cluster_and_smem);
  tcase_add_test(tc, test_cluster_order);
  tcase_add_test(tc, test_long_units);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
