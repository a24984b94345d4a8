#!/usr/bin/env python3
"""A decode MLP block as one task graph: RMSNorm -> gate/up projection with SiLU x up -> down
projection (in K slices) -> sum of the slices + residual, bf16, for a batch of 1 to 16 tokens.

    python3 python/examples/decode_mlp.py [--hidden 2048] [--inter 8192] [--batch 4]

Three tile functions of one source, three nodes, two kinds of edge (docs/taskgraph.md):

    node 0  rmsnorm    one tile per token                       xn = x / rms(x) * w
    node 1  gate_up    16 rows of the intermediate per tile     h = silu(xn Wg^T) * (xn Wu^T)
                       (16 to 64 with the ring, one tile per CTA slot: see below)
    node 2  down       32 output columns x one K slice          part[s] = h[:, slice s] Wd[:, slice s]^T;
                                                                the last slice of columns c to be
                                                                stored: out = sum_s part[s] + x

    0 -> 1  "all"              every gate/up tile needs every token's norm (the projections'
                               tiles start loading their weights while they wait)
    1 -> 2  "rows", C, L / R   down tile (s, c) needs the gate/up tiles of K slice s only, so the
                               first slices start while later gate/up tiles still run

The down tiles of columns c count themselves in on a counter; the last adds the slices in slice
order, so every run gives the same bits. DecodeMLP(sum="node") does that sum in a fourth node,
"residual" (32 output columns a tile), behind a third kind of edge: 2 -> 3 "kslices", S (output
tile c needs the S slices (s, c)). On an H200 the three nodes were about 1 us faster at the
1B-class block and level at the 8B-class one (docs/results.md).

The projections read their weights one of two ways (DecodeMLP's stream=): "regs", each warp's
loads into registers, two steps in flight; "bulk", the copy engine's copies (TMA boxes of 16 rows
x 256 k) into a ring in shared memory, which in the task graph start in the prefetch function,
while the tile waits.
"auto" (the default) takes the ring where every tile's k run is at least 2048 long, with one
gate/up tile per CTA slot (each K slice's 16-row sub-tiles shared among its tiles as evenly as
whole sub-tiles allow: 32 or 16 rows a tile at the 1B-class shape, 64 or 48 at the 8B-class), and the
down projection cut into about one tile per SM (slices_for): fewer tiles, fewer tickets, waits
and releases, which is what the task graph pays per tile, and no slot left waiting on a down
tile while others stream the gate/up weights. The ring's copies ask L2 to evict the
weights first, so that the tokens, the intermediate and the counters stay there.

With the ring, the norm is folded into the gate/up tiles by default (DecodeMLP's norm="auto";
norm="node" keeps node 0): the block multiplies norm_w into a copy of w_gate_up once, when it is
built, and each gate/up tile scales its sums by 1 / rms(x), summing the squares of the tokens it
loads anyway. Two nodes then, "rows" from gate/up to down, and no tile waits before the
projection: its weights stream from the start of the launch, where node 0's one tile had kept
every gate/up tile waiting about 9 us (traced on an H200). The price: a second copy of the
gate/up weights on the GPU (a model loader would fold them once and keep only that).

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

// wmap: a TMA descriptor of the node's weights (boxes of 16 rows x 256 k, no swizzle), which the
// ring (stream="bulk") loads them through; the register path reads wgu / wd.
struct alignas(64) TMap { unsigned long long v[16]; };
struct NormArgs { const unsigned short *x, *w; unsigned short *xn; unsigned hidden; float eps; };
struct GateUpArgs {
  TMap wmap; const unsigned short *xn, *wgu; unsigned short *h; unsigned batch, hidden, inter; float eps;
};
struct DownArgs {
  TMap wmap; const unsigned short *h, *wd; float *part; const unsigned short *x; unsigned short *out; int *ctr;
  unsigned batch, hidden, inter, slices;
};
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

// The projections' stores, from the warps' fragments met in red (the whole CTA calls them):
// every token of 16 gate/up rows from `row`, h = silu(gate) * up; every token of the down tile's
// 32 output columns from col, its slice's partial sums into part[s]. Each ends at a barrier, so
// that red is read before the CTA's next tile writes it. With FOLD (the norm folded into the
// gate/up weights, below), sub-tile j's sums of token b are scaled by 1 / rms(x_b), from the
// squares ss[n] of this lane's loads of token 8 n + lane / 4 (gathered at j == 0).
template <int NT, bool FOLD = false>
__device__ __forceinline__ void store_gate_up(WarpSum<2, NT> &red, const float (&acc)[2][NT][4], const GateUpArgs &a,
                                              unsigned row, unsigned j = 0, const float *ss = nullptr) {
  __shared__ float s_ss[8][16];  // FOLD: per warp, per token, its squares
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (FOLD && j == 0)
#pragma unroll
    for (int n = 0; n < NT; n++) {
      float v = ss[n];
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      if (lane % 4 == 0) s_ss[warp][n * 8 + lane / 4] = v;
    }
  red.put(acc);
  __syncthreads();
  for (unsigned i = threadIdx.x; i < 16 * a.batch; i += blockDim.x) {
    const unsigned r = i % 16, b = i / 16;
    float sc = 1.f;
    if (FOLD) {
      float q = 0.f;
#pragma unroll
      for (int w = 0; w < 8; w++) q += s_ss[w][b];
      sc = rsqrtf(q / a.hidden + a.eps);
    }
    const float g = red.get(r, b) * sc, u = red.get(16 + r, b) * sc;
    a.h[(size_t)b * a.inter + row + r] = to_bf(g / (1.f + __expf(-g)) * u);
  }
  __syncthreads();  // red and s_ss are read before the CTA's next tile writes them
}
#if SUM_LAST
// The slices' sum and the residual, done by the down tile that stores the last slice of its
// columns (DecodeMLP's sum="last"): each down tile counts itself in on its columns' counter
// after its partial sums (a release); the one that brings it to `slices` (an acquire: every
// slice is visible) adds the slices in slice order and x, and writes out. The same order
// whoever is last: the same bits on every run. The counter wraps to 0 as the last counts in
// (atomicInc), ready for the next run.
__device__ __forceinline__ void sum_last(const DownArgs &a, unsigned col) {
  __shared__ unsigned s_last;
  if (threadIdx.x == 0) {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");  // the CTA's partials (ordered by the barrier) first
    const bool last = atomicInc((unsigned *)a.ctr + col / 32, a.slices - 1) == a.slices - 1;
    if (last) asm volatile("fence.acq_rel.gpu;" ::: "memory");  // every slice's partials before the reads
    s_last = last;
  }
  __syncthreads();
  if (!s_last) return;
  for (unsigned i = threadIdx.x; i < 32 * a.batch; i += blockDim.x) {
    const size_t j = (size_t)(i / 32) * a.hidden + col + i % 32;
    float v = bf(a.x[j]);
    for (unsigned s = 0; s < a.slices; s++) v += a.part[(size_t)s * a.batch * a.hidden + j];
    a.out[j] = to_bf(v);
  }
}
#endif
template <int NT>
__device__ __forceinline__ void store_down(WarpSum<2, NT> &red, const float (&acc)[2][NT][4], const DownArgs &a,
                                           unsigned s, unsigned col) {
  red.put(acc);
  __syncthreads();
  for (unsigned i = threadIdx.x; i < 32 * a.batch; i += blockDim.x) {
    const unsigned r = i % 32, b = i / 32;
    a.part[((size_t)s * a.batch + b) * a.hidden + col + r] = red.get(r, b);
  }
  __syncthreads();
#if SUM_LAST
  sum_last(a, col);
#endif
}

// Every token of the gate/up tile: h = silu(gate) * up.
template <int NT>
__device__ __forceinline__ void gate_up_nt(const clcrt::Tile &t, const GateUpArgs &a, void *smem) {
  WarpSum<2, NT> &red = *(WarpSum<2, NT> *)smem;  // the tile's SMEM bytes of dynamic shared memory
  const WarpPart p = gate_up_part(t, a);
  float acc[2][NT][4];
  mma_rows<2, NT>(p.w, p.ldw, a.xn, a.hidden, a.batch, p.k0, p.k1, acc);
  store_gate_up<NT>(red, acc, a, (unsigned)t.linear * 16);
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
  store_down<NT>(red, acc, a, s, col);
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

// The projections with their weights streamed into shared memory by the copy engine (TMA,
// cp.async.bulk.tensor) rather than loaded into registers (DecodeMLP's stream="bulk"): a ring
// of BULK_STAGES stages, each the tile's 32 weight rows x BULK_K k, read by the warps that split
// its k as above (32 k a warp per 256). A stage is 2 x BULK_K / 256 boxes of 16 rows x 256 k
// (8 KB each, rows 512 bytes apart), one copy each: the copies' count, not their bytes, set the
// rate (measured on an H200: one 1 KB copy per row streamed the 8B-class block at 84% of the read
// bandwidth, 512-byte and 256-byte halves of it at 65% and 39%). The ring holds up to
// BULK_STAGES x 32 KB of a CTA's weights in flight without a register for them, and in a task
// graph the copies start before the tile waits for its inputs (the weights depend on no node).
#ifndef BULK_STAGES
#define BULK_STAGES 2
#endif
#ifndef BULK_K
#define BULK_K 512  // k per stage, a multiple of 256
#endif
#define BULK_BOX 8192                               // a box: 16 rows x 256 k
#define BULK_STAGE (32 * 2 * BULK_K)                // bytes per stage: 2 x BULK_K / 256 boxes
#ifndef GU_TPS
#define GU_TPS 0  // GU_TPS gate/up tiles a K slice of GU_SPS sub-tiles, as even as whole sub-tiles allow; 0: one a tile
#endif
#define BULK_RED_OFF ((BULK_STAGES * BULK_STAGE + 16 * BULK_STAGES + 127) / 128 * 128)  // after the ring's barriers
#define BULK_SMEM (BULK_RED_OFF + 8 * 2 * 2 * 32 * 4 * 4)  // the ring, its full and empty barriers, a WarpSum<2, 2>

__device__ __forceinline__ unsigned saddr(const void *p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
__device__ __forceinline__ void bar_wait(unsigned bar, unsigned parity) {
  asm volatile("{\n\t.reg .pred p;\nW%=:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t@!p bra W%=;\n}"
               ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ uint4 lds128(unsigned a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a) : "memory");
  return v;
}

// A projection tile's weights: nsub sub-tiles of 32 rows each, whose rows 0-15 are rows y0.. of
// the map's matrix and rows 16-31 rows y1.., sub-tile j 16 j rows further on in both; over k in
// [k0, k1), a multiple of BULK_K long. The ring streams them as one sequence of stages (sub-tile
// by sub-tile), so a CTA's next sub-tile loads while it reduces the last.
struct BulkTile {
  const TMap *map;
  unsigned y0, y1, k0, k1, nsub;
};
// Gate/up tile t's first sub-tile of 16 intermediate rows: the K slice's GU_SPS sub-tiles
// shared by its GU_TPS tiles, as evenly as whole sub-tiles allow (3 or 4 each for the 8B-class
// block on 132 SMs, so that every CTA slot starts on a gate/up tile; exactly GU_SPS / GU_TPS each
// for tiles of a fixed count), or one sub-tile a tile.
__device__ __forceinline__ unsigned gate_up_sub0(unsigned t) {
#if GU_TPS
  return t / GU_TPS * GU_SPS + t % GU_TPS * GU_SPS / GU_TPS;
#else
  return t;
#endif
}
// Gate/up tile: its sub-tiles of 16 rows of the intermediate, from gate_up_sub0, each 16 rows
// of the gate and of the up weights.
__device__ __forceinline__ BulkTile gate_up_tile(const clcrt::Tile &t, const GateUpArgs &a) {
  const unsigned sub = gate_up_sub0((unsigned)t.linear), row = sub * 16;
  return BulkTile{&a.wmap, row, a.inter + row, 0, a.hidden, gate_up_sub0((unsigned)t.linear + 1) - sub};
}
__device__ __forceinline__ BulkTile down_tile(const clcrt::Tile &t, const DownArgs &a) {
  const unsigned cols = a.hidden / 32, s = (unsigned)t.linear / cols, col = (unsigned)t.linear % cols * 32;
  const unsigned len = a.inter / a.slices;
  return BulkTile{&a.wmap, col, col + 16, s * len, (s + 1) * len, 1};
}

// Where row r (0-31) and k offset kk (0 .. BULK_K - 1) of stage slot s sit in the ring: box
// (r / 16, kk / 256), rows of 512 bytes.
__device__ __forceinline__ unsigned bulk_at(unsigned ring, unsigned s, unsigned r, unsigned kk) {
  return ring + s * BULK_STAGE + ((r / 16) * (BULK_K / 256) + kk / 256) * BULK_BOX + (r % 16) * 512 + 2 * (kk % 256);
}

// Stage c of the tile into its slot (warp 0's lane 0): arms the slot's full barrier with the
// stage's bytes, then copies its boxes.
__device__ __forceinline__ void bulk_fill(const BulkTile &p, unsigned c, unsigned ring, unsigned full) {
  if (threadIdx.x % 32) return;
  const unsigned s = c % BULK_STAGES, nck = (p.k1 - p.k0) / BULK_K;
  const unsigned sub = c / nck, k = p.k0 + c % nck * BULK_K;
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full + 8 * s), "r"(32 * 2 * BULK_K)
               : "memory");
  unsigned long long first;  // L2 evicts these lines first: the tokens, h and the counters stay
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(first));
#pragma unroll
  for (unsigned h = 0; h < 2; h++)
#pragma unroll
    for (unsigned q = 0; q < BULK_K / 256; q++)
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
          " [%0], [%1, {%2, %3}], [%4], %5;"
          ::"r"(bulk_at(ring, s, 16 * h, 256 * q)), "l"(p.map), "r"(k + 256 * q), "r"((h ? p.y1 : p.y0) + 16 * sub),
          "r"(full + 8 * s), "l"(first) : "memory");
}

// Starts the tile's ring: the barriers afresh and its first BULK_STAGES stages on their way. The
// whole CTA calls it. The weights depend on no other node, so in a task graph this is the
// projections' prefetch function: the copies run while the tile waits for its inputs.
__device__ __forceinline__ void bulk_arm(const BulkTile &p, unsigned char *sm) {
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned ring = saddr(sm), full = ring + BULK_STAGES * BULK_STAGE, empty = full + 8 * BULK_STAGES;
  // The ring was last read by this CTA's previous tile: every thread orders its reads before
  // the copy engine's writes, then the barriers start afresh.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (warp == 0) {
    if (lane == 0) {
      for (int s = 0; s < BULK_STAGES; s++) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(full + 8 * s) : "memory");
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(empty + 8 * s), "r"(blockDim.x) : "memory");
      }
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncwarp();
    for (unsigned c = 0; c < p.nsub * ((p.k1 - p.k0) / BULK_K) && c < BULK_STAGES; c++) bulk_fill(p, c, ring, full);
    __syncwarp();
  }
  __syncthreads();  // the barriers' init, seen by every warp
}

// This warp's part of each sub-tile times x (row pitch ldx; tokens past `batch` count as zeros),
// as mma_rows computes it, the weights read from the ring (armed before, or here); done(j, acc)
// takes sub-tile j's fragments (the whole CTA calls it). Every thread releases a stage (the
// empty barrier, 256 arrivals) once it has read it; warp 0 refills the slot when all have.
// With SQ, ss[n] also sums the squares of the x this lane loads for token 8 n + lane / 4 over
// the first sub-tile (whose last stage comes before done(0, ...)): over the warps and the four
// lanes of a token, each k of the token once.
template <int NT, bool ARMED, bool SQ, class Done>
__device__ __forceinline__ void bulk_rows(const BulkTile &p, const unsigned short *x, unsigned ldx, unsigned batch,
                                          unsigned char *sm, float *ss, Done done) {
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const unsigned ring = saddr(sm), full = ring + BULK_STAGES * BULK_STAGE, empty = full + 8 * BULK_STAGES;
  const unsigned nck = (p.k1 - p.k0) / BULK_K, nc = p.nsub * nck;
  if (!ARMED) bulk_arm(p, sm);
  float acc[2][NT][4];
  auto zero = [&]() {
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
      for (int n = 0; n < NT; n++) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;
  };
  zero();
  uint4 xa[BULK_K / 256][NT], xb[BULK_K / 256][NT];
  auto loadx = [&](uint4 (&xv)[BULK_K / 256][NT], unsigned c) {
#pragma unroll
    for (int j = 0; j < BULK_K / 256; j++) {
      const unsigned k = p.k0 + c % nck * BULK_K + j * 256 + warp * 32 + 8 * t;
#pragma unroll
      for (int n = 0; n < NT; n++)
        xv[j][n] = n * 8 + g < batch ? *(const uint4 *)(x + (size_t)(n * 8 + g) * ldx + k) : make_uint4(0, 0, 0, 0);
    }
  };
  auto step = [&](unsigned c, const uint4 (&xv)[BULK_K / 256][NT]) {
    const unsigned s = c % BULK_STAGES, parity = (c / BULK_STAGES) & 1;
    bar_wait(full + 8 * s, parity);
#pragma unroll
    for (int j = 0; j < BULK_K / 256; j++) {  // this warp's 32 k of each 256 of the stage
      uint4 wa[2], wb[2];
#pragma unroll
      for (int m = 0; m < 2; m++) {
        const unsigned at = bulk_at(ring, s, 16 * m + g, j * 256 + warp * 32 + 8 * t);
        wa[m] = lds128(at);
        wb[m] = lds128(at + 8 * 512);  // row g + 8 of the same box
      }
#pragma unroll
      for (int m = 0; m < 2; m++)
#pragma unroll
        for (int n = 0; n < NT; n++) {
          mma16816(acc[m][n], wa[m].x, wb[m].x, wa[m].y, wb[m].y, xv[j][n].x, xv[j][n].y);
          mma16816(acc[m][n], wa[m].z, wb[m].z, wa[m].w, wb[m].w, xv[j][n].z, xv[j][n].w);
        }
    }
    // Every thread releases what it read (an arrive is a release: its reads come first).
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(empty + 8 * s) : "memory");
    if (SQ && c < nck)
#pragma unroll
      for (int j = 0; j < BULK_K / 256; j++)
#pragma unroll
        for (int n = 0; n < NT; n++) {
          float f[8];
          unpack8(xv[j][n], f);
#pragma unroll
          for (int i = 0; i < 8; i++) ss[n] += f[i] * f[i];
        }
    if (warp == 0 && c + BULK_STAGES < nc) {
      bar_wait(empty + 8 * s, parity);  // all 256 threads have read stage c
      bulk_fill(p, c + BULK_STAGES, ring, full);
      __syncwarp();
    }
    if ((c + 1) % nck == 0) {  // the sub-tile's last stage
      done(c / nck, acc);
      zero();
    }
  };
  loadx(xa, 0);
  for (unsigned c = 0; c < nc; c += 2) {
    if (c + 1 < nc) loadx(xb, c + 1);
    step(c, xa);
    if (c + 1 < nc) {
      if (c + 2 < nc) loadx(xa, c + 2);
      step(c + 1, xb);
    }
  }
}

// The warps' fragments meet after the ring and its barriers.
template <int NT>
__device__ __forceinline__ WarpSum<2, NT> &bulk_red(unsigned char *sm) {
  return *(WarpSum<2, NT> *)(sm + BULK_RED_OFF);
}

// FOLD: the norm folded in (below); the tile sums the squares of the tokens it loads.
template <int NT, bool ARMED, bool FOLD>
__device__ __forceinline__ void gate_up_bulk_nt(const clcrt::Tile &t, const GateUpArgs &a, unsigned char *sm) {
  WarpSum<2, NT> &red = bulk_red<NT>(sm);
  float ss[NT];
#pragma unroll
  for (int n = 0; n < NT; n++) ss[n] = 0.f;
  bulk_rows<NT, ARMED, FOLD>(gate_up_tile(t, a), a.xn, a.hidden, a.batch, sm, ss,
                             [&](unsigned j, const float (&acc)[2][NT][4]) {
    store_gate_up<NT, FOLD>(red, acc, a, (gate_up_sub0((unsigned)t.linear) + j) * 16, j, ss);
  });
}
template <bool ARMED, bool FOLD>
__device__ __forceinline__ void gate_up_bulk_b(const clcrt::Tile &t, const GateUpArgs &a) {
  if (a.batch <= 8) gate_up_bulk_nt<1, ARMED, FOLD>(t, a, (unsigned char *)clcrt::smem());
  else gate_up_bulk_nt<2, ARMED, FOLD>(t, a, (unsigned char *)clcrt::smem());
}

template <int NT, bool ARMED>
__device__ __forceinline__ void down_bulk_nt(const clcrt::Tile &t, const DownArgs &a, unsigned char *sm) {
  const unsigned cols = a.hidden / 32, s = (unsigned)t.linear / cols, col = (unsigned)t.linear % cols * 32;
  WarpSum<2, NT> &red = bulk_red<NT>(sm);
  bulk_rows<NT, ARMED, false>(down_tile(t, a), a.h, a.inter, a.batch, sm, nullptr,
                              [&](unsigned, const float (&acc)[2][NT][4]) { store_down<NT>(red, acc, a, s, col); });
}
template <bool ARMED>
__device__ __forceinline__ void down_bulk_b(const clcrt::Tile &t, const DownArgs &a) {
  if (a.batch <= 8) down_bulk_nt<1, ARMED>(t, a, (unsigned char *)clcrt::smem());
  else down_bulk_nt<2, ARMED>(t, a, (unsigned char *)clcrt::smem());
}

// The RMSNorm folded into the gate/up projection (DecodeMLP's norm="fold"): the block multiplies
// the norm's weight into the gate/up weights once, when it is built (W' = W diag(w)), so that
// xn W^T = r x W'^T with r = 1 / sqrt(mean(x^2) + eps) a number per token. A gate/up tile then
// needs no other node: it multiplies the raw tokens (a.xn points at x), sums their squares from
// the same loads (every tile reads all of x), and scales its sums by r before SiLU x up. So the
// projection's weights stream from the launch's first microsecond, where a norm node kept every
// gate/up tile waiting about 9 us behind one CTA's loads (traced on an H200, 1B-class block).
__device__ void gate_up_fold(const clcrt::Tile &t, const GateUpArgs &a) { gate_up_bulk_b<false, true>(t, a); }
__device__ void gate_up_fold_armed(const clcrt::Tile &t, const GateUpArgs &a) { gate_up_bulk_b<true, true>(t, a); }

// Launched one by one, the tiles arm their own rings; in the task graph, the prefetch functions
// (gate_up_bulk_arm, down_bulk_arm) did before the waits.
__device__ void gate_up_bulk(const clcrt::Tile &t, const GateUpArgs &a) { gate_up_bulk_b<false, false>(t, a); }
__device__ void down_bulk(const clcrt::Tile &t, const DownArgs &a) { down_bulk_b<false>(t, a); }
__device__ void gate_up_bulk_armed(const clcrt::Tile &t, const GateUpArgs &a) { gate_up_bulk_b<true, false>(t, a); }
__device__ void down_bulk_armed(const clcrt::Tile &t, const DownArgs &a) { down_bulk_b<true>(t, a); }
__device__ void gate_up_bulk_arm(const clcrt::Tile &t, const GateUpArgs &a) {
  bulk_arm(gate_up_tile(t, a), (unsigned char *)clcrt::smem());
}
__device__ void down_bulk_arm(const clcrt::Tile &t, const DownArgs &a) {
  bulk_arm(down_tile(t, a), (unsigned char *)clcrt::smem());
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
    wmap: clcrt.TensorMap
    xn: clcrt.ptr("bf16")
    wgu: clcrt.ptr("bf16")
    h: clcrt.ptr("bf16")
    batch: clcrt.u32
    hidden: clcrt.u32
    inter: clcrt.u32
    eps: clcrt.f32  # norm="fold" only


class DownArgs(clcrt.Args):
    wmap: clcrt.TensorMap
    h: clcrt.ptr("bf16")
    wd: clcrt.ptr("bf16")
    part: clcrt.ptr("f32")
    x: clcrt.ptr("bf16")
    out: clcrt.ptr("bf16")
    ctr: clcrt.ptr("int32")
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
# The same with the projections' weights streamed through a ring in shared memory (stream="bulk").
BULK_NODES = [("rmsnorm", NormArgs), ("gate_up_bulk", GateUpArgs), ("down_bulk", DownArgs), ("residual", ResidualArgs)]
BULK_GRAPH_NODES = [clcrt.TaskNode("rmsnorm", NormArgs),
                    clcrt.TaskNode("gate_up_bulk_armed", GateUpArgs, prefetch="gate_up_bulk_arm"),
                    clcrt.TaskNode("down_bulk_armed", DownArgs, prefetch="down_bulk_arm"),
                    clcrt.TaskNode("residual", ResidualArgs)]
# The ring with the norm folded into the gate/up tiles (norm="fold"): no norm node, no wait on one.
FOLD_NODES = [("gate_up_fold", GateUpArgs), ("down_bulk", DownArgs), ("residual", ResidualArgs)]
FOLD_GRAPH_NODES = [clcrt.TaskNode("gate_up_fold_armed", GateUpArgs, prefetch="gate_up_bulk_arm"),
                    clcrt.TaskNode("down_bulk_armed", DownArgs, prefetch="down_bulk_arm"),
                    clcrt.TaskNode("residual", ResidualArgs)]


def bulk_smem(stages, kc=512):
    """BULK_SMEM of the source: the ring of `stages`, its barriers, the warps' WarpSum."""
    return (stages * 32 * 2 * kc + 16 * stages + 127) // 128 * 128 + SMEM


