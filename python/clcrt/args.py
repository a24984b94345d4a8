"""Args: the kernel's argument struct, declared once in Python and checked against the device.

A tile function takes one plain struct, ``Args``, declared in its CUDA source. In Python the
same struct is declared as a subclass of :class:`Args`, with the fields in the same order::

    class ScaleArgs(clcrt.Args):
        x: clcrt.ptr("float32")   # a device pointer; tensors of another dtype are refused
        n: clcrt.i64
        alpha: clcrt.f32

(or ``_fields_ = [("x", clcrt.ptr("float32")), ...]`` on any Python). The class lays the
fields out by the C rules (each at a multiple of its alignment, the size a multiple of the
largest), and an instance is the packed bytes that ``clcrt_run`` copies, so a run packs
nothing.

Why it cannot drift silently: when a kernel is registered with ``args=ScaleArgs``, the
declaration is turned into compile-time checks appended to the tile source (see
:func:`check_source`), and NVRTC evaluates them against the real device struct while it
compiles the kernel: every field's offset, size and kind (pointer, signed or unsigned
integer, floating point, bool), the pointee of typed pointers, and the struct's size. A
mismatch fails the registration with :class:`clcrt.ArgsMismatchError`, which names each field
and both sides' numbers. At run time ``clcrt_run`` checks the size once more against the
compiled kernel's parameter (``cuFuncGetParamInfo``).

The offsets are compared through ``__INTADDR__``, the constant-folding built-in of NVRTC's
front end (EDG): NVRTC has no ``offsetof`` of its own and rejects the null-pointer form in
constant expressions. If a future NVRTC dropped it, registration with ``args=`` would fail
loudly (the CPU tests cover it), and ``check_args=False`` registers without the checks.
"""

import ctypes
import operator
import re
import sys

from ._errors import ArgsMismatchError, InvalidError
from . import _types
from . import tensors as _tensors

# ---- field types -------------------------------------------------------------------------

i8, i16, i32, i64 = ctypes.c_int8, ctypes.c_int16, ctypes.c_int32, ctypes.c_int64
u8, u16, u32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64
f32, f64 = ctypes.c_float, ctypes.c_double
bool_ = ctypes.c_bool

# Kinds of C++ types, as the generated checks classify them (KIND_CODE in check_source).
K_OTHER, K_BOOL, K_SINT, K_UINT, K_FLOAT, K_PTR, K_ARRAY, K_VOID = range(8)
KIND_NAMES = (
    "a struct, enum or other type",
    "bool",
    "a signed integer",
    "an unsigned integer",
    "a floating-point type",
    "a pointer",
    "an array",
    "void",
)
_SIMPLE_KINDS = {
    "b": K_SINT, "h": K_SINT, "i": K_SINT, "l": K_SINT, "q": K_SINT, "c": K_SINT,
    "B": K_UINT, "H": K_UINT, "I": K_UINT, "L": K_UINT, "Q": K_UINT,
    "f": K_FLOAT, "d": K_FLOAT, "?": K_BOOL,
}  # fmt: skip


class TensorMap(_types.TensorMap):
    """A 2-D TMA descriptor (``clcrt_tensor_map``, 128 bytes, 64-byte aligned in Args), made
    by :meth:`clcrt.Runtime.tensor_map_2d`. Declare the field as ``clcrt.TensorMap``."""


class ptr:
    """A device pointer field: 8 bytes, a tensor or an int when set.

    ``clcrt.ptr`` (or ``ptr()``) takes any tensor; ``ptr("float32")`` (or ``ptr[torch.float32]``)
    only tensors of that dtype, and the device struct's field must point to a type of that
    kind and size (``float *``; ``void *`` and integer fields such as ``CUdeviceptr`` pass)."""

    def __init__(self, dtype=None):
        self.dtype = _tensors.dtype_name(dtype) if dtype is not None else None

    def __class_getitem__(cls, dtype):
        return cls(dtype)

    def __repr__(self):
        return "clcrt.ptr(%r)" % self.dtype if self.dtype else "clcrt.ptr"


