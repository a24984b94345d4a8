#!/usr/bin/env python3
"""Builds the clcrt wheel from what `make python` compiled: no setuptools, no network.

    build_wheel.py --version V --lib libclcrt_py.so --tool clcrt [--ext _fastops.abi3.so] --types-gen _types_gen.py --out DIR

The wheel (clcrt-V-py3-none-linux_x86_64.whl) holds the package's Python files, the library
and the tool under clcrt/_native/ (the library embeds the GEMM op's tile source), and a `clcrt`
console command. Its clcrt/_types_gen.py is the one python/gen_types.py made from the headers
this build compiled (--types-gen), not the checked-in copy. It is pure Python as far as the
interpreter goes (ctypes only), hence py3-none: one wheel for every CPython 3 on x86-64 Linux
with glibc.
"""

import argparse
import base64
import hashlib
import io
import os
import stat
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
TAG = "py3-none-linux_x86_64"
EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed timestamps: the same inputs make the same wheel


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--ext", help="the _fastops extension (stable ABI), gemm's eager path in C")
    ap.add_argument("--types-gen", required=True, help="python/gen_types.py's module for this build")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    files = []  # (archive name, bytes, executable)
    pkg = os.path.join(HERE, "clcrt")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") and name != "_version.py":
            with open(a.types_gen if name == "_types_gen.py" else os.path.join(pkg, name), "rb") as f:
                files.append(("clcrt/" + name, f.read(), False))
    files.append(("clcrt/_version.py", ('__version__ = "%s"\n' % a.version).encode(), False))
    bins = [(a.lib, "clcrt/_native/libclcrt_py.so"), (a.tool, "clcrt/_native/clcrt")]
    if a.ext:
        bins.append((a.ext, "clcrt/_fastops.abi3.so"))
    for src, dst in bins:
        with open(src, "rb") as f:
            files.append((dst, f.read(), True))

    dist = "clcrt-%s.dist-info" % a.version
    readme = ""
    readme_path = os.path.join(HERE, "README.md")
    if os.path.exists(readme_path):
        with open(readme_path) as f:
            readme = f.read()
    meta = (
        "Metadata-Version: 2.1\n"
        "Name: clcrt\n"
        "Version: %s\n"
        "Summary: Persistent, work-stealing tile schedulers for NVIDIA GPUs, from Python (ctypes over libclcrt)\n"
        "Requires-Python: >=3.8\n"
        "Description-Content-Type: text/markdown\n\n%s" % (a.version, readme)
    )
    files.append((dist + "/METADATA", meta.encode(), False))
    files.append((dist + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: clcrt build_wheel.py\nRoot-Is-Purelib: false\n"
                                    "Tag: %s\n" % TAG).encode(), False))
    files.append((dist + "/entry_points.txt", b"[console_scripts]\nclcrt = clcrt.tool:main\n", False))
    files.append((dist + "/top_level.txt", b"clcrt\n", False))
    record = io.StringIO()
    for name, data, _ in files:
        record.write("%s,%s,%d\n" % (name, _record_hash(data), len(data)))
    record.write("%s/RECORD,,\n" % dist)
    files.append((dist + "/RECORD", record.getvalue().encode(), False))

    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "clcrt-%s-%s.whl" % (a.version, TAG))
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, exe in files:
            info = zipfile.ZipInfo(name, EPOCH)
            mode = 0o755 if exe else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, path)
    print("wheel: %s (%d files, %d KiB)" % (path, len(files), os.path.getsize(path) // 1024))
    return 0


if __name__ == "__main__":
    sys.exit(main())
