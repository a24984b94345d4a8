#!/usr/bin/env python3
"""A tensor-parallel MLP layer whose clcrt GEMMs overlap NCCL's all-reduce.

    torchrun --nproc_per_node=2 python/bench/tp_layer.py [options]
    python3 python/bench/tp_layer.py --spawn 2 [options]      # the same, by torch.multiprocessing
    python3 python/bench/tp_layer.py --spawn 1 --check        # one GPU: the whole path, checked

One process per GPU, through torch.distributed with NCCL. The layer is Megatron's MLP without
its activation: every rank holds the same tokens x (T x H), a column shard of the up projection
w1 (F/N x H) and the matching row shard of the down projection w2 (H x F/N), and computes its
partial output y_r = (x w1_r^T) w2_r^T; the all-reduce sums the partials into y on every rank.
The T tokens go in micro-batches: the GEMMs of micro-batch i+1 run while NCCL all-reduces
micro-batch i. Each rank's shard is --ffn-shard wide (default 3584: Llama-70B's MLP split over
8 GPUs), so each GPU's work is the same at any world size.

Modes (each a whole layer, timed between CUDA events on a stream of the script's, the ranks
aligned by a barrier before each layer; the median over --reps layers, then the slowest rank):

  torch       torch.matmul for both GEMMs on the main stream, NCCL on a side stream (the
              baseline: what a PyTorch user writes)
  serial      clcrt.ops.gemm and NCCL one after the other on the main stream: no overlap
  concurrent  clcrt GEMMs on the main stream, NCCL on a side stream of the same priority: the
              GEMM's persistent grid and NCCL's kernels compete for SMs as the hardware decides
  budget-N    the GEMMs on a clcrt stream with an SM budget of N SMs (rt.stream(sm_budget=N,
              round="down"): a green context, so the GEMMs' clusters run on those SMs only and
              their persistent grids are sized for them; clcrt.ops.gemm plans its waves for
              them too). NCCL runs on a plain side stream of torch's: nothing confines it, but
              the SMs the GEMM leaves are free for it. The budget stream is ordered with torch's
              streams by events.
  yield       the GEMMs on the main stream (the lowest priority); NCCL on a torch stream of
              higher priority, each all-reduce between clcrt preempt_begin/end on that stream
              (`with rt.stream(comm).preempt(): dist.all_reduce(...)`). clcrt's wrapper of the
              comm stream exists before the GEMMs are enqueued, so they launch their yielding
              variant: while an all-reduce runs, the GEMM's clusters stop claiming tiles and
              leave their SMs, and take them back after it (README, Preemption). torch 2.8 and
              newer launch a collective with async_op=False on the current stream, so the
              bracket is around NCCL's kernel itself; an older torch runs it on a stream of its
              own, ordered inside the bracket by the events it records.
  tiles       tile-granular overlap, no NCCL (clcrt.tp.RowAllReduce): the down projection's GEMM
              counts its output rows as it stores them (64 at a time), and on the side stream a
              reduction of clcrt tile functions on about --tp-ctas CTAs starts at once: as soon
              as a rank's GEMM has stored a 64-row block, the rank pushes the block's chunks to
              their owners (NVLink stores on CUDA IPC mappings); each owner sums its chunks over
              the ranks and stores the sum into every rank's output. The micro-batches still pipeline
              as in the other modes, and within one, the all-reduce runs under the GEMM.

Also reported, each alone on the main stream: the clcrt GEMMs (on the whole device and on each
budget), torch's GEMMs, and the all-reduces; the ideal is the longer of the clcrt GEMMs and
the all-reduces alone. "hidden" is the share of the all-reduces' time (alone) that a mode
hides: (GEMMs alone + all-reduces alone - the mode's time) / all-reduces alone, with torch's
GEMMs alone for the torch mode and clcrt's (whole GPU) for the others.

Checks: before timing, every mode runs once into an output poisoned with NaN, and the output
must match the torch mode's (bf16 tolerance: 1% of the largest value plus 0.01) on every rank;
the torch mode's output must match an fp32 computation of the same layer. The exit status is 1
when any check fails on any rank.

Multicast stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NVSHMEM_DISABLE_NVLS=1 are set before torch or NCCL start (the GPU machines here require it),
and nothing here calls cuMulticastCreate.
"""

