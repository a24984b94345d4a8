/* A 5-point stencil on a 2-D tile map with 2-CTA clusters:
 *   out[i][j] = center * in[i][j] + side * (in[i-1][j] + in[i+1][j] + in[i][j-1] + in[i][j+1]),
 * with zeros outside the H x W grid, in tiles of 32 x 32. What it shows (docs/tile-functions.md):
 *   - clcrt::TileMap2D (nvrtc_src/clcrt_tilemap.cuh): a swizzled raster over tm x tn tiles,
 *     launched as a 1-D grid of map.units() work units, each a cluster of 2 tiles;
 *   - clusters and Tile.cta_rank: the two CTAs of a cluster take vertically adjacent tiles, and
 *     each reads the row it needs across their border from the other's shared memory
 *     (distributed shared memory, PTX mapa) instead of from global memory;
 *   - cluster barriers inside a tile function: both CTAs of a cluster run the same units in
 *     the same order, so they meet at every barrier, also the CTA whose tile lies past the
 *     grid's edge (`inside` false): it still takes part, with nothing to compute.
 * Exit status: 0 the results match the CPU's, 2 no GPU, 1 any other failure. The calls to the
 * driver go through the runtime's table (clcrt_runtime_driver): no libcuda is linked. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h> /* types only: the calls go through the runtime's driver table */

#include "clcrt.h"

/* 990 rows make an odd number of tile rows (31): the last cluster's second CTA is outside. */
enum { STENCIL_H = 990, STENCIL_W = 1500, STENCIL_TILE = 32 };

static const char stencil_src[] =
    "#include \"clcrt_tilemap.cuh\"\n"
    "#define TILE 32 // a tile is TILE x TILE points; a CTA is 32 x 8 threads\n"
    "\n"
    "struct StencilArgs {\n"
    "  const float *in;\n"
    "  float *out;\n"
    "  unsigned h, w;   // the grid\n"
    "  unsigned tm, tn; // its tiles: ceil(h / TILE) x ceil(w / TILE)\n"
    "  float center, side;\n"
    "};\n"
    "\n"
    "// The address of the same shared-memory location in CTA `rank` of this cluster.\n"
    "__device__ __forceinline__ const float *cluster_peer(const float *p, unsigned rank) {\n"
    "  unsigned long long q;\n"
    "  asm volatile(\"mapa.u64 %0, %1, %2;\" : \"=l\"(q) : \"l\"(p), \"r\"(rank));\n"
    "  return (const float *)q;\n"
    "}\n"
    "\n"
    "__device__ __forceinline__ void cluster_sync() {\n"
    "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\t\"\n"
    "               \"barrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n"
    "}\n"
    "\n"
    "// in[i][j], or 0 outside the grid.\n"
    "__device__ __forceinline__ float at(const StencilArgs &a, int i, int j) {\n"
    "  return i >= 0 && j >= 0 && i < (int)a.h && j < (int)a.w ? a.in[(long)i * a.w + j] : 0.0f;\n"
    "}\n"
    "\n"
    "__device__ void stencil_tile(const clcrt::Tile &t, const StencilArgs &a) {\n"
    "  __shared__ float s[TILE][TILE]; // this CTA's tile of `in`\n"
    "  // Bands of 4 cluster rows, raster along n; units of 2 x 1 tiles: rank 0 takes tile\n"
    "  // row m, rank 1 the row below it.\n"
    "  const clcrt::TileMap2D map(a.tm, a.tn, 4, true, 2, 1);\n"
    "  const clcrt::TileCoord c = map.get(t.unit, t.cta_rank);\n"
    "  const int i0 = c.m * TILE, j = c.n * TILE + threadIdx.x;\n"
    "  for (int r = threadIdx.y; r < TILE; r += blockDim.y) s[r][threadIdx.x] = c.inside ? at(a, i0 + r, j) : 0.0f;\n"
    "  cluster_sync(); // both tiles are in shared memory\n"
    "  if (c.inside) {\n"
    "    const float *other = cluster_peer(&s[0][0], t.cta_rank ^ 1);\n"
    "    for (int r = threadIdx.y; r < TILE; r += blockDim.y) {\n"
    "      const int i = i0 + r;\n"
    "      if (i >= (int)a.h || j >= (int)a.w) continue;\n"
    "      // Across the border between the two tiles, from the other CTA's shared memory.\n"
    "      float up = r > 0 ? s[r - 1][threadIdx.x]\n"
    "                 : t.cta_rank == 1 ? other[(TILE - 1) * TILE + threadIdx.x] : at(a, i - 1, j);\n"
    "      float down = r < TILE - 1 ? s[r + 1][threadIdx.x]\n"
    "                   : t.cta_rank == 0 && i + 1 < (int)a.h ? other[threadIdx.x] : at(a, i + 1, j);\n"
    "      float left = threadIdx.x > 0 ? s[r][threadIdx.x - 1] : at(a, i, j - 1);\n"
    "      float right = threadIdx.x < TILE - 1 ? s[r][threadIdx.x + 1] : at(a, i, j + 1);\n"
    "      a.out[(long)i * a.w + j] = a.center * s[r][threadIdx.x] + a.side * (up + down + left + right);\n"
    "    }\n"
    "  }\n"
    "  cluster_sync(); // neither CTA loads its next tile while the other may still read this one\n"
    "}\n";

typedef struct StencilArgs {
  CUdeviceptr in, out;
  unsigned h, w, tm, tn;
  float center, side;
} StencilArgs;

