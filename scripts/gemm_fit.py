#!/usr/bin/env python3
"""Calibrates the GEMM plan's cost model (ops/gemm_plan.h) from a tile-shape sweep.

    bench_gemm --wide --no-oracle [--class ...] --json sweep.json      (on the GPU)
    scripts/gemm_fit.py sweep.json [more.json ...] [--csv OUT.csv] [--fit] [--check OTHER.json]

Reads the sweep's "dense-wide" rows (every tile shape, whole and with the model's stream-K
tail, timed back to back beside cuBLAS), or a CSV this script wrote. Prints:
  - GEMM_KB_US, each tile shape's time per k-block with every SM busy: the median over the
    compute-bound shapes (M >= 1024, K >= 2048) of (time - 5 us) / (waves x k-blocks);
  - with --fit, the shared constants (GEMM_MODEL_H100), chosen by differential evolution to
    maximise the geo-mean, over shapes, of (best candidate's time / the model's pick's time),
    plus 0.3 x the mean of the five worst;
  - per class: the picks' ratio to cuBLAS (geo-mean of min(ratio, 1) and the worst) beside the
    best candidate's, for the constants in ops/gemm_plan.h (or the fitted ones).
--check evaluates the constants on another sweep (shapes the fit did not see). --scan-c2 V,V,...
reports the classes with GEMM_FIT_C2 (the per-wave cost of 2-CTA clusters) at each value, the
other constants held as the header has them (--fit leaves C2 as the header has it).
The model below is gemm_plan.h's, line for line; the test suite keeps the two in step
(tests/test_gemm.c, test_plan_model). As there (gemm_model_for), each row is costed with bw_mem
scaled by its device's peak memory bandwidth (the sweep row's mem_bw) over the H100's, so bw_mem,
fitted or not, stays the H100's whichever device swept; rows without mem_bw (sweeps before it
was recorded, all on H100s) scale by 1. Needs scipy (python3-scipy) for --fit only; --workers N
spreads it over N processes.
"""

import argparse
import collections
import csv
import gzip
import json
import math
import re
import statistics
import sys

FIELDS = ["class", "m", "n", "k", "variant", "trans", "bm", "bn", "cm", "stages", "sk_tiles", "sk_units", "b2b_ms",
          "cublas_b2b_ms", "mem_bw"]
H100_PEAK_BW = 2.0 * 2619e6 * (5120 / 8)  # gemm_plan.h's GEMM_H100_PEAK_BW
KEYS = ["t0", "first", "epi", "lat_mem", "lat_l2", "bw_mem", "bw_l2", "stream_rows", "rowk", "fx", "fx0", "fs"]
BOUNDS = [(0, 12), (0, 4), (0, 6), (0.5, 6), (0.05, 2), (1.5e6, 4e6), (3e6, 2e7), (1, 4), (0.3, 1.0), (0, 8),
          (0, 8), (0, 4)]


def cdiv(a, b):
    return (a + b - 1) // b


def bw_scale(mem_bw):
    """gemm_model_for's factor on bw_mem for a device of peak mem_bw bytes/s (0: the H100's)."""
    return min(max(mem_bw / H100_PEAK_BW, 0.25), 4.0) if mem_bw > 0 else 1.0


def load(paths):
    """The sweeps' rows by shape, transposed candidates ("trans": 1, timed for problems of at most
    256 rows) included; normal() leaves them out."""
    rows = []
    for p in paths:
        op = gzip.open if p.endswith(".gz") else open
        with op(p, "rt") as f:
            if ".csv" in p:
                for r in csv.DictReader(f):
                    rows.append({k: (r[k] if k in ("class", "variant") else float(r.get(k) or 0)) for k in FIELDS})
                continue
            for line in f:
                line = line.strip().rstrip(",")
                if line.startswith('{"section":"dense-wide"'):
                    rows.append(json.loads(line))
    by = collections.defaultdict(list)
    for r in rows:
        r["trans"] = int(float(r.get("trans") or 0))
        for k in ("m", "n", "k", "bm", "bn", "cm", "stages", "sk_tiles", "sk_units"):
            r[k] = int(r[k])
        r["mem_bw"] = float(r.get("mem_bw") or 0)
        # One shape measured on two devices (sweeps of an H100 and an H200 read together) is two
        # entries: a pick is compared with the candidates of its own device only.
        by[(r["m"], r["n"], r["k"], r["mem_bw"])].append(r)
    return by


