"""GPU: the decode MLP task graph (python/examples/decode_mlp.py) against torch in fp32.

For the public 1B-class (hidden 2048, intermediate 8192) and a smaller odd-sliced shape, each
with the weights read into registers and through the bulk-copy ring (the norm folded into the
gate/up tiles, and as a node of its own; the gate/up sub-tiles split evenly over the CTA slots,
and in tiles of two), and the 8B-class (4096, 14336) as stream="auto" builds it (the ring, the
norm folded, the even split), at
batches 1 to 16 drawn at random, on two torch streams in turn: the output poisoned with NaN
first, then the task graph, the node-by-node launches, the task graph captured in a CUDA
graph (torch.cuda.graph) and replayed, all within 2e-2 of the fp32 reference's largest value
(bf16 intermediates); the task graph's output equal, bit for bit, to the node-by-node one
(the same tile functions, the same order of sums); and a traced run with every tile once."""

import importlib.util
import random

import pytest

from conftest import REPO, gpu_skip_reason

REASON = gpu_skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))


def example():
    spec = importlib.util.spec_from_file_location("decode_mlp", REPO / "python" / "examples" / "decode_mlp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("hidden,inter,kw", [(2048, 8192, dict(stream="regs")), (2048, 8192, dict(stream="bulk")),
                                             (1024, 3584, dict(stream="regs")),
                                             (1024, 3584, dict(stream="bulk", stages=3, kc=256)),
                                             (4096, 14336, dict()), (2048, 8192, dict(stream="bulk", sum="node")),
                                             (2048, 8192, dict(stream="bulk", norm="node")),
                                             (2048, 8192, dict(stream="bulk", gu_sub=2))],
                         ids=["1b-regs", "1b-bulk", "odd-regs", "odd-bulk256", "8b-auto", "1b-bulk-sum-node",
                              "1b-bulk-norm-node", "1b-bulk-sub2"])
def test_decode_mlp_random_sequence(hidden, inter, kw):
    import torch

    m = example()
    dev = torch.device("cuda", 0)
    norm_w, wgu, wd = m.weights(hidden, inter, dev, seed=hidden)
    mlp = m.DecodeMLP(norm_w, wgu, wd, **kw)
    assert mlp.stream == kw.get("stream", "bulk"), mlp.stream  # auto: the ring for the 8B-class block
    assert mlp.norm == kw.get("norm", "fold" if mlp.stream == "bulk" else "node"), mlp.norm  # auto: folded with the ring
    mlp.prepare()
    rng = random.Random(inter)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    checked = 0
    for step in range(24):
        b = rng.choice([1, 2, 3, 4, 7, 8, 13, 16])
        x = torch.randn(b, hidden, device=dev).to(torch.bfloat16)
        ref = m.reference(x, norm_w, wgu, wd)
        s = streams[step % 2]
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            outs = {}
            for how in ("run_graph", "run_nodes"):
                out = torch.full_like(x, float("nan"))
                if how == "run_graph":  # half the steps (two of every four) with programmatic dependent launch
                    mlp.run_graph(x, out, pdl=step % 4 >= 2)
                else:
                    mlp.run_nodes(x, out, pdl=step % 3 == 1)
                outs[how] = out
        s.synchronize()
        for how, out in outs.items():
            e = m.rel_err(out, ref)
            assert e < 2e-2, "step %d, batch %d, %s: error %.3g" % (step, b, how, e)
            checked += 1
        assert torch.equal(outs["run_graph"], outs["run_nodes"]), "step %d: graph and nodes differ" % step
    # Captured into a CUDA graph, replayed on new inputs copied into the captured x.
    x = torch.randn(4, hidden, device=dev).to(torch.bfloat16)
    out = torch.full_like(x, float("nan"))
    mlp.run_graph(x, out)  # warm: the Args cached for these tensors
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        mlp.run_graph(x, out, pdl=True)
    for r in range(4):
        x.copy_(torch.randn(4, hidden, device=dev).to(torch.bfloat16))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        e = m.rel_err(out, m.reference(x, norm_w, wgu, wd))
        assert e < 2e-2, "replay %d: error %.3g" % (r, e)
        checked += 1
    # Traced: every tile once, per node, and the waits as their own records.
    mlp.graph.trace_enable(1 << 14)
    mlp.run_graph(x, out)
    recs = mlp.graph.trace_read().records
    mlp.graph.trace_enable(0)
    tiles = [r for r in recs if not r.flags & 2]
    want = mlp.tiles(4)
    for node, n in enumerate(want):
        assert sorted(r.tile for r in tiles if r.unit == node) == list(range(n)), node
    assert sorted(r.cluster for r in tiles) == list(range(sum(want)))  # tickets: each once
    print("decode mlp %dx%d, stream=%s: %d outputs checked against torch fp32, %d K slices" %
          (hidden, inter, mlp.stream, checked, mlp.slices))
