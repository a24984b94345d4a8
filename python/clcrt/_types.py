"""ctypes mirrors of the structures in include/clcrt.h, field for field and with the C names.

The bundled library describes its own layouts (``clcrt_py_layout`` in _shim.c: every
structure's size and every field's offset, from ``sizeof``/``offsetof``), and the tests
compare these mirrors against it, so a change to the header that is not made here fails
the tests instead of corrupting memory.
"""

import ctypes as c

TRACE_MAX_SMS = 1024


class Dim3(c.Structure):
    _fields_ = [("x", c.c_uint), ("y", c.c_uint), ("z", c.c_uint)]


LOG_FN = c.CFUNCTYPE(None, c.c_void_p, c.c_int, c.c_char_p)


class RuntimeOpts(c.Structure):
    _fields_ = [
        ("size", c.c_size_t),
        ("device", c.c_int),
        ("target_arch", c.c_char_p),
        ("cache_dir", c.c_char_p),
        ("log", LOG_FN),
        ("log_user", c.c_void_p),
        ("cuda_home", c.c_char_p),
        ("steal_chunk_cycles", c.c_uint),
        ("steal_long_cycles", c.c_uint),
        ("preempt_waves", c.c_uint),
        ("cache_max_bytes", c.c_ulonglong),
        ("warmup", c.c_int),
    ]


class TileDesc(c.Structure):
    _fields_ = [
        ("size", c.c_size_t),
        ("source", c.c_char_p),
        ("tile_fn", c.c_char_p),
        ("args_type", c.c_char_p),
        ("block", Dim3),
        ("cluster", Dim3),
        ("smem_bytes", c.c_uint),
        ("sched", c.c_int),
        ("options", c.POINTER(c.c_char_p)),
        ("num_options", c.c_int),
        ("state_type", c.c_char_p),
        ("prologue_fn", c.c_char_p),
        ("grid", c.c_int),
        ("include_digest", c.c_char_p),
        ("min_blocks_per_sm", c.c_uint),
    ]


class KernelInfo(c.Structure):
    _fields_ = [
        ("size", c.c_size_t),
        ("name", c.c_char_p),
        ("arch", c.c_char_p),
        ("sched", c.c_int),
        ("grid", c.c_int),
        ("block", Dim3),
        ("cluster", Dim3),
        ("registers", c.c_int),
        ("stack_bytes", c.c_int),
        ("static_smem", c.c_uint),
        ("dynamic_smem", c.c_uint),
        ("param_bytes", c.c_size_t),
        ("has_clc", c.c_int),
        ("compile_ms", c.c_double),
        ("from_cache", c.c_int),
    ]


class StreamStats(c.Structure):
    _fields_ = [
        ("size", c.c_size_t),
        ("runs", c.c_ulonglong),
        ("tiles", c.c_ulonglong),
        ("steals", c.c_ulonglong),
        ("num_sms", c.c_uint),
        ("tiles_per_sm", c.POINTER(c.c_ulonglong)),
        ("clusters", c.c_ulonglong),
        ("max_units_per_cluster", c.c_ulonglong),
    ]


class StreamOpts(c.Structure):
    """clcrt_stream_opts (clcrt_stream_create_ex): sm_budget, priority (clcrt's levels), flags
    (STREAM_SM_*), grid_sms."""

    _fields_ = [
        ("size", c.c_size_t),
        ("cu", c.c_void_p),
        ("sm_budget", c.c_uint),
        ("priority", c.c_uint),
        ("flags", c.c_uint),
        ("grid_sms", c.c_uint),
    ]


STREAM_SM_ROUND_UP, STREAM_SM_ROUND_DOWN, STREAM_SM_REST = 1, 2, 4