def array(t, n):
    """An array field of n elements of t (C: ``T name[n]``)."""
    if not isinstance(n, int) or n <= 0:
        raise InvalidError("clcrt.array: the length must be a positive int, not %r" % (n,))
    return _ctype(t) * n


# The pointee a typed pointer's device field may have: allowed kinds, size in bytes.
_POINTEE = {
    "float32": ((K_FLOAT,), 4), "float64": ((K_FLOAT,), 8),
    "float16": ((K_OTHER, K_UINT), 2), "bfloat16": ((K_OTHER, K_UINT), 2),
    "int8": ((K_SINT,), 1), "int16": ((K_SINT,), 2), "int32": ((K_SINT,), 4), "int64": ((K_SINT,), 8),
    "uint8": ((K_UINT,), 1), "uint16": ((K_UINT,), 2), "uint32": ((K_UINT,), 4), "uint64": ((K_UINT,), 8),
    "bool": ((K_BOOL, K_UINT), 1),
}  # fmt: skip


class _Field:
    __slots__ = ("name", "offset", "size", "align", "kinds", "pointee", "dtype", "ctype", "spec", "bounds")

    def describe(self):
        return "%s@%d (%s, %d bytes)" % (self.name, self.offset, type_name(self.spec), self.size)


_SIMPLE_NAMES = {"b": "i8", "h": "i16", "i": "i32", "l": "i64", "q": "i64", "B": "u8", "H": "u16", "I": "u32",
                 "L": "u64", "Q": "u64", "f": "f32", "d": "f64", "?": "bool_", "c": "i8"}


def type_name(t):
    """A field type as the package spells it (clcrt.f32, clcrt.ptr('float32'), ...)."""
    if isinstance(t, ptr) or t is ptr:
        return repr(t) if isinstance(t, ptr) else "clcrt.ptr"
    if isinstance(t, type) and issubclass(t, ctypes._SimpleCData) and t._type_ in _SIMPLE_NAMES:
        return "clcrt." + _SIMPLE_NAMES[t._type_]
    if isinstance(t, type) and issubclass(t, ctypes.Array):
        return "clcrt.array(%s, %d)" % (type_name(t._type_), t._length_)
    return getattr(t, "__name__", repr(t))


def _ctype(t):
    """The ctypes type a field of declared type t is stored as."""
    if isinstance(t, ptr) or t is ptr:
        return ctypes.c_uint64
    if t is ctypes.c_void_p:
        return ctypes.c_uint64
    if isinstance(t, type) and issubclass(t, ctypes._SimpleCData) and t._type_ in _SIMPLE_KINDS:
        return t
    if isinstance(t, type) and issubclass(t, (ctypes.Structure, ctypes.Array)):
        return t
    raise InvalidError(
        "%r is not an Args field type: use clcrt.i8 .. clcrt.u64, clcrt.f32, clcrt.f64, clcrt.bool_, "
        "clcrt.ptr or clcrt.ptr(dtype), clcrt.TensorMap, another clcrt.Args, or clcrt.array(type, n)" % (t,)
    )


def _int_bounds(ct):
    """(least, greatest) value an integer field (or an array's integer elements) can hold, else
    None. ctypes stores an integer modulo 2^bits without a word, so the field checks these."""
    while isinstance(ct, type) and issubclass(ct, ctypes.Array):
        ct = ct._type_
    if not (isinstance(ct, type) and issubclass(ct, ctypes._SimpleCData)) or ct._type_ == "c":
        return None
    kind, bits = _SIMPLE_KINDS.get(ct._type_), 8 * ctypes.sizeof(ct)
    if kind == K_SINT:
        return -(1 << bits - 1), (1 << bits - 1) - 1
    return (0, (1 << bits) - 1) if kind == K_UINT else None


