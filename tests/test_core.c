/* CPU suite for the core: compile-only runtimes, registration of every scheduler for
 * sm_100a and sm_90a, kernel facts read back from the cubin and the PTX, every bad input
 * (status and message), the no-driver path and the status table. Needs NVRTC, never a GPU
 * or a driver: the no-driver path is forced with clcrt__driver_pretend_missing so that the
 * suite means the same on a machine that has one.
 *
 * Every runtime here is created with cache_dir "" so that each registration really runs
 * NVRTC (a kernel from the disk cache may lack its PTX) and no test depends on what an
 * earlier run left in ~/.cache. */
#include <check.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clcrt.h"
#include "driver.h"
#include "embedded.h"
#include "env.h"
#include "internal.h"

/* ---- sources ---- */

/* The README example. */
static const char *const SCALE_SRC =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= a.alpha;\n"
    "}\n";

/* The same with per-CTA state made once by a prologue. */
static const char *const STATE_SRC =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "struct ScaleState { float alpha; };\n"
    "__device__ void scale_prologue(const ScaleArgs &a, ScaleState &s) { s.alpha = a.alpha * 2.0f; }\n"
    "__device__ void scale_state_tile(const clcrt::Tile &t, const ScaleArgs &a, ScaleState &s) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= s.alpha;\n"
    "}\n";

/* ---- helpers ---- */

static clcrt_runtime *rt_new(const char *arch) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = arch;
  o.cache_dir = "";
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  ck_assert_msg(st == CLCRT_OK, "clcrt_runtime_create(%s): %s: %s", arch, clcrt_status_name(st), clcrt_errmsg(rt));
  ck_assert_ptr_nonnull(rt);
  ck_assert_int_eq(clcrt_runtime_compile_only(rt), 1);
  ck_assert_str_eq(clcrt_runtime_arch(rt), arch);
  return rt;
}

static clcrt_tile_desc scale_desc(void) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = SCALE_SRC;
  d.tile_fn = "scale_tile";
  d.args_type = "ScaleArgs";
  d.block = (clcrt_dim3){128, 1, 1};
  return d;
}

/* Registers d and asserts that it fails with `want` and that the runtime's message
 * contains every string of the NULL-terminated list. */
static void expect_fail_(clcrt_runtime *rt, const clcrt_tile_desc *d, clcrt_status want, const char *const *subs,
                         int line) {
  clcrt_kernel *k = (clcrt_kernel *)&k; /* poisoned: must come back NULL */
  clcrt_status st = clcrt_register(rt, d, &k);
  const char *msg = clcrt_errmsg(rt);
  ck_assert_msg(st == want, "line %d: clcrt_register gave %s, want %s; message: %s", line, clcrt_status_name(st),
                clcrt_status_name(want), msg);
  ck_assert_msg(k == NULL, "line %d: a failed registration must set *out to NULL", line);
  for (; subs && *subs; subs++)
    ck_assert_msg(strstr(msg, *subs) != NULL, "line %d: message does not mention \"%s\": %s", line, *subs, msg);
}
#define EXPECT_FAIL(rt, d, want, ...) \
  expect_fail_((rt), (d), (want), (const char *const[]){__VA_ARGS__, NULL}, __LINE__)

/* Creates a compile-only runtime for arch and asserts the status and the message. */
static void expect_create_fail_(const char *arch, clcrt_status want, const char *const *subs, int line) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = arch;
  o.cache_dir = "";
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  ck_assert_msg(rt != NULL, "line %d: target_arch \"%s\": the failed handle must be returned for clcrt_errmsg", line,
                arch);
  const char *msg = clcrt_errmsg(rt);
  ck_assert_msg(st == want, "line %d: target_arch \"%s\" gave %s, want %s; message: %s", line, arch,
                clcrt_status_name(st), clcrt_status_name(want), msg);
  for (; subs && *subs; subs++)
    ck_assert_msg(strstr(msg, *subs) != NULL, "line %d: target_arch \"%s\": message does not mention \"%s\": %s",
                  line, arch, *subs, msg);
  clcrt_runtime_destroy(rt);
}
#define EXPECT_CREATE_FAIL(arch, want, ...) \
  expect_create_fail_((arch), (want), (const char *const[]){__VA_ARGS__, NULL}, __LINE__)

/* ---- the registration matrix ---- */

static const clcrt_dim3 CLUSTERS[] = {{1, 1, 1}, {2, 1, 1}, {4, 1, 1}, {2, 2, 1}, {16, 1, 1}};
#define NCLUSTERS ((int)(sizeof CLUSTERS / sizeof CLUSTERS[0]))
static const clcrt_dim3 BLOCKS[] = {{128, 1, 1}, {32, 4, 2}, {256, 1, 1}, {1024, 1, 1}, {16, 16, 1}, {96, 1, 1}};
#define NBLOCKS ((int)(sizeof BLOCKS / sizeof BLOCKS[0]))

typedef struct arch_scheds {
  const char *arch;
  int nsched;
  clcrt_sched sched[5];
} arch_scheds;

static const arch_scheds ARCHS[] = {
    {"sm_100a", 5, {CLCRT_SCHED_AUTO, CLCRT_SCHED_CLC, CLCRT_SCHED_STEAL, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED}},
    {"sm_90a", 4, {CLCRT_SCHED_AUTO, CLCRT_SCHED_STEAL, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED}},
};
/* Iterations per architecture: every scheduler with every cluster shape, each with and
 * without a prologue. */
#define PER_SCHED (NCLUSTERS * 2)
#define MATRIX_SM100 (5 * PER_SCHED)
#define MATRIX_SM90 (4 * PER_SCHED)

static const char *sched_lc(clcrt_sched s) {
  switch (s) {
    case CLCRT_SCHED_CLC: return "clc";
    case CLCRT_SCHED_STEAL: return "steal";
    case CLCRT_SCHED_STATIC: return "static";
    case CLCRT_SCHED_FIXED: return "fixed";
    default: return "?";
  }
}

/* Finds needle in [hay, hay+n) (the cubin is binary). */
static int mem_has(const void *hay, size_t n, const char *needle) {
  size_t m = strlen(needle);
  const unsigned char *h = hay;
  for (size_t i = 0; m <= n && i <= n - m; i++)
    if (memcmp(h + i, needle, m) == 0) return 1;
  return 0;
}

/* Iteration i of the matrix: arch, scheduler, cluster shape, with or without state; the
 * block shape rotates so that every scheduler meets several. */
START_TEST(test_matrix) {
  int arch_i = _i < MATRIX_SM100 ? 0 : 1;
  int j = arch_i == 0 ? _i : _i - MATRIX_SM100;
  const arch_scheds *A = &ARCHS[arch_i];
  clcrt_sched sched = A->sched[j / PER_SCHED];
  int ci = j % PER_SCHED / 2, with_state = j % 2;
  clcrt_dim3 cl = CLUSTERS[ci];
  clcrt_dim3 bl = BLOCKS[(j / 2 + j / PER_SCHED) % NBLOCKS];
  int sm100 = arch_i == 0;
  clcrt_sched want_sched = sched != CLCRT_SCHED_AUTO ? sched : sm100 ? CLCRT_SCHED_CLC : CLCRT_SCHED_STEAL;
  clcrt_grid want_grid = want_sched == CLCRT_SCHED_CLC || want_sched == CLCRT_SCHED_FIXED ? CLCRT_GRID_FULL
                                                                                          : CLCRT_GRID_PERSISTENT;
  char what[160];
  snprintf(what, sizeof what, "%s sched %d cluster (%u,%u,%u) block (%u,%u,%u)%s", A->arch, (int)sched, cl.x, cl.y,
           cl.z, bl.x, bl.y, bl.z, with_state ? " with state" : "");

  clcrt_runtime *rt = rt_new(A->arch);
  clcrt_tile_desc d = scale_desc();
  if (with_state) {
    d.source = STATE_SRC;
    d.tile_fn = "scale_state_tile";
    d.state_type = "ScaleState";
    d.prologue_fn = "scale_prologue";
  }
  d.sched = sched;
  d.block = bl;
  d.cluster = cl;
  clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_register(rt, &d, &k);
  ck_assert_msg(st == CLCRT_OK, "%s: %s: %s", what, clcrt_status_name(st), clcrt_errmsg(rt));
  ck_assert_ptr_nonnull(k);

  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
  char name[96];
  snprintf(name, sizeof name, "clcrt_%s_%s", sched_lc(want_sched), d.tile_fn);
  ck_assert_msg(info.name && strcmp(info.name, name) == 0, "%s: name %s, want %s", what, info.name, name);
  ck_assert_str_eq(info.arch, A->arch);
  ck_assert_msg(info.sched == want_sched, "%s: resolved sched %d, want %d", what, (int)info.sched, (int)want_sched);
  ck_assert_msg(info.grid == want_grid, "%s: resolved grid %d, want %d", what, (int)info.grid, (int)want_grid);
  ck_assert_msg(info.registers > 0, "%s: registers %d", what, info.registers);
  /* The response ring is dynamic shared memory, given by the launch (internal.h): no static
   * shared memory of the scheduler's beyond what the compiler reserves for mbarriers. */
  ck_assert_msg(info.static_smem <= 1024, "%s: static_smem is %u", what, info.static_smem);
  ck_assert_uint_eq(info.block.x, bl.x);
  ck_assert_uint_eq(info.block.y, bl.y);
  ck_assert_uint_eq(info.block.z, bl.z);
  ck_assert_uint_eq(info.cluster.x, cl.x);
  ck_assert_uint_eq(info.cluster.y, cl.y);
  ck_assert_uint_eq(info.cluster.z, cl.z);
  ck_assert_uint_eq(info.dynamic_smem, 0);
  ck_assert_int_eq(info.from_cache, 0);
  ck_assert_msg(info.compile_ms > 0, "%s: compile_ms %g", what, info.compile_ms);
  /* Only the sm_100a CLC kernel may contain the hardware request. */
  int want_clc = sm100 && want_sched == CLCRT_SCHED_CLC;
  ck_assert_msg(info.has_clc == want_clc, "%s: has_clc %d, want %d", what, info.has_clc, want_clc);

  const void *cubin = NULL;
  size_t size = 0;
  ck_assert_int_eq(clcrt_kernel_cubin(k, &cubin, &size), CLCRT_OK);
  ck_assert_ptr_nonnull(cubin);
  ck_assert_msg(size > 64, "%s: cubin of %zu bytes", what, size);
  const unsigned char *e = cubin;
  ck_assert_msg(e[0] == 0x7f && e[1] == 'E' && e[2] == 'L' && e[3] == 'F', "%s: not an ELF file", what);
  ck_assert_int_eq(e[4], 2); /* ELFCLASS64 */
  ck_assert_int_eq(e[5], 1); /* little-endian */
  unsigned machine = (unsigned)e[18] | (unsigned)e[19] << 8;
  ck_assert_msg(machine == 190, "%s: e_machine %u, want 190 (EM_CUDA)", what, machine);
  ck_assert_msg(mem_has(cubin, size, name), "%s: the cubin has no symbol %s", what, name);

  const char *ptx = NULL;
  st = clcrt_kernel_ptx(k, &ptx);
  ck_assert_msg(st == CLCRT_OK && ptx, "%s: no PTX: %s", what, clcrt_errmsg(rt));
  char target[32];
  snprintf(target, sizeof target, ".target %s", A->arch);
  ck_assert_msg(strstr(ptx, target), "%s: the PTX has no \"%s\"", what, target);
  ck_assert_msg(strstr(ptx, name), "%s: the PTX has no entry %s", what, name);
  if (want_clc) {
    ck_assert_msg(strstr(ptx, "clusterlaunchcontrol.try_cancel"), "%s: no try_cancel in the PTX", what);
    /* Clusters of several CTAs get the multicast form (every CTA's slot and barrier); a
     * 1-CTA kernel is launched without a cluster and uses the plain form. */
    const clcrt_kernel_info *ki = &info;
    unsigned ncta = ki->cluster.x * ki->cluster.y * ki->cluster.z;
    if (ncta > 1)
      ck_assert_msg(strstr(ptx, "multicast::cluster::all"), "%s: try_cancel is not multicast to the cluster", what);
    else
      ck_assert_msg(!strstr(ptx, "multicast::cluster::all"), "%s: a 1-CTA kernel uses the multicast form", what);
    ck_assert_msg(strstr(ptx, "query_cancel"), "%s: the response is not decoded with query_cancel", what);
  } else {
    ck_assert_msg(!strstr(ptx, "clusterlaunchcontrol"), "%s: a non-CLC kernel uses clusterlaunchcontrol", what);
  }
  /* No GPU-scope fence anywhere in the kernel, so none in the per-tile loop: the
   * schedulers order their work with mbarriers, cluster-scope release/acquire and
   * relaxed atomics; a full fence per tile costs microseconds. */
  ck_assert_msg(!strstr(ptx, "membar"), "%s: the PTX contains membar", what);
  ck_assert_msg(!strstr(ptx, "fence.sc.gpu"), "%s: the PTX contains fence.sc.gpu", what);
  ck_assert_msg(!strstr(ptx, "fence.acq_rel.gpu"), "%s: the PTX contains fence.acq_rel.gpu", what);
  ck_assert_msg(!strstr(ptx, "fence.sc.sys") && !strstr(ptx, "fence.acq_rel.sys"),
                "%s: the PTX contains a system-scope fence", what);

  /* The same description again is the same kernel facts (memory cache or not). */
  clcrt_kernel *k2 = NULL;
  ck_assert_int_eq(clcrt_register(rt, &d, &k2), CLCRT_OK);
  clcrt_kernel_info info2 = CLCRT_KERNEL_INFO_INIT;
  ck_assert_int_eq(clcrt_kernel_info_get(k2, &info2), CLCRT_OK);
  ck_assert_str_eq(info2.name, info.name);
  ck_assert_int_eq(info2.registers, info.registers);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* A STEAL kernel with an explicit full grid, dynamic shared memory and user options. */
START_TEST(test_steal_full_grid_options) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.sched = CLCRT_SCHED_STEAL;
  d.grid = CLCRT_GRID_FULL;
  d.smem_bytes = 100 * 1024;
  d.cluster = (clcrt_dim3){2, 1, 1};
  const char *opts[] = {"-DUNUSED_MACRO=1", "--use_fast_math"};
  d.options = opts;
  d.num_options = 2;
  clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_register(rt, &d, &k);
  ck_assert_msg(st == CLCRT_OK, "%s: %s", clcrt_status_name(st), clcrt_errmsg(rt));
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
  ck_assert_int_eq(info.grid, CLCRT_GRID_FULL);
  ck_assert_int_eq(info.sched, CLCRT_SCHED_STEAL);
  ck_assert_uint_eq(info.dynamic_smem, 100 * 1024);
  ck_assert_int_eq(info.param_bytes, 24); /* sizeof(ScaleArgs) */
  clcrt_runtime_destroy(rt);
}
END_TEST

