#!/usr/bin/env python3
"""Many short processes that use clcrt from PyTorch and exit, counting the crashes and hangs.

    python3 python/tests/exit_stress.py [--per-kind N] [--jobs J] [--kinds a,b,...]

Each kind ends a process in a way Python's exit can meet clcrt's state:

  ops       clcrt.ops.gemm a few times (a stream-K shape among them), then a normal exit
  inflight  large GEMMs enqueued and the process exits while they run
  yield     STEAL runs on a stream below another stream's priority (which starts background
            builds of the yielding variants), exit at once: builds in flight at exit
  gc        runtimes, streams and kernels dropped and collected while torch objects remain
  child     a torch.multiprocessing (spawn) child does what `ops` does; both exit

A run passes when every process exits 0 within its timeout. test_gpu_exit.py runs a few of
each; this script runs hundreds (the note of the change that made exit safe cites its counts).
"""

import argparse
import collections
import concurrent.futures
import os
import subprocess
import sys
import tempfile

KINDS = {
    "ops": r"""
import torch, clcrt
a = torch.randn(64, 4096, device="cuda").to(torch.bfloat16)
b = torch.randn(2048, 4096, device="cuda").to(torch.bfloat16)
for _ in range(3):
    y = clcrt.ops.gemm(a, b)
y2 = clcrt.ops.gemm(torch.randn(1, 1024, device="cuda").to(torch.bfloat16), b[:, :1024])
""",
    "inflight": r"""
import torch, clcrt
a = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
for _ in range(10):
    y = clcrt.ops.gemm(a, a)
""",
    "yield": r"""
import torch, clcrt
SRC = '''struct A { float *x; long n; };
__device__ void t(const clcrt::Tile &t, const A &a) {
  long i = (long)t.linear * blockDim.x + threadIdx.x;
  if (i < a.n) a.x[i] += 1.0f;
}'''
class A(clcrt.Args):
    x: clcrt.ptr("float32")
    n: clcrt.i64
rt = clcrt.runtime(0)
lo = rt.stream(priority=0)
hi = rt.stream(priority=1)
x = torch.zeros(1 << 22, device="cuda")
ks = [rt.register(SRC.replace("1.0f", "%d.0f" % i), "t", A, block=256, sched="steal") for i in range(4)]
for k in ks:
    k.run((x.numel() + 255) // 256, A(x, x.numel()), stream=lo)
a = torch.randn(512, 4096, device="cuda").to(torch.bfloat16)
clcrt.ops.gemm(a, a, stream=lo)
""",
    "gc": r"""
import gc, torch, clcrt
for i in range(3):
    rt = clcrt.Runtime(0)
    s = rt.stream()
    ext = torch.cuda.ExternalStream(s.handle)
    a = torch.randn(256, 512, device="cuda").to(torch.bfloat16)
    with torch.cuda.stream(ext):
        y = clcrt.ops.gemm(a, a, stream=s)
    del rt, s
    gc.collect()
z = clcrt.ops.gemm(a, a)
""",
    "child": r"""
import torch, torch.multiprocessing as mp, clcrt
def child(i):
    import torch, clcrt
    a = torch.randn(64, 4096, device="cuda").to(torch.bfloat16)
    for _ in range(3):
        clcrt.ops.gemm(a, a[:2048])
if __name__ == "__main__":
    mp.spawn(child, nprocs=1, join=True)
    a = torch.randn(64, 512, device="cuda").to(torch.bfloat16)
    clcrt.ops.gemm(a, a)
""",
}


def one(kind, timeout, folder):
    # A file, not -c: a spawned child imports the parent's main module to find its function.
    path = os.path.join(folder, "exit_%s.py" % kind)
    try:
        p = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=timeout)
        return kind, p.returncode, p.stderr[-600:]
    except subprocess.TimeoutExpired:
        return kind, "timeout", ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-kind", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--timeout", type=float, default=120)
    o = ap.parse_args(argv)
    kinds = o.kinds.split(",")
    runs = [k for k in kinds for _ in range(o.per_kind)]
    counts = collections.Counter()
    bad = collections.Counter()
    samples = {}
    folder = tempfile.mkdtemp(prefix="clcrt-exit-")
    for k in kinds:
        with open(os.path.join(folder, "exit_%s.py" % k), "w") as f:
            f.write(KINDS[k])
    with concurrent.futures.ThreadPoolExecutor(o.jobs) as ex:
        for kind, rc, err in ex.map(lambda k: one(k, o.timeout, folder), runs):
            counts[kind] += 1
            if rc != 0:
                bad[kind] += 1
                samples.setdefault(kind, (rc, err))
    for k in kinds:
        print("exit_stress: %-9s %4d processes, %d failed" % (k, counts[k], bad[k]))
    for k, (rc, err) in samples.items():
        print("exit_stress: %s: exit %s; stderr ends:\n%s" % (k, rc, err))
    total = sum(counts.values())
    print("exit_stress: %d processes, %d crashed or hung" % (total, sum(bad.values())))
    return 1 if sum(bad.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
