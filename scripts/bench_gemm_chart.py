#!/usr/bin/env python3
"""Draws the GEMM benchmark JSON (bench_gemm --json FILE) as a PNG.

Dense: per shape, the default's ratio to cuBLAS (cuBLAS time / clcrt time; above 1 is faster)
in the figure the targets use (back to back for shapes under 100 us, the interleaved rounds
otherwise; files from before that figure existed: the rounds) beside the oracle's (the best
contender of the rounds), the 0.9x target drawn in. Grouped:
per problem, each contender's speed-up over the per-expert cuBLAS loop (best variant), with
the 1.2x target. Only rows whose output matched the reference ("ok") are drawn.

Usage: scripts/bench_gemm_chart.py BENCH-GEMM.json OUT.png   (needs matplotlib)
scripts/bench_chart.py hands GEMM files (\"bench\": \"gemm\") to this script's draw()."""
import json
import sys

COLORS = {"cublas": "#888888", "steal": "#1f77b4", "static": "#ff7f0e", "fixed": "#2ca02c",
          "cublas-loop": "#888888", "cublas-grouped": "#444444", "masked-graph": "#9467bd"}


def draw(data, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = data["results"]
    dense = [r for r in results if r.get("section") == "dense-summary"]
    grouped = [r for r in results if r.get("section") == "grouped" and r.get("ok", True)]
    panels = (1 if dense else 0) + (1 if grouped else 0)
    if not panels:
        raise SystemExit("no dense-summary or grouped rows in the file")
    width = max(10, 0.28 * max(len(dense), 12))
    fig, axes = plt.subplots(panels, 1, figsize=(width, 5 * panels), squeeze=False)
    row = 0
    if dense:
        ax = axes[row][0]
        row += 1
        xs = range(len(dense))
        # The default's figure the targets use (back to back for short shapes) where the file has it.
        default = [r.get("target_ratio", r["default_ratio"]) for r in dense]
        ax.bar([x - 0.2 for x in xs], default, 0.4, label="default (clcrt_gemm)", color="#1f77b4")
        ax.bar([x + 0.2 for x in xs], [r["oracle_ratio"] for r in dense], 0.4, label="oracle (best of the rounds)",
               color="#aec7e8")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(0.9, color="r", lw=0.8, ls="--", label="target 0.90x")
        ax.set_ylim(0, min(2.0, max(max(default), max(r["oracle_ratio"] for r in dense)) * 1.05))
        ax.set_ylabel("cuBLAS time / clcrt time")
        ax.set_title("dense: the plan a user gets, and the best of every candidate (clipped at 2x)")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f'{r["class"]} {r["label"]} {r["shape"]}' for r in dense], rotation=60, ha="right",
                           fontsize=6)
        ax.legend(fontsize=8)
    if grouped:
        ax = axes[row][0]
        shapes, best = [], {}
        for r in grouped:
            if r["shape"] not in best:
                shapes.append(r["shape"])
                best[r["shape"]] = {}
            c = r["contender"]
            if c not in best[r["shape"]] or r["ratio_to_loop"] > best[r["shape"]][c]:
                best[r["shape"]][c] = r["ratio_to_loop"]
        conts = ["cublas-grouped", "steal", "static", "fixed", "masked-graph"]
        w = 0.8 / len(conts)
        for i, c in enumerate(conts):
            ax.bar([x + (i - (len(conts) - 1) / 2) * w for x in range(len(shapes))],
                   [best[s].get(c, 0.0) for s in shapes], w, label=c, color=COLORS.get(c, None))
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(1.2, color="r", lw=0.8, ls="--", label="1.2x loop (experts <= 256 rows)")
        ax.set_ylabel("per-expert cuBLAS loop time / contender time")
        ax.set_title("grouped (MoE): best variant per contender")
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels(shapes, rotation=30, ha="right", fontsize=7)
        ax.legend(fontsize=8)
    fig.suptitle(f"clcrt bf16 GEMM on {data['device']} ({data['arch']}, {data['sms']} SMs), {data.get('date', '')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    draw(json.load(open(sys.argv[1])), sys.argv[2])


if __name__ == "__main__":
    main()
