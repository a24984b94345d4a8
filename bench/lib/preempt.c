/* Section "preempt": how long an urgent kernel waits behind a long low-priority run.
 *
 * The experiment: a low-priority run of SPIN_TILES tiles that each keep their SM
 * busy for SPIN_NS (about 37 ms in all); 5 ms into it, a 132-block kernel goes onto a stream of
 * the highest priority, bracketed by clcrt_preempt_begin/end (a foreign kernel), and the time
 * from its enqueue to its end is measured with events on that stream (the first event completes
 * when the stream reaches it, at once, since the stream is otherwise idle). The low-priority run
 * is the hand-written one-block-per-tile kernel, clcrt FIXED, STATIC, STEAL as AUTO chooses it
 * while a stream of higher priority exists (a full grid that yields), and STEAL forced onto a
 * persistent grid (which cannot yield). Then: what arming costs when nothing urgent arrives,
 * on the uniform and skewed workloads, STEAL with and without a stream of higher priority. */
#include <string.h>
#include <time.h>

#include "bench.h"

#define SPIN_COMMON                                                                        \
  "struct SpinArgs { unsigned long long ns; unsigned *done; };\n"                          \
  "__device__ __forceinline__ void spin_body(unsigned long long tile, const SpinArgs &a) {\n" \
  "  unsigned long long t0, t;\n"                                                          \
  "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"                         \
  "  do { asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); } while (t - t0 < a.ns);\n" \
  "  if (threadIdx.x == 0) atomicAdd(&a.done[tile], 1u);\n"                                \
  "}\n"
static const char *k_spin_tile =
    SPIN_COMMON "__device__ void spin_tile(const clcrt::Tile &t, const SpinArgs &a) { spin_body(t.linear, a); }\n";
static const char *k_spin_ref =
    SPIN_COMMON
    "extern \"C\" __global__ void __launch_bounds__(256) ref_block(const __grid_constant__ SpinArgs a) {\n"
    "  spin_body(blockIdx.x, a);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) urgent(const __grid_constant__ SpinArgs a) {\n"
    "  spin_body(blockIdx.x, a);\n"
    "}\n";

enum { SPIN_TILES = 20000, URGENT_BLOCKS = 132 };

static double host_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

typedef struct pctx {
  CUfunction ref;   /* the low-priority run as a hand-written kernel, or NULL */
  clcrt_kernel *k;  /* or as a clcrt kernel */
  clcrt_stream *lo, *hi;
  CUfunction urgent;
  void *lo_args, *hi_args;
} pctx;

