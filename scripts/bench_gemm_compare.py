#!/usr/bin/env python3
"""Compares bench_gemm --json files of a before and an after.

    scripts/bench_gemm_compare.py BEFORE.json AFTER.json
        row by row: each clcrt contender's ratio to cuBLAS in both (rows match on their shape,
        contender and variant), the after/before quotient per row, its geometric mean and worst,
        and every row that lost more than 3%.
    scripts/bench_gemm_compare.py --plans BEFORE.json[,BEFORE2.json...] AFTER.json[,AFTER2.json...]
        a change of the default plan: per shape of the dense summaries, the geometric mean over
        the runs of its target figure (back to back or rounds, as the benchmark judges it); the
        shapes whose default plan differs, with after/before, their geometric mean and how many
        went each way; and the same over the shapes that kept their plan, the run-to-run control.
        Alternate the two binaries in one device call (old, new, old, new) and pass both runs."""
import json
import math
import sys


def rows(path):
    with open(path) as f:
        d = json.load(f)
    out = {}
    for r in d.get("results", []):
        if r.get("section") not in ("dense", "grouped") or r.get("contender") in ("cublas", None) or "ratio_to_cublas" not in r:
            continue
        key = (r["section"], r.get("class", ""), r.get("shape", r.get("label", "")), r["contender"], r.get("variant", ""),
               r.get("sched", ""))
        out[key] = r["ratio_to_cublas"]
    return out


def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def summaries(paths):
    """(class, shape) -> (default plan of the first run, geo-mean target ratio, geo-mean rounds ratio)."""
    runs = []
    for p in paths.split(","):
        with open(p) as f:
            d = json.load(f)
        runs.append({(r["class"], r["shape"]): r for r in d.get("results", []) if "target_ratio" in r and "default" in r})
    keys = set(runs[0]).intersection(*runs[1:])
    return {k: (runs[0][k]["default"], geo([r[k]["target_ratio"] for r in runs]), geo([r[k]["default_ratio"] for r in runs]))
            for k in keys if all(r[k]["target_ratio"] > 0 and r[k]["default_ratio"] > 0 for r in runs)}


def plans(before, after):
    b, a = summaries(before), summaries(after)
    keys = sorted(k for k in a if k in b)
    changed = [k for k in keys if a[k][0] != b[k][0]]
    kept = [k for k in keys if a[k][0] == b[k][0]]
    if not keys:
        print("no shapes in common")
        return 1
    for k in sorted(changed, key=lambda k: a[k][1] / b[k][1]):
        print("  %.3f  %-8s %-18s %-30s -> %-30s target %.3f -> %.3f  rounds %.3f -> %.3f" %
              (a[k][1] / b[k][1], k[0], k[1], b[k][0], a[k][0], b[k][1], a[k][1], b[k][2], a[k][2]))
    if changed:
        q = [a[k][1] / b[k][1] for k in changed]
        print("%d of %d shapes changed plan: after/before geomean %.3f (target figure), %d faster, %d slower, worst %.3f" %
              (len(changed), len(keys), geo(q), sum(x > 1 for x in q), sum(x < 1 for x in q), min(q)))
    else:
        print("no shape of %d changed plan" % len(keys))
    if kept:
        q = [a[k][1] / b[k][1] for k in kept]
        print("%d kept their plan: after/before geomean %.3f, range %.3f-%.3f (run to run)" % (len(kept), geo(q), min(q), max(q)))
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--plans":
        return plans(sys.argv[2], sys.argv[3])
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    b, a = rows(sys.argv[1]), rows(sys.argv[2])
    keys = [k for k in a if k in b and b[k] > 0]
    if not keys:
        print("no rows in common")
        return 1
    q = [(a[k] / b[k], k) for k in keys]
    g = math.exp(sum(math.log(x) for x, _ in q) / len(q))
    print("%d rows in common: after/before geomean %.3f, worst %.3f (%s)" % (len(q), g, min(q)[0], " ".join(min(q)[1])))
    for x, k in sorted(q)[:12]:
        if x < 0.97:
            print("  lost: %.3f  %s  (before %.3fx, after %.3fx cuBLAS)" % (x, " ".join(k), b[k], a[k]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
