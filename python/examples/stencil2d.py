#!/usr/bin/env python3
"""A 5-point stencil on a 2-D tile map with 2-CTA clusters, from Python:
out[i][j] = center * in[i][j] + side * (in[i-1][j] + in[i+1][j] + in[i][j-1] + in[i][j+1]), with
zeros outside the grid. examples/stencil2d.c is the same program in C, and its comment says what
the tile function shows (docs/tile-functions.md explains each).

    python3 python/examples/stencil2d.py

Runs under AUTO, STATIC and FIXED on torch tensors, each checked against torch on the CPU. Exit
status: 0 right, 2 no GPU (or no PyTorch), 1 wrong.
"""

import sys

import clcrt

H, W, TILE = 990, 1500, 32  # 31 tile rows: the last cluster's second CTA lies outside the grid

# The tile source, the same as examples/stencil2d.c's (python/tests/test_examples.py checks it).
SRC = r"""#include "clcrt_tilemap.cuh"
#define TILE 32 // a tile is TILE x TILE points; a CTA is 32 x 8 threads

struct StencilArgs {
  const float *in;
  float *out;
  unsigned h, w;   // the grid
  unsigned tm, tn; // its tiles: ceil(h / TILE) x ceil(w / TILE)
  float center, side;
};

// The address of the same shared-memory location in CTA `rank` of this cluster.
__device__ __forceinline__ const float *cluster_peer(const float *p, unsigned rank) {
  unsigned long long q;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(q) : "l"(p), "r"(rank));
  return (const float *)q;
}

__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
               "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// in[i][j], or 0 outside the grid.
__device__ __forceinline__ float at(const StencilArgs &a, int i, int j) {
  return i >= 0 && j >= 0 && i < (int)a.h && j < (int)a.w ? a.in[(long)i * a.w + j] : 0.0f;
}

__device__ void stencil_tile(const clcrt::Tile &t, const StencilArgs &a) {
  __shared__ float s[TILE][TILE]; // this CTA's tile of `in`
  // Bands of 4 cluster rows, raster along n; units of 2 x 1 tiles: rank 0 takes tile
  // row m, rank 1 the row below it.
  const clcrt::TileMap2D map(a.tm, a.tn, 4, true, 2, 1);
  const clcrt::TileCoord c = map.get(t.unit, t.cta_rank);
  const int i0 = c.m * TILE, j = c.n * TILE + threadIdx.x;
  for (int r = threadIdx.y; r < TILE; r += blockDim.y) s[r][threadIdx.x] = c.inside ? at(a, i0 + r, j) : 0.0f;
  cluster_sync(); // both tiles are in shared memory
  if (c.inside) {
    const float *other = cluster_peer(&s[0][0], t.cta_rank ^ 1);
    for (int r = threadIdx.y; r < TILE; r += blockDim.y) {
      const int i = i0 + r;
      if (i >= (int)a.h || j >= (int)a.w) continue;
      // Across the border between the two tiles, from the other CTA's shared memory.
      float up = r > 0 ? s[r - 1][threadIdx.x]
                 : t.cta_rank == 1 ? other[(TILE - 1) * TILE + threadIdx.x] : at(a, i - 1, j);
      float down = r < TILE - 1 ? s[r + 1][threadIdx.x]
                   : t.cta_rank == 0 && i + 1 < (int)a.h ? other[threadIdx.x] : at(a, i + 1, j);
      float left = threadIdx.x > 0 ? s[r][threadIdx.x - 1] : at(a, i, j - 1);
      float right = threadIdx.x < TILE - 1 ? s[r][threadIdx.x + 1] : at(a, i, j + 1);
      a.out[(long)i * a.w + j] = a.center * s[r][threadIdx.x] + a.side * (up + down + left + right);
    }
  }
  cluster_sync(); // neither CTA loads its next tile while the other may still read this one
}
"""


class StencilArgs(clcrt.Args):
    # `in` is a Python keyword, so the fields are listed in _fields_ rather than annotated.
    _fields_ = [("in", clcrt.ptr("float32")), ("out", clcrt.ptr("float32")),
                ("h", clcrt.u32), ("w", clcrt.u32), ("tm", clcrt.u32), ("tn", clcrt.u32),
                ("center", clcrt.f32), ("side", clcrt.f32)]


def register(rt, sched="auto"):
    """The tile function for `sched`: 32 x 8 threads per tile, clusters of 2 CTAs."""
    return rt.register(SRC, "stencil_tile", StencilArgs, block=(TILE, 8), cluster=(2, 1, 1), sched=sched)


def main():
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("stencil2d.py: needs PyTorch for its tensors")
        return 2
    if not torch.cuda.is_available():
        print("stencil2d.py: no GPU")
        return 2
    rt = clcrt.runtime(torch.cuda.current_device())
    x = torch.rand(H, W, generator=torch.Generator().manual_seed(7)) * 2 - 1
    center, side = 0.5, 0.125
    p = F.pad(x.double(), (1, 1, 1, 1))  # zeros outside the grid
    ref = center * p[1:-1, 1:-1] + side * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])
    tm, tn = (H + TILE - 1) // TILE, (W + TILE - 1) // TILE
    units = (tm + 1) // 2 * tn  # the map's units (TileMap2D::units()): clusters of 2 tiles
    xd = x.cuda()
    for sched in ("auto", "static", "fixed"):
        k = register(rt, sched)
        out = torch.full((H, W), float("nan"), device="cuda")
        # A 1-D tile grid of 2 tiles per unit, which the 2 x 1 x 1 cluster divides: no tile is
        # padded, so both CTAs of every cluster reach the cluster barriers.
        k.run(2 * units, StencilArgs(xd, out, H, W, tm, tn, center, side))
        ok = bool(((out.cpu().double() - ref).abs() <= 1e-5).all())
        print("stencil2d.py %-6s %d x %d points: %s" % (k.info.sched.name.lower(), H, W, "ok" if ok else "WRONG"))
        if not ok:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
