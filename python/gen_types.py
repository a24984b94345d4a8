#!/usr/bin/env python3
"""Generates the Python side of clcrt's public headers, so that every structure, enum, constant
and status that crosses into Python is declared once, in C (docs/python.md, "Types from the
headers").

    python3 python/gen_types.py            rewrite python/clcrt/_types_gen.py, the checked-in copy
    python3 python/gen_types.py --check    exit 1 if that copy is not what the headers give
    python3 python/gen_types.py --out DIR  DIR/_types_gen.py and DIR/layout_gen.h (what `make
                                           python` compiles and puts in the wheel)

It reads include/clcrt.h and include/clcrt_ops.h and writes:

_types_gen.py  a ctypes class per public structure (clcrt_tile_desc: TileDesc) with the C field
               names, a CFUNCTYPE per function pointer type (clcrt_log_fn: LOG_FN), every enum
               as constants (CLCRT_SCHED_STEAL: SCHED_STEAL) and as ENUMS["clcrt_sched"], every
               integer #define (CLCRT_USE_TRACE: USE_TRACE), and CLCRT_STATUS_MAP as STATUS_MAP.
layout_gen.h   CLCRT_PY_LAYOUT(S, F), the structures and fields for clcrt_py_layout, and a
               _Static_assert per structure and field that the compiler lays it out as ctypes
               lays out the generated class: a header the parser misreads stops the build.

The parser reads the simple C these headers are written in, and refuses what it does not know
(a bitfield, a nested struct, a type it cannot map) with the header's line, rather than guess:
a field it skipped would shift the offsets that follow.
"""

import argparse
import ctypes
import os
import re
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
HEADERS = ("include/clcrt.h", "include/clcrt_ops.h")
CHECKED_IN = os.path.join(HERE, "clcrt", "_types_gen.py")
PREDEFINED = {"__GNUC__"}  # the compilers the package is built with; __cplusplus is not defined

# C type names to ctypes names. Enums are ints (every value fits: checked below).
SCALARS = {
    "char": "c_char", "signed char": "c_byte", "unsigned char": "c_ubyte",
    "short": "c_short", "unsigned short": "c_ushort", "int": "c_int", "unsigned": "c_uint",
    "unsigned int": "c_uint", "long": "c_long", "unsigned long": "c_ulong", "long long": "c_longlong",
    "unsigned long long": "c_ulonglong", "float": "c_float", "double": "c_double", "size_t": "c_size_t",
    "int8_t": "c_int8", "int16_t": "c_int16", "int32_t": "c_int32", "int64_t": "c_int64",
    "uint8_t": "c_uint8", "uint16_t": "c_uint16", "uint32_t": "c_uint32", "uint64_t": "c_uint64",
}  # fmt: skip
INT_LITERAL = re.compile(r"^(0[xX][0-9a-fA-F]+|\d+)[uUlL]*$")


class GenError(Exception):
    """The headers say something the generator cannot read faithfully."""


def _int(text):
    m = INT_LITERAL.match(text.strip())
    return int(m.group(1), 0) if m else None


def _blank_comments(text):
    """Comments as spaces (newlines kept, so line numbers stay right); strings untouched."""
    def repl(m):
        s = m.group(0)
        return s if s.startswith('"') else re.sub(r"[^\n]", " ", s)

    return re.sub(r'"(?:\\.|[^"\\\n])*"|/\*.*?\*/|//[^\n]*', repl, text, flags=re.S)


class Header:
    """What the generator knows after reading the headers in order."""

    def __init__(self):
        self.defines = {}  # every #define seen: name -> text
        self.consts = {}  # integer #defines: name -> (value, literal, header)
        self.status_map = []  # (name, message) of CLCRT_STATUS_MAP
        self.structs = []  # (c name, [(field, ctypes expression, C type)], align, header)
        self.enums = []  # (c name, [(member, value)], header)
        self.funcs = []  # (c name, ctypes expression)
        self.types = {}  # C type name -> ("scalar"|"enum"|"struct"|"opaque"|"func", ctypes expr)
        self.values = {}  # enumerators and integer #defines: name -> value


