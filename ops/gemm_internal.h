/* The GEMM op's internals (not a public header): the variants of the tile functions in
 * ops/gemm.cu, their registration options, Args (ops/gemm_abi.h), tensor maps, the tile grid,
 * stream-K's workspace sizes and the plan (gemm_plan_dense: which variant and decomposition a
 * shape gets, with no oracle; or gemm_plan_measured, gemm_measure.h: timed once per shape
 * class, kept in clcrt's store). Header-only (static inline) so that the op (ops/gemm.c), the
 * benchmark's oracle and the tests share one copy; users call include/clcrt_ops.h.
 *
 * Dense:   D[M x N] = A[M x K] . B[N x K]^T, bf16 row-major, fp32 accumulation.
 * Grouped: G groups sharing N and K; group g has M_g rows (counts in device memory, int32),
 *          the groups' rows one after another in A (T x K) and D (T x N), or (the masked
 *          layout) group g's rows at row g * R of A and D for a fixed R, the weights B_g
 *          stacked as one (G*N) x K matrix. The launch is an upper bound of the tiles; the
 *          kernel finds the real ones from the counts on the device.
 * K must be a multiple of 8 (TMA needs rows of a multiple of 16 bytes); any M, N >= 1.
 */
#ifndef CLCRT_OPS_GEMM_INTERNAL_H
#define CLCRT_OPS_GEMM_INTERNAL_H
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../nvrtc_src/clcrt_streamk.cuh" /* the portable cores: stream-K, the grouped upper bound */
#include "clcrt.h"
#include "gemm_abi.h"

/* One compiled shape of the tile function. */
typedef struct gemm_variant {
  const char *name;
  unsigned bm, bn; /* tile: bm rows (bm / 64 consumer warpgroups) x bn columns */
  unsigned cm;     /* CTAs per cluster along M sharing B by TMA multicast: 1 or 2 */
  unsigned stages; /* 64-deep k-blocks in the shared-memory ring */
  unsigned epi;    /* epilogue: 1 staged through shared memory (stmatrix, 16-byte coalesced
                      stores), 0 the first version's 4-byte stores straight from the registers */
} gemm_variant;

/* The variants the benchmark measures; the first is the default. Stages: as many as fit in
 * about 200 KiB, so that loads run up to 4-8 k-blocks ahead of the tensor cores. The last two
 * are experiments on the default: the first version's epilogue (what the epilogue costs), and
 * one stage less (whether the mainloop waits on load latency or on bandwidth). */
static const gemm_variant GEMM_VARIANTS[] = {
    {"128x256", 128, 256, 1, 4, 1},   {"128x256c2", 128, 256, 2, 4, 1}, {"128x128", 128, 128, 1, 6, 1},
    {"128x128c2", 128, 128, 2, 6, 1}, {"128x64", 128, 64, 1, 8, 1},     {"128x256e0", 128, 256, 1, 4, 0},
    {"128x256s3", 128, 256, 1, 3, 1},
};
#define GEMM_NUM_VARIANTS ((int)(sizeof GEMM_VARIANTS / sizeof GEMM_VARIANTS[0]))
#define GEMM_MAX_GROUPS 1024u /* groups a grouped kernel's shared-memory map holds */
#define GEMM_BK 64u

/* GemmArgs of gemm_abi.h, the one declaration the device reads too. */
typedef GemmArgs gemm_args;
_Static_assert(sizeof(GemmTensorMap) == sizeof(clcrt_tensor_map) && _Alignof(GemmTensorMap) == _Alignof(clcrt_tensor_map),
               "GemmTensorMap holds a clcrt_tensor_map");

static inline unsigned gemm_cdiv(uint64_t a, uint64_t b) { return (unsigned)((a + b - 1) / b); }
static inline unsigned gemm_threads(const gemm_variant *v) { return v->bm / 64 * 128 + 32; }
/* The ring and its barriers (to 128 bytes), the staged epilogue's 2 KiB per consumer warp and
 * 128 bytes where the warp parks its tile's place and loop counters (64 bytes in all without the
 * staged epilogue), the grouped map, and 1 KiB to align the ring (gemm.cu: BAR_OFF, EPI_OFF,
 * EPI_STRIDE, MAP_OFF). */
