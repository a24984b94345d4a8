"""GPU: processes that use clcrt from PyTorch exit cleanly, whichever way they end (a few of each
kind of python/tests/exit_stress.py; the script itself runs hundreds)."""

import os
import subprocess
import sys

import pytest

from conftest import gpu_skip_reason

REASON = gpu_skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))


def test_short_processes_exit_cleanly():
    here = os.path.dirname(os.path.abspath(__file__))
    per = os.environ.get("CLCRT_TEST_EXIT_PER_KIND", "4")
    p = subprocess.run([sys.executable, os.path.join(here, "exit_stress.py"), "--per-kind", per, "--jobs", "8"],
                       capture_output=True, text=True, timeout=900)
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
