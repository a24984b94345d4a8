"""Task graphs: several tile functions in one launch, with tile-level dependencies.

The C face is ``clcrt_taskgraph_*`` in include/clcrt_ops.h, which states the protocol and why
no run can hang; docs/taskgraph.md is the guide. Here::

    g = clcrt.TaskGraph(SRC,
                        nodes=[("rmsnorm", NormArgs), ("gate_up", GateUpArgs), ("down", DownArgs)],
                        edges=[(0, 1, "all"), (1, 2, "rows", 4, 2)],
                        block=256)
    g.run([batch, gate_up_tiles, down_tiles], [norm_args, gate_up_args, down_args])

Every node is a tile function of ``SRC`` with its clcrt.Args class (or ``(tile_fn, ArgsClass,
"CppName")`` when the C++ struct has another name, or a clcrt.TaskNode, which also names a
prefetch function). An edge is ``(from, to, kind, ...)``:

    "all"                 every tile of ``to`` needs every tile of ``from``
    "same"                tile i needs tile i
    "rows", a, b          tiles i with i // a == g need tiles j with j // b == g (row blocks)
    "kslices", a          ``from`` has a x the tiles of ``to``, slice-major; tile i needs
                          i, C + i, 2C + i, ... (a reduction over a K slices)
    "custom", "fn"        ``__device__ uint2 fn(unsigned tile, unsigned tiles, unsigned
                          producer_tiles)`` in SRC gives the range [x, y) tile needs

Nodes are listed producers first (every edge goes from a lower index to a higher one).
"""

import ctypes
import weakref

from . import _types as T
from ._core import Grid, Kernel, Sched, _dim3, _enum, _text, runtime
from ._errors import InvalidError
from ._native import lib as _lib_fn
from .args import Args
from .ops import _ops, _stream  # the runtime's op library: the counters live in its workspaces

_KINDS = {"all": 0, "same": 1, "rows": 2, "kslices": 3, "custom": 4}


class TaskNode:
    """A node: ``tile_fn`` of the source with its clcrt.Args class; ``args_type`` the C++ name of
    the Args struct when it is not the class's; ``prefetch`` a function called like the tile
    function before the tile's waits (loads that need no other node: weights into L2)."""

    __slots__ = ("tile_fn", "args", "args_type", "prefetch")

    def __init__(self, tile_fn, args, args_type=None, prefetch=None):
        self.tile_fn, self.args, self.args_type, self.prefetch = tile_fn, args, args_type, prefetch

    def __repr__(self):
        return "TaskNode(%r, %s%s)" % (self.tile_fn, getattr(self.args, "__name__", self.args),
                                       ", prefetch=%r" % self.prefetch if self.prefetch else "")


def _edge(i, e):
    if not isinstance(e, (tuple, list)) or len(e) < 3:
        raise InvalidError("TaskGraph: edge %d is %r; give (from, to, kind, ...)" % (i, e))
    frm, to, kind = e[0], e[1], e[2]
    rest = list(e[3:])
    if kind not in _KINDS:
        raise InvalidError("TaskGraph: edge %d has kind %r; one of %s" % (i, kind, ", ".join(sorted(_KINDS))))
    x = T.TaskEdge()
    setattr(x, "from", int(frm))
    x.to, x.kind = int(to), _KINDS[kind]
    want = {"rows": 2, "kslices": 1, "custom": 1}.get(kind, 0)
    if len(rest) != want:
        usage = {"rows": "(from, to, 'rows', a, b)", "kslices": "(from, to, 'kslices', slices)",
                 "custom": "(from, to, 'custom', 'fn_name')"}.get(kind, "(from, to, %r)" % kind)
        raise InvalidError("TaskGraph: edge %d is %r; a %s edge is %s" % (i, tuple(e), kind, usage))
    if kind == "rows":
        x.a, x.b = int(rest[0]), int(rest[1])
    elif kind == "kslices":
        x.a = int(rest[0])
    elif kind == "custom":
        if not isinstance(rest[0], str):
            raise InvalidError("TaskGraph: edge %d: the custom function's name must be a str" % i)
        x.fn = rest[0].encode()
    return x