static inline unsigned gemm_smem_bytes(const gemm_variant *v, int grouped) {
  unsigned ring = (v->stages * (v->bm + v->bn) * GEMM_BK * 2u + 16u * v->stages + 127u) & ~127u;
  return 1024u /* alignment */ + ring + v->bm / 64u * 4u * (v->epi ? 2048u + 128u : 64u) +
         (grouped ? 8u * (GEMM_MAX_GROUPS + 1u) : 0u);
}

/* The most shared memory a CTA may have (227 KiB on sm_90), less what the scheduler and the
 * compiler take statically (gemm.cu's static_assert reserves the same 2 KiB). */
#define GEMM_SMEM_CAP (227u * 1024u - 2048u)

/* CTAs of variant v that one SM's shared memory holds (228 KiB on sm_90; per CTA its dynamic
 * bytes with the grouped map, the 2 KiB static reserve of GEMM_SMEM_CAP and the 1 KiB the
 * hardware keeps per CTA). */
#define GEMM_SM_SMEM (228u * 1024u)
static inline unsigned gemm_ctas_per_sm(const gemm_variant *v) {
  return GEMM_SM_SMEM / (gemm_smem_bytes(v, 1) + 3072u);
}

/* The deepest ring a generated shape gets. Where the operands stream from memory a CTA's loads
 * in flight are its ring, and a loaded memory system answers in microseconds (the model's
 * lat_mem); cuBLAS's kernels for decode layers run 64-row tiles of 8 to 64 columns in 13 to 16
 * stages (Nsight Compute on an H200, ops/NOTES.md). */
#define GEMM_MAX_STAGES 16u

/* A variant of any tile shape the tile function is written for: bm 64 or 128 (one consumer
 * warpgroup per 64 rows), bn a multiple of 16 from 16 to 256, cm 1 or 2 CTAs sharing B, the
 * staged epilogue, and as many stages as fit in a CTA's shared memory with the grouped map
 * (so that one stage count serves dense and grouped): up to GEMM_MAX_STAGES, but none that
 * would cost an SM a CTA that 8 stages leave room for (64x16 keeps two CTAs per SM). name: at
 * least 16 bytes, "BMxBN" or "BMxBNc2". Returns 0 for a shape the tile function does not have. */
static inline int gemm_variant_make(gemm_variant *v, char *name, unsigned bm, unsigned bn, unsigned cm) {
  if ((bm != 64 && bm != 128) || bn < 16 || bn > 256 || bn % 16 || (cm != 1 && cm != 2)) return 0;
  snprintf(name, 16, cm > 1 ? "%ux%uc%u" : "%ux%u", bm, bn, cm);
  *v = (gemm_variant){name, bm, bn, cm, 8, 1};
  while (v->stages > 2 && gemm_smem_bytes(v, 1) > GEMM_SMEM_CAP) v->stages--;
  if (gemm_smem_bytes(v, 1) > GEMM_SMEM_CAP) return 0;
  const unsigned ctas = gemm_ctas_per_sm(v);
  gemm_variant d = *v;
  for (d.stages = v->stages + 1; d.stages <= GEMM_MAX_STAGES; d.stages++) {
    if (gemm_smem_bytes(&d, 1) > GEMM_SMEM_CAP || gemm_ctas_per_sm(&d) < ctas) break;
    v->stages = d.stages;
  }
  return 1;
}

/* Every shape gemm_variant_make has, after the measured variants: variant index
 * GEMM_NUM_VARIANTS + i is generated shape i (bm 64 then 128; bn 16 to 256; cm 1 then 2).
 * Made once per program (pthread_once), then read only. */
#define GEMM_GEN_SHAPES (2 * 16 * 2)
#define GEMM_ALL_VARIANTS (GEMM_NUM_VARIANTS + GEMM_GEN_SHAPES)
static gemm_variant gemm__gen[GEMM_GEN_SHAPES];
static char gemm__gen_names[GEMM_GEN_SHAPES][16];
static pthread_once_t gemm__gen_once = PTHREAD_ONCE_INIT;
static void gemm__gen_make(void) {
  for (int i = 0; i < GEMM_GEN_SHAPES; i++)
    if (!gemm_variant_make(&gemm__gen[i], gemm__gen_names[i], i / 32 ? 128u : 64u, 16u * (1u + (unsigned)i % 16u),
                           (i / 16) % 2 ? 2u : 1u))
      gemm__gen[i].name = NULL; /* a shape whose stages do not fit: none */
}
/* Variant i of the measured table, then of the generated shapes; NULL past them or for a shape
 * that does not fit. */
