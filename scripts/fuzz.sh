#!/usr/bin/env bash
# Builds and runs the libFuzzer target for the cubin parser (fuzz/fuzz_cubin.c).
#   scripts/fuzz.sh smoke      build, then fuzz for a bounded time (FUZZ_SECONDS, default 60): CI
#   scripts/fuzz.sh long N     build, then run N inputs (e.g. 1000000)
#   scripts/fuzz.sh build      build only
# Needs clang with -fsanitize=fuzzer (clang 14 works). When it is missing, the script
# installs clang with apt-get if it runs as root, and otherwise says why it skips and
# exits 0, so that `make test` does not fail on a machine without clang.
# Seeds: the committed fixture cubins in tests/data and any cubins the test suites made
# under build*/; the growing corpus lives in fuzz/corpus (git-ignored), findings in
# build/fuzz/findings.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-smoke}
out=build/fuzz
bin=$out/fuzz_cubin

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

mkdir -p "$out" "$out/findings" fuzz/corpus "$out/seeds"
"$cc" -g -O1 -std=c11 -D_GNU_SOURCE -Iinclude -Iruntime \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
  fuzz/fuzz_cubin.c runtime/cubin.c runtime/alloc.c -o "$bin"
[ "$mode" = build ] && { echo "fuzz.sh: built $bin"; exit 0; }

# Seeds are copied so that libFuzzer never writes into tests/data.
find tests/data build -name '*.cubin' -size -512k 2>/dev/null | head -200 | while read -r f; do
  cp -f "$f" "$out/seeds/$(echo "$f" | tr '/' '_')"
done

common=(-print_final_stats=1 -max_len=262144 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$out/findings/")
case "$mode" in
  smoke)
    secs=${FUZZ_SECONDS:-60}
    exec nice "$bin" "${common[@]}" -max_total_time="$secs" fuzz/corpus "$out/seeds"
    ;;
  long)
    runs=${2:?usage: scripts/fuzz.sh long N}
    exec nice "$bin" "${common[@]}" -runs="$runs" fuzz/corpus "$out/seeds"
    ;;
  *)
    echo "usage: scripts/fuzz.sh smoke | long N | build" >&2
    exit 2
    ;;
esac
