#!/usr/bin/env python3
"""clcrt.ops.gemm against the C GEMM example and torch.matmul, same process for the Python
contenders, same method for all: 20 back-to-back runs between two CUDA events, after a
warm-up; the median over --rounds of the time per run.

    python3 python/bench/gemm.py [--sizes 4096,8192] [--rounds 5] [--c-binary build/examples/gemm/gemm]

--c-binary runs the C example (`gemm M N K`, which times 20 runs with events the same way)
for each size and reads its "ms per run" line, so the table puts the C GEMM's time beside
ops.gemm's (the target: within 2% at 4096^3 and 8192^3).
"""

import argparse
import re
import statistics
import subprocess

import torch

import clcrt


def timed(fn, runs=20):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(runs):
        fn()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) / runs


def c_time(binary, n):
    out = subprocess.run([binary, str(n), str(n), str(n)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"([0-9.]+) ms per run", out)
    ok = "check: ok" in out
    return (float(m.group(1)) if m else None), ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--c-binary")
    o = ap.parse_args()
    print("%s, torch %s, clcrt %s; ms per run (median of %d rounds of 20)" % (
        torch.cuda.get_device_name(), torch.__version__, clcrt.__version__, o.rounds))
    for n in map(int, o.sizes.split(",")):
        a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
        b = torch.randn(n, n, device="cuda").to(torch.bfloat16)
        out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        clcrt.ops.gemm(a, b, out=out)  # compile, load, workspace
        ref = torch.matmul(a, b.T)
        err = (out.float() - ref.float()).abs().max().item()
        rows = {"clcrt.ops.gemm": lambda: clcrt.ops.gemm(a, b, out=out), "torch.matmul(a, b.T)": lambda: torch.matmul(a, b.T)}
        res = {k: statistics.median(timed(f) for _ in range(o.rounds)) for k, f in rows.items()}
        if o.c_binary:
            ts = [c_time(o.c_binary, n) for _ in range(o.rounds)]
            res["C examples/gemm"] = statistics.median(t for t, _ in ts)
            if not all(ok for _, ok in ts):
                print("  (the C example's check failed)")
        flop = 2.0 * n * n * n
        print("%d^3 (max |ops.gemm - torch| = %.3g):" % (n, err))
        for k, ms in res.items():
            rel = " (%+.2f%% vs C)" % ((res["clcrt.ops.gemm"] / res["C examples/gemm"] - 1) * 100) \
                if k == "clcrt.ops.gemm" and "C examples/gemm" in res else ""
            print("  %-22s %8.3f ms  %6.1f TFLOP/s%s" % (k, ms, flop / ms / 1e9, rel))


if __name__ == "__main__":
    main()
