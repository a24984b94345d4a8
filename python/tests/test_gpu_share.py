"""GPU: sharing the GPU from Python. Streams with an SM budget (green contexts), the rest of a
budget, grid_sms, and yielding to work on a torch stream of higher priority; runs on them
checked against torch, ordered with torch's streams through events."""

import pytest

import clcrt

from conftest import SCALE_SRC, ScaleArgs, gpu_skip_reason

REASON = gpu_skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))
torch = None if REASON else __import__("torch")

N = (1 << 20) + 123
TILES = (N + 255) // 256


@pytest.fixture(scope="module")
def rt():
    return clcrt.runtime(torch.cuda.current_device())


@pytest.fixture(scope="module")
def steal(rt):
    return rt.register(SCALE_SRC, "scale_tile", ScaleArgs, block=256, sched="steal")


@pytest.fixture(scope="module")
def static(rt):
    return rt.register(SCALE_SRC, "scale_tile", ScaleArgs, block=256, sched="static")


def budget(rt, n, **kw):
    """A stream of at most n SMs, or a skip when this driver has no green contexts."""
    try:
        return rt.stream(sm_budget=n, round="down", **kw)
    except clcrt.UnsupportedError as e:
        if "green contexts" in str(e):
            pytest.skip(str(e))
        raise


def device_sms(rt):
    return torch.cuda.get_device_properties(rt.device).multi_processor_count


def on_torch_stream(s):
    """Whether s wraps torch's current stream itself. torch's default stream is the legacy
    stream (cuda_stream 0, which clcrt wraps as handle 1, CU_STREAM_LEGACY): torch cannot
    wrap that handle as an ExternalStream, and a stream needs no event to follow itself."""
    return s.handle == (torch.cuda.current_stream().cuda_stream or 1)


def after_torch(s):
    """Orders the clcrt stream s after the work on torch's current stream (an event)."""
    if not on_torch_stream(s):
        torch.cuda.ExternalStream(s.handle).wait_stream(torch.cuda.current_stream())


def torch_after(s):
    """Orders torch's current stream after the work on s."""
    if not on_torch_stream(s):
        torch.cuda.current_stream().wait_stream(torch.cuda.ExternalStream(s.handle))


def distinct_sms(trace):
    return {r.sm for r in trace.records}


def test_budget_stream_runs_on_its_sms(rt, steal):
    s = budget(rt, 64)
    assert 8 <= s.sms <= 64 and s.grid_sms == s.sms and s.level == 0
    assert "budget of %d SMs" % s.sms in repr(s)
    x = torch.randn(N, device="cuda")  # made on torch's current stream
    ref = x * 1.5
    after_torch(s)
    s.trace_enable(TILES + 16)
    steal.run(TILES, ScaleArgs(x, N, 1.5), stream=s)
    t = s.trace_read()
    torch_after(s)
    y = x + 1  # a torch op after the run, on torch's stream
    assert torch.equal(x, ref) and torch.equal(y, ref + 1)
    assert sorted(r.tile for r in t.records) == list(range(TILES))
    assert len(distinct_sms(t)) <= s.sms
    s.close()