def _size_align(t):
    """C size and alignment of a declared field type (Args keep their own rules; TensorMap
    is 64-aligned as in clcrt.h, which ctypes before 3.13 cannot express)."""
    if isinstance(t, ptr) or t is ptr or t is ctypes.c_void_p:
        return 8, 8
    if isinstance(t, type) and issubclass(t, Args) and "_clcrt_size_" in t.__dict__:
        return t._clcrt_size_, t._clcrt_align_
    if t is TensorMap:
        return ctypes.sizeof(t), t._clcrt_align_
    if isinstance(t, type) and issubclass(t, ctypes.Array):
        es, ea = _size_align(t._type_)
        return es * t._length_, ea
    ct = _ctype(t)
    return ctypes.sizeof(ct), ctypes.alignment(ct)


def _kinds(t):
    if isinstance(t, ptr) or t is ptr or t is ctypes.c_void_p:
        return (K_PTR, K_SINT, K_UINT)  # a pointer, or a 64-bit integer such as CUdeviceptr
    if isinstance(t, type) and issubclass(t, ctypes._SimpleCData):
        return (_SIMPLE_KINDS[t._type_],)
    if isinstance(t, type) and issubclass(t, ctypes.Array):
        return (K_ARRAY,)
    return (K_OTHER, K_ARRAY)  # structs (Args, TensorMap): size and offset are what is checked


def _layout(cls_name, decl):
    fields, off, align = [], 0, 1
    seen = set()
    for item in decl:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise InvalidError("Args %s: each field is a (name, type) pair, not %r" % (cls_name, item))
        name, t = item
        if not name.isidentifier() or name.startswith("_"):
            raise InvalidError("Args %s: field name %r must be an identifier that does not start with _" % (cls_name, name))
        if name in seen:
            raise InvalidError("Args %s: field %r is declared twice" % (cls_name, name))
        seen.add(name)
        f = _Field()
        f.name, f.spec, f.ctype = name, t, _ctype(t)
        f.size, f.align = _size_align(t)
        f.kinds = _kinds(t)
        f.dtype = t.dtype if isinstance(t, ptr) else None
        f.pointee = _POINTEE.get(f.dtype)
        f.bounds = None if f.kinds[0] == K_PTR else _int_bounds(f.ctype)
        off = (off + f.align - 1) // f.align * f.align
        f.offset = off
        off += f.size
        align = max(align, f.align)
        fields.append(f)
    size = (off + align - 1) // align * align
    return fields, size, align


def _ctypes_fields(fields, size):
    """ctypes fields at exactly the C offsets: packed, with explicit padding."""
    out, pos = [], 0
    for f in fields:
        if f.offset > pos:
            out.append(("_pad%d" % pos, ctypes.c_uint8 * (f.offset - pos)))
        out.append((f.name, f.ctype))
        pos = f.offset + f.size
    if size > pos:
        out.append(("_pad%d" % pos, ctypes.c_uint8 * (size - pos)))
    return out


