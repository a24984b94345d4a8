/* Task graphs (include/clcrt_ops.h) without a GPU: the generated dispatcher compiles for sm_90a
 * and sm_100a with every edge kind and every scheduler the architecture has; its PTX holds
 * the protocol's instructions (the acquire polls, the fence and the counter adds, the finishing
 * count, the proxy fence) and the prefetch function's call; a node
 * whose Args size is not the descriptor's stops the compile with a message naming the node; bad
 * descriptors and runs get a status and a message. What runs is tested on the GPU
 * (tests/gpu_taskgraph.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clcrt.h"
#include "clcrt_ops.h"

static const char *SRC =
    "struct A { float *x; unsigned n; };\n"
    "struct B { float *y; const float *x; unsigned n; };\n"
    "__device__ uint2 span3(unsigned tile, unsigned tiles, unsigned ptiles) { return make_uint2(tile, tile + 3); }\n"
    "__device__ void warm(const clcrt::Tile &t, const B &b) { asm volatile(\"prefetch.global.L2 [%0];\" ::\"l\"(b.x)); }\n"
    "__device__ void fill(const clcrt::Tile &t, const A &a) { a.x[t.linear * blockDim.x + threadIdx.x] = 1.0f; }\n"
    "__device__ void twice(const clcrt::Tile &t, const B &b) {\n"
    "  unsigned i = t.linear * blockDim.x + threadIdx.x; b.y[i] = 2.0f * b.x[i];\n"
    "}\n";

static clcrt_runtime *rt_arch(const char *arch) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = arch;
  o.cache_dir = "";
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  ck_assert_msg(st == CLCRT_OK, "%s", clcrt_errmsg(rt));
  return rt;
}

/* Four nodes with an edge of every kind. */
static const clcrt_task_node k_nodes[] = {
    {"fill", "A", 16, NULL}, {"twice", "B", 24, "warm"}, {"twice", "B", 24, NULL}, {"twice", "B", 24, NULL}};
static const clcrt_task_edge k_edges[] = {
    {.from = 0, .to = 1, .kind = CLCRT_DEP_ALL},      {.from = 0, .to = 2, .kind = CLCRT_DEP_SAME},
    {.from = 1, .to = 2, .kind = CLCRT_DEP_ROWS, .a = 4, .b = 2},
    {.from = 2, .to = 3, .kind = CLCRT_DEP_KSLICES, .a = 2},
    {.from = 1, .to = 3, .kind = CLCRT_DEP_CUSTOM, .fn = "span3"}};

static clcrt_taskgraph_desc desc(void) {
  clcrt_taskgraph_desc d = CLCRT_TASKGRAPH_DESC_INIT;
  d.source = SRC, d.nodes = k_nodes, d.num_nodes = 4, d.edges = k_edges, d.num_edges = 5;
  d.block = (clcrt_dim3){128, 1, 1};
  return d;
}

static int cubin_has(const clcrt_kernel *k, const char *needle) {
  const char *ptx = NULL;
  ck_assert_int_eq(clcrt_kernel_ptx(k, &ptx), CLCRT_OK);
  return strstr(ptx, needle) != NULL;
}

