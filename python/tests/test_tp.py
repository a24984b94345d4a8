"""clcrt.tp without a GPU: the reduction's tile functions compile for Hopper and Blackwell
with the layout of their Args checked, and stay small enough to share an SM with a GEMM CTA
(the deadlock argument in clcrt/tp.py leans on it). tests/test_gpu_tp_tiles.py runs them."""

import pytest

import clcrt
from clcrt import tp


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_tile_functions_compile(arch):
    with clcrt.Runtime(arch=arch, cache_dir="") as rt:
        red = rt.register(tp.SRC, "tp_reduce", tp.TpArgs, block=256, min_blocks_per_sm=4)
        wait = rt.register(tp.SRC, "tp_wait", tp.TpArgs, block=32)
        assert red.info.param_bytes == wait.info.param_bytes
        # 288 threads of the 128-row GEMM at its cap of 168 registers, plus one reduction CTA of
        # 256 threads, fit an SM's 65536 registers; no shared memory beyond the scheduler's.
        assert 288 * 168 + 256 * red.info.registers <= 65536, red.info.registers
        assert red.info.dynamic_smem == 0 and red.info.static_smem <= 2048
        assert red.info.stack_bytes <= 128  # the give-up message's frame and a few spilled words


def test_args_match_the_source():
    assert tp.TpArgs.__name__ == "TpArgs" and "struct TpArgs" in tp.SRC
    assert tp.MAX_WORLD == 8 and "part[8]" in tp.SRC
