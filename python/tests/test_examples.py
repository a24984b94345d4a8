"""The teaching examples (python/examples/ragged_sum.py, stencil2d.py, splitk.py) and the Python
blocks of docs/tile-functions.md, in compile-only mode: each example's tile function registers
for sm_90a under every scheduler it runs and for sm_100a, and its source is its C twin's
(examples/*.c), so the two cannot drift apart. test_gpu_examples.py runs them on a GPU."""

import ast
import importlib.util
import re

import pytest

import clcrt

from conftest import REPO

EXAMPLES = {"ragged_sum": "ragged_src", "stencil2d": "stencil_src", "splitk": "splitk_src"}


def load(name):
    spec = importlib.util.spec_from_file_location("example_" + name, REPO / "python" / "examples" / (name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def c_source(name, var):
    """The tile source of examples/NAME.c: the C string literals of `static const char VAR[] =`."""
    text = (REPO / "examples" / (name + ".c")).read_text()
    start = text.index("static const char %s[] =" % var)
    body = text[start:text.index(";\n", start)].split("=", 1)[1]
    pieces = re.findall(r'^\s*("(?:[^"\\]|\\.)*")\s*$', body, re.M)
    assert pieces, "no string literal in %s" % name
    return "".join(ast.literal_eval(p) for p in pieces)  # \n, \" and \\ mean the same in C and Python


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_source_is_the_c_one(name):
    assert load(name).SRC == c_source(name, EXAMPLES[name])


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("arch,sched", [("sm_90a", "auto"), ("sm_90a", "static"), ("sm_90a", "fixed"),
                                        ("sm_100a", "auto")])
def test_example_compiles(name, arch, sched):
    with clcrt.Runtime(arch=arch, cache_dir="") as rt:
        k = load(name).register(rt, sched)
        i = k.info
        assert i.arch == arch and i.stack_bytes == 0
        want = {"auto": "steal" if arch == "sm_90a" else "clc"}.get(sched, sched)
        assert i.name.startswith("clcrt_%s_" % want), i.name


def test_example_without_gpu_exits_2():
    """Without torch or a GPU an example says so and exits 2, as its docstring promises."""
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU: test_gpu_examples.py runs the examples")
    except ImportError:
        pass
    assert load("ragged_sum").main() == 2


def guide_python_blocks():
    """The ```python blocks of docs/tile-functions.md marked <!-- run: python --> (the marks are
    checked by tests/test_guide.c: no block goes unmarked)."""
    lines = (REPO / "docs" / "tile-functions.md").read_text().split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line == "```python":
            assert i > 0 and lines[i - 1].strip() == "<!-- run: python -->", "unmarked block at line %d" % (i + 1)
            end = lines.index("```", i + 1)
            blocks.append((i + 1, "\n".join(lines[i + 1:end]) + "\n"))
    return blocks


def test_guide_has_python_blocks():
    assert guide_python_blocks()


@pytest.mark.parametrize("line,code", guide_python_blocks())
def test_guide_python_block(line, code):
    exec(compile(code, "docs/tile-functions.md:%d" % line, "exec"), {"__name__": "guide"})
