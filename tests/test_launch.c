/* clcrt_run's launch logic on a machine without a GPU: a fake driver table stands in for the
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
#include <time.h>

#include "clcrt.h"
#include "driver.h"
#include "env.h"
#include "internal.h"
#include "sched_state.h"
#include "stream.h"

/* ---- the fake driver ---- */

enum { FAKE_SMS = 132, FAKE_BLOCKS_PER_SM = 8 };
static const CUcontext CTX = (CUcontext)0x1000;

static clcrt__driver g_fake;
static CUcontext g_current;
static int g_set_current;             /* cuCtxSetCurrent calls */
static size_t g_args_size = 16;       /* the Args parameter's size cuFuncGetParamInfo reports */
static CUstreamCaptureStatus g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
static CUresult g_launch_result = CUDA_SUCCESS;
static int g_launches;
static CUlaunchConfig g_cfg;           /* the last launch's */
static CUfunction g_fn;
static clcrt__params g_p;
static unsigned char g_args[64];
static int g_libs;

static CUresult CUDAAPI f_init(unsigned f) { (void)f; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_version(int *v) { *v = CUDA_VERSION; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_error_name(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES ? "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_error_string(CUresult r, const char **s) { return f_error_name(r, s); }
static CUresult CUDAAPI f_count(int *n) { *n = 1; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_device_get(CUdevice *d, int i) { *d = i; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_attr(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = FAKE_SMS; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
  case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = 1; break;
  default: *v = 0;
  }
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_name(char *s, int n, CUdevice d) {
  (void)d;
  snprintf(s, (size_t)n, "fake H100");
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_retain(CUcontext *c, CUdevice d) { (void)d; *c = CTX; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_release(CUdevice d) { (void)d; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_set_current(CUcontext c) { g_current = c, g_set_current++; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_get_current(CUcontext *c) { *c = g_current; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_prio_range(int *least, int *greatest) { *least = 0, *greatest = -5; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_lib_load(CUlibrary *l, const void *code, CUjit_option *jo, void **jv, unsigned nj,
                                   CUlibraryOption *lo, void **lv, unsigned nl) {
  (void)code, (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
  *l = (CUlibrary)(uintptr_t)(0x10000 + 0x100 * ++g_libs);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_lib_unload(CUlibrary l) { (void)l; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_get_kernel(CUkernel *k, CUlibrary l, const char *name) {
  (void)name;
  *k = (CUkernel)(uintptr_t)l;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_kernel_fn(CUfunction *f, CUkernel k) { *f = (CUfunction)(uintptr_t)k; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_param_info(CUfunction f, size_t i, size_t *off, size_t *size) {
  (void)f;
  *off = i == 0 ? 0 : (g_args_size + 7) & ~(size_t)7;
  *size = i == 0 ? g_args_size : sizeof(clcrt__params);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_func_get(int *v, CUfunction_attribute a, CUfunction f) {
  (void)a, (void)f;
  *v = 0;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_func_set(CUfunction f, CUfunction_attribute a, int v) {
  (void)f, (void)a, (void)v;
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
  memcpy(g_args, kp[0], g_args_size);
  memcpy(&g_p, kp[1], sizeof g_p);
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
static CUresult CUDAAPI f_stream_sync(CUstream s) { (void)s; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_stream_prio(CUstream s, int *p) { (void)s; *p = 0; return CUDA_SUCCESS; }
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
/* Device memory is host memory. */
static CUresult CUDAAPI f_alloc(CUdeviceptr *p, size_t n) {
  void *m = calloc(1, n);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = (CUdeviceptr)(uintptr_t)m;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_free(CUdeviceptr p) { free((void *)(uintptr_t)p); return CUDA_SUCCESS; }
static CUresult CUDAAPI f_htod(CUdeviceptr d, const void *h, size_t n) {
  memcpy((void *)(uintptr_t)d, h, n);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_dtoh(void *h, CUdeviceptr d, size_t n) {
  memcpy(h, (const void *)(uintptr_t)d, n);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_write32(CUstream s, CUdeviceptr d, cuuint32_t v, unsigned flags) {
  (void)s, (void)flags;
  *(cuuint32_t *)(uintptr_t)d = v;
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
static CUresult CUDAAPI f_host_dev(CUdeviceptr *d, void *p, unsigned flags) {
  (void)flags;
  *d = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_host_free(void *p) {
  free(p);
  return CUDA_SUCCESS;
}

static void use_fake_driver(void) {
  memset(&g_fake, 0, sizeof g_fake);
  g_fake.cuInit = f_init;
  g_fake.cuDriverGetVersion = f_version;
  g_fake.cuGetErrorName = f_error_name;
  g_fake.cuGetErrorString = f_error_string;
  g_fake.cuDeviceGetCount = f_count;
  g_fake.cuDeviceGet = f_device_get;
  g_fake.cuDeviceGetAttribute = f_attr;
  g_fake.cuDeviceGetName = f_name;
  g_fake.cuDevicePrimaryCtxRetain = f_retain;
  g_fake.cuDevicePrimaryCtxRelease = f_release;
  g_fake.cuCtxSetCurrent = f_set_current;
  g_fake.cuCtxGetCurrent = f_get_current;
  g_fake.cuCtxGetStreamPriorityRange = f_prio_range;
  g_fake.cuLibraryLoadData = f_lib_load;
  g_fake.cuLibraryUnload = f_lib_unload;
  g_fake.cuLibraryGetKernel = f_get_kernel;
  g_fake.cuKernelGetFunction = f_kernel_fn;
  g_fake.cuFuncGetParamInfo = f_param_info;
  g_fake.cuFuncGetAttribute = f_func_get;
  g_fake.cuFuncSetAttribute = f_func_set;
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
  g_fake.cuMemcpyHtoD = f_htod;
  g_fake.cuMemcpyDtoH = f_dtoh;
  g_fake.cuStreamWriteValue32 = f_write32;
  g_fake.cuMemHostAlloc = f_host_alloc;
  g_fake.cuMemHostGetDevicePointer = f_host_dev;
  g_fake.cuMemFreeHost = f_host_free;
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
  if (clcrt_stream_create(g_rt, NULL, &g_s) != CLCRT_OK) {
    fprintf(stderr, "test_launch: stream: %s\n", clcrt_errmsg(g_rt));
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

static void setup(void) {
  g_capture = CU_STREAM_CAPTURE_STATUS_NONE;
  g_launch_result = CUDA_SUCCESS;
  g_launches = 0;
  g_current = CTX;
  g_set_current = 0;
  memset(&g_cfg, 0, sizeof g_cfg);
  memset(&g_p, 0, sizeof g_p);
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

/* ---- tests ---- */

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

/* Sequence numbers pick a stream's claim set: consecutive, one per launched run. */
START_TEST(steal_sequence_numbers_follow_the_runs) {
  unsigned first = 0;
  for (int i = 0; i < 5; i++) {
    ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_OK);
    if (i == 0) first = g_p.seq;
    ck_assert_uint_eq(g_p.seq, first + (unsigned)i);
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

/* The context is asked for on every run and made current when someone changed it (the
 * function launched is the runtime context's). */
START_TEST(run_restores_the_context) {
  ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_OK);
  ck_assert_int_eq(g_set_current, 0);
  g_current = (CUcontext)0x9999;
  ck_assert_int_eq(run(g_steal, 20000, 1, 1), CLCRT_OK);
  ck_assert_int_eq(g_set_current, 1);
  ck_assert_ptr_eq(g_current, CTX);
  ck_assert_ptr_eq(g_cfg.hStream, g_s->cu);
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
  /* Long: one cluster per unit, as FIXED launches them, no ring, no claims; the stream's
   * sequence number still goes with it (it zeroes the next run's counter). */
  set_unit_cycles(g_steal, 5 * lc, 5 * lc);
  unsigned seq0 = g_p.seq;
  ck_assert(launched_long(g_steal, 20000));
  ck_assert_uint_eq(g_cfg.gridDimX, 20000);
  ck_assert_uint_eq(g_cfg.gridDimY, 1);
  ck_assert_uint_eq(g_p.num_clusters, 20000);
  ck_assert_uint_eq(g_p.claim_base, 20000);
  ck_assert_uint_eq(g_p.flags & CLCRT__PF_GRID3, CLCRT__PF_GRID3);
  ck_assert_uint_eq(g_cfg.sharedMemBytes, g_steal->smem_bytes);
  ck_assert_uint_eq(g_p.seq, seq0 + 1);
  ck_assert_uint_eq(g_p.state, g_s->state);
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
  g_steal->hw_runs = 0;
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
  const int n = 200000;
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
  for (int rep = 0; rep < 5; rep++) {
    double v[5] = {ns_per_call(g_steal, 1, 1), ns_per_call(g_steal, 1, 0), ns_per_call(g_steal, 20000, 0),
                   ns_per_call(g_fixed, 1, 0), ns_per_call(g_static, 20000, 0)};
    for (int i = 0; i < 5; i++)
      if (v[i] < best[i]) best[i] = v[i];
  }
  printf("test_launch: host cost per call with a fake driver (best of 5 x 200000): fake launch alone %.1f ns; "
         "clcrt_run STEAL 1 tile (short) %.1f ns, STEAL 20000 tiles %.1f ns, FIXED 1 tile %.1f ns, STATIC 20000 "
         "tiles %.1f ns\n",
         best[0], best[1], best[2], best[3], best[4]);
  ck_assert_int_gt(g_launches, 0);
}
END_TEST

int main(void) {
  setup_once();
  Suite *s = suite_create("launch");
  TCase *tc = tcase_create("fake driver");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, NULL);
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
  tcase_add_test(tc, run_restores_the_context);
  tcase_add_test(tc, steal_long_units_go_one_cluster_per_unit);
  tcase_add_test(tc, host_cost_printed);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  clcrt_stream_destroy(g_s);
  clcrt_runtime_destroy(g_rt);
  clcrt__driver_override(NULL);
  return failed ? 1 : 0;
}
