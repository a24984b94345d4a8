#!/usr/bin/env python3
"""Host time per run from Python, in one process, against what else a PyTorch user calls.

    python3 python/bench/overhead.py [--rounds R] [--batch B] [--leak N] [--json FILE]

Every contender enqueues the same trivial work (one CTA adds 1 to a counter; the torch
contender is x.add_(1) on a one-element tensor). Each round times a batch of B calls of
every contender in turn (the order rotates from round to round, so that a drift of the
host's clock speed falls on all alike), with the GPU drained between batches so that no
call waits for the launch queue; the figure is the median over rounds of the time per call.
Contenders:

  clcrt k.run(args)          Kernel.run with prepacked Args, torch's current stream found per call
  clcrt k.run(args, stream)  the same with an explicit clcrt.Stream
  clcrt launcher()           Kernel.launcher: everything prepacked, the stream found per call
  clcrt launcher(stream)     prepacked with its stream
  ctypes clcrt_run           a bare ctypes call of clcrt_run (argtypes declared, dim3 by value)
  ctypes clcrt_py_run raw    a bare ctypes call of the shim, no argtypes, ctypes objects only
  cupy RawKernel             CuPy's RawKernel launch of the same kernel (when CuPy is installed)
  torch x.add_(1)            a trivial torch op
  C call clcrt_py_gemm_dense the op's one call into C alone, its arguments prepacked integers
  torch.empty(1, 256)        the allocation of the op's output, as ops.gemm without out= makes it
  clcrt.ops.gemm(a, w[, out])  the GEMM op on a 1 x 256 x 256 problem (one call into C), with and
                             without a given output; ops._gemm_py, its Python function (the op
                             where torch lacks substitute_in_graph); torch.ops.clcrt.gemm, the
                             same through the dispatcher (what torch.compile records); F.linear

--parts also times, one at a time, the queries the op's eager path makes of a tensor (dtype,
shape, stride(), get_device(), data_ptr()), the current stream's lookup, and the ways torch
offers to allocate the output (new_empty with ints or a tuple, new, empty_like, new_empty_strided).

--leak N runs the launcher N times (default 10^6) and prints the RSS before and after.
"""

import argparse
import ctypes
import gc
import json
import os
import statistics
import sys
import time

import torch

import clcrt
from clcrt import _native
from clcrt import _types as T

SRC = """struct CountArgs { int *n; };
__device__ void count_tile(const clcrt::Tile &t, const CountArgs &a) {
  if (threadIdx.x == 0) atomicAdd(a.n, 1);
}
"""
RAW = r"""extern "C" __global__ void count(int *n) { if (threadIdx.x == 0) atomicAdd(n, 1); }"""