def test_budget_and_its_rest_are_disjoint(rt, steal):
    a = budget(rt, device_sms(rt) // 2)
    r = rt.stream(rest_of=a)
    assert r.sms > 0 and a.sms + r.sms <= device_sms(rt) and r.grid_sms == r.sms
    assert "rest of %d SMs" % r.sms in repr(r)
    also = rt.stream(rest_of=a.sms)  # the same split, by number
    assert also.sms == r.sms
    also.close()
    xs = [torch.randn(N, device="cuda") for _ in range(2)]
    refs = [x * 3.0 for x in xs]
    traces = []
    for s in (a, r):
        after_torch(s)
        s.trace_enable(TILES + 16)
    for s, x in zip((a, r), xs):  # both at once
        steal.run(TILES, ScaleArgs(x, N, 3.0), stream=s)
    for s in (a, r):
        traces.append(s.trace_read())
        torch_after(s)
    assert all(torch.equal(x, ref) for x, ref in zip(xs, refs))
    sa, sr = (distinct_sms(t) for t in traces)
    assert len(sa) <= a.sms and len(sr) <= r.sms and not sa & sr, (sorted(sa), sorted(sr))
    with pytest.raises(clcrt.InvalidError, match="no SM budget of its own"):
        rt.stream(rest_of=r)
    r.close()
    a.close()


def test_budget_rounding_and_refusals(rt):
    sms = device_sms(rt)
    with pytest.raises(clcrt.InvalidError, match="more than this device's"):
        rt.stream(sm_budget=sms + 1)
    try:
        exact = rt.stream(sm_budget=66)
        assert exact.sms == 66  # a device that partitions in groups that make 66
        exact.close()
    except clcrt.UnsupportedError as e:
        if "green contexts" in str(e):
            pytest.skip(str(e))
        assert 'round="up"' in str(e) and 'round="down"' in str(e)  # the Python spelling of the flags
    up = rt.stream(sm_budget=66, round="up")
    down = rt.stream(sm_budget=66, round="down")
    assert down.sms <= 66 <= up.sms
    up.close()
    down.close()


def test_grid_sms(rt, static):
    """STATIC launches a persistent grid whose every cluster gets a unit: the statistics'
    cluster count is the grid. 1-CTA clusters: blocks per SM times the SMs, exactly."""
    sms = device_sms(rt)

    def clusters(s):
        x = torch.ones(N, device="cuda")
        after_torch(s)
        s.stats_enable()
        static.run(TILES, ScaleArgs(x, N, 2.0), stream=s)
        st = s.stats()
        s.stats_enable(False)
        torch_after(s)
        assert torch.all(x == 2.0) and st.tiles == TILES
        return st.clusters

    plain = rt.stream()
    whole = clusters(plain)
    small = rt.stream(grid_sms=16)
    assert small.sms == sms and small.grid_sms == 16
    assert clusters(small) == whole * 16 // sms
    b = budget(rt, 64)
    assert clusters(b) == whole * b.sms // sms
    wide = rt.stream(rest_of=b, grid_sms=sms)  # the oversubscribed grid of before budgets
    assert wide.grid_sms == sms and clusters(wide) == whole
    # A wrapper of torch's current stream with a grid of its own; the kept wrapper is another.
    cur = torch.cuda.current_stream()
    w = rt.stream(cur, grid_sms=32)
    assert w.grid_sms == 32 and w.handle == (cur.cuda_stream or 1) and w is not rt.current_stream()
    assert clusters(w) == whole * 32 // sms
    w.close()  # not torch's stream: clcrt does not own it
    torch.ones(4, device="cuda").add_(1)
    torch.cuda.synchronize()
    for s in (plain, small, b, wide):
        s.close()


def test_gemm_on_a_budget_stream(rt):
    s = budget(rt, 64)
    for m, n, k in ((1024, 2048, 1024), (64, 2048, 4096)):  # the second: stream-K slices and their workspace
        g = torch.Generator(device="cuda").manual_seed(m)
        a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
        b = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        after_torch(s)
        clcrt.ops.gemm(a, b, out=out, stream=s)
        torch_after(s)
        ref = torch.matmul(a.float(), b.float().T)
        err = (out.float() - ref).abs().max().item()
        assert err <= 1e-2 * ref.abs().max().item() + 1e-2, (m, n, k, err)
    torch.cuda.synchronize()
    s.close()


def test_yield_to_a_torch_stream(rt, steal):
    """A STEAL run on torch's current stream yields to torch work bracketed on a torch stream of
    higher priority (the benchmark's way of bracketing NCCL), and every tile runs once."""
    least, greatest = clcrt._driver.priority_range(rt.device)
    hi_torch = torch.cuda.Stream(priority=-1)
    hi = rt.stream(hi_torch)  # the kept wrapper: made before the run, so the run can yield
    assert hi.level > 0
    x = torch.ones(1 << 26, device="cuda")
    y = torch.ones(N, device="cuda")
    n = x.numel()
    hi_torch.wait_stream(torch.cuda.current_stream())  # y is made; the run below is not waited for
    steal.run((n + 255) // 256, ScaleArgs(x, n, 2.0))  # torch's current stream, the lowest priority
    with torch.cuda.stream(hi_torch), hi.preempt():
        y.mul_(5.0)
    with hi.preempt():  # nested pairs, and the pair around nothing
        with hi.preempt():
            pass
    torch.cuda.current_stream().wait_stream(hi_torch)
    torch.cuda.synchronize()
    assert torch.all(x == 2.0) and torch.all(y == 5.0)
    with pytest.raises(clcrt.InvalidError, match="without a matching"):
        hi.preempt_end()
    rt.forget_stream(hi_torch)
    b = budget(rt, 64, priority=greatest)
    assert b.level > 0
    b.close()