def normal(by):
    """The normal orientation's rows: the model here costs only those (the plan takes transposed
    tiles for few rows by a rule, not by the model)."""
    by = {key: [r for r in rs if not r["trans"]] for key, rs in by.items()}
    return {key: rs for key, rs in by.items() if rs}


def kb_table(by):
    est = collections.defaultdict(list)
    for (m, n, k, _), rs in by.items():
        if m < 1024 or k < 2048:
            continue
        for r in rs:
            if r["sk_units"]:
                continue
            bm, bn, cm = r["bm"], r["bn"], r["cm"]
            P = 132 // cm
            waves = cdiv(cdiv(cdiv(m, bm), cm) * cdiv(n, bn), P)
            est[(bm, bn, cm)].append((r["b2b_ms"] * 1e3 - 5) / (waves * cdiv(k, 64)))
    return {v: statistics.median(x) for v, x in est.items()}


class Model:
    """gemm_plan.h's gemm_plan_kb and gemm_plan_cost. caps: stage_caps of the header."""

    def __init__(self, p, kb, stages, caps):
        self.p, self.kb, self.stages, self.caps = p, kb, stages, caps

    def plan_stages(self, v, rows):
        """gemm_plan_stages: the stages the latency term counts."""
        c = self.caps
        return min(self.stages[v], c["MODEL_DEEP_STAGES"] if rows > c["DEEP_MIN_ROWS"] else c["MODEL_STAGES"])

    def kbt(self, v, u, rows, stream, scale=1.0, p=None):
        """gemm_plan_kb of a normal plan (its cover terms are the transposed-tiles rule's, not
        fitted here: GEMM_COVER_KB in gemm_plan.h)."""
        p = p or self.p
        bm, bn, cm = v
        ra = min(rows, bm)
        per_sm = (ra * cm + bn) * 128.0 / cm
        t = self.kb[v] * (p["rowk"] + (1 - p["rowk"]) * ra / bm)
        lat = (p["lat_mem"] if stream else p["lat_l2"]) / self.plan_stages(v, rows)
        by = min(u, 132) * per_sm / (p["bw_mem"] * scale if stream else p["bw_l2"])
        return max(t, lat, by)

    def cost(self, v, m, n, k, skt, sku, sms=132, scale=1.0, rows_off=False):
        p = self.p
        if rows_off:  # gemm_model_for_loads: both operands' rows off their lines (GEMM_ALIGN_ROWS_OFF)
            p = dict(p, bw_l2=min(p["bw_l2"], self.caps.get("ROWS_OFF_L2", p["bw_l2"])))
        bm, bn, cm = v
        P = sms // cm
        tm = cdiv(m, bm)
        T = cdiv(tm, cm) * cdiv(n, bn)
        nk = cdiv(k, 64)
        stream = cdiv(tm, cm) <= p["stream_rows"]
        E = p["epi"] * bm * bn / 32768.0
        whole = T - skt
        full, rest = divmod(whole, P)
        t = full * (nk * self.kbt(v, P * cm, m, stream, scale, p) + E)
        if sku and skt:
            sl = sku // skt
            ks = cdiv(nk, sl)
            units = rest + sku
            w, uu = cdiv(units, P), min(units, P)
            kbs = nk if rest and nk > ks else ks
            t += w * (kbs * self.kbt(v, uu * cm, m, stream, scale, p) + E)
            t += p["fx"] * sl * min(m, bm) / 128.0 + p["fx0"] + p["fs"] * sl
        elif rest:
            t += nk * self.kbt(v, rest * cm, m, stream, scale, p) + E
        return p["t0"] + t + (p["first"] + (p.get("c2", 0.0) if cm == 2 else 0.0)) * cdiv(T, P)

    def pick(self, key, rs):
        m, n, k = key[:3]
        return min(rs, key=lambda r: self.cost((r["bm"], r["bn"], r["cm"]), m, n, k, r["sk_tiles"], r["sk_units"],
                                               scale=bw_scale(r["mem_bw"]), rows_off=bool(r.get("align", 128) & 1)))


