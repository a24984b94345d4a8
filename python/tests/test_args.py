"""Args: the C layout rules, packing, tensors through every protocol (with duck-typed
stand-ins: no torch or GPU needed), and the mismatch errors NVRTC's checks produce."""

import ctypes
import struct

import pytest

import clcrt
from clcrt import args as A

from conftest import SCALE_SRC, ScaleArgs


# ---- layout and packing ------------------------------------------------------------------------


def test_layout_follows_c_rules():
    class M(clcrt.Args):
        _fields_ = [("a", clcrt.u8), ("b", clcrt.f64), ("c", clcrt.i16), ("d", clcrt.ptr), ("e", clcrt.bool_)]

    assert M.layout() == ([("a", 0, 1), ("b", 8, 8), ("c", 16, 2), ("d", 24, 8), ("e", 32, 1)], 40)
    assert ctypes.sizeof(M) == 40


def test_annotations_declare_fields():
    class N(clcrt.Args):
        x: clcrt.ptr("float32")
        n: clcrt.i32
        alpha: clcrt.f32

    assert N.layout() == ([("x", 0, 8), ("n", 8, 4), ("alpha", 12, 4)], 16)


def test_string_annotations():
    """As `from __future__ import annotations` makes them."""
    ns = {"__module__": __name__, "__annotations__": {"x": 'clcrt.ptr("float32")', "n": "clcrt.i32"}}
    S = type(clcrt.Args)("S", (clcrt.Args,), ns)
    assert S.layout() == ([("x", 0, 8), ("n", 8, 4)], 16)
    assert S._clcrt_fields_[0].dtype == "float32"


def test_tensor_map_is_64_aligned():
    class G(clcrt.Args):
        _fields_ = [("m", clcrt.u32), ("a", clcrt.TensorMap), ("k", clcrt.u32)]

    assert G.layout() == ([("m", 0, 4), ("a", 64, 128), ("k", 192, 4)], 256)


def test_nested_args_and_arrays():
    class In(clcrt.Args):
        _fields_ = [("p", clcrt.ptr), ("v", clcrt.u8)]

    class Out(clcrt.Args):
        _fields_ = [("c", clcrt.u8), ("inner", In), ("w", clcrt.array(clcrt.f32, 3)), ("z", clcrt.u16)]

    assert In.layout()[1] == 16
    assert Out.layout() == ([("c", 0, 1), ("inner", 8, 16), ("w", 24, 12), ("z", 36, 2)], 40)
    o = Out(c=1, w=[1.0, 2.0, 3.0], z=7)
    o.inner = In(p=0x1000, v=9)
    raw = bytes(o)
    assert len(raw) == 40
    assert struct.unpack_from("<B", raw, 0)[0] == 1
    assert struct.unpack_from("<QB", raw, 8) == (0x1000, 9)
    assert struct.unpack_from("<3f", raw, 24) == (1.0, 2.0, 3.0)
    assert struct.unpack_from("<H", raw, 36)[0] == 7


def test_packing_bytes():
    a = ScaleArgs(0xDEAD0000, 1 << 20, 1.5)
    assert bytes(a) == struct.pack("<QqfI", 0xDEAD0000, 1 << 20, 1.5, 0)
    a.alpha = 2.0
    assert struct.unpack_from("<f", bytes(a), 16)[0] == 2.0
    assert "alpha=2.0" in repr(a) and "0xdead0000" in repr(a)
    b = ScaleArgs.from_buffer_copy(bytes(a))  # made without __init__: still usable
    assert b.device is None and b._clcrt_ptr.value == ctypes.addressof(b)


def test_declaration_errors():
    with pytest.raises(clcrt.InvalidError, match="not an Args field type"):
        class Bad(clcrt.Args):
            _fields_ = [("x", str)]
    with pytest.raises(clcrt.InvalidError, match="twice"):
        class Twice(clcrt.Args):
            _fields_ = [("x", clcrt.u8), ("x", clcrt.u8)]
    with pytest.raises(clcrt.InvalidError, match="identifier"):
        class Under(clcrt.Args):
            _fields_ = [("_x", clcrt.u8)]
    with pytest.raises(clcrt.InvalidError, match="derive from clcrt.Args itself"):
        class Sub(ScaleArgs):
            pass
    with pytest.raises(clcrt.InvalidError, match="positive"):
        clcrt.array(clcrt.f32, 0)


