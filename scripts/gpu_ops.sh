#!/usr/bin/env bash
# The op library's checks on the GPU machine, in steps that fit one device call each (10 min).
# Runs what scripts/gpu_pack.sh copied into .gpu/ (binaries built and linked statically on the
# build machine, the Python wheel). Usage: scripts/gpu_ops.sh STEP... ; logs go to $OUT.
#   csuite     gpu_ops (the C differential test), gpu_gemm, then every other GPU suite
#   sanitize   gpu_ops and gpu_gemm under compute-sanitizer memcheck, racecheck, synccheck
#   py         the wheel installed; the Python GPU tests of the op (on every GPU, and with the
#              tensors on another GPU than the current one where there are two), the exit test,
#              overhead.py
#   overhead   python/bench/overhead.py alone (host time per call)
#   exit       python/tests/exit_stress.py with $EXIT_PER_KIND processes of each kind
#   tp         python/bench/tp_layer.py on every GPU, every mode, --check
#   tptiles    python/tests/test_gpu_tp_tiles.py (clcrt.tp against torch on 1, 2 and 4 GPUs)
#   tpbench    python/bench/tp_layer.py's default layer on each of $TP_WORLDS (default 2 4) GPUs,
#              $TP_ARGS added (JSON in $OUT/tpbench-N.json; TP_ARGS="--modes tiles --tp-trace
#              $OUT/tptrace" also traces one tiles layer per rank)
#   taskgraph  gpu_taskgraph, then under compute-sanitizer memcheck, racecheck, synccheck
#   pytg       the wheel's task graphs: python/tests/test_gpu_taskgraph.py, test_taskgraph.py and the
#              decode MLP example
#   mlpbench   python/bench/decode_mlp.py ($MLP_ARGS added; JSON in $OUT/decode_mlp.json)
#   benchcmp   bench_gemm --quick --no-oracle, before (.gpu/old) and after, one call
#   pdlcmp     bench_gemm --quick --no-oracle with CLCRT_PDL=0, then with the default, one call
#   bench      bench_gemm --no-oracle on every class ($BENCH_ARGS added)
#   wide       bench_gemm --wide: every tile shape on the quick shapes and $WIDE_GEN generated
#              ones of seed $WIDE_SEED (the cost model's data; JSON in $OUT/wide.json)
# A compile cache made on the build machine (.gpu/cache.tar.xz) is unpacked first, if there.
set -u
OUT=${OUT:-/tmp/clcrt-gpu}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CLCRT_CACHE_DIR=/tmp/clcrt-cache PYTHONUNBUFFERED=1
G=.gpu
if [ -f $G/cache.tar.xz ] && [ ! -d /tmp/clcrt-cache ]; then
  mkdir -p /tmp/clcrt-cache && tar xJf $G/cache.tar.xz -C /tmp/clcrt-cache --strip-components=1 &&
    echo "compile cache: $(ls /tmp/clcrt-cache | wc -l) entries unpacked"
