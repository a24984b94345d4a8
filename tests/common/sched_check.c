/* Exactly-once checking for the GPU suites (sched_check.h). */
#include "sched_check.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sched_check_src =
    "struct CheckArgs {\n"
    "  unsigned *hits; unsigned long long *lin; unsigned *rank; unsigned *bad;\n"
    "  const float *x; float *y; float alpha;\n"
    "  unsigned tx, ty, tz;\n"
    "  unsigned *prologue; unsigned max_ctas; unsigned *grid_ctas;\n"
    "};\n"
    "struct CheckState { float alpha; };\n"
    "__device__ void check_prologue(const CheckArgs &a, CheckState &s) {\n"
    "  unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);\n"
    "  unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
    "  s.alpha = a.alpha;\n"
    "  if (tid == 0) {\n"
    "    if (cta < a.max_ctas) atomicAdd(&a.prologue[cta], 1u); else atomicAdd(a.bad, 1u);\n"
    "    if (cta == 0) *a.grid_ctas = gridDim.x * gridDim.y * gridDim.z;\n"
    "  }\n"
    "}\n"
    "__device__ void body(const clcrt::Tile &t, const CheckArgs &a, float alpha) {\n"
    "  unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
    "  unsigned nt = blockDim.x * blockDim.y * blockDim.z;\n"
    "  if (t.coord.x >= a.tx || t.coord.y >= a.ty || t.coord.z >= a.tz) { if (tid == 0) atomicAdd(a.bad, 1u); return; }\n"
    "  unsigned long long L = t.coord.x + (unsigned long long)a.tx * (t.coord.y + (unsigned long long)a.ty * t.coord.z);\n"
    "  if (tid == 0) { atomicAdd(&a.hits[L], 1u); a.lin[L] = t.linear; a.rank[L] = t.cta_rank; }\n"
    "  unsigned long long i = L * nt + tid;\n"
    "  a.y[i] = alpha * a.x[i] + (float)(L % 1000);\n"
    "}\n"
    "__device__ void check_tile_s(const clcrt::Tile &t, const CheckArgs &a, CheckState &s) { body(t, a, s.alpha); }\n"
    "__device__ void check_tile(const clcrt::Tile &t, const CheckArgs &a) { body(t, a, a.alpha); }\n";

clcrt_kernel *sched_check_reg(clcrt_runtime *rt, clcrt_sched sched, clcrt_grid grid, clcrt_dim3 cluster,
                              clcrt_dim3 block, int prologue, unsigned smem, const char *src, const char *fn,
                              const char *option) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = src ? src : sched_check_src;
  d.tile_fn = fn ? fn : prologue ? "check_tile_s" : "check_tile";
  d.args_type = "CheckArgs";
  d.block = block;
  d.cluster = cluster;
  d.sched = sched;
  d.grid = grid;
  d.smem_bytes = smem;
  const char *opts[1] = {option};
  d.options = opts;
  d.num_options = option ? 1 : 0;
  if (prologue) {
    d.state_type = "CheckState";
    d.prologue_fn = "check_prologue";
  }
  clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_register(rt, &d, &k);
  ck_assert_msg(st == CLCRT_OK, "register %s: %s", d.tile_fn, clcrt_errmsg(rt));
  return k;
}

void bufs_make(bufs *b, clcrt_dim3 tiles, clcrt_dim3 cluster, unsigned nt, uint64_t seed) {
  memset(b, 0, sizeof *b);
  b->ntiles = (size_t)tiles.x * tiles.y * tiles.z;
  b->nt = nt;
  b->nelem = b->ntiles * nt;
  size_t units = (size_t)((tiles.x + cluster.x - 1) / cluster.x) * ((tiles.y + cluster.y - 1) / cluster.y) *
                 ((tiles.z + cluster.z - 1) / cluster.z);
  b->max_ctas = units * cluster.x * cluster.y * cluster.z;
  b->hx = malloc(b->nelem * sizeof(float));
  ck_assert_ptr_nonnull(b->hx);
  fill_random(b->hx, b->nelem, seed);
  b->a.x = gpu_alloc(b->nelem * 4);
  gpu_put(b->a.x, b->hx, b->nelem * 4);
  b->a.y = gpu_alloc(b->nelem * 4);
  gpu_fill_u8(b->a.y, 0xff, b->nelem * 4); /* poison: NaN */
  b->a.hits = gpu_alloc(b->ntiles * 4);
  gpu_fill_u8(b->a.hits, 0, b->ntiles * 4);
  b->a.lin = gpu_alloc(b->ntiles * 8);
  gpu_fill_u8(b->a.lin, 0xff, b->ntiles * 8);
  b->a.rank = gpu_alloc(b->ntiles * 4);
  gpu_fill_u8(b->a.rank, 0xff, b->ntiles * 4);
  b->a.bad = gpu_alloc(4);
  gpu_fill_u8(b->a.bad, 0, 4);
  b->a.prologue = gpu_alloc(b->max_ctas * 4);
  gpu_fill_u8(b->a.prologue, 0, b->max_ctas * 4);
  b->a.grid_ctas = gpu_alloc(4);
  gpu_fill_u8(b->a.grid_ctas, 0, 4);
  b->a.max_ctas = (unsigned)b->max_ctas;
  b->a.alpha = 1.5f + (float)(seed % 7);
  b->a.tx = tiles.x, b->a.ty = tiles.y, b->a.tz = tiles.z;
}