import argparse
import json
import os
import socket
import statistics
import sys

# NVLink multicast off in NCCL, PyTorch's symmetric memory and NVSHMEM, for every process this
# script starts, before torch or NCCL read the environment. Set, not defaulted: the machines
# this runs on must not use it (it can take a host's shared GPUs out of service).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(MULTICAST_OFF)

MODES = ("torch", "serial", "concurrent", "budget", "yield", "tiles")
CHECK_SHAPE = dict(tokens=512, hidden=1024, ffn_shard=512, micro_batches=4)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--spawn", type=int, default=0, metavar="N",
                    help="start N processes (one per GPU) with torch.multiprocessing; 0: launched by torchrun, or "
                         "one process when run alone")
    ap.add_argument("--tokens", type=int, default=8192, help="tokens per layer, T (default 8192)")
    ap.add_argument("--hidden", type=int, default=8192, help="model width, H (default 8192)")
    ap.add_argument("--ffn-shard", type=int, default=3584, help="MLP width per rank, F/N (default 3584)")
    ap.add_argument("--micro-batches", type=int, default=4, help="micro-batches per layer (default 4)")
    ap.add_argument("--budgets", default="104,112,120",
                    help="SM budgets of the budget modes, comma-separated (rounded down to partitions the device "
                         "makes; default 104,112,120)")
    ap.add_argument("--modes", default=",".join(MODES), help="modes to run (default all)")
    ap.add_argument("--tp-ctas", type=int, default=32, help="CTAs of the tiles mode's reduction (default 32)")
    ap.add_argument("--tp-priority", choices=("same", "high"), default="same",
                    help="the tiles mode's reduction on a stream of the GEMMs' priority or above it (default same)")
    ap.add_argument("--tp-trace", metavar="PREFIX",
                    help="after timing, one more tiles layer with clcrt traces of the GEMMs' and the reduction's "
                         "streams: PREFIX-rankR.json (Perfetto) per rank, and rank 0 prints each run's span")
    ap.add_argument("--reps", type=int, default=20, help="timed layers per mode (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed layers per mode first (default 3)")
    ap.add_argument("--check", action="store_true",
                    help="a quick correctness run: small shapes (T %(tokens)d, H %(hidden)d, F/N %(ffn_shard)d, "
                         "%(micro_batches)d micro-batches), one budget of half the device, 2 timed layers; prints "
                         "'tp_layer: check ok' or exits 1" % CHECK_SHAPE)
    ap.add_argument("--nccl-ctas", default="", metavar="LIST",
                    help="also run torch, concurrent and budget modes with NCCL communicators capped at each of these "
                         "CTA counts (ncclConfig_t.maxCTAs), the budget then the SMs left by NCCL's CTAs "
                         "(e.g. 8,16; default none)")
    ap.add_argument("--json", metavar="FILE", help="rank 0 writes the results there")
    o = ap.parse_args(argv)
    try:
        o.nccl_ctas = [int(c) for c in o.nccl_ctas.split(",") if c.strip()]
    except ValueError:
        ap.error("--nccl-ctas: %r is not a list of CTA counts" % o.nccl_ctas)
    if any(c < 1 for c in o.nccl_ctas):
        ap.error("--nccl-ctas: CTA counts are positive")
    if o.check:
        for k, v in CHECK_SHAPE.items():
            setattr(o, k, v)
        o.reps, o.warmup = min(o.reps, 2), min(o.warmup, 1)
        o.budgets = "half"
    o.modes = [m.strip() for m in o.modes.split(",") if m.strip()]
    bad = [m for m in o.modes if m not in MODES]
    if bad:
        ap.error("--modes: unknown %s (%s)" % (", ".join(bad), ", ".join(MODES)))
    if o.budgets != "half":
        try:
            o.budgets = [int(b) for b in o.budgets.split(",") if b.strip()]
        except ValueError:
            ap.error("--budgets: %r is not a list of SM counts" % o.budgets)
    err = shape_error(o.tokens, o.hidden, o.ffn_shard, o.micro_batches)
    if err:
        ap.error(err)
    if o.spawn < 0 or o.reps < 1 or o.warmup < 0:
        ap.error("--spawn, --reps and --warmup are counts")
    return o