def _preprocess(path, text, h):
    """The lines the compiler sees (others blanked), recording #defines as they come."""
    raw, lines = _blank_comments(text).split("\n"), []
    while len(lines) < len(raw):  # continued lines joined; blank ones after keep the numbering
        line, n = raw[len(lines)], 1
        while line.rstrip().endswith("\\") and len(lines) + n < len(raw):
            line, n = line.rstrip()[:-1] + " " + raw[len(lines) + n], n + 1
        lines += [line] + [""] * (n - 1)
    out, stack = [], []  # stack: (this branch is live, some branch was taken, parent live)
    for no, line in enumerate(lines, 1):
        s = line.strip()
        live = all(e[0] for e in stack)
        d = re.match(r"#\s*(\w+)\s*(.*)", s)
        if not d:
            out.append(line if live else "")
            continue
        out.append("")
        word, rest = d.group(1), d.group(2).strip()
        if word in ("elif", "else", "endif") and not stack:
            raise GenError("%s:%d: #%s without #if" % (path, no, word))
        if word in ("if", "ifdef", "ifndef"):
            cond = {"ifdef": "defined(%s)" % rest, "ifndef": "!defined(%s)" % rest}.get(word, rest)
            val = live and _eval_if(cond, h, path, no)
            stack.append([val, val, live])
        elif word == "elif":
            e = stack[-1]
            e[0] = e[2] and not e[1] and _eval_if(rest, h, path, no)
            e[1] = e[1] or e[0]
        elif word == "else":
            e = stack[-1]
            e[0], e[1] = e[2] and not e[1], True
        elif word == "endif":
            stack.pop()
        elif word == "define" and live:
            m = re.match(r"(\w+)(\([^)]*\))?\s*(.*)", rest)
            name, params, body = m.group(1), m.group(2), m.group(3).strip()
            h.defines[name] = body
            if params is None and _int(body) is not None:
                h.consts[name] = (_int(body), body, path)
                h.values[name] = _int(body)
            elif name == "CLCRT_STATUS_MAP":
                h.status_map = [(n, msg) for n, msg in re.findall(r'X\(\s*(\w+)\s*,\s*"((?:\\.|[^"\\])*)"\s*\)', body)]
                if len(h.status_map) != body.count("X("):
                    raise GenError("%s:%d: CLCRT_STATUS_MAP: an entry is not X(NAME, \"message\")" % (path, no))
        elif word == "undef" and live:
            h.defines.pop(rest, None)
    if stack:
        raise GenError("%s: an #if has no #endif" % path)
    return "\n".join(out)


def _eval_if(cond, h, path, no):
    expr = re.sub(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
                  lambda m: " 1 " if (m.group(1) or m.group(2)) in h.defines or (m.group(1) or m.group(2)) in
                  PREDEFINED else " 0 ", cond)
    expr = expr.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!(?!=)", " not ", expr)
    expr = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: m.group(0) if m.group(0) in ("and", "or", "not") else
                  str(h.values.get(m.group(0), 0)), expr)
    if not re.fullmatch(r"(\s|\d+|and|or|not|[()<>=!+\-*])*", expr):
        raise GenError("%s:%d: cannot evaluate #if %s" % (path, no, cond))
    return bool(eval(expr, {"__builtins__": {}}))


def _statements(code):
    """Top-level statements (text up to a ';' outside braces and parentheses), with their line."""
    out, depth, start, line, start_line = [], 0, 0, 1, 1
    for i, ch in enumerate(code):
        if ch == "\n":
            line += 1
        elif ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
        elif ch == ";" and depth == 0:
            text = code[start:i]
            out.append((text.strip(), start_line + text[: len(text) - len(text.lstrip())].count("\n")))
            start, start_line = i + 1, line
    return out