/* One experiment: returns the urgent kernel's wait-and-run time in ms and the low run's. */
static void experiment(pctx *c, double *latency, double *low_ms) {
  CUstream lo = clcrt_stream_cu(c->lo), hi = clcrt_stream_cu(c->hi);
  CUevent l0, l1, h0, h1;
  CK(cu->cuEventCreate(&l0, 0));
  CK(cu->cuEventCreate(&l1, 0));
  CK(cu->cuEventCreate(&h0, 0));
  CK(cu->cuEventCreate(&h1, 0));
  CK(cu->cuEventRecord(l0, lo));
  if (c->ref) {
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = SPIN_TILES, cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 256, cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = lo;
    void *kp[1] = {c->lo_args};
    CK(cu->cuLaunchKernelEx(&cfg, c->ref, kp, NULL));
  } else if (clcrt_run(c->lo, c->k, (clcrt_dim3){SPIN_TILES, 1, 1}, c->lo_args, 16) != CLCRT_OK) {
    fprintf(stderr, "preempt: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  CK(cu->cuEventRecord(l1, lo));
  /* 5 ms after the low run started on the device. */
  while (cu->cuEventQuery(l0) != CUDA_SUCCESS) {
  }
  double t = host_ms();
  while (host_ms() - t < 5.0) {
  }
  CK(cu->cuEventRecord(h0, hi));
  if (clcrt_preempt_begin(c->hi) != CLCRT_OK) exit(1);
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = URGENT_BLOCKS, cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 256, cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = hi;
  void *kp[1] = {c->hi_args};
  CK(cu->cuLaunchKernelEx(&cfg, c->urgent, kp, NULL));
  if (clcrt_preempt_end(c->hi) != CLCRT_OK) exit(1);
  CK(cu->cuEventRecord(h1, hi));
  CK(cu->cuEventSynchronize(h1));
  CK(cu->cuEventSynchronize(l1));
  float a, b;
  CK(cu->cuEventElapsedTime(&a, h0, h1));
  CK(cu->cuEventElapsedTime(&b, l0, l1));
  *latency = a, *low_ms = b;
  cu->cuEventDestroy(l0), cu->cuEventDestroy(l1), cu->cuEventDestroy(h0), cu->cuEventDestroy(h1);
}


void bench_preempt(void) {
  int least = 0, greatest = 0;
  CK(cu->cuCtxGetStreamPriorityRange(&least, &greatest));
  CUstream chi, clo;
  CK(cu->cuStreamCreateWithPriority(&chi, CU_STREAM_NON_BLOCKING, greatest));
  CK(cu->cuStreamCreateWithPriority(&clo, CU_STREAM_NON_BLOCKING, least));
  clcrt_stream *hi, *lo;
  if (clcrt_stream_create(rt, chi, &hi) != CLCRT_OK || clcrt_stream_create(rt, clo, &lo) != CLCRT_OK) exit(1);
  const unsigned long long spin_ns = quick ? 300000 : 1800000;
  struct {
    unsigned long long ns;
    CUdeviceptr done;
  } lo_args = {spin_ns, 0}, hi_args = {50000, 0};
  CK(cu->cuMemAlloc(&lo_args.done, SPIN_TILES * 4));
  CK(cu->cuMemAlloc(&hi_args.done, URGENT_BLOCKS * 4));
  CUlibrary lib = compile_ref(k_spin_ref, NULL, "spin");
  pctx c = {.lo = lo, .hi = hi, .urgent = lib_fn(lib, "urgent"), .lo_args = &lo_args, .hi_args = &hi_args};
  printf("\npreempt: a low-priority run of %d tiles of %.1f ms on the SMs; 5 ms in, a %d-block kernel (%.0f us per "
         "block) on a stream of the highest priority, between clcrt_preempt_begin and _end: its wait and run, ms\n",
         SPIN_TILES, spin_ns / 1e6, URGENT_BLOCKS, hi_args.ns / 1e3);
  struct {
    const char *name;
    clcrt_sched sched;
    clcrt_grid grid;
  } lows[] = {{"ref-block", CLCRT_SCHED_AUTO, CLCRT_GRID_AUTO},
              {"fixed", CLCRT_SCHED_FIXED, CLCRT_GRID_AUTO},
              {"static", CLCRT_SCHED_STATIC, CLCRT_GRID_AUTO},
              {"steal", CLCRT_SCHED_STEAL, CLCRT_GRID_AUTO},
              {"steal-persist", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT}};
  const int reps = quick ? 3 : 5;
  unsigned *hd = malloc(SPIN_TILES * 4);
  for (size_t i = 0; i < sizeof lows / sizeof lows[0]; i++) {
    c.ref = i == 0 ? lib_fn(lib, "ref_block") : NULL;
    c.k = i == 0 ? NULL
                 : reg2(k_spin_tile, "spin_tile", "SpinArgs", lows[i].sched, lows[i].grid, 1, NULL, NULL);
    if (c.k && clcrt_kernel_prepare(c.k, CLCRT_USE_PREEMPT) != CLCRT_OK) exit(1); /* yielding, built now */
    double lat[8], low[8];
    CK(cu->cuMemsetD8(lo_args.done, 0, SPIN_TILES * 4));
    for (int r = 0; r < reps; r++) experiment(&c, &lat[r], &low[r]);
    CK(cu->cuMemcpyDtoH(hd, lo_args.done, SPIN_TILES * 4));
    for (int t = 0; t < SPIN_TILES; t++)
      if (hd[t] != (unsigned)reps) {
        fprintf(stderr, "preempt: %s ran tile %d %u times, expected %d\n", lows[i].name, t, hd[t], reps);
        exit(1);
      }
    qsort(lat, reps, sizeof lat[0], bench_cmp_double);
    qsort(low, reps, sizeof low[0], bench_cmp_double);
    printf("  preempt   %-14s urgent kernel waited and ran %8.3f ms (min %.3f, max %.3f); low run %8.3f ms\n",
           lows[i].name, lat[reps / 2], lat[0], lat[reps - 1], low[reps / 2]);
    emit_json("\"workload\":\"preempt\",\"contender\":\"%s\",\"latency_ms\":%.4f,\"latency_min_ms\":%.4f,"
              "\"latency_max_ms\":%.4f,\"low_run_ms\":%.4f",
              lows[i].name, lat[reps / 2], lat[0], lat[reps - 1], low[reps / 2]);
  }
  free(hd);
  cu->cuLibraryUnload(lib);
  cu->cuMemFree(lo_args.done), cu->cuMemFree(hi_args.done);
  clcrt_stream_destroy(hi);
  clcrt_stream_destroy(lo);
  cu->cuStreamDestroy(chi), cu->cuStreamDestroy(clo);
}
