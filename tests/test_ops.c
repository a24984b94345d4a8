/* The op library (include/clcrt_ops.h, ops/) without a GPU.
 *
 * Compile-only: the tile functions compile for sm_90a and sm_100a through the op, the
 * embedded source carries the ABI header in place of its #include, plans are described, and
 * bad descriptors get a status and a message that says what to do.
 *
 * On a fake H100 driver (tests/common/fake_driver.c; device memory is host memory, launches
 * are recorded, not run): the workspace invariants of clcrt_ops.h, checked on the Args each
 * launch hands the driver, over random sequences of shapes and decompositions on several
 * streams: stream-K counters never inside any partials buffer, zeroed on the run's own stream
 * before first use and kept while no growth is needed; captured runs get buffers of their own
 * that the graph owns and that are freed once the graph lets go; CU_STREAM_PER_THREAD keyed by
 * thread; a grouped run's misuse report turned into an error by the next call. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clcrt.h"
#include "clcrt_ops.h"
#include "common/fake_driver.h"
#include "driver.h"
#include "gemm_internal.h"

/* ---- compile-only ---------------------------------------------------------------------------- */

static clcrt_runtime *rt_arch(const char *arch) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = arch;
  o.cache_dir = "";
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  ck_assert_msg(st == CLCRT_OK, "%s", clcrt_errmsg(rt));
  return rt;
}

START_TEST(test_source_splices_abi) {
  const char *s = clcrt_gemm_source();
  ck_assert_ptr_nonnull(s);
  ck_assert_ptr_nonnull(strstr(s, "#line 1 \"gemm_abi.h\""));
  ck_assert_ptr_nonnull(strstr(s, "typedef struct GemmArgs"));
  ck_assert_ptr_null(strstr(s, "#include \"gemm_abi.h\""));
  ck_assert_ptr_nonnull(strstr(s, "#line 1 \"gemm_wgmma.h\""));
  ck_assert_ptr_null(strstr(s, "#include \"gemm_wgmma.h\""));
  ck_assert_ptr_nonnull(strstr(s, "__device__ void gemm_tile("));
  ck_assert_ptr_eq(s, clcrt_gemm_source()); /* made once */
}
END_TEST

/* The op compiles its kernels for both architectures: dense and grouped, every scheduler the
 * architecture has, through clcrt_gemm_kernel. */
START_TEST(test_kernels_compile) {
  clcrt_runtime *rt = rt_arch("sm_90a");
  clcrt_ops *ops = NULL;
  ck_assert_int_eq(clcrt_ops_create(rt, &ops), CLCRT_OK);
  const clcrt_kernel *k = NULL;
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  ck_assert_msg(clcrt_gemm_kernel(ops, NULL, CLCRT_SCHED_AUTO, CLCRT_GEMM_DENSE, &k) == CLCRT_OK, "%s",
                clcrt_errmsg(rt));
  ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
  ck_assert_str_eq(info.arch, "sm_90a");
  ck_assert_int_eq(info.sched, CLCRT_SCHED_STEAL); /* the plan's scheduler, whatever AUTO would be */
  ck_assert_msg(clcrt_gemm_kernel(ops, "128x128", CLCRT_SCHED_STATIC, CLCRT_GEMM_GROUPED, &k) == CLCRT_OK, "%s",
                clcrt_errmsg(rt));
  ck_assert_msg(clcrt_gemm_kernel(ops, "64x48", CLCRT_SCHED_STEAL, CLCRT_GEMM_DENSE, &k) == CLCRT_OK, "%s",
                clcrt_errmsg(rt));
  ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
  ck_assert_uint_eq(info.block.x, 160); /* one consumer warpgroup and the producer warp */
  /* A compile-only runtime runs nothing. */
  clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
  g.m = g.n = g.k = 64, g.a = g.b = g.d = 0x10000;
  clcrt_stream *s = (clcrt_stream *)0x1; /* never touched: refused first */
  ck_assert_int_eq(clcrt_gemm(ops, s, &g), CLCRT_E_NO_DEVICE);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "compiles"));
  clcrt_ops_destroy(ops);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* The tile functions are Hopper's (wgmma): on another architecture the op says so. */
START_TEST(test_blackwell_refused) {
  clcrt_runtime *rt = rt_arch("sm_100a");
  clcrt_ops *ops = NULL;
  ck_assert_int_eq(clcrt_ops_create(rt, &ops), CLCRT_OK);
  const clcrt_kernel *k = NULL;
  ck_assert_int_eq(clcrt_gemm_kernel(ops, NULL, CLCRT_SCHED_AUTO, CLCRT_GEMM_DENSE, &k), CLCRT_E_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "sm_90a"));
  clcrt_ops_destroy(ops);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ops/gemm_wgmma.h is generated and checked in: it must be what its script writes now. */
START_TEST(test_generated_wgmma_is_current) {
  if (system("command -v python3 >/dev/null 2>&1") != 0) {
    printf("test_ops: SKIP the generated-file check: no python3\n");
    return;
  }
  ck_assert_msg(system("python3 scripts/gen_wgmma.py | cmp -s - ops/gemm_wgmma.h") == 0,
                "ops/gemm_wgmma.h is not what scripts/gen_wgmma.py writes: run python3 scripts/gen_wgmma.py > "
                "ops/gemm_wgmma.h");
}
END_TEST

START_TEST(test_variants_listed) {
  ck_assert_int_ge(clcrt_gemm_variant_count(), 5);
  clcrt_gemm_variant_info v = CLCRT_GEMM_VARIANT_INFO_INIT;
  ck_assert_int_eq(clcrt_gemm_variant_get(0, &v), CLCRT_OK);
  ck_assert_str_eq(v.name, "128x256");
  ck_assert_uint_eq(v.bm, 128);
  ck_assert_uint_eq(v.bn, 256);
  ck_assert_int_eq(clcrt_gemm_variant_get(1000, &v), CLCRT_E_NOT_FOUND);
  const int i = clcrt_gemm_variant_find("64x112");
  ck_assert_int_ge(i, clcrt_gemm_variant_count());
  ck_assert_int_eq(clcrt_gemm_variant_get(i, &v), CLCRT_OK);
  ck_assert_str_eq(v.name, "64x112");
  ck_assert_uint_ge(v.stages, 3);
  ck_assert_int_eq(clcrt_gemm_variant_find("64x113"), -1);
  ck_assert_int_eq(clcrt_gemm_variant_find("128x256"), 0);
  v.size = 3;
  ck_assert_int_eq(clcrt_gemm_variant_get(0, &v), CLCRT_E_INVALID);
  ck_assert_uint_eq(clcrt_gemm_max_groups(), GEMM_MAX_GROUPS);
}
END_TEST

