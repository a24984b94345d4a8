/* The GEMM op (include/clcrt_ops.h) for Python in one call: clcrt_gemm's descriptor passed as
 * integers, which ctypes converts faster than it fills a structure, so that a run from
 * clcrt.ops costs one crossing into C. Nothing of the op's logic is here. */
#include <stdio.h>

#include "clcrt_ops.h"
#include "shim.h"

clcrt_status clcrt_py_gemm(clcrt_ops *ops, clcrt_stream *s, int layout, uint64_t a, uint64_t b, uint64_t d, unsigned m,
                           unsigned n, unsigned k, uint64_t lda, uint64_t ldb, uint64_t ldd, unsigned groups,
                           uint64_t sizes, int variant, int sched, int split, unsigned flags, uint64_t done) {
  clcrt_gemm_desc g = CLCRT_GEMM_DESC_INIT;
  clcrt_gemm_variant_info vi = CLCRT_GEMM_VARIANT_INFO_INIT;
  char tname[32]; /* variant | 0x100: the shape transposed, by its name with "t" after it */
  if (variant >= 0) {
    clcrt_status st = clcrt_gemm_variant_get(variant & 0xff, &vi);
    if (st != CLCRT_OK) return st;
    g.variant = vi.name;
    if (variant & 0x100) {
      snprintf(tname, sizeof tname, "%st", vi.name);
      g.variant = tname;
    }
  }
  g.layout = (clcrt_gemm_layout)layout;
  g.a = a, g.b = b, g.d = d;
  g.m = m, g.n = n, g.k = k;
  g.lda = lda, g.ldb = ldb, g.ldd = ldd;
  g.groups = groups, g.group_sizes = sizes;
  g.sched = (clcrt_sched)sched;
  g.split = (clcrt_gemm_split)split;
  g.flags = flags;
  g.done = done;
  return clcrt_gemm(ops, s, &g);
}

/* The dense run as clcrt.ops.gemm makes it, in as few arguments as ctypes converts quickly:
 * opts packs the variant index + 1 (0: the plan's; bits 0-7), the scheduler (8-11), the split
 * (12-15), the flags (16-23) and the variant transposed (bit 24). */
clcrt_status clcrt_py_gemm_dense(clcrt_ops *ops, clcrt_stream *s, uint64_t a, uint64_t b, uint64_t d, unsigned m,
                                 unsigned n, unsigned k, uint64_t lda, uint64_t ldb, uint64_t ldd, unsigned opts) {
  const int v = (int)(opts & 0xffu) - 1, variant = v < 0 ? v : v | (int)(opts >> 16 & 0x100u);
  return clcrt_py_gemm(ops, s, CLCRT_GEMM_DENSE, a, b, d, m, n, k, lda, ldb, ldd, 0, 0, variant, (int)(opts >> 8 & 0xfu),
                       (int)(opts >> 12 & 0xfu), opts >> 16 & 0xffu, 0);
}
