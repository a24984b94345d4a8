#!/usr/bin/env python3
"""A decode MLP block as one task graph: RMSNorm -> gate/up projection with SiLU x up -> down
projection (in K slices) -> sum of the slices + residual, bf16, for a batch of 1 to 16 tokens.

    python3 python/examples/decode_mlp.py [--hidden 2048] [--inter 8192] [--batch 4]

Four tile functions of one source, four nodes, three kinds of edge (docs/taskgraph.md):

    node 0  rmsnorm    one tile per token                       xn = x / rms(x) * w
    node 1  gate_up    16 rows of the intermediate per tile     h = silu(xn Wg^T) * (xn Wu^T)
    node 2  down       32 output columns x one K slice          part[s] = h[:, slice s] Wd[:, slice s]^T
    node 3  residual   32 output columns                        out = sum_s part[s] + x

    0 -> 1  "all"              every gate/up tile needs every token's norm (the projections'
                               tiles prefetch their first weights into L2 while they wait)
    1 -> 2  "rows", C, L / 16  down tile (s, c) needs the gate/up tiles of K slice s only, so the
                               first slices start while later gate/up tiles still run
    2 -> 3  "kslices", S       output tile c needs the S slices (s, c)

The same tile functions also run one launch per node (DecodeMLP.run_nodes). The task graph saves
a launch, a ramp-up and a tail per step and pays a ticket, a wait and a release per tile;
python/bench/decode_mlp.py times both against torch (docs/results.md). Exit status: 0 right,
2 no GPU (or no PyTorch), 1 wrong.
"""

import argparse
import sys

import clcrt

ROWS_GU = 16  # intermediate rows per gate/up tile (an mma's 16 rows of gate and of up; 8 warps split k)
ROWS_D = 32  # output columns per down tile (two mma row blocks; 8 warps split the K slice)
BLOCK = 256
SMEM = 8 * 2 * 2 * 32 * 4 * 4  # sizeof(WarpSum<2, 2>): the warps' fragments, in dynamic shared memory

