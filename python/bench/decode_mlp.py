#!/usr/bin/env python3
"""The decode MLP block as one task graph against the same tile functions launched one by one,
the same in a CUDA graph, torch eager and torch in a CUDA graph, in one process.

    python3 python/bench/decode_mlp.py [--batches 1,4,16] [--models 1b,8b] [--rounds 15] [--json F]

The block (python/examples/decode_mlp.py): RMSNorm -> gate/up projection, SiLU x up -> down
projection + residual, bf16, weights of a public 1B-class model (hidden 2048, intermediate 8192)
and an 8B-class one (4096, 14336). Bytes first: the block reads its weights once, 3 x H x I x 2
bytes (100.7 MB and 352.3 MB), against which activations are negligible at these batches; so
the figure of merit is those bytes over the time, next to the read bandwidth this process
measures on the same GPU (a sum over 2 GiB). Every contender's output is checked against torch
in fp32 first (inputs are random, never zeros).

Timing (docs/results.md, "Method"): each contender is warmed up, then each round times 50 calls
back to back between two CUDA events, contenders in a rotating order within the round; the
figure is the median over rounds of the time per call. Back to back is how a decode loop runs
them: host time counts where the host cannot keep ahead of the GPU (torch eager's five
launches), which is part of what a task graph saves.
"""

import argparse
import importlib.util
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("decode_mlp", os.path.join(HERE, "..", "examples", "decode_mlp.py"))
mlpmod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mlpmod)

MODELS = {"1b": (2048, 8192), "8b": (4096, 14336)}


def read_bandwidth(dev, rounds):
    """Bytes per second of a sum over 2 GiB of bf16 (a read of each byte once)."""
    x = torch.randn(1 << 30, device=dev).to(torch.bfloat16)
    for _ in range(3):
        x.sum()
    ts = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(5):
            x.sum()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 5 / 1e3)
    del x
    return (2 << 30) / statistics.median(ts)


def contenders(mlp, x, out, norm_w, wgu, wd, eps, variants=()):
    inter = wd.shape[1]

    def torch_eager():
        xn = F.rms_norm(x, (x.shape[1],), norm_w, eps)
        gu = F.linear(xn, wgu)
        h = F.silu(gu[:, :inter]) * gu[:, inter:]
        torch.add(F.linear(h, wd), x, out=out)

    def captured(fn):
        fn()
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # torch's own warm-up on a side stream, as its docs ask
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        return g.replay

    persistent = mlpmod.DecodeMLP(norm_w, wgu, wd, grid="persistent", slices_per_sm=mlp.slices_per_sm, rt=mlp.rt)
    persistent.prepare()
    keep = [persistent]
    c = {
        "clcrt task graph": lambda: mlp.run_graph(x, out),
        "clcrt task graph, persistent grid": lambda: persistent.run_graph(x, out),
        "clcrt nodes one by one": lambda: mlp.run_nodes(x, out),
        "clcrt nodes in a CUDA graph": captured(lambda: mlp.run_nodes(x, out)),
        "clcrt nodes in a CUDA graph, PDL": captured(lambda: mlp.run_nodes(x, out, pdl=True)),
        "clcrt task graph in a CUDA graph": captured(lambda: mlp.run_graph(x, out)),
        "clcrt task graph, PDL": lambda: mlp.run_graph(x, out, pdl=True),
        "clcrt task graph in a CUDA graph, PDL": captured(lambda: mlp.run_graph(x, out, pdl=True)),
        "torch eager": torch_eager,
        "torch in a CUDA graph": captured(torch_eager),
    }
    for spec in variants:  # DecodeMLP built otherwise ("min_blocks_per_sm=3"): graph and nodes
        kw = {"slices_per_sm": mlp.slices_per_sm}
        for item in spec.split(","):
            key, val = item.split("=")
            kw[key] = float(val) if key == "slices_per_sm" else int(val) if val.lstrip("-").isdigit() else val
        m = mlpmod.DecodeMLP(norm_w, wgu, wd, rt=mlp.rt, **kw)
        m.prepare()
        keep.append(m)
        c["clcrt task graph, %s" % spec] = (lambda m: lambda: m.run_graph(x, out))(m)
        c["clcrt task graph, PDL, %s" % spec] = (lambda m: lambda: m.run_graph(x, out, pdl=True))(m)
        c["clcrt nodes in a CUDA graph, %s" % spec] = captured((lambda m: lambda: m.run_nodes(x, out))(m))
    return c, keep


def measure(fns, rounds, calls):
    names = list(fns)
    for n in names:
        for _ in range(5):
            fns[n]()
    torch.cuda.synchronize()
    ts = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(calls):
                fns[n]()
            b.record()
            b.synchronize()
            ts[n].append(a.elapsed_time(b) / calls * 1e3)  # us per call
    return {n: statistics.median(v) for n, v in ts.items()}


