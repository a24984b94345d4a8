"""clcrt.ops: the GEMM example's tile functions as functions on torch tensors.

``gemm(a, b)`` computes ``a @ b.T`` for bf16 ``a`` (M x K) and ``b`` (N x K): the convention of
the C example (examples/gemm/gemm.cu, D = A . B^T, both operands K-major), which is also
``torch.nn.functional.linear(a, b)`` with ``b`` a weight of shape (out_features, in_features).
For ``a @ w`` with ``w`` of shape (K, N) pass ``w.T.contiguous()`` (or keep weights as N x K).

``grouped_gemm(a, b, group_sizes)`` is the mixture-of-experts form: group g's rows of ``a``
(consecutive, ``group_sizes[g]`` of them, counts in GPU memory as int32) times ``b[g].T``.

Both run on the stream of ``stream=`` or torch's current stream, through the public API: the
tile source ships in the package (``clcrt/data/gemm.cu``, :func:`source`), and the host logic
(variants, the plan, tensor maps, tile grid, stream-K: examples/gemm/gemm.h) is called
through a small C shim in the bundled library, not copied into Python, so these functions
make the choices the C example makes.
"""

import ctypes
import os
import sys
import threading

from . import _native
from . import _types as T
from ._errors import InvalidError
from ._core import Kernel, Sched, Stream, _enum, runtime, stream_handle

_lock = threading.Lock()
_source = None
_ARGS_CAP = 1024
_graph_workspaces = []


def source_path():
    """The GEMM tile functions' CUDA source the package ships."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gemm.cu")


def source():
    """That source's text (what the GEMM kernels compile)."""
    global _source
    if _source is None:
        with _lock:
            if _source is None:
                with open(source_path(), "rb") as f:
                    text = f.read()
                _native.lib().clcrt_py_gemm_set_source(text)
                _source = text  # kept alive: the library holds the pointer
    return _source.decode()


def variants():
    """The GEMM variants (examples/gemm/gemm.h), the default first: name, tile, cluster, stages."""
    lib = _native.lib()
    out, i = [], 0
    shape = (ctypes.c_uint * 5)()
    while True:
        name = lib.clcrt_py_gemm_variant(i, shape)
        if not name:
            return out
        out.append({"name": name.decode(), "bm": shape[0], "bn": shape[1], "cluster_m": shape[2],
                    "stages": shape[3], "epilogue": shape[4]})
        i += 1


def _variant_index(variant):
    if variant is None:
        return -1
    names = [v["name"] for v in variants()]
    if isinstance(variant, str) and variant in names:
        return names.index(variant)
    if isinstance(variant, int) and 0 <= variant < len(names):
        return variant
    raise InvalidError("variant %r: one of %s" % (variant, ", ".join(names)))


def kernel(variant=None, sched=Sched.AUTO, grouped=False, rt=None):
    """The registered GEMM kernel (a clcrt.Kernel) of a variant: for its info, cubin, PTX."""
    rt = rt or runtime()
    source()
    v = _variant_index(variant)
    v = 0 if v < 0 else v
    sched = _enum(Sched, sched, "sched")
    cache = rt.__dict__.setdefault("_gemm_kernels", {})
    key = (v, int(sched), bool(grouped))
    k = cache.get(key)
    if k is None:
        h = ctypes.c_void_p()
        rt._check(rt._lib.clcrt_py_gemm_register(rt._live(), v, int(sched), int(bool(grouped)), ctypes.byref(h)))
        k = cache[key] = Kernel(rt, h.value, None, "GemmArgs")
    return k


def _torch():
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            raise InvalidError("clcrt.ops work on torch tensors: install PyTorch") from None
    return torch


