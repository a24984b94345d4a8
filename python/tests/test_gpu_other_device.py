"""GPU (two or more): every way into clcrt with the tensors on one GPU and the current device
set to another, both ways round: a tile function's k.run, a task graph (the decode MLP example,
its weights through registers and through the bulk-copy ring, as one launch and node by node),
clcrt.ops.gemm under torch.compile(fullgraph=True), and a GEMM captured in a CUDA graph on its
GPU and replayed from the other. Each result is checked against torch, and the current device
must be as the call found it, as torch's operators leave it. (The op library once allocated its
stream-K counters on the current device's GPU instead of the tensors', and faulted:
test_gpu_ops.py, test_differential_every_device.)"""

import importlib.util

import pytest

import clcrt

from conftest import REPO, gpu_skip_reason

REASON = gpu_skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))
torch = None if REASON else __import__("torch")

SRC = """
struct ScaleArgs { float *x; long n; float alpha; };
__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {
  long i = (long)t.linear * blockDim.x + threadIdx.x;
  if (i < a.n) a.x[i] *= a.alpha;
}
"""


class ScaleArgs(clcrt.Args):
    x: clcrt.ptr("float32")
    n: clcrt.i64
    alpha: clcrt.f32


PAIRS = [(1, 0), (0, 1)]  # (the tensors' GPU, the current device)


@pytest.fixture(params=PAIRS, ids=["tensors-1-current-0", "tensors-0-current-1"])
def where(request):
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU: this needs two")
    dev, cur = request.param
    prev = torch.cuda.current_device()
    torch.cuda.set_device(cur)
    yield dev, cur
    torch.cuda.set_device(prev)


def test_k_run(where):
    dev, cur = where
    k = clcrt.runtime(dev).register(SRC, "scale_tile", ScaleArgs, block=256)
    n = 1 << 20
    x = torch.rand(n, device="cuda:%d" % dev)
    ref = x * 1.5
    k.run(n // 256, ScaleArgs(x, n, 1.5))
    assert torch.cuda.current_device() == cur
    assert torch.equal(x, ref)


def _example():
    spec = importlib.util.spec_from_file_location("decode_mlp", REPO / "python" / "examples" / "decode_mlp.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@pytest.mark.parametrize("kw", [dict(stream="regs"), dict(stream="bulk", stages=3, kc=256)], ids=["regs", "bulk"])
def test_task_graph(where, kw):
    dev, cur = where
    m = _example()
    d = torch.device("cuda", dev)
    norm_w, wgu, wd = m.weights(1024, 3584, d, seed=1)
    mlp = m.DecodeMLP(norm_w, wgu, wd, **kw)
    mlp.prepare()
    for b in (1, 4, 13):
        x = torch.randn(b, 1024, device=d).to(torch.bfloat16)
        for how in ("run_graph", "run_nodes"):
            out = torch.full_like(x, float("nan"))
            getattr(mlp, how)(x, out)
            assert torch.cuda.current_device() == cur, how
            torch.cuda.synchronize(dev)
            e = m.rel_err(out, m.reference(x, norm_w, wgu, wd))
            assert e < 2e-2, (how, b, e)


def test_compiled_gemm(where):
    dev, cur = where
    a = torch.randn(300, 512, device="cuda:%d" % dev).to(torch.bfloat16)
    b = torch.randn(1000, 512, device="cuda:%d" % dev).to(torch.bfloat16)
    f = torch.compile(lambda x, w: torch.relu(clcrt.ops.gemm(x, w).float()), fullgraph=True)
    r = f(a, b)
    assert torch.cuda.current_device() == cur
    assert r.device == a.device
    assert torch.allclose(r, torch.relu(a.float() @ b.float().T), rtol=1e-2, atol=1e-1)


def test_captured_gemm_replayed_from_the_other(where):
    dev, cur = where
    a = torch.randn(700, 1024, device="cuda:%d" % dev).to(torch.bfloat16)
    b = torch.randn(3000, 1024, device="cuda:%d" % dev).to(torch.bfloat16)
    o = torch.full((700, 3000), float("nan"), dtype=torch.bfloat16, device=a.device)
    with torch.cuda.device(dev):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            clcrt.ops.gemm(a, b, out=o)
    assert torch.cuda.current_device() == cur
    for _ in range(3):
        a.copy_(torch.randn(700, 1024, device=a.device).to(torch.bfloat16))
        o.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize(dev)
        ref = a.float() @ b.float().T
        assert bool(((o.float() - ref).abs() <= 0.0078125 * ref.abs() + 1e-2).all())
