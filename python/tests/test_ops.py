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


def test_shim_plans_need_a_device(rt90):
    """The shim's Args calls, marshalled as ops makes them: in compile-only mode they reach
    gemm.h's tensor maps, which need the driver, and say so."""
    import ctypes

    from clcrt import _native
    from clcrt import _types as T

    clcrt.ops.source()
    lib = _native.lib()
    buf = (ctypes.c_uint8 * 1024)()
    launch = T.sized(T.GemmLaunch)
    st = lib.clcrt_py_gemm_dense(rt90._h, -1, 132, 0x10000, 0x20000, 0x30000, 256, 256, 64, 0, 0, buf, 1024,
                                 ctypes.byref(launch))
    assert st == clcrt.UnsupportedError.status
    assert "compile-only" in lib.clcrt_errmsg(rt90._h).decode()
    st = lib.clcrt_py_gemm_grouped(rt90._h, 0, 0x10000, 0x20000, 0x30000, 100, 256, 64, 4, 0x40000, buf, 1024,
                                   ctypes.byref(launch))
    assert st == clcrt.UnsupportedError.status
    assert lib.clcrt_py_gemm_grouped(rt90._h, 0, 0x10000, 0x20000, 0x30000, 100, 256, 64, 0, 0x40000, buf, 1024,
                                     ctypes.byref(launch)) == clcrt.InvalidError.status  # no groups
    assert lib.clcrt_py_gemm_dense(rt90._h, 99, 132, 0x10000, 0x20000, 0x30000, 256, 256, 64, 0, 0, buf, 1024,
                                   ctypes.byref(launch)) == clcrt.InvalidError.status  # no such variant
    assert lib.clcrt_py_gemm_max_groups() >= 1
