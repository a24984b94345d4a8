"""The ``clcrt`` command-line tool the wheel bundles (docs/tool.md), from Python.

The binary lives in the package (``_native/clcrt``; libuv, libpng and zlib linked in, NVRTC
found like the package's own: its directory goes on LD_LIBRARY_PATH). The wheel also
installs a ``clcrt`` command that runs it (:func:`main`).
"""

import json
import os
import subprocess
import sys
import tempfile

from . import _native
from ._errors import Error, FileError, InvalidError, NotFoundError

# The tool's exit codes (docs/tool.md) and the error each becomes.
_EXIT = {2: InvalidError, 3: FileError, 4: Error, 5: NotFoundError}


def path():
    """The bundled tool's path."""
    p = os.path.join(_native.NATIVE_DIR, "clcrt")
    if not os.path.exists(p):
        raise NotFoundError("the clcrt tool is not bundled at %s: install the wheel `make python` builds" % p)
    return p


def _env():
    env = dict(os.environ)
    nv = _native.nvrtc_path()
    if nv and os.path.isabs(nv):
        d = os.path.dirname(nv)
        env["LD_LIBRARY_PATH"] = d + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def run(argv, check=True):
    """Runs ``clcrt ARGV...``; returns its stdout (str). A failure raises the clcrt.Error
    subclass of its exit code, with its message."""
    r = subprocess.run([path()] + [os.fspath(a) for a in argv], capture_output=True, env=_env())
    out, err = r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")
    if check and r.returncode:
        cls = _EXIT.get(r.returncode, Error)
        e = cls("clcrt %s (exit %d): %s" % (" ".join(map(str, argv[:2])), r.returncode, err.strip() or out.strip()))
        e.returncode, e.stdout, e.stderr = r.returncode, out, err
        raise e
    return out


def inspect(obj, sass=False):
    """``clcrt inspect --json`` of a cubin or cache entry: a path, the cubin's bytes, or a
    clcrt.Kernel. Returns the parsed document (schema "clcrt-inspect-1"); with ``sass``,
    the text output with the SASS (needs nvdisasm on the PATH)."""
    from ._core import Kernel

    if isinstance(obj, Kernel):
        obj = obj.cubin
    if isinstance(obj, (bytes, bytearray, memoryview)):
        with tempfile.TemporaryDirectory(prefix="clcrt-inspect-") as d:
            p = os.path.join(d, "kernel.cubin")
            with open(p, "wb") as f:
                f.write(obj)
            return inspect(p, sass)
    if sass:
        return run(["inspect", "--sass", obj])
    return json.loads(run(["inspect", "--json", obj]))


def cache_entries(directory=None):
    """The disk cache's entries (``clcrt cache ls --json``): a dict with "dir" and "entries"."""
    argv = ["cache", "ls", "--json"] + (["--dir", directory] if directory is not None else [])
    return json.loads(run(argv))


def cache_clear(directory=None):
    """Deletes every cache entry (``clcrt cache clear``)."""
    run(["cache", "clear"] + (["--dir", directory] if directory is not None else []))


def main(argv=None):
    """The ``clcrt`` console command: the bundled tool with NVRTC on its library path."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        p = path()
    except Error as e:
        sys.stderr.write("%s\n" % e)
        return 5
    os.execve(p, [p] + list(argv), _env())
