"""clcrt.ops: the op library's GEMMs (include/clcrt_ops.h) on torch tensors.

``gemm(a, b)`` computes ``a @ b.T`` for bf16 ``a`` (M x K) and ``b`` (N x K), fp32 accumulation:
``torch.nn.functional.linear(a, b)`` with ``b`` a weight of shape (out_features, in_features);
``a`` may be ... x K as there (its leading dimensions taken as rows). Where an operand requires
grad and grad mode is on, autograd records the call; the backward runs through torch.matmul.
Under ``torch.autocast("cuda")`` fp32 and fp16 operands are cast to bf16, the ops' only dtype.
``grouped_gemm(a, b, group_sizes)`` is the mixture-of-experts form: group g's rows of ``a``
(consecutive, ``group_sizes[g]`` of them, int32 counts in GPU memory) times ``b[g].T``;
``masked_gemm`` the same with group g's rows at row ``g * rows_per_group``.

Each run is one call into C (clcrt_gemm), which plans the problem, keeps the stream's stream-K
workspace and launches on torch's current stream (or ``stream=``). The kernels load operands
whose rows are contiguous (stride 1 along K), with K and the row pitch multiples of 8 elements
and the base 16-byte aligned: row slices of contiguous tensors at any 16-byte offset run as they
are. Any other operand (an odd K, a transposed weight, a slice at an odd element) runs on a copy
(K padded with zeros to a multiple of 8) made on the stream at each call: right answers for every
input F.linear takes, at the cost of the copy (``plan()`` names the operands copied).

The same functions are registered as PyTorch custom ops, ``torch.ops.clcrt.gemm``,
``torch.ops.clcrt.grouped_gemm`` and ``torch.ops.clcrt.masked_gemm`` (with fake
implementations), so ``torch.compile(fullgraph=True)`` traces through ``clcrt.ops.gemm``; eager
calls go straight to C without the dispatcher. The ops register when this module is imported
after torch, or at the first call; call :func:`register_torch_ops` before ``torch.compile`` if
torch was imported after clcrt and no call ran yet.
"""

import ctypes
import sys
import threading

from . import _native
from . import _types as T
from ._core import _defaults as _runtimes
from ._core import Kernel, Sched, Stream, error_for, runtime, stream_handle
from ._errors import InvalidError

_lock = threading.Lock()
# The header's values (include/clcrt.h, clcrt_ops.h, through _types), by their Python names.
_SCHED = {None: int(Sched.AUTO), **{s.name.lower(): int(s) for s in Sched}}
_SPLIT = {None: T.GEMM_SPLIT_AUTO, **{n.lower(): v for n, v in T.members("clcrt_gemm_split")}}
_DENSE, _GROUPED, _MASKED = T.GEMM_DENSE, T.GEMM_GROUPED, T.GEMM_MASKED
CHECKED, MEASURED = T.GEMM_CHECKED, T.GEMM_MEASURED  # clcrt_gemm_desc.flags
_variant_index = None
_torch = None  # the torch module, once a call has seen it
_bf16 = None
_registered = False
_raw_stream = None  # torch._C._cuda_getCurrentRawStream: the current stream's handle, cheaply
try:  # gemm's eager path in C (clcrt/_ext/fastops.c); without it, the same path in Python
    from . import _fastops
except ImportError:
    _fastops = None
_fast_gemm = None  # _fastops.gemm3 once set up (torch seen, the library loaded)


def source():
    """The GEMM tile functions' CUDA source, as the op compiles it (clcrt_gemm_source)."""
    return _native.lib().clcrt_gemm_source().decode()


def variants():
    """The compiled shapes of the tile functions, the default first: name, tile, cluster, stages."""
    lib = _native.lib()
    out = []
    for i in range(lib.clcrt_gemm_variant_count()):  # the measured ones (generated shapes: by name)
        v = T.sized(T.GemmVariantInfo)
        if lib.clcrt_gemm_variant_get(i, ctypes.byref(v)):
            break
        out.append({"name": v.name.decode(), "bm": v.bm, "bn": v.bn, "cluster_m": v.cluster_m, "stages": v.stages,
                    "epilogue": v.epilogue})
    return out


def _variants():
    global _variant_index
    if _variant_index is None:
        _variant_index = {v["name"]: i for i, v in enumerate(variants())}
    return _variant_index


_TRANS = 0x100  # in a variant index: the shape transposed (a name ending in "t"; the shim's flag)


def _variant(variant):
    if variant is None:
        return -1
    idx = _variants()
    if isinstance(variant, str) and variant in idx:
        return idx[variant]
    if isinstance(variant, str) and "\0" not in variant:
        i = _native.lib().clcrt_gemm_variant_find(variant.encode())  # a generated tile shape, "64x96"
        if i >= 0:
            return i
        if variant.endswith("t") and len(variant) > 1:  # transposed: A and B swapped, D^T computed
            i = _variant(variant[:-1])
            if i >= 0 and not i & _TRANS:
                return i | _TRANS
    if isinstance(variant, int) and not isinstance(variant, bool) and 0 <= variant < len(idx):
        return variant
    raise InvalidError("variant=%r: one of %s, a tile shape \"BMxBN\" or \"BMxBNc2\" (BM 64 or 128, BN a multiple "
                       "of 16 up to 256) with \"t\" after it for the shape transposed, or None for the plan's"
                       % (variant, ", ".join(idx)))


