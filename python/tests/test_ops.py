"""clcrt.ops without a GPU: the shipped source, the variant table from gemm.h, the GEMM
kernels compiled through the shim, and the refusals that need no device."""

import time

import pytest

import clcrt

from conftest import REPO


def test_source_is_the_examples():
    assert clcrt.ops.source() == (REPO / "examples" / "gemm" / "gemm.cu").read_text()


def test_variants_from_gemm_h():
    vs = clcrt.ops.variants()
    text = (REPO / "examples" / "gemm" / "gemm.h").read_text()
    assert vs and all('"%s"' % v["name"] in text for v in vs)
    assert vs[0]["bm"] % 64 == 0 and vs[0]["cluster_m"] in (1, 2)


@pytest.mark.parametrize("grouped", [False, True])
def test_gemm_kernels_compile(rt90, grouped):
    t = time.perf_counter()
    k = clcrt.ops.kernel(grouped=grouped, rt=rt90)
    i = k.info
    assert i.name == ("clcrt_steal_gemm_grouped_tile" if grouped else "clcrt_steal_gemm_tile")
    assert i.block[0] == clcrt.ops.variants()[0]["bm"] // 64 * 128 + 32
    assert clcrt.ops.kernel(grouped=grouped, rt=rt90) is k  # registered once per runtime
    print("gemm kernel (grouped=%s) compiled in %.1f s" % (grouped, time.perf_counter() - t))


def test_unknown_variant(rt90):
    with pytest.raises(clcrt.InvalidError, match="128x256"):
        clcrt.ops.kernel(variant="huge", rt=rt90)


def test_gemm_refuses_without_gpu_tensors():
    try:
        import torch
    except ImportError:
        with pytest.raises(clcrt.InvalidError, match="PyTorch"):
            clcrt.ops.gemm(None, None)
        return
    a = torch.zeros(4, 8, dtype=torch.bfloat16)
    with pytest.raises(clcrt.InvalidError, match="GPU"):
        clcrt.ops.gemm(a, a)