/* Plans described without running, on a compile-only runtime: the model's choice, and the
 * splits asked for. */
START_TEST(test_plan_get) {
  clcrt_runtime *rt = rt_arch("sm_90a");
  clcrt_ops *ops = NULL;
  ck_assert_int_eq(clcrt_ops_create(rt, &ops), CLCRT_OK);
  clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
  clcrt_gemm_plan_info p = CLCRT_GEMM_PLAN_INFO_INIT;
  g.m = 8192, g.n = 8192, g.k = 8192, g.a = g.b = g.d = 0x100000;
  ck_assert_msg(clcrt_gemm_plan_get(ops, NULL, &g, &p) == CLCRT_OK, "%s", clcrt_errmsg(rt));
  const gemm_plan model = gemm_plan_dense(8192, 8192, 8192, 128, clcrt_runtime_num_sms(rt) > 0 ? clcrt_runtime_num_sms(rt) : 132,
                                           clcrt_runtime_mem_bandwidth(rt));
  ck_assert_double_eq(clcrt_runtime_mem_bandwidth(rt), 0); /* compile-only: unknown, the H100's model */
  ck_assert_double_eq(clcrt_runtime_mem_bandwidth(NULL), 0);
  const gemm_variant *mv = gemm_variant_at(model.variant);
  ck_assert_str_eq(p.variant, mv->name);
  ck_assert_uint_eq(p.bm, mv->bm);
  ck_assert_uint_eq(p.bn, mv->bn);
  ck_assert_uint_eq(p.splits, model.sk_units ? model.sk_units / model.sk_tiles : 1);
  ck_assert_uint_eq(p.units, model.sk_units);
  if (!model.sk_units) { /* whole tiles: one unit per tile, the grid counted in CTAs */
    ck_assert_uint_eq(p.tiles.x, (8192u + mv->bm - 1) / mv->bm * ((8192u + mv->bn - 1) / mv->bn));
    ck_assert_uint_eq(p.workspace_bytes, 0);
  }
  g.split = CLCRT_GEMM_SPLIT_ALL;
  ck_assert_int_eq(clcrt_gemm_plan_get(ops, NULL, &g, &p), CLCRT_OK);
  ck_assert_uint_ge(p.splits, 2);
  ck_assert_uint_eq(p.units, p.shared_tiles * p.splits);
  ck_assert_uint_gt(p.workspace_bytes, 0);
  {
    /* A long decode projection whose 72 transposed tiles would leave 60 of 132 SMs idle: one
     * range of k-blocks per SM, crossing tiles; splits counts the units a tile has at most. */
    clcrt_gemm_desc h = CLCRT_GEMM_DESC_INIT;
    h.m = 16, h.n = 4608, h.k = 36864, h.a = h.b = h.d = 0x100000;
    ck_assert_msg(clcrt_gemm_plan_get(ops, NULL, &h, &p) == CLCRT_OK, "%s", clcrt_errmsg(rt));
    ck_assert_str_eq(p.variant, "64x16t");
    ck_assert_uint_eq(p.shared_tiles, 72);
    ck_assert_uint_eq(p.units, 132);
    ck_assert_uint_eq(p.splits, 2);
    ck_assert_uint_eq(p.tiles.x, 132);
    ck_assert_uint_gt(p.workspace_bytes, 0);
  }
  g.split = CLCRT_GEMM_SPLIT_AUTO, g.variant = "128x64";
  ck_assert_int_eq(clcrt_gemm_plan_get(ops, NULL, &g, &p), CLCRT_OK);
  ck_assert_str_eq(p.variant, "128x64");
  /* A generated tile shape, by name; shapes the tile function does not have are refused. */
  g.variant = "64x96", g.split = CLCRT_GEMM_SPLIT_NONE; /* whole tiles: the grid is the tiles */
  ck_assert_msg(clcrt_gemm_plan_get(ops, NULL, &g, &p) == CLCRT_OK, "%s", clcrt_errmsg(rt));
  ck_assert_str_eq(p.variant, "64x96");
  ck_assert_uint_eq(p.bm, 64);
  ck_assert_uint_eq(p.bn, 96);
  ck_assert_uint_eq(p.tiles.x, 128u * 86u); /* 8192 / 64 x ceil(8192 / 96) */
  g.variant = "128x176c2", g.split = CLCRT_GEMM_SPLIT_AUTO;
  ck_assert_int_eq(clcrt_gemm_plan_get(ops, NULL, &g, &p), CLCRT_OK);
  ck_assert_uint_eq(p.cluster_m, 2);
  /* A shape transposed, by name: A and B swapped, its tiles along N (the grid of the swapped
   * problem); not for 128x256c2 (no transposed kernel), not with done, not grouped. */
  g.m = 300, g.n = 151936, g.k = 5120, g.variant = "128x160t", g.split = CLCRT_GEMM_SPLIT_NONE;
  ck_assert_msg(clcrt_gemm_plan_get(ops, NULL, &g, &p) == CLCRT_OK, "%s", clcrt_errmsg(rt));
  ck_assert_str_eq(p.variant, "128x160t");
  ck_assert_uint_eq(p.tiles.x, 1187u * 2u); /* ceil(151936 / 128) x ceil(300 / 160) */
  g.variant = NULL, g.split = CLCRT_GEMM_SPLIT_AUTO; /* the default plan of a vocabulary head is transposed */
  ck_assert_int_eq(clcrt_gemm_plan_get(ops, NULL, &g, &p), CLCRT_OK);
  ck_assert_int_eq(p.variant[strlen(p.variant) - 1], 't');
  g.done = 0x200000; /* done counts rows by 64-row blocks: the plan keeps rows */
  ck_assert_int_eq(clcrt_gemm_plan_get(ops, NULL, &g, &p), CLCRT_OK);
  ck_assert_int_ne(p.variant[strlen(p.variant) - 1], 't');
  g.variant = "128x160t";
  ck_assert_int_eq(clcrt_gemm_plan_get(ops, NULL, &g, &p), CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "transposed"));
  g.done = 0;
  clcrt_gemm_desc gg = g;
  gg.layout = CLCRT_GEMM_GROUPED, gg.groups = 2, gg.group_sizes = 0x300000;
  ck_assert_int_eq(clcrt_gemm_plan_get(ops, NULL, &gg, &p), CLCRT_E_INVALID);
  g.m = g.n = g.k = 8192;
  static const char *const bad_names[] = {"no-such", "64x100", "192x64", "128x272", "128x64c3", "128x256c2t", "128x64tt"};
  for (int i = 0; i < 7; i++) {
    g.variant = bad_names[i];
    ck_assert_msg(clcrt_gemm_plan_get(ops, NULL, &g, &p) == CLCRT_E_INVALID, "%s was accepted", bad_names[i]);
    ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "128x256"));
    ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "BMxBN"));
  }
  clcrt_ops_destroy(ops);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Every bad descriptor: CLCRT_E_INVALID and a message naming what was wrong. */
