#!/usr/bin/env bash
# `make test-install`: the path a new user takes, checked end to end.
#   1. The README's complete example is examples/readme_example.c, byte for byte.
#   2. `make install PREFIX=<temporary prefix>`.
#   3. That file is compiled and linked with `pkg-config --cflags --libs clcrt` and nothing
#      else: PKG_CONFIG_PATH names only the prefix, CPATH, LIBRARY_PATH and LD_LIBRARY_PATH are
#      unset, and /usr/local/include (where some machines have cuda.h) is left off the
#      compiler's search path. Then once more statically (`pkg-config --static`, libclcrt.a).
#   4. Each program runs: with a GPU it must print x[n-1] = 3 and exit 0; without one it must
#      say CLCRT_E_NO_DEVICE and exit 2. A machine with no driver at all has no libcuda.so.1,
#      which the example links (it calls the driver API itself): there it must first be refused
#      by the loader (exit 127), as its comment says, and then run with the toolkit's stub put
#      on LD_LIBRARY_PATH under that name, standing in for a driver with no GPU.
# Environment: BUILD (build folder), CUDA_HOME, CC, MAKE. Prints one line per step.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BUILD:-build}
cuda=${CUDA_HOME:-/usr/local/cuda}
cc=${CC:-cc}
make=${MAKE:-make}
say() { echo "test-install: $*"; }
die() { echo "test-install: FAILED: $*" >&2; exit 1; }

# 1. The README shows the file verbatim: the first ```c block after "## A complete example".
readme_block=$(awk '/^## A complete example/{f=1; next} f && /^```c$/{p=1; next} p && /^```$/{exit} p' README.md)
[ "$readme_block" = "$(cat examples/readme_example.c)" ] ||
  die "README.md's complete example differs from examples/readme_example.c (diff <(awk ...) to see)"
say "README example = examples/readme_example.c"

mkdir -p "$build"
work=$(mktemp -d "$(cd "$build" && pwd)/install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
"$make" --no-print-directory -s install PREFIX="$prefix" BUILD="$build" CUDA_HOME="$cuda" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; die "make install PREFIX=$prefix"; }
say "installed to a temporary prefix"

# The compiler's own include directories, less /usr/local/include.
mapfile -t sysinc < <(LC_ALL=C "$cc" -xc -E -v /dev/null 2>&1 >/dev/null |
  sed -n '/^#include <...> search starts here:/,/^End of search list./p' | sed '1d;$d' | sed 's/^ *//')
incs=(-nostdinc)
for d in "${sysinc[@]}"; do [ "$d" = /usr/local/include ] || incs+=(-isystem "$d"); done

clean_env=(env -u CPATH -u C_INCLUDE_PATH -u LIBRARY_PATH -u LD_LIBRARY_PATH -u PKG_CONFIG_LIBDIR
           PKG_CONFIG_PATH="$prefix/lib/pkgconfig")
flags=$("${clean_env[@]}" pkg-config --cflags --libs clcrt) || die "pkg-config --cflags --libs clcrt"
"${clean_env[@]}" "$cc" "${incs[@]}" -o "$work/ex" examples/readme_example.c $flags 2>"$work/cc.log" ||
  { cat "$work/cc.log" >&2; die "cc examples/readme_example.c \$(pkg-config --cflags --libs clcrt)"; }
sflags=$("${clean_env[@]}" pkg-config --static --cflags --libs clcrt | sed 's/-lclcrt\b/-l:libclcrt.a/')
"${clean_env[@]}" "$cc" "${incs[@]}" -o "$work/ex-static" examples/readme_example.c $sflags 2>"$work/cc.log" ||
  { cat "$work/cc.log" >&2; die "cc examples/readme_example.c \$(pkg-config --static --cflags --libs clcrt)"; }
say "built with pkg-config alone: $flags"

run_env=(env -u LD_LIBRARY_PATH)
if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  # What the example's comment says of a machine with no driver: the loader refuses it.
  set +e
  "${run_env[@]}" "$work/ex" >"$work/out" 2>"$work/err"
  rc=$?
  set -e
  grep -q 'libcuda\.so\.1' "$work/err" && [ $rc = 127 ] ||
    { cat "$work/out" "$work/err" >&2; die "with no driver the example exited $rc, not 127 naming libcuda.so.1"; }
  grep -q 'exit 127' examples/readme_example.c ||
    die "examples/readme_example.c does not say that with no driver it exits 127"
  say "ex: no driver, the loader refuses it (exit 127), as its comment says"
  mkdir -p "$work/stub"
  ln -s "$cuda/lib64/stubs/libcuda.so" "$work/stub/libcuda.so.1"
  run_env=(env LD_LIBRARY_PATH="$work/stub")
  note=" (no driver here: the toolkit's stub stands in for libcuda.so.1)"
fi
for prog in ex ex-static; do
  set +e
  "${run_env[@]}" CLCRT_CACHE_DIR="$work/cache" "$work/$prog" >"$work/out" 2>"$work/err"
  rc=$?
  set -e
  if [ $rc = 0 ] && grep -q '^x\[16777215\] = 3 ' "$work/out"; then
    say "$prog ran on the GPU: $(cat "$work/out")"
  elif [ $rc = 2 ] && grep -q 'CLCRT_E_NO_DEVICE' "$work/err"; then
    say "$prog: no GPU, exit 2${note:-}: $(head -c 160 "$work/err")"
  else
    cat "$work/out" "$work/err" >&2
    die "$prog exited $rc"
  fi
done