/* In compile-only mode the Args parameter's size comes from the cubin (on a device from
 * cuFuncGetParamInfo): from KPARAM_INFO, and from the record NVRTC writes instead for large
 * parameters (20000 bytes here). It used to be 0. */
START_TEST(test_param_bytes_compile_only) {
  static const int floats[] = {3, 1000, 5000};
  for (int a = 0; a < 2; a++) {
    clcrt_runtime *rt = rt_new(a ? "sm_100a" : "sm_90a");
    for (int i = 0; i < 3; i++) {
      char src[512];
      snprintf(src, sizeof src,
               "struct FloatsArgs { float x[%d]; };\n"
               "__device__ void floats_tile(const clcrt::Tile &t, const FloatsArgs &a) {\n"
               "  if (a.x[t.linear] > 1.0f) asm volatile(\"trap;\");\n"
               "}\n",
               floats[i]);
      clcrt_tile_desc d = scale_desc();
      d.source = src;
      d.tile_fn = "floats_tile";
      d.args_type = "FloatsArgs";
      clcrt_kernel *k = NULL;
      clcrt_status st = clcrt_register(rt, &d, &k);
      ck_assert_msg(st == CLCRT_OK, "%d floats: %s", floats[i], clcrt_errmsg(rt));
      clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
      ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
      ck_assert_msg(info.param_bytes == 4u * (unsigned)floats[i], "%s, %d floats: param_bytes %zu", info.arch,
                    floats[i], info.param_bytes);
    }
    clcrt_runtime_destroy(rt);
  }
}
END_TEST

/* A caller built against an older header (no grid, no include_digest) still registers,
 * and whatever lies past its descriptor is never read. */
START_TEST(test_desc_older_size) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.sched = CLCRT_SCHED_STEAL;
  d.grid = (clcrt_grid)9;           /* beyond the old size: must be ignored */
  d.include_digest = (const char *)1; /* likewise */
  d.size = offsetof(clcrt_tile_desc, grid);
  clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_register(rt, &d, &k);
  ck_assert_msg(st == CLCRT_OK, "%s: %s", clcrt_status_name(st), clcrt_errmsg(rt));
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
  ck_assert_int_eq(info.grid, CLCRT_GRID_PERSISTENT);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* The observed variant: a kernel as registered has no trace or statistics code at all; its
 * observed variant (which traced runs, and runs with statistics on, launch) has both, is
 * compiled once, and is never what clcrt_register hands out. Every scheduler. */
START_TEST(test_observed_variant) {
  clcrt_runtime *rt = rt_new("sm_90a");
  static const clcrt_sched scheds[] = {CLCRT_SCHED_STEAL, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};
  for (size_t i = 0; i < sizeof scheds / sizeof scheds[0]; i++) {
    clcrt_tile_desc d = scale_desc();
    d.sched = scheds[i];
    d.cluster = (clcrt_dim3){i == 1 ? 2u : 1u, 1, 1};
    clcrt_kernel *k = NULL, *o = NULL, *o2 = NULL, *o3 = NULL, *k2 = NULL;
    ck_assert_int_eq(clcrt_register(rt, &d, &k), CLCRT_OK);
    const char *ptx = NULL, *optx = NULL;
    ck_assert_int_eq(clcrt_kernel_ptx(k, &ptx), CLCRT_OK);
    ck_assert_msg(!strstr(ptx, "%globaltimer") && !strstr(ptx, "%smid"), "sched %d: trace code in the default variant",
                  (int)scheds[i]);
    ck_assert_int_eq(clcrt__kernel_variant(k, CLCRT_USE_TRACE, &o), CLCRT_OK);
    ck_assert_ptr_nonnull(o);
    ck_assert_ptr_ne(o, k);
    ck_assert_int_eq(clcrt_kernel_ptx(o, &optx), CLCRT_OK);
    ck_assert_msg(strstr(optx, "%globaltimer") && strstr(optx, "%smid"), "sched %d: no trace code in the observed one",
                  (int)scheds[i]);
    ck_assert_int_eq(clcrt__kernel_variant(k, CLCRT_USE_TRACE, &o2), CLCRT_OK);
    ck_assert_ptr_eq(o2, o); /* compiled once */
    const clcrt_kernel *po = NULL;
    ck_assert_int_eq(clcrt_kernel_variant(k, CLCRT_USE_TRACE, &po), CLCRT_OK); /* the public entry */
    ck_assert_ptr_eq(po, o);
    ck_assert_int_eq(clcrt_kernel_variant(NULL, CLCRT_USE_TRACE, &po), CLCRT_E_INVALID);
    ck_assert_int_eq(clcrt_kernel_variant(k, CLCRT_USE_TRACE, NULL), CLCRT_E_INVALID);
    ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "out is NULL"));
    ck_assert_int_eq(clcrt__kernel_variant(o, CLCRT_USE_TRACE, &o3), CLCRT_OK);
    ck_assert_ptr_eq(o3, o);
    ck_assert_int_eq(clcrt_register(rt, &d, &k2), CLCRT_OK);
    ck_assert_ptr_eq(k2, k); /* registering again still gives the default variant */
    clcrt_kernel_info a = CLCRT_KERNEL_INFO_INIT, b = CLCRT_KERNEL_INFO_INIT;
    ck_assert_int_eq(clcrt_kernel_info_get(k, &a), CLCRT_OK);
    ck_assert_int_eq(clcrt_kernel_info_get(o, &b), CLCRT_OK);
    ck_assert_str_eq(a.name, b.name);
    ck_assert_int_eq(a.sched, b.sched);
  }
  clcrt_runtime_destroy(rt);
}
END_TEST

static unsigned long long compiles(const clcrt_runtime *rt) {
  clcrt_cache_stats cs = CLCRT_CACHE_STATS_INIT;
  ck_assert_int_eq(clcrt_cache_stats_get(rt, &cs), CLCRT_OK);
  return cs.misses + cs.uncached;
}

/* The PTX markers of each variant's code: graph claims read %gridid (graph_slot); yielding
 * reads the preemption words with one 16-byte relaxed load (must_yield); tracing reads
 * %globaltimer. */
static void expect_code(const clcrt_kernel *k, unsigned uses, const char *what) {
  const char *ptx = NULL;
  ck_assert_int_eq(clcrt_kernel_ptx(k, &ptx), CLCRT_OK);
  int graph = strstr(ptx, "%gridid") != NULL, yield = strstr(ptx, "ld.relaxed.gpu.global.v4") != NULL,
      trace = strstr(ptx, "%globaltimer") != NULL;
  ck_assert_msg(graph == !!(uses & CLCRT_USE_GRAPH), "%s: graph code %s", what, graph ? "present" : "missing");
  ck_assert_msg(yield == !!(uses & CLCRT_USE_PREEMPT), "%s: yield code %s", what, yield ? "present" : "missing");
  ck_assert_msg(trace == !!(uses & CLCRT_USE_TRACE), "%s: trace code %s", what, trace ? "present" : "missing");
}

/* Variants: a STEAL kernel as registered has neither graph claims nor yielding code (nor
 * trace code); each variant has exactly the code of its uses, is compiled once, and is
 * reached from the registered kernel or any of its variants. clcrt_kernel_prepare builds
 * every combination of its uses, so that no later run compiles; bad bits are refused. */
