/* GPU suite: task graphs (include/clcrt_ops.h) against the same nodes launched one after
 * another.
 *
 * Every node runs one checking tile function: tile l of node i computes a value from a hash of
 * (i, l) and the values of every producer tile it needs, by its own reading of the edge kinds
 * (not the library's), stores it, and counts its run. Launched node by node (one clcrt_run per
 * node, kernel boundaries between them) that gives the reference; a task graph that let a tile
 * start before a tile it needs would read the poisoned value (0xffffffff) or an unfinished one
 * and differ. Random graphs (1 to 6 nodes, tile counts from 0 to 400, every edge kind, random
 * delays in the tiles), random tile counts per run on one graph, every scheduler of the device,
 * runs back to back on two streams (the counters must be zero again after each run), graph
 * capture and replays, preemption by a stream of higher priority, an SM budget, and the run-time
 * refusals. Every value equal and every tile run once. The graphs come from a fixed seed, so
 * that a failure replays; CLCRT_TEST_SEED=N draws others (the run prints it). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clcrt.h"
#include "clcrt_ops.h"
#include "common/gpu.h"

#define MAXN 6
#define MAXIN 8

static const char *SRC =
    "struct Edge { unsigned kind, from, a, b; };\n"
    "struct NodeArgs {\n"
    "  unsigned *vals, *runs, *pre;\n"
    "  unsigned node, tiles, nin, delay;\n"
    "  unsigned base[6], cnt[6];\n"
    "  Edge in[8];\n"
    "};\n"
    "__device__ uint2 dep_custom(unsigned tile, unsigned tiles, unsigned producer_tiles) {\n"
    "  (void)tiles; (void)producer_tiles;\n"
    "  return make_uint2(tile / 2, tile / 2 + 3);\n"
    "}\n"
    "__device__ unsigned mix(unsigned v, const unsigned *vals, unsigned j) {\n"
    "  return v * 31u + *(volatile const unsigned *)(vals + j);\n"
    "}\n"
    "// The prefetch function: counts its calls (the tile function checks one came first).\n"
    "__device__ void check_pre(const clcrt::Tile &t, const NodeArgs &a) {\n"
    "  if (threadIdx.x == 0) atomicAdd(a.pre + a.base[a.node] + (unsigned)t.linear, 1u);\n"
    "}\n"
    "__device__ void check_tile(const clcrt::Tile &t, const NodeArgs &a) {\n"
    "  if (threadIdx.x == 0) {\n"
    "    const unsigned l = (unsigned)t.linear, tc = a.tiles;\n"
    "    unsigned v = (l * 2654435761u) ^ (a.node * 97u + 1u);\n"
    "    for (unsigned e = 0; e < a.nin; e++) {\n"
    "      const Edge d = a.in[e];\n"
    "      const unsigned tp = a.cnt[d.from], *pv = a.vals + a.base[d.from];\n"
    "      if (d.kind == 0) { for (unsigned j = 0; j < tp; j++) v = mix(v, pv, j); }\n"
    "      else if (d.kind == 1) { if (l < tp) v = mix(v, pv, l); }\n"
    "      else if (d.kind == 2) { const unsigned r = l / d.a;\n"
    "        for (unsigned j = r * d.b; j < r * d.b + d.b && j < tp; j++) v = mix(v, pv, j); }\n"
    "      else if (d.kind == 3) { for (unsigned s = 0; s < d.a; s++) v = mix(v, pv, s * tc + l); }\n"
    "      else { const uint2 r = dep_custom(l, tc, tp);\n"
    "        for (unsigned j = r.x; j < r.y && j < tp; j++) v = mix(v, pv, j); }\n"
    "    }\n"
    "    if (a.delay) { const unsigned long long t0 = clock64();\n"
    "      while (clock64() - t0 < (unsigned long long)((l * 7919u + a.node) % a.delay)) {} }\n"
    "    if (a.pre && *(volatile unsigned *)(a.pre + a.base[a.node] + l) != 1u) v = 0xdeadu;  // no prefetch first\n"
    "    a.vals[a.base[a.node] + l] = v;\n"
    "    atomicAdd(a.runs + a.base[a.node] + l, 1u);\n"
    "  }\n"
    "}\n";

typedef struct Edge {
  unsigned kind, from, a, b;
} Edge;
typedef struct NodeArgs {
  CUdeviceptr vals, runs, pre;
  unsigned node, tiles, nin, delay;
  unsigned base[MAXN], cnt[MAXN];
  Edge in[MAXIN];
} NodeArgs;

typedef struct graph {
  unsigned nn, ne;
  int prefetch; /* every node has the prefetch function */
  clcrt_task_edge edges[MAXN * MAXN];
  unsigned cnt[MAXN];
} graph;

