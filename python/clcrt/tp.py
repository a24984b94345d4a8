"""Tensor parallelism at tile granularity: a GEMM whose partial output is all-reduced across
the ranks of a torch.distributed group 64 rows at a time, as the GEMM stores them.

    ar = clcrt.tp.RowAllReduce(rows, cols)          # collective: every rank, same arguments
    ar.gemm(h, w2, row0=0, comm=side_stream)        # partial = h @ w2.T, then out = sum over ranks
    side_stream.synchronize(); ar.out[:len(h)]      # (or order a stream after `comm`)

How it works. Every rank's buffers (the partial rows, the output rows, a receive slot per
rank and three sets of counters) are one allocation, shared with the other ranks of the group
through CUDA IPC handles (NVLink peer access; no multicast). The GEMM (clcrt.ops.gemm with
``done=``) adds rows x columns to one counter per 64 rows as it stores them, with a GPU-scope
release (read here only: the peers learn of a block from this rank's pushes). Each 64-row block's columns are cut into chunks, and each rank owns every
world-th chunk. On the comm stream, two runs of tile functions follow the GEMM (which they do
not wait for in stream order: they start while it runs):

  tp_reduce   first one "push" per (block, chunk another rank owns): once this rank's GEMM
              has stored the block, its partial of the chunk is stored into the owner's
              receive slot (NVLink stores) and counted in on the owner's counter of the block;
              then one "sum" per (block, chunk this rank owns): once the GEMM has stored the
              block and every peer has pushed its chunks of it, the W partials (all in local
              memory now) are added in fp32, in rank order, and the bf16 sum is stored into
              every rank's output, then counted in on every peer's counter of the block;
  tp_wait     one tile per block: wait until every peer has stored all its sums of it here.

When tp_wait's run completes, ``out`` holds the sum in those rows on this rank. Loads are all
of local memory; what crosses NVLink is stores, which do not wait for a round trip.

Why it cannot deadlock. A push waits only for this rank's GEMM, and a GEMM waits for nothing.
tp_reduce runs under STEAL on a persistent grid of about ``ctas`` CTAs, never one CTA per tile
(clcrt runs a kernel of long units so on an AUTO grid, and CLC, AUTO on sm_100+, always
launches a full grid), fewer than the GPU's SMs and each small enough to sit beside a GEMM CTA
(64 registers, no shared memory of its own): its waiting CTAs never take all the room the
GEMM's CTAs need, and the GEMM's CTAs, however clcrt launches them, finish. A persistent grid's
CTAs claim units in order, pushes first: when a CTA holds a sum, every push of its rank is held
by a running CTA and ends, on every rank alike, so every sum's wait ends. (A run with no more
units than CTAs gives each CTA one unit of its own, claiming none: then every unit's CTA is
resident at the latest once the GEMM's CTAs are done, the grid being so small.) A tp_wait tile waits
only for the peers' sums, and tp_wait is a separate run after tp_reduce on the stream: no CTA
of it holds an SM that a tile it waits for needs. Across ranks nothing waits in a cycle as long
as every rank enqueues the same sequence of gemm() calls, as with any collective; if they do
not, a wait gives up after tens of seconds with a message (printf) and a trap rather than hang.

Reuse. ``gemm`` on rows whose previous reduction has not finished makes its stream wait for it
(its pushes may still read the old partial, its sums the receive slots); ``out``'s rows are the
result from the comm stream's completion of that reduction until the next ``gemm`` on the same
rows is enqueued (a peer then writes into them: order any reader before that call, as one would
before reusing the buffer of an in-place all-reduce).

The counters grow by a known amount per run and are never reset; a target per 64-row block (its
runs so far) tells each wait when to end. So every rank must call gemm() on the same row ranges
in the same order, rows must start at a multiple of 64, and a CUDA graph cannot hold a call (a
replay would wait for the targets of the captured run): gemm() refuses capture. Buffers of
different shapes on different ranks are refused when the object is made.
"""

import ctypes

from . import _driver
from .args import Args, array, u32, u64
from ._errors import InvalidError

