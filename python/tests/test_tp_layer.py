"""The tensor-parallel benchmark's host side without a GPU (python/bench/tp_layer.py): its
environment, options and report. tests/test_gpu_tp.py runs it on GPUs."""

import contextlib
import importlib.util
import os
import types

import pytest

from conftest import REPO

SCRIPT = REPO / "python" / "bench" / "tp_layer.py"


def load(monkeypatch, nvls=None):
    """The script as a module. The variables it sets are put back after the test."""
    for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        old = os.environ.get(k)
        monkeypatch.setenv(k, old if old is not None else "")  # remembered as it was, absent included
        if old is None:
            monkeypatch.delenv(k)
    if nvls is not None:
        monkeypatch.setenv("NCCL_NVLS_ENABLE", nvls)
    spec = importlib.util.spec_from_file_location("tp_layer_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_multicast_is_off_before_torch(monkeypatch):
    """The script turns NVLink multicast off (NCCL, torch's symmetric memory, NVSHMEM) for itself
    and every process it starts, whatever the environment said, and imports no torch before
    that (torch is imported in main and the workers)."""
    monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "0")
    tp = load(monkeypatch, nvls="1")
    assert (os.environ["NCCL_NVLS_ENABLE"], os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"],
            os.environ["NVSHMEM_DISABLE_NVLS"]) == ("0", "1", "1")
    text = SCRIPT.read_text()
    assert text.index("os.environ.update(MULTICAST_OFF)") < text.index("import torch")
    assert "cuMulticastCreate(" not in text
    assert not hasattr(tp, "torch")


def test_options(monkeypatch):
    tp = load(monkeypatch)
    o = tp.parse_args([])
    assert (o.tokens, o.hidden, o.ffn_shard, o.micro_batches, o.spawn) == (8192, 8192, 3584, 4, 0)
    assert o.budgets == [104, 112, 120] and o.modes == ["torch", "serial", "concurrent", "budget", "yield", "tiles"]
    assert o.tp_ctas == 32 and o.tp_priority == "same" and o.tp_trace is None
    o = tp.parse_args(["--check", "--spawn", "2", "--modes", "serial, yield"])
    assert (o.tokens, o.hidden, o.ffn_shard, o.micro_batches) == (512, 1024, 512, 4)
    assert (o.reps, o.warmup, o.budgets, o.spawn, o.modes) == (2, 1, "half", 2, ["serial", "yield"])
    assert tp.layer_flop(8192, 8192, 3584) == 4.0 * 8192 * 8192 * 3584


@pytest.mark.parametrize("argv,match", [
    (["--tokens", "1000", "--micro-batches", "3"], "not a multiple of --micro-batches"),
    (["--hidden", "1020"], "multiples of 8"),
    (["--ffn-shard", "0"], "positive"),
    (["--modes", "serial,overlap"], "unknown overlap"),
    (["--budgets", "112,lots"], "not a list of SM counts"),
    (["--reps", "0"], "counts"),
])
def test_option_errors(monkeypatch, capsys, argv, match):
    tp = load(monkeypatch)
    with pytest.raises(SystemExit) as e:
        tp.parse_args(argv)
    assert e.value.code == 2 and match in capsys.readouterr().err