class TaskGraph:
    """Tile functions of one source run as one launch (clcrt_taskgraph_create). ``async_reads``:
    a node reads another node's output through TMA (CLCRT_TASKGRAPH_ASYNC_READS)."""

    def __init__(self, source, nodes, edges=(), *, block=128, smem_bytes=0, sched=Sched.AUTO, grid=Grid.AUTO,
                 options=(), min_blocks_per_sm=0, async_reads=False, rt=None):
        self._rt = rt = rt or runtime()
        rt._live()
        self._h = None
        if not isinstance(source, str) or not source:
            raise InvalidError("TaskGraph: source must be a non-empty str")
        nodes = list(nodes)
        if not nodes:
            raise InvalidError("TaskGraph: a graph needs at least one node")
        self._args = []
        tn = (T.TaskNode * len(nodes))()
        keep = []
        for i, n in enumerate(nodes):
            if isinstance(n, (tuple, list)) and len(n) in (2, 3):
                n = TaskNode(*n)
            if not isinstance(n, TaskNode) or not isinstance(n.tile_fn, str):
                raise InvalidError("TaskGraph: node %d is %r; give (tile_fn, ArgsClass), (tile_fn, ArgsClass, "
                                   "'CppName') or a clcrt.TaskNode" % (i, n))
            cls = n.args
            if not (isinstance(cls, type) and issubclass(cls, Args)):
                raise InvalidError("TaskGraph: node %d: %r is not a clcrt.Args class" % (i, cls))
            if n.prefetch is not None and not isinstance(n.prefetch, str):
                raise InvalidError("TaskGraph: node %d: prefetch must be a function name" % i)
            b_fn, b_ty = n.tile_fn.encode(), (n.args_type or cls.__name__).encode()
            b_pf = n.prefetch.encode() if n.prefetch else None
            keep += [b_fn, b_ty, b_pf]
            tn[i].tile_fn, tn[i].args_type, tn[i].args_size = b_fn, b_ty, ctypes.sizeof(cls)
            tn[i].prefetch_fn = b_pf
            self._args.append(cls)
        edges = list(edges)
        te = (T.TaskEdge * max(1, len(edges)))()
        for i, e in enumerate(edges):
            te[i] = _edge(i, e)
        d = T.TaskgraphDesc()
        d.size = ctypes.sizeof(d)
        src = source.encode()
        d.source = src
        d.nodes, d.num_nodes = ctypes.cast(tn, ctypes.POINTER(T.TaskNode)), len(nodes)
        d.edges, d.num_edges = ctypes.cast(te, ctypes.POINTER(T.TaskEdge)), len(edges)
        d.block = T.Dim3(*_dim3(block, "TaskGraph: block"))
        d.smem_bytes = int(smem_bytes)
        d.sched = _enum(Sched, sched, "sched")
        d.grid = _enum(Grid, grid, "grid")
        opts = [o.encode() for o in options]
        arr = (ctypes.c_char_p * max(1, len(opts)))(*opts)
        d.options, d.num_options = (arr, len(opts)) if opts else (None, 0)
        d.min_blocks_per_sm = int(min_blocks_per_sm)
        d.flags = T.TASKGRAPH_ASYNC_READS if async_reads else 0
        lib = _lib_fn()
        h = ctypes.c_void_p()
        rt._check(lib.clcrt_taskgraph_create(_ops(rt), ctypes.byref(d), ctypes.byref(h)))
        self._h, self._lib, self._n = h.value, lib, len(nodes)
        self._tiles_t = T.Dim3 * self._n
        self._ptrs_t = ctypes.c_void_p * self._n
        # Closed before the op library it lives in (Runtime.close runs its closers in order); a
        # weak reference, so that a graph dropped early is freed by __del__ and not kept alive.
        ref = weakref.ref(self)
        rt._closers.insert(0, lambda: ref() is not None and ref().close())

    @property
    def kernel(self):
        """The registered kernel (clcrt.Kernel): info, cubin, PTX, prepare()."""
        self._live()
        k = self.__dict__.get("_kernel")
        if k is None:
            k = self._kernel = Kernel(self._rt, self._lib.clcrt_taskgraph_kernel(self._h), None, "clcrt_tg_args")
        return k

    @property
    def source(self):
        """The generated CUDA source, as compiled."""
        self._live()
        return _text(self._lib.clcrt_taskgraph_source(self._h))

    def _live(self):
        if self._h is None:
            raise InvalidError("the task graph was closed")

    def run(self, tiles, args, stream=None, pdl=False):
        """Runs every node once, asynchronously: ``tiles[i]`` (an int or a tuple of up to 3)
        tiles of node i with ``args[i]`` (an instance of its Args class). ``pdl``: programmatic
        dependent launch (C's clcrt_taskgraph_run_ex with CLCRT_RUN_PDL): the graph's grid
        launches while the kernel before it on the stream finishes."""
        self._live()
        rt = self._rt
        if len(tiles) != self._n or len(args) != self._n:
            raise InvalidError("TaskGraph.run: %d nodes, but %d tile counts and %d Args" % (self._n, len(tiles),
                                                                                             len(args)))
        t = self._tiles_t()
        p = self._ptrs_t()
        for i in range(self._n):
            t[i] = T.Dim3(*_dim3(tiles[i], "TaskGraph.run: tiles[%d]" % i, allow_zero=True))
            a = args[i]
            if type(a) is not self._args[i]:
                raise InvalidError("TaskGraph.run: args[%d] is %s, not the node's %s" % (i, type(a).__name__,
                                                                                         self._args[i].__name__))
            dev = a._clcrt_device
            if dev is not None and dev != rt.device:
                raise InvalidError("TaskGraph.run: args[%d] holds tensors of device %d, the graph runs on %d" %
                                   (i, dev, rt.device))
            p[i] = a._clcrt_ptr
        s = _stream(rt, stream)
        st = self._lib.clcrt_taskgraph_run_ex(self._h, s._hp, t, p, T.RUN_PDL if pdl else 0)
        if st:
            s._fail(st)

    def trace_enable(self, capacity=1 << 16):
        """Records every tile of the graph's runs, on any stream, into a device buffer of
        ``capacity`` tiles (0: off). Call it while no run of the graph is in flight."""
        self._live()
        self._rt._check(self._lib.clcrt_taskgraph_trace_enable(self._h, int(capacity)))

    def trace_read(self, stream=None):
        """Synchronises ``stream`` (default: the current one) and takes the records of the traced
        runs since the last read: a clcrt.Trace with, per tile, its tile function's record (tile:
        its index in its node, unit: the node, cluster: its ticket) and, where it waited, a record
        of the wait with flags & 2 (CLCRT_TRACE_WAIT)."""
        from .trace import Trace

        self._live()
        rt = self._rt
        s = _stream(rt, stream)
        t = ctypes.c_void_p()
        rt._check(self._lib.clcrt_taskgraph_trace_read(self._h, s._hp, ctypes.byref(t)))
        return Trace._own(t.value)

    def close(self):
        """Frees the graph (runs already enqueued keep running). Idempotent."""
        if self._h is not None:
            self._lib.clcrt_taskgraph_destroy(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
