"""Shared fixtures. The CPU tests run in compile-only mode (sm_90a, sm_100a): no GPU or
driver needed. GPU tests (test_gpu_*.py) skip, saying why, without torch and a GPU.

The package under test is the installed wheel (`make test-python` installs it into
build/python/venv); these tests never import python/clcrt from the source tree."""

import os
import tempfile

# Before clcrt is imported: the library reads the environment once. The tests' disk cache
# lives in a directory of their own, never in ~/.cache.
_CACHE = tempfile.mkdtemp(prefix="clcrt-pytest-cache-")
os.environ["CLCRT_CACHE_DIR"] = _CACHE

import pathlib  # noqa: E402

import pytest  # noqa: E402

import clcrt  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]

SCALE_SRC = """struct ScaleArgs { float *x; long n; float alpha; };
__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {
  long i = (long)t.linear * blockDim.x + threadIdx.x;
  if (i < a.n) a.x[i] *= a.alpha;
}
"""


class ScaleArgs(clcrt.Args):
    _fields_ = [("x", clcrt.ptr("float32")), ("n", clcrt.i64), ("alpha", clcrt.f32)]


@pytest.fixture(scope="session")
def cache_root():
    return _CACHE


@pytest.fixture
def rt90():
    """A compile-only sm_90a runtime without a disk cache."""
    with clcrt.Runtime(arch="sm_90a", cache_dir="") as rt:
        yield rt


@pytest.fixture
def scale_kernel(rt90):
    return rt90.register(SCALE_SRC, "scale_tile", ScaleArgs, block=256)


def gpu_skip_reason():
    """Why the GPU tests cannot run here, or None."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    try:
        rt = clcrt.runtime(torch.cuda.current_device())
    except clcrt.Error as e:
        return "clcrt cannot use the GPU: %s" % e
    if not rt.arch.startswith("sm_"):
        return "unexpected architecture %s" % rt.arch
    return None
