"""python/gen_types.py: the package's structures, enums, constants and statuses come from the C
headers, and a header change that does not reach Python fails here or in the build."""

import ctypes
import importlib.util
import re
import shutil
import subprocess

import pytest

import clcrt
from clcrt import _errors, _types_gen

from conftest import REPO


def _gen():
    spec = importlib.util.spec_from_file_location("gen_types", REPO / "python" / "gen_types.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _headers(tmp_path, edit=None):
    """A copy of include/ under tmp_path, edited by edit(name, text) -> text."""
    (tmp_path / "include").mkdir()
    for name in ("clcrt.h", "clcrt_ops.h"):
        text = (REPO / "include" / name).read_text()
        (tmp_path / "include" / name).write_text(edit(name, text) if edit else text)
    return tmp_path


def _load(py_text):
    ns = {}
    exec(compile(py_text, "_types_gen.py", "exec"), ns)
    return ns


def _add_field(header, struct, field, before=None):
    """An edit adding `field;` to struct in header: before the text `before`, else last."""
    def edit(name, text):
        if name != header:
            return text
        m = re.search(r"typedef struct %s \{.*?\n\} %s;" % (struct, struct), text, re.S)
        at = text.index(before, m.start()) if before else m.end() - len("} %s;" % struct)
        return text[:at] + ("%s;\n  " % field if before else "  %s;\n" % field) + text[at:]

    return edit


def test_checked_in_copy_is_current():
    """python/clcrt/_types_gen.py is what the headers give (run python3 python/gen_types.py)."""
    py, _ = _gen().generate(str(REPO))
    assert (REPO / "python" / "clcrt" / "_types_gen.py").read_text() == py, (
        "python/clcrt/_types_gen.py is out of date with include/: run python3 python/gen_types.py")


def test_the_wheel_holds_what_the_headers_give():
    py, _ = _gen().generate(str(REPO))
    with open(_types_gen.__file__) as f:
        assert f.read() == py


@pytest.mark.parametrize("header,struct,before", [
    ("clcrt_ops.h", "clcrt_gemm_desc", "unsigned flags;"),  # shifts the fields after it
    ("clcrt.h", "clcrt_runtime_opts", None),  # fits the padding at the end: the size stays 88
])
def test_a_new_field_reaches_python_or_fails(tmp_path, header, struct, before):
    """A field added to a public structure is in the generated class, and until the checked-in
    copy is regenerated the test above fails on it."""
    g = _gen()
    old_py, old_c = g.generate(str(REPO))
    new_py, new_c = g.generate(str(_headers(tmp_path, _add_field(header, struct, "unsigned added_field", before))))
    assert new_py != old_py
    cls = _load(new_py)[g._class_name(struct)]
    names = [f for f, _ in cls._fields_]
    assert "added_field" in names
    assert names[-1] == "added_field" if before is None else names.index("added_field") < names.index("flags")
    assert struct + ", added_field" in new_c


@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler")
def test_the_build_stops_on_a_layout_python_does_not_have(tmp_path):
    """layout_gen.h's assertions, compiled against headers whose structure changed, fail:
    shim.c, which includes it, does not build until the generator has read the change."""
    g = _gen()
    _, old_c = g.generate(str(REPO))
    root = _headers(tmp_path, _add_field("clcrt_ops.h", "clcrt_gemm_desc", "unsigned added_field", "unsigned flags;"))
    _, new_c = g.generate(str(root))

    def compiles(layout_text):
        (tmp_path / "layout_gen.h").write_text(layout_text)
        (tmp_path / "t.c").write_text('#include "layout_gen.h"\n')
        r = subprocess.run(["cc", "-std=c11", "-fsyntax-only", "-I", str(root / "include"), "-I", str(tmp_path),
                            str(tmp_path / "t.c")], capture_output=True, text=True)
        return r.returncode == 0, r.stderr

    ok, err = compiles(old_c)
    assert not ok and "clcrt_gemm_desc.flags: ctypes has offset" in err, err
    ok, err = compiles(new_c)
    assert ok, err


@pytest.mark.parametrize("decl,what", [
    ("unsigned bits : 3", "bitfield"),
    ("mystery_t field", "no ctypes type for C type 'mystery_t'"),
    ("void (*callback)(void *)", "function pointer"),
    ("clcrt_runtime *rt; clcrt_runtime whole", "opaque"),
])
def test_the_parser_refuses_what_it_cannot_read(tmp_path, decl, what):
    """Anything it cannot map is an error naming the header's line, never a field left out
    (which would shift the offsets after it)."""
    g = _gen()
    root = _headers(tmp_path, _add_field("clcrt.h", "clcrt_cache_stats", decl))
    with pytest.raises(g.GenError, match=re.escape(what)) as e:
        g.generate(str(root))
    assert re.search(r"include/clcrt\.h:\d+", str(e.value))


def test_an_untypedefed_struct_is_refused(tmp_path):
    g = _gen()
    root = _headers(tmp_path, lambda n, t: t.replace("typedef struct clcrt_runtime clcrt_runtime;",
                                                     "struct clcrt_extra { int a; };\ntypedef struct clcrt_runtime "
                                                     "clcrt_runtime;") if n == "clcrt.h" else t)
    with pytest.raises(g.GenError, match="public types are typedefs"):
        g.generate(str(root))


def test_enums_and_constants_come_from_the_headers():
    """The public enums are the header's, member for member (values read by the generator and
    asserted by the compiler in layout_gen.h)."""
    T = clcrt._types
    assert [(m.name, int(m)) for m in clcrt.Sched] == list(T.ENUMS["clcrt_sched"])
    assert [(m.name, int(m)) for m in clcrt.Grid] == list(T.ENUMS["clcrt_grid"])
    assert {n: int(m) for n, m in clcrt.Use.__members__.items()} == {"NONE": 0, **dict(T.flags("USE_"))}
    assert [int(m) for m in clcrt.Swizzle] == [v for _, v in T.ENUMS["clcrt_swizzle"]]
    assert [int(m) for m in clcrt.L2Promotion] == [v for _, v in T.ENUMS["clcrt_l2_promotion"]]
    assert clcrt.ops.CHECKED == T.GEMM_CHECKED and clcrt.trace.STOLEN == T.TRACE_STOLEN
    assert ctypes.sizeof(clcrt.TensorMap) == 128 and clcrt.TensorMap._clcrt_align_ == 64


def test_every_status_has_its_message_and_class():
    for i, (name, message) in enumerate(_errors.STATUS_MAP):
        assert clcrt.status_name(i) == "CLCRT_" + name
        assert clcrt.status_str(i) == message
    # A status added to CLCRT_STATUS_MAP needs a class of its own in _errors.py.
    assert set(_errors.CLASSES) == set(range(1, len(_errors.STATUS_MAP)))
