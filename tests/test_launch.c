/* The run plan (runtime/launch/plan.c) as a table: for every scheduler, cluster shape (1, 2 and 4
 * CTAs, 2 x 2), grid kind and state of the stream (plain, traced, statistics, captured,
 * preemptible, short, long units, each variant built or not), the variant, grid, claim base,
 * flags and shared memory the plan gives; and, over the whole cross product, what every plan
 * must satisfy (every unit has a cluster, the launched variant is built, a captured run that
 * claims has graph code, ...).
 *
 * clcrt_run's launch logic on a machine without a GPU: a fake driver table stands in for the
 * driver (an H100-like device of 132 SMs, host memory for device memory) and records every
 * cuLaunchKernelEx. The kernels are real: compiled by NVRTC for sm_90a and read from their
 * cubins; only loading and launching are pretended. Checked, from the launch configuration
 * and the scheduler parameters each run hands the driver: the grid of each scheduler (STEAL's
 * persistent grid of min(units, resident clusters), FIXED's 3-D grid and its 1-D fallback),
 * which variant a run launches (the registered kernel, the short one for runs that claim
 * nothing, the graph one for claiming runs under capture) and with what shared memory, the
 * claim parameters (claim base, fast divisions, guided bound), the stream's sequence numbers,
 * the current context, and every error path of clcrt_run (a bad argument, an invalidated
 * capture, a failed launch: an error and a message, no launch). Last, the host cost of
 * clcrt_run's own code with launches that cost nothing (printed, not asserted). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "clcrt.h"
#include "driver.h"
#include "common/fake_driver.h"
#include "env.h"
#include "internal.h"
#include "builder.h"
#include "plan.h"
#include "sched_state.h"
#include "stream.h"
#include "variants.h"

/* ---- the fake driver ---- */

enum { FAKE_BLOCKS_PER_SM = 8 };

static clcrt__driver g_fake;
static int g_set_current;             /* cuCtxSetCurrent calls */
static size_t g_args_size = 16;       /* the Args parameter's size cuFuncGetParamInfo reports */
static CUstreamCaptureStatus g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
static CUresult g_launch_result = CUDA_SUCCESS;
static int g_launches;
static CUcontext g_launch_ctx; /* the context current at the last launch */
static int g_pdl = -1; /* the last launch's programmatic-serialization attribute; -1: none */
static CUlaunchConfig g_cfg;           /* the last launch's */
static CUfunction g_fn;
static clcrt__params g_p;
static unsigned char g_args[64];
static int g_libs;