static clcrt_status stencil_register(clcrt_runtime *rt, clcrt_sched sched, clcrt_kernel **k) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = stencil_src;
  d.tile_fn = "stencil_tile";
  d.args_type = "StencilArgs";
  d.block = (clcrt_dim3){STENCIL_TILE, 8, 1};
  d.cluster = (clcrt_dim3){2, 1, 1};
  d.sched = sched;
  return clcrt_register(rt, &d, k);
}

static float stencil_at(const float *in, long i, long j) {
  return i >= 0 && j >= 0 && i < STENCIL_H && j < STENCIL_W ? in[i * STENCIL_W + j] : 0.0f;
}

/* Every point against the CPU, in double precision; 0 when all match. */
static long stencil_check(const float *in, const float *out, float center, float side) {
  long bad = 0;
  for (long i = 0; i < STENCIL_H; i++)
    for (long j = 0; j < STENCIL_W; j++) {
      double want = (double)center * stencil_at(in, i, j) +
                    (double)side * ((double)stencil_at(in, i - 1, j) + stencil_at(in, i + 1, j) +
                                    stencil_at(in, i, j - 1) + stencil_at(in, i, j + 1));
      float got = out[i * STENCIL_W + j];
      if (!(fabs(got - want) <= 1e-5)) /* a NaN (the poison) fails too */
        if (bad++ < 3) fprintf(stderr, "out[%ld][%ld] = %g, the CPU's %g\n", i, j, got, want);
    }
  return bad;
}

int main(void) {
  const size_t bytes = (size_t)STENCIL_H * STENCIL_W * sizeof(float);
  clcrt_runtime *rt = NULL;
  const clcrt_driver *cu = NULL;
  clcrt_stream *s = NULL;
  CUdeviceptr din = 0, dout = 0;
  float *in = malloc(bytes), *out = malloc(bytes);
  int rc = 1;
  clcrt_status st = clcrt_runtime_create(&rt, NULL);
  if (st != CLCRT_OK) {
    fprintf(stderr, "stencil2d: %s: %s\n", clcrt_status_name(st), clcrt_errmsg(rt));
    rc = st == CLCRT_E_NO_DEVICE ? 2 : 1;
    goto out;
  }
  cu = clcrt_runtime_driver(rt);
  if (!in || !out || cu->cuCtxSetCurrent(clcrt_runtime_context(rt)) != CUDA_SUCCESS) goto out;
  uint64_t seed = 7;
  for (size_t i = 0; i < bytes / sizeof(float); i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    in[i] = (float)((seed >> 40) & 0xffffff) / 8388608.0f - 1.0f;
  }
  if (clcrt_stream_create(rt, NULL, &s) != CLCRT_OK) goto clcrt_failed;
  CUstream cs = clcrt_stream_cu(s); /* ordered with the stream's runs */
  if (cu->cuMemAlloc(&din, bytes) || cu->cuMemAlloc(&dout, bytes) || cu->cuMemcpyHtoDAsync(din, in, bytes, cs)) {
    fprintf(stderr, "stencil2d: device memory could not be set up\n");
    goto out;
  }
  /* The map's units: ceil(tm / 2) x tn clusters of 2 tiles (TileMap2D::units() on the device),
   * launched as a 1-D tile grid of 2 tiles per unit, which the 2 x 1 x 1 cluster divides:
   * no tile is padded, so both CTAs of every cluster reach the cluster barriers. */
  const unsigned tm = (STENCIL_H + STENCIL_TILE - 1) / STENCIL_TILE, tn = (STENCIL_W + STENCIL_TILE - 1) / STENCIL_TILE;
  const unsigned units = (tm + 1) / 2 * tn;
  static const clcrt_sched scheds[] = {CLCRT_SCHED_AUTO, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};
  for (size_t i = 0; i < sizeof scheds / sizeof scheds[0]; i++) {
    clcrt_kernel *k = NULL;
    if (stencil_register(rt, scheds[i], &k) != CLCRT_OK) goto clcrt_failed;
    StencilArgs a = {din, dout, STENCIL_H, STENCIL_W, tm, tn, 0.5f, 0.125f};
    if (cu->cuMemsetD8Async(dout, 0xff, bytes, cs)) goto out; /* poison: NaNs */
    if (clcrt_run(s, k, (clcrt_dim3){2 * units, 1, 1}, &a, sizeof a) != CLCRT_OK) goto clcrt_failed;
    if (cu->cuMemcpyDtoHAsync(out, dout, bytes, cs)) goto out;
    if (clcrt_stream_sync(s) != CLCRT_OK) goto clcrt_failed;
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    clcrt_kernel_info_get(k, &info);
    long bad = stencil_check(in, out, a.center, a.side);
    printf("stencil2d  %-6s %d x %d points, %u x %u tiles, %u clusters of 2: %s\n", clcrt_sched_name(info.sched),
           STENCIL_H, STENCIL_W, tm, tn, units, bad ? "WRONG" : "ok");
    if (bad) goto out;
  }
  rc = 0;
  goto out;
clcrt_failed:
  fprintf(stderr, "stencil2d: %s\n", clcrt_errmsg(rt));
out:
  clcrt_stream_destroy(s);
  if (din) cu->cuMemFree(din);
  if (dout) cu->cuMemFree(dout);
  clcrt_runtime_destroy(rt);
  free(in), free(out);
  return rc;
}
