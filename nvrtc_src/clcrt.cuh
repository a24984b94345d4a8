// clcrt device-side scheduler template. Embedded into libclcrt at build time and compiled
// by NVRTC together with the user's tile function; never read from disk at run time.
//
// Self-contained on purpose: inline PTX only, no <cuda/ptx> and no cooperative groups,
// which cost 100+ ms of NVRTC time on every cold compile.
//
// One loop, four sources of work units. A work unit is one cluster-shaped block of tiles:
// unit u names cluster position (u % UX, u / UX % UY, u / (UX*UY)) in the tile grid padded
// up to a multiple of the cluster shape; each CTA of the cluster takes the tile at that
// position plus its own coordinate in the cluster, and padded tiles are skipped.
//
//   FIXED   one unit per launched cluster: u = %clusterid.x
//   STATIC  persistent grid: u = %clusterid.x, then u += %nclusterid.x
//   STEAL   software: the cluster's leader claims u from the stream's counter with an
//           atomic and writes the 16-byte response into every CTA of its cluster with
//           st.async ... mbarrier::complete_tx::bytes
//   CLC     hardware (sm_100+): the first unit is the cluster's own; the next ones come
//           from clusterlaunchcontrol.try_cancel ... multicast::cluster::all
//
// STEAL and CLC share one protocol over a ring of two response slots per CTA:
//   full[s]   per CTA, arrival count 1: armed by the CTA itself (arrive.expect_tx 16) one
//             use ahead, completed by the 16 response bytes;
//   empty[s]  in the leader CTA (rank 0), one arrival per warp of the cluster: lane 0 of
//             a warp reads slot s (one 128-bit load), fences generic->async proxy, arrives,
//             and broadcasts the unit to its warp; the leader waits on empty[s] (and fences
//             too) before the next request may write slot s again.
// So the next request overwrites a slot only after every warp of the cluster read it, and
// no cluster-wide barrier is needed per tile; the CTAs of a cluster drift by at most one
// tile. Every warp reads the same slot for the same request, so all see the same failure.
// After a failed request no thread issues another.
#pragma once

// How far ahead a STEAL cluster claims (compile with -DCLCRT_STEAL_AHEAD=n to choose):
//   0  the next unit is claimed when the current one ends: nothing is held back from other
//      clusters, and the claim's latency is exposed once per unit (other CTAs on the SM
//      hide it);
//   1  claimed before the current unit runs, published after it: one unit held back;
//   2  claimed one unit earlier still and published before the current unit runs: the
//      response is always waiting, two units held back.
// The default, chosen from the benchmark on the H100 (README, "Measured results"), is 0
// for 1-CTA clusters (many resident CTAs per SM hide the claim, and holding nothing back
// balances unequal tiles best: 0.956x one-block-per-tile on the skewed mix against 0.879x
// with 1) and 1 for larger clusters (the broadcast to several CTAs is slower: 1.001x
// against 0.967x on 4 KiB tiles with 2-CTA clusters).
#ifndef CLCRT_STEAL_AHEAD
#define CLCRT_STEAL_AHEAD (-1)
#endif

