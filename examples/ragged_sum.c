/* A ragged-batch reduction with a prologue: y[r] = sum over j of w[j] * x[offsets[r] + j], one
 * row per tile, rows of any length up to RAGGED_MAX_LEN (empty ones too). What it shows
 * (docs/tile-functions.md explains each):
 *   - a prologue runs once per CTA, before its first tile: here it stages the weights w in
 *     shared memory, which every later tile of the CTA reads, and fills each thread's State;
 *   - __syncthreads() inside a tile function is allowed: every thread of the CTA calls the
 *     tile function for the same tile;
 *   - clcrt puts no barrier between tiles, so a tile that writes shared memory ends with one
 *     before the CTA's next tile writes it again;
 *   - rows of very different lengths, which STEAL (AUTO on sm_90) balances over the SMs.
 * Exit status: 0 the results match the CPU's, 2 no GPU, 1 any other failure. Device memory and
 * copies go through the runtime's driver table (clcrt_runtime_driver), so the program needs no
 * libcuda to link or to start. Runs under AUTO, STATIC and FIXED, each checked. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h> /* types only: the calls go through the runtime's driver table */

#include "clcrt.h"

enum { RAGGED_ROWS = 20000, RAGGED_MAX_LEN = 4096, RAGGED_BLOCK = 256 };

static const char ragged_src[] =
    "struct RaggedArgs {\n"
    "  const float *x;      // the rows, one after another\n"
    "  const long *offsets; // row r is x[offsets[r] .. offsets[r + 1])\n"
    "  const float *w;      // a weight per position in a row: max_len of them\n"
    "  float *y;            // a sum per row\n"
    "  unsigned max_len;\n"
    "};\n"
    "\n"
    "// Each thread's own copy, made by the prologue once per CTA and kept across its tiles.\n"
    "struct RaggedState {\n"
    "  const float *w; // the weights, staged in shared memory\n"
    "  float *partial; // a partial sum per warp, after them\n"
    "  unsigned warp, lane;\n"
    "};\n"
    "\n"
    "__device__ void ragged_prologue(const RaggedArgs &a, RaggedState &s) {\n"
    "  float *w = (float *)clcrt::smem();\n"
    "  for (unsigned j = threadIdx.x; j < a.max_len; j += blockDim.x) w[j] = a.w[j];\n"
    "  s.w = w;\n"
    "  s.partial = w + a.max_len;\n"
    "  s.warp = threadIdx.x / 32;\n"
    "  s.lane = threadIdx.x % 32;\n"
    "  __syncthreads(); // every weight is in place before any thread's first tile reads one\n"
    "}\n"
    "\n"
    "__device__ void ragged_tile(const clcrt::Tile &t, const RaggedArgs &a, RaggedState &s) {\n"
    "  const long begin = a.offsets[t.linear], len = a.offsets[t.linear + 1] - begin;\n"
    "  float sum = 0.0f;\n"
    "  for (long j = threadIdx.x; j < len; j += blockDim.x) sum += s.w[j] * a.x[begin + j];\n"
    "  for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);\n"
    "  if (s.lane == 0) s.partial[s.warp] = sum;\n"
    "  __syncthreads(); // every warp's partial is written\n"
    "  if (s.warp == 0) {\n"
    "    sum = s.lane < blockDim.x / 32 ? s.partial[s.lane] : 0.0f;\n"
    "    for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);\n"
    "    if (s.lane == 0) a.y[t.linear] = sum;\n"
    "  }\n"
    "  __syncthreads(); // warp 0 has read partial[] before the CTA's next tile writes it\n"
    "}\n";

/* The host's copy of RaggedArgs: device pointers are CUdeviceptr, 8 bytes like the device's. */
typedef struct RaggedArgs {
  CUdeviceptr x, offsets, w, y;
  unsigned max_len;
} RaggedArgs;

/* Compiles the tile function with its prologue for `sched` (or finds it in the cache). */
static clcrt_status ragged_register(clcrt_runtime *rt, clcrt_sched sched, clcrt_kernel **k) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = ragged_src;
  d.tile_fn = "ragged_tile";
  d.args_type = "RaggedArgs";
  d.state_type = "RaggedState";
  d.prologue_fn = "ragged_prologue";
  d.block = (clcrt_dim3){RAGGED_BLOCK, 1, 1};
  /* The weights, then a partial sum per warp. */
  d.smem_bytes = (RAGGED_MAX_LEN + RAGGED_BLOCK / 32) * sizeof(float);
  d.sched = sched;
  return clcrt_register(rt, &d, k);
}

/* Rows mostly short, a few long and some empty: the cost of a tile varies 4096-fold. */
static long ragged_len(long r) {
  uint32_t h = (uint32_t)r * 2654435761u;
  h ^= h >> 15;
  return h % 100 < 3 ? RAGGED_MAX_LEN - (long)(h % 7) : (long)(h % 160);
}

