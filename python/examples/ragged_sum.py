#!/usr/bin/env python3
"""A ragged-batch reduction with a prologue, from Python: y[r] = sum over j of w[j] * x[offsets[r] + j],
one row per tile, rows of any length up to MAX_LEN. examples/ragged_sum.c is the same program in
C, and its comment says what the tile function shows (docs/tile-functions.md explains each).

    python3 python/examples/ragged_sum.py

Runs under AUTO, STATIC and FIXED on torch tensors, each checked against torch on the CPU. Exit
status: 0 right, 2 no GPU (or no PyTorch), 1 wrong.
"""

import sys

import clcrt

MAX_LEN, BLOCK, ROWS = 4096, 256, 20000

# The tile source, the same as examples/ragged_sum.c's (python/tests/test_examples.py checks it).
SRC = r"""struct RaggedArgs {
  const float *x;      // the rows, one after another
  const long *offsets; // row r is x[offsets[r] .. offsets[r + 1])
  const float *w;      // a weight per position in a row: max_len of them
  float *y;            // a sum per row
  unsigned max_len;
};

// Each thread's own copy, made by the prologue once per CTA and kept across its tiles.
struct RaggedState {
  const float *w; // the weights, staged in shared memory
  float *partial; // a partial sum per warp, after them
  unsigned warp, lane;
};

__device__ void ragged_prologue(const RaggedArgs &a, RaggedState &s) {
  float *w = (float *)clcrt::smem();
  for (unsigned j = threadIdx.x; j < a.max_len; j += blockDim.x) w[j] = a.w[j];
  s.w = w;
  s.partial = w + a.max_len;
  s.warp = threadIdx.x / 32;
  s.lane = threadIdx.x % 32;
  __syncthreads(); // every weight is in place before any thread's first tile reads one
}

__device__ void ragged_tile(const clcrt::Tile &t, const RaggedArgs &a, RaggedState &s) {
  const long begin = a.offsets[t.linear], len = a.offsets[t.linear + 1] - begin;
  float sum = 0.0f;
  for (long j = threadIdx.x; j < len; j += blockDim.x) sum += s.w[j] * a.x[begin + j];
  for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
  if (s.lane == 0) s.partial[s.warp] = sum;
  __syncthreads(); // every warp's partial is written
  if (s.warp == 0) {
    sum = s.lane < blockDim.x / 32 ? s.partial[s.lane] : 0.0f;
    for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
    if (s.lane == 0) a.y[t.linear] = sum;
  }
  __syncthreads(); // warp 0 has read partial[] before the CTA's next tile writes it
}
"""


class RaggedArgs(clcrt.Args):  # the device struct, field for field (NVRTC checks it)
    x: clcrt.ptr("float32")
    offsets: clcrt.ptr("int64")
    w: clcrt.ptr("float32")
    y: clcrt.ptr("float32")
    max_len: clcrt.u32


def register(rt, sched="auto"):
    """The tile function with its prologue and per-thread State, for `sched`."""
    return rt.register(SRC, "ragged_tile", RaggedArgs, block=BLOCK, sched=sched, state_type="RaggedState",
                       prologue_fn="ragged_prologue", smem_bytes=(MAX_LEN + BLOCK // 32) * 4)  # w, then the partials


def main():
    try:
        import torch
    except ImportError:
        print("ragged_sum.py: needs PyTorch for its tensors")
        return 2
    if not torch.cuda.is_available():
        print("ragged_sum.py: no GPU")
        return 2
    rt = clcrt.runtime(torch.cuda.current_device())
    g = torch.Generator().manual_seed(1)
    # Rows mostly short, a few long and some empty: the cost of a tile varies 4096-fold.
    lens = torch.randint(0, 160, (ROWS,), generator=g)
    long_rows = torch.rand(ROWS, generator=g) < 0.03
    lens[long_rows] = MAX_LEN
    offsets = torch.zeros(ROWS + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lens, 0)
    x = torch.rand(int(offsets[-1]), generator=g) * 2 - 1
    w = torch.rand(MAX_LEN, generator=g) * 2 - 1
    # The CPU's answer in double precision: every element times its position's weight, summed per row.
    row = torch.repeat_interleave(torch.arange(ROWS), lens)
    pos = torch.arange(len(x)) - offsets[row]
    terms = x.double() * w.double()[pos]
    ref = torch.zeros(ROWS, dtype=torch.float64).index_add_(0, row, terms)
    mag = torch.zeros(ROWS, dtype=torch.float64).index_add_(0, row, terms.abs())
    xd, offd, wd = x.cuda(), offsets.cuda(), w.cuda()
    for sched in ("auto", "static", "fixed"):
        k = register(rt, sched)
        y = torch.full((ROWS,), float("nan"), device="cuda")  # poisoned: a row no tile wrote fails
        k.run(ROWS, RaggedArgs(xd, offd, wd, y, MAX_LEN))   # one tile per row, on torch's current stream
        err = (y.cpu().double() - ref).abs()
        ok = bool((err <= 1e-5 * mag + 1e-6).all())        # NaN compares false
        print("ragged_sum.py %-6s %d rows: %s" % (k.info.sched.name.lower(), ROWS, "ok" if ok else "WRONG"))
        if not ok:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