static inline const gemm_variant *gemm_variant_at(int i) {
  if (i >= 0 && i < GEMM_NUM_VARIANTS) return &GEMM_VARIANTS[i];
  if (i < 0 || i >= GEMM_ALL_VARIANTS) return NULL;
  pthread_once(&gemm__gen_once, gemm__gen_make);
  return gemm__gen[i - GEMM_NUM_VARIANTS].name ? &gemm__gen[i - GEMM_NUM_VARIANTS] : NULL;
}
/* Whether variant v has a transposed kernel (GEMM_TRANS): every shape but 128x256c2, whose
 * transposed epilogue does not fit its 168 registers (16 bytes of stack, test_compile_trans). */
static inline int gemm_trans_ok(const gemm_variant *v) { return !(v->bm == 128 && v->bn == 256 && v->cm == 2); }

/* Variant i's name with a "t" after it: the same shape transposed (gemm_plan.trans). */
static char gemm__tnames[GEMM_ALL_VARIANTS][20];
static pthread_once_t gemm__tnames_once = PTHREAD_ONCE_INIT;
static void gemm__tnames_make(void) {
  for (int i = 0; i < GEMM_ALL_VARIANTS; i++) {
    const gemm_variant *v = gemm_variant_at(i);
    if (v && gemm_trans_ok(v)) snprintf(gemm__tnames[i], sizeof gemm__tnames[i], "%st", v->name);
  }
}
static inline const char *gemm_variant_name_t(int i) {
  if (i < 0 || i >= GEMM_ALL_VARIANTS) return NULL;
  pthread_once(&gemm__tnames_once, gemm__tnames_make);
  return gemm__tnames[i][0] ? gemm__tnames[i] : NULL;
}
/* The index of a variant by name: a measured one, or "BMxBN" / "BMxBNc2" of a generated
 * shape; -1 for none. */
static inline int gemm_variant_find(const char *name) {
  for (int i = 0; i < GEMM_ALL_VARIANTS; i++) {
    const gemm_variant *v = gemm_variant_at(i);
    if (v && !strcmp(v->name, name)) return i;
  }
  return -1;
}

/* The kernels of a variant: dense, grouped, dense transposed (GEMM_TRANS), and the dense A-shift
 * kernels of 64-row tiles (GEMM_ASHIFT: A's boxes start Args.ashift columns before
 * B's), plain and transposed. The A-shift path is a kernel of its own so that the others keep
 * their code and registers. */
enum { GEMM_KIND_DENSE, GEMM_KIND_GROUPED, GEMM_KIND_TRANS, GEMM_KIND_ASHIFT, GEMM_KIND_ASHIFT_TRANS, GEMM_KINDS };
/* The kernel a dense run with Args a needs. */
static inline int gemm_kind_dense(const gemm_args *a) {
  return a->ashift ? (a->trans ? GEMM_KIND_ASHIFT_TRANS : GEMM_KIND_ASHIFT) : a->trans ? GEMM_KIND_TRANS : GEMM_KIND_DENSE;
}

/* Compiles (or finds in the cache) the variant's tile function of kind `kind` (GEMM_KIND_*) from
 * src, the op's source (clcrt_gemm_source). extra: one more NVRTC option or NULL. */