def test_field_errors():
    a = ScaleArgs()
    with pytest.raises(clcrt.InvalidError, match="no field"):
        a.beta = 1
    with pytest.raises(clcrt.InvalidError, match="no field"):
        ScaleArgs(beta=1)
    with pytest.raises(clcrt.InvalidError, match="takes 3 fields"):
        ScaleArgs(1, 2, 3, 4)
    with pytest.raises(clcrt.InvalidError, match="cannot store"):
        a.n = "many"
    with pytest.raises(clcrt.InvalidError, match="not an address"):
        a.x = -1
    with pytest.raises(clcrt.InvalidError, match="not a tensor"):
        a.x = object()


def test_integers_that_do_not_fit_are_refused():
    """ctypes stores an integer modulo 2^bits; a field refuses one it cannot hold, naming itself."""

    class Ints(clcrt.Args):
        _fields_ = [("a", clcrt.i64), ("b", clcrt.i32), ("c", clcrt.u32), ("d", clcrt.u8),
                    ("e", clcrt.array(clcrt.i16, 2))]

    r = Ints()
    for field, value in (("a", 2**70), ("a", -2**63 - 1), ("b", 2**31), ("b", -2**31 - 1), ("c", -1), ("c", 2**32),
                         ("d", 256), ("e", [1, 2**15]), ("e", (-2**15 - 1, 0))):
        with pytest.raises(ValueError, match=r"Ints\.%s.*does not fit in clcrt\." % field) as ei:
            setattr(r, field, value)
        assert isinstance(ei.value, clcrt.InvalidError)
        assert str(value if not isinstance(value, (list, tuple)) else max(value, key=abs)) in str(ei.value)
    with pytest.raises(clcrt.InvalidError, match=r"Ints\.c: -1 does not fit in clcrt\.u32 \(0 to 2\*\*32-1\)"):
        Ints(c=-1)
    # The extremes fit, and nothing above changed the struct.
    assert bytes(r) == bytes(Ints())
    r.a, r.b, r.c, r.d, r.e = -2**63, 2**31 - 1, 2**32 - 1, 255, [-2**15, 2**15 - 1]
    assert (r.a, r.b, r.c, r.d, list(r.e)) == (-2**63, 2**31 - 1, 2**32 - 1, 255, [-2**15, 2**15 - 1])
    r.b = True  # a bool is an int; floats and strings keep their own refusal
    assert r.b == 1
    with pytest.raises(clcrt.InvalidError, match="cannot store"):
        r.b = 1.5


# ---- tensors -------------------------------------------------------------------------------------


class FakeCAI:
    """A CUDA Array Interface producer (as CuPy's arrays)."""

    def __init__(self, ptr, shape, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3}


class FakeDLPack:
    """A DLPack producer over host memory we own, claiming to be on a given device."""

    def __init__(self, dev_type, dev_id, n=8, code=2, bits=32, strides=None):
        self.buf = (ctypes.c_float * n)()
        self.shape = (ctypes.c_int64 * 1)(n)
        self.strides = (ctypes.c_int64 * 1)(*strides) if strides else None
        self.dev = (dev_type, dev_id)
        self.t = clcrt.tensors._DLTensor()
        self.t.data = ctypes.addressof(self.buf)
        self.t.device.device_type, self.t.device.device_id = dev_type, dev_id
        self.t.ndim = 1
        self.t.dtype.code, self.t.dtype.bits, self.t.dtype.lanes = code, bits, 1
        self.t.shape = self.shape
        self.t.strides = self.strides
        self.t.byte_offset = 16
        self.calls = []

    def __dlpack_device__(self):
        return self.dev

    def __dlpack__(self, stream=None):
        self.calls.append(stream)
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.t), b"dltensor", None)


class FakeTorchLike:
    """An object with only data_ptr(), dtype and device (as some tensor libraries)."""

    class Dev:
        def __init__(self, type_, index):
            self.type, self.index = type_, index

    def __init__(self, ptr, dtype="float32", dev=("cuda", 0)):
        self._p, self.dtype, self.device = ptr, dtype, self.Dev(*dev)

    def data_ptr(self):
        return self._p


def test_dlpack_cuda_tensor():
    t = FakeDLPack(2, 0)
    a = ScaleArgs(x=t, n=8, alpha=1.0)
    assert a.x == ctypes.addressof(t.buf) + 16
    assert a.device == 0
    assert t.calls == [-1]  # only the address is read: no synchronisation asked for
    del t
    assert a._clcrt_refs["x"][0][0].dev == (2, 0)  # the Args keep the tensor alive


def test_dlpack_refusals():
    with pytest.raises(clcrt.InvalidError, match="on the CPU"):
        ScaleArgs(x=FakeDLPack(1, 0))
    with pytest.raises(clcrt.InvalidError, match="pinned host memory"):
        ScaleArgs(x=FakeDLPack(3, 0))
    with pytest.raises(clcrt.InvalidError, match="not contiguous"):
        ScaleArgs(x=FakeDLPack(2, 0, n=8, strides=[2]))
    with pytest.raises(clcrt.InvalidError, match="float64"):
        ScaleArgs(x=FakeDLPack(2, 0, code=2, bits=64))


