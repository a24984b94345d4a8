// clcrt stream-K: a decomposition of tiles with a reduction dimension into work units,
// apart from the scheduler loop, for any tile loop whose tiles sum over iterations (the
// k-blocks of a GEMM, the KV blocks of split-KV attention, the filter taps of a convolution).
//
// A problem has `tiles` output tiles (in the order of the caller's tile map), each the sum of
// `iters` iterations. Whole tiles cannot balance a grid whose last wave is short (2.2 waves
// of tiles run as 3). Stream-K ("data-parallel + stream-K", as CUTLASS's hybrid):
//   - sk_tiles of the tiles are shared out by iterations: their sk_tiles * iters iterations,
//     in tile order, are cut into sk_units ranges of equal length (+-1), one per unit; a
//     unit's range may begin and end inside tiles and cross several;
//   - the other tiles are whole, one unit each.
// Two orders (`tail`):
//   0: the shared tiles are tiles [0, sk_tiles) and their units come first, [0, sk_units),
//      so that they run at the same time (the first wave) and the whole tiles fill the waves
//      after them. With P units at once and T = W*P + R tiles (0 < R < P), sk_tiles = R + P
//      and sk_units = P give every unit (R + P) / P tiles of iterations and leave W - 1 whole
//      waves: W + R/P tile times instead of W + 1 (CUTLASS's data-parallel + stream-K).
//   1: the shared tiles are the last ones, [tiles - sk_tiles, tiles), and their units come
//      last: the whole tiles run first in full waves that stay in step (every unit the same
//      length, so the units that share rows of A or columns of B reach the same k together
//      and find them in L2), and the tail runs at the end. With sk_tiles = R and sk_units =
//      R * s (at most P), each tail tile is cut into s equal slices (units never cross a
//      tile): W + 1/s tile times plus the fix-up.
// Measured on a GEMM (examples/gemm/NOTES.md): order 0's ranges, which start at scattered k,
// cost the whole tiles after them their L2 reuse; order 1 with slices keeps it.
//
// A unit's part of one tile is a segment (clcrt_sk_segment): iterations [k0, k1) of the
// tile, piece `piece` of the tile's `pieces` (the units sharing it, in the order of their
// ranges). pieces == 1: the segment is the whole tile and the unit writes the output itself.
// Otherwise each piece is a partial sum, and the fix-up combines them:
//
//   1. the unit stores its partial in its own workspace slot (`slot`, 2 * sk_units at most,
//      clcrt_sk_slots; no two pieces of one run share a slot);
//   2. it counts itself in on the tile's counter (an atomic add, release: its partial before
//      the count);
//   3. the one that brings the counter to `pieces` (acquire: every other partial is visible)
//      reads the partials of pieces 0, 1, ..., pieces-1 from their slots (its own too) and
//      adds them in that order, writes the output, and sets the counter back to 0 for the
//      next run; the others are done with the tile.
//
// Deterministic: which unit covers which iterations depends only on (tiles, iters, sk_tiles,
// sk_units, tail), never on which CTA runs it or when; each partial is a sum in iteration order,
// stored exactly (fp32), and the final sum adds the partials in piece order whoever adds
// them. So the output has the same bits on every run, under every scheduler and grid.
//
// Free of deadlock: no unit ever waits for another. A unit's only contact with the others
// is one atomic add and, for the last, reading slots whose writes its acquire ordered
// before; the others return. So the decomposition needs no unit to be running at the same
// time as any other: a FIXED grid larger than what is resident, a persistent grid smaller
// than the units, a yielding run, two runs on two streams, all finish. (CUTLASS's own
// deterministic mode has a unit wait for its predecessors' partials; with a grid that is
// not all resident, that wait can be on a unit that has not started.) Each run in flight at
// once needs its own workspace and counters; runs on one stream may share them, since the
// last piece of each tile leaves its counter at 0.
//
// The portable core (clcrt_sk_*) is plain C as well as CUDA C++, so the CPU tests check it
// against a brute-force reference; the device helpers in namespace clcrt are CUDA only.
//
//   clcrt_sk sk = clcrt_sk_make(tiles, iters, sk_tiles, sk_units, tail);  // launch clcrt_sk_units(&sk)
//   for (unsigned i = 0, n = clcrt_sk_segments(&sk, unit); i < n; i++) {
//     clcrt_sk_seg g = clcrt_sk_segment(&sk, unit, i);
//     acc = sum over iterations [g.k0, g.k1) of tile g.tile;
//     if (g.pieces == 1) { write tile g.tile from acc; continue; }
//     store acc into slot g.slot;
//     if (clcrt::sk_arrive_warp(&counters[g.shared], g.pieces)) {  // the last piece
//       out = 0; for (j = 0; j < g.pieces; j++) out += slot clcrt_sk_piece_slot(&sk, g.shared, j);
//       (clcrt::sk_sum does this for vectors of floats)
//       write tile g.tile from out;
//     }
//   }
#ifndef CLCRT_STREAMK_CUH
#define CLCRT_STREAMK_CUH
#include "clcrt_tilemap.cuh"

