"""clcrt.Error and its subclasses, one per clcrt_status.

Every failure raises one of these. ``status`` is the C status (an int, ``status_name`` its
name such as "CLCRT_E_COMPILE") and ``message`` the runtime's detail (``clcrt_errmsg``: the
NVRTC log at the user's own line numbers, the driver call that failed, the numbers that made
a launch invalid). Checks made in Python (a CPU tensor, a wrong dtype) raise the same classes
with a message of their own, so callers catch one hierarchy. Some subclasses also derive
from the matching built-in exception (InvalidError is a ValueError, NotFoundError a
LookupError, ...), so generic handlers keep working.
"""

import re

from ._types_gen import STATUS_MAP

# CLCRT_STATUS_MAP of include/clcrt.h, generated (python/gen_types.py): a status's value is its
# index. A status added there reaches Python as an Error with its name; a class of its own is
# added below (a test asks for one).
STATUS_NAMES = tuple("CLCRT_" + name for name, _ in STATUS_MAP)
STATUS = {name: i for i, name in enumerate(STATUS_NAMES)}

# The library's messages name what a C caller set (desc->tile_fn, opts.target_arch,
# CLCRT_SCHED_STEAL); a Python caller wrote keywords and values (tile_fn=, arch=, sched="steal").
# Applied in order to every message but NVRTC's logs, which quote the user's own code.
_KEYWORDS = {"target_arch": "arch", "args_type": "args"}


def _kw(m):
    return _KEYWORDS.get(m.group(1), m.group(1)) + "="


_PYTHON_WORDS = (
    (re.compile(r'\bopts\.target_arch \(e\.g\. ("\w+")\)'), r"arch=\1"),
    (re.compile(r"\bset opts\.(\w+) to NULL"), r"pass \1=None"),
    (re.compile(r"\b(?:clcrt_runtime_opts|opts)\.(\w+)(?: is )?"), _kw),
    (re.compile(r"\bdesc->options\[(\d+)\]"), r"options[\1]"),
    (re.compile(r'\bdesc->(\w+)(?: is | (?="))?'), _kw),
    (re.compile(r'\btarget_arch (?=")'), "arch="),
    (re.compile(r"\btarget_arch\b"), "arch"),
    (re.compile(r"\bCLCRT_(SCHED|GRID)_([A-Z]+)\b"), lambda m: '%s="%s"' % (m.group(1).lower(), m.group(2).lower())),
    (re.compile(r"\bCLCRT_STREAM_SM_ROUND_(UP|DOWN)\b"), lambda m: 'round="%s"' % m.group(1).lower()),
    (re.compile(r"\bCLCRT_USE_([A-Z]+)\b"), r"clcrt.Use.\1"),
)


def python_words(message):
    """A message of the library in the words of the Python API."""
    for pattern, repl in _PYTHON_WORDS:
        message = pattern.sub(repl, message)
    return message


class Error(Exception):
    """A clcrt failure: ``status`` (int), ``status_name``, ``message`` (the detail)."""

    status = None

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
        self.message = message
        super().__init__(message)

    @property
    def status_name(self):
        if self.status is None or not 0 <= self.status < len(STATUS_NAMES):
            return "CLCRT_E_UNKNOWN"
        return STATUS_NAMES[self.status]

    def __str__(self):
        return "%s: %s" % (self.status_name, self.message)


class InvalidError(Error, ValueError):
    status = STATUS["CLCRT_E_INVALID"]


class CompileError(Error):
    """NVRTC could not compile: ``message`` holds its log, at the user's own line numbers."""

    status = STATUS["CLCRT_E_COMPILE"]


class ArgsMismatchError(CompileError):
    """The Python Args declaration and the device struct disagree (checked by NVRTC while
    compiling the kernel). ``mismatches`` lists them as (field, what, device, python)."""

    def __init__(self, message, mismatches=(), log=""):
        super().__init__(message)
        self.mismatches = list(mismatches)
        self.log = log


class NoDeviceError(Error, RuntimeError):
    status = STATUS["CLCRT_E_NO_DEVICE"]


class UnsupportedError(Error, RuntimeError):
    status = STATUS["CLCRT_E_UNSUPPORTED"]


class CudaError(Error, RuntimeError):
    status = STATUS["CLCRT_E_CUDA"]


class NoMemoryError(Error, MemoryError):
    status = STATUS["CLCRT_E_NOMEM"]


class FileError(Error, OSError):
    status = STATUS["CLCRT_E_IO"]

    def __str__(self):  # OSError's own __str__ would drop the status
        return Error.__str__(self)


class CorruptError(Error, ValueError):
    status = STATUS["CLCRT_E_CORRUPT"]


class NotFoundError(Error, LookupError):
    status = STATUS["CLCRT_E_NOT_FOUND"]


class BusyError(Error, RuntimeError):
    status = STATUS["CLCRT_E_BUSY"]


class CancelledError(Error, RuntimeError):
    """The runtime was destroyed before the operation finished."""

    status = STATUS["CLCRT_E_CANCELLED"]


class LibraryError(Error, ImportError):
    """The bundled library or NVRTC could not be loaded."""

    status = STATUS["CLCRT_E_NOT_FOUND"]


CLASSES = {
    STATUS["CLCRT_E_INVALID"]: InvalidError,
    STATUS["CLCRT_E_COMPILE"]: CompileError,
    STATUS["CLCRT_E_NO_DEVICE"]: NoDeviceError,
    STATUS["CLCRT_E_UNSUPPORTED"]: UnsupportedError,
    STATUS["CLCRT_E_CUDA"]: CudaError,
    STATUS["CLCRT_E_NOMEM"]: NoMemoryError,
    STATUS["CLCRT_E_IO"]: FileError,
    STATUS["CLCRT_E_CORRUPT"]: CorruptError,
    STATUS["CLCRT_E_NOT_FOUND"]: NotFoundError,
    STATUS["CLCRT_E_BUSY"]: BusyError,
    STATUS["CLCRT_E_CANCELLED"]: CancelledError,
}


def error_for(status, message):
    """The exception for a C status and its message (in Python's words, NVRTC's logs as they are)."""
    cls = CLASSES.get(status, Error)
    e = cls(message if status == STATUS["CLCRT_E_COMPILE"] else python_words(message))
    e.status = status
    return e