static CUresult CUDAAPI f_version(int *v) { *v = CUDA_VERSION; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_error_name(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES ? "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_error_string(CUresult r, const char **s) { return f_error_name(r, s); }
static CUresult CUDAAPI f_set_current(CUcontext c) { fake_current = c, g_set_current++; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_lib_load(CUlibrary *l, const void *code, CUjit_option *jo, void **jv, unsigned nj,
                                   CUlibraryOption *lo, void **lv, unsigned nl) {
  (void)code, (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
  *l = (CUlibrary)(uintptr_t)(0x10000 + 0x100 * ++g_libs);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_param_info(CUfunction f, size_t i, size_t *off, size_t *size) {
  (void)f;
  *off = i == 0 ? 0 : (g_args_size + 7) & ~(size_t)7;
  *size = i == 0 ? g_args_size : sizeof(clcrt__params);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_occ_blocks(int *n, CUfunction f, int threads, size_t smem) {
  (void)f, (void)smem;
  *n = 2048 / threads < FAKE_BLOCKS_PER_SM ? 2048 / threads : FAKE_BLOCKS_PER_SM;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_occ_clusters(int *n, CUfunction f, const CUlaunchConfig *c) {
  (void)f;
  unsigned cs = c->gridDimY * c->gridDimZ * (c->gridDimX / FAKE_SMS), threads = c->blockDimX * c->blockDimY * c->blockDimZ;
  unsigned per_sm = 2048 / threads < FAKE_BLOCKS_PER_SM ? 2048 / threads : FAKE_BLOCKS_PER_SM;
  *n = (int)(FAKE_SMS * per_sm / cs);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_launch(const CUlaunchConfig *c, CUfunction f, void **kp, void **extra) {
  (void)extra;
  if (g_launch_result != CUDA_SUCCESS) return g_launch_result;
  g_cfg = *c, g_fn = f;
  g_pdl = -1; /* the attributes live only during the call: what they asked for is kept here */
  for (unsigned i = 0; i < c->numAttrs; i++)
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
      g_pdl = (int)c->attrs[i].value.programmaticStreamSerializationAllowed;
  memcpy(g_args, kp[0], g_args_size);
  memcpy(&g_p, kp[1], sizeof g_p);
  g_launch_ctx = fake_current;
  g_launches++;
  return CUDA_SUCCESS;
}
static int g_streams;
static CUresult CUDAAPI f_stream_create(CUstream *s, unsigned flags) {
  (void)flags;
  *s = (CUstream)(uintptr_t)(0x20000 + 0x10 * ++g_streams);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_stream_create_prio(CUstream *s, unsigned flags, int prio) {
  (void)prio;
  return f_stream_create(s, flags);
}
static CUresult CUDAAPI f_stream_destroy(CUstream s) { (void)s; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_is_capturing(CUstream s, CUstreamCaptureStatus *st) {
  (void)s;
  *st = g_capture;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_stream_prio(CUstream s, int *p) {
  *p = s == (CUstream)0x77 ? -1 : 0; /* one stream of a higher priority (tests: HI_STREAM) */
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_capture_info(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                       const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *n) {
  (void)s, (void)edges;
  *st = g_capture;
  if (id) *id = 1;
  if (g) *g = NULL;
  if (deps) *deps = NULL;
  if (n) *n = 0;
  return CUDA_SUCCESS;
}
/* Mapped host memory: the device address is the host's (as with unified addressing). */
static int g_host_allocs;
static CUresult CUDAAPI f_host_alloc(void **p, size_t n, unsigned flags) {
  (void)flags;
  if (!(*p = malloc(n))) return CUDA_ERROR_OUT_OF_MEMORY;
  g_host_allocs++;
  return CUDA_SUCCESS;
}

static void use_fake_driver(void) {
  fake_driver_base(&g_fake);
  g_fake.cuDriverGetVersion = f_version;
  g_fake.cuGetErrorName = f_error_name;
  g_fake.cuGetErrorString = f_error_string;
  g_fake.cuCtxSetCurrent = f_set_current;
  g_fake.cuLibraryLoadData = f_lib_load;
  g_fake.cuFuncGetParamInfo = f_param_info;
  g_fake.cuOccupancyMaxActiveBlocksPerMultiprocessor = f_occ_blocks;
  g_fake.cuOccupancyMaxActiveClusters = f_occ_clusters;
  g_fake.cuLaunchKernelEx = f_launch;
  g_fake.cuStreamCreate = f_stream_create;
  g_fake.cuStreamCreateWithPriority = f_stream_create_prio;
  g_fake.cuStreamDestroy = f_stream_destroy;
  g_fake.cuStreamGetPriority = f_stream_prio;
  g_fake.cuStreamGetCaptureInfo = f_capture_info;
  g_fake.cuStreamIsCapturing = f_is_capturing;
  g_fake.cuMemHostAlloc = f_host_alloc;
  clcrt__driver_override(&g_fake);
}

/* ---- the kernels: registered once, before the tests fork ---- */

static const char *const SRC =
    "struct A { unsigned *hits; unsigned long long n; };\n"
    "__device__ void mark(const clcrt::Tile &t, const A &a) {\n"
    "  if (threadIdx.x == 0 && t.linear < a.n) atomicAdd(&a.hits[t.linear], 1u);\n"
    "}\n";
typedef struct {
  void *hits;
  unsigned long long n;
} A;

static clcrt_runtime *g_rt;
static clcrt_stream *g_s;
static clcrt_kernel *g_steal, *g_steal2, *g_fixed, *g_fixed2, *g_static;
static A g_a = {(void *)0x5000, 1000};

static const char *const SRC_PROLOGUE =
    "struct A { unsigned *hits; unsigned long long n; };\n"
    "struct S { unsigned base; };\n"
    "__device__ void pro(const A &a, S &s) { s.base = 0; }\n"
    "__device__ void mark(const clcrt::Tile &t, const A &a, S &s) {\n"
    "  if (threadIdx.x == 0 && t.linear < a.n) atomicAdd(&a.hits[t.linear + s.base], 1u);\n"
    "}\n";
static clcrt_kernel *g_prologue, *g_persist;

static clcrt_kernel *reg_desc(clcrt_sched sched, unsigned cluster, int prologue, clcrt_grid grid) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = prologue ? SRC_PROLOGUE : SRC;
  if (prologue) d.state_type = "S", d.prologue_fn = "pro";
  d.grid = grid;
  d.tile_fn = "mark";
  d.args_type = "A";
  d.block = (clcrt_dim3){256, 1, 1};
  d.cluster = (clcrt_dim3){cluster, 1, 1};
  d.sched = sched;
  clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_register(g_rt, &d, &k);
  if (st != CLCRT_OK) {
    fprintf(stderr, "test_launch: registering failed: %s\n", clcrt_errmsg(g_rt));
    exit(1);
  }
  return k;
}
static clcrt_kernel *reg(clcrt_sched sched, unsigned cluster) {
  return reg_desc(sched, cluster, 0, CLCRT_GRID_AUTO);
}

static void setup_once(void) {
  setenv("CLCRT_WARMUP", "0", 1);
  use_fake_driver();
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = "";
  if (clcrt_runtime_create(&g_rt, &o) != CLCRT_OK) {
    fprintf(stderr, "test_launch: runtime on the fake driver: %s\n", clcrt_errmsg(g_rt));
    exit(1);
  }
  g_steal = reg(CLCRT_SCHED_STEAL, 1);
  g_steal2 = reg(CLCRT_SCHED_STEAL, 2);
  g_fixed = reg(CLCRT_SCHED_FIXED, 1);
  g_fixed2 = reg(CLCRT_SCHED_FIXED, 2);
  g_static = reg(CLCRT_SCHED_STATIC, 1);
  g_prologue = reg_desc(CLCRT_SCHED_STEAL, 1, 1, CLCRT_GRID_AUTO);
  g_persist = reg_desc(CLCRT_SCHED_STEAL, 1, 0, CLCRT_GRID_PERSISTENT);
  /* The short and graph variants, compiled once here rather than in every forked test. */
  if (clcrt_kernel_prepare(g_steal, CLCRT_USE_SHORT | CLCRT_USE_GRAPH) != CLCRT_OK ||
      clcrt_kernel_prepare(g_steal2, CLCRT_USE_SHORT) != CLCRT_OK) {
    fprintf(stderr, "test_launch: variants: %s\n", clcrt_errmsg(g_rt));
    exit(1);
  }
}

/* The stream is made in each test's own process: the first stream starts the runtime's build
 * thread, which a forked child would not have (and LeakSanitizer would count there). */
static void setup(void) {
  fake_current = FAKE_CTX;
  ck_assert_msg(clcrt_stream_create(g_rt, NULL, &g_s) == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
  g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
  g_launch_result = CUDA_SUCCESS;
  g_launches = 0;
  fake_current = FAKE_CTX;
  g_set_current = 0;
  memset(&g_cfg, 0, sizeof g_cfg);
  memset(&g_p, 0, sizeof g_p);
}

static void teardown(void) {
  clcrt_stream_destroy(g_s);
  g_s = NULL;
}

static clcrt_status run(const clcrt_kernel *k, unsigned x, unsigned y, unsigned z) {
  return clcrt_run(g_s, k, (clcrt_dim3){x, y, z}, &g_a, sizeof g_a);
}

static CUfunction variant_fn(const clcrt_kernel *k, unsigned uses) {
  const clcrt_kernel *v = NULL;
  ck_assert_int_eq(clcrt_kernel_variant(k, uses, &v), CLCRT_OK);
  return v->fn;
}

/* umulhi(n, mul) >> shr, as the device divides. */
static unsigned fastdiv(unsigned n, unsigned mul, unsigned shr) {
  return mul == 0 ? n : (unsigned)(((unsigned long long)n * mul) >> 32) >> shr;
}

/* ---- the plan (plan.c), as a table: no driver, no runtime ---- */

/* Synthetic registered kernels: a scheduler, a grid kind and a cluster shape each. */
enum { PK_STEAL, PK_STEAL_FULL, PK_STEAL_PERSIST, PK_STEAL2, PK_STEAL4, PK_STEAL2X2, PK_STATIC, PK_FIXED, PK_FIXED2,
       PK_CLC, PK_COUNT };
static clcrt_kernel g_pk[PK_COUNT];
static clcrt__occ g_pocc[PK_COUNT][CLCRT__VARIANTS];
enum { PSMEM = 1000, PRING = 136 }; /* the tile function's shared memory, and the ring after it */

/* Occupancy of each variant of a 1-CTA kernel (a 2- or 4-CTA cluster fits half or a quarter):
 * the registered kernel 1000 clusters, the short one (fewer registers) more, every other variant
 * fewer, all different so that the table shows whose occupancy sized the grid. */
static int occ_1cta(unsigned v) {
  static const int t[CLCRT__VARIANTS] = {1000, 900, 800, 700, 600, 500, 400, 300, 1200, 1100, 0, 0, 0, 0, 0, 0};
  return t[v];
}
static void plan_kernel(int i, clcrt_sched s, clcrt_grid g, unsigned cx, unsigned cy, unsigned cz) {
  clcrt_kernel *k = &g_pk[i];
  memset(k, 0, sizeof *k);
  k->sched = s, k->grid = g;
  k->cluster = (clcrt_dim3){cx, cy, cz};
  k->cluster_size = cx * cy * cz;
  k->block = (clcrt_dim3){256, 1, 1};
  k->smem_bytes = PSMEM;
  k->ring_bytes = s == CLCRT_SCHED_STEAL || s == CLCRT_SCHED_CLC ? PRING : 0;
  for (unsigned v = 0; v < CLCRT__VARIANTS; v++) {
    g_pocc[i][v].clusters = occ_1cta(v) / (int)k->cluster_size;
    g_pocc[i][v].blocks_per_sm = (occ_1cta(v) + 131) / 132;
    clcrt__fastdiv(2u * (unsigned)g_pocc[i][v].clusters, &g_pocc[i][v].guide_mul, &g_pocc[i][v].guide_shr);
  }
}
static void plan_kernels(void) {
  plan_kernel(PK_STEAL, CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO, 1, 1, 1);
  plan_kernel(PK_STEAL_FULL, CLCRT_SCHED_STEAL, CLCRT_GRID_FULL, 1, 1, 1);
  plan_kernel(PK_STEAL_PERSIST, CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, 1, 1, 1);
  plan_kernel(PK_STEAL2, CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO, 2, 1, 1);
  plan_kernel(PK_STEAL4, CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO, 4, 1, 1);
  plan_kernel(PK_STEAL2X2, CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO, 2, 2, 1);
  plan_kernel(PK_STATIC, CLCRT_SCHED_STATIC, CLCRT_GRID_PERSISTENT, 1, 1, 1);
  plan_kernel(PK_FIXED, CLCRT_SCHED_FIXED, CLCRT_GRID_FULL, 1, 1, 1);
  plan_kernel(PK_FIXED2, CLCRT_SCHED_FIXED, CLCRT_GRID_FULL, 2, 1, 1);
  plan_kernel(PK_CLC, CLCRT_SCHED_CLC, CLCRT_GRID_FULL, 1, 1, 1);
}

/* The state of a run: what the stream and the device are doing. */
enum { T = 1, S = 2, G = 4, P = 8, L = 16, R = 32 }; /* traced, statistics, captured, preemptible, long, recheck */
#define ALL 0xffffu
#define NOT(v) (ALL & ~(1u << (v)))
/* The variant bits, short for the table: O(bserved), GR(aph), Y(ielding), ONE unit per cluster. */
enum { O = CLCRT_USE_TRACE, GR = CLCRT_USE_GRAPH, Y = CLCRT_USE_PREEMPT, ONE = CLCRT_USE_SHORT };
enum { F3 = CLCRT__PF_GRID3, FG = CLCRT__PF_GRAPH };

typedef struct {
  int line, kernel;
  unsigned tx, ty, tz, state, ready;
  /* expected */
  unsigned variant, gx, gy, gz, clusters, claim_base, ring, flags, missing, count_long, obs_lost;
} plan_row;

#define ROW(...) {__LINE__, __VA_ARGS__}
/* kernel, tiles, state, ready -> variant, grid (CTAs), clusters, claim base, ring, flags, missing, counted long, obs lost */
static const plan_row PLAN_TABLE[] = {
    /* STEAL on an AUTO grid, 1-CTA clusters: persistent, the rest claimed. */
    ROW(PK_STEAL, 5000, 1, 1, 0, ALL, 0, 1000, 1, 1, 1000, 1000, 1, 0, 0, 0, 0),
    ROW(PK_STEAL, 1001, 1, 1, 0, ALL, 0, 1000, 1, 1, 1000, 1000, 1, 0, 0, 0, 0), /* claims: never the short one */
    ROW(PK_STEAL, 1000, 1, 1, 0, ALL, ONE, 1000, 1, 1, 1000, 1000, 0, F3, 0, 0, 0), /* exactly what fits: short */
    ROW(PK_STEAL, 500, 1, 1, 0, ALL, ONE, 500, 1, 1, 500, 500, 0, F3, 0, 0, 0),
    ROW(PK_STEAL, 1, 1, 1, 0, ALL, ONE, 1, 1, 1, 1, 1, 0, F3, 0, 0, 0),
    ROW(PK_STEAL, 100, 30, 7, 0, ALL, 0, 1000, 1, 1, 1000, 1000, 1, 0, 0, 0, 0),       /* 3-D: 21000 units */
    ROW(PK_STEAL, 10, 10, 5, 0, ALL, ONE, 10, 10, 5, 500, 500, 0, F3, 0, 0, 0),         /* 3-D short: its own grid */
    /* traced, statistics: the observed variants (the ring holds a traced run's start times) */
    ROW(PK_STEAL, 5000, 1, 1, T, ALL, O, 900, 1, 1, 900, 900, 1, 0, 0, 0, 0),
    ROW(PK_STEAL, 5000, 1, 1, S, ALL, O, 900, 1, 1, 900, 900, 1, 0, 0, 0, 0),
    ROW(PK_STEAL, 5000, 1, 1, T | S, ALL, O, 900, 1, 1, 900, 900, 1, 0, 0, 0, 0),
    ROW(PK_STEAL, 500, 1, 1, T, ALL, O | ONE, 500, 1, 1, 500, 500, 1, F3, 0, 0, 0),
    ROW(PK_STEAL, 500, 1, 1, S, ALL, O | ONE, 500, 1, 1, 500, 500, 0, F3, 0, 0, 0),
    ROW(PK_STEAL, 950, 1, 1, T, ALL, O, 900, 1, 1, 900, 900, 1, 0, 0, 0, 0), /* claims with the observed variant */
    /* captured: claiming runs claim from the graph table; short ones are only told */
    ROW(PK_STEAL, 5000, 1, 1, G, ALL, GR, 800, 1, 1, 800, 800, 1, FG, 0, 0, 0),
    ROW(PK_STEAL, 500, 1, 1, G, ALL, ONE, 500, 1, 1, 500, 500, 0, F3 | FG, 0, 0, 0),
    ROW(PK_STEAL, 5000, 1, 1, G | T, ALL, O | GR, 700, 1, 1, 700, 700, 1, FG, 0, 0, 0),
    ROW(PK_STEAL, 750, 1, 1, G, ALL, ONE, 750, 1, 1, 750, 750, 0, F3 | FG, 0, 0, 0),
    /* preemptible: a full grid that yields, the resident clusters on their own units, 2 waves of reserve */
    ROW(PK_STEAL, 5000, 1, 1, P, ALL, Y, 1800, 1, 1, 1800, 600, 1, 0, 0, 0, 0),
    ROW(PK_STEAL, 1000, 1, 1, P, ALL, Y, 1000, 1, 1, 1000, 600, 1, 0, 0, 0, 0),
    ROW(PK_STEAL, 500, 1, 1, P, ALL, ONE, 500, 1, 1, 500, 500, 0, F3, 0, 0, 0),
    ROW(PK_STEAL, 5000, 1, 1, P | G, ALL, Y | GR, 1200, 1, 1, 1200, 400, 1, FG, 0, 0, 0),
    ROW(PK_STEAL, 5000, 1, 1, P | T, ALL, O | Y, 1500, 1, 1, 1500, 500, 1, 0, 0, 0, 0),
    ROW(PK_STEAL, 5000, 1, 1, P | G | T, ALL, O | GR | Y, 900, 1, 1, 900, 300, 1, FG, 0, 0, 0),
    /* long units: one cluster per unit (the short variant), every CLCRT__HW_RECHECK-th run persistent */
    ROW(PK_STEAL, 5000, 1, 1, L, ALL, ONE, 5000, 1, 1, 5000, 5000, 0, F3, 0, 1, 0),
    ROW(PK_STEAL, 5000, 1, 1, L | R, ALL, 0, 1000, 1, 1, 1000, 1000, 1, 0, 0, 1, 0),
    ROW(PK_STEAL, 5000, 1, 1, L | G, ALL, ONE, 5000, 1, 1, 5000, 5000, 0, F3 | FG, 0, 1, 0),
    ROW(PK_STEAL, 5000, 1, 1, L | R | G, ALL, GR, 800, 1, 1, 800, 800, 1, FG, 0, 1, 0),
    ROW(PK_STEAL, 5000, 1, 1, L | T, ALL, O | ONE, 5000, 1, 1, 5000, 5000, 1, F3, 0, 1, 0),
    ROW(PK_STEAL, 5000, 1, 1, L | P, ALL, ONE, 5000, 1, 1, 5000, 5000, 0, F3, 0, 1, 0),
    ROW(PK_STEAL, 500, 1, 1, L, ALL, ONE, 500, 1, 1, 500, 500, 0, F3, 0, 0, 0), /* short anyway: not counted */
    ROW(PK_STEAL, 300, 20, 4, L, ALL, ONE, 300, 20, 4, 24000, 24000, 0, F3, 0, 1, 0),
    ROW(PK_STEAL, 3, 66001, 1, L, ALL, ONE, 198003, 1, 1, 198003, 198003, 0, 0, 0, 1, 0), /* y > 65535: 1-D */
    /* Variants not built yet: the run asks for one and launches the fallback, one cluster per unit
     * with no claims, or the variant it needs not. */
    ROW(PK_STEAL, 5000, 1, 1, G, NOT(GR), 0, 5000, 1, 1, 5000, 5000, 0, FG, GR, 0, 0),
    ROW(PK_STEAL, 500, 1, 1, 0, NOT(ONE), 0, 500, 1, 1, 500, 500, 0, 0, ONE, 0, 0),
    ROW(PK_STEAL, 500, 1, 1, G, NOT(ONE), 0, 500, 1, 1, 500, 500, 0, FG, ONE, 0, 0),
    ROW(PK_STEAL, 5000, 1, 1, P, NOT(Y), 0, 5000, 1, 1, 5000, 5000, 0, 0, Y, 0, 0),
    ROW(PK_STEAL, 500, 1, 1, P, NOT(Y), ONE, 500, 1, 1, 500, 500, 0, F3, Y, 0, 0),
    ROW(PK_STEAL, 5000, 1, 1, P | G, NOT(Y | GR), 0, 5000, 1, 1, 5000, 5000, 0, FG, Y | GR, 0, 0),
    ROW(PK_STEAL, 5000, 1, 1, L, NOT(ONE), 0, 5000, 1, 1, 5000, 5000, 0, 0, ONE, 1, 0),
    ROW(PK_STEAL, 5000, 1, 1, T | G, NOT(O | GR), O, 5000, 1, 1, 5000, 5000, 1, FG, O | GR, 0, 0),
    ROW(PK_STEAL, 5000, 1, 1, T | P, NOT(O | Y) & NOT(O | ONE), O, 5000, 1, 1, 5000, 5000, 1, 0, O | Y, 0, 0),
    ROW(PK_STEAL, 500, 1, 1, T, NOT(O | ONE), O, 500, 1, 1, 500, 500, 1, 0, O | ONE, 0, 0),
    /* ... and the observed variant missing (it is built when tracing is enabled: this does not
     * happen unless that build failed): run without, records lost and said so */
    ROW(PK_STEAL, 5000, 1, 1, T, NOT(O), 0, 1000, 1, 1, 1000, 1000, 1, 0, O, 0, 1),
    ROW(PK_STEAL, 500, 1, 1, S, NOT(O), ONE, 500, 1, 1, 500, 500, 0, F3, O, 0, 1),
    /* STEAL on an explicitly full grid: every unit claimed, never the short variant */
    ROW(PK_STEAL_FULL, 5000, 1, 1, 0, ALL, 0, 5000, 1, 1, 5000, 0, 1, 0, 0, 0, 0),
    ROW(PK_STEAL_FULL, 500, 1, 1, 0, ALL, 0, 500, 1, 1, 500, 0, 1, 0, 0, 0, 0),
    ROW(PK_STEAL_FULL, 5000, 1, 1, P, ALL, Y, 5000, 1, 1, 5000, 0, 1, 0, 0, 0, 0),
    ROW(PK_STEAL_FULL, 5000, 1, 1, G, ALL, GR, 5000, 1, 1, 5000, 0, 1, FG, 0, 0, 0),
    ROW(PK_STEAL_FULL, 500, 1, 1, P, NOT(Y), 0, 500, 1, 1, 500, 500, 0, 0, Y, 0, 0),
    /* STEAL on an explicitly persistent grid: never yields */
    ROW(PK_STEAL_PERSIST, 5000, 1, 1, 0, ALL, 0, 1000, 1, 1, 1000, 1000, 1, 0, 0, 0, 0),
    ROW(PK_STEAL_PERSIST, 5000, 1, 1, P, ALL, 0, 1000, 1, 1, 1000, 1000, 1, 0, 0, 0, 0),
    ROW(PK_STEAL_PERSIST, 500, 1, 1, P, ALL, ONE, 500, 1, 1, 500, 500, 0, F3, 0, 0, 0),
    /* 2-CTA clusters: units are 2 x 1 blocks of tiles, the grid counts CTAs */
    ROW(PK_STEAL2, 20001, 1, 1, 0, ALL, 0, 1000, 1, 1, 500, 500, 1, 0, 0, 0, 0),
    ROW(PK_STEAL2, 7, 3, 1, 0, ALL, ONE, 8, 3, 1, 12, 12, 0, F3, 0, 0, 0),
    ROW(PK_STEAL2, 20001, 1, 1, G, ALL, GR, 800, 1, 1, 400, 400, 1, FG, 0, 0, 0),
    ROW(PK_STEAL2, 20001, 1, 1, P, ALL, Y, 1800, 1, 1, 900, 300, 1, 0, 0, 0, 0),
    ROW(PK_STEAL2, 20001, 1, 1, T, ALL, O, 900, 1, 1, 450, 450, 1, 0, 0, 0, 0),
    ROW(PK_STEAL2, 20001, 1, 1, L, ALL, ONE, 20002, 1, 1, 10001, 10001, 0, F3, 0, 1, 0),
    ROW(PK_STEAL2, 20001, 1, 1, G, NOT(GR), 0, 20002, 1, 1, 10001, 10001, 0, FG, GR, 0, 0),
    /* 4-CTA clusters */
    ROW(PK_STEAL4, 10000, 1, 1, 0, ALL, 0, 1000, 1, 1, 250, 250, 1, 0, 0, 0, 0),
    ROW(PK_STEAL4, 10, 1, 1, 0, ALL, ONE, 12, 1, 1, 3, 3, 0, F3, 0, 0, 0), /* padded */
    ROW(PK_STEAL4, 10000, 1, 1, P | G, ALL, Y | GR, 1200, 1, 1, 300, 100, 1, FG, 0, 0, 0),
    ROW(PK_STEAL4, 10000, 1, 1, P, NOT(Y), 0, 10000, 1, 1, 2500, 2500, 0, 0, Y, 0, 0),
    /* 2 x 2 clusters over a 2-D tile grid */
    ROW(PK_STEAL2X2, 100, 100, 1, 0, ALL, 0, 500, 2, 1, 250, 250, 1, 0, 0, 0, 0),
    ROW(PK_STEAL2X2, 10, 10, 1, 0, ALL, ONE, 10, 10, 1, 25, 25, 0, F3, 0, 0, 0),
    ROW(PK_STEAL2X2, 1000, 200, 1, L, ALL, ONE, 1000, 200, 1, 50000, 50000, 0, F3, 0, 1, 0),
    ROW(PK_STEAL2X2, 101, 101, 1, G, NOT(GR), 0, 5202, 2, 1, 2601, 2601, 0, FG, GR, 0, 0),
    /* STATIC: a persistent grid; capture and preemption change nothing */
    ROW(PK_STATIC, 50000, 1, 1, 0, ALL, 0, 1000, 1, 1, 1000, 0, 0, 0, 0, 0, 0),
    ROW(PK_STATIC, 77, 1, 1, G | P, ALL, 0, 77, 1, 1, 77, 0, 0, 0, 0, 0, 0),
    ROW(PK_STATIC, 50000, 1, 1, T, ALL, O, 900, 1, 1, 900, 0, 0, 0, 0, 0, 0),
    ROW(PK_STATIC, 50000, 1, 1, S, NOT(O), 0, 1000, 1, 1, 1000, 0, 0, 0, O, 0, 1),
    /* FIXED: a 3-D grid of units where y and z fit, else 1-D */
    ROW(PK_FIXED, 100, 20, 3, 0, ALL, 0, 100, 20, 3, 6000, 0, 0, F3, 0, 0, 0),
    ROW(PK_FIXED, 3, 66001, 1, 0, ALL, 0, 198003, 1, 1, 198003, 0, 0, 0, 0, 0, 0),
    ROW(PK_FIXED, 100, 20, 3, T | G | P, ALL, O, 100, 20, 3, 6000, 0, 0, F3, 0, 0, 0),
    ROW(PK_FIXED2, 9, 4, 1, 0, ALL, 0, 10, 4, 1, 20, 0, 0, F3, 0, 0, 0),
    /* CLC: every cluster, the ring always */
    ROW(PK_CLC, 5000, 1, 1, 0, ALL, 0, 5000, 1, 1, 5000, 0, 1, 0, 0, 0, 0),
    ROW(PK_CLC, 5000, 1, 1, T | G, ALL, O, 5000, 1, 1, 5000, 0, 1, 0, 0, 0, 0),
};

/* The SMs of the stream a plan is made for: the whole device of 132 by default. */
static struct {
  int grid_sms;
  unsigned align;
} g_plan_sms = {132, 0};

static void plan_input(clcrt__plan_in *in, int kernel, unsigned tx, unsigned ty, unsigned tz, unsigned state,
                       unsigned ready) {
  memset(in, 0x5a, sizeof *in); /* every field must be set below */
  in->k = &g_pk[kernel];
  in->occ = g_pocc[kernel];
  in->ready = ready | 1u;
  in->tiles = (clcrt_dim3){tx, ty, tz};
  in->traced = !!(state & T), in->stats = !!(state & S), in->graph = !!(state & G);
  in->preemptible = !!(state & P), in->long_measured = !!(state & L), in->long_recheck = !!(state & R);
  in->preempt_waves = 2;
  in->chunk_cycles = 8000;
  /* The whole device, unless plan_everywhere sweeps the SMs a stream may have (test_share runs
   * partitions through clcrt_run). */
  in->dev_sms = 132, in->grid_sms = g_plan_sms.grid_sms, in->grid_align = g_plan_sms.align;
}

/* What holds for every plan, whatever its input (checked on the table and on the sweep below). */
static void plan_invariants(const clcrt__plan_in *in, const clcrt__plan_out *o, const char *what) {
  const clcrt_kernel *k = in->k;
  const clcrt__params *p = &o->p;
  const int steal = k->sched == CLCRT_SCHED_STEAL;
  const unsigned n = p->num_units, v = o->variant;
  const int claims = steal && p->claim_base < n;
  ck_assert_msg((in->ready >> v) & 1u, "%s: variant %u launched but not built", what, v);
  ck_assert_msg(!o->missing || !((in->ready >> o->missing) & 1u), "%s: asks for %u, which is built", what, o->missing);
  ck_assert_msg(v == clcrt__variant_bits(k->sched, v), "%s: variant %u has bits its scheduler has no code for", what, v);
  /* Observed when asked, or said to be lost. */
  ck_assert_msg(!!(v & CLCRT_USE_TRACE) == ((in->traced || in->stats) && !o->obs_lost), "%s: observed %u", what, v);
  ck_assert_msg(o->obs_lost == ((in->traced || in->stats) && !((in->ready >> CLCRT_USE_TRACE) & 1u)), "%s: obs lost",
                what);
  /* Every unit has a cluster that runs it: a cluster of its own below claim_base, or a claim. */
  if (steal) {
    ck_assert_msg(p->claim_base <= p->num_clusters, "%s: claim base %u > clusters %u", what, p->claim_base,
                  p->num_clusters);
    ck_assert_msg(claims || p->num_clusters >= n, "%s: %u clusters for %u units, no claims", what, p->num_clusters, n);
    ck_assert_msg(!claims || !(v & CLCRT_USE_SHORT), "%s: the short variant claims", what);
    ck_assert_msg(!claims || !in->graph || (v & CLCRT_USE_GRAPH), "%s: a captured run claims without graph code", what);
    ck_assert_msg(!(v & CLCRT_USE_GRAPH) || in->graph, "%s: graph code outside a capture", what);
    ck_assert_msg(!(v & CLCRT_USE_PREEMPT) || in->preemptible, "%s: yields with nothing to yield to", what);
    ck_assert_msg(!!(p->flags & CLCRT__PF_GRAPH) == !!in->graph, "%s: graph flag", what);
    ck_assert_msg(p->active >= 1 && p->active <= p->num_clusters, "%s: active %u", what, p->active);
    for (unsigned x = 0; x < (1u << 31); x = x * 5 + 3)
      ck_assert_msg(fastdiv(x, p->guide_mul, p->guide_shr) == x / (2 * p->active), "%s: guided bound", what);
  } else {
    ck_assert_uint_eq(p->claim_base, 0);
    ck_assert_uint_eq(p->flags & CLCRT__PF_GRAPH, 0);
    ck_assert_uint_eq(o->missing & ~CLCRT_USE_TRACE, 0);
    if (k->sched != CLCRT_SCHED_STATIC) ck_assert_uint_eq(p->num_clusters, n);
  }
  /* The grid: one cluster per unit in 3-D, or num_clusters along x. */
  if (p->flags & CLCRT__PF_GRID3) {
    ck_assert(k->sched == CLCRT_SCHED_FIXED || (v & CLCRT_USE_SHORT));
    ck_assert_uint_eq(o->grid[0], p->units[0] * k->cluster.x);
    ck_assert_uint_eq(o->grid[1], p->units[1] * k->cluster.y);
    ck_assert_uint_eq(o->grid[2], p->units[2] * k->cluster.z);
    ck_assert_uint_eq(p->num_clusters, n);
  } else {
    ck_assert_uint_eq(o->grid[0], p->num_clusters * k->cluster.x);
    ck_assert_uint_eq(o->grid[1], k->cluster.y);
    ck_assert_uint_eq(o->grid[2], k->cluster.z);
  }
  /* The ring where the kernel reads it: CLC always, STEAL when it claims or records start times. */
  const int ring = k->ring_bytes && (k->sched == CLCRT_SCHED_CLC || claims || (in->traced && (v & CLCRT_USE_TRACE)));
  ck_assert_msg(o->smem == k->smem_bytes + (ring ? k->ring_bytes : 0), "%s: smem %u", what, o->smem);
  /* The units and their decomposition on the device. */
  ck_assert_uint_eq(p->tiles[0], in->tiles.x);
  ck_assert_uint_eq(p->units[0], (in->tiles.x - 1) / k->cluster.x + 1);
  ck_assert_uint_eq(p->units[1], (in->tiles.y - 1) / k->cluster.y + 1);
  ck_assert_uint_eq(p->units[2], (in->tiles.z - 1) / k->cluster.z + 1);
  ck_assert_uint_eq(n, p->units[0] * p->units[1] * p->units[2]);
  for (unsigned u = 0; u < n; u += n / 97 + 1) {
    unsigned t = fastdiv(u, p->div1_mul, p->div1_shr);
    ck_assert_msg(t == u / p->units[0], "%s: u / units[0] for %u", what, u);
    ck_assert_uint_eq(fastdiv(t, p->div2_mul, p->div2_shr), t / p->units[1]);
  }
  /* What belongs to the stream is left to clcrt_run. */
  ck_assert(p->seq == 0 && p->state == 0 && p->stats == 0 && p->trace == 0 && p->yield == 0 && p->run == 0 &&
            p->prio == 0 && p->unit_cycles == 0 && p->yield_words == 0);
  /* A STEAL claim's units last chunk_cycles, or for 1-CTA clusters longer with fewer CTAs per
   * SM (never shorter, at most CLCRT__CHUNK_FULL_SM times); other schedulers claim nothing. */
  if (steal && k->cluster_size > 1)
    ck_assert_uint_eq(p->chunk_cycles, in->chunk_cycles);
  else if (steal)
    ck_assert_msg(p->chunk_cycles >= in->chunk_cycles && p->chunk_cycles <= in->chunk_cycles * CLCRT__CHUNK_FULL_SM,
                  "%s: chunk %u cycles", what, p->chunk_cycles);
  else
    ck_assert_uint_eq(p->chunk_cycles, 0);
}

/* Every row of the table: the variant, the grid, the claim base and the rest, exactly. */
START_TEST(plan_table) {
  plan_kernels();
  for (size_t i = 0; i < sizeof PLAN_TABLE / sizeof PLAN_TABLE[0]; i++) {
    const plan_row *r = &PLAN_TABLE[i];
    char what[64];
    snprintf(what, sizeof what, "test_launch.c:%d", r->line);
    clcrt__plan_in in;
    plan_input(&in, r->kernel, r->tx, r->ty, r->tz, r->state, r->ready);
    const clcrt__plan_in copy = in;
    clcrt__plan_out o;
    memset(&o, 0xa5, sizeof o);
    ck_assert_msg(clcrt__plan(&in, &o) == CLCRT__PLAN_OK, "%s", what);
    ck_assert_msg(memcmp(&in, &copy, sizeof in) == 0, "%s: the input changed", what);
    ck_assert_msg(o.variant == r->variant, "%s: variant %u, want %u", what, o.variant, r->variant);
    ck_assert_msg(o.grid[0] == r->gx && o.grid[1] == r->gy && o.grid[2] == r->gz, "%s: grid (%u,%u,%u), want (%u,%u,%u)",
                  what, o.grid[0], o.grid[1], o.grid[2], r->gx, r->gy, r->gz);
    ck_assert_msg(o.p.num_clusters == r->clusters, "%s: %u clusters, want %u", what, o.p.num_clusters, r->clusters);
    ck_assert_msg(o.p.claim_base == r->claim_base, "%s: claim base %u, want %u", what, o.p.claim_base, r->claim_base);
    ck_assert_msg(o.smem == PSMEM + (r->ring ? PRING : 0), "%s: smem %u", what, o.smem);
    ck_assert_msg(o.p.flags == r->flags, "%s: flags %u, want %u", what, o.p.flags, r->flags);
    ck_assert_msg(o.missing == r->missing, "%s: missing %u, want %u", what, o.missing, r->missing);
    ck_assert_msg(o.count_long == r->count_long, "%s: counted long %u", what, o.count_long);
    ck_assert_msg(o.obs_lost == r->obs_lost, "%s: observation lost %u", what, o.obs_lost);
    plan_invariants(&in, &o, what);
  }
}
END_TEST

/* A 1-CTA cluster's claims last chunk_cycles at CLCRT__CHUNK_FULL_SM or more CTAs per SM, and
 * proportionally longer with fewer (plan.c: fewer CTAs cover each claim's wait), by the
 * occupancy of the variant launched on the stream's SMs; clusters of several CTAs claim ahead
 * and keep chunk_cycles. */
START_TEST(plan_chunk_by_occupancy) {
  plan_kernels();
  static const struct {
    int kernel, blocks_per_sm, grid_sms;
    unsigned base, want;
  } rows[] = {
      {PK_STEAL, 8, 132, 8000, 8000},     {PK_STEAL, 16, 132, 8000, 8000},  {PK_STEAL, 6, 132, 8000, 10666},
      {PK_STEAL, 3, 132, 8000, 21333},    {PK_STEAL, 1, 132, 8000, 64000},  {PK_STEAL2, 8, 132, 8000, 8000},
      {PK_STEAL4, 4, 132, 8000, 8000},    {PK_STEAL2, 2, 132, 8000, 8000},  {PK_STEAL, 3, 66, 8000, 21333},
      {PK_STEAL, 8, 66, 8000, 8000},
      {PK_STEAL, 1, 132, 10000000, 80000000},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    clcrt__occ occ[CLCRT__VARIANTS];
    memcpy(occ, g_pocc[rows[i].kernel], sizeof occ);
    /* Every variant the same (the registered one is launched here). */
    for (unsigned v = 0; v < CLCRT__VARIANTS; v++) {
      occ[v].clusters = rows[i].blocks_per_sm * 132 / (int)g_pk[rows[i].kernel].cluster_size;
      occ[v].blocks_per_sm = rows[i].blocks_per_sm;
      clcrt__fastdiv(2u * (unsigned)occ[v].clusters, &occ[v].guide_mul, &occ[v].guide_shr);
    }
    g_plan_sms.grid_sms = rows[i].grid_sms;
    clcrt__plan_in in;
    plan_input(&in, rows[i].kernel, 100000, 1, 1, 0, ALL);
    in.occ = occ;
    in.chunk_cycles = rows[i].base;
    clcrt__plan_out o;
    ck_assert_int_eq(clcrt__plan(&in, &o), CLCRT__PLAN_OK);
    ck_assert_msg(o.p.claim_base < o.p.num_units, "row %zu claims", i);
    ck_assert_msg(o.p.chunk_cycles == rows[i].want, "row %zu: chunk %u cycles, want %u", i, o.p.chunk_cycles,
                  rows[i].want);
  }
  g_plan_sms.grid_sms = 132;
  /* STATIC and FIXED claim nothing. */
  clcrt__plan_in in;
  clcrt__plan_out o;
  plan_input(&in, PK_STATIC, 100000, 1, 1, 0, ALL);
  ck_assert_int_eq(clcrt__plan(&in, &o), CLCRT__PLAN_OK);
  ck_assert_uint_eq(o.p.chunk_cycles, 0);
}
END_TEST

/* Every kernel x tile grid x state x set of built variants on the SMs g_plan_sms says: the
 * invariants, and the same answer twice. Returns the plans made. */
static unsigned long plan_sweep(void) {
  static const unsigned tiles[][3] = {{1, 1, 1}, {500, 1, 1}, {1000, 1, 1}, {5000, 1, 1}, {20001, 1, 1},
                                      {37, 29, 1}, {100, 30, 7}, {3, 66001, 1}};
  static const unsigned readies[] = {ALL, 1u, NOT(O), NOT(ONE), NOT(GR), NOT(Y), NOT(O | ONE), NOT(Y) & NOT(ONE),
                                     NOT(Y | GR) & NOT(GR), NOT(O | Y) & NOT(O | GR)};
  unsigned long plans = 0;
  for (int kk = 0; kk < PK_COUNT; kk++)
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++)
      for (unsigned state = 0; state < 64; state++)
        for (size_t r = 0; r < sizeof readies / sizeof readies[0]; r++) {
          if ((state & R) && !(state & L)) continue;
          if (g_pk[kk].sched != CLCRT_SCHED_STEAL && (state & (G | P | L))) continue; /* clcrt_run never sets them */
          if ((state & L) && !(g_pk[kk].sched == CLCRT_SCHED_STEAL && g_pk[kk].grid == CLCRT_GRID_AUTO)) continue;
          char what[112];
          snprintf(what, sizeof what, "%d SMs, kernel %d, tiles (%u,%u,%u), state 0x%x, ready 0x%x", g_plan_sms.grid_sms,
                   kk, tiles[t][0], tiles[t][1], tiles[t][2], state, readies[r]);
          clcrt__plan_in in;
          plan_input(&in, kk, tiles[t][0], tiles[t][1], tiles[t][2], state, readies[r]);
          clcrt__plan_out a, b;
          memset(&a, 0, sizeof a), memset(&b, 0xff, sizeof b);
          ck_assert_msg(clcrt__plan(&in, &a) == CLCRT__PLAN_OK, "%s", what);
          plan_invariants(&in, &a, what);
          ck_assert_msg(clcrt__plan(&in, &b) == CLCRT__PLAN_OK, "%s", what);
          ck_assert_msg(memcmp(&a.p, &b.p, sizeof a.p) == 0 && a.variant == b.variant && a.missing == b.missing &&
                            memcmp(a.grid, b.grid, sizeof a.grid) == 0 && a.smem == b.smem,
                        "%s: another answer the second time", what);
          plans++;
        }
  return plans;
}

/* Every scheduler x cluster shape x grid kind x state x which variants are built, on the whole
 * device, a budget of whole groups, the remainder of one and grid_sms on a plain stream: the
 * invariants, and the same answer twice (no hidden state). */
START_TEST(plan_everywhere) {
  plan_kernels();
  static const struct {
    int grid_sms;
    unsigned align;
  } sms[] = {{132, 0}, {16, 8}, {116, 0}, {66, 0}};
  unsigned long plans = 0;
  for (size_t si = 0; si < sizeof sms / sizeof sms[0]; si++) {
    g_plan_sms.grid_sms = sms[si].grid_sms, g_plan_sms.align = sms[si].align;
    plans += plan_sweep();
  }
  g_plan_sms.grid_sms = 132, g_plan_sms.align = 0;
  ck_assert_uint_gt(plans, 40000);
  /* Too many units: refused, with the units for the message. */
  clcrt__plan_in in;
  clcrt__plan_out o;
  plan_input(&in, PK_STEAL2, 0x7fffffffu, 1, 1, 0, ALL);
  ck_assert_int_eq(clcrt__plan(&in, &o), CLCRT__PLAN_TOO_MANY_UNITS); /* 2^30 units, 2^31 CTAs */
  ck_assert_uint_eq(o.p.units[0], 0x40000000u);
  plan_input(&in, PK_STEAL, 65536, 65536, 1, 0, ALL);
  ck_assert_int_eq(clcrt__plan(&in, &o), CLCRT__PLAN_TOO_MANY_UNITS);
  plan_input(&in, PK_FIXED, 65536, 32767, 1, 0, ALL);
  ck_assert_int_eq(clcrt__plan(&in, &o), CLCRT__PLAN_OK);
}
END_TEST

/* ---- clcrt_run on the fake driver ---- */

/* More units than fit: a persistent grid of the resident clusters, each starting on its own
 * unit, the rest claimed; the registered kernel with its response ring. */
START_TEST(steal_persistent_grid_claims_the_rest) {
  const unsigned resident = FAKE_SMS * FAKE_BLOCKS_PER_SM, units = 20000;
  ck_assert_int_eq(run(g_steal, units, 1, 1), CLCRT_OK);
  ck_assert_int_eq(g_launches, 1);
  ck_assert_ptr_eq(g_fn, g_steal->fn);
  ck_assert_uint_eq(g_cfg.gridDimX, resident);
  ck_assert_uint_eq(g_cfg.gridDimY, 1);
  ck_assert_uint_eq(g_cfg.blockDimX, 256);
  ck_assert_uint_eq(g_cfg.sharedMemBytes, g_steal->smem_bytes + g_steal->ring_bytes);
  ck_assert_uint_gt(g_steal->ring_bytes, 0);
  ck_assert_uint_eq(g_p.num_units, units);
  ck_assert_uint_eq(g_p.num_clusters, resident);
  ck_assert_uint_eq(g_p.active, resident);
  ck_assert_uint_eq(g_p.claim_base, resident);
  ck_assert_uint_eq(g_p.unit_cycles, g_steal->unit_cycles_dev);
  ck_assert_uint_ne(g_p.unit_cycles, 0);
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRAPH, 0);
  ck_assert_uint_eq(g_p.state, g_s->state);
  ck_assert_uint_eq(g_p.chunk_cycles, g_rt->chunk_cycles);
  ck_assert_uint_eq(g_p.yield, 0);
  ck_assert_int_eq(memcmp(g_args, &g_a, sizeof g_a), 0);
  /* A 1-D grid's unit decomposition (u / units[0], 0 for every unit) needs no host division. */
  for (unsigned u = 0; u < units; u += 7) ck_assert_uint_eq(fastdiv(u, g_p.div1_mul, g_p.div1_shr), 0);
  ck_assert_uint_eq(fastdiv(units - 1, g_p.div1_mul, g_p.div1_shr), 0);
  /* The guided bound divides by 2 * active exactly over the counter's range. */
  for (unsigned n = 0; n < (1u << 31); n = n * 3 + 7)
    ck_assert_uint_eq(fastdiv(n, g_p.guide_mul, g_p.guide_shr), n / (2 * resident));
}
END_TEST

/* A 2-D grid: the device divides by units[0] exactly for every unit. */
START_TEST(steal_two_d_grid_decomposes) {
  ck_assert_int_eq(run(g_steal, 1000, 37, 1), CLCRT_OK);
  ck_assert_uint_eq(g_p.num_units, 37000);
  for (unsigned u = 0; u < 37000; u++) ck_assert_uint_eq(fastdiv(u, g_p.div1_mul, g_p.div1_shr), u / 1000);
  for (unsigned t = 0; t < 37; t++) ck_assert_uint_eq(fastdiv(t, g_p.div2_mul, g_p.div2_shr), 0);
  ck_assert_int_eq(run(g_steal, 100, 30, 7), CLCRT_OK);
  for (unsigned u = 0; u < 21000; u += 3) {
    unsigned t = fastdiv(u, g_p.div1_mul, g_p.div1_shr);
    ck_assert_uint_eq(t, u / 100);
    ck_assert_uint_eq(fastdiv(t, g_p.div2_mul, g_p.div2_shr), t / 30);
  }
}
END_TEST

/* Sequence numbers pick a stream's claim line: consecutive, one per launched run that claims;
 * a run that claims nothing takes none and gets no claim line. */
START_TEST(steal_sequence_numbers_follow_the_runs) {
  unsigned first = 0;
  for (int i = 0; i < 5; i++) {
    ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_OK);
    if (i == 0) first = g_p.seq;
    ck_assert_uint_eq(g_p.seq, first + (unsigned)i);
    ck_assert_uint_eq(g_p.state, g_s->state);
    ck_assert_uint_eq(run(g_steal, 10, 1, 1), CLCRT_OK); /* one cluster per unit */
    ck_assert_uint_eq(g_p.claim_base, 10);
    ck_assert_uint_eq(g_p.seq, 0);
    ck_assert_uint_eq(g_p.state, 0);
  }
  /* A failed launch hands out no number. */
  g_launch_result = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_E_CUDA);
  ck_assert_msg(strstr(clcrt_errmsg(g_rt), "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES") != NULL, "%s", clcrt_errmsg(g_rt));
  ck_assert_msg(strstr(clcrt_errmsg(g_rt), "cuLaunchKernelEx(") != NULL, "%s", clcrt_errmsg(g_rt));
  g_launch_result = CUDA_SUCCESS;
  ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_OK);
  ck_assert_uint_eq(g_p.seq, first + 5);
}
END_TEST

/* No more units than clusters fit: one cluster per unit, the short variant (no claim code),
 * no response ring. */
START_TEST(steal_short_run_launches_the_short_variant) {
  ck_assert_int_eq(run(g_steal, 1000, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, variant_fn(g_steal, CLCRT_USE_SHORT));
  ck_assert_ptr_ne(g_fn, g_steal->fn);
  ck_assert_uint_eq(g_cfg.gridDimX, 1000);
  ck_assert_uint_eq(g_cfg.sharedMemBytes, g_steal->smem_bytes);
  ck_assert_uint_eq(g_p.claim_base, 1000);
  ck_assert_uint_eq(g_p.num_clusters, 1000);
  /* Exactly as many units as fit is still short; one more claims. */
  const unsigned resident = FAKE_SMS * FAKE_BLOCKS_PER_SM;
  ck_assert_int_eq(run(g_steal, resident, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, variant_fn(g_steal, CLCRT_USE_SHORT));
  ck_assert_int_eq(run(g_steal, resident + 1, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, g_steal->fn);
  ck_assert_uint_eq(g_p.claim_base, resident);
  ck_assert_uint_eq(g_p.num_units, resident + 1);
}
END_TEST

/* 2-CTA clusters: units are cluster-shaped blocks of tiles; the grid counts CTAs. */
START_TEST(steal_clusters_count_units_and_ctas) {
  const unsigned resident = FAKE_SMS * FAKE_BLOCKS_PER_SM / 2;
  ck_assert_int_eq(run(g_steal2, 20001, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, g_steal2->fn);
  ck_assert_uint_eq(g_p.units[0], 10001);
  ck_assert_uint_eq(g_p.num_units, 10001);
  ck_assert_uint_eq(g_p.num_clusters, resident);
  ck_assert_uint_eq(g_cfg.gridDimX, 2 * resident);
  ck_assert_int_eq(run(g_steal2, 7, 3, 1), CLCRT_OK); /* 4 x 3 units, short */
  ck_assert_ptr_eq(g_fn, variant_fn(g_steal2, CLCRT_USE_SHORT));
  ck_assert_uint_eq(g_p.units[0], 4);
  ck_assert_uint_eq(g_p.units[1], 3);
  /* The short variant runs as FIXED: a 3-D grid of units, each cluster's unit its coordinate. */
  ck_assert_uint_eq(g_cfg.gridDimX, 2 * 4);
  ck_assert_uint_eq(g_cfg.gridDimY, 3);
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRID3, CLCRT__PF_GRID3);
  ck_assert_uint_eq(g_p.num_clusters, 12);
  /* The device's unit decomposition: u % units[0] and u / units[0]. */
  for (unsigned u = 0; u < 12; u++) ck_assert_uint_eq(fastdiv(u, g_p.div1_mul, g_p.div1_shr), u / 4);
}
END_TEST

/* Under capture, a claiming run launches the graph variant on the context's table; one that
 * claims nothing keeps the short variant but is told it is captured. */
START_TEST(steal_captured_runs_use_the_graph_table) {
  g_capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, variant_fn(g_steal, CLCRT_USE_GRAPH));
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRAPH, CLCRT__PF_GRAPH);
  ck_assert_uint_eq(g_p.state, g_rt->devstate->table);
  ck_assert_int_eq(run(g_steal, 100, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, variant_fn(g_steal, CLCRT_USE_SHORT));
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRAPH, CLCRT__PF_GRAPH);
  /* After the capture: the stream's own claim sets again. */
  g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
  ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, g_steal->fn);
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRAPH, 0);
  ck_assert_uint_eq(g_p.state, g_s->state);
}
END_TEST

START_TEST(steal_invalidated_capture_is_an_error) {
  g_capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_E_INVALID);
  ck_assert_int_eq(g_launches, 0);
  ck_assert_msg(strstr(clcrt_errmsg(g_rt), "invalidated") && strstr(clcrt_errmsg(g_rt), "cuStreamEndCapture"), "%s",
                clcrt_errmsg(g_rt));
}
END_TEST

/* FIXED: one cluster per unit, as a 3-D grid where y and z fit, else 1-D. */
START_TEST(fixed_grids) {
  ck_assert_int_eq(run(g_fixed, 100, 20, 3), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, g_fixed->fn);
  ck_assert_uint_eq(g_cfg.gridDimX, 100);
  ck_assert_uint_eq(g_cfg.gridDimY, 20);
  ck_assert_uint_eq(g_cfg.gridDimZ, 3);
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRID3, CLCRT__PF_GRID3);
  ck_assert_uint_eq(g_cfg.sharedMemBytes, g_fixed->smem_bytes);
  ck_assert_int_eq(run(g_fixed, 3, 66001, 1), CLCRT_OK);
  ck_assert_uint_eq(g_cfg.gridDimX, 3 * 66001);
  ck_assert_uint_eq(g_cfg.gridDimY, 1);
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRID3, 0);
  ck_assert_int_eq(run(g_fixed2, 9, 4, 1), CLCRT_OK); /* 5 x 4 units of 2 x 1 tiles */
  ck_assert_uint_eq(g_cfg.gridDimX, 10);
  ck_assert_uint_eq(g_cfg.gridDimY, 4);
  ck_assert_uint_eq(g_p.num_units, 20);
}
END_TEST

/* STATIC: a persistent grid of min(units, resident) clusters, no ring, no capture query. */
START_TEST(static_persistent_grid) {
  ck_assert_int_eq(run(g_static, 50000, 1, 1), CLCRT_OK);
  ck_assert_uint_eq(g_cfg.gridDimX, FAKE_SMS * FAKE_BLOCKS_PER_SM);
  ck_assert_uint_eq(g_cfg.sharedMemBytes, g_static->smem_bytes);
  ck_assert_int_eq(run(g_static, 77, 1, 1), CLCRT_OK);
  ck_assert_uint_eq(g_cfg.gridDimX, 77);
  /* Capture changes nothing for STATIC. */
  g_capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  ck_assert_int_eq(run(g_static, 77, 1, 1), CLCRT_OK);
}
END_TEST

START_TEST(bad_arguments_launch_nothing) {
  ck_assert_int_eq(clcrt_run(NULL, g_steal, (clcrt_dim3){1, 1, 1}, &g_a, sizeof g_a), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_run(g_s, NULL, (clcrt_dim3){1, 1, 1}, &g_a, sizeof g_a), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(g_rt), "NULL") != NULL, "%s", clcrt_errmsg(g_rt));
  ck_assert_int_eq(clcrt_run(g_s, g_steal, (clcrt_dim3){1, 1, 1}, &g_a, sizeof g_a - 1), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(g_rt), "args_size is 15 bytes") != NULL, "%s", clcrt_errmsg(g_rt));
  ck_assert_int_eq(clcrt_run(g_s, g_steal, (clcrt_dim3){1, 1, 1}, NULL, sizeof g_a), CLCRT_E_INVALID);
  ck_assert_int_eq(run(g_steal, 0, 5, 5), CLCRT_OK); /* an empty grid is a no-op */
  ck_assert_int_eq(run(g_steal, 65536, 65536, 1), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(g_rt), "split the grid") != NULL, "%s", clcrt_errmsg(g_rt));
  ck_assert_int_eq(run(g_steal2, 0x7fffffffu, 1, 1), CLCRT_E_INVALID); /* 2^30 units, 2^31 CTAs */
  ck_assert_int_eq(g_launches, 0);
}
END_TEST