// ---- portable core ----------------------------------------------------------------------

// A float quotient for estimates: the fast approximate division on the device (the exact one
// has a slow path that is a call).
#if defined(__CUDACC__)
#define CLCRT_SK_FDIV(a, b) __fdividef((a), (b))
#else
#define CLCRT_SK_FDIV(a, b) ((a) / (b))
#endif

typedef struct clcrt_sk {
  unsigned tiles;    // output tiles, in the caller's map order
  unsigned iters;    // iterations (k-blocks) per tile, >= 1
  unsigned sk_tiles; // tiles shared out by iterations...
  unsigned sk_units; // ...over this many units; 0 and 0: every tile whole
  unsigned tail;     // 0: the shared tiles and their units first; 1: last (see above)
} clcrt_sk;

// A unit's part of one tile.
typedef struct clcrt_sk_seg {
  unsigned tile;   // the tile, in map order
  unsigned shared; // its index among the shared tiles (counters, clcrt_sk_piece_slot, sk_sum)
  unsigned k0, k1; // its iterations [k0, k1)
  unsigned piece;  // its index among the units that share the tile, in iteration order
  unsigned pieces; // how many units share the tile; 1: the segment is the whole tile
  unsigned slot;   // where its partial goes when pieces > 1
} clcrt_sk_seg;

// The decomposition, made valid: sk_tiles at most tiles, and few enough that the shared
// iterations S = sk_tiles * iters stay below 2^32; sk_units at most S (every unit gets at
// least one iteration) and at most 65535; either 0 makes both 0 (every tile whole). With
// these bounds every step below is 32-bit arithmetic with no 64-bit division, which on the
// GPU is a call (and a call in a kernel that keeps 128 accumulators in registers spills).
CLCRT_TM_FN clcrt_sk clcrt_sk_make(unsigned tiles, unsigned iters, unsigned sk_tiles, unsigned sk_units, unsigned tail) {
  clcrt_sk s;
  s.tiles = tiles;
  s.tail = tail ? 1u : 0u;
  s.iters = iters ? iters : 1u;
  s.sk_tiles = sk_tiles < tiles ? sk_tiles : tiles;
  if (s.sk_tiles > 0xffffffffu / s.iters) s.sk_tiles = 0xffffffffu / s.iters;
  unsigned shared = s.sk_tiles * s.iters;
  s.sk_units = sk_units < shared ? sk_units : shared;
  if (s.sk_units > 65535u) s.sk_units = 65535u;
  if (s.sk_tiles == 0 || s.sk_units == 0) s.sk_tiles = s.sk_units = 0;
  return s;
}

// Units to launch: the shared ones, then one per whole tile.
CLCRT_TM_FN unsigned clcrt_sk_units(const clcrt_sk *s) { return s->sk_units + (s->tiles - s->sk_tiles); }

// The shared unit that unit u is (u - the whole tiles' units in order 1), or sk_units for a
// whole tile's unit.
CLCRT_TM_FN unsigned clcrt_sk_shared_unit(const clcrt_sk *s, unsigned u) {
  unsigned whole = s->tiles - s->sk_tiles;
  if (s->tail) return u >= whole ? u - whole : s->sk_units;
  return u < s->sk_units ? u : s->sk_units;
}

