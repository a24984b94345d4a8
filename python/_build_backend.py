"""A PEP 517 backend for `pip install ./python`: `make python` builds the wheel (the library,
the tool, the package; see the Makefile's Python block) and this hands it to pip.

pip builds in place (pip 21.3 and newer), so the repository is this directory's parent."""

import glob
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _make():
    if not os.path.exists(os.path.join(REPO, "Makefile")) or not os.path.exists(os.path.join(REPO, "include", "clcrt.h")):
        raise RuntimeError("clcrt: %s is not the repository's python/ folder (pip copied it?); run `make python` in "
                           "the repository and install build/python/dist/clcrt-*.whl instead" % HERE)
    jobs = os.environ.get("CLCRT_MAKE_JOBS", "2")
    subprocess.run(["make", "-C", REPO, "-j" + jobs, "python"], check=True)
    wheels = glob.glob(os.path.join(REPO, "build", "python", "dist", "clcrt-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError("clcrt: `make python` left %d wheels in build/python/dist" % len(wheels))
    return wheels[0]


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    w = _make()
    shutil.copy(w, os.path.join(wheel_directory, os.path.basename(w)))
    return os.path.basename(w)