MAX_WORLD = 8
BLOCK_ROWS = 64  # rows per counter: clcrt_gemm_desc.done's

SRC = r"""
struct TpArgs {
  unsigned long long part[8];  // every rank's partial rows (bf16, row pitch ld), as mapped in this process
  unsigned long long out[8];   // every rank's output rows
  unsigned long long recv[8];  // every rank's receive slots: slot q (q x slot elements on) holds rank q's
                               // partial of the chunks the rank owns
  unsigned long long done[8];  // every rank's GEMM counters, one per 64 rows (clcrt_gemm_desc.done)
  unsigned long long arr[8];   // every rank's counters of chunks pushed to it, one per 64 rows
  unsigned long long sig[8];   // every rank's counters of sums stored into it, one per 64 rows
  unsigned long long slot;     // elements per receive slot
  unsigned world, rank;
  unsigned r0, rows;           // the rows reduced: [r0, r0 + rows), r0 a multiple of 64
  unsigned cols, ld;           // columns (a multiple of 8) and elements between rows
  unsigned chunk, per_rank;    // columns per chunk (a multiple of 8); chunks each rank owns per block
  unsigned epoch, pad;         // reductions of these rows so far, this one included
};

__device__ __forceinline__ unsigned tp_ld_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __noinline__ void tp_give_up(const TpArgs &a, const char *what, unsigned q, unsigned gb, unsigned v,
                                         unsigned target) {
  printf("clcrt.tp: rank %u of %u gave up waiting for %s of rank %u, rows %u-%u: at %u, not %u (epoch %u)\n", a.rank,
         a.world, what, q, gb * 64, gb * 64 + 63, v, target, a.epoch);
  __trap();
}
// Until the counter reaches the target (modulo 2^32: counters are never reset). A wait that
// outlasts 2^26 polls (tens of seconds) means a rank never ran its part (the ranks' calls did
// not match): it says so and traps rather than hang for ever.
__device__ __forceinline__ void tp_wait_for(const unsigned *p, unsigned target, const TpArgs &a, const char *what,
                                            unsigned q, unsigned gb) {
  unsigned v;
  for (unsigned long long polls = 0; (int)((v = tp_ld_acquire(p)) - target) < 0;) {
    __nanosleep(128);
    if (++polls == (1ull << 26)) tp_give_up(a, what, q, gb, v, target);
  }
}
// +1 on a counter of a rank's block. Its caller is thread 0 after a CTA barrier and a
// system-scope fence, which make it a release of every thread's stores.
__device__ __forceinline__ void tp_signal(unsigned long long ctr, unsigned gb) {
  asm volatile("red.relaxed.sys.global.add.u32 [%0], 1;" ::"l"((unsigned *)ctr + gb) : "memory");
}
__device__ __forceinline__ uint4 tp_ld(const unsigned short *p) {  // L2 only: the data changes between runs
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ void tp_add(float (&s)[8], uint4 v) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    s[2 * i] += __uint_as_float(w[i] << 16);
    s[2 * i + 1] += __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ unsigned tp_pack(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

#define TP_PUSH 4  // 16-byte vectors per thread in flight: a push,
#define TP_SUM 2   // a sum (per rank; 8 floats each to keep within 64 registers)

// The units of one run, in claim order: first every "push" (a 64-row block's chunk this rank
// does not own: its partial copied into the owner's receive slot, then counted in on the
// owner's arr), then every "sum" (a chunk this rank owns: its partial and the W - 1 pushed
// ones added, the bf16 sum stored into every rank's output, then counted in on every peer's
// sig). A push waits for this rank's GEMM only; a sum for this rank's GEMM and the peers'
// pushes. All loads are of local memory; what crosses NVLink is stores.
__device__ void tp_reduce(const clcrt::Tile &t, const TpArgs &a) {
  const unsigned W = a.world, blocks = (a.rows + 63) / 64, pushes = blocks * (W - 1) * a.per_rank;
  unsigned u = (unsigned)t.linear, b, owner, k;
  const bool push = u < pushes;
  if (push) {  // unit u: block u / ((W - 1) per_rank), then the owner (not this rank), then its k-th chunk
    const unsigned per_block = (W - 1) * a.per_rank, j = u % per_block, o = j % (W - 1);
    b = u / per_block, k = j / (W - 1), owner = o < a.rank ? o : o + 1;
  } else {
    u -= pushes;
    b = u / a.per_rank, k = u % a.per_rank, owner = a.rank;
  }
  const unsigned gb = a.r0 / 64 + b, row0 = gb * 64, nrows = min(64u, a.r0 + a.rows - row0);
  const unsigned c0 = (owner + k * W) * a.chunk, c1 = min(c0 + a.chunk, a.cols);
  if (threadIdx.x == 0) {
    tp_wait_for((const unsigned *)a.done[a.rank] + gb, a.epoch * nrows * a.cols, a, "the GEMM", a.rank, gb);
    if (!push && W > 1)
      tp_wait_for((const unsigned *)a.arr[a.rank] + gb, a.epoch * (W - 1) * a.per_rank, a, "the pushes to", a.rank,
                  gb);
  }
  __syncthreads();  // thread 0's acquires, then everyone's loads
  const unsigned vec = c0 < c1 ? (c1 - c0) / 8 : 0u, total = nrows * vec;
  const unsigned short *mine = (const unsigned short *)a.part[a.rank];
  if (push) {
    unsigned short *dst = (unsigned short *)a.recv[owner] + a.slot * a.rank;
    for (unsigned i0 = threadIdx.x; i0 < total; i0 += TP_PUSH * blockDim.x) {
      uint4 x[TP_PUSH];
#pragma unroll
      for (int e = 0; e < TP_PUSH; e++) {
        const unsigned i = i0 + e * blockDim.x;
        if (i < total) x[e] = tp_ld(mine + (unsigned long long)(row0 + i / vec) * a.ld + c0 + i % vec * 8);
      }
#pragma unroll
      for (int e = 0; e < TP_PUSH; e++) {
        const unsigned i = i0 + e * blockDim.x;
        if (i < total) *(uint4 *)(dst + (unsigned long long)(row0 + i / vec) * a.ld + c0 + i % vec * 8) = x[e];
      }
    }
  } else {
    for (unsigned i0 = threadIdx.x; i0 < total; i0 += TP_SUM * blockDim.x) {
      unsigned long long off[TP_SUM];
      float s[TP_SUM][8];
#pragma unroll
      for (int e = 0; e < TP_SUM; e++) {
        const unsigned i = i0 + e * blockDim.x;
        off[e] = (unsigned long long)(row0 + i / vec) * a.ld + c0 + i % vec * 8;
#pragma unroll
        for (int c = 0; c < 8; c++) s[e][c] = 0.0f;
      }
      for (unsigned q = 0; q < W; q++) {  // in rank order, so that every rank adds alike
        const unsigned short *src = q == a.rank ? mine : (const unsigned short *)a.recv[a.rank] + a.slot * q;
        uint4 x[TP_SUM];
#pragma unroll
        for (int e = 0; e < TP_SUM; e++)
          x[e] = i0 + e * blockDim.x < total ? tp_ld(src + off[e]) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int e = 0; e < TP_SUM; e++) tp_add(s[e], x[e]);
      }
#pragma unroll
      for (int e = 0; e < TP_SUM; e++) {
        if (i0 + e * blockDim.x >= total) break;
        uint4 o;
        o.x = tp_pack(s[e][0], s[e][1]), o.y = tp_pack(s[e][2], s[e][3]);
        o.z = tp_pack(s[e][4], s[e][5]), o.w = tp_pack(s[e][6], s[e][7]);
        for (unsigned q = 0; q < W; q++) *(uint4 *)((unsigned short *)a.out[(a.rank + q) % W] + off[e]) = o;
      }
    }
  }
  __syncthreads();  // every thread's stores, then thread 0's release to the peers
  if (threadIdx.x == 0 && W > 1) {
    asm volatile("fence.acq_rel.sys;" ::: "memory");
    if (push) {
      tp_signal(a.arr[owner], gb);
    } else {
      for (unsigned q = 0; q < W; q++)
        if (q != a.rank) tp_signal(a.sig[q], gb);
    }
  }
}

// One tile per 64-row block: until every peer has stored all its chunks of the block here.
__device__ void tp_wait(const clcrt::Tile &t, const TpArgs &a) {
  const unsigned gb = a.r0 / 64 + (unsigned)t.linear;
  if (threadIdx.x == 0)
    tp_wait_for((const unsigned *)a.sig[a.rank] + gb, a.epoch * (a.world - 1) * a.per_rank, a, "the sums", a.rank, gb);
}
"""