static inline clcrt_status gemm_register_kind(clcrt_runtime *rt, const char *src, const gemm_variant *v,
                                              clcrt_sched sched, int kind, const char *extra, clcrt_kernel **out) {
  *out = NULL;
  const int grouped = kind == GEMM_KIND_GROUPED;
  char o[7][48];
  snprintf(o[0], sizeof o[0], "-DGEMM_BM=%u", v->bm);
  snprintf(o[1], sizeof o[1], "-DGEMM_BN=%u", v->bn);
  snprintf(o[2], sizeof o[2], "-DGEMM_CM=%u", v->cm);
  snprintf(o[3], sizeof o[3], "-DGEMM_STAGES=%u", v->stages);
  snprintf(o[4], sizeof o[4], "-DGEMM_MAX_GROUPS=%u", GEMM_MAX_GROUPS);
  snprintf(o[5], sizeof o[5], "-DGEMM_EPI=%u", v->epi);
  /* STATIC's CTAs walk their fixed tiles in waves that share B in L2: tiles made cheaper by an
   * idle warpgroup let them drift apart (gemm.cu's consume_idle). */
  snprintf(o[6], sizeof o[6], "-DGEMM_IDLE_WG=%d", sched != CLCRT_SCHED_STATIC);
  const char *opts[10] = {o[0], o[1], o[2], o[3], o[4], o[5], o[6]};
  int nopt = 7;
  if (kind == GEMM_KIND_TRANS || kind == GEMM_KIND_ASHIFT_TRANS) opts[nopt++] = "-DGEMM_TRANS=1";
  if (kind == GEMM_KIND_ASHIFT || kind == GEMM_KIND_ASHIFT_TRANS) opts[nopt++] = "-DGEMM_ASHIFT=1";
  if (extra) opts[nopt++] = extra;
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = src;
  d.tile_fn = grouped ? "gemm_grouped_tile" : "gemm_tile";
  d.args_type = "GemmArgs";
  d.state_type = "GemmState";
  d.prologue_fn = grouped ? "gemm_grouped_prologue" : "gemm_prologue";
  d.block = (clcrt_dim3){gemm_threads(v), 1, 1};
  d.cluster = (clcrt_dim3){v->cm, 1, 1};
  d.smem_bytes = gemm_smem_bytes(v, grouped);
  d.sched = sched;
  d.options = opts;
  d.num_options = nopt;
  return clcrt_register(rt, &d, out);
}
/* The dense (grouped 0) or grouped tile function. */
static inline clcrt_status gemm_register_opt(clcrt_runtime *rt, const char *src, const gemm_variant *v,
                                             clcrt_sched sched, int grouped, const char *extra, clcrt_kernel **out) {
  return gemm_register_kind(rt, src, v, sched, grouped ? GEMM_KIND_GROUPED : GEMM_KIND_DENSE, extra, out);
}
static inline clcrt_status gemm_register(clcrt_runtime *rt, const char *src, const gemm_variant *v, clcrt_sched sched,
                                         int grouped, clcrt_kernel **out) {
  return gemm_register_opt(rt, src, v, sched, grouped, NULL, out);
}

/* Tile order: swizzle 8 (bands of 8 tiles), rastering along the longer side of the tile grid
 * so that a band's tiles share its 8 rows (or columns) of one operand while they sweep the
 * other. */
static inline void gemm_order(unsigned tm, unsigned tn, uint32_t *swizzle, uint32_t *along_n) {
  *swizzle = 8;
  *along_n = tm <= tn;
}

/* ---- stream-K and the shifted k-blocks ---------------------------------------------- */

/* Work tiles of a dense problem (the clusters' units) and its stream-K decomposition. */
static inline unsigned gemm_work_tiles(const gemm_variant *v, unsigned m, unsigned n) {
  return gemm_cdiv(gemm_cdiv(m, v->bm), v->cm) * gemm_cdiv(n, v->bn);
}
static inline clcrt_sk gemm_sk(const gemm_variant *v, const gemm_args *a) {
  return clcrt_sk_make(gemm_cdiv(a->tm, v->cm) * a->tn, a->nk, a->sk_tiles, a->sk_units, a->sk_tail);
}

/* Bytes of stream-K workspace (fp32 partials: one cluster tile per slot) and counters (one
 * word per shared tile, CTA and consumer warp) a dense problem needs; 0 without stream-K. The
 * counters must be zero before the first run (the kernel leaves them zero); the workspace
 * needs no initial value. One pair per run in flight at once. */
