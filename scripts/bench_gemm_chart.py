#!/usr/bin/env python3
"""Draws the GEMM benchmark JSON (bench_gemm --json FILE) as a PNG.

One column per section (dense; grouped when present). Top row: TFLOP/s of cuBLAS and of
clcrt's best variant under each scheduler, per shape. Bottom row: the same as a ratio to
cuBLAS (cuBLAS time / clcrt time; above 1 is faster), with the issue's targets drawn in.
Only rows whose output matched cuBLAS ("ok") are drawn.

Usage: scripts/bench_gemm_chart.py BENCH-GEMM.json OUT.png   (needs matplotlib)
scripts/bench_chart.py hands GEMM files (\"bench\": \"gemm\") to this script's draw()."""
import json
import sys

SCHEDS = ["steal", "static", "fixed"]
COLORS = {"cublas": "#888888", "steal": "#1f77b4", "static": "#ff7f0e", "fixed": "#2ca02c",
          "cublas-loop": "#888888", "cublas-grouped": "#444444"}


def best_rows(rows):
    """Per shape, in order of appearance: {contender: best ok row (by TFLOP/s)}."""
    shapes, best = [], {}
    for r in rows:
        if not r.get("ok", True) or "tflops" not in r:
            continue
        key = r["shape"]
        if key not in best:
            shapes.append(key)
            best[key] = {}
        c = r["contender"]
        if c not in best[key] or r["tflops"] > best[key][c]["tflops"]:
            best[key][c] = r
    return shapes, best


def series(rows, references):
    """The bars of one section: shapes, and per contender a list of (tflops, ratio, label)."""
    shapes, best = best_rows(rows)
    out = {}
    for c in references + SCHEDS:
        vals = []
        for s in shapes:
            r = best[s].get(c)
            if r is None:
                vals.append((0.0, 0.0, ""))
            else:
                ratio = r.get("ratio_to_cublas", r.get("ratio_to_ref", 0.0))
                vals.append((r["tflops"], ratio, r.get("variant", "")))
        if any(v[0] for v in vals):
            out[c] = vals
    return shapes, out


def draw(data, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = data["results"]
    sections = []
    for name, refs in (("dense", ["cublas"]), ("grouped", ["cublas-loop", "cublas-grouped"])):
        rows = [r for r in results if r.get("section") == name]
        if rows:
            sections.append((name, refs, rows))
    if not sections:
        raise SystemExit("no dense or grouped rows in the file")
    width = max(8, 1.1 * max(len(best_rows(rows)[0]) for _, _, rows in sections))
    fig, axes = plt.subplots(2, len(sections), figsize=(width * len(sections), 8), squeeze=False)
    for col, (name, refs, rows) in enumerate(sections):
        shapes, ser = series(rows, refs)
        n = max(1, len(ser))
        w = 0.8 / n
        top, bottom = axes[0][col], axes[1][col]
        for i, (c, vals) in enumerate(ser.items()):
            xs = [x + (i - (n - 1) / 2) * w for x in range(len(shapes))]
            top.bar(xs, [v[0] for v in vals], w, label=c, color=COLORS.get(c, None))
            if c in SCHEDS:
                bottom.bar(xs, [v[1] for v in vals], w, label=c, color=COLORS.get(c, None))
        top.set_ylabel("TFLOP/s")
        top.set_title(f"{name}: cuBLAS and clcrt's best variant per scheduler")
        top.legend(fontsize=8)
        bottom.axhline(1.0, color="k", lw=0.8)
        if name == "dense":
            bottom.axhline(0.9, color="r", lw=0.8, ls="--", label="target 0.90x")
            bottom.axhline(0.85, color="r", lw=0.6, ls=":", label="floor 0.85x")
        else:
            bottom.axhline(1.2, color="r", lw=0.8, ls="--", label="target 1.2x loop")
        bottom.set_ylabel("cuBLAS time / clcrt time")
        bottom.legend(fontsize=8)
        for ax in (top, bottom):
            ax.set_xticks(range(len(shapes)))
            ax.set_xticklabels(shapes, rotation=30, ha="right", fontsize=7)
    fig.suptitle(f"clcrt bf16 GEMM on {data['device']} ({data['arch']}, {data['sms']} SMs), {data.get('date', '')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    draw(json.load(open(sys.argv[1])), sys.argv[2])


if __name__ == "__main__":
    main()
