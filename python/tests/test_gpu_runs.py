"""GPU: runs on torch tensors under every scheduler, on torch's current stream between torch
ops, on other streams, inside torch.cuda.graph capture and replay; statistics, traces,
priorities; and the refusals (CPU tensors, another device, wrong dtypes, sizes)."""

import pytest

import clcrt

from conftest import SCALE_SRC, ScaleArgs, gpu_skip_reason

REASON = gpu_skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))
torch = None if REASON else __import__("torch")

N = (1 << 20) + 123  # not a multiple of the block


@pytest.fixture(scope="module")
def rt():
    return clcrt.runtime(torch.cuda.current_device())


def schedulers(rt):
    s = [("steal", "auto"), ("steal", "full"), ("steal", "persistent"), ("static", "auto"), ("fixed", "auto")]
    if int(rt.arch[3:].rstrip("af")) >= 100:
        s.append(("clc", "auto"))
    return s


@pytest.fixture(scope="module")
def kernels(rt):
    ks = {}
    for sched, grid in schedulers(rt):
        for cluster in (1, 2):
            ks[(sched, grid, cluster)] = rt.register(SCALE_SRC, "scale_tile", ScaleArgs, block=256, sched=sched,
                                                     grid=grid, cluster=(cluster, 1, 1))
    return ks


def tiles(n, block=256):
    return (n + block - 1) // block


def test_every_scheduler(rt, kernels):
    for (sched, grid, cluster), k in kernels.items():
        x = torch.randn(N, device="cuda")
        ref = x * 1.5
        k.run(tiles(N), ScaleArgs(x, N, 1.5))
        torch.cuda.synchronize()
        assert torch.equal(x, ref), (sched, grid, cluster)


def test_current_stream_orders_with_torch_ops(rt, kernels):
    """Between torch ops on torch's current stream (the default one, then a side stream),
    with no synchronisation in between: each op sees the one before."""
    k = kernels[("steal", "auto", 1)]
    for side in (False, True):
        s = torch.cuda.Stream() if side else torch.cuda.current_stream()
        with torch.cuda.stream(s):
            x = torch.full((N,), 1.0, device="cuda")
            for i in range(20):
                x.add_(1.0)                      # torch
                k.run(tiles(N), ScaleArgs(x, N, 2.0))   # clcrt, same stream
            y = x.sum()
            assert rt.current_stream().handle == (s.cuda_stream or 1)  # 1: the legacy stream, torch's default
        s.synchronize()
        v = 1.0
        for i in range(20):
            v = (v + 1.0) * 2.0
        assert torch.all(x == v), side
        assert y.item() == pytest.approx(v * N, rel=1e-4)


def test_stream_arguments(rt, kernels):
    k = kernels[("static", "auto", 1)]
    ts = torch.cuda.Stream()

    class Proto:
        def __cuda_stream__(self):
            return (0, ts.cuda_stream)

    owned = rt.stream()
    for stream in (ts, ts.cuda_stream, Proto(), owned, rt.stream(ts)):
        x = torch.ones(N, device="cuda")
        torch.cuda.synchronize()
        k.run(tiles(N), ScaleArgs(x, N, 3.0), stream=stream)
        (owned if stream is owned else ts).synchronize()
        assert torch.all(x == 3.0), stream
    assert rt.stream(ts) is rt.stream(ts.cuda_stream)  # one wrapper per CUstream
    ext = torch.cuda.ExternalStream(owned.handle)  # __cuda_stream__ / handle usable by torch
    with torch.cuda.stream(ext):
        z = torch.ones(4, device="cuda") * 2
    ext.synchronize()
    assert z.sum().item() == 8


@pytest.mark.parametrize("pdl", [False, True])
def test_graph_capture_and_replay(rt, kernels, pdl):
    """Runs captured between torch ops, one right after another too, replayed three times; with
    pdl=True the captured edges into the runs are programmatic ones."""
    for key in (("steal", "auto", 1), ("steal", "persistent", 2), ("fixed", "auto", 1)):
        k = kernels[key]
        x = torch.ones(N, device="cuda")
        args = ScaleArgs(x, N, 2.0)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture, as torch recommends
            k.run(tiles(N), args, pdl=pdl)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            k.run(tiles(N), args, pdl=pdl)
            x.add_(1.0)
            k.run(tiles(N), args, pdl=pdl)
            k.run(tiles(N), args, pdl=pdl)
        x.fill_(1.0)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        v = 1.0
        for _ in range(3):
            v = (v * 2.0 + 1.0) * 4.0
        assert torch.all(x == v), key