class CountArgs(clcrt.Args):
    n: clcrt.ptr("int32")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def contenders(sched, parts=False):
    rt = clcrt.runtime(torch.cuda.current_device())
    k = rt.register(SRC, "count_tile", CountArgs, block=32, sched=sched)
    k.prepare(clcrt.Use.SHORT | clcrt.Use.GRAPH)
    n = torch.zeros(1, dtype=torch.int32, device="cuda")
    a = CountArgs(n)
    s = rt.current_stream()  # torch's current (default) stream: every contender uses it
    lib = _native.lib()
    dim = T.Dim3(1, 1, 1)
    sp, kp, ap, size = ctypes.c_void_p(s._h), ctypes.c_void_p(k._h), ctypes.c_void_p(ctypes.addressof(a)), 8
    raw = lib["clcrt_py_run"]
    raw.restype = ctypes.c_int
    csize = ctypes.c_size_t(8)
    go, go_s = k.launcher(1, a), k.launcher(1, a, stream=s)
    c = {
        "clcrt k.run(args)": lambda: k.run(1, a),
        "clcrt k.run(args, stream)": lambda: k.run(1, a, stream=s),
        "clcrt launcher()": go,
        "clcrt launcher(stream)": go_s,
        "ctypes clcrt_run": lambda: lib.clcrt_run(sp, kp, dim, ap, size),
        "ctypes clcrt_py_run raw": lambda: raw(sp, kp, 1, 1, 1, ap, csize),
    }
    try:
        import cupy

        ck = cupy.RawKernel(RAW, "count")
        cn = cupy.zeros(1, dtype=cupy.int32)
        ck((1,), (32,), (cn,))
        c["cupy RawKernel"] = lambda: ck((1,), (32,), (cn,))
    except Exception as e:  # CuPy absent or unusable: say so, measure the rest
        print("cupy: not measured (%s)" % (str(e).splitlines()[0] if str(e) else type(e).__name__))
    x = torch.zeros(1, device="cuda")
    c["torch x.add_(1)"] = lambda: x.add_(1)
    # The GEMM op on a problem small enough that the GPU keeps up with the host (1 x 256 x 256),
    # against what a PyTorch user calls for it.
    ga = torch.randn(1, 256, device="cuda").to(torch.bfloat16)
    gw = torch.randn(256, 256, device="cuda").to(torch.bfloat16)
    go_ = torch.empty(1, 256, device="cuda", dtype=torch.bfloat16)
    clcrt.ops.gemm(ga, gw)  # compiled and loaded before the timing
    # Where the op's time goes: the one call into C with every argument already an integer
    # (the op and its driver calls, no Python checks), and the allocation of an output.
    ops_h = rt.__dict__.get("_ops_h") or clcrt.ops._ops(rt)
    gd = lib.clcrt_py_gemm_dense
    pa, pw, po = ga.data_ptr(), gw.data_ptr(), go_.data_ptr()
    c["C call clcrt_py_gemm_dense"] = lambda: gd(ops_h, s._h, pa, pw, po, 1, 256, 256, 256, 256, 256, 0)
    c["torch.empty(1, 256)"] = lambda: torch.empty((1, 256), device="cuda", dtype=torch.bfloat16)
    c["clcrt.ops.gemm(a, w, out=o)"] = lambda: clcrt.ops.gemm(ga, gw, out=go_)
    c["clcrt.ops.gemm(a, w)"] = lambda: clcrt.ops.gemm(ga, gw)
    # The op's Python function, which is clcrt.ops.gemm where torch cannot be told to trace it in
    # place of the C function (torch.compiler.substitute_in_graph)
    c["ops._gemm_py(a, w, out=o)"] = lambda: clcrt.ops._gemm_py(ga, gw, out=go_)
    c["ops._gemm_py(a, w)"] = lambda: clcrt.ops._gemm_py(ga, gw)
    c["torch.ops.clcrt.gemm(a, w)"] = lambda: torch.ops.clcrt.gemm(ga, gw)
    c["F.linear(a, w)"] = lambda: torch.nn.functional.linear(ga, gw)
    if parts:  # what the eager path asks of each tensor, one query at a time
        rawst, dev = torch._C._cuda_getCurrentRawStream, ga.get_device()
        c.update({"part a.dtype": lambda: ga.dtype, "part a.shape": lambda: ga.shape,
                  "part a.stride()": lambda: ga.stride(), "part a.get_device()": lambda: ga.get_device(),
                  "part a.data_ptr()": lambda: ga.data_ptr(), "part a.new_empty(1, 256)": lambda: ga.new_empty(1, 256),
                  "part raw current stream": lambda: rawst(dev), "part a.size()": lambda: ga.size(),
                  "part a.is_contiguous()": lambda: ga.is_contiguous(), "part a.device": lambda: ga.device,
                  "part lambda: None": lambda: None, "alloc a.new(1, 256)": lambda: ga.new(1, 256),
                  "alloc a.new_empty((1, 256))": lambda: ga.new_empty((1, 256)),
                  "alloc torch.empty_like(o)": lambda: torch.empty_like(go_),
                  "alloc a.new_empty_strided": lambda: ga.new_empty_strided((1, 256), (256, 1))})
    return c, go


