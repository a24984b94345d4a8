// clcrt device template: what every scheduler has. The CTA's place in its cluster, the run's
// work units and their coordinates, and a cluster's own unit; each scheduler
// (clcrt_steal.cuh, clcrt_clc.cuh, clcrt_static.cuh, clcrt_fixed.cuh) derives from Cta.
//
// A work unit is one cluster-shaped block of tiles: unit u names cluster position
// (u % UX, u / UX % UY, u / (UX*UY)) in the tile grid padded up to a multiple of the cluster
// shape (UX, UY, UZ: clcrt__params.units); each CTA of the cluster takes the tile at that
// position plus its own coordinate in the cluster, and padded tiles are skipped. Schedulers
// hand out runs of consecutive units [start, start + count) as a uint2 {start, count}; a
// count of 0 means the cluster has no more work.
#pragma once

namespace clcrt {

// n / d for n < 2^31, with (mul, shr) from the host (runtime/launch/launch.c fastdiv): mul 0
// means d == 1.
__device__ __forceinline__ unsigned fastdiv(unsigned n, unsigned mul, unsigned shr) {
  return mul ? ptx::umulhi(n, mul) >> shr : n;
}

struct Ring;  // the response ring's shared memory: clcrt_ring.cuh

// CX, CY, CZ: the cluster shape; NTHREADS: threads per CTA; V: the variant (CLCRT_USE_* bits).
template <unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, unsigned V>
struct Cta {
  // Enumerators, not static constexpr members: NVRTC emits each of those as a global
  // variable in every cubin (a relocation and a load-time allocation apiece).
  enum : unsigned { CS = CX * CY * CZ, NWARPS = (NTHREADS + 31) / 32, LEADER_TID = (NWARPS - 1) * 32 };
  // The observed variant records the timeline trace and the statistics when a run asks for
  // them; a kernel compiled without has no code for them at all (their mere presence cost
  // FIXED about 8% on the README demo and 9-11% on short runs on the H100).
  enum : bool { USE_TRACE = (V & CLCRT_USE_TRACE) != 0 };
  // What the tile loop (clcrt_loop.cuh) asks of a scheduler besides its operations; a
  // scheduler redefines those that differ. RING: work comes as responses through the
  // response ring (clcrt_ring.cuh). ONE_UNIT: one cluster per unit, no loop. MAY_END: the
  // cluster may end after a pass of the loop without another response (done()).
  // LEADER_CLAIMS: the cluster's leader claims its units at the top of a pass (receive()).
  enum : bool { RING = false, ONE_UNIT = false, MAY_END = false, LEADER_CLAIMS = false };

  // The fields in the order of the one-class template this replaced: the optimiser's output
  // depends on it (the order of the values it makes of them), and the cubins must not
  // change (scripts/compare_cubins.sh).
  const Params &p;
  Ring *ring;        // the response ring (clcrt_ring.cuh) where the scheduler has one, else null
  unsigned rbase;    // ring's shared-memory address
  unsigned tid, rank;
  uint3 rcoord;      // this CTA's coordinate in its cluster
  unsigned k;        // responses consumed so far by this CTA
  unsigned units_run;  // units this CTA ran so far (Tile.iteration)
  // The one thread of the cluster that makes requests: lane 0 of the last warp of the
  // cluster's rank-0 CTA, so that a producer warp placed last in a warp-specialised tile
  // function claims the next tile as soon as it has issued the current one's loads.
  bool leader;
  bool leader_warp;  // its warp (the same for every lane: a uniform branch skips the leader's work)

  __device__ __forceinline__ Cta(const Params &params, Ring *r) : p(params), ring(r), k(0), units_run(0) {
    rbase = r ? ptx::smem_addr(r) : 0;
    tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    if (CS > 1) {
      rank = ptx::sreg_cluster_ctarank();
      rcoord = ptx::sreg_cluster_ctaid();
    } else {
      rank = 0;
      rcoord = make_uint3(0, 0, 0);
    }
    leader = rank == 0 && tid == LEADER_TID;
    leader_warp = rank == 0 && tid / 32 == NWARPS - 1;
  }