static inline size_t gemm_ws_bytes(const gemm_variant *v, const gemm_args *a) {
  clcrt_sk sk = gemm_sk(v, a);
  return (size_t)clcrt_sk_slots(&sk) * v->cm * v->bm * v->bn * 4u;
}
static inline size_t gemm_ctr_bytes(const gemm_variant *v, const gemm_args *a) {
  clcrt_sk sk = gemm_sk(v, a);
  return (size_t)sk.sk_tiles * v->cm * (v->bm / 64u * 4u) * 4u;
}

/* Row pitches in elements: A's and B's rows (k when packed), D's (n when packed). */
typedef struct gemm_ld {
  uint64_t a, b, d;
} gemm_ld;
static inline gemm_ld gemm_ld_packed(unsigned n, unsigned k) { return (gemm_ld){k, k, n}; }

/* Whether the rows of both operands (lda, ldb elements apart) start a whole number of 128-byte
 * lines apart, so that one offset in a line holds for all rows of each. */
static inline int gemm_rows_on_lines(uint64_t lda, uint64_t ldb) {
  return (lda * 2u) % 128u == 0 && (ldb * 2u) % 128u == 0;
}

/* How many zero columns to start the k-blocks with (gemm.cu, kshift) so that the loads of A
 * and B cover whole 128-byte lines: with rows a multiple of 128 bytes apart, the offset of the
 * operands in their line, B's when A's differs. Rows at other pitches have no one offset: 0.
 * The plan's key is made with it (gemm_load_align); a run's shift depends on its tile shape
 * as well (gemm_kshift_v). */
static inline unsigned gemm_kshift_ld(uint64_t A, uint64_t B, uint64_t lda, uint64_t ldb) {
  if (!gemm_rows_on_lines(lda, ldb)) return 0;
  (void)A; /* A's offset is B's, or B wins: one shift serves both operands only when they agree */
  return (unsigned)(B % 128u) / 2u;
}
static inline unsigned gemm_kshift(uint64_t A, uint64_t B, unsigned k) { return gemm_kshift_ld(A, B, k, k); }

/* Which operand a run of variant v shifts to whole lines when A's offset and B's differ: the
 * one whose box has the more rows, A's bm against B's bn / cm (each CTA of a cluster loads its
 * share of B and multicasts it), B on a tie. A misaligned box row costs two 128-byte lines
 * where one would do, so the operand with the more rows is the one to align: in the 2-CTA
 * shapes 128x144c2 to 128x240c2, which large problems run in, that is A (measured on the H100,
 * 2026-11-27: 4096x10240x8192 at A +80, B +96 bytes ran 27% below its aligned time with B
 * aligned in 128x176c2). The plan's key (gemm_load_align) is not affected: it names the
 * offsets, not the choice. */
static inline unsigned gemm_kshift_v(const gemm_variant *v, uint64_t A, uint64_t B, uint64_t lda, uint64_t ldb) {
  return v->bm > v->bn / v->cm ? gemm_kshift_ld(B, A, ldb, lda) : gemm_kshift_ld(A, B, lda, ldb);
}
/* A's columns before B's at the start of its boxes (Args.ashift), for a dense run of variant v:
 * where A's offset in its 128-byte line differs from B's, the rows of both lie on lines and the
 * tiles have 64 rows (in clusters of one CTA or two), the shift aligns B (gemm_kshift_ld) and A's
 * boxes start this many columns earlier, on A's own lines; the run takes the A-shift kernel
 * (GEMM_KIND_ASHIFT, which reads each k-block of A from two boxes). So both operands load whole
 * lines, at the price of one more A box per tile. 0 (A's boxes are B's) anywhere else: in tiles
 * of 128 rows, A-shift kernels lost to the one shift or spilled (ops/NOTES.md). */
static inline unsigned gemm_ashift(const gemm_variant *v, uint64_t A, uint64_t B, uint64_t lda, uint64_t ldb) {
  if (v->bm != 64 || !gemm_rows_on_lines(lda, ldb)) return 0;
  return (unsigned)((A - B) & 127u) / 2u;
}

/* The alignment, in bytes up to 128, of the loads of A and B after the shift: what the plan
 * asks for (128: whole lines), with GEMM_ALIGN_ROWS_OFF added where the rows of both operands
 * lie at pitches off 128-byte lines (K not a multiple of 64, packed), so that no shift can put
 * either on them: most box rows of both straddle two lines (gemm_model_for_loads). */
