#!/usr/bin/env python3
"""Measures the figures the README cites about its own example, on this machine, and writes
them to docs/figures.md (or --out) with a stamp saying when and where.

    scripts/figures.py [--runs N] [--build DIR] [--out FILE]      (make figures)

What it measures, each with the programs a user has:
  * the README example's kernel (scale_tile, block 256) for each variant the README names:
    `clcrt compile --no-cache` writes the cubin, `clcrt inspect --json` reads its registers and
    code size. Instructions are the kernel's .text bytes / 16 (SASS instructions are 16 bytes
    on sm_90 and sm_100), as `clcrt inspect` counts them: the padding after the last EXIT, up
    to the section's 128-byte alignment, is included.
  * the first compile of the README example in N fresh processes, compile-only for sm_90a
    with the disk cache off, as on a machine without a GPU: `examples/cache_timing --first
    sm_90a` (clcrt_runtime_create, then the first clcrt_register, which is NVRTC), and NVRTC's
    time per scheduler and variant through `clcrt compile` (each process with an empty cache directory, the
    time read back from the entry it wrote). The processes alternate between the measurements
    so that a change in the machine's load spreads over all of them.
The machine's load average is recorded before and after: other work on the machine slows
compiles, and the stamp says how busy it was. The CPU time of each cache_timing process (user +
system, from the kernel's accounting) is given too: it moves much less with the machine's load
than the wall-clock times do. Needs the build (`make all examples`)."""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SOURCE = """struct ScaleArgs { float *x; long n; float alpha; };
__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {
  long i = (long)t.linear * blockDim.x + threadIdx.x;
  if (i < a.n) a.x[i] *= a.alpha;
}
"""

# (label, arch, clcrt compile options, what the README calls it)
KERNELS = [
    ("steal", "sm_90a", [], "STEAL as registered (AUTO on sm_90a)"),
    ("steal-short", "sm_90a", ["--variant", "short"], "STEAL, the short variant (no claim code)"),
    ("steal-graph", "sm_90a", ["--variant", "graph"], "STEAL, the graph variant (captured runs)"),
    ("steal-preempt", "sm_90a", ["--variant", "preempt"], "STEAL, the preempt variant (yielding runs)"),
    ("steal-graph-preempt", "sm_90a", ["--variant", "graph,preempt"],
     "STEAL with graph claims and yielding (what every STEAL kernel held before variants)"),
    ("steal-trace", "sm_90a", ["--variant", "trace"], "STEAL, the observed variant (traces, statistics)"),
    ("static", "sm_90a", ["--sched", "static"], "STATIC"),
    ("fixed", "sm_90a", ["--sched", "fixed"], "FIXED"),
    ("clc", "sm_100a", [], "CLC as registered (AUTO on sm_100a)"),
]

# (label, clcrt compile options) for NVRTC's time per scheduler and variant.
COMPILES = [
    ("steal", ["--sched", "steal"]),
    ("steal, graph and preempt variant", ["--sched", "steal", "--variant", "graph,preempt"]),
    ("static", ["--sched", "static"]),
    ("fixed", ["--sched", "fixed"]),
]