static float ragged_rand(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

/* Every row against a double-precision sum on the CPU; 0 when all match. */
static long ragged_check(const float *x, const long *off, const float *w, const float *y) {
  long bad = 0;
  for (long r = 0; r < RAGGED_ROWS; r++) {
    double sum = 0, mag = 0;
    for (long j = 0; j < off[r + 1] - off[r]; j++) {
      sum += (double)w[j] * x[off[r] + j];
      mag += fabs((double)w[j] * x[off[r] + j]);
    }
    if (!(fabs(y[r] - sum) <= 1e-5 * mag + 1e-6)) { /* a NaN (the poison) fails too */
      if (bad++ < 3) fprintf(stderr, "row %ld: %g, the CPU's %g\n", r, y[r], sum);
    }
  }
  return bad;
}

int main(void) {
  clcrt_runtime *rt = NULL;
  const clcrt_driver *cu = NULL; /* the runtime's: NULL until it exists */
  clcrt_stream *s = NULL;
  CUdeviceptr dx = 0, doff = 0, dw = 0, dy = 0;
  float *x = NULL, *w = malloc(RAGGED_MAX_LEN * sizeof(float)), *y = malloc(RAGGED_ROWS * sizeof(float));
  long *off = malloc((RAGGED_ROWS + 1) * sizeof(long));
  int rc = 1;
  clcrt_status st = clcrt_runtime_create(&rt, NULL);
  if (st != CLCRT_OK) {
    fprintf(stderr, "ragged_sum: %s: %s\n", clcrt_status_name(st), clcrt_errmsg(rt));
    rc = st == CLCRT_E_NO_DEVICE ? 2 : 1;
    goto out;
  }
  cu = clcrt_runtime_driver(rt);
  if (!w || !y || !off || cu->cuCtxSetCurrent(clcrt_runtime_context(rt)) != CUDA_SUCCESS) goto out;
  off[0] = 0;
  for (long r = 0; r < RAGGED_ROWS; r++) off[r + 1] = off[r] + ragged_len(r);
  uint64_t seed = 1;
  if (!(x = malloc((size_t)off[RAGGED_ROWS] * sizeof(float)))) goto out;
  for (long i = 0; i < off[RAGGED_ROWS]; i++) x[i] = ragged_rand(&seed);
  for (long j = 0; j < RAGGED_MAX_LEN; j++) w[j] = ragged_rand(&seed);
  size_t xb = (size_t)off[RAGGED_ROWS] * sizeof(float), ob = (RAGGED_ROWS + 1) * sizeof(long);
  if (clcrt_stream_create(rt, NULL, &s) != CLCRT_OK) goto clcrt_failed;
  /* Copies and memsets on the clcrt stream's CUstream are ordered with its runs. */
  CUstream cs = clcrt_stream_cu(s);
  if (cu->cuMemAlloc(&dx, xb) || cu->cuMemAlloc(&doff, ob) || cu->cuMemAlloc(&dw, RAGGED_MAX_LEN * sizeof(float)) ||
      cu->cuMemAlloc(&dy, RAGGED_ROWS * sizeof(float)) || cu->cuMemcpyHtoDAsync(dx, x, xb, cs) ||
      cu->cuMemcpyHtoDAsync(doff, off, ob, cs) || cu->cuMemcpyHtoDAsync(dw, w, RAGGED_MAX_LEN * sizeof(float), cs)) {
    fprintf(stderr, "ragged_sum: device memory could not be set up\n");
    goto out;
  }
  static const clcrt_sched scheds[] = {CLCRT_SCHED_AUTO, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};
  for (size_t i = 0; i < sizeof scheds / sizeof scheds[0]; i++) {
    clcrt_kernel *k = NULL;
    if (ragged_register(rt, scheds[i], &k) != CLCRT_OK) goto clcrt_failed;
    RaggedArgs a = {dx, doff, dw, dy, RAGGED_MAX_LEN};
    /* One tile per row. The output is poisoned first (0xff bytes are NaNs): a row no tile
     * wrote fails the check. */
    if (cu->cuMemsetD8Async(dy, 0xff, RAGGED_ROWS * sizeof(float), cs)) goto out;
    if (clcrt_run(s, k, (clcrt_dim3){RAGGED_ROWS, 1, 1}, &a, sizeof a) != CLCRT_OK) goto clcrt_failed;
    if (cu->cuMemcpyDtoHAsync(y, dy, RAGGED_ROWS * sizeof(float), cs)) goto out;
    if (clcrt_stream_sync(s) != CLCRT_OK) goto clcrt_failed;
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    clcrt_kernel_info_get(k, &info);
    long bad = ragged_check(x, off, w, y);
    printf("ragged_sum %-6s %d rows, %ld elements: %s\n", clcrt_sched_name(info.sched), RAGGED_ROWS,
           off[RAGGED_ROWS], bad ? "WRONG" : "ok");
    if (bad) goto out;
  }
  rc = 0;
  goto out;
clcrt_failed:
  fprintf(stderr, "ragged_sum: %s\n", clcrt_errmsg(rt));
out:
  clcrt_stream_destroy(s); /* waits for the stream's work before the buffers go */
  CUdeviceptr bufs[] = {dx, doff, dw, dy};
  for (int i = 0; i < 4; i++)
    if (bufs[i]) cu->cuMemFree(bufs[i]);
  clcrt_runtime_destroy(rt);
  free(x), free(w), free(y), free(off);
  return rc;
}
