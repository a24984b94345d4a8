#!/usr/bin/env bash
# Runs on the GPU machine (no libuv or Check there: the binaries were built and linked
# statically on the build machine and travel in build/). Usage: scripts/gpu_run.sh STEP...
# Steps: info suite demo sass sanitize bench share compare. Logs go to $OUT when set.
set -u
OUT=${OUT:-/tmp/clcrt-gpu}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
B=${BUILD:-build}
for step in "$@"; do
  echo "=================== $step ($(date +%T))"
  case $step in
    info)
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
      ls /usr/local/cuda/lib64/libnvrtc.so* ;;
    suite)
      CK_FORK=yes CK_DEFAULT_TIMEOUT=600 $B/tests/gpu_sched 2>&1 | tee "$OUT/gpu_sched.log"
      for t in $B/tests/gpu_*; do
        case $t in *gpu_sched|*.o) continue ;; esac
        CK_FORK=yes $t 2>&1 | tee "$OUT/$(basename $t).log"
      done ;;
    demo)
      $B/examples/demo 2>&1 | tee "$OUT/demo.log" ;;
    sass)
      for f in $B/cubins/*.cubin; do
        n=$(basename "$f" .cubin)
        nvdisasm -c "$f" > "$OUT/$n.sass" 2>&1 || cuobjdump -sass "$f" > "$OUT/$n.sass" 2>&1
        printf '%-45s MEMBAR %s  UGETNEXTWORKID %s  SYNCS %s  ATOM %s\n' "$n" \
          "$(grep -c MEMBAR "$OUT/$n.sass")" "$(grep -c UGETNEXTWORKID "$OUT/$n.sass")" \
          "$(grep -c SYNCS "$OUT/$n.sass")" "$(grep -c 'ATOM\|RED' "$OUT/$n.sass")"
      done
echo "=================== end ($(date +%T))"
      (cd "$OUT" && tar czf sass.tgz *.sass && rm -f *.sass) ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        echo "--- compute-sanitizer --tool $tool"
        CK_FORK=no CLCRT_TEST_SANITIZER=1 CK_DEFAULT_TIMEOUT=600 compute-sanitizer --tool $tool --error-exitcode 3 \
          $B/tests/gpu_sched > "$OUT/sanitize-$tool.log" 2>&1
        echo "exit $?"; tail -5 "$OUT/sanitize-$tool.log"
      done ;;
    work)
      $B/bench/bench --only work 2>&1 | tee "$OUT/work.log" ;;
    probe)
      f=$(ls $B/tool/cmp/*.cubin | head -1)
      { cuobjdump -elf "$f" | head -40; echo ----; cuobjdump -res-usage "$f" | head; echo ----; nvdisasm "$f" | head -20; } > "$OUT/probe.txt" 2>&1 ;;
    bench)
      $B/bench/bench --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" ;;
    share)
      # Sharing the GPU in one call (under 10 minutes): the GPU suite with its occupancy probe, the
      # bench section, then the suite under the three sanitizers, sharing the time that is left.
      t0=$(date +%s)
      CK_FORK=yes CK_DEFAULT_TIMEOUT=600 timeout -k 5 180 $B/tests/gpu_share > "$OUT/gpu_share.log" 2>&1
      echo "gpu_share exit $?"; grep -E "SKIP|Checks|partition|probe|MISMATCH|whole|budget|distinct|:[0-9]+:[EF]:" "$OUT/gpu_share.log" | head -90
      timeout -k 5 240 $B/bench/bench --only share --json "$OUT/share.json" > "$OUT/share.log" 2>&1
      echo "bench share exit $?"; grep -v "^ *$" "$OUT/share.log" | tail -70
      n=3
      for tool in memcheck racecheck synccheck; do
        left=$(( (570 - $(date +%s) + t0) / n )); n=$((n - 1)); [ $left -lt 10 ] && left=10
        CK_FORK=no CLCRT_TEST_SANITIZER=1 CK_DEFAULT_TIMEOUT=600 timeout -k 5 $left compute-sanitizer --tool $tool \
          --error-exitcode 3 $B/tests/gpu_share > "$OUT/sanitize-share-$tool.log" 2>&1
        echo "compute-sanitizer $tool exit $? (124: out of its ${left} s)"; tail -3 "$OUT/sanitize-share-$tool.log"
      done ;;
    compare)
      scripts/compare_gpu.sh --tool $B/clcrt $B/cmp 2>&1 | tee "$OUT/compare.log" ;;
  esac
done
echo "=================== end ($(date +%T))"