def bulk_pays(hidden, slice_len, kc=512):
    """Whether stream="auto" streams the projections through the ring: when every tile's k run
    is at least 2048 long and a multiple of kc. Arming a ring costs a tile two CTA barriers and
    the barriers' init, which long runs amortise; measured on an H200 (docs/results.md), the
    ring was 5-7% faster for the task graph with runs of 2048 (the 1B-class block, 4 K slices)
    and 5-13% with runs of 2048-7168 (the 8B-class one), and 7-9% slower launched node by node
    in a CUDA graph with the 1B block's runs of 1024 (8 K slices)."""
    return min(hidden, slice_len) >= 2048 and hidden % kc == 0 and slice_len % kc == 0


def gu_sub_for(inter, slice_len, sms, slots_per_sm=2):
    """Gate/up sub-tiles a tile with the ring: the most (4, 2 or 1) that still leave at least 0.8
    tiles per CTA slot (two CTAs an SM), so that the projection runs in about one wave of the
    fewest tiles (each pays a ticket, a wait and a release; measured on an H200, 256 tiles of 32
    rows beat 512 of 16 and 128 of 64 at the 1B-class shape, 224 of 64 beat 448 and 896 at the
    8B-class one)."""
    for g in (4, 2):
        if inter // (16 * g) >= 0.8 * slots_per_sm * sms and slice_len % (16 * g) == 0:
            return g
    return 1