SRC = r"""
// bf16 by hand (no headers needed): the top half of a float, rounded to nearest even.
__device__ __forceinline__ float bf(unsigned short v) { return __uint_as_float((unsigned)v << 16); }
__device__ __forceinline__ unsigned short to_bf(float f) {
  unsigned u = __float_as_uint(f);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// Eight bf16 of a 16-byte load as floats.
__device__ __forceinline__ void unpack8(const uint4 q, float *f) {
  const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 4; i++) f[2 * i] = __uint_as_float(w[i] << 16), f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
}

struct NormArgs { const unsigned short *x, *w; unsigned short *xn; unsigned hidden; float eps; };
struct GateUpArgs { const unsigned short *xn, *wgu; unsigned short *h; unsigned batch, hidden, inter; };
struct DownArgs { const unsigned short *h, *wd; float *part; unsigned batch, hidden, inter, slices; };
struct ResidualArgs { const float *part; const unsigned short *x; unsigned short *out; unsigned batch, hidden, slices; };

// Token t.linear: xn = x / sqrt(mean(x^2) + eps) * w. Each thread keeps its chunks of 8 (16-byte
// loads, all issued before the sum needs them) for the second pass: hidden <= 8 x 8 x blockDim.
__device__ void rmsnorm(const clcrt::Tile &t, const NormArgs &a) {
  __shared__ float red[8];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, chunks = a.hidden / 8;
  const uint4 *x = (const uint4 *)(a.x + (size_t)t.linear * a.hidden);
  uint4 v[8];
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < 8; j++) {
    const unsigned c = threadIdx.x + j * blockDim.x;
    v[j] = c < chunks ? x[c] : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int j = 0; j < 8; j++) {
    float f[8];
    unpack8(v[j], f);
#pragma unroll
    for (int i = 0; i < 8; i++) ss += f[i] * f[i];
  }
  ss = warp_sum(ss);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  float tot = 0.f;
  for (int w = 0; w < 8; w++) tot += red[w];
  const float r = rsqrtf(tot / a.hidden + a.eps);
  const uint4 *wv = (const uint4 *)a.w;
  uint4 *out = (uint4 *)(a.xn + (size_t)t.linear * a.hidden);
#pragma unroll
  for (int j = 0; j < 8; j++) {
    const unsigned c = threadIdx.x + j * blockDim.x;
    if (c < chunks) {
      float f[8], g[8];
      unpack8(v[j], f);
      unpack8(__ldg(wv + c), g);
      unsigned o[4];
#pragma unroll
      for (int i = 0; i < 4; i++)
        o[i] = (unsigned)to_bf(f[2 * i] * r * g[2 * i]) | (unsigned)to_bf(f[2 * i + 1] * r * g[2 * i + 1]) << 16;
      out[c] = make_uint4(o[0], o[1], o[2], o[3]);
    }
  }
  __syncthreads();  // red is read by every warp before the CTA's next tile writes it
}

// Tensor cores for a skinny product: D[16 rows][8 tokens] += W[16 rows][16 k] . X[8 tokens][16 k]^T
// (mma.sync m16n8k16, bf16 in, fp32 out). The sum over k does not care which k sits in which
// slot of the fragments, as long as W and X agree: so each lane loads 8 consecutive k of its
// rows (one 16-byte load per row, coalesced) and of its token, and two mma take them.
__device__ __forceinline__ void mma16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// This warp's part of MT blocks of 16 weight rows (w[m]: the block's first row, row pitch ldw)
// times NT blocks of 8 tokens of x (row pitch ldx; tokens past `batch` count as zeros), over
// k in [k0, k1), a multiple of 32 long. x was written by an earlier node of this launch, so it
// is read with plain loads; the weights never change, so through the read-only path.
// acc[m][n]: the mma's C fragment (lane g = lane / 4, t = lane % 4: rows g and g + 8, tokens
// 2t and 2t + 1).
template <int MT, int NT>
__device__ __forceinline__ void mma_rows(const unsigned short *const (&w)[MT], unsigned ldw, const unsigned short *x,
                                         unsigned ldx, unsigned batch, unsigned k0, unsigned k1,
                                         float (&acc)[MT][NT][4]) {
  const unsigned lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int n = 0; n < NT; n++) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;
  // Double-buffered in registers: the next step's loads are issued before this step's mma.
  uint4 wa[2][MT], wb[2][MT], xv[2][NT];
  auto load = [&](int s, unsigned k) {
#pragma unroll
    for (int m = 0; m < MT; m++) {
      wa[s][m] = __ldg((const uint4 *)(w[m] + (size_t)g * ldw + k));
      wb[s][m] = __ldg((const uint4 *)(w[m] + (size_t)(g + 8) * ldw + k));
    }
#pragma unroll
    for (int n = 0; n < NT; n++)
      xv[s][n] = n * 8 + g < batch ? *(const uint4 *)(x + (size_t)(n * 8 + g) * ldx + k) : make_uint4(0, 0, 0, 0);
  };
  unsigned k = k0 + 8 * t;
  if (k < k1) load(0, k);
#pragma unroll 2
  for (int s = 0; k < k1; k += 32, s ^= 1) {
    if (k + 32 < k1) load(s ^ 1, k + 32);
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
      for (int n = 0; n < NT; n++) {
        mma16816(acc[m][n], wa[s][m].x, wb[s][m].x, wa[s][m].y, wb[s][m].y, xv[s][n].x, xv[s][n].y);
        mma16816(acc[m][n], wa[s][m].z, wb[s][m].z, wa[s][m].w, wb[s][m].w, xv[s][n].z, xv[s][n].w);
      }
  }
}

// The 8 warps split k; their fragments meet in shared memory. Returns the sum over warps of
// row r (0..16 MT - 1), token b.
template <int MT, int NT>
struct WarpSum {
  float part[8][MT][NT][32][4];
  __device__ __forceinline__ void put(const float (&acc)[MT][NT][4]) {
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
      for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) part[warp][m][n][lane][i] = acc[m][n][i];
  }
  __device__ __forceinline__ float get(unsigned r, unsigned b) const {
    const unsigned m = r / 16, rr = r % 16, n = b / 8, c = b % 8;
    const unsigned lane = (rr % 8) * 4 + c / 2, i = (rr / 8) * 2 + c % 2;
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < 8; w++) v += part[w][m][n][lane][i];
    return v;
  }
};

// A warp's share of a projection tile: two blocks of 16 weight rows (row pitch ldw) over k in
// [k0, k1), what the tile function multiplies and what its prefetch function asks L2 for.
struct WarpPart {
  const unsigned short *w[2];
  unsigned ldw, k0, k1;
};

// Gate/up tile: rows 16 t.linear .. + 15 of the intermediate, of the gate and of the up weights.
__device__ __forceinline__ WarpPart gate_up_part(const clcrt::Tile &t, const GateUpArgs &a) {
  const unsigned warp = threadIdx.x / 32, row = (unsigned)t.linear * 16, per = a.hidden / 8;
  return WarpPart{{a.wgu + (size_t)row * a.hidden, a.wgu + (size_t)(a.inter + row) * a.hidden}, a.hidden, warp * per,
                  (warp + 1) * per};
}

// Down tile s * C + c (C = hidden / 32): output columns col = 32 c .. + 31 over K slice s.
__device__ __forceinline__ WarpPart down_part(const clcrt::Tile &t, const DownArgs &a, unsigned &s, unsigned &col) {
  const unsigned warp = threadIdx.x / 32, cols = a.hidden / 32;
  s = (unsigned)t.linear / cols, col = (unsigned)t.linear % cols * 32;
  const unsigned len = a.inter / a.slices, per = len / 8, k0 = s * len + warp * per;
  return WarpPart{{a.wd + (size_t)col * a.inter, a.wd + (size_t)(col + 16) * a.inter}, a.inter, k0, k0 + per};
}

// Every token of the gate/up tile: h = silu(gate) * up.
template <int NT>
__device__ __forceinline__ void gate_up_nt(const clcrt::Tile &t, const GateUpArgs &a, void *smem) {
  WarpSum<2, NT> &red = *(WarpSum<2, NT> *)smem;  // the tile's SMEM bytes of dynamic shared memory
  const WarpPart p = gate_up_part(t, a);
  float acc[2][NT][4];
  mma_rows<2, NT>(p.w, p.ldw, a.xn, a.hidden, a.batch, p.k0, p.k1, acc);
  red.put(acc);
  __syncthreads();
  const unsigned row = (unsigned)t.linear * 16;
  for (unsigned i = threadIdx.x; i < 16 * a.batch; i += blockDim.x) {
    const unsigned r = i % 16, b = i / 16;
    const float g = red.get(r, b), u = red.get(16 + r, b);
    a.h[(size_t)b * a.inter + row + r] = to_bf(g / (1.f + __expf(-g)) * u);
  }
  __syncthreads();  // red is read before the CTA's next tile writes it
}
__device__ void gate_up(const clcrt::Tile &t, const GateUpArgs &a) {
  if (a.batch <= 8) gate_up_nt<1>(t, a, clcrt::smem());
  else gate_up_nt<2>(t, a, clcrt::smem());
}

// Every token of the down tile: its slice's partial sums into part[s].
template <int NT>
__device__ __forceinline__ void down_nt(const clcrt::Tile &t, const DownArgs &a, void *smem) {
  WarpSum<2, NT> &red = *(WarpSum<2, NT> *)smem;
  unsigned s, col;
  const WarpPart p = down_part(t, a, s, col);
  float acc[2][NT][4];
  mma_rows<2, NT>(p.w, p.ldw, a.h, a.inter, a.batch, p.k0, p.k1, acc);
  red.put(acc);
  __syncthreads();
  for (unsigned i = threadIdx.x; i < 32 * a.batch; i += blockDim.x) {
    const unsigned r = i % 32, b = i / 32;
    a.part[((size_t)s * a.batch + b) * a.hidden + col + r] = red.get(r, b);
  }
  __syncthreads();
}
__device__ void down(const clcrt::Tile &t, const DownArgs &a) {
  if (a.batch <= 8) down_nt<1>(t, a, clcrt::smem());
  else down_nt<2>(t, a, clcrt::smem());
}

// Prefetch functions: called before the tile waits on the nodes it needs (the norm, the slice's
// gate/up tiles), they ask L2 for the weights this warp's first four steps will load (32 rows x
// 256 bytes), which depend on no other node. Loads issued now overlap the wait.
__device__ __forceinline__ void prefetch_rows(const WarpPart &p) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned short *q = p.w[lane / 16] + (size_t)(lane % 16) * p.ldw + p.k0;
  asm volatile("prefetch.global.L2 [%0];" ::"l"(q));
  asm volatile("prefetch.global.L2 [%0];" ::"l"(q + 64));
}
__device__ void gate_up_prefetch(const clcrt::Tile &t, const GateUpArgs &a) { prefetch_rows(gate_up_part(t, a)); }
__device__ void down_prefetch(const clcrt::Tile &t, const DownArgs &a) {
  unsigned s, col;
  prefetch_rows(down_part(t, a, s, col));
}

// Output columns 32 t.linear .. + 31: out = the slices' sum + x.
__device__ void residual(const clcrt::Tile &t, const ResidualArgs &a) {
  for (unsigned i = threadIdx.x; i < 32 * a.batch; i += blockDim.x) {
    const unsigned b = i / 32, col = (unsigned)t.linear * 32 + i % 32;
    float v = bf(a.x[(size_t)b * a.hidden + col]);
    for (unsigned s = 0; s < a.slices; s++) v += a.part[((size_t)s * a.batch + b) * a.hidden + col];
    a.out[(size_t)b * a.hidden + col] = to_bf(v);
  }
}
"""


