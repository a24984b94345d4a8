"""GPU: clcrt.ops.gemm, grouped_gemm and masked_gemm against torch.matmul: single problems,
then the differential test on random sequences (the state between calls is where wrong answers
lived), the torch custom ops under torch.compile and CUDA graphs, and sizes that do not fit."""

import os

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


def test_gemm_transposed():
    """A problem the plan runs transposed (260 rows: A and B swapped, D^T written by the tiles),
    and transposed shapes by name, into poisoned outputs, row slices included."""
    a, b = operands(260, 4096, 4096, seed=7)
    ref = torch.matmul(a.float(), b.float().T)
    assert clcrt.ops.plan(a, b)["variant"].endswith("t")
    for v in [None, "128x160c2t", "64x16c2t", "128x256t", "64x96t"]:
        out = torch.full((260, 4096), float("nan"), dtype=torch.bfloat16, device="cuda")
        clcrt.ops.gemm(a, b, out=out, variant=v)
        ok, err = close(out, ref)
        assert ok and not torch.isnan(out).any(), (v, err)
    wide = torch.full((260, 4200), float("nan"), dtype=torch.bfloat16, device="cuda")  # D's rows 4200 apart
    clcrt.ops.gemm(a[:, :4000], b[:3000, :4000], out=wide[:, 8:3008])
    ok, err = close(wide[:, 8:3008], torch.matmul(a[:, :4000].float(), b[:3000, :4000].float().T))
    assert ok, err
    assert torch.isnan(wide[:, :8]).all() and torch.isnan(wide[:, 3008:]).all()  # nothing written outside
    with pytest.raises(clcrt.InvalidError, match="128x256"):
        clcrt.ops.gemm(a, b, variant="128x256c2t")


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
    clcrt.ops.gemm(a, b)  # a first call sets the C path up (this test may run first, clcrt imported before torch)
    if hasattr(torch.compiler, "substitute_in_graph"):  # then the op is the C function
        assert clcrt.ops.gemm is clcrt._fastops.gemm
    for gemm in (clcrt.ops.gemm, clcrt.ops._gemm_py):  # the C function and the Python path
        with pytest.raises(clcrt.InvalidError, match="dtype"):
            gemm(a.float(), b)
        with pytest.raises(clcrt.InvalidError, match="N x K"):
            gemm(a, b[:, :32].contiguous())
        # Not refused: K = 12 and a transposed operand run on copies (what the C op refuses)
        a12, b12 = a[:, :12].contiguous(), b[:, :12].contiguous()
        assert close(gemm(a12, b12), torch.matmul(a12.float(), b12.float().T))[0]
        assert close(gemm(a12, b12, out=torch.empty_like(a)), torch.matmul(a12.float(), b12.float().T))[0]
        assert close(gemm(a, b.T), torch.matmul(a.float(), b.float()))[0]
        with pytest.raises(clcrt.InvalidError, match="GPU"):
            gemm(a.cpu(), b)
        with pytest.raises(clcrt.InvalidError, match="out is"):
            gemm(a, b, out=torch.empty(3, 3, dtype=torch.bfloat16, device="cuda"))
        with pytest.raises(TypeError):
            gemm(a, b, None, out=None)
        # An output that shares memory with an input (torch refuses such an out= too); beside it, fine.
        buf = torch.randn(64, 128, device="cuda").to(torch.bfloat16)
        with pytest.raises(clcrt.InvalidError, match="shares memory with a"):
            gemm(buf[:, :64], b, out=buf[:, 32:96])
        with pytest.raises(clcrt.InvalidError, match="shares memory with b"):
            gemm(a, buf[:, :64], out=buf[:, 16:80])
        x = buf[:, :64].clone()
        gemm(buf[:, :64], b, out=buf[:, 64:])
        assert close(buf[:, 64:], torch.matmul(x.float(), b.float().T))[0] and torch.equal(buf[:, :64], x)
    gs = torch.tensor([64], dtype=torch.int32, device="cuda")
    with pytest.raises(clcrt.InvalidError, match="1 to 1024"):
        clcrt.ops.grouped_gemm(a, b.reshape(1, 64, 64).expand(2000, 64, 64).contiguous(),
                               torch.ones(2000, dtype=torch.int32, device="cuda"))
    with pytest.raises(clcrt.InvalidError, match="int32"):
        clcrt.ops.grouped_gemm(a, b.reshape(1, 64, 64), gs.long())


# ---- the differential test: random sequences, streams, threads, graphs ----------------------------
# The sequences come from fixed seeds, so that a failure replays; CLCRT_TEST_SEED=N draws others
# (what a longer search for wrong answers runs, seed after seed).
_SEED = int(os.environ.get("CLCRT_TEST_SEED", "0"), 0)


