"""Runtimes, kernels and streams: the Python face of include/clcrt.h.

Each class holds a C handle and calls the C function of the same name; what Python adds is
argument conversion (tensors, streams, enums, tuples), errors as exceptions, and the choice
of stream when none is given (:meth:`Runtime.current_stream`).
"""

import atexit
import concurrent.futures
import ctypes
import dataclasses
import enum
import logging
import os
import sys
import threading
import weakref

from . import _driver, _native
from . import _types as T
from . import args as _args
from ._errors import CompileError, InvalidError, error_for

_log = logging.getLogger("clcrt")
_LOG_LEVELS = {T.LOG_DEBUG: logging.DEBUG, T.LOG_INFO: logging.INFO, T.LOG_WARN: logging.WARNING}
CU_STREAM_LEGACY = 1


def _int_enum(name, pairs, doc, base=enum.IntEnum):
    """An enum of the header's values (include/clcrt.h, through _types): never a copy."""
    cls = base(name, pairs, module=__name__, qualname=name)
    cls.__doc__ = doc
    return cls


Sched = _int_enum("Sched", T.members("clcrt_sched"), "clcrt_sched: how a kernel gets its next work unit.")
Grid = _int_enum("Grid", T.members("clcrt_grid"), "clcrt_grid: how many clusters a STEAL kernel launches.")
Use = _int_enum("Use", [("NONE", 0)] + T.flags("USE_"),
                "CLCRT_USE_*: what a run may use, for Kernel.prepare and Kernel.variant.", enum.IntFlag)
# CLCRT_SWIZZLE_32B is Swizzle.B32: a Python name cannot start with a digit.
Swizzle = _int_enum("Swizzle", [("B" + n[:-1] if n[:1].isdigit() else n, v) for n, v in T.members("clcrt_swizzle")],
                    "clcrt_swizzle: the TMA swizzle of clcrt_tensor_map_2d.")
# CLCRT_L2_PROMOTION_256B is L2Promotion.B256.
L2Promotion = _int_enum("L2Promotion",
                        [("B" + n[:-1] if n[:1].isdigit() else n, v) for n, v in T.members("clcrt_l2_promotion")],
                        "clcrt_l2_promotion: the L2 promotion of a tensor map's loads (clcrt_tensor_map_2d_l2).")
_TMAP_DTYPES = {"bfloat16": T.DTYPE_BF16, "float16": T.DTYPE_F16, "float32": T.DTYPE_F32, "uint8": T.DTYPE_U8}


def _enum(cls, v, what):
    if isinstance(v, cls):
        return v
    if isinstance(v, str):
        key = v.strip().upper()
        if cls in (Swizzle, L2Promotion) and key[:1].isdigit() and key.endswith("B"):
            key = "B" + key[:-1]
        if key in cls.__members__:
            return cls[key]
    elif isinstance(v, int) and not isinstance(v, bool):
        try:
            return cls(v)
        except ValueError:
            pass
    names = ", ".join(repr(n.lower()) for n in cls.__members__)
    raise InvalidError("%s: %r is not one of %s" % (what, v, names))


def _dim3(v, what, allow_zero=False):
    if isinstance(v, int) and not isinstance(v, bool):
        t = (v, 1, 1)
    elif isinstance(v, (tuple, list)) and 1 <= len(v) <= 3:
        t = tuple(v) + (1,) * (3 - len(v))
    else:
        raise InvalidError("%s: %r is not an int or a tuple of 1 to 3 ints" % (what, v))
    lo = 0 if allow_zero else 1
    for n in t:
        if not isinstance(n, int) or isinstance(n, bool) or not lo <= n < 1 << 32:
            raise InvalidError("%s: %r: each extent must be an int from %d to 2^32-1" % (what, v, lo))
    return t


def _tiles(v):
    """A tile grid as the three values the hot call passes: ints below 2^31 go as C ints,
    larger ones (still unsigned) as c_uint."""
    return tuple(n if n < 2147483648 else ctypes.c_uint(n) for n in _dim3(v, "tiles", allow_zero=True))


_run_fn = None


def _run_raw():
    """clcrt_py_run without argtypes: every argument is already a ctypes object or a small
    int, which ctypes passes without the per-argument conversion argtypes cost (about 0.1 us
    each on the build machine). The GIL is released during the call, as for every C call."""
    global _run_fn
    if _run_fn is None:
        f = _native.lib()["clcrt_py_run"]
        f.restype = ctypes.c_int
        _run_fn = f
    return _run_fn


def _bytes(s, what):
    if s is None:
        return None
    if isinstance(s, bytes):
        b = s
    elif isinstance(s, str):
        b = s.encode()
    elif isinstance(s, os.PathLike):
        b = os.fsencode(s)
    else:
        raise InvalidError("%s: %r is not a string" % (what, s))
    # C reads a string up to its first NUL: whatever follows would be dropped without a word.
    if b"\0" in b:
        at = s.index("\0") if isinstance(s, str) else b.index(b"\0")
        raise InvalidError("%s contains a NUL character (at index %d): C would read the string only up to it" % (what, at))
    return b


def _text(p):
    return p.decode("utf-8", "replace") if p else ""


_pool_lock = threading.Lock()
_pool = None


def _executor():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=os.cpu_count() or 2, thread_name_prefix="clcrt"
            )
    return _pool


@dataclasses.dataclass(frozen=True)
class KernelInfo:
    """clcrt_kernel_info. from_cache: how the registration that made the Kernel found it: 0
    compiled, 1 memory cache, 2 disk cache."""

    name: str
    arch: str
    sched: Sched
    grid: Grid
    block: tuple
    cluster: tuple
    registers: int
    stack_bytes: int
    static_smem: int
    dynamic_smem: int
    param_bytes: int
    has_clc: bool
    compile_ms: float
    from_cache: int


