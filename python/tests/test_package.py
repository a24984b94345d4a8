"""The installed package: what it bundles, what the library needs, and that every ctypes
class generated from the headers (python/gen_types.py) matches the library's own layout."""

import ctypes
import os
import shutil
import subprocess
import sys

import pytest

import clcrt
from clcrt import _errors, _native
from clcrt import _types as T

from conftest import REPO


def test_version_matches_header():
    text = (REPO / "include" / "clcrt.h").read_text()
    parts = [line.split()[2] for line in text.splitlines() if line.startswith("#define CLCRT_VERSION_")]
    assert clcrt.__version__ == ".".join(parts[:3])


def test_bundled_files():
    assert os.path.isfile(os.path.join(_native.NATIVE_DIR, "libclcrt_py.so"))
    assert os.access(clcrt.tool.path(), os.X_OK)
    assert "gemm_tile" in clcrt.ops.source()  # embedded in the library, not a file beside it
    assert clcrt.nvrtc_path().endswith("libnvrtc.so.13") or "libnvrtc.so.13" in clcrt.nvrtc_path()


@pytest.mark.skipif(not shutil.which("readelf"), reason="readelf is not installed")
@pytest.mark.parametrize("name", ["libclcrt_py.so", "clcrt"])
def test_needs_only_libc_and_nvrtc(name):
    """The bundled binaries load where only the driver, Python and NVRTC exist."""
    out = subprocess.run(["readelf", "-d", os.path.join(_native.NATIVE_DIR, name)], capture_output=True,
                         text=True, check=True).stdout
    needed = {line.split("[")[1].split("]")[0] for line in out.splitlines() if "(NEEDED)" in line}
    allowed = {"libc.so.6", "libdl.so.2", "libpthread.so.0", "libm.so.6", "librt.so.1", "ld-linux-x86-64.so.2",
               "libnvrtc.so.13"}
    assert needed <= allowed, needed - allowed
    assert "libnvrtc.so.13" in needed
    assert "RPATH" not in out and "RUNPATH" not in out


def _library_layout():
    lines = _native.lib().clcrt_py_layout().decode().splitlines()
    sizes, fields = {}, {}
    for line in lines:
        name, *nums = line.split()
        if "." in name:
            t, f = name.split(".")
            fields[(t, f)] = tuple(map(int, nums))
        else:
            sizes[name] = int(nums[0])
    return sizes, fields


def test_mirrors_match_the_library():
    sizes, fields = _library_layout()
    assert set(sizes) == set(T.MIRRORS)
    for cname, cls in T.MIRRORS.items():
        assert ctypes.sizeof(cls) == sizes[cname], cname
        mine = {f for f, _ in cls._fields_}
        theirs = {f for (t, f) in fields if t == cname}
        assert mine == theirs, (cname, mine ^ theirs)
        for f in mine:
            d = getattr(cls, f)
            assert (d.offset, d.size) == fields[(cname, f)], (cname, f)


def test_status_table_matches_the_library():
    for i, name in enumerate(_errors.STATUS_NAMES):
        assert clcrt.status_name(i) == name
    assert clcrt.status_name(len(_errors.STATUS_NAMES)) == "CLCRT_E_UNKNOWN"
    assert clcrt.status_str(2) == "NVRTC could not compile the tile function"


def test_error_classes():
    e = _errors.error_for(1, "bad")
    assert isinstance(e, clcrt.InvalidError) and isinstance(e, ValueError) and isinstance(e, clcrt.Error)
    assert e.status == 1 and e.status_name == "CLCRT_E_INVALID" and e.message == "bad"
    assert str(e) == "CLCRT_E_INVALID: bad"
    assert isinstance(_errors.error_for(9, "x"), LookupError)
    assert isinstance(_errors.error_for(6, "x"), MemoryError)
    assert isinstance(_errors.error_for(7, "x"), OSError) and str(_errors.error_for(7, "x")) == "CLCRT_E_IO: x"
    assert type(_errors.error_for(99, "x")) is clcrt.Error and _errors.error_for(99, "x").status_name == "CLCRT_E_UNKNOWN"
    assert issubclass(clcrt.ArgsMismatchError, clcrt.CompileError)


def test_nvrtc_missing_is_a_clear_error(tmp_path):
    """Without any NVRTC the import-time load fails with a clcrt.Error naming where it looked."""
    code = (
        "import clcrt\n"
        "try:\n"
        "    clcrt.Runtime(arch='sm_90a')\n"
        "except clcrt.LibraryError as e:\n"
        "    print('LIBERR', e)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH")}
    env["CLCRT_NVRTC"] = str(tmp_path / "nowhere" / "libnvrtc.so.13")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert "LIBERR" in r.stdout and "CLCRT_NVRTC" in r.stdout, r.stdout + r.stderr


def test_nvrtc_from_an_explicit_directory(tmp_path):
    """CLCRT_NVRTC may name the directory that holds libnvrtc.so.13 (as a pip wheel's lib/)."""
    d = os.path.dirname(os.path.realpath(clcrt.nvrtc_path()))
    code = "import clcrt; rt = clcrt.Runtime(arch='sm_90a', cache_dir=''); print('ARCH', rt.arch, clcrt.nvrtc_path())"
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["CLCRT_NVRTC"] = d
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert "ARCH sm_90a" in r.stdout, r.stdout + r.stderr
    assert os.path.dirname(os.path.realpath(r.stdout.split()[-1])) == d


def test_nvrtc_from_a_pip_wheel_layout(tmp_path):
    """The layouts of the nvidia-cuda-nvrtc wheel (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib) in
    any sys.path entry are found without CUDA_HOME. Simulated with links to this machine's
    NVRTC in a directory put on sys.path."""
    real = os.path.realpath(clcrt.nvrtc_path())
    src = os.path.dirname(real)
    for layout in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"):
        site = tmp_path / layout.replace("/", "_")
        lib = site / layout
        lib.mkdir(parents=True)
        for f in os.listdir(src):
            if f.startswith("libnvrtc"):
                os.symlink(os.path.join(src, f), lib / f)
        code = ("import sys; sys.path.insert(0, %r); import clcrt; clcrt.Runtime(arch='sm_90a', cache_dir='');"
                "print('FROM', clcrt.nvrtc_path())" % str(site))
        env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "CLCRT_NVRTC")}
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path))
        assert "FROM" in r.stdout, r.stdout + r.stderr
        assert r.stdout.split()[-1].startswith(str(site)), r.stdout


def test_console_command(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "clcrt")
    if not os.path.exists(exe):
        pytest.skip("the console script is not installed next to the interpreter")
    r = subprocess.run([exe, "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and "clcrt" in r.stdout + r.stderr
