"""GPU: the teaching examples (python/examples/ragged_sum.py, stencil2d.py, splitk.py) run on
torch tensors under AUTO, STATIC and FIXED and check themselves against torch on the CPU; each
must return 0. They skip, saying why, without torch and a GPU."""

import importlib.util

import pytest

from conftest import REPO, gpu_skip_reason

REASON = gpu_skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))


@pytest.mark.parametrize("name", ["ragged_sum", "stencil2d", "splitk"])
def test_example_runs_and_checks(name, capsys):
    spec = importlib.util.spec_from_file_location("example_" + name, REPO / "python" / "examples" / (name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rc = mod.main()
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.count(": ok") == 3, out