def measure(c, rounds, batch):
    names = list(c)
    per = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            f = c[n]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(batch):
                f()
            t1 = time.perf_counter()
            per[n].append((t1 - t0) / batch * 1e6)
    torch.cuda.synchronize()
    return per


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--sched", default="auto")
    ap.add_argument("--leak", type=int, nargs="?", const=10**6, default=None)
    ap.add_argument("--json")
    ap.add_argument("--parts", action="store_true", help="also time each tensor query the eager path makes")
    o = ap.parse_args()
    c, go = contenders(o.sched, o.parts)
    for f in c.values():  # warm-up: every path compiled, loaded and wrapped
        for _ in range(100):
            f()
    torch.cuda.synchronize()
    per = measure(c, o.rounds, o.batch)
    dev = torch.cuda.get_device_name()
    print("host time per call, median of %d rounds of %d calls (us); %s, Python %s, torch %s, clcrt %s, sched %s"
          % (o.rounds, o.batch, dev, sys.version.split()[0], torch.__version__, clcrt.__version__, o.sched))
    base = statistics.median(per["ctypes clcrt_run"])
    rows = []
    for n, v in per.items():
        med = statistics.median(v)
        rows.append({"name": n, "median_us": med, "min_us": min(v), "max_us": max(v)})
        print("  %-28s %7.3f  (min %.3f, max %.3f)  %+7.3f vs bare ctypes clcrt_run" % (n, med, min(v), max(v), med - base))
    m = {n: statistics.median(v) for n, v in per.items()}
    g, gn, kr, fl = m["clcrt.ops.gemm(a, w, out=o)"], m["clcrt.ops.gemm(a, w)"], m["clcrt k.run(args)"], m["F.linear(a, w)"]
    print("clcrt.ops.gemm is %s" % ("the C function (clcrt._fastops.gemm)" if clcrt.ops.gemm is not clcrt.ops._gemm_py
                                     else "the Python function"))
    print("gemm op: with out %.3f us = k.run %+.3f us, %.2fx F.linear; without out %.3f us = k.run %+.3f us, %.2fx "
          "F.linear (targets: at most k.run + 2 us and 0.6x F.linear)" % (g, g - kr, g / fl, gn, gn - kr, gn / fl))
    # The same comparisons round by round: each round times every contender once, so the median
    # of the rounds' differences leaves out the host's drift from round to round, which moves
    # every contender of a round alike (the figures above are medians taken apart).
    def paired(n, ref, ratio=False):
        return statistics.median((x / y if ratio else x - y) for x, y in zip(per[n], per[ref]))

    go_n, gn_n = "clcrt.ops.gemm(a, w, out=o)", "clcrt.ops.gemm(a, w)"
    pg, pgn = paired(go_n, "clcrt k.run(args)"), paired(gn_n, "clcrt k.run(args)")
    rg, rgn = paired(go_n, "F.linear(a, w)", True), paired(gn_n, "F.linear(a, w)", True)
    print("gemm op, paired round by round: with out k.run %+.3f us, %.2fx F.linear; without out k.run %+.3f us, %.2fx "
          "F.linear" % (pg, rg, pgn, rgn))
    out = {"device": dev, "python": sys.version.split()[0], "torch": torch.__version__, "rounds": o.rounds,
           "batch": o.batch, "sched": o.sched, "rows": rows,
           "paired": {"out_minus_krun_us": pg, "alloc_minus_krun_us": pgn, "out_over_linear": rg,
                      "alloc_over_linear": rgn}}
    if o.leak:
        gc.collect()
        before = rss()
        for i in range(o.leak):
            go()
        torch.cuda.synchronize()
        gc.collect()
        after = rss()
        print("leak check: %d runs, RSS %d KiB before, %d KiB after (%+d KiB)" % (o.leak, before >> 10, after >> 10,
                                                                                  (after - before) >> 10))
        out["leak"] = {"runs": o.leak, "rss_before": before, "rss_after": after}
    if o.json:
        with open(o.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