START_TEST(test_bad_descs) {
  clcrt_runtime *rt = rt_arch("sm_90a");
  clcrt_ops *ops = NULL;
  ck_assert_int_eq(clcrt_ops_create(rt, &ops), CLCRT_OK);
  clcrt_gemm_plan_info p = CLCRT_GEMM_PLAN_INFO_INIT;
  struct {
    const char *what, *says;
  } cases[] = {{"k", "multiple of 8"},         {"k0", "multiple of 8"},      {"lda", "lda"},
               {"ldb", "ldb"},                 {"ldd", "ldd"},               {"align", "16-byte aligned"},
               {"null", "address is 0"},       {"dtype", "BF16"},            {"groups", "groups"},
               {"sizes", "group_sizes"},       {"layout", "layout"},         {"sched", "sched"},
               {"split", "split"},             {"flags", "flags"},           {"huge", "too large"},
               {"size", "CLCRT_GEMM_DESC_INIT"}, {"dalign", "2-byte"},       {"grouped_split", "dense"},
               {"done_grouped", "dense problems"}, {"done_align", "4-byte aligned"}, {"done_n", "2^24"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
    g.m = 100, g.n = 200, g.k = 64, g.a = 0x10000, g.b = 0x20000, g.d = 0x30000;
    const char *w = cases[i].what;
    if (!strcmp(w, "k")) g.k = 12;
    if (!strcmp(w, "k0")) g.k = 0;
    if (!strcmp(w, "lda")) g.lda = 60;
    if (!strcmp(w, "ldb")) g.ldb = 68;
    if (!strcmp(w, "ldd")) g.ldd = 100;
    if (!strcmp(w, "align")) g.a = 0x10008;
    if (!strcmp(w, "null")) g.b = 0;
    if (!strcmp(w, "dtype")) g.dtype = CLCRT_DTYPE_F32;
    if (!strcmp(w, "groups")) g.layout = CLCRT_GEMM_GROUPED, g.groups = 5000, g.group_sizes = 0x40000;
    if (!strcmp(w, "sizes")) g.layout = CLCRT_GEMM_GROUPED, g.groups = 4, g.group_sizes = 0x40002;
    if (!strcmp(w, "layout")) g.layout = (clcrt_gemm_layout)7;
    if (!strcmp(w, "sched")) g.sched = (clcrt_sched)9;
    if (!strcmp(w, "split")) g.split = (clcrt_gemm_split)9;
    if (!strcmp(w, "flags")) g.flags = 0x80;
    if (!strcmp(w, "huge")) g.m = 0xffffff00u, g.n = 0xffffff00u;
    if (!strcmp(w, "size")) g.size = 8;
    if (!strcmp(w, "dalign")) g.d = 0x30001;
    if (!strcmp(w, "done_grouped"))
      g.layout = CLCRT_GEMM_GROUPED, g.groups = 4, g.group_sizes = 0x40000, g.done = 0x50000;
    if (!strcmp(w, "done_align")) g.done = 0x50002;
    if (!strcmp(w, "done_n")) g.n = (1u << 24) + 8, g.done = 0x50000;
    if (!strcmp(w, "grouped_split"))
      g.layout = CLCRT_GEMM_GROUPED, g.groups = 4, g.group_sizes = 0x40000, g.split = CLCRT_GEMM_SPLIT_ALL;
    clcrt_status st = clcrt_gemm_plan_get(ops, NULL, &g, &p);
    ck_assert_msg(st == CLCRT_E_INVALID, "%s: %s", w, clcrt_status_name(st));
    ck_assert_msg(strstr(clcrt_errmsg(rt), cases[i].says), "%s: \"%s\" does not say %s", w, clcrt_errmsg(rt),
                  cases[i].says);
  }
  ck_assert_int_eq(clcrt_gemm_plan_get(NULL, NULL, NULL, &p), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_gemm(NULL, NULL, NULL), CLCRT_E_INVALID);
  clcrt_ops *none = (clcrt_ops *)0x1;
  ck_assert_int_eq(clcrt_ops_create(NULL, &none), CLCRT_E_INVALID);
  ck_assert_ptr_null(none); /* set to NULL on failure */
  clcrt_ops_destroy(NULL);
  clcrt_ops_destroy(ops);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- the fake driver: workspaces ------------------------------------------------------------- */

static clcrt__driver g_fake;
static CUstreamCaptureStatus g_capture;
static unsigned long long g_capture_id = 1;
static GemmArgs g_last; /* the last launch's Args */
static int g_launches;
typedef struct alloc_rec {
  CUdeviceptr p;
  size_t n;
  int live;
  CUcontext ctx; /* current at the allocation */
} alloc_rec;
static alloc_rec g_allocs[4096];
static int g_nallocs;
typedef struct memset_rec {
  CUdeviceptr p;
  size_t n;
  CUstream s;
  CUcontext ctx; /* current at the memset */
} memset_rec;
static memset_rec g_memsets[1024];
static int g_nmemsets, g_syncs;
static CUcontext g_launch_ctx; /* current at the last launch */
static CUhostFn g_uo_fn[256];
static void *g_uo_ptr[256];
static int g_nuo, g_retained;

static CUresult CUDAAPI f_version(int *v) { *v = CUDA_VERSION; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_error_name(CUresult r, const char **s) {
  (void)r;
  *s = "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_lib_load(CUlibrary *l, const void *code, CUjit_option *jo, void **jv, unsigned nj,
                                   CUlibraryOption *lo, void **lv, unsigned nl) {
  static int libs;
  (void)code, (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
  *l = (CUlibrary)(uintptr_t)(0x10000 + 0x100 * ++libs);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_param_info(CUfunction f, size_t i, size_t *off, size_t *size) {
  (void)f;
  *off = i == 0 ? 0 : sizeof(GemmArgs);
  *size = i == 0 ? sizeof(GemmArgs) : 128; /* clcrt__params */
  return i < 2 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
static CUresult CUDAAPI f_occ_blocks(int *n, CUfunction f, int threads, size_t smem) {
  (void)f, (void)threads, (void)smem;
  *n = 1;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_occ_clusters(int *n, CUfunction f, const CUlaunchConfig *c) {
  (void)f, (void)c;
  *n = FAKE_SMS;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_launch(const CUlaunchConfig *c, CUfunction f, void **kp, void **extra) {
  (void)c, (void)f, (void)extra;
  memcpy(&g_last, kp[0], sizeof g_last);
  g_launch_ctx = fake_current;
  g_launches++;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_stream_create(CUstream *s, unsigned flags) {
  static int n;
  (void)flags;
  *s = (CUstream)(uintptr_t)(0x20000 + 0x10 * ++n);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_stream_create_prio(CUstream *s, unsigned flags, int prio) {
  (void)prio;
  return f_stream_create(s, flags);
}
static CUresult CUDAAPI f_stream_destroy(CUstream s) { (void)s; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_stream_sync(CUstream s) { (void)s, g_syncs++; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_is_capturing(CUstream s, CUstreamCaptureStatus *st) {
  (void)s;
  *st = g_capture;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_stream_prio(CUstream s, int *p) {
  (void)s;
  *p = 0;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_capture_info(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                       const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *n) {
  (void)s, (void)edges;
  *st = g_capture;
  if (id) *id = g_capture_id;
  if (g) *g = (CUgraph)0x999;
  if (deps) *deps = NULL;
  if (n) *n = 0;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_alloc(CUdeviceptr *p, size_t n) {
  void *m = calloc(1, n);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  memset(m, 0x5a, n < (1u << 20) ? n : (1u << 20)); /* poison: only a memset makes it zero */
  *p = (CUdeviceptr)(uintptr_t)m;
  if (g_nallocs < 4096) g_allocs[g_nallocs++] = (alloc_rec){*p, n, 1, fake_current};
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_free(CUdeviceptr p) {
  for (int i = 0; i < g_nallocs; i++)
    if (g_allocs[i].p == p && g_allocs[i].live) g_allocs[i].live = 0;
  free((void *)(uintptr_t)p);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_memset_async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) {
  memset((void *)(uintptr_t)p, v, n);
  if (g_nmemsets < 1024) g_memsets[g_nmemsets++] = (memset_rec){p, n, s, fake_current};
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_host_alloc(void **p, size_t n, unsigned flags) {
  (void)flags;
  return (*p = calloc(1, n)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult CUDAAPI f_exchange(CUstreamCaptureMode *m) {
  (void)m;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_encode(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t r, void *g, const cuuint64_t *d,
                                 const cuuint64_t *st, const cuuint32_t *b, const cuuint32_t *e, CUtensorMapInterleave i,
                                 CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill f) {
  (void)t, (void)r, (void)g, (void)st, (void)e, (void)i, (void)sw, (void)l2, (void)f;
  memset(m, 0, sizeof *m);
  m->opaque[0] = d[1], m->opaque[1] = b[1]; /* the rows and the box's rows, for the tests to read */
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_uo_create(CUuserObject *o, void *ptr, CUhostFn fn, unsigned refs, unsigned flags) {
  (void)refs, (void)flags;
  g_uo_fn[g_nuo] = fn, g_uo_ptr[g_nuo] = ptr;
  *o = (CUuserObject)(uintptr_t)(0x100 + g_nuo++);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_uo_release(CUuserObject o, unsigned n) {
  (void)n;
  int i = (int)((uintptr_t)o - 0x100);
  g_uo_fn[i](g_uo_ptr[i]);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_retain(CUgraph g, CUuserObject o, unsigned n, unsigned flags) {
  (void)g, (void)o, (void)n, (void)flags;
  g_retained++;
  return CUDA_SUCCESS;
}

static clcrt_runtime *g_rt;
static clcrt_ops *g_ops;

static void use_fake(void) {
  fake_driver_base(&g_fake);
  g_fake.cuDriverGetVersion = f_version;
  g_fake.cuGetErrorName = f_error_name;
  g_fake.cuGetErrorString = f_error_name;
  g_fake.cuLibraryLoadData = f_lib_load;
  g_fake.cuFuncGetParamInfo = f_param_info;
  g_fake.cuOccupancyMaxActiveBlocksPerMultiprocessor = f_occ_blocks;
  g_fake.cuOccupancyMaxActiveClusters = f_occ_clusters;
  g_fake.cuLaunchKernelEx = f_launch;
  g_fake.cuStreamCreate = f_stream_create;
  g_fake.cuStreamCreateWithPriority = f_stream_create_prio;
  g_fake.cuStreamDestroy = f_stream_destroy;
  g_fake.cuStreamSynchronize = f_stream_sync;
  g_fake.cuStreamGetPriority = f_stream_prio;
  g_fake.cuStreamGetCaptureInfo = f_capture_info;
  g_fake.cuStreamIsCapturing = f_is_capturing;
  g_fake.cuMemAlloc = f_alloc;
  g_fake.cuMemFree = f_free;
  g_fake.cuMemsetD8Async = f_memset_async;
  g_fake.cuMemHostAlloc = f_host_alloc;
  g_fake.cuThreadExchangeStreamCaptureMode = f_exchange;
  g_fake.cuTensorMapEncodeTiled = f_encode;
  g_fake.cuUserObjectCreate = f_uo_create;
  g_fake.cuUserObjectRelease = f_uo_release;
  g_fake.cuGraphRetainUserObject = f_retain;
  clcrt__driver_override(&g_fake);
}

/* Registered (compiled by NVRTC) once in the parent, before the tests fork. */
static void setup_once(void) {
  setenv("CLCRT_WARMUP", "0", 1);
  use_fake();
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = "";
  if (clcrt_runtime_create(&g_rt, &o) != CLCRT_OK || clcrt_ops_create(g_rt, &g_ops) != CLCRT_OK) {
    fprintf(stderr, "test_ops: the op on the fake driver: %s\n", clcrt_errmsg(g_rt));
    exit(1);
  }
  static const char *const vars[] = {"128x256", "128x128"};
  for (int i = 0; i < 2; i++)
    for (int grouped = 0; grouped < 2; grouped++) {
      const clcrt_kernel *k = NULL;
      if (clcrt_gemm_kernel(g_ops, vars[i], CLCRT_SCHED_STEAL, grouped ? CLCRT_GEMM_GROUPED : CLCRT_GEMM_DENSE, &k) !=
              CLCRT_OK ||
          clcrt_kernel_prepare(k, CLCRT_USE_SHORT | CLCRT_USE_GRAPH) != CLCRT_OK) {
        fprintf(stderr, "test_ops: kernels: %s\n", clcrt_errmsg(g_rt));
        exit(1);
      }
    }
}

static const alloc_rec *alloc_of(CUdeviceptr p) {
  for (int i = g_nallocs - 1; i >= 0; i--)
    if (g_allocs[i].live && p >= g_allocs[i].p && p < g_allocs[i].p + g_allocs[i].n) return &g_allocs[i];
  return NULL;
}

static clcrt_gemm_plan_info g_last_plan;

/* A dense run of m x n x k with the given split on s; returns the Args it launched with. */
static GemmArgs dense(clcrt_stream *s, unsigned m, unsigned n, unsigned k, clcrt_gemm_split split, const char *var) {
  clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
  g.m = m, g.n = n, g.k = k, g.a = 1ull << 36, g.b = 2ull << 36, g.d = 3ull << 36, g.split = split, g.variant = var;
  int before = g_launches;
  g_last_plan = (clcrt_gemm_plan_info)CLCRT_GEMM_PLAN_INFO_INIT;
  ck_assert_int_eq(clcrt_gemm_plan_get(g_ops, s, &g, &g_last_plan), CLCRT_OK);
  clcrt_status st = clcrt_gemm(g_ops, s, &g);
  ck_assert_msg(st == CLCRT_OK, "%ux%ux%u: %s", m, n, k, clcrt_errmsg(g_rt));
  ck_assert_int_eq(g_launches, before + 1);
  return g_last;
}

/* Random sequences of shapes and decompositions on three streams: whenever a run shares
 * tiles, its counters are zero when it launches (the fake runs nothing, so what the op made
 * stays as the op left it), lie in an allocation that holds no partials, and were zeroed on
 * the run's own stream. The defect this replaced put the counters of a small shape inside the
 * partials an earlier, larger shape left behind. */
START_TEST(test_ws_sequences) {
  clcrt_stream *s[3];
  for (int i = 0; i < 3; i++) ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s[i]), CLCRT_OK);
  unsigned long long seed = 12345;
  int shared = 0;
  for (int it = 0; it < 300; it++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const unsigned r = (unsigned)(seed >> 33);
    const unsigned m = 1 + r % 3000, n = 64 + (r >> 8) % 8192, k = 8 * (1 + (r >> 3) % 2048);
    const int si = (int)((r >> 20) % 3);
    const clcrt_gemm_split split = (r >> 24) % 3 == 0 ? CLCRT_GEMM_SPLIT_ALL : CLCRT_GEMM_SPLIT_AUTO;
    GemmArgs a = dense(s[si], m, n, k, split, (r >> 27) & 1 ? "128x128" : NULL);
    if (!a.sk_units) continue;
    shared++;
    ck_assert(a.ws && a.ctr);
    const alloc_rec *cw = alloc_of(a.ctr), *pw = alloc_of(a.ws);
    ck_assert_ptr_nonnull(cw);
    ck_assert_ptr_nonnull(pw);
    ck_assert_msg(cw != pw, "counters and partials share an allocation");
    char name[32]; /* a transposed plan's name ends in t: the tile shape is the name without it */
    snprintf(name, sizeof name, "%s", g_last_plan.variant);
    if (gemm_variant_find(name) < 0 && name[0]) name[strlen(name) - 1] = 0;
    const gemm_variant *v = gemm_variant_at(gemm_variant_find(name));
    ck_assert_ptr_nonnull(v);
    const size_t nctr = gemm_ctr_bytes(v, &a) / sizeof(unsigned); /* a word per shared tile, CTA and warp */
    for (size_t i = 0; i < nctr; i++) ck_assert_uint_eq(((unsigned *)(uintptr_t)a.ctr)[i], 0);
    int zeroed_here = 0;
    for (int i = 0; i < g_nmemsets; i++)
      zeroed_here |= g_memsets[i].p == cw->p && g_memsets[i].s == clcrt_stream_cu(s[si]) && g_memsets[i].n == cw->n;
    ck_assert_msg(zeroed_here, "the counters were not zeroed on the run's stream");
    /* The partials the run writes stay inside their allocation. */
    ck_assert_uint_le(a.ws + gemm_ws_bytes(v, &a), pw->p + pw->n);
    ck_assert_uint_eq(g_last_plan.workspace_bytes, gemm_ws_bytes(v, &a) + gemm_ctr_bytes(v, &a));
    /* Poison the partials as a run would leave them. */
    memset((void *)(uintptr_t)pw->p, 0x7f, pw->n < (1u << 20) ? pw->n : (1u << 20));
  }
  ck_assert_int_gt(shared, 50);
  for (int i = 0; i < 3; i++) clcrt_stream_destroy(s[i]);
}
END_TEST

/* A call from a thread whose current context is another (another device's): the workspace is
 * allocated and zeroed, and the run launched, in the runtime's context, and the caller's is
 * current again on return; from a thread with none, the runtime's stays current. Before the op
 * entered its context, a PyTorch thread whose current device was another GPU got its stream-K
 * counters allocated there, and the kernel faulted reading them (an illegal address). */
START_TEST(test_calls_in_the_runtime_context) {
  clcrt_stream *s;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s), CLCRT_OK);
  const CUcontext other = (CUcontext)0x9999;
  for (int none = 0; none < 2; none++) {
    fake_current = none ? NULL : other;
    const int allocs = g_nallocs, memsets = g_nmemsets;
    GemmArgs a = dense(s, 1000 << (2 * none), 1000 << (2 * none), 4096, CLCRT_GEMM_SPLIT_ALL, NULL); /* grows it */
    ck_assert(a.sk_units && a.ws && a.ctr);
    ck_assert_int_gt(g_nallocs, allocs);
    for (int i = allocs; i < g_nallocs; i++) ck_assert_ptr_eq(g_allocs[i].ctx, FAKE_CTX);
    ck_assert_int_gt(g_nmemsets, memsets);
    for (int i = memsets; i < g_nmemsets; i++) ck_assert_ptr_eq(g_memsets[i].ctx, FAKE_CTX);
    ck_assert_ptr_eq(g_launch_ctx, FAKE_CTX);
    ck_assert_ptr_eq(fake_current, none ? FAKE_CTX : other);
  }
  /* The releases free in it too. */
  fake_current = other;
  ck_assert_int_eq(clcrt_ops_stream_release(g_ops, s), CLCRT_OK);
  ck_assert_ptr_eq(fake_current, other);
  fake_current = FAKE_CTX;
  clcrt_stream_destroy(s);
}
END_TEST

/* An output that shares memory with an input is refused with a message (the tiles would read A
 * or B while others store D: wrong numbers, silently); outputs beside their inputs run. */
START_TEST(test_overlap_refused) {
  clcrt_stream *s;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s), CLCRT_OK);
  const unsigned long long A = 1ull << 36, B = 2ull << 36;
  static const char *const cases[] = {"d_is_a", "d_in_b", "d_in_groups_b", "d_cols_of_a", "beside_cols",
                                      "after_a"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *w = cases[i];
    clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
    g.m = 100, g.n = 200, g.k = 64, g.a = A, g.b = B, g.d = 3ull << 36;
    const char *says = NULL;
    if (!strcmp(w, "d_is_a")) g.d = g.a, says = "shares memory with a";
    if (!strcmp(w, "d_in_b")) g.d = g.b + 64, says = "shares memory with b";
    if (!strcmp(w, "d_in_groups_b")) /* B's third group */
      g.layout = CLCRT_GEMM_GROUPED, g.groups = 4, g.group_sizes = 4ull << 36, g.d = g.b + 2ull * 200 * 64 * 2,
      says = "shares memory with b";
    if (!strcmp(w, "d_cols_of_a")) /* columns 32 to 95 of A's rows */
      g.lda = 256, g.ldd = 256, g.n = 64, g.d = g.a + 64, says = "shares memory with a";
    if (!strcmp(w, "beside_cols")) g.lda = 256, g.ldd = 256, g.n = 64, g.d = g.a + 128; /* columns 64 to 127 */
    if (!strcmp(w, "after_a")) g.n = 64, g.d = g.a + 100 * 64 * 2;
    const int before = g_launches;
    const clcrt_status st = clcrt_gemm(g_ops, s, &g);
    if (says) {
      ck_assert_msg(st == CLCRT_E_INVALID, "%s: %s", w, clcrt_status_name(st));
      ck_assert_msg(strstr(clcrt_errmsg(g_rt), says), "%s: \"%s\" does not say %s", w, clcrt_errmsg(g_rt), says);
      ck_assert_int_eq(g_launches, before);
    } else {
      ck_assert_msg(st == CLCRT_OK, "%s: %s", w, clcrt_errmsg(g_rt));
      ck_assert_int_eq(g_launches, before + 1);
    }
  }
  clcrt_stream_destroy(s);
}
END_TEST

/* Runs on two streams never share buffers; growth synchronises the stream before freeing. */
START_TEST(test_ws_per_stream) {
  clcrt_stream *a, *b;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &b), CLCRT_OK);
  GemmArgs x = dense(a, 1000, 1000, 4096, CLCRT_GEMM_SPLIT_ALL, NULL);
  GemmArgs y = dense(b, 1000, 1000, 4096, CLCRT_GEMM_SPLIT_ALL, NULL);
  ck_assert(x.ws != y.ws && x.ctr != y.ctr);
  GemmArgs x2 = dense(a, 900, 900, 4096, CLCRT_GEMM_SPLIT_ALL, NULL);
  ck_assert(x2.ws == x.ws && x2.ctr == x.ctr); /* fits: kept */
  int syncs = g_syncs;
  GemmArgs x3 = dense(a, 8192, 8192, 8192, CLCRT_GEMM_SPLIT_ALL, NULL);
  ck_assert(x3.ws != x.ws);
  ck_assert_int_gt(g_syncs, syncs);
  ck_assert_ptr_null(alloc_of(x.ws)); /* the old partials were freed */
  clcrt_stream_destroy(a);
  clcrt_stream_destroy(b);
}
END_TEST

/* A captured run gets a graph's own buffers, zeroed at once (not in the stream's order), owned
 * by the graph; when the graph lets go, the next call frees them. */
START_TEST(test_ws_capture) {
  clcrt_stream *s;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s), CLCRT_OK);
  GemmArgs eager = dense(s, 1000, 1000, 4096, CLCRT_GEMM_SPLIT_ALL, NULL);
  g_capture = CU_STREAM_CAPTURE_STATUS_ACTIVE, g_capture_id = 7;
  GemmArgs c1 = dense(s, 1000, 1000, 4096, CLCRT_GEMM_SPLIT_ALL, NULL);
  GemmArgs c2 = dense(s, 500, 1000, 4096, CLCRT_GEMM_SPLIT_ALL, NULL);
  ck_assert(c1.ctr != eager.ctr && c1.ws != eager.ws);
  ck_assert(c2.ctr == c1.ctr); /* one capture, one stream: shared, as its runs are ordered */
  ck_assert_int_eq(g_retained, 1);
  for (unsigned i = 0; i < 64; i++) ck_assert_uint_eq(((unsigned *)(uintptr_t)c1.ctr)[i], 0);
  g_capture_id = 8; /* another capture */
  GemmArgs c3 = dense(s, 1000, 1000, 4096, CLCRT_GEMM_SPLIT_ALL, NULL);
  ck_assert(c3.ctr != c1.ctr);
  g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
  /* The first graph is destroyed: its user object's destructor runs (on a driver thread). */
  ck_assert_ptr_nonnull(alloc_of(c1.ctr));
  g_uo_fn[0](g_uo_ptr[0]);
  GemmArgs e2 = dense(s, 1000, 1000, 4096, CLCRT_GEMM_SPLIT_ALL, NULL);
  ck_assert(e2.ctr == eager.ctr);
  ck_assert_ptr_null(alloc_of(c1.ctr));
  ck_assert_ptr_nonnull(alloc_of(c3.ctr)); /* the second graph still holds its own */
  /* Flags that synchronise are refused while capturing. */
  g_capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
  g.m = g.n = 256, g.k = 64, g.a = 1ull << 36, g.b = 2ull << 36, g.d = 3ull << 36, g.flags = CLCRT_GEMM_MEASURED;
  ck_assert_int_eq(clcrt_gemm(g_ops, s, &g), CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(g_rt), "captured"));
  g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
  clcrt_stream_destroy(s);
  /* The ops goes first, the graph later: its record is freed by the destructor, its memory kept. */
  clcrt_ops_destroy(g_ops);
  g_ops = NULL;
  g_uo_fn[1](g_uo_ptr[1]);
}
END_TEST

/* CU_STREAM_PER_THREAD names a stream per thread: two threads get two workspaces. */
static clcrt_stream *g_pts;
static void *per_thread(void *p) {
  *(GemmArgs *)p = dense(g_pts, 1000, 1000, 4096, CLCRT_GEMM_SPLIT_ALL, NULL);
  return NULL;
}
START_TEST(test_ws_per_thread_stream) {
  ck_assert_int_eq(clcrt_stream_create(g_rt, CU_STREAM_PER_THREAD, &g_pts), CLCRT_OK);
  GemmArgs a, b;
  pthread_t t;
  per_thread(&a);
  pthread_create(&t, NULL, per_thread, &b);
  pthread_join(t, NULL);
  ck_assert(a.ctr != b.ctr);
  clcrt_stream_destroy(g_pts);
}
END_TEST

/* The op plans for its device's memory: the fake H100's peak (its memory clock and bus) plans as
 * the model was fitted, and a device that reports an H200's peak gets the plans measured faster
 * there (ops/NOTES.md): a 16-row projection in narrower tiles. */
static CUresult(CUDAAPI *g_base_attr)(int *, CUdevice_attribute, CUdevice);
static CUresult CUDAAPI f_attr_h200(int *v, CUdevice_attribute a, CUdevice d) {
  if (a == CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) return *v = 3134000, CUDA_SUCCESS; /* 4814 GB/s on 6144 bits */
  if (a == CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH) return *v = 6144, CUDA_SUCCESS;
  return g_base_attr(v, a, d);
}
static CUresult CUDAAPI f_attr_none(int *v, CUdevice_attribute a, CUdevice d) {
  if (a == CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) return CUDA_ERROR_INVALID_VALUE; /* a driver that does not say */
  return g_base_attr(v, a, d);
}
static const char *plan_variant(clcrt_ops *ops, unsigned m, unsigned n, unsigned k) {
  clcrt_gemm_plan_info p = CLCRT_GEMM_PLAN_INFO_INIT;
  clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
  g.m = m, g.n = n, g.k = k, g.a = 1ull << 36, g.b = 2ull << 36, g.d = 3ull << 36;
  ck_assert_int_eq(clcrt_gemm_plan_get(ops, NULL, &g, &p), CLCRT_OK);
  return p.variant; /* a static name */
}
START_TEST(test_plan_follows_memory) {
  ck_assert_double_eq(clcrt_runtime_mem_bandwidth(g_rt), 2.0 * 2619e6 * 640);
  ck_assert_str_eq(plan_variant(g_ops, 16, 24576, 1536), "64x256");
  g_base_attr = g_fake.cuDeviceGetAttribute;
  static clcrt__driver other[2];
  CUresult(CUDAAPI *const attr[2])(int *, CUdevice_attribute, CUdevice) = {f_attr_h200, f_attr_none};
  const double bw[2] = {2.0 * 3134e6 * 768, 0};
  const char *want[2] = {"64x192", "64x256"};
  for (int i = 0; i < 2; i++) {
    other[i] = g_fake;
    other[i].cuDeviceGetAttribute = attr[i];
    clcrt__driver_override(&other[i]);
    clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
    o.cache_dir = "";
    clcrt_runtime *rt = NULL;
    clcrt_ops *ops = NULL;
    ck_assert_int_eq(clcrt_runtime_create(&rt, &o), CLCRT_OK); /* an unknown peak is no error */
    ck_assert_int_eq(clcrt_ops_create(rt, &ops), CLCRT_OK);
    ck_assert_double_eq(clcrt_runtime_mem_bandwidth(rt), bw[i]);
    ck_assert_str_eq(plan_variant(ops, 16, 24576, 1536), want[i]);
    ck_assert_str_eq(plan_variant(ops, 4096, 4096, 4096), plan_variant(g_ops, 4096, 4096, 4096));
    clcrt_ops_destroy(ops);
    clcrt_runtime_destroy(rt);
  }
  clcrt__driver_override(&g_fake);
}
END_TEST

/* B's edge in dense Args: n is B's rows in the tiles' view (the kernel's edge), and where the part of B at the
 * edge loads one box of its valid rows (GEMM_B_EDGE_ROWS under its part: block N / cluster size),
 * bsub is B's map in such boxes (b_sub 1); grouped Args leave b_sub 0. Random shapes, plans and
 * variants, normal and transposed; and the rule itself. */
START_TEST(test_b_edge) {
  clcrt_stream *s;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s), CLCRT_OK);
  static const char *vars[] = {NULL, "64x208c2", "128x256", "64x240", "128x176c2", "64x16", "128x144"};
  unsigned long long seed = 777;
  int partial = 0, whole = 0;
  for (int it = 0; it < 200; it++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const unsigned r = (unsigned)(seed >> 33);
    const unsigned m = 1 + r % 3000, n = 8 * (1 + (r >> 7) % 1200), k = 8 * (1 + (r >> 3) % 1024);
    const char *var = vars[(r >> 24) % 7];
    const GemmArgs a = dense(s, m, n, k, CLCRT_GEMM_SPLIT_AUTO, var);
    char name[32];
    snprintf(name, sizeof name, "%s", g_last_plan.variant);
    if (gemm_variant_find(name) < 0 && name[0]) name[strlen(name) - 1] = 0;
    const gemm_variant *v = gemm_variant_at(gemm_variant_find(name));
    ck_assert_ptr_nonnull(v);
    const unsigned rows = a.trans ? m : n, part = v->bn / v->cm;
    ck_assert_uint_eq(a.n, rows);
    ck_assert_uint_eq(a.b.v[0], rows);
    ck_assert_uint_eq(a.b.v[1], part);
    const unsigned valid = rows % part;
    if (valid && GEMM_B_EDGE_ROWS(part, valid) < part) {
      partial++;
      ck_assert_uint_eq(a.b_sub, 1);
      ck_assert_uint_eq(a.bsub.v[0], rows);
      ck_assert_uint_eq(a.bsub.v[1], GEMM_B_EDGE_ROWS(part, valid));
    } else {
      whole++;
      ck_assert_uint_eq(a.b_sub, 0);
    }
  }
  ck_assert_int_gt(partial, 20);
  ck_assert_int_gt(whole, 20);
  /* The rule: the valid rows rounded up to whole 8-row swizzle atoms, where that is under the
   * part; else the part. */
  for (unsigned part = 8; part <= 256; part += 8)
    for (unsigned valid = 1; valid < part; valid++) {
      const unsigned r = GEMM_B_EDGE_ROWS(part, valid);
      ck_assert_uint_le(r, part);
      ck_assert_uint_ge(r, valid);
      ck_assert_uint_eq(r % 8, 0);
      ck_assert_uint_lt(r, valid + 8);
    }
  ck_assert_uint_eq(GEMM_B_EDGE_ROWS(240, 58), 64);   /* 538 columns in 240-column tiles */
  ck_assert_uint_eq(GEMM_B_EDGE_ROWS(208, 122), 128); /* 538 in 208 */
  ck_assert_uint_eq(GEMM_B_EDGE_ROWS(192, 154), 160);
  ck_assert_uint_eq(GEMM_B_EDGE_ROWS(208, 201), 208); /* rounds to the part */
  ck_assert_uint_eq(GEMM_B_EDGE_ROWS(16, 1), 8);      /* one row of activations in 64x16 tiles transposed */
  ck_assert_uint_eq(GEMM_B_EDGE_ROWS(16, 9), 16);
  ck_assert_uint_eq(GEMM_B_EDGE_ROWS(104, 40), 40);   /* a 2-CTA cluster's part of 208 columns */
  clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
  g.layout = CLCRT_GEMM_GROUPED, g.m = 64, g.n = 200, g.k = 128, g.groups = 4;
  g.a = 1ull << 36, g.b = 2ull << 36, g.d = 3ull << 36, g.group_sizes = 0x4000000;
  const int before = g_launches;
  ck_assert_int_eq(clcrt_gemm(g_ops, s, &g), CLCRT_OK);
  ck_assert_int_eq(g_launches, before + 1);
  ck_assert_uint_eq(g_last.b_sub, 0);
  clcrt_stream_destroy(s);
}
END_TEST

/* A grouped run reports sizes that do not fit through mapped host memory; the next grouped call
 * on the stream fails with a message, once. */
START_TEST(test_grouped_misuse_reported) {
  clcrt_stream *s;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s), CLCRT_OK);
  clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
  g.layout = CLCRT_GEMM_GROUPED, g.m = 64, g.n = 256, g.k = 128, g.groups = 4;
  g.a = 1ull << 36, g.b = 2ull << 36, g.d = 3ull << 36, g.group_sizes = 0x4000000;
  ck_assert_int_eq(clcrt_gemm(g_ops, s, &g), CLCRT_OK);
  ck_assert(g_last.misuse != 0);
  ck_assert_uint_eq(g_last.m, 64);
  /* What the kernel writes when the sizes add up to 640. */
  unsigned *word = (unsigned *)(uintptr_t)g_last.misuse;
  word[1] = 640, word[0] = GEMM_MISUSE_ROWS;
  int before = g_launches;
  ck_assert_int_eq(clcrt_gemm(g_ops, s, &g), CLCRT_E_INVALID);
  ck_assert_int_eq(g_launches, before); /* not run */
  ck_assert_msg(strstr(clcrt_errmsg(g_rt), "640") && strstr(clcrt_errmsg(g_rt), "64 rows"), "%s", clcrt_errmsg(g_rt));
  ck_assert_int_eq(clcrt_gemm(g_ops, s, &g), CLCRT_OK); /* reported once */
  word[0] = GEMM_MISUSE_NEGATIVE;
  ck_assert_int_eq(clcrt_gemm(g_ops, s, &g), CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(g_rt), "negative"));
  /* Under capture the run clamps but reports nowhere the graph may outlive. */
  g_capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  ck_assert_int_eq(clcrt_gemm(g_ops, s, &g), CLCRT_OK);
  ck_assert(g_last.misuse == 0);
  g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
  /* Checked: synchronises and reports this call's own misuse (the fake "kernel" wrote it). */
  g.flags = CLCRT_GEMM_CHECKED;
  word[0] = 0;
  int syncs = g_syncs;
  ck_assert_int_eq(clcrt_gemm(g_ops, s, &g), CLCRT_OK);
  ck_assert_int_gt(g_syncs, syncs);
  clcrt_stream_destroy(s);
}
END_TEST

static Suite *ops_suite(void) {
  Suite *s = suite_create("ops");
  TCase *tc = tcase_create("compile_only");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_source_splices_abi);
  tcase_add_test(tc, test_kernels_compile);
  tcase_add_test(tc, test_blackwell_refused);
  tcase_add_test(tc, test_variants_listed);
  tcase_add_test(tc, test_generated_wgmma_is_current);
  tcase_add_test(tc, test_plan_get);
  tcase_add_test(tc, test_bad_descs);
  suite_add_tcase(s, tc);
  tc = tcase_create("workspaces");
  tcase_set_timeout(tc, 120); /* 300 plans of random shapes: beyond Check's 4 s on a loaded 2-core machine */
  tcase_add_unchecked_fixture(tc, setup_once, NULL);
  tcase_add_test(tc, test_ws_sequences);
  tcase_add_test(tc, test_ws_per_stream);
  tcase_add_test(tc, test_calls_in_the_runtime_context);
  tcase_add_test(tc, test_overlap_refused);
  tcase_add_test(tc, test_ws_capture);
  tcase_add_test(tc, test_ws_per_thread_stream);
  tcase_add_test(tc, test_grouped_misuse_reported);
  tcase_add_test(tc, test_b_edge);
  tcase_add_test(tc, test_plan_follows_memory);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(ops_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