START_TEST(test_variants) {
  clcrt_runtime *rt = rt_new("sm_90a");
  for (unsigned cl = 1; cl <= 2; cl++) {
    clcrt_tile_desc d = scale_desc();
    d.sched = CLCRT_SCHED_STEAL;
    d.cluster = (clcrt_dim3){cl, 1, 1};
    clcrt_kernel *k = NULL;
    ck_assert_int_eq(clcrt_register(rt, &d, &k), CLCRT_OK);
    expect_code(k, 0, "registered");
    unsigned long long c0 = compiles(rt);
    const clcrt_kernel *v[8] = {k};
    for (unsigned u = 1; u < 8; u++) {
      ck_assert_int_eq(clcrt_kernel_variant(k, u, &v[u]), CLCRT_OK);
      ck_assert_ptr_nonnull(v[u]);
      char what[64];
      snprintf(what, sizeof what, "cluster %u, variant %u", cl, u);
      expect_code(v[u], u, what);
      for (unsigned w = 0; w < u; w++) ck_assert_ptr_ne(v[u], v[w]);
    }
    ck_assert_uint_eq(compiles(rt), c0 + 7); /* one compile each */
    const clcrt_kernel *x = NULL;
    ck_assert_int_eq(clcrt_kernel_variant(k, 0, &x), CLCRT_OK);
    ck_assert_ptr_eq(x, k);
    for (unsigned u = 0; u < 8; u++)
      for (unsigned w = 0; w < 8; w++) {
        ck_assert_int_eq(clcrt_kernel_variant(v[u], w, &x), CLCRT_OK); /* bits add up */
        ck_assert_ptr_eq(x, v[u | w]);
      }
    ck_assert_int_eq(clcrt_kernel_variant(v[CLCRT_USE_GRAPH], CLCRT_USE_TRACE, &x), CLCRT_OK);
    ck_assert_ptr_eq(x, v[CLCRT_USE_GRAPH | CLCRT_USE_TRACE]);
    ck_assert_uint_eq(compiles(rt), c0 + 7);
    clcrt_kernel_info a = CLCRT_KERNEL_INFO_INIT, b = CLCRT_KERNEL_INFO_INIT;
    ck_assert_int_eq(clcrt_kernel_info_get(k, &a), CLCRT_OK);
    ck_assert_int_eq(clcrt_kernel_info_get(v[7], &b), CLCRT_OK);
    ck_assert_str_eq(a.name, b.name);
    const void *c;
    size_t ks = 0, vs = 0;
    ck_assert_int_eq(clcrt_kernel_cubin(k, &c, &ks), CLCRT_OK);
    ck_assert_int_eq(clcrt_kernel_cubin(v[CLCRT_USE_GRAPH | CLCRT_USE_PREEMPT], &c, &vs), CLCRT_OK);
    ck_assert_uint_lt(ks, vs); /* the registered kernel is the smaller one */
  }

  /* SHORT: no claim code at all (no claim atomic, no response ring), far smaller; it
   * replaces GRAPH and PREEMPT (a run that claims nothing neither claims from a graph nor
   * yields), and combines with TRACE. */
  {
    clcrt_tile_desc d = scale_desc();
    d.sched = CLCRT_SCHED_STEAL;
    d.cluster = (clcrt_dim3){2, 1, 1};
    d.block = (clcrt_dim3){96, 1, 1}; /* a kernel of its own: none of its variants built yet */
    clcrt_kernel *k = NULL;
    ck_assert_int_eq(clcrt_register(rt, &d, &k), CLCRT_OK);
    const clcrt_kernel *sv = NULL, *x = NULL, *so = NULL;
    unsigned long long c0 = compiles(rt);
    ck_assert_int_eq(clcrt_kernel_variant(k, CLCRT_USE_SHORT, &sv), CLCRT_OK);
    ck_assert_ptr_ne(sv, k);
    const char *ptx = NULL, *kptx = NULL;
    ck_assert_int_eq(clcrt_kernel_ptx(sv, &ptx), CLCRT_OK);
    ck_assert_int_eq(clcrt_kernel_ptx(k, &kptx), CLCRT_OK);
    ck_assert_ptr_null(strstr(ptx, "atom.relaxed.gpu.global.add")); /* the claim */
    ck_assert_ptr_nonnull(strstr(kptx, "atom.relaxed.gpu.global.add"));
    ck_assert_ptr_null(strstr(ptx, "st.async")); /* no responses published */
    ck_assert_ptr_nonnull(strstr(kptx, "st.async"));
    const void *c;
    size_t ks = 0, ss = 0;
    ck_assert_int_eq(clcrt_kernel_cubin(k, &c, &ks), CLCRT_OK);
    ck_assert_int_eq(clcrt_kernel_cubin(sv, &c, &ss), CLCRT_OK);
    ck_assert_uint_lt(ss, ks);
    ck_assert_int_eq(clcrt_kernel_variant(k, CLCRT_USE_SHORT | CLCRT_USE_GRAPH | CLCRT_USE_PREEMPT, &x), CLCRT_OK);
    ck_assert_ptr_eq(x, sv);
    ck_assert_int_eq(clcrt_kernel_variant(sv, CLCRT_USE_GRAPH, &x), CLCRT_OK);
    ck_assert_ptr_eq(x, sv);
    ck_assert_int_eq(clcrt_kernel_variant(sv, CLCRT_USE_TRACE, &so), CLCRT_OK);
    expect_code(so, CLCRT_USE_TRACE, "short, observed");
    ck_assert_int_eq(clcrt_kernel_variant(k, CLCRT_USE_TRACE | CLCRT_USE_SHORT, &x), CLCRT_OK);
    ck_assert_ptr_eq(x, so);
    ck_assert_uint_eq(compiles(rt), c0 + 2);
    ck_assert_int_eq(clcrt_kernel_prepare(k, CLCRT_USE_SHORT | CLCRT_USE_GRAPH), CLCRT_OK);
    ck_assert_uint_eq(compiles(rt), c0 + 3); /* the graph variant; short and short+graph are built */
  }

  /* prepare: every combination of the uses, and nothing else. */
  clcrt_tile_desc d = scale_desc();
  d.sched = CLCRT_SCHED_STEAL;
  d.block = (clcrt_dim3){64, 1, 1};
  clcrt_kernel *k = NULL;
  ck_assert_int_eq(clcrt_register(rt, &d, &k), CLCRT_OK);
  unsigned long long c0 = compiles(rt);
  ck_assert_int_eq(clcrt_kernel_prepare(k, CLCRT_USE_GRAPH | CLCRT_USE_TRACE), CLCRT_OK);
  ck_assert_uint_eq(compiles(rt), c0 + 3); /* graph, trace, graph+trace */
  const clcrt_kernel *x = NULL;
  ck_assert_int_eq(clcrt_kernel_variant(k, CLCRT_USE_GRAPH | CLCRT_USE_TRACE, &x), CLCRT_OK);
  ck_assert_int_eq(clcrt_kernel_prepare(k, CLCRT_USE_GRAPH), CLCRT_OK);
  ck_assert_int_eq(clcrt_kernel_prepare(k, 0), CLCRT_OK);
  ck_assert_uint_eq(compiles(rt), c0 + 3);
  ck_assert_int_eq(clcrt_kernel_prepare(k, CLCRT_USE_PREEMPT), CLCRT_OK);
  ck_assert_uint_eq(compiles(rt), c0 + 4);

  /* Bad input. */
  ck_assert_int_eq(clcrt_kernel_prepare(k, 16u), CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "CLCRT_USE_SHORT (0x10 unknown)"));
  x = (const clcrt_kernel *)&x;
  ck_assert_int_eq(clcrt_kernel_variant(k, 0x80000001u, &x), CLCRT_E_INVALID);
  ck_assert_ptr_null(x);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "clcrt_kernel_variant"));
  ck_assert_int_eq(clcrt_kernel_variant(k, 0, NULL), CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "out is NULL"));
  ck_assert_int_eq(clcrt_kernel_variant(NULL, 0, &x), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_kernel_prepare(NULL, 0), CLCRT_E_INVALID);

  /* Outside STEAL only tracing has a variant: the other bits cost no compile. */
  d = scale_desc();
  d.sched = CLCRT_SCHED_FIXED;
  ck_assert_int_eq(clcrt_register(rt, &d, &k), CLCRT_OK);
  c0 = compiles(rt);
  ck_assert_int_eq(clcrt_kernel_variant(k, CLCRT_USE_GRAPH | CLCRT_USE_PREEMPT | CLCRT_USE_SHORT, &x), CLCRT_OK);
  ck_assert_ptr_eq(x, k);
  ck_assert_int_eq(clcrt_kernel_prepare(k, 15u), CLCRT_OK);
  ck_assert_uint_eq(compiles(rt), c0 + 1);
  const clcrt_kernel *o = NULL;
  ck_assert_int_eq(clcrt_kernel_variant(k, CLCRT_USE_TRACE, &o), CLCRT_OK);
  ck_assert_int_eq(clcrt_kernel_variant(k, 15u, &x), CLCRT_OK);
  ck_assert_ptr_eq(x, o);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* A namespaced tile function and Args type: "::" becomes "_" in the entry's name. */
START_TEST(test_namespaced_names) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.source =
      "namespace user {\n"
      "struct A { int *p; };\n"
      "__device__ void tile(const clcrt::Tile &t, const A &a) { if (threadIdx.x == 0) a.p[t.linear] = 1; }\n"
      "}\n";
  d.tile_fn = "user::tile";
  d.args_type = "user::A";
  d.sched = CLCRT_SCHED_FIXED;
  clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_register(rt, &d, &k);
  ck_assert_msg(st == CLCRT_OK, "%s: %s", clcrt_status_name(st), clcrt_errmsg(rt));
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
  ck_assert_str_eq(info.name, "clcrt_fixed_user__tile");
  clcrt_runtime_destroy(rt);
}
END_TEST

/* The ABI (nvrtc_src/clcrt_abi.h) as the device compiles it: a kernel whose source asserts
 * every field of clcrt::Params at the offset this host compiler gave clcrt__params compiles,
 * for both architectures; one that asserts a wrong offset does not, so the device-side
 * check is live (NVRTC has no __builtin_offsetof: CLCRT__OFFSETOF). */
static char *abi_source(size_t skew) {
  size_t cap = 8192, n = 0;
  char *src = malloc(cap);
  ck_assert_ptr_nonnull(src);
  n += (size_t)snprintf(src + n, cap - n, "%s", SCALE_SRC);
#define ABI_FIELD(field, offset)                                                                                    \
  n += (size_t)snprintf(src + n, cap - n,                                                                           \
                        "static_assert(CLCRT__OFFSETOF(clcrt::Params, " #field ") == %zu, \"host: " #field          \
                        " at %zu\");\n",                                                                             \
                        offsetof(clcrt__params, field) + (strcmp(#field, "unit_cycles") ? 0 : skew),              \
                        offsetof(clcrt__params, field));
  CLCRT__PARAMS_LAYOUT(ABI_FIELD)
#undef ABI_FIELD
  n += (size_t)snprintf(src + n, cap - n, "static_assert(sizeof(clcrt::Params) == %zu, \"host size\");\n",
                        sizeof(clcrt__params));
  ck_assert_uint_lt(n, cap - 1);
  return src;
}

START_TEST(test_abi_offsets) {
  static const char *const archs[] = {"sm_90a", "sm_100a"};
  for (int a = 0; a < 2; a++) {
    clcrt_runtime *rt = rt_new(archs[a]);
    clcrt_tile_desc d = scale_desc();
    char *src = abi_source(0);
    d.source = src;
    clcrt_kernel *k = NULL;
    ck_assert_msg(clcrt_register(rt, &d, &k) == CLCRT_OK, "%s: %s", archs[a], clcrt_errmsg(rt));
    free(src);
    src = abi_source(4);
    d.source = src;
    EXPECT_FAIL(rt, &d, CLCRT_E_COMPILE, "static assertion failed", "host: unit_cycles at 120");
    free(src);
    clcrt_runtime_destroy(rt);
  }
}
END_TEST

/* The embedded device template: compile.c hands NVRTC at most 16 headers (a template split
 * into more files would lose the last ones), the ABI header is among them, no file of the
 * scheduler template is much over 300 lines, and the tile loop names no scheduler (one file
 * per scheduler behind one loop; clcrt_tilemap.cuh is the tile functions' library, not the
 * scheduler's). */
START_TEST(test_embedded_headers) {
  int n = 0, abi = 0, loop = 0;
  for (const clcrt__embedded_file *f = clcrt__embedded; f->name; f++) {
    n++;
    abi |= strcmp(f->name, "clcrt_abi.h") == 0;
    unsigned lines = 0;
    for (size_t i = 0; i < f->len; i++) lines += f->text[i] == '\n';
    if (strcmp(f->name, "clcrt_tilemap.cuh") != 0)
      ck_assert_msg(lines <= 320, "%s has %u lines: split it (one subject per file)", f->name, lines);
    if (strcmp(f->name, "clcrt_loop.cuh") == 0) {
      loop = 1;
      ck_assert_msg(!strstr(f->text, "SCHED =="), "the tile loop (clcrt_loop.cuh) tests a scheduler by name");
    }
  }
  ck_assert_int_le(n, 16);
  ck_assert_msg(abi, "clcrt_abi.h is not embedded");
  ck_assert_msg(loop, "clcrt_loop.cuh is not embedded");
}
END_TEST

/* kernel_info_get with an older, smaller struct fills only what the caller has. */
START_TEST(test_info_small_struct) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.sched = CLCRT_SCHED_FIXED;
  clcrt_kernel *k = NULL;
  ck_assert_int_eq(clcrt_register(rt, &d, &k), CLCRT_OK);
  unsigned char buf[sizeof(clcrt_kernel_info) + 16];
  memset(buf, 0xab, sizeof buf);
  clcrt_kernel_info *info = (clcrt_kernel_info *)buf;
  info->size = offsetof(clcrt_kernel_info, arch);
  ck_assert_int_eq(clcrt_kernel_info_get(k, info), CLCRT_OK);
  ck_assert_str_eq(info->name, "clcrt_fixed_scale_tile");
  for (size_t i = offsetof(clcrt_kernel_info, arch); i < sizeof buf; i++) ck_assert_int_eq(buf[i], 0xab);
  info->size = sizeof(clcrt_kernel_info) + 8;
  ck_assert_int_eq(clcrt_kernel_info_get(k, info), CLCRT_E_INVALID);
  info->size = 0;
  ck_assert_int_eq(clcrt_kernel_info_get(k, info), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_kernel_info_get(NULL, info), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_kernel_info_get(k, NULL), CLCRT_E_INVALID);
  const void *p;
  size_t n;
  const char *ptx;
  ck_assert_int_eq(clcrt_kernel_cubin(NULL, &p, &n), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_kernel_cubin(k, NULL, &n), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_kernel_cubin(k, &p, NULL), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_kernel_ptx(NULL, &ptx), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_kernel_ptx(k, NULL), CLCRT_E_INVALID);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- bad inputs ---- */

START_TEST(test_bad_handles) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  clcrt_kernel *k = (clcrt_kernel *)&k;
  ck_assert_int_eq(clcrt_register(NULL, &d, &k), CLCRT_E_INVALID);
  ck_assert_str_eq(clcrt_errmsg(NULL), "clcrt_register: the runtime is NULL");
  ck_assert_int_eq(clcrt_register(rt, &d, NULL), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "out is NULL"), "%s", clcrt_errmsg(rt));
  EXPECT_FAIL(rt, NULL, CLCRT_E_INVALID, "descriptor is NULL");
  ck_assert_int_eq(clcrt_runtime_create(NULL, NULL), CLCRT_E_INVALID);
  ck_assert_ptr_null(clcrt_runtime_arch(NULL));
  ck_assert_int_eq(clcrt_runtime_compile_only(NULL), 0);
  clcrt_runtime_destroy(NULL);
  clcrt_stream_destroy(NULL);
  /* Options of a size no version of the header ever had: refused without a handle. */
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = "sm_90a";
  o.size = 3;
  clcrt_runtime *bad = (clcrt_runtime *)&bad;
  ck_assert_int_eq(clcrt_runtime_create(&bad, &o), CLCRT_E_INVALID);
  ck_assert_ptr_null(bad);
  o.size = sizeof o + 8;
  ck_assert_int_eq(clcrt_runtime_create(&bad, &o), CLCRT_E_INVALID);
  ck_assert_ptr_null(bad);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_bad_desc_size) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.size = 0;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->size is 0", "CLCRT_TILE_DESC_INIT");
  d.size = sizeof d + 8;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->size", "CLCRT_TILE_DESC_INIT");
  d.size = sizeof(size_t) + sizeof(char *);
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->size", "CLCRT_TILE_DESC_INIT");
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_bad_source) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.source = NULL;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->source is NULL");
  d.source = "";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->source is empty");
  d.source = " \t\r\n  \n";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->source is empty");
  clcrt_runtime_destroy(rt);
}
END_TEST

