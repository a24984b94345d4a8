"""clcrt.ops without a GPU: the op library's embedded source and variant table, its kernels
compiled through clcrt_gemm_kernel, plans described, the torch custom ops' registration and
fake implementations, and the refusals that need no device."""

import ctypes
import time

import pytest

import clcrt

from conftest import REPO


def test_source_is_the_ops_with_its_headers():
    src = clcrt.ops.source()
    cu = (REPO / "ops" / "gemm.cu").read_text()
    for h in ("gemm_abi.h", "gemm_wgmma.h"):
        assert (REPO / "ops" / h).read_text() in src  # in place of the #include
        assert '#include "%s"' % h not in src
    assert src.startswith(cu.split('#include "gemm_abi.h"\n')[0])
    assert src.rstrip().endswith(cu.rstrip().splitlines()[-1])


def test_variants_from_the_op():
    vs = clcrt.ops.variants()
    text = (REPO / "ops" / "gemm_internal.h").read_text()
    assert vs and all('"%s"' % v["name"] in text for v in vs)
    assert vs[0]["name"] == "128x256" and vs[0]["cluster_m"] in (1, 2)


@pytest.mark.parametrize("grouped", [False, True])
def test_gemm_kernels_compile(rt90, grouped):
    t = time.perf_counter()
    k = clcrt.ops.kernel(grouped=grouped, rt=rt90)
    i = k.info
    assert i.name == ("clcrt_steal_gemm_grouped_tile" if grouped else "clcrt_steal_gemm_tile")
    assert i.block[0] == clcrt.ops.variants()[0]["bm"] // 64 * 128 + 32
    assert clcrt.ops.kernel(grouped=grouped, rt=rt90) is k  # registered once per runtime
    print("gemm kernel (grouped=%s) compiled in %.1f s" % (grouped, time.perf_counter() - t))


def test_generated_tile_shape_by_name(rt90):
    k = clcrt.ops.kernel(variant="64x96", rt=rt90)
    assert k.info.block[0] == 160  # one consumer warpgroup and the producer warp


def test_transposed_shape_by_name(rt90):
    """ "BMxBN...t": the shape transposed (A and B swapped, D^T computed), its own kernel; not
    for 128x256c2, whose transposed epilogue does not fit its registers."""
    ops = clcrt.ops
    assert ops._variant("128x160c2t") == ops._variant("128x160c2") | ops._TRANS
    assert ops._variant_name(ops._variant("64x96t")) == b"64x96t"
    k = ops.kernel(variant="64x96t", rt=rt90)
    assert k is not ops.kernel(variant="64x96", rt=rt90) and k.info.block[0] == 160
    assert "stmatrix" not in k.ptx  # the transposed epilogue stores from the accumulators
    with pytest.raises(clcrt.InvalidError, match="BMxBN"):
        ops._variant("64x96tt")
    with pytest.raises(clcrt.InvalidError, match="128x256"):
        ops.kernel(variant="128x256c2t", rt=rt90)
    with pytest.raises(clcrt.InvalidError, match="dense"):
        ops.kernel(variant="64x96t", grouped=True, rt=rt90)


def test_unknown_variant_and_sched(rt90):
    with pytest.raises(clcrt.InvalidError, match="128x256"):
        clcrt.ops.kernel(variant="huge", rt=rt90)
    with pytest.raises(clcrt.InvalidError, match="BMxBN"):
        clcrt.ops.kernel(variant="64x100", rt=rt90)
    with pytest.raises(clcrt.InvalidError, match="steal"):
        clcrt.ops.kernel(sched="fast", rt=rt90)


def test_blackwell_is_refused_with_a_reason():
    with clcrt.Runtime(arch="sm_100a", cache_dir="") as rt:
        with pytest.raises(clcrt.UnsupportedError, match="sm_90a"):
            clcrt.ops.kernel(rt=rt)