class TpArgs(Args):
    part: array(u64, MAX_WORLD)
    out: array(u64, MAX_WORLD)
    recv: array(u64, MAX_WORLD)
    done: array(u64, MAX_WORLD)
    arr: array(u64, MAX_WORLD)
    sig: array(u64, MAX_WORLD)
    slot: u64
    world: u32
    rank: u32
    r0: u32
    rows: u32
    cols: u32
    ld: u32
    chunk: u32
    per_rank: u32
    epoch: u32
    pad: u32


def _align(x, a=256):
    return (x + a - 1) // a * a


class RowAllReduce:
    """A rows x cols bf16 all-reduce over ``group`` (default: the world) fed by clcrt GEMMs, 64
    rows at a time. Collective: every rank of the group makes it with the same arguments.

    ``ctas``: about how many CTAs the reduction's persistent grid has (default 32; fewer than
    the SMs; ``.ctas`` says how many it got).
    ``chunk``: columns per chunk (default about 1024 / world rounded to a multiple of 8, at
    least 64)."""

    def __init__(self, rows, cols, *, group=None, ctas=32, chunk=None, rt=None):
        import torch
        import torch.distributed as dist

        from . import _core, ops

        self._torch, self._dist, self._ops = torch, dist, ops
        if not isinstance(rows, int) or not isinstance(cols, int) or rows < 1 or cols < 1:
            raise InvalidError("RowAllReduce: rows and cols must be positive ints, not %r, %r" % (rows, cols))
        if cols % 8 or cols > 1 << 24:
            raise InvalidError("RowAllReduce: cols = %d: a multiple of 8 up to 2^24 (16-byte vectors; the GEMM's "
                               "counters)" % cols)
        if dist.is_available() and dist.is_initialized():
            self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        else:
            if group is not None:
                raise InvalidError("RowAllReduce: a group was given but torch.distributed is not initialised")
            self.world, self.rank = 1, 0
        if self.world > MAX_WORLD:
            raise InvalidError("RowAllReduce: %d ranks; at most %d" % (self.world, MAX_WORLD))
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        if not isinstance(ctas, int) or not 1 <= ctas < sms:
            raise InvalidError("RowAllReduce: ctas = %r: 1 to %d (fewer than the SMs, so the GEMM always has SMs)"
                               % (ctas, sms - 1))
        if chunk is None:
            chunk = max(64, (1024 // self.world + 7) // 8 * 8)
        if not isinstance(chunk, int) or chunk < 8 or chunk % 8:
            raise InvalidError("RowAllReduce: chunk = %r: a positive multiple of 8" % (chunk,))
        self.group, self.rows, self.cols = group, rows, cols
        self.per_rank = max(1, -(-cols // (chunk * self.world)))
        self.chunk = _align(-(-cols // (self.per_rank * self.world)), 8)
        self.blocks = -(-rows // BLOCK_ROWS)
        self.device = torch.cuda.current_device()
        self.rt = rt or _core.runtime(self.device)

        # One allocation: partial, out, one receive slot per rank (the peers push their partials
        # of the chunks this rank owns there), then the GEMM's, the pushes' and the sums'
        # counters (zeroed once).
        data = rows * cols * 2
        self._slot = _align(data) // 2  # elements
        o_out = _align(data)
        o_recv = o_out + _align(data)
        o_done = o_recv + (_align(data) * self.world if self.world > 1 else 0)
        o_arr = o_done + _align(self.blocks * 4)
        o_sig = o_arr + _align(self.blocks * 4)
        self._buf = torch.zeros(o_sig + _align(self.blocks * 4), dtype=torch.uint8, device=self.device)
        base = self._buf.data_ptr()
        self.partial = self._buf[:data].view(torch.bfloat16).view(rows, cols)
        self.out = self._buf[o_out:o_out + data].view(torch.bfloat16).view(rows, cols)
        self.done = self._buf[o_done:o_done + self.blocks * 4].view(torch.int32)
        self._opened = []
        bases = [base] * self.world
        if self.world > 1:
            handle, off = _driver.ipc_handle(self.device, base)
            got = [None] * self.world
            shape = (rows, cols, self.per_rank, self.chunk)
            dist.all_gather_object(got, (handle, off, shape), group=group)
            shapes = [g[2] for g in got]
            if any(sh != shape for sh in shapes):  # every rank sees the same list: all raise
                self._buf = None
                raise InvalidError("RowAllReduce: the ranks asked for different buffers (rows, cols, chunks per "
                                   "rank, chunk) = %s: every rank must pass the same arguments" % shapes)
            try:
                for q, (h, qoff, _) in enumerate(got):
                    if q != self.rank:
                        b = _driver.ipc_open(self.device, h)
                        self._opened.append(b)
                        bases[q] = b + qoff
            except Exception:
                self._unmap()
                raise
        self._bases = bases
        self._offs = (0, o_out, o_recv, o_done, o_arr, o_sig)
        self._epoch = [0] * self.blocks
        self._after = [None] * self.blocks  # per 64-row block: the event after its last reduction
        self._cover = [0] * self.blocks  # per 64-row block: the rows of it the runs cover
        self._broken = None
        # At most 64 registers (4 CTAs of 256 threads per SM): one CTA fits beside a GEMM CTA.
        # A persistent grid always: on an AUTO grid clcrt runs kernels whose units it measured
        # as long (these wait) with one CTA per unit, and hundreds of waiting CTAs would take
        # the SMs the GEMM they wait for needs. The variants a run may launch (graph capture,
        # short runs, traced runs) are built now: until one is built a run launches the fallback
        # of one CTA per unit, as many waiting CTAs as units.
        # STEAL, not AUTO: on sm_100+ AUTO is CLC, which launches a full grid (as many waiting
        # CTAs as fit).
        self._reduce_k = self.rt.register(SRC, "tp_reduce", TpArgs, block=256, min_blocks_per_sm=4, sched="steal",
                                          grid="persistent")
        self._wait_k = self.rt.register(SRC, "tp_wait", TpArgs, block=32, sched="steal", grid="persistent")
        for k in (self._reduce_k, self._wait_k):
            k.prepare(_core.Use.GRAPH | _core.Use.SHORT | _core.Use.TRACE)  # every combination
        self._comm = {}  # torch stream handle -> clcrt Stream whose persistent grids have about `ctas` CTAs
        # clcrt sizes a 1-CTA kernel's persistent grid as (CTAs per SM) x grid_sms: so many SMs'
        # worth that the reduction has about `ctas` CTAs.
        info = self._reduce_k.info
        threads = info.block[0] * info.block[1] * info.block[2]
        warp_regs = -(-max(info.registers, 1) * 32 // 256) * 256
        per_sm = max(1, min(2048 // threads, 65536 // (warp_regs * (threads // 32)), 32))
        self._grid_sms = max(1, ctas // per_sm)
        self.ctas = self._grid_sms * per_sm

    def _unmap(self):
        for b in self._opened:
            try:
                _driver.ipc_close(self.device, b)
            except Exception:
                pass
        self._opened = []

    def _args(self, r0, rows, epoch):
        a = TpArgs()
        for q in range(self.world):
            b = self._bases[q]
            a.part[q], a.out[q], a.recv[q], a.done[q], a.arr[q], a.sig[q] = (b + o for o in self._offs)
        a.slot = self._slot
        a.world, a.rank, a.r0, a.rows, a.cols, a.ld = self.world, self.rank, r0, rows, self.cols, self.cols
        a.chunk, a.per_rank, a.epoch = self.chunk, self.per_rank, epoch & 0xFFFFFFFF
        return a

    def _comm_stream(self, stream):
        h = stream.cuda_stream
        s = self._comm.get(h)
        if s is None:
            s = self._comm[h] = self.rt.stream(stream, grid_sms=self._grid_sms)
        return s

    def gemm(self, a, b, row0=0, *, stream=None, comm=None):
        """partial[row0:row0+M] = a @ b.T on ``stream`` (torch's current by default), then the
        sum of every rank's partial of those rows into ``out`` on ``comm`` (a torch stream;
        default the same stream), which starts while the GEMM runs: ``comm``'s completion means
        out[row0:row0+M] is the sum. row0 is a multiple of 64; every rank calls this with the
        same rows. Returns out[row0:row0+M]."""
        torch = self._torch
        if self._buf is None:
            raise InvalidError("RowAllReduce.gemm: closed")
        if self._broken is not None:
            raise InvalidError("RowAllReduce.gemm: an earlier call failed after its GEMM was enqueued (%s): the "
                               "ranks' counters no longer agree; make a new RowAllReduce" % self._broken)
        if not isinstance(row0, int) or row0 < 0 or row0 % BLOCK_ROWS:
            raise InvalidError("RowAllReduce.gemm: row0 = %r: a multiple of 64 from 0" % (row0,))
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            raise InvalidError("RowAllReduce.gemm: a and b must be torch tensors")
        m = a.shape[0] if a.dim() == 2 else -1
        if m < 1 or row0 + m > self.rows or b.dim() != 2 or b.shape[0] != self.cols:
            raise InvalidError("RowAllReduce.gemm: a (%s) and b (%s) must make rows [%d, %d + M) of %d x %d"
                               % (tuple(a.shape), tuple(b.shape), row0, row0, self.rows, self.cols))
        r1 = row0 + m
        b0, b1 = row0 // BLOCK_ROWS, -(-r1 // BLOCK_ROWS)
        ep = self._epoch[b0]
        cover = [min(BLOCK_ROWS, r1 - BLOCK_ROWS * i) for i in range(b0, b1)]  # rows of each block in the range
        if any(e != ep for e in self._epoch[b0:b1]) or (ep and cover != self._cover[b0:b1]):
            # The waits' targets are (runs) x (rows of the block) x cols: a block must be run
            # as often as its neighbours in the range, and always with the same rows.
            raise InvalidError("RowAllReduce.gemm: rows [%d, %d) cut across 64-row blocks that were reduced in "
                               "other ranges: keep to the same row ranges every time" % (row0, r1))
        stream = stream or torch.cuda.current_stream()
        comm = comm or stream
        if _driver.is_capturing(stream.cuda_stream) or _driver.is_capturing(comm.cuda_stream):
            raise InvalidError("RowAllReduce.gemm: not in a CUDA graph: each run waits for counters to reach "
                               "targets that grow run by run, which a replay would not update")
        prev = {id(e): e for e in self._after[b0:b1] if e is not None}
        for e in prev.values():
            stream.wait_event(e)  # the previous reduction of these blocks may still read the partial rows
        self._ops.gemm(a, b, out=self.partial[row0:r1], stream=stream, done=self.done[b0:])
        try:
            for i in range(b0, b1):
                self._epoch[i] = ep + 1
            args = self._args(row0, m, ep + 1)
            cs = self._comm_stream(comm)
            self._reduce_k.run((b1 - b0) * self.world * self.per_rank, args, stream=cs)
            if self.world > 1:
                self._wait_k.run(b1 - b0, args, stream=cs)
            ev = torch.cuda.Event()
            ev.record(comm)
        except Exception as e:
            self._broken = str(e)
            raise
        for i in range(b0, b1):
            self._after[i] = ev
        self._cover[b0:b1] = cover
        return self.out[row0:r1]

    def close(self):
        """Unmaps the peers' buffers after a barrier of the group (so that no peer still uses
        this rank's), then frees this rank's. Collective."""
        if self._buf is None:
            return
        self._torch.cuda.synchronize(self.device)
        if self.world > 1:
            self._dist.barrier(group=self.group)
        self._unmap()
        if self.world > 1:
            self._dist.barrier(group=self.group)
        self._buf = self.partial = self.out = self.done = None
