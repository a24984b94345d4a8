#!/usr/bin/env python3
"""The README's example in Python: scale a vector with a tile function, on a torch tensor,
on torch's current stream, under every scheduler the GPU has; checked against torch.

    python3 python/examples/scale.py
"""

import sys

import clcrt

SRC = """
struct ScaleArgs { float *x; long n; float alpha; };
__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {
  long i = (long)t.linear * blockDim.x + threadIdx.x;
  if (i < a.n) a.x[i] *= a.alpha;
}
"""


class ScaleArgs(clcrt.Args):  # the device struct, field for field (checked when registering)
    x: clcrt.ptr("float32")
    n: clcrt.i64
    alpha: clcrt.f32


def main():
    try:
        import torch
    except ImportError:
        print("scale.py: needs PyTorch for its tensors")
        return 0
    if not torch.cuda.is_available():
        print("scale.py: no GPU; compiling only:")
        with clcrt.Runtime(arch="sm_90a") as rt:
            k = rt.register(SRC, "scale_tile", ScaleArgs, block=256)
            i = k.info
            print("  %s for %s: %d registers, compiled in %.0f ms" % (i.name, i.arch, i.registers, i.compile_ms))
        return 0
    rt = clcrt.Runtime()  # device 0: sched AUTO is CLC on sm_100+, STEAL on sm_90
    n = 1 << 24
    scheds = ["auto", "steal", "static", "fixed"] + (["clc"] if int(rt.arch[3:].rstrip("af")) >= 100 else [])
    for sched in scheds:
        k = rt.register(SRC, "scale_tile", ScaleArgs, block=256, sched=sched)
        x = torch.rand(n, device="cuda")
        ref = x * 1.5
        k.run((n + 255) // 256, ScaleArgs(x, n, 1.5))  # asynchronous, on torch's current stream
        ok = torch.equal(x, ref)  # torch's next op orders after it: no synchronisation needed
        print("%-7s %s: %s" % (sched, k.info.name, "ok" if ok else "WRONG"))
        if not ok:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
