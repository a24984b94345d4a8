// bf16 GEMM tile functions of clcrt's op library on Hopper (sm_90a), built only on the public
// API and the device headers. Compiled at run time by the op (ops/gemm.c registers it; the
// macros below pick a variant); embedded into the library, never read from disk.
//
//   gemm_tile          dense   D[M x N] = A[M x K] . B[N x K]^T   (both "K-major": the TN layout)
//   gemm_grouped_tile  grouped D_g = A_g . B_g^T for G groups (mixture-of-experts layers): the
//                      groups' rows one after another in A and D (group g has M_g rows, the
//                      counts in device memory) or, the masked layout, at row g * R for a fixed
//                      R; the weights B_g stacked as one (G*N) x K matrix.
// bf16 in, fp32 accumulation, bf16 out. M, N, K need not be multiples of the tile: TMA fills
// what lies outside A and B with zeros and the stores are guarded. K must be a multiple of 8
// (TMA needs 16-byte row strides); any M, N >= 1.
//
// How a CTA works (BM x BN tile, BK = 64):
//   - warps 0 .. 4*NWG-1 are NWG consumer warpgroups (NWG = BM / 64); warpgroup w computes
//     rows [64w, 64w + 64) of the tile with wgmma.mma_async m64nBNk16 (A and B from shared
//     memory, 128-byte swizzled, fp32 accumulators in registers);
//   - the last warp is the producer: its lane 0 issues the TMA loads (cp.async.bulk.tensor)
//     of each k-block into a ring of STAGES stages. It is also the lane that claims the next
//     tile for the cluster under STEAL (clcrt's leader is lane 0 of the last warp), so the
//     claim is made as soon as the current tile's loads are issued;
//   - full[s] (one arrival: the producer's expect_tx, then the bytes) and empty[s] (one
//     arrival per consumer warpgroup of every CTA that reads the stage) mbarriers per stage.
//     The ring position (stage, phase) lives in the per-CTA State and carries over from tile
//     to tile: clcrt puts no barrier between tiles, so the producer runs ahead into the next
//     tile (up to STAGES k-blocks) while the consumers finish the current one and store it.
//   - consumers keep one k-block of wgmma in flight (wait_group 1) and release a stage as
//     soon as the wgmma that read it is done;
//   - the epilogue (GEMM_EPI 1) goes through 2 KiB of shared memory per consumer warp:
//     stmatrix, then whole 128-byte rows of D with 16-byte stores (store_chunk).
// 1 + 4*NWG warps and no register reallocation: with 288 threads (BM = 128) every thread may
// hold 224 registers, enough for 128 accumulators; setmaxnreg would need the roles in one
// if/else at kernel level, which a tile function called per tile is not.
//
// Clusters (GEMM_CM = 2): the two CTAs of a cluster take vertically adjacent tiles (same n,
// m and m+1) and share B: each loads half of the B tile and multicasts it to both
// (.multicast::cluster), and each consumer warpgroup releases a stage in both CTAs.
//
// Stream-K (dense; nvrtc_src/clcrt_streamk.cuh): the launch's units are whole tiles and
// units that share Args.sk_tiles tiles by k-blocks (Args.sk_units of them, first or, with
// Args.sk_tail, last; 0: every tile whole). A unit runs its segments one after another through the same ring; a segment
// that is a whole tile is stored as usual, a piece of a shared tile goes to the fix-up: every
// consumer warp stores its fp32 partial (its own rows of the problem only) in the piece's
// workspace slot and counts itself in on its (tile, CTA, warp) counter; the warp that arrives
// last adds every piece's partial in piece order, stores the bf16 output and sets the counter
// back to 0. Nobody waits for another CTA, and the bits do not depend on the schedule.
//
// Operands at 16-byte offsets (tensor views): every 128-byte TMA box row would straddle two
// L2 lines. Args.kshift starts the k-blocks that many columns before column 0 (TMA fills
// columns < 0 with zeros for A and B alike), so the loads of an operand whose rows start
// kshift columns past a 128-byte line are whole lines (the op picks it: gemm_kshift). Where
// A's offset differs from B's, one shift serves one of them. The A-shift kernels (GEMM_ASHIFT,
// 64-row tiles, of one CTA or two) load A's boxes Args.ashift columns earlier, on A's own lines, and
// read each k-block's A from two consecutive boxes (consume_ashift); the producer loads one
// more A box per segment.
#include "clcrt_streamk.cuh"
#include "clcrt_tilemap.cuh"

#ifndef GEMM_BM
#define GEMM_BM 128
#endif
#ifndef GEMM_BN
#define GEMM_BN 256
#endif
#ifndef GEMM_CM
#define GEMM_CM 1
#endif
#ifndef GEMM_STAGES  // as many 64-deep k-blocks as fit in about 200 KiB
#define GEMM_STAGES ((200u * 1024u) / ((GEMM_BM + GEMM_BN) * 128u) < 8u ? (200u * 1024u) / ((GEMM_BM + GEMM_BN) * 128u) : 8u)
#endif
#ifndef GEMM_MAX_GROUPS
#define GEMM_MAX_GROUPS 1024
#endif
#ifndef GEMM_TRANS  // 1: the op swapped A and B; the epilogue writes the tiles into D transposed (store_tile_t)
#define GEMM_TRANS 0
#endif
#ifndef GEMM_IDLE_WG  // 1: a consumer warpgroup with no rows of the problem issues no wgmma (consume_idle)
#define GEMM_IDLE_WG 1
#endif
#ifndef GEMM_EPI  // 1: staged epilogue (stmatrix, 16-byte coalesced stores); 0: 4-byte stores from registers
#define GEMM_EPI 1
#endif
#ifndef GEMM_ASHIFT  // 1: A's boxes start Args.ashift columns before B's (consume_ashift)
#define GEMM_ASHIFT 0
#endif