/* A syntax error on line 3 of the user's source is reported at <tile_fn>(3). */
START_TEST(test_syntax_error_line) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.source =
      "struct ScaleArgs { float *x; long n; float alpha; };\n"
      "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
      "  long i = (long)t.linear * blockDim.x + threadIdx.x +;\n"
      "  if (i < a.n) a.x[i] *= a.alpha;\n"
      "}\n";
  EXPECT_FAIL(rt, &d, CLCRT_E_COMPILE, "scale_tile(3)", "error", "sm_90a");
  ck_assert_msg(!strstr(clcrt_errmsg(rt), "hint"), "a user error must not blame the entry: %s", clcrt_errmsg(rt));
  /* An undeclared name on line 4. */
  d.source =
      "struct ScaleArgs { float *x; long n; float alpha; };\n"
      "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
      "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
      "  if (i < a.n) a.x[i] *= beta;\n"
      "}\n";
  EXPECT_FAIL(rt, &d, CLCRT_E_COMPILE, "scale_tile(4)", "beta");
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_bad_names) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.tile_fn = "scale_tiles";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "\"scale_tiles\"", "does not appear");
  d.tile_fn = NULL;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->tile_fn is NULL");
  d.tile_fn = "scale_tile(); int x";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->tile_fn", "not a C++ function name");
  d.tile_fn = "";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->tile_fn", "not a C++ function name");
  d = scale_desc();
  d.args_type = "ScaleArg";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "\"ScaleArg\"", "does not appear");
  d.args_type = NULL;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->args_type is NULL");
  d.args_type = "ScaleArgs*";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->args_type", "not a C++ type name");
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Names the cheap check cannot see whole: made by token pasting through a macro, or split
 * by a line splice. They were refused as "does not appear in the source"; a plain typo
 * still is, and a typo in a source that pastes tokens is NVRTC's to report. */
START_TEST(test_names_made_by_macros) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.source =
      "#define CLCRT_NAME(x) x##_tile\n"
      "#define ARGS(x) x%:%:Args\n"
      "struct ARGS(Paste) { float *x; long n; float alpha; };\n"
      "struct PasteState { float alpha; };\n"
      "#define PROLOGUE(x) __device__ void x##_prologue(const PasteArgs &a, PasteState &s) { s.alpha = a.alpha; }\n"
      "PROLOGUE(paste)\n"
      "__device__ void CLCRT_NAME(paste)(const clcrt::Tile &t, const ARGS(Paste) &a, PasteState &s) {\n"
      "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
      "  if (i < a.n) a.x[i] *= s.alpha;\n"
      "}\n";
  d.tile_fn = "paste_tile";
  d.args_type = "PasteArgs";
  d.state_type = "PasteState";
  d.prologue_fn = "paste_prologue";
  clcrt_kernel *k = NULL;
  ck_assert_msg(clcrt_register(rt, &d, &k) == CLCRT_OK, "token pasting: %s", clcrt_errmsg(rt));
  /* A typo where tokens are pasted: NVRTC names it, in the entry, with the hint. */
  d.tile_fn = "paste_tiles";
  EXPECT_FAIL(rt, &d, CLCRT_E_COMPILE, "paste_tiles", "clcrt_entry", "names in the descriptor");
  /* A name split by a line splice. */
  d = scale_desc();
  d.source =
      "struct ScaleArgs { float *x; long n; float alpha; };\n"
      "__device__ void scale_\\\ntile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
      "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
      "  if (i < a.n) a.x[i] *= a.alpha;\n"
      "}\n";
  ck_assert_msg(clcrt_register(rt, &d, &k) == CLCRT_OK, "line splice: %s", clcrt_errmsg(rt));
  /* The early message for a plain typo stays. */
  d.tile_fn = "scale_til";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "\"scale_til\"", "does not appear");
  clcrt_runtime_destroy(rt);
}
END_TEST

/* The generated entry's own names never shadow the user's: a tile function called t,
 * args, params or state used to fail in clcrt_entry (its lambda took "t", its parameters
 * were "args" and "params", the state "state"); Args may be called Tile too. */
