"""Device pointers from tensors: PyTorch tensors, the CUDA Array Interface, DLPack, data_ptr().

:func:`describe` returns what a kernel argument needs (address, dtype, device, byte size)
and refuses, with a clcrt.InvalidError that names the argument, what cannot be passed: a CPU
tensor, a non-contiguous one, one without storage. The order of the protocols:

1. a ``torch.Tensor``: ``data_ptr()``, ``dtype``, ``device``, ``is_contiguous()`` (cheapest);
2. ``__cuda_array_interface__`` (CuPy, Numba, ...); it names no device, so the driver is asked
   which device the address belongs to;
3. ``__dlpack__`` / ``__dlpack_device__`` (JAX, NumPy on the CPU, ...): the capsule's DLTensor is
   read, never consumed;
4. any object with ``data_ptr()`` (and ``dtype`` / ``device`` when it has them).
"""

import ctypes
from collections import namedtuple

from ._errors import InvalidError

TensorInfo = namedtuple("TensorInfo", "ptr dtype device nbytes shape")

_ALIASES = {
    "float": "float32", "f32": "float32", "half": "float16", "f16": "float16", "bf16": "bfloat16",
    "double": "float64", "f64": "float64", "int": "int32", "long": "int64", "i8": "int8", "i16": "int16",
    "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "bool_": "bool",
}  # fmt: skip
_ITEMSIZE = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
}  # fmt: skip


def dtype_name(dtype):
    """A dtype's plain name ("float32", "bfloat16", ...) from a string, a torch dtype or a
    NumPy/CuPy dtype."""
    if isinstance(dtype, str):
        name = dtype
    elif hasattr(dtype, "name") and isinstance(dtype.name, str):  # numpy / cupy dtypes
        name = dtype.name
    else:
        name = str(dtype)
    if name.startswith("torch."):
        name = name[6:]
    name = _ALIASES.get(name, name)
    if name not in _ITEMSIZE:
        raise InvalidError("%r is not a dtype clcrt knows (%s)" % (dtype, ", ".join(sorted(_ITEMSIZE))))
    return name


# ---- DLPack ----------------------------------------------------------------------------------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DEVICES = {1: "the CPU", 2: "CUDA", 3: "pinned host memory", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
               10: "ROCm", 13: "CUDA managed memory"}  # fmt: skip
_DL_CODES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64", (1, 8): "uint8",
             (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64", (2, 16): "float16", (2, 32): "float32",
             (2, 64): "float64", (4, 16): "bfloat16", (6, 8): "bool", (1, 1): "bool"}  # fmt: skip

_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype, _capsule_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _contiguous(shape, strides):
    if strides is None:
        return True
    expect = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _dlpack(obj, what):
    dev_type, dev_id = obj.__dlpack_device__()
    if dev_type not in (DL_CUDA, DL_CUDA_MANAGED):
        raise InvalidError(
            "%s: the array is on %s (DLPack device type %d): a kernel needs GPU memory; copy it to the GPU first"
            % (what, _DL_DEVICES.get(dev_type, "an unknown device"), dev_type)
        )
    try:
        cap = obj.__dlpack__(stream=-1)  # -1: only the address is read, no synchronisation wanted
    except (TypeError, ValueError, BufferError, NotImplementedError):
        cap = obj.__dlpack__()
    name = _capsule_name(cap)
    if name == b"dltensor":
        t = ctypes.cast(_capsule_ptr(cap, name), ctypes.POINTER(_DLTensor)).contents
    elif name == b"dltensor_versioned":
        t = ctypes.cast(_capsule_ptr(cap, name), ctypes.POINTER(_DLManagedTensorVersioned)).contents.dl_tensor
    else:
        raise InvalidError("%s: __dlpack__ returned a capsule named %r, not a DLPack tensor" % (what, name))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    if t.dtype.lanes != 1 or (t.dtype.code, t.dtype.bits) not in _DL_CODES:
        raise InvalidError("%s: DLPack dtype code %d, %d bits, %d lanes is not one clcrt passes"
                           % (what, t.dtype.code, t.dtype.bits, t.dtype.lanes))
    dtype = _DL_CODES[(t.dtype.code, t.dtype.bits)]
    if not _contiguous(shape, strides):
        raise InvalidError("%s: the array is not contiguous (shape %s, strides %s): make a contiguous copy"
                           % (what, shape, strides))
    n = 1
    for s in shape:
        n *= s
    ptr = (t.data or 0) + t.byte_offset
    del t, cap  # the capsule's own destructor releases the producer's export
    return ptr, dtype, dev_id, n * _ITEMSIZE[dtype], shape