def test_one_call_into_c_needs_a_device(rt90):
    """The single C call clcrt.ops makes per run, marshalled as ops makes it: a compile-only
    runtime runs nothing and says so; bad descriptors are refused with a message first."""
    from clcrt import _native

    lib = _native.lib()
    ops = clcrt.ops._ops(rt90)
    st = lib.clcrt_py_gemm(ops, 1, 0, 0x10000, 0x20000, 0x30000, 256, 256, 64, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0)
    assert st == clcrt.NoDeviceError.status
    assert "compiles" in lib.clcrt_errmsg(rt90._h).decode()
    d = clcrt._types.sized(clcrt._types.GemmDesc)
    d.m, d.n, d.k, d.a, d.b, d.d = 100, 100, 12, 0x10000, 0x20000, 0x30000
    p = clcrt._types.sized(clcrt._types.GemmPlanInfo)
    assert lib.clcrt_gemm_plan_get(ops, None, ctypes.byref(d), ctypes.byref(p)) == clcrt.InvalidError.status
    assert "multiple of 8" in lib.clcrt_errmsg(rt90._h).decode()
    d.k = 64
    assert lib.clcrt_gemm_plan_get(ops, None, ctypes.byref(d), ctypes.byref(p)) == 0
    # the plan's tile shape: one of the table's or a generated one, named as clcrt_gemm_variant_find reads it
    assert lib.clcrt_gemm_variant_find(p.variant) >= 0
    assert lib.clcrt_gemm_max_groups() >= 1


def test_runtime_close_destroys_the_ops():
    rt = clcrt.Runtime(arch="sm_90a", cache_dir="")
    clcrt.ops._ops(rt)
    assert rt._closers
    rt.close()
    assert rt._closers == [] and rt._h is None


def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("PyTorch is not installed")
    return torch


def test_gemm_refuses_without_gpu_tensors():
    torch = _torch()
    a = torch.zeros(4, 8, dtype=torch.bfloat16)
    with pytest.raises(clcrt.InvalidError, match="GPU"):
        clcrt.ops.gemm(a, a)


def test_torch_ops_registered_with_fakes():
    """torch.ops.clcrt.* exist with schemas, and their fake implementations give the output's
    shape without a GPU: what torch.compile traces with."""
    torch = _torch()
    from torch._subclasses.fake_tensor import FakeTensorMode

    clcrt.ops.register_torch_ops()
    clcrt.ops.register_torch_ops()  # idempotent
    assert "variant" in str(torch.ops.clcrt.gemm.default._schema)
    with FakeTensorMode():
        a = torch.empty(37, 64, dtype=torch.bfloat16)
        b = torch.empty(300, 64, dtype=torch.bfloat16)
        out = torch.ops.clcrt.gemm(a, b)
        assert tuple(out.shape) == (37, 300) and out.dtype == torch.bfloat16
        sizes = torch.empty(4, dtype=torch.int32)
        g = torch.ops.clcrt.grouped_gemm(a, b.reshape(4, 75, 64), sizes)
        assert tuple(g.shape) == (37, 75)
        m = torch.ops.clcrt.masked_gemm(torch.empty(40, 64, dtype=torch.bfloat16), b.reshape(4, 75, 64), sizes, 10)
        assert tuple(m.shape) == (40, 75)


# ---- the eager path in C (clcrt/_ext/fastops.c), driven on the CPU through fakes ----


class _FakeTensor:
    """What _fastops reads of a tensor: dtype, shape, stride(), get_device(), data_ptr(),
    new_empty(), requires_grad."""

    def __init__(self, dtype, shape, strides, dev, ptr, requires_grad=False):
        self.dtype, self.shape, self._strides, self._dev, self._ptr = dtype, tuple(shape), tuple(strides), dev, ptr
        self.requires_grad = requires_grad
        self.made = []

    def stride(self):
        return self._strides

    def get_device(self):
        return self._dev

    def data_ptr(self):
        return self._ptr

    def new_empty(self, *shape):
        if len(shape) == 1:  # torch takes the sizes as one tuple or as ints
            shape = tuple(shape[0])
        t = _FakeTensor(self.dtype, shape, (shape[1], 1), self._dev, 0xD000)
        self.made.append(t)
        return t


