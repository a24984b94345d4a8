"""Loading the bundled library and declaring its C functions.

The wheel carries one shared library, ``_native/libclcrt_py.so``: libclcrt with libuv linked
in statically, plus the small shims in ``_csrc/shim.c`` and ``_csrc/gemm_shim.c``. It needs nothing
beyond the C library and NVRTC (``libnvrtc.so.13``, a DT_NEEDED entry). NVRTC is not bundled:
it is found here, in this order, and loaded with RTLD_GLOBAL before the library, so that the
dynamic loader satisfies that entry by its soname:

1. ``$CLCRT_NVRTC`` (a path to libnvrtc.so.13, or the directory holding it);
2. an NVRTC the process already loaded (PyTorch may have);
3. ``$CUDA_HOME/lib64`` (and ``$CUDA_PATH/lib64``);
4. the ``nvidia-cuda-nvrtc`` wheel that PyTorch installs, in any ``sys.path`` entry:
   ``nvidia/cu13/lib`` (CUDA 13 wheels) or ``nvidia/cuda_nvrtc/lib`` (older layout);
5. ``/usr/local/cuda/lib64``;
6. the system loader's own search (``LD_LIBRARY_PATH``, ``ld.so.cache``).

libcuda is not needed to load: the library opens it itself, lazily, when a runtime for a
device is made.
"""

import ctypes
import os
import sys

from . import _types as T
from ._errors import LibraryError

NVRTC_SONAME = "libnvrtc.so.13"
LIB_NAME = "libclcrt_py.so"
HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE_DIR = os.path.join(HERE, "_native")

_lib = None
_nvrtc_path = None
_searched = []


def _nvrtc_candidates():
    env = os.environ.get("CLCRT_NVRTC")
    if env:
        yield "$CLCRT_NVRTC", os.path.join(env, NVRTC_SONAME) if os.path.isdir(env) else env
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            yield "$" + var, os.path.join(root, "lib64", NVRTC_SONAME)
    for entry in sys.path:
        if not entry or not os.path.isdir(os.path.join(entry, "nvidia")):
            continue
        for sub in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"):
            yield "pip wheel", os.path.join(entry, sub, NVRTC_SONAME)
    yield "/usr/local/cuda", os.path.join("/usr/local/cuda/lib64", NVRTC_SONAME)