  __device__ __forceinline__ unsigned cluster_id() const { return CS > 1 ? ptx::sreg_clusterid_x() : blockIdx.x; }
  // The lanes of this thread's warp: a block whose size is not a multiple of 32 has a
  // partial last warp.
  __device__ __forceinline__ unsigned warp_mask() const {
    return NTHREADS % 32 == 0 || tid / 32 < NWARPS - 1 ? 0xffffffffu : (1u << (NTHREADS % 32)) - 1u;
  }
  __device__ __forceinline__ bool thread0() const { return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0; }

  // The first run of units of a cluster that makes no request for it: its own unit.
  __device__ __forceinline__ uint2 own() const {
    unsigned own = cluster_id();
    return make_uint2(own, own < p.num_units ? 1u : 0u);
  }

  // Unit u's coordinate in the grid of units. No branch for 1-D grids: the general
  // decomposition costs a few multiplications, less than the instructions a branch's
  // predicated other side issues anyway.
  __device__ __forceinline__ void decompose(unsigned u, unsigned &ux, unsigned &uy, unsigned &uz) const {
    unsigned t = fastdiv(u, p.div1_mul, p.div1_shr);
    ux = u - t * p.units[0];
    uz = fastdiv(t, p.div2_mul, p.div2_shr);
    uy = t - uz * p.units[1];
  }

  // This CTA's tile of the unit at unit coordinate (ux, uy, uz).
  __device__ __forceinline__ uint3 tile_coord(unsigned ux, unsigned uy, unsigned uz) const {
    return make_uint3(ux * CX + rcoord.x, uy * CY + rcoord.y, uz * CZ + rcoord.z);
  }

  // One cluster per unit: the unit this cluster was launched for. Launched as a 3-D grid of
  // units where it fits (CLCRT__PF_GRID3), the unit's coordinate is the cluster's, with no
  // division, as in a hand-written kernel; else along x (y and z of the cluster's coordinate
  // are 0 there), its coordinate decomposed. The unit's index comes from the launch's
  // geometry alone, never waiting for a parameter: a 1-CTA tile function that reads only
  // Tile.linear issues its first load as soon as a hand-written kernel would (waiting for
  // the flag word first, as this did, cost 0.18 us per short run on the H100).
  __device__ __forceinline__ unsigned launched_unit(unsigned &ux, unsigned &uy, unsigned &uz) const {
    const uint3 c = CS > 1 ? ptx::sreg_clusterid() : blockIdx;
    const uint3 n = CS > 1 ? ptx::sreg_nclusterid() : make_uint3(gridDim.x, gridDim.y, gridDim.z);
    // On a grid along x (the usual 1-D tile grid) without the multiplications: 2% of a short
    // run's time on the H100 against computing them always.
    const unsigned u = (c.y | c.z) ? c.x + n.x * (c.y + n.y * c.z) : c.x;
    if (p.flags & CLCRT__PF_GRID3)
      ux = c.x, uy = c.y, uz = c.z;
    else
      decompose(u, ux, uy, uz);
    return u;
  }

  // The tile loop's operations (clcrt_loop.cuh) where a scheduler has nothing to do; those
  // the loop calls only where a trait says must still compile.
  __device__ __forceinline__ unsigned loop_bits() const { return 0u; }
  __device__ __forceinline__ bool own_first() const { return true; }
  __device__ __forceinline__ void receive(uint2 &) {}
  __device__ __forceinline__ void request(const uint2 &, uint2 &) {}
  __device__ __forceinline__ void retire(const uint2 &, const uint2 &) {}
  __device__ __forceinline__ bool done(unsigned) const { return false; }
  __device__ __forceinline__ void advance(uint2 &) {}

  // Where a traced tile's start time is kept while the tile function runs: here, a
  // register; schedulers with a ring keep it in shared memory (clcrt_ring.cuh).
  __device__ __forceinline__ void keep_t0(unsigned long long) {}
  __device__ __forceinline__ unsigned long long kept_t0(unsigned long long t0) const { return t0; }

  // No CTA of a cluster leaves while another may still reach into its shared memory: the
  // scheduler's barriers, and whatever the tile function shares across the cluster (a
  // pipeline's barriers, multicast loads), under every scheduler.
  __device__ __forceinline__ void leave() const {
    if (CS > 1) ptx::cluster_sync();
  }
};

}  // namespace clcrt