class _ArgsMeta(type(ctypes.Structure)):
    def __new__(mcls, name, bases, ns, **kw):
        if ns.get("_clcrt_base_"):
            return super().__new__(mcls, name, bases, ns, **kw)
        for b in bases:
            if isinstance(b, _ArgsMeta) and not b.__dict__.get("_clcrt_base_"):
                raise InvalidError("Args %s: derive from clcrt.Args itself, not from another Args (%s)" % (name, b.__name__))
        if "_fields_" in ns:
            decl = list(ns["_fields_"])
        else:
            ann = ns.get("__annotations__")
            annotate = ns.get("__annotate__") or ns.get("__annotate_func__")
            if ann is None and annotate is not None:  # Python 3.14: annotations are evaluated lazily
                ann = annotate(1)  # 1: annotationlib.Format.VALUE
            decl = list((ann or {}).items())
            # Under `from __future__ import annotations` they are strings: evaluate them where
            # the class is written.
            if any(isinstance(t, str) for _, t in decl):
                mod = sys.modules.get(ns.get("__module__", ""))
                env = dict(vars(mod)) if mod else {}
                try:
                    decl = [(k, eval(t, env, dict(ns)) if isinstance(t, str) else t) for k, t in decl]
                except Exception as e:
                    raise InvalidError("Args %s: an annotation could not be evaluated: %s" % (name, e)) from None
        fields, size, align = _layout(name, decl)
        ns = dict(ns)
        ns.pop("__annotations__", None)
        ns["_pack_"] = 1
        ns["_layout_"] = "ms"  # with _pack_: no implicit alignment at all (Python 3.13+ asks to be told)
        ns["_fields_"] = _ctypes_fields(fields, size)
        ns["_clcrt_fields_"] = tuple(fields)
        ns["_clcrt_by_name_"] = {f.name: f for f in fields}
        ns["_clcrt_ptrs_"] = frozenset(f.name for f in fields if f.ctype is ctypes.c_uint64 and f.kinds[0] == K_PTR)
        ns["_clcrt_size_"] = size
        ns["_clcrt_align_"] = align
        ns.setdefault("c_name", name)
        cls = super().__new__(mcls, name, bases, ns, **kw)
        if ctypes.sizeof(cls) != size:  # the padding above makes this hold; a guard, not a path
            raise InvalidError("Args %s: ctypes laid it out in %d bytes, not %d" % (name, ctypes.sizeof(cls), size))
        return cls


