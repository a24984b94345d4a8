#!/usr/bin/env bash
# One GEMM measurement round on the GPU machine, built on the build machine (the binaries
# travel in BUILD, default build/). Usage: scripts/gemm_round.sh STEP...
#   check     gpu_gemm (correctness on awkward shapes, stream-K determinism, offsets, masked)
#   bench     bench_gemm: every class (bench, model, odd, gemv, decode, vocab, align16, gen)
#             and the grouped problems, the default (clcrt_gemm) beside the oracle; SEED=N
#             passes --seed (about 30 s on an H100 with the first five classes; the classes
#             added since, 3x as many shapes, not yet timed: hence the longer timeout)
#   blocks    bench_gemm --only grouped --blocks: STEAL and STATIC also timed one block after
#             the other, the way the first version of the benchmark timed them
#   sanitize  compute-sanitizer memcheck and synccheck on gpu_gemm
# Logs and JSON go to $OUT; the summaries of every step are gathered at the end of the output
# and in $OUT/summary.txt.
set -u
OUT=${OUT:-/tmp/clcrt-gemm}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
B=${BUILD:-build}
BG=$B/bench/bench_gemm
: > "$OUT/summary.txt"
summ() { # the summary tables of a bench_gemm log
  awk '/^dense summary|^grouped summary:/{p=1} /^grouped [a-z]/{p=0} p' "$1" >> "$OUT/summary.txt"
}
for step in "$@"; do
  echo "=================== $step ($(date +%T))" | tee -a "$OUT/summary.txt"
  case $step in
    check)
      CK_FORK=yes CK_DEFAULT_TIMEOUT=200 timeout 230 $B/tests/gpu_gemm 2>&1 | tee "$OUT/gpu_gemm.log" | tail -20
      grep -E "Checks|Failures|Error" "$OUT/gpu_gemm.log" | tail -5 >> "$OUT/summary.txt" ;;
    bench)
      timeout 540 $BG ${SEED:+--seed $SEED} --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
      echo "exit $?"; summ "$OUT/bench.log"; grep -E "WRONG|disagree" "$OUT/bench.log" | head ;;
    blocks)
      timeout 300 $BG --only grouped --blocks --json "$OUT/blocks.json" > "$OUT/blocks.log" 2>&1
      echo "exit $?"; grep "blocks of" "$OUT/blocks.log" >> "$OUT/summary.txt"; summ "$OUT/blocks.log" ;;
    sanitize)
      for tool in memcheck synccheck; do
        CK_FORK=no CLCRT_TEST_SANITIZER=1 timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 \
          $B/tests/gpu_gemm > "$OUT/san_$tool.log" 2>&1
        echo "$tool: exit $?" | tee -a "$OUT/summary.txt"
        grep -E "ERROR SUMMARY" "$OUT/san_$tool.log" >> "$OUT/summary.txt"
      done ;;
    *) echo "unknown step $step" ;;
  esac
done
echo "=================== summaries"
cat "$OUT/summary.txt"