@dataclasses.dataclass(frozen=True)
class CacheStats:
    """clcrt_cache_stats: the compile cache counters of a runtime."""

    mem_hits: int
    disk_hits: int
    misses: int
    uncached: int
    compile_ms: float
    load_ms: float


@dataclasses.dataclass(frozen=True)
class StreamStats:
    """clcrt_stream_stats: the runs on a stream since statistics were enabled or read."""

    runs: int
    tiles: int
    steals: int
    clusters: int
    max_units_per_cluster: int
    tiles_per_sm: tuple


class Runtime:
    """A clcrt runtime: one GPU (``device``), or compile-only for an architecture (``arch``).

    ``cache_dir``: the disk cache (None: $CLCRT_CACHE_DIR, else ~/.cache/clcrt; "": none).
    ``cuda_home``: the toolkit whose headers NVRTC may include (None: $CUDA_HOME, else
    /usr/local/cuda; not needed by tile functions that include no toolkit header).
    ``log``: a callable ``log(level, message)`` (level: logging.DEBUG, INFO or WARNING) for
    the runtime's warnings; by default they go to the ``logging`` logger "clcrt"; False
    drops them. Use it as a context manager, or call close(); kernels and streams made from
    it are unusable after close."""

    def __init__(self, device=0, *, arch=None, cache_dir=None, cuda_home=None, log=None):
        lib = _native.lib()
        self._lib = lib
        self._h = None
        if not isinstance(device, int) or isinstance(device, bool) or device < 0:
            raise InvalidError("Runtime: device %r is not a device ordinal" % (device,))
        opts = T.sized(T.RuntimeOpts)
        opts.device = device
        opts.target_arch = _bytes(arch, "arch")
        opts.cache_dir = _bytes(cache_dir, "cache_dir")
        opts.cuda_home = _bytes(cuda_home, "cuda_home")
        self._user_log = log
        self._log_cb = T.LOG_FN(self._on_log) if log is not False else T.LOG_FN()
        opts.log = self._log_cb
        h = ctypes.c_void_p()
        st = lib.clcrt_runtime_create(ctypes.byref(h), ctypes.byref(opts))
        if st:
            msg = _text(lib.clcrt_errmsg(h))
            lib.clcrt_runtime_destroy(h)
            raise error_for(st, msg)
        self._h = h.value
        self.device = device
        self.arch = _text(lib.clcrt_runtime_arch(self._h))
        self.compile_only = bool(lib.clcrt_runtime_compile_only(self._h))
        self._streams = {}
        self._owned = []
        self._default = None
        self._lock = threading.Lock()
        self._torch_stream = None
        self._closers = []  # run first by close(): what lives on the runtime (the op library's state)
        self._stream_closers = []  # run with a stream's handle before it is destroyed
        _live.add(self)

    # ---- basics ----

    def _on_log(self, user, level, msg):
        if sys.is_finalizing():  # nothing of Python may run now; _close_all makes this rare
            return
        text, lvl = _text(msg), _LOG_LEVELS.get(level, logging.WARNING)
        try:
            if callable(self._user_log):
                self._user_log(lvl, text)
            else:
                _log.log(lvl, "%s", text)
        except Exception:  # an exception must not cross into C
            pass

    def _check(self, st):
        if st:
            raise error_for(st, _text(self._lib.clcrt_errmsg(self._h)))

    def _live(self):
        if self._h is None:
            raise InvalidError("the runtime was closed")
        return self._h

    def __repr__(self):
        where = "compile-only" if self.compile_only else "device %d" % self.device
        return "<clcrt.Runtime %s, %s%s>" % (self.arch, where, ", closed" if self._h is None else "")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None) is not None and not sys.is_finalizing():
            try:
                self.close()
            except Exception:
                pass

    def close(self):
        """Destroys the runtime: the op library's state (waiting for its streams), its streams
        (waiting for their work), then its kernels."""
        if self._h is None:
            return
        closers, self._closers, self._stream_closers = self._closers, [], []
        for f in closers:
            f()
        for s in list(self._streams.values()) + self._owned + ([self._default] if self._default else []):
            s._destroy()
        self._streams.clear()
        self._owned.clear()
        self._default = None
        self._lib.clcrt_runtime_destroy(self._h)
        self._h = None
        _forget_default(self)

    @property
    def cache_dir(self):
        """The disk cache directory this runtime uses (absolute), or None when it uses none."""
        p = self._lib.clcrt_runtime_cache_dir(self._live())
        return os.fsdecode(p) if p else None

    def cache_stats(self):
        """The compile cache's counters (clcrt_cache_stats_get)."""
        s = T.sized(T.CacheStats)
        self._check(self._lib.clcrt_cache_stats_get(self._live(), ctypes.byref(s)))
        return CacheStats(s.mem_hits, s.disk_hits, s.misses, s.uncached, s.compile_ms, s.load_ms)

    # ---- registration ----

    def _desc(self, source, tile_fn, args, args_type, block, cluster, smem_bytes, sched, grid, options, state_type,
              prologue_fn, include_digest, min_blocks_per_sm, check_args):
        if not isinstance(source, str) or not source.strip():
            raise InvalidError("register: source must be the tile function's CUDA C++ text")
        if not isinstance(tile_fn, str) or not tile_fn.isidentifier():
            raise InvalidError("register: tile_fn %r is not a function name" % (tile_fn,))
        args_cls = None
        if isinstance(args, type) and issubclass(args, _args.Args):
            if "_clcrt_size_" not in args.__dict__:
                raise InvalidError("register: args must be a subclass of clcrt.Args with fields, not clcrt.Args itself")
            args_cls = args
            args_type = args_type or args.c_name
        elif isinstance(args, str):
            args_type = args_type or args
        elif args is not None:
            raise InvalidError("register: args must be a clcrt.Args subclass or the Args type's name, not %r" % (args,))
        if not args_type:
            raise InvalidError("register: name the Args type: args=<clcrt.Args subclass> or args_type=\"Name\"")
        if args_cls is not None and check_args:
            if not _args.mentions(source, args_type):
                raise InvalidError(
                    'Args type "%s" does not appear in the source: name the device struct in class %s with '
                    'c_name = "<its C++ name>" (or pass args_type=)' % (args_type, args.__name__)
                )
            source = source + _args.check_source(args_cls, args_type)
        if isinstance(options, str):
            options = [options]
        opts = [_bytes(o, "options") for o in (options or ())]
        d = T.sized(T.TileDesc)
        keep = [_bytes(source, "source"), tile_fn.encode(), _bytes(args_type, "args")]
        d.source, d.tile_fn, d.args_type = keep
        d.block = T.Dim3(*_dim3(block, "block"))
        d.cluster = T.Dim3(*_dim3(cluster, "cluster")) if cluster is not None else T.Dim3(0, 0, 0)
        if not isinstance(smem_bytes, int) or not 0 <= smem_bytes < 1 << 32:
            raise InvalidError("register: smem_bytes %r is not a byte count" % (smem_bytes,))
        d.smem_bytes = smem_bytes
        d.sched = _enum(Sched, sched, "sched")
        d.grid = _enum(Grid, grid, "grid")
        arr = (ctypes.c_char_p * max(1, len(opts)))(*opts)
        keep.append(arr)
        d.options, d.num_options = (arr, len(opts)) if opts else (None, 0)
        d.state_type = _bytes(state_type, "state_type")
        d.prologue_fn = _bytes(prologue_fn, "prologue_fn")
        d.include_digest = _bytes(include_digest, "include_digest")
        if not isinstance(min_blocks_per_sm, int) or min_blocks_per_sm < 0:
            raise InvalidError("register: min_blocks_per_sm %r is not a count" % (min_blocks_per_sm,))
        d.min_blocks_per_sm = min_blocks_per_sm
        keep += [d.state_type, d.prologue_fn, d.include_digest]
        return d, keep, args_cls, args_type

    def register(self, source, tile_fn, args=None, *, args_type=None, block=128, cluster=None, smem_bytes=0,
                 sched=Sched.AUTO, grid=Grid.AUTO, options=(), state_type=None, prologue_fn=None,
                 include_digest=None, min_blocks_per_sm=0, check_args=True):
        """Compiles a tile function (or finds it in the memory or disk cache); clcrt_register.

        ``args`` is the Python declaration of the kernel's Args (a clcrt.Args subclass), whose
        layout NVRTC then checks against the device struct (``check_args``); or the Args
        type's C++ name, when runs will pass raw bytes. The other keywords are the fields of
        clcrt_tile_desc: ``block`` and ``cluster`` as ints or tuples, ``sched`` and ``grid`` as
        enums or names ("steal"), ``options`` extra NVRTC options."""
        self._live()
        d, keep, args_cls, args_type = self._desc(source, tile_fn, args, args_type, block, cluster, smem_bytes, sched,
                                                  grid, options, state_type, prologue_fn, include_digest,
                                                  min_blocks_per_sm, check_args)
        k = ctypes.c_void_p()
        st = self._lib.clcrt_register(self._h, ctypes.byref(d), ctypes.byref(k))
        del keep
        if st:
            msg = _text(self._lib.clcrt_errmsg(self._h))
            if st == CompileError.status and args_cls is not None and check_args:
                e = _args.mismatch_error(args_cls, args_type, msg)
                if e is not None:
                    raise e
            raise error_for(st, msg)
        kern = Kernel(self, k.value, args_cls, args_type)
        # Read now: a later registration that finds the same C kernel sets its from_cache too.
        kern.info
        return kern

    def register_async(self, *a, **kw):
        """register() on a thread pool: returns a concurrent.futures.Future of the Kernel.

        C's clcrt_register_async delivers completions to a libuv loop, which Python programs
        do not have; this is its counterpart (``asyncio.wrap_future`` makes it awaitable).
        Compiles run in parallel, as many at once as the machine has cores."""
        self._live()
        return _executor().submit(self.register, *a, **kw)

    # ---- streams ----

    def stream(self, stream=None, *, priority=None, sm_budget=None, round=None, rest_of=None, grid_sms=None):
        """A clcrt stream.

        ``stream`` None: a new stream of clcrt's own (non-blocking), or with ``priority`` (CUDA's
        numbering, as torch.cuda.Stream: 0 is the lowest, negative more urgent) a new CUstream
        of that priority that the Stream owns. Otherwise the wrapper of an existing stream: a
        torch.cuda.Stream, any object with ``__cuda_stream__``, or a raw CUstream handle (0 is the
        legacy default stream); one wrapper per handle is made and kept.

        Sharing the GPU (clcrt_stream_create_ex, docs/sharing.md):

        * ``sm_budget=N``: a new stream on a partition of N SMs (a CUDA green context clcrt
          makes), whose persistent grids are sized for N SMs; other work keeps the rest.
        * ``rest_of=``: a new stream on the SMs a budget leaves, disjoint from it: a Stream made
          with ``sm_budget`` (its partition as it is), or N (the rest of a budget of N).
        * ``round``: "up" accepts the smallest partition of at least N SMs, "down" the largest
          of at most N; None (the default) refuses a budget the driver would round.
        * ``grid_sms=N``: persistent grids sized for N SMs, whatever the stream runs on: with
          ``stream`` given, a new wrapper of that stream (not the kept one: pass it to runs),
          else a new stream of clcrt's own.

        With any of these, ``priority`` (CUDA's numbering, as above) is that of the stream clcrt
        makes. ``Stream.sms`` and ``Stream.grid_sms`` say what a stream got."""
        self._live()
        if sm_budget is not None or rest_of is not None or round is not None or grid_sms is not None:
            return self._stream_ex(stream, priority, sm_budget, round, rest_of, grid_sms)
        if self.compile_only:
            self._check(self._lib.clcrt_stream_create(self._h, None, ctypes.byref(ctypes.c_void_p())))
        if stream is not None:
            if priority is not None:
                raise InvalidError("stream: a priority is the CUstream's: give one or the other")
            return self._wrap(stream_handle(stream))
        cu = None
        if priority is not None:
            if not isinstance(priority, int):
                raise InvalidError("stream: priority %r is not an int" % (priority,))
            cu = _driver.stream_create(self.device, priority)
        h = ctypes.c_void_p()
        st = self._lib.clcrt_stream_create(self._h, cu, ctypes.byref(h))
        if st:
            msg = _text(self._lib.clcrt_errmsg(self._h))
            if cu:
                _driver.stream_destroy(self.device, cu)
            raise error_for(st, msg)
        s = Stream(self, h.value, owned_cu=cu)
        self._owned.append(s)
        return s

    def _stream_ex(self, stream, priority, sm_budget, round, rest_of, grid_sms):
        """rt.stream with a budget, a rest or grid_sms: every argument is checked here first, so
        that a mistake is told the same way with or without a GPU."""
        budget, flags, side = _budget_opts(self, sm_budget, round, rest_of)
        grid = 0 if grid_sms is None else _sm_count(grid_sms, "grid_sms")
        if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
            raise InvalidError("stream: priority %r is not an int" % (priority,))
        cu = None
        if stream is not None:
            if budget or priority is not None:
                raise InvalidError(
                    "stream: a stream of your own takes no sm_budget, rest_of or priority (its context and priority "
                    "are its own): leave stream=None and let clcrt make the stream, or make it on a green context "
                    "of yours"
                )
            cu = stream_handle(stream) or CU_STREAM_LEGACY
        opts = T.sized(T.StreamOpts)
        opts.cu, opts.sm_budget, opts.flags, opts.grid_sms = cu, budget, flags, grid
        h = ctypes.c_void_p()
        if self.compile_only:  # the library's own refusal, with its message
            self._check(self._lib.clcrt_stream_create_ex(self._h, ctypes.byref(opts), ctypes.byref(h)))
        if priority is not None:
            # clcrt_stream_opts.priority is clcrt's level (0 the least urgent); Python speaks
            # CUDA's numbers, as torch does.
            least, _ = _driver.priority_range(self.device)
            opts.priority = max(0, least - priority)
        if cu is not None and _driver.is_capturing(cu):
            with _driver.relaxed_capture():
                st = self._lib.clcrt_stream_create_ex(self._h, ctypes.byref(opts), ctypes.byref(h))
        else:
            st = self._lib.clcrt_stream_create_ex(self._h, ctypes.byref(opts), ctypes.byref(h))
        self._check(st)
        s = Stream(self, h.value, side=side)
        self._owned.append(s)
        return s

    def _wrap(self, handle):
        s = self._streams.get(handle)
        if s is not None:
            return s
        with self._lock:
            s = self._streams.get(handle)
            if s is None:
                self._live()
                cu = handle or CU_STREAM_LEGACY
                h = ctypes.c_void_p()
                if _driver.is_capturing(cu):
                    with _driver.relaxed_capture():
                        st = self._lib.clcrt_stream_create(self._h, cu, ctypes.byref(h))
                else:
                    st = self._lib.clcrt_stream_create(self._h, cu, ctypes.byref(h))
                self._check(st)
                s = Stream(self, h.value, cached=handle)
                self._streams[handle] = s
        return s

    def forget_stream(self, stream):
        """Drops the kept wrapper of a stream (before destroying that CUstream yourself)."""
        s = self._streams.pop(stream_handle(stream), None)
        if s is not None:
            s._destroy()

    @property
    def default_stream(self):
        """The runtime's own stream, where runs go when neither torch nor CuPy is imported."""
        if self._default is None:
            with self._lock:
                if self._default is None:
                    self._live()
                    h = ctypes.c_void_p()
                    self._check(self._lib.clcrt_stream_create(self._h, None, ctypes.byref(h)))
                    self._default = Stream(self, h.value)
        return self._default

    def current_stream(self):
        """Where a run with no stream goes: PyTorch's current stream of this device when torch
        is imported, else CuPy's current stream when CuPy is, else default_stream. Never the
        legacy default stream unless that is the current stream of torch or CuPy."""
        torch = sys.modules.get("torch")
        if torch is not None:
            f = self._torch_stream
            if f is None:
                f = self._torch_stream = _torch_stream_fn(torch, self.device)
            if f is not False:
                return self._wrap(f())
        cupy = sys.modules.get("cupy")
        if cupy is not None and self._cupy_device_ok(cupy):
            return self._wrap(cupy.cuda.get_current_stream().ptr)
        return self.default_stream

    def _cupy_device_ok(self, cupy):
        try:
            return cupy.cuda.runtime.getDevice() == self.device
        except Exception:
            return False

    # ---- helpers ----

    def tensor_map_2d(self, tensor, box_rows, box_cols, *, dtype=None, rows=None, cols=None, row_stride_bytes=None,
                      swizzle=Swizzle.B128, l2_promotion=L2Promotion.B256):
        """A 2-D TMA descriptor (clcrt_tensor_map_2d) for an Args field of type clcrt.TensorMap.

        ``tensor``: a 2-D GPU tensor (its dtype, rows, columns and row stride are used unless
        given), or a device address with dtype, rows, cols and row_stride_bytes given. The
        TensorMap keeps the tensor alive while Args hold it. ``l2_promotion``: "256b" (the default),
        "none", "64b" or "128b" (clcrt_tensor_map_2d_l2)."""
        self._live()
        if isinstance(tensor, int):
            base, dev, shape, ref = tensor, None, None, None
            if dtype is None or rows is None or cols is None:
                raise InvalidError("tensor_map_2d: with an address, give dtype, rows and cols")
        else:
            info = _tensors_describe(tensor, "tensor_map_2d")
            base, dev, shape, ref = info.ptr, info.device, info.shape, tensor
            dtype = dtype or info.dtype
            if shape is not None and len(shape) != 2 and (rows is None or cols is None):
                raise InvalidError("tensor_map_2d: the tensor has shape %s: a 2-D one is needed" % (shape,))
            rows = rows if rows is not None else shape[0]
            cols = cols if cols is not None else shape[1]
        for name, v in (("rows", rows), ("cols", cols), ("row_stride_bytes", row_stride_bytes), ("box_rows", box_rows),
                        ("box_cols", box_cols), ("address", base)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 64):
                raise InvalidError("tensor_map_2d: %s %r is not a non-negative int" % (name, v))
        dname = _tensors_dtype(dtype)
        if dname not in _TMAP_DTYPES:
            raise InvalidError("tensor_map_2d: dtype %s: TMA maps here take %s" % (dname, ", ".join(_TMAP_DTYPES)))
        if dev is not None and dev != self.device:
            raise InvalidError("tensor_map_2d: the tensor is on cuda:%d, the runtime on device %d" % (dev, self.device))
        if row_stride_bytes is None:
            row_stride_bytes = cols * {"bfloat16": 2, "float16": 2, "float32": 4, "uint8": 1}[dname]
        # clcrt_tensor_map is 64-byte aligned in C, and the library may store it with aligned
        # instructions: encode into an aligned buffer, then copy.
        size, align = ctypes.sizeof(T.TensorMap), T.TensorMap._clcrt_align_
        buf = (ctypes.c_uint8 * (size + align))()
        at = (ctypes.addressof(buf) + align - 1) & ~(align - 1)
        st = self._lib.clcrt_tensor_map_2d_l2(self._h, at, _TMAP_DTYPES[dname], base, rows, cols, row_stride_bytes,
                                              box_rows, box_cols, _enum(Swizzle, swizzle, "swizzle"),
                                              _enum(L2Promotion, l2_promotion, "l2_promotion"))
        self._check(st)
        m = _args.TensorMap.from_buffer_copy(bytes(buf[at - ctypes.addressof(buf):][:size]))
        m._clcrt_src = (ref, dev)
        return m


