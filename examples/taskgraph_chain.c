/* A three-step chain as one task graph (docs/taskgraph.md): the rows of a matrix normalised by
 * their sums, then the column sums of the result, for a matrix whose sides are not multiples of
 * the tiles. What it shows:
 *   - nodes: three tile functions of one source, each with its own Args and tile grid, run as
 *     one launch (clcrt_taskgraph_run) instead of three;
 *   - a ROWS edge: a tile of node 1 (row block r, column block c) needs only tile r of node 0,
 *     the sums of its own rows, so it starts as soon as that tile is done;
 *   - a KSLICES edge: tile c of node 2 adds the partial column sums of the row blocks, the
 *     RB tiles (r, c) of node 1, which node 1 orders row block first (tile r * CB + c);
 *   - what a consumer may read: plain loads of what its producers stored (no __ldg);
 *   - every scheduler runs it (each CTA takes a ticket when a tile starts, so waits always end).
 * Exit status: 0 the results match the CPU's, 2 no GPU, 1 any other failure. Device memory goes
 * through the runtime's driver table, so the program needs no libcuda to link or to start. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h> /* types only: the calls go through the runtime's driver table */

#include "clcrt.h"
#include "clcrt_ops.h"

enum { CHAIN_ROWS = 1000, CHAIN_COLS = 1000, CHAIN_BR = 64, CHAIN_BC = 256 };
#define CHAIN_RB ((CHAIN_ROWS + CHAIN_BR - 1) / CHAIN_BR) /* row blocks: 16 */
#define CHAIN_CB ((CHAIN_COLS + CHAIN_BC - 1) / CHAIN_BC) /* column blocks: 4 */

static const char chain_src[] =
    "#define BR 64   // rows per row block\n"
    "#define BC 256  // columns per column block: one per thread\n"
    "struct SumArgs { const float *x; float *rowsum; unsigned rows, cols; };\n"
    "struct ScaleArgs { const float *x; const float *rowsum; float *y; float *part; unsigned rows, cols; };\n"
    "struct ColArgs { const float *part; float *colsum; unsigned rows, cols; };\n"
    "\n"
    "// Node 0, tile r: the sums of rows 64 r .. 64 r + 63, a warp per row at a time.\n"
    "__device__ void row_sums(const clcrt::Tile &t, const SumArgs &a) {\n"
    "  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;\n"
    "  for (unsigned i = t.linear * BR + warp; i < min((unsigned)t.linear * BR + BR, a.rows); i += blockDim.x / 32) {\n"
    "    float s = 0.f;\n"
    "    for (unsigned j = lane; j < a.cols; j += 32) s += a.x[(size_t)i * a.cols + j];\n"
    "    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);\n"
    "    if (lane == 0) a.rowsum[i] = s;\n"
    "  }\n"
    "}\n"
    "\n"
    "// Node 1, tile (r, c) = r * CB + c: y = x / rowsum on the block, and the block's column\n"
    "// sums into part[r]. rowsum was written by node 0 in this launch: read with plain loads.\n"
    "__device__ void scale_rows(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  const unsigned cb = (a.cols + BC - 1) / BC, r = t.linear / cb, j = (t.linear % cb) * BC + threadIdx.x;\n"
    "  if (j >= a.cols) return;\n"
    "  float colpart = 0.f;\n"
    "  for (unsigned i = r * BR; i < min(r * BR + BR, a.rows); i++) {\n"
    "    const float v = a.x[(size_t)i * a.cols + j] / a.rowsum[i];\n"
    "    a.y[(size_t)i * a.cols + j] = v;\n"
    "    colpart += v;\n"
    "  }\n"
    "  a.part[(size_t)r * a.cols + j] = colpart;\n"
    "}\n"
    "\n"
    "// Node 2, tile c: the column sums of column block c, over the row blocks' partial sums.\n"
    "__device__ void col_sums(const clcrt::Tile &t, const ColArgs &a) {\n"
    "  const unsigned j = t.linear * BC + threadIdx.x, rb = (a.rows + BR - 1) / BR;\n"
    "  if (j >= a.cols) return;\n"
    "  float s = 0.f;\n"
    "  for (unsigned r = 0; r < rb; r++) s += a.part[(size_t)r * a.cols + j];\n"
    "  a.colsum[j] = s;\n"
    "}\n";