def gu_even(inter, slices, sms, slots_per_sm=2):
    """Gate/up tiles a K slice with gu_sub="even": one per CTA slot, where each still gets a
    16-row sub-tile of the slice (0 where not)."""
    tps = slots_per_sm * sms // slices
    return tps if 1 <= tps <= inter // slices // ROWS_GU else 0


def source(stream="regs", stages=2, kc=512, gu_sub=1, sum="last", norm="node", gu_tps=0, gu_sps=0):
    """The tile functions' source and the nodes, as DecodeMLP builds them: gate/up tiles of
    gu_sub x 16 rows (the ring's only; more than one sub-tile needs the K slice's gu_sps), or
    with gu_tps the even split (each K slice's gu_sps 16-row sub-tiles over its gu_tps tiles:
    gu_even). Both are one mapping in the tiles: tiles of gu_sub sub-tiles are gu_sps / gu_sub
    tiles a slice. sum "last" (the last down tile of each column block adds the slices and the
    residual) or "node" (a node of its own does); norm "node" (an RMSNorm node before the
    projections) or "fold" (the ring's gate/up tiles normalise: no such node)."""
    if sum not in ("last", "node"):
        raise ValueError("DecodeMLP: sum is 'last' or 'node'")
    if norm not in ("node", "fold") or (norm == "fold" and stream != "bulk"):
        raise ValueError("DecodeMLP: norm is 'auto', 'node' or 'fold' (which needs stream='bulk')")
    if gu_tps and (stream != "bulk" or gu_sub != 1 or not 1 <= gu_tps <= gu_sps):
        raise ValueError("DecodeMLP: the even split needs stream='bulk' and K slices of at least %d 16-row "
                         "sub-tiles (%d)" % (gu_tps, gu_sps))
    src, nodes, graph_nodes, smem = _source(stream, stages, kc, gu_sub)
    if gu_sub != 1:
        if not gu_sps or gu_sps % gu_sub:
            raise ValueError("DecodeMLP: gate/up tiles of %d 16-row sub-tiles need K slices of a multiple of that "
                             "(%d sub-tiles)" % (gu_sub, gu_sps))
        gu_tps = gu_sps // gu_sub
    if gu_tps:
        src = "#define GU_TPS %d\n#define GU_SPS %d\n" % (gu_tps, gu_sps) + src
    if norm == "fold":
        nodes, graph_nodes = FOLD_NODES, FOLD_GRAPH_NODES
    if sum == "last":
        return "#define SUM_LAST 1\n" + src, nodes[:-1], graph_nodes[:-1], smem
    return src, nodes, graph_nodes, smem