# ---- the CUDA Array Interface -----------------------------------------------------------------

_TYPESTR = {"f4": "float32", "f8": "float64", "f2": "float16", "i1": "int8", "i2": "int16", "i4": "int32",
            "i8": "int64", "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64", "b1": "bool"}  # fmt: skip


def _cai(obj, what):
    cai = obj.__cuda_array_interface__
    ptr = cai["data"][0] or 0
    shape = tuple(cai["shape"])
    ts = cai["typestr"]
    if ts[0] == ">":
        raise InvalidError("%s: big-endian data (%s) is not passed to a GPU kernel" % (what, ts))
    dtype = _TYPESTR.get(ts[1:])
    if dtype is None:
        raise InvalidError("%s: typestr %r is not a dtype clcrt passes (give the address as an int instead)" % (what, ts))
    size = _ITEMSIZE[dtype]
    strides = cai.get("strides")
    if strides is not None:
        if any(s % size for s in strides):
            raise InvalidError("%s: strides %s are not whole elements" % (what, strides))
        strides = tuple(s // size for s in strides)
    if not _contiguous(shape, strides):
        raise InvalidError("%s: the array is not contiguous (shape %s, strides %s elements): make a contiguous copy"
                           % (what, shape, strides))
    n = 1
    for s in shape:
        n *= s
    from . import _driver  # the interface names no device: the driver knows the address

    dev = _driver.pointer_device(ptr) if ptr else None
    return ptr, dtype, dev, n * size, shape


# ---- torch and data_ptr() -----------------------------------------------------------------------


def _torch(t, what):
    dev = t.device
    if dev.type != "cuda":
        raise InvalidError(
            "%s: a tensor on %s: clcrt kernels read GPU memory; move it with .cuda() or .to('cuda:N')" % (what, dev)
        )
    if not t.is_contiguous():
        raise InvalidError(
            "%s: the tensor is not contiguous (shape %s, strides %s): pass t.contiguous()"
            % (what, tuple(t.shape), tuple(t.stride()))
        )
    n = t.numel()
    try:
        ptr = t.data_ptr()
    except RuntimeError as e:  # torch refuses data_ptr() of a tensor whose storage was freed
        raise InvalidError("%s: the tensor has no storage (freed or resized to 0): %s" % (what, e)) from None
    if ptr == 0 and n:
        raise InvalidError("%s: the tensor has no storage (freed or resized to 0)" % what)
    return ptr, dtype_name(t.dtype), dev.index if dev.index is not None else 0, n * t.element_size(), tuple(t.shape)


def describe(obj, what="argument"):
    """TensorInfo(ptr, dtype, device, nbytes, shape) of a GPU tensor, or InvalidError."""
    mod = type(obj).__module__
    if mod.startswith("torch") and hasattr(obj, "data_ptr") and hasattr(obj, "is_contiguous"):
        return TensorInfo(*_torch(obj, what))
    if hasattr(obj, "__cuda_array_interface__"):
        return TensorInfo(*_cai(obj, what))
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return TensorInfo(*_dlpack(obj, what))
    if hasattr(obj, "data_ptr"):
        dev = getattr(obj, "device", None)
        dtype = getattr(obj, "dtype", None)
        if dev is not None and getattr(dev, "type", "cuda") != "cuda":
            raise InvalidError("%s: a tensor on %s: clcrt kernels read GPU memory" % (what, dev))
        ptr = obj.data_ptr()
        return TensorInfo(ptr, dtype_name(dtype) if dtype is not None else None, getattr(dev, "index", None), None, None)
    raise InvalidError(
        "%s: %s is not a tensor: pass a torch tensor, an object with __cuda_array_interface__ or __dlpack__, "
        "or the address as an int" % (what, type(obj).__name__)
    )