/* The host mirrors of the three Args (device pointers as CUdeviceptr, which is 64-bit). */
typedef struct { CUdeviceptr x, rowsum; unsigned rows, cols; } SumArgs;
typedef struct { CUdeviceptr x, rowsum, y, part; unsigned rows, cols; } ScaleArgs;
typedef struct { CUdeviceptr part, colsum; unsigned rows, cols; } ColArgs;

/* The graph: three nodes, a ROWS edge and a KSLICES edge (used by tests/test_guide.c too). */
static clcrt_status chain_create(clcrt_ops *ops, clcrt_sched sched, clcrt_taskgraph **g) {
  const clcrt_task_node nodes[] = {
      {.tile_fn = "row_sums", .args_type = "SumArgs", .args_size = sizeof(SumArgs)},
      {.tile_fn = "scale_rows", .args_type = "ScaleArgs", .args_size = sizeof(ScaleArgs)},
      {.tile_fn = "col_sums", .args_type = "ColArgs", .args_size = sizeof(ColArgs)},
  };
  const clcrt_task_edge edges[] = {
      /* row block r: node 1's CB tiles (r, 0 .. CB - 1) need node 0's one tile r */
      {.from = 0, .to = 1, .kind = CLCRT_DEP_ROWS, .a = CHAIN_CB, .b = 1},
      /* column block c needs node 1's tiles r * CB + c for every row block r */
      {.from = 1, .to = 2, .kind = CLCRT_DEP_KSLICES, .a = CHAIN_RB},
  };
  clcrt_taskgraph_desc d = CLCRT_TASKGRAPH_DESC_INIT;
  d.source = chain_src;
  d.nodes = nodes, d.num_nodes = 3;
  d.edges = edges, d.num_edges = 2;
  d.block = (clcrt_dim3){CHAIN_BC, 1, 1};
  d.sched = sched;
  return clcrt_taskgraph_create(ops, &d, g);
}

static float chain_rand(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) & 0xffffff) / 16777216.0f + 0.5f; /* [0.5, 1.5): row sums far from 0 */
}

/* y and the column sums against double precision on the CPU; 0 when all match. */
static long chain_check(const float *x, const float *y, const float *colsum) {
  long bad = 0;
  double *col = calloc(CHAIN_COLS, sizeof *col);
  if (!col) return 1;
  for (long i = 0; i < CHAIN_ROWS; i++) {
    double s = 0;
    for (long j = 0; j < CHAIN_COLS; j++) s += x[i * CHAIN_COLS + j];
    for (long j = 0; j < CHAIN_COLS; j++) {
      const double v = x[i * CHAIN_COLS + j] / s;
      col[j] += v;
      if (!(fabs(y[i * CHAIN_COLS + j] - v) <= 1e-5 * v)) /* a NaN (the poison) fails too */
        if (bad++ < 3) fprintf(stderr, "y[%ld][%ld]: %g, the CPU's %g\n", i, j, y[i * CHAIN_COLS + j], v);
    }
  }
  for (long j = 0; j < CHAIN_COLS; j++)
    if (!(fabs(colsum[j] - col[j]) <= 1e-4 * col[j]))
      if (bad++ < 6) fprintf(stderr, "column %ld: %g, the CPU's %g\n", j, colsum[j], col[j]);
  free(col);
  return bad;
}