// Below, u is a shared unit (0 .. sk_units) and t a shared tile (0 .. sk_tiles), both counted
// among the shared ones; clcrt_sk_segment maps them to the launch's units and the map's tiles.

// The first shared iteration of unit u (u <= sk_units; u == sk_units gives the end):
// floor(u * S / U) = u * q + floor(u * r / U) for S = q * U + r, and u * r < U * U < 2^32.
CLCRT_TM_FN unsigned clcrt_sk_begin(const clcrt_sk *s, unsigned u) {
  unsigned total = s->sk_tiles * s->iters, q = total / s->sk_units, r = total - q * s->sk_units;
  return u * q + u * r / s->sk_units;
}

// The unit whose range holds shared iteration i: the largest u with begin(u) <= i, which is
// ceil(x) - 1 for x = (i + 1) * U / S. floor() of a float estimate of x (relative error below
// 2^-20, x < 2^16: off by less than 0.07) is within one of it; begin() settles it.
CLCRT_TM_FN unsigned clcrt_sk_unit_of(const clcrt_sk *s, unsigned i) {
  float f = ((float)i + 1.0f) * CLCRT_SK_FDIV((float)s->sk_units, (float)s->sk_tiles * (float)s->iters);
  unsigned u = (unsigned)f;
  if (u >= s->sk_units) u = s->sk_units - 1u;
  while (u > 0 && clcrt_sk_begin(s, u) > i) u--;
  while (u + 1u < s->sk_units && clcrt_sk_begin(s, u + 1u) <= i) u++;
  return u;
}

// How many tiles unit u (of the launch) works on.
CLCRT_TM_FN unsigned clcrt_sk_segments(const clcrt_sk *s, unsigned unit) {
  unsigned u = clcrt_sk_shared_unit(s, unit);
  if (u >= s->sk_units) return 1u;
  unsigned b = clcrt_sk_begin(s, u), e = clcrt_sk_begin(s, u + 1u);
  return (e - 1u) / s->iters - b / s->iters + 1u;
}

// The workspace slot of unit u's piece of shared tile t: the unit's first tile uses slot u,
// any later one slot sk_units + u (a unit's middle tiles are whole, so it has two partials at
// most: the tile it starts in and the tile it ends in).
CLCRT_TM_FN unsigned clcrt_sk_slot_of(const clcrt_sk *s, unsigned t, unsigned u) {
  return clcrt_sk_begin(s, u) >= t * s->iters ? u : s->sk_units + u;
}

// The first unit of shared tile t (its piece 0), and the slot of its piece j.
CLCRT_TM_FN unsigned clcrt_sk_first_unit(const clcrt_sk *s, unsigned t) { return clcrt_sk_unit_of(s, t * s->iters); }
CLCRT_TM_FN unsigned clcrt_sk_piece_slot(const clcrt_sk *s, unsigned t, unsigned j) {
  return clcrt_sk_slot_of(s, t, clcrt_sk_first_unit(s, t) + j);
}

// Segment i of unit `unit` of the launch.
CLCRT_TM_FN clcrt_sk_seg clcrt_sk_segment(const clcrt_sk *s, unsigned unit, unsigned i) {
  clcrt_sk_seg g;
  const unsigned u = clcrt_sk_shared_unit(s, unit), first_shared = s->tail ? s->tiles - s->sk_tiles : 0u;
  if (u >= s->sk_units) {
    g.tile = s->tail ? unit : s->sk_tiles + (unit - s->sk_units);
    g.shared = 0;
    g.k0 = 0, g.k1 = s->iters;
    g.piece = 0, g.pieces = 1, g.slot = 0;
    return g;
  }
  unsigned b = clcrt_sk_begin(s, u), e = clcrt_sk_begin(s, u + 1u);
  g.shared = b / s->iters + i;
  g.tile = first_shared + g.shared;
  unsigned t0 = g.shared * s->iters, t1 = t0 + s->iters;
  g.k0 = (b > t0 ? b : t0) - t0;
  g.k1 = (e < t1 ? e : t1) - t0;
  unsigned first = clcrt_sk_unit_of(s, t0), last = clcrt_sk_unit_of(s, t1 - 1u);
  g.piece = u - first;
  g.pieces = last - first + 1u;
  g.slot = i == 0 ? u : s->sk_units + u;
  return g;
}