START_TEST(test_names_the_entry_uses) {
  clcrt_runtime *rt = rt_new("sm_90a");
  static const char *const names[] = {"t", "args", "params", "state"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char src[512];
    snprintf(src, sizeof src,
             "struct Tile { float *x; };\n"
             "struct St { float alpha; };\n"
             "__device__ void p(const Tile &a, St &s) { s.alpha = 2.0f; }\n"
             "__device__ void %s(const clcrt::Tile &t, const Tile &a, St &s) { a.x[t.linear] *= s.alpha; }\n",
             names[i]);
    clcrt_tile_desc d = scale_desc();
    d.source = src;
    d.tile_fn = names[i];
    d.args_type = "Tile";
    d.state_type = "St";
    d.prologue_fn = "p";
    clcrt_kernel *k = NULL;
    ck_assert_msg(clcrt_register(rt, &d, &k) == CLCRT_OK, "tile function %s: %s", names[i], clcrt_errmsg(rt));
  }
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Long names reach the generated entry whole (the formatter once cut at 1024 bytes and
 * garbled the #line and the entry), and a toolkit path too long to pass whole is refused. */
START_TEST(test_long_names_and_paths) {
  clcrt_runtime *rt = rt_new("sm_90a");
  char fn[1301], *src = malloc(4096);
  memset(fn, 'f', 1300);
  fn[0] = 'l', fn[1300] = 0;
  snprintf(src, 4096,
           "struct ScaleArgs { float *x; long n; float alpha; };\n"
           "__device__ void %s(const clcrt::Tile &t, const ScaleArgs &a) {\n"
           "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
           "  if (i < a.n) a.x[i] *= a.alpha;\n"
           "}\n",
           fn);
  clcrt_tile_desc d = scale_desc();
  d.source = src;
  d.tile_fn = fn;
  clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_register(rt, &d, &k);
  ck_assert_msg(st == CLCRT_OK, "a 1300-character tile function name: %s", clcrt_errmsg(rt));
  clcrt_runtime_destroy(rt);
  free(src);

  char home[1200];
  memset(home, 'h', sizeof home - 1);
  home[0] = '/', home[sizeof home - 1] = 0;
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = "sm_90a";
  o.cache_dir = "";
  o.cuda_home = home;
  ck_assert_int_eq(clcrt_runtime_create(&rt, &o), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "1199 characters"), "message: %s", clcrt_errmsg(rt));
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Args too large for a kernel's parameters fail in the generated entry, but the hint is
 * the parameter limit, not the signatures: the front end ("Formal parameter space
 * overflowed") and ptxas ("too much parameter space") both report it. */
START_TEST(test_args_over_parameter_limit) {
  clcrt_runtime *rt = rt_new("sm_90a");
  static const int floats[] = {8160, 8159};
  for (int i = 0; i < 2; i++) {
    char src[512];
    snprintf(src, sizeof src,
             "struct BigArgs { float x[%d]; };\n"
             "__device__ void big_tile(const clcrt::Tile &t, const BigArgs &a) {\n"
             "  if (a.x[t.linear] > 1.0f) asm volatile(\"trap;\");\n"
             "}\n",
             floats[i]);
    clcrt_tile_desc d = scale_desc();
    d.source = src;
    d.tile_fn = "big_tile";
    d.args_type = "BigArgs";
    EXPECT_FAIL(rt, &d, CLCRT_E_COMPILE, "parameter space", "32,764 bytes", "pointer");
    ck_assert_msg(!strstr(clcrt_errmsg(rt), "signatures"), "%d floats: %s", floats[i], clcrt_errmsg(rt));
  }
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Every E_INVALID of a public entry point says what was wrong: NULL handles in
 * clcrt_errmsg(NULL), the rest on the runtime. These used to read "no error". */
#define EXPECT_NULL_MSG(call, fn)                                                                               \
  do {                                                                                                          \
    clcrt__err_forget(NULL);                                                                                    \
    ck_assert_int_eq((call), CLCRT_E_INVALID);                                                                  \
    ck_assert_msg(strstr(clcrt_errmsg(NULL), fn) && strstr(clcrt_errmsg(NULL), "NULL"), "%s: %s", #call,         \
                  clcrt_errmsg(NULL));                                                                          \
  } while (0)
#define EXPECT_RT_MSG(rt, call, ...)                                                                            \
  do {                                                                                                          \
    clcrt__err_forget(rt);                                                                                      \
    ck_assert_int_eq((call), CLCRT_E_INVALID);                                                                  \
    const char *const subs_[] = {__VA_ARGS__, NULL};                                                             \
    for (const char *const *s_ = subs_; *s_; s_++)                                                              \
      ck_assert_msg(strstr(clcrt_errmsg(rt), *s_), "%s: %s", #call, clcrt_errmsg(rt));                          \
  } while (0)

START_TEST(test_invalid_arguments_have_messages) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  clcrt_kernel *k = NULL;
  ck_assert_int_eq(clcrt_register(rt, &d, &k), CLCRT_OK);
  const void *p;
  size_t n;
  const char *ptx;
  const clcrt_kernel *v;
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  clcrt_cache_stats cs = CLCRT_CACHE_STATS_INIT;
  clcrt_stream_stats ss = CLCRT_STREAM_STATS_INIT;
  clcrt_stream *s = NULL;
  clcrt_trace *t = NULL;
  EXPECT_NULL_MSG(clcrt_register(NULL, &d, &k), "clcrt_register");
  EXPECT_NULL_MSG(clcrt_register_async(NULL, &d, NULL, NULL, NULL), "clcrt_register_async");
  EXPECT_NULL_MSG(clcrt_kernel_cubin(NULL, &p, &n), "clcrt_kernel_cubin");
  EXPECT_NULL_MSG(clcrt_kernel_ptx(NULL, &ptx), "clcrt_kernel_ptx");
  EXPECT_NULL_MSG(clcrt_kernel_info_get(NULL, &info), "clcrt_kernel_info_get");
  EXPECT_NULL_MSG(clcrt_kernel_variant(NULL, 0, &v), "clcrt_kernel_variant");
  EXPECT_NULL_MSG(clcrt_kernel_prepare(NULL, 0), "clcrt_kernel_prepare");
  EXPECT_NULL_MSG(clcrt_cache_stats_get(NULL, &cs), "clcrt_cache_stats_get");
  EXPECT_NULL_MSG(clcrt_stream_create(NULL, NULL, &s), "clcrt_stream_create");
  EXPECT_NULL_MSG(clcrt_stream_sync(NULL), "clcrt_stream_sync");
  EXPECT_NULL_MSG(clcrt_run(NULL, k, (clcrt_dim3){1, 1, 1}, NULL, 0), "clcrt_run");
  EXPECT_NULL_MSG(clcrt_stream_stats_enable(NULL, 1), "clcrt_stream_stats_enable");
  EXPECT_NULL_MSG(clcrt_stream_stats_read(NULL, &ss), "clcrt_stream_stats_read");
  EXPECT_NULL_MSG(clcrt_stream_trace_enable(NULL, 16), "clcrt_stream_trace_enable");
  EXPECT_NULL_MSG(clcrt_stream_trace_read(NULL, &t), "clcrt_stream_trace_read");
  EXPECT_NULL_MSG(clcrt_run_notify(NULL, NULL, NULL, NULL), "clcrt_run_notify");
  EXPECT_NULL_MSG(clcrt_preempt_begin(NULL), "clcrt_preempt_begin");
  EXPECT_NULL_MSG(clcrt_tensor_map_2d(NULL, NULL, CLCRT_DTYPE_F32, 0, 0, 0, 0, 0, 0, CLCRT_SWIZZLE_NONE),
                  "clcrt_tensor_map_2d");
  /* A kernel, but an argument missing or of no known size. */
  EXPECT_RT_MSG(rt, clcrt_kernel_cubin(k, NULL, &n), "clcrt_kernel_cubin", "data is NULL");
  EXPECT_RT_MSG(rt, clcrt_kernel_cubin(k, &p, NULL), "clcrt_kernel_cubin", "size is NULL");
  EXPECT_RT_MSG(rt, clcrt_kernel_ptx(k, NULL), "clcrt_kernel_ptx", "ptx is NULL");
  EXPECT_RT_MSG(rt, clcrt_kernel_info_get(k, NULL), "clcrt_kernel_info_get", "info is NULL");
  info.size = 0;
  EXPECT_RT_MSG(rt, clcrt_kernel_info_get(k, &info), "info->size is 0", "CLCRT_KERNEL_INFO_INIT");
  info.size = sizeof info + 8;
  EXPECT_RT_MSG(rt, clcrt_kernel_info_get(k, &info), "info->size", "CLCRT_KERNEL_INFO_INIT");
  EXPECT_RT_MSG(rt, clcrt_cache_stats_get(rt, NULL), "clcrt_cache_stats_get", "out is NULL");
  cs.size = 0;
  EXPECT_RT_MSG(rt, clcrt_cache_stats_get(rt, &cs), "out->size is 0", "CLCRT_CACHE_STATS_INIT");
  clcrt_runtime_destroy(rt);
}
END_TEST

/* A toolkit named by the caller must be one: it used to be accepted, and a tile function
 * including <cuda_bf16.h> then failed with "no directories in search list". */
START_TEST(test_bad_cuda_home) {
  char dir[] = "/tmp/clcrt-home-XXXXXX", inc[64], hdr[80];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  /* From the environment (read once per process, so in a child that has read nothing yet):
   * the message names the variable. */
  pid_t pid = fork();
  if (pid == 0) {
    setenv("CUDA_HOME", "/nonexistent/cuda", 1);
    clcrt_runtime_opts e = CLCRT_RUNTIME_OPTS_INIT;
    e.target_arch = "sm_90a";
    e.cache_dir = "";
    clcrt_runtime *r = NULL;
    clcrt_status st = clcrt_runtime_create(&r, &e);
    _exit(st == CLCRT_E_INVALID && strstr(clcrt_errmsg(r), "(CUDA_HOME)") && strstr(clcrt_errmsg(r), "unset CUDA_HOME")
              ? 0
              : 1);
  }
  int ws;
  waitpid(pid, &ws, 0);
  ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "CUDA_HOME=/nonexistent/cuda: child status %d", ws);
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = "sm_90a";
  o.cache_dir = "";
  clcrt_runtime *rt = NULL;
  const char *bad[] = {"/nonexistent/cuda", dir};
  for (int i = 0; i < 2; i++) {
    o.cuda_home = bad[i];
    ck_assert_int_eq(clcrt_runtime_create(&rt, &o), CLCRT_E_INVALID);
    ck_assert_msg(strstr(clcrt_errmsg(rt), bad[i]) && strstr(clcrt_errmsg(rt), "include/cuda.h") &&
                      strstr(clcrt_errmsg(rt), "opts.cuda_home"),
                  "%s", clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
  }
  /* Something with a toolkit's include/cuda.h is a toolkit. */
  snprintf(inc, sizeof inc, "%s/include", dir);
  snprintf(hdr, sizeof hdr, "%s/cuda.h", inc);
  ck_assert_int_eq(mkdir(inc, 0700), 0);
  fclose(fopen(hdr, "w"));
  o.cuda_home = dir;
  ck_assert_msg(clcrt_runtime_create(&rt, &o) == CLCRT_OK, "%s", clcrt_errmsg(rt));
  clcrt_runtime_destroy(rt);
  unlink(hdr);
  rmdir(inc);
  rmdir(dir);
}
END_TEST

/* The toolkit's stub libcuda (lib64/stubs), found first through LD_LIBRARY_PATH, answers
 * every call with CUDA_ERROR_STUB_LIBRARY (34). That is not an old driver, and the message
 * said "update the driver". Run in a child started with LD_LIBRARY_PATH, which the loader
 * reads only at start-up. */
START_TEST(test_stub_driver) {
  const char *home = getenv("CUDA_HOME") && *getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
  char stub[512], dir[] = "/tmp/clcrt-stub-XXXXXX", link[64];
  snprintf(stub, sizeof stub, "%s/lib64/stubs/libcuda.so", home);
  if (access(stub, R_OK) != 0) {
    printf("test_stub_driver: skipped: no stub library at %s\n", stub);
    fflush(stdout);
    return;
  }
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(link, sizeof link, "%s/libcuda.so.1", dir);
  ck_assert_int_eq(symlink(stub, link), 0);
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    setenv("LD_LIBRARY_PATH", dir, 1);
    execl("/proc/self/exe", "test_core", "--create-default-runtime", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char out[2048] = "";
  size_t got = 0;
  for (ssize_t r; got < sizeof out - 1 && (r = read(fds[0], out + got, sizeof out - 1 - got)) > 0;) got += (size_t)r;
  out[got] = 0;
  close(fds[0]);
  int ws;
  waitpid(pid, &ws, 0);
  unlink(link);
  rmdir(dir);
  ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "child status %d: %s", ws, out);
  ck_assert_msg(strstr(out, "CLCRT_E_NO_DEVICE") && strstr(out, "stub library") && strstr(out, "LD_LIBRARY_PATH") &&
                    strstr(out, "target_arch") && !strstr(out, "update the driver"),
                "%s", out);
}
END_TEST

/* A tile function of the wrong signature fails in the generated entry, with the hint. */
START_TEST(test_wrong_signature) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.source =
      "struct ScaleArgs { float *x; long n; float alpha; };\n"
      "__device__ void scale_tile(const ScaleArgs &a, int i) { if (i < a.n) a.x[i] *= a.alpha; }\n";
  EXPECT_FAIL(rt, &d, CLCRT_E_COMPILE, "clcrt_entry", "hint", "signature");
  /* A name that appears only in a comment passes the cheap check, then NVRTC names it. */
  d.source =
      "struct ScaleArgs { float *x; long n; float alpha; };\n"
      "// scale_tile is not defined here\n";
  EXPECT_FAIL(rt, &d, CLCRT_E_COMPILE, "clcrt_entry", "scale_tile");
  /* The tile function without its State parameter while a prologue is given. */
  d.source = STATE_SRC;
  d.tile_fn = "scale_tile_nostate";
  d.source =
      "struct ScaleArgs { float *x; long n; float alpha; };\n"
      "struct ScaleState { float alpha; };\n"
      "__device__ void scale_prologue(const ScaleArgs &a, ScaleState &s) { s.alpha = a.alpha; }\n"
      "__device__ void scale_tile_nostate(const clcrt::Tile &t, const ScaleArgs &a) {}\n";
  d.state_type = "ScaleState";
  d.prologue_fn = "scale_prologue";
  EXPECT_FAIL(rt, &d, CLCRT_E_COMPILE, "clcrt_entry", "hint");
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_bad_block) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  static const clcrt_dim3 zero[] = {{0, 1, 1}, {128, 0, 1}, {128, 1, 0}, {0, 0, 0}};
  for (int i = 0; i < 4; i++) {
    d.block = zero[i];
    EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "zero dimension", "block");
  }
  d.block = (clcrt_dim3){1025, 1, 1};
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "1025 threads", "1024");
  d.block = (clcrt_dim3){64, 32, 2};
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "4096 threads", "1024");
  d.block = (clcrt_dim3){65536, 65536, 1}; /* the product overflows 32 bits */
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "4294967296 threads", "1024");
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_bad_cluster) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  static const clcrt_dim3 mixed[] = {{2, 0, 0}, {0, 1, 1}, {2, 1, 0}, {1, 0, 1}};
  for (int i = 0; i < 4; i++) {
    d.cluster = mixed[i];
    EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "mixes zero and non-zero", "cluster");
  }
  d.cluster = (clcrt_dim3){17, 1, 1};
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "17 CTAs", "16");
  d.cluster = (clcrt_dim3){4, 4, 2};
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "32 CTAs", "16");
  d.cluster = (clcrt_dim3){65536, 65536, 2}; /* the product overflows 32 bits */
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "8589934592 CTAs", "16");
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_clc_on_sm90) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.sched = CLCRT_SCHED_CLC;
  EXPECT_FAIL(rt, &d, CLCRT_E_UNSUPPORTED, "sm_90a", "CLCRT_SCHED_CLC", "sm_100");
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_bad_target_arch) {
  static const char *const malformed[] = {"sm90", "sm_", "compute_90", "sm_90x", "", "sm_90aa", "SM_90", " sm_90"};
  for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++)
    EXPECT_CREATE_FAIL(malformed[i], CLCRT_E_INVALID, "target_arch", "not an architecture", "sm_90a");
  /* Well formed, not supported: the message lists what is. */
  EXPECT_CREATE_FAIL("sm_50", CLCRT_E_UNSUPPORTED, "sm_50", "supports", "sm_90", "sm_100");
  EXPECT_CREATE_FAIL("sm_999", CLCRT_E_UNSUPPORTED, "sm_999", "supports", "sm_90", "sm_100");
  /* Known to NVRTC, too old for clusters. */
  EXPECT_CREATE_FAIL("sm_80", CLCRT_E_UNSUPPORTED, "sm_80", "sm_90");
  EXPECT_CREATE_FAIL("sm_80a", CLCRT_E_UNSUPPORTED, "sm_80a", "sm_90");
  EXPECT_CREATE_FAIL("sm_90f", CLCRT_E_UNSUPPORTED, "sm_90f", "sm_100");
}
END_TEST

START_TEST(test_good_target_arch) {
  static const char *const ok[] = {"sm_90", "sm_90a", "sm_100", "sm_100a", "sm_100f"};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    clcrt_runtime *rt = rt_new(ok[i]);
    ck_assert_str_eq(clcrt_errmsg(rt), "no error");
    clcrt_runtime_destroy(rt);
  }
}
END_TEST

START_TEST(test_bad_state) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.source = STATE_SRC;
  d.tile_fn = "scale_state_tile";
  d.state_type = "ScaleState";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "state_type", "prologue_fn", "go together");
  d.state_type = NULL;
  d.prologue_fn = "scale_prologue";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "state_type", "prologue_fn", "go together");
  d.state_type = "NoSuchState";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "\"NoSuchState\"");
  d.state_type = "ScaleState";
  d.prologue_fn = "no_such_prologue";
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "\"no_such_prologue\"");
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_bad_options) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  const char *with_null[] = {"-DX=1", NULL};
  d.options = with_null;
  d.num_options = 2;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->options[1] is NULL");
  d.options = NULL;
  d.num_options = 1;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->options", "1 options");
  d.options = with_null;
  d.num_options = -1;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->options", "-1 options");
  static const char *const arch_opts[] = {"-arch=sm_80", "--gpu-architecture=compute_90", "-arch", "-rdc=true",
                                          "--relocatable-device-code=true", "-dc", "-gencode"};
  for (size_t i = 0; i < sizeof arch_opts / sizeof *arch_opts; i++) {
    const char *o[] = {"-DX=1", arch_opts[i]};
    d.options = o;
    d.num_options = 2;
    EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->options[1]", arch_opts[i], "target_arch");
  }
  /* Options NVRTC 13 accepts that change what it makes (no cubin, a cubin without the kernel,
   * a relocatable one): refused up front, naming the option. They used to end in "an empty
   * cubin" or "no entry named ...". */
  static const char *const output_opts[] = {"-fdevice-syntax-only",
                                            "--fdevice-syntax-only",
                                            "-dlto",
                                            "--dlink-time-opt",
                                            "-gen-opt-lto",
                                            "--gen-opt-lto",
                                            "-optix-ir",
                                            "--optix-ir",
                                            "--device-c",
                                            "-ewp",
                                            "--extensible-whole-program",
                                            "-fdevice-time-trace=/tmp/t",
                                            "--fdevice-time-trace=/tmp/t",
                                            "-Xptxas=-c",
                                            "-Xptxas=-v,--compile-only",
                                            "--ptxas-options=-c"};
  for (size_t i = 0; i < sizeof output_opts / sizeof *output_opts; i++) {
    const char *o[] = {output_opts[i]};
    d.options = o;
    d.num_options = 1;
    EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->options[0]", output_opts[i], "refused");
  }
  /* Options that only change how the code is made stay the user's. */
  static const char *const fine[] = {"-G", "-lineinfo", "-Xptxas=-v", "--use_fast_math", "-default-device"};
  for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
    const char *o[] = {fine[i]};
    d.options = o;
    d.num_options = 1;
    clcrt_kernel *k = NULL;
    ck_assert_msg(clcrt_register(rt, &d, &k) == CLCRT_OK, "%s: %s", fine[i], clcrt_errmsg(rt));
  }
  /* An option NVRTC does not know is NVRTC's to refuse. */
  const char *unknown[] = {"--no-such-option"};
  d.options = unknown;
  d.num_options = 1;
  EXPECT_FAIL(rt, &d, CLCRT_E_COMPILE, "no-such-option");
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_bad_smem) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.smem_bytes = 227 * 1024 + 1;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "232449", "232448", "sm_90a");
  d.smem_bytes = ~0u;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "4294967295", "232448");
  /* STEAL's response ring follows the tile function's shared memory: a size that fits the
   * device but not with the ring is refused, naming the ring; FIXED has none. */
  d.smem_bytes = 232448 - 100;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "232348", "232448", "response ring");
  clcrt_tile_desc f = d;
  f.sched = CLCRT_SCHED_FIXED;
  clcrt_kernel *k = NULL;
  ck_assert_msg(clcrt_register(rt, &f, &k) == CLCRT_OK, "%s", clcrt_errmsg(rt));
  /* A scheduler without a ring says nothing about one (the message once ended "per CTA0"). */
  f.sched = CLCRT_SCHED_STATIC;
  f.smem_bytes = 232448 + 1;
  EXPECT_FAIL(rt, &f, CLCRT_E_INVALID, "232449", "232448");
  const char *m = clcrt_errmsg(rt);
  ck_assert_msg(!strstr(m, "ring") && !strstr(m, "CTA0") && strlen(m) > 8 && !strcmp(m + strlen(m) - 8, " per CTA"),
                "%s", m);
  clcrt_runtime_destroy(rt);
  rt = rt_new("sm_100a");
  d.smem_bytes = 300 * 1024;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "307200", "sm_100a");
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Compile-only mode refuses what a device would: the cubin's static shared memory plus the
 * dynamic and the ring above the architecture's 232448 bytes. 201,088 static + 200,000
 * dynamic bytes used to compile "fine" for both architectures. */
