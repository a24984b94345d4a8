"""Streams without a GPU: what counts as a stream, and how torch's current one is found
(with a stand-in for torch)."""

import ctypes
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


# ---- SM budgets (clcrt_stream_create_ex) ------------------------------------------------------


def test_stream_flags_match_the_header():
    """CLCRT_STREAM_SM_* as the header defines them (the opts struct is checked by the mirror test)."""
    import re

    from conftest import REPO
    from clcrt import _types as T

    header = (REPO / "include" / "clcrt.h").read_text()
    defined = {m[0]: int(m[1], 0) for m in re.findall(r"#define CLCRT_(STREAM_SM_\w+) (\w+)u", header)}
    assert defined == {"STREAM_SM_ROUND_UP": T.STREAM_SM_ROUND_UP, "STREAM_SM_ROUND_DOWN": T.STREAM_SM_ROUND_DOWN,
                       "STREAM_SM_REST": T.STREAM_SM_REST}


class _Budget(clcrt.Stream):
    """A stand-in for a stream made with sm_budget: its SMs without a GPU."""

    sms = 112

    def __init__(self, rt):
        super().__init__(rt, None, side="budget")


def test_budget_options(rt90):
    """rt.stream's keywords as clcrt_stream_opts' sm_budget, flags and side."""
    up, down, rest = 1, 2, 4
    assert R._budget_opts(rt90, None, None, None) == (0, 0, None)
    assert R._budget_opts(rt90, 112, None, None) == (112, 0, "budget")
    assert R._budget_opts(rt90, 66, "up", None) == (66, up, "budget")
    assert R._budget_opts(rt90, 66, " Down", None) == (66, down, "budget")
    assert R._budget_opts(rt90, 66, "exact", None) == (66, 0, "budget")
    assert R._budget_opts(rt90, None, None, 112) == (112, rest, "rest")
    assert R._budget_opts(rt90, None, "down", 66) == (66, rest | down, "rest")
    # The rest of a budget stream is the other side of that stream's own partition: its SMs.
    assert R._budget_opts(rt90, None, None, _Budget(rt90)) == (112, rest, "rest")


@pytest.mark.parametrize("kw,match", [
    (dict(sm_budget=0), "sm_budget 0 is not a positive number of SMs"),
    (dict(sm_budget=-8), "sm_budget -8 is not"),
    (dict(sm_budget=True), "sm_budget True is not"),
    (dict(sm_budget=16.0), "sm_budget 16.0 is not"),
    (dict(sm_budget=1 << 32), "is not a positive number"),
    (dict(rest_of="rest"), "rest_of 'rest' is not"),
    (dict(sm_budget=64, rest_of=64), "not both"),
    (dict(sm_budget=64, round="nearest"), "round 'nearest' is not one of"),
    (dict(sm_budget=64, round=1), "round 1 is not one of"),
    (dict(round="up"), "give sm_budget or rest_of too"),
    (dict(grid_sms=0), "grid_sms 0 is not"),
    (dict(grid_sms=-1), "grid_sms -1 is not"),
    (dict(sm_budget=64, priority="high"), "priority 'high' is not an int"),
    (dict(stream=0x1234, sm_budget=64), "a stream of your own takes no sm_budget"),
    (dict(stream=0x1234, rest_of=64), "a stream of your own takes no"),
    (dict(stream=0x1234, grid_sms=16, priority=-1), "a stream of your own takes no"),
    (dict(stream="default", grid_sms=16), "not a stream"),
])
def test_budget_argument_checks(rt90, kw, match):
    """Refused before any device is needed: the same error with or without a GPU."""
    with pytest.raises(clcrt.InvalidError, match=match):
        rt90.stream(**kw)


def test_rest_of_checks(rt90):
    with clcrt.Runtime(arch="sm_90a", cache_dir="") as other:
        with pytest.raises(clcrt.InvalidError, match="belongs to another runtime"):
            rt90.stream(rest_of=_Budget(other))
    with pytest.raises(clcrt.InvalidError, match="has no SM budget of its own"):
        rt90.stream(rest_of=clcrt.Stream(rt90, None, side="rest"))
    with pytest.raises(clcrt.InvalidError, match="has no SM budget of its own"):
        rt90.stream(rest_of=clcrt.Stream(rt90, None))
    with pytest.raises(clcrt.InvalidError, match="takes the rest of its partition as it is"):
        rt90.stream(rest_of=_Budget(rt90), round="down")


