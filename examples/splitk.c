/* A split-K reduction with the stream-K header: y = A x for a short, wide matrix A (SPLITK_M
 * rows, SPLITK_K columns). Its SPLITK_M / 64 output tiles are far fewer than the GPU's SMs, so
 * whole tiles would leave most SMs idle; stream-K (nvrtc_src/clcrt_streamk.cuh) cuts the tiles'
 * k-blocks into one range per work unit instead, and a fix-up adds the pieces. What it shows
 * (docs/tile-functions.md explains each):
 *   - clcrt_sk_make, clcrt_sk_segments, clcrt_sk_segment: a unit's part of one or two tiles;
 *   - the fix-up, clcrt::sk_arrive_warp and clcrt::sk_sum: each piece's partial goes to its own
 *     workspace slot, and whichever warp arrives last adds them all in piece order. Nothing
 *     waits for another unit, and the result has the same bits under every scheduler;
 *   - a tile grid that is the decomposition's units, not the problem's tiles.
 * Exit status: 0 the result matches the CPU's and is the same under every scheduler, 2 no GPU,
 * 1 any other failure. The driver calls go through the runtime's table: no libcuda is linked. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h> /* types only: the calls go through the runtime's driver table */

#include "clcrt.h"

enum { SPLITK_M = 200, SPLITK_K = 1 << 16, SPLITK_BM = 64, SPLITK_BK = 1024, SPLITK_WARPS = 8 };

static const char splitk_src[] =
    "#include \"clcrt_streamk.cuh\"\n"
    "#define BM 64   // rows per output tile: 8 warps of 8 rows\n"
    "#define BK 1024 // columns per iteration (k-block)\n"
    "\n"
    "struct SplitkArgs {\n"
    "  const float *a;      // m x k, row-major\n"
    "  const float *x;      // k\n"
    "  float *y;            // m\n"
    "  float *partials;     // the fix-up's workspace: 2 * sk_units slots of BM floats\n"
    "  unsigned *counters;  // one per shared tile and warp, 0 before the first run\n"
    "  unsigned m, k;\n"
    "  unsigned tiles, iters, sk_tiles, sk_units; // the decomposition (clcrt_sk_make)\n"
    "};\n"
    "\n"
    "__device__ void splitk_tile(const clcrt::Tile &t, const SplitkArgs &a) {\n"
    "  const clcrt_sk sk = clcrt_sk_make(a.tiles, a.iters, a.sk_tiles, a.sk_units, 0);\n"
    "  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;\n"
    "  // Unit t.unit covers k-blocks [g.k0, g.k1) of tile g.tile for each of its segments.\n"
    "  for (unsigned i = 0, n = clcrt_sk_segments(&sk, t.unit); i < n; i++) {\n"
    "    const clcrt_sk_seg g = clcrt_sk_segment(&sk, t.unit, i);\n"
    "    const unsigned row0 = g.tile * BM + warp * 8;\n"
    "    const unsigned k1 = min(g.k1 * BK, a.k);\n"
    "    float mine = 0.0f; // lane r < 8 ends with row row0 + r's sum over the segment\n"
    "    for (unsigned r = 0; r < 8 && row0 + r < a.m; r++) {\n"
    "      const float *arow = a.a + (long)(row0 + r) * a.k;\n"
    "      float s = 0.0f;\n"
    "      for (unsigned c = g.k0 * BK + lane; c < k1; c += 32) s += arow[c] * a.x[c];\n"
    "      for (int d = 16; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);\n"
    "      if (lane == r) mine = s;\n"
    "    }\n"
    "    if (g.pieces == 1) { // the whole tile: no fix-up\n"
    "      if (lane < 8 && row0 + lane < a.m) a.y[row0 + lane] = mine;\n"
    "      continue;\n"
    "    }\n"
    "    // One piece of a shared tile: the warp's partial into the piece's own slot, then count\n"
    "    // in. The last of the tile's pieces to arrive adds them all, in piece order.\n"
    "    float *slot = a.partials + (long)g.slot * BM + warp * 8;\n"
    "    if (lane < 8) slot[lane] = mine;\n"
    "    if (!clcrt::sk_arrive_warp(&a.counters[g.shared * 8 + warp], g.pieces)) continue;\n"
    "    if (lane == 0) {\n"
    "      float sum[8]; // the warp's 8 rows: 2 vectors of 4 floats per slot\n"
    "      clcrt::sk_sum<2>(sk, g.shared, clcrt_sk_first_unit(&sk, g.shared), g.pieces, a.partials + warp * 8, BM,\n"
    "                       4, 2, sum);\n"
    "      for (unsigned r = 0; r < 8 && row0 + r < a.m; r++) a.y[row0 + r] = sum[r];\n"
    "    }\n"
    "  }\n"
    "}\n";

typedef struct SplitkArgs {
  CUdeviceptr a, x, y, partials, counters;
  unsigned m, k;
  unsigned tiles, iters, sk_tiles, sk_units;
} SplitkArgs;

static clcrt_status splitk_register(clcrt_runtime *rt, clcrt_sched sched, clcrt_kernel **k) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = splitk_src;
  d.tile_fn = "splitk_tile";
  d.args_type = "SplitkArgs";
  d.block = (clcrt_dim3){32 * SPLITK_WARPS, 1, 1};
  d.sched = sched;
  return clcrt_register(rt, &d, k);
}

