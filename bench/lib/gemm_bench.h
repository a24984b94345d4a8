/* The GEMM benchmark's pieces (bench/bench_gemm.c) that stand apart from its contenders:
 *   gemm_classes.c  the dense shapes: the fixed classes, the class drawn from a seed ("gen"),
 *                   the --class and --quick selection, align16's random 16-byte offsets;
 *   gemm_timing.c   timing with events: interleaved rounds, and back-to-back batches;
 *   gemm_report.c   the dense summary: per shape, and per class the geo-means and worsts.
 * Plain C over the runtime's driver table: bench_gemm.c keeps its own globals, so nothing
 * here reads bench.h's. */
#ifndef CLCRT_BENCH_GEMM_H
#define CLCRT_BENCH_GEMM_H
#include <stddef.h>
#include <stdint.h>

#include <cuda.h> /* types only: the calls go through the runtime's driver table */

#include "clcrt.h"

/* ---- shapes (gemm_classes.c) ---------------------------------------------------------- */

/* One dense problem D[m x n] = A[m x k] . B[n x k]^T. */
typedef struct bgemm_shape {
  const char *cls; /* one of bgemm_classes (static), or "custom" */
  char label[48];  /* the layer ("<model> <projection>"), or what the draw picked */
  unsigned m, n, k;
  int quick; /* one of the few --quick runs of its class */
  int offs;  /* --shape MxNxK@A,B: A and B at a_off and b_off bytes past a 128-byte line */
  unsigned a_off, b_off;
} bgemm_shape;

/* The dense classes, in the order the tables list them; NULL-terminated. */
extern const char *const bgemm_classes[];

/* The seed when --seed is not given: a run without it draws what the last one drew. */
#define BGEMM_SEED_DEFAULT 43u
/* "random": a seed from the clock; else a number (decimal or 0x hex). 0 if arg is neither. */
int bgemm_seed_parse(const char *arg, uint64_t *seed);

/* From bench.c, declared here too, since bench.h's contender type is not the GEMM benchmark's:
 * whether the comma-separated list names `name`; qsort's comparison of doubles, ascending. */
int bench_listed(const char *list, const char *name);
int bench_cmp_double(const void *a, const void *b);

/* The first name in the comma-separated list that is no class (NULL: all are), copied to
 * bad (at most n bytes). */
const char *bgemm_classes_check(const char *list, char *bad, size_t n);

/* The shapes of the classes in `list` (NULL: every class), in table order, then `gen` shapes
 * of the generated class when it is listed (drawn from seed); quick: only the marked shapes
 * of each class. Returns how many were written to out (at most cap). */
int bgemm_select(const char *list, int quick, unsigned gen, uint64_t seed, bgemm_shape *out, int cap);
/* How many shapes bgemm_select may write for `gen` generated ones (a bound for out's size). */
int bgemm_select_bound(unsigned gen);

/* Generated shapes a run draws when --gen is not given, and with --quick. */
#define BGEMM_GEN_DEFAULT 24u
#define BGEMM_GEN_QUICK 6u
/* The generated class: n shapes drawn from seed (gemm_classes.c says from what). */
void bgemm_gen(uint64_t seed, unsigned n, bgemm_shape *out);

/* align16: where a shape's A and B start, in bytes past a 128-byte line (0, 16, ..., 112),
 * each drawn from the seed and the shape (so a shape keeps its offsets whatever else runs). */
void bgemm_offsets16(uint64_t seed, const bgemm_shape *s, unsigned *a_off, unsigned *b_off);

/* ---- timing (gemm_timing.c) ----------------------------------------------------------- */

typedef void (*bgemm_launch)(void *ctx);

/* A contender: its launch (one run, asynchronous on the timer's stream) and its times. */
typedef struct bgemm_timed {
  bgemm_launch fn;
  void *ctx;
  double ms, min;         /* interleaved rounds: median and fastest run, ms */
  double b2b_ms, b2b_min; /* back to back: median and fastest batch, ms per run */
  double host_us;         /* back to back: the host's median time to enqueue one run, us */
} bgemm_timed;

typedef struct bgemm_timer {
  const clcrt_driver *cu;
  CUstream cs;
  int warmup, reps; /* rounds before timing, and timed rounds */
} bgemm_timer;

/* Every contender once per round, an event pair around each run, the stream idle between
 * runs: warmup rounds, then reps timed ones; median and fastest per contender. */
void bgemm_time_rounds(const bgemm_timer *t, bgemm_timed *c, int n);

/* Back to back: per round, each contender in turn runs `runs` times between one event pair
 * (after one untimed run, so that the GPU is busy while the host queues the batch); rounds as
 * above (BGEMM_B2B_WARMUP, then BGEMM_B2B_REPS). The batch's time over runs, its median and
 * fastest, and the host's time per enqueued run. */
#define BGEMM_B2B_WARMUP 1
#define BGEMM_B2B_REPS 9
void bgemm_time_b2b(const bgemm_timer *t, bgemm_timed *c, int n, int runs);

/* Runs per batch so that a batch of runs of ms_per_run lasts about BGEMM_B2B_MS (1 to 4096). */
#define BGEMM_B2B_MS 1.0
int bgemm_b2b_runs(double ms_per_run);

/* Shapes whose reference run (cuBLAS, in the rounds) is shorter than this are judged by their
 * back-to-back figure, longer ones by the rounds (bench_gemm.c's header says why). */
#define BGEMM_SHORT_MS 0.1

/* ---- the summary (gemm_report.c) ------------------------------------------------------ */

/* One dense shape's results. Ratios are cuBLAS time / clcrt time (above 1: clcrt faster). */
typedef struct bgemm_summary {
  const bgemm_shape *sh;
  char shape[48];        /* "MxNxK" */
  unsigned a_off, b_off; /* A's and B's bytes past a 128-byte line (--align below 128: window 0's) */
  double cublas_tflops, cublas_ms;
  double def_ratio;      /* the default, in the rounds */
  double def_b2b_ratio;  /* the default, back to back */
  double target_ratio;   /* the one of the two the targets use (is_short: back to back) */
  double oracle_ratio;   /* the best contender of the rounds, the default included */
  double gemv_frac;      /* M <= 16: B's bytes over the default's time, over the copy's bandwidth */
  double gemv_frac_same; /* ... over the bandwidth of a copy of B's bytes timed back to back beside it
                            (0: not measured): the same launch, ramp and tail a stream of that size
                            pays */
  double cublas_frac_same; /* cuBLAS's, the same way */
  double vs_aligned;     /* operands off 128-byte lines (align16, @A,B, --align < 128): the default's time
                            on 1024-byte aligned copies of the windows over its time here, in the
                            target figure (0: not measured) */
  int is_short;          /* cuBLAS under BGEMM_SHORT_MS in the rounds */
  int skipped;           /* not timed: too large for the pool or the memory left */
  char def_what[64], oracle_what[64];
} bgemm_summary;

/* A JSON record's writer (bench_gemm.c's json_row). */
typedef void (*bgemm_row_fn)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints the summary of count shapes (a row each, then per class) and writes its JSON rows
 * ("dense-classes") through row. A shape whose default failed its check counts as wrong. */
void bgemm_summary_print(const bgemm_summary *sums, int count, uint64_t seed, bgemm_row_fn row);
#endif
