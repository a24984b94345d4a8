/* SM budgets (clcrt_stream_create_ex) on a machine without a GPU: a fake driver stands in for
 * an H100-like device of 132 SMs that partitions SMs as the H100's driver does (co-scheduled
 * groups of 8, at least 8 per partition, 128 SMs in whole groups) and records every green
 * context and stream it makes. The kernels are real (NVRTC, sm_90a); loading and launching are
 * pretended. Checked: the refusals of budgets the device cannot honour and their messages, the
 * rounding flags, the persistent grid sized by the partition (a budget of N SMs gives N x
 * clusters-per-SM), the grid of a user's green-context stream, grid_sms, priorities, green
 * contexts shared between streams of one partition and destroyed after the last of their
 * streams, the remainder side, a driver without green contexts, and that streams without a
 * budget launch what they launched before. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clcrt.h"
#include "builder.h"
#include "driver.h"
#include "common/fake_driver.h"
#include "env.h"
#include "green.h"
#include "internal.h"
#include "sched_state.h"
#include "stream.h"

/* ---- the fake driver ---- */

enum { FAKE_BLOCKS_PER_SM = 8, FAKE_MIN = 8, FAKE_ALIGN = 8, FAKE_GROUPABLE = 128 };

static clcrt__driver g_fake;
static CUlaunchConfig g_cfg; /* the last launch's */
static CUfunction g_fn;
static clcrt__params g_p;
static int g_launches, g_libs;

/* Streams and green contexts the fake made. */
enum { MAX_STREAMS = 256, MAX_GREENS = 64 };
typedef struct {
  int alive, green; /* green: index + 1 into g_greens, 0 for a plain stream */
  int prio;
} fake_stream;
typedef struct {
  int alive, sms, rest, streams;
} fake_green;
static fake_stream g_streams[MAX_STREAMS];
static fake_green g_greens[MAX_GREENS];
static int g_nstreams, g_ngreens, g_green_destroys, g_order_errors, g_splits; /* g_splits: calls */

static CUstream stream_handle(int i) { return (CUstream)(uintptr_t)(0x20000 + 0x10 * (i + 1)); }
static int stream_index(CUstream s) { return (int)(((uintptr_t)s - 0x20000) / 0x10) - 1; }
static CUgreenCtx green_handle(int i) { return (CUgreenCtx)(uintptr_t)(0x40000 + 0x10 * (i + 1)); }
static int green_index(CUgreenCtx g) { return (int)(((uintptr_t)g - 0x40000) / 0x10) - 1; }
static int is_stream(CUstream s) {
  int i = stream_index(s);
  return (uintptr_t)s >= 0x20000 && i >= 0 && i < g_nstreams;
}