/* Every row against the CPU in double precision; 0 when all match. */
static long splitk_check(const float *a, const float *x, const float *y) {
  long bad = 0;
  for (long r = 0; r < SPLITK_M; r++) {
    double sum = 0, mag = 0;
    for (long c = 0; c < SPLITK_K; c++) {
      sum += (double)a[r * SPLITK_K + c] * x[c];
      mag += fabs((double)a[r * SPLITK_K + c] * x[c]);
    }
    if (!(fabs(y[r] - sum) <= 1e-4 * mag)) /* a NaN (the poison) fails too */
      if (bad++ < 3) fprintf(stderr, "y[%ld] = %g, the CPU's %g\n", r, y[r], sum);
  }
  return bad;
}

int main(void) {
  const size_t abytes = (size_t)SPLITK_M * SPLITK_K * sizeof(float);
  clcrt_runtime *rt = NULL;
  const clcrt_driver *cu = NULL;
  clcrt_stream *s = NULL;
  CUdeviceptr da = 0, dx = 0, dy = 0, dp = 0, dc = 0;
  float *a = malloc(abytes), *x = malloc(SPLITK_K * sizeof(float));
  float y[SPLITK_M], first[SPLITK_M];
  int rc = 1;
  clcrt_status st = clcrt_runtime_create(&rt, NULL);
  if (st != CLCRT_OK) {
    fprintf(stderr, "splitk: %s: %s\n", clcrt_status_name(st), clcrt_errmsg(rt));
    rc = st == CLCRT_E_NO_DEVICE ? 2 : 1;
    goto out;
  }
  cu = clcrt_runtime_driver(rt);
  if (!a || !x || cu->cuCtxSetCurrent(clcrt_runtime_context(rt)) != CUDA_SUCCESS) goto out;
  uint64_t seed = 3;
  for (size_t i = 0; i < abytes / sizeof(float) + SPLITK_K; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    float v = (float)((seed >> 40) & 0xffffff) / 8388608.0f - 1.0f;
    if (i < abytes / sizeof(float)) a[i] = v;
    else x[i - abytes / sizeof(float)] = v;
  }
  /* The decomposition: every tile shared out by k-blocks, over one unit per SM (the units of a
   * persistent grid at one CTA per SM), so that each unit has about the same work. */
  const unsigned tiles = (SPLITK_M + SPLITK_BM - 1) / SPLITK_BM, iters = (SPLITK_K + SPLITK_BK - 1) / SPLITK_BK;
  unsigned sk_units = (unsigned)clcrt_runtime_num_sms(rt);
  if (sk_units > tiles * iters) sk_units = tiles * iters;
  const size_t slots = 2 * (size_t)sk_units, counters = (size_t)tiles * SPLITK_WARPS;
  if (clcrt_stream_create(rt, NULL, &s) != CLCRT_OK) goto clcrt_failed;
  CUstream cs = clcrt_stream_cu(s); /* ordered with the stream's runs */
  if (cu->cuMemAlloc(&da, abytes) || cu->cuMemAlloc(&dx, SPLITK_K * sizeof(float)) ||
      cu->cuMemAlloc(&dy, sizeof y) || cu->cuMemAlloc(&dp, slots * SPLITK_BM * sizeof(float)) ||
      cu->cuMemAlloc(&dc, counters * sizeof(unsigned)) || cu->cuMemcpyHtoDAsync(da, a, abytes, cs) ||
      cu->cuMemcpyHtoDAsync(dx, x, SPLITK_K * sizeof(float), cs) ||
      /* The counters are zeroed once: the fix-up leaves each at 0 for the next run. */
      cu->cuMemsetD8Async(dc, 0, counters * sizeof(unsigned), cs)) {
    fprintf(stderr, "splitk: device memory could not be set up\n");
    goto out;
  }
  static const clcrt_sched scheds[] = {CLCRT_SCHED_AUTO, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};
  for (size_t i = 0; i < sizeof scheds / sizeof scheds[0]; i++) {
    clcrt_kernel *k = NULL;
    if (splitk_register(rt, scheds[i], &k) != CLCRT_OK) goto clcrt_failed;
    SplitkArgs args = {da, dx, dy, dp, dc, SPLITK_M, SPLITK_K, tiles, iters, tiles, sk_units};
    /* One tile of clcrt's grid per stream-K unit (clcrt_sk_units: sk_units, plus a unit per
     * tile left whole, of which there are none here). */
    if (cu->cuMemsetD8Async(dy, 0xff, sizeof y, cs)) goto out; /* poison: NaNs */
    if (clcrt_run(s, k, (clcrt_dim3){sk_units, 1, 1}, &args, sizeof args) != CLCRT_OK) goto clcrt_failed;
    if (cu->cuMemcpyDtoHAsync(y, dy, sizeof y, cs)) goto out;
    if (clcrt_stream_sync(s) != CLCRT_OK) goto clcrt_failed;
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    clcrt_kernel_info_get(k, &info);
    long bad = splitk_check(a, x, y);
    if (i == 0) memcpy(first, y, sizeof y);
    int same = memcmp(first, y, sizeof y) == 0; /* the same bits, whatever the schedule */
    printf("splitk     %-6s %d x %d, %u tiles of %u k-blocks over %u units: %s%s\n", clcrt_sched_name(info.sched),
           SPLITK_M, SPLITK_K, tiles, iters, sk_units, bad ? "WRONG" : "ok",
           same ? ", the same bits as auto's" : ", NOT the same bits as auto's");
    if (bad || !same) goto out;
  }
  rc = 0;
  goto out;
clcrt_failed:
  fprintf(stderr, "splitk: %s\n", clcrt_errmsg(rt));
out:
  clcrt_stream_destroy(s);
  CUdeviceptr bufs[] = {da, dx, dy, dp, dc};
  for (int i = 0; i < 5; i++)
    if (bufs[i]) cu->cuMemFree(bufs[i]);
  clcrt_runtime_destroy(rt);
  free(a), free(x);
  return rc;
}