def test_fastops_takes_the_checks_of_the_python_path():
    from clcrt import _fastops

    u64, u = ctypes.c_uint64, ctypes.c_uint
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, u64, u64, u64, u, u, u, u64, u64, u64, u)
    calls, status = [], [0]

    def fake_gemm(*args):
        calls.append(args)
        return status[0]

    cb = proto(fake_gemm)
    bf16, other = object(), object()
    _fastops.setup(bf16, lambda dev: 0x1234 + dev, ctypes.cast(cb, ctypes.c_void_p).value)
    streams = {0x1234: type("S", (), {"_h": 0x5000})()}
    a = _FakeTensor(bf16, (64, 256), (264, 1), 0, 0xA000)  # a row slice: pitch 264
    b = _FakeTensor(bf16, (128, 256), (256, 1), 0, 0xB000)
    out = _FakeTensor(bf16, (64, 128), (128, 1), 0, 0xC000)
    assert _fastops.gemm3(a, b, out) is None  # no device bound yet: the Python path decides
    assert _fastops.bind(0, 0x7000, streams) is True
    try:
        assert _fastops.gemm3(a, b, out) is out
        assert calls[-1] == (0x7000, 0x5000, 0xA000, 0xB000, 0xC000, 64, 128, 256, 264, 256, 128, 0)
        r = _fastops.gemm3(a, b, None)  # an output made with new_empty, rows packed
        assert r is a.made[-1] and r.shape == (64, 128) and calls[-1][4] == 0xD000 and calls[-1][10] == 128
        one = _FakeTensor(bf16, (1, 256), (7, 1), 0, 0xA000)  # one row: its pitch is K, as the Python path says
        assert _fastops.gemm3(one, b, _FakeTensor(bf16, (1, 128), (5, 1), 0, 0xC000)) is not None
        assert calls[-1][8] == 256 and calls[-1][10] == 128
        n = len(calls)
        declined = [
            (_FakeTensor(other, (64, 256), (256, 1), 0, 0xA000), b, out),  # not bf16
            (_FakeTensor(bf16, (64, 256), (1, 64), 0, 0xA000), b, out),  # K not contiguous
            (a, _FakeTensor(bf16, (128, 255), (256, 1), 0, 0xB000), out),  # K differs
            (a, _FakeTensor(bf16, (128, 256), (256, 1), 1, 0xB000), out),  # another device
            (_FakeTensor(bf16, (64, 256), (256, 1), -1, 0xA000), b, out),  # a CPU tensor
            (a, b, _FakeTensor(bf16, (64, 127), (128, 1), 0, 0xC000)),  # out of another shape
            (a, b, _FakeTensor(bf16, (64, 128), (1, 64), 0, 0xC000)),  # out's rows not contiguous
            (_FakeTensor(bf16, (0, 256), (256, 1), 0, 0xA000), b, out),  # empty: the Python path's
            (_FakeTensor(bf16, (2, 3, 4), (12, 4, 1), 0, 0xA000), b, out),  # not a matrix
            # layouts the kernels do not load: the Python path runs them on copies
            (_FakeTensor(bf16, (64, 250), (250, 1), 0, 0xA000), _FakeTensor(bf16, (128, 250), (250, 1), 0, 0xB000),
             out),  # K not a multiple of 8
            (_FakeTensor(bf16, (64, 256), (260, 1), 0, 0xA000), b, out),  # a's row pitch not a multiple of 8
            (a, _FakeTensor(bf16, (128, 256), (300, 1), 0, 0xB000), out),  # b's
            (_FakeTensor(bf16, (64, 256), (264, 1), 0, 0xA002), b, out),  # a at an odd element
            (a, _FakeTensor(bf16, (128, 256), (256, 1), 0, 0xB008), out),  # b 8 bytes past 16
            ("not a tensor", b, out),
        ]
        for args in declined:
            assert _fastops.gemm3(*args) is None
        streams.clear()  # torch's current stream not wrapped yet: the Python path wraps it
        assert _fastops.gemm3(a, b, out) is None
        assert len(calls) == n  # nothing declined reached the op
        streams[0x1234] = type("S", (), {"_h": 0x5000})()
        status[0] = 3  # the op's error comes back as its status, for the runtime's message
        assert _fastops.gemm3(a, b, out) == 3
        _fastops.unbind(0, 0x7001)  # another op's unbinding leaves this one
        status[0] = 0
        assert _fastops.gemm3(a, b, out) is out
    finally:
        _fastops.unbind(0, 0x7000)
    assert _fastops.gemm3(a, b, out) is None