static CUresult CUDAAPI f_version(int *v) { *v = 12020; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_error_name(CUresult r, const char **s) {
  (void)r;
  *s = "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_lib_load(CUlibrary *l, const void *code, CUjit_option *jo, void **jv, unsigned nj,
                                   CUlibraryOption *lo, void **lv, unsigned nl) {
  (void)code, (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
  *l = (CUlibrary)(uintptr_t)(0x100000 + 0x100 * ++g_libs);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_param_info(CUfunction f, size_t i, size_t *off, size_t *size) {
  (void)f;
  *off = i == 0 ? 0 : 16;
  *size = i == 0 ? 16 : sizeof(clcrt__params);
  return CUDA_SUCCESS;
}
/* CTAs per SM: 2048 threads, at most FAKE_BLOCKS_PER_SM, and 228 KiB of shared memory with 1 KiB
 * reserved per CTA (as the H100: 100 KiB gives 2, 200 KiB gives 1). */
static unsigned g_blocks_cap = FAKE_BLOCKS_PER_SM; /* blocks of a kernel per SM (16 on the H100) */
static unsigned fake_per_sm(unsigned threads, size_t smem) {
  unsigned n = 2048 / threads < g_blocks_cap ? 2048 / threads : g_blocks_cap;
  unsigned by_smem = (unsigned)(233472 / (smem + 1024));
  return by_smem < n ? by_smem : n;
}
static CUresult CUDAAPI f_occ_blocks(int *n, CUfunction f, int threads, size_t smem) {
  (void)f;
  *n = (int)fake_per_sm((unsigned)threads, smem);
  return CUDA_SUCCESS;
}
/* The whole device, whatever the stream: as the real query answers for a CUfunction. Clusters
 * of 4 CTAs get the H100's answers, which GPC boundaries cut short of CTAs per SM x 132 / 4
 * (248 of 264, 62 of 66, 30 of 33 at 8, 2 and 1 CTAs per SM: inferred from what clcrt derived
 * from them in the GPU probe, floor(d x N / 132) = 30/120/225, 7/30/56, 3/14/27 for N = 16,
 * 64, 120); other clusters lose nothing. */
static CUresult CUDAAPI f_occ_clusters(int *n, CUfunction f, const CUlaunchConfig *c) {
  (void)f;
  unsigned cs = c->gridDimY * c->gridDimZ * (c->gridDimX / FAKE_SMS), threads = c->blockDimX * c->blockDimY * c->blockDimZ;
  unsigned per_sm = fake_per_sm(threads, c->sharedMemBytes);
  /* The H100 runs at most 8 CTAs of a cluster kernel per SM, where 16 blocks of it fit (the
   * GPU probe of tests/gpu_share.c, 2026-11-25: 528 2-CTA and 248 4-CTA clusters of small
   * CTAs on the whole device). */
  if (per_sm > 8) per_sm = 8;
  *n = (int)(FAKE_SMS * per_sm / cs);
  if (cs == 4 && per_sm == 8) *n = 248;
  if (cs == 4 && per_sm == 2) *n = 62;
  if (cs == 4 && per_sm == 1) *n = 30;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_launch(const CUlaunchConfig *c, CUfunction f, void **kp, void **extra) {
  (void)extra;
  g_cfg = *c, g_fn = f;
  memcpy(&g_p, kp[1], sizeof g_p);
  g_launches++;
  return CUDA_SUCCESS;
}
static int new_stream(int green, int prio) {
  ck_assert_int_lt(g_nstreams, MAX_STREAMS);
  g_streams[g_nstreams] = (fake_stream){1, green, prio};
  if (green) g_greens[green - 1].streams++;
  return g_nstreams++;
}
static CUresult CUDAAPI f_stream_create(CUstream *s, unsigned flags) {
  (void)flags;
  *s = stream_handle(new_stream(0, 0));
  return CUDA_SUCCESS;
}
static int g_last_prio = 99;
static CUresult CUDAAPI f_stream_create_prio(CUstream *s, unsigned flags, int prio) {
  (void)flags;
  g_last_prio = prio;
  *s = stream_handle(new_stream(0, prio));
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_stream_destroy(CUstream s) {
  ck_assert(is_stream(s));
  fake_stream *fs = &g_streams[stream_index(s)];
  ck_assert(fs->alive);
  fs->alive = 0;
  if (fs->green) {
    fake_green *g = &g_greens[fs->green - 1];
    if (!g->alive) g_order_errors++; /* the driver: CUDA_ERROR_CONTEXT_IS_DESTROYED, a leak */
    g->streams--;
  }
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_is_capturing(CUstream s, CUstreamCaptureStatus *st) {
  (void)s;
  *st = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_stream_prio(CUstream s, int *p) {
  *p = is_stream(s) ? g_streams[stream_index(s)].prio : 0;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_host_alloc(void **p, size_t n, unsigned flags) {
  (void)flags;
  return (*p = calloc(1, n)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Green contexts. A resource carries its side in _internal_padding[0] (1 a split's group, 2
 * its remainder, 0 the device, 3 a user's), a descriptor its SM count and side. */
static void sm_resource(CUdevResource *r, unsigned sms, unsigned align, unsigned char side) {
  memset(r, 0, sizeof *r);
  r->type = CU_DEV_RESOURCE_TYPE_SM;
  r->sm.smCount = sms;
  r->sm.minSmPartitionSize = FAKE_MIN;
  r->sm.smCoscheduledAlignment = align;
  r->_internal_padding[0] = side;
}
static CUresult CUDAAPI f_dev_resource(CUdevice d, CUdevResource *r, CUdevResourceType t) {
  (void)d;
  if (t != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  sm_resource(r, FAKE_SMS, FAKE_ALIGN, 0);
  return CUDA_SUCCESS;
}
/* The H100's answers: a group of minCount rounded up to a multiple of 8 (at least 8), none
 * beyond the 128 SMs that whole groups hold; both sides' resources with an alignment of 0, as
 * the H100's driver (580) reported them (the GPU probe printed "groups of 0"). */
static CUresult CUDAAPI f_split(CUdevResource *result, unsigned *nb, const CUdevResource *in, CUdevResource *rest,
                                unsigned flags, unsigned min_count) {
  ck_assert_uint_eq(flags, 0);
  ck_assert_uint_eq(in->_internal_padding[0], 0);
  if (min_count > in->sm.smCount) return CUDA_ERROR_INVALID_VALUE;
  g_splits++;
  unsigned g = min_count < FAKE_MIN ? FAKE_MIN : (min_count + FAKE_ALIGN - 1) / FAKE_ALIGN * FAKE_ALIGN;
  if (g > FAKE_GROUPABLE) {
    *nb = 0;
    return CUDA_SUCCESS;
  }
  if (result) {
    ck_assert_uint_ge(*nb, 1);
    sm_resource(&result[0], g, 0, 1);
  }
  if (rest) sm_resource(rest, FAKE_SMS - g, 0, 2);
  *nb = 1;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_gen_desc(CUdevResourceDesc *d, CUdevResource *r, unsigned n) {
  ck_assert_uint_eq(n, 1);
  *d = (CUdevResourceDesc)(uintptr_t)(((uintptr_t)r->sm.smCount << 8) | r->_internal_padding[0]);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_green_create(CUgreenCtx *g, CUdevResourceDesc d, CUdevice dev, unsigned flags) {
  (void)dev;
  ck_assert_uint_eq(flags, CU_GREEN_CTX_DEFAULT_STREAM);
  ck_assert_int_lt(g_ngreens, MAX_GREENS);
  uintptr_t v = (uintptr_t)d;
  g_greens[g_ngreens] = (fake_green){1, (int)(v >> 8), (int)(v & 0xff) == 2, 0};
  *g = green_handle(g_ngreens++);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_green_destroy(CUgreenCtx g) {
  fake_green *f = &g_greens[green_index(g)];
  ck_assert(f->alive);
  if (f->streams) g_order_errors++; /* streams left on a destroyed green context */
  f->alive = 0;
  g_green_destroys++;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_green_resource(CUgreenCtx g, CUdevResource *r, CUdevResourceType t) {
  ck_assert_int_eq(t, CU_DEV_RESOURCE_TYPE_SM);
  const fake_green *f = &g_greens[green_index(g)];
  ck_assert(f->alive);
  sm_resource(r, (unsigned)f->sms, f->rest ? 1 : FAKE_ALIGN, 3);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_green_stream(CUstream *s, CUgreenCtx g, unsigned flags, int prio) {
  ck_assert_uint_eq(flags & CU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
  ck_assert(g_greens[green_index(g)].alive);
  g_last_prio = prio;
  *s = stream_handle(new_stream(green_index(g) + 1, prio));
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_stream_ctx(CUstream s, CUcontext *c, CUgreenCtx *g) {
  *c = FAKE_CTX;
  *g = is_stream(s) && g_streams[stream_index(s)].green ? green_handle(g_streams[stream_index(s)].green - 1) : NULL;
  return CUDA_SUCCESS;
}

static void use_fake_driver(void) {
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
  g_fake.cuStreamGetPriority = f_stream_prio;
  g_fake.cuStreamIsCapturing = f_is_capturing;
  g_fake.cuMemHostAlloc = f_host_alloc;
  g_fake.cuDeviceGetDevResource = f_dev_resource;
  g_fake.cuDevSmResourceSplitByCount = f_split;
  g_fake.cuDevResourceGenerateDesc = f_gen_desc;
  g_fake.cuGreenCtxCreate = f_green_create;
  g_fake.cuGreenCtxDestroy = f_green_destroy;
  g_fake.cuGreenCtxGetDevResource = f_green_resource;
  g_fake.cuGreenCtxStreamCreate = f_green_stream;
  g_fake.cuStreamGetCtx_v2 = f_stream_ctx;
  clcrt__driver_override(&g_fake);
}

/* ---- kernels: registered once, before the tests fork ---- */

static const char *const SRC =
    "struct A { unsigned *hits; unsigned long long n; };\n"
    "__device__ void mark(const clcrt::Tile &t, const A &a) {\n"
    "  if (threadIdx.x == 0 && t.linear < a.n) atomicAdd(&a.hits[t.linear], 1u);\n"
    "}\n";
typedef struct {
  void *hits;
  unsigned long long n;
} A;
static A g_a = {(void *)0x5000, 1000};
static clcrt_runtime *g_rt;
static clcrt_kernel *g_steal, *g_steal2, *g_static, *g_fixed;
/* 4-CTA clusters of 128 threads with 0, 100 and 200 KiB of shared memory: the GPU probe's. */
static const unsigned C4_SMEM[3] = {0, 100u << 10, 200u << 10};
static clcrt_kernel *g_c4[3];

static clcrt_kernel *reg_ex(clcrt_sched sched, unsigned cluster, clcrt_grid grid, unsigned threads, unsigned smem) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = SRC, d.tile_fn = "mark", d.args_type = "A";
  d.block = (clcrt_dim3){threads, 1, 1};
  d.cluster = (clcrt_dim3){cluster, 1, 1};
  d.sched = sched, d.grid = grid, d.smem_bytes = smem;
  clcrt_kernel *k = NULL;
  if (clcrt_register(g_rt, &d, &k) != CLCRT_OK) {
    fprintf(stderr, "test_share: registering failed: %s\n", clcrt_errmsg(g_rt));
    exit(1);
  }
  return k;
}
static clcrt_kernel *reg(clcrt_sched sched, unsigned cluster, clcrt_grid grid) {
  return reg_ex(sched, cluster, grid, 256, 0);
}

static void setup_once(void) {
  setenv("CLCRT_WARMUP", "0", 1);
  use_fake_driver();
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = "";
  if (clcrt_runtime_create(&g_rt, &o) != CLCRT_OK) {
    fprintf(stderr, "test_share: runtime on the fake driver: %s\n", clcrt_errmsg(g_rt));
    exit(1);
  }
  g_steal = reg(CLCRT_SCHED_STEAL, 1, CLCRT_GRID_AUTO);
  g_steal2 = reg(CLCRT_SCHED_STEAL, 2, CLCRT_GRID_AUTO);
  g_static = reg(CLCRT_SCHED_STATIC, 1, CLCRT_GRID_AUTO);
  g_fixed = reg(CLCRT_SCHED_FIXED, 1, CLCRT_GRID_AUTO);
  for (int i = 0; i < 3; i++) g_c4[i] = reg_ex(CLCRT_SCHED_STEAL, 4, CLCRT_GRID_PERSISTENT, 128, C4_SMEM[i]);
  if (clcrt_kernel_prepare(g_steal, CLCRT_USE_SHORT | CLCRT_USE_PREEMPT) != CLCRT_OK ||
      clcrt_kernel_prepare(g_steal2, CLCRT_USE_SHORT) != CLCRT_OK) {
    fprintf(stderr, "test_share: variants: %s\n", clcrt_errmsg(g_rt));
    exit(1);
  }
  /* Long units never: these runs claim (the words are zero anyway; no kernel ran). */
  g_rt->long_cycles = 0;
}

static void setup(void) {
  g_launches = 0;
  fake_current = FAKE_CTX;
  memset(&g_cfg, 0, sizeof g_cfg);
  memset(&g_p, 0, sizeof g_p);
}

/* Streams of two priorities ask the runtime's worker for yielding variants in the background
 * (builder.c): waited for, so that no build is running when the test's process exits. */
static void teardown(void) { clcrt__builder_wait(g_rt); }

static clcrt_stream *make(unsigned budget, unsigned flags, unsigned prio, unsigned grid_sms) {
  clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
  o.sm_budget = budget, o.flags = flags, o.priority = prio, o.grid_sms = grid_sms;
  clcrt_stream *s = NULL;
  clcrt_status st = clcrt_stream_create_ex(g_rt, &o, &s);
  ck_assert_msg(st == CLCRT_OK, "budget %u flags %u: %s", budget, flags, clcrt_errmsg(g_rt));
  return s;
}

/* The refusal of opts: its status and every expected piece of its message; nothing left made. */
static void refused(const clcrt_stream_opts *o, clcrt_status want, const char *m1, const char *m2) {
  int streams = g_nstreams, greens = g_ngreens;
  clcrt_stream *s = (clcrt_stream *)0x1;
  clcrt_status st = clcrt_stream_create_ex(g_rt, o, &s);
  const char *msg = clcrt_errmsg(g_rt);
  ck_assert_msg(st == want, "budget %u flags %u: %s, expected %s (%s)", o->sm_budget, o->flags, clcrt_status_name(st),
                clcrt_status_name(want), msg);
  ck_assert_ptr_null(s);
  ck_assert_msg(strstr(msg, m1) != NULL, "message \"%s\" lacks \"%s\"", msg, m1);
  if (m2) ck_assert_msg(strstr(msg, m2) != NULL, "message \"%s\" lacks \"%s\"", msg, m2);
  ck_assert_int_eq(g_nstreams, streams);
  ck_assert_int_eq(g_ngreens, greens);
}
static void refused_budget(unsigned budget, unsigned flags, clcrt_status want, const char *m1, const char *m2) {
  clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
  o.sm_budget = budget, o.flags = flags;
  refused(&o, want, m1, m2);
}

static clcrt_status run(clcrt_stream *s, const clcrt_kernel *k, unsigned x) {
  return clcrt_run(s, k, (clcrt_dim3){x, 1, 1}, &g_a, sizeof g_a);
}
static CUfunction variant_fn(const clcrt_kernel *k, unsigned uses) {
  const clcrt_kernel *v = NULL;
  ck_assert_int_eq(clcrt_kernel_variant(k, uses, &v), CLCRT_OK);
  return v->fn;
}
static unsigned fastdiv(unsigned n, unsigned mul, unsigned shr) {
  return mul == 0 ? n : (unsigned)(((unsigned long long)n * mul) >> 32) >> shr;
}

/* A STEAL run of many units on s: a persistent grid of `resident` clusters, claims after them,
 * the guided bound dividing by 2 x resident; on s's own CUstream. */
static void check_persistent(clcrt_stream *s, unsigned resident) {
  ck_assert_int_eq(run(s, g_steal, 20000), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, g_steal->fn);
  ck_assert_ptr_eq(g_cfg.hStream, clcrt_stream_cu(s));
  ck_assert_uint_eq(g_cfg.gridDimX, resident);
  ck_assert_uint_eq(g_p.num_clusters, resident);
  ck_assert_uint_eq(g_p.active, resident);
  ck_assert_uint_eq(g_p.claim_base, resident);
  for (unsigned n = 0; n < (1u << 31); n = n * 3 + 7)
    ck_assert_uint_eq(fastdiv(n, g_p.guide_mul, g_p.guide_shr), n / (2 * resident));
  ck_assert_int_eq(run(s, g_static, 50000), CLCRT_OK);
  ck_assert_uint_eq(g_cfg.gridDimX, resident);
}

/* ---- tests ---- */

/* No budget: what clcrt_stream_create always launched (the whole device's grid), no green
 * context made, for clcrt's own streams and for plain user streams. */
START_TEST(no_budget_is_unchanged) {
  const unsigned resident = FAKE_SMS * FAKE_BLOCKS_PER_SM;
  clcrt_stream *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &a), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_create_ex(g_rt, NULL, &b), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_create_ex(g_rt, &o, &c), CLCRT_OK);
  CUstream user;
  ck_assert_int_eq(g_fake.cuStreamCreate(&user, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ck_assert_int_eq(clcrt_stream_create(g_rt, user, &d), CLCRT_OK);
  clcrt_stream *all[4] = {a, b, c, d};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(clcrt_stream_sms(all[i]), FAKE_SMS);
    ck_assert_int_eq(clcrt_stream_grid_sms(all[i]), FAKE_SMS);
    ck_assert_int_eq(clcrt_stream_priority(all[i]), 0);
    check_persistent(all[i], resident);
    ck_assert_int_eq(run(all[i], g_steal2, 20001), CLCRT_OK);
    ck_assert_uint_eq(g_cfg.gridDimX, resident);
    clcrt_stream_destroy(all[i]);
  }
  ck_assert_int_eq(g_ngreens, 0);
  ck_assert_int_eq(g_splits, 0);
  ck_assert(g_streams[stream_index(user)].alive); /* the user's stays the user's */
  ck_assert_int_eq(clcrt_stream_sms(NULL), -1);
  ck_assert_int_eq(clcrt_stream_grid_sms(NULL), -1);
}
END_TEST

/* A budget of N SMs: a green context of N SMs, a stream on it, and persistent grids of N x
 * clusters-per-SM (1- and 2-CTA clusters, STEAL and STATIC); runs of one cluster per unit
 * (FIXED) as before; a run of exactly as many units as fit in the partition claims nothing. */
START_TEST(budget_sizes_the_persistent_grid) {
  static const unsigned budgets[] = {16, 64, 120};
  for (int i = 0; i < 3; i++) {
    const unsigned n = budgets[i], resident = n * FAKE_BLOCKS_PER_SM;
    clcrt_stream *s = make(n, 0, 0, 0);
    ck_assert_int_eq(clcrt_stream_sms(s), (int)n);
    ck_assert_int_eq(clcrt_stream_grid_sms(s), (int)n);
    const fake_stream *fs = &g_streams[stream_index(clcrt_stream_cu(s))];
    ck_assert_int_ne(fs->green, 0);
    ck_assert_int_eq(g_greens[fs->green - 1].sms, (int)n);
    check_persistent(s, resident);
    ck_assert_int_eq(run(s, g_steal2, 20001), CLCRT_OK);
    ck_assert_uint_eq(g_p.num_clusters, resident / 2);
    ck_assert_uint_eq(g_cfg.gridDimX, resident);
    ck_assert_int_eq(run(s, g_steal, resident), CLCRT_OK);
    ck_assert_ptr_eq(g_fn, variant_fn(g_steal, CLCRT_USE_SHORT));
    ck_assert_int_eq(run(s, g_steal, resident + 1), CLCRT_OK);
    ck_assert_ptr_eq(g_fn, g_steal->fn);
    ck_assert_uint_eq(g_p.claim_base, resident);
    ck_assert_int_eq(clcrt_run(s, g_fixed, (clcrt_dim3){100, 20, 3}, &g_a, sizeof g_a), CLCRT_OK);
    ck_assert_uint_eq(g_cfg.gridDimX, 100);
    ck_assert_uint_eq(g_cfg.gridDimY, 20);
    clcrt_stream_destroy(s);
  }
  ck_assert_int_eq(g_order_errors, 0);
}
END_TEST

/* A budget the device cannot honour is refused, saying why and what it can make; the
 * rounding flags take what it can make. */
START_TEST(budget_refusals_and_rounding) {
  refused_budget(200, 0, CLCRT_E_INVALID, "budget of 200", "this device's 132 SMs");
  refused_budget(200, CLCRT_STREAM_SM_ROUND_DOWN, CLCRT_E_INVALID, "132 SMs", NULL);
  refused_budget(4, 0, CLCRT_E_UNSUPPORTED, "smallest partition this device makes (8 SMs)",
                 "CLCRT_STREAM_SM_ROUND_UP");
  refused_budget(66, 0, CLCRT_E_UNSUPPORTED, "the driver would make 72", "or 64");
  refused_budget(66, 0, CLCRT_E_UNSUPPORTED, "co-scheduled groups of 8", "CLCRT_STREAM_SM_ROUND_DOWN");
  refused_budget(132, 0, CLCRT_E_UNSUPPORTED, "no partition of 132", "or 128");
  refused_budget(132, CLCRT_STREAM_SM_ROUND_UP, CLCRT_E_UNSUPPORTED, "no partition of 132", NULL);
  struct {
    unsigned budget, flags;
    int sms;
  } ok[] = {{4, CLCRT_STREAM_SM_ROUND_UP, 8},   {66, CLCRT_STREAM_SM_ROUND_UP, 72},
            {66, CLCRT_STREAM_SM_ROUND_DOWN, 64}, {132, CLCRT_STREAM_SM_ROUND_DOWN, 128},
            {8, 0, 8},                            {128, 0, 128}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    clcrt_stream *s = make(ok[i].budget, ok[i].flags, 0, 0);
    ck_assert_int_eq(clcrt_stream_sms(s), ok[i].sms);
    check_persistent(s, (unsigned)ok[i].sms * FAKE_BLOCKS_PER_SM);
    clcrt_stream_destroy(s);
  }
  /* The options themselves. */
  CUstream user;
  ck_assert_int_eq(g_fake.cuStreamCreate(&user, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
  o.cu = user, o.sm_budget = 16;
  refused(&o, CLCRT_E_INVALID, "CUstream of your own takes no sm_budget", NULL);
  o.sm_budget = 0, o.priority = 1;
  refused(&o, CLCRT_E_INVALID, "priority", NULL);
  o = (clcrt_stream_opts)CLCRT_STREAM_OPTS_INIT;
  o.flags = CLCRT_STREAM_SM_ROUND_UP;
  refused(&o, CLCRT_E_INVALID, "need an sm_budget", NULL);
  o.sm_budget = 16, o.flags = CLCRT_STREAM_SM_ROUND_UP | CLCRT_STREAM_SM_ROUND_DOWN;
  refused(&o, CLCRT_E_INVALID, "exclude each other", NULL);
  o.flags = 0x100;
  refused(&o, CLCRT_E_INVALID, "unknown flags 0x100", NULL);
  o.flags = 0, o.grid_sms = 133;
  refused(&o, CLCRT_E_INVALID, "grid_sms 133", NULL);
  o.grid_sms = 0, o.size = 8;
  refused(&o, CLCRT_E_INVALID, "CLCRT_STREAM_OPTS_INIT", NULL);
  o.size = sizeof o + 8;
  refused(&o, CLCRT_E_INVALID, "CLCRT_STREAM_OPTS_INIT", NULL);
  ck_assert_int_eq(clcrt_stream_create_ex(g_rt, NULL, NULL), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_stream_create_ex(NULL, NULL, NULL), CLCRT_E_INVALID);
  ck_assert_int_eq(g_order_errors, 0);
}
END_TEST

/* Streams of one partition share its green context; it is destroyed once, after the last of
 * its streams. Different sizes are different green contexts. */
START_TEST(green_contexts_shared_and_freed_last) {
  clcrt_stream *a = make(16, 0, 0, 0), *b = make(16, 0, 0, 0);
  ck_assert_int_eq(g_ngreens, 1);
  ck_assert_int_eq(g_streams[stream_index(clcrt_stream_cu(a))].green, g_streams[stream_index(clcrt_stream_cu(b))].green);
  ck_assert_ptr_ne(clcrt_stream_cu(a), clcrt_stream_cu(b));
  clcrt_stream *c = make(64, 0, 0, 0);
  ck_assert_int_eq(g_ngreens, 2);
  clcrt_stream *d = make(60, CLCRT_STREAM_SM_ROUND_UP, 0, 0); /* 64 again */
  ck_assert_int_eq(g_ngreens, 2);
  clcrt_stream_destroy(a);
  ck_assert_int_eq(g_green_destroys, 0);
  clcrt_stream_destroy(b);
  ck_assert_int_eq(g_green_destroys, 1);
  ck_assert(!g_greens[0].alive);
  clcrt_stream_destroy(c);
  ck_assert_int_eq(g_green_destroys, 1);
  clcrt_stream_destroy(d);
  ck_assert_int_eq(g_green_destroys, 2);
  /* A later stream of 16 makes a fresh one. */
  clcrt_stream *e = make(16, 0, 0, 0);
  ck_assert_int_eq(g_ngreens, 3);
  clcrt_stream_destroy(e);
  ck_assert_int_eq(g_green_destroys, 3);
  ck_assert_int_eq(g_order_errors, 0);
}
END_TEST

/* CLCRT_STREAM_SM_REST: the remainder of the same split, on a green context of its own. */
START_TEST(rest_is_the_other_side) {
  clcrt_stream *gemm = make(16, 0, 0, 0), *comm = make(16, CLCRT_STREAM_SM_REST, 0, 0);
  ck_assert_int_eq(clcrt_stream_sms(comm), FAKE_SMS - 16);
  const fake_green *gg = &g_greens[g_streams[stream_index(clcrt_stream_cu(gemm))].green - 1];
  const fake_green *gc = &g_greens[g_streams[stream_index(clcrt_stream_cu(comm))].green - 1];
  ck_assert(gg != gc);
  ck_assert(!gg->rest && gc->rest);
  ck_assert_int_eq(gc->sms, FAKE_SMS - 16);
  /* Not whole groups (the remainder's alignment is 1): in proportion, exact for 1-CTA. */
  check_persistent(comm, (FAKE_SMS - 16) * FAKE_BLOCKS_PER_SM);
  ck_assert_int_eq(run(comm, g_steal2, 20001), CLCRT_OK);
  ck_assert_uint_eq(g_p.num_clusters, (FAKE_SMS - 16) * FAKE_BLOCKS_PER_SM / 2);
  clcrt_stream_destroy(gemm);
  ck_assert_int_eq(g_green_destroys, 1);
  clcrt_stream_destroy(comm);
  ck_assert_int_eq(g_green_destroys, 2);
  ck_assert_int_eq(g_order_errors, 0);
}
END_TEST

/* A CUstream of the user's own green context: sized for its SMs, found through the stream;
 * the stream and the green context stay the user's. */
START_TEST(user_green_context_stream) {
  CUdevResource r;
  sm_resource(&r, 24, FAKE_ALIGN, 3);
  CUdevResourceDesc desc;
  CUgreenCtx g;
  CUstream cu;
  ck_assert_int_eq(g_fake.cuDevResourceGenerateDesc(&desc, &r, 1), CUDA_SUCCESS);
  ck_assert_int_eq(g_fake.cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
  ck_assert_int_eq(g_fake.cuGreenCtxStreamCreate(&cu, g, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  clcrt_stream *a = NULL, *b = NULL;
  ck_assert_int_eq(clcrt_stream_create(g_rt, cu, &a), CLCRT_OK);
  clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
  o.cu = cu;
  ck_assert_int_eq(clcrt_stream_create_ex(g_rt, &o, &b), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sms(a), 24);
  ck_assert_int_eq(clcrt_stream_sms(b), 24);
  check_persistent(a, 24 * FAKE_BLOCKS_PER_SM);
  check_persistent(b, 24 * FAKE_BLOCKS_PER_SM);
  ck_assert_int_eq(run(a, g_steal2, 20001), CLCRT_OK);
  ck_assert_uint_eq(g_p.num_clusters, 24 * FAKE_BLOCKS_PER_SM / 2);
  clcrt_stream_destroy(a);
  clcrt_stream_destroy(b);
  ck_assert(g_streams[stream_index(cu)].alive);
  ck_assert(g_greens[green_index(g)].alive);
  ck_assert_int_eq(g_green_destroys, 0);
  ck_assert_int_eq(g_fake.cuStreamDestroy(cu), CUDA_SUCCESS);
  ck_assert_int_eq(g_fake.cuGreenCtxDestroy(g), CUDA_SUCCESS);
  ck_assert_int_eq(g_order_errors, 0);
}
END_TEST

/* grid_sms: the whole device's grid on a budget stream (oversubscribed, as before budgets),
 * or a smaller grid on a plain stream. */
START_TEST(grid_sms_overrides_the_size) {
  clcrt_stream *big = make(16, 0, 0, FAKE_SMS), *small = make(0, 0, 0, 66);
  ck_assert_int_eq(clcrt_stream_sms(big), 16);
  ck_assert_int_eq(clcrt_stream_grid_sms(big), FAKE_SMS);
  check_persistent(big, FAKE_SMS * FAKE_BLOCKS_PER_SM);
  ck_assert_int_eq(clcrt_stream_sms(small), FAKE_SMS);
  ck_assert_int_eq(clcrt_stream_grid_sms(small), 66);
  check_persistent(small, 66 * FAKE_BLOCKS_PER_SM);
  ck_assert_int_eq(g_streams[stream_index(clcrt_stream_cu(small))].green, 0);
  clcrt_stream_destroy(big);
  clcrt_stream_destroy(small);
}
END_TEST

/* Priorities: clcrt's levels to CUDA's numbers, for green-context and plain streams, clamped
 * to the device's range; a budget stream below a more urgent one yields on a reserve grid of
 * its partition's clusters. */
START_TEST(priorities_and_yielding_on_a_budget) {
  clcrt_stream *hi = make(0, 0, 3, 0);
  ck_assert_int_eq(g_last_prio, -3);
  ck_assert_int_eq(clcrt_stream_priority(hi), 3);
  clcrt_stream *top = make(16, 0, 99, 0);
  ck_assert_int_eq(g_last_prio, -5);
  ck_assert_int_eq(clcrt_stream_priority(top), 5);
  clcrt_stream *lo = make(16, 0, 0, 0);
  ck_assert_int_eq(clcrt_stream_priority(lo), 0);
  ck_assert_int_eq(run(lo, g_steal, 20000), CLCRT_OK);
  ck_assert_ptr_eq(g_fn, variant_fn(g_steal, CLCRT_USE_PREEMPT));
  const unsigned resident = 16 * FAKE_BLOCKS_PER_SM;
  ck_assert_uint_eq(g_cfg.gridDimX, resident * (1 + CLCRT__PREEMPT_WAVES_DEFAULT));
  ck_assert_uint_eq(g_p.active, resident);
  ck_assert_uint_eq(g_p.claim_base, resident);
  clcrt_stream_destroy(hi);
  clcrt_stream_destroy(top);
  clcrt_stream_destroy(lo);
}
END_TEST

/* A driver without green contexts: budgets refused as unsupported, saying what is needed;
 * plain and user streams as before. */
START_TEST(driver_without_green_contexts) {
  g_fake.cuGreenCtxCreate = NULL;
  g_fake.cuGreenCtxStreamCreate = NULL;
  g_fake.cuStreamGetCtx_v2 = NULL;
  refused_budget(16, 0, CLCRT_E_UNSUPPORTED, "no green contexts", "12.4");
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(g_rt, NULL, &s), CLCRT_OK);
  check_persistent(s, FAKE_SMS * FAKE_BLOCKS_PER_SM);
  clcrt_stream_destroy(s);
  CUstream user;
  ck_assert_int_eq(g_fake.cuStreamCreate(&user, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ck_assert_int_eq(clcrt_stream_create(g_rt, user, &s), CLCRT_OK);
  ck_assert_int_eq(clcrt_stream_sms(s), FAKE_SMS);
  clcrt_stream_destroy(s);
}
END_TEST

/* What the H100 ran at once on budgets of 16, 64 and 120 SMs (measured by the GPU probe,
 * tests/gpu_share.c) for 4-CTA clusters of 128 threads at 0, 100 and 200 KiB of shared memory:
 * the persistent grid of each. clcrt derived 30/120/225, 7/30/56 and 3/14/27 (9 of 9 short),
 * because the driver reports an alignment of 0 for a split's groups (so the budget was taken in
 * proportion to the device's count, which GPC boundaries cut short), which the fake driver
 * reproduces. The whole device keeps its own count. */
START_TEST(budget_cluster_occupancy_as_the_h100_ran) {
  static const unsigned budgets[3] = {16, 64, 120};
  static const unsigned measured[3][3] = {{32, 128, 240}, {8, 32, 60}, {4, 16, 30}}; /* [smem][budget] */
  static const unsigned device[3] = {248, 62, 30};
  clcrt_stream *whole = make(0, 0, 0, 0);
  for (int m = 0; m < 3; m++) {
    ck_assert_int_eq(g_c4[m]->occ.clusters, (int)device[m]);
    ck_assert_int_eq(run(whole, g_c4[m], 4 * 20000), CLCRT_OK);
    ck_assert_uint_eq(g_p.num_clusters, device[m]);
  }
  for (int b = 0; b < 3; b++) {
    clcrt_stream *s = make(budgets[b], 0, 0, 0);
    ck_assert_uint_eq(s->part.align, FAKE_ALIGN); /* the device's: the split reports 0 */
    for (int m = 0; m < 3; m++) {
      const unsigned want = measured[m][b];
      ck_assert_int_eq(clcrt__stream_clusters(s, &g_c4[m]->occ, 4), (int)want);
      ck_assert_int_eq(run(s, g_c4[m], 4 * 20000), CLCRT_OK);
      ck_assert_msg(g_p.num_clusters == want, "budget %u, %u KiB: %u clusters, the H100 ran %u", budgets[b],
                    C4_SMEM[m] >> 10, g_p.num_clusters, want);
      ck_assert_uint_eq(g_cfg.gridDimX, 4 * want);
      ck_assert_uint_eq(g_p.claim_base, want);
      ck_assert_uint_eq(g_p.active, want);
      for (unsigned n = 0; n < (1u << 31); n = n * 3 + 7)
        ck_assert_uint_eq(fastdiv(n, g_p.guide_mul, g_p.guide_shr), n / (2 * want));
    }
    clcrt_stream_destroy(s);
  }
  clcrt_stream_destroy(whole);
  /* The remainder of a budget of 16 (116 SMs, not whole groups): in proportion, an estimate. */
  clcrt_stream *gemm = make(16, 0, 0, 0), *rest = make(16, CLCRT_STREAM_SM_REST, 0, 0);
  ck_assert_uint_lt(rest->part.align, 2);
  ck_assert_int_eq(run(rest, g_c4[2], 4 * 20000), CLCRT_OK);
  ck_assert_uint_eq(g_p.num_clusters, 30 * 116 / 132);
  clcrt_stream_destroy(gemm);
  clcrt_stream_destroy(rest);
}
END_TEST

/* Small CTAs: 16 blocks of the kernel fit per SM, but the H100 runs at most 8 CTAs of a
 * cluster kernel per SM (probe of 2026-11-25, budgets of 16/64/120 SMs: 64/256/480 2-CTA and
 * 32/128/240 4-CTA clusters resident). The CTAs per SM a partition is derived from are capped
 * by what the device's own cluster count fills (kernel.c); without that cap a budget got twice
 * the clusters that fit. */
START_TEST(budget_cluster_occupancy_small_ctas) {
  static const unsigned budgets[3] = {16, 64, 120};
  static const unsigned measured[2][3] = {{64, 256, 480}, {32, 128, 240}}; /* [c2, c4][budget] */
  g_blocks_cap = 16;
  clcrt_kernel *k[2] = {reg_ex(CLCRT_SCHED_STEAL, 2, CLCRT_GRID_PERSISTENT, 64, 0),
                        reg_ex(CLCRT_SCHED_STEAL, 4, CLCRT_GRID_PERSISTENT, 64, 0)};
  ck_assert_int_eq(k[0]->occ.clusters, 528);
  ck_assert_int_eq(k[1]->occ.clusters, 248);
  ck_assert_int_eq(k[0]->occ.blocks_per_sm, 8);
  ck_assert_int_eq(k[1]->occ.blocks_per_sm, 8);
  for (int b = 0; b < 3; b++) {
    clcrt_stream *s = make(budgets[b], 0, 0, 0);
    for (int c = 0; c < 2; c++) {
      ck_assert_int_eq(run(s, k[c], 4 * 20000), CLCRT_OK);
      ck_assert_msg(g_p.num_clusters == measured[c][b], "budget %u, %u-CTA clusters: %u, the H100 ran %u",
                    budgets[b], 2u << c, g_p.num_clusters, measured[c][b]);
    }
    clcrt_stream_destroy(s);
  }
  g_blocks_cap = FAKE_BLOCKS_PER_SM;
}
END_TEST

/* The derivation of cluster occupancy in a partition (green.h). */
static int clusters(int dev, int per_sm, unsigned cs, int sms, unsigned align) {
  clcrt__occ o;
  memset(&o, 0, sizeof o);
  o.clusters = dev, o.blocks_per_sm = per_sm;
  return clcrt__partition_clusters(&o, cs, 132, sms, align);
}
START_TEST(partition_cluster_arithmetic) {
  /* 1-CTA: CTAs per SM times SMs, whole groups or not. */
  ck_assert_int_eq(clusters(132 * 3, 3, 1, 16, 8), 48);
  ck_assert_int_eq(clusters(132 * 3, 3, 1, 17, 1), 51);
  ck_assert_int_eq(clusters(132 * 3, 3, 1, 17, 0), 51);
  /* The H100's 4-CTA clusters (device 248, 62, 30 at 8, 2, 1 CTAs per SM) on groups of 8: what
   * it ran, 16, 4 and 2 clusters per group. */
  ck_assert_int_eq(clusters(248, 8, 4, 16, 8), 32);
  ck_assert_int_eq(clusters(248, 8, 4, 64, 8), 128);
  ck_assert_int_eq(clusters(248, 8, 4, 120, 8), 240);
  ck_assert_int_eq(clusters(62, 2, 4, 16, 8), 8);
  ck_assert_int_eq(clusters(62, 2, 4, 120, 8), 60);
  ck_assert_int_eq(clusters(30, 1, 4, 16, 8), 4);
  ck_assert_int_eq(clusters(30, 1, 4, 64, 8), 16);
  ck_assert_int_eq(clusters(30, 1, 4, 120, 8), 30);
  /* ... and what it derived without groups (alignment 0): the device's count in proportion. */
  ck_assert_int_eq(clusters(248, 8, 4, 16, 0), 30);
  ck_assert_int_eq(clusters(62, 2, 4, 64, 0), 30);
  ck_assert_int_eq(clusters(30, 1, 4, 120, 0), 27);
  /* A device whose GPC boundaries cost more CTAs than it has SMs (200 of 264 4-CTA clusters):
   * the groups still hold 16 each; the device's count in CTAs per SM (ceil(800 / 132) = 7)
   * would have given 14. */
  ck_assert_int_eq(clusters(200, 8, 4, 16, 8), 32);
  /* 2-CTA clusters, 1 CTA per SM: 4 per group of 8. */
  ck_assert_int_eq(clusters(64, 1, 2, 16, 8), 8);
  /* Not whole groups: in proportion, rounded down. */
  ck_assert_int_eq(clusters(64, 1, 2, 20, 8), 9);
  /* CTAs per SM unknown (the driver did not say for a cluster kernel): in proportion. */
  ck_assert_int_eq(clusters(248, 0, 4, 16, 8), 30);
  /* A cluster larger than a group holds (16 CTAs, 1 per SM): in proportion, at least 1. */
  ck_assert_int_eq(clusters(7, 1, 16, 16, 8), 1);
  ck_assert_int_eq(clusters(7, 1, 16, 64, 8), 3);
  /* The whole device, or more: the query's own answer. */
  ck_assert_int_eq(clusters(64, 1, 2, 132, 8), 64);
  ck_assert_int_eq(clusters(64, 1, 2, 200, 8), 64);
  /* Never more than the device fits, whatever the groups would hold. */
  ck_assert_int_eq(clusters(10, 8, 1, 128, 8), 10);
}
END_TEST

int main(void) {
  setup_once();
  Suite *s = suite_create("share");
  TCase *tc = tcase_create("fake driver");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, no_budget_is_unchanged);
  tcase_add_test(tc, budget_sizes_the_persistent_grid);
  tcase_add_test(tc, budget_refusals_and_rounding);
  tcase_add_test(tc, green_contexts_shared_and_freed_last);
  tcase_add_test(tc, rest_is_the_other_side);
  tcase_add_test(tc, user_green_context_stream);
  tcase_add_test(tc, grid_sms_overrides_the_size);
  tcase_add_test(tc, priorities_and_yielding_on_a_budget);
  tcase_add_test(tc, driver_without_green_contexts);
  tcase_add_test(tc, budget_cluster_occupancy_as_the_h100_ran);
  tcase_add_test(tc, budget_cluster_occupancy_small_ctas);
  tcase_add_test(tc, partition_cluster_arithmetic);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  clcrt_runtime_destroy(g_rt);
  clcrt__driver_override(NULL);
  return failed ? 1 : 0;
}