void bufs_free(bufs *b) {
  gpu_free(b->a.x), gpu_free(b->a.y), gpu_free(b->a.hits), gpu_free(b->a.lin), gpu_free(b->a.rank);
  gpu_free(b->a.bad), gpu_free(b->a.prologue), gpu_free(b->a.grid_ctas);
  free(b->hx);
}

/* Checks the results (with plain ifs in the loops: every passing ck_assert writes a mark
 * point to Check's pipe in fork mode, which for millions of elements takes minutes). */
/* Checks the results of `reps` runs (prologue: whether the kernel has one, checked for
 * the last launch only when reps == 1). */
void bufs_check(bufs *b, clcrt_dim3 cluster, unsigned reps, int prologue, const char *what) {
  unsigned *hits = malloc(b->ntiles * 4), *rank = malloc(b->ntiles * 4), bad = 0;
  unsigned long long *lin = malloc(b->ntiles * 8);
  float *y = malloc(b->nelem * 4);
  gpu_get(hits, b->a.hits, b->ntiles * 4);
  gpu_get(rank, b->a.rank, b->ntiles * 4);
  gpu_get(lin, b->a.lin, b->ntiles * 8);
  gpu_get(y, b->a.y, b->nelem * 4);
  gpu_get(&bad, b->a.bad, 4);
  if (!(bad == 0)) ck_abort_msg("%s: %u padded or out-of-range tiles reached the tile function", what, bad);
  unsigned tx = b->a.tx, ty = b->a.ty;
  for (size_t L = 0; L < b->ntiles; L++) {
    if (!(hits[L] == reps)) ck_abort_msg("%s: tile %zu ran %u times, expected %u", what, L, hits[L], reps);
    if (!(lin[L] == L)) ck_abort_msg("%s: tile %zu saw linear %llu", what, L, lin[L]);
    unsigned cx = (unsigned)(L % tx), cy = (unsigned)(L / tx % ty), cz = (unsigned)(L / tx / ty);
    unsigned er = cx % cluster.x + cluster.x * (cy % cluster.y + cluster.y * (cz % cluster.z));
    if (!(rank[L] == er)) ck_abort_msg("%s: tile %zu (%u,%u,%u) ran on CTA rank %u, expected %u", what, L, cx, cy, cz,
                  rank[L], er);
  }
  for (size_t i = 0; i < b->nelem; i++) {
    double ref = (double)b->a.alpha * b->hx[i] + (double)((i / b->nt) % 1000);
    if (!(fabs((double)y[i] - ref) <= 1e-5 * (1 + fabs(ref)))) ck_abort_msg("%s: y[%zu] = %g, expected %g", what, i,
                  (double)y[i], ref);
  }
  if (prologue && reps == 1) {
    unsigned g = 0;
    unsigned *pro = malloc(b->max_ctas * 4);
    gpu_get(&g, b->a.grid_ctas, 4);
    gpu_get(pro, b->a.prologue, b->max_ctas * 4);
    if (!(g > 0 && g <= b->max_ctas)) ck_abort_msg("%s: grid of %u CTAs (max %zu)", what, g, b->max_ctas);
    for (size_t i = 0; i < b->max_ctas; i++)
      if (!(pro[i] == (i < g ? 1u : 0u))) ck_abort_msg("%s: prologue of CTA %zu ran %u times (grid %u CTAs)", what, i,
                    pro[i], g);
    free(pro);
  }
  free(hits), free(rank), free(lin), free(y);
}


void bufs_reset_hits(bufs *b) { gpu_fill_u8(b->a.hits, 0, b->ntiles * 4); }
