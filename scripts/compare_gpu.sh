#!/usr/bin/env bash
# Checks `clcrt inspect --json` field by field against NVIDIA's own tools, on the machine
# that has them (cuobjdump, nvdisasm: the full CUDA toolkit). Needs bash and python3.
#
#   scripts/compare_gpu.sh [--tool PATH] CUBIN_OR_DIR...
#
# A directory stands for the *.cubin files in it (e.g. build/tool/cmp, made on the build
# machine by `scripts/compare_gpu.sh --make-cubins DIR`, which needs nvcc and the tool).
# For every kernel it prints one row per field:
#   ARCH      cuobjdump's "arch =" (else nvdisasm's .headerflags SM)  vs  arch
#   REG       cuobjdump -res-usage REG        vs  registers
#   STACK     cuobjdump -res-usage STACK      vs  frame_bytes
#   SHARED    cuobjdump -res-usage SHARED     vs  shared.static (or shared.user; the row says which)
#   CONST0    cuobjdump -res-usage CONSTANT[0] vs params.cbank_offset + params.bytes
#   CLUSTER / REQNTID / MAXNTID / MBARRIERS / MAXREG   cuobjdump -elf EIATTR_* vs the JSON
#   CLC       nvdisasm UGETNEXTWORKID lines   vs  clc.count, and .BROADCAST vs clc.broadcast
#   SPILLS    nvdisasm LDL/STL counts         >=  spills.loads / spills.stores (spills are a subset)
# and exits 0 when every row is MATCH, 1 on any MISMATCH, 2 when a tool is missing.
set -u
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--make-cubins" ]; then
  # Build-machine side: the cubins to carry to the GPU machine.
  dir=${2:?usage: scripts/compare_gpu.sh --make-cubins DIR}
  tool=${CLCRT_TOOL:-build/tool/clcrt}
  [ -x "$tool" ] || tool=build/clcrt
  mkdir -p "$dir"
  set -e
  nvcc -cubin -gencode arch=compute_90a,code=sm_90a -o "$dir/cluster_90a.cubin" tests/data/cluster.cu
  nvcc -cubin -gencode arch=compute_100a,code=sm_100a -o "$dir/cluster_100a.cubin" tests/data/cluster.cu
  nvcc -cubin -gencode arch=compute_90,code=sm_90 -o "$dir/cluster_90.cubin" tests/data/cluster.cu
  nvcc -cubin -gencode arch=compute_90a,code=sm_90a -maxrregcount=32 -o "$dir/spill_90a.cubin" tests/data/spill.cu
  nvcc -cubin -gencode arch=compute_100a,code=sm_100a -maxrregcount=32 -o "$dir/spill_100a.cubin" tests/data/spill.cu
  nvcc -cubin -gencode arch=compute_100a,code=sm_100a -o "$dir/clc_100a.cubin" tests/data/clc.cu
  src=$(mktemp /tmp/clcrt-cmp-XXXXXX.cu)
  printf '%s\n' 'struct ScaleArgs { float *x; long n; float alpha; };' \
    '__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {' \
    '  long i = (long)t.linear * blockDim.x + threadIdx.x;' '  if (i < a.n) a.x[i] *= a.alpha;' '}' > "$src"
  for b in sm_90a:steal sm_90a:static sm_90a:fixed sm_100a:clc sm_100a:steal sm_100a:static sm_100a:fixed; do
    "$tool" compile -q --no-cache --arch "${b%%:*}" --sched "${b##*:}" --cluster 2 --fn scale_tile --args ScaleArgs \
      -o "$dir/clcrt_${b##*:}_${b%%:*}.cubin" "$src"
  done
  rm -f "$src"
  ls -l "$dir"
  exit 0
fi

tool=""
if [ "${1:-}" = "--tool" ]; then tool=$2; shift 2; fi
if [ -z "$tool" ]; then
  for t in build/clcrt build/tool/clcrt; do [ -x "$t" ] && { tool=$t; break; }; done
fi
[ -n "$tool" ] && [ -x "$tool" ] || { echo "compare_gpu.sh: no clcrt tool (give --tool PATH)" >&2; exit 2; }
for t in cuobjdump nvdisasm python3; do
  command -v "$t" >/dev/null 2>&1 || { echo "compare_gpu.sh: $t is not on the PATH" >&2; exit 2; }