def _random_problem(rng, big=16384):
    """A random dense problem: M from 1 to 16384 (log-uniform), odd N, K a multiple of 8,
    operands sometimes row slices of wider tensors at 16-byte offsets, now and then a layout
    the op runs on copies, a random variant, scheduler and split. Kept under ~1e11
    multiply-adds so that thousands run in minutes."""
    import math

    while True:
        m = rng.randint(1, 16) if rng.random() < 0.15 else int(math.exp(rng.uniform(0, math.log(big))))
        n = rng.randint(1, 200) if rng.random() < 0.2 else int(math.exp(rng.uniform(math.log(8), math.log(8192))))
        k = 8 * int(math.exp(rng.uniform(0, math.log(1024))))
        if m * n * k <= 1.2e11:
            break
    p = dict(m=max(m, 1), n=max(n, 1), k=k, pad_a=8 * rng.randint(0, 3) if rng.random() < 0.3 else 0,
             pad_b=8 * rng.randint(0, 3) if rng.random() < 0.3 else 0, off=8 * rng.randint(0, 7),
             variant=None, sched=None, split=None)
    # a as F.linear takes it, 3-D (a view of the same rows): now and then, wherever M divides
    p["nd"] = m % 2 == 0 and rng.random() < 0.1
    # Now and then a layout the kernels do not load, which the op runs on copies: K not a
    # multiple of 8, a row pitch that is not, an operand at an odd element, a transposed weight.
    p["copy"] = rng.choice(["k", "pitch", "off", "bt"]) if rng.random() < 0.08 else None
    if p["copy"] == "k":
        p["k"] = rng.choice([rng.randint(1, 7), rng.randint(1, 1024) | 1, 8 * rng.randint(1, 128) + rng.randint(1, 7)])
    elif p["copy"] == "pitch":
        p["pad_a"] = rng.randint(1, 7)
    elif p["copy"] == "off":
        p["off"] = 8 * rng.randint(0, 7) + rng.randint(1, 7)
    if rng.random() < 0.6:  # what a user calls: the plan's choice, through the C entry
        return p
    p.update(variant=rng.choice([None, None] + [v["name"] for v in clcrt.ops.variants()] +
                                ["128x160c2t", "64x48t", "128x256t"]),
             sched=rng.choice([None, "steal", "static", "fixed"]), split=rng.choice([None, "none", "all"]))
    return p


