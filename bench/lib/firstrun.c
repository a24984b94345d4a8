/* Section firstrun: what the first run in a new situation costs the caller (no compile on the
 * launch path: variants are built ahead or in the background). For each situation a run may
 * need a variant of the kernel in (traced, statistics on, captured into a graph, preemptible: a
 * stream of higher priority exists, short: no more units than clusters), a freshly registered
 * kernel (its source carries a nonce, so neither cache has it, and no variant of it exists yet)
 * is run once in that situation and then RUNS more times; the host time of each clcrt_run call
 * alone is measured (CPU clock around the call, the stream drained before each call so that no
 * queue is full); the later runs start 1.5 s after the first, when any background build has
 * finished. Reported: the first call, the median of the later ones, and their ratio (target: at
 * most 1.2). Before no run compiled, the first call built the variant with NVRTC: 30-200 ms. */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

enum { FR_RUNS = 9 };

static const char *k_fr_src =
    "// nonce %llu %d\n"
    "struct FrArgs { float *x; unsigned long long n; float alpha; };\n"
    "__device__ void fr_tile(const clcrt::Tile &t, const FrArgs &a) {\n"
    "  unsigned long long i = t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] = a.x[i] * a.alpha + 1.0f;\n"
    "}\n";
typedef struct {
  float *x;
  unsigned long long n;
  float alpha;
} fr_args;