def _strip_attributes(text):
    """text without CLCRT_API and __attribute__((...)), and the aligned(N) among those."""
    align, out, i = None, [], 0
    text = re.sub(r"\bCLCRT_API\b", " ", text)
    while True:
        j = text.find("__attribute__", i)
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        k, depth = text.index("(", j), 0
        while True:
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                break
        m = re.search(r"\baligned\s*\(\s*(\d+)\s*\)", text[j:k])
        if m:
            align = int(m.group(1))
        out.append(" ")
        i = k
    return "".join(out), align


def _tokens(text):
    return re.findall(r"[A-Za-z_]\w*|\d\w*|\.\.\.|\S", text)


def _ctype(h, words, stars, where):
    """The ctypes expression of a C type: base type words and pointer depth."""
    base = " ".join(w for w in words if w not in ("const", "volatile", "struct", "enum"))
    if stars and base == "void":
        return "c.c_void_p" if stars == 1 else "c.POINTER(%s)" % _ctype(h, words, stars - 1, where)
    if stars and base == "char":
        return "c.c_char_p" if stars == 1 else "c.POINTER(%s)" % _ctype(h, words, stars - 1, where)
    if base in SCALARS:
        t = "c." + SCALARS[base]
    elif base in h.types:
        kind, t = h.types[base]
        if kind == "opaque":
            if stars == 0:
                raise GenError("%s: %s is opaque: only a pointer to it can cross" % (where, base))
            return "c.c_void_p" if stars == 1 else "c.POINTER(%s)" % _ctype(h, words, stars - 1, where)
    else:
        raise GenError("%s: no ctypes type for C type %r" % (where, base))
    for _ in range(stars):
        t = "c.POINTER(%s)" % t
    return t


TYPE_WORDS = {"const", "volatile", "unsigned", "signed", "int", "long", "short", "char", "void", "float", "double",
              "struct", "enum"}


def _declaration(h, text, where, need_name=True):
    """[(name, ctypes expression, C type)] of one declaration, `T a, *b, c[N]`; a parameter
    (need_name False) may have no name."""
    if ":" in text or "(" in text or "{" in text:
        raise GenError("%s: cannot read %r (a bitfield, function pointer or nested type)" % (where, text.strip()))
    out, base = [], None
    for i, part in enumerate(text.split(",")):
        toks = _tokens(part)
        end = toks.index("[") if "[" in toks else len(toks)
        last = toks[end - 1] if end else None
        named = need_name or (end > 1 and re.match(r"[A-Za-z_]\w*$", last) is not None and last not in TYPE_WORDS
                              and last not in SCALARS and last not in h.types)
        if not end or (named and not re.match(r"[A-Za-z_]\w*$", last)):
            raise GenError("%s: cannot read declaration %r" % (where, text.strip()))
        prefix = toks[: end - 1] if named else toks[:end]
        stars = prefix.count("*")
        words = [w for w in prefix if w != "*"]
        if i == 0:
            base = words
        elif [w for w in words if w != "const"]:
            raise GenError("%s: cannot read declarator %r" % (where, part.strip()))
        t = _ctype(h, base, stars, where)
        ctext = " ".join(base) + " *" * stars
        dims, rest = [], toks[end:]
        while rest:  # array dimensions: C writes the outermost first, ctypes applies it last
            if len(rest) < 3 or rest[0] != "[" or rest[2] != "]":
                raise GenError("%s: cannot read %r" % (where, text.strip()))
            if _int(rest[1]) is None and rest[1] not in h.consts:
                raise GenError("%s: array size %r is not a constant" % (where, rest[1]))
            dims.append(_py_name(rest[1]) if rest[1] in h.consts else str(_int(rest[1])))
            ctext, rest = "%s[%s]" % (ctext, rest[1]), rest[3:]
        t = " * ".join([t] + dims[::-1])
        out.append((last if named else None, t, ctext))
    return out


