#!/usr/bin/env python3
"""Compares two bench_gemm --json files (before, after) row by row: each clcrt contender's
ratio to cuBLAS in both, the after/before quotient per row, its geometric mean and worst, and
every row that lost more than 3%. Usage: scripts/bench_gemm_compare.py BEFORE.json AFTER.json"""
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


def main():
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