/* clcrt_run_ex: CLCRT_RUN_PDL adds the programmatic-serialization launch attribute on sm_90
 * and nothing else does (clcrt_run, flags 0); an unknown flag launches nothing. The kernels
 * wait for the grid before them first thing (the entry's griddepcontrol.wait): checked in the
 * generated source and in the PTX. */
START_TEST(run_ex_pdl) {
  ck_assert_int_eq(clcrt_run_ex(g_s, g_steal, (clcrt_dim3){4, 1, 1}, &g_a, sizeof g_a, CLCRT_RUN_PDL), CLCRT_OK);
  ck_assert_int_eq(g_launches, 1);
  ck_assert_int_eq(g_pdl, 1);
  ck_assert_int_eq(clcrt_run_ex(g_s, g_steal, (clcrt_dim3){4, 1, 1}, &g_a, sizeof g_a, 0), CLCRT_OK);
  ck_assert_int_eq(g_launches, 2);
  ck_assert_int_eq(g_pdl, -1);
  ck_assert_int_eq(run(g_steal, 4, 1, 1), CLCRT_OK);
  ck_assert_int_eq(g_pdl, -1);
  ck_assert_int_eq(clcrt_run_ex(g_s, g_steal, (clcrt_dim3){4, 1, 1}, &g_a, sizeof g_a, 2u), CLCRT_E_INVALID);
  ck_assert_msg(strstr(clcrt_errmsg(g_rt), "only CLCRT_RUN_PDL") != NULL, "%s", clcrt_errmsg(g_rt));
  ck_assert_int_eq(g_launches, 3);
  const char *ptx = NULL;
  ck_assert_int_eq(clcrt_kernel_ptx(g_steal, &ptx), CLCRT_OK);
  const char *wait = strstr(ptx, "griddepcontrol.wait"), *go = strstr(ptx, "griddepcontrol.launch_dependents");
  ck_assert_msg(wait && go, "the kernel's PTX lacks griddepcontrol");
  /* The wait comes before the first global access of the kernel's code. */
  const char *entry = strstr(ptx, ".entry");
  ck_assert_ptr_nonnull(entry);
  ck_assert_msg(wait > entry, "griddepcontrol.wait outside the entry");
  const char *first_global = strstr(entry, ".global.");
  ck_assert_msg(!first_global || wait < first_global, "a global access before griddepcontrol.wait");
}
END_TEST

