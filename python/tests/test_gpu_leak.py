"""GPU: 10^6 runs from Python leak no host memory (CLCRT_PY_LEAK_RUNS changes the count)."""

import gc
import os

import pytest

import clcrt

from conftest import gpu_skip_reason

REASON = gpu_skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))
torch = None if REASON else __import__("torch")

RUNS = int(os.environ.get("CLCRT_PY_LEAK_RUNS", str(10**6)))
COUNT_SRC = """struct CountArgs { int *n; };
__device__ void count_tile(const clcrt::Tile &t, const CountArgs &a) {
  if (threadIdx.x == 0) atomicAdd(a.n, 1);
}
"""


class CountArgs(clcrt.Args):
    n: clcrt.ptr("int32")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_million_runs_leak_nothing():
    rt = clcrt.runtime(torch.cuda.current_device())
    k = rt.register(COUNT_SRC, "count_tile", CountArgs, block=32)
    n = torch.zeros(1, dtype=torch.int32, device="cuda")
    a = CountArgs(n)
    go = k.launcher(1, a)
    warm = 20000
    for _ in range(warm):
        go()
        k.run(1, a)
    torch.cuda.synchronize()
    gc.collect()
    before = rss()
    for _ in range(RUNS // 2):
        go()
    for _ in range(RUNS - RUNS // 2):
        k.run(1, a)
    torch.cuda.synchronize()
    gc.collect()
    grown = rss() - before
    assert n.item() == 2 * warm + RUNS  # every run ran once
    print("%d runs: RSS %+d KiB" % (RUNS, grown // 1024))
    assert grown < 1 << 20, "RSS grew by %d KiB over %d runs" % (grown // 1024, RUNS)