def trace_once(mlp, x, out, path):
    """One traced run of the task graph: per node, the span of its tiles and their waits."""
    names = [n.tile_fn for n in mlp.graph_nodes]
    mlp.graph.trace_enable(1 << 14)
    mlp.run_graph(x, out)
    t = mlp.graph.trace_read()
    mlp.graph.trace_enable(0)
    recs = t.records
    t.save(path)
    t0 = min(r.start_ns for r in recs)
    for node, name in enumerate(names):
        run = [r for r in recs if r.unit == node and not r.flags & 2]
        wait = [r for r in recs if r.unit == node and r.flags & 2]
        if not run:
            continue
        busy = sum(r.end_ns - r.start_ns for r in run)
        waited = sum(r.end_ns - r.start_ns for r in wait)
        print("  trace %-9s %4d tiles, %6.1f .. %6.1f us, tile mean %5.1f us, waits %4d (mean %5.1f us)" %
              (name, len(run), (min(r.start_ns for r in run) - t0) / 1e3, (max(r.end_ns for r in run) - t0) / 1e3,
               busy / len(run) / 1e3, len(wait), waited / max(1, len(wait)) / 1e3))
    print("  trace: %s" % path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", default="1,4,16")
    p.add_argument("--models", default="1b,8b")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--json")
    p.add_argument("--slices-per-sm", type=float, default=1, help="down-projection tiles per SM, which sets the K "
                   "slices (default 1)")
    p.add_argument("--variant", action="append", default=[], help="also the graph and the nodes of a DecodeMLP "
                   "built with these keywords, e.g. min_blocks_per_sm=3, sched=static,grid=persistent or "
                   "stream=regs (repeatable)")
    p.add_argument("--trace", metavar="PREFIX", help="also trace one task-graph run per shape: PREFIX-MODEL-bB.json "
                   "(Perfetto) and a line per node: when its tiles ran and how long they waited")
    o = p.parse_args()
    if not torch.cuda.is_available():
        print("decode_mlp: no GPU")
        return 2
    dev = torch.device("cuda", 0)
    name = torch.cuda.get_device_name(dev)
    bw = read_bandwidth(dev, o.rounds)
    print("%s: read bandwidth (sum over 2 GiB, this process) %.2f TB/s" % (name, bw / 1e12))
    rows, wrong = [], 0
    eps = 1e-5
    for model in o.models.split(","):
        hidden, inter = MODELS[model]
        norm_w, wgu, wd = mlpmod.weights(hidden, inter, dev)
        wbytes = 3 * hidden * inter * 2
        mlp = mlpmod.DecodeMLP(norm_w, wgu, wd, eps=eps, slices_per_sm=o.slices_per_sm)
        mlp.prepare()
        for batch in [int(b) for b in o.batches.split(",")]:
            x = torch.randn(batch, hidden, device=dev).to(torch.bfloat16)
            out = torch.empty_like(x)
            ref = mlpmod.reference(x, norm_w, wgu, wd, eps)
            fns, keep = contenders(mlp, x, out, norm_w, wgu, wd, eps, o.variant)
            errs = {}
            for n, fn in fns.items():
                out.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                errs[n] = mlpmod.rel_err(out, ref)
                if not errs[n] < 2e-2:
                    wrong += 1
                    print("WRONG: %s, %s batch %d: error %.3g" % (n, model, batch, errs[n]))
            us = measure(fns, o.rounds, o.calls)
            base = us["torch in a CUDA graph"]
            print("\n%s (hidden %d, intermediate %d, %d K slices, stream=%s, %s), batch %d: "
                  "%.1f MB of weights" % (model, hidden, inter, mlp.slices, mlp.stream, mlp.gu_desc, batch,
                                          wbytes / 1e6))
            print("| contender | us per block | x torch graph | weights GB/s | of read bw | max error |")
            print("|---|---|---|---|---|---|")
            for n in fns:
                gbs = wbytes / (us[n] * 1e-6) / 1e9
                print("| %s | %.1f | %.2f | %.0f | %.0f%% | %.1e |" % (n, us[n], base / us[n], gbs,
                                                                       100 * gbs * 1e9 / bw, errs[n]))
                rows.append({"model": model, "hidden": hidden, "inter": inter, "batch": batch, "contender": n,
                             "us": us[n], "x_torch_graph": base / us[n], "weights_gbs": gbs,
                             "of_read_bw": gbs * 1e9 / bw, "max_rel_err": errs[n], "slices": mlp.slices,
                             "stream": mlp.stream, "gate_up_tiles": mlp.gu_desc, "min_blocks_per_sm": mlp.min_blocks_per_sm})
            if o.trace:
                trace_once(mlp, x, out, "%s-%s-b%d.json" % (o.trace, model, batch))
            del keep
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"gpu": name, "read_bw": bw, "rows": rows, "wrong": wrong}, f, indent=1)
    print("\ndecode_mlp: %d wrong" % wrong)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