/* The context is asked for on every run, and a run launches in the runtime's (the function
 * launched is that context's): where the thread had another context current (another device's),
 * the run pushes the runtime's and pops it, so the thread's own is current again; where it had
 * none, the runtime's is made current and stays. */
START_TEST(run_restores_the_context) {
  ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_OK);
  ck_assert_int_eq(g_set_current, 0);
  const int pushes = fake_pushes;
  fake_current = (CUcontext)0x9999;
  ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_launch_ctx, FAKE_CTX);
  ck_assert_int_eq(fake_pushes, pushes + 1);
  ck_assert_int_eq(g_set_current, 0);
  ck_assert_ptr_eq(fake_current, (CUcontext)0x9999); /* the caller's, popped back */
  ck_assert_ptr_eq(g_cfg.hStream, g_s->cu);
  /* A failed launch pops too. */
  g_launch_result = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  ck_assert_int_ne(run(g_steal, 20000, 1, 1), CLCRT_OK);
  g_launch_result = CUDA_SUCCESS;
  ck_assert_ptr_eq(fake_current, (CUcontext)0x9999);
  fake_current = NULL;
  ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_launch_ctx, FAKE_CTX);
  ck_assert_int_eq(g_set_current, 1);
  ck_assert_ptr_eq(fake_current, FAKE_CTX); /* none before: the runtime's stays */
}
END_TEST