static void compiles_for(const char *arch, const clcrt_sched *scheds, int n) {
  clcrt_runtime *rt = rt_arch(arch);
  clcrt_ops *ops = NULL;
  ck_assert_int_eq(clcrt_ops_create(rt, &ops), CLCRT_OK);
  for (int i = 0; i < n; i++) {
    clcrt_taskgraph_desc d = desc();
    d.sched = scheds[i];
    clcrt_taskgraph *g = NULL;
    ck_assert_msg(clcrt_taskgraph_create(ops, &d, &g) == CLCRT_OK, "%s %s: %s", arch, clcrt_sched_name(scheds[i]),
                  clcrt_errmsg(rt));
    const clcrt_kernel *k = clcrt_taskgraph_kernel(g);
    ck_assert_ptr_nonnull(k);
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
    ck_assert_str_eq(info.arch, arch);
    /* AUTO: CLC with its hardware cancel on sm_100a, STEAL on sm_90a */
    const clcrt_sched want = scheds[i] != CLCRT_SCHED_AUTO ? scheds[i]
                             : strcmp(arch, "sm_100a") ? CLCRT_SCHED_STEAL
                                                       : CLCRT_SCHED_CLC;
    ck_assert_int_eq(info.sched, want);
    ck_assert_int_eq(info.has_clc, want == CLCRT_SCHED_CLC);
    ck_assert_int_le(info.stack_bytes, 64);
    ck_assert_msg(cubin_has(k, "ld.acquire.gpu.global.u32"), "%s: no acquire poll", arch);
    ck_assert_msg(cubin_has(k, "fence.acq_rel.gpu"), "%s: no fence before the counter adds", arch);
    ck_assert_msg(cubin_has(k, "red.relaxed.gpu.global.add.u32"), "%s: no counter add", arch);
    ck_assert_msg(cubin_has(k, "red.release.gpu.global.add.u32"), "%s: no finishing count", arch);
    ck_assert_msg(!cubin_has(k, "fence.proxy.async.global"), "%s: a proxy fence nobody asked for", arch);
    const char *src = clcrt_taskgraph_source(g);
    ck_assert_ptr_nonnull(strstr(src, "clcrt_tg::wait(c + l, 2u)")); /* KSLICES: the slices */
    ck_assert_ptr_nonnull(strstr(src, "span3(l, tc, tp)"));          /* CUSTOM */
    /* the releases are the second warp's first thread's (thread 0 takes the next ticket meanwhile) */
    ck_assert_ptr_nonnull(strstr(src, "const bool rel = blockDim.x * blockDim.y * blockDim.z > 32u ? tid == 32u : t0;"));
    ck_assert_ptr_nonnull(strstr(src, "if (rel) {\n      clcrt_tg::fence();"));
    ck_assert_ptr_nonnull(strstr(src, "} else if (rel) {\n    clcrt_tg::release_add(g.ctr + 1);"));
    ck_assert_ptr_nonnull(strstr(src, "warm(lt, g.a1);  // before the waits"));
    ck_assert_msg(cubin_has(k, "prefetch.global.L2"), "%s: the prefetch function was not called", arch);
    clcrt_dim3 tiles[4] = {{8, 1, 1}, {8, 1, 1}, {8, 1, 1}, {4, 1, 1}};
    const void *args[4] = {src, src, src, src};
    ck_assert_int_eq(clcrt_taskgraph_run(g, NULL, tiles, args), CLCRT_E_INVALID);
    clcrt_stream *s = (clcrt_stream *)1; /* never dereferenced: compile-only refuses first */
    ck_assert_int_eq(clcrt_taskgraph_run(g, s, tiles, args), CLCRT_E_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "only compiles"));
    ck_assert_int_eq(clcrt_taskgraph_run_ex(g, s, tiles, args, CLCRT_RUN_PDL), CLCRT_E_NO_DEVICE);
    ck_assert_int_eq(clcrt_taskgraph_run_ex(g, s, tiles, args, 2u), CLCRT_E_INVALID); /* no such flag */
    ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "only CLCRT_RUN_PDL"));
    ck_assert_int_eq(clcrt_taskgraph_trace_enable(g, 16), CLCRT_E_NO_DEVICE);
    clcrt_taskgraph_destroy(g);
    /* CLCRT_TASKGRAPH_ASYNC_READS: a proxy fence after the waits, for TMA reads of produced data */
    d.flags = CLCRT_TASKGRAPH_ASYNC_READS;
    ck_assert_msg(clcrt_taskgraph_create(ops, &d, &g) == CLCRT_OK, "%s", clcrt_errmsg(rt));
    ck_assert_msg(cubin_has(clcrt_taskgraph_kernel(g), "fence.proxy.async.global"), "%s: no proxy fence", arch);
    clcrt_taskgraph_destroy(g);
  }
  clcrt_ops_destroy(ops);
  clcrt_runtime_destroy(rt);
}

