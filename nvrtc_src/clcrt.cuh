// clcrt device-side scheduler template. Embedded into libclcrt at build time and compiled
// by NVRTC together with the user's tile function; never read from disk at run time. The
// generated translation unit includes this file, then the tile function, then an entry that
// calls clcrt::run<> (runtime/compile/compile.c).
//
// Self-contained on purpose: inline PTX only, no <cuda/ptx> and no cooperative groups,
// which cost 100+ ms of NVRTC time on every cold compile.
//
// One tile loop, four schedulers behind one interface, as CUTLASS keeps its tile schedulers:
//   FIXED   one unit per launched cluster: its own (clcrt_fixed.cuh)
//   STATIC  persistent grid: its own unit, then += number of clusters (clcrt_static.cuh)
//   STEAL   software, sm_90+: the cluster's leader claims runs of units with an atomic and
//           publishes them to its cluster (clcrt_steal.cuh)
//   CLC     hardware, sm_100+: the cluster's own unit, then clusters canceled with
//           clusterlaunchcontrol.try_cancel (clcrt_clc.cuh)
// The files, in the order they are included:
//   clcrt_abi.h       the ABI with the runtime: Params, the layout of the scheduler's state
//                     in device memory, the variant bits
//   clcrt_ptx.cuh     inline PTX wrappers
//   (here)            what a tile function sees: Tile, smem()
//   clcrt_cta.cuh     what every scheduler has: the CTA's place in its cluster, work units
//   clcrt_ring.cuh    the response ring STEAL and CLC share: the protocol and its invariants
//   clcrt_variant.cuh the variant features: graph claims, yielding, trace, statistics
//   clcrt_steal.cuh, clcrt_clc.cuh, clcrt_static.cuh, clcrt_fixed.cuh   the schedulers
//   clcrt_loop.cuh    the tile loop, which names no scheduler, and the entry run<>
// clcrt_tilemap.cuh (tile index -> problem coordinates) is not included: a tile function
// includes it when it wants it.
#pragma once
#include "clcrt_abi.h"
#include "clcrt_ptx.cuh"

namespace clcrt {

struct Tile {
  uint3 coord;               // the tile's coordinate in the tile grid
  unsigned long long linear; // coord.x + tiles.x * (coord.y + tiles.y * coord.z)
  unsigned cta_rank;         // this CTA's rank in its cluster
  unsigned unit;             // the work unit (cluster-shaped block of tiles) it belongs to
  unsigned iteration;        // how many units this CTA ran before this one
};

// The dynamic shared memory the tile function may use (smem_bytes of the descriptor).
__device__ __forceinline__ void *smem() {
  extern __shared__ __align__(128) unsigned char clcrt__dyn_smem[];
  return clcrt__dyn_smem;
}

// The scheduler parameters every kernel takes after Args (clcrt_abi.h: clcrt__params).
typedef ::clcrt__params Params;

}  // namespace clcrt

#include "clcrt_cta.cuh"
#include "clcrt_ring.cuh"
#include "clcrt_variant.cuh"
#include "clcrt_steal.cuh"
#include "clcrt_clc.cuh"
#include "clcrt_static.cuh"
#include "clcrt_fixed.cuh"
#include "clcrt_loop.cuh"