def test_fastops_leaves_autograd_calls_to_python():
    """With grad mode on, a call whose operand requires grad is left to the Python path, which
    runs it through autograd's function; with grad mode off (torch.no_grad, inference_mode: an
    nn.Parameter weight requires grad there too) it runs in C. Grad mode is asked only where an
    operand requires grad."""
    from clcrt import _fastops

    u64, u = ctypes.c_uint64, ctypes.c_uint
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, u64, u64, u64, u, u, u, u64, u64, u64, u)
    calls, grad_on, asked = [], [True], []

    def fake_gemm(*args):
        calls.append(args)
        return 0

    def is_grad_enabled():
        asked.append(1)
        return grad_on[0]

    class Failing(_FakeTensor):
        @property
        def requires_grad(self):
            raise RuntimeError("no")

        @requires_grad.setter
        def requires_grad(self, v):
            pass

    cb = proto(fake_gemm)
    bf16 = object()
    _fastops.setup(bf16, lambda dev: 0x1234, ctypes.cast(cb, ctypes.c_void_p).value, is_grad_enabled)
    streams = {0x1234: type("S", (), {"_h": 0x5000})()}
    a = _FakeTensor(bf16, (64, 256), (256, 1), 0, 0xA000)
    w = _FakeTensor(bf16, (128, 256), (256, 1), 0, 0xB000, requires_grad=True)  # a Parameter
    x = _FakeTensor(bf16, (64, 256), (256, 1), 0, 0xA000, requires_grad=True)
    b = _FakeTensor(bf16, (128, 256), (256, 1), 0, 0xB000)
    assert _fastops.bind(0, 0x7000, streams) is True
    try:
        assert _fastops.gemm3(a, b, None) is a.made[-1] and len(calls) == 1  # nothing requires grad
        assert not asked  # and grad mode was not asked
        assert _fastops.gemm3(a, w, None) is None and _fastops.gemm3(x, b, None) is None
        assert _fastops.gemm3(Failing(bf16, (64, 256), (256, 1), 0, 0xA000), b, None) is None
        assert len(calls) == 1 and not a.made[1:]
        grad_on[0] = False
        n = len(asked)
        assert _fastops.gemm3(x, w, None) is x.made[-1] and len(calls) == 2
        assert len(asked) == n + 1
        grad_on[0] = None  # not a bool: taken as off, as torch's answer is always a bool
        assert _fastops.gemm3(x, w, None) is not None and len(calls) == 3
    finally:
        _fastops.unbind(0, 0x7000)
        _fastops.setup(bf16, lambda dev: 0x1234, ctypes.cast(cb, ctypes.c_void_p).value)