namespace clcrt {

struct Tile {
  uint3 coord;               // the tile's coordinate in the tile grid
  unsigned long long linear; // coord.x + tiles.x * (coord.y + tiles.y * coord.z)
  unsigned cta_rank;         // this CTA's rank in its cluster
  unsigned unit;             // the work unit (cluster-shaped block of tiles) it belongs to
  unsigned iteration;        // how many units this CTA ran before this one
};

// Scheduler parameters: mirrored by struct clcrt__params in runtime/launch.h, checked by
// size at load time (cuFuncGetParamInfo).
struct Params {
  unsigned tiles[3];         // the tile grid
  unsigned units[3];         // ceil(tiles / cluster)
  unsigned num_units;        // units[0] * units[1] * units[2]
  unsigned num_clusters;     // clusters launched
  unsigned *counter;         // STEAL: [0] next unit to claim, [1] clusters finished
  unsigned long long *stats; // optional: [0] tiles, [1] steals, [2] clusters, [3] max units per cluster, [4+sm] tiles per SM
  void *trace;
  unsigned long long *yield;
  unsigned seq, run, shards, max_chunk, prio, flags;
};

enum { SCHED_CLC = 1, SCHED_STEAL = 2, SCHED_STATIC = 3, SCHED_FIXED = 4 };
enum : unsigned { NONE = 0xffffffffu };

namespace ptx {

__device__ __forceinline__ unsigned smem_addr(const void *p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
__device__ __forceinline__ unsigned sreg_cluster_ctarank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint3 sreg_cluster_ctaid() {
  uint3 r;
  asm("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(r.x));
  asm("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(r.y));
  asm("mov.u32 %0, %%cluster_ctaid.z;" : "=r"(r.z));
  return r;
}
__device__ __forceinline__ unsigned sreg_clusterid_x() {
  unsigned r;
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned sreg_nclusterid_x() {
  unsigned r;
  asm("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned sreg_smid() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}
// The address of the same shared-memory variable in the CTA of rank `rank`.
__device__ __forceinline__ unsigned mapa(unsigned addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits for the phase of parity `parity` to complete (acquire, CTA scope).
__device__ __forceinline__ void wait_parity(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "W%=:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t@!p bra W%=;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// Arrive on an mbarrier in any CTA of the cluster (address from mapa). Default semantics
// (release, CTA scope), as CUTLASS's ClusterBarrier does for consumer releases: a
// cluster-scope release compiles to MEMBAR.ALL.GPU, which we must not pay per tile. The
// arrive only has to order this warp's earlier reads of the slot before the leader's next
// write into it, and the proxy fence before it orders them against the async proxy.
__device__ __forceinline__ void arrive_remote(unsigned cluster_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(cluster_bar) : "memory");
}
__device__ __forceinline__ void st_shared_v4(unsigned addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void arrive_local(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Orders this thread's generic-proxy accesses to shared memory before later async-proxy
// writes (st.async, try_cancel) to it.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ uint4 ld_shared_v4(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
// Writes 16 bytes into the shared memory of a CTA of the cluster and completes 16 bytes of
// transaction on that CTA's mbarrier.
__device__ __forceinline__ void st_async_v4(unsigned cluster_addr, uint4 v, unsigned cluster_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                   cluster_addr),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(cluster_bar)
               : "memory");
}
__device__ __forceinline__ unsigned ld_relaxed_gpu(const unsigned *p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned atom_add_relaxed_gpu(unsigned *p, unsigned v) {
  unsigned r;
  asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
  return r;
}
__device__ __forceinline__ unsigned atom_add_acq_rel_gpu(unsigned *p, unsigned v) {
  unsigned r;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
  return r;
}
__device__ __forceinline__ void st_relaxed_gpu(unsigned *p, unsigned v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
// Cancels a cluster that has not started; the 16-byte response lands in the same slot of
// every CTA of the cluster and completes each CTA's own mbarrier.
__device__ __forceinline__ void clc_try_cancel_multicast(unsigned slot, unsigned bar) {
  asm volatile(
      "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 "
      "[%0], [%1];" ::"r"(slot),
      "r"(bar)
      : "memory");
}
__device__ __forceinline__ void clc_try_cancel(unsigned slot, unsigned bar) {
  asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];" ::"r"(
                   slot),
               "r"(bar)
               : "memory");
}
// Decodes a response: the x ctaid of the canceled cluster's first CTA, or NONE.
__device__ __forceinline__ unsigned clc_first_ctaid_x(uint4 r) {
  unsigned ok, x;
  asm volatile(
      "{\n\t.reg .b128 resp;\n\t.reg .pred p;\n\t"
      "mov.b128 resp, {%2, %3, %4, %5};\n\t"
      "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, resp;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t"
      "@p clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %1, resp;\n}"
      : "=r"(ok), "=r"(x)
      : "r"(r.x), "r"(r.y), "r"(r.z), "r"(r.w));
  return ok ? x : NONE;
}
#endif
}  // namespace ptx

// The response ring of one CTA (see the protocol at the top of this file).
struct Ring {
  uint4 slot[2];
  unsigned long long full[2];
  unsigned long long empty[2];
};

template <int SCHED, unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS>
struct Scheduler {
  static constexpr unsigned CS = CX * CY * CZ;
  static constexpr unsigned NWARPS = (NTHREADS + 31) / 32;
  static constexpr bool REQUESTS = SCHED == SCHED_STEAL || SCHED == SCHED_CLC;
  // Whether responses arrive as async-proxy transactions (st.async, try_cancel). A 1-CTA
  // STEAL kernel is launched without a cluster, where st.async is not allowed: its leader
  // writes the slot with an ordinary store and a release-arrive on the full barrier.
  static constexpr bool TX = !(SCHED == SCHED_STEAL && CS == 1);
  static constexpr int AHEAD = CLCRT_STEAL_AHEAD >= 0 ? CLCRT_STEAL_AHEAD : (CS == 1 ? 0 : 1);

  const Params &p;
  Ring *ring;
  unsigned tid, rank;
  uint3 rcoord;      // this CTA's coordinate in its cluster
  unsigned k;        // requests consumed so far by this CTA
  unsigned pending;  // STEAL leader: the claim to publish as the next response
  unsigned units_run;
  bool leader;       // the one thread of the cluster that makes requests

  __device__ __forceinline__ Scheduler(const Params &params, Ring *r) : p(params), ring(r), k(0), pending(NONE), units_run(0) {
    tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    if (CS > 1) {
      rank = ptx::sreg_cluster_ctarank();
      rcoord = ptx::sreg_cluster_ctaid();
    } else {
      rank = 0;
      rcoord = make_uint3(0, 0, 0);
    }
    leader = rank == 0 && tid == 0;
  }

  __device__ __forceinline__ unsigned slot_addr(unsigned s) const { return ptx::smem_addr(&ring->slot[s]); }
  __device__ __forceinline__ unsigned full_addr(unsigned s) const { return ptx::smem_addr(&ring->full[s]); }
  __device__ __forceinline__ unsigned empty_addr(unsigned s) const { return ptx::smem_addr(&ring->empty[s]); }

  // Barriers initialised and both slots' first phases armed in every CTA before any
  // request can be made: a cluster barrier orders it.
  __device__ __forceinline__ void init() {
    if (!REQUESTS) return;
    if (tid == 0) {
      ptx::mbar_init(full_addr(0), 1);
      ptx::mbar_init(full_addr(1), 1);
      if (rank == 0) {
        ptx::mbar_init(empty_addr(0), CS * NWARPS);
        ptx::mbar_init(empty_addr(1), CS * NWARPS);
      }
      ptx::fence_mbar_init();
      if (TX) {
        ptx::arrive_expect_tx(full_addr(0), 16);
        ptx::arrive_expect_tx(full_addr(1), 16);
      }
    }
    if (CS > 1)
      ptx::cluster_sync();
    else
      __syncthreads();
  }

  // The last CTA of a cluster must not leave while others may still arrive on its
  // barriers; and the last cluster to finish restores the stream's counter, so a run
  // needs no memset before it.
  __device__ __forceinline__ void finish() {
    if (SCHED == SCHED_STEAL && leader) {
      unsigned done = ptx::atom_add_acq_rel_gpu(&p.counter[1], 1);
      if (done == p.num_clusters - 1) {
        ptx::st_relaxed_gpu(&p.counter[0], 0);
        ptx::st_relaxed_gpu(&p.counter[1], 0);
      }
    }
    if (REQUESTS && CS > 1) ptx::cluster_sync();
  }

  // STEAL: the leader publishes response number n (the claim `u`) to every CTA.
  __device__ __forceinline__ void publish(unsigned n, unsigned u) {
    unsigned s = n & 1;
    if (n >= 2) ptx::wait_parity(empty_addr(s), ((n >> 1) - 1) & 1);
    uint4 v = make_uint4(u, 0, 0, 0);
    if (!TX) {
      ptx::st_shared_v4(slot_addr(s), v);
      ptx::arrive_local(full_addr(s));  // release: the store is seen by whoever waits
      return;
    }
    // The slot was read through the generic proxy; order those reads (acquired through the
    // empty barrier) before this async-proxy write.
    ptx::fence_proxy_async();
#pragma unroll
    for (unsigned r = 0; r < CS; r++)
      ptx::st_async_v4(ptx::mapa(slot_addr(s), r), v, ptx::mapa(full_addr(s), r));
  }

  __device__ __forceinline__ unsigned claim(bool first) {
    // A cluster that starts after the work is gone leaves without an atomic on the
    // shared counter (full grids launch many such clusters).
    if (first && ptx::ld_relaxed_gpu(&p.counter[0]) >= p.num_units) return NONE;
    unsigned u = ptx::atom_add_relaxed_gpu(&p.counter[0], 1);
    return u < p.num_units ? u : NONE;
  }

  // Reads response number k from this CTA's ring and hands the slot back. Lane 0 of each
  // warp reads the 16 bytes with one 128-bit load after its CTA's barrier completed and
  // broadcasts the decoded unit, so all lanes of all warps decode the same response.
  __device__ __forceinline__ unsigned consume() {
    unsigned s = k & 1, u = 0;
    if ((tid & 31) == 0) {
      ptx::wait_parity(full_addr(s), (k >> 1) & 1);
      uint4 v = ptx::ld_shared_v4(slot_addr(s));
      // The next write into this slot comes through the async proxy (st.async from the
      // leader, or try_cancel): order this generic read before it. Without this fence the
      // benchmark's check caught a response overwritten before it was read (2-CTA clusters).
      if (TX) ptx::fence_proxy_async();
      if (TX && tid == 0) ptx::arrive_expect_tx(full_addr(s), 16);  // arm the slot's next use
      if (CS > 1)
        ptx::arrive_remote(ptx::mapa(empty_addr(s), 0));
      else
        ptx::arrive_local(empty_addr(s));
      // A STEAL response is {unit, 0, 0, 0}; summing the words keeps the load one 128-bit
      // LDS (ptxas narrows it to 32 bits when only .x is used).
      u = v.x + v.y + v.z + v.w;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
      if (SCHED == SCHED_CLC) {
        unsigned x = ptx::clc_first_ctaid_x(v);
        u = x == NONE ? NONE : x / CX;
      }
#endif
    }
    k++;
    return __shfl_sync(0xffffffffu, u, 0);
  }

  // The first unit of this cluster. STEAL: the leader claims it and publishes it (with
  // look-ahead 2, it makes the next claim at once).
  __device__ __forceinline__ unsigned first() {
    if (SCHED == SCHED_STEAL) {
      if (leader) {
        unsigned c = claim(true);
        publish(0, c);
        if (AHEAD >= 2) pending = c != NONE ? claim(false) : NONE;
      }
      return consume();
    }
    return CS > 1 ? ptx::sreg_clusterid_x() : blockIdx.x;  // CLC, STATIC, FIXED: the cluster's own position
  }

  // Called before the current unit runs. STEAL with look-ahead 2 publishes the claim made
  // one unit ago and makes the next; with 1 it makes the claim that next() publishes; a
  // claim is never made after a failed one (the current unit is valid here). CLC issues
  // the hardware request, whose latency hides behind the unit.
  __device__ __forceinline__ void request_next() {
    if (!leader) return;
    if (SCHED == SCHED_STEAL && AHEAD >= 2) {
      unsigned c = pending;
      publish(k, c);
      pending = c != NONE ? claim(false) : NONE;
    }
    if (SCHED == SCHED_STEAL && AHEAD == 1) pending = claim(false);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
    if (SCHED == SCHED_CLC) {
      unsigned s = k & 1;
      if (k >= 2) ptx::wait_parity(empty_addr(s), ((k >> 1) - 1) & 1);
      ptx::fence_proxy_async();
      if (CS > 1)
        ptx::clc_try_cancel_multicast(slot_addr(s), full_addr(s));
      else
        ptx::clc_try_cancel(slot_addr(s), full_addr(s));
    }
#endif
  }

  // Called after the current unit ran: the next unit, or NONE.
  __device__ __forceinline__ unsigned next(unsigned u) {
    if (SCHED == SCHED_FIXED) return NONE;
    if (SCHED == SCHED_STATIC) {
      unsigned n = u + (CS > 1 ? ptx::sreg_nclusterid_x() : gridDim.x);
      return n < p.num_units && n > u ? n : NONE;
    }
    if (SCHED == SCHED_STEAL && AHEAD < 2 && leader) publish(k, AHEAD == 1 ? pending : claim(false));
    return consume();
  }

  template <class Body>
  __device__ __forceinline__ void run(Body &&body) {
    init();
    unsigned tiles_here = 0;
    unsigned u = first();
    while (u != NONE) {
      request_next();
      unsigned ux = u % p.units[0], t = u / p.units[0];
      unsigned uy = t % p.units[1], uz = t / p.units[1];
      Tile tile;
      tile.coord = make_uint3(ux * CX + rcoord.x, uy * CY + rcoord.y, uz * CZ + rcoord.z);
      tile.cta_rank = rank;
      tile.unit = u;
      tile.iteration = units_run;
      if (tile.coord.x < p.tiles[0] && tile.coord.y < p.tiles[1] && tile.coord.z < p.tiles[2]) {
        tile.linear = tile.coord.x + (unsigned long long)p.tiles[0] * (tile.coord.y + (unsigned long long)p.tiles[1] * tile.coord.z);
        body(tile);
        tiles_here++;
      }
      units_run++;
      u = next(u);
    }
    if (p.stats && tid == 0) record(tiles_here);
    finish();
  }

  __device__ __forceinline__ void record(unsigned tiles_here) {
    unsigned long long *st = p.stats;
    atomicAdd(&st[0], (unsigned long long)tiles_here);
    atomicAdd(&st[4 + (ptx::sreg_smid() & 1023u)], (unsigned long long)tiles_here);
    if (rank == 0 && units_run > 0) {
      atomicAdd(&st[1], (unsigned long long)(units_run - 1));
      atomicAdd(&st[2], 1ull);
      atomicMax(&st[3], (unsigned long long)units_run);
    }
  }
};

// The dynamic shared memory the tile function may use (smem_bytes of the descriptor).
__device__ __forceinline__ void *smem() {
  extern __shared__ __align__(128) unsigned char clcrt__dyn_smem[];
  return clcrt__dyn_smem;
}

template <int SCHED, unsigned CX, unsigned CY, unsigned CZ, unsigned NTHREADS, class Body>
__device__ __forceinline__ void run(const Params &p, Body &&body) {
  __shared__ __align__(16) Ring ring;
  Scheduler<SCHED, CX, CY, CZ, NTHREADS> s(p, &ring);
  s.run(body);
}

}  // namespace clcrt