fi
wheel() {  # installed once per wheel: a warm machine keeps /tmp/site from the last call
  local sum; sum=$(md5sum $G/*.whl | cut -c1-32)
  [ -d /tmp/site/clcrt ] && [ "$(cat /tmp/site/.wheel-md5 2>/dev/null)" = "$sum" ] && return
  rm -rf /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $G/*.whl &&
    echo "$sum" > /tmp/site/.wheel-md5
}
overhead() {
  PYTHONPATH=/tmp/site timeout -k 5 120 python3 python/bench/overhead.py --rounds 31 --json "$OUT/overhead.json" \
    ${OVERHEAD_ARGS:-} > "$OUT/overhead.log" 2>&1
  echo "overhead exit $?"; tail -32 "$OUT/overhead.log"
}
for step in "$@"; do
  echo "=================== $step ($(date +%T))"
  t0=$(date +%s)
  case $step in
    others)
      for t in $G/tests/gpu_*; do
        case $t in *gpu_ops|*gpu_gemm) continue ;; esac
        CK_FORK=yes CK_DEFAULT_TIMEOUT=300 timeout -k 5 150 $t > "$OUT/$(basename $t).log" 2>&1
        echo "$(basename $t) exit $?: $(grep -E 'Checks' "$OUT/$(basename $t).log" | tail -1)"
        grep -E ":[0-9]+:[EF]:" "$OUT/$(basename $t).log" | head -5
      done ;;
    csuite)
      nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
      CK_FORK=yes CK_DEFAULT_TIMEOUT=600 timeout -k 5 300 $G/tests/gpu_ops > "$OUT/gpu_ops.log" 2>&1
      rc=$?; echo "gpu_ops exit $rc"; grep -E "gpu_ops:|Checks|:[0-9]+:[EF]:" "$OUT/gpu_ops.log" | head -30
      if [ $rc != 0 ] && command -v cuda-gdb >/dev/null; then
        CK_FORK=no CLCRT_TEST_PROGRESS=1 timeout -k 5 120 cuda-gdb -batch -ex run -ex bt -ex "info threads" \
          --args $G/tests/gpu_ops > "$OUT/gpu_ops-gdb.log" 2>&1
        grep -E "^#|SIGSEGV|signal|gpu_ops: " "$OUT/gpu_ops-gdb.log" | tail -30
      fi
      if [ -z "${SKIP_GEMM:-}" ]; then
        CK_FORK=yes CK_DEFAULT_TIMEOUT=600 timeout -k 5 200 $G/tests/gpu_gemm > "$OUT/gpu_gemm.log" 2>&1
        echo "gpu_gemm exit $?"; grep -E "Checks|:[0-9]+:[EF]:" "$OUT/gpu_gemm.log" | head -20
      fi
      [ -n "${ONLY_OPS:-}" ] && continue
      for t in $G/tests/gpu_*; do
        case $t in *gpu_ops|*gpu_gemm) continue ;; esac
        CK_FORK=yes CK_DEFAULT_TIMEOUT=300 timeout -k 5 150 $t > "$OUT/$(basename $t).log" 2>&1
        echo "$(basename $t) exit $?: $(grep -E 'Checks' "$OUT/$(basename $t).log" | tail -1)"
        grep -E ":[0-9]+:[EF]:" "$OUT/$(basename $t).log" | head -5
      done ;;
    taskgraph)
      CK_FORK=yes CK_DEFAULT_TIMEOUT=600 timeout -k 5 200 $G/tests/gpu_taskgraph > "$OUT/gpu_taskgraph.log" 2>&1
      echo "gpu_taskgraph exit $?"; grep -E "gpu_taskgraph:|Checks|:[0-9]+:[EF]:" "$OUT/gpu_taskgraph.log" | head -20
      for tool in memcheck racecheck synccheck; do
        CK_FORK=no CLCRT_TEST_SANITIZER=1 timeout -k 5 ${SAN_LIMIT:-120} compute-sanitizer --tool $tool \
          --error-exitcode 3 $G/tests/gpu_taskgraph > "$OUT/san-gpu_taskgraph-$tool.log" 2>&1
        echo "gpu_taskgraph $tool exit $?: $(grep -E 'ERROR SUMMARY|Checks' "$OUT/san-gpu_taskgraph-$tool.log" | tr '\n' ' ')"
      done ;;
    pytg)
      wheel
      (cd python/tests && PYTHONPATH=/tmp/site CUDA_HOME=/usr/local/cuda timeout -k 5 ${PY_LIMIT:-300} python3 -m pytest \
        -q -rs -s -p no:cacheprovider test_gpu_taskgraph.py test_taskgraph.py > "$OUT/pytest-tg.log" 2>&1
       echo "pytest exit $?"; grep -E "decode mlp|passed|failed|Error|error" "$OUT/pytest-tg.log" | tail -15)
      PYTHONPATH=/tmp/site timeout -k 5 120 python3 python/examples/decode_mlp.py --batch 16 2>&1 | tail -4 ;;
    mlpbench)
      wheel
      PYTHONPATH=/tmp/site timeout -k 5 ${MLP_LIMIT:-400} python3 python/bench/decode_mlp.py ${MLP_ARGS:-} \
        --json "$OUT/decode_mlp.json" > "$OUT/decode_mlp.log" 2>&1
      echo "decode_mlp exit $?"; tail -60 "$OUT/decode_mlp.log" ;;
    sanitize)
      for t in ${SAN_SUITES:-gpu_ops gpu_gemm}; do
        for tool in memcheck racecheck synccheck; do
          CK_FORK=no CLCRT_TEST_SANITIZER=1 CK_DEFAULT_TIMEOUT=600 timeout -k 5 ${SAN_LIMIT:-90} compute-sanitizer \
            --tool $tool --error-exitcode 3 $G/tests/$t > "$OUT/san-$t-$tool.log" 2>&1
          echo "$t $tool exit $?: $(grep -E 'ERROR SUMMARY|Checks' "$OUT/san-$t-$tool.log" | tr '\n' ' ')"
        done
      done ;;
    py)
      wheel
      cd python/tests
      PYTHONPATH=/tmp/site CUDA_HOME=/usr/local/cuda timeout -k 5 ${PY_LIMIT:-420} python3 -m pytest -q -x -rs -p no:cacheprovider \
        -s test_gpu_ops.py test_ops.py test_gpu_exit.py test_gpu_other_device.py > "$OUT/pytest-ops.log" 2>&1
      echo "pytest exit $?"; grep -E "differential:|passed|failed|Error|error|exit_stress" "$OUT/pytest-ops.log" | tail -25
      cd ../..
      overhead ;;
    overhead)
      wheel
      overhead ;;
    pyall)
      wheel
      cd python/tests
      PYTHONPATH=/tmp/site CUDA_HOME=/usr/local/cuda timeout -k 5 500 python3 -m pytest -q -rs -p no:cacheprovider \
        --deselect test_gpu_ops.py::test_differential_random_sequences . > "$OUT/pytest-all.log" 2>&1
      echo "pytest exit $?"; grep -E "passed|failed|FAILED|Error" "$OUT/pytest-all.log" | tail -15
      cd ../.. ;;
    exit)
      wheel
      PYTHONPATH=/tmp/site timeout -k 5 ${EXIT_LIMIT:-500} python3 python/tests/exit_stress.py --per-kind ${EXIT_PER_KIND:-60} \
        --jobs 16 > "$OUT/exit.log" 2>&1
      echo "exit_stress exit $?"; tail -12 "$OUT/exit.log" ;;
    tp)
      wheel
      n=$(nvidia-smi -L | wc -l)
      PYTHONPATH=/tmp/site timeout -k 10 ${TP_LIMIT:-400} python3 python/bench/tp_layer.py --spawn $n --check \
        --json "$OUT/tp$n.json" > "$OUT/tp$n.log" 2>&1
      echo "tp_layer --spawn $n exit $?"; tail -30 "$OUT/tp$n.log" ;;
    tptiles)
      wheel
      cd python/tests
      PYTHONPATH=/tmp/site CUDA_HOME=/usr/local/cuda timeout -k 5 ${PY_LIMIT:-420} python3 -m pytest -q -rs -s \
        -p no:cacheprovider test_gpu_tp_tiles.py test_tp.py > "$OUT/pytest-tptiles.log" 2>&1
      echo "pytest exit $?"; grep -E "tp tiles:|wrong|passed|failed|Error|error|Timeout" "$OUT/pytest-tptiles.log" | tail -25
      cd ../.. ;;
    tpbench)
      wheel
      for n in ${TP_WORLDS:-2 4}; do
        PYTHONPATH=/tmp/site timeout -k 10 ${TP_LIMIT:-300} python3 python/bench/tp_layer.py --spawn $n ${TP_ARGS:-} \
          --json "$OUT/tpbench-$n.json" > "$OUT/tpbench-$n.log" 2>&1
        echo "tp_layer --spawn $n exit $?"; tail -22 "$OUT/tpbench-$n.log"
      done ;;
    bench)
      timeout -k 5 ${BENCH_LIMIT:-400} $G/bench/bench_gemm --no-oracle ${BENCH_ARGS:-} --json "$OUT/bench.json" \
        > "$OUT/bench.log" 2>&1
      echo "bench_gemm exit $?"; grep -A40 "per class" "$OUT/bench.log" | head -40 ;;
    wide)
      timeout -k 5 ${WIDE_LIMIT:-400} $G/bench/bench_gemm --wide --no-oracle ${WIDE_QUICK---quick} --class ${WIDE_CLASSES:-bench,model,odd,gemv,decode,vocab,align16} \
        --json "$OUT/wide.json" > "$OUT/wide.log" 2>&1
      echo "bench_gemm --wide exit $?"; grep -E "wide|WRONG" "$OUT/wide.log" | tail -30
      timeout -k 5 ${WIDE_LIMIT:-400} $G/bench/bench_gemm --wide --no-oracle --class gen --gen ${WIDE_GEN:-16} \
        --seed ${WIDE_SEED:-1001} --json "$OUT/wide-gen.json" > "$OUT/wide-gen.log" 2>&1
      echo "bench_gemm --wide gen exit $?"; grep -E "wide|WRONG" "$OUT/wide-gen.log" | tail -20 ;;
    pdlcmp)
      for v in nopdl pdl; do
        pdl=1; [ $v = nopdl ] && pdl=0
        CLCRT_PDL=$pdl timeout -k 5 ${BENCH_LIMIT:-200} $G/bench/bench_gemm --quick --no-oracle \
          --json "$OUT/bench-$v.json" > "$OUT/bench-$v.log" 2>&1
        echo "bench_gemm CLCRT_PDL=$pdl exit $?"
      done
      python3 scripts/bench_gemm_compare.py "$OUT/bench-nopdl.json" "$OUT/bench-pdl.json" 2>&1 | tail -20 ;;
    benchcmp)
      for v in old new; do
        b=$G/bench/bench_gemm; [ $v = old ] && b=$G/old/bench_gemm
        timeout -k 5 ${BENCH_LIMIT:-200} $b --quick --no-oracle --json "$OUT/bench-$v.json" > "$OUT/bench-$v.log" 2>&1
        echo "bench_gemm $v exit $?"
      done
      python3 scripts/bench_gemm_compare.py "$OUT/bench-old.json" "$OUT/bench-new.json" 2>&1 | tail -20 ;;
  esac
  echo "--- $step took $(( $(date +%s) - t0 )) s"
done
