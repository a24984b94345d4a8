#!/usr/bin/env bash
# Compares the PTX and cubins that clcrt makes at git revision REV with those of the working
# tree, byte for byte: the check that a change to the device template (nvrtc_src/) or to the
# generated entry changes no generated code. Needs git, make, a C compiler and the CUDA
# toolkit's NVRTC (no GPU).
#
#   scripts/compare_cubins.sh [-j N] [--times N] [--keep] REV
#
# Builds the clcrt tool at REV (in a temporary git worktree) and at the working tree (in a
# temporary build folder; build/ is left alone), then compiles with each, with the disk cache
# off:
#   - two kernels: the README's scale_tile, and a kernel with a per-CTA state made by a
#     prologue, dynamic shared memory whose size is not a multiple of 16 (the ring's offset
#     is rounded up) and a block that is not a multiple of 32 threads (a partial last warp);
#   - under every scheduler (CLC on sm_100a only), in every variant that exists for it
#     (`clcrt compile --variant`: STEAL's trace, graph, preempt combinations, short and
#     short+trace; the other schedulers' trace), and STEAL with the template's compile-time
#     switches (-DCLCRT_STEAL_EARLY=1, -DCLCRT_WAIT_HINT=0, -DCLCRT_TRACE=0 with trace);
#   - with 1-, 2- and 4-CTA clusters and a 2 x 2 x 1 cluster;
#   - for sm_90a and sm_100a.
# It prints one row per architecture, scheduler and variant, one cell per kernel and cluster
# ("=": PTX and cubin identical; "P": the PTX differs, "C": the cubin differs, "!": a compile
# failed), then registers and instructions (`clcrt inspect`) of both sides for every cubin
# that differs. It checks that every sm_100a CLC cubin of the working tree still contains
# UGETNEXTWORKID (the try_cancel instruction), and prints the median wall time of N cold
# compiles (fresh processes, alternating between the two tools; default 11) of the README
# kernel under STEAL for sm_90a.
#
# Exit status: 0 when everything is identical and every CLC cubin has UGETNEXTWORKID; 1 on
# any difference, failed compile or missing instruction; 2 on a usage or build error.
set -u
cd "$(dirname "$0")/.."
root=$PWD

jobs=2 times=11 keep=0 rev=
while [ $# -gt 0 ]; do
  case "$1" in
    -j) jobs=${2:?}; shift 2 ;;
    --times) times=${2:?}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compare_cubins.sh: unknown option $1" >&2; exit 2 ;;
    *) [ -z "$rev" ] || { echo "compare_cubins.sh: one REV only" >&2; exit 2; }; rev=$1; shift ;;
  esac
done
[ -n "$rev" ] || { echo "usage: scripts/compare_cubins.sh [-j N] [--times N] [--keep] REV" >&2; exit 2; }
git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "compare_cubins.sh: $rev is not a commit" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/clcrt-cmp.XXXXXX")
base=$tmp/base
cleanup() {
  git -C "$root" worktree remove --force "$base" >/dev/null 2>&1
  git -C "$root" worktree prune >/dev/null 2>&1
  if [ "$keep" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

echo "building the tool at $rev and at the working tree (logs in $tmp/*.log)"
git worktree add -q --detach "$base" "$rev" || exit 2
(make -C "$base" -j"$jobs" BUILD="$base/build" tool >"$tmp/base.log" 2>&1) || { tail -20 "$tmp/base.log"; exit 2; }
(make -j"$jobs" BUILD="$tmp/wt-build" tool >"$tmp/wt.log" 2>&1) || { tail -20 "$tmp/wt.log"; exit 2; }
tool_base=$base/build/clcrt tool_wt=$tmp/wt-build/clcrt

cat >"$tmp/readme.cu" <<'CU'
struct ScaleArgs { float *x; long n; float alpha; };
__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {
  long i = (long)t.linear * blockDim.x + threadIdx.x;
  if (i < a.n) a.x[i] *= a.alpha;
}
CU
cat >"$tmp/state.cu" <<'CU'
struct StateArgs { float *x; long n; float scale; };
struct StateS { float alpha; unsigned tiles; };
__device__ void state_prologue(const StateArgs &a, StateS &s) {
  s.alpha = a.scale * 2.0f + threadIdx.x;
  s.tiles = 0;
}
__device__ void state_tile(const clcrt::Tile &t, const StateArgs &a, StateS &s) {
  float *buf = (float *)clcrt::smem();
  long i = (long)t.linear * blockDim.x + threadIdx.x;
  if (threadIdx.x < 25) buf[threadIdx.x] = s.alpha + t.cta_rank;
  __syncthreads();
  if (i < a.n) a.x[i] = a.x[i] * buf[threadIdx.x % 25] + t.iteration + t.coord.y;
  __syncthreads();
  s.tiles++;
}
CU
kernel_args() {  # the tool's arguments for kernel $1
  case "$1" in
    readme) echo "--fn scale_tile --args ScaleArgs --block 256 $tmp/readme.cu" ;;
    state) echo "--fn state_tile --args StateArgs --state StateS --prologue state_prologue --block 160 --smem 100 $tmp/state.cu" ;;
  esac
}