def shape_error(tokens, hidden, ffn_shard, micro_batches):
    """Why clcrt.ops.gemm cannot run this layer, or None."""
    if min(tokens, hidden, ffn_shard, micro_batches) < 1:
        return "the sizes must be positive"
    if tokens % micro_batches:
        return "--tokens %d is not a multiple of --micro-batches %d" % (tokens, micro_batches)
    if hidden % 8 or ffn_shard % 8:
        return "--hidden and --ffn-shard must be multiples of 8 (they are the GEMMs' K: TMA needs 16-byte rows)"
    return None


def layer_flop(tokens, hidden, ffn_shard):
    """Per rank: two GEMMs of T x F/N x H."""
    return 2 * 2.0 * tokens * hidden * ffn_shard


def table(res):
    """The report, as lines, from the gathered results (rank 0)."""
    t, lines = res["times_ms"], []
    serial, base = t.get("serial"), t.get("torch")
    hidden = res.get("hidden", {})
    lines.append("%-52s %9s %9s %9s %7s  %s" % ("mode", "ms/layer", "x serial", "x torch", "hidden",
                                              "check (every rank)"))
    for name, ms in t.items():
        if ms is None:
            lines.append("%-52s %9s  %s" % (res["labels"][name], "-", res["notes"].get(name, "")))
            continue
        vs = lambda ref: "%9.3f" % (ref / ms) if ref and not name.startswith(("alone", "ideal")) else "%9s" % ""
        r = res["check_ratio"].get(name)
        c = "" if r is None else "%s (%.3g of the tolerance)" % ("ok" if r <= 1.0 else "FAILED", r)
        h = "%6.0f%%" % (100 * hidden[name]) if name in hidden else "%7s" % ""
        lines.append("%-52s %9.3f %s %s %s  %s" % (res["labels"][name], ms, vs(serial), vs(base), h, c))
    return lines


# ---- the layer -------------------------------------------------------------------------------


