#!/usr/bin/env python3
"""Register a tile function, run it on a tensor, save its timeline trace and draw it.

    python3 python/examples/trace_demo.py [OUT_DIR]

Writes OUT_DIR/trace.json (open it in https://ui.perfetto.dev) and OUT_DIR/trace.png (drawn
by the clcrt tool the wheel bundles), and prints the trace's summary. Tiles of uneven cost
(tile i spins i % 64 units of time) show how STEAL hands the slow SMs' work to the others.
Without a GPU it makes the same files from a synthetic trace.
"""

import os
import random
import sys

import clcrt

SRC = """
struct SpinArgs { float *x; unsigned n; unsigned spin; };
__device__ void spin_tile(const clcrt::Tile &t, const SpinArgs &a) {
  unsigned i = t.linear * blockDim.x + threadIdx.x;
  float v = i < a.n ? a.x[i] : 0.f;
  for (unsigned k = 0; k < (t.linear % 64) * a.spin; k++) v = v * 0.999f + 1.f;
  if (i < a.n) a.x[i] = v;
}
"""


class SpinArgs(clcrt.Args):
    x: clcrt.ptr("float32")
    n: clcrt.u32
    spin: clcrt.u32


def synthetic():
    """A made-up trace of 132 SMs, for machines without a GPU."""
    rng = random.Random(1)
    recs, t_sm = [], [0] * 132
    for tile in range(2000):
        sm = min(range(132), key=t_sm.__getitem__)
        dur = 1000 + (tile % 64) * 200 + rng.randrange(300)
        recs.append(clcrt.Record(t_sm[sm], t_sm[sm] + dur, tile, tile, sm, 0, sm, 0, 1 if tile >= 132 else 0))
        t_sm[sm] += dur
    return clcrt.Trace.from_records(recs)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if gpu:
        rt = clcrt.Runtime()
        k = rt.register(SRC, "spin_tile", SpinArgs, block=128, sched="steal")
        n = 128 * 4096
        x = torch.zeros(n, device="cuda")
        s = rt.stream()  # a stream of its own: the trace is this stream's runs
        s.trace_enable(1 << 20)
        torch.cuda.synchronize()  # x is ready before s starts
        k.run(n // 128, SpinArgs(x, n, 40), stream=s)
        trace = s.trace_read()  # synchronises s
        s.trace_disable()
    else:
        print("trace_demo.py: no GPU (or no PyTorch): a synthetic trace instead")
        trace = synthetic()
    trace.save(os.path.join(out, "trace.json"))
    png = trace.draw(os.path.join(out, "trace.png"))
    s = trace.summary()
    print("%d tiles on %d SMs, %d stolen; span %.1f us, tail %.1f us, imbalance %.3f, mean busy %.1f%%"
          % (s.tiles, s.num_sms, s.steals, s.span_ns / 1e3, s.tail_ns / 1e3, s.imbalance, 100 * s.busy_mean))
    print("wrote %s and %s" % (os.path.join(out, "trace.json"), png))
    return 0


if __name__ == "__main__":
    sys.exit(main())