START_TEST(test_compile_only_smem_total) {
  static const char *const SRC =
      "struct ScaleArgs { float *x; long n; float alpha; };\n"
      "__device__ void big_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
      "  __shared__ float s[STATIC_FLOATS];\n"
      "  s[threadIdx.x] = a.alpha;\n"
      "  __syncthreads();\n"
      "  a.x[t.linear] = s[(threadIdx.x + 1) % STATIC_FLOATS] + ((float *)clcrt::smem())[0];\n"
      "}\n";
  const char *arches[] = {"sm_90a", "sm_100a"};
  for (int i = 0; i < 2; i++) {
    clcrt_runtime *rt = rt_new(arches[i]);
    clcrt_tile_desc d = scale_desc();
    d.source = SRC;
    d.tile_fn = "big_tile";
    const char *big[] = {"-DSTATIC_FLOATS=50016"}; /* 200,064 bytes, 201,088 with the reserved 1 KiB */
    d.options = big;
    d.num_options = 1;
    d.smem_bytes = 200000;
    EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "big_tile", "200128 bytes of dynamic", "128 of them", "201088 of static", "232448",
                arches[i]);
    /* Under the limit it compiles, and the cubin says how much was static. */
    d.smem_bytes = 20000;
    clcrt_kernel *k = NULL;
    ck_assert_msg(clcrt_register(rt, &d, &k) == CLCRT_OK, "%s: %s", arches[i], clcrt_errmsg(rt));
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
    ck_assert_uint_ge(info.static_smem, 200064);
    /* FIXED has no ring: the sum is exactly static + dynamic. */
    d.sched = CLCRT_SCHED_FIXED;
    d.smem_bytes = 232448 - info.static_smem + 1;
    EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "big_tile", "0 of them", "232448");
    d.smem_bytes -= 1;
    ck_assert_msg(clcrt_register(rt, &d, &k) == CLCRT_OK, "%s: %s", arches[i], clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
  }
}
END_TEST

START_TEST(test_bad_sched_grid) {
  clcrt_runtime *rt = rt_new("sm_100a");
  clcrt_tile_desc d = scale_desc();
  d.sched = (clcrt_sched)7;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->sched is 7");
  d.sched = (clcrt_sched)-1;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->sched is -1");
  d.sched = CLCRT_SCHED_STEAL;
  d.grid = (clcrt_grid)9;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->grid is 9");
  d.sched = CLCRT_SCHED_FIXED;
  d.grid = CLCRT_GRID_PERSISTENT;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->grid", "CLCRT_SCHED_STEAL only", "full");
  d.sched = CLCRT_SCHED_CLC;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->grid", "CLCRT_SCHED_STEAL only", "full");
  d.sched = CLCRT_SCHED_STATIC;
  d.grid = CLCRT_GRID_FULL;
  EXPECT_FAIL(rt, &d, CLCRT_E_INVALID, "desc->grid", "CLCRT_SCHED_STEAL only", "persistent");
  clcrt_runtime_destroy(rt);
}
END_TEST

/* A failed registration leaves the runtime usable, and a later success does not keep the
 * old message around as if it were current. */
START_TEST(test_failure_then_success) {
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_tile_desc d = scale_desc();
  d.sched = CLCRT_SCHED_CLC;
  EXPECT_FAIL(rt, &d, CLCRT_E_UNSUPPORTED, "sm_90a");
  d.sched = CLCRT_SCHED_FIXED;
  clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_register(rt, &d, &k);
  ck_assert_msg(st == CLCRT_OK, "%s", clcrt_errmsg(rt));
  ck_assert_ptr_nonnull(k);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- no driver, status table, streams ---- */

START_TEST(test_no_driver) {
  clcrt__driver_pretend_missing(1);
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, NULL);
  ck_assert_msg(st == CLCRT_E_NO_DEVICE, "got %s", clcrt_status_name(st));
  ck_assert_msg(rt != NULL, "the failed handle must be returned so that clcrt_errmsg can explain");
  ck_assert_msg(strstr(clcrt_errmsg(rt), "target_arch"), "message does not point at target_arch: %s",
                clcrt_errmsg(rt));
  ck_assert_msg(strstr(clcrt_errmsg(rt), "libcuda.so.1"), "message does not name the driver: %s", clcrt_errmsg(rt));
  clcrt_runtime_destroy(rt);
  /* With options and a device ordinal, the same. */
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.device = 3;
  rt = NULL;
  ck_assert_int_eq(clcrt_runtime_create(&rt, &o), CLCRT_E_NO_DEVICE);
  ck_assert_ptr_nonnull(rt);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "target_arch"), "%s", clcrt_errmsg(rt));
  clcrt_runtime_destroy(rt);
  /* Compile-only runtimes never touch the driver. */
  rt = rt_new("sm_90a");
  clcrt_runtime_destroy(rt);
  clcrt__driver_pretend_missing(0);
}
END_TEST

/* The real path: where libcuda.so.1 cannot be loaded (this CI machine) it must be
 * CLCRT_E_NO_DEVICE pointing at target_arch; where a driver loads, a GPU-less or pre-sm_90
 * machine still gets a clear status, and a machine with a usable GPU has nothing to check. */
START_TEST(test_no_driver_real) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int have_driver = h != NULL;
  if (h) dlclose(h);
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, NULL);
  ck_assert_ptr_nonnull(rt);
  if (!have_driver) {
    ck_assert_msg(st == CLCRT_E_NO_DEVICE, "no libcuda.so.1, yet %s: %s", clcrt_status_name(st), clcrt_errmsg(rt));
    ck_assert_msg(strstr(clcrt_errmsg(rt), "libcuda.so.1") && strstr(clcrt_errmsg(rt), "target_arch"),
                  "message does not name the driver and target_arch: %s", clcrt_errmsg(rt));
  } else if (st == CLCRT_OK) {
    printf("test_no_driver_real: this machine has a usable GPU (%s): nothing to check\n", clcrt_runtime_arch(rt));
    fflush(stdout);
  } else if (st == CLCRT_E_NO_DEVICE) {
    ck_assert_msg(strstr(clcrt_errmsg(rt), "target_arch"), "message does not point at target_arch: %s",
                  clcrt_errmsg(rt));
  } else {
    ck_assert_msg(st == CLCRT_E_UNSUPPORTED, "got %s: %s", clcrt_status_name(st), clcrt_errmsg(rt));
  }
  clcrt_runtime_destroy(rt);
}
END_TEST

/* CLCRT_PREEMPT_WAVES: decimal 1..64 only; anything else leaves the default. */
START_TEST(test_preempt_waves_parse) {
  static const struct {
    const char *text;
    int ok;
    unsigned v;
  } cases[] = {{"1", 1, 1},     {"2", 1, 2},      {"64", 1, 64},   {"007", 1, 7},  {"0", 0, 0},    {"65", 0, 0},
               {"", 0, 0},      {"-1", 0, 0},     {"+3", 0, 0},    {" 3", 0, 0},   {"3 ", 0, 0},   {"3x", 0, 0},
               {"0x10", 0, 0},  {"1e1", 0, 0},    {"4294967299", 0, 0}, {"99999999999999999999", 0, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned v = 12345;
    int ok = clcrt__parse_count(cases[i].text, 1, CLCRT__PREEMPT_WAVES_MAX, &v);
    ck_assert_msg(ok == cases[i].ok, "\"%s\": parsed %d, expected %d", cases[i].text, ok, cases[i].ok);
    ck_assert_uint_eq(v, cases[i].ok ? cases[i].v : 12345u);
  }
  unsigned v = 5;
  ck_assert_int_eq(clcrt__parse_count(NULL, 1, CLCRT__PREEMPT_WAVES_MAX, &v), 0);
  ck_assert_uint_eq(v, 5);
  ck_assert_uint_ge(clcrt__env_get()->preempt_waves, 1);
  ck_assert_uint_le(clcrt__env_get()->preempt_waves, CLCRT__PREEMPT_WAVES_MAX);
  /* CLCRT_STEAL_CHUNK_CYCLES goes through the same parser with its own range. */
  static const struct {
    const char *text;
    int ok;
    unsigned v;
  } chunk[] = {{"1", 1, 1}, {"8000", 1, 8000}, {"10000000", 1, 10000000}, {"10000001", 0, 0}, {"0", 0, 0},
               {"18446744073709551617", 0, 0}, {"8k", 0, 0}, {"", 0, 0}, {"-8000", 0, 0}};
  for (size_t i = 0; i < sizeof chunk / sizeof chunk[0]; i++) {
    unsigned c = 777;
    int ok = clcrt__parse_count(chunk[i].text, CLCRT__CHUNK_CYCLES_MIN, CLCRT__CHUNK_CYCLES_MAX, &c);
    ck_assert_msg(ok == chunk[i].ok, "chunk \"%s\": parsed %d, expected %d", chunk[i].text, ok, chunk[i].ok);
    ck_assert_uint_eq(c, chunk[i].ok ? chunk[i].v : 777u);
  }
  ck_assert_uint_ge(clcrt__env_get()->chunk_cycles, CLCRT__CHUNK_CYCLES_MIN);
  ck_assert_uint_le(clcrt__env_get()->chunk_cycles, CLCRT__CHUNK_CYCLES_MAX);
}
END_TEST

/* CLCRT_STEAL_LONG_CYCLES, read in a child (the environment is read once per process): 0 (never
 * one cluster per unit) to CLCRT__LONG_CYCLES_MAX; anything else keeps the default and is
 * remembered for the warning. */
static void long_cycles_is(const char *val, unsigned want, int bad) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("CLCRT_STEAL_LONG_CYCLES", val, 1);
    const clcrt__env *e = clcrt__env_get();
    _exit(e->long_cycles == want && (e->long_cycles_bad != NULL) == bad ? 0 : 1);
  }
  int ws;
  waitpid(pid, &ws, 0);
  ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "CLCRT_STEAL_LONG_CYCLES=\"%s\": want %u%s", val, want,
                bad ? " (refused)" : "");
}

START_TEST(test_long_cycles_env) {
  const unsigned def = CLCRT__LONG_CYCLES_DEFAULT;
  long_cycles_is("0", 0, 0);
  long_cycles_is("1", 1, 0);
  long_cycles_is("20000", 20000, 0);
  long_cycles_is("100000000", CLCRT__LONG_CYCLES_MAX, 0);
  long_cycles_is("100000001", def, 1);
  long_cycles_is("4294967296", def, 1);
  long_cycles_is("-1", def, 1);
  long_cycles_is("4k", def, 1);
  long_cycles_is(" 4000", def, 1);
  long_cycles_is("", def, 0); /* empty: unset */
  ck_assert_uint_le(clcrt__env_get()->long_cycles, CLCRT__LONG_CYCLES_MAX);
}
END_TEST

