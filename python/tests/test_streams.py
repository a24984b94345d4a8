"""Streams without a GPU: what counts as a stream, and how torch's current one is found
(with a stand-in for torch)."""

import types

import pytest

import clcrt
from clcrt import _core as R


def test_stream_handles():
    class Proto:
        def __cuda_stream__(self):
            return (0, 0x1234)

    class ProtoAttr:
        __cuda_stream__ = (0, 0x99)

    class TorchLike:
        cuda_stream = 0x55

    class CupyLike:
        ptr = 0x66

    assert R.stream_handle(0x10) == 0x10
    assert R.stream_handle(Proto()) == 0x1234
    assert R.stream_handle(ProtoAttr()) == 0x99
    assert R.stream_handle(TorchLike()) == 0x55
    assert R.stream_handle(CupyLike()) == 0x66
    with pytest.raises(clcrt.InvalidError, match="not a stream"):
        R.stream_handle("default")
    with pytest.raises(clcrt.InvalidError, match="negative"):
        R.stream_handle(-1)

    class BadProto:
        def __cuda_stream__(self):
            return 5

    with pytest.raises(clcrt.InvalidError, match="version, handle"):
        R.stream_handle(BadProto())


def _fake_torch(handle, raw=True, available=True):
    calls = []

    def current_stream(dev):
        calls.append(("public", dev))
        return types.SimpleNamespace(cuda_stream=handle)

    cuda = types.SimpleNamespace(is_available=lambda: available, current_stream=current_stream)
    c = types.SimpleNamespace()
    if raw:
        def raw_fn(dev):
            calls.append(("raw", dev))
            return handle
        c._cuda_getCurrentRawStream = raw_fn
    return types.SimpleNamespace(cuda=cuda, _C=c), calls


def test_torch_current_stream_lookup():
    torch, calls = _fake_torch(0xABC)
    f = R._torch_stream_fn(torch, 3)
    calls.clear()
    assert f() == 0xABC and calls == [("raw", 3)]  # the cheap path, once it agrees with the public one
    torch, calls = _fake_torch(0xABC, raw=False)
    f = R._torch_stream_fn(torch, 0)
    calls.clear()
    assert f() == 0xABC and calls == [("public", 0)]
    torch, _ = _fake_torch(1, available=False)
    assert R._torch_stream_fn(torch, 0) is False


def test_enums():
    assert R._enum(clcrt.Sched, "Steal", "sched") is clcrt.Sched.STEAL
    assert R._enum(clcrt.Swizzle, "128b", "swizzle") is clcrt.Swizzle.B128
    assert R._enum(clcrt.Grid, 2, "grid") is clcrt.Grid.PERSISTENT
    with pytest.raises(clcrt.InvalidError, match="'auto'"):
        R._enum(clcrt.Grid, True, "grid")
    assert int(clcrt.USE_TRACE | clcrt.USE_GRAPH) == 3


def test_tiles():
    assert R._dim3(5, "t") == (5, 1, 1)
    assert R._dim3([2, 3], "t") == (2, 3, 1)
    assert R._dim3((0, 0, 0), "t", allow_zero=True) == (0, 0, 0)
    big = R._tiles((1 << 31) + 5)
    assert big[0].value == (1 << 31) + 5 and big[1:] == (1, 1)
    for bad in ((1 << 32,), -1, (1, 2, 3, 4), 1.5, "4"):
        with pytest.raises(clcrt.InvalidError):
            R._dim3(bad, "t")