def test_cuda_array_interface():
    class P(clcrt.Args):
        _fields_ = [("p", clcrt.ptr)]

    with pytest.raises(clcrt.InvalidError, match="not contiguous"):
        P(p=FakeCAI(0x1000, (4, 4), strides=(4, 16)))
    with pytest.raises(clcrt.InvalidError, match="typestr"):
        P(p=FakeCAI(0x1000, (4,), typestr="<c8"))
    try:
        a = P(p=FakeCAI(0, (0,)))
    except clcrt.Error as e:  # pragma: no cover - depends on the driver
        pytest.fail(str(e))
    assert a.p == 0


def test_data_ptr_objects_and_devices():
    class Two(clcrt.Args):
        _fields_ = [("a", clcrt.ptr), ("b", clcrt.ptr("bfloat16"))]

    t = Two(a=FakeTorchLike(0x2000, "float32", ("cuda", 1)))
    assert t.a == 0x2000 and t.device == 1
    with pytest.raises(clcrt.InvalidError, match="different devices"):
        t.b = FakeTorchLike(0x3000, "bfloat16", ("cuda", 0))
    assert t.b == 0 and t.device == 1
    with pytest.raises(clcrt.InvalidError, match="bfloat16"):
        t.b = FakeTorchLike(0x3000, "float16", ("cuda", 1))
    with pytest.raises(clcrt.InvalidError, match="GPU memory"):
        t.a = FakeTorchLike(0x3000, "float32", ("cpu", None))
    t.a = 0  # an int drops the tensor and its device
    assert t.device is None or t.device == 1


def test_dtype_names():
    n = clcrt.tensors.dtype_name
    assert n("f32") == "float32" and n("bf16") == "bfloat16" and n("torch.int64") == "int64"
    with pytest.raises(clcrt.InvalidError):
        n("complex64")


def test_run_refuses_other_args(scale_kernel):
    class Other(clcrt.Args):
        _fields_ = [("x", clcrt.ptr), ("n", clcrt.i64), ("alpha", clcrt.f32)]

    with pytest.raises(clcrt.InvalidError, match="registered with Args ScaleArgs"):
        scale_kernel.run(1, Other())
    with pytest.raises(clcrt.InvalidError, match="registered with Args ScaleArgs"):
        scale_kernel.run(1, b"\0" * 24)


def test_run_refuses_a_tensor_of_another_device(scale_kernel):
    """The runtime runs on device 0; Args holding a tensor of device 1 are refused before any
    driver call (here the runtime only compiles, which would fail later)."""
    a = ScaleArgs(x=FakeDLPack(2, 1), n=8, alpha=1.0)
    with pytest.raises(clcrt.InvalidError, match="cuda:1"):
        scale_kernel.run(1, a)


# ---- mismatches, as NVRTC finds them ---------------------------------------------------------


def _mismatch(rt, fields, c_name="ScaleArgs", src=SCALE_SRC):
    cls = type("Decl", (clcrt.Args,), {"_fields_": fields, "c_name": c_name})
    with pytest.raises(clcrt.ArgsMismatchError) as ei:
        rt.register(src, "scale_tile", cls, block=64)
    return ei.value


def test_mismatch_order(rt90):
    e = _mismatch(rt90, [("x", clcrt.ptr("float32")), ("alpha", clcrt.f32), ("n", clcrt.i64)])
    found = {(f, w) for f, w, *_ in e.mismatches}
    assert ("alpha", "offset") in found and ("n", "offset") in found
    assert "alpha: offset 16 on the device, 8 in Python" in e.message
    assert e.status == 2 and "clcrt_pyargs" in e.log


def test_mismatch_type_of_same_size(rt90):
    e = _mismatch(rt90, [("x", clcrt.ptr("float32")), ("n", clcrt.i64), ("alpha", clcrt.i32)])
    assert e.mismatches == [("alpha", "type", "a floating-point type", "a signed integer")]


def test_mismatch_size(rt90):
    e = _mismatch(rt90, [("x", clcrt.ptr("float32")), ("n", clcrt.i32), ("alpha", clcrt.f32)])
    whats = {(f, w) for f, w, *_ in e.mismatches}
    assert ("n", "size") in whats and ("sizeof(ScaleArgs)", "size") in whats