def _tensors_describe(t, what):
    from . import tensors

    return tensors.describe(t, what)


def _tensors_dtype(d):
    from . import tensors

    return tensors.dtype_name(d)


def _torch_stream_fn(torch, device):
    """A function returning torch's current CUstream handle for the device, or False when
    torch has no CUDA. torch._C._cuda_getCurrentRawStream (what torch's own compiled code
    calls) costs far less than torch.cuda.current_stream(), which builds a Stream object."""
    try:
        if not torch.cuda.is_available():
            return False
        public = torch.cuda.current_stream(device).cuda_stream  # also initialises torch's CUDA state
    except Exception:
        return False
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        try:
            if raw(device) == public:
                return lambda: raw(device)
        except Exception:
            pass
    return lambda: torch.cuda.current_stream(device).cuda_stream


_ROUND = {"exact": 0, "up": T.STREAM_SM_ROUND_UP, "down": T.STREAM_SM_ROUND_DOWN}


def _sm_count(v, what):
    if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v < 1 << 32:
        raise InvalidError("stream: %s %r is not a positive number of SMs" % (what, v))
    return v


def _budget_opts(rt, sm_budget, round, rest_of):
    """clcrt_stream_opts' (sm_budget, flags) and the side of the split, from rt.stream's
    keywords: (0, 0, None) without a budget."""
    if sm_budget is not None and rest_of is not None:
        raise InvalidError("stream: give sm_budget (this stream's SMs) or rest_of (the SMs a budget leaves), not both")
    key = "exact" if round is None else round.strip().lower() if isinstance(round, str) else None
    if key not in _ROUND:
        raise InvalidError("stream: round %r is not one of None, 'up', 'down'" % (round,))
    flags = _ROUND[key]
    if sm_budget is not None:
        return _sm_count(sm_budget, "sm_budget"), flags, "budget"
    if rest_of is None:
        if flags:
            raise InvalidError("stream: round rounds an SM budget: give sm_budget or rest_of too")
        return 0, 0, None
    if isinstance(rest_of, Stream):
        if rest_of._rt is not rt:
            raise InvalidError("stream: rest_of: that stream belongs to another runtime")
        if rest_of._side != "budget":
            raise InvalidError(
                "stream: rest_of: %r has no SM budget of its own: pass a stream made with sm_budget=N, or N" % (rest_of,)
            )
        if flags:
            raise InvalidError("stream: round: rest_of a stream takes the rest of its partition as it is")
        # The same count finds the same split of the device (clcrt shares it), so this is the
        # other side of exactly that stream's partition.
        n = rest_of.sms
    else:
        n = _sm_count(rest_of, "rest_of")
    return n, flags | T.STREAM_SM_REST, "rest"