def test_fastops_entry_takes_plain_calls_and_forwards_the_rest():
    """clcrt.ops.gemm as the C function (_fastops.gemm): gemm(a, b), gemm(a, b, out) and
    gemm(a, b, out=out) run in C; every other call reaches the Python path with its arguments as
    given, and an op's nonzero status reaches the function that raises the runtime's message."""
    from clcrt import _fastops

    u64, u = ctypes.c_uint64, ctypes.c_uint
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, u64, u64, u64, u, u, u, u64, u64, u64, u)
    calls, status, forwarded, raised = [], [0], [], []

    def fake_gemm(*args):
        calls.append(args)
        return status[0]

    def fallback(*args, **kwargs):
        forwarded.append((args, kwargs))
        return "python path"

    class OpError(Exception):
        pass

    def raise_status(a, st):
        raised.append((a, st))
        raise OpError("status %d" % st)

    cb = proto(fake_gemm)
    bf16, other = object(), object()
    _fastops.setup(bf16, lambda dev: 0x1234 + dev, ctypes.cast(cb, ctypes.c_void_p).value)
    _fastops.gemm_setup(fallback, raise_status)
    streams = {0x1234: type("S", (), {"_h": 0x5000})()}
    a = _FakeTensor(bf16, (64, 256), (256, 1), 0, 0xA000)
    b = _FakeTensor(bf16, (128, 256), (256, 1), 0, 0xB000)
    out = _FakeTensor(bf16, (64, 128), (128, 1), 0, 0xC000)
    gemm = _fastops.gemm
    assert gemm(a, b, out) == "python path"  # no device bound yet
    assert forwarded[-1] == ((a, b, out), {})
    assert _fastops.bind(0, 0x7000, streams) is True
    try:
        n = len(forwarded)
        assert gemm(a, b, out) is out and gemm(a, b, out=out) is out and gemm(a, b, None) is a.made[-1]
        assert gemm(a, b) is a.made[-1] and gemm(a, b, out=None) is a.made[-1]
        assert len(calls) == 5 and len(forwarded) == n
        assert calls[-1][:5] == (0x7000, 0x5000, 0xA000, 0xB000, 0xD000)
        # Everything else goes to the Python path as given.
        for args, kwargs in [((a, b), {"variant": "128x128"}), ((a, b, out), {"stream": 7}), ((a,), {}),
                             ((a, b), {"out": out, "done": 5}), ((a, b, out, 4), {}), ((a, b), {"outs": out}),
                             ((_FakeTensor(other, (64, 256), (256, 1), 0, 0xA000), b), {"out": out})]:
            assert gemm(*args, **kwargs) == "python path"
            assert forwarded[-1] == (args, kwargs)
        assert len(calls) == 5  # none of them reached the op from C
        status[0] = 3
        with pytest.raises(OpError, match="status 3"):
            gemm(a, b, out=out)
        assert raised == [(a, 3)]
        made = len(a.made)
        with pytest.raises(OpError):
            gemm(a, b)  # the tensor made for it is dropped with the error
        assert len(a.made) == made + 1
        status[0] = 0
    finally:
        _fastops.unbind(0, 0x7000)
        import clcrt.ops as ops

        _fastops.gemm_setup(ops._gemm_py, ops._raise_status)
    import inspect

    sig = inspect.signature(_fastops.gemm)  # what torch.compiler.substitute_in_graph compares
    assert sig == inspect.signature(clcrt.ops._gemm_py)
    assert "fp32 accumulation" in clcrt.ops._gemm_py.__doc__


_TRACE_SCRIPT = r"""
import sys, torch
%s
import clcrt
from clcrt import _fastops
loaded = "torch._dynamo" in sys.modules
is_c = clcrt.ops.gemm is _fastops.gemm
graphs = []
def backend(gm, example_inputs):  # records the graph; nothing runs (no GPU needed)
    graphs.append(gm)
    return lambda *args: [torch.zeros(3, 5)]
a, b = torch.zeros(3, 8, dtype=torch.bfloat16), torch.zeros(5, 8, dtype=torch.bfloat16)
torch.compile(lambda x, w: clcrt.ops.gemm(x, w), backend=backend, fullgraph=True)(a, b)
print("RESULT", loaded, is_c, graphs[0].code.count("torch.ops.clcrt.gemm"))
"""


@pytest.mark.parametrize("first", ["torch", "dynamo"])
def test_compile_traces_the_op_after_either_import(first):
    """clcrt imported after torch does not load torch's compiler (seconds); torch.compile, which
    does, traces clcrt.ops.gemm (the C function where torch has substitute_in_graph) into the
    custom op, whether dynamo was loaded before clcrt or after."""
    torch = _torch()
    import subprocess
    import sys

    script = _TRACE_SCRIPT % ("import torch._dynamo" if first == "dynamo" else "")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
    assert r.returncode == 0 and line, r.stdout[-2000:] + r.stderr[-4000:]
    loaded, is_c, ops = line[0].split()[1:]
    assert loaded == str(first == "dynamo")
    assert is_c == str(hasattr(torch.compiler, "substitute_in_graph"))
    assert ops == "1"
