#!/usr/bin/env python3
"""Draws the benchmark JSON (bench --json FILE) as a PNG: one panel per workload, bars of
each contender's ratio to the best reference kernel (above 1 is faster), grouped by tile
size / cluster size. Usage: scripts/bench_chart.py BENCH.json OUT.png (needs matplotlib).
GEMM files (bench_gemm --json, "bench": "gemm") are drawn by scripts/bench_gemm_chart.py."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    data = json.load(open(sys.argv[1]))
    if data.get("bench") == "gemm":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import bench_gemm_chart

        bench_gemm_chart.draw(data, sys.argv[2])
        return
    rows = [r for r in data["results"] if r.get("contender") not in (None, "copy") and "ratio_to_best_ref" in r]
    panels = []
    for r in rows:
        key = (r["workload"], r["param"])
        if key not in panels:
            panels.append(key)
    ncols = min(4, len(panels))
    nrows = (len(panels) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 4.2 * nrows), sharey=True, squeeze=False)
    axes = axes.flatten()
    for ax in axes[len(panels):]:
        ax.axis("off")
    contenders = ["ref-block", "ref-persist", "steal", "steal-persist", "steal-full", "static", "fixed"]
    for ax, (w, p) in zip(axes, panels):
        sub = [r for r in rows if r["workload"] == w and r["param"] == p]
        labels, vals = [], []
        for c in contenders:
            for cl in (1, 2, 4):
                m = [r for r in sub if r["contender"] == c and r["cluster"] == cl]
                if m:
                    labels.append(c if c.startswith("ref") else f"{c} c{cl}")
                    vals.append(m[0]["ratio_to_best_ref"])
        colors = ["#888" if lbl.startswith("ref") else "#1f77b4" if "steal" in lbl else "#ff7f0e" for lbl in labels]
        ax.bar(range(len(vals)), vals, color=colors)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(range(len(vals)))
        ax.set_xticklabels(labels, rotation=90, fontsize=7)
        ax.set_title(f"{w} {p}" if p != "-" else w)
    for i in range(0, len(panels), ncols):
        axes[i].set_ylabel("best reference time / contender time")
    fig.suptitle(f"clcrt schedulers on {data['device']} ({data['arch']}, {data['sms']} SMs)")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