def _source(stream, stages, kc, gu_sub):
    if stream == "regs":
        if gu_sub != 1:
            raise ValueError("DecodeMLP: gate/up tiles of more than 16 rows need stream='bulk'")
        return SRC, NODES, GRAPH_NODES, SMEM
    if stream != "bulk" or kc not in (256, 512) or stages < 2 or 2 * bulk_smem(stages, kc) > 227 * 1024 or \
            gu_sub not in (1, 2, 4):
        raise ValueError("DecodeMLP: stream is 'auto', 'regs' or 'bulk' (with stages of 256 or 512 k, as many as "
                         "leave room for two CTAs an SM, and gate/up tiles of 16, 32 or 64 rows)")
    return ("#define BULK_STAGES %d\n#define BULK_K %d\n" % (stages, kc) + SRC, BULK_NODES, BULK_GRAPH_NODES,
            bulk_smem(stages, kc))


def slices_for(hidden, inter, sms, per_sm=1):
    """K slices of the down projection: enough tiles for about per_sm per SM, each slice a
    multiple of 256 columns (8 warps of 32: a warp's step) and so of a gate/up tile's 16 to 64 rows."""
    cols = hidden // ROWS_D
    best = 1
    for s in range(1, 65):
        if inter % s or (inter // s) % 256:
            continue
        best = s
        if cols * s >= per_sm * sms:
            break
    return best


def edges(hidden, inter, slices, rows_gu=ROWS_GU, sum="last", norm="node", per_slice=0):
    """per_slice: gate/up tiles a K slice (0: inter / slices / rows_gu)."""
    cols = hidden // ROWS_D
    g = 0 if norm == "fold" else 1  # the gate/up node
    e = [(0, 1, "all")] if g else []
    e.append((g, g + 1, "rows", cols, per_slice or inter // slices // rows_gu))
    return e if sum == "last" else e + [(g + 1, g + 2, "kslices", slices)]


class DecodeMLP:
    """The block for given weights (bf16 torch tensors on one GPU): norm_w [H], w_gate_up [2I, H]
    (gate rows, then up rows), w_down [H, I].

    stream: "regs", "bulk" or "auto" (bulk_pays); with the ring, `stages` of `kc` k. gu_sub, the
    gate/up tiles: "even" (the ring's only: each K slice's 16-row sub-tiles shared as evenly as
    whole sub-tiles allow by 2 x SMs / slices tiles, one per CTA slot, so that every CTA starts
    on one), 1, 2 or 4 (tiles of that many sub-tiles), "fixed" (gu_sub_for) or "auto" ("even"
    with the ring where each tile gets a sub-tile, else 1). slices_per_sm: down tiles per SM
    (slices_for).
    sum: "last" (the last down tile of each column block adds the slices and the residual) or
    "node" (a node of its own does). norm: "node" (an RMSNorm node that the gate/up tiles wait
    on), "fold" (the ring's only: norm_w multiplied into a copy of w_gate_up that the block
    keeps, and each gate/up tile scales its sums by 1 / rms(x), which it computes from the tokens
    it loads; the copy is made here, so later changes to norm_w or w_gate_up are not seen) or
    "auto" ("fold" with the ring). One DecodeMLP runs one block at a time: its
    scratch (the normalised tokens, the intermediate, the slices and their counters) is shared
    by its runs. sched, grid, min_blocks_per_sm: as for any clcrt kernel, the graph's and the
    nodes'."""

    def __init__(self, norm_w, w_gate_up, w_down, max_batch=16, eps=1e-5, sched="auto", grid="auto",
                 slices_per_sm=1, min_blocks_per_sm=0, stream="auto", stages=2, kc=512, gu_sub="auto", sum="last",
                 norm="auto", rt=None):
        import torch

        self.hidden, self.inter = int(w_down.shape[0]), int(w_down.shape[1])
        H, inter = self.hidden, self.inter
        if H % 256 or inter % 256 or H > 16384 or tuple(w_gate_up.shape) != (2 * inter, H) or tuple(norm_w.shape) != (H,):
            raise ValueError("DecodeMLP: hidden (at most 16384) and intermediate must be multiples of 256, "
                             "w_gate_up [2I, H], norm_w [H]")
        if any(w.dtype != torch.bfloat16 or not w.is_contiguous() for w in (norm_w, w_gate_up, w_down)):
            raise ValueError("DecodeMLP: norm_w, w_gate_up and w_down must be contiguous bf16 tensors (the tiles and "
                             "their tensor maps read rows hidden and intermediate elements apart)")
        if not 1 <= max_batch <= 16:
            raise ValueError("DecodeMLP: batches of 1 to 16 tokens")
        self.rt = rt or clcrt.runtime(w_down.device.index)
        dev = w_down.device
        self.norm_w, self.wgu, self.wd, self.eps = norm_w, w_gate_up, w_down, eps
        # The ring's view of the weights: boxes of 16 rows x 256 k (no swizzle).
        none = clcrt.Swizzle.NONE
        self.wgu_map = self.rt.tensor_map_2d(w_gate_up, 16, 256, swizzle=none)
        self.wd_map = self.rt.tensor_map_2d(w_down, 16, 256, swizzle=none)
        self.slices_per_sm = slices_per_sm
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        self.slices = slices_for(H, inter, sms, slices_per_sm)
        self.xn = torch.empty(max_batch, H, dtype=torch.bfloat16, device=dev)
        self.h = torch.empty(max_batch, inter, dtype=torch.bfloat16, device=dev)
        self.part = torch.empty(self.slices, max_batch, H, dtype=torch.float32, device=dev)
        self.ctr = torch.zeros(H // ROWS_D, dtype=torch.int32, device=dev)  # sum="last": zero at rest
        self.max_batch = max_batch
        self.min_blocks_per_sm = min_blocks_per_sm
        if stream == "auto":
            stream = "bulk" if bulk_pays(H, inter // self.slices, kc) else "regs"
        if stream == "bulk" and (H % kc or inter // self.slices % kc):
            raise ValueError("DecodeMLP: with stream='bulk', hidden and the K slices (%d) must be multiples of kc "
                             "(%d)" % (inter // self.slices, kc))
        sps = inter // self.slices // ROWS_GU  # sub-tiles of 16 rows a K slice
        even = gu_even(inter, self.slices, sms) if stream == "bulk" else 0
        if gu_sub == "auto":
            gu_sub = "even" if even else "fixed"
        gu_tps = 0
        if gu_sub == "even":
            if not even:
                raise ValueError("DecodeMLP: gu_sub='even' needs stream='bulk' and K slices of at least one 16-row "
                                 "sub-tile per CTA slot (%d sub-tiles, %d slots a slice)" %
                                 (sps, 2 * sms // self.slices))
            gu_sub, gu_tps = 1, even
        elif gu_sub == "fixed":
            gu_sub = gu_sub_for(inter, inter // self.slices, sms) if stream == "bulk" else 1
        if norm == "auto":
            norm = "fold" if stream == "bulk" else "node"
        src, nodes, graph_nodes, smem = source(stream, stages, kc, gu_sub, sum, norm, gu_tps, sps)
        self.stream, self.stages, self.graph_nodes = stream, stages, graph_nodes
        # Gate/up tiles a K slice, each K slice's sps sub-tiles shared among them (source() refused a
        # fixed count that does not divide sps).
        self.gu_per_slice = gu_tps or sps // gu_sub
        lo, hi = sps // self.gu_per_slice, -(-sps // self.gu_per_slice)
        self.gu_desc = "%d gate/up tiles of %s rows" % (self.gu_per_slice * self.slices,
                                                         "%d-%d" % (16 * lo, 16 * hi) if lo != hi else "%d" % (16 * lo))
        self.sum, self.norm = sum, norm
        if norm == "fold":  # W' = W diag(norm_w), rounded to bf16 once; the gate/up tiles read it
            self.wgu_fold = (w_gate_up.float() * norm_w.float()).to(torch.bfloat16)
            self.wgu_fold_map = self.rt.tensor_map_2d(self.wgu_fold, 16, 256, swizzle=none)
        self.graph = clcrt.TaskGraph(src, graph_nodes, edges(H, inter, self.slices, sum=sum, norm=norm,
                                                             per_slice=self.gu_per_slice),
                                     block=BLOCK,
                                     smem_bytes=smem,
                                     sched=sched, grid=grid, min_blocks_per_sm=min_blocks_per_sm, rt=self.rt)
        self.kernels = [self.rt.register(src, fn, cls, block=BLOCK,
                                         smem_bytes=smem if cls in (GateUpArgs, DownArgs) else 0,
                                         sched=sched, min_blocks_per_sm=min_blocks_per_sm)
                        for fn, cls in nodes]
        self._cached = {}

    def tiles(self, batch):
        cols = self.hidden // ROWS_D
        t = [self.gu_per_slice * self.slices, cols * self.slices]
        t = t if self.norm == "fold" else [batch] + t
        return t + [cols] if self.sum == "node" else t

    def args(self, x, out):
        """The nodes' Args for x [B, H] into out [B, H] (kept per set of tensors)."""
        key = (x.data_ptr(), out.data_ptr(), x.shape[0])
        a = self._cached.get(key)
        if a is None:
            B = x.shape[0]
            if not 1 <= B <= self.max_batch or tuple(x.shape) != (B, self.hidden) or out.shape != x.shape:
                raise ValueError("DecodeMLP: x and out must be [B, %d] with B from 1 to %d" % (self.hidden,
                                                                                             self.max_batch))
            H, inter, s = self.hidden, self.inter, self.slices
            down = DownArgs(self.wd_map, self.h, self.wd, self.part, x, out, self.ctr, B, H, inter, s)
            if self.norm == "fold":  # the gate/up tiles read the raw tokens
                a = [GateUpArgs(self.wgu_fold_map, x, self.wgu_fold, self.h, B, H, inter, self.eps), down]
            else:
                a = [NormArgs(x, self.norm_w, self.xn, H, self.eps),
                     GateUpArgs(self.wgu_map, self.xn, self.wgu, self.h, B, H, inter, self.eps), down]
            if self.sum == "node":
                a.append(ResidualArgs(self.part, x, out, B, H, s))
            if len(self._cached) > 64:
                self._cached.clear()
            self._cached[key] = a
        return a

    def run_graph(self, x, out, pdl=False):
        """One launch: the task graph (``pdl``: with programmatic dependent launch, its grid
        launching while the kernel before it finishes)."""
        self.graph.run(self.tiles(x.shape[0]), self.args(x, out), pdl=pdl)

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
    p.add_argument("--stream", default="auto", choices=["auto", "regs", "bulk"])
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
    mlp = DecodeMLP(norm_w, wgu, wd, stream=o.stream)
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
    print("decode_mlp: %s (%d K slices, stream=%s)" % ("ok" if ok else "WRONG", mlp.slices, mlp.stream))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
