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

static const char *k_src =
    "struct CheckArgs {\n"
    "  unsigned *hits; unsigned long long *lin; unsigned *rank; unsigned *bad;\n"
    "  const float *x; float *y; float alpha;\n"
    "  unsigned tx, ty, tz;\n"
    "  unsigned *prologue; unsigned max_ctas; unsigned *grid_ctas;\n"
    "};\n"
    "struct CheckState { float alpha; };\n"
    "__device__ void check_prologue(const CheckArgs &a, CheckState &s) {\n"
    "  unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);\n"
    "  unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
    "  s.alpha = a.alpha;\n"
    "  if (tid == 0) {\n"
    "    if (cta < a.max_ctas) atomicAdd(&a.prologue[cta], 1u); else atomicAdd(a.bad, 1u);\n"
    "    if (cta == 0) *a.grid_ctas = gridDim.x * gridDim.y * gridDim.z;\n"
    "  }\n"
    "}\n"
    "__device__ void body(const clcrt::Tile &t, const CheckArgs &a, float alpha) {\n"
    "  unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
    "  unsigned nt = blockDim.x * blockDim.y * blockDim.z;\n"
    "  if (t.coord.x >= a.tx || t.coord.y >= a.ty || t.coord.z >= a.tz) { if (tid == 0) atomicAdd(a.bad, 1u); return; }\n"
    "  unsigned long long L = t.coord.x + (unsigned long long)a.tx * (t.coord.y + (unsigned long long)a.ty * t.coord.z);\n"
    "  if (tid == 0) { atomicAdd(&a.hits[L], 1u); a.lin[L] = t.linear; a.rank[L] = t.cta_rank; }\n"
    "  unsigned long long i = L * nt + tid;\n"
    "  a.y[i] = alpha * a.x[i] + (float)(L % 1000);\n"
    "}\n"
    "__device__ void check_tile_s(const clcrt::Tile &t, const CheckArgs &a, CheckState &s) { body(t, a, s.alpha); }\n"
    "__device__ void check_tile(const clcrt::Tile &t, const CheckArgs &a) { body(t, a, a.alpha); }\n";

typedef struct CheckArgs {
  CUdeviceptr hits, lin, rank, bad, x, y;
  float alpha;
  unsigned tx, ty, tz;
  CUdeviceptr prologue;
  unsigned max_ctas;
  CUdeviceptr grid_ctas;
} CheckArgs;

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

static const char *g_define; /* an extra NVRTC option for reg(), e.g. -DCLCRT_STEAL_AHEAD=0 */

static clcrt_kernel *reg(clcrt_runtime *rt, clcrt_sched sched, clcrt_grid grid, clcrt_dim3 cluster, clcrt_dim3 block,
                         int prologue, unsigned smem, const char *src, const char *fn) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = src ? src : k_src;
  d.tile_fn = fn ? fn : prologue ? "check_tile_s" : "check_tile";
  d.args_type = "CheckArgs";
  d.block = block;
  d.cluster = cluster;
  d.sched = sched;
  d.grid = grid;
  d.smem_bytes = smem;
  const char *opts[1] = {g_define};
  d.options = opts;
  d.num_options = g_define ? 1 : 0;
  if (prologue) {
    d.state_type = "CheckState";
    d.prologue_fn = "check_prologue";
  }
  clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_register(rt, &d, &k);
  ck_assert_msg(st == CLCRT_OK, "register %s: %s", d.tile_fn, clcrt_errmsg(rt));
  return k;
}

/* Device buffers for one tile grid; `reps` runs are expected to hit each tile. */
typedef struct bufs {
  size_t ntiles, nelem, max_ctas;
  unsigned nt;
  float *hx;
  CheckArgs a;
} bufs;