def _operand(torch, t, name, ndim, dtype, device=None, align=16):
    if not isinstance(t, torch.Tensor):
        raise InvalidError("%s: a torch.Tensor is needed, not %s" % (name, type(t).__name__))
    if t.device.type != "cuda":
        raise InvalidError("%s: the tensor is on %s: move it to the GPU" % (name, t.device))
    if device is not None and t.device != device:
        raise InvalidError("%s: the tensor is on %s, the other operands on %s" % (name, t.device, device))
    if t.dtype != dtype:
        raise InvalidError("%s: dtype %s, expected %s" % (name, t.dtype, dtype))
    if t.dim() not in ndim:
        raise InvalidError("%s: shape %s: %s dimensions expected" % (name, tuple(t.shape), " or ".join(map(str, ndim))))
    if not t.is_contiguous():
        raise InvalidError("%s: not contiguous (strides %s): pass .contiguous()" % (name, t.stride()))
    if t.data_ptr() % align:
        raise InvalidError("%s: its address 0x%x is not %d-byte aligned: pass a copy" % (name, t.data_ptr(), align))
    return t


def _stream(rt, stream):
    if stream is None:
        return rt.current_stream()
    # A clcrt.Stream of this runtime as it is: a stream with an SM budget must keep its own
    # scheduler state and grid size, not get a second wrapper of its CUstream.
    if isinstance(stream, Stream) and stream._rt is rt:
        return stream
    return rt._wrap(stream_handle(stream))


def _workspace(torch, rt, s, device, nbytes):
    """Stream-K workspace for runs on s: its counters zero before the first run and left zero by
    every run (the partials need no initial value).

    One per stream, since runs on two streams may overlap. Made outside graph capture and
    kept; made inside a capture (no workspace for that stream yet) with a zero-fill that the
    graph replays before the run, and kept alive with the graph's memory, never reused
    outside it (outside, its fill has not run)."""
    cache = rt.__dict__.setdefault("_gemm_ws", {})
    key = s._h
    ws = cache.get(key)
    if ws is not None and ws.numel() >= nbytes:
        return ws
    if torch.cuda.is_current_stream_capturing():
        ws = torch.zeros(nbytes, dtype=torch.uint8, device=device)
        _graph_workspaces.append(ws)
        return ws
    ws_new = torch.zeros(max(nbytes, 1 << 20), dtype=torch.uint8, device=device)
    # The zero-fill ran on torch's current stream; the runs go to s.
    if torch.cuda.current_stream(device).cuda_stream != (s.handle if s.handle != 1 else 0):
        torch.cuda.current_stream(device).synchronize()
    if ws is not None:  # the old one may still be in use by runs on s
        ws.record_stream(torch.cuda.ExternalStream(s.handle if s.handle != 1 else 0, device=device))
    cache[key] = ws_new
    return ws_new


def gemm(a, b, out=None, *, variant=None, sched=Sched.AUTO, stream=None):
    """``out = a @ b.T`` for bf16 a (M x K) and b (N x K), fp32 accumulation; K a multiple of 8.

    ``out`` (M x N, bf16, contiguous) is made when not given. ``variant`` names a variant of
    variants() (default: the plan's choice); ``sched`` the scheduler. Returns out."""
    torch = _torch()
    a = _operand(torch, a, "gemm: a", (2,), torch.bfloat16)
    b = _operand(torch, b, "gemm: b", (2,), torch.bfloat16, a.device)
    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k:
        raise InvalidError("gemm: a is %d x %d and b is %d x %d: b must be N x K (out = a @ b.T)" % (m, k, n, b.shape[1]))
    if k % 8 or k == 0:
        raise InvalidError("gemm: K = %d must be a positive multiple of 8 (TMA needs 16-byte rows)" % k)
    if out is None:
        out = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
    else:
        out = _operand(torch, out, "gemm: out", (2,), torch.bfloat16, a.device)
        if tuple(out.shape) != (m, n):
            raise InvalidError("gemm: out is %s, expected (%d, %d)" % (tuple(out.shape), m, n))
    if m == 0 or n == 0:
        return out
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    rt = runtime(dev)
    s = _stream(rt, stream)
    source()
    v = _variant_index(variant)
    buf = (ctypes.c_uint8 * _ARGS_CAP)()
    launch = T.sized(T.GemmLaunch)
    lib, h = rt._lib, rt._live()
    A, B, D = a.data_ptr(), b.data_ptr(), out.data_ptr()
    sms = s.grid_sms  # the plan's wave arithmetic for the SMs the run gets (a budget's, or the device's)
    rt._check(lib.clcrt_py_gemm_dense(h, v, sms, A, B, D, m, n, k, 0, 0, buf, _ARGS_CAP, ctypes.byref(launch)))
    if launch.ws_bytes:
        ws = _workspace(torch, rt, s, a.device, launch.ws_bytes + launch.ctr_bytes + 256)
        wp = (ws.data_ptr() + 255) & ~255
        cp = (wp + launch.ws_bytes + 255) & ~255
        rt._check(lib.clcrt_py_gemm_dense(h, launch.variant, sms, A, B, D, m, n, k, wp, cp, buf, _ARGS_CAP,
                                          ctypes.byref(launch)))
    kern = kernel(launch.variant, sched, False, rt)
    args = (ctypes.c_uint8 * launch.args_bytes).from_buffer(buf)
    kern.run(tuple(launch.tiles), args, stream=s)
    return out