int main(void) {
  clcrt_runtime *rt = NULL;
  clcrt_ops *ops = NULL;
  const clcrt_driver *cu = NULL; /* the runtime's: NULL until it exists */
  clcrt_stream *s = NULL;
  CUdeviceptr dx = 0, drow = 0, dy = 0, dpart = 0, dcol = 0;
  const size_t n = (size_t)CHAIN_ROWS * CHAIN_COLS;
  float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *col = malloc(CHAIN_COLS * sizeof(float));
  int rc = 1;
  clcrt_status st = clcrt_runtime_create(&rt, NULL);
  if (st != CLCRT_OK) {
    fprintf(stderr, "taskgraph_chain: %s: %s\n", clcrt_status_name(st), clcrt_errmsg(rt));
    rc = st == CLCRT_E_NO_DEVICE ? 2 : 1;
    goto out;
  }
  cu = clcrt_runtime_driver(rt);
  if (!x || !y || !col || cu->cuCtxSetCurrent(clcrt_runtime_context(rt)) != CUDA_SUCCESS) goto out;
  uint64_t seed = 7;
  for (size_t i = 0; i < n; i++) x[i] = chain_rand(&seed);
  if (clcrt_ops_create(rt, &ops) != CLCRT_OK || clcrt_stream_create(rt, NULL, &s) != CLCRT_OK) goto clcrt_failed;
  CUstream cs = clcrt_stream_cu(s);
  if (cu->cuMemAlloc(&dx, n * sizeof(float)) || cu->cuMemAlloc(&drow, CHAIN_ROWS * sizeof(float)) ||
      cu->cuMemAlloc(&dy, n * sizeof(float)) || cu->cuMemAlloc(&dpart, (size_t)CHAIN_RB * CHAIN_COLS * sizeof(float)) ||
      cu->cuMemAlloc(&dcol, CHAIN_COLS * sizeof(float)) || cu->cuMemcpyHtoDAsync(dx, x, n * sizeof(float), cs)) {
    fprintf(stderr, "taskgraph_chain: device memory could not be set up\n");
    goto out;
  }
  SumArgs a0 = {dx, drow, CHAIN_ROWS, CHAIN_COLS};
  ScaleArgs a1 = {dx, drow, dy, dpart, CHAIN_ROWS, CHAIN_COLS};
  ColArgs a2 = {dpart, dcol, CHAIN_ROWS, CHAIN_COLS};
  const void *args[] = {&a0, &a1, &a2};
  /* Tile counts per run: row blocks; row blocks x column blocks; column blocks. */
  const clcrt_dim3 tiles[] = {{CHAIN_RB, 1, 1}, {CHAIN_RB * CHAIN_CB, 1, 1}, {CHAIN_CB, 1, 1}};
  static const clcrt_sched scheds[] = {CLCRT_SCHED_AUTO, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};
  for (size_t i = 0; i < sizeof scheds / sizeof scheds[0]; i++) {
    clcrt_taskgraph *g = NULL;
    if (chain_create(ops, scheds[i], &g) != CLCRT_OK) goto clcrt_failed;
    /* Every output poisoned first (0xff bytes are NaNs): a value no tile wrote fails the check. */
    if (cu->cuMemsetD8Async(drow, 0xff, CHAIN_ROWS * sizeof(float), cs) ||
        cu->cuMemsetD8Async(dy, 0xff, n * sizeof(float), cs) ||
        cu->cuMemsetD8Async(dpart, 0xff, (size_t)CHAIN_RB * CHAIN_COLS * sizeof(float), cs) ||
        cu->cuMemsetD8Async(dcol, 0xff, CHAIN_COLS * sizeof(float), cs)) {
      clcrt_taskgraph_destroy(g);
      goto out;
    }
    st = clcrt_taskgraph_run(g, s, tiles, args); /* one launch for the three nodes */
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    clcrt_kernel_info_get(clcrt_taskgraph_kernel(g), &info);
    clcrt_taskgraph_destroy(g); /* runs already enqueued keep running */
    if (st != CLCRT_OK || clcrt_stream_sync(s) != CLCRT_OK) goto clcrt_failed;
    if (cu->cuMemcpyDtoH(y, dy, n * sizeof(float)) || cu->cuMemcpyDtoH(col, dcol, CHAIN_COLS * sizeof(float))) goto out;
    long bad = chain_check(x, y, col);
    printf("taskgraph_chain %-6s %d x %d, %d + %d + %d tiles in one launch: %s\n", clcrt_sched_name(info.sched),
           CHAIN_ROWS, CHAIN_COLS, CHAIN_RB, CHAIN_RB * CHAIN_CB, CHAIN_CB, bad ? "WRONG" : "ok");
    if (bad) goto out;
  }
  rc = 0;
  goto out;
clcrt_failed:
  fprintf(stderr, "taskgraph_chain: %s\n", clcrt_errmsg(rt));
out:
  clcrt_stream_destroy(s); /* waits for the stream's work before the buffers go */
  CUdeviceptr bufs[] = {dx, drow, dy, dpart, dcol};
  for (int i = 0; i < 5; i++)
    if (bufs[i]) cu->cuMemFree(bufs[i]);
  clcrt_ops_destroy(ops);
  clcrt_runtime_destroy(rt);
  free(x), free(y), free(col);
  return rc;
}