def test_pdl_runs_see_what_came_before(rt, kernels):
    """pdl=True (programmatic dependent launch): each run still sees every write of the kernel
    before it on the stream, torch's or its own previous run's, under every scheduler and
    cluster shape (captured graphs: test_graph_capture_and_replay)."""
    for key, k in kernels.items():
        x = torch.full((N,), 1.0, device="cuda")
        args = ScaleArgs(x, N, 2.0)
        v = 1.0
        for i in range(6):
            k.run(tiles(N), args, pdl=True)      # after torch's fill or add
            k.run(tiles(N), args, pdl=True)      # after a clcrt run launched early itself
            x.add_(1.0)
            v = v * 4.0 + 1.0
        torch.cuda.synchronize()
        assert torch.all(x == v), key


def test_first_run_inside_a_capture(rt):
    """A kernel never run before and a stream never seen before, both first met inside the
    capture: the graph variant is built and the stream wrapped during the capture."""
    k = rt.register(SCALE_SRC + "\n// fresh\n", "scale_tile", ScaleArgs, block=128, sched="steal")
    x = torch.ones(N, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=torch.cuda.Stream()):
        k.run(tiles(N, 128), ScaleArgs(x, N, 3.0))
    g.replay()
    g.replay()
    torch.cuda.synchronize()
    assert torch.all(x == 9.0)


def test_stats_and_trace(rt, kernels, tmp_path):
    k = kernels[("steal", "auto", 1)]
    s = rt.stream()
    s.stats_enable()
    x = torch.ones(N, device="cuda")
    torch.cuda.synchronize()
    k.run(tiles(N), ScaleArgs(x, N, 1.0), stream=s)
    st = s.stats()
    assert st.runs == 1 and st.tiles == tiles(N) and sum(st.tiles_per_sm) == tiles(N)
    s.stats_enable(False)
    s.trace_enable(1 << 16)
    k.run(tiles(N), ScaleArgs(x, N, 1.0), stream=s)
    t = s.trace_read()
    assert len(t) == tiles(N) and t.dropped == 0
    assert sorted(r.tile for r in t.records) == list(range(tiles(N)))
    assert t.summary().tiles == tiles(N)
    assert t.draw(tmp_path / "run.png").read_bytes()[:4] == b"\x89PNG"
    s.trace_disable()
    s.close()


def test_priorities_and_preemption(rt, kernels):
    least, greatest = clcrt._driver.priority_range(rt.device)
    hi = rt.stream(priority=greatest)
    lo = rt.stream()
    assert greatest < least and hi.level > 0 and lo.level == 0
    k = kernels[("steal", "auto", 1)]
    x = torch.ones(N, device="cuda")
    y = torch.ones(N, device="cuda")
    torch.cuda.synchronize()
    k.run(tiles(N), ScaleArgs(x, N, 2.0), stream=lo)
    with hi.preempt():
        with torch.cuda.stream(torch.cuda.ExternalStream(hi.handle)):
            y.mul_(5.0)
        k.run(tiles(N), ScaleArgs(y, N, 2.0), stream=hi)
    lo.sync()
    hi.sync()
    assert torch.all(x == 2.0) and torch.all(y == 10.0)
    with pytest.raises(clcrt.InvalidError, match="lowest priority"):
        lo.preempt_begin()
    with pytest.raises(clcrt.InvalidError, match="without a matching"):
        hi.preempt_end()
    hi.close()
    lo.close()


def test_done_future(rt, kernels):
    s = rt.stream()
    x = torch.ones(N, device="cuda")
    torch.cuda.synchronize()
    kernels[("fixed", "auto", 1)].run(tiles(N), ScaleArgs(x, N, 4.0), stream=s)
    assert s.done().result(timeout=60) is None
    assert torch.all(x == 4.0)


def test_launcher(rt, kernels):
    x = torch.ones(N, device="cuda")
    go = kernels[("steal", "auto", 1)].launcher(tiles(N), ScaleArgs(x, N, 2.0))
    for _ in range(3):
        go()
    torch.cuda.synchronize()
    assert torch.all(x == 8.0)


# ---- refusals -----------------------------------------------------------------------------------


