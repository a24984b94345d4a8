/* General helpers of the Python package's library (see shim.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "clcrt_ops.h"
#include "shim.h"

clcrt_status clcrt_py_run(clcrt_stream *s, const clcrt_kernel *k, unsigned x, unsigned y, unsigned z,
                          const void *args, size_t size) {
  return clcrt_run(s, k, (clcrt_dim3){x, y, z}, args, size);
}

/* ---- layouts ---------------------------------------------------------------------- */

typedef struct layout_field {
  const char *type, *field;
  size_t offset, size;
} layout_field;

#define F(T, f) {#T, #f, offsetof(T, f), sizeof(((T *)0)->f)}
#define S(T) {#T, NULL, 0, sizeof(T)}
/* Each structure's line (S) comes before its fields. */
static const layout_field fields[] = {
    S(clcrt_dim3),
    F(clcrt_dim3, x),
    F(clcrt_dim3, y),
    F(clcrt_dim3, z),
    S(clcrt_runtime_opts),
    F(clcrt_runtime_opts, size),
    F(clcrt_runtime_opts, device),
    F(clcrt_runtime_opts, target_arch),
    F(clcrt_runtime_opts, cache_dir),
    F(clcrt_runtime_opts, log),
    F(clcrt_runtime_opts, log_user),
    F(clcrt_runtime_opts, cuda_home),
    F(clcrt_runtime_opts, steal_chunk_cycles),
    F(clcrt_runtime_opts, steal_long_cycles),
    F(clcrt_runtime_opts, preempt_waves),
    F(clcrt_runtime_opts, cache_max_bytes),
    F(clcrt_runtime_opts, warmup),
    S(clcrt_tile_desc),
    F(clcrt_tile_desc, size),
    F(clcrt_tile_desc, source),
    F(clcrt_tile_desc, tile_fn),
    F(clcrt_tile_desc, args_type),
    F(clcrt_tile_desc, block),
    F(clcrt_tile_desc, cluster),
    F(clcrt_tile_desc, smem_bytes),
    F(clcrt_tile_desc, sched),
    F(clcrt_tile_desc, options),
    F(clcrt_tile_desc, num_options),
    F(clcrt_tile_desc, state_type),
    F(clcrt_tile_desc, prologue_fn),
    F(clcrt_tile_desc, grid),
    F(clcrt_tile_desc, include_digest),
    F(clcrt_tile_desc, min_blocks_per_sm),
    S(clcrt_kernel_info),
    F(clcrt_kernel_info, size),
    F(clcrt_kernel_info, name),
    F(clcrt_kernel_info, arch),
    F(clcrt_kernel_info, sched),
    F(clcrt_kernel_info, grid),
    F(clcrt_kernel_info, block),
    F(clcrt_kernel_info, cluster),
    F(clcrt_kernel_info, registers),
    F(clcrt_kernel_info, stack_bytes),
    F(clcrt_kernel_info, static_smem),
    F(clcrt_kernel_info, dynamic_smem),
    F(clcrt_kernel_info, param_bytes),
    F(clcrt_kernel_info, has_clc),
    F(clcrt_kernel_info, compile_ms),
    F(clcrt_kernel_info, from_cache),
    S(clcrt_stream_stats),
    F(clcrt_stream_stats, size),
    F(clcrt_stream_stats, runs),
    F(clcrt_stream_stats, tiles),
    F(clcrt_stream_stats, steals),
    F(clcrt_stream_stats, num_sms),
    F(clcrt_stream_stats, tiles_per_sm),
    F(clcrt_stream_stats, clusters),
    F(clcrt_stream_stats, max_units_per_cluster),
    S(clcrt_stream_opts),
    F(clcrt_stream_opts, size),
    F(clcrt_stream_opts, cu),
    F(clcrt_stream_opts, sm_budget),
    F(clcrt_stream_opts, priority),
    F(clcrt_stream_opts, flags),
    F(clcrt_stream_opts, grid_sms),
    S(clcrt_trace_record),
    F(clcrt_trace_record, start_ns),
    F(clcrt_trace_record, end_ns),
    F(clcrt_trace_record, tile),
    F(clcrt_trace_record, unit),
    F(clcrt_trace_record, cluster),
    F(clcrt_trace_record, run),
    F(clcrt_trace_record, sm),
    F(clcrt_trace_record, cta_rank),
    F(clcrt_trace_record, flags),
    F(clcrt_trace_record, reserved),
    S(clcrt_trace_summary),
    F(clcrt_trace_summary, size),
    F(clcrt_trace_summary, tiles),
    F(clcrt_trace_summary, steals),
    F(clcrt_trace_summary, runs),
    F(clcrt_trace_summary, dropped),
    F(clcrt_trace_summary, num_sms),
    F(clcrt_trace_summary, span_ns),
    F(clcrt_trace_summary, tail_ns),
    F(clcrt_trace_summary, imbalance),
    F(clcrt_trace_summary, busy_mean),
    F(clcrt_trace_summary, busy_fraction),
    S(clcrt_cache_stats),
    F(clcrt_cache_stats, size),
    F(clcrt_cache_stats, mem_hits),
    F(clcrt_cache_stats, disk_hits),
    F(clcrt_cache_stats, misses),
    F(clcrt_cache_stats, uncached),
    F(clcrt_cache_stats, compile_ms),
    F(clcrt_cache_stats, load_ms),
    S(clcrt_gemm_desc),
    F(clcrt_gemm_desc, size),
    F(clcrt_gemm_desc, layout),
    F(clcrt_gemm_desc, dtype),
    F(clcrt_gemm_desc, m),
    F(clcrt_gemm_desc, n),
    F(clcrt_gemm_desc, k),
    F(clcrt_gemm_desc, a),
    F(clcrt_gemm_desc, b),
    F(clcrt_gemm_desc, d),
    F(clcrt_gemm_desc, lda),
    F(clcrt_gemm_desc, ldb),
    F(clcrt_gemm_desc, ldd),
    F(clcrt_gemm_desc, groups),
    F(clcrt_gemm_desc, group_sizes),
    F(clcrt_gemm_desc, variant),
    F(clcrt_gemm_desc, sched),
    F(clcrt_gemm_desc, split),
    F(clcrt_gemm_desc, flags),
    S(clcrt_gemm_plan_info),
    F(clcrt_gemm_plan_info, size),
    F(clcrt_gemm_plan_info, variant),
    F(clcrt_gemm_plan_info, sched),
    F(clcrt_gemm_plan_info, bm),
    F(clcrt_gemm_plan_info, bn),
    F(clcrt_gemm_plan_info, cluster_m),
    F(clcrt_gemm_plan_info, splits),
    F(clcrt_gemm_plan_info, shared_tiles),
    F(clcrt_gemm_plan_info, tiles),
    F(clcrt_gemm_plan_info, workspace_bytes),
    S(clcrt_gemm_variant_info),
    F(clcrt_gemm_variant_info, size),
    F(clcrt_gemm_variant_info, name),
    F(clcrt_gemm_variant_info, bm),
    F(clcrt_gemm_variant_info, bn),
    F(clcrt_gemm_variant_info, cluster_m),
    F(clcrt_gemm_variant_info, stages),
    F(clcrt_gemm_variant_info, epilogue),
};
#undef F
#undef S

static char layout_text[8192];
static pthread_once_t layout_once = PTHREAD_ONCE_INIT;

static void layout_build(void) {
  size_t off = 0;
  for (size_t i = 0; i < sizeof fields / sizeof fields[0] && off < sizeof layout_text; i++) {
    const layout_field *f = &fields[i];
    int n = f->field ? snprintf(layout_text + off, sizeof layout_text - off, "%s.%s %zu %zu\n", f->type, f->field,
                                f->offset, f->size)
                     : snprintf(layout_text + off, sizeof layout_text - off, "%s %zu\n", f->type, f->size);
    if (n < 0) break;
    off += (size_t)n;
  }
}

const char *clcrt_py_layout(void) {
  pthread_once(&layout_once, layout_build);
  return layout_text;
}
