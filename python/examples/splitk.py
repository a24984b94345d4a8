#!/usr/bin/env python3
"""A split-K reduction with the stream-K header, from Python: y = A x for a short, wide A whose
few output tiles cannot fill the GPU, so each tile's k-blocks are shared out over one unit per SM
and a deterministic fix-up adds the pieces. examples/splitk.c is the same program in C, and its
comment says what the tile function shows (docs/tile-functions.md explains each).

    python3 python/examples/splitk.py

Runs under AUTO, STATIC and FIXED on torch tensors, each checked against torch on the CPU, and
checks that all three give the same bits. Exit status: 0 right, 2 no GPU (or no PyTorch), 1 wrong.
"""

import sys

import clcrt

M, K, BM, BK, WARPS = 200, 1 << 16, 64, 1024, 8

# The tile source, the same as examples/splitk.c's (python/tests/test_examples.py checks it).
SRC = r"""#include "clcrt_streamk.cuh"
#define BM 64   // rows per output tile: 8 warps of 8 rows
#define BK 1024 // columns per iteration (k-block)

struct SplitkArgs {
  const float *a;      // m x k, row-major
  const float *x;      // k
  float *y;            // m
  float *partials;     // the fix-up's workspace: 2 * sk_units slots of BM floats
  unsigned *counters;  // one per shared tile and warp, 0 before the first run
  unsigned m, k;
  unsigned tiles, iters, sk_tiles, sk_units; // the decomposition (clcrt_sk_make)
};

__device__ void splitk_tile(const clcrt::Tile &t, const SplitkArgs &a) {
  const clcrt_sk sk = clcrt_sk_make(a.tiles, a.iters, a.sk_tiles, a.sk_units, 0);
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Unit t.unit covers k-blocks [g.k0, g.k1) of tile g.tile for each of its segments.
  for (unsigned i = 0, n = clcrt_sk_segments(&sk, t.unit); i < n; i++) {
    const clcrt_sk_seg g = clcrt_sk_segment(&sk, t.unit, i);
    const unsigned row0 = g.tile * BM + warp * 8;
    const unsigned k1 = min(g.k1 * BK, a.k);
    float mine = 0.0f; // lane r < 8 ends with row row0 + r's sum over the segment
    for (unsigned r = 0; r < 8 && row0 + r < a.m; r++) {
      const float *arow = a.a + (long)(row0 + r) * a.k;
      float s = 0.0f;
      for (unsigned c = g.k0 * BK + lane; c < k1; c += 32) s += arow[c] * a.x[c];
      for (int d = 16; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
      if (lane == r) mine = s;
    }
    if (g.pieces == 1) { // the whole tile: no fix-up
      if (lane < 8 && row0 + lane < a.m) a.y[row0 + lane] = mine;
      continue;
    }
    // One piece of a shared tile: the warp's partial into the piece's own slot, then count
    // in. The last of the tile's pieces to arrive adds them all, in piece order.
    float *slot = a.partials + (long)g.slot * BM + warp * 8;
    if (lane < 8) slot[lane] = mine;
    if (!clcrt::sk_arrive_warp(&a.counters[g.shared * 8 + warp], g.pieces)) continue;
    if (lane == 0) {
      float sum[8]; // the warp's 8 rows: 2 vectors of 4 floats per slot
      clcrt::sk_sum<2>(sk, g.shared, clcrt_sk_first_unit(&sk, g.shared), g.pieces, a.partials + warp * 8, BM,
                       4, 2, sum);
      for (unsigned r = 0; r < 8 && row0 + r < a.m; r++) a.y[row0 + r] = sum[r];
    }
  }
}
"""


class SplitkArgs(clcrt.Args):
    a: clcrt.ptr("float32")
    x: clcrt.ptr("float32")
    y: clcrt.ptr("float32")
    partials: clcrt.ptr("float32")
    counters: clcrt.ptr  # unsigned *: any tensor of 4-byte elements (torch has few uint32 ops)
    m: clcrt.u32
    k: clcrt.u32
    tiles: clcrt.u32
    iters: clcrt.u32
    sk_tiles: clcrt.u32
    sk_units: clcrt.u32


def register(rt, sched="auto"):
    return rt.register(SRC, "splitk_tile", SplitkArgs, block=32 * WARPS, sched=sched)


def main():
    try:
        import torch
    except ImportError:
        print("splitk.py: needs PyTorch for its tensors")
        return 2
    if not torch.cuda.is_available():
        print("splitk.py: no GPU")
        return 2
    dev = torch.cuda.current_device()
    rt = clcrt.runtime(dev)
    g = torch.Generator().manual_seed(3)
    a, x = torch.rand(M, K, generator=g) * 2 - 1, torch.rand(K, generator=g) * 2 - 1
    ref = a.double() @ x.double()
    mag = a.double().abs() @ x.double().abs()
    # Every tile shared out by k-blocks over one unit per SM; one clcrt tile per stream-K unit.
    tiles, iters = (M + BM - 1) // BM, (K + BK - 1) // BK
    sk_units = min(torch.cuda.get_device_properties(dev).multi_processor_count, tiles * iters)
    ad, xd = a.cuda(), x.cuda()
    partials = torch.empty(2 * sk_units * BM, device="cuda")
    counters = torch.zeros(tiles * WARPS, dtype=torch.int32, device="cuda")  # once: the fix-up resets them
    first = None
    for sched in ("auto", "static", "fixed"):
        k = register(rt, sched)
        y = torch.full((M,), float("nan"), device="cuda")
        k.run(sk_units, SplitkArgs(ad, xd, y, partials, counters, M, K, tiles, iters, tiles, sk_units))
        yc = y.cpu()
        ok = bool(((yc.double() - ref).abs() <= 1e-4 * mag).all())
        first = yc if first is None else first
        same = torch.equal(yc, first)  # the fix-up adds in piece order, whatever the schedule
        print("splitk.py %-6s %d x %d over %d units: %s%s" % (k.info.sched.name.lower(), M, K, sk_units,
              "ok" if ok else "WRONG", "" if same else ", NOT the same bits as auto's"))
        if not (ok and same):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