def _typedef(h, text, where, path):
    text, align = _strip_attributes(text)
    body_at = text.find("{")
    if body_at >= 0:
        head, body, tail = text[:body_at], text[body_at + 1 : text.rindex("}")], text[text.rindex("}") + 1 :]
        kind = _tokens(head)[1] if len(_tokens(head)) > 1 else ""
        alias = _tokens(tail)
        if len(alias) != 1 or kind not in ("struct", "enum"):
            raise GenError("%s: cannot read typedef %r" % (where, text[:60]))
        name = alias[0]
        if kind == "struct":
            fields = []
            for decl, _ in _statements(body):
                if decl:
                    fields += _declaration(h, decl, "%s (%s)" % (where, name))
            if body.strip() and not body.strip().endswith(";"):
                raise GenError("%s: %s: text after the last field" % (where, name))
            h.structs.append((name, fields, align, path))
            h.types[name] = ("struct", _class_name(name))
        else:
            h.enums.append((name, _enum_members(h, body, where), path))
            h.types[name] = ("enum", "c.c_int")
        return
    m = re.fullmatch(r"typedef\s+(.+?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)", text.strip(), re.S)
    if m:  # a function pointer type
        ret, name, params = m.group(1), m.group(2), m.group(3).strip()
        rt = _tokens(ret)
        restype = "None" if rt == ["void"] else _ctype(h, [w for w in rt if w != "*"], rt.count("*"), where)
        args = []
        if params not in ("", "void"):
            for p in params.split(","):
                args.append(_declaration(h, p, where, need_name=False)[0][1])
        h.funcs.append((name, "c.CFUNCTYPE(%s)" % ", ".join([restype] + args)))
        h.types[name] = ("func", name[len("clcrt_"):].upper() if name.startswith("clcrt_") else name)
        return
    toks = _tokens(text)
    if len(toks) >= 4 and toks[1] == "struct" and re.match(r"\w+$", toks[-1]):  # opaque, or pointer to one
        h.types[toks[-1]] = ("opaque", "c.c_void_p") if toks.count("*") == 0 else ("scalar", "c.c_void_p")
        return
    if len(toks) >= 3 and re.match(r"[A-Za-z_]\w*$", toks[-1]):  # another name for a type it knows
        words = toks[1:-1]
        h.types[toks[-1]] = ("scalar", _ctype(h, [w for w in words if w != "*"], words.count("*"), where))
        return
    raise GenError("%s: cannot read %r" % (where, text[:60]))


def _enum_members(h, body, where):
    members, nxt = [], 0
    for item in (s.strip() for s in body.split(",")):
        if not item:
            continue
        x = re.fullmatch(r"(\w+)\s*\(\s*(\w+)\s*\)\s*(\w*)", item, re.S)
        if x and x.group(1) == "CLCRT_STATUS_MAP":  # the X-macro: one enumerator per entry, then the rest
            for n, _ in h.status_map:
                members.append(("CLCRT_" + n, nxt))
                h.values["CLCRT_" + n] = nxt
                nxt += 1
            item = x.group(3)
            if not item:
                continue
        m = re.fullmatch(r"([A-Za-z_]\w*)(?:\s*=\s*(\w+))?", item)
        if not m:
            raise GenError("%s: cannot read enumerator %r" % (where, item))
        if m.group(2) is not None:
            v = _int(m.group(2)) if _int(m.group(2)) is not None else h.values.get(m.group(2))
            if v is None:
                raise GenError("%s: enumerator value %r is not a constant" % (where, m.group(2)))
            nxt = v
        if not -(1 << 31) <= nxt < 1 << 31:
            raise GenError("%s: %s = %d does not fit an int" % (where, m.group(1), nxt))
        members.append((m.group(1), nxt))
        h.values[m.group(1)] = nxt
        nxt += 1
    return members


def _class_name(c_name):
    """clcrt_tile_desc: TileDesc."""
    name = c_name[len("clcrt_"):] if c_name.startswith("clcrt_") else c_name
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def parse(repo=REPO, headers=HEADERS):
    h = Header()
    for rel in headers:
        with open(os.path.join(repo, rel)) as f:
            code = _preprocess(rel, f.read(), h)
        for text, line in _statements(code):
            if re.match(r"typedef\b", text):
                _typedef(h, text, "%s:%d" % (rel, line), rel)
            elif "{" in text:  # a struct or enum without a typedef: Python would never see it
                raise GenError("%s:%d: cannot read %r: public types are typedefs" % (rel, line, text[:60]))
    if not h.status_map:
        raise GenError("no CLCRT_STATUS_MAP in %s" % ", ".join(headers))
    return h