def stream_handle(stream):
    """The CUstream handle (int) of a torch stream, an object with __cuda_stream__, a CuPy
    stream, a clcrt.Stream or an int."""
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise InvalidError("stream handle %d is negative" % stream)
        return stream
    if isinstance(stream, Stream):
        return stream.handle
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        v = proto() if callable(proto) else proto
        if isinstance(v, tuple) and len(v) == 2:
            return int(v[1])
        raise InvalidError("%s.__cuda_stream__ gave %r, not (version, handle)" % (type(stream).__name__, v))
    for attr in ("cuda_stream", "ptr", "handle"):
        h = getattr(stream, attr, None)
        if isinstance(h, int):
            return h
    raise InvalidError(
        "%r is not a stream: pass a torch.cuda.Stream, an object with __cuda_stream__, a clcrt.Stream or a CUstream "
        "handle (int)" % (stream,)
    )


class Kernel:
    """A registered tile function (clcrt_kernel). Made by Runtime.register."""

    def __init__(self, rt, h, args_cls, args_type, base=None):
        self._rt = rt
        self._h = h
        self.args = args_cls
        self.args_type = args_type
        self._args_size = ctypes.sizeof(args_cls) if args_cls is not None else None
        self._base = base
        self._info = None
        self._hp = ctypes.c_void_p(h)
        self._csize = ctypes.c_size_t(self._args_size or 0)
        self._run = _run_raw()

    def __repr__(self):
        return "<clcrt.Kernel %s>" % (self.info.name if self._rt._h else "(runtime closed)")

    def _live(self):
        self._rt._live()
        return self._h

    @property
    def runtime(self):
        return self._rt

    @property
    def info(self):
        """KernelInfo: entry name, registers, shared memory, parameter bytes, ..."""
        self._live()
        if self._info is None:
            i = T.sized(T.KernelInfo)
            self._rt._check(self._rt._lib.clcrt_kernel_info_get(self._live(), ctypes.byref(i)))
            self._info = KernelInfo(
                _text(i.name), _text(i.arch), Sched(i.sched), Grid(i.grid), (i.block.x, i.block.y, i.block.z),
                (i.cluster.x, i.cluster.y, i.cluster.z), i.registers, i.stack_bytes, i.static_smem, i.dynamic_smem,
                i.param_bytes, bool(i.has_clc), i.compile_ms, i.from_cache,
            )
        return self._info

    @property
    def cubin(self):
        """The cubin (bytes)."""
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        self._rt._check(self._rt._lib.clcrt_kernel_cubin(self._live(), ctypes.byref(data), ctypes.byref(size)))
        return ctypes.string_at(data, size.value)

    @property
    def ptx(self):
        """The PTX (str). A kernel loaded from the disk cache has none: NotFoundError."""
        p = ctypes.c_char_p()
        self._rt._check(self._rt._lib.clcrt_kernel_ptx(self._live(), ctypes.byref(p)))
        return _text(p.value)

    def prepare(self, uses=Use.GRAPH):
        """Builds now the variants runs with any combination of ``uses`` launch
        (clcrt_kernel_prepare), so that no compile happens in a timed or captured run. The
        default builds what graph capture needs."""
        self._rt._check(self._rt._lib.clcrt_kernel_prepare(self._live(), int(uses)))

    def variant(self, uses):
        """The variant a run with ``uses`` launches, as a Kernel (for its info, cubin, PTX)."""
        out = ctypes.c_void_p()
        self._rt._check(self._rt._lib.clcrt_kernel_variant(self._live(), int(uses), ctypes.byref(out)))
        return Kernel(self._rt, out.value, self.args, self.args_type, base=self)

    @property
    def observed(self):
        """The variant traced runs (and runs with statistics on) launch."""
        return self.variant(Use.TRACE)

    def inspect(self, sass=False):
        """The tool's ``clcrt inspect --json`` of this kernel's cubin, as a dict."""
        from . import tool

        return tool.inspect(self.cubin, sass=sass)

    # ---- runs ----

    def _args_ptr(self, args):
        if args is None:
            return None, ctypes.c_size_t(0)
        cls = type(args)
        if isinstance(args, _args.Args):
            if self.args is not None and cls is not self.args:
                raise InvalidError(
                    "run: the kernel was registered with Args %s, not %s" % (self.args.__name__, cls.__name__)
                )
            dev = args._clcrt_device
            if dev is not None and dev != self._rt.device:
                raise InvalidError(
                    "run: %s holds tensors on cuda:%d, but the runtime runs on device %d" % (cls.__name__, dev, self._rt.device)
                )
            return args._clcrt_ptr, ctypes.c_size_t(ctypes.sizeof(cls))
        if self.args is not None:
            raise InvalidError(
                "run: the kernel was registered with Args %s: pass an instance of it, not %s"
                % (self.args.__name__, cls.__name__)
            )
        if isinstance(args, (ctypes.Structure, ctypes.Array, ctypes.Union)):
            return ctypes.c_void_p(ctypes.addressof(args)), ctypes.c_size_t(ctypes.sizeof(args))
        if isinstance(args, (bytes, bytearray, memoryview)):
            mv = memoryview(args).cast("B")
            buf = (ctypes.c_char * len(mv)).from_buffer_copy(mv) if len(mv) else None
            return buf, ctypes.c_size_t(len(mv))
        raise InvalidError("run: args must be clcrt.Args, bytes or a ctypes object, not %s" % cls.__name__)

    def run(self, tiles, args=None, stream=None, pdl=False):
        """Enqueues one run over ``tiles`` (an int or a tuple of up to 3) with ``args`` on
        ``stream`` (default: Runtime.current_stream(), i.e. torch's current stream when torch is
        imported). Asynchronous, like a kernel launch. ``pdl=True``: with programmatic dependent
        launch (C's clcrt_run_ex with CLCRT_RUN_PDL): the run's grid launches while the kernel
        before it on the stream finishes, which saves about a microsecond back to back; worth it
        on short runs only (include/clcrt.h says what was measured)."""
        rt = self._rt
        if rt._h is None or self._base is not None:
            self._not_runnable()
        if args is not None and type(args) is self.args:
            dev = args._clcrt_device
            if dev is not None and dev != rt.device:
                self._args_ptr(args)  # raises with the message
            addr, size = args._clcrt_ptr, self._csize
        else:
            addr, size = self._args_ptr(args)
        if type(tiles) is int and 0 <= tiles < 2147483648:
            x, y, z = tiles, 1, 1
        else:
            x, y, z = _tiles(tiles)
        if stream is None:
            s = rt.current_stream()
        elif type(stream) is Stream:
            s = stream
            if s._rt is not rt:
                raise InvalidError("run: the stream belongs to another runtime")
        else:
            s = rt._wrap(stream_handle(stream))
        if pdl:
            st = rt._lib.clcrt_run_ex(s._hp, self._hp, T.Dim3(x, y, z), addr, size, T.RUN_PDL)
        else:
            st = self._run(s._hp, self._hp, x, y, z, addr, size)
        if st:
            s._fail(st)

    def _not_runnable(self):
        self._rt._live()
        raise InvalidError("run the kernel itself, not its variant: each run picks the variant it needs")

    def launcher(self, tiles, args=None, stream=None):
        """A callable that runs the kernel with these tiles and Args (prepacked): the least
        host work per run. The Args instance is used as it is at each call; with ``stream``
        None each call goes to the stream current at that call."""
        if self._base is not None:
            self._not_runnable()
        x, y, z = _tiles(tiles)
        addr, size = self._args_ptr(args)
        s = None if stream is None else (stream if isinstance(stream, Stream) else self._rt._wrap(stream_handle(stream)))
        return Launcher(self, s, x, y, z, addr, size, args)