/* ---- no run compiles: variants are built before runs need them, or in the background ---- */

static unsigned long long compiles(void) {
  clcrt_cache_stats cs = CLCRT_CACHE_STATS_INIT;
  ck_assert_int_eq(clcrt_cache_stats_get(g_rt, &cs), CLCRT_OK);
  return cs.misses + cs.uncached;
}
/* A kernel none of whose variants is built: a block size of its own makes it a kernel of its own. */
static clcrt_kernel *fresh(clcrt_grid grid, unsigned block) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = SRC, d.tile_fn = "mark", d.args_type = "A";
  d.block = (clcrt_dim3){block, 1, 1};
  d.sched = CLCRT_SCHED_STEAL;
  d.grid = grid;
  clcrt_kernel *k = NULL;
  ck_assert_msg(clcrt_register(g_rt, &d, &k) == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
  ck_assert_uint_eq(k->vars->ready, 1u);
  return k;
}
static int built(const clcrt_kernel *k, unsigned v) {
  return (int)((__atomic_load_n(&k->vars->ready, __ATOMIC_ACQUIRE) >> v) & 1u);
}
static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}
/* The host time of one clcrt_run (ns). */
static double timed_run(const clcrt_kernel *k, unsigned x) {
  double t0 = now_ns();
  ck_assert_msg(run(k, x, 1, 1) == CLCRT_OK, "%s", clcrt_errmsg(g_rt));
  return now_ns() - t0;
}
/* The fallback: the registered kernel (or its observed variant) on a full grid, every cluster
 * one unit of its own, no claims, no ring unless traced. */