def _run(a, b, out, p):
    """One GEMM of problem p into out (None: the op allocates it); returns the output. Problems
    without options take the call users write, clcrt.ops.gemm(a, b[, out=]), which is the C
    entry; with options, the keywords (the Python path)."""
    kw = {n: p[n] for n in ("variant", "sched", "split") if p[n] is not None}
    if p.get("nd"):  # 3-D: a's rows in two blocks, out the same (a view of the 2-D one given)
        m, n = a.shape[0], b.shape[0]
        a = a.unflatten(0, (2, m // 2))
        o = None if out is None else out.view(2, m // 2, n)
        r = clcrt.ops.gemm(a, b, out=o, **kw) if kw or o is not None else clcrt.ops.gemm(a, b)
        assert r.shape == (2, m // 2, n) and (o is None or r is o)
        return r.view(m, n)
    if kw:
        return clcrt.ops.gemm(a, b, out=out, **kw)
    return clcrt.ops.gemm(a, b) if out is None else clcrt.ops.gemm(a, b, out=out)


class _Pool:
    """Random bf16 operand pools that problems are cut from (rows at a pitch, 16-byte offsets)."""

    def __init__(self, device="cuda"):
        g = torch.Generator(device=device).manual_seed(123)
        self.a = (torch.rand(POOL_A + 64, device=device, generator=g) * 2 - 1).to(torch.bfloat16)
        self.b = (torch.rand(POOL_B + 64, device=device, generator=g) * 2 - 1).to(torch.bfloat16)

    def view(self, base, rows, cols, pitch, off):
        return base[off: off + rows * pitch].view(rows, pitch)[:, :cols]

    def operands(self, p):
        lda, ldb = p["k"] + p["pad_a"], p["k"] + p["pad_b"]
        a = self.view(self.a, p["m"], p["k"], lda, p["off"])
        if p.get("copy") == "bt":  # the weight as the transpose of a K x N tensor
            return a, self.view(self.b, p["k"], p["n"], p["n"] + p["pad_b"], p["off"]).t()
        b = self.view(self.b, p["n"], p["k"], ldb, p["off"])
        return a, b


POOL_A, POOL_B = 1 << 26, 1 << 25  # elements


def _fits(p):
    b = p["k"] * (p["n"] + p["pad_b"]) if p.get("copy") == "bt" else p["n"] * (p["k"] + p["pad_b"])
    return p["m"] * (p["k"] + p["pad_a"]) + 64 <= POOL_A and b + 64 <= POOL_B


def _check(out, a, b):
    """Every element against torch.matmul in fp32: |out - ref| <= 2^-7 |ref| + 1e-3 (bf16's
    rounding and the order of the sum); a NaN (the poison: an element never written) fails."""
    ref = torch.matmul(a.float(), b.float().T)
    bad = ~((out.float() - ref).abs() <= 0.0078125 * ref.abs() + 1e-3)
    return int(bad.sum().item())


def test_differential_random_sequences():
    """Thousands of random GEMMs in random order on several streams, from several threads (two
    sharing a stream), some captured in CUDA graphs and replayed between eager runs of other
    shapes; every output poisoned first and checked element by element. Zero mismatches."""
    import random
    import threading

    pool = _Pool()
    torch.cuda.synchronize()  # the pool was filled on the default stream; the threads read it on others
    per_thread = int(os.environ.get("CLCRT_TEST_DIFF_GEMMS", "500"))
    streams = [torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()]
    results, errors = [], []

    def work(tid):
        rng = random.Random(1000 + tid + 7919 * _SEED)
        s = streams[min(tid, 2)]  # threads 2 and 3 share a stream
        torch.cuda.set_device(0)
        try:
            with torch.cuda.stream(s):
                for i in range(per_thread):
                    p = _random_problem(rng)
                    if not _fits(p):
                        continue
                    a, b = pool.operands(p)
                    out = torch.full((p["m"], p["n"]), float("nan"), dtype=torch.bfloat16, device="cuda")
                    # One thread captures: torch.cuda.graph synchronises the device as it begins,
                    # which another thread's capture would not permit.
                    if tid == 0 and rng.random() < 0.1:
                        g = torch.cuda.CUDAGraph()
                        with torch.cuda.graph(g, stream=s, capture_error_mode="thread_local"):
                            _run(a, b, out, p)
                        for _ in range(2):
                            q = _random_problem(rng, big=2048)
                            if _fits(q):
                                qa, qb = pool.operands(q)
                                clcrt.ops.gemm(qa, qb)  # an eager run of another shape between replays
                            out.fill_(float("nan"))
                            g.replay()
                        p["graph"] = True
                    elif rng.random() < 0.25:
                        # The op's own output: poisoned through the caching allocator, which hands
                        # the block just freed on this stream to the next request of its size.
                        del out
                        out = _run(a, b, None, p)
                    else:
                        _run(a, b, out, p)
                    results.append((p, _check(out, a, b)))
        except Exception as e:  # reported on the main thread
            errors.append((tid, repr(e)))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    assert not errors, errors
    wrong = [(p, n) for p, n in results if n]
    graphs = sum(1 for p, _ in results if p.get("graph"))
    plain = sum(1 for p, _ in results if p["variant"] is None and p["sched"] is None and p["split"] is None)
    copied = sum(1 for p, _ in results if p.get("copy"))
    print("differential (seed %d): %d GEMMs (%d from graphs, %d as users call it, %d on copies) on 3 streams from 4 "
          "threads: %d wrong" % (_SEED, len(results), graphs, plain, copied, len(wrong)))
    assert len(results) >= per_thread * 3
    assert not wrong, wrong[:5]


def test_differential_every_device():
    """Random GEMMs on every GPU at once, one thread per GPU and one that alternates between
    them, each with the current device set to another GPU than its tensors' (the op must take
    the tensors' device, that device's current stream and its own runtime, and leave the current
    device as it found it), on a stream of its own and on the default stream; outputs poisoned,
    every element checked. Zero mismatches. Before the op entered its runtime's context, such
    calls allocated stream-K counters on the other GPU and faulted (an illegal address)."""
    import random
    import threading

    count = torch.cuda.device_count()
    if count < 2:
        pytest.skip("one GPU: the every-device run needs two or more")
    per_thread = int(os.environ.get("CLCRT_TEST_DIFF_DEVICE_GEMMS", "150"))
    pools = [_Pool("cuda:%d" % d) for d in range(count)]
    for d in range(count):
        torch.cuda.synchronize(d)  # filled on each GPU's default stream, read on others
    streams = [torch.cuda.Stream(device=d) for d in range(count)]
    results, errors = [], []

    def work(tid):
        rng = random.Random(2000 + tid + 7919 * _SEED)
        try:
            for i in range(per_thread):
                d = tid if tid < count else rng.randrange(count)
                p = _random_problem(rng, big=4096)
                if not _fits(p):
                    continue
                a, b = pools[d].operands(p)
                on_own = rng.random() < 0.5
                torch.cuda.set_device(d)  # the stream context below is entered on the tensors' device
                with torch.cuda.stream(streams[d] if on_own and tid < count else torch.cuda.default_stream(d)):
                    out = torch.full((p["m"], p["n"]), float("nan"), dtype=torch.bfloat16, device=a.device)
                    torch.cuda.set_device((d + 1) % count)  # the current device: another GPU
                    if rng.random() < 0.25:
                        del out  # the op's own output, poisoned through the allocator (as above)
                        out = _run(a, b, None, p)
                    else:
                        _run(a, b, out, p)
                    assert out.device == a.device, (out.device, a.device)
                    # The caller's current device is left as it was, as torch's operators leave it.
                    assert torch.cuda.current_device() == (d + 1) % count, (torch.cuda.current_device(), d)
                    torch.cuda.set_device(d)
                    results.append((d, p, _check(out, a, b)))  # on the stream the GEMM ran on
        except Exception as e:  # reported on the main thread
            errors.append((tid, repr(e)))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(count + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for d in range(count):
        torch.cuda.synchronize(d)
    wrong = [(d, p, n) for d, p, n in results if n]
    print("differential on %d GPUs: %d GEMMs (%s a GPU) from %d threads: %d wrong"
          % (count, len(results), "/".join(str(sum(1 for r in results if r[0] == d)) for d in range(count)),
             count + 1, len(wrong)))
    assert len(results) >= per_thread * count
    assert not wrong, wrong[:5]


def test_grouped_sizes_past_the_buffer():
    """Sizes adding up to 640 rows with a of 64: the kernel computes what fits, touches nothing
    past out, and the next grouped call on the stream raises; checked=True raises at once."""
    k, n, groups = 128, 256, 4
    g = torch.Generator(device="cuda").manual_seed(9)
    a = torch.randn(64, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(groups, n, k, device="cuda", generator=g).to(torch.bfloat16)
    big = torch.full((64 + 64, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    out = big[:64]
    sizes = torch.tensor([160] * 4, dtype=torch.int32, device="cuda")
    clcrt.ops.grouped_gemm(a, b, sizes, out=out)
    torch.cuda.synchronize()
    assert torch.isnan(big[64:].float()).all(), "rows past out were written"
    ref = torch.matmul(a.float(), b[0].float().T)  # group 0 has every row that fits
    assert close(out, ref)[0]
    with pytest.raises(clcrt.InvalidError, match="640"):
        clcrt.ops.grouped_gemm(a, b, sizes, out=out)
    clcrt.ops.grouped_gemm(a, b, torch.tensor([16] * 4, dtype=torch.int32, device="cuda"), out=out)  # reported once
    with pytest.raises(clcrt.InvalidError, match="negative"):
        clcrt.ops.grouped_gemm(a, b, torch.tensor([-5, 10, 10, 10], dtype=torch.int32, device="cuda"), checked=True)


def test_masked_gemm_graph_replays_new_counts():
    groups, cap, n, k = 6, 96, 320, 256
    g = torch.Generator(device="cuda").manual_seed(10)
    a = torch.randn(groups * cap, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(groups, n, k, device="cuda", generator=g).to(torch.bfloat16)
    sizes = torch.tensor([0, 5, 96, 200, 33, 1], dtype=torch.int32, device="cuda")
    out = torch.zeros(groups * cap, n, dtype=torch.bfloat16, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        clcrt.ops.masked_gemm(a, b, sizes, cap, out=out)
    for counts in ([0, 5, 96, 200, 33, 1], [96, 0, 1, 17, 95, 96]):
        sizes.copy_(torch.tensor(counts, dtype=torch.int32))
        out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        for gi, c in enumerate(counts):
            c = min(c, cap)
            rows = out[gi * cap: gi * cap + c]
            assert close(rows, torch.matmul(a[gi * cap: gi * cap + c].float(), b[gi].float().T))[0] if c else True
            assert torch.all(out[gi * cap + c: (gi + 1) * cap] == 0)


# ---- F.linear's shapes and autograd ----------------------------------------------------------------


def test_gemm_takes_leading_dimensions():
    """a of 1, 3 or 4 dimensions, as F.linear takes it: the leading ones as rows (a view, or a
    copy where the strides allow none), out= of the matching shape, poisoned first."""
    a, b = operands(300, 384, 256, seed=21)
    ref = torch.matmul(a.float(), b.float().T)
    nan = float("nan")
    for gemm in (clcrt.ops.gemm, clcrt.ops._gemm_py):  # the C entry and the Python path
        a3 = a.view(6, 50, 256)
        r = gemm(a3, b)
        assert r.shape == (6, 50, 384) and close(r.reshape(300, 384), ref)[0]
        out = torch.full((6, 50, 384), nan, dtype=torch.bfloat16, device="cuda")
        assert gemm(a3, b, out=out) is out and close(out.view(300, 384), ref)[0]
        r = gemm(a.view(2, 3, 50, 256), b)
        assert r.shape == (2, 3, 50, 384) and close(r.reshape(300, 384), ref)[0]
        t = gemm(a3.transpose(0, 1), b)  # leading dimensions that do not merge: a copy
        assert t.shape == (50, 6, 384) and close(t, ref.view(6, 50, 384).transpose(0, 1))[0]
        v = gemm(a[7], b)  # one row, 1-D: out is N
        assert v.shape == (384,) and close(v, ref[7])[0]
        assert gemm(a3[:0], b).shape == (0, 50, 384)
        lin = torch.nn.functional.linear(a3, b)
        assert close(gemm(a3, b).float(), lin.float())[0]
        o = torch.full((6, 60, 384), nan, dtype=torch.bfloat16, device="cuda")
        assert gemm(a3, b, out=o[:, :50]) is not None  # rows that are no view of (300, 384): through a copy
        assert close(o[:, :50].reshape(300, 384), ref)[0] and torch.isnan(o[:, 50:].float()).all()
        with pytest.raises(clcrt.InvalidError, match="expected"):
            gemm(a3, b, out=torch.empty(6, 50, 383, dtype=torch.bfloat16, device="cuda"))
        with pytest.raises(clcrt.InvalidError, match="dtype"):
            gemm(a3.float(), b)
        with pytest.raises(clcrt.InvalidError, match="dimensions"):
            gemm(a3, b.view(2, 192, 256))


def _linear_grads(x, w, gy):
    """F.linear's gradients in fp32: the reference."""
    xr = x.detach().float().requires_grad_(x.requires_grad)
    wr = w.detach().float().requires_grad_(w.requires_grad)
    (torch.nn.functional.linear(xr, wr) * gy.float()).sum().backward()
    return xr.grad, wr.grad


def test_gemm_autograd():
    """Where an operand requires grad and grad mode is on, the call is recorded and its
    gradients are F.linear's: 2-D and 3-D, through the C entry, keyword options and the custom
    op; under no_grad or inference_mode (a Parameter weight included) nothing is recorded;
    out= is refused as torch refuses it."""
    g = torch.Generator(device="cuda").manual_seed(31)
    w = torch.nn.Linear(256, 520, bias=False, device="cuda", dtype=torch.bfloat16).weight
    for shape in [(148, 256), (4, 37, 256)]:
        x = torch.randn(shape, device="cuda", generator=g).to(torch.bfloat16).requires_grad_()
        gy = torch.randn(shape[:-1] + (520,), device="cuda", generator=g).to(torch.bfloat16)
        rx, rw = _linear_grads(x, w, gy)
        calls = [lambda: clcrt.ops.gemm(x, w), lambda: clcrt.ops._gemm_py(x, w),
                 lambda: clcrt.ops.gemm(x, w, variant="128x128"), lambda: clcrt.ops.gemm(x, w, sched="static"),
                 lambda: torch.ops.clcrt.gemm(x, w)]
        for i, call in enumerate(calls):
            x.grad = w.grad = None
            y = call()
            assert y.requires_grad and y.shape == shape[:-1] + (520,), i
            y.backward(gy)
            assert close(x.grad, rx)[0] and close(w.grad, rw)[0], (shape, i, close(x.grad, rx), close(w.grad, rw))
        # one operand only
        x.grad = w.grad = None
        xd = x.detach()
        clcrt.ops.gemm(xd, w).backward(gy)
        assert x.grad is None and close(w.grad, _linear_grads(xd, w, gy)[1])[0]
        w.grad = None
        clcrt.ops.gemm(x, w.detach()).backward(gy)
        assert w.grad is None and close(x.grad, rx)[0]
        x.grad = None
    with torch.no_grad():
        assert not clcrt.ops.gemm(x, w).requires_grad
    with torch.inference_mode():
        y = clcrt.ops.gemm(x, w)
        assert not y.requires_grad and close(y.float(), torch.nn.functional.linear(x, w).float())[0]
    with pytest.raises(clcrt.InvalidError, match="autograd"):
        clcrt.ops.gemm(x, w, out=torch.empty(shape[:-1] + (520,), dtype=torch.bfloat16, device="cuda"))


def test_torch_compile_backward():
    """A training step through torch.compile(fullgraph=True): the custom op's registered
    backward, traced, gives the eager gradients."""
    g = torch.Generator(device="cuda").manual_seed(32)
    x = torch.randn(3, 100, 512, device="cuda", generator=g).to(torch.bfloat16).requires_grad_()
    w = torch.nn.Parameter(torch.randn(1000, 512, device="cuda", generator=g).to(torch.bfloat16) * 0.05)

    def f(x, w):
        return torch.relu(clcrt.ops.gemm(x, w).float()).square().sum()

    loss = f(x, w)
    loss.backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    closs = torch.compile(f, fullgraph=True)(x, w)
    closs.backward()
    assert torch.allclose(closs, loss, rtol=1e-2)
    assert close(x.grad, gx.float())[0] and close(w.grad, gw.float())[0]


def test_grouped_compile_backward():
    """grouped_gemm and masked_gemm in torch.compile(fullgraph=True) training steps: their
    backward keeps the sizes on the GPU, so it traces; the gradients are the eager ones (which
    test_grouped_autograd checks against F.linear's). With K = 45 the grouped backward cannot use
    torch._grouped_mm and reads the sizes back: eager gradients against F.linear's."""
    gen = torch.Generator(device="cuda").manual_seed(36)
    groups, n = 4, 192
    sizes = [37, 0, 100, 5]
    used = sum(sizes)
    gs = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    rpg = 64
    gm = torch.tensor([64, 0, 100, 5], dtype=torch.int32, device="cuda")
    mask = torch.zeros(groups * rpg, 1, device="cuda")
    for i, m in enumerate([64, 0, 100, 5]):
        mask[i * rpg: i * rpg + min(m, rpg)] = 1
    for k in (128, 45):
        a = torch.randn(used + 6, k, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_()
        b = (torch.randn(groups, n, k, device="cuda", generator=gen) * 0.1).to(torch.bfloat16).requires_grad_()
        am = torch.randn(groups * rpg, k, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_()

        def grouped(a, b, gs):
            return (clcrt.ops.grouped_gemm(a, b, gs)[:used].float().square()).sum()

        def masked(am, b, gm):
            return (clcrt.ops.masked_gemm(am, b, gm, rpg).float().nan_to_num() * mask).square().sum()

        for f, x, sz in ((grouped, a, gs), (masked, am, gm)):
            x.grad = b.grad = None
            f(x, b, sz).backward()
            gx, gb = x.grad.clone(), b.grad.clone()
            if k % 8 == 0:
                x.grad = b.grad = None
                torch.compile(f, fullgraph=True)(x, b, sz).backward()
                assert close(x.grad, gx.float())[0] and close(b.grad, gb.float())[0], (f.__name__, k)
            elif f is grouped:  # the loop's gradients against F.linear's
                ar, br = x.detach().float().requires_grad_(), b.detach().float().requires_grad_()
                row, loss = 0, 0
                for i, m in enumerate(sizes):
                    loss = loss + torch.nn.functional.linear(ar[row:row + m], br[i]).square().sum()
                    row += m
                loss.backward()
                assert close(gx, ar.grad)[0] and close(gb, br.grad)[0]
                assert torch.all(gx[used:] == 0)


def test_layouts_the_kernels_do_not_load_run_on_copies():
    """Whatever F.linear takes runs: K not a multiple of 8 (1, 3, 100, 4099) and K = 0, a
    transposed weight, operands at odd elements and row pitches, an out whose rows are not
    contiguous; eager, through the custom op, under autograd, and grouped and masked. plan()
    names the operands copied; an operand the kernels load as it is is not copied."""
    gen = torch.Generator(device="cuda").manual_seed(35)

    def rnd(*shape):
        return (torch.rand(*shape, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16)

    for m, n, k in ((64, 96, 1), (300, 257, 3), (17, 500, 100), (5, 1000, 4099), (130, 64, 0)):
        a, w = rnd(m, k), rnd(n, k)
        ref = torch.matmul(a.float(), w.float().T)
        for got in (clcrt.ops.gemm(a, w), torch.ops.clcrt.gemm(a, w), clcrt.ops.gemm(a, w, sched="static")):
            assert got.shape == (m, n) and close(got, ref)[0], (m, n, k)
        assert clcrt.ops.plan(a, w)["copies"] == (() if k and k % 8 == 0 else ("a", "b"))
    x, wt = rnd(77, 512), rnd(512, 300)  # a weight stored K x N, passed as its transpose
    ref = torch.matmul(x.float(), wt.float())
    assert close(clcrt.ops.gemm(x, wt.t()), ref)[0]
    assert clcrt.ops.plan(x, wt.t())["copies"] == ("b",)
    wide = rnd(77, 520)
    for a in (wide[:, 1:513], wide.view(-1)[3:3 + 77 * 515].view(77, 515)[:, :512]):  # odd element; pitch 515
        assert close(clcrt.ops.gemm(a, wt.t()), torch.matmul(a.float(), wt.float()))[0]
        assert clcrt.ops.plan(a, wt.t())["copies"] == ("a", "b")
    a, w = rnd(77, 512), rnd(300, 512)
    assert clcrt.ops.plan(a, w)["copies"] == () and clcrt.ops.plan(wide[:, 8:520], w)["copies"] == ()
    out_t = torch.full((300, 77), float("nan"), dtype=torch.bfloat16, device="cuda")
    r = clcrt.ops.gemm(a, w, out=out_t.t())  # out's rows not contiguous
    assert r.data_ptr() == out_t.data_ptr() and close(out_t.t(), torch.matmul(a.float(), w.float().T))[0]
    a3 = rnd(3, 40, 100).transpose(0, 1)  # 3-D, not viewable as rows: a copy
    o3 = torch.full((3, 40, 96), float("nan"), dtype=torch.bfloat16, device="cuda").transpose(0, 1)
    w3 = rnd(96, 100)
    assert clcrt.ops.gemm(a3, w3, out=o3) is o3
    assert close(o3, torch.matmul(a3.float(), w3.float().T))[0]
    # autograd through the copies: F.linear's gradients
    xa, wa = rnd(33, 100).requires_grad_(), rnd(70, 100).requires_grad_()
    gy = rnd(33, 70)
    (clcrt.ops.gemm(xa, wa).float() * gy.float()).sum().backward()
    xr, wr = xa.detach().float().requires_grad_(), wa.detach().float().requires_grad_()
    (torch.nn.functional.linear(xr, wr) * gy.float()).sum().backward()
    assert close(xa.grad, xr.grad)[0] and close(wa.grad, wr.grad)[0]
    # grouped and masked: odd K, a weight tensor that is not contiguous
    groups, n, k = 3, 80, 45
    sizes = [20, 0, 31]
    ag = rnd(sum(sizes) + 4, k)
    bg = rnd(groups, k, n).transpose(1, 2)  # G x N x K, not contiguous
    gs = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    out = torch.full((ag.shape[0], n), float("nan"), dtype=torch.bfloat16, device="cuda")
    clcrt.ops.grouped_gemm(ag, bg, gs, out=out)
    row = 0
    for g, rows in enumerate(sizes):
        assert not rows or close(out[row:row + rows], torch.matmul(ag[row:row + rows].float(), bg[g].float().T))[0]
        row += rows
    assert torch.isnan(out[row:].float()).all()  # rows past the sizes: not written
    f = torch.ops.clcrt.grouped_gemm(ag, bg, gs)
    assert close(f[:row], out[:row])[0] and torch.all(f[row:] == 0)
    rpg = 32
    am = rnd(groups * rpg, k)
    om = clcrt.ops.masked_gemm(am, bg, gs, rpg)
    for g, rows in enumerate(sizes):
        r0 = g * rpg
        assert not rows or close(om[r0:r0 + rows], torch.matmul(am[r0:r0 + rows].float(), bg[g].float().T))[0]


def test_grouped_autograd():
    """grouped_gemm and masked_gemm recorded by autograd: each group's gradients as a loop of
    F.linear over the groups computes them; rows no group wrote get none."""
    gen = torch.Generator(device="cuda").manual_seed(33)
    groups, n, k = 4, 192, 128
    sizes = [37, 0, 100, 5]
    total = sum(sizes) + 6
    a = torch.randn(total, k, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_()
    b = (torch.randn(groups, n, k, device="cuda", generator=gen) * 0.1).to(torch.bfloat16).requires_grad_()
    gs = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    gy = torch.randn(total, n, device="cuda", generator=gen).to(torch.bfloat16)
    used = sum(sizes)
    for call in (lambda: clcrt.ops.grouped_gemm(a, b, gs), lambda: torch.ops.clcrt.grouped_gemm(a, b, gs)):
        a.grad = b.grad = None
        y = call()
        (y[:used].float() * gy[:used].float()).sum().backward()
        ar, br = a.detach().float().requires_grad_(), b.detach().float().requires_grad_()
        row, loss = 0, 0
        for i, m in enumerate(sizes):
            loss = loss + (torch.nn.functional.linear(ar[row:row + m], br[i]) * gy[row:row + m].float()).sum()
            row += m
        loss.backward()
        assert close(a.grad, ar.grad)[0] and close(b.grad, br.grad)[0]
        assert torch.all(a.grad[used:] == 0)
    rpg = 64
    am = torch.randn(groups * rpg, k, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_()
    gym = torch.randn(groups * rpg, n, device="cuda", generator=gen).to(torch.bfloat16)
    msizes = [64, 0, 100, 5]  # above rows_per_group counts as rows_per_group
    mask = torch.zeros(groups * rpg, 1, device="cuda")
    for i, m in enumerate(msizes):
        mask[i * rpg: i * rpg + min(m, rpg)] = 1
    gm = torch.tensor(msizes, dtype=torch.int32, device="cuda")
    y = clcrt.ops.masked_gemm(am, b, gm, rpg)
    b.grad = None
    (y.float().nan_to_num() * gym.float() * mask).sum().backward()
    ar, br = am.detach().float().requires_grad_(), b.detach().float().requires_grad_()
    ref = torch.einsum("gmk,gnk->gmn", ar.view(groups, rpg, k), br).reshape(groups * rpg, n)
    (ref * gym.float() * mask).sum().backward()
    assert close(am.grad, ar.grad)[0] and close(b.grad, br.grad)[0]
    with pytest.raises(clcrt.InvalidError, match="autograd"):
        clcrt.ops.grouped_gemm(a, b, gs, out=torch.empty(total, n, dtype=torch.bfloat16, device="cuda"))


def test_gemm_autocast():
    """Under torch.autocast, fp32 operands (master weights, activations) are cast to bf16 as
    F.linear's are and the gradients reach the fp32 tensors: through the C entry, the Python
    path, the custom op and torch.compile; fp16 operands too, whatever autocast's dtype (the op
    runs bf16 only). Outside autocast fp32 is refused, as before."""
    g = torch.Generator(device="cuda").manual_seed(34)
    x = torch.randn(2, 64, 256, device="cuda", generator=g).requires_grad_()
    w = torch.nn.Parameter(torch.randn(320, 256, device="cuda", generator=g) * 0.05)
    gy = torch.randn(2, 64, 320, device="cuda", generator=g).to(torch.bfloat16)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        ref = torch.nn.functional.linear(x, w)
    ref.backward(gy)
    rx, rw = x.grad.clone(), w.grad.clone()
    compiled = torch.compile(lambda x, w: clcrt.ops.gemm(x, w), fullgraph=True)
    calls = [("C entry", clcrt.ops.gemm), ("Python path", lambda x, w: clcrt.ops._gemm_py(x, w, sched="steal")),
             ("custom op", lambda x, w: torch.ops.clcrt.gemm(x, w)), ("compiled", compiled)]
    for name, call in calls:
        x.grad = w.grad = None
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = call(x, w)
        assert y.dtype == torch.bfloat16 and y.shape == (2, 64, 320), name
        assert close(y.float(), ref.detach().float())[0], name
        y.backward(gy)
        assert x.grad.dtype == torch.float32 and close(x.grad, rx)[0] and close(w.grad, rw)[0], name
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
        y = clcrt.ops.gemm(x.half(), w)
        assert y.dtype == torch.bfloat16 and close(y.float(), ref.float())[0]
    with pytest.raises(clcrt.InvalidError, match="dtype"):
        clcrt.ops.gemm(x, w)


# ---- torch custom ops ----------------------------------------------------------------------------


def test_opcheck():
    a, b = operands(100, 200, 64, seed=11)
    torch.library.opcheck(torch.ops.clcrt.gemm.default, (a, b))
    torch.library.opcheck(torch.ops.clcrt.gemm.default, (a, b), {"variant": "128x128", "sched": "static"})
    sizes = torch.tensor([30, 0, 70], dtype=torch.int32, device="cuda")
    bg = torch.randn(3, 64, 64, device="cuda").to(torch.bfloat16)
    torch.library.opcheck(torch.ops.clcrt.grouped_gemm.default, (a, bg, sizes))
    # F.linear's shapes and autograd: a 3-D a, and operands that require grad (the registered
    # backward, also traced by AOT autograd)
    torch.library.opcheck(torch.ops.clcrt.gemm.default, (a.view(2, 50, 64), b))
    torch.library.opcheck(torch.ops.clcrt.gemm.default, (a.clone().requires_grad_(), b.clone().requires_grad_()))
    torch.library.opcheck(torch.ops.clcrt.gemm.default, (a.view(4, 25, 64).clone().requires_grad_(), b))


# Each order of imports in a fresh process: clcrt imported after torch and before dynamo (the
# polyfill is registered once torch.compile imports dynamo), and after dynamo (at once).
_COMPILE_SCRIPT = r"""
import sys, time
import torch
%s
t0 = time.perf_counter()
import clcrt
took = time.perf_counter() - t0
dynamo = "torch._dynamo" in sys.modules
from clcrt import _fastops
a = torch.randn(300, 512, device="cuda").to(torch.bfloat16)
b = torch.randn(1000, 512, device="cuda").to(torch.bfloat16)
eager = clcrt.ops.gemm(a, b)
is_c = clcrt.ops.gemm is _fastops.gemm
compiled = torch.compile(lambda x, w: torch.relu(clcrt.ops.gemm(x, w).float()), fullgraph=True)(a, b)
ok = torch.allclose(compiled, torch.relu(eager.float()), rtol=1e-2, atol=1e-1)
print("RESULT", took, dynamo, is_c, ok, clcrt.ops.gemm is _fastops.gemm)
"""


@pytest.mark.parametrize("first", ["torch", "dynamo"])
def test_torch_compile_after_either_import(first):
    import subprocess
    import sys

    script = _COMPILE_SCRIPT % ("import torch._dynamo" if first == "dynamo" else "")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
    assert r.returncode == 0 and line, r.stdout[-2000:] + r.stderr[-4000:]
    took, dynamo, is_c, ok, still_c = line[0].split()[1:]
    print("compile after %s: import clcrt %.2f s, dynamo loaded %s, ops.gemm the C function %s" %
          (first, float(took), dynamo, is_c))
    assert dynamo == ("True" if first == "dynamo" else "False")  # importing clcrt does not load dynamo
    assert ok == "True"
    assert is_c == still_c == ("True" if hasattr(torch.compiler, "substitute_in_graph") else "False")


def test_torch_compile_fullgraph():
    a, b = operands(300, 1000, 512, seed=12)
    sizes = torch.tensor([100, 0, 200], dtype=torch.int32, device="cuda")
    bg = torch.randn(3, 256, 512, device="cuda").to(torch.bfloat16)

    def f(x, w, s, wg):
        y = clcrt.ops.gemm(x, w)
        z = clcrt.ops.grouped_gemm(x, wg, s)
        return torch.relu(y.float()).sum(1), z

    eager = f(a, b, sizes, bg)
    compiled = torch.compile(f, fullgraph=True)(a, b, sizes, bg)
    assert torch.allclose(compiled[0], eager[0], rtol=1e-2, atol=1e-1)
    assert torch.equal(compiled[1], eager[1])
    cg = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):  # warm-up, record, replay
        r = cg(a, b, sizes, bg)
    torch.cuda.synchronize()
    assert torch.allclose(r[0], eager[0], rtol=1e-2, atol=1e-1)
    assert close(r[1][:300], torch.cat([torch.matmul(a[:100].float(), bg[0].float().T),
                                        torch.matmul(a[100:300].float(), bg[2].float().T)]))[0]
