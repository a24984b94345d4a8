/* Shared by the benchmark programs (the files in bench/): one runtime and stream, timing with events,
 * reference kernels compiled straight with NVRTC, registration, launches and output (a table
 * on stdout and JSON records). Method (METHOD.md): every contender's output is checked
 * against a CPU reference on random data with the output poisoned first, then timed: warm-up
 * runs, CUDA events around each run, the median of many. Ratios compare contenders measured
 * in the same process. */
#ifndef CLCRT_BENCH_H
#define CLCRT_BENCH_H
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h> /* types only: the calls go through the runtime's driver table */

#include "clcrt.h"

#define WARMUP 5
#define REPS 30

extern const clcrt_driver *cu; /* the runtime's (clcrt_runtime_driver) */
extern clcrt_runtime *rt;
extern clcrt_stream *st; /* the benchmark's stream (lowest priority) */
extern CUstream cs;      /* its CUstream */
extern FILE *json;       /* --json FILE, or NULL */
extern const char *dump_dir; /* --dump DIR: every kernel's cubin is written there (for nvdisasm) */
extern int quick;        /* --quick: smaller problems */
extern const char *trace_dir; /* --traces DIR: the trace section's timelines are saved there as JSON */

#define CK(x)                                                                                    \
  do {                                                                                           \
    CUresult r_ = (x);                                                                           \
    if (r_ != CUDA_SUCCESS) {                                                                    \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x, bench_cu_name(r_));      \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

/* The driver's name for an error ("CUDA_ERROR_..."), and the host's clock in ms. */
const char *bench_cu_name(CUresult r);
double bench_now_ms(void);
/* cuMemcpyHtoD that has landed when it returns: from pageable memory the copy returns before
 * its DMA lands, on the legacy stream, which the benchmark's non-blocking stream does not wait
 * for. */
void bench_put(CUdeviceptr dst, const void *src, size_t bytes);
void bench_open(const char *json_path); /* runtime, stream, JSON header; exits 0 with SKIP without a GPU */
void bench_close(void);

typedef void (*launch_fn)(void *ctx);
/* The median CPU time per launch call of the last time_batch/time_median, in us (the rate at
 * which the host enqueued: above the GPU's time per run, the host is what was measured). */
extern double bench_host_us;
/* Median time in ms of REPS launches after WARMUP, with events around each. */
double time_median(launch_fn f, void *ctx);
/* The median of `reps` timings of `inner` launches each (events around the batch), in ms. */
double time_batch(launch_fn f, void *ctx, int inner, int reps);
/* inner launches captured from cs into one graph, replayed reps times (after a warm-up):
 * the median replay in ms, with no host in the way. With keep, the instantiated graph is
 * handed back (the caller replays it to check the result, then destroys it). */
double time_graph(launch_fn f, void *ctx, int inner, int reps, CUgraphExec *keep);

/* A reference kernel: compiled straight with NVRTC, outside the template. */
CUlibrary compile_ref(const char *src, const char *define, const char *what);
CUfunction lib_fn(CUlibrary lib, const char *name);
int occupancy_blocks(CUfunction f, unsigned threads, unsigned smem); /* blocks per SM */

/* Registers a tile function (256 threads) with up to two extra NVRTC options; exits on failure. */
clcrt_kernel *reg2(const char *src, const char *fn, const char *args, clcrt_sched sched, clcrt_grid grid, unsigned cl,
                   const char *define, const char *define2);
clcrt_kernel *reg_desc(const clcrt_tile_desc *d, const char *what);

/* Launch contexts. */
typedef struct lctx {
  CUfunction fn;
  unsigned grid;      /* references: blocks */
  unsigned threads;   /* references: threads per block (0: 256) */
  unsigned smem;      /* references: dynamic shared memory */
  void *args;
  size_t args_size;
  unsigned long long ntiles;
  int ntiles_param;   /* references: ntiles is passed as a second parameter */
  clcrt_kernel *k;
  clcrt_stream *s;    /* clcrt: NULL means st */
  CUdeviceptr src, dst;
  size_t bytes;
} lctx;
void launch_ref(void *p);
void launch_clcrt(void *p);
void launch_copy(void *p);

/* One result row: workload, parameter, cluster size, contender, time, ratio to the best
 * reference (reference / contender: above 1 is faster), % of copy bandwidth (0: none). */
void emit(const char *workload, const char *param, unsigned cl, const char *who, double ms, double ratio,
          double pct_copy);
/* The same with a trace's tail, imbalance and mean busy fraction after the time. */
void emit_traced(const char *workload, const char *param, unsigned cl, const char *who, double ms, double ratio,
                 double pct_copy, const clcrt_trace_summary *sum);
/* One traced launch of a clcrt launch context (an lctx) on its stream: its summary, and its
 * JSON at save_path unless NULL. Tracing is off again afterwards. Returns 0 on failure. */
int trace_once(void *lc, clcrt_trace_summary *sum, const char *save_path);
/* A free-form JSON record (the caller's fields, without braces). */
void emit_json(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The scheduler contenders every workload runs. */
typedef struct contender {
  const char *name;
  clcrt_sched sched;
  clcrt_grid grid;
  const char *define;
} contender;
extern const contender *k_contenders;
extern int k_ncontenders;

/* Deterministic pseudo-random numbers. */
unsigned long long bench_rand(unsigned long long *s);
double bench_urand(unsigned long long *s); /* [0, 1) */
int bench_listed(const char *list, const char *name); /* the comma-separated list names it */
int bench_cmp_double(const void *a, const void *b);   /* qsort's comparison of doubles, ascending */

/* The compute tiles of unequal cost (work.c) and the per-CTA table kernel (classes.c), also run
 * by the share section: the tile sources, the classes' cost tables (FMAs per thread per tile),
 * and the values their outputs must hold. */
enum { SKEW, RAMP, LOGNORMAL, TRIANGLE, UNIFORM, LOGNORMAL15, NCLASSES };
extern const char *const k_class_names[NCLASSES];
extern const char *k_work_tile; /* WorkArgs { float *out; const unsigned *cost; unsigned long long ntiles; } */
extern const char *k_table_tile; /* TabArgs { const float *x; float *y; unsigned long long n; }, 32 KiB state */
unsigned *make_costs(int cls, unsigned long long n, unsigned base);
float work_value(unsigned long long i, unsigned tid, unsigned n);
float table_value(unsigned k);

/* Sections (the other files of bench/lib/). */
void bench_scale(void);
void bench_work(void);
void bench_classes(void);
void bench_preempt(void);
void bench_armed(void);
/* armed on memory-bound tiles (scale.c), and the measurement itself (work.c) */
void bench_armed_scale(void);
void armed_pair(const char *what, const char *param, lctx *lc);
void bench_trace(void);
void bench_trace_scale(void);
void bench_trace_work(void);
/* trace.c: prints and records tracing's cost for one workload and contender: `out` is the
 * kernel compiled with -DCLCRT_TRACE=0, `in` the one compiled as usual, timed off and on. */
void trace_overhead(const char *workload, const char *who, unsigned cl, lctx *out, lctx *in);
void bench_overhead(void);
void bench_share(void);
void bench_firstrun(void);
#endif