static void expect_fallback(const clcrt_kernel *launched, unsigned units) {
  ck_assert_ptr_eq(g_fn, launched->fn);
  ck_assert_uint_eq(g_cfg.gridDimX, units);
  ck_assert_uint_eq(g_p.num_clusters, units);
  ck_assert_uint_eq(g_p.claim_base, units);
  ck_assert_uint_eq(g_p.yield, 0);
}

/* Captured: the first run that claims launches the fallback at once and leaves the graph
 * variant to the background; once it is built, runs claim from the graph table. */
START_TEST(captured_runs_never_build) {
  clcrt_kernel *k = fresh(CLCRT_GRID_AUTO, 128);
  const unsigned long long c0 = compiles();
  g_capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  double first = timed_run(k, 20000);
  expect_fallback(k, 20000);
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRAPH, CLCRT__PF_GRAPH);
  ck_assert_uint_eq(g_p.state, 0); /* the fallback claims nothing: no claim line */
  ck_assert_uint_eq(g_cfg.sharedMemBytes, k->smem_bytes);
  ck_assert_uint_eq(k->vars->requested, 1u << CLCRT_USE_GRAPH);
  double second = timed_run(k, 20000);
  expect_fallback(k, 20000);
  clcrt__builder_wait(g_rt);
  ck_assert(built(k, CLCRT_USE_GRAPH));
  ck_assert_uint_eq(compiles(), c0 + 1); /* the graph variant, once */
  double later = timed_run(k, 20000);
  ck_assert_ptr_eq(g_fn, variant_fn(k, CLCRT_USE_GRAPH));
  ck_assert_uint_lt(g_p.claim_base, 20000);
  printf("test_launch: captured run, host time on the fake driver: first %.0f ns, second %.0f ns, once built %.0f ns\n",
         first, second, later);
  g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
}
END_TEST

/* Short runs and long units without the short variant: the registered kernel claiming nothing
 * (a short run) or on a full grid (long units); then the short one. */
START_TEST(short_and_long_runs_never_build) {
  clcrt_kernel *k = fresh(CLCRT_GRID_AUTO, 96);
  ck_assert_int_eq(run(k, 100, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, k->fn);
  ck_assert_uint_eq(g_p.claim_base, 100);
  ck_assert_uint_eq(g_cfg.gridDimX, 100);
  uint32_t *w = (uint32_t *)(uintptr_t)k->unit_cycles;
  for (unsigned i = 0; i < CLCRT__HINT_WORDS; i++) w[i] = 10 * g_rt->long_cycles;
  ck_assert_int_eq(run(k, 50000, 1, 1), CLCRT_OK);
  expect_fallback(k, 50000);
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRID3, 0);
  ck_assert_uint_eq(k->vars->hw_runs, 1);
  clcrt__builder_wait(g_rt);
  ck_assert_int_eq(run(k, 50000, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, variant_fn(k, CLCRT_USE_SHORT));
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRID3, CLCRT__PF_GRID3);
  ck_assert_int_eq(run(k, 100, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, variant_fn(k, CLCRT_USE_SHORT));
}
END_TEST

/* A stream of higher priority than a live one: the yielding variants of the STEAL kernels
 * that can yield (not those on an explicitly persistent grid) are built in the background, and
 * so are those of kernels registered while it lives. Runs before that launch the fallback. */
static CUstream const HI_STREAM = (CUstream)0x77; /* f_stream_prio gives it a priority above the least */
START_TEST(preemptible_streams_build_yielding_variants) {
  clcrt_kernel *ka = fresh(CLCRT_GRID_AUTO, 160), *kf = fresh(CLCRT_GRID_FULL, 160),
               *kp = fresh(CLCRT_GRID_PERSISTENT, 160);
  clcrt_stream *hi = NULL;
  ck_assert_int_eq(clcrt_stream_create(g_rt, HI_STREAM, &hi), CLCRT_OK);
  ck_assert_uint_eq(clcrt_stream_priority(hi), 1);
  double first = timed_run(ka, 20000); /* preemptible now: YIELD, or the fallback until it is built */
  if (g_fn == ka->fn) expect_fallback(ka, 20000);
  double second = timed_run(ka, 20000);
  clcrt__builder_wait(g_rt);
  ck_assert(built(ka, CLCRT_USE_PREEMPT) && built(kf, CLCRT_USE_PREEMPT));
  ck_assert(!built(kp, CLCRT_USE_PREEMPT));
  ck_assert(!built(g_fixed, CLCRT_USE_PREEMPT) && !(g_fixed->vars->requested & (1u << CLCRT_USE_PREEMPT)));
  double later = timed_run(ka, 20000);
  ck_assert_ptr_eq(g_fn, variant_fn(ka, CLCRT_USE_PREEMPT));
  ck_assert_uint_ne(g_p.yield, 0);
  printf("test_launch: preemptible run, host time on the fake driver: first %.0f ns, second %.0f ns, once built %.0f "
         "ns\n",
         first, second, later);
  clcrt_kernel *k2 = fresh(CLCRT_GRID_AUTO, 192);
  ck_assert(k2->vars->requested & (1u << CLCRT_USE_PREEMPT));
  clcrt__builder_wait(g_rt);
  ck_assert(built(k2, CLCRT_USE_PREEMPT));
  clcrt_stream_destroy(hi);
}
END_TEST

/* Tracing and statistics build the observed variant of every kernel when enabled, and of every
 * kernel registered while a stream observes; never a run. rt->observing counts the streams. */
START_TEST(observing_builds_observed_variants_first) {
  clcrt_kernel *k = fresh(CLCRT_GRID_AUTO, 224);
  ck_assert_int_eq(g_rt->observing, 0);
  ck_assert_int_eq(clcrt_stream_trace_enable(g_s, 1000), CLCRT_OK);
  ck_assert(built(k, CLCRT_USE_TRACE) && built(g_fixed, CLCRT_USE_TRACE) && built(g_static, CLCRT_USE_TRACE));
  ck_assert_int_eq(g_rt->observing, 1);
  const unsigned long long c0 = compiles();
  double first = timed_run(k, 20000);
  ck_assert_ptr_eq(g_fn, variant_fn(k, CLCRT_USE_TRACE));
  ck_assert_uint_eq(g_p.trace, g_s->trace);
  ck_assert_uint_eq(g_cfg.sharedMemBytes, k->smem_bytes + k->ring_bytes);
  double second = timed_run(k, 20000);
  ck_assert_uint_eq(compiles(), c0); /* no run built anything */
  printf("test_launch: traced run, host time on the fake driver: first %.0f ns, second %.0f ns\n", first, second);
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = SRC, d.tile_fn = "mark", d.args_type = "A", d.block = (clcrt_dim3){32, 1, 1};
  d.sched = CLCRT_SCHED_STEAL;
  clcrt_kernel *k2 = NULL;
  ck_assert_int_eq(clcrt_register(g_rt, &d, &k2), CLCRT_OK);
  ck_assert(built(k2, CLCRT_USE_TRACE)); /* registered while a stream traces */
  ck_assert_int_eq(clcrt_stream_stats_enable(g_s, 1), CLCRT_OK);
  ck_assert_int_eq(g_rt->observing, 1);
  ck_assert_int_eq(clcrt_stream_trace_enable(g_s, 0), CLCRT_OK);
  ck_assert_int_eq(g_rt->observing, 1);
  d.block = (clcrt_dim3){480, 1, 1};
  d.sched = CLCRT_SCHED_FIXED;
  clcrt_kernel *k3 = NULL;
  ck_assert_int_eq(clcrt_register(g_rt, &d, &k3), CLCRT_OK);
  ck_assert(built(k3, CLCRT_USE_TRACE));
  first = timed_run(k3, 1000);
  ck_assert_ptr_eq(g_fn, variant_fn(k3, CLCRT_USE_TRACE));
  ck_assert_uint_eq(g_p.stats, g_s->stats);
  ck_assert_uint_eq(g_p.trace, 0);
  second = timed_run(k3, 1000);
  printf("test_launch: run with statistics on, host time on the fake driver: first %.0f ns, second %.0f ns\n", first,
         second);
  ck_assert_int_eq(clcrt_stream_stats_enable(g_s, 0), CLCRT_OK);
  ck_assert_int_eq(g_rt->observing, 0);
  d.block = (clcrt_dim3){448, 1, 1};
  ck_assert_int_eq(clcrt_register(g_rt, &d, &k3), CLCRT_OK);
  ck_assert(!built(k3, CLCRT_USE_TRACE)); /* nothing observes: nothing built */
  /* A stream that goes while it observes is uncounted. */
  clcrt_stream *s2 = NULL;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s2), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_trace_enable(s2, 10), CLCRT_OK);
  ck_assert(built(k3, CLCRT_USE_TRACE));
  ck_assert_int_eq(g_rt->observing, 1);
  clcrt_stream_destroy(s2);
  ck_assert_int_eq(g_rt->observing, 0);
}
END_TEST