START_TEST(test_compiles_sm90a) {
  const clcrt_sched s[] = {CLCRT_SCHED_AUTO, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};
  compiles_for("sm_90a", s, 3);
}
END_TEST

START_TEST(test_compiles_sm100a) {
  const clcrt_sched s[] = {CLCRT_SCHED_AUTO, CLCRT_SCHED_STEAL};
  compiles_for("sm_100a", s, 2);
}
END_TEST

/* A wrong args_size is a compile error that names the node and the field to fix. */
START_TEST(test_args_size_checked) {
  clcrt_runtime *rt = rt_arch("sm_90a");
  clcrt_ops *ops = NULL;
  ck_assert_int_eq(clcrt_ops_create(rt, &ops), CLCRT_OK);
  clcrt_task_node nodes[2] = {{"fill", "A", 16, NULL}, {"twice", "B", 20, NULL}};
  clcrt_task_edge e = {.from = 0, .to = 1, .kind = CLCRT_DEP_SAME};
  clcrt_taskgraph_desc d = desc();
  d.nodes = nodes, d.num_nodes = 2, d.edges = &e, d.num_edges = 1;
  clcrt_taskgraph *g = NULL;
  ck_assert_int_eq(clcrt_taskgraph_create(ops, &d, &g), CLCRT_E_COMPILE);
  ck_assert_ptr_null(g);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "node 1: sizeof(B) is not the descriptor's args_size"), "%s",
                clcrt_errmsg(rt));
  clcrt_ops_destroy(ops);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_bad_descs) {
  clcrt_runtime *rt = rt_arch("sm_90a");
  clcrt_ops *ops = NULL;
  ck_assert_int_eq(clcrt_ops_create(rt, &ops), CLCRT_OK);
  clcrt_taskgraph *g = NULL;
  clcrt_task_node nodes[4];
  clcrt_task_edge edges[5];
#define CASE(expect, ...)                                                                                     \
  do {                                                                                                       \
    memcpy(nodes, k_nodes, sizeof nodes), memcpy(edges, k_edges, sizeof edges);                              \
    clcrt_taskgraph_desc d = desc();                                                                         \
    d.nodes = nodes, d.edges = edges;                                                                        \
    __VA_ARGS__;                                                                                             \
    ck_assert_int_eq(clcrt_taskgraph_create(ops, &d, &g), CLCRT_E_INVALID);                                  \
    ck_assert_ptr_null(g);                                                                                   \
    ck_assert_msg(strstr(clcrt_errmsg(rt), expect), "wanted \"%s\" in: %s", expect, clcrt_errmsg(rt));       \
  } while (0)
  CASE("CLCRT_TASKGRAPH_DESC_INIT", d.size = 8);
  CASE("source is empty", d.source = "");
  CASE("0 nodes", d.num_nodes = 0);
  CASE("33 nodes", d.num_nodes = 33);
  CASE("node 2 needs the names", nodes[2].tile_fn = "not a name");
  CASE("node 3 (twice): prefetch_fn is not a function name", nodes[3].prefetch_fn = "x y");
  CASE("node 1 (twice): args_size 0", nodes[1].args_size = 0);
  CASE("edge 2 goes from node 2 to node 1", edges[2].from = 2, edges[2].to = 1);
  CASE("edge 0 goes from node 0 to node 0", edges[0].to = 0);
  CASE("edge 4 goes from node 1 to node 9", edges[4].to = 9);
  CASE("edge 2 (ROWS) needs a >= 1", edges[2].a = 0);
  CASE("edge 3 (KSLICES) needs a >= 1", edges[3].a = 0);
  CASE("edge 4 (CUSTOM) needs fn", edges[4].fn = NULL);
  CASE("edge 1 has kind 9", edges[1].kind = (clcrt_dep_kind)9);
  CASE("129 edges", d.num_edges = 129);
  CASE("flags 0x6 has bits", d.flags = 6);
  CASE("more than the 4160 a launch carries", nodes[3].args_size = 4000);
#undef CASE
  ck_assert_int_eq(clcrt_taskgraph_create(ops, NULL, &g), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_taskgraph_create(NULL, NULL, &g), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_taskgraph_run(NULL, NULL, NULL, NULL), CLCRT_E_INVALID);
  ck_assert_ptr_null(clcrt_taskgraph_kernel(NULL));
  clcrt_taskgraph_destroy(NULL);
  clcrt_ops_destroy(ops);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* A task graph's trace shape without a GPU: wait records (CLCRT_TRACE_WAIT) are named "wait N" in
 * the JSON, come back from it with their flag, and the summary counts neither them as tiles nor
 * their time as busy. */
START_TEST(test_wait_records) {
  clcrt_trace_record r[3];
  memset(r, 0, sizeof r);
  r[0].start_ns = 1000, r[0].end_ns = 5000, r[0].tile = 3, r[0].unit = 1, r[0].sm = 2, r[0].flags = CLCRT_TRACE_WAIT;
  r[1].start_ns = 5000, r[1].end_ns = 6000, r[1].tile = 3, r[1].unit = 1, r[1].sm = 2;
  r[2].start_ns = 1000, r[2].end_ns = 3000, r[2].tile = 0, r[2].unit = 0, r[2].sm = 0;
  clcrt_trace *t = NULL;
  ck_assert_int_eq(clcrt_trace_create(r, 3, 0, &t), CLCRT_OK);
  clcrt_trace_summary sum = CLCRT_TRACE_SUMMARY_INIT;
  ck_assert_int_eq(clcrt_trace_summarize(t, &sum), CLCRT_OK);
  ck_assert_uint_eq(sum.tiles, 2);
  ck_assert(sum.busy_fraction[2] > 0.19 && sum.busy_fraction[2] < 0.21); /* 1000 of 5000 ns, not 5000 */
  char path[] = "/tmp/test_taskgraph_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_int_eq(clcrt_trace_save_json(t, path), CLCRT_OK);
  FILE *f = fopen(path, "r");
  char buf[8192];
  size_t got = fread(buf, 1, sizeof buf - 1, f);
  buf[got] = 0;
  fclose(f);
  ck_assert_ptr_nonnull(strstr(buf, "\"name\":\"wait 3\""));
  ck_assert_ptr_nonnull(strstr(buf, "\"name\":\"tile 3\""));
  clcrt_trace *back = NULL;
  ck_assert_int_eq(clcrt_trace_load_json(path, &back), CLCRT_OK);
  size_t n = 0;
  const clcrt_trace_record *b = clcrt_trace_records(back, &n);
  ck_assert_uint_eq(n, 3);
  int waits = 0;
  for (size_t i = 0; i < n; i++) waits += (b[i].flags & CLCRT_TRACE_WAIT) != 0;
  ck_assert_int_eq(waits, 1);
  remove(path);
  clcrt_trace_destroy(back);
  clcrt_trace_destroy(t);
  /* waits only: no tile, an empty summary */
  ck_assert_int_eq(clcrt_trace_create(r, 1, 0, &t), CLCRT_OK);
  sum = (clcrt_trace_summary)CLCRT_TRACE_SUMMARY_INIT;
  ck_assert_int_eq(clcrt_trace_summarize(t, &sum), CLCRT_OK);
  ck_assert_uint_eq(sum.tiles, 0);
  ck_assert_uint_eq(sum.num_sms, 0);
  clcrt_trace_destroy(t);
}
END_TEST

int main(void) {
  setenv("CLCRT_WARMUP", "0", 1);
  Suite *s = suite_create("taskgraph");
  TCase *tc = tcase_create("compile_only");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_compiles_sm90a);
  tcase_add_test(tc, test_compiles_sm100a);
  tcase_add_test(tc, test_args_size_checked);
  tcase_add_test(tc, test_bad_descs);
  tcase_add_test(tc, test_wait_records);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