def test_report_table(monkeypatch):
    tp = load(monkeypatch)
    res = {
        "labels": {"torch": "torch", "alone-clcrt": "alone: clcrt", "serial": "serial", "yield": "yield",
                   "budget-8": "budget 8", "ideal": "ideal"},
        "times_ms": {"torch": 2.0, "alone-clcrt": 1.5, "serial": 3.0, "yield": 1.5, "budget-8": None, "ideal": 1.5},
        "check_ratio": {"torch": 0.1, "serial": 0.2, "yield": float("nan")},
        "notes": {"budget-8": "CLCRT_E_UNSUPPORTED: no green contexts"},
    }
    lines = tp.table(res)
    assert lines[0].split()[:4] == ["mode", "ms/layer", "x", "serial"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["serial"].split()[1:4] == ["3.000", "1.000", "0.667"] and "ok (0.2 of" in rows["serial"]
    assert rows["yield"].split()[1:4] == ["1.500", "2.000", "1.333"] and "FAILED" in rows["yield"]
    assert rows["alone:"].split() == ["alone:", "clcrt", "1.500"]  # no ratios for what is not a layer
    assert rows["budget"].split()[2] == "-" and "no green contexts" in rows["budget"]


# ---- the whole measurement with stand-ins for torch, NCCL and clcrt ----------------------------
#
# measure() takes torch, torch.distributed and clcrt as arguments, so the script's host logic
# runs here on tiny matrices of Python floats: which stream each GEMM and all-reduce goes to,
# what waits for what, the preemption bracket, the checks and the report. Only the GPU run
# can say anything about time.


class FT:
    """A 2-D tensor of Python floats. Row slices are views (they share the row lists), as
    torch's are, so out= and in-place all-reduces write through."""

    def __init__(self, rows):
        self.rows = rows

    @property
    def shape(self):
        return (len(self.rows), len(self.rows[0]) if self.rows else 0)

    def __getitem__(self, s):
        return FT(self.rows[s])

    @property
    def T(self):
        return FT([list(c) for c in zip(*self.rows)])

    def __matmul__(self, o):
        cols = list(zip(*o.rows))
        return FT([[sum(a * b for a, b in zip(r, c)) for c in cols] for r in self.rows])

    def __truediv__(self, v):
        return FT([[a / v for a in r] for r in self.rows])

    def __sub__(self, o):
        return FT([[a - b for a, b in zip(r, q)] for r, q in zip(self.rows, o.rows)])

    def abs(self):
        return FT([[abs(a) for a in r] for r in self.rows])

    def max(self):
        vals = [a for r in self.rows for a in r]
        return types.SimpleNamespace(item=lambda: float("nan") if any(v != v for v in vals) else max(vals))

    def float(self):
        return self

    def to(self, dtype):
        return self

    def clone(self):
        return FT([list(r) for r in self.rows])

    def write(self, src):
        for r, q in zip(self.rows, src.rows):
            r[:] = q

    def fill_(self, v):
        for r in self.rows:
            r[:] = [v] * len(r)

    def zero_(self):
        self.fill_(0.0)


class FakeStream:
    def __init__(self, env, name, handle, priority=0):
        self.env, self.name, self.cuda_stream, self.priority = env, name, handle, priority

    def __eq__(self, o):
        return isinstance(o, FakeStream) and o.cuda_stream == self.cuda_stream

    def __hash__(self):
        return hash(self.cuda_stream)

    def wait_stream(self, o):
        self.env.log.append(("wait_stream", self.name, o.name))

    def wait_event(self, e):
        self.env.log.append(("wait_event", self.name, e.where))


class FakeEnv:
    """torch, torch.distributed and clcrt, as far as tp_layer uses them; every GEMM, all-reduce,
    wait and preemption bracket logged with the stream it went to."""

    def __init__(self, drop_last_gemm=False):
        self.log, self.depth, self.drop = [], 0, drop_last_gemm
        self.streams = {}
        env = self
        self.default = self.current = FakeStream(self, "default", 0)
        self.rng = 0

        def randn(*shape, device=None, generator=None):
            rows = []
            for _ in range(shape[0]):
                row = []
                for _ in range(shape[1]):
                    env.rng = (env.rng * 1103515245 + 12345) % 2 ** 31
                    row.append(env.rng / 2 ** 30 - 1.0)
                rows.append(row)
            return FT(rows)

        def matmul(a, b, out=None):
            env.log.append(("matmul", env.current.name, env.depth))
            out.write(a @ b)
            return out

        class Stream(FakeStream):
            def __init__(s, device=None, priority=0):
                n = len(env.streams)
                FakeStream.__init__(s, env, ("main", "side", "urgent")[n] if n < 3 else "s%d" % n, 100 + n, priority)
                env.streams[s.cuda_stream] = s

        class ExternalStream(FakeStream):
            def __init__(s, handle, device=None):
                FakeStream.__init__(s, env, env.streams[handle].name, handle)

        class Event:
            def __init__(s, enable_timing=False):
                s.where = None

            def record(s, stream=None):
                s.where = (stream or env.current).name
                env.log.append(("record", s.where))

            def synchronize(s):
                pass

            def elapsed_time(s, o):
                return 1.0

        @contextlib.contextmanager
        def stream(s):
            prev, env.current = env.current, s
            try:
                yield
            finally:
                env.current = prev

        class Generator:  # manual_seed returns the generator, as torch's does
            def __init__(s, device=None):
                pass

            def manual_seed(s, n):
                return s

        cuda = types.SimpleNamespace(
            current_device=lambda: 0, Stream=Stream, ExternalStream=ExternalStream, Event=Event, stream=stream,
            current_stream=lambda: env.current, synchronize=lambda: None, get_device_name=lambda: "Fake GPU",
            get_device_properties=lambda d: types.SimpleNamespace(multi_processor_count=132),
            nccl=types.SimpleNamespace(version=lambda: (2, 99, 1)))
        self.torch = types.SimpleNamespace(
            __version__="0.fake", bfloat16="bf16", float64="f64", cuda=cuda, matmul=matmul, randn=randn,
            Generator=Generator,
            empty=lambda *shape, device=None, dtype=None: FT([[0.0] * shape[1] for _ in range(shape[0])]),
            tensor=lambda vals, dtype=None, device=None: types.SimpleNamespace(tolist=lambda: list(vals)))

        def all_reduce(t, op=None, group=None):  # one rank: the sum is the tensor itself
            # The results' own gather (op MAX, after the modes) is logged apart from the layer's sums.
            env.log.append(("all_reduce" if op is None else "gather", env.current.name, env.depth))
            if group is not None:
                env.log.append(("group", group.max_ctas))

        class Options:  # ProcessGroupNCCL.Options: its ncclConfig_t as .config
            def __init__(s):
                s.config = types.SimpleNamespace(max_ctas=-1)

        def new_group(backend=None, pg_options=None):
            assert backend == "nccl"
            env.log.append(("new_group", pg_options.config.max_ctas))
            return types.SimpleNamespace(max_ctas=pg_options.config.max_ctas)

        self.dist = types.SimpleNamespace(all_reduce=all_reduce, barrier=lambda group=None: None,
                                          ReduceOp=types.SimpleNamespace(MAX="max"),
                                          ProcessGroupNCCL=types.SimpleNamespace(Options=Options), new_group=new_group,
                                          destroy_process_group=lambda g=None: env.log.append(("destroy", g.max_ctas)))

        class Budget:
            def __init__(s, n):
                s.sms, s.level, s.handle = n // 8 * 8, 0, 500 + n
                env.streams[s.handle] = FakeStream(env, "budget%d" % s.sms, s.handle)

            def close(s):
                env.log.append(("close", "budget%d" % s.sms))

        class Wrapper:
            def __init__(s, ts):
                s.ts, s.level = ts, 1 if ts.priority < 0 else 0

            @contextlib.contextmanager
            def preempt(s):
                env.log.append(("preempt_begin", env.current.name, s.ts.name))
                env.depth += 1
                yield
                env.depth -= 1
                env.log.append(("preempt_end", env.current.name, s.ts.name))

        class Runtime:
            def stream(s, stream=None, sm_budget=None, round=None):
                if stream is not None:
                    env.log.append(("wrap", stream.name))
                    return Wrapper(stream)
                assert round == "down"
                return Budget(sm_budget)

            def forget_stream(s, stream):
                env.log.append(("forget", stream.name))

        rt = Runtime()

        def gemm(a, b, out=None, stream=None):
            where = env.current.name if stream is None else "budget%d" % stream.sms
            env.log.append(("gemm", where, env.depth))
            if env.drop and out.rows[0] is env.last_rows:
                return out  # the stand-in for a GEMM that leaves its output unwritten
            out.write(a @ b.T)
            return out

        self.clcrt = types.SimpleNamespace(__version__="0.fake", Error=RuntimeError, runtime=lambda dev: rt,
                                           ops=types.SimpleNamespace(gemm=gemm))
        self.last_rows = None


def fake_measure(monkeypatch, env, modes="torch,serial,concurrent,budget,yield"):
    tp = load(monkeypatch)
    o = tp.parse_args(["--tokens", "8", "--hidden", "8", "--ffn-shard", "8", "--micro-batches", "2", "--reps", "2",
                       "--warmup", "1", "--budgets", "112,116", "--modes", modes])
    return tp, o


def test_measure_schedules_and_checks(monkeypatch, capsys):
    env = FakeEnv()
    tp, o = fake_measure(monkeypatch, env)
    res = tp.measure(o, 0, 1, env.torch, env.dist, env.clcrt)
    assert list(res["check_ratio"]) == ["torch", "serial", "concurrent", "budget-112", "yield"]
    assert all(r <= 1.0 for r in res["check_ratio"].values()), res["check_ratio"]
    assert set(res["times_ms"]) == {"torch", "alone-clcrt", "alone-torch", "alone-nccl", "serial", "concurrent",
                                    "alone-budget-112", "budget-112", "yield", "ideal"}  # 116 rounds to 112: once
    assert set(res["hidden"]) == {"torch", "concurrent", "budget-112", "yield"}  # modes with an all-reduce to hide
    assert "tp_layer: budget-112: " in capsys.readouterr().err  # measure's progress, one line per mode
    assert tp.report(res, o) == 0 and "budget-112" not in capsys.readouterr().err
    log = env.log
    # The modes' GEMMs and all-reduces, by stream (each mode: a check run, a warm-up, 2 timed layers).
    ops = [(op, where) for op, where, *_ in log if op in ("gemm", "matmul", "all_reduce")]
    assert ("matmul", "main") in ops and ("matmul", "side") not in ops
    assert {w for op, w in ops if op == "all_reduce"} == {"main", "side", "urgent"}
    assert {w for op, w in ops if op == "gemm"} == {"main", "budget112"}
    # Inside the bracket: only the all-reduces on the urgent stream, never a GEMM.
    inside = [e for e in log if e[0] in ("gemm", "matmul", "all_reduce") and e[2] > 0]
    assert inside and all(e[:2] == ("all_reduce", "urgent") for e in inside)
    assert all(e[:2] != ("all_reduce", "urgent") or e[2] == 1 for e in log if e[0] == "all_reduce")
    # The urgent stream's wrapper exists before the yield mode's first GEMM and is forgotten after its last.
    wrap, forget = log.index(("wrap", "urgent")), log.index(("forget", "urgent"))
    first_bracket = next(i for i, e in enumerate(log) if e[0] == "preempt_begin")
    assert wrap < first_bracket < forget
    assert all(e[0] != "preempt_begin" for e in log[forget:])
    # Every all-reduce off the GEMMs' stream waits for an event recorded after the GEMMs it reduces.
    for i, e in enumerate(log):
        if e[0] == "all_reduce" and e[1] in ("side", "urgent"):
            wait = max(j for j in range(i) if log[j][0] == "wait_event" and log[j][1] == e[1])
            assert log[wait][2] in ("main", "budget112"), log[wait]
            gemm_before = max(j for j in range(wait) if log[j][0] in ("gemm", "matmul"))
            rec = max(j for j in range(wait) if log[j][0] == "record")
            assert gemm_before < rec < wait
    # The budget stream waits for the main stream before its GEMMs; the main stream for it after.
    assert ("wait_stream", "budget112", "main") in log and ("wait_stream", "main", "budget112") in log
    assert ("close", "budget112") in log


def test_measure_nccl_ctas(monkeypatch):
    """--nccl-ctas C: a communicator capped at C CTAs per cap, made and destroyed once; the
    all-reduces alone, torch's mode, clcrt's concurrent mode and a budget of the SMs NCCL leaves
    (132 - C, rounded down) all reduce through it, each checked, and "hidden" is measured against
    that communicator's all-reduces alone."""
    env = FakeEnv()
    tp = load(monkeypatch)
    o = tp.parse_args(["--tokens", "8", "--hidden", "8", "--ffn-shard", "8", "--micro-batches", "2", "--reps", "2",
                       "--warmup", "1", "--modes", "torch,concurrent,budget", "--budgets", "120",
                       "--nccl-ctas", "8,16"])
    assert o.nccl_ctas == [8, 16]
    res = tp.measure(o, 0, 1, env.torch, env.dist, env.clcrt)
    for c, b in ((8, 120), (16, 112)):
        assert ("new_group", c) in env.log and ("destroy", c) in env.log
        for name in ("alone-nccl-c%d" % c, "torch-c%d" % c, "concurrent-c%d" % c, "budget-%d-c%d" % (b, c)):
            assert res["times_ms"][name] is not None, name
        for name in ("torch-c%d" % c, "concurrent-c%d" % c, "budget-%d-c%d" % (b, c)):
            assert res["check_ratio"][name] <= 1.0 and name in res["hidden"], name
    assert env.log.count(("new_group", 8)) == 1
    assert tp.report(res, o) == 0
    with pytest.raises(SystemExit):
        tp.parse_args(["--nccl-ctas", "8,x"])
    with pytest.raises(SystemExit):
        tp.parse_args(["--nccl-ctas", "0"])


def test_measure_catches_an_unwritten_output(monkeypatch):
    """A clcrt GEMM that leaves a micro-batch's output unwritten (the stand-in drops the last
    one's second GEMM) fails every clcrt mode's check: outputs are poisoned with NaN first."""
    env = FakeEnv(drop_last_gemm=True)
    tp, o = fake_measure(monkeypatch, env, modes="serial,yield")
    layer_init = tp.Layer.__init__

    def init(self, *a):
        layer_init(self, *a)
        env.last_rows = self.y.rows[self.mb * (self.M - 1)]  # the last micro-batch's first row

    monkeypatch.setattr(tp.Layer, "__init__", init)
    res = tp.measure(o, 0, 1, env.torch, env.dist, env.clcrt)
    assert res["check_ratio"]["torch"] <= 1.0
    assert not res["check_ratio"]["serial"] <= 1.0 and not res["check_ratio"]["yield"] <= 1.0
    assert tp.report(res, o) == 1