static void bufs_make(bufs *b, clcrt_dim3 tiles, clcrt_dim3 cluster, unsigned nt, uint64_t seed) {
  memset(b, 0, sizeof *b);
  b->ntiles = (size_t)tiles.x * tiles.y * tiles.z;
  b->nt = nt;
  b->nelem = b->ntiles * nt;
  size_t units = (size_t)((tiles.x + cluster.x - 1) / cluster.x) * ((tiles.y + cluster.y - 1) / cluster.y) *
                 ((tiles.z + cluster.z - 1) / cluster.z);
  b->max_ctas = units * cluster.x * cluster.y * cluster.z;
  b->hx = malloc(b->nelem * sizeof(float));
  ck_assert_ptr_nonnull(b->hx);
  fill_random(b->hx, b->nelem, seed);
  b->a.x = gpu_alloc(b->nelem * 4);
  gpu_put(b->a.x, b->hx, b->nelem * 4);
  b->a.y = gpu_alloc(b->nelem * 4);
  gpu_fill_u8(b->a.y, 0xff, b->nelem * 4); /* poison: NaN */
  b->a.hits = gpu_alloc(b->ntiles * 4);
  gpu_fill_u8(b->a.hits, 0, b->ntiles * 4);
  b->a.lin = gpu_alloc(b->ntiles * 8);
  gpu_fill_u8(b->a.lin, 0xff, b->ntiles * 8);
  b->a.rank = gpu_alloc(b->ntiles * 4);
  gpu_fill_u8(b->a.rank, 0xff, b->ntiles * 4);
  b->a.bad = gpu_alloc(4);
  gpu_fill_u8(b->a.bad, 0, 4);
  b->a.prologue = gpu_alloc(b->max_ctas * 4);
  gpu_fill_u8(b->a.prologue, 0, b->max_ctas * 4);
  b->a.grid_ctas = gpu_alloc(4);
  gpu_fill_u8(b->a.grid_ctas, 0, 4);
  b->a.max_ctas = (unsigned)b->max_ctas;
  b->a.alpha = 1.5f + (float)(seed % 7);
  b->a.tx = tiles.x, b->a.ty = tiles.y, b->a.tz = tiles.z;
}

static void bufs_free(bufs *b) {
  gpu_free(b->a.x), gpu_free(b->a.y), gpu_free(b->a.hits), gpu_free(b->a.lin), gpu_free(b->a.rank);
  gpu_free(b->a.bad), gpu_free(b->a.prologue), gpu_free(b->a.grid_ctas);
  free(b->hx);
}

/* Checks the results (with plain ifs in the loops: every passing ck_assert writes a mark
 * point to Check's pipe in fork mode, which for millions of elements takes minutes). */
/* Checks the results of `reps` runs (prologue: whether the kernel has one, checked for
 * the last launch only when reps == 1). */