#define GEMM_ALIGN_ROWS_OFF 1u
/* ... and GEMM_ALIGN_APART where the rows of both lie on lines at offsets that differ: the one
 * shift leaves A's loads off their lines, except in the tile shapes whose A's boxes may start
 * apart (gemm_ashift: 64-row tiles), which load both on their lines. */
#define GEMM_ALIGN_APART 2u
static inline unsigned gemm_load_align_ld(uint64_t A, uint64_t B, uint64_t lda, uint64_t ldb) {
  uint64_t s = 2u * gemm_kshift_ld(A, B, lda, ldb), x = (A - s) | (B - s) | (lda * 2u) | (ldb * 2u) | 128u;
  const unsigned rows_off = (lda * 2u) % 128u && (ldb * 2u) % 128u ? GEMM_ALIGN_ROWS_OFF : 0u;
  const unsigned apart = gemm_rows_on_lines(lda, ldb) && (A - B) % 128u ? GEMM_ALIGN_APART : 0u;
  return (unsigned)(x & (~x + 1u)) | rows_off | apart;
}
static inline unsigned gemm_load_align(uint64_t A, uint64_t B, unsigned k) { return gemm_load_align_ld(A, B, k, k); }

/* ---- the plan ------------------------------------------------------------------------ */

#include "gemm_plan.h"

/* The tensor maps of A (a_rows rows, lda elements apart) and B (b_rows, ldb apart); TMA
 * needs the pitches a multiple of 16 bytes and the bases 16-byte aligned. rt NULL: none (a
 * plan described, not run). */
/* How the maps are made: clcrt_tensor_map_2d_l2 (enc NULL), or an encoder of the caller's (the
 * op's cache of encoded maps). */
typedef struct gemm_enc {
  clcrt_status (*fn)(void *user, clcrt_runtime *rt, clcrt_tensor_map *out, uint64_t base, uint64_t rows, uint64_t cols,
                     uint64_t pitch_bytes, uint32_t box_rows, uint32_t box_cols, clcrt_l2_promotion promotion);
  void *user;
} gemm_enc;
static inline clcrt_status gemm_map(const gemm_enc *enc, clcrt_runtime *rt, clcrt_tensor_map *out, uint64_t base,
                                    uint64_t rows, uint64_t cols, uint64_t pitch_bytes, uint32_t box_rows,
                                    uint32_t box_cols, clcrt_l2_promotion promotion) {
  if (enc) return enc->fn(enc->user, rt, out, base, rows, cols, pitch_bytes, box_rows, box_cols, promotion);
  return clcrt_tensor_map_2d_l2(rt, out, CLCRT_DTYPE_BF16, base, rows, cols, pitch_bytes, box_rows, box_cols,
                                CLCRT_SWIZZLE_128B, promotion);
}

/* The L2 promotion of the tiles' A: none where a transposed 64-row kernel streams the weights
 * through it in 64 x 64 boxes (1.9% faster in geo-mean over 31 such decode shapes, up to 11%,
 * none slower by more than 1%, on an H200: ops/NOTES.md); 256 bytes elsewhere. Off for the
 * activations' map gained nothing; off for 224-row boxes of weights lost 5%. */
static inline clcrt_l2_promotion gemm_a_promotion(const gemm_variant *v, int trans) {
  return trans && v->bm == 64 ? CLCRT_L2_PROMOTION_NONE : CLCRT_L2_PROMOTION_256B;
}

static inline clcrt_status gemm_maps(const gemm_enc *enc, clcrt_runtime *rt, const gemm_variant *v, gemm_args *a,
                                     uint64_t A, uint64_t a_rows, uint64_t lda, uint64_t B, uint64_t b_rows,
                                     uint64_t ldb, unsigned k) {
  if (!rt) return CLCRT_OK;
  clcrt_status st = gemm_map(enc, rt, (clcrt_tensor_map *)&a->a, A, a_rows, k, lda * 2, v->bm, GEMM_BK,
                             gemm_a_promotion(v, a->trans));
  if (st != CLCRT_OK) return st;
  return gemm_map(enc, rt, (clcrt_tensor_map *)&a->b, B, b_rows, k, ldb * 2, v->bn / v->cm, GEMM_BK,
                  CLCRT_L2_PROMOTION_256B);
}