class TraceRecord(c.Structure):
    _fields_ = [
        ("start_ns", c.c_uint64),
        ("end_ns", c.c_uint64),
        ("tile", c.c_uint64),
        ("unit", c.c_uint32),
        ("cluster", c.c_uint32),
        ("run", c.c_uint32),
        ("sm", c.c_uint16),
        ("cta_rank", c.c_uint8),
        ("flags", c.c_uint8),
        ("reserved", c.c_uint32),
    ]


class TraceSummary(c.Structure):
    _fields_ = [
        ("size", c.c_size_t),
        ("tiles", c.c_ulonglong),
        ("steals", c.c_ulonglong),
        ("runs", c.c_ulonglong),
        ("dropped", c.c_ulonglong),
        ("num_sms", c.c_uint),
        ("span_ns", c.c_double),
        ("tail_ns", c.c_double),
        ("imbalance", c.c_double),
        ("busy_mean", c.c_double),
        ("busy_fraction", c.c_double * TRACE_MAX_SMS),
    ]


class CacheStats(c.Structure):
    _fields_ = [
        ("size", c.c_size_t),
        ("mem_hits", c.c_ulonglong),
        ("disk_hits", c.c_ulonglong),
        ("misses", c.c_ulonglong),
        ("uncached", c.c_ulonglong),
        ("compile_ms", c.c_double),
        ("load_ms", c.c_double),
    ]


class GemmDesc(c.Structure):
    """include/clcrt_ops.h: clcrt_gemm_desc."""

    _fields_ = [
        ("size", c.c_size_t),
        ("layout", c.c_int),
        ("dtype", c.c_int),
        ("m", c.c_uint),
        ("n", c.c_uint),
        ("k", c.c_uint),
        ("a", c.c_ulonglong),
        ("b", c.c_ulonglong),
        ("d", c.c_ulonglong),
        ("lda", c.c_ulonglong),
        ("ldb", c.c_ulonglong),
        ("ldd", c.c_ulonglong),
        ("groups", c.c_uint),
        ("group_sizes", c.c_ulonglong),
        ("variant", c.c_char_p),
        ("sched", c.c_int),
        ("split", c.c_int),
        ("flags", c.c_uint),
    ]


class GemmPlanInfo(c.Structure):
    """include/clcrt_ops.h: clcrt_gemm_plan_info."""

    _fields_ = [
        ("size", c.c_size_t),
        ("variant", c.c_char_p),
        ("sched", c.c_int),
        ("bm", c.c_uint),
        ("bn", c.c_uint),
        ("cluster_m", c.c_uint),
        ("splits", c.c_uint),
        ("shared_tiles", c.c_uint),
        ("tiles", Dim3),
        ("workspace_bytes", c.c_ulonglong),
    ]


class GemmVariantInfo(c.Structure):
    """include/clcrt_ops.h: clcrt_gemm_variant_info."""

    _fields_ = [
        ("size", c.c_size_t),
        ("name", c.c_char_p),
        ("bm", c.c_uint),
        ("bn", c.c_uint),
        ("cluster_m", c.c_uint),
        ("stages", c.c_uint),
        ("epilogue", c.c_uint),
    ]


def sized(cls):
    """A zeroed instance with its ``size`` field set, like the C ..._INIT macros."""
    v = cls()
    v.size = c.sizeof(cls)
    return v


# Every mirror the layout check compares with the library's own description.
MIRRORS = {
    "clcrt_dim3": Dim3,
    "clcrt_runtime_opts": RuntimeOpts,
    "clcrt_tile_desc": TileDesc,
    "clcrt_kernel_info": KernelInfo,
    "clcrt_stream_stats": StreamStats,
    "clcrt_stream_opts": StreamOpts,
    "clcrt_trace_record": TraceRecord,
    "clcrt_trace_summary": TraceSummary,
    "clcrt_cache_stats": CacheStats,
    "clcrt_gemm_desc": GemmDesc,
    "clcrt_gemm_plan_info": GemmPlanInfo,
    "clcrt_gemm_variant_info": GemmVariantInfo,
}