static uint64_t g_seed = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n) {
  g_seed ^= g_seed << 13, g_seed ^= g_seed >> 7, g_seed ^= g_seed << 17;
  return n ? (unsigned)(g_seed % n) : 0;
}

static const unsigned k_counts[] = {0, 1, 3, 7, 16, 32, 64, 96, 128, 130, 250, 400};
#define NCOUNTS (sizeof k_counts / sizeof k_counts[0])

/* Counts that every edge of g accepts (SAME: consumer <= producer; KSLICES: producer = a x
 * consumer): drawn again until they do, else the ones it was made with. */
static int counts_fit(const graph *g, const unsigned *cnt) {
  for (unsigned e = 0; e < g->ne; e++) {
    const clcrt_task_edge *x = &g->edges[e];
    if (x->kind == CLCRT_DEP_SAME && cnt[x->to] > cnt[x->from]) return 0;
    if (x->kind == CLCRT_DEP_KSLICES && cnt[x->from] != x->a * cnt[x->to]) return 0;
  }
  return 1;
}

static void random_graph(graph *g) {
  memset(g, 0, sizeof *g);
  g->nn = 1 + rnd(MAXN);
  g->prefetch = rnd(2);
  for (unsigned i = 0; i < g->nn; i++) g->cnt[i] = k_counts[rnd(NCOUNTS)];
  unsigned nin[MAXN] = {0};
  for (unsigned c = 1; c < g->nn; c++)
    for (unsigned p = 0; p < c; p++) {
      if (rnd(100) >= 45 || nin[c] >= MAXIN) continue;
      clcrt_task_edge x = {.from = p, .to = c, .kind = (clcrt_dep_kind)rnd(5), .a = 1, .b = 1, .fn = NULL};
      if (x.kind == CLCRT_DEP_SAME && g->cnt[c] > g->cnt[p]) x.kind = CLCRT_DEP_ALL;
      if (x.kind == CLCRT_DEP_ROWS) x.a = 1 + rnd(8), x.b = 1 + rnd(8);
      if (x.kind == CLCRT_DEP_KSLICES) {
        /* the consumer's count is the producer's divided by a slice count that divides it */
        unsigned a = 1 + rnd(4);
        if (g->cnt[c] && g->cnt[p] == a * g->cnt[c])
          x.a = a;
        else if (g->cnt[c] && g->cnt[p] % g->cnt[c] == 0)
          x.a = g->cnt[p] / g->cnt[c];
        else
          x.kind = CLCRT_DEP_ALL;
        if (x.kind == CLCRT_DEP_KSLICES && x.a == 0) x.kind = CLCRT_DEP_ALL;
      }
      if (x.kind == CLCRT_DEP_CUSTOM) x.fn = "dep_custom";
      g->edges[g->ne++] = x;
      nin[c]++;
    }
}

static clcrt_runtime *g_rt;
static clcrt_ops *g_ops;
static const clcrt_kernel *g_node_k; /* the checking tile function alone */
static CUdeviceptr g_vals, g_runs, g_pre;
#define SLOTS (MAXN * 400)