done
[ $# -gt 0 ] || { echo "usage: scripts/compare_gpu.sh [--tool PATH] CUBIN_OR_DIR..." >&2; exit 2; }

exec python3 - "$tool" "$@" <<'PY'
import json, os, re, subprocess, sys

tool, args = sys.argv[1], sys.argv[2:]
files = []
for a in args:
    if os.path.isdir(a):
        files += sorted(os.path.join(a, f) for f in os.listdir(a) if f.endswith(".cubin"))
    else:
        files.append(a)

def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    return p.returncode, p.stdout

def nums(s):
    return [int(x, 0) for x in re.findall(r"0x[0-9a-fA-F]+|\d+", s)]

rows, bad = [], 0
def row(f, k, field, theirs, ours, ok, note=""):
    global bad
    rows.append((os.path.basename(f), k, field, str(theirs), str(ours), "MATCH" if ok else "MISMATCH", note))
    if not ok:
        bad += 1

for f in files:
    rc, js = run([tool, "inspect", "--json", f])
    try:
        doc = json.loads(js)
        cub = doc["files"][0]
    except Exception:
        row(f, "-", "clcrt", "-", "inspect failed", False, js.strip()[:200]); continue
    _, res = run(["cuobjdump", "-res-usage", f])
    _, elf = run(["cuobjdump", "-elf", f])
    drc, sass = run(["nvdisasm", f])
    if drc != 0:
        row(f, "-", "nvdisasm", "exit %d" % drc, "-", False, sass.strip()[:200])

    # Architecture.
    # CUDA 13's cuobjdump -elf prints "64-bit ELF: type=ET_EXEC, ABI=8, sm=100a, ..." and
    # nvdisasm ".target sm_100a" (seen on the H100 machine, 2026-11-21).
    m = re.search(r"\bsm=(\d+[af]?)\b", elf)
    t = re.search(r"\.target\s+(sm_\w+)", sass)
    if m or t:
        want = "sm_" + m.group(1) if m else t.group(1)
        ok = want == cub["arch"] and (not t or t.group(1) == cub["arch"])
        row(f, "-", "ARCH", want + (" / nvdisasm " + t.group(1) if t else ""), cub["arch"], ok)
    elif re.search(r"arch\s*=\s*(sm_\w+)", res + elf):
        m = re.search(r"arch\s*=\s*(sm_\w+)", res + elf)
        row(f, "-", "ARCH", m.group(1), cub["arch"], m.group(1) == cub["arch"])
    else:
        m = re.search(r"EF_CUDA_SM(\d+)", sass)
        row(f, "-", "ARCH", "SM" + (m.group(1) if m else "?"), cub["arch"], bool(m) and int(m.group(1)) == cub["sm"],
            "cuobjdump printed no arch line; SM number only")

    # cuobjdump -res-usage: " Function NAME:" then "REG:.. STACK:.. SHARED:.. LOCAL:.. CONSTANT[0]:..".
    usage, cur = {}, None
    for line in res.splitlines():
        mm = re.match(r"\s*Function\s+(.+?):\s*$", line)
        if mm:
            cur = mm.group(1); continue
        if cur and "REG:" in line:
            usage[cur] = dict(re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line))
            cur = None

    # cuobjdump -elf: EIATTR records per .nv.info.<kernel> section (merc copies skipped).
    attrs, cur, attr = {}, None, None
    for line in elf.splitlines():
        if ".nv.info." in line and "merc" not in line:
            mm = re.search(r"\.nv\.info\.(\S+)", line)
            cur = mm.group(1).rstrip(",") if mm else None; attr = None; continue
        if re.match(r"^\s*\.(section|nv\.)", line) and ".nv.info." not in line:
            cur = None
        mm = re.search(r"Attribute:\s*(EIATTR_\w+)", line)
        if mm and cur:
            attr = mm.group(1); attrs.setdefault(cur, {}).setdefault(attr, ""); continue
        mm = re.search(r"Value:\s*(.*)", line)
        if mm and cur and attr:
            attrs[cur][attr] = mm.group(1); attr = None

    # nvdisasm: instructions per .text.<kernel> section.
    clc, brd, ldl, stl, cur = {}, {}, {}, {}, None
    for line in sass.splitlines():
        mm = re.match(r"\s*\.section\s+\"?\.text\.([^\",\s]+)", line)
        if mm:
            cur = mm.group(1); continue
        if re.match(r"\s*\.section", line):
            cur = None; continue
        if not cur:
            continue
        if "UGETNEXTWORKID" in line:
            clc[cur] = clc.get(cur, 0) + 1
            if ".BROADCAST" in line: brd[cur] = True
        if re.search(r"\bLDL(\.|\s)", line): ldl[cur] = ldl.get(cur, 0) + 1
        if re.search(r"\bSTL(\.|\s)", line): stl[cur] = stl.get(cur, 0) + 1

    for k in cub["kernels"]:
        n = k["name"]
        u = usage.get(n)
        if u is None:
            row(f, n, "RES-USAGE", "no entry", "-", False)
        else:
            row(f, n, "REG", u.get("REG"), k["registers"], int(u.get("REG", -1)) == k["registers"])
            row(f, n, "STACK", u.get("STACK"), k["frame_bytes"], int(u.get("STACK", -1)) == k["frame_bytes"])
            sh, s = int(u.get("SHARED", -1)), k["shared"]
            which = "static" if sh == s["static"] else "user part" if sh == s["user"] else ""
            row(f, n, "SHARED", sh, "%d (user %d)" % (s["static"], s["user"]), bool(which), which and "equals " + which)
            if "CONSTANT[0]" in u and k["params"]["cbank_offset"] is not None:
                ours = k["params"]["cbank_offset"] + k["params"]["bytes"]
                row(f, n, "CONST0", u["CONSTANT[0]"], ours, int(u["CONSTANT[0]"]) == ours, "param offset + size")
        a = attrs.get(n, {})
        def dims(name, ours):
            theirs = nums(a[name])[:3] if name in a else None
            row(f, n, name.replace("EIATTR_", ""), theirs, ours, theirs == ours)
        dims("EIATTR_CTA_PER_CLUSTER", k["cluster"])
        dims("EIATTR_REQNTID", k["reqntid"])
        dims("EIATTR_MAX_THREADS", k["maxntid"])
        for name, ours in (("EIATTR_NUM_MBARRIERS", k["mbarriers"]), ("EIATTR_MAXREG_COUNT", k["max_registers"])):
            theirs = nums(a[name])[0] if name in a and nums(a[name]) else None
            row(f, n, name.replace("EIATTR_", ""), theirs, ours, theirs == ours)
        row(f, n, "EXPLICIT_CLUSTER", "EIATTR_EXPLICIT_CLUSTER" in a, k["explicit_cluster"],
            ("EIATTR_EXPLICIT_CLUSTER" in a) == k["explicit_cluster"])
        row(f, n, "CLC", clc.get(n, 0), k["clc"]["count"], clc.get(n, 0) == k["clc"]["count"], "UGETNEXTWORKID lines")
        row(f, n, "CLC.BROADCAST", brd.get(n, False), k["clc"]["broadcast"], brd.get(n, False) == k["clc"]["broadcast"])
        sp = k["spills"]
        ok = (sp["loads"] or 0) <= ldl.get(n, 0) and (sp["stores"] or 0) <= stl.get(n, 0)
        row(f, n, "SPILLS<=LDL/STL", "%d/%d" % (ldl.get(n, 0), stl.get(n, 0)), "%s/%s" % (sp["loads"], sp["stores"]), ok)
        # Records clcrt keeps raw, with the names cuobjdump gives the ones it knows: for the notes.
        known = {"CUDA_API_VERSION", "KPARAM_INFO", "CBANK_PARAM_SIZE", "PARAM_CBANK", "MAXREG_COUNT",
                 "EXIT_INSTR_OFFSETS", "CTA_PER_CLUSTER", "EXPLICIT_CLUSTER", "NUM_MBARRIERS", "MAX_THREADS",
                 "REQNTID", "MAX_CLUSTER_RANK", "RESERVED_SMEM_USED", "NUM_BARRIERS", "REG_RECONFIG", "ANNOTATIONS"}
        extra = sorted(x.replace("EIATTR_", "") for x in a if x.replace("EIATTR_", "") not in known)
        ids = sorted({"0x%02x" % r["id"] for r in k["unknown_attributes"]})
        if extra or ids:
            print("note: %s %s: raw ids %s; cuobjdump also names %s" % (os.path.basename(f), n, " ".join(ids), " ".join(extra)))

w = [max(len(r[i]) for r in rows + [("FILE", "KERNEL", "FIELD", "CUOBJDUMP/NVDISASM", "CLCRT", "RESULT", "")])
     for i in range(6)] if rows else [4] * 6
hdr = ("FILE", "KERNEL", "FIELD", "CUOBJDUMP/NVDISASM", "CLCRT", "RESULT", "NOTE")
for r in [hdr] + rows:
    print("  ".join(r[i].ljust(w[i]) for i in range(6)) + ("  " + r[6] if r[6] else ""))
print("\n%d rows, %d mismatches, %d files" % (len(rows), bad, len(files)))
sys.exit(1 if bad else 0)
PY