/* Should a traced run find no observed variant (its build failed when tracing was enabled, which
 * said so): the run is not refused, and its tiles are counted as dropped records. */
static int g_warnings;
static void count_warnings(void *user, clcrt_log_level lvl, const char *msg) {
  (void)user, (void)msg;
  g_warnings += lvl == CLCRT_LOG_WARN;
}
START_TEST(traced_run_without_observed_variant_says_so) {
  ck_assert_int_eq(clcrt_stream_trace_enable(g_s, 100), CLCRT_OK);
  g_rt->opts.log = count_warnings;
  __atomic_and_fetch(&g_fixed->vars->ready, ~(1u << CLCRT_USE_TRACE), __ATOMIC_RELAXED); /* as if it had failed */
  ck_assert_int_eq(run(g_fixed, 30, 2, 1), CLCRT_OK);
  ck_assert_int_eq(run(g_fixed, 7, 1, 1), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, g_fixed->fn);
  ck_assert_uint_eq(g_p.trace, 0);
  ck_assert_int_eq(g_warnings, 1); /* once per stream */
  clcrt_trace *t = NULL;
  ck_assert_int_eq(clcrt_stream_trace_read(g_s, &t), CLCRT_OK);
  ck_assert_uint_eq(clcrt_trace_dropped(t), 67);
  clcrt_trace_destroy(t);
  ck_assert_int_eq(clcrt_stream_trace_read(g_s, &t), CLCRT_OK);
  ck_assert_uint_eq(clcrt_trace_dropped(t), 0);
  clcrt_trace_destroy(t);
  g_rt->opts.log = NULL;
}
END_TEST

/* Destroying a runtime with builds queued and one running: the queued ones are dropped, the
 * running one finishes first, nothing is freed under it (the ASan build checks the memory). */
START_TEST(destroy_cancels_and_joins_builds) {
  clcrt_runtime *rt = NULL;
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = "";
  ck_assert_int_eq(clcrt_runtime_create(&rt, &o), CLCRT_OK);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  clcrt_kernel *k[3];
  for (int i = 0; i < 3; i++) {
    clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
    d.source = SRC, d.tile_fn = "mark", d.args_type = "A", d.block = (clcrt_dim3){64u * (unsigned)(i + 1), 1, 1};
    d.sched = CLCRT_SCHED_STEAL;
    ck_assert_int_eq(clcrt_register(rt, &d, &k[i]), CLCRT_OK);
  }
  g_capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  for (int i = 0; i < 3; i++) ck_assert_int_eq(clcrt_run(s, k[i], (clcrt_dim3){50000, 1, 1}, &g_a, sizeof g_a), CLCRT_OK);
  g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
  for (int i = 0; i < 3; i++) ck_assert_int_eq(clcrt_run(s, k[i], (clcrt_dim3){10, 1, 1}, &g_a, sizeof g_a), CLCRT_OK);
  usleep(30000); /* the worker finds them and starts one */
  clcrt_stream_destroy(s);
  double t0 = now_ns();
  clcrt_runtime_destroy(rt);
  printf("test_launch: runtime destroyed with 6 builds asked for 30 ms earlier in %.1f ms\n", (now_ns() - t0) / 1e6);
}
END_TEST

/* Asynchronous registrations (async.c) and background builds (builder.c) at one teardown: a
 * runtime destroyed while compiles of clcrt_register_async run, whose registrations ask its
 * worker for yielding variants (streams of two priorities live on the context). Destroy waits
 * for the running compiles and orphans the rest first, then stops the worker (the builds those
 * registrations queued are dropped), so that no kernel is freed under a build (the ASan build
 * checks the memory); every callback then gets CLCRT_E_CANCELLED and no kernel. */
typedef struct {
  int calls, cancelled, kernels;
} async_seen;
static void async_cb(void *user, clcrt_status st, clcrt_kernel *k, const char *msg) {
  async_seen *a = user;
  a->calls++;
  a->cancelled += st == CLCRT_E_CANCELLED && msg && strstr(msg, "destroyed");
  a->kernels += k != NULL;
}
START_TEST(destroy_orphans_async_compiles_then_stops_builds) {
  clcrt_runtime *rt = NULL;
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = "";
  ck_assert_int_eq(clcrt_runtime_create(&rt, &o), CLCRT_OK);
  clcrt_stream *s = NULL, *hi = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK); /* starts rt's worker */
  clcrt_stream_destroy(s);
  ck_assert_ptr_nonnull(rt->builder);
  /* g_s (the lowest level) and this one live on the context both runtimes share. */
  ck_assert_int_eq(clcrt_stream_create(g_rt, HI_STREAM, &hi), CLCRT_OK);
  ck_assert(clcrt__devstate_mixed(rt->devstate));
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  async_seen seen = {0, 0, 0};
  enum { N = 3 };
  for (int i = 0; i < N; i++) {
    clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
    d.source = SRC, d.tile_fn = "mark", d.args_type = "A", d.block = (clcrt_dim3){96u + 32u * (unsigned)i, 1, 1};
    d.sched = CLCRT_SCHED_STEAL;
    ck_assert_int_eq(clcrt_register_async(rt, &d, &loop, async_cb, &seen), CLCRT_OK);
  }
  usleep(20000); /* the pool has started the compiles (each takes tens of ms) */
  clcrt_runtime_destroy(rt);
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(seen.calls, N);
  ck_assert_int_eq(seen.cancelled, N);
  ck_assert_int_eq(seen.kernels, 0);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  clcrt_stream_destroy(hi);
  clcrt__builder_wait(g_rt); /* hi asked g_rt's worker for yielding variants: not at this process's exit */
}
END_TEST

/* A process that exits with a background build running (its runtime never destroyed, as a
 * program that returns from main, or an interpreter shutting down, leaves it): the build
 * finishes before NVRTC is torn down, and the process exits normally. It crashed inside
 * nvrtcCompileProgram before builder.c stopped its workers at exit.
 *
 * The process is this binary again (fork, then exec with CLCRT_TEST_EXIT_CHILD=i), not a bare
 * fork of the test: the test's process has a build thread (its stream started one), and a
 * child forked while that thread was inside the allocator inherited the allocator's lock held.
 * Under ASan, whose allocator takes no lock around fork, the child's first compile then waited
 * forever (seen on the build machine: 2 of 3 runs, a backtrace in SizeClassAllocator64's
 * mutex under nvrtcCompileProgram). exit_child is the process's whole life. */
static int exit_child(int i) {
  use_fake_driver();
  clcrt_runtime *rt = NULL;
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = "";
  if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) _exit(10);
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = SRC, d.tile_fn = "mark", d.args_type = "A", d.block = (clcrt_dim3){160u + 32u * (unsigned)i, 1, 1};
  d.sched = CLCRT_SCHED_STEAL;
  clcrt_kernel *k = NULL;
  clcrt_stream *lo = NULL, *hi = NULL;
  if (clcrt_register(rt, &d, &k) != CLCRT_OK) _exit(11);
  if (clcrt_stream_create(rt, NULL, &lo) != CLCRT_OK) _exit(12);
  /* Two priorities: the yielding variant is asked of the worker, which starts compiling. */
  if (clcrt_stream_create(rt, HI_STREAM, &hi) != CLCRT_OK) _exit(13);
  usleep(3000u * (unsigned)(i + 1)); /* into the compile, which takes tens of ms */
  exit(0);
}

extern char **environ;

START_TEST(exit_with_a_build_running) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ck_assert_msg(n > 0, "readlink /proc/self/exe");
  self[n] = 0;
  size_t nenv = 0;
  while (environ[nenv]) nenv++;
  char **envp = calloc(nenv + 2, sizeof *envp);
  ck_assert_ptr_nonnull(envp);
  memcpy(envp, environ, nenv * sizeof *envp);
  char which[40];
  envp[nenv] = which;
  char *argv[] = {self, NULL};
  for (int i = 0; i < 10; i++) {
    snprintf(which, sizeof which, "CLCRT_TEST_EXIT_CHILD=%d", i);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      /* Nothing but the exec between fork and exec (no allocation: the argument and the
       * environment were made before the fork). */
      execve(self, argv, envp);
      _exit(15);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: %s %d", i,
                  WIFSIGNALED(status) ? "killed by signal" : "exit status",
                  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
  free(envp);
}
END_TEST

/* The host time of the first run in each situation that needs a variant (traced, captured,
 * preemptible, statistics) against the second, on the fake driver: printed, not asserted.
 * In a runtime made in this test's own process (memory inherited from the parent would make
 * every first write a copy-on-write fault), each kernel warmed by plain runs first, so that
 * what differs is what the situation adds. Median of REPS runtimes. */
