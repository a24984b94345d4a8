"""The public structures, enums and constants of include/clcrt.h and include/clcrt_ops.h.

Nothing here is written by hand: python/gen_types.py reads the headers and generates
_types_gen.py (ctypes classes with the C field names, e.g. TileDesc for clcrt_tile_desc; enum
and #define values without CLCRT_, e.g. SCHED_STEAL; the status table), which this module
re-exports. The build checks the result twice: the generated C assertions (layout_gen.h,
compiled into the bundled library) stop `make python` when the compiler lays a structure out
otherwise than ctypes lays out its class, and the tests compare the classes, under the Python
that runs them, with the library's own description (``clcrt_py_layout``).
"""

import ctypes as c

from ._types_gen import *  # noqa: F401,F403
from ._types_gen import DEFINES, ENUMS, STRUCTS

# Every structure the layout check compares with the library's own description.
MIRRORS = STRUCTS


def sized(cls):
    """A zeroed instance with its ``size`` field set, like the C ..._INIT macros."""
    v = cls()
    v.size = c.sizeof(cls)
    return v


def members(c_enum):
    """An enum's (name, value) pairs without their shared prefix (clcrt_sched: AUTO, CLC, ...)."""
    return list(ENUMS[c_enum])


def flags(prefix):
    """The #define constants named prefix + NAME, as (NAME, value) pairs: CLCRT_USE_* for clcrt.Use."""
    return [(n[len(prefix):], v) for n, v in DEFINES.items() if n.startswith(prefix)]