/* The tunables as options (clcrt_runtime_opts, 0: the default), the environment overriding them
 * when set to a valid value, read once (env.c). Each case in a process of its own, so that the
 * environment it sets is the one read. */
typedef struct tun_case {
  const char *env[5];           /* CLCRT_STEAL_CHUNK_CYCLES, _LONG_CYCLES, CLCRT_PREEMPT_WAVES, CLCRT_CACHE_MAX_BYTES,
                                   CLCRT_WARMUP; NULL: unset */
  clcrt_runtime_opts o;         /* target_arch and cache_dir are set by the test */
  size_t size;                  /* o.size; 0: sizeof o */
  clcrt_status st;
  unsigned chunk, lng, waves;   /* expected */
  unsigned long long cap;
  int warmup;
  const char *warn[5];          /* texts the warnings must hold; NULL-terminated */
} tun_case;

static char tun_log[4096];

static void tun_log_fn(void *user, clcrt_log_level level, const char *msg) {
  (void)user;
  if (level == CLCRT_LOG_WARN && strlen(tun_log) + strlen(msg) + 2 < sizeof tun_log)
    strcat(strcat(tun_log, msg), "\n");
}

static int tun_run(const tun_case *c) {
  static const char *const names[5] = {"CLCRT_STEAL_CHUNK_CYCLES", "CLCRT_STEAL_LONG_CYCLES", "CLCRT_PREEMPT_WAVES",
                                       "CLCRT_CACHE_MAX_BYTES", "CLCRT_WARMUP"};
  for (int i = 0; i < 5; i++) {
    if (c->env[i])
      setenv(names[i], c->env[i], 1);
    else
      unsetenv(names[i]);
  }
  clcrt_runtime_opts o = c->o;
  o.size = c->size ? c->size : sizeof o;
  o.target_arch = "sm_90a";
  o.cache_dir = "";
  tun_log[0] = 0;
  if (o.size > offsetof(clcrt_runtime_opts, log_user)) o.log = tun_log_fn;
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  int ok = st == c->st;
  /* A refused environment value's warning names the value in use: the option where one is set. */
  for (int i = 0; ok && st == CLCRT_OK && c->warn[i]; i++) {
    ok = strstr(tun_log, c->warn[i]) != NULL;
    if (!ok) fprintf(stderr, "tunables: no \"%s\" in the warnings:\n%s", c->warn[i], tun_log);
  }
  if (st != CLCRT_OK)
    ok = ok && strstr(clcrt_errmsg(rt), "clcrt_runtime_opts.") != NULL;
  else
    ok = ok && rt->chunk_cycles == c->chunk && rt->long_cycles == c->lng && rt->preempt_waves == c->waves &&
         rt->cache_max_bytes == c->cap && rt->warmup == c->warmup;
  if (!ok && rt)
    fprintf(stderr, "tunables: status %s (%s): chunk %u long %u waves %u cap %llu warmup %d\n", clcrt_status_name(st),
            clcrt_errmsg(rt), rt->chunk_cycles, rt->long_cycles, rt->preempt_waves, rt->cache_max_bytes, rt->warmup);
  clcrt_runtime_destroy(rt);
  return ok;
}

START_TEST(test_tunables_options) {
  const unsigned C = CLCRT__CHUNK_CYCLES_DEFAULT, L = CLCRT__LONG_CYCLES_DEFAULT, W = CLCRT__PREEMPT_WAVES_DEFAULT;
  const unsigned long long B = CLCRT__CACHE_MAX_BYTES_DEFAULT;
  clcrt_runtime_opts zero = CLCRT_RUNTIME_OPTS_INIT, set = CLCRT_RUNTIME_OPTS_INIT, off = CLCRT_RUNTIME_OPTS_INIT,
                     junk = CLCRT_RUNTIME_OPTS_INIT;
  set.steal_chunk_cycles = 1234, set.steal_long_cycles = 5678, set.preempt_waves = 5, set.cache_max_bytes = 12345;
  set.warmup = -1;
  off.steal_long_cycles = CLCRT_OPT_OFF, off.cache_max_bytes = CLCRT_OPT_OFF, off.warmup = 1;
  /* Beyond an older caller's size: never read. */
  junk.steal_chunk_cycles = 0xdeadbeefu, junk.steal_long_cycles = 7, junk.preempt_waves = 999, junk.warmup = -5;
  clcrt_runtime_opts big = set, big2 = set, big3 = set;
  big.steal_chunk_cycles = CLCRT__CHUNK_CYCLES_MAX + 1;
  big2.steal_long_cycles = CLCRT__LONG_CYCLES_MAX + 1;
  big3.preempt_waves = CLCRT__PREEMPT_WAVES_MAX + 1;
  const tun_case cases[] = {
      {{NULL}, zero, 0, CLCRT_OK, C, L, W, B, 1, {NULL}},                           /* defaults */
      {{NULL}, set, 0, CLCRT_OK, 1234, 5678, 5, 12345, 0, {NULL}},                  /* the options */
      {{NULL}, off, 0, CLCRT_OK, C, 0, W, 0, 1, {NULL}},                            /* switched off, warm-up on */
      {{"777", "0", "3", "2K", "1"}, set, 0, CLCRT_OK, 777, 0, 3, 2048, 1, {NULL}}, /* the environment overrides */
      {{"x", "-1", "65", "1Q", ""}, set, 0, CLCRT_OK, 1234, 5678, 5, 12345, 0, /* invalid or empty: the options */
       {"STEAL_CHUNK_CYCLES=\"x\" is not a count from 1 to 10000000: using 1234",
        "LONG_CYCLES=\"-1\" is not a count from 0 to 100000000: using 5678", "WAVES=\"65\" is not a count from 1 to 64: using 5",
        "the cap is 12345 bytes"}},
      {{"x", NULL, "65", NULL, NULL}, zero, 0, CLCRT_OK, C, L, W, B, 1, {"using 8000", "using 2"}}, /* the defaults */
      {{"777", NULL, NULL, NULL, "0"}, zero, 0, CLCRT_OK, 777, L, W, B, 0, {NULL}},   /* over the defaults */
      {{NULL}, junk, offsetof(clcrt_runtime_opts, steal_chunk_cycles), CLCRT_OK, C, L, W, B, 1, {NULL}},
      {{NULL}, big, 0, CLCRT_E_INVALID, 0, 0, 0, 0, 0, {NULL}},
      {{NULL}, big2, 0, CLCRT_E_INVALID, 0, 0, 0, 0, 0, {NULL}},
      {{NULL}, big3, 0, CLCRT_E_INVALID, 0, 0, 0, 0, 0, {NULL}},
      {{"5"}, big, 0, CLCRT_E_INVALID, 0, 0, 0, 0, 0, {NULL}}, /* a bad option is refused even where the environment wins */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pid_t pid = fork();
    if (pid == 0) _exit(tun_run(&cases[i]) ? 0 : 1);
    int ws;
    waitpid(pid, &ws, 0);
    ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "tunables case %zu", i);
  }
}
END_TEST

START_TEST(test_status_table) {
  static const clcrt_status all[] = {
#define X(name, msg) CLCRT_##name,
      CLCRT_STATUS_MAP(X)
#undef X
  };
  const int n = (int)(sizeof all / sizeof *all);
  ck_assert_int_eq(n, CLCRT_STATUS_COUNT_);
  ck_assert_int_eq(CLCRT_OK, 0);
  ck_assert_str_eq(clcrt_status_name(CLCRT_OK), "CLCRT_OK");
  ck_assert_str_eq(clcrt_status_name(CLCRT_E_COMPILE), "CLCRT_E_COMPILE");
  for (int i = 0; i < n; i++) {
    ck_assert_int_eq(all[i], i);
    const char *name = clcrt_status_name(all[i]), *str = clcrt_status_str(all[i]);
    ck_assert_ptr_nonnull(name);
    ck_assert_ptr_nonnull(str);
    ck_assert_msg(strncmp(name, "CLCRT_", 6) == 0 && strlen(name) > 6, "status %d: name \"%s\"", i, name);
    ck_assert_msg(strlen(str) > 3, "status %d: message \"%s\"", i, str);
    ck_assert_str_ne(name, "CLCRT_E_UNKNOWN");
    for (int j = 0; j < i; j++) {
      ck_assert_str_ne(name, clcrt_status_name(all[j]));
      ck_assert_str_ne(str, clcrt_status_str(all[j]));
    }
  }
  static const int unknown[] = {CLCRT_STATUS_COUNT_, -1, 1000, 0x7fffffff};
  for (int i = 0; i < 4; i++) {
    ck_assert_str_eq(clcrt_status_name((clcrt_status)unknown[i]), "CLCRT_E_UNKNOWN");
    ck_assert_str_eq(clcrt_status_str((clcrt_status)unknown[i]), "unknown status code");
  }
}
END_TEST

START_TEST(test_compile_only_refuses_streams) {
  clcrt_runtime *rt = rt_new("sm_100a");
  clcrt_stream *s = (clcrt_stream *)&s;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_E_UNSUPPORTED);
  ck_assert_ptr_null(s);
  ck_assert_msg(strstr(clcrt_errmsg(rt), "only compiles") && strstr(clcrt_errmsg(rt), "sm_100a"), "%s",
                clcrt_errmsg(rt));
  ck_assert_int_eq(clcrt_stream_create(NULL, NULL, &s), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, NULL), CLCRT_E_INVALID);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Preemption calls without a stream (a compile-only runtime has none): refused, explained in
 * clcrt_errmsg(NULL), never a crash. */