class Args(ctypes.Structure, metaclass=_ArgsMeta):
    """Base of Args declarations; see the module's documentation.

    ``c_name`` (a class attribute) is the device struct's C++ name when it differs from the
    class name (e.g. ``"ns::ScaleArgs"``). An instance keeps a reference to every tensor
    stored in it, so a tensor cannot be freed while Args that point to it exist."""

    _clcrt_base_ = True
    _fields_ = []

    def __init__(self, *args, **kw):
        d = self.__dict__
        d["_clcrt_refs"] = {}
        d["_clcrt_device"] = None
        d["_clcrt_ptr"] = ctypes.c_void_p(ctypes.addressof(self))
        fields = self._clcrt_fields_
        if len(args) > len(fields):
            raise InvalidError("%s takes %d fields, %d given" % (type(self).__name__, len(fields), len(args)))
        for f, v in zip(fields, args):
            setattr(self, f.name, v)
        for k, v in kw.items():
            if k not in self._clcrt_by_name_:
                raise InvalidError(
                    "%s has no field %r (fields: %s)" % (type(self).__name__, k, ", ".join(f.name for f in fields))
                )
            setattr(self, k, v)

    def __getattr__(self, name):
        # Instances made without __init__ (from_buffer_copy, copies) get their bookkeeping here,
        # on first use; normal lookups never come here.
        if name in ("_clcrt_ptr", "_clcrt_refs", "_clcrt_device"):
            d = self.__dict__
            d.setdefault("_clcrt_refs", {})
            d.setdefault("_clcrt_device", None)
            d.setdefault("_clcrt_ptr", ctypes.c_void_p(ctypes.addressof(self)))
            return d[name]
        raise AttributeError("%s has no attribute %r" % (type(self).__name__, name))

    def __setattr__(self, name, value):
        f = self._clcrt_by_name_.get(name)
        if f is None:
            if name.startswith("_"):
                return super().__setattr__(name, value)
            raise InvalidError("%s has no field %r" % (type(self).__name__, name))
        if f.ctype is ctypes.c_uint64 and f.kinds[0] == K_PTR:
            return self._set_ptr(f, value)
        if f.bounds is not None:
            self._check_int(f, f.name, value)
        if isinstance(value, (list, tuple)) and issubclass(f.ctype, ctypes.Array):
            try:
                value = f.ctype(*value)
            except (TypeError, ValueError, IndexError, OverflowError) as e:
                raise InvalidError("%s.%s: cannot store %r: %s" % (type(self).__name__, name, value, e)) from None
        # A TensorMap or nested Args copied in: keep what it points to alive, and its device.
        d = getattr(value, "__dict__", None) or {}
        if "_clcrt_src" in d:
            pairs = [d["_clcrt_src"]]
        else:
            pairs = [p for ps in d.get("_clcrt_refs", {}).values() for p in ps]
        old = self._keep(f.name, pairs)
        try:
            super().__setattr__(name, value)
        except (TypeError, ValueError, OverflowError) as e:
            self._keep(f.name, old or [])
            raise InvalidError("%s.%s: cannot store %r: %s" % (type(self).__name__, name, value, e)) from None

    def _check_int(self, f, where, value):
        """Refuses an integer (or a list's) that f cannot hold; other values are left to ctypes."""
        if isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                self._check_int(f, "%s[%d]" % (where, i), v)
            return
        try:
            v = operator.index(value)
        except TypeError:
            return
        lo, hi = f.bounds
        if not lo <= v <= hi:
            t = f.ctype
            while issubclass(t, ctypes.Array):
                t = t._type_
            bits = hi.bit_length()
            span = "0 to 2**%d-1" % bits if lo == 0 else "-2**%d to 2**%d-1" % (bits, bits)
            raise InvalidError("%s.%s: %d does not fit in %s (%s)" % (type(self).__name__, where, v, type_name(t), span))

    def _keep(self, name, pairs):
        """Records the (object, device) pairs a field refers to; returns the field's old ones.
        Refuses tensors of two devices in one Args."""
        refs = self._clcrt_refs
        devs = {dv for n, ps in refs.items() if n != name for _, dv in ps if dv is not None}
        devs |= {dv for _, dv in pairs if dv is not None}
        if len(devs) > 1:
            raise InvalidError(
                "%s.%s: its tensors would be on different devices (%s): a kernel runs on one"
                % (type(self).__name__, name, ", ".join("cuda:%d" % dv for dv in sorted(devs)))
            )
        old = refs.pop(name, None)
        if pairs:
            refs[name] = pairs
        self.__dict__["_clcrt_device"] = devs.pop() if devs else None
        return old

    def _set_ptr(self, f, value):
        if value is None or isinstance(value, int):
            addr, dev = (value or 0), None
            if addr < 0 or addr >= 1 << 64:
                raise InvalidError("%s.%s: %d is not an address" % (type(self).__name__, f.name, addr))
        else:
            info = _tensors.describe(value, "%s.%s" % (type(self).__name__, f.name))
            if f.dtype is not None and info.dtype != f.dtype:
                raise InvalidError(
                    "%s.%s is declared clcrt.ptr(%r) but the tensor is %s" % (type(self).__name__, f.name, f.dtype, info.dtype)
                )
            addr, dev = info.ptr, info.device
        self._keep(f.name, [(value, dev)] if not (value is None or isinstance(value, int)) else [])
        ctypes.Structure.__setattr__(self, f.name, addr)

    @property
    def device(self):
        """The CUDA device ordinal of the tensors stored in it, or None."""
        return self._clcrt_device

    def __repr__(self):
        parts = []
        for f in self._clcrt_fields_:
            v = getattr(self, f.name)
            if f.name in self._clcrt_ptrs_:
                v = "0x%x" % v
            elif isinstance(v, ctypes.Array) or isinstance(v, ctypes.Structure):
                v = "<%s>" % type(v).__name__
            parts.append("%s=%s" % (f.name, v))
        return "%s(%s)" % (type(self).__name__, ", ".join(parts))

    @classmethod
    def layout(cls):
        """[(name, offset, size)] of the fields, and the struct's size: what the device must have."""
        return [(f.name, f.offset, f.size) for f in cls._clcrt_fields_], cls._clcrt_size_


# ---- the checks NVRTC runs -----------------------------------------------------------------

CHECK_FILE = "<clcrt.Args %s>"