def _variant_name(i):
    v = T.sized(T.GemmVariantInfo)
    if _native.lib().clcrt_gemm_variant_get(i & ~_TRANS, ctypes.byref(v)):
        raise InvalidError("variant %d does not exist" % i)
    return v.name + b"t" if i & _TRANS else v.name


def _sched(sched):
    s = _SCHED.get(sched) if sched is None or isinstance(sched, str) else None
    if s is not None:
        return s
    if isinstance(sched, Sched):
        return int(sched)
    raise InvalidError('sched=%r: one of "steal", "static", "fixed", "clc", or None for the plan\'s' % (sched,))


def _ops(rt):
    """The runtime's clcrt_ops handle (made once, destroyed by Runtime.close before its streams)."""
    h = rt.__dict__.get("_ops_h")
    if h is None:
        with _lock:
            h = rt.__dict__.get("_ops_h")
            if h is None:
                p = ctypes.c_void_p()
                rt._check(rt._lib.clcrt_ops_create(rt._live(), ctypes.byref(p)))
                h = rt._ops_h = p.value
                rt._closers.append(lambda: rt._lib.clcrt_ops_destroy(h))
                rt._stream_closers.append(lambda s: rt._lib.clcrt_ops_stream_release(h, s))
                if _fastops is not None and _runtimes.get(rt.device) is rt:
                    # The C path serves the device's default runtime, the one gemm() uses; it
                    # forgets the op before close() destroys it (closers run first to last).
                    _fastops.bind(rt.device, h, rt._streams)
                    rt._closers.insert(0, lambda: _fastops.unbind(rt.device, h))
    return h


def kernel(variant=None, sched=None, grouped=False, rt=None):
    """The registered GEMM kernel (a clcrt.Kernel) of a variant: for its info, cubin, PTX."""
    rt = rt or runtime()
    h = ctypes.c_void_p()
    name = None if variant is None else _variant_name(_variant(variant))
    rt._check(rt._lib.clcrt_gemm_kernel(_ops(rt), name, _sched(sched), _GROUPED if grouped else _DENSE,
                                        ctypes.byref(h)))
    cache = rt.__dict__.setdefault("_gemm_kernels", {})
    k = cache.get(h.value)
    if k is None:
        k = cache[h.value] = Kernel(rt, h.value, None, "GemmArgs")
    return k


def plan(a, b, *, variant=None, sched=None, split=None, stream=None):
    """What gemm(a, b, ...) would run (clcrt_gemm_plan_get): variant, scheduler, slices, tiles,
    and ``copies``, the operands it runs on a copy (the module's note on layouts)."""
    torch = _torch_mod()
    m, k, n = _dense_shapes(torch, a, b)
    rt = runtime(a.get_device())
    s = _stream(rt, stream)
    # An operand gemm would copy (_loadable_copy) is planned as its copy: K padded, the rows
    # contiguous, the base aligned as the caching allocator aligns it.
    copied = tuple(name for name, t in (("a", a), ("b", b)) if m and n and not _loadable(t))
    k8 = _copy_k(k)
    pa, lda = (512, k8) if "a" in copied else (a.data_ptr(), _pitch(a, "gemm: a"))
    pb, ldb = (512, k8) if "b" in copied else (b.data_ptr(), _pitch(b, "gemm: b"))
    d = T.sized(T.GemmDesc)
    d.m, d.n, d.k, d.a, d.b, d.d, d.lda, d.ldb = m, n, k8 if copied else k, pa, pb, 16, lda, ldb
    vi = _variant(variant)
    d.variant = None if vi < 0 else _variant_name(vi)
    d.sched, d.split = _sched(sched), _split(split)
    p = T.sized(T.GemmPlanInfo)
    rt._check(rt._lib.clcrt_gemm_plan_get(_ops(rt), s._h, ctypes.byref(d), ctypes.byref(p)))
    return {"variant": p.variant.decode(), "sched": Sched(p.sched).name.lower(), "splits": p.splits,
            "shared_tiles": p.shared_tiles, "units": p.units, "tiles": (p.tiles.x, p.tiles.y, p.tiles.z),
            "workspace_bytes": p.workspace_bytes, "copies": copied}


def _split(split):
    if split in _SPLIT:
        return _SPLIT[split]
    raise InvalidError('split=%r: "none", "all", or None for the plan\'s' % (split,))


def _torch_mod():
    global _torch, _bf16, _raw_stream
    if _torch is None:
        try:
            import torch
        except ImportError:
            raise InvalidError("clcrt.ops work on torch tensors: install PyTorch") from None
        _bf16 = torch.bfloat16
        _raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _torch = torch
        register_torch_ops()
        _fast_setup()
    return _torch


def _fast_setup():
    global _fast_gemm, gemm
    if _fastops is None or _raw_stream is None or _fast_gemm is not None:
        return
    try:
        fn = ctypes.cast(_native.lib().clcrt_py_gemm_dense, ctypes.c_void_p).value
    except Exception:  # the library cannot load: the Python path reports it when it runs
        return
    _fastops.setup(_bf16, _raw_stream, fn, getattr(_torch._C, "is_grad_enabled", None) or _torch.is_grad_enabled)
    _fast_gemm = _fastops.gemm3
    # clcrt.ops.gemm becomes the C function itself, which spares an eager call its Python frame
    # and the compiler query (0.26-0.56 us on H200 hosts, python/bench/overhead.py), where
    # torch.compile can be told to trace the Python path in its place
    # (torch.compiler.substitute_in_graph); elsewhere gemm stays the Python function, with the
    # same C path inside it. A name imported before this point keeps the Python function, which
    # works alike.
    if getattr(getattr(_torch, "compiler", None), "substitute_in_graph", None) is not None:
        gemm = _fastops.gemm
        _polyfill_with_dynamo()


