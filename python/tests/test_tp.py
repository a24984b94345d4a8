"""clcrt.tp without a GPU: the reduction's tile functions compile for Hopper and Blackwell
with the layout of their Args checked, and stay small enough to share an SM with a GEMM CTA
(the deadlock argument in clcrt/tp.py leans on it). tests/test_gpu_tp_tiles.py runs them."""

import pytest

import clcrt
from clcrt import tp


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_tile_functions_compile(arch):
    with clcrt.Runtime(arch=arch, cache_dir="") as rt:
        # As RowAllReduce registers them: STEAL on a persistent grid on every architecture.
        red = rt.register(tp.SRC, "tp_reduce", tp.TpArgs, block=256, min_blocks_per_sm=4, sched="steal",
                          grid="persistent")
        wait = rt.register(tp.SRC, "tp_wait", tp.TpArgs, block=32, sched="steal", grid="persistent")
        assert red.info.sched == clcrt.Sched.STEAL and red.info.grid == clcrt.Grid.PERSISTENT
        for k in (red, wait):  # what RowAllReduce builds ahead, so that no run launches one CTA per unit
            k.prepare(clcrt.Use.GRAPH | clcrt.Use.SHORT | clcrt.Use.TRACE)
        assert red.info.param_bytes == wait.info.param_bytes
        # 288 threads of the 128-row GEMM at its cap of 168 registers, plus one reduction CTA of
        # 256 threads, fit an SM's 65536 registers; no shared memory beyond the scheduler's.
        assert 288 * 168 + 256 * red.info.registers <= 65536, red.info.registers
        assert red.info.dynamic_smem == 0 and red.info.static_smem <= 2048
        assert red.info.stack_bytes <= 128  # the give-up message's frame and a few spilled words


def test_args_match_the_source():
    assert tp.TpArgs.__name__ == "TpArgs" and "struct TpArgs" in tp.SRC
    assert tp.MAX_WORLD == 8 and "part[8]" in tp.SRC


# ---- RowAllReduce.gemm's host logic, with stand-ins for torch, the op and the kernels ----------


class _T:  # a stand-in tensor: shape only
    def __init__(self, *shape):
        self.shape = shape

    def dim(self):
        return len(self.shape)

    def __getitem__(self, s):
        return self


class _Stream:
    def __init__(self, name):
        self.name, self.cuda_stream, self.waited = name, id(self), []

    def wait_event(self, e):
        self.waited.append(e)


class _Event:
    def record(self, stream):
        self.on = stream


def _fake(monkeypatch, capturing=()):
    import types

    log = []
    main = _Stream("main")
    torch = types.SimpleNamespace(
        Tensor=_T, cuda=types.SimpleNamespace(current_stream=lambda: main, Event=_Event))
    ar = object.__new__(tp.RowAllReduce)
    ar._torch, ar.rows, ar.cols, ar.world, ar.per_rank, ar.rank = torch, 256, 64, 2, 1, 0
    blocks = 4
    ar._buf, ar._broken = object(), None
    ar._epoch, ar._after, ar._cover = [0] * blocks, [None] * blocks, [0] * blocks
    ar.partial, ar.out, ar.done = _T(256, 64), _T(256, 64), _T(blocks)
    ar._ops = types.SimpleNamespace(gemm=lambda a, b, **kw: log.append(("gemm", kw["stream"].name)))
    ar._args = lambda r0, m, ep: (r0, m, ep)
    ar._comm_stream = lambda s: s
    run = lambda name: types.SimpleNamespace(run=lambda n, args, stream: log.append((name, n, args, stream.name)))
    ar._reduce_k, ar._wait_k = run("reduce"), run("wait")
    monkeypatch.setattr(tp._driver, "is_capturing", lambda h: h in capturing)
    return ar, main, log


def test_gemm_enqueues_the_gemm_then_the_reduction(monkeypatch):
    ar, main, log = _fake(monkeypatch)
    comm = _Stream("comm")
    ar.gemm(_T(128, 32), _T(64, 32), row0=0, comm=comm)
    ar.gemm(_T(100, 32), _T(64, 32), row0=128, comm=comm)  # a last block of 36 rows
    assert log == [("gemm", "main"), ("reduce", 4, (0, 128, 1), "comm"), ("wait", 2, (0, 128, 1), "comm"),
                   ("gemm", "main"), ("reduce", 4, (128, 100, 1), "comm"), ("wait", 2, (128, 100, 1), "comm")]
    assert ar._epoch == [1, 1, 1, 1] and ar._cover == [64, 64, 64, 36] and main.waited == []
    ar.gemm(_T(128, 32), _T(64, 32), row0=0, comm=comm)  # again: waits for the first reduction of these rows
    assert len(main.waited) == 1 and main.waited[0].on is comm and ar._epoch == [2, 2, 1, 1]


@pytest.mark.parametrize("row0,m,says", [(32, 64, "multiple of 64"), (0, 300, "must make rows"),
                                         (0, 256, "cut across"), (128, 128, "cut across")])
def test_gemm_refuses_ranges_that_break_the_targets(monkeypatch, row0, m, says):
    ar, main, log = _fake(monkeypatch)
    ar.gemm(_T(128, 32), _T(64, 32), row0=0)
    ar.gemm(_T(100, 32), _T(64, 32), row0=128)
    n = len(log)
    with pytest.raises(clcrt.InvalidError, match=says):
        ar.gemm(_T(m, 32), _T(64, 32), row0=row0)
    assert len(log) == n  # nothing enqueued


def test_gemm_refuses_capture_and_a_broken_object(monkeypatch):
    comm = _Stream("comm")
    ar, main, log = _fake(monkeypatch, capturing={id(comm)})
    with pytest.raises(clcrt.InvalidError, match="not in a CUDA graph"):
        ar.gemm(_T(64, 32), _T(64, 32), comm=comm)
    assert log == [] and ar._epoch == [0, 0, 0, 0]

    def fail(n, args, stream):
        raise clcrt.CudaError("launch failed")

    ar._reduce_k.run = fail
    with pytest.raises(clcrt.CudaError):
        ar.gemm(_T(64, 32), _T(64, 32))
    with pytest.raises(clcrt.InvalidError, match="earlier call failed"):
        ar.gemm(_T(64, 32), _T(64, 32))
