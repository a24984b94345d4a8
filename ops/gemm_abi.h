/* The GEMM op's Args, declared once for the host (C11, ops/gemm.c) and the device (the tile
 * functions of ops/gemm.cu, compiled by NVRTC): the op puts this header's text in place of
 * the line of gemm.cu that includes it when it builds the source, so both sides read the same lines.
 * Both compilers check every offset against GEMM__ARGS_LAYOUT, and the runtime checks the
 * parameter's size against the compiled kernel at every run, so a field one side would lay
 * out differently is an error, never a silent corruption. The pattern is clcrt_abi.h's. */
#ifndef CLCRT_OPS_GEMM_ABI_H
#define CLCRT_OPS_GEMM_ABI_H

#ifdef __CUDACC_RTC__
#define GEMM__DPTR(type) type *
#define GEMM__OFFSETOF(type, field) ((unsigned long)__INTADDR__(&(((type *)0)->field)))
#define GEMM__ASSERT(cond, msg) static_assert(cond, msg)
#define GEMM__ALIGN64 alignas(64)
#else
#include <stddef.h>
#include <stdint.h>
#define GEMM__DPTR(type) uint64_t
#define GEMM__OFFSETOF(type, field) offsetof(type, field)
#ifdef __cplusplus
#define GEMM__ASSERT(cond, msg) static_assert(cond, msg)
#define GEMM__ALIGN64 alignas(64)
#else
#define GEMM__ASSERT(cond, msg) _Static_assert(cond, msg)
#define GEMM__ALIGN64 _Alignas(64)
#endif
#endif

/* A TMA descriptor (CUtensorMap, clcrt_tensor_map): 128 opaque bytes, 64-byte aligned. */
typedef struct GemmTensorMap {
  GEMM__ALIGN64 unsigned long long v[16];
} GemmTensorMap;

/* B's edge (GemmArgs.b_sub, bsub): of a CTA's part of B (`part` rows: block N / cluster size)
 * only `valid` rows lie inside B (0 < valid < part). TMA fills a box's rows past the map with
 * zeros, and that is slow; so is every box more. The part then loads one box of bsub, whose
 * height is its valid rows rounded up to whole 8-row swizzle atoms, where that is under the
 * part; else its one box of b. Measured on an H200 (ops/NOTES.md): 64-row boxes over the valid
 * rows where one box replaced the part ran 1.13x as fast in geo-mean (110 candidates of 7
 * shapes, to 2.3x), two 1.15x (24), while boxes of 16 rows over all of them ran up to 2.9x as
 * slow (each box costs); one box of the valid height has the fewest rows and boxes of all, and
 * against the 64-row boxes ran 1.011x as fast over the 48 of 96 decode, GEMV, vocabulary and
 * generated shapes whose edge load it changes (0.97-1.13x; the untouched 48 1.002x). */
#define GEMM_B_EDGE_ROWS(part, valid) ((((valid) + 7u) & ~7u) < (part) ? (((valid) + 7u) & ~7u) : (part))

typedef struct GemmArgs {
  GemmTensorMap a;                  /* A: rows x K bf16, box 64 x BM, 128B swizzle */
  GemmTensorMap b;                  /* B: rows x K bf16, box 64 x BN / CM, 128B swizzle */
  GEMM__DPTR(unsigned short) d;     /* D: bf16, row-major */
  unsigned long long ldd;           /* elements between rows of D */
  GEMM__DPTR(float) ws;             /* stream-K partials: clcrt_sk_slots slots of one fp32 cluster tile */
  GEMM__DPTR(unsigned) ctr;         /* stream-K counters per (shared tile, CTA, consumer warp): zero
                                       before a run, and every run leaves them zero */
  GEMM__DPTR(const int) group_sizes; /* grouped: rows per group, device memory */
  GEMM__DPTR(unsigned) misuse;      /* grouped: where a run reports sizes that do not fit (two words:
                                       flags, then the rows the sizes add up to); 0: nowhere */
  unsigned m, n, k;                 /* dense: the problem; grouped: m = rows of A and D */
  unsigned tm, tn;                  /* tiles along M and N */
  unsigned swizzle, along_n;        /* tile order (clcrt_tilemap.cuh) */
  unsigned nk;                      /* k-blocks per tile (kshift included) */
  unsigned kshift;                  /* zero columns before column 0, 0..63: aligns the loads */
  unsigned sk_tiles, sk_units;      /* dense: stream-K (clcrt_streamk.cuh); 0, 0: whole tiles */
  unsigned sk_tail;                 /* dense: 1 when the shared tiles and their units come last */
  unsigned groups;                  /* grouped: number of groups */
  unsigned group_rows;              /* grouped, masked layout: group g's rows start at g * group_rows
                                       (counts clamped to it); 0: the groups' rows one after another */
  GEMM__DPTR(unsigned) done;        /* dense: one counter per 64 rows of D, or 0: each consumer warp adds
                                       (rows stored) x (columns stored) to its rows' counter once they
                                       are stored, a release at GPU scope (clcrt_gemm_desc.done) */
  unsigned trans;                   /* dense: 1 when A and B came swapped, so that the tiles compute D
                                       transposed: their rows are D's columns (m, n: the tiles' view) */
  unsigned ashift;                  /* dense, 64-row tiles: A's boxes start this many columns (8..56)
                                       before B's, on whole lines where B's offset differs from A's;
                                       the A-shift kernels read each k-block of A from two boxes
                                       (gemm.cu, consume_ashift); 0: A's boxes are B's */
  unsigned b_sub;                   /* dense: 1 when bsub holds B's map in boxes of GEMM_B_EDGE_ROWS
                                       rows, for the part of B that crosses its edge, row n of the
                                       tiles' view; no CTA of a dense run loads a box of B that lies
                                       wholly past that edge */
  GemmTensorMap bsub;               /* B again, box 64 x GEMM_B_EDGE_ROWS rows (b_sub 1; else unused) */
} GemmArgs;

/* The misuse words (GemmArgs.misuse): set by a grouped run whose sizes did not fit. */
#define GEMM_MISUSE_ROWS 1u     /* the sizes added up to more rows than A and D have: clamped */
#define GEMM_MISUSE_NEGATIVE 2u /* a size was negative: taken as 0 */

/* X(field, offset): the layout both compilers check. */
#define GEMM__ARGS_LAYOUT(X)                                                                      \
  X(a, 0) X(b, 128) X(d, 256) X(ldd, 264) X(ws, 272) X(ctr, 280) X(group_sizes, 288) X(misuse, 296) \
  X(m, 304) X(n, 308) X(k, 312) X(tm, 316) X(tn, 320) X(swizzle, 324) X(along_n, 328) X(nk, 332)   \
  X(kshift, 336) X(sk_tiles, 340) X(sk_units, 344) X(sk_tail, 348) X(groups, 352) X(group_rows, 356) \
  X(done, 360) X(trans, 368) X(ashift, 372) X(b_sub, 376) X(bsub, 384)
#define GEMM__ARGS_CHECK(f, off) GEMM__ASSERT(GEMM__OFFSETOF(GemmArgs, f) == off, "GemmArgs." #f " is not at " #off);
GEMM__ARGS_LAYOUT(GEMM__ARGS_CHECK)
#undef GEMM__ARGS_CHECK
GEMM__ASSERT(sizeof(GemmArgs) == 512, "GemmArgs is 512 bytes (8 lines of 64)");
#endif