def _polyfill_with_dynamo():
    """Tells torch's compiler (dynamo) to trace _gemm_py where it meets the C function. The
    registration imports torch._dynamo, which takes seconds (4.5 s measured on an H100 host), so
    it waits until torch imports dynamo itself: at once if it has, else right after dynamo's own
    import, which torch.compile makes before it traces anything. Should it fail, clcrt.ops.gemm
    goes back to the Python function, which dynamo traces as it is."""
    if "torch._dynamo" in sys.modules:
        _register_polyfill()
        return
    sys.meta_path.insert(0, _DynamoFinder())


def _register_polyfill():
    global gemm
    try:
        _torch.compiler.substitute_in_graph(_fastops.gemm)(_gemm_py)
    except Exception:  # this torch's dynamo refuses it (or has it already)
        if not _polyfilled():
            gemm = _gemm_py


def _polyfilled():
    try:
        from torch._dynamo.trace_rules import _polyfilled_function_ids
    except Exception:
        return False
    return id(_fastops.gemm) in _polyfilled_function_ids


class _DynamoFinder:
    """An import hook that finds nothing itself: when torch._dynamo is imported, it lets the
    other finders find it and registers the polyfill once the module has run. It removes itself
    then, so it costs every other import one comparison until dynamo's."""

    def find_spec(self, name, path=None, target=None):
        global gemm
        if name != "torch._dynamo":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        try:
            import importlib.util

            spec = importlib.util.find_spec(name)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                _register_polyfill()

            spec.loader.exec_module = exec_module
        except Exception:  # not a module this hook knows how to follow: the other finders import
            gemm = _gemm_py  # it, and clcrt.ops.gemm is the Python function, which dynamo traces
            return None
        return spec


def _stream(rt, stream):
    if stream is None:
        return rt.current_stream()
    # A clcrt.Stream of this runtime as it is: a stream with an SM budget keeps its own grid size.
    if isinstance(stream, Stream) and stream._rt is rt:
        return stream
    return rt._wrap(stream_handle(stream))


# ---- checks (the slow path: only when the fast one finds something off) ----


def _operand(torch, t, name, ndim, dtype, device=None):
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
    return t


def _pitch(t, name):
    """Elements between rows of a 2-D tensor whose rows are contiguous."""
    rows, cols = t.shape
    s0, s1 = t.stride()
    if cols > 1 and s1 != 1:
        raise InvalidError("%s: its rows are not contiguous (strides %s): pass .contiguous()" % (name, t.stride()))
    return s0 if rows > 1 else cols


def _loadable(t):
    """Whether the kernels load t as it is: K a multiple of 8 elements, the base 16-byte aligned,
    and a 2-D t's rows contiguous with a row pitch of a multiple of 8, a 3-D t (grouped weights,
    whose groups are K x N apart) contiguous."""
    k = t.shape[-1]
    if not k or k & 7 or t.data_ptr() & 15:
        return False
    if t.dim() == 3:
        return t.is_contiguous()
    rows = t.shape[0]
    s0, s1 = t.stride()
    return s1 == 1 and (rows <= 1 or not s0 & 7)


def _copy_k(k):
    """K of an operand's copy (_loadable_copy): padded with zeros to a multiple of 8 (zeros add
    nothing to the sums), and 8 where K = 0 (an empty sum, as F.linear gives it)."""
    return k + (-k & 7) if k else 8


def _loadable_copy(torch, t):
    """A copy of t (... x K) that the kernels load: contiguous, K padded to _copy_k(K), the base
    as the caching allocator aligns it."""
    k = t.shape[-1]
    k8 = _copy_k(k)
    if not k:
        return t.new_zeros(tuple(t.shape[:-1]) + (k8,))
    if k8 != k:
        return torch.nn.functional.pad(t, (0, k8 - k))
    return t.clone(memory_format=torch.contiguous_format)


def _dense_shapes(torch, a, b):
    """(m, k, n) of a and b, or an InvalidError saying what is wrong."""
    _operand(torch, a, "gemm: a", (2,), torch.bfloat16)
    _operand(torch, b, "gemm: b", (2,), torch.bfloat16, a.device)
    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k:
        raise InvalidError("gemm: a is %d x %d and b is %d x %d: b must be N x K (out = a @ b.T)" % (m, k, n, b.shape[1]))
    return m, k, n


def _out(torch, out, name, rows, n, device):
    if out is None:
        return torch.empty((rows, n), dtype=torch.bfloat16, device=device)
    _operand(torch, out, name + ": out", (2,), torch.bfloat16, device)
    if tuple(out.shape) != (rows, n):
        raise InvalidError("%s: out is %s, expected (%d, %d)" % (name, tuple(out.shape), rows, n))
    _pitch(out, name + ": out")
    return out


# ---- dense ----