static double run_on(clcrt_stream *s, const clcrt_kernel *k, unsigned x) {
  double t0 = now_ns();
  ck_assert_int_eq(clcrt_run(s, k, (clcrt_dim3){x, 1, 1}, &g_a, sizeof g_a), CLCRT_OK);
  return now_ns() - t0;
}
static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
START_TEST(first_run_host_time_printed) {
  enum { REPS = 5, SIT = 4 };
  static const char *const names[SIT] = {"traced", "captured", "preemptible", "statistics"};
  double first[SIT][REPS], second[SIT][REPS];
  for (int r = 0; r < REPS; r++) {
    clcrt_runtime *rt = NULL;
    clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
    o.cache_dir = "";
    ck_assert_int_eq(clcrt_runtime_create(&rt, &o), CLCRT_OK);
    clcrt_stream *s = NULL, *hi = NULL;
    ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
    clcrt_kernel *k[SIT];
    for (int i = 0; i < SIT; i++) {
      clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
      d.source = SRC, d.tile_fn = "mark", d.args_type = "A", d.block = (clcrt_dim3){64u * (unsigned)(i + 1), 1, 1};
      d.sched = CLCRT_SCHED_STEAL;
      ck_assert_int_eq(clcrt_register(rt, &d, &k[i]), CLCRT_OK);
    }
    for (int i = 0; i < SIT; i++) {
      for (int w = 0; w < 3; w++) run_on(s, k[i], 20000); /* warm: plain runs of the kernel */
      if (i == 0) ck_assert_int_eq(clcrt_stream_trace_enable(s, 1000), CLCRT_OK);
      if (i == 1) g_capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
      if (i == 2) ck_assert_int_eq(clcrt_stream_create(rt, HI_STREAM, &hi), CLCRT_OK);
      if (i == 3) ck_assert_int_eq(clcrt_stream_stats_enable(s, 1), CLCRT_OK);
      first[i][r] = run_on(s, k[i], 20000);
      second[i][r] = run_on(s, k[i], 20000);
      if (i == 0) ck_assert_int_eq(clcrt_stream_trace_enable(s, 0), CLCRT_OK);
      if (i == 1) g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
      if (i == 2) clcrt_stream_destroy(hi);
      if (i == 3) ck_assert_int_eq(clcrt_stream_stats_enable(s, 0), CLCRT_OK);
    }
    clcrt_stream_destroy(s);
    clcrt_runtime_destroy(rt);
  }
  printf("test_launch: first run in a situation against the second, host time on the fake driver (median of %d):",
         REPS);
  for (int i = 0; i < SIT; i++) {
    qsort(first[i], REPS, sizeof(double), cmp_d);
    qsort(second[i], REPS, sizeof(double), cmp_d);
    printf(" %s %.0f / %.0f ns;", names[i], first[i][REPS / 2], second[i][REPS / 2]);
  }
  printf("\n");
}
END_TEST

/* Long units: what a kernel's claiming runs measured (cycles per unit in the kernel's mapped
 * words) decides whether its next runs go one cluster per unit (the short variant on a full
 * grid, handed out by the GPU's block scheduler) or persistent. */
static void set_unit_cycles(const clcrt_kernel *k, uint32_t c0, uint32_t rest) {
  uint32_t *w = (uint32_t *)(uintptr_t)k->unit_cycles;
  for (unsigned i = 0; i < CLCRT__HINT_WORDS; i++) w[i] = i == 0 ? c0 : rest;
}
static int launched_long3(const clcrt_kernel *k, unsigned x, unsigned y, unsigned z) {
  ck_assert_int_eq(run(k, x, y, z), CLCRT_OK);
  return g_fn == variant_fn(k, CLCRT_USE_SHORT);
}
static int launched_long(const clcrt_kernel *k, unsigned units) { return launched_long3(k, units, 1, 1); }

START_TEST(steal_long_units_go_one_cluster_per_unit) {
  const unsigned resident = FAKE_SMS * FAKE_BLOCKS_PER_SM, lc = g_rt->long_cycles;
  ck_assert_uint_eq(lc, CLCRT__LONG_CYCLES_DEFAULT);
  /* Only STEAL kernels on an AUTO grid with nothing made per CTA have the words; each its own. */
  ck_assert(g_steal->unit_cycles != NULL);
  ck_assert(g_steal2->unit_cycles != NULL);
  ck_assert(g_steal->unit_cycles != g_steal2->unit_cycles);
  ck_assert(g_fixed->unit_cycles == NULL);
  ck_assert(g_static->unit_cycles == NULL);
  ck_assert(g_prologue->unit_cycles == NULL);
  ck_assert(g_persist->unit_cycles == NULL);
  ck_assert_int_gt(g_host_allocs, 0);
  /* Nothing measured yet, or units shorter than long_cycles: persistent, claiming. */
  set_unit_cycles(g_steal, 0, 0);
  ck_assert(!launched_long(g_steal, 20000));
  ck_assert_uint_eq(g_cfg.gridDimX, resident);
  set_unit_cycles(g_steal, lc - 1, lc - 1);
  ck_assert(!launched_long(g_steal, 20000));
  /* Long: one cluster per unit, as FIXED launches them, no ring, no claims, no sequence
   * number or claim line (the next claiming run takes the number this one did not). */
  set_unit_cycles(g_steal, 5 * lc, 5 * lc);
  unsigned seq0 = g_p.seq;
  ck_assert(launched_long(g_steal, 20000));
  ck_assert_uint_eq(g_cfg.gridDimX, 20000);
  ck_assert_uint_eq(g_cfg.gridDimY, 1);
  ck_assert_uint_eq(g_p.num_clusters, 20000);
  ck_assert_uint_eq(g_p.claim_base, 20000);
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRID3, CLCRT__PF_GRID3);
  ck_assert_uint_eq(g_cfg.sharedMemBytes, g_steal->smem_bytes);
  ck_assert_uint_eq(g_p.seq, 0);
  ck_assert_uint_eq(g_p.state, 0);
  set_unit_cycles(g_steal, 0, 0);
  ck_assert(!launched_long(g_steal, 20000));
  ck_assert_uint_eq(g_p.seq, seq0 + 1);
  ck_assert_uint_eq(g_p.state, g_s->state);
  set_unit_cycles(g_steal, 5 * lc, 5 * lc);
  /* A 3-D tile grid: the units' grid itself. */
  ck_assert(launched_long3(g_steal, 300, 20, 4));
  ck_assert_uint_eq(g_cfg.gridDimX, 300);
  ck_assert_uint_eq(g_cfg.gridDimY, 20);
  ck_assert_uint_eq(g_cfg.gridDimZ, 4);
  /* The mean over the words that were written (clusters that measured nothing leave 0). */
  set_unit_cycles(g_steal, 8 * lc, 0);
  ck_assert(launched_long(g_steal, 20000));
  set_unit_cycles(g_steal, lc + 6, lc - 1); /* mean just below long_cycles */
  ck_assert(!launched_long(g_steal, 20000));
  set_unit_cycles(g_steal, lc + 7, lc - 1); /* exactly long_cycles */
  ck_assert(launched_long(g_steal, 20000));
  /* Every CLCRT__HW_RECHECK-th such run goes persistent, so that its units are measured again. */
  set_unit_cycles(g_steal, 5 * lc, 5 * lc);
  int persistent = 0;
  for (unsigned i = 0; i < 4 * CLCRT__HW_RECHECK; i++) persistent += !launched_long(g_steal, 20000);
  ck_assert_int_eq(persistent, 4);
  /* Runs that claim nothing anyway are short runs as before. */
  ck_assert(launched_long(g_steal, 100));
  ck_assert_uint_eq(g_cfg.gridDimX, 100);
  /* Clusters: the bound is per CTA of the cluster (cluster launches cost more). */
  set_unit_cycles(g_steal2, 2 * lc - 1, 2 * lc - 1);
  ck_assert(!launched_long(g_steal2, 20000));
  ck_assert_uint_eq(g_cfg.gridDimX, resident);
  set_unit_cycles(g_steal2, 2 * lc, 2 * lc);
  ck_assert(launched_long(g_steal2, 20001));
  ck_assert_uint_eq(g_cfg.gridDimX, 2 * 10001);
  ck_assert_uint_eq(g_p.num_clusters, 10001);
  set_unit_cycles(g_steal2, 0, 0);
  /* Captured: the short variant on a full grid needs no graph state. */
  g_steal->vars->hw_runs = 0;
  g_capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  ck_assert(launched_long(g_steal, 20000));
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRAPH, CLCRT__PF_GRAPH);
  ck_assert_uint_eq(g_cfg.gridDimX, 20000);
  g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
  /* Explicitly persistent grids, kernels with a prologue and other schedulers never. */
  ck_assert_int_eq(run(g_persist, 20000, 1, 1), CLCRT_OK);
  ck_assert_uint_eq(g_cfg.gridDimX, resident);
  ck_assert_uint_eq(g_p.unit_cycles, 0);
  ck_assert_int_eq(clcrt_run(g_s, g_prologue, (clcrt_dim3){20000, 1, 1}, &g_a, sizeof g_a), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, g_prologue->fn);
  ck_assert_uint_eq(g_p.unit_cycles, 0);
  /* CLCRT_STEAL_LONG_CYCLES=0: never. */
  g_rt->long_cycles = 0;
  ck_assert(!launched_long(g_steal, 20000));
  g_rt->long_cycles = lc;
  set_unit_cycles(g_steal, 0, 0);
}
END_TEST

/* The host cost of clcrt_run's own code, with a driver whose calls cost next to nothing:
 * printed for the README's host-overhead figures; nothing is asserted on time. */
static double ns_per_call(const clcrt_kernel *k, unsigned units, int bare) {
  const int n = 1000000;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; i++) {
    if (bare) {
      CUlaunchConfig c;
      memset(&c, 0, sizeof c);
      c.gridDimX = units, c.gridDimY = c.gridDimZ = 1;
      c.blockDimX = 256, c.blockDimY = c.blockDimZ = 1;
      void *kp[2] = {&g_a, &g_p};
      g_fake.cuLaunchKernelEx(&c, k->fn, kp, NULL);
    } else if (run(k, units, 1, 1) != CLCRT_OK) {
      ck_abort_msg("%s", clcrt_errmsg(g_rt));
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n;
}

START_TEST(host_cost_printed) {
  double best[5] = {1e9, 1e9, 1e9, 1e9, 1e9};
  for (int rep = 0; rep < 3; rep++) {
    double v[5] = {ns_per_call(g_steal, 1, 1), ns_per_call(g_steal, 1, 0), ns_per_call(g_steal, 20000, 0),
                   ns_per_call(g_fixed, 1, 0), ns_per_call(g_static, 20000, 0)};
    for (int i = 0; i < 5; i++)
      if (v[i] < best[i]) best[i] = v[i];
  }
  printf("test_launch: host cost per call with a fake driver (best of 3 x 10^6): fake launch alone %.1f ns; "
         "clcrt_run STEAL 1 tile (short) %.1f ns, STEAL 20000 tiles %.1f ns, FIXED 1 tile %.1f ns, STATIC 20000 "
         "tiles %.1f ns\n",
         best[0], best[1], best[2], best[3], best[4]);
  ck_assert_int_gt(g_launches, 0);
}
END_TEST

int main(void) {
  const char *exit_case = getenv("CLCRT_TEST_EXIT_CHILD"); /* exit_with_a_build_running's process */
  if (exit_case) return exit_child(atoi(exit_case));
  setup_once();
  Suite *s = suite_create("launch");
  TCase *tc = tcase_create("fake driver");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, steal_persistent_grid_claims_the_rest);
  tcase_add_test(tc, steal_two_d_grid_decomposes);
  tcase_add_test(tc, steal_sequence_numbers_follow_the_runs);
  tcase_add_test(tc, steal_short_run_launches_the_short_variant);
  tcase_add_test(tc, steal_clusters_count_units_and_ctas);
  tcase_add_test(tc, steal_captured_runs_use_the_graph_table);
  tcase_add_test(tc, steal_invalidated_capture_is_an_error);
  tcase_add_test(tc, fixed_grids);
  tcase_add_test(tc, static_persistent_grid);
  tcase_add_test(tc, bad_arguments_launch_nothing);
  tcase_add_test(tc, run_ex_pdl);
  tcase_add_test(tc, run_restores_the_context);
  tcase_add_test(tc, steal_long_units_go_one_cluster_per_unit);
  tcase_add_test(tc, host_cost_printed);
  tcase_add_test(tc, plan_table);
  tcase_add_test(tc, plan_chunk_by_occupancy);
  tcase_add_test(tc, captured_runs_never_build);
  tcase_add_test(tc, short_and_long_runs_never_build);
  tcase_add_test(tc, preemptible_streams_build_yielding_variants);
  tcase_add_test(tc, observing_builds_observed_variants_first);
  tcase_add_test(tc, traced_run_without_observed_variant_says_so);
  tcase_add_test(tc, destroy_cancels_and_joins_builds);
  tcase_add_test(tc, destroy_orphans_async_compiles_then_stops_builds);
  tcase_add_test(tc, exit_with_a_build_running);
  tcase_add_test(tc, first_run_host_time_printed);
  tcase_add_test(tc, plan_everywhere);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  clcrt_runtime_destroy(g_rt);
  clcrt__driver_override(NULL);
  return failed ? 1 : 0;
}