/* B's edge in dense Args (row n of the tiles' view; the kernel loads no box wholly past it): where
 * the part of B at the edge loads one box of its valid rows (GEMM_B_EDGE_ROWS), B's map in such
 * boxes (bsub, b_sub 1). Parts start at multiples of block N / cluster size, so only the last one
 * crosses the edge. Grouped Args leave b_sub 0: a group's edge boxes read the next group's rows. */
static inline clcrt_status gemm_map_b_edge(const gemm_enc *enc, clcrt_runtime *rt, const gemm_variant *v, gemm_args *a,
                                           uint64_t B, unsigned n, uint64_t ldb, unsigned k) {
  const unsigned part = v->bn / v->cm, valid = n % part, rows = valid ? GEMM_B_EDGE_ROWS(part, valid) : part;
  a->b_sub = 0;
  if (!rt || rows == part) return CLCRT_OK;
  clcrt_status st =
      gemm_map(enc, rt, (clcrt_tensor_map *)&a->bsub, B, n, k, ldb * 2, rows, GEMM_BK, CLCRT_L2_PROMOTION_256B);
  if (st == CLCRT_OK) a->b_sub = 1;
  return st;
}

/* Args of a dense problem for plan p (gemm_plan_dense, or one made by hand: variant p->variant,
 * stream-K p->sk_tiles over p->sk_units in order p->sk_tail, p->shift, p->trans: A and B
 * swapped, the Args' m and n the tiles' view, D written transposed), with row pitches ld.
 * ws/ctr: the stream-K workspace when the decomposition shares tiles (gemm_ws_bytes,
 * gemm_ctr_bytes of these args; counters zero before a run), else 0. */
static inline clcrt_status gemm_dense_args_ld(const gemm_enc *enc, clcrt_runtime *rt, const gemm_plan *p, gemm_args *a,
                                              uint64_t A, uint64_t B, uint64_t D, unsigned m, unsigned n, unsigned k,
                                              gemm_ld ld, uint64_t ws, uint64_t ctr) {
  const gemm_variant *v = gemm_variant_at(p->variant);
  memset(a, 0, sizeof *a);
  if (p->trans) { /* D^T = B A^T: the tiles see B as their A, n rows by m columns */
    const uint64_t t = A;
    const unsigned tn = m;
    const uint64_t tl = ld.a;
    A = B, B = t, m = n, n = tn, ld.a = ld.b, ld.b = tl;
    a->trans = 1;
  }
  clcrt_status st = gemm_maps(enc, rt, v, a, A, m, ld.a, B, n, ld.b, k);
  if (st != CLCRT_OK) return st;
  st = gemm_map_b_edge(enc, rt, v, a, B, n, ld.b, k);
  if (st != CLCRT_OK) return st;
  a->d = D, a->ldd = ld.d;
  a->m = m, a->n = n, a->k = k;
  a->tm = gemm_cdiv(m, v->bm), a->tn = gemm_cdiv(n, v->bn);
  gemm_order(a->tm, a->tn, &a->swizzle, &a->along_n);
  a->ashift = p->shift ? gemm_ashift(v, A, B, ld.a, ld.b) : 0;
  if (p->shift)
    a->kshift = a->ashift ? gemm_kshift_ld(A, B, ld.a, ld.b) : gemm_kshift_v(v, A, B, ld.a, ld.b);
  a->nk = gemm_cdiv(k + a->kshift, GEMM_BK);
  clcrt_sk sk = clcrt_sk_make(gemm_cdiv(a->tm, v->cm) * a->tn, a->nk, p->sk_tiles, p->sk_units, p->sk_tail);
  a->sk_tiles = sk.sk_tiles, a->sk_units = sk.sk_units, a->sk_tail = sk.tail;
  a->ws = ws, a->ctr = ctr;
  return CLCRT_OK;
}
static inline clcrt_status gemm_dense_args(clcrt_runtime *rt, const gemm_plan *p, gemm_args *a, uint64_t A,
                                           uint64_t B, uint64_t D, unsigned m, unsigned n, unsigned k, uint64_t ws,
                                           uint64_t ctr) {
  return gemm_dense_args_ld(NULL, rt, p, a, A, B, D, m, n, k, gemm_ld_packed(n, k), ws, ctr);
}