def _gemm_py(a, b, out=None, *, variant=None, sched=None, stream=None, split=None, measured=False, done=None):
    """The Python path of gemm (below); its eager path in C, _fastops.gemm, leaves it every call
    it does not take, and torch.compile traces it in its place."""
    # The eager path in C (clcrt/_ext/fastops.c): the checks below, the stream and one call,
    # or None where they do not all pass and the Python path below decides.
    if _fast_gemm is not None and variant is None and sched is None and stream is None and split is None and \
            not measured and done is None and not _is_compiling():
        r = _fast_gemm(a, b, out)
        if r is not None:
            if type(r) is int:
                runtime(a.get_device())._check(r)
            return r
    torch = _torch
    if torch is None:
        torch = _torch_mod()
    if _is_compiling():
        if done is not None:
            raise InvalidError("gemm: done= is for eager runs: torch.compile cannot order its counters")
        r = torch.ops.clcrt.gemm(a, b, variant, sched)
        if out is None:
            return r
        out.copy_(r)
        return out
    if _autocast_on(torch):
        a, b = _autocast(torch, a), _autocast(torch, b)
    if _wants_grad(torch, a, b):
        if out is not None:
            raise InvalidError("gemm: out= cannot take part in autograd (a or b requires grad), as with torch's "
                               "out= functions: leave out= out, or run under torch.no_grad()")
        return _GemmFn.apply(a, b, lambda: _gemm_eager(a, b, None, variant=variant, sched=sched, stream=stream,
                                                       split=split, measured=measured, done=done))
    return _gemm_eager(a, b, out, variant=variant, sched=sched, stream=stream, split=split, measured=measured,
                       done=done)


def _autocast_on(torch):
    """Whether torch.autocast is on for CUDA in this thread."""
    try:
        return torch.is_autocast_enabled("cuda")
    except TypeError:  # a torch before 2.4 asks about CUDA without an argument
        return torch.is_autocast_enabled()


def _autocast(torch, t):
    """An operand under torch.autocast: a CUDA tensor of another floating dtype (fp32 master
    weights, fp16 activations) cast to bf16, the op's only dtype, whatever autocast's own dtype,
    as torch.library.register_autocast does for the custom ops; the cast is recorded by autograd
    like F.linear's. fp64 stays as it is (autocast does not cast it) and is refused."""
    if isinstance(t, torch.Tensor) and t.dtype is not _bf16 and t.dtype in (torch.float32, torch.float16) and \
            t.is_cuda:
        return t.to(_bf16)
    return t


def _wants_grad(torch, a, b):
    """Whether autograd must record gemm(a, b): grad mode on and an operand that requires grad
    (the C path asks the same and leaves such calls here)."""
    return torch.is_grad_enabled() and (getattr(a, "requires_grad", False) is True or
                                        getattr(b, "requires_grad", False) is True)


def _gemm_grads(torch, a, b, g, need_a, need_b):
    """The gradients of out = a @ b.T (a ... x K, b N x K) for the output's gradient g (... x N):
    g @ b and g^T @ a, through torch.matmul, as F.linear's backward computes them."""
    ga = torch.matmul(g, b) if need_a else None
    gb = None
    if need_b:
        n, k = b.shape
        gb = torch.matmul(g.reshape(-1, n).t(), a.reshape(-1, k))
    return ga, gb


def _gemm_nd(torch, a, b, out, **kw):
    """gemm of an a of 1 or more than 2 dimensions (... x K), as F.linear takes it: its leading
    dimensions as rows (a view where the strides allow, else a copy), out ... x N."""
    _operand(torch, a, "gemm: a", (a.dim(),), torch.bfloat16)
    _operand(torch, b, "gemm: b", (2,), torch.bfloat16, a.device)
    lead, k, n = tuple(a.shape[:-1]), a.shape[-1], b.shape[0]
    rows = 1
    for d in lead:
        rows *= d
    a2 = a.reshape(rows, k)
    o2 = None
    if out is not None:
        _operand(torch, out, "gemm: out", (a.dim(),), torch.bfloat16, a.device)
        if tuple(out.shape) != lead + (n,):
            raise InvalidError("gemm: out is %s, expected %s" % (tuple(out.shape), lead + (n,)))
        try:
            o2 = out.view(rows, n)
        except RuntimeError:
            if kw.get("done") is not None:
                raise InvalidError("gemm: out (strides %s) cannot be seen as %d rows of %d, and done= counts the "
                                   "rows written there: pass a contiguous out" % (out.stride(), rows, n)) from None
            return out.copy_(_gemm_eager(a2, b, None, **kw).view(lead + (n,)))
    r = _gemm_eager(a2, b, o2, **kw)
    return out if out is not None else r.view(lead + (n,))