kernels="readme state"
clusters="1,1,1 2,1,1 4,1,1 2,2,1"
variants_of() {  # the variants clcrt compiles for scheduler $1 ("-": as registered)
  case "$1" in
    steal) echo "- trace graph preempt trace,graph trace,preempt graph,preempt trace,graph,preempt short trace,short" \
                "early nohint trace:notrace" ;;
    *) echo "- trace" ;;
  esac
}
variant_args() {  # the tool's arguments for variant $1
  case "$1" in
    -) ;;
    early) echo "-X -DCLCRT_STEAL_EARLY=1" ;;
    nohint) echo "-X -DCLCRT_WAIT_HINT=0" ;;
    trace:notrace) echo "--variant trace -X -DCLCRT_TRACE=0" ;;
    *) echo "--variant $1" ;;
  esac
}
scheds_of() { [ "$1" = sm_100a ] && echo "steal clc static fixed" || echo "steal static fixed"; }

mkdir -p "$tmp/out/base" "$tmp/out/wt"
: >"$tmp/jobs"
for arch in sm_90a sm_100a; do
  for sched in $(scheds_of $arch); do
    for v in $(variants_of $sched); do
      for kern in $kernels; do
        for c in $clusters; do
          id="$arch.$sched.${v//,/+}.$kern.${c//,/x}"
          va=$(variant_args "$v")
          for side in base wt; do
            t=$tool_base; [ $side = wt ] && t=$tool_wt
            echo "$t compile --no-cache -q --arch $arch --sched $sched $va --cluster $c -o $tmp/out/$side/$id.cubin --ptx $tmp/out/$side/$id.ptx $(kernel_args $kern) >$tmp/out/$side/$id.log 2>&1" >>"$tmp/jobs"
          done
        done
      done
    done
  done
done
n=$(wc -l <"$tmp/jobs")
echo "compiling $((n / 2)) kernels with each tool ($jobs at a time)"
t0=$(date +%s)
tr '\n' '\0' <"$tmp/jobs" | xargs -0 -P "$jobs" -n 1 sh -c
echo "compiled in $(($(date +%s) - t0)) s"

status=0 same=0 total=0 diffs=
printf '\n%-8s %-7s %-20s' arch sched variant
for kern in $kernels; do for c in $clusters; do printf ' %-11s' "$kern:${c//,/x}"; done; done
echo
for arch in sm_90a sm_100a; do
  for sched in $(scheds_of $arch); do
    for v in $(variants_of $sched); do
      printf '%-8s %-7s %-20s' $arch $sched "$v"
      for kern in $kernels; do
        for c in $clusters; do
          id="$arch.$sched.${v//,/+}.$kern.${c//,/x}"
          b=$tmp/out/base/$id w=$tmp/out/wt/$id cell=
          total=$((total + 1))
          if [ ! -s "$b.cubin" ] || [ ! -s "$w.cubin" ]; then
            cell='!'
          else
            cmp -s "$b.ptx" "$w.ptx" || cell=P
            cmp -s "$b.cubin" "$w.cubin" || cell=${cell}C
          fi
          if [ -z "$cell" ]; then cell='='; same=$((same + 1)); else status=1; diffs="$diffs $id"; fi
          printf ' %-11s' "$cell"
        done
      done
      echo
    done
  done
done

# Registers and instructions of both sides, from the tool's own cubin reader.
summary() {  # cubin -> "R regs, I instructions, B bytes of code"
  "$tool_wt" inspect "$1" 2>/dev/null | awk '
    /registers/ { r = $2 } /^ *code/ { b = $2; i = $4; sub(/\(/, "", i) }
    END { printf "%s regs, %s instructions, %s bytes of code", r, i, b }'
}
for id in $diffs; do
  echo "differs: $id"
  for side in base wt; do
    f=$tmp/out/$side/$id.cubin
    if [ -s "$f" ]; then echo "  $side: $(summary "$f")"; else echo "  $side: compile failed: $(head -3 "$tmp/out/$side/$id.log")"; fi
  done
done

# The CLC cubins must still issue try_cancel.
clc=0 clc_ok=0
for f in "$tmp"/out/wt/sm_100a.clc.*.cubin; do
  [ -s "$f" ] || continue
  clc=$((clc + 1))
  if "$tool_wt" inspect "$f" | grep -q 'UGETNEXTWORKID'; then clc_ok=$((clc_ok + 1)); else status=1; echo "no UGETNEXTWORKID: $f"; fi
done

echo
echo "$same of $total kernels identical (PTX and cubin) between $rev and the working tree"
echo "$clc_ok of $clc sm_100a CLC cubins of the working tree contain UGETNEXTWORKID"

if [ "$times" -gt 0 ]; then
  # Cold compiles: a fresh process each, the two tools alternating so that both see the same
  # load on the machine.
  : >"$tmp/t.base"; : >"$tmp/t.wt"
  for i in $(seq "$times"); do
    for side in base wt; do
      t=$tool_base; [ $side = wt ] && t=$tool_wt
      s=$(date +%s%N)
      $t compile --no-cache -q --arch sm_90a --sched steal -o "$tmp/t.cubin" $(kernel_args readme) >/dev/null 2>&1
      echo $((($(date +%s%N) - s) / 100000)) >>"$tmp/t.$side"
    done
  done
  med() { sort -n "$1" | awk '{ a[NR] = $1 } END { m = a[int((NR + 1) / 2)]; printf "%d.%d ms", m / 10, m % 10 }'; }
  echo "cold compile of the README kernel (STEAL, sm_90a, process wall time), median of $times: $rev $(med "$tmp/t.base"), working tree $(med "$tmp/t.wt")"
fi
exit $status
