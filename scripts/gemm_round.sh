#!/usr/bin/env bash
# One GEMM measurement round on the GPU machine, built on the build machine (the binaries
# travel in BUILD, default build/). Usage: scripts/gemm_round.sh STEP...
#   check    gpu_gemm (correctness on awkward shapes, every variant it covers)
#   dense    bench_gemm dense, quick shapes: 128x256 1-CTA, 2-CTA, old epilogue, 3 stages
#   align16  the same kernels on 16-byte aligned operands (run 1's inputs) for two shapes
#   splitk   M = 128 shapes with the split-K sweep (1, 2, 4, 8, 16)
#   grouped  bench_gemm grouped, quick problems
#   big      the large dense shapes (8192^3, 1024x8192x28672, 8192x8192x28672), 128x256 and c2
#   full     bench_gemm, every shape, every variant (more than 10 minutes: not in one call)
#   ncu      a profile of one 128x256 STATIC kernel at 4096^3, aligned and not (about a minute each)
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
  awk '/^summary:|^variants:|^grouped summary:/{p=1} /^grouped [a-z]+ \(/{p=0} p' "$1" >> "$OUT/summary.txt"
}
for step in "$@"; do
  echo "=================== $step ($(date +%T))" | tee -a "$OUT/summary.txt"
  case $step in
    check)
      CK_FORK=yes CK_DEFAULT_TIMEOUT=200 timeout 230 $B/tests/gpu_gemm 2>&1 | tee "$OUT/gpu_gemm.log" | tail -20
      grep -E "Checks|Failures|Error" "$OUT/gpu_gemm.log" | tail -5 >> "$OUT/summary.txt" ;;
    dense)
      timeout 180 $BG --only dense --quick --variants 128x256,128x256c2,128x256e0,128x256s3 --json "$OUT/dense.json" \
        > "$OUT/dense.log" 2>&1
      echo "exit $?"; summ "$OUT/dense.log"; grep WRONG "$OUT/dense.log" | head ;;
    align16)
      timeout 90 $BG --only dense --align 16 --variants 128x256,128x256c2 --shape 4096x4096x4096 \
        --shape 1024x28672x8192 --json "$OUT/align16.json" > "$OUT/align16.log" 2>&1
      echo "exit $?"; summ "$OUT/align16.log" ;;
    splitk)
      timeout 110 $BG --only dense --variants 128x256,128x256c2,128x128 --shape 128x8192x8192 \
        --shape 128x8192x28672 --json "$OUT/splitk.json" > "$OUT/splitk.log" 2>&1
      echo "exit $?"; grep -E "splits|cuBLASLt" "$OUT/splitk.log" >> "$OUT/summary.txt"; summ "$OUT/splitk.log" ;;
    grouped)
      timeout 200 $BG --only grouped --quick --variants 128x256,128x256c2 --json "$OUT/grouped.json" \
        > "$OUT/grouped.log" 2>&1
      echo "exit $?"; grep -E "^grouped|cuBLAS loop|cublasGemmGrouped" "$OUT/grouped.log" >> "$OUT/summary.txt"
      summ "$OUT/grouped.log" ;;
    big)
      timeout 240 $BG --only dense --variants 128x256,128x256c2 --shape 8192x8192x8192 --shape 1024x8192x28672 \
        --shape 8192x8192x28672 --json "$OUT/big.json" > "$OUT/big.log" 2>&1
      echo "exit $?"; summ "$OUT/big.log"; grep WRONG "$OUT/big.log" | head ;;
    full)
      timeout 590 $BG --json "$OUT/full.json" > "$OUT/full.log" 2>&1
      echo "exit $?"; summ "$OUT/full.log"; grep -A8 "^compile:" "$OUT/full.log" >> "$OUT/summary.txt" ;;
    ncu)
      # Tensor pipe activity, L2 requests against sectors (misaligned rows need more requests
      # per sector), hit rate, DRAM, and where the warps wait. One kernel launch each.
      M=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_requests.sum,lts__t_sectors.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
      for al in 1024 16; do
        # --clock-control none: measure the card as it is (ncu would lock the clocks to base).
        timeout 170 ncu --target-processes all --clock-control none -k regex:clcrt_static_gemm_tile \
          --launch-skip 3 --launch-count 1 \
          --section WarpStateStats --section MemoryWorkloadAnalysis --metrics "$M" \
          $BG --only dense --align $al --variants 128x256 --shape 4096x4096x4096 --reps 3 \
          > "$OUT/ncu_align$al.txt" 2>&1
        echo "ncu align $al: exit $?"
        grep -E "hmma|lts__t_requests|lts__t_sectors|hit_rate|dram__bytes|gpu__time|Stall|stall|Warp Cycles|throughput" \
          "$OUT/ncu_align$al.txt" | head -40 | sed "s/^/[align $al] /" >> "$OUT/summary.txt"
      done ;;
    *) echo "unknown step $step" ;;
  esac
done
echo "=================== summaries"
cat "$OUT/summary.txt"