#include "gemm_measure.h"

/* The tile grid of a dense problem: its stream-K units, cm tiles each. */
static inline clcrt_dim3 gemm_dense_tiles(const gemm_variant *v, const gemm_args *a) {
  clcrt_sk sk = gemm_sk(v, a);
  return (clcrt_dim3){clcrt_sk_units(&sk) * v->cm, 1, 1};
}

/* Args of a grouped problem: `groups` groups (1..GEMM_MAX_GROUPS: the caller checks) whose
 * int32 sizes are at device address `sizes`, weights stacked as (groups * n) x k. group_rows
 * 0: `total_rows` rows of A and D, the groups' rows one after another (sizes adding up to
 * more are cut at total_rows and reported through Args.misuse); group_rows R > 0, the masked
 * layout: group g's rows at row g * R of A and D (groups * R rows; sizes above R count as R),
 * and a launch that does not depend on the sizes (one CUDA graph serves every routing). */
static inline clcrt_status gemm_grouped_args_ld(const gemm_enc *enc, clcrt_runtime *rt, const gemm_variant *v,
                                                gemm_args *a, uint64_t A, uint64_t B, uint64_t D, unsigned total_rows,
                                                unsigned n, unsigned k, gemm_ld ld, unsigned groups, uint64_t sizes,
                                                unsigned group_rows) {
  memset(a, 0, sizeof *a);
  if (groups == 0 || groups > GEMM_MAX_GROUPS) return CLCRT_E_INVALID;
  if (group_rows) total_rows = groups * group_rows;
  clcrt_status st = gemm_maps(enc, rt, v, a, A, total_rows ? total_rows : 1, ld.a, B, (uint64_t)groups * n, ld.b, k);
  if (st != CLCRT_OK) return st;
  a->d = D, a->ldd = ld.d;
  a->m = total_rows, a->n = n, a->k = k;
  a->tm = gemm_cdiv(total_rows, v->bm), a->tn = gemm_cdiv(n, v->bn);
  /* Inside a group the m-tiles are few: raster along N in bands of 8 m-tiles, so the tiles
   * running together share a group's rows of A while they sweep its weights. */
  a->swizzle = 8, a->along_n = 1;
  a->kshift = gemm_kshift_v(v, A, B, ld.a, ld.b);
  a->nk = gemm_cdiv(k + a->kshift, GEMM_BK);
  a->group_sizes = sizes, a->groups = groups, a->group_rows = group_rows;
  return CLCRT_OK;
}
static inline clcrt_status gemm_grouped_args(clcrt_runtime *rt, const gemm_variant *v, gemm_args *a, uint64_t A,
                                             uint64_t B, uint64_t D, unsigned total_rows, unsigned n, unsigned k,
                                             unsigned groups, uint64_t sizes, unsigned group_rows) {
  return gemm_grouped_args_ld(NULL, rt, v, a, A, B, D, total_rows, n, k, gemm_ld_packed(n, k), groups, sizes,
                              group_rows);
}

/* The launch of a grouped problem: an upper bound of its units (the sizes are on the
 * device), cm tiles each. Units past the real total return at once. */
static inline clcrt_dim3 gemm_grouped_tiles(const gemm_variant *v, const gemm_args *a) {
  unsigned long long units =
      a->group_rows ? (unsigned long long)a->groups * clcrt_tm_group_units(a->group_rows, v->bm, v->cm, a->tn)
                    : clcrt_tm_group_units_bound(a->m, a->groups, v->bm, v->cm, a->tn);
  return (clcrt_dim3){(unsigned)(units * v->cm), 1, 1};
}

/* bf16 <-> float on the host (round to nearest even; NaN kept NaN). */
static inline uint16_t gemm_f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float gemm_bf2f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
#endif /* CLCRT_OPS_GEMM_INTERNAL_H */