def run(cmd, env=None):
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("figures: %s failed (%d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p.stdout


def cpu_ms():
    """CPU time (user + system) of the children waited for so far, in ms."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1e3


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
            mem = ", %.0f GiB" % (kb / 2**20)
    except (OSError, AttributeError):
        pass
    return "%s, %s, %d cores%s, %s" % (platform.node() or "?", cpu, os.cpu_count() or 0, mem, platform.platform())


def kernel_figures(tool, tmp):
    src = os.path.join(tmp, "scale.cu")
    with open(src, "w") as f:
        f.write(SOURCE)
    rows = []
    for label, arch, opts, what in KERNELS:
        out = os.path.join(tmp, label + ".cubin")
        run([tool, "compile", "--no-cache", "-q", "--arch", arch, "--fn", "scale_tile", "--args", "ScaleArgs",
             "--block", "256"] + opts + ["-o", out, src])
        doc = json.loads(run([tool, "inspect", "--json", out]))
        k = doc["files"][0]["kernels"][0]
        rows.append(dict(label=label, arch=arch, what=what, name=k["name"], registers=k["registers"],
                         instructions=k["text_bytes"] // 16, cubin_bytes=os.path.getsize(out),
                         static_smem=k["shared"]["static"]))
    return rows


def compile_figures(tool, timing, tmp, n):
    src = os.path.join(tmp, "scale.cu")
    first = {"create": [], "register": [], "nvrtc": [], "cpu": []}
    nvrtc = {label: [] for label, _ in COMPILES}
    nvrtc_cpu = {label: [] for label, _ in COMPILES}
    env = dict(os.environ)
    env.pop("CLCRT_CACHE_DIR", None)
    # One process first, not counted: the first after a while pays for reading libnvrtc from
    # disk, which says more about the page cache than about clcrt.
    run([timing, "--first", "sm_90a"], env=env)
    for i in range(n):
        c0 = cpu_ms()
        out = run([timing, "--first", "sm_90a"], env=env)
        first["cpu"].append(cpu_ms() - c0)
        m = re.search(r"runtime create ([\d.]+) ms, first register ([\d.]+) ms \(NVRTC ([\d.]+) ms\)", out)
        if not m:
            sys.exit("figures: unexpected output from cache_timing --first: " + out)
        first["create"].append(float(m.group(1)))
        first["register"].append(float(m.group(2)))
        first["nvrtc"].append(float(m.group(3)))
        for j, (label, opts) in enumerate(COMPILES):
            cache = os.path.join(tmp, "cache-%d-%d" % (j, i))
            e = dict(env, CLCRT_CACHE_DIR=cache)
            c0 = cpu_ms()
            run([tool, "compile", "-q", "--arch", "sm_90a", "--fn", "scale_tile", "--args", "ScaleArgs", "--block",
                 "256"] + opts + ["-o", os.path.join(tmp, "t.cubin"), src], env=e)
            nvrtc_cpu[label].append(cpu_ms() - c0)
            ls = json.loads(run([tool, "cache", "ls", "--json"], env=e))
            nvrtc[label].append(float(ls["entries"][0]["compile_ms"]))
            shutil.rmtree(cache)
    return first, nvrtc, nvrtc_cpu


def stats(v):
    return "%.1f (%.1f–%.1f)" % (statistics.median(v), min(v), max(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="fresh processes per compile figure (default 10)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "figures.md"))
    a = ap.parse_args()
    tool = os.path.join(a.build, "clcrt")
    timing = os.path.join(a.build, "examples", "cache_timing")
    for p in (tool, timing):
        if not os.access(p, os.X_OK):
            sys.exit("figures: %s is missing: run `make all examples` first" % p)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    load0 = loadavg()
    start = datetime.datetime.now().astimezone()
    with tempfile.TemporaryDirectory(prefix="clcrt-figures-") as tmp:
        kernels = kernel_figures(tool, tmp)
        first, nvrtc, nvrtc_cpu = compile_figures(tool, timing, tmp, a.runs)
    load1 = loadavg()
    nvcc = subprocess.run([os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"), "--version"],
                          capture_output=True, text=True).stdout
    m = re.search(r"release ([\d.]+), (V[\d.]+)", nvcc)
    toolkit = "CUDA %s (%s)" % m.groups() if m else "CUDA toolkit version unknown"

    L = []
    L.append("# The README example's figures, measured")
    L.append("")
    L.append("<!-- generated by scripts/figures.py: do not edit; run `make figures` again instead -->")
    L.append("Generated by `scripts/figures.py` on %s, %s; clcrt %s%s, %s. Load average "
             "(1, 5, 15 min) %s before and %s after." % (start.strftime("%Y-%m-%d %H:%M %Z"), machine(), commit,
                                                         " with local changes" if dirty else "", toolkit, load0, load1))
    L.append("")
    L.append("## The README example's kernel")
    L.append("")
    L.append("`scale_tile` with a 256-thread block, compiled by `clcrt compile --no-cache` and read by `clcrt "
             "inspect --json`. Instructions: the kernel's `.text` bytes / 16, padding to the section's 128-byte "
             "alignment included.")
    L.append("")
    L.append("| kernel | arch | entry | registers | instructions | static shared | cubin bytes |")
    L.append("|---|---|---|---|---|---|---|")
    for r in kernels:
        L.append("| %s | %s | `%s` | %d | %d | %d | %d |" % (r["what"], r["arch"], r["name"], r["registers"],
                                                            r["instructions"], r["static_smem"], r["cubin_bytes"]))
    L.append("")
    L.append("## First compile in a fresh process")
    L.append("")
    L.append("Median (min–max) over %d fresh processes each, alternating, compile-only for sm_90a (no driver), "
             "disk cache off or empty, in milliseconds, after one process not counted (it reads libnvrtc into the "
             "page cache)." % a.runs)
    L.append("")
    L.append("| what | wall-clock ms | CPU ms of the whole process (user + system) |")
    L.append("|---|---|---|")
    L.append("| `examples/cache_timing --first sm_90a`: `clcrt_runtime_create` | %s | |" % stats(first["create"]))
    L.append("| the same process: first `clcrt_register` of the README example (STEAL) | %s | %s |" %
             (stats(first["register"]), stats(first["cpu"])))
    L.append("| of which NVRTC | %s | |" % stats(first["nvrtc"]))
    for label, opts in COMPILES:
        # With --variant the tool compiles the kernel as registered first, then the variant:
        # its process's CPU time covers two compiles and is not shown.
        cpu = "not shown: the process also compiles the kernel as registered" if "--variant" in opts else \
            stats(nvrtc_cpu[label])
        L.append("| `clcrt compile %s` (%s): NVRTC | %s | %s |" % (" ".join(opts), label, stats(nvrtc[label]), cpu))
    L.append("")
    L.append("Every process: " + ", ".join("%.1f" % v for v in first["register"]) +
             " ms (first register, in order).")
    L.append("")
    L.append("Wall-clock times grow with the machine's load (other processes on its cores); the CPU time of a "
             "process grows much less. Compare figures measured under similar load.")
    L.append("")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(L))
    print("figures: wrote %s" % os.path.relpath(a.out, os.getcwd()))
    print("\n".join(L[4:]))


if __name__ == "__main__":
    main()