static void setup(void) {
  g_rt = gpu_runtime();
  ck_assert_int_eq(clcrt_ops_create(g_rt, &g_ops), CLCRT_OK);
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = SRC, d.tile_fn = "check_tile", d.args_type = "NodeArgs", d.block = (clcrt_dim3){64, 1, 1};
  d.sched = CLCRT_SCHED_FIXED;
  clcrt_kernel *k = NULL;
  ck_assert_msg(clcrt_register(g_rt, &d, &k) == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
  g_node_k = k;
  g_vals = gpu_alloc(SLOTS * 4), g_runs = gpu_alloc(SLOTS * 4), g_pre = gpu_alloc(SLOTS * 4);
}

static void teardown(void) {
  gpu_free(g_vals), gpu_free(g_runs), gpu_free(g_pre);
  clcrt_ops_destroy(g_ops);
  clcrt_runtime_destroy(g_rt);
}

static void node_args(const graph *g, const unsigned *cnt, unsigned delay, NodeArgs *a) {
  for (unsigned i = 0; i < g->nn; i++) {
    memset(&a[i], 0, sizeof a[i]);
    a[i].vals = g_vals, a[i].runs = g_runs, a[i].node = i, a[i].tiles = cnt[i], a[i].delay = delay;
    a[i].pre = g->prefetch ? g_pre : 0;
    for (unsigned j = 0; j < g->nn; j++) a[i].base[j] = j * 400, a[i].cnt[j] = cnt[j];
    for (unsigned e = 0; e < g->ne; e++)
      if (g->edges[e].to == i)
        a[i].in[a[i].nin++] = (Edge){(unsigned)g->edges[e].kind, g->edges[e].from, g->edges[e].a, g->edges[e].b};
  }
}

static void poison(clcrt_stream *s) {
  ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
  gpu_fill_u8(g_vals, 0xff, SLOTS * 4);
  gpu_fill_u8(g_runs, 0, SLOTS * 4);
  gpu_fill_u8(g_pre, 0, SLOTS * 4);
}

/* The reference: node by node, one kernel each. */
static void reference(const graph *g, const unsigned *cnt, unsigned *vals, clcrt_stream *s) {
  NodeArgs a[MAXN];
  node_args(g, cnt, 0, a);
  for (unsigned i = 0; i < g->nn; i++) a[i].pre = 0; /* the node kernels alone have no prefetch */
  poison(s);
  for (unsigned i = 0; i < g->nn; i++)
    ck_assert_msg(clcrt_run(s, g_node_k, (clcrt_dim3){cnt[i], 1, 1}, &a[i], sizeof a[i]) == CLCRT_OK, "%s",
                  clcrt_errmsg(g_rt));
  ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
  gpu_get(vals, g_vals, SLOTS * 4);
}

static unsigned g_checked_tiles, g_checked_runs;

static void compare(const graph *g, const unsigned *cnt, const unsigned *ref, const char *what) {
  static unsigned vals[SLOTS], runs[SLOTS];
  gpu_get(vals, g_vals, sizeof vals);
  gpu_get(runs, g_runs, sizeof runs);
  for (unsigned i = 0; i < g->nn; i++)
    for (unsigned l = 0; l < cnt[i]; l++) {
      GPU_CHECK(runs[i * 400 + l] == 1, "%s: node %u tile %u ran %u times", what, i, l, runs[i * 400 + l]);
      GPU_CHECK(vals[i * 400 + l] == ref[i * 400 + l], "%s: node %u tile %u: %08x, node by node %08x (%u nodes, %u edges)",
                what, i, l, vals[i * 400 + l], ref[i * 400 + l], g->nn, g->ne);
      g_checked_tiles++;
    }
  g_checked_runs++;
}

static clcrt_taskgraph *make(const graph *g, clcrt_sched sched, clcrt_grid grid) {
  clcrt_task_node nodes[MAXN];
  for (unsigned i = 0; i < g->nn; i++)
    nodes[i] = (clcrt_task_node){.tile_fn = "check_tile", .args_type = "NodeArgs", .args_size = sizeof(NodeArgs),
                                 .prefetch_fn = g->prefetch ? "check_pre" : NULL};
  clcrt_taskgraph_desc d = CLCRT_TASKGRAPH_DESC_INIT;
  d.source = SRC, d.nodes = nodes, d.num_nodes = g->nn, d.edges = g->edges, d.num_edges = g->ne;
  d.block = (clcrt_dim3){64, 1, 1}, d.sched = sched, d.grid = grid;
  clcrt_taskgraph *tg = NULL;
  ck_assert_msg(clcrt_taskgraph_create(g_ops, &d, &tg) == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
  return tg;
}

/* Every other run with programmatic dependent launch (clcrt_taskgraph_run_ex, CLCRT_RUN_PDL): its
 * grid launches while the run before it on the stream finishes, and must wait for it before it
 * reads the counters that run leaves at zero. */
static unsigned g_launches;
static void run_graph(clcrt_taskgraph *tg, clcrt_stream *s, const graph *g, const unsigned *cnt, unsigned delay) {
  NodeArgs a[MAXN];
  node_args(g, cnt, delay, a);
  clcrt_dim3 tiles[MAXN];
  const void *args[MAXN];
  for (unsigned i = 0; i < g->nn; i++) tiles[i] = (clcrt_dim3){cnt[i], 1, 1}, args[i] = &a[i];
  const unsigned flags = g_launches++ % 2 ? CLCRT_RUN_PDL : 0u;
  ck_assert_msg(clcrt_taskgraph_run_ex(tg, s, tiles, args, flags) == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
}

typedef struct sched_case {
  const char *name;
  clcrt_sched sched;
  clcrt_grid grid;
} sched_case;
static const sched_case k_scheds[] = {
    {"steal-persistent", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT},
    {"steal-full", CLCRT_SCHED_STEAL, CLCRT_GRID_FULL},
    {"steal-auto", CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO},
    {"static", CLCRT_SCHED_STATIC, CLCRT_GRID_AUTO},
    {"fixed", CLCRT_SCHED_FIXED, CLCRT_GRID_AUTO},
};

/* Random graphs under every scheduler: runs back to back on two streams with new tile counts,
 * each against its node-by-node reference. */
START_TEST(test_random_graphs) {
  const int graphs = gpu_under_sanitizer() ? 3 : 24;
  clcrt_stream *s[2];
  for (int i = 0; i < 2; i++) ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s[i]), CLCRT_OK);
  static unsigned ref[SLOTS];
  for (int n = 0; n < graphs; n++) {
    graph g;
    random_graph(&g);
    const sched_case *sc = &k_scheds[n % (int)(sizeof k_scheds / sizeof k_scheds[0])];
    clcrt_taskgraph *tg = make(&g, sc->sched, sc->grid);
    for (int r = 0; r < (gpu_under_sanitizer() ? 2 : 6); r++) {
      unsigned cnt[MAXN];
      memcpy(cnt, g.cnt, sizeof cnt);
      if (r % 2) /* new tile counts the edges accept (a few draws), else the graph's own */
        for (int tries = 0; tries < 20; tries++) {
          unsigned c[MAXN];
          for (unsigned i = 0; i < g.nn; i++) c[i] = k_counts[rnd(NCOUNTS)];
          if (counts_fit(&g, c)) {
            memcpy(cnt, c, sizeof c);
            break;
          }
        }
      clcrt_stream *st = s[r % 2];
      reference(&g, cnt, ref, st);
      poison(st);
      run_graph(tg, st, &g, cnt, (unsigned)(r % 3) * 3000u);
      ck_assert_msg(clcrt_stream_sync(st) == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
      char what[96];
      snprintf(what, sizeof what, "graph %d (%s) run %d", n, sc->name, r);
      compare(&g, cnt, ref, what);
    }
    clcrt_taskgraph_destroy(tg);
  }
  for (int i = 0; i < 2; i++) clcrt_stream_destroy(s[i]);
  printf("gpu_taskgraph: %u runs, %u tiles checked against node-by-node launches, 0 wrong\n", g_checked_runs,
         g_checked_tiles);
}
END_TEST

/* Captured into a CUDA graph, replayed several times on two streams in turn (the counters left
 * at zero by each replay), with an eager run of the same task graph on the capturing stream in
 * between. */
START_TEST(test_capture_replay) {
  const clcrt__driver *cu = gpu_cu();
  clcrt_stream *s, *s2;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s2), CLCRT_OK);
  static unsigned ref[SLOTS];
  for (int n = 0; n < (gpu_under_sanitizer() ? 1 : 4); n++) {
    graph g;
    do random_graph(&g);
    while (g.nn < 3);
    clcrt_taskgraph *tg = make(&g, CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT);
    ck_assert_int_eq(clcrt_kernel_prepare(clcrt_taskgraph_kernel(tg), CLCRT_USE_GRAPH | CLCRT_USE_SHORT), CLCRT_OK);
    reference(&g, g.cnt, ref, s);
    CUgraph cg;
    CUgraphExec ge;
    ck_assert_int_eq(cu->cuStreamBeginCapture(clcrt_stream_cu(s), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    run_graph(tg, s, &g, g.cnt, 2000);
    ck_assert_int_eq(cu->cuStreamEndCapture(clcrt_stream_cu(s), &cg), CUDA_SUCCESS);
    ck_assert_int_eq(cu->cuGraphInstantiateWithFlags(&ge, cg, 0), CUDA_SUCCESS);
    for (int r = 0; r < 4; r++) {
      poison(s);
      if (r == 2) {
        run_graph(tg, s, &g, g.cnt, 0); /* an eager run between replays: its own workspace */
        ck_assert_int_eq(clcrt_stream_sync(s), CLCRT_OK);
        compare(&g, g.cnt, ref, "eager between replays");
        poison(s);
      }
      /* replays on the capturing stream and on another, in turn */
      clcrt_stream *on = r % 2 ? s2 : s;
      ck_assert_int_eq(cu->cuGraphLaunch(ge, clcrt_stream_cu(on)), CUDA_SUCCESS);
      ck_assert_int_eq(clcrt_stream_sync(on), CLCRT_OK);
      compare(&g, g.cnt, ref, r % 2 ? "replay on another stream" : "replay");
    }
    ck_assert_int_eq(cu->cuGraphExecDestroy(ge), CUDA_SUCCESS);
    ck_assert_int_eq(cu->cuGraphDestroy(cg), CUDA_SUCCESS);
    clcrt_taskgraph_destroy(tg);
  }
  clcrt_stream_destroy(s2);
  clcrt_stream_destroy(s);
}
END_TEST

/* Under preemption: task graphs on a stream of the lowest priority (their yielding variant:
 * units left by the CTAs that yield are run later by others, each still taking a ticket when it
 * starts), with urgent runs of the node kernel on a stream of higher priority between them and
 * a clcrt_preempt_begin/end pair around some. */
START_TEST(test_under_preemption) {
  g_rt->long_cycles = 0; /* keep AUTO grids persistent and yielding, however long the units */
  clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
  clcrt_stream *lo, *hi;
  ck_assert_int_eq(clcrt_stream_create_ex(g_rt, &o, &lo), CLCRT_OK);
  o.priority = 1;
  ck_assert_int_eq(clcrt_stream_create_ex(g_rt, &o, &hi), CLCRT_OK);
  ck_assert_int_gt(clcrt_stream_priority(hi), clcrt_stream_priority(lo));
  static unsigned ref[SLOTS];
  const CUdeviceptr urgent = gpu_alloc(4096 * 4);
  int preempted = 0;
  for (int n = 0; n < (gpu_under_sanitizer() ? 1 : 6); n++) {
    graph g;
    do random_graph(&g);
    while (g.nn < 2);
    clcrt_taskgraph *tg = make(&g, CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO);
    ck_assert_int_eq(clcrt_kernel_prepare(clcrt_taskgraph_kernel(tg), CLCRT_USE_PREEMPT), CLCRT_OK);
    reference(&g, g.cnt, ref, lo);
    poison(lo);
    if (n % 2) ck_assert_int_eq(clcrt_preempt_begin(hi), CLCRT_OK);
    run_graph(tg, lo, &g, g.cnt, 4000);
    /* urgent work: the node kernel on a buffer of its own, a single node with no edges */
    NodeArgs u;
    memset(&u, 0, sizeof u);
    u.vals = urgent, u.runs = urgent, u.tiles = 64, u.cnt[0] = 64;
    for (int r = 0; r < 3; r++) ck_assert_int_eq(clcrt_run(hi, g_node_k, (clcrt_dim3){64, 1, 1}, &u, sizeof u), CLCRT_OK);
    if (n % 2) ck_assert_int_eq(clcrt_preempt_end(hi), CLCRT_OK);
    ck_assert_int_eq(clcrt_stream_sync(hi), CLCRT_OK);
    ck_assert_msg(clcrt_stream_sync(lo) == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
    compare(&g, g.cnt, ref, n % 2 ? "under preempt_begin/end" : "beside urgent runs");
    preempted++;
    clcrt_taskgraph_destroy(tg);
  }
  gpu_free(urgent);
  printf("gpu_taskgraph: %d graphs checked on a stream of the lowest priority beside urgent runs\n", preempted);
  clcrt_stream_destroy(hi);
  clcrt_stream_destroy(lo);
}
END_TEST

/* On an SM budget (a green context of 16 SMs, and the rest of the device at once on another
 * stream): the persistent grid is sized for the budget, and every wait still ends. */
START_TEST(test_on_sm_budgets) {
  clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
  o.sm_budget = 16, o.flags = CLCRT_STREAM_SM_ROUND_DOWN;
  clcrt_stream *small = NULL;
  clcrt_status st = clcrt_stream_create_ex(g_rt, &o, &small);
  if (st == CLCRT_E_UNSUPPORTED) {
    printf("gpu_taskgraph: SM budgets: skipped (%s)\n", clcrt_errmsg(g_rt));
    return;
  }
  ck_assert_msg(st == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
  static unsigned ref[SLOTS];
  for (int n = 0; n < (gpu_under_sanitizer() ? 1 : 6); n++) {
    graph g;
    random_graph(&g);
    clcrt_taskgraph *tg = make(&g, CLCRT_SCHED_STEAL, n % 2 ? CLCRT_GRID_PERSISTENT : CLCRT_GRID_AUTO);
    reference(&g, g.cnt, ref, small);
    poison(small);
    run_graph(tg, small, &g, g.cnt, 2000);
    ck_assert_msg(clcrt_stream_sync(small) == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
    compare(&g, g.cnt, ref, "on a 16-SM budget");
    clcrt_taskgraph_destroy(tg);
  }
  printf("gpu_taskgraph: graphs on a budget of %d SMs checked\n", clcrt_stream_sms(small));
  clcrt_stream_destroy(small);
}
END_TEST

/* Traces: every tile of every traced run once, with its node, its index and its ticket (the
 * tickets of a run a permutation of 0 .. total - 1); a tile that waited has a wait record ending
 * where its tile function starts; no tile's ticket is below a tile it needs; the JSON names the
 * waits; the summary counts tiles, not waits. */
START_TEST(test_trace) {
  clcrt_stream *s;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s), CLCRT_OK);
  graph g;
  do random_graph(&g);
  while (g.nn < 3 || g.ne < 2);
  unsigned total = 0;
  for (unsigned i = 0; i < g.nn; i++) total += g.cnt[i];
  clcrt_taskgraph *tg = make(&g, CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO);
  ck_assert_int_eq(clcrt_taskgraph_trace_enable(tg, 2 * total + 8), CLCRT_OK);
  poison(s);
  const int runs = 2;
  for (int r = 0; r < runs; r++) run_graph(tg, s, &g, g.cnt, 3000);
  clcrt_trace *t = NULL;
  ck_assert_msg(clcrt_taskgraph_trace_read(tg, s, &t) == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
  size_t n = 0;
  const clcrt_trace_record *rec = clcrt_trace_records(t, &n);
  ck_assert_uint_eq(clcrt_trace_dropped(t), 0);
  static unsigned seen[2][SLOTS], ticket_of[2][SLOTS];
  static unsigned char ticket_seen[2][SLOTS];
  memset(seen, 0, sizeof seen), memset(ticket_seen, 0, sizeof ticket_seen);
  size_t tiles = 0, waits = 0, waits_max = 0;
  unsigned has_in[MAXN] = {0};
  for (unsigned e = 0; e < g.ne; e++) has_in[g.edges[e].to] = 1;
  for (unsigned i = 0; i < g.nn; i++) waits_max += has_in[i] ? (size_t)runs * g.cnt[i] : 0;
  for (size_t i = 0; i < n; i++) {
    const clcrt_trace_record *x = &rec[i];
    ck_assert_uint_lt(x->run, runs);
    ck_assert_uint_lt(x->unit, g.nn);
    ck_assert_uint_lt(x->tile, g.cnt[x->unit]);
    ck_assert_uint_lt(x->cluster, total);
    if (x->flags & CLCRT_TRACE_WAIT) {
      ck_assert_msg(has_in[x->unit], "a wait record of node %u, which waits on no node", x->unit);
      waits++;
      continue;
    }
    tiles++;
    seen[x->run][x->unit * 400 + x->tile]++;
    ticket_of[x->run][x->unit * 400 + x->tile] = x->cluster;
    ck_assert_int_eq(ticket_seen[x->run][x->cluster]++, 0);
  }
  ck_assert_uint_eq(tiles, (size_t)runs * total);
  ck_assert_uint_le(waits, waits_max);
  for (int r = 0; r < runs; r++)
    for (unsigned i = 0; i < g.nn; i++)
      for (unsigned l = 0; l < g.cnt[i]; l++) GPU_CHECK(seen[r][i * 400 + l] == 1, "run %d node %u tile %u", r, i, l);
  /* tickets: node-major, so a node's tiles come after every tile of the nodes before it */
  for (int r = 0; r < runs; r++) {
    unsigned lo = 0;
    for (unsigned i = 0; i < g.nn; i++) {
      for (unsigned l = 0; l < g.cnt[i]; l++)
        GPU_CHECK(ticket_of[r][i * 400 + l] >= lo && ticket_of[r][i * 400 + l] < lo + g.cnt[i],
                  "run %d node %u tile %u: ticket %u outside %u..%u", r, i, l, ticket_of[r][i * 400 + l], lo,
                  lo + g.cnt[i]);
      lo += g.cnt[i];
    }
  }
  clcrt_trace_summary sum = CLCRT_TRACE_SUMMARY_INIT;
  ck_assert_int_eq(clcrt_trace_summarize(t, &sum), CLCRT_OK);
  ck_assert_uint_eq(sum.tiles, tiles);
  char path[] = "/tmp/gpu_taskgraph_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_int_eq(clcrt_trace_save_json(t, path), CLCRT_OK);
  clcrt_trace *back = NULL;
  ck_assert_int_eq(clcrt_trace_load_json(path, &back), CLCRT_OK);
  size_t nb = 0;
  const clcrt_trace_record *rb = clcrt_trace_records(back, &nb);
  ck_assert_uint_eq(nb, n);
  size_t wb = 0;
  for (size_t i = 0; i < nb; i++) wb += (rb[i].flags & CLCRT_TRACE_WAIT) != 0;
  ck_assert_uint_eq(wb, waits);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  const long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)size + 1);
  size_t got = fread(buf, 1, (size_t)size, f);
  buf[got] = 0;
  fclose(f);
  ck_assert_msg(waits == 0 || strstr(buf, "\"name\":\"wait "), "no wait event in the JSON");
  free(buf);
  remove(path);
  printf("gpu_taskgraph: trace of %d runs: %zu tiles, %zu waits, tickets node-major\n", runs, tiles, waits);
  clcrt_trace_destroy(back);
  clcrt_trace_destroy(t);
  ck_assert_int_eq(clcrt_taskgraph_trace_enable(tg, 0), CLCRT_OK);
  ck_assert_int_eq(clcrt_taskgraph_trace_read(tg, s, &t), CLCRT_E_INVALID);
  clcrt_taskgraph_destroy(tg);
  clcrt_stream_destroy(s);
}
END_TEST

/* Tile counts that break an edge are refused with a message, and nothing runs. */
START_TEST(test_run_refusals) {
  clcrt_stream *s;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s), CLCRT_OK);
  graph g = {.nn = 3, .ne = 2, .cnt = {8, 4, 16}};
  g.edges[0] = (clcrt_task_edge){.from = 0, .to = 1, .kind = CLCRT_DEP_KSLICES, .a = 2};
  g.edges[1] = (clcrt_task_edge){.from = 1, .to = 2, .kind = CLCRT_DEP_SAME};
  clcrt_taskgraph *tg = make(&g, CLCRT_SCHED_AUTO, CLCRT_GRID_AUTO);
  NodeArgs a[MAXN];
  node_args(&g, g.cnt, 0, a);
  const void *args[3] = {&a[0], &a[1], &a[2]};
  clcrt_dim3 tiles[3] = {{8, 1, 1}, {4, 1, 1}, {16, 1, 1}};
  ck_assert_int_eq(clcrt_taskgraph_run(tg, s, tiles, args), CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(g_rt), "SAME"));
  tiles[2].x = 4, tiles[0].x = 9;
  ck_assert_int_eq(clcrt_taskgraph_run(tg, s, tiles, args), CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(g_rt), "KSLICES"));
  args[1] = NULL, tiles[0].x = 8;
  ck_assert_int_eq(clcrt_taskgraph_run(tg, s, tiles, args), CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(g_rt), "args[1]"));
  clcrt_taskgraph_destroy(tg);
  clcrt_stream_destroy(s);
}
END_TEST

int main(void) {
  gpu_skip_if_absent("gpu_taskgraph");
  g_seed ^= gpu_test_seed("gpu_taskgraph") * 0xD1B54A32D192ED03ull;
  if (!g_seed) g_seed = 1; /* xorshift stays at zero */
  Suite *su = suite_create("taskgraph");
  TCase *tc = tcase_create("taskgraph");
  tcase_set_timeout(tc, 600);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_random_graphs);
  tcase_add_test(tc, test_capture_replay);
  tcase_add_test(tc, test_run_refusals);
  tcase_add_test(tc, test_under_preemption);
  tcase_add_test(tc, test_on_sm_budgets);
  tcase_add_test(tc, test_trace);
  suite_add_tcase(su, tc);
  SRunner *r = srunner_create(su);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
