#!/usr/bin/env bash
# Issue 35's measurement on the GPU machine, in one call of under 8 minutes. Run from the
# repository root with the binaries packed by scripts/gpu_pack.sh (in .gpu/):
#
#   bash scripts/steal35_gpu.sh            (logs under $OUT, default /tmp/steal35)
#
# 1. bench, new code: classes (README demo, back-to-back short runs on a stream and as a
#    graph, the prologue case, tinypro: tiny tiles behind a prologue), work (skew, lognormal
#    sigma 1 and 1.5, triangle = causal), scale (uniform memory tiles), preempt (latency), with
#    the experiment contenders steal-early (1-CTA clusters claim ahead) and steal-zero-entry
#    (a short run zeroes the next claim line at its entry: the code before this change).
# 2. bench, first shares off (CLCRT_STEAL_FIRST_CYCLES=0): classes, scale (the persistent runs
#    that first shares change; work's 1-CTA classes run their long units one cluster per unit).
#    Then tinypro alone with claims sized for 4x the time (CLCRT_STEAL_CHUNK_CYCLES=32000), and
#    demo and tinypro with first shares of at most 32000 cycles (CLCRT_STEAL_FIRST_CYCLES=32000).
# 3. the GPU suites that cover the change (gpu_sched, gpu_preempt, gpu_graph), in the time left
#    (if one runs out of time: scripts/gpu_run.sh suite in a call of its own).
# 4. one table: each row's class with the change and without, and the classes that must stay.
# Every step has a time limit; a step that runs out says so in the table (its rows show "-").
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/steal35}
mkdir -p "$OUT"
B=${GPU_BIN:-.gpu}
export PATH=$PATH:/usr/local/cuda/bin
t_start=$(date +%s)
left() { echo $((460 - ($(date +%s) - t_start))); }
step() { echo "=================== $1 ($(date +%T), $(left) s left)"; }

step info
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | head -2

step "bench, new code"
CLCRT_BENCH_EXP=steal-early,steal-zero-entry timeout -k 5 230 "$B/bench/bench" --only classes,work,scale,preempt \
  --json "$OUT/on.json" > "$OUT/on.log" 2>&1
echo "exit $? (124: out of time)"

step "bench, first shares off (CLCRT_STEAL_FIRST_CYCLES=0)"
CLCRT_STEAL_FIRST_CYCLES=0 timeout -k 5 $(( $(left) > 220 ? 110 : $(left) / 2 )) "$B/bench/bench" \
  --only classes,scale --json "$OUT/off.json" > "$OUT/off.log" 2>&1
echo "exit $? (124: out of time)"

step "tinypro with claims of 4x the time (CLCRT_STEAL_CHUNK_CYCLES=32000)"
CLCRT_BENCH_CLASS=tinypro CLCRT_STEAL_CHUNK_CYCLES=32000 timeout -k 5 30 "$B/bench/bench" --only classes \
  > "$OUT/chunk32k.log" 2>&1
echo "exit $? (124: out of time)"

step "demo and tinypro with first shares of at most 32000 cycles (CLCRT_STEAL_FIRST_CYCLES=32000)"
for c in demo tinypro; do
  CLCRT_BENCH_CLASS=$c CLCRT_STEAL_FIRST_CYCLES=32000 timeout -k 5 25 "$B/bench/bench" --only classes 2>&1
  echo "exit $? (124: out of time)" >&2
done > "$OUT/first32k.log"

suite_status=""
for s in gpu_sched gpu_preempt gpu_graph; do
  l=$(left)
  case $s in gpu_sched) lim=$((l * 45 / 100)) ;; gpu_preempt) lim=$((l * 55 / 100)) ;; *) lim=$((l - 5)) ;; esac
  [ $lim -lt 10 ] && lim=10
  step "$s (limit $lim s)"
  CK_FORK=yes CK_DEFAULT_TIMEOUT=600 timeout -k 5 $lim "$B/tests/$s" > "$OUT/$s.log" 2>&1
  rc=$?
  grep -E "Checks|:[EF]:" "$OUT/$s.log" | head -12
  suite_status="$suite_status $s:$( [ $rc = 0 ] && echo pass || { [ $rc = 124 ] && echo TIMEOUT || echo FAIL; })"
done