namespace gemm {

constexpr unsigned BM = GEMM_BM, BN = GEMM_BN, BK = 64, STAGES = GEMM_STAGES, CM = GEMM_CM;
constexpr unsigned NWG = BM / 64;              // consumer warpgroups
constexpr unsigned NCW = NWG * 4;              // consumer warps
constexpr unsigned THREADS = NWG * 128 + 32;   // + the producer warp
constexpr bool ASHIFT = GEMM_ASHIFT != 0;
constexpr unsigned A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr unsigned B_PART = BN / CM;           // rows of the B tile one CTA loads
constexpr unsigned BAR_OFF = STAGES * STAGE_BYTES;       // full[STAGES], then empty[STAGES]
constexpr unsigned EPI_WARP = 16 * 128;                  // a consumer warp's staging: 16 rows x 64 bf16
constexpr unsigned EPI_OFF = (BAR_OFF + 16 * STAGES + 127u) & ~127u;
// Each consumer warp also parks 48 bytes there (Epi, below): 32 at the start of its staging
// (read before the epilogue writes it) and 16 past its end (read after the epilogue).
constexpr unsigned EPI_LOOP = GEMM_EPI ? EPI_WARP : 32u;
constexpr unsigned EPI_STRIDE = GEMM_EPI ? EPI_WARP + 128u : 64u;
constexpr unsigned EPI_BYTES = NCW * EPI_STRIDE;
constexpr unsigned MAP_OFF = EPI_OFF + EPI_BYTES;        // grouped: the prefix sums
static_assert(BM % 64 == 0 && BM >= 64 && BM <= 256, "BM: 64, 128, 192 or 256 (one consumer warpgroup per 64 rows)");
static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256, "BN: a multiple of 16 from 16 to 256");
static_assert(CM == 1 || CM == 2, "GEMM_CM: 1 or 2");
static_assert(!ASHIFT || BM == 64, "GEMM_ASHIFT: 64-row tiles");
static_assert(B_PART % 8 == 0, "each CTA's part of B must be whole 8-row swizzle atoms");
// The ring, the staging, the grouped map, 1 KiB of alignment slack and the scheduler's static
// shared memory (about 1.2 KiB) within the 227 KiB a CTA may have.
static_assert(STAGES >= 2 && MAP_OFF + 8u * (GEMM_MAX_GROUPS + 1u) + 1024u + 2048u <= 227u * 1024u,
              "stages do not fit in shared memory");

}  // namespace gemm

// GemmArgs: declared once for the host and the device (the op puts the header's text here).
#include "gemm_abi.h"

struct GemmState {
  unsigned base;          // shared address of the 1024-aligned ring
  unsigned stage, phase;  // ring position of this thread's role, carried from tile to tile
};