# ---- output ---------------------------------------------------------------------------------

STAMP = "Generated by python/gen_types.py from %s: do not edit." % " and ".join(HEADERS)


def _py_name(c_name):
    return c_name[len("CLCRT_"):] if c_name.startswith("CLCRT_") else c_name


def _short_names(members):
    """Enumerators without the prefix they share (CLCRT_SCHED_STEAL: STEAL)."""
    names = [n for n, _ in members]
    prefix = os.path.commonprefix(names) if len(names) > 1 else "CLCRT_"
    prefix = prefix[: prefix.rfind("_") + 1]
    return [(n[len(prefix):], v) for n, v in members]


def python_source(h):
    out = ['"""ctypes declarations of %s.' % " and ".join(HEADERS), "", STAMP,
           "",
           "`make python` generates the copy the wheel holds from the headers it builds; this checked-in",
           "copy is for readers and diffs, and a test keeps it current: run `python3 python/gen_types.py`",
           'after changing a header. python/clcrt/_types.py says how the package uses it."""', "",
           "import ctypes as c", "", "# ---- integer #define constants (CLCRT_ dropped)"]
    path = None
    for name, (value, literal, where) in h.consts.items():
        if where != path:
            out += ["", "# %s" % where]
            path = where
        out.append("%s = %s" % (_py_name(name), hex(value) if literal.lower().startswith("0x") else value))
    out += ["", "DEFINES = {"] + ['    "%s": %s,' % (_py_name(n), _py_name(n)) for n in h.consts] + ["}", "",
            "# ---- enums: each enumerator (CLCRT_ dropped), and ENUMS[c name] without the shared prefix", ""]
    for name, members, path in h.enums:
        out.append("# %s (%s)" % (name, path))
        out += ["%s = %d" % (_py_name(n), v) for n, v in members]
        out.append("")
    out.append("ENUMS = {")
    for name, members, _ in h.enums:
        items = ", ".join('("%s", %d)' % m for m in _short_names(members)) + ("," if len(members) == 1 else "")
        out += textwrap.wrap(items, 112, initial_indent='    "%s": (' % name, subsequent_indent=" " * 8,
                             break_on_hyphens=False)
        out[-1] += "),"
    out += ["}", "", "# CLCRT_STATUS_MAP: (name, message), in the order of the enum's values", "STATUS_MAP = ("]
    out += ["    (%r, %r)," % (n, msg.encode().decode("unicode_escape")) for n, msg in h.status_map]
    out += [")", "", "# ---- function pointer types", ""]
    out += ["%s = %s  # %s" % (h.types[n][1], t, n) for n, t in h.funcs]
    out += ["", "# ---- structures"]
    enum_fields = {n for n, _, _ in h.enums}
    for name, fields, align, path in h.structs:
        out += ["", "", "class %s(c.Structure):" % _class_name(name), '    """%s (%s)."""' % (name, path), ""]
        if align:
            out += ["    # __attribute__((aligned(%d))), which ctypes before 3.13 cannot express: clcrt.Args" % align,
                    "    # places the structure by it.", "    _clcrt_align_ = %d" % align]
        out.append("    _fields_ = [")
        for f, t, ctext in fields:
            note = ctext if ctext in enum_fields or h.types.get(ctext, ("",))[0] == "func" else None
            out.append('        ("%s", %s),%s' % (f, t, "  # " + note if note else ""))
        out.append("    ]")
    out += ["", "", "STRUCTS = {"] + ['    "%s": %s,' % (n, _class_name(n)) for n, _, _, _ in h.structs] + ["}", ""]
    out += ["__all__ = sorted(n for n in globals() if not n.startswith(\"_\") and n != \"c\")", ""]
    return "\n".join(out)