step table
# t LOG WORKLOAD PARAM CL CONTENDER: the time in ms of that row, or nothing.
t() { awk -v w="$2" -v p="$3" -v c="$4" -v n="$5" '$1==w && $2==p && $3==c && $4==n && $6=="ms" {print $5; exit}' "$1"; }
# r LOG WORKLOAD PARAM CL CONTENDER: its ratio to the best reference.
r() { awk -v w="$2" -v p="$3" -v c="$4" -v n="$5" '$1==w && $2==p && $3==c && $4==n && $6=="ms" {sub("x","",$7); print $7; exit}' "$1"; }
# q A B: B / A with 3 decimals (the ratio of contender A over B as B's time over A's), or "-".
q() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b / a}'; else echo -; fi; }
d() { [ -n "$1" ] && echo "$1" || echo -; }
lat() { awk -v n="$2" '$1=="preempt" && $2==n {print $8; exit}' "$1"; }
ON=$OUT/on.log OFF=$OUT/off.log
{
  printf '%-44s %-10s %-10s %s\n' "class (ratio)" "new" "F off" "other / note"
  for p in 32KiB/1KiB 8KiB/4KiB; do
    printf '%-44s %-10s %-10s %s\n' "1 tinypro $p c1: STEAL / STATIC" \
      "$(q "$(t $ON tinypro $p c1 steal)" "$(t $ON tinypro $p c1 static)")" \
      "$(q "$(t $OFF tinypro $p c1 steal)" "$(t $OFF tinypro $p c1 static)")" \
      "steal-early/STATIC $(q "$(t $ON tinypro $p c1 steal-early)" "$(t $ON tinypro $p c1 static)"), chunk 32000 $(q "$(t $OUT/chunk32k.log tinypro $p c1 steal)" "$(t $OUT/chunk32k.log tinypro $p c1 static)"), first 32000 $(q "$(t $OUT/first32k.log tinypro $p c1 steal)" "$(t $OUT/first32k.log tinypro $p c1 static)"); goal >= 0.98"
  done
  printf '%-44s %-10s %-10s %s\n' "1 prologue 32KiB c1 (long tiles): STEAL / STATIC" \
    "$(q "$(t $ON prologue 32KiB c1 steal)" "$(t $ON prologue 32KiB c1 static)")" \
    "$(q "$(t $OFF prologue 32KiB c1 steal)" "$(t $OFF prologue 32KiB c1 static)")" "was 1.04"
  for w in "lognormal c1" "lognormal c2" "lognormal1.5 c1" "lognormal1.5 c2" "skew c1" "skew c2" "skew c4"; do
    set -- $w
    row=2; [ "$1" = skew ] && row=3; [ "$1" = skew ] && [ "$2" != c1 ] && row=4
    printf '%-44s %-10s %-10s %s\n' "$row $1 $2: STEAL vs best ref" "$(d "$(r $ON $1 - $2 steal)")" \
      "$(d "$(r $OFF $1 - $2 steal)")" "FIXED $(d "$(r $ON $1 - $2 fixed)"), steal-early $(d "$(r $ON $1 - $2 steal-early)")"
  done
  printf '%-44s %-10s %-10s %s\n' "5 b2b-graph 500x1024: STEAL vs ref-block" "$(d "$(r $ON b2b-graph 500x1024 c1 steal)")" \
    "$(d "$(r $ON b2b-graph 500x1024 c1 steal-zero-entry)")" \
    "(F off column: steal-zero-entry, the old entry); FIXED $(d "$(r $ON b2b-graph 500x1024 c1 fixed)"); goal >= 0.95"
  echo "---- must stay true"
  best=$(awk '$1=="demo" && $6=="ms" && $4!="steal" && $4!~/^steal-(early|zero)/ {print $5}' "$ON" | sort -g | head -1)
  printf '%-44s %-10s %-10s %s\n' "demo: STEAL vs best other" "$(q "$(t $ON demo 1KiB c1 steal)" "$best")" \
    "$(q "$(t $OFF demo 1KiB c1 steal)" "$best")" ">= 0.98; first 32000: $(q "$(t $OUT/first32k.log demo 1KiB c1 steal)" "$best")"
  printf '%-44s %-10s %-10s %s\n' "backtoback 500x1024 (stream): STEAL" "$(d "$(r $ON backtoback 500x1024 c1 steal)")" \
    "$(d "$(r $OFF backtoback 500x1024 c1 steal)")" ">= 0.95"
  printf '%-44s %-10s %-10s %s\n' "triangle c1 (causal): STEAL" "$(d "$(r $ON triangle - c1 steal)")" \
    "$(d "$(r $OFF triangle - c1 steal)")" ">= 1.0"
  for s in 4KiB 16KiB 64KiB; do
    for c in c1 c2 c4; do
      printf '%-44s %-10s %-10s %s\n' "scale $s $c (uniform memory): STEAL" "$(d "$(r $ON scale $s $c steal)")" \
        "$(d "$(r $OFF scale $s $c steal)")" ">= 0.98"
    done
  done
  printf '%-44s %-10s %-10s %s\n' "preempt latency: STEAL / FIXED" "$(q "$(lat $ON fixed)" "$(lat $ON steal)")" "" \
    "<= 1.2 (steal $(d "$(lat $ON steal)") ms, fixed $(d "$(lat $ON fixed)") ms)"
  echo "suites:$suite_status"
} | tee "$OUT/table.txt"
step end