namespace gemm {

// ---- PTX wrappers --------------------------------------------------------------------------

__device__ __forceinline__ unsigned smem_u32(const void *p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
// The generic address of shared address `addr` (for ordinary C++ accesses).
__device__ __forceinline__ void *smem_ptr(unsigned addr) {
  void *p;
  asm("{ .reg .u64 t; cvt.u64.u32 t, %1; cvta.shared.u64 %0, t; }" : "=l"(p) : "r"(addr));
  return p;
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "W%=:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t@!p bra W%=;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Arrive on the barrier at the same offset in the cluster's CTA `rank`.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
  asm volatile(
      "{\n\t.reg .b32 r;\n\tmapa.shared::cluster.u32 r, %0, %1;\n\tmbarrier.arrive.shared::cluster.b64 _, [r];\n}" ::"r"(
          bar),
      "r"(rank)
      : "memory");
}
__device__ __forceinline__ void tma_prefetch(const void *map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}
// One box of a 2-D tensor map (x = column, y = row) into this CTA's shared memory.
__device__ __forceinline__ void tma_load(unsigned dst, const void *map, unsigned x, unsigned y, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(map), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
// The same box into the same offset of every CTA in `mask`, completing bytes on each one's
// barrier at the offset of `bar`.
__device__ __forceinline__ void tma_load_multicast(unsigned dst, const void *map, unsigned x, unsigned y, unsigned bar,
                                                   unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(bar), "h"(mask)
      : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Matrix descriptor of a K-major tile in shared memory written by TMA with 128-byte swizzle:
// rows of 64 bf16 (128 bytes), 8-row atoms of 1024 bytes (stride byte offset), the leading
// byte offset unused for swizzled K-major layouts (1 by convention), swizzle mode 1 (128B).
// Tiles start at 1024-byte boundaries, so the base offset field is 0; the k-th 16-wide slice
// of a 64-wide k-block starts 32 bytes further: + 2 in the address field.
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ void st_u32(void *p, unsigned v) {
  asm volatile("st.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_u16(void *p, unsigned short v) {
  asm volatile("st.global.b16 [%0], %1;" ::"l"(p), "h"(v) : "memory");
}
__device__ __forceinline__ void st_f32x4(float *p, float a, float b, float c, float d) {
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}
// Four 8x8 matrices of b16 into shared memory, each lane holding one 32-bit pair of each in
// the mma/wgmma accumulator layout (row lane/4, columns 2(lane%4), +1); lanes 8i..8i+7 give the
// addresses of matrix i's eight rows.
__device__ __forceinline__ void stmatrix_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
__device__ __forceinline__ uint4 ld_shared_v4(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr)
               : "memory");
  return v;
}
__device__ __forceinline__ void st_v4(void *p, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// wgmma.mma_async m64nBNk16 for this variant's BN: mma(d, da, db, scale_d) (generated).
#include "gemm_wgmma.h"

__device__ __forceinline__ unsigned full_bar(const GemmState &s, unsigned st) { return s.base + BAR_OFF + st * 8; }
__device__ __forceinline__ unsigned empty_bar(const GemmState &s, unsigned st) {
  return s.base + BAR_OFF + (STAGES + st) * 8;
}
__device__ __forceinline__ void advance(GemmState &s) {
  if (++s.stage == STAGES) {
    s.stage = 0;
    s.phase ^= 1;
  }
}

// The rows of B that the part at row p0 (B_PART rows) brings into the ring: all of them where
// it lies inside B's rows `ext` (the tiles' view; 0: unknown, every part whole), none where it
// lies wholly past them, and at the edge GEMM_B_EDGE_ROWS (one box of Args.bsub where b_sub is 1,
// else the whole part). The rows left unloaded hold whatever the stage held before; they meet
// only D's columns past the edge, which no epilogue stores.
__device__ __forceinline__ unsigned b_part_rows(const GemmArgs &a, unsigned ext, unsigned p0) {
  if (ext == 0 || p0 + B_PART <= ext) return B_PART;
  if (p0 >= ext) return 0;
  return a.b_sub ? GEMM_B_EDGE_ROWS(B_PART, ext - p0) : B_PART;
}
// One box of B's map `map` at (x, y) into dst on the barrier `bar`, multicast to the cluster
// where CM > 1 (each CTA loads its part of B into every CTA's ring).
__device__ __forceinline__ void load_b_box(unsigned dst, const GemmTensorMap &map, unsigned x, unsigned y,
                                           unsigned bar) {
  if (CM == 1)
    tma_load(dst, &map, x, y, bar);
  else
    tma_load_multicast(dst, &map, x, y, bar, (unsigned short)((1u << CM) - 1u));
}
// This CTA's part of B (rows `rows` of b_part_rows at row p0, k column x) into dst: one box of
// Args.b for a whole part, else the one box of Args.bsub, `rows` high.
__device__ __forceinline__ void load_b_part(const GemmArgs &a, unsigned dst, unsigned x, unsigned p0, unsigned rows,
                                            unsigned bar) {
  load_b_box(dst, rows == B_PART ? a.b : a.bsub, x, p0, bar);
}

// The producer warp: the k-blocks [kb0, kb1) of A rows a_row.. and B rows b_row.. into the
// ring. All lanes walk the ring (so the warp stays converged for the scheduler); lane 0 issues.
// A-shift kernels: A's boxes start Args.ashift columns before B's, and one more stage, A's box
// kb1 alone, follows the segment's k-blocks (consume_ashift reads the end of k-block kb1 - 1
// from it). b_ext: B's rows in the tiles' view (dense: Args.n), which no box of B starts past;
// 0 (grouped): every part whole, a group's edge boxes reading the next group's rows.
__device__ __forceinline__ void produce(const GemmArgs &a, GemmState &s, unsigned a_row, unsigned b_row, unsigned kb0,
                                        unsigned kb1, unsigned rank, unsigned b_ext) {
  const bool issuer = (threadIdx.x & 31) == 0;
  const unsigned ash = ASHIFT ? a.ashift : 0u, kend = kb1 + (ASHIFT ? 1u : 0u);
  // B's bytes per stage: every CTA's part lands in every CTA of the cluster.
  unsigned b_bytes = 0;
#pragma unroll
  for (unsigned c = 0; c < CM; c++) b_bytes += b_part_rows(a, b_ext, b_row + c * B_PART) * 128u;
  const unsigned my_p0 = b_row + rank * B_PART, my_rows = b_part_rows(a, b_ext, my_p0);
#pragma unroll 1
  for (unsigned kb = kb0; kb < kend; kb++) {
    const unsigned st = s.stage, full = full_bar(s, st);
    const unsigned sa = s.base + st * STAGE_BYTES, sb = sa + A_BYTES;
    // Free once every consumer warpgroup (of every CTA the stage is multicast to) released
    // the stage's previous use; a fresh barrier counts as released (parity trick).
    mbar_wait(empty_bar(s, st), s.phase ^ 1);
    if (issuer) {
      const bool with_b = kb < kb1;
      mbar_expect_tx(full, with_b ? A_BYTES + b_bytes : A_BYTES);  // our A, and all of B (each CTA's part lands here)
      const unsigned x = kb * BK - a.kshift;  // negative (two's complement) for the first: zero fill
      tma_load(sa, &a.a, x - ash, a_row, full);
      if (with_b && my_rows) load_b_part(a, sb + rank * (B_PART * 128), x, my_p0, my_rows, full);
    }
    __syncwarp();
    advance(s);
  }
}

// A consumer warpgroup's release of stage st: one arrival on its empty barrier in every CTA
// of the cluster (each loaded its part of B into all of them).
__device__ __forceinline__ void release(const GemmState &s, unsigned st) {
#pragma unroll
  for (unsigned c = 0; c < CM; c++) {
    if (CM == 1)
      mbar_arrive(empty_bar(s, st));
    else
      mbar_arrive_cluster(empty_bar(s, st), c);
  }
}

// A grouped tile's consumer warpgroup whose 64 rows lie past its group's (the last row block
// of a group, a cluster's padding tile): it issues no wgmma, only walks the ring, releasing each
// stage once it is full (it must not count itself in on a stage's empty barrier before the
// stage's previous use is done, which the full barrier's phase orders), so that the warpgroup
// with rows has the tensor cores to itself and a padding tile costs its loads only. Measured on
// an H200 (ops/NOTES.md): grouped GEMMs of many small groups up to 1.25x in 2-CTA clusters
// (most of whose tiles were padding), 1.01x in geo-mean with the default 128x256. Dense tiles
// do not take it: level over 16 shapes, one of them 1-5% slower in three runs. Nor does STATIC
// (the op builds it with GEMM_IDLE_WG 0): its CTAs walk fixed tiles in waves that share B in
// L2, and cheaper tiles let them drift apart (grouped prefill 0.80-0.94x with it).
__device__ __forceinline__ void consume_idle(GemmState &s, unsigned kb0, unsigned kb1) {
  const bool releaser = (threadIdx.x & 127) == 0;
#pragma unroll 1
  for (unsigned kb = kb0; kb < kb1; kb++) {
    if (releaser) {
      mbar_wait(full_bar(s, s.stage), s.phase);
      release(s, s.stage);
    }
    advance(s);
  }
}

// Four 8x8 matrices of b16 from shared memory: lanes 8i..8i+7 give the addresses of matrix i's
// eight 16-byte rows; r[i] is matrix i in the mma fragment layout (row lane/4, columns
// 2(lane%4), +1).
__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned *r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// One k-block of an A-shift kernel's consumer warpgroup (consume_ashift). Its A starts D
// 16-byte pieces into A's box of this stage: the 16-column slice k is pieces 2k + D and
// 2k + D + 1, of this box up to piece 7 and of the next stage's box from piece 8 on. A matrix
// descriptor may start at any 16-byte piece of a 128B-swizzled row (the swizzle is a function
// of the address), so each slice inside one box is read from shared memory as usual, at its
// piece. With D odd, one slice straddles the two boxes (pieces 7 and 8): each warp loads its
// 16 rows of it with ldmatrix, the two halves from the two boxes (piece q of row r lies at
// r * 128 + ((q ^ (r % 8)) * 16)), and the slice's wgmma takes A from registers (af; the
// k-blocks alternate between two sets, so that a set is loaded again only after wait_group 1
// retired the wgmma that read it). D is a template parameter: every wgmma of the loop is
// issued unconditionally (a wgmma under a branch would cost the pipeline its overlap).
template <unsigned D>
__device__ __forceinline__ void ashift_kblock(GemmState &s, float *acc, unsigned (&af)[4], bool first, unsigned &prev) {
  const unsigned st = s.stage, nx = st + 1 == STAGES ? 0u : st + 1;
  mbar_wait(full_bar(s, st), s.phase);
  mbar_wait(full_bar(s, nx), st + 1 == STAGES ? s.phase ^ 1 : s.phase);
  const unsigned sa = s.base + st * STAGE_BYTES, sn = s.base + nx * STAGE_BYTES;
  if (D & 1) {
    const unsigned lane = threadIdx.x & 31, mi = lane >> 3;
    const unsigned row = ((threadIdx.x >> 5) & 3) * 16 + (mi & 1) * 8 + (lane & 7);
    // Matrices 0, 1: piece 7 of this box (rows 0-7, 8-15); 2, 3: piece 0 of the next.
    ldmatrix_x4((mi < 2 ? sa + ((7u ^ (row & 7)) << 4) : sn + ((row & 7) << 4)) + row * 128, af);
  }
  const unsigned long long da = smem_desc(sa), dn = smem_desc(sn), db = smem_desc(sa + A_BYTES);
  wgmma_fence();
#pragma unroll
  for (unsigned k = 0; k < BK / 16; k++) {
    const unsigned q = 2 * k + D, scale = (!first || k != 0) ? 1u : 0u;
    if (q == 7)
      mma_rs(acc, af, db + 2 * k, scale);
    else
      mma(acc, (q < 8 ? da : dn) + (q & 7), db + 2 * k, scale);
  }
  wgmma_commit();
  if (!first) {
    wgmma_wait<1>();  // the previous k-block's wgmma are done: its stage and its registers are free
    if ((threadIdx.x & 127) == 0) release(s, prev);
  }
  prev = st;
  advance(s);
}

template <unsigned D>
__device__ __forceinline__ void ashift_loop(GemmState &s, float *acc, unsigned kb0, unsigned kb1) {
  unsigned af0[4], af1[4], prev = 0;
#pragma unroll 1
  for (unsigned kb = kb0; kb < kb1; kb += 2) {
    ashift_kblock<D>(s, acc, af0, kb == kb0, prev);
    if (kb + 1 < kb1) ashift_kblock<D>(s, acc, af1, false, prev);
  }
  wgmma_wait<0>();
  if ((threadIdx.x & 127) == 0) {
    release(s, prev);
    release(s, s.stage);  // A's box kb1
  }
  advance(s);
}

// The consumer warpgroup of an A-shift kernel (A's boxes ash columns, a multiple of 8 from 8 to
// 56, before B's; produce): column j of k-block kb is column j + ash of A's box kb, or of box
// kb + 1 from column 64 - ash on, so every k-block waits for the next stage too. The stage
// after the last k-block holds A's box kb1 alone and is released with the last.
__device__ __forceinline__ void consume_ashift(GemmState &s, float *acc, unsigned ash, unsigned kb0, unsigned kb1) {
  switch (ash / 8) {
    case 1: ashift_loop<1>(s, acc, kb0, kb1); break;
    case 2: ashift_loop<2>(s, acc, kb0, kb1); break;
    case 3: ashift_loop<3>(s, acc, kb0, kb1); break;
    case 4: ashift_loop<4>(s, acc, kb0, kb1); break;
    case 5: ashift_loop<5>(s, acc, kb0, kb1); break;
    case 6: ashift_loop<6>(s, acc, kb0, kb1); break;
    default: ashift_loop<7>(s, acc, kb0, kb1); break;  // 7 (the prologue traps on any other)
  }
}

// A consumer warpgroup: the k-blocks [kb0, kb1) into acc (rows 64 wg .. of the tile), or, where
// those rows lie past the problem's (rows_live false), consume_idle; in A-shift kernels
// consume_ashift (Args.ashift: ash).
__device__ __forceinline__ void consume(GemmState &s, float *acc, unsigned wg, unsigned kb0, unsigned kb1,
                                        bool rows_live = true, unsigned ash = 0) {
  if (GEMM_IDLE_WG && !rows_live) {
    consume_idle(s, kb0, kb1);
    return;
  }
  if (ASHIFT) {
    consume_ashift(s, acc, ash, kb0, kb1);
    return;
  }
  const bool releaser = (threadIdx.x & 127) == 0;
  unsigned prev = 0;
#pragma unroll 1
  for (unsigned kb = kb0; kb < kb1; kb++) {
    const unsigned st = s.stage;
    mbar_wait(full_bar(s, st), s.phase);
    const unsigned sa = s.base + st * STAGE_BYTES + wg * (64 * 128), sb = s.base + st * STAGE_BYTES + A_BYTES;
    const unsigned long long da = smem_desc(sa), db = smem_desc(sb);
    wgmma_fence();
#pragma unroll
    for (unsigned k = 0; k < BK / 16; k++) mma(acc, da + 2 * k, db + 2 * k, (kb != kb0 || k != 0) ? 1u : 0u);
    wgmma_commit();
    if (kb != kb0) {
      wgmma_wait<1>();  // the previous k-block's wgmma are done: its stage may be refilled
      if (releaser) release(s, prev);
    }
    prev = st;
    advance(s);
  }
  wgmma_wait<0>();
  if (releaser) release(s, prev);
}

// Stores one 8-column slice j of the warp's 16 x BN part of the tile: bf16 pairs v0 (row r0)
// and v1 (row r0 + 8) at column c. wgmma's D layout: lane l holds rows l/4 and l/4 + 8,
// columns 8j + 2(l%4) + {0,1}. Rows at or past row_end and columns at or past n are not
// written; odd row strides, D not 4-byte aligned or a last odd column take 2-byte stores.
// 4-byte stores of column pairs need every pair 4-byte aligned: D 4-byte aligned and an even
// row stride (a tensor view at a 2-byte offset is neither).
__device__ __forceinline__ bool pairs_ok(const GemmArgs &a) {
  return (a.ldd & 1) == 0 && ((unsigned long long)a.d & 3) == 0;
}

__device__ __forceinline__ void store_pair(const GemmArgs &a, unsigned short *p0, unsigned short *p1, unsigned c,
                                           unsigned v0, unsigned v1, bool ok0, bool ok1) {
  if (pairs_ok(a) && c + 1 < a.n) {
    if (ok0) st_u32(p0, v0);
    if (ok1) st_u32(p1, v1);
  } else {
    if (ok0 && c < a.n) st_u16(p0, (unsigned short)v0);
    if (ok1 && c < a.n) st_u16(p1, (unsigned short)v1);
    if (ok0 && c + 1 < a.n) st_u16(p0 + 1, (unsigned short)(v0 >> 16));
    if (ok1 && c + 1 < a.n) st_u16(p1 + 1, (unsigned short)(v1 >> 16));
  }
}

// Writes the warp's 16 x BN part of the tile from the accumulators (rows r0, r0 + 8).
__device__ __forceinline__ void store_tile(const GemmArgs &a, const float *acc, unsigned r0, unsigned row_end,
                                           unsigned c_base, unsigned lane) {
  const unsigned c0 = c_base + 2 * (lane & 3);
  unsigned short *p0 = a.d + (unsigned long long)r0 * a.ldd + c0;
  unsigned short *p1 = p0 + 8ull * a.ldd;
  const bool ok0 = r0 < row_end, ok1 = r0 + 8 < row_end;
  if (pairs_ok(a) && c_base + BN <= a.n) {  // the common case: whole 4-byte pairs, no column guard
#pragma unroll
    for (unsigned j = 0; j < BN / 8; j++) {
      if (ok0) st_u32(p0 + 8 * j, pack_bf16(acc[4 * j], acc[4 * j + 1]));
      if (ok1) st_u32(p1 + 8 * j, pack_bf16(acc[4 * j + 2], acc[4 * j + 3]));
    }
    return;
  }
#pragma unroll
  for (unsigned j = 0; j < BN / 8; j++)
    store_pair(a, p0 + 8 * j, p1 + 8 * j, c0 + 8 * j, pack_bf16(acc[4 * j], acc[4 * j + 1]),
               pack_bf16(acc[4 * j + 2], acc[4 * j + 3]), ok0, ok1);
}

// The staged epilogue (GEMM_EPI 1). Each consumer warp owns 16 rows x 64 bf16 of shared
// memory (EPI_WARP bytes, rows of 128 bytes) and writes its 16 x BN part of the tile 64
// columns (a chunk: 8 accumulator slices) at a time:
//   - 4 stmatrix.x4 put the chunk's 16 x 64 bf16 into the staging rows, the 16-byte column
//     group g of row r at byte r * 128 + ((g ^ (r & 7)) * 16): the eight rows one stmatrix
//     matrix covers, and the eight 16-byte reads of one row, land on distinct banks;
//   - each lane reads 16 bytes back, and the warp stores 4 whole rows of 128 contiguous bytes
//     per instruction (16 st.global.v4 per warp and tile, against 128 scattered 4-byte stores
//     from the accumulators, each touching 8 rows).
// Only the warp's own lanes touch its staging, so __syncwarp orders it. Rows at or past
// row_end and columns at or past n are not written; a group of 8 columns crossing n is
// written element by element. Needs ldd a multiple of 8 and D 16-byte aligned (staged_ok).
__device__ __forceinline__ bool staged_ok(const GemmArgs &a) {
  return GEMM_EPI && (a.ldd & 7) == 0 && ((unsigned long long)a.d & 15) == 0;
}

// v: the chunk's 32 accumulators in the wgmma layout, v[4s + e] for its slice s (8 columns):
// e = 0, 1 row lane/4, columns 2(lane%4) + {0, 1}; e = 2, 3 the same eight rows further.
// row0: the warp's first row of D; col0: the chunk's first column.
// S: the chunk's slices, 8 (64 columns) but for the last chunk of a tile whose width is not a
// multiple of 64 (2, 4 or 6); the staging groups past them are neither written nor read.
template <unsigned S>
__device__ __forceinline__ void store_chunk(const GemmArgs &a, unsigned stage, const float *v, unsigned row0,
                                            unsigned row_end, unsigned col0, unsigned lane) {
  static_assert(S % 2 == 0 && S >= 2 && S <= 8, "a chunk is 2 to 8 slices, in pairs");
  const unsigned mi = lane >> 3, r = lane & 7;
  const unsigned srow = stage + ((mi & 1) * 8 + r) * 128;
#pragma unroll
  for (unsigned q = 0; q < S / 2; q++) {
    // Matrix mi of instruction q: slice 2q + (mi >> 1), rows 8 (mi & 1) ...
    const unsigned g = 2 * q + (mi >> 1);
    stmatrix_x4(srow + ((g ^ r) << 4), pack_bf16(v[8 * q + 0], v[8 * q + 1]), pack_bf16(v[8 * q + 2], v[8 * q + 3]),
                pack_bf16(v[8 * q + 4], v[8 * q + 5]), pack_bf16(v[8 * q + 6], v[8 * q + 7]));
  }
  __syncwarp();
  const unsigned g = lane & 7, col = col0 + 8 * g;
  uint4 w[4];
#pragma unroll
  for (unsigned p = 0; p < 4; p++) {
    const unsigned row = 4 * p + (lane >> 3);
    if (S == 8 || g < S) w[p] = ld_shared_v4(stage + row * 128 + ((g ^ (row & 7)) << 4));
  }
  __syncwarp();  // the staging may be written again
#pragma unroll
  for (unsigned p = 0; p < 4; p++) {
    const unsigned row = row0 + 4 * p + (lane >> 3);
    if (row >= row_end || col >= a.n || (S < 8 && g >= S)) continue;
    unsigned short *dst = a.d + (unsigned long long)row * a.ldd + col;
    if (col + 8 <= a.n) {
      st_v4(dst, w[p]);
    } else {
      const unsigned e[4] = {w[p].x, w[p].y, w[p].z, w[p].w};
#pragma unroll
      for (unsigned i = 0; i < 8; i++)
        if (col + i < a.n) st_u16(dst + i, (unsigned short)(e[i / 2] >> (16 * (i & 1))));
    }
  }
}

__device__ __forceinline__ void store_tile_staged(const GemmArgs &a, const float *acc, unsigned stage, unsigned row0,
                                                  unsigned row_end, unsigned c_base, unsigned lane) {
#pragma unroll
  for (unsigned c = 0; c < BN / 64; c++) store_chunk<8>(a, stage, acc + 32 * c, row0, row_end, c_base + 64 * c, lane);
  if (BN % 64)  // the last, narrower chunk
    store_chunk<(BN % 64 ? BN % 64 : 64) / 8>(a, stage, acc + 32 * (BN / 64), row0, row_end, c_base + 64 * (BN / 64),
                                              lane);
}

// The warp's 16 x BN part of the tile into D transposed (GEMM_TRANS, Args.trans: the op swapped
// A and B, so the tile's row r and column c are D's column r and row c). A lane holds, per
// 8-column slice j, tile rows r0 and r0 + 8 at tile columns c and c + 1: four D elements, two
// on each of D's rows c and c + 1, 16 bytes apart. 2-byte stores: the eight lanes with the same lane % 4 write 8 consecutive
// bf16 of one D row, so each store instruction writes 16-byte runs of 4 rows (8 with r0 + 8).
// Rows of the tile at or past row_end and columns at or past n are not written.
__device__ __forceinline__ void store_tile_t(const GemmArgs &a, const float *acc, unsigned r0, unsigned row_end,
                                             unsigned c_base, unsigned lane) {
  const unsigned c0 = c_base + 2 * (lane & 3);
  const bool ok0 = r0 < row_end, ok1 = r0 + 8 < row_end;
  const unsigned long long ld = a.ldd;
  unsigned short *q = a.d + (unsigned long long)c0 * ld + r0;  // one pointer, stepped: the accumulators are live
#pragma unroll
  for (unsigned j = 0; j < BN / 8; j++, q += 8 * ld) {
    const unsigned c = c0 + 8 * j;
    const unsigned lo = pack_bf16(acc[4 * j], acc[4 * j + 2]), hi = pack_bf16(acc[4 * j + 1], acc[4 * j + 3]);
    if (c < a.n) {
      if (ok0) st_u16(q, (unsigned short)lo);
      if (ok1) st_u16(q + 8, (unsigned short)(lo >> 16));
    }
    if (c + 1 < a.n) {
      if (ok0) st_u16(q + ld, (unsigned short)hi);
      if (ok1) st_u16(q + ld + 8, (unsigned short)(hi >> 16));
    }
  }
}

// The epilogue of a whole tile: the bf16 output from the accumulators.
__device__ __forceinline__ void store_whole(const GemmArgs &a, const float *acc, unsigned stage, unsigned row0,
                                           unsigned r0, unsigned row_end, unsigned c_base, unsigned lane) {
  if (GEMM_TRANS)
    store_tile_t(a, acc, r0, row_end, c_base, lane);
  else if (staged_ok(a))
    store_tile_staged(a, acc, stage, row0, row_end, c_base, lane);
  else
    store_tile(a, acc, r0, row_end, c_base, lane);
}

// Stream-K's fix-up for one consumer warp (its 16 rows x BN of the CTA's tile; see the top
// of this file). Workspace slot layout: per (CTA rank, consumer warp) a region of BN/2 x 32
// floats, the lane's 4 floats of accumulator slice j (8 columns) at (j * 32 + lane) * 4, so
// every 16-byte access of the warp is contiguous. Only what lies in the problem moves: a warp
// whose rows are all past M takes no part (the same for every piece of the tile), a lane
// whose first row is past M stores and loads nothing, nor do slices past N.
constexpr unsigned REGION = BN / 2 * 32;  // floats per consumer warp
#ifndef GEMM_SK_G
#define GEMM_SK_G 8
#endif
constexpr unsigned SK_G = GEMM_SK_G;        // vectors in flight per lane in the fix-up's sum
constexpr unsigned long long SLOT = (unsigned long long)CM * NCW * REGION;

__device__ __forceinline__ uint2 epi_segment(unsigned stage);

// Returns whether this warp stored the tile's output (it was the last piece to arrive).
__device__ __forceinline__ bool sk_piece(const GemmArgs &a, const clcrt_sk &sk, unsigned pieces, float (&acc)[BN / 2],
                                         unsigned rank, unsigned warp, unsigned lane, unsigned stage, unsigned row0,
                                         unsigned r0, unsigned row_end, unsigned c_base) {
  if (row0 >= row_end) return false;
  const uint2 ts = epi_segment(stage);  // the shared tile (among the shared ones) and this piece's slot
  const unsigned tile = ts.x, slot = ts.y;
  const unsigned long long region = (unsigned long long)(rank * NCW + warp) * REGION + lane * 4;
  const bool live = r0 < row_end;
  float *mine = a.ws + slot * SLOT + region;
#pragma unroll
  for (unsigned j = 0; j < BN / 8; j++)
    if (live && c_base + 8 * j < a.n) st_f32x4(mine + j * 128, acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
  unsigned *ctr = a.ctr + ((unsigned long long)tile * CM + rank) * NCW + warp;
  if (!clcrt::sk_arrive_warp(ctr, pieces)) return false;
  // The last piece: the sum in piece order into the accumulators (their partial is in the
  // workspace like the others), 64 columns (8 slices) at a time, then the usual epilogue.
  // Slices (8 columns, one vector each) from N on were not stored; nor was anything of a lane
  // whose rows are past M.
  const unsigned slices = live ? min(BN / 8, (a.n - c_base + 7) / 8) : 0u;
  clcrt::sk_sum<BN / 8, SK_G>(sk, tile, clcrt_sk_first_unit(&sk, tile), pieces, a.ws + region, SLOT, 128, slices, acc);
  store_whole(a, acc, stage, row0, r0, row_end, c_base, lane);
  return true;
}

// Args.done: the warp has stored its 16 rows from row0 (those below row_end) of the tile's
// columns from c_base. Its lane 0 adds rows x columns to the counter of the 64 rows they lie
// in with a GPU-scope release: whoever on this GPU reads the counter with acquire semantics
// and finds it at rows x n then reads those rows complete. The __syncwarp orders the other
// lanes' stores before lane 0's release (the pattern of a CTA barrier before thread 0's
// release). GPU scope, not system scope: no system-scope fence per warp and tile in the
// epilogue; a consumer on a peer GPU goes through one on this GPU (as clcrt.tp does). Each
// (tile, warp) stores once per run, so every 64-row block's counter grows by its rows x n per
// run; the counter is never reset (consumers compare against a running target, modulo 2^32).
__device__ __forceinline__ void publish(const GemmArgs &a, unsigned row0, unsigned row_end, unsigned c_base) {
  if (a.done == nullptr || row0 >= row_end) return;
  __syncwarp();
  if ((threadIdx.x & 31) == 0) {
    const unsigned rows = min(16u, row_end - row0), cols = min(BN, a.n - c_base);
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(a.done + row0 / 64), "r"(rows * cols) : "memory");
  }
}

// Where a tile lies in the problem.
struct Where {
  unsigned a_row, b_row;     // first rows of the A and B boxes
  unsigned row_end, c_base;  // output rows [a_row, row_end) are written, columns from c_base
  bool valid, inside;        // a unit at all (grouped upper bound); a tile of the grid
};

__device__ __forceinline__ Where locate_grouped(unsigned unit, unsigned rank, const GemmArgs &a, const GemmState &s) {
  clcrt::GroupedMap map;
  const unsigned *p = (const unsigned *)smem_ptr(s.base + MAP_OFF);
  map.unit_start = p;
  map.row_start = p + a.groups + 1;
  map.groups = a.groups;
  map.bm = BM;
  map.cm = CM;
  map.un = a.tn;
  map.swizzle = a.swizzle;
  map.along_n = a.along_n != 0;
  map.row_stride = a.group_rows;
  const clcrt::GroupTile g = clcrt::grouped_map_find(map, unit, rank);
  Where w;
  w.valid = g.valid;
  w.inside = g.inside;
  w.a_row = g.row0 + g.m * BM;
  w.b_row = g.group * a.n + g.n * BN;  // the weights are stacked: group g's rows start at g * N
  w.row_end = min(g.row0 + g.rows, a.m);
  w.c_base = g.n * BN;
  return w;
}

// A dense tile: work tile `tile` of the swizzled raster over the clusters' units.
__device__ __forceinline__ Where locate_dense(unsigned tile, unsigned rank, const GemmArgs &a) {
  clcrt::TileMap2D map(a.tm, a.tn, a.swizzle, a.along_n != 0, CM, 1);
  const clcrt::TileCoord c = map.get(tile, rank);
  Where w;
  w.valid = true;
  w.inside = c.inside;
  w.a_row = c.m * BM;
  w.b_row = c.n * BN;
  w.row_end = a.m;
  w.c_base = c.n * BN;
  return w;
}

// The stream-K decomposition of a dense problem over the clusters' units (the op made it
// valid with clcrt_sk_make).
__device__ __forceinline__ clcrt_sk dense_sk(const GemmArgs &a) {
  clcrt_sk sk;
  sk.tiles = (a.tm + CM - 1) / CM * a.tn;
  sk.iters = a.nk;
  sk.sk_tiles = a.sk_tiles;
  sk.sk_units = a.sk_units;
  sk.tail = a.sk_tail;
  return sk;
}

__device__ __forceinline__ unsigned cta_rank() {
  if (CM == 1) return 0;
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// What a consumer warp's epilogue needs of its tile, found before the mainloop (where the
// accumulators are not live yet) and parked in the warp's staging memory, which is idle until
// the epilogue, then read back: the place of the tile and its stream-K segment right after
// the mainloop, the segment loop's own counters (16 bytes past the staging) after the
// epilogue. So nothing but the ring position is live across the mainloop and the epilogue
// next to the 128 accumulators (the kernel is at its 168-register cap there). Only the warp's
// own lanes touch its staging, so __syncwarp orders it (the epilogue's last use of the
// staging ended with one).
struct Epi {
  unsigned a_row, row_end, c_base, inside;  // Where
  unsigned pieces;                          // of the stream-K segment's tile (1: a whole tile)
};

__device__ __forceinline__ void st_shared_v4(unsigned addr, unsigned x, unsigned y, unsigned z, unsigned w) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}

__device__ __forceinline__ void epi_park(unsigned stage, const Where &w, unsigned tile, unsigned pieces, unsigned slot,
                                         unsigned seg, unsigned segs, unsigned unit) {
  if ((threadIdx.x & 31) == 0) {
    st_shared_v4(stage, w.a_row, w.row_end, w.c_base, (unsigned)w.inside);
    st_shared_v4(stage + 16, tile, slot, pieces, 0u);
    st_shared_v4(stage + EPI_LOOP, seg, segs, unit, 0u);
  }
  __syncwarp();
}

// The tile's place and its segment's pieces; a piece of a shared tile reads its tile and
// slot later (epi_segment), before anything writes the staging (sk_arrive_warp's __syncwarp
// comes between).
__device__ __forceinline__ Epi epi_fetch(unsigned stage) {
  const uint4 x = ld_shared_v4(stage);
  unsigned pieces;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(pieces) : "r"(stage + 24) : "memory");
  __syncwarp();  // every lane has read them before the epilogue writes the staging
  Epi e;
  e.a_row = x.x, e.row_end = x.y, e.c_base = x.z, e.inside = x.w;
  e.pieces = pieces;
  return e;
}
// Parked at stage + 16: the tile's index among the shared ones, the piece's slot, then the
// tile's pieces.
__device__ __forceinline__ uint2 epi_segment(unsigned stage) {
  uint2 v;
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(stage + 16) : "memory");
  return v;
}

__device__ __forceinline__ void run_grouped(const clcrt::Tile &t, const GemmArgs &a, GemmState &s) {
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Where w = locate_grouped(t.unit, t.cta_rank, a, s);
  if (!w.valid) return;  // past the total: the launch was an upper bound
  if (warp == NCW) {
    produce(a, s, w.a_row, w.b_row, 0, a.nk, t.cta_rank, 0);
    return;
  }
  const unsigned wg = warp >> 2, stage = s.base + EPI_OFF + warp * EPI_STRIDE;
  epi_park(stage, w, 0, 1, 0, 0, 1, t.unit);
  float acc[BN / 2];  // zeroed: see run_dense
#pragma unroll
  for (unsigned q = 0; q < BN / 2; q++) acc[q] = 0.0f;
  consume(s, acc, wg, 0, a.nk, w.inside && w.a_row + wg * 64 < w.row_end);
  const Epi e = epi_fetch(stage);
  if (!e.inside) return;
  const unsigned row0 = e.a_row + wg * 64 + (warp & 3) * 16;
  store_whole(a, acc, stage, row0, row0 + lane / 4, e.row_end, e.c_base, lane);
}

// A dense unit: its segments (one whole tile, or pieces of the shared tiles) one after
// another through the ring.
__device__ __forceinline__ void run_dense(const clcrt::Tile &t, const GemmArgs &a, GemmState &s) {
  const unsigned warp = threadIdx.x >> 5;
  unsigned unit = t.unit, segs;
  {
    const clcrt_sk sk = dense_sk(a);
    segs = clcrt_sk_segments(&sk, unit);
  }
#pragma unroll 1
  for (unsigned i = 0; i < segs; i++) {
    // The decomposition read from the parameters again in every iteration (the opaque copy
    // keeps the compiler from holding it in registers across the mainloop).
    clcrt_sk sk = dense_sk(a);
    asm volatile("" : "+r"(sk.tiles), "+r"(sk.iters), "+r"(sk.sk_tiles), "+r"(sk.sk_units), "+r"(sk.tail));
    const clcrt_sk_seg g = clcrt_sk_segment(&sk, unit, i);
    const Where w = locate_dense(g.tile, t.cta_rank, a);
    if (warp == NCW) {
      produce(a, s, w.a_row, w.b_row, g.k0, g.k1, t.cta_rank, a.n);
      continue;
    }
    epi_park(s.base + EPI_OFF + warp * EPI_STRIDE, w, g.shared, g.pieces, g.slot, i, segs, unit);
    // Zeroed (the first wgmma ignores it) so that the array is not live around the loops'
    // back edges (this one's and the scheduler's): otherwise every register it holds is taken
    // all the way round, and the kernel, at its 168-register cap, spills.
    float acc[BN / 2];
#pragma unroll
    for (unsigned q = 0; q < BN / 2; q++) acc[q] = 0.0f;
    consume(s, acc, warp >> 2, g.k0, g.k1, true, a.ashift);
    const unsigned wq = threadIdx.x >> 5, lane = threadIdx.x & 31, stage = s.base + EPI_OFF + wq * EPI_STRIDE;
    const Epi e = epi_fetch(stage);
    if (e.inside) {
      const unsigned row0 = e.a_row + (wq >> 2) * 64 + (wq & 3) * 16, r0 = row0 + lane / 4;
      bool stored = true;
      if (e.pieces == 1)
        store_whole(a, acc, stage, row0, r0, e.row_end, e.c_base, lane);
      else
        stored = sk_piece(a, dense_sk(a), e.pieces, acc, cta_rank(), wq, lane, stage, row0, r0, e.row_end, e.c_base);
      if (stored) publish(a, row0, e.row_end, e.c_base);
    }
    const uint4 l = ld_shared_v4(stage + EPI_LOOP);
    i = l.x, segs = l.y, unit = l.z;
  }
}

__device__ __forceinline__ void prologue(const GemmArgs &a, GemmState &s) {
  if (blockDim.x * blockDim.y * blockDim.z != THREADS) __trap();  // desc.block must be THREADS
  if (a.trans != GEMM_TRANS) __trap();  // Args of the other orientation: the output would be D's transpose
  // A's boxes apart from B's: exactly the A-shift kernels' runs, whole 16-byte pieces.
  if ((a.ashift != 0) != ASHIFT || a.ashift % 8 || a.ashift >= BK) __trap();
  const unsigned raw = smem_u32(clcrt::smem());
  s.base = (raw + 1023u) & ~1023u;  // 128B-swizzled TMA tiles and wgmma want 1024-byte atoms
  s.stage = 0;
  s.phase = 0;
  if (threadIdx.x == 0) {
    for (unsigned i = 0; i < STAGES; i++) {
      mbar_init(full_bar(s, i), 1);
      mbar_init(empty_bar(s, i), NWG * CM);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (threadIdx.x == NCW * 32) {
    tma_prefetch(&a.a);
    tma_prefetch(&a.b);
  }
}

// The barriers (and, grouped, the map) must be ready in every CTA of the cluster before any
// CTA loads into or arrives on them.
__device__ __forceinline__ void prologue_sync() {
  if (CM > 1)
    cluster_sync();
  else
    __syncthreads();
}

}  // namespace gemm

// ---- dense -----------------------------------------------------------------------------------

__device__ void gemm_prologue(const GemmArgs &a, GemmState &s) {
  gemm::prologue(a, s);
  gemm::prologue_sync();
}

__device__ void gemm_tile(const clcrt::Tile &t, const GemmArgs &a, GemmState &s) { gemm::run_dense(t, a, s); }

// ---- grouped -----------------------------------------------------------------------------------

__device__ void gemm_grouped_prologue(const GemmArgs &a, GemmState &s) {
  if (gemm::ASHIFT) __trap();  // a dense kernel's option only
  gemm::prologue(a, s);
  if (a.groups > GEMM_MAX_GROUPS) __trap();  // the host checks this; the map would not fit
  // Synchronises the CTA; the cluster barrier below then covers the peer's barriers.
  // Counts that do not fit are cut to the buffer of a.m rows (groups one after another) or to
  // group_rows (the masked layout) and reported through a.misuse: no tile reaches past A or D.
  clcrt::grouped_map_build(a.group_sizes, a.groups, gemm::BM, a.tn, a.swizzle, a.along_n != 0,
                           gemm::smem_ptr(s.base + gemm::MAP_OFF), gemm::CM, a.group_rows,
                           a.group_rows ? 0u : a.m, a.misuse);
  if (gemm::CM > 1) gemm::cluster_sync();
}

__device__ void gemm_grouped_tile(const clcrt::Tile &t, const GemmArgs &a, GemmState &s) {
  gemm::run_grouped(t, a, s);
}