_CHECK_PRELUDE = r"""namespace clcrt_pyargs {
template <class T> struct kind { enum { v = 0 }; };
template <class T> struct kind<const T> : kind<T> {};
template <class T> struct kind<volatile T> : kind<T> {};
template <class T> struct kind<const volatile T> : kind<T> {};
template <> struct kind<bool> { enum { v = 1 }; };
template <> struct kind<char> { enum { v = 2 }; };
template <> struct kind<signed char> { enum { v = 2 }; };
template <> struct kind<short> { enum { v = 2 }; };
template <> struct kind<int> { enum { v = 2 }; };
template <> struct kind<long> { enum { v = 2 }; };
template <> struct kind<long long> { enum { v = 2 }; };
template <> struct kind<unsigned char> { enum { v = 3 }; };
template <> struct kind<unsigned short> { enum { v = 3 }; };
template <> struct kind<unsigned int> { enum { v = 3 }; };
template <> struct kind<unsigned long> { enum { v = 3 }; };
template <> struct kind<unsigned long long> { enum { v = 3 }; };
template <> struct kind<float> { enum { v = 4 }; };
template <> struct kind<double> { enum { v = 4 }; };
template <class T> struct kind<T *> { enum { v = 5 }; };
template <class T, unsigned long N> struct kind<T[N]> { enum { v = 6 }; };
template <> struct kind<void> { enum { v = 7 }; };
template <class T> struct pointee { typedef void type; };
template <class T> struct pointee<T *> { typedef T type; };
template <class T> struct size_of { enum { v = sizeof(T) }; };
template <> struct size_of<void> { enum { v = 0 }; };
template <> struct size_of<const void> { enum { v = 0 }; };
template <> struct size_of<volatile void> { enum { v = 0 }; };
template <> struct size_of<const volatile void> { enum { v = 0 }; };
// Field is the field's index in the Python declaration (-1: the whole struct); Device is what
// the device struct has, Python what the declaration says.
template <int Field, unsigned long Device, unsigned long Python> struct offset_mismatch {
  static_assert(Device == Python, "clcrt: Args: a field's offset differs from the Python declaration");
  enum { ok = 1 };
};
template <int Field, unsigned long Device, unsigned long Python> struct size_mismatch {
  static_assert(Device == Python, "clcrt: Args: a size differs from the Python declaration");
  enum { ok = 1 };
};
template <int Field, int Device, int Python> struct kind_mismatch {
  static_assert((Device & Python) != 0, "clcrt: Args: a field's type differs in kind from the Python declaration");
  enum { ok = 1 };
};
template <int Field, int Device, int Python, unsigned long DeviceSize, unsigned long PythonSize> struct pointee_mismatch {
  static_assert((Device & Python) != 0 && (DeviceSize == 0 || DeviceSize == PythonSize),
                "clcrt: Args: a pointer's element type differs from the Python declaration");
  enum { ok = 1 };
};
}  // namespace clcrt_pyargs
"""


def _mask(kinds):
    m = 0
    for k in kinds:
        m |= 1 << k
    return m


_SPLICE = re.compile(r"\\\r?\n")


def mentions(source, c_name):
    """Whether the last component of the C++ name c_name occurs in source as a whole identifier,
    line splices joined; always true when the source pastes tokens (## or %:%:), which may make
    the name. The check clcrt_register makes of desc->args_type (runtime/compile/validate.c),
    made here first because the checks appended to the source name the type themselves, which
    the library's check would find."""
    text = _SPLICE.sub("", source)
    if "##" in text or "%:%:" in text:
        return True
    last = re.escape(c_name.rsplit(":", 1)[-1])
    return re.search(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % last, text) is not None