def test_cpu_tensor_refused():
    with pytest.raises(clcrt.InvalidError, match="cpu"):
        ScaleArgs(x=torch.ones(4))


def test_other_device_refused(rt, kernels):
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU: the other-device check is covered with a DLPack stand-in in test_args.py")
    other = (rt.device + 1) % torch.cuda.device_count()
    x = torch.ones(16, device="cuda:%d" % other)
    with pytest.raises(clcrt.InvalidError, match="cuda:%d" % other):
        kernels[("steal", "auto", 1)].run(1, ScaleArgs(x, 16, 1.0))


def test_wrong_tensors_refused():
    with pytest.raises(clcrt.InvalidError, match="float64"):
        ScaleArgs(x=torch.ones(4, device="cuda", dtype=torch.float64))
    with pytest.raises(clcrt.InvalidError, match="contiguous"):
        ScaleArgs(x=torch.ones(4, 4, device="cuda").t())
    t = torch.ones(16, device="cuda")
    t.untyped_storage().resize_(0)
    with pytest.raises(clcrt.InvalidError, match="no storage"):
        ScaleArgs(x=t)


def test_tensor_kept_alive(rt, kernels):
    a = ScaleArgs(torch.ones(N, device="cuda"), N, 2.0)  # the tensor's only reference is in a
    kernels[("steal", "auto", 1)].run(tiles(N), a)
    torch.cuda.synchronize()
    x = a._clcrt_refs["x"][0][0]
    assert torch.all(x == 2.0)


def test_wrong_args_size(rt):
    k = rt.register(SCALE_SRC, "scale_tile", "ScaleArgs", block=256)
    with pytest.raises(clcrt.InvalidError) as ei:
        k.run(1, b"\0" * 16)
    assert "16" in ei.value.message and "24" in ei.value.message
    k.run(0, b"\0" * 24)  # an empty grid is a no-op


def test_compile_error_on_the_device(rt):
    with pytest.raises(clcrt.CompileError) as ei:
        rt.register(SCALE_SRC + "\nint oops = ;\n", "scale_tile", ScaleArgs)
    assert "scale_tile(7): error" in ei.value.message  # the user's own line, after the Args checks were appended


def test_limits_in_the_message(rt):
    with pytest.raises(clcrt.InvalidError) as ei:
        rt.register(SCALE_SRC, "scale_tile", ScaleArgs, block=2048)
    assert "2048" in ei.value.message
    with pytest.raises(clcrt.InvalidError) as ei:
        rt.register(SCALE_SRC, "scale_tile", ScaleArgs, block=128, smem_bytes=400 * 1024)
    assert "this device" in ei.value.message and "409600" in ei.value.message


def test_tensor_protocols(rt, kernels):
    """The same tensor through the CUDA Array Interface and DLPack (torch as the producer)."""
    t = torch.ones(N, device="cuda")

    class CAI:
        __cuda_array_interface__ = t.__cuda_array_interface__

    class DL:
        def __dlpack__(self, stream=None):
            return t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    for obj in (CAI(), DL()):
        a = ScaleArgs(x=obj, n=N, alpha=2.0)
        assert a.x == t.data_ptr() and a.device == t.device.index
        kernels[("static", "auto", 1)].run(tiles(N), a)
    torch.cuda.synchronize()
    assert torch.all(t == 4.0)


def test_tensor_map(rt):
    class MapArgs(clcrt.Args):
        m: clcrt.TensorMap
        rows: clcrt.u32

    t = torch.zeros(256, 128, dtype=torch.bfloat16, device="cuda")
    m = rt.tensor_map_2d(t, 64, 64)
    assert any(bytes(m))
    # the L2 promotion is part of the descriptor: each setting encodes, and none equals the default
    promoted = {p: bytes(rt.tensor_map_2d(t, 64, 64, l2_promotion=p)) for p in ("256b", "none", "64b", "128b")}
    assert promoted["256b"] == bytes(m)
    assert len(set(promoted.values())) == 4
    a = MapArgs(rows=256)
    a.m = m
    del t, m
    assert a.device == rt.device  # the map keeps its tensor alive through the Args
    with pytest.raises(clcrt.InvalidError) as ei:
        rt.tensor_map_2d(torch.zeros(4, 12, dtype=torch.bfloat16, device="cuda"), 4, 8)
    assert "multiple of 16" in ei.value.message