static void bufs_check(bufs *b, clcrt_dim3 cluster, unsigned reps, int prologue, const char *what) {
  unsigned *hits = malloc(b->ntiles * 4), *rank = malloc(b->ntiles * 4), bad = 0;
  unsigned long long *lin = malloc(b->ntiles * 8);
  float *y = malloc(b->nelem * 4);
  gpu_get(hits, b->a.hits, b->ntiles * 4);
  gpu_get(rank, b->a.rank, b->ntiles * 4);
  gpu_get(lin, b->a.lin, b->ntiles * 8);
  gpu_get(y, b->a.y, b->nelem * 4);
  gpu_get(&bad, b->a.bad, 4);
  if (!(bad == 0)) ck_abort_msg("%s: %u padded or out-of-range tiles reached the tile function", what, bad);
  unsigned tx = b->a.tx, ty = b->a.ty;
  for (size_t L = 0; L < b->ntiles; L++) {
    if (!(hits[L] == reps)) ck_abort_msg("%s: tile %zu ran %u times, expected %u", what, L, hits[L], reps);
    if (!(lin[L] == L)) ck_abort_msg("%s: tile %zu saw linear %llu", what, L, lin[L]);
    unsigned cx = (unsigned)(L % tx), cy = (unsigned)(L / tx % ty), cz = (unsigned)(L / tx / ty);
    unsigned er = cx % cluster.x + cluster.x * (cy % cluster.y + cluster.y * (cz % cluster.z));
    if (!(rank[L] == er)) ck_abort_msg("%s: tile %zu (%u,%u,%u) ran on CTA rank %u, expected %u", what, L, cx, cy, cz,
                  rank[L], er);
  }
  for (size_t i = 0; i < b->nelem; i++) {
    double ref = (double)b->a.alpha * b->hx[i] + (double)((i / b->nt) % 1000);
    if (!(fabs((double)y[i] - ref) <= 1e-5 * (1 + fabs(ref)))) ck_abort_msg("%s: y[%zu] = %g, expected %g", what, i,
                  (double)y[i], ref);
  }
  if (prologue && reps == 1) {
    unsigned g = 0;
    unsigned *pro = malloc(b->max_ctas * 4);
    gpu_get(&g, b->a.grid_ctas, 4);
    gpu_get(pro, b->a.prologue, b->max_ctas * 4);
    if (!(g > 0 && g <= b->max_ctas)) ck_abort_msg("%s: grid of %u CTAs (max %zu)", what, g, b->max_ctas);
    for (size_t i = 0; i < b->max_ctas; i++)
      if (!(pro[i] == (i < g ? 1u : 0u))) ck_abort_msg("%s: prologue of CTA %zu ran %u times (grid %u CTAs)", what, i,
                    pro[i], g);
    free(pro);
  }
  free(hits), free(rank), free(lin), free(y);
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
  clcrt_dim3 grids[] = {{1, 1, 1}, {7, 1, 1}, {1000, 1, 1}, {san ? 20011u : 100003u, 1, 1}, {37, 53, 1}, {5, 6, 7}};
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
 * counter not restored, shows up as a tile run 0 or 2 times. */
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

/* Every STEAL look-ahead (nvrtc_src/clcrt.cuh) on every cluster shape, grids that do and
 * do not divide, repeated runs on one stream. */
START_TEST(test_ahead_variants) {
  static const char *defs[] = {"-DCLCRT_STEAL_AHEAD=0", "-DCLCRT_STEAL_AHEAD=1", "-DCLCRT_STEAL_AHEAD=2"};
  g_define = defs[_i / NCLU];
  clcrt_dim3 cl = k_clusters[_i % NCLU];
  clcrt_runtime *rt = gpu_runtime();
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, cl, (clcrt_dim3){96, 1, 1}, 1, 0, NULL, NULL);
  clcrt_dim3 grids[] = {{7, 1, 1}, {1000, 1, 1}, {gpu_under_sanitizer() ? 5003u : 100003u, 1, 1}, {37, 53, 1}};
  for (size_t gi = 0; gi < 4; gi++) {
    char what[128];
    snprintf(what, sizeof what, "%s cluster(%u,%u,%u) tiles(%u,%u,1)", g_define, cl.x, cl.y, cl.z, grids[gi].x,
             grids[gi].y);
    const unsigned reps = gi == 2 ? 5 : 1;
    bufs b;
    bufs_make(&b, grids[gi], cl, 96, 40 + gi);
    for (unsigned r = 0; r < reps; r++) ck_assert_int_eq(clcrt_run(s, k, grids[gi], &b.a, sizeof b.a), CLCRT_OK);
    ck_assert_msg(clcrt_stream_sync(s) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(rt));
    bufs_check(&b, cl, reps, reps == 1, what);
    bufs_free(&b);
  }
  g_define = NULL;
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_graph_replay) {
  clcrt_runtime *rt = gpu_runtime();
  const clcrt__driver *cu = gpu_cu();
  clcrt_dim3 cl = {2, 1, 1};
  clcrt_kernel *k = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, cl, (clcrt_dim3){64, 1, 1}, 0, 0, NULL, NULL);
  clcrt_kernel *kf = reg(rt, CLCRT_SCHED_STEAL, CLCRT_GRID_FULL, cl, (clcrt_dim3){64, 1, 1}, 0, 0, NULL, NULL);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  clcrt_dim3 t = {5003, 1, 1};
  bufs b;
  bufs_make(&b, t, cl, 64, 3);
  CUgraph g = NULL;
  CUgraphExec ge = NULL;
  ck_assert_int_eq(cu->cuStreamBeginCapture(clcrt_stream_cu(s), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  ck_assert_int_eq(clcrt_run(s, k, t, &b.a, sizeof b.a), CLCRT_OK);
  ck_assert_int_eq(clcrt_run(s, kf, t, &b.a, sizeof b.a), CLCRT_OK);
  ck_assert_int_eq(cu->cuStreamEndCapture(clcrt_stream_cu(s), &g), CUDA_SUCCESS);
  ck_assert_int_eq(cu->cuGraphInstantiateWithFlags(&ge, g, 0), CUDA_SUCCESS);
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
    d.source = k_src, d.tile_fn = "check_tile", d.args_type = "CheckArgs", d.block = (clcrt_dim3){32, 1, 1};
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

int main(void) {
  gpu_skip_if_absent("gpu_sched");
  Suite *su = suite_create("gpu_sched");
  TCase *tc = tcase_create("schedulers");
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, test_matrix, 0, NVAR * NCLU);
  tcase_add_test(tc, test_stress);
  tcase_add_loop_test(tc, test_ahead_variants, 0, 3 * NCLU);
  tcase_add_test(tc, test_two_streams);
  tcase_add_test(tc, test_graph_replay);
  tcase_add_test(tc, test_fault);
  tcase_add_test(tc, test_args_size_and_misuse);
  tcase_add_test(tc, test_stats);
  tcase_add_test(tc, test_big_cluster_and_smem);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