def _gemm_eager(a, b, out=None, *, variant=None, sched=None, stream=None, split=None, measured=False, done=None):
    """gemm without autograd: the checks, then one call into C."""
    torch = _torch
    # The fast path: the checks C cannot make (types, dtypes, devices, shapes), and the layout
    # the kernels load, then one call. Anything unusual goes through the slow checks, which raise
    # with a message, or copy an operand the kernels cannot load as it is (_loadable_copy).
    bf16 = _bf16
    try:
        if a.dtype is not bf16 or b.dtype is not bf16:
            raise ValueError
        m, k = a.shape
        n, kb = b.shape
        sa0, sa1 = a.stride()
        sb0, sb1 = b.stride()
        dev = a.get_device()
        if kb != k or dev < 0 or b.get_device() != dev or (sa1 != 1 and k > 1) or (sb1 != 1 and k > 1) or \
                not k or k & 7 or (sa0 & 7 and m > 1) or (sb0 & 7 and n > 1):
            raise ValueError
        pa, pb = a.data_ptr(), b.data_ptr()
        if (pa | pb) & 15:
            raise ValueError
    except (ValueError, AttributeError, TypeError):
        if isinstance(a, torch.Tensor) and a.dim() >= 1 and a.dim() != 2:
            return _gemm_nd(torch, a, b, out, variant=variant, sched=sched, stream=stream, split=split,
                            measured=measured, done=done)
        m, k, n = _dense_shapes(torch, a, b)
        dev = a.get_device()
        if m and n:
            if not _loadable(a):
                a = _loadable_copy(torch, a)
            if not _loadable(b):
                b = _loadable_copy(torch, b)
            k = a.shape[1]
        sa0, sb0 = a.stride(0), b.stride(0)
        pa, pb = a.data_ptr(), b.data_ptr()
    staged = None
    if out is None:
        out = a.new_empty(m, n)  # two ints: torch parses them faster than a tuple
        ldd = n
    else:
        try:
            if out.dtype is not bf16 or out.get_device() != dev:
                raise ValueError
            om, on = out.shape
            ld0, ld1 = out.stride()
            if om != m or on != n or (ld1 != 1 and n > 1):
                raise ValueError
        except (ValueError, AttributeError, TypeError):
            _operand(torch, out, "gemm: out", (2,), torch.bfloat16, a.device)
            if tuple(out.shape) != (m, n):
                raise InvalidError("gemm: out is %s, expected (%d, %d)" % (tuple(out.shape), m, n)) from None
            if done is not None:
                raise InvalidError("gemm: out's rows are not contiguous (strides %s), and done= counts the rows "
                                   "written there: pass a contiguous out" % (out.stride(),)) from None
            # Rows not contiguous: the product goes to a new tensor, then into out.
            staged, out = out, a.new_empty(m, n)
            ld0 = n
        ldd = ld0 if m > 1 else n
    if m == 0 or n == 0:
        return out if staged is None else staged
    rt = _runtimes.get(dev) or runtime(dev)
    if stream is None:
        s = rt._streams.get(_raw_stream(dev)) if _raw_stream else None
        if s is None:
            s = rt.current_stream()
    else:
        s = _stream(rt, stream)
    ops = rt.__dict__.get("_ops_h") or _ops(rt)
    if done is not None:
        _operand(torch, done, "gemm: done", (1,), torch.int32, a.device)
        if not done.is_contiguous() or done.numel() < (m + 63) // 64:
            raise InvalidError("gemm: done must be a contiguous int32 tensor of at least ceil(M / 64) = %d counters, "
                               "not %s" % ((m + 63) // 64, tuple(done.shape)))
        st = _py_gemm(ops, s._h, _DENSE, pa, pb, out.data_ptr(), m, n, k, sa0 if m > 1 else k,
                      sb0 if n > 1 else k, ldd, 0, 0, _variant(variant), _sched(sched), _split(split),
                      MEASURED if measured else 0, done.data_ptr())
        if st:
            rt._check(st)
        return out
    opts = 0
    if variant is not None or sched is not None or split is not None or measured:
        vi = _variant(variant)
        opts = ((vi & 0xFF) + 1 if vi >= 0 else 0) | _sched(sched) << 8 | _split(split) << 12 | \
            (MEASURED if measured else 0) << 16 | (1 << 24 if vi >= 0 and vi & _TRANS else 0)
    st = _py_gemm_dense(ops, s._h, pa, pb, out.data_ptr(), m, n, k, sa0 if m > 1 else k,
                        sb0 if n > 1 else k, ldd, opts)
    if st:
        rt._check(st)
    return out if staged is None else staged.copy_(out)


def _raise_status(a, st):
    """The runtime's message for the op's nonzero status st (from _fastops.gemm)."""
    runtime(a.get_device())._check(st)


# clcrt.ops.gemm: this Python function until torch is seen, then the eager path in C where torch
# can trace through it (_fast_setup). The docstring lives once, with the C function.
gemm = _gemm_py
if _fastops is not None:
    _gemm_py.__doc__ = _fastops.gemm.__doc__
    _fastops.gemm_setup(_gemm_py, _raise_status)


def _py_gemm_dense(*args):
    global _py_gemm_dense
    _py_gemm_dense = _native.lib().clcrt_py_gemm_dense
    return _py_gemm_dense(*args)


def _py_gemm(*args):
    global _py_gemm
    _py_gemm = _native.lib().clcrt_py_gemm
    return _py_gemm(*args)


# ---- grouped and masked ----


def _grouped_run(layout, name, a, b, group_sizes, out, rows_per_group, variant, sched, stream, checked):
    torch = _torch_mod()
    _operand(torch, a, name + ": a", (2,), torch.bfloat16)
    sizes = _operand(torch, group_sizes, name + ": group_sizes", (1,), torch.int32, a.device)
    groups = sizes.shape[0]
    _operand(torch, b, name + ": b", (2, 3), torch.bfloat16, a.device)
    rows, k = a.shape
    if groups == 0:
        raise InvalidError("%s: group_sizes is empty" % name)
    if b.dim() == 3:
        if b.shape[0] != groups:
            raise InvalidError("%s: b has %d groups, group_sizes %d" % (name, b.shape[0], groups))
        n = b.shape[1]
    else:
        if b.shape[0] % groups:
            raise InvalidError("%s: b is %s: (G*N) x K with G = %d groups" % (name, tuple(b.shape), groups))
        n = b.shape[0] // groups
    if b.shape[-1] != k:
        raise InvalidError("%s: a has K = %d, b has K = %d" % (name, k, b.shape[-1]))
    if not sizes.is_contiguous():
        raise InvalidError("%s: group_sizes is not contiguous" % name)
    if layout == _MASKED:
        if rows != groups * rows_per_group:
            raise InvalidError("%s: a has %d rows: %d groups x %d rows_per_group expected"
                               % (name, rows, groups, rows_per_group))
    out = _out(torch, out, name, rows, n, a.device)
    if rows == 0 or n == 0:
        return out
    # Operands the kernels cannot load as they are run on copies, as gemm's do.
    if not _loadable(a):
        a = _loadable_copy(torch, a)
    if not _loadable(b):
        b = _loadable_copy(torch, b)
    k = a.shape[1]
    ldb = k if b.dim() == 3 else _pitch(b, name + ": b")
    rt = runtime(a.get_device())
    s = _stream(rt, stream)
    st = _py_gemm(_ops(rt), s._h, layout, a.data_ptr(), b.data_ptr(), out.data_ptr(),
                  rows_per_group if layout == _MASKED else rows, n, k, _pitch(a, name + ": a"), ldb,
                  _pitch(out, name + ": out"), groups, sizes.data_ptr(), _variant(variant), _sched(sched), 0,
                  CHECKED if checked else 0, 0)
    if st:
        rt._check(st)
    return out


def grouped_gemm(a, b, group_sizes, out=None, *, variant=None, sched=None, stream=None, checked=False):
    """Mixture-of-experts GEMM: for each group g, its ``group_sizes[g]`` consecutive rows of
    ``a`` (T x K, bf16) times ``b[g].T`` (b: G x N x K, or (G*N) x K, bf16) into the same rows
    of ``out`` (T x N, bf16). ``group_sizes``: int32 on the GPU (G entries, read by the kernel,
    so routing needs no host sync). Rows past the sizes' sum are not written.

    Sizes that add up to more than T rows (or a negative size) are never trusted: the kernel
    computes the groups' rows that fit in T and touches nothing past ``a`` and ``out``, and the
    next grouped call on the same stream raises clcrt.InvalidError naming the sizes (without
    running). ``checked=True`` synchronises after this call and raises for its own sizes."""
    if _is_compiling():
        r = _torch.ops.clcrt.grouped_gemm(a, b, group_sizes, variant, sched)
        if out is None:
            return r
        out.copy_(r)
        return out
    return _grouped_call(_GROUPED, "grouped_gemm", a, b, group_sizes, out, 0, variant, sched, stream, checked)


def masked_gemm(a, b, group_sizes, rows_per_group, out=None, *, variant=None, sched=None, stream=None):
    """The masked layout: group g's rows start at row ``g * rows_per_group`` of ``a`` and
    ``out`` (G * rows_per_group rows), ``group_sizes[g]`` of them (above rows_per_group counts
    as rows_per_group). The launch does not depend on the sizes, so one CUDA graph serves
    every routing. Rows past each group's size are not written."""
    if _is_compiling():
        r = _torch.ops.clcrt.masked_gemm(a, b, group_sizes, int(rows_per_group), variant, sched)
        if out is None:
            return r
        out.copy_(r)
        return out
    if not isinstance(rows_per_group, int) or rows_per_group <= 0:
        raise InvalidError("masked_gemm: rows_per_group=%r: a positive int" % (rows_per_group,))
    return _grouped_call(_MASKED, "masked_gemm", a, b, group_sizes, out, rows_per_group, variant, sched, stream, False)


def _grouped_call(layout, name, a, b, group_sizes, out, rows_per_group, variant, sched, stream, checked):
    """An eager grouped or masked run, through autograd's function where autograd records it."""
    torch = _torch_mod()
    if _autocast_on(torch):
        a, b = _autocast(torch, a), _autocast(torch, b)
    if not _wants_grad(torch, a, b):
        return _grouped_run(layout, name, a, b, group_sizes, out, rows_per_group, variant, sched, stream, checked)
    if out is not None:
        raise InvalidError("%s: out= cannot take part in autograd (a or b requires grad), as with torch's out= "
                           "functions: leave out= out, or run under torch.no_grad()" % name)

    def run():
        return _grouped_run(layout, name, a, b, group_sizes, None, rows_per_group, variant, sched, stream, checked)

    return _GroupedFn.apply(a, b, group_sizes, layout, rows_per_group, run)


# ---- autograd ----
# The backward passes run through torch's matmul (cuBLAS), as F.linear's do: the op library has
# no transposed-operand GEMM yet, and the gradients' shapes (K x N products, sums over tokens)
# are what cuBLAS is tuned for.

_GemmFn = None  # torch.autograd.Function classes, made once torch is seen (register_torch_ops)
_GroupedFn = None


def _group_rows(sizes, rows):
    """[(group, first row, end row)] of the grouped layout's rows as the forward run wrote them,
    from the sizes read back (a host sync). Sizes the forward run did not trust are refused here
    too."""
    out, row = [], 0
    for g, s in enumerate(sizes):
        if s < 0:
            raise InvalidError("grouped backward: group_sizes[%d] = %d is negative" % (g, s))
        out.append((g, row, row + s))
        row += s
    if row > rows:
        raise InvalidError("grouped backward: group_sizes add up to %d rows, a has %d" % (row, rows))
    return out


def _aligned16(t):
    """Whether the 2-D or 3-D t's last stride is 1 and its other strides and offset are multiples
    of 16 bytes (what torch._grouped_mm asks; from the strides, so that tracing can ask it)."""
    e = t.element_size()
    return t.stride(-1) == 1 and all(s * e % 16 == 0 for s in t.stride()[:-1]) and t.storage_offset() * e % 16 == 0


def _grouped_grads(torch, layout, a, b, group_sizes, rows_per_group, g, need_a, need_b):
    """The gradients of a grouped or masked GEMM: each group's rows of g times its b[g] (for a)
    and its rows of g^T times its rows of a (for b); rows no group wrote get none. The sizes stay
    on the GPU (no host sync, and torch.compile traces it) for the masked layout (batched
    matmuls, rows past a group's size masked) and, where torch has torch._grouped_mm and the
    operands suit it, for the grouped one; else the sizes are read back (_grouped_grads_loop)."""
    groups = group_sizes.shape[0]
    bg = b.reshape(groups, -1, b.shape[-1])
    g = g.contiguous()
    if layout == _MASKED:
        rows = rows_per_group
        keep = torch.arange(rows, device=g.device) < group_sizes.clamp(0, rows).unsqueeze(1)  # G x R
        gm = torch.where(keep.unsqueeze(2), g.view(groups, rows, -1), 0)
        ga = torch.bmm(gm, bg).reshape(a.shape) if need_a else None
        gb = torch.bmm(gm.transpose(1, 2), a.reshape(groups, rows, -1)).reshape(b.shape) if need_b else None
        return ga, gb
    mm = getattr(torch, "_grouped_mm", None)
    if mm is not None and a.dtype == torch.bfloat16 and all(_aligned16(t) for t in (a, bg, g)):
        # Rows are the groups' in order, ending at the sizes' running sums (negative sizes as 0,
        # past a's rows cut there: the rows the forward run computed); rows after the last get none.
        ends = group_sizes.clamp(min=0).cumsum(0).clamp(max=a.shape[0]).to(torch.int32)
        live = (torch.arange(a.shape[0], device=g.device) < ends[-1]).unsqueeze(1)
        gz = torch.where(live, g, 0)
        ga = torch.where(live, mm(gz, bg, offs=ends), 0) if need_a else None
        gb = None
        if need_b:  # an empty group's product is an empty sum: zeros, whatever the kernel leaves
            rows = torch.diff(ends, prepend=ends.new_zeros(1))
            gb = torch.where((rows > 0).view(groups, 1, 1), mm(gz.t(), a, offs=ends), 0).reshape(b.shape)
        return ga, gb
    return _grouped_grads_loop(torch, a, bg, b.shape, group_sizes, g, need_a, need_b)


def _grouped_grads_loop(torch, a, bg, b_shape, group_sizes, g, need_a, need_b):
    """_grouped_grads of the grouped layout with the sizes read back: one torch.matmul per group."""
    ga = torch.zeros_like(a) if need_a else None
    gb = torch.zeros_like(bg) if need_b else None
    for i, r0, r1 in _group_rows(group_sizes.tolist(), a.shape[0]):
        if r1 <= r0:
            continue
        gi = g[r0:r1]
        if need_a:
            ga[r0:r1] = torch.matmul(gi, bg[i])
        if need_b:
            gb[i] = torch.matmul(gi.t(), a[r0:r1])
    return ga, (gb.reshape(b_shape) if need_b else None)


def _register_autograd(torch, lib):
    global _GemmFn, _GroupedFn

    class GemmFn(torch.autograd.Function):
        """A dense GEMM where autograd records it: run() makes the output (the eager call with its
        options, or the custom op below autograd); the gradients are F.linear's."""

        @staticmethod
        def forward(ctx, a, b, run):
            ctx.save_for_backward(a, b)
            return run()

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            ga, gb = _gemm_grads(torch, a, b, g, ctx.needs_input_grad[0], ctx.needs_input_grad[1])
            return ga, gb, None

    class GroupedFn(torch.autograd.Function):
        """A grouped or masked GEMM where autograd records it (run() as GemmFn's)."""

        @staticmethod
        def forward(ctx, a, b, group_sizes, layout, rows_per_group, run):
            ctx.save_for_backward(a, b, group_sizes)
            ctx.layout, ctx.rows_per_group = layout, rows_per_group
            return run()

        @staticmethod
        def backward(ctx, g):
            a, b, sizes = ctx.saved_tensors
            ga, gb = _grouped_grads(torch, ctx.layout, a, b, sizes, ctx.rows_per_group, g, ctx.needs_input_grad[0],
                                    ctx.needs_input_grad[1])
            return ga, gb, None, None, None, None

    _GemmFn, _GroupedFn = GemmFn, GroupedFn

    # The custom ops' Autograd kernels. torch.library.register_autograd would do, but its
    # kernel adds a second Python kernel to every call through the dispatcher (what a compiled
    # graph without CUDA graphs makes), grad or not: 13.0 -> 34.7 us a call on a busy H200 host
    # (python/bench/overhead.py). These run the CUDA kernel's work themselves where nothing is
    # recorded and the operands are plain CUDA tensors with no dispatch mode active (fake
    # tensors and tracing modes have one): 9.5 -> 12.1-12.9 us on a quieter host. Otherwise they
    # go below autograd: through an autograd.Function where grad is needed, straight on where not.
    below = torch._C._AutoDispatchBelowAutograd
    modes = getattr(torch._C, "_len_torch_dispatch_stack", None) or (lambda: 1)
    grad_on = getattr(torch._C, "is_grad_enabled", None) or torch.is_grad_enabled
    tensor = torch.Tensor

    def gemm_below(a, b, variant, sched):
        with below():
            return torch.ops.clcrt.gemm.default(a, b, variant, sched)

    def grouped_below(a, b, group_sizes, layout, rows_per_group, variant, sched):
        with below():
            if layout == _MASKED:
                return torch.ops.clcrt.masked_gemm.default(a, b, group_sizes, rows_per_group, variant, sched)
            return torch.ops.clcrt.grouped_gemm.default(a, b, group_sizes, variant, sched)

    def gemm_autograd(a, b, variant=None, sched=None):
        if (a.requires_grad or b.requires_grad) and grad_on():
            return GemmFn.apply(a, b, lambda: gemm_below(a, b, variant, sched))
        if type(a) is tensor and type(b) is tensor and a.is_cuda and not modes():
            return _gemm_eager(a, b, None, variant=variant, sched=sched)
        return gemm_below(a, b, variant, sched)

    def grouped_any(a, b, group_sizes, layout, rows_per_group, variant, sched):
        if (a.requires_grad or b.requires_grad) and grad_on():
            return GroupedFn.apply(a, b, group_sizes, layout, rows_per_group,
                                   lambda: grouped_below(a, b, group_sizes, layout, rows_per_group, variant, sched))
        if type(a) is tensor and type(b) is tensor and type(group_sizes) is tensor and a.is_cuda and not modes():
            return _grouped_functional(torch, layout, a, b, group_sizes, rows_per_group, variant, sched)
        return grouped_below(a, b, group_sizes, layout, rows_per_group, variant, sched)

    def grouped_autograd(a, b, group_sizes, variant=None, sched=None):
        return grouped_any(a, b, group_sizes, _GROUPED, 0, variant, sched)

    def masked_autograd(a, b, group_sizes, rows_per_group, variant=None, sched=None):
        return grouped_any(a, b, group_sizes, _MASKED, rows_per_group, variant, sched)

    lib.impl("gemm", gemm_autograd, "Autograd")
    lib.impl("grouped_gemm", grouped_autograd, "Autograd")
    lib.impl("masked_gemm", masked_autograd, "Autograd")
    # Under torch.autocast the custom ops cast their floating operands to bf16 (what the eager
    # path does, _autocast); a kernel on the autocast key, which costs nothing outside autocast.
    register = getattr(torch.library, "register_autocast", None)
    if register is not None:
        for name in ("gemm", "grouped_gemm", "masked_gemm"):
            register("clcrt::" + name, "cuda", torch.bfloat16, lib=lib)


def _grouped_functional(torch, layout, a, b, group_sizes, rows_per_group, variant=None, sched=None):
    """torch.ops.clcrt.grouped_gemm's and masked_gemm's CUDA kernel. A functional op has no
    unwritten rows: those no group writes are zero."""
    n = b.shape[1] if b.dim() == 3 else b.shape[0] // max(group_sizes.shape[0], 1)
    out = torch.zeros((a.shape[0], n), dtype=torch.bfloat16, device=a.device)
    name = "masked_gemm" if layout == _MASKED else "grouped_gemm"
    return _grouped_run(layout, name, a, b, group_sizes, out, rows_per_group, variant, sched, None, False)


# ---- torch custom ops ----


def _is_compiling():
    return False


def register_torch_ops():
    """Registers torch.ops.clcrt.gemm, grouped_gemm and masked_gemm (idempotent)."""
    global _registered, _is_compiling
    if _registered:
        return
    with _lock:
        if _registered:
            return
        import torch

        lib = torch.library.Library("clcrt", "FRAGMENT")
        lib.define("gemm(Tensor a, Tensor b, str? variant=None, str? sched=None) -> Tensor")
        lib.define("grouped_gemm(Tensor a, Tensor b, Tensor group_sizes, str? variant=None, str? sched=None) -> Tensor")
        lib.define("masked_gemm(Tensor a, Tensor b, Tensor group_sizes, int rows_per_group, str? variant=None, "
                   "str? sched=None) -> Tensor")

        def gemm_impl(a, b, variant=None, sched=None):
            return _gemm_eager(a, b, variant=variant, sched=sched)

        def grouped_impl(a, b, group_sizes, variant=None, sched=None):
            return _grouped_functional(torch, _GROUPED, a, b, group_sizes, 0, variant, sched)

        def masked_impl(a, b, group_sizes, rows_per_group, variant=None, sched=None):
            return _grouped_functional(torch, _MASKED, a, b, group_sizes, rows_per_group, variant, sched)

        lib.impl("gemm", gemm_impl, "CUDA")
        lib.impl("grouped_gemm", grouped_impl, "CUDA")
        lib.impl("masked_gemm", masked_impl, "CUDA")

        def gemm_fake(a, b, variant=None, sched=None):
            return a.new_empty(tuple(a.shape[:-1]) + (b.shape[0],))

        def grouped_fake(a, b, group_sizes, variant=None, sched=None):
            n = b.shape[1] if b.dim() == 3 else b.shape[0] // group_sizes.shape[0]
            return a.new_empty((a.shape[0], n))

        def masked_fake(a, b, group_sizes, rows_per_group, variant=None, sched=None):
            return grouped_fake(a, b, group_sizes)

        torch.library.register_fake("clcrt::gemm", gemm_fake, lib=lib)
        torch.library.register_fake("clcrt::grouped_gemm", grouped_fake, lib=lib)
        torch.library.register_fake("clcrt::masked_gemm", masked_fake, lib=lib)
        _register_autograd(torch, lib)
        globals()["_torch_lib"] = lib  # the registrations live as long as the Library object
        compiler = getattr(torch, "compiler", None)
        if compiler is not None and hasattr(compiler, "is_compiling"):
            _is_compiling = compiler.is_compiling
        _registered = True


if "torch" in sys.modules:
    try:
        _torch_mod()
    except Exception:  # a broken torch must not break `import clcrt`
        _torch = None
