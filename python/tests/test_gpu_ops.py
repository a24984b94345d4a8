"""GPU: clcrt.ops.gemm and grouped_gemm against torch.matmul."""

import pytest

import clcrt

from conftest import gpu_skip_reason

REASON = gpu_skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))
torch = None if REASON else __import__("torch")


def close(out, ref):
    """bf16 output of an fp32 sum: within a few bf16 ulps of the largest value."""
    err = (out.float() - ref).abs().max().item()
    return err <= 1e-2 * ref.abs().max().item() + 1e-2, err


def operands(m, n, k, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16)
    return a, b


@pytest.mark.parametrize("m,n,k", [(256, 512, 128), (129, 257, 72), (64, 4096, 4096), (2048, 2048, 2048),
                                   (1, 1, 8), (4096, 4096, 4096)])
def test_gemm(m, n, k):
    a, b = operands(m, n, k)
    out = clcrt.ops.gemm(a, b)
    ref = torch.matmul(a.float(), b.float().T)
    ok, err = close(out, ref)
    assert ok, (m, n, k, err)
    again = torch.full_like(out, float("nan"))
    clcrt.ops.gemm(a, b, out=again)  # into a given output: every element written (stream-K's fix-up adds in a fixed order)
    assert close(again, ref)[0] and not torch.isnan(again).any()


@pytest.mark.parametrize("sched", ["steal", "static", "fixed"])
def test_gemm_schedulers(sched):
    a, b = operands(777, 1000, 512, seed=1)
    ok, err = close(clcrt.ops.gemm(a, b, sched=sched), torch.matmul(a.float(), b.float().T))
    assert ok, (sched, err)


def test_gemm_every_variant():
    a, b = operands(300, 520, 256, seed=2)
    ref = torch.matmul(a.float(), b.float().T)
    for v in clcrt.ops.variants():
        ok, err = close(clcrt.ops.gemm(a, b, variant=v["name"]), ref)
        assert ok, (v["name"], err)


def test_gemm_streams_and_graphs():
    a, b = operands(64, 2048, 4096, seed=3)  # few tiles: stream-K slices, with its workspace
    ref = torch.matmul(a.float(), b.float().T)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = clcrt.ops.gemm(a, b)
    s.synchronize()
    assert close(out, ref)[0]
    out2 = clcrt.ops.gemm(a, b, stream=s)
    s.synchronize()
    assert close(out2, ref)[0]
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        gout = clcrt.ops.gemm(a, b)
        gout2 = clcrt.ops.gemm(a, b)
    gout.zero_()
    g.replay()
    g.replay()
    torch.cuda.synchronize()
    assert close(gout, ref)[0] and close(gout2, ref)[0]


def test_grouped_gemm():
    groups, n, k = 5, 256, 192
    sizes = [0, 37, 128, 300, 1]
    total = sum(sizes) + 10  # rows past the sum are left alone
    g = torch.Generator(device="cuda").manual_seed(4)
    a = torch.randn(total, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(groups, n, k, device="cuda", generator=g).to(torch.bfloat16)
    gs = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    out = torch.zeros(total, n, dtype=torch.bfloat16, device="cuda")
    clcrt.ops.grouped_gemm(a, b, gs, out=out)
    row = 0
    for i, m in enumerate(sizes):
        ref = torch.matmul(a[row:row + m].float(), b[i].float().T)
        ok, err = close(out[row:row + m], ref) if m else (True, 0)
        assert ok, (i, err)
        row += m
    assert torch.all(out[row:] == 0)
    flat = clcrt.ops.grouped_gemm(a, b.reshape(groups * n, k), gs)
    assert torch.equal(flat[:row], out[:row])


def test_ops_refusals():
    a, b = operands(64, 64, 64)
    with pytest.raises(clcrt.InvalidError, match="dtype"):
        clcrt.ops.gemm(a.float(), b)
    with pytest.raises(clcrt.InvalidError, match="N x K"):
        clcrt.ops.gemm(a, b[:, :32].contiguous())
    with pytest.raises(clcrt.InvalidError, match="multiple of 8"):
        clcrt.ops.gemm(a[:, :12].contiguous(), b[:, :12].contiguous())
    with pytest.raises(clcrt.InvalidError, match="GPU"):
        clcrt.ops.gemm(a.cpu(), b)
    with pytest.raises(clcrt.InvalidError, match="contiguous"):
        clcrt.ops.gemm(a, b.T)
    with pytest.raises(clcrt.InvalidError, match="out is"):
        clcrt.ops.gemm(a, b, out=torch.empty(3, 3, dtype=torch.bfloat16, device="cuda"))
    gs = torch.tensor([64], dtype=torch.int32, device="cuda")
    with pytest.raises(clcrt.InvalidError, match="at most"):
        clcrt.ops.grouped_gemm(a, b.reshape(1, 64, 64).expand(2000, 64, 64).contiguous(),
                               torch.ones(2000, dtype=torch.int32, device="cuda"))
    with pytest.raises(clcrt.InvalidError, match="int32"):
        clcrt.ops.grouped_gemm(a, b.reshape(1, 64, 64), gs.long())