class Launcher:
    """Made by Kernel.launcher; call it to run."""

    __slots__ = ("_k", "_rt", "_s", "_x", "_y", "_z", "_addr", "_size", "_args", "_run", "_kh")

    def __init__(self, k, s, x, y, z, addr, size, args):
        self._k, self._rt, self._s = k, k._rt, s
        self._x, self._y, self._z, self._addr, self._size, self._args = x, y, z, addr, size, args
        self._run, self._kh = _run_raw(), k._hp

    def __call__(self):
        s = self._s
        if s is None:
            s = self._rt.current_stream()
        if self._rt._h is None:
            self._rt._live()
        st = self._run(s._hp, self._kh, self._x, self._y, self._z, self._addr, self._size)
        if st:
            s._fail(st)


class Stream:
    """A clcrt stream: a CUstream and its scheduler state. Made by Runtime.stream or found
    by Runtime.current_stream. ``__cuda_stream__`` lets other libraries use it
    (``torch.cuda.ExternalStream(s.handle)``)."""

    def __init__(self, rt, h, owned_cu=None, cached=None, side=None):
        self._rt = rt
        self._h = h
        self._hp = ctypes.c_void_p(h)
        self._owned_cu = owned_cu
        self._cached = cached
        self._side = side  # "budget" or "rest": a partition clcrt made (Runtime.stream)

    def __repr__(self):
        if self._h is None:
            return "<clcrt.Stream (destroyed)>"
        where = ", %s of %d SMs" % (self._side, self.sms) if self._side else ""
        return "<clcrt.Stream 0x%x, priority level %d%s>" % (self.handle, self.level, where)

    def _live(self):
        if self._h is None:
            self._rt._live()
            raise InvalidError("the stream was closed")
        return self._h

    def _fail(self, st):
        if self._h is None:
            self._live()
        raise error_for(st, _text(self._rt._lib.clcrt_errmsg(self._rt._h)))

    def _check(self, st):
        if st:
            self._fail(st)

    def _destroy(self):
        if self._h is None:
            return
        if self._owned_cu or self._cached is None:
            # The CUstream dies with this stream (clcrt's or ours): first every wrapper of it that
            # other runtimes (or this one) made, and their GEMM workspaces, which would otherwise
            # wait on a destroyed stream when they are closed.
            cu = self._rt._lib.clcrt_stream_cu(self._h)
            for rt in list(_live):
                w = rt._streams.pop(cu, None) if rt._h is not None and cu else None
                if w is not None and w is not self:
                    w._destroy()
        for f in self._rt._stream_closers:
            f(self._h)
        self._rt._lib.clcrt_stream_destroy(self._h)
        self._h = None
        self._hp = ctypes.c_void_p(None)
        if self._owned_cu:
            try:
                _driver.stream_destroy(self._rt.device, self._owned_cu)
            except Exception:
                pass

    def close(self):
        """Waits for the stream's work and destroys it (and the CUstream, when it owns one)."""
        if self._cached is not None:
            self._rt._streams.pop(self._cached, None)
        if self in self._rt._owned:
            self._rt._owned.remove(self)
        self._destroy()

    @property
    def runtime(self):
        return self._rt

    @property
    def handle(self):
        """The CUstream handle (int; 1 is the legacy default stream)."""
        return self._rt._lib.clcrt_stream_cu(self._live()) or 0

    def __cuda_stream__(self):
        return (0, self.handle)

    @property
    def level(self):
        """clcrt's priority level: 0 for the device's lowest priority, larger is more urgent."""
        return self._rt._lib.clcrt_stream_priority(self._live())

    @property
    def sms(self):
        """The SMs the stream's runs may use (clcrt_stream_sms): its partition's for a stream
        made with sm_budget or rest_of (or one of your own green context), else the device's."""
        return self._rt._lib.clcrt_stream_sms(self._live())

    @property
    def grid_sms(self):
        """The SMs its persistent grids are sized for (clcrt_stream_grid_sms): grid_sms when
        given to Runtime.stream, else sms."""
        return self._rt._lib.clcrt_stream_grid_sms(self._live())

    def sync(self):
        """Waits for the stream's work (clcrt_stream_sync)."""
        self._check(self._rt._lib.clcrt_stream_sync(self._live()))

    synchronize = sync

    def run(self, kernel, tiles, args=None):
        kernel.run(tiles, args, stream=self)

    def done(self):
        """A concurrent.futures.Future that completes when the work enqueued on the stream so
        far has finished: the counterpart of C's clcrt_run_notify, which needs a libuv loop
        (``asyncio.wrap_future`` makes it awaitable). Refused while the stream is captured."""
        self._live()
        if _driver.is_capturing(self.handle):
            raise InvalidError("done: the stream is being captured into a graph")
        ev = _driver.event_record(self._rt.device, self.handle)
        return _executor().submit(_driver.event_wait, self._rt.device, ev)

    # ---- preemption ----

    def preempt_begin(self):
        self._check(self._rt._lib.clcrt_preempt_begin(self._live()))

    def preempt_end(self):
        self._check(self._rt._lib.clcrt_preempt_end(self._live()))

    def preempt(self):
        """``with s.preempt(): ...``: your own kernels enqueued on this (higher-priority) stream
        inside the block make lower-priority STEAL runs yield (clcrt_preempt_begin/end).

        The bracket is enqueued on the stream, so it covers whatever runs there between its ends,
        whoever launched it: wrap a torch stream of higher priority (``rt.stream(torch_stream)``,
        before the runs that are to yield are enqueued) to bracket library work such as NCCL's
        collectives (python/bench/tp_layer.py)."""
        return _Preempt(self)

    # ---- statistics and traces ----

    def stats_enable(self, on=True):
        self._check(self._rt._lib.clcrt_stream_stats_enable(self._live(), 1 if on else 0))

    def stats(self):
        """Synchronises, then reads and resets the statistics (clcrt_stream_stats_read)."""
        s = T.sized(T.StreamStats)
        self._check(self._rt._lib.clcrt_stream_stats_read(self._live(), ctypes.byref(s)))
        per_sm = tuple(s.tiles_per_sm[i] for i in range(s.num_sms)) if s.tiles_per_sm else ()
        return StreamStats(s.runs, s.tiles, s.steals, s.clusters, s.max_units_per_cluster, per_sm)

    def trace_enable(self, capacity=1 << 20):
        """Records every tile of the runs that follow, up to ``capacity`` records (0: off)."""
        if not isinstance(capacity, int) or capacity < 0:
            raise InvalidError("trace_enable: capacity %r is not a record count" % (capacity,))
        self._check(self._rt._lib.clcrt_stream_trace_enable(self._live(), capacity))

    def trace_disable(self):
        self.trace_enable(0)

    def trace_read(self):
        """Synchronises and takes the records written since the last read: a clcrt.Trace."""
        from .trace import Trace

        t = ctypes.c_void_p()
        self._check(self._rt._lib.clcrt_stream_trace_read(self._live(), ctypes.byref(t)))
        return Trace._own(t.value)