class NormArgs(clcrt.Args):
    x: clcrt.ptr("bf16")
    w: clcrt.ptr("bf16")
    xn: clcrt.ptr("bf16")
    hidden: clcrt.u32
    eps: clcrt.f32


class GateUpArgs(clcrt.Args):
    xn: clcrt.ptr("bf16")
    wgu: clcrt.ptr("bf16")
    h: clcrt.ptr("bf16")
    batch: clcrt.u32
    hidden: clcrt.u32
    inter: clcrt.u32


class DownArgs(clcrt.Args):
    h: clcrt.ptr("bf16")
    wd: clcrt.ptr("bf16")
    part: clcrt.ptr("f32")
    batch: clcrt.u32
    hidden: clcrt.u32
    inter: clcrt.u32
    slices: clcrt.u32


class ResidualArgs(clcrt.Args):
    part: clcrt.ptr("f32")
    x: clcrt.ptr("bf16")
    out: clcrt.ptr("bf16")
    batch: clcrt.u32
    hidden: clcrt.u32
    slices: clcrt.u32


NODES = [("rmsnorm", NormArgs), ("gate_up", GateUpArgs), ("down", DownArgs), ("residual", ResidualArgs)]
# In the task graph the projections prefetch their first weights while they wait.
GRAPH_NODES = [clcrt.TaskNode("rmsnorm", NormArgs), clcrt.TaskNode("gate_up", GateUpArgs, prefetch="gate_up_prefetch"),
               clcrt.TaskNode("down", DownArgs, prefetch="down_prefetch"), clcrt.TaskNode("residual", ResidualArgs)]