START_TEST(test_preempt_bad_input) {
  ck_assert_int_eq(clcrt_preempt_begin(NULL), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(NULL), "clcrt_preempt_begin: the stream is NULL"), "%s", clcrt_errmsg(NULL));
  ck_assert_int_eq(clcrt_preempt_end(NULL), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(NULL), "clcrt_preempt_end: the stream is NULL"), "%s", clcrt_errmsg(NULL));
  ck_assert_int_eq(clcrt_stream_priority(NULL), -1);
  clcrt_runtime *rt = rt_new("sm_90a");
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_E_UNSUPPORTED);
  ck_assert_ptr_null(s);
  ck_assert_int_eq(clcrt_preempt_begin(s), CLCRT_E_INVALID);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* NVRTC's -minimal (runtime/compile/compile.c) must never change what compiles: sources that use
 * what it omits (texture objects, the runtime's types and constants) are compiled without it,
 * one that reaches them in a way the check cannot see is compiled again without it, and an
 * error is reported as it would be without it. */
START_TEST(test_minimal_fallback) {
  clcrt_runtime *rt = rt_new("sm_90a");
  static const char *const srcs[] = {
      /* named: the check leaves -minimal out */
      "struct PickArgs { cudaTextureObject_t t; float *y; };\n"
      "__device__ void pick_tile(const clcrt::Tile &t, const PickArgs &a) {\n"
      "  a.y[t.linear] = tex1Dfetch<float>(a.t, (int)t.linear);\n"
      "}\n",
      "struct PickArgs { int *y; };\n"
      "__device__ void pick_tile(const clcrt::Tile &t, const PickArgs &a) {\n"
      "  cudaError_t e = cudaErrorNotReady; a.y[t.linear] = (int)e + cudaStreamNonBlocking;\n"
      "}\n",
      /* pasted together by the preprocessor: only the second compile (without -minimal) works */
      "#define PASTE(a, b) a##b\n"
      "struct PickArgs { int *y; };\n"
      "__device__ void pick_tile(const clcrt::Tile &t, const PickArgs &a) {\n"
      "  PASTE(cu, daError_t) e = PASTE(cu, daErrorNotReady); a.y[t.linear] = (int)e;\n"
      "}\n",
      /* clcrt's own headers may be included */
      "#include \"clcrt_tilemap.cuh\"\n"
      "struct PickArgs { int *y; };\n"
      "__device__ void pick_tile(const clcrt::Tile &t, const PickArgs &a) { a.y[t.linear] = 1; }\n",
  };
  for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
    clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
    d.source = srcs[i];
    d.tile_fn = "pick_tile";
    d.args_type = "PickArgs";
    d.block = (clcrt_dim3){128, 1, 1};
    clcrt_kernel *k = NULL;
    clcrt_status st = clcrt_register(rt, &d, &k);
    ck_assert_msg(st == CLCRT_OK, "source %zu: %s", i, clcrt_errmsg(rt));
  }
  /* An error in a source that -minimal would compile: the log of the compile without it. */
  clcrt_tile_desc d = scale_desc();
  d.source =
      "struct ScaleArgs { float *x; long n; float alpha; };\n"
      "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
      "  if (t.linear < a.n) a.x[t.linear] *= gamma_;\n"
      "}\n";
  EXPECT_FAIL(rt, &d, CLCRT_E_COMPILE, "scale_tile(3)", "gamma_");
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Not an assertion: the cold compile time of the README example, for the log. */
START_TEST(test_cold_compile_time) {
  static const char *const archs[] = {"sm_90a", "sm_100a"};
  for (int a = 0; a < 2; a++) {
    clcrt_runtime *rt = rt_new(archs[a]);
    clcrt_tile_desc d = scale_desc();
    clcrt_kernel *k = NULL;
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    clcrt_status st = clcrt_register(rt, &d, &k);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    ck_assert_msg(st == CLCRT_OK, "%s", clcrt_errmsg(rt));
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
    const void *cubin;
    size_t size;
    ck_assert_int_eq(clcrt_kernel_cubin(k, &cubin, &size), CLCRT_OK);
    double wall = (double)(w1.tv_sec - w0.tv_sec) * 1e3 + (double)(w1.tv_nsec - w0.tv_nsec) / 1e6;
    printf("cold compile of the README example for %s (%s, %u threads): NVRTC %.1f ms, clcrt_register %.1f ms; "
           "%d registers, %zu-byte cubin\n",
           archs[a], info.name, info.block.x, info.compile_ms, wall, info.registers, size);
    fflush(stdout);
    clcrt_runtime_destroy(rt);
  }
}
END_TEST

/* ---- the public header, as other languages read it ---- */

/* A program that includes only clcrt.h and fills every option struct from its ..._INIT macro:
 * size set, every other field zero or its documented default. Compiled by the test as C11
 * (pedantic), C++20 and GNU C++17 with every warning an error, then run. */
static const char *const HEADER_PROG =
    "#include <clcrt.h>\n"
    "#include <string.h>\n"
    "#define ZERO_AFTER_SIZE(v) zero_after((const unsigned char *)&(v), sizeof(v))\n"
    "static int zero_after(const unsigned char *p, size_t n) {\n"
    "  for (size_t i = sizeof(size_t); i < n; i++) if (p[i]) return 0;\n"
    "  return 1;\n"
    "}\n"
    "int main(void) {\n"
    "  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;\n"
    "  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;\n"
    "  clcrt_kernel_info ki = CLCRT_KERNEL_INFO_INIT;\n"
    "  clcrt_stream_stats ss = CLCRT_STREAM_STATS_INIT;\n"
    "  static clcrt_trace_summary ts = CLCRT_TRACE_SUMMARY_INIT;\n"
    "  clcrt_cache_stats cs = CLCRT_CACHE_STATS_INIT;\n"
    "  clcrt_stream_opts so = CLCRT_STREAM_OPTS_INIT;\n"
    "  int bad = 0;\n"
    "  bad |= o.size != sizeof o || d.size != sizeof d || ki.size != sizeof ki || ss.size != sizeof ss;\n"
    "  bad |= ts.size != sizeof ts || cs.size != sizeof cs || so.size != sizeof so;\n"
    "  bad |= d.sched != CLCRT_SCHED_AUTO || d.grid != CLCRT_GRID_AUTO;\n"
    "  bad |= !ZERO_AFTER_SIZE(o) || !ZERO_AFTER_SIZE(d) || !ZERO_AFTER_SIZE(ki) || !ZERO_AFTER_SIZE(ss);\n"
    "  bad |= !ZERO_AFTER_SIZE(ts) || !ZERO_AFTER_SIZE(cs) || !ZERO_AFTER_SIZE(so);\n"
    "  return bad;\n"
    "}\n";

/* The repository's include/ directory, from this file's path. */
static int include_dir(char *out, size_t n) {
  const char *f = __FILE__;
  const char *slash = strrchr(f, '/');
  if (!slash) return snprintf(out, n, "../include") < (int)n;
  return snprintf(out, n, "%.*s/../include", (int)(slash - f), f) < (int)n;
}

static int compile_and_run(const char *compiler, const char *lang, const char *flags, const char *inc,
                           const char *dir) {
  char src[512], exe[512], cmd[2048];
  snprintf(src, sizeof src, "%s/prog.%s", dir, lang);
  snprintf(exe, sizeof exe, "%s/prog_%s", dir, lang);
  FILE *f = fopen(src, "w");
  ck_assert_ptr_nonnull(f);
  fputs(HEADER_PROG, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s %s -Wall -Wextra -Werror -I%s %s -o %s 2>&1 && %s", compiler, flags, inc, src, exe,
           exe);
  int rc = system(cmd);
  if (rc != 0) fprintf(stderr, "test_core: header as %s (%s): `%s` exited with %d\n", lang, flags, cmd, rc);
  return rc;
}

START_TEST(test_header_languages) {
  char inc[512], hdr[600], dir[] = "/tmp/clcrt_hdr_XXXXXX";
  ck_assert(include_dir(inc, sizeof inc));
  snprintf(hdr, sizeof hdr, "%s/clcrt.h", inc);
  if (access(hdr, R_OK) != 0) {
    printf("test_core: SKIP header languages: %s not found from the working directory\n", hdr);
    return;
  }
  /* Every ..._INIT macro names its fields (a positional one would shift every value when a
   * field is inserted): its body starts with {.size = sizeof(. */
  FILE *h = fopen(hdr, "r");
  ck_assert_ptr_nonnull(h);
  char line[512], body[4096];
  int macros = 0;
  while (fgets(line, sizeof line, h)) {
    char name[128];
    if (sscanf(line, "#define %127s", name) != 1 || strncmp(name, "CLCRT_", 6) != 0) continue;
    size_t nl = strlen(name);
    if (nl < 5 || strcmp(name + nl - 5, "_INIT") != 0) continue;
    body[0] = 0;
    strncat(body, line + strlen("#define ") + nl, sizeof body - 1);
    while (strstr(line, "\\\n") && fgets(line, sizeof line, h)) strncat(body, line, sizeof body - strlen(body) - 1);
    const char *b = body + strspn(body, " \t\\\n");
    ck_assert_msg(strncmp(b, "{.size = sizeof(", 16) == 0, "%s is not a designated initializer: %s", name, b);
    macros++;
  }
  fclose(h);
  ck_assert_int_ge(macros, 7);
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ck_assert_int_eq(compile_and_run("cc", "c", "-std=c11 -pedantic", inc, dir), 0);
  int cxx = system("command -v c++ >/dev/null 2>&1") == 0;
  if (!cxx) {
    printf("test_core: SKIP header as C++: no c++ on the PATH\n");
  } else {
    ck_assert_int_eq(compile_and_run("c++ -x c++", "cc", "-std=c++20 -pedantic", inc, dir), 0);
    ck_assert_int_eq(compile_and_run("c++ -x c++", "cc", "-std=gnu++17", inc, dir), 0);
  }
  /* The driver table's part (clcrt_driver, clcrt_runtime_driver, clcrt_runtime_context): there
   * once <cuda.h> is in, whether it comes before or after clcrt.h. */
  const char *cuda = getenv("CUDA_HOME");
  static const char *const orders[2] = {"#include <cuda.h>\n#include <clcrt.h>\n",
                                        "#include <clcrt.h>\n#include <cuda.h>\n#include <clcrt.h>\n"};
  for (int i = 0; i < 2; i++) {
    char src[600], cmd[2048];
    snprintf(src, sizeof src, "%s/driver%d.c", dir, i);
    FILE *f = fopen(src, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%sconst clcrt_driver *get(const clcrt_runtime *rt);\n"
               "const clcrt_driver *get(const clcrt_runtime *rt) {\n"
               "  CUcontext c = clcrt_runtime_context(rt);\n"
               "  return c ? clcrt_runtime_driver(rt) : 0;\n}\n",
            orders[i]);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I%s -I%s/include %s", inc,
             cuda && *cuda ? cuda : "/usr/local/cuda", src);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    if (cxx) {
      snprintf(cmd, sizeof cmd, "c++ -x c++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I%s -I%s/include %s", inc,
               cuda && *cuda ? cuda : "/usr/local/cuda", src);
      ck_assert_msg(system(cmd) == 0, "%s", cmd);
    }
  }
  char rm[600];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  ck_assert_int_eq(system(rm), 0);
}
END_TEST

/* The examples build against the public headers alone, as a user's program does: nothing of
 * runtime/ or ops/ on the include path (only <cuda.h>). The benchmarks too, but for the GEMM
 * oracle's view of the op's internals (ops/: its variants and plan). */
START_TEST(test_programs_use_public_header) {
  char inc[512], cmd[4096];
  ck_assert(include_dir(inc, sizeof inc));
  const char *cuda = getenv("CUDA_HOME");
  snprintf(cmd, sizeof cmd,
           "n=0; for f in %s/../examples/*.c %s/../examples/*/*.c; do "
           "cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fsyntax-only -I%s -I%s/include \"$f\" || exit 1; "
           "n=$((n+1)); done; for f in %s/../bench/*.c %s/../bench/lib/*.c; do "
           "cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fsyntax-only -I%s -I%s/../ops -I%s/include \"$f\" || exit 1; "
           "n=$((n+1)); done; test $n -ge 10",
           inc, inc, inc, cuda && *cuda ? cuda : "/usr/local/cuda", inc, inc, inc, inc,
           cuda && *cuda ? cuda : "/usr/local/cuda");
  ck_assert_msg(system(cmd) == 0, "%s", cmd);
}
END_TEST

static Suite *core_suite(void) {
  Suite *s = suite_create("core");
  TCase *tc = tcase_create("matrix");
  tcase_add_loop_test(tc, test_matrix, 0, MATRIX_SM100 + MATRIX_SM90);
  tcase_add_test(tc, test_steal_full_grid_options);
  tcase_add_test(tc, test_param_bytes_compile_only);
  tcase_add_test(tc, test_namespaced_names);
  tcase_add_test(tc, test_desc_older_size);
  tcase_add_test(tc, test_observed_variant);
  tcase_add_test(tc, test_variants);
  tcase_add_test(tc, test_info_small_struct);
  tcase_add_test(tc, test_abi_offsets);
  tcase_add_test(tc, test_embedded_headers);
  suite_add_tcase(s, tc);

  tc = tcase_create("bad_input");
  tcase_add_test(tc, test_bad_handles);
  tcase_add_test(tc, test_bad_desc_size);
  tcase_add_test(tc, test_bad_source);
  tcase_add_test(tc, test_syntax_error_line);
  tcase_add_test(tc, test_bad_names);
  tcase_add_test(tc, test_names_made_by_macros);
  tcase_add_test(tc, test_names_the_entry_uses);
  tcase_add_test(tc, test_long_names_and_paths);
  tcase_add_test(tc, test_args_over_parameter_limit);
  tcase_add_test(tc, test_invalid_arguments_have_messages);
  tcase_add_test(tc, test_bad_cuda_home);
  tcase_add_test(tc, test_wrong_signature);
  tcase_add_test(tc, test_bad_block);
  tcase_add_test(tc, test_bad_cluster);
  tcase_add_test(tc, test_clc_on_sm90);
  tcase_add_test(tc, test_bad_target_arch);
  tcase_add_test(tc, test_good_target_arch);
  tcase_add_test(tc, test_bad_state);
  tcase_add_test(tc, test_bad_options);
  tcase_add_test(tc, test_bad_smem);
  tcase_add_test(tc, test_compile_only_smem_total);
  tcase_add_test(tc, test_bad_sched_grid);
  tcase_add_test(tc, test_failure_then_success);
  tcase_add_test(tc, test_minimal_fallback);
  suite_add_tcase(s, tc);

  tc = tcase_create("runtime");
  tcase_add_test(tc, test_no_driver);
  tcase_add_test(tc, test_no_driver_real);
  tcase_add_test(tc, test_stub_driver);
  tcase_add_test(tc, test_status_table);
  tcase_add_test(tc, test_preempt_waves_parse);
  tcase_add_test(tc, test_long_cycles_env);
  tcase_add_test(tc, test_tunables_options);
  tcase_add_test(tc, test_compile_only_refuses_streams);
  tcase_add_test(tc, test_preempt_bad_input);
  tcase_add_test(tc, test_header_languages);
  tcase_add_test(tc, test_programs_use_public_header);
  tcase_add_test(tc, test_cold_compile_time);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  /* test_stub_driver's child: a default runtime, its status and message on stdout. */
  if (argc > 1 && !strcmp(argv[1], "--create-default-runtime")) {
    clcrt_runtime *rt = NULL;
    clcrt_status st = clcrt_runtime_create(&rt, NULL);
    printf("%s: %s\n", clcrt_status_name(st), clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
    return 0;
  }
  SRunner *sr = srunner_create(core_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