// Workspace slots a run needs: sk_units, or twice that when some unit ends inside a tile
// other than the one it starts in (its second partial).
CLCRT_TM_FN unsigned clcrt_sk_slots(const clcrt_sk *s) {
  for (unsigned u = 0; u < s->sk_units; u++) {
    unsigned b = clcrt_sk_begin(s, u), e = clcrt_sk_begin(s, u + 1u);
    if ((e - 1u) / s->iters != b / s->iters && e % s->iters != 0) return 2u * s->sk_units;
  }
  return s->sk_units;
}

#if defined(__CUDACC__)
namespace clcrt {

__device__ __forceinline__ unsigned sk_lane() {
  unsigned l;
  asm("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
}

// Counts the calling warp's piece of a shared tile in on `ctr` (a word that is 0 before the
// tile's first piece); true for the last of `pieces`, which then sees every other piece's
// stores to global memory (load them with ld.relaxed.gpu, as sk_sum does: L1 is not
// coherent) and has set the counter back to 0. Call it with the whole warp after the warp's
// stores of its partial: __syncwarp orders the lanes' stores before lane 0's release, and
// lane 0's acquire before every lane's later loads. Never waits.
__device__ __forceinline__ bool sk_arrive_warp(unsigned *ctr, unsigned pieces) {
  __syncwarp();
  unsigned seen = 0;
  if (sk_lane() == 0)
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(seen) : "l"(ctr) : "memory");
  seen = __shfl_sync(0xffffffffu, seen, 0);
  if (seen != pieces - 1u) return false;
  if (sk_lane() == 0) asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(ctr) : "memory");
  __syncwarp();
  return true;
}

__device__ __forceinline__ float4 sk_load4(const float *p) {
  float4 v;
  asm volatile("ld.relaxed.gpu.global.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// The fix-up's sum, for the last piece of shared tile `tile` (counted among the shared ones,
// clcrt_sk_seg.shared; after sk_arrive_warp): out =
// 0 + partial of piece 0 + piece 1 + ... in that order, whichever piece the caller is (its
// own partial is read back like the others, so the bits never depend on who adds). `first`
// is the tile's first unit (clcrt_sk_first_unit, best found before registers fill up). Each
// partial is read as V vectors of 4 floats at `p + slot * slot_floats + v * vstride`
// (16-byte aligned), G vectors in flight at a time, so that `out` can be the caller's own
// accumulators (dead once their partial is stored) and the sum needs only 4 * G more
// registers. Only vectors [0, live) are read (the rest of out stays 0).
template <unsigned V, unsigned G = 8>
__device__ __forceinline__ void sk_sum(const clcrt_sk &s, unsigned tile, unsigned first, unsigned pieces, const float *p,
                                       unsigned long long slot_floats, unsigned vstride, unsigned live,
                                       float (&out)[4 * V]) {
#pragma unroll
  for (unsigned i = 0; i < 4 * V; i++) out[i] = 0.0f;
#pragma unroll 1
  for (unsigned j = 0; j < pieces; j++) {
    const float *q = p + clcrt_sk_slot_of(&s, tile, first + j) * slot_floats;
#pragma unroll
    for (unsigned g = 0; g < V; g += G) {
      if (g >= live) break;
      float4 t[G];
#pragma unroll
      for (unsigned v = 0; v < G && g + v < V; v++) t[v] = sk_load4(q + (g + v) * vstride);
#pragma unroll
      for (unsigned v = 0; v < G && g + v < V; v++) {
        float *o = out + 4 * (g + v);
        o[0] += t[v].x, o[1] += t[v].y, o[2] += t[v].z, o[3] += t[v].w;
      }
    }
  }
}

}  // namespace clcrt
#endif  // __CUDACC__
#endif  // CLCRT_STREAMK_CUH
