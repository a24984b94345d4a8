#!/usr/bin/env bash
# Builds and runs the libFuzzer targets: the cubin parser (fuzz/fuzz_cubin.c) and the trace
# loader (fuzz/fuzz_trace.c).
#   scripts/fuzz.sh smoke      build, then fuzz each for a bounded time (FUZZ_SECONDS, default 60,
#                              for the cubin parser; FUZZ_TRACE_SECONDS, default 30, for traces): CI
#   scripts/fuzz.sh long N     build, then run N inputs on each (e.g. 1000000)
#   scripts/fuzz.sh build      build only
# Needs clang with -fsanitize=fuzzer (clang 14 works). When it is missing, the script
# installs clang with apt-get if it runs as root (the README says so), and otherwise says why
# it skips and exits 0, so that `make test` does not fail on a machine without clang.
# Everything it writes is under build/fuzz: the growing corpora (corpus, corpus_trace), the
# copied seeds, findings, and each run's full libFuzzer output (cubin.log, trace.log). It
# prints one summary line per fuzzer, and the end of the log when a fuzzer fails.
# Seeds: the committed fixture cubins in tests/data and any cubins the test suites made
# under build*/; for traces, fuzz/trace_seeds. They are read, never written.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-smoke}
out=build/fuzz
bin=$out/fuzz_cubin
tbin=$out/fuzz_trace

find_clang() {
  for c in "${CLANG:-}" clang-14 clang clang-15 clang-16 clang-17 clang-18; do
    [ -n "$c" ] || continue
    command -v "$c" >/dev/null 2>&1 || continue
    if echo 'int LLVMFuzzerTestOneInput(const char*d,long n){(void)d;(void)n;return 0;}' |
        "$c" -x c -fsanitize=fuzzer -o /dev/null - >/dev/null 2>&1; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

if ! cc=$(find_clang); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fuzz.sh: installing clang (needed for -fsanitize=fuzzer)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang) >/dev/null
    cc=$(find_clang) || { echo "fuzz.sh: clang installed but -fsanitize=fuzzer does not link" >&2; exit 1; }
  else
    echo "fuzz.sh: SKIPPED: no clang with -fsanitize=fuzzer (install clang, or run as root to let this script do it)"
    exit 0
  fi
fi

corpus=$out/corpus
tcorpus=$out/corpus_trace
mkdir -p "$out" "$out/findings" "$corpus" "$tcorpus" "$out/seeds" "$out/trace_seeds"
incs=(-Iinclude -Invrtc_src); for d in runtime/*/; do incs+=("-I${d%/}"); done
flags=(-g -O1 -std=c11 -D_GNU_SOURCE "${incs[@]}" -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
"$cc" "${flags[@]}" fuzz/fuzz_cubin.c runtime/cubin/cubin.c runtime/cubin/cubin_info.c runtime/core/alloc.c -o "$bin"
# The trace loader's headers include cuda.h (types only): the toolkit's include directory.
cuda_home=${CUDA_HOME:-}
if [ -z "$cuda_home" ] && nvcc_path=$(command -v nvcc 2>/dev/null); then cuda_home=$(dirname "$(dirname "$nvcc_path")"); fi
cuda_inc=${cuda_home:-/usr/local/cuda}/include
"$cc" "${flags[@]}" -I"$cuda_inc" fuzz/fuzz_trace.c runtime/trace/trace_load.c runtime/trace/json_parse.c runtime/trace/trace.c \
  runtime/core/errmsg.c runtime/core/alloc.c runtime/core/status.c -o "$tbin"
[ "$mode" = build ] && { echo "fuzz.sh: built $bin and $tbin"; exit 0; }
cp -f fuzz/trace_seeds/*.json "$out/trace_seeds/"

# Seeds are copied so that libFuzzer never writes into tests/data. Not from the seed folder
# itself (copies of copies grew longer names on every run until cp failed), and the first 200
# are taken without a pipe into head (which, under pipefail, failed the script with SIGPIPE
# once find had more to say).
mapfile -t seeds < <(find tests/data build -path "$out" -prune -o -name '*.cubin' -size -512k -print 2>/dev/null | sort)
for f in "${seeds[@]:0:200}"; do
  cp -f "$f" "$out/seeds/$(echo "$f" | tr '/' '_')"
done

common=(-print_final_stats=1 -max_len=262144 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$out/findings/")

# Runs one fuzzer with its output in a log, then prints one line from libFuzzer's final
# statistics; on failure, the end of the log and what it left in findings.
fuzz() {
  local name=$1 log=$out/$2.log corp=$3
  shift 3
  local start=$SECONDS rc=0
  nice "$@" >"$log" 2>&1 || rc=$?
  local secs=$((SECONDS - start))
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  if [ $rc != 0 ]; then
    echo "fuzz.sh: $name: FAILED (exit $rc) after ${secs} s; the end of $log:" >&2
    tail -n 40 "$log" >&2
    echo "fuzz.sh: findings in $out/findings/ (reproduce: $1 FILE)" >&2
    return $rc
  fi
  echo "fuzz.sh: $name: $(stat number_of_executed_units) inputs in ${secs} s ($(stat average_exec_per_sec)/s)," \
    "$(stat new_units_added) new, corpus $(find "$corp" -type f | wc -l) files, peak RSS $(stat peak_rss_mb) MB;" \
    "no failure (full output: $log)"
}

case "$mode" in
  smoke)
    fuzz "cubin parser" cubin "$corpus" "$bin" "${common[@]}" -max_total_time="${FUZZ_SECONDS:-60}" "$corpus" "$out/seeds"
    fuzz "trace loader" trace "$tcorpus" "$tbin" "${common[@]}" -max_total_time="${FUZZ_TRACE_SECONDS:-30}" "$tcorpus" "$out/trace_seeds"
    ;;
  long)
    runs=${2:?usage: scripts/fuzz.sh long N}
    fuzz "cubin parser" cubin "$corpus" "$bin" "${common[@]}" -runs="$runs" "$corpus" "$out/seeds"
    fuzz "trace loader" trace "$tcorpus" "$tbin" "${common[@]}" -runs="$runs" "$tcorpus" "$out/trace_seeds"
    ;;
  *)
    echo "usage: scripts/fuzz.sh smoke | long N | build" >&2
    exit 2
    ;;
esac