def _loaded_path(soname):
    """The file a library of this name was loaded from, read from /proc/self/maps."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1] if line.count(" ") >= 5 else ""
                if os.path.basename(path) == soname or os.path.basename(path).startswith(soname + "."):
                    return path
    except OSError:
        pass
    return None


def _load_nvrtc():
    """Loads libnvrtc.so.13 globally; returns the path it came from, or None."""
    mode = os.RTLD_GLOBAL | os.RTLD_NOW
    for where, path in _nvrtc_candidates():
        if not os.path.exists(path):
            if where == "$CLCRT_NVRTC":
                raise LibraryError("CLCRT_NVRTC=%s: there is no such file; name libnvrtc.so.13 or its directory" % path)
            _searched.append("%s (%s): not there" % (path, where))
            continue
        try:
            ctypes.CDLL(path, mode=mode)
            return path
        except OSError as e:
            if where == "$CLCRT_NVRTC":
                raise LibraryError("CLCRT_NVRTC=%s could not be loaded: %s" % (path, e)) from None
            _searched.append("%s (%s): %s" % (path, where, e))
    try:
        ctypes.CDLL(NVRTC_SONAME, mode=mode)
        return _loaded_path(NVRTC_SONAME) or NVRTC_SONAME
    except OSError as e:
        _searched.append("%s (the system loader's path): %s" % (NVRTC_SONAME, e))
    return None


def nvrtc_path():
    """The libnvrtc.so.13 the package loaded."""
    lib()
    return _nvrtc_path


def lib():
    """The loaded library (loaded on first use)."""
    global _lib, _nvrtc_path
    if _lib is not None:
        return _lib
    path = os.path.join(NATIVE_DIR, LIB_NAME)
    if not os.path.exists(path):
        raise LibraryError(
            "the clcrt package has no %s next to it (%s): install the wheel that `make python` builds "
            "(build/python/dist/clcrt-*.whl) rather than importing python/clcrt from the source tree" % (LIB_NAME, path)
        )
    # Prefer an NVRTC the process already has (torch's), so that two copies never meet.
    try:
        ctypes.CDLL(NVRTC_SONAME, mode=os.RTLD_GLOBAL | os.RTLD_NOW | os.RTLD_NOLOAD)
        found = _loaded_path(NVRTC_SONAME) or NVRTC_SONAME
    except OSError:
        found = _load_nvrtc()
    if found is None:
        raise LibraryError(
            "NVRTC for CUDA 13 (%s) was not found. Looked at:\n  %s\n"
            "Install the CUDA 13 toolkit and set CUDA_HOME, or `pip install nvidia-cuda-nvrtc` (the wheel PyTorch "
            "uses), or set CLCRT_NVRTC to the library's path." % (NVRTC_SONAME, "\n  ".join(_searched))
        )
    try:
        handle = ctypes.CDLL(path, mode=os.RTLD_NOW)
    except OSError as e:
        raise LibraryError("could not load %s (NVRTC from %s): %s" % (path, found, e)) from None
    _declare(handle)
    _nvrtc_path = found if os.path.isabs(found) else (_loaded_path(NVRTC_SONAME) or found)
    _lib = handle
    return _lib


def _fn(handle, name, restype, *argtypes):
    f = getattr(handle, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


def _declare(h):
    """Every C function the package calls, with its prototype (include/clcrt.h)."""
    P, c = ctypes.POINTER, ctypes
    st, vp, sz, cp = c.c_int, c.c_void_p, c.c_size_t, c.c_char_p
    _fn(h, "clcrt_status_name", cp, st)
    _fn(h, "clcrt_status_str", cp, st)
    _fn(h, "clcrt_errmsg", cp, vp)
    _fn(h, "clcrt_runtime_create", st, P(vp), P(T.RuntimeOpts))
    _fn(h, "clcrt_runtime_destroy", None, vp)
    _fn(h, "clcrt_runtime_arch", cp, vp)
    _fn(h, "clcrt_runtime_compile_only", c.c_int, vp)
    _fn(h, "clcrt_runtime_cache_dir", cp, vp)
    _fn(h, "clcrt_register", st, vp, P(T.TileDesc), P(vp))
    _fn(h, "clcrt_kernel_cubin", st, vp, P(vp), P(sz))
    _fn(h, "clcrt_kernel_ptx", st, vp, P(cp))
    _fn(h, "clcrt_kernel_prepare", st, vp, c.c_uint)
    _fn(h, "clcrt_kernel_variant", st, vp, c.c_uint, P(vp))
    _fn(h, "clcrt_kernel_info_get", st, vp, P(T.KernelInfo))
    _fn(h, "clcrt_stream_create", st, vp, vp, P(vp))
    _fn(h, "clcrt_stream_create_ex", st, vp, P(T.StreamOpts), P(vp))
    _fn(h, "clcrt_stream_sms", c.c_int, vp)
    _fn(h, "clcrt_stream_grid_sms", c.c_int, vp)
    _fn(h, "clcrt_stream_destroy", None, vp)
    _fn(h, "clcrt_stream_cu", vp, vp)
    _fn(h, "clcrt_run", st, vp, vp, T.Dim3, vp, sz)
    _fn(h, "clcrt_run_ex", st, vp, vp, T.Dim3, vp, sz, c.c_uint)
    _fn(h, "clcrt_stream_sync", st, vp)
    _fn(h, "clcrt_stream_stats_enable", st, vp, c.c_int)
    _fn(h, "clcrt_stream_stats_read", st, vp, P(T.StreamStats))
    _fn(h, "clcrt_stream_priority", c.c_int, vp)
    _fn(h, "clcrt_preempt_begin", st, vp)
    _fn(h, "clcrt_preempt_end", st, vp)
    _fn(h, "clcrt_stream_trace_enable", st, vp, sz)
    _fn(h, "clcrt_stream_trace_read", st, vp, P(vp))
    _fn(h, "clcrt_trace_create", st, P(T.TraceRecord), sz, c.c_ulonglong, P(vp))
    _fn(h, "clcrt_trace_destroy", None, vp)
    _fn(h, "clcrt_trace_records", P(T.TraceRecord), vp, P(sz))
    _fn(h, "clcrt_trace_dropped", c.c_ulonglong, vp)
    _fn(h, "clcrt_trace_save_json", st, vp, cp)
    _fn(h, "clcrt_trace_load_json", st, cp, P(vp))
    _fn(h, "clcrt_trace_summarize", st, vp, P(T.TraceSummary))
    _fn(h, "clcrt_tensor_map_2d", st, vp, vp, c.c_int, c.c_ulonglong, c.c_uint64, c.c_uint64, c.c_uint64,
        c.c_uint32, c.c_uint32, c.c_int)
    _fn(h, "clcrt_tensor_map_2d_l2", st, vp, vp, c.c_int, c.c_ulonglong, c.c_uint64, c.c_uint64, c.c_uint64,
        c.c_uint32, c.c_uint32, c.c_int, c.c_int)
    _fn(h, "clcrt_cache_stats_get", st, vp, P(T.CacheStats))
    # _shim.c: clcrt_run with the tile grid as three integers (ctypes passes a struct by value
    # more slowly than three ints), and the library's layout facts for the tests.
    _fn(h, "clcrt_py_run", st, vp, vp, c.c_uint, c.c_uint, c.c_uint, vp, sz)
    _fn(h, "clcrt_py_layout", cp)
    # The op library (include/clcrt_ops.h), and _gemm_shim.c: clcrt_gemm with its descriptor as
    # integers, one crossing into C per run.
    _fn(h, "clcrt_ops_create", st, vp, P(vp))
    _fn(h, "clcrt_ops_destroy", None, vp)
    _fn(h, "clcrt_ops_stream_release", st, vp, vp)
    _fn(h, "clcrt_gemm", st, vp, vp, P(T.GemmDesc))
    _fn(h, "clcrt_gemm_plan_get", st, vp, vp, P(T.GemmDesc), P(T.GemmPlanInfo))
    _fn(h, "clcrt_gemm_variant_count", c.c_int)
    _fn(h, "clcrt_gemm_variant_get", st, c.c_int, P(T.GemmVariantInfo))
    _fn(h, "clcrt_gemm_max_groups", c.c_uint)
    _fn(h, "clcrt_gemm_variant_find", c.c_int, cp)
    _fn(h, "clcrt_gemm_kernel", st, vp, cp, c.c_int, c.c_int, P(vp))
    _fn(h, "clcrt_gemm_prepare", st, vp, vp, P(T.GemmDesc), c.c_uint)
    _fn(h, "clcrt_gemm_source", cp)
    _fn(h, "clcrt_taskgraph_create", st, vp, P(T.TaskgraphDesc), P(vp))
    _fn(h, "clcrt_taskgraph_run", st, vp, vp, P(T.Dim3), P(vp))
    _fn(h, "clcrt_taskgraph_run_ex", st, vp, vp, P(T.Dim3), P(vp), c.c_uint)
    _fn(h, "clcrt_taskgraph_kernel", vp, vp)
    _fn(h, "clcrt_taskgraph_source", cp, vp)
    _fn(h, "clcrt_taskgraph_trace_enable", st, vp, sz)
    _fn(h, "clcrt_taskgraph_trace_read", st, vp, vp, P(vp))
    _fn(h, "clcrt_taskgraph_destroy", None, vp)
    u64, u = c.c_uint64, c.c_uint
    _fn(h, "clcrt_py_gemm", st, vp, vp, c.c_int, u64, u64, u64, u, u, u, u64, u64, u64, u, u64, c.c_int, c.c_int,
        c.c_int, u, u64)
    _fn(h, "clcrt_py_gemm_dense", st, vp, vp, u64, u64, u64, u, u, u, u64, u64, u64, u)
