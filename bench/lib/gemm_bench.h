/* The GEMM benchmark's pieces (bench/bench_gemm.c) that stand apart from its contenders:
 *   gemm_classes.c  the dense shapes: the fixed classes, the class drawn from a seed ("gen"),
 *                   the --class and --quick selection, align16's random 16-byte offsets.
 * bench_gemm.c keeps its own globals, so nothing here reads bench.h's. */
#ifndef CLCRT_BENCH_GEMM_H
#define CLCRT_BENCH_GEMM_H
#include <stddef.h>
#include <stdint.h>

/* ---- shapes (gemm_classes.c) ---------------------------------------------------------- */

/* One dense problem D[m x n] = A[m x k] . B[n x k]^T. */
typedef struct bgemm_shape {
  const char *cls; /* one of bgemm_classes (static), or "custom" */
  char label[48];  /* the layer ("<model> <projection>"), or what the draw picked */
  unsigned m, n, k;
  int quick; /* one of the few --quick runs of its class */
} bgemm_shape;

/* The dense classes, in the order the tables list them; NULL-terminated. */
extern const char *const bgemm_classes[];

/* The seed when --seed is not given: a run without it draws what the last one drew. */
#define BGEMM_SEED_DEFAULT 43u
/* "random": a seed from the clock; else a number (decimal or 0x hex). 0 if arg is neither. */
int bgemm_seed_parse(const char *arg, uint64_t *seed);

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
#endif