class Layer:
    def __init__(self, o, rank, world, torch, dist, clcrt):
        self.torch, self.dist, self.clcrt = torch, dist, clcrt
        self.rank, self.world = rank, world
        self.T, self.H, self.F, self.M = o.tokens, o.hidden, o.ffn_shard, o.micro_batches
        self.mb = self.T // self.M
        dev = torch.cuda.current_device()
        g = torch.Generator(device="cuda").manual_seed(1234)  # the same tokens on every rank
        bf = torch.bfloat16
        self.x = torch.randn(self.T, self.H, device="cuda", generator=g).to(bf)
        g.manual_seed(5678 + rank)  # this rank's shards
        self.w1 = (torch.randn(self.F, self.H, device="cuda", generator=g) / self.H ** 0.5).to(bf)
        self.w2 = (torch.randn(self.H, self.F, device="cuda", generator=g) / (self.F * world) ** 0.5).to(bf)
        self.h = torch.empty(self.mb, self.F, device="cuda", dtype=bf)
        self.y = torch.empty(self.T, self.H, device="cuda", dtype=bf)
        self.rt = clcrt.runtime(dev)
        self.main = torch.cuda.Stream(device=dev)  # non-blocking, priority 0: the GEMMs' (and serial's)
        self.side = torch.cuda.Stream(device=dev)  # NCCL, same priority
        self.urgent = torch.cuda.Stream(device=dev, priority=-1)  # NCCL, above the GEMMs
        self.events = [torch.cuda.Event() for _ in range(self.M)]

    def rows(self, i):
        return slice(i * self.mb, (i + 1) * self.mb)

    # GEMMs of one micro-batch, on torch's current stream or on a clcrt stream.
    def clcrt_gemms(self, i, stream=None):
        gemm = self.clcrt.ops.gemm
        gemm(self.x[self.rows(i)], self.w1, out=self.h, stream=stream)
        gemm(self.h, self.w2, out=self.y[self.rows(i)], stream=stream)

    def torch_gemms(self, i, stream=None):
        mm = self.torch.matmul
        mm(self.x[self.rows(i)], self.w1.T, out=self.h)
        mm(self.h, self.w2.T, out=self.y[self.rows(i)])

    def run(self, gemms, gemm_stream, comm, bracket=None, gemm_only=False, comm_only=False, group=None):
        """One layer, enqueued from torch's current stream (the main stream): gemms(i) enqueues
        micro-batch i's GEMMs on gemm_stream (None: the main stream; else the torch view of the
        clcrt stream gemms passes to clcrt.ops.gemm), each micro-batch's all-reduce goes to comm
        (None: the main stream) after its GEMMs, inside bracket() when given. Returns with the
        main stream ordered after everything.

        torch's current stream stays the main stream while the GEMMs are enqueued, also for a
        budget stream: clcrt.ops.gemm's one-time workspace fill is a torch kernel, and no torch
        kernel goes to a green context's stream here (untried). Only events are recorded on it
        and waited for, as tests/gpu_share.c records driver events on such streams."""
        torch, dist = self.torch, self.dist
        cur = torch.cuda.current_stream()
        gs, cs = gemm_stream or cur, comm or cur
        for s in {gs, cs} - {cur}:
            s.wait_stream(cur)
        for i in range(self.M):
            if not comm_only:
                gemms(i)
            if gemm_only:
                continue
            if cs != gs:
                self.events[i].record(gs)
                cs.wait_event(self.events[i])
            with torch.cuda.stream(cs):
                if bracket is None:
                    dist.all_reduce(self.y[self.rows(i)], group=group)
                else:
                    with bracket():
                        dist.all_reduce(self.y[self.rows(i)], group=group)
        for s in {gs, cs} - {cur}:
            cur.wait_stream(s)

    def fp32_reference(self):
        """The layer in fp32 sums (the intermediate rounded to bf16 as both versions round it),
        all-reduced in fp32."""
        torch = self.torch
        h = (self.x.float() @ self.w1.float().T).to(torch.bfloat16).float()
        y = h @ self.w2.float().T
        self.dist.all_reduce(y)
        return y


def trace_tiles(o, L, ar, comm, layer, torch, clcrt):
    """One tiles layer traced: the GEMMs' stream (clcrt.ops' wrapper of the main stream) and the
    reduction's; saved per rank, and rank 0 prints when each run ran, in microseconds from the
    layer's first tile, so that the overlap (or its absence) is read off directly."""
    gs, cs = L.rt.stream(torch.cuda.current_stream()), ar._comm_stream(comm)
    gs.trace_enable(), cs.trace_enable()
    try:
        layer()
        torch.cuda.synchronize()
        tg, tc = gs.trace_read(), cs.trace_read()
    finally:
        gs.trace_disable(), cs.trace_disable()
    recs = [("gemm", r) for r in tg.records] + [("comm", r) for r in tc.records]
    if not recs:
        return
    t0 = min(r.start_ns for _, r in recs)
    spans = {}
    for who, r in recs:
        key = (who, r.run)
        s, e, n = spans.get(key, (r.start_ns, r.end_ns, 0))
        spans[key] = (min(s, r.start_ns), max(e, r.end_ns), n + 1)
    merged = [r._replace(run=r.run + (0 if who == "gemm" else 1000)) for who, r in recs]
    clcrt.Trace.from_records(merged).save("%s-rank%d.json" % (o.tp_trace, L.rank))
    if L.rank == 0:
        for (who, run), (s, e, n) in sorted(spans.items(), key=lambda kv: kv[1][0]):
            print("tp_layer: trace %s run %d: %d tiles, %.1f-%.1f us" % (who, run, n, (s - t0) / 1e3, (e - t0) / 1e3),
                  file=sys.stderr, flush=True)


def time_layer(L, fn, warmup, reps):
    torch, dist = L.torch, L.dist
    for _ in range(warmup):
        fn()
    times = []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    return statistics.median(times)