class Objective:
    """What --fit minimises: minus (the geo-mean, in logs, of best time / the pick's time plus 0.3 x
    the mean of the five worst). A class, not a closure, so that --workers can send it to other
    processes."""

    def __init__(self, shapes, kb, stages, caps):
        self.shapes, self.kb, self.stages, self.caps = shapes, kb, stages, caps

    def __call__(self, x):
        md = Model(dict(zip(KEYS, x)), self.kb, self.stages, self.caps)
        ls = sorted(math.log(b / md.pick(key, rs)["b2b_ms"]) for key, rs, b in self.shapes)
        return -(sum(ls) / len(ls) + 0.3 * sum(ls[:5]) / len(ls[:5]))


def header_constants(path):
    """GEMM_KB_US and GEMM_MODEL_H100's values as ops/gemm_plan.h has them."""
    text = open(path).read()
    fit = dict(re.findall(r"#define GEMM_FIT_(\w+) ([-+0-9.e]+)", text))
    names = {"T0": "t0", "FIRST": "first", "EPI": "epi", "LAT_MEM": "lat_mem", "LAT_L2": "lat_l2",
             "BW_MEM": "bw_mem", "BW_L2": "bw_l2", "SR": "stream_rows", "ROWK": "rowk", "FX": "fx", "FX0": "fx0",
             "FS": "fs", "C2": "c2"}
    p = {names[k]: float(v) for k, v in fit.items() if k in names}
    body = text[text.index("GEMM_KB_US[2][2][16] = {"):]
    vals = [float(x) for x in re.findall(r"([0-9.]+)f", body[:body.index("};")])]
    kb = {}
    for i, x in enumerate(vals):
        bm, cm, bn = (64, 128)[i // 32], (1, 2)[(i // 16) % 2], 16 * (1 + i % 16)
        kb[(bm, bn, cm)] = x
    return p, kb


def stage_caps(path):
    """GEMM_MODEL_STAGES, GEMM_DEEP_MIN_ROWS, GEMM_MODEL_DEEP_STAGES (and GEMM_ROWS_OFF_L2) as ops/gemm_plan.h
    has them."""
    text = open(path).read()
    caps = {k: int(v) for k, v in re.findall(r"#define GEMM_(MODEL_STAGES|DEEP_MIN_ROWS|MODEL_DEEP_STAGES) (\d+)u",
                                                text)}
    if len(caps) != 3:
        raise SystemExit("%s: no GEMM_MODEL_STAGES, GEMM_DEEP_MIN_ROWS and GEMM_MODEL_DEEP_STAGES" % path)
    off = re.search(r"#define GEMM_ROWS_OFF_L2 ([-+0-9.e]+)", text)
    if off:
        caps["ROWS_OFF_L2"] = float(off.group(1))
    return caps


def report(model, by, label):
    cls = collections.defaultdict(list)
    for key, rs in by.items():
        pick = model.pick(key, rs)
        best = min(rs, key=lambda r: r["b2b_ms"])
        ratio = lambda r: r["cublas_b2b_ms"] / r["b2b_ms"]
        cls[rs[0]["class"]].append((min(1, ratio(pick)), min(1, ratio(best)), best["b2b_ms"] / pick["b2b_ms"]))
    g = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
    print("%s: per class, the model's pick against cuBLAS (back to back), the best candidate's, the pick's time "
          "over the best's" % label)
    for c, v in sorted(cls.items()):
        print("  %-8s %3d shapes  pick geo %.3f worst %.3f   best geo %.3f worst %.3f   regret geo %.3f worst %.3f"
              % (c, len(v), g([x[0] for x in v]), min(x[0] for x in v), g([x[1] for x in v]),
                 min(x[1] for x in v), g([x[2] for x in v]), min(x[2] for x in v)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweeps", nargs="+")
    ap.add_argument("--csv", help="write the rows read as CSV (gzip if it ends in .gz)")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--check", nargs="*", default=[])
    ap.add_argument("--header", default="ops/gemm_plan.h")
    ap.add_argument("--scan-c2", help="comma-separated values of GEMM_FIT_C2 to report the sweep with")
    ap.add_argument("--workers", type=int, default=1, help="processes for --fit (default 1)")
    a = ap.parse_args()
    every = load(a.sweeps)
    by = normal(every)
    if a.csv:
        op = gzip.open if a.csv.endswith(".gz") else open
        with op(a.csv, "wt", newline="") as f:
            w = csv.DictWriter(f, FIELDS, extrasaction="ignore")
            w.writeheader()
            for rs in every.values():
                w.writerows(rs)
    stages = {(r["bm"], r["bn"], r["cm"]): r["stages"] for rs in by.values() for r in rs}
    kb = kb_table(by)
    print("GEMM_KB_US (us per k-block, every SM busy), from %d shapes:" % len(by))
    for bm in (64, 128):
        for cm in (1, 2):
            print("  %3d x N%s: %s" % (bm, " c2" if cm == 2 else "   ",
                                       ", ".join("%.3ff" % kb.get((bm, bn, cm), float("nan"))
                                                 for bn in range(16, 257, 16))))
    p, kb_h = header_constants(a.header)
    caps = stage_caps(a.header)
    if a.fit:
        from scipy.optimize import differential_evolution

        missing = sorted(v for v in kb_h if v not in kb)
        if missing:  # no compute-bound problem timed these tile shapes: the header's figures stand in
            print("  (not in the sweep, the header's figure fitted with: %s)"
                  % ", ".join("%dx%d%s" % (bm, bn, "c2" if cm == 2 else "") for bm, bn, cm in missing))
            for v in missing:
                kb[v] = kb_h[v]

        shapes = [(key, rs, min(r["b2b_ms"] for r in rs)) for key, rs in by.items()]
        x0 = [min(max(p.get(k, (lo + hi) / 2), lo), hi) for k, (lo, hi) in zip(KEYS, BOUNDS)]
        res = differential_evolution(Objective(shapes, kb, stages, caps), BOUNDS, x0=x0, popsize=12, maxiter=30,
                                     seed=1, polish=False, workers=a.workers, updating="deferred", tol=1e-4)
        p = dict(zip(KEYS, res.x), c2=p.get("c2", 0.0))
        print("fitted constants:")
        print("\n".join("  #define GEMM_FIT_%s %.4g" % (k.upper() if k != "stream_rows" else "SR", v)
                        for k, v in p.items()))
        kb_h = kb
    other = normal(load(a.check)) if a.check else None
    if other:
        for rs in other.values():
            for r in rs:
                stages.setdefault((r["bm"], r["bn"], r["cm"]), r["stages"])
    if a.scan_c2:
        for c2 in (float(x) for x in a.scan_c2.split(",")):
            report(Model(dict(p, c2=c2), kb_h, stages, caps), by, "the sweep, C2 = %g" % c2)
        return
    model = Model(p, kb_h, stages, caps)
    report(model, by, "the sweep" + (" (fitted)" if a.fit else " (ops/gemm_plan.h)"))
    if other:
        report(model, other, "check: " + " ".join(a.check))


if __name__ == "__main__":
    main()
