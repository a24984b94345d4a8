"""clcrt from Python: persistent, work-stealing tile schedulers on NVIDIA GPUs.

A thin layer over the C library (include/clcrt.h), bundled in the wheel with libuv linked in;
it needs the NVIDIA driver and NVRTC 13 (the CUDA toolkit's, or the ``nvidia-cuda-nvrtc``
wheel PyTorch installs), nothing else. ::

    import clcrt, torch

    src = '''
    struct ScaleArgs { float *x; long n; float alpha; };
    __device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {
      long i = (long)t.linear * blockDim.x + threadIdx.x;
      if (i < a.n) a.x[i] *= a.alpha;
    }'''

    class ScaleArgs(clcrt.Args):
        x: clcrt.ptr("float32")
        n: clcrt.i64
        alpha: clcrt.f32

    rt = clcrt.Runtime()                                   # device 0
    k = rt.register(src, "scale_tile", ScaleArgs, block=256)
    x = torch.ones(1 << 24, device="cuda")
    k.run((x.numel() + 255) // 256, ScaleArgs(x, x.numel(), 1.5))   # on torch's current stream

See docs/python.md in the repository for the whole API.
"""

from ._errors import (
    ArgsMismatchError,
    BusyError,
    CancelledError,
    CompileError,
    CorruptError,
    CudaError,
    Error,
    FileError,
    InvalidError,
    LibraryError,
    NoDeviceError,
    NoMemoryError,
    NotFoundError,
    UnsupportedError,
)
from .args import Args, TensorMap, array, bool_, f32, f64, i8, i16, i32, i64, ptr, u8, u16, u32, u64
from ._core import (
    CacheStats,
    Grid,
    Kernel,
    KernelInfo,
    L2Promotion,
    Launcher,
    Runtime,
    Sched,
    Stream,
    StreamStats,
    Swizzle,
    Use,
    runtime,
)
from .trace import Record, Summary, Trace
from .tool import inspect
from . import ops, tool, tp
from .taskgraph import TaskGraph, TaskNode

try:
    from ._version import __version__
except ImportError:  # the source tree, not an installed wheel
    __version__ = "0+unknown"

USE_TRACE, USE_GRAPH, USE_PREEMPT, USE_SHORT = Use.TRACE, Use.GRAPH, Use.PREEMPT, Use.SHORT


def status_name(status):
    """clcrt_status_name: "CLCRT_E_COMPILE" for 2."""
    from . import _native

    return _native.lib().clcrt_status_name(int(status)).decode()


def status_str(status):
    """clcrt_status_str: the status's sentence."""
    from . import _native

    return _native.lib().clcrt_status_str(int(status)).decode()


def nvrtc_path():
    """The libnvrtc.so.13 the package loaded."""
    from . import _native

    return _native.nvrtc_path()


__all__ = [
    "Args", "ArgsMismatchError", "BusyError", "CacheStats", "CancelledError", "CompileError", "CorruptError", "CudaError", "Error",
    "FileError", "Grid", "InvalidError", "Kernel", "KernelInfo", "L2Promotion", "Launcher", "LibraryError", "NoDeviceError",
    "NoMemoryError", "NotFoundError", "Record", "Runtime", "Sched", "Stream", "StreamStats", "Summary", "Swizzle",
    "TaskGraph", "TaskNode", "TensorMap", "Trace", "UnsupportedError", "Use", "array", "bool_", "f32", "f64", "i8", "i16", "i32", "i64",
    "inspect", "nvrtc_path", "ops", "ptr", "runtime", "status_name", "status_str", "tool", "u8", "u16", "u32", "u64",
]  # fmt: skip
