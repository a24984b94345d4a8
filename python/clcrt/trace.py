"""Timeline traces: records of which SM ran which tile when (clcrt_trace).

A Trace comes from a traced stream (``Stream.trace_read``), from a Perfetto JSON file
(``Trace.load``) or from records of your own (``Trace.from_records``). It saves as
Chrome/Perfetto trace-event JSON (open it in https://ui.perfetto.dev), summarises (busy
fraction per SM, span, tail, imbalance, steals) and draws as a PNG or SVG timeline; the
picture is drawn by the ``clcrt`` tool the wheel bundles (``clcrt trace draw``), so it needs
no plotting library.
"""

import collections
import ctypes
import dataclasses
import os
import tempfile

from . import _native
from . import _types as T
from ._errors import InvalidError, error_for

STOLEN = T.TRACE_STOLEN  # the unit was claimed, not the cluster's first

Record = collections.namedtuple("Record", "start_ns end_ns tile unit cluster run sm cta_rank flags")
Record.__doc__ = "One tile's run: %globaltimer start/end (ns), tile, work unit, cluster, run, SM, CTA rank, flags."


@dataclasses.dataclass(frozen=True)
class Summary:
    """clcrt_trace_summary. busy_fraction: per SM, up to num_sms."""

    tiles: int
    steals: int
    runs: int
    dropped: int
    num_sms: int
    span_ns: float
    tail_ns: float
    imbalance: float
    busy_mean: float
    busy_fraction: tuple


def _check(st):
    if st:
        lib = _native.lib()
        raise error_for(st, (lib.clcrt_errmsg(None) or b"").decode("utf-8", "replace"))


def _field(r, name, i):
    if isinstance(r, dict):
        return r.get(name, 0)
    if isinstance(r, T.TraceRecord):
        return getattr(r, name)
    if hasattr(r, "_fields"):  # Record or another namedtuple
        return getattr(r, name, 0)
    return r[i] if i < len(r) else 0


class Trace:
    """A set of tile records, sorted by start time. Owns its C trace; close() or garbage
    collection frees it."""

    def __init__(self, *_):
        raise TypeError("make a Trace with Trace.from_records, Trace.load or Stream.trace_read")

    @classmethod
    def _own(cls, h):
        t = object.__new__(cls)
        t._lib = _native.lib()
        t._h = h
        return t

    @classmethod
    def from_records(cls, records, dropped=0):
        """A trace of your own records: Record tuples, dicts with Record's field names, or
        sequences in Record's order (clcrt_trace_create; copied and sorted)."""
        lib = _native.lib()
        records = list(records)
        arr = (T.TraceRecord * max(1, len(records)))()
        names = Record._fields
        for j, r in enumerate(records):
            rec = arr[j]
            try:
                for i, name in enumerate(names):
                    setattr(rec, name, int(_field(r, name, i)))
            except (TypeError, ValueError, IndexError, KeyError) as e:
                raise InvalidError("record %d (%r) is not a trace record: %s" % (j, r, e)) from None
        h = ctypes.c_void_p()
        _check(lib.clcrt_trace_create(arr, len(records), int(dropped), ctypes.byref(h)))
        return cls._own(h.value)

    @classmethod
    def load(cls, path):
        """Reads a trace saved by save() (or any trace-event file whose X events carry the
        record fields in args): clcrt_trace_load_json."""
        lib = _native.lib()
        h = ctypes.c_void_p()
        _check(lib.clcrt_trace_load_json(os.fsencode(path), ctypes.byref(h)))
        return cls._own(h.value)

    def _live(self):
        if self._h is None:
            raise InvalidError("the trace was closed")
        return self._h

    def close(self):
        if getattr(self, "_h", None) is not None:
            self._lib.clcrt_trace_destroy(self._h)
            self._h = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _raw(self):
        n = ctypes.c_size_t()
        p = self._lib.clcrt_trace_records(self._live(), ctypes.byref(n))
        return p, n.value

    def __len__(self):
        return self._raw()[1]

    def __repr__(self):
        if self._h is None:
            return "<clcrt.Trace (closed)>"
        return "<clcrt.Trace %d records, %d dropped>" % (len(self), self.dropped)

    @property
    def records(self):
        """The records, sorted by start time (ties: SM, then tile), as Record tuples."""
        p, n = self._raw()
        names = Record._fields
        return [Record(*(getattr(p[i], f) for f in names)) for i in range(n)]

    def to_numpy(self):
        """The records as a NumPy structured array (NumPy needed)."""
        import numpy as np

        p, n = self._raw()
        dt = np.dtype({
            "names": [f for f, _ in T.TraceRecord._fields_],
            "formats": ["<u8", "<u8", "<u8", "<u4", "<u4", "<u4", "<u2", "u1", "u1", "<u4"],
            "offsets": [getattr(T.TraceRecord, f).offset for f, _ in T.TraceRecord._fields_],
            "itemsize": ctypes.sizeof(T.TraceRecord),
        })
        if n == 0:
            return np.zeros(0, dtype=dt)
        return np.frombuffer(ctypes.string_at(p, n * ctypes.sizeof(T.TraceRecord)), dtype=dt).copy()

    @property
    def dropped(self):
        """Records that did not fit the device buffer."""
        return self._lib.clcrt_trace_dropped(self._live())

    def save(self, path):
        """Writes Chrome/Perfetto trace-event JSON (clcrt_trace_save_json); returns path."""
        _check(self._lib.clcrt_trace_save_json(self._live(), os.fsencode(path)))
        return path

    def summary(self):
        """Busy fraction per SM, span, tail, imbalance, steals (clcrt_trace_summarize)."""
        s = T.sized(T.TraceSummary)
        _check(self._lib.clcrt_trace_summarize(self._live(), ctypes.byref(s)))
        return Summary(s.tiles, s.steals, s.runs, s.dropped, s.num_sms, s.span_ns, s.tail_ns, s.imbalance,
                       s.busy_mean, tuple(s.busy_fraction[: s.num_sms]))

    def draw(self, path, run=None, width=None, height=None, time_us=None):
        """Draws the timeline to ``path`` (.png or .svg) with the bundled tool (``clcrt trace
        draw``): SMs down the side, time across, one rectangle per tile coloured by cluster.
        ``run`` draws one run only; ``time_us`` fixes the time axis. Returns path."""
        from . import tool

        p = os.fspath(path)
        if not p.lower().endswith((".png", ".svg")):
            raise InvalidError("draw: %r: name a .png or .svg file" % p)
        with tempfile.TemporaryDirectory(prefix="clcrt-trace-") as d:
            js = os.path.join(d, "trace.json")
            self.save(js)
            argv = ["trace", "draw", "-o", p]
            for flag, v in (("--run", run), ("--width", width), ("--height", height), ("--time-us", time_us)):
                if v is not None:
                    argv += [flag, str(int(v))]
            tool.run(argv + [js])
        return path
