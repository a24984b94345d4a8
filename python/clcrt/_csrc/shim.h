/* The C functions the Python package adds to its bundled libclcrt (libclcrt_py.so), beside
 * the public API. They are not part of clcrt's API: only python/clcrt calls them.
 *
 * shim.c       clcrt_run with the tile grid as three integers, and the library's own
 *              description of the public structures (so that the ctypes mirrors are checked).
 * gemm_shim.c  the GEMM example's host logic (examples/gemm/gemm.h: variants, Args, tensor
 *              maps, tile grid, stream-K), called from Python rather than copied into it. When
 *              gemm.h's plan changes, only gemm_shim.c follows it; the Python side sees this
 *              surface. */
#ifndef CLCRT_PY_SHIM_H
#define CLCRT_PY_SHIM_H
#include <stddef.h>
#include <stdint.h>

#include "clcrt.h"

#define CLCRT_PY_API __attribute__((visibility("default")))

/* clcrt_run(s, k, (clcrt_dim3){x, y, z}, args, size). */
CLCRT_PY_API clcrt_status clcrt_py_run(clcrt_stream *s, const clcrt_kernel *k, unsigned x, unsigned y, unsigned z,
                                       const void *args, size_t size);

/* Every public structure's size and every field's offset and size, one per line:
 * "T <sizeof T>" then "T.field <offset> <size>" lines. Static storage; never NULL. */
CLCRT_PY_API const char *clcrt_py_layout(void);

/* ---- GEMM (gemm_shim.c) ---- */

/* What a GEMM launch needs besides its Args. */
typedef struct clcrt_py_gemm_launch {
  size_t size;           /* sizeof(clcrt_py_gemm_launch) */
  int variant;           /* the variant the Args were made for (an index into the variant table) */
  unsigned splits;       /* dense: units per stream-K shared tile (its slices), 1 without */
  unsigned tiles[3];     /* the tile grid to pass to clcrt_run */
  uint64_t ws_bytes;     /* stream-K partials the launch needs (0: none); any initial value */
  uint64_t ctr_bytes;    /* stream-K counters: zero before the first run, left zero by every run */
  size_t args_bytes;     /* bytes of Args written */
} clcrt_py_gemm_launch;

/* The tile source the GEMM kernels compile (the package ships gemm.cu as a file). The
 * string must stay valid while kernels may still be registered. */
CLCRT_PY_API void clcrt_py_gemm_set_source(const char *src);
/* Variant i's name and, in shape[0..4], bm, bn, cm, stages, epi; NULL past the last. Variant
 * 0 is the default. */
CLCRT_PY_API const char *clcrt_py_gemm_variant(int i, unsigned *shape);
/* The most groups a grouped GEMM takes (GEMM_MAX_GROUPS). */
CLCRT_PY_API unsigned clcrt_py_gemm_max_groups(void);
/* Registers variant i's dense (grouped 0) or grouped (1) tile function with `sched`. */
CLCRT_PY_API clcrt_status clcrt_py_gemm_register(clcrt_runtime *rt, int variant, int sched, int grouped,
                                                 clcrt_kernel **out);
/* Args and launch of D[m x n] = A[m x k] . B[n x k]^T (bf16, row-major) on a device of
 * num_sms SMs: variant < 0 lets the plan choose. ws/ctr: the stream-K workspace and counters
 * (0 when none is at hand yet: out->ws_bytes says whether the launch needs them). */
CLCRT_PY_API clcrt_status clcrt_py_gemm_dense(clcrt_runtime *rt, int variant, int num_sms, uint64_t A, uint64_t B,
                                              uint64_t D, unsigned m, unsigned n, unsigned k, uint64_t ws,
                                              uint64_t ctr, void *args, size_t args_cap, clcrt_py_gemm_launch *out);
/* Args and launch of the grouped GEMM: `groups` groups whose int32 row counts are at device
 * address `sizes`, total_rows rows of A and D, weights stacked as (groups * n) x k. */
CLCRT_PY_API clcrt_status clcrt_py_gemm_grouped(clcrt_runtime *rt, int variant, uint64_t A, uint64_t B, uint64_t D,
                                                unsigned total_rows, unsigned n, unsigned k, unsigned groups,
                                                uint64_t sizes, void *args, size_t args_cap,
                                                clcrt_py_gemm_launch *out);
#endif