@pytest.mark.parametrize("kw", [dict(sm_budget=64), dict(rest_of=64, round="up"), dict(grid_sms=16),
                                dict(stream=0x1234, grid_sms=16), dict(sm_budget=8, priority=-1)])
def test_budget_streams_refused_compile_only(rt90, kw):
    """Good arguments reach the library, which refuses streams of a compile-only runtime."""
    with pytest.raises(clcrt.UnsupportedError, match="only compiles"):
        rt90.stream(**kw)


class _RecordingLib:
    """The library with clcrt_stream_create_ex recorded and refused (so no stream is made)."""

    def __init__(self, real):
        self._real, self.calls, self.answer = real, [], (1, None)  # CLCRT_E_INVALID

    def clcrt_stream_create_ex(self, h, popts, pout):
        o = popts._obj
        self.calls.append((o.size, o.cu, o.sm_budget, o.priority, o.flags, o.grid_sms))
        return self.answer[0]

    def clcrt_errmsg(self, h):
        return self.answer[1] if self.answer[1] is not None else self._real.clcrt_errmsg(h)

    def __getattr__(self, name):
        return getattr(self._real, name)


def test_budget_streams_reach_the_library(rt90, monkeypatch):
    """What rt.stream passes to clcrt_stream_create_ex on a runtime with a device: CUDA's
    priorities as clcrt's levels, the flags, grid_sms, and the CUstream (0: the legacy one)."""
    from clcrt import _types as T

    lib = _RecordingLib(rt90._lib)
    monkeypatch.setattr(rt90, "_lib", lib)
    monkeypatch.setattr(rt90, "compile_only", False)
    monkeypatch.setattr(R._driver, "priority_range", lambda dev: (0, -5))
    monkeypatch.setattr(R._driver, "is_capturing", lambda h: False)
    cases = [
        (dict(sm_budget=112), (None, 112, 0, 0, 0)),
        (dict(sm_budget=112, priority=-2), (None, 112, 2, 0, 0)),
        (dict(sm_budget=112, priority=1), (None, 112, 0, 0, 0)),  # below the least: the least
        (dict(sm_budget=66, round="down"), (None, 66, 0, 2, 0)),
        (dict(sm_budget=66, round="up", grid_sms=132), (None, 66, 0, 1, 132)),
        (dict(rest_of=112, priority=-5), (None, 112, 5, 4, 0)),
        (dict(rest_of=_Budget(rt90)), (None, 112, 0, 4, 0)),
        (dict(grid_sms=16), (None, 0, 0, 0, 16)),
        (dict(stream=0x1234, grid_sms=16), (0x1234, 0, 0, 0, 16)),
        (dict(stream=0, grid_sms=16), (1, 0, 0, 0, 16)),  # 0 is the legacy default stream, CU_STREAM_LEGACY
    ]
    for kw, want in cases:
        lib.calls.clear()
        with pytest.raises(clcrt.InvalidError):
            rt90.stream(**kw)
        assert lib.calls == [(ctypes.sizeof(T.StreamOpts),) + want], kw
    assert rt90._owned == []
    # The library's refusal of a budget it would round names the C flags; Python names its keyword.
    lib.answer = (4, b"an SM budget of 66 cannot be honoured exactly: ask for 72 (CLCRT_STREAM_SM_ROUND_UP accepts that) "
                     b"or 64 (CLCRT_STREAM_SM_ROUND_DOWN gives that)")
    with pytest.raises(clcrt.UnsupportedError) as e:
        rt90.stream(sm_budget=66)
    assert str(e.value).endswith('ask for 72 (round="up" accepts that) or 64 (round="down" gives that)')


def test_ops_keep_a_clcrt_stream(rt90):
    """clcrt.ops run on a clcrt.Stream itself (its budget and scheduler state), not on a second
    wrapper of its CUstream."""
    s = clcrt.Stream(rt90, None, side="budget")
    assert clcrt.ops._stream(rt90, s) is s