def check_source(cls, c_name=None):
    """The C++ appended to the tile source so that NVRTC checks the declaration ``cls``."""
    t = c_name or cls.c_name
    lines = ["", "#line 1 \"%s\"" % (CHECK_FILE % t), _CHECK_PRELUDE]
    sa = "static_assert(clcrt_pyargs::%s<%s>::ok, \"\");"
    lines.append(sa % ("size_mismatch", "-1, sizeof(%s), %dul" % (t, cls._clcrt_size_)))
    for i, f in enumerate(cls._clcrt_fields_):
        member = "((%s *)0)->%s" % (t, f.name)
        dt = "decltype(%s::%s)" % (t, f.name)
        lines.append(sa % ("offset_mismatch", "%d, (unsigned long)__INTADDR__(&%s), %dul" % (i, member, f.offset)))
        lines.append(sa % ("size_mismatch", "%d, sizeof(%s), %dul" % (i, member, f.size)))
        lines.append(sa % ("kind_mismatch", "%d, 1 << clcrt_pyargs::kind<%s>::v, %d" % (i, dt, _mask(f.kinds))))
        if f.pointee:
            kinds, size = f.pointee
            p = "clcrt_pyargs::pointee<%s>::type" % dt
            lines.append(
                sa % ("pointee_mismatch", "%d, 1 << clcrt_pyargs::kind<%s>::v, %d, clcrt_pyargs::size_of<%s>::v, %dul"
                      % (i, p, _mask(kinds + (K_VOID,)), p, size))
            )
    return "\n".join(lines) + "\n"


_INST = re.compile(r'instantiation of class "clcrt_pyargs::(\w+)<[^"]*> \[with ([^\]]*)\]"')
_NO_MEMBER = re.compile(r'has no member "(\w+)"')


def _kind_list(mask):
    return " or ".join(KIND_NAMES[k] for k in range(8) if mask >> k & 1)


def mismatch_error(cls, c_name, log):
    """An ArgsMismatchError from NVRTC's log when the failures are the declaration's checks
    alone, else None (the user's own code failed: the log says more than we could)."""
    tag = CHECK_FILE % (c_name or cls.c_name)
    errors = [ln for ln in log.splitlines() if ": error" in ln]
    if not errors or not all(ln.startswith(tag) for ln in errors):
        return None
    fields = cls._clcrt_fields_
    found, seen = [], set()
    for m in _NO_MEMBER.finditer(log):
        if m.group(1) not in seen:
            seen.add(m.group(1))
            found.append((m.group(1), "field", "absent", "declared"))
    for m in _INST.finditer(log):
        what = m.group(1)
        p = {}
        for kv in m.group(2).split(","):
            if "=" in kv:
                k, v = kv.split("=", 1)
                p[k.strip()] = int(re.sub(r"[uUlL]+$", "", v.strip()), 0)
        i = p.get("Field", -1)
        name = fields[i].name if 0 <= i < len(fields) else "sizeof(%s)" % (c_name or cls.c_name)
        if name in seen and i >= 0 and what == "size_mismatch":
            continue
        if what == "offset_mismatch":
            found.append((name, "offset", p["Device"], p["Python"]))
        elif what == "size_mismatch":
            found.append((name, "size", p["Device"], p["Python"]))
        elif what == "kind_mismatch":
            found.append((name, "type", _kind_list(p["Device"]), _kind_list(p["Python"])))
        elif what == "pointee_mismatch":
            dev = _kind_list(p["Device"]) + (" of %d bytes" % p["DeviceSize"] if p.get("DeviceSize") else "")
            found.append((name, "element type", dev, "%s of %d bytes" % (_kind_list(p["Python"]), p["PythonSize"])))
    if not found:
        return None
    lines = [
        "the Python declaration %s does not match the device struct %s:" % (cls.__name__, c_name or cls.c_name)
    ]
    for name, what, dev, py in found:
        if what == "field":
            lines.append("  - %s: the device struct has no such field" % name)
        else:
            lines.append("  - %s: %s %s on the device, %s in Python" % (name, what, dev, py))
    lines.append(
        "Declare the fields in the device struct's order with the same types. Python's layout: %s; %d bytes."
        % (", ".join(f.describe() for f in fields), cls._clcrt_size_)
    )
    return ArgsMismatchError("\n".join(lines), found, log)
