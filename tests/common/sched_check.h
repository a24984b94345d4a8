/* Exactly-once checking for the GPU suites: a tile function that counts how often each tile
 * runs and writes y = alpha * x + (tile % 1000), device buffers for one tile grid, and a check
 * of everything against a CPU reference (output poisoned first). */
#ifndef CLCRT_TEST_SCHED_CHECK_H
#define CLCRT_TEST_SCHED_CHECK_H
#include "gpu.h"

extern const char *const sched_check_src; /* CheckArgs, check_tile, check_tile_s + CheckState */

typedef struct CheckArgs {
  CUdeviceptr hits, lin, rank, bad, x, y;
  float alpha;
  unsigned tx, ty, tz;
  CUdeviceptr prologue;
  unsigned max_ctas;
  CUdeviceptr grid_ctas;
} CheckArgs;


/* Registers check_tile (or check_tile_s with a prologue) or src/fn when given; asserts.
 * option: one extra NVRTC option or NULL. */
clcrt_kernel *sched_check_reg(clcrt_runtime *rt, clcrt_sched sched, clcrt_grid grid, clcrt_dim3 cluster,
                              clcrt_dim3 block, int prologue, unsigned smem, const char *src, const char *fn,
                              const char *option);

/* Device buffers for one tile grid. */
typedef struct bufs {
  size_t ntiles, nelem, max_ctas;
  unsigned nt;
  float *hx;
  CheckArgs a;
} bufs;

void bufs_make(bufs *b, clcrt_dim3 tiles, clcrt_dim3 cluster, unsigned nt, uint64_t seed);
void bufs_free(bufs *b);
/* Every tile ran `reps` times with the right coordinate, linear index and CTA rank, and the
 * output equals the CPU reference; with prologue and reps == 1, the prologue ran once per CTA. */
void bufs_check(bufs *b, clcrt_dim3 cluster, unsigned reps, int prologue, const char *what);
/* Sets every hit counter back to zero (between phases of a test on the same buffers). */
void bufs_reset_hits(bufs *b);
#endif