def layout_source(h, py_text):
    """layout_gen.h: the structures for clcrt_py_layout, and the layout ctypes gives the classes
    of py_text as assertions the compiler checks against the headers."""
    ns = {"__name__": "_types_gen"}
    exec(compile(py_text, "_types_gen.py", "exec"), ns)
    out = ["/* %s" % STAMP, " *",
           " * CLCRT_PY_LAYOUT(S, F) names every structure the Python package declares (S) and each of its",
           " * fields (F), in order: clcrt_py_layout (shim.c) describes them as the compiler lays them out.",
           " * The assertions after it are the layout ctypes gives the generated classes (_types_gen.py)",
           " * and the values the generator read: should the compiler disagree, the generator misread",
           " * the headers, and the build stops here rather than a Python call corrupting memory. */",
           "#ifndef CLCRT_PY_LAYOUT_GEN_H", "#define CLCRT_PY_LAYOUT_GEN_H", "#include <stddef.h>", "",
           '#include "clcrt_ops.h"', "", "#define CLCRT_PY_LAYOUT(S, F) \\"]
    for name, fields, _, _ in h.structs:
        out.append("  S(%s) \\" % name)
        out += ["  F(%s, %s) \\" % (name, f) for f, _, _ in fields]
    # clcrt_py_layout's text: "T size" and "T.f offset size" lines of at most 20-digit numbers.
    text_bytes = 1 + sum(len(n) + 22 + sum(len(n) + len(f) + 44 for f, _, _ in fields) for n, fields, _, _ in h.structs)
    out += ["", "#define CLCRT_PY_LAYOUT_TEXT_BYTES %d /* at most */" % text_bytes, "",
            "#define CLCRT_PY_FIELD_SIZE(T, f) sizeof(((T *)0)->f)", ""]
    for name, fields, align, _ in h.structs:
        cls = ns[_class_name(name)]
        a = max(ctypes.alignment(cls), align or 0)
        out.append('_Static_assert(sizeof(%s) == %d && _Alignof(%s) == %d, "%s: ctypes has size %d, alignment %d");'
                   % (name, ctypes.sizeof(cls), name, a, name, ctypes.sizeof(cls), a))
        for f, _, _ in fields:
            d = getattr(cls, f)
            out.append('_Static_assert(offsetof(%s, %s) == %d && CLCRT_PY_FIELD_SIZE(%s, %s) == %d, '
                       '"%s.%s: ctypes has offset %d, size %d");' % (name, f, d.offset, name, f, d.size, name, f,
                                                                    d.offset, d.size))
    out.append("")
    for name, members, _ in h.enums:
        out.append('_Static_assert(sizeof(%s) == sizeof(int), "%s: ctypes has an int");' % (name, name))
        out += ['_Static_assert(%s == %d, "%s: %d in Python");' % (n, v, n, v) for n, v in members]
    out += ['_Static_assert(%s == %d, "%s: %d in Python");' % (n, v, n, v) for n, (v, _, _) in h.consts.items()]
    out += ["", "#endif", ""]
    return "\n".join(out)


def generate(repo=REPO):
    """(the Python module, the C header) for the headers under repo."""
    h = parse(repo)
    py = python_source(h)
    return py, layout_source(h, py)


def _write(path, text):
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    if old != text:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if python/clcrt/_types_gen.py is out of date")
    ap.add_argument("--out", help="write _types_gen.py and layout_gen.h into this directory")
    a = ap.parse_args(argv)
    try:
        py, c_text = generate()
    except GenError as e:
        print("gen_types.py: %s" % e, file=sys.stderr)
        return 2
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        _write(os.path.join(a.out, "_types_gen.py"), py)
        _write(os.path.join(a.out, "layout_gen.h"), c_text)
    elif a.check:
        with open(CHECKED_IN) as f:
            if f.read() != py:
                print("gen_types.py: %s is out of date with %s: run python3 python/gen_types.py"
                      % (os.path.relpath(CHECKED_IN, REPO), " and ".join(HEADERS)), file=sys.stderr)
                return 1
    else:
        _write(CHECKED_IN, py)
    return 0


if __name__ == "__main__":
    sys.exit(main())