class _Preempt:
    def __init__(self, s):
        self._s = s

    def __enter__(self):
        self._s.preempt_begin()
        return self._s

    def __exit__(self, *exc):
        self._s.preempt_end()


# ---- teardown ----------------------------------------------------------------------------------

# Every live Runtime, closed at interpreter exit while Python still runs: a runtime's thread that
# builds variants in the background calls the log callback, which re-enters Python; left to the
# C library's own exit handler, that thread met a finalizing interpreter (a hang, or a crash, at
# the exit of programs whose runs had started background builds: yielding runs on two streams of
# different priorities). Closing first stops that thread, waits for the streams' work, and frees
# every handle before torch or the driver tear down theirs.
_live = weakref.WeakSet()


def _close_all():
    for rt in list(_live):
        try:
            rt.close()
        except Exception:
            pass


atexit.register(_close_all)


# ---- one shared runtime per device ------------------------------------------------------------

_defaults = {}
_defaults_lock = threading.Lock()


def runtime(device=None):
    """The shared Runtime of a device (made on first use): what clcrt.ops use. ``device``
    None: torch's current device when torch is imported, else 0."""
    if device is None:
        torch = sys.modules.get("torch")
        device = torch.cuda.current_device() if torch is not None and torch.cuda.is_available() else 0
    elif not isinstance(device, int):
        device = getattr(device, "index", None)
        if device is None:
            raise InvalidError("runtime: %r is not a device ordinal" % (device,))
    rt = _defaults.get(device)
    if rt is None:
        with _defaults_lock:
            rt = _defaults.get(device)
            if rt is None:
                rt = _defaults[device] = Runtime(device)
    return rt


def _forget_default(rt):
    with _defaults_lock:
        if _defaults.get(rt.device) is rt:
            del _defaults[rt.device]