def grouped_gemm(a, b, group_sizes, out=None, *, variant=None, sched=Sched.AUTO, stream=None):
    """Mixture-of-experts GEMM: for each group g, its ``group_sizes[g]`` consecutive rows of
    ``a`` (T x K, bf16) times ``b[g].T`` (b: G x N x K, or (G*N) x K, bf16) into the same rows
    of ``out`` (T x N, bf16). ``group_sizes``: int32 on the GPU (G entries, read by the kernel,
    so routing needs no host sync); their sum must not exceed T. Rows past the sum are not
    written. Returns out."""
    torch = _torch()
    a = _operand(torch, a, "grouped_gemm: a", (2,), torch.bfloat16)
    sizes = _operand(torch, group_sizes, "grouped_gemm: group_sizes", (1,), torch.int32, a.device, align=4)
    groups = sizes.shape[0]
    b = _operand(torch, b, "grouped_gemm: b", (2, 3), torch.bfloat16, a.device)
    rows, k = a.shape
    if b.dim() == 3:
        if b.shape[0] != groups:
            raise InvalidError("grouped_gemm: b has %d groups, group_sizes %d" % (b.shape[0], groups))
        n = b.shape[1]
    else:
        if groups == 0 or b.shape[0] % groups:
            raise InvalidError("grouped_gemm: b is %s: (G*N) x K with G = %d groups" % (tuple(b.shape), groups))
        n = b.shape[0] // groups
    if b.shape[-1] != k:
        raise InvalidError("grouped_gemm: a has K = %d, b has K = %d" % (k, b.shape[-1]))
    if k % 8 or k == 0:
        raise InvalidError("grouped_gemm: K = %d must be a positive multiple of 8" % k)
    if groups == 0:
        raise InvalidError("grouped_gemm: group_sizes is empty")
    most = _native.lib().clcrt_py_gemm_max_groups()
    if groups > most:
        raise InvalidError("grouped_gemm: %d groups: the grouped kernel holds at most %d" % (groups, most))
    if out is None:
        out = torch.empty((rows, n), dtype=torch.bfloat16, device=a.device)
    else:
        out = _operand(torch, out, "grouped_gemm: out", (2,), torch.bfloat16, a.device)
        if tuple(out.shape) != (rows, n):
            raise InvalidError("grouped_gemm: out is %s, expected (%d, %d)" % (tuple(out.shape), rows, n))
    if rows == 0 or n == 0:
        return out
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    rt = runtime(dev)
    s = _stream(rt, stream)
    source()
    v = _variant_index(variant)
    buf = (ctypes.c_uint8 * _ARGS_CAP)()
    launch = T.sized(T.GemmLaunch)
    st = rt._lib.clcrt_py_gemm_grouped(rt._live(), v, a.data_ptr(), b.data_ptr(), out.data_ptr(), rows, n, k, groups,
                                       sizes.data_ptr(), buf, _ARGS_CAP, ctypes.byref(launch))
    rt._check(st)
    kern = kernel(launch.variant, sched, True, rt)
    args = (ctypes.c_uint8 * launch.args_bytes).from_buffer(buf)
    kern.run(tuple(launch.tiles), args, stream=s)
    return out