def slices_for(hidden, inter, sms, per_sm=2):
    """K slices of the down projection: enough tiles for about per_sm per SM, each slice a
    multiple of 256 columns (8 warps of 32: a warp's step) and so of 16 (a gate/up tile's rows)."""
    cols = hidden // ROWS_D
    best = 1
    for s in range(1, 65):
        if inter % s or (inter // s) % 256:
            continue
        best = s
        if cols * s >= per_sm * sms:
            break
    return best


def edges(hidden, inter, slices):
    cols = hidden // ROWS_D
    return [(0, 1, "all"), (1, 2, "rows", cols, inter // slices // ROWS_GU), (2, 3, "kslices", slices)]


class DecodeMLP:
    """The block for given weights (bf16 torch tensors on one GPU): norm_w [H], w_gate_up [2I, H]
    (gate rows, then up rows), w_down [H, I]."""

    def __init__(self, norm_w, w_gate_up, w_down, max_batch=16, eps=1e-5, sched="auto", grid="auto",
                 slices_per_sm=2, min_blocks_per_sm=0, rt=None):
        import torch

        self.hidden, self.inter = int(w_down.shape[0]), int(w_down.shape[1])
        H, inter = self.hidden, self.inter
        if H % 256 or inter % 256 or H > 16384 or tuple(w_gate_up.shape) != (2 * inter, H) or tuple(norm_w.shape) != (H,):
            raise ValueError("DecodeMLP: hidden (at most 16384) and intermediate must be multiples of 256, "
                             "w_gate_up [2I, H], norm_w [H]")
        if not 1 <= max_batch <= 16:
            raise ValueError("DecodeMLP: batches of 1 to 16 tokens")
        self.rt = rt or clcrt.runtime(w_down.device.index)
        dev = w_down.device
        self.norm_w, self.wgu, self.wd, self.eps = norm_w, w_gate_up, w_down, eps
        self.slices_per_sm = slices_per_sm
        self.slices = slices_for(H, inter, torch.cuda.get_device_properties(dev).multi_processor_count, slices_per_sm)
        self.xn = torch.empty(max_batch, H, dtype=torch.bfloat16, device=dev)
        self.h = torch.empty(max_batch, inter, dtype=torch.bfloat16, device=dev)
        self.part = torch.empty(self.slices, max_batch, H, dtype=torch.float32, device=dev)
        self.max_batch = max_batch
        self.min_blocks_per_sm = min_blocks_per_sm
        self.graph = clcrt.TaskGraph(SRC, GRAPH_NODES, edges(H, inter, self.slices), block=BLOCK, smem_bytes=SMEM,
                                     sched=sched, grid=grid, min_blocks_per_sm=min_blocks_per_sm, rt=self.rt)
        self.kernels = [self.rt.register(SRC, fn, cls, block=BLOCK, smem_bytes=SMEM if fn in ("gate_up", "down") else 0,
                                         sched=sched, min_blocks_per_sm=min_blocks_per_sm) for fn, cls in NODES]
        self._cached = {}

    def tiles(self, batch):
        cols = self.hidden // ROWS_D
        return [batch, self.inter // ROWS_GU, cols * self.slices, cols]

    def args(self, x, out):
        """The four nodes' Args for x [B, H] into out [B, H] (kept per set of tensors)."""
        key = (x.data_ptr(), out.data_ptr(), x.shape[0])
        a = self._cached.get(key)
        if a is None:
            B = x.shape[0]
            if not 1 <= B <= self.max_batch or tuple(x.shape) != (B, self.hidden) or out.shape != x.shape:
                raise ValueError("DecodeMLP: x and out must be [B, %d] with B from 1 to %d" % (self.hidden,
                                                                                             self.max_batch))
            H, inter, s = self.hidden, self.inter, self.slices
            a = [NormArgs(x, self.norm_w, self.xn, H, self.eps), GateUpArgs(self.xn, self.wgu, self.h, B, H, inter),
                 DownArgs(self.h, self.wd, self.part, B, H, inter, s),
                 ResidualArgs(self.part, x, out, B, H, s)]
            if len(self._cached) > 64:
                self._cached.clear()
            self._cached[key] = a
        return a

    def run_graph(self, x, out):
        """One launch: the task graph."""
        self.graph.run(self.tiles(x.shape[0]), self.args(x, out))

    def run_nodes(self, x, out, pdl=False):
        """The same tile functions, one launch per node (``pdl``: each after the first with
        programmatic dependent launch, its grid launching while the one before finishes)."""
        for i, (k, t, a) in enumerate(zip(self.kernels, self.tiles(x.shape[0]), self.args(x, out))):
            k.run(t, a, pdl=pdl and i > 0)

    def prepare(self):
        """Builds ahead what captured runs launch (clcrt_kernel_prepare)."""
        for k in self.kernels + [self.graph.kernel]:
            k.prepare(clcrt.Use.GRAPH | clcrt.Use.SHORT)


def reference(x, norm_w, wgu, wd, eps=1e-5):
    """fp32 from the same bf16 values (torch)."""
    import torch

    xf = x.float()
    xn = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * norm_w.float()
    gu = xn @ wgu.float().t()
    inter = wd.shape[1]
    h = torch.nn.functional.silu(gu[:, :inter]) * gu[:, inter:]
    return h @ wd.float().t() + xf


def weights(hidden, inter, device, seed=0):
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    norm_w = (1 + 0.1 * torch.randn(hidden, generator=g)).to(torch.bfloat16).to(device)
    wgu = (torch.randn(2 * inter, hidden, generator=g) * hidden ** -0.5).to(torch.bfloat16).to(device)
    wd = (torch.randn(hidden, inter, generator=g) * inter ** -0.5).to(torch.bfloat16).to(device)
    return norm_w, wgu, wd


def rel_err(y, ref):
    return float((y.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-6))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--inter", type=int, default=8192)
    p.add_argument("--batch", type=int, default=4)
    o = p.parse_args()
    try:
        import torch
    except ImportError:
        print("decode_mlp: no PyTorch")
        return 2
    if not torch.cuda.is_available():
        print("decode_mlp: no GPU")
        return 2
    dev = torch.device("cuda", 0)
    norm_w, wgu, wd = weights(o.hidden, o.inter, dev)
    mlp = DecodeMLP(norm_w, wgu, wd)
    x = torch.randn(o.batch, o.hidden, device=dev).to(torch.bfloat16)
    ref = reference(x, norm_w, wgu, wd)
    worst = 0.0
    for how in ("run_graph", "run_nodes"):
        for _ in range(3):
            out = torch.full_like(x, float("nan"))
            getattr(mlp, how)(x, out)
            torch.cuda.synchronize()
            e = rel_err(out, ref)
            worst = max(worst, e if e == e else float("inf"))
        print("%-9s batch %d, %d x %d: max error %.2e of the output's largest value" % (how, o.batch, o.hidden,
                                                                                       o.inter, e))
    ok = worst < 2e-2
    print("decode_mlp: %s (%d K slices)" % ("ok" if ok else "WRONG", mlp.slices))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