def close(out, ref):
    err = (out.float() - ref.float()).abs().max().item()
    if err != err:  # NaN: an element never written
        err = float("inf")
    return err, 1e-2 * ref.float().abs().max().item() + 1e-2


def worker(rank, world, port, o):
    import torch
    import torch.distributed as dist

    import clcrt

    torchrun = port is None
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    init = "env://" if torchrun else "tcp://127.0.0.1:%d" % port
    dist.init_process_group("nccl", init_method=init, rank=rank, world_size=world, device_id=dev)
    try:
        return measure(o, rank, world, torch, dist, clcrt)
    finally:
        dist.destroy_process_group()


def measure(o, rank, world, torch, dist, clcrt):
    L = Layer(o, rank, world, torch, dist, clcrt)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    budgets = [max(8, sms // 2 // 8 * 8)] if o.budgets == "half" else o.budgets
    labels, times, checks, notes = {}, {}, {}, {}
    comm_alone = {}  # a mode whose all-reduces went through a capped communicator: that one's time alone
    ref = None
    with torch.cuda.stream(L.main):

        def mode(name, label, fn, check=True, out=None):
            nonlocal ref
            labels[name] = label
            if check:
                y = L.y if out is None else out
                y.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                if ref is None:
                    ref = y.clone()
                    checks[name] = close(ref, L.fp32_reference())
                else:
                    checks[name] = close(y, ref)
            times[name] = time_layer(L, fn, o.warmup, o.reps)
            if L.rank == 0:
                print("tp_layer: %s: %.3f ms" % (name, times[name]), file=sys.stderr, flush=True)

        # The torch mode always runs, first: its output is every other mode's reference.
        mode("torch", "torch.matmul, NCCL on a side stream", lambda: L.run(L.torch_gemms, None, L.side))
        clcrt.ops.gemm(L.x[: L.mb], L.w1, out=L.h)  # compiles and loads before any timing
        mode("alone-clcrt", "alone: clcrt GEMMs (%d SMs)" % sms,
             lambda: L.run(L.clcrt_gemms, None, None, gemm_only=True), check=False)
        mode("alone-torch", "alone: torch.matmul GEMMs", lambda: L.run(L.torch_gemms, None, None, gemm_only=True),
             check=False)
        L.y.zero_()  # all-reduced in place again and again: zeros stay finite
        mode("alone-nccl", "alone: NCCL all-reduces", lambda: L.run(None, None, None, comm_only=True), check=False)
        if "serial" in o.modes:
            mode("serial", "clcrt serial (one stream)", lambda: L.run(L.clcrt_gemms, None, None))
        if "concurrent" in o.modes:
            mode("concurrent", "clcrt concurrent, no budget", lambda: L.run(L.clcrt_gemms, None, L.side))
        if "budget" in o.modes:
            for n in budgets:
                try:
                    b = L.rt.stream(sm_budget=n, round="down")
                except clcrt.Error as e:
                    name = "budget-%d" % n
                    labels[name], times[name], notes[name] = "clcrt GEMMs on a budget of %d SMs" % n, None, str(e)
                    continue
                name = "budget-%d" % b.sms
                if name in times:  # two budgets rounded to one partition
                    b.close()
                    continue
                ext = torch.cuda.ExternalStream(b.handle)
                gemms = lambda i, b=b: L.clcrt_gemms(i, stream=b)
                mode("alone-" + name, "alone: clcrt GEMMs on %d SMs" % b.sms,
                     lambda: L.run(gemms, ext, None, gemm_only=True), check=False)
                mode(name, "clcrt GEMMs on %d SMs, NCCL on the rest" % b.sms, lambda: L.run(gemms, ext, L.side))
                torch.cuda.synchronize()
                b.close()
        # NCCL capped at C CTAs (a communicator of its own per cap): torch's mode, clcrt's
        # concurrent mode, and clcrt's GEMMs on the SMs NCCL's CTAs leave (the budget rounded
        # down to what a green context can have). Every rank makes the same groups in the same
        # order, as new_group requires.
        for c in o.nccl_ctas:
            opts = dist.ProcessGroupNCCL.Options()
            if not hasattr(getattr(opts, "config", None), "max_ctas"):
                name = "torch-c%d" % c
                labels[name], times[name] = "torch.matmul, NCCL (%d CTAs)" % c, None
                notes[name] = "this torch's ProcessGroupNCCL.Options has no config.max_ctas"
                continue
            opts.config.max_ctas = c
            g = dist.new_group(backend="nccl", pg_options=opts)
            dist.barrier(group=g)
            L.y.zero_()
            mode("alone-nccl-c%d" % c, "alone: NCCL all-reduces, at most %d CTAs" % c,
                 lambda g=g: L.run(None, None, None, comm_only=True, group=g), check=False)
            mode("torch-c%d" % c, "torch.matmul, NCCL (%d CTAs) on a side stream" % c,
                 lambda g=g: L.run(L.torch_gemms, None, L.side, group=g))
            comm_alone["torch-c%d" % c] = "alone-nccl-c%d" % c
            if "concurrent" in o.modes:
                mode("concurrent-c%d" % c, "clcrt concurrent, NCCL at most %d CTAs" % c,
                     lambda g=g: L.run(L.clcrt_gemms, None, L.side, group=g))
                comm_alone["concurrent-c%d" % c] = "alone-nccl-c%d" % c
            if "budget" in o.modes:
                try:
                    b = L.rt.stream(sm_budget=sms - c, round="down")
                except clcrt.Error as e:
                    name = "budget-c%d" % c
                    labels[name], times[name], notes[name] = "clcrt GEMMs beside NCCL's %d CTAs" % c, None, str(e)
                    b = None
                if b is not None:
                    ext = torch.cuda.ExternalStream(b.handle)
                    gemms = lambda i, b=b: L.clcrt_gemms(i, stream=b)
                    mode("budget-%d-c%d" % (b.sms, c), "clcrt GEMMs on %d SMs, NCCL (%d CTAs) on the rest" % (b.sms, c),
                         lambda g=g, gemms=gemms, ext=ext: L.run(gemms, ext, L.side, group=g))
                    comm_alone["budget-%d-c%d" % (b.sms, c)] = "alone-nccl-c%d" % c
                    torch.cuda.synchronize()
                    b.close()
            torch.cuda.synchronize()
            dist.destroy_process_group(g)
        if "yield" in o.modes:
            # The wrapper of the urgent stream arms the GEMMs' yielding; forgotten afterwards,
            # so that nothing measured after it runs armed.
            hi = L.rt.stream(L.urgent)
            if hi.level == 0:
                labels["yield"], times["yield"] = "clcrt yielding to NCCL", None
                notes["yield"] = "torch.cuda.Stream(priority=-1) has the device's lowest priority here"
            else:
                mode("yield", "clcrt yielding to NCCL (priority level %d)" % hi.level,
                     lambda: L.run(L.clcrt_gemms, None, L.urgent, bracket=hi.preempt))
            torch.cuda.synchronize()
            L.rt.forget_stream(L.urgent)
        if "tiles" in o.modes and L.mb % 64:
            labels["tiles"], times["tiles"] = "clcrt tiles: all-reduce by 64-row blocks", None
            notes["tiles"] = "micro-batches of %d rows: the mode needs a multiple of 64" % L.mb
        elif "tiles" in o.modes:
            ar = clcrt.tp.RowAllReduce(L.T, L.H, ctas=o.tp_ctas)

            comm = L.urgent if o.tp_priority == "high" else L.side

            def tiles_layer():
                cur = torch.cuda.current_stream()
                comm.wait_stream(cur)
                for i in range(L.M):
                    clcrt.ops.gemm(L.x[L.rows(i)], L.w1, out=L.h)
                    ar.gemm(L.h, L.w2, row0=i * L.mb, comm=comm)
                cur.wait_stream(comm)

            mode("tiles", "clcrt tiles: all-reduce by 64-row blocks (%d CTAs%s)"
                 % (ar.ctas, ", high priority" if o.tp_priority == "high" else ""), tiles_layer, out=ar.out)
            torch.cuda.synchronize()
            if o.tp_trace:
                trace_tiles(o, L, ar, comm, tiles_layer, torch, clcrt)
            ar.close()
    torch.cuda.synchronize()

    # Every rank's numbers: the slowest rank's time and the largest error (as a fraction of the
    # tolerance) of each mode.
    names = list(times)
    vals = [times[n] if times[n] is not None else -1.0 for n in names]
    vals += [checks[n][0] / checks[n][1] if n in checks else 0.0 for n in names]
    t = torch.tensor(vals, dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    t = t.tolist()
    slowest = {n: (v if v >= 0 else None) for n, v in zip(names, t[: len(names)])}
    slowest["ideal"] = max(slowest["alone-clcrt"], slowest["alone-nccl"])
    comm = slowest["alone-nccl"]
    # The torch mode against torch's GEMMs alone, every clcrt mode against clcrt's on the whole GPU.
    def comm_of(n):  # the all-reduces alone, through the communicator the mode used
        return slowest.get(comm_alone[n]) if n in comm_alone else comm

    hidden = {n: (slowest["alone-torch" if n.startswith("torch") else "alone-clcrt"] + comm_of(n) - v) / comm_of(n)
              for n, v in slowest.items()
              if v is not None and comm_of(n) and not n.startswith("alone") and n not in ("ideal", "serial")}
    labels["ideal"] = "ideal: the longer of clcrt GEMMs and all-reduces alone"
    nccl = torch.cuda.nccl.version()
    return {
        "world": world,
        "device": torch.cuda.get_device_name(),
        "sms": sms,
        "torch": torch.__version__,
        "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl),
        "clcrt": clcrt.__version__,
        "shape": dict(tokens=L.T, hidden=L.H, ffn_shard=L.F, micro_batches=L.M),
        "reps": o.reps,
        "labels": labels,
        "times_ms": slowest,
        # The largest |error| over the ranks as a fraction of the tolerance: ok where <= 1.
        "hidden": hidden,
        "check_ratio": {n: r for n, r in zip(names, t[len(names):]) if n in checks},
        "rank0_check": {n: checks[n] for n in checks},  # rank 0's (max |error|, tolerance)
        "notes": notes,
    }


def report(res, o):
    print("tp_layer: %d x %s (%d SMs), torch %s, NCCL %s, clcrt %s, %s" % (
        res["world"], res["device"], res["sms"], res["torch"], res["nccl"], res["clcrt"],
        " ".join("%s=%s" % (k, os.environ.get(k)) for k in MULTICAST_OFF)))
    s = res["shape"]
    print("  %d tokens in %d micro-batches, hidden %d, MLP %d per rank (%d in all); %.1f GFLOP per rank per layer; "
          "median of %d layers, the slowest rank" % (s["tokens"], s["micro_batches"], s["hidden"], s["ffn_shard"],
                                                    s["ffn_shard"] * res["world"],
                                                    layer_flop(s["tokens"], s["hidden"], s["ffn_shard"]) / 1e9,
                                                    res["reps"]))
    for line in table(res):
        print("  " + line)
    bad = [n for n, r in res["check_ratio"].items() if not r <= 1.0]
    if bad:
        print("tp_layer: check FAILED on some rank: %s" % ", ".join(bad))
    elif o.check:
        print("tp_layer: check ok (%d ranks, %d modes)" % (res["world"], len(res["check_ratio"])))
    if o.json:
        with open(o.json, "w") as f:
            json.dump(res, f, indent=1)
    return 1 if bad else 0


def spawned(rank, world, port, o, q):
    res = worker(rank, world, port, o)
    if rank == 0:
        q.put(res)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    o = parse_args(argv)
    if o.spawn == 0 and "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        res = worker(rank, world, None, o)
        return report(res, o) if rank == 0 else 0
    import torch
    import torch.multiprocessing as mp

    world = o.spawn or 1
    if torch.cuda.device_count() < world:
        print("tp_layer: %d processes need %d GPUs; torch sees %d" % (world, world, torch.cuda.device_count()),
              file=sys.stderr)
        return 2
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.spawn(spawned, args=(world, free_port(), o, q), nprocs=world, join=True)
    return report(q.get(), o)


if __name__ == "__main__":
    sys.exit(main())