static clcrt_kernel *fr_kernel(int which, char *src, size_t cap) {
  snprintf(src, cap, k_fr_src, (unsigned long long)time(NULL), which);
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = src, d.tile_fn = "fr_tile", d.args_type = "FrArgs";
  d.block = (clcrt_dim3){256, 1, 1};
  d.sched = CLCRT_SCHED_STEAL;
  clcrt_kernel *k = NULL;
  if (clcrt_register(rt, &d, &k) != CLCRT_OK) {
    fprintf(stderr, "firstrun: register: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  return k;
}

/* One timed call; with capture, the call is made inside a capture of the stream (ended and
 * the graph dropped after the call). */
static double fr_call(clcrt_stream *s, clcrt_kernel *k, clcrt_dim3 tiles, fr_args *a, int capture) {
  CUstream c = clcrt_stream_cu(s);
  CK(cu->cuStreamSynchronize(c));
  if (capture) CK(cu->cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED));
  double t0 = bench_now_ms();
  clcrt_status r = clcrt_run(s, k, tiles, a, sizeof *a);
  double t1 = bench_now_ms();
  if (r != CLCRT_OK) {
    fprintf(stderr, "firstrun: clcrt_run: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  if (capture) {
    CUgraph g;
    CK(cu->cuStreamEndCapture(c, &g));
    CUgraphExec ge;
    CK(cu->cuGraphInstantiate(&ge, g, 0));
    CK(cu->cuGraphLaunch(ge, c));
    CK(cu->cuStreamSynchronize(c));
    cu->cuGraphExecDestroy(ge);
    cu->cuGraphDestroy(g);
  }
  CK(cu->cuStreamSynchronize(c));
  return (t1 - t0) * 1e3; /* us */
}

/* The later runs of k in the situation of first (made 1.5 s after it, when any background build
 * has finished, so that they launch the variant), and the line comparing them with first. */
static void fr_later(const char *what, double first, clcrt_stream *s, clcrt_kernel *k, clcrt_dim3 tiles, fr_args *a,
                     int capture) {
  double later[FR_RUNS];
  usleep(1500000);
  for (int i = 0; i < FR_RUNS; i++) later[i] = fr_call(s, k, tiles, a, capture);
  qsort(later, FR_RUNS, sizeof *later, bench_cmp_double);
  double med = later[FR_RUNS / 2];
  printf("  firstrun  %-12s first %9.1f us   later (median of %d) %7.1f us   first/later %6.2fx\n", what, first,
         FR_RUNS, med, first / med);
  emit_json("\"workload\":\"firstrun\",\"situation\":\"%s\",\"first_us\":%.2f,\"later_us\":%.2f,\"ratio\":%.4f",
            what, first, med, first / med);
}

/* One situation: a fresh kernel (which: its nonce) has one ordinary run on the bench's stream
 * (nothing built for it yet but the registered kernel), then its first run on s with `tiles`
 * (capture: inside a capture) is timed against the later ones. */
static void fr_situation(const char *what, int which, clcrt_stream *s, clcrt_dim3 tiles, clcrt_dim3 ordinary,
                         fr_args *a, int capture) {
  char src[512];
  clcrt_kernel *k = fr_kernel(which, src, sizeof src);
  if (which) fr_call(st, k, ordinary, a, 0);
  double first = fr_call(s, k, tiles, a, capture);
  fr_later(what, first, s, k, tiles, a, capture);
}

/* A stream of clcrt's own, or the bench ends saying why. */
static clcrt_stream *fr_stream(CUstream cu_stream, const char *what) {
  clcrt_stream *s = NULL;
  if (clcrt_stream_create(rt, cu_stream, &s) != CLCRT_OK) {
    fprintf(stderr, "firstrun: %s stream: %s\n", what, clcrt_errmsg(rt));
    exit(1);
  }
  return s;
}

void bench_firstrun(void) {
  const unsigned long long n = 1ull << 22; /* 16 MiB: 16384 tiles, more than fit at once */
  CUdeviceptr x;
  CK(cu->cuMemAlloc(&x, n * 4));
  CK(cu->cuMemsetD8(x, 0, n * 4)); /* host times only: the values do not matter */
  fr_args a = {(float *)(uintptr_t)x, n, 1.0f};
  const clcrt_dim3 tiles = {(unsigned)(n / 256), 1, 1}, few = {16, 1, 1};
  printf("\nfirstrun: host time of clcrt_run alone, the first run of a fresh kernel in each situation against "
         "later runs (STEAL, 16384 tiles of 256 threads; short: 16 tiles)\n");

  /* Plain: a fresh kernel's first run at all (nothing to build, no ordinary run first). */
  fr_situation("plain", 0, st, tiles, tiles, &a, 0);
  /* Short: no more units than clusters: the claim-free variant. */
  fr_situation("short", 1, st, few, tiles, &a, 0);
  /* Captured into a graph. */
  fr_situation("captured", 2, st, tiles, tiles, &a, 1);

  /* Traced: tracing enabled on a stream of its own (the enable call may build), then runs. */
  clcrt_stream *ts = fr_stream(NULL, "traced");
  if (clcrt_stream_trace_enable(ts, 1u << 16) != CLCRT_OK) {
    fprintf(stderr, "firstrun: trace: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  fr_situation("traced", 3, ts, tiles, tiles, &a, 0);
  clcrt_stream_destroy(ts);

  /* Statistics on. */
  clcrt_stream *ss = fr_stream(NULL, "statistics");
  if (clcrt_stream_stats_enable(ss, 1) != CLCRT_OK) {
    fprintf(stderr, "firstrun: stats: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  fr_situation("statistics", 4, ss, tiles, tiles, &a, 0);
  clcrt_stream_destroy(ss);

  /* Preemptible: a stream of higher priority exists; the next run on the low stream. The
   * kernel is registered (and run once) before the urgent stream appears. */
  char src[512];
  clcrt_kernel *k = fr_kernel(5, src, sizeof src);
  fr_call(st, k, tiles, &a, 0);
  int least = 0, greatest = 0;
  CK(cu->cuCtxGetStreamPriorityRange(&least, &greatest));
  CUstream hic;
  CK(cu->cuStreamCreateWithPriority(&hic, CU_STREAM_NON_BLOCKING, greatest));
  clcrt_stream *hs = fr_stream(hic, "urgent");
  double first = fr_call(st, k, tiles, &a, 0);
  fr_later("preemptible", first, st, k, tiles, &a, 0);
  clcrt_stream_destroy(hs);
  cu->cuStreamDestroy(hic);
  cu->cuMemFree(x);
}
