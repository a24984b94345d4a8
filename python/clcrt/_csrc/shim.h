/* The C functions the Python package adds to its bundled libclcrt (libclcrt_py.so), beside
 * the public API. They are not part of clcrt's API: only python/clcrt calls them.
 *
 * shim.c       clcrt_run with the tile grid as three integers, and the library's own
 *              description of the public structures (so that the generated ctypes classes,
 *              python/clcrt/_types_gen.py, are checked under the Python that loads them).
 * gemm_shim.c  clcrt_gemm (include/clcrt_ops.h) with its descriptor as integers: one call per
 *              run of clcrt.ops.gemm. */
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

typedef struct clcrt_ops clcrt_ops;
/* clcrt_gemm(ops, s, desc) with desc's fields as arguments (done: clcrt_gemm_desc.done);
 * variant < 0: the plan's, else the index of a variant (clcrt_gemm_variant_get). */
CLCRT_PY_API clcrt_status clcrt_py_gemm(clcrt_ops *ops, clcrt_stream *s, int layout, uint64_t a, uint64_t b,
                                        uint64_t d, unsigned m, unsigned n, unsigned k, uint64_t lda, uint64_t ldb,
                                        uint64_t ldd, unsigned groups, uint64_t sizes, int variant, int sched,
                                        int split, unsigned flags, uint64_t done);
/* The dense run with the variant, scheduler, split and flags packed into opts (gemm_shim.c). */
CLCRT_PY_API clcrt_status clcrt_py_gemm_dense(clcrt_ops *ops, clcrt_stream *s, uint64_t a, uint64_t b, uint64_t d,
                                              unsigned m, unsigned n, unsigned k, uint64_t lda, uint64_t ldb,
                                              uint64_t ldd, unsigned opts);
#endif