def test_mismatch_pointee(rt90):
    e = _mismatch(rt90, [("x", clcrt.ptr("int32")), ("n", clcrt.i64), ("alpha", clcrt.f32)])
    assert e.mismatches[0][:2] == ("x", "element type")
    assert "a floating-point type of 4 bytes on the device" in e.message


def test_mismatch_missing_field(rt90):
    e = _mismatch(rt90, [("x", clcrt.ptr), ("count", clcrt.i64), ("alpha", clcrt.f32)])
    assert ("count", "field", "absent", "declared") in e.mismatches
    assert "no such field" in e.message


def test_untyped_pointer_accepts_integer_addresses(rt90):
    src = SCALE_SRC.replace("float *x;", "unsigned long long x;").replace("a.x[i]", "((float *)a.x)[i]")

    class U(clcrt.Args):
        c_name = "ScaleArgs"
        _fields_ = [("x", clcrt.ptr), ("n", clcrt.i64), ("alpha", clcrt.f32)]

    rt90.register(src, "scale_tile", U, block=64)


def test_user_errors_stay_compile_errors(rt90):
    """A declaration that matches but a source that fails: a CompileError with NVRTC's log,
    not a mismatch."""
    with pytest.raises(clcrt.CompileError) as ei:
        rt90.register(SCALE_SRC + "\nint oops = ;\n", "scale_tile", ScaleArgs, block=64)
    assert not isinstance(ei.value, clcrt.ArgsMismatchError)
    assert "scale_tile(7): error" in ei.value.message  # the user's own line numbers


def test_check_args_off(rt90):
    class Wrong(clcrt.Args):
        c_name = "ScaleArgs"
        _fields_ = [("x", clcrt.ptr)]

    k = rt90.register(SCALE_SRC, "scale_tile", Wrong, block=64, check_args=False)
    assert k.args is Wrong


def test_args_class_named_nowhere_in_the_source(rt90):
    """The checks appended for a declaration name its type themselves, so the library's check
    that the Args type appears in the source always passed, and NVRTC then failed on every
    generated check (79 lines). One line, as for args="NoSuchArgs", with the way out."""

    class NoSuchArgs(clcrt.Args):
        _fields_ = [("x", clcrt.ptr("float32")), ("n", clcrt.i64), ("alpha", clcrt.f32)]

    with pytest.raises(clcrt.InvalidError) as by_name:
        rt90.register(SCALE_SRC, "scale_tile", "NoSuchArgs", block=64)
    with pytest.raises(clcrt.InvalidError) as by_class:
        rt90.register(SCALE_SRC, "scale_tile", NoSuchArgs, block=64)
    msg = by_class.value.message
    assert "\n" not in msg and 'c_name = "' in msg and "class NoSuchArgs" in msg, msg
    head = 'Args type "NoSuchArgs" does not appear in the source: '
    assert msg.startswith(head) and by_name.value.message.startswith(head), (msg, by_name.value.message)
    # c_name is what is looked for (its last component, as C++ names it), and a right one passes.
    NoSuchArgs.c_name = "ns::Missing"
    with pytest.raises(clcrt.InvalidError, match='Args type "ns::Missing" does not appear'):
        rt90.register(SCALE_SRC, "scale_tile", NoSuchArgs, block=64)
    NoSuchArgs.c_name = "ScaleArgs"
    assert rt90.register(SCALE_SRC, "scale_tile", NoSuchArgs, block=64).args_type == "ScaleArgs"


def test_field_named_like_a_python_keyword(rt90):
    """What docs/python.md shows for a device field named `in`: _fields_, then getattr/setattr."""
    src = ("struct CopyArgs { const float *in; float *out; long n; };\n"
           "__device__ void copy_tile(const clcrt::Tile &t, const CopyArgs &a) {\n"
           "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
           "  if (i < a.n) a.out[i] = a.in[i];\n"
           "}\n")

    class CopyArgs(clcrt.Args):
        _fields_ = [("in", clcrt.ptr("float32")), ("out", clcrt.ptr("float32")), ("n", clcrt.i64)]

    a = CopyArgs(0x1000, 0x2000, 4)
    assert bytes(CopyArgs(**{"in": 0x1000, "out": 0x2000, "n": 4})) == bytes(a)
    setattr(a, "in", 0x3000)
    assert getattr(a, "in") == 0x3000 and struct.unpack_from("<QQq", bytes(a)) == (0x3000, 0x2000, 4)
    assert rt90.register(src, "copy_tile", CopyArgs, block=64).args is CopyArgs


def test_check_source_is_appended_after_a_line_directive():
    text = A.check_source(ScaleArgs)
    assert '#line 1 "<clcrt.Args ScaleArgs>"' in text
    assert "__INTADDR__(&((ScaleArgs *)0)->alpha), 16ul" in text
