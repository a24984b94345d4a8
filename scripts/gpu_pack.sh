#!/usr/bin/env bash
# Copies what a GPU run needs (test and benchmark binaries, examples, the tool) into .gpu/,
# a folder git ignores, so that a run on the lent GPU machine carries a consistent snapshot
# even while the build folder is being rebuilt. Usage: scripts/gpu_pack.sh [BUILD]
set -eu
B=${1:-build}
rm -rf .gpu && mkdir -p .gpu/tests .gpu/bench .gpu/examples
cp "$B"/tests/gpu_* .gpu/tests/ 2>/dev/null || true
rm -f .gpu/tests/*.o
for f in "$B"/bench/* "$B"/examples/*; do
  case $f in *.o) ;; *) [ -f "$f" ] && [ -x "$f" ] && cp "$f" ".gpu/${f#$B/}" ;; esac
done
cp "$B"/clcrt .gpu/ 2>/dev/null || true
du -sh .gpu
