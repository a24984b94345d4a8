/* The GEMM's plan: (M, N, K, alignment of the loads, SM count) -> tile shape, cluster,
 * scheduler and decomposition, with no timing run (an oracle that tries everything is what the
 * benchmark has and a user has not). Included by gemm_internal.h.
 *
 * A cost model, not a table of shapes: every tile shape the op generates (block M 64 or 128,
 * block N 16 to 256 in steps of 16, clusters of 1 or 2) is costed with each decomposition the
 * op can run (whole tiles; the last wave's tiles cut into 2 to 4 k-slices, stream-K), and the
 * cheapest runs. It rests on two things measured on an H100 SXM (132 SMs), both written down in
 * bench/results/gemm-calibration-2026-11-27.md with the runs they come from:
 *
 * 1. Per tile shape, the time of one 64-deep k-block with every SM busy (GEMM_KB_US): the
 *    tile shape's throughput where the problem is large (the median over the compute-bound
 *    shapes of the sweep, M >= 1024 and K >= 2048, of (time - 5 us) / (waves x k-blocks)).
 *    It holds what a formula would have to guess: 128x176 and 128x192 run 7% faster per
 *    FLOP than 128x256 (more stages), 64x48 no faster than 64x64, the 2-CTA clusters halve
 *    the B traffic of 64-row tiles.
 * 2. Twelve shared constants (GEMM_MODEL_H100), fitted to the choices: the plan of each of
 *    the sweep's 115 shapes (every class but the random offsets, the generated class drawn with
 *    another seed than the benchmark's) against the fastest of its ~140 measured candidates.
 *
 * On another device the memory streaming rate follows its peak memory bandwidth
 * (gemm_model_for); the rest is the H100's.
 *
 * The model of one run of T work tiles of nk k-blocks on P = SMs / cluster units at once:
 *   - a phase of u units each doing kbs k-blocks costs kbs x kb + E, the k-block time kb
 *     the largest of three limits:
 *       compute: GEMM_KB_US of the shape (times rowk + (1 - rowk) x rows / bm where the
 *                problem has fewer rows than the tile: the wgmma still runs, the A loads shrink);
 *       latency: lat / stages, the ring refilled once per load latency (Little's law; the
 *                stages counted: gemm_plan_stages); lat is
 *                that of memory where the operands stream (at most `stream_rows` clusters of
 *                rows, so every byte of B is read about once), else of L2;
 *       bytes:   u x (bytes an SM loads per k-block) / bandwidth, of memory or of L2 as above.
 *   - whole tiles: full waves of P units, then one of the rest;
 *   - stream-K (the tail's tiles in s slices, all at once, after the whole waves): the
 *     slices' phase plus the fix-up, fx x s x rows / 128 + fx0 + fs x s;
 *   - plus t0 and `first` per wave (filling the pipeline), and c2 more per wave of 2-CTA
 *     clusters where the loads are aligned.
 * The constants were fitted to the choices, not to the times: the model ranks tile shapes for
 * a problem, and its microseconds are off by up to 2x on small problems (a 24 x 6144 x 4096
 * projection in 64 x 96 tiles: 46 modelled, 25 measured). scripts/gemm_fit.py holds a copy of
 * this model and reports how its picks run against the best measured candidate per class.
 *
 * Loads at 16-byte offsets: the k-blocks are shifted to align B (and A when its offset is
 * B's); where the other operand's rows stay off their lines (`align` under 128), the
 * 2-CTA clusters' per-wave cost c2 is left out, and where both operands' rows are off them
 * (GEMM_ALIGN_ROWS_OFF) the L2 rate is the rate such rows load at (gemm_model_for_loads). */
#ifndef CLCRT_OPS_GEMM_PLAN_H
#define CLCRT_OPS_GEMM_PLAN_H

typedef enum gemm_share {
  GEMM_SHARE_WHOLE, /* every tile whole */
  GEMM_SHARE_TAIL,  /* the cost model's choice for the variant (whole tiles where nothing pays) */
  GEMM_SHARE_ALL    /* every tile cut into slices, enough for every SM (tests, the oracle) */
} gemm_share;

#define GEMM_SK_MIN_KB 4u     /* the fewest k-blocks a slice gets */
#define GEMM_SK_MAX_SLICES 4u /* 7 and 9 slices lost to 2 (0.47x against 0.94x cuBLAS) */

/* Problems of more than GEMM_C2_ONE_MIN_M rows, up to GEMM_C2_ONE_MAX_M, whose plan runs 64-row
 * tiles in 2-CTA clusters run the same tiles in one CTA each (gemm_plan_dense_t), where the loads
 * are on their lines after the shift (operands aligned, or at one offset) or at offsets apart
 * (64-row tiles load both operands on their lines there, and the plan chooses as where they are
 * aligned). Not where the rows of both operands are off their lines (215x5120x18392 ran 1.7x
 * slower in its twin), nor where one pitch is. The model costs such a cluster 8% below its
 * one-CTA twin there (the clusters' k-block times were measured on problems of 1024 rows and
 * more, where the multicast halves the L2 traffic of many row blocks); measured on an H200,
 * 2026-11-30 (ops/NOTES.md), the clusters ran 11-12% slower than the twins over 457 pairs timed
 * back to back in the sweeps of 129 to 512 rows (level at 65 to 128 rows and at 513 to 2048;
 * past 2048 rows 14% faster, as the model says). On public-model layers at random batch sizes,
 * none in the sweeps, the tree before and after alternating twice: on 48, the model's best
 * one-CTA plan 1.10x in geo-mean and the twin 1.01x faster than that; on 32 others the twin
 * 1.10x, and 1.09x with both operands 16 bytes past a line; the same 32 at offsets apart (A 16,
 * B 48 bytes past a line) 1.05x, against the tree with this rule for aligned loads only. */
#ifndef GEMM_C2_ONE_MIN_M
#define GEMM_C2_ONE_MIN_M 128u
#endif
#ifndef GEMM_C2_ONE_MAX_M
#define GEMM_C2_ONE_MAX_M 512u
#endif
/* Plans of 2-CTA clusters that the model puts under GEMM_C2_SHORT_US run the same tile shape in
 * one CTA each (same orientation, the model's decomposition), where the loads are on their lines
 * after the shift or at offsets apart (as GEMM_C2_ONE_*). On short runs a cluster's two CTAs
 * start, fill their rings and leave together, which the model's per-wave cost for clusters
 * (GEMM_FIT_C2) does not cover. Measured on an H200, 2026-12-02 (ops/NOTES.md): over 36 shapes of
 * 267 to 2947 rows, every candidate timed back to back, a cluster took 1.13x, 1.17x and 1.09x the
 * time of its one-CTA twin in geo-mean where the twin ran under 20, 20-40 and 40-70 us (faster in
 * 42 of 391 pairs), 1.02-1.03x at 70-200 us, 0.96-1.01x past that. The model's cost runs above the
 * time of such runs (100 of its microseconds are about 70 measured). The 18 shapes of the
 * benchmark's classes and of 40 seeds of its generated class whose plans this changes, two runs
 * against one of the tree before in one call: 1.074x and 1.082x faster in geo-mean (15 and 18 of
 * 18 faster, up to 1.24x; the slowest 0.93x in the first run). */
#ifndef GEMM_C2_SHORT_US
#define GEMM_C2_SHORT_US 100.0
#endif
/* Runs the model puts at or under this many microseconds go with programmatic dependent launch
 * (CLCRT_RUN_PDL). Measured on the H100, 2026-11-27 (the same 14 shapes back to back, launch
 * attribute off and on, twice, in one call): runs of 13-22 us gained 0.5-1.7 us, the model's cost
 * for them 22-47 us; runs of 37-92 us lost 2-8 us, their cost 51-109 us. The model's cost is
 * above the time for such short runs (its fixed terms), hence a threshold in its units. */
#define GEMM_PDL_MAX_US 45.0

/* The transposed plan (gemm_plan_dense_t): its epilogue's extra cost in epilogues of the
 * normal kind per wave, and the factor by which its modelled time must beat the normal plan's. */
#ifndef GEMM_TRANS_EPI
#define GEMM_TRANS_EPI 2.0
#endif
#ifndef GEMM_TRANS_GAIN
#define GEMM_TRANS_GAIN 1.05
#endif
/* ... and only for problems of at least this many rows. With fewer, the transposed tiles have
 * one to four blocks of columns and stream the weights (their A) from memory, partly or wholly;
 * the model's k-block times were measured on normal tiles only, and its transposed picks there
 * did not hold up: decode layers of 20 to 64 rows, up to 2x cheaper by its count, measured no
 * faster (H100: 20x3584x3584 0.990 against 0.981 of cuBLAS, 64x5120x5120 1.035 against 1.050).
 * At 256 rows and more its picks measured faster or level (ops/NOTES.md). */
#ifndef GEMM_TRANS_MIN_M
#define GEMM_TRANS_MIN_M 256u
#endif
/* Problems of at most this many rows whose normal plan cuts tiles into stream-K slices run in
 * 64-row tiles transposed instead, block N the narrowest multiple of 16 that covers M (64x16 up
 * to 16 rows, 64x32 to 32, 64x48, 64x64), with the model's decomposition of the swapped problem:
 * by measurement, not by the model (which does not know the transposed tiles' streaming rate).
 * Such a problem's normal tiles pad M to 64 rows and need slices to fill the SMs; the transposed
 * ones run one 64-row tile per 64 rows of weights, padded to the narrowest block N. Measured:
 * up to 16 rows on an H100, 2026-11-27; up to 64 on an H200, 2026-11-28, where a sweep of every
 * tile shape both ways over the decode and GEMV classes put the narrowest transposed shape at or
 * near the best, and 89 generated shapes of 17 to 64 rows the sweep had not seen (every one
 * whose plan the rule changes, five seeds) ran 1.067x faster in geo-mean, 7 of them slower by
 * more than 2% (to 0.885x: 31x8192x33304) (ops/NOTES.md). */
#ifndef GEMM_TRANS_GEMV_M
#define GEMM_TRANS_GEMV_M 64u
#endif
/* ... and problems of more rows than that, up to GEMM_TRANS_SKINNY_M, whose normal plan cuts its
 * tiles into stream-K slices or pairs them in 2-CTA clusters: 64-row tiles transposed, block N
 * the narrowest multiple of 16 that covers M (64x80t to 64x208t), with the model's decomposition
 * of the swapped problem. Normal tiles take such an M in two to four row blocks, and each block's
 * tiles read all of B (the weights) again; transposed, each byte of the weights is read by one
 * tile and only the few rows of A by all. Measured on an H200, 2026-11-29, back to back
 * (ops/NOTES.md, bench/results/gemm-h200-skinny-trans-2026-11-29.txt): every problem of 65 to 255
 * rows transposed was 1.15x in geo-mean over the 14 shapes of the experiment's sweep, but, the
 * tree before and after alternating twice in one call, 1.07x over 16 others (6 slower, to 0.81x,
 * 5 of them whole 1-CTA tiles before); where the normal plan slices or pairs its tiles, 1.16x
 * over 16 more (12 faster, to 1.58x; the 4 slower, to 0.71x, of 215 to 250 rows: the bound comes
 * from them); then as landed, on 16 more of 75 to 199 rows, 1.18x, 13 faster (to 1.74x:
 * 148x4096x14336), the slowest 0.98x. */
#ifndef GEMM_TRANS_SKINNY_M
#define GEMM_TRANS_SKINNY_M 208u
#endif
/* ... and also where the normal plan runs whole tiles, for problems of at most
 * GEMM_TRANS_NARROW_M rows whose normal tiles are at most GEMM_TRANS_NARROW_BN wide: a problem
 * of few columns as well, whose normal plan spreads it over the SMs in narrow tiles, each padding
 * M to 64 rows. Measured on an H200, 2026-11-29 (ops/NOTES.md), against the normal whole tiles,
 * alternating twice: the 7 such shapes of a first sweep (K 2048, N 2048 to 7104) 1.14-1.70x
 * faster; then 16 generated shapes of other seeds 1.22x in geo-mean, 15 faster (to 1.65x:
 * 1x2048x2048), 1 slower (0.81x). Wider normal tiles (64x96 to 64x256, N of 10k and more) lost or
 * broke even (0.87-1.08x over 25 shapes): not taken. */
#ifndef GEMM_TRANS_NARROW_M
#define GEMM_TRANS_NARROW_M 16u
#endif
#ifndef GEMM_TRANS_NARROW_BN
#define GEMM_TRANS_NARROW_BN 64u
#endif
/* ... and where those whole tiles would leave SMs idle on a long run, stream-K over every SM
 * instead (clcrt_streamk.cuh, order 0: each SM one range of k-blocks that may cross tiles): when
 * the tiles cover at most GEMM_SK_SMS_MAX_FILL of the SMs, each SM's range is at least
 * GEMM_SK_SMS_MIN_KB k-blocks and the problem has at most GEMM_SK_SMS_MAX_M rows. Measured on an
 * H200, 2026-11-29 (ops/NOTES.md): over 79 decode and generated shapes of 1 to 64 rows whose
 * transposed tiles ran whole, the ranges cost about 2-4 us more (the fix-up, a range that
 * restarts its ring at a tile boundary): 0.69-0.91x on runs under 25 us. Past 150 k-blocks an SM
 * and at 80 or fewer tiles (61% of 132 SMs) they ran 0.985-1.19x as fast (1.18x: 16x4608x36864,
 * 72 tiles), at 96 tiles (73%) 0.91-0.96x. Then shapes the experiment had not seen (generated
 * shapes of six other seeds, public models' decode projections), before and after alternating
 * twice: the 35 of at most 48 rows 1.044x in geo-mean, 32 of them 1.01-1.19x, the slowest 0.98x;
 * of 49 to 64 rows (64x64 tiles), these 2 and the experiment's 3 ran 0.95-1.02x, 0.98x in
 * geo-mean: not taken. */
#ifndef GEMM_SK_SMS_MAX_FILL
#define GEMM_SK_SMS_MAX_FILL 0.62
#endif
#ifndef GEMM_SK_SMS_MIN_KB
#define GEMM_SK_SMS_MIN_KB 150u
#endif
#ifndef GEMM_SK_SMS_MAX_M
#define GEMM_SK_SMS_MAX_M 48u
#endif
/* Where the normal plan of 65 to GEMM_TRANS_SKINNY_M rows runs whole tiles of one CTA in two
 * or more row blocks, the last one part empty (each block's tiles read all the weights again,
 * and the empty rows cost what full ones do): 64-row tiles transposed, block N the narrowest
 * that covers M (as for GEMM_TRANS_SKINNY_M), where the model costs them lower with two terms
 * of their own (gemm_plan_kb's cover): the tiles' rows are the weights and stream, their columns
 * the activations, the same lines of L2 for every tile, so only the weights' bytes count against
 * memory; a k-block takes GEMM_COVER_KB of its time with
 * every SM busy, and the latency term GEMM_COVER_LAT of the model's. Measured on an H200,
 * 2026-11-30, back to back (ops/NOTES.md): on 19 problems of 66 to 199 rows whose normal plan
 * ran whole tiles, the model without these terms put the transposed plans at 1.3-3x their time
 * (139x2048x9728 in 64x144t, stream-K: 59 us, measured 22.6; the normal plan's 64x48: 44 and
 * 32.0), where the normal plans' costs ran 1.2-1.7x theirs; the two factors were chosen on those
 * 19. Then, the tree before and after alternating in one call, on 45 other problems (21 of the
 * benchmark's classes, 24 of public models' layers at random batch sizes): 1.13x in geo-mean,
 * and of the 8 that lost up to 0.87x, 5 had one row block of 128 rows (the weights read once
 * either way, and 128-row tiles multiply faster) and 2 no row empty (128 rows in 64-row tiles):
 * hence the bounds; within them 1.16x over 37 (to 1.65x: 82x2048x10816; the slowest 0.90x:
 * 116x28672x8192). As bounded, on 28 more layers none of this was drawn from, 4 of them at
 * 16-byte offsets: 1.17x, 20 faster, the slowest 0.89x. */
#ifndef GEMM_COVER_KB
#define GEMM_COVER_KB 0.8
#endif
/* ... and where the model with GEMM_COVER_KB declines the transposed plan against a normal plan of
 * 128-row tiles, it is asked again with GEMM_COVER_KB_128 (its plan and its cost): the factor 0.7
 * is nearer the k-block times such tiles ran at (0.21-0.25 us for 64x144t and 64x160t, 0.60-0.67
 * of the table's), and against 128-row tiles it won where 0.8 declined: on an H200, 2026-11-30, 12
 * of 13 faster (1.04-1.28x) of the problems it changed among 600 random layers, and then, held
 * out, 1.083x over 21 (16 faster, the slowest 0.96x: 189x15360x3840). Everywhere (against 64-row
 * tiles too, and redoing the decomposition of plans 0.8 takes) it was mixed: 1.063x over 28 but 11
 * slower (to 0.80x), and 9 of 10 changed decompositions slower (0.80-0.99x). */
#ifndef GEMM_COVER_KB_128
#define GEMM_COVER_KB_128 0.7
#endif
#ifndef GEMM_COVER_LAT
#define GEMM_COVER_LAT 0.35
#endif
/* ... and for problems of more rows than GEMM_COVER_WIDE_MIN_M (and at most GEMM_TRANS_SKINNY_M),
 * whatever the plan so far: 128-row tiles transposed, block N the narrowest that covers M, whole,
 * where the model with the cover terms (the k-block time GEMM_COVER_KB_WIDE of the table's)
 * costs them lower, the last wave is at least GEMM_COVER_WIDE_MIN_FILL full, and the plan so far
 * is not 64-row tiles at offsets 16 or 32 bytes apart (which load both operands on their lines,
 * gemm_ashift, where 128-row tiles would leave the weights off them). Normal 128-row tiles take
 * such an M in two row blocks, each reading all the weights; 64-row tiles transposed read the
 * activations once per 64 rows of weights, as many bytes as the weights' own; 128-row tiles
 * transposed read the weights once and the activations half as often. Measured on an H200,
 * 2026-11-30, back to back (ops/NOTES.md):
 *   - a sweep of 20 problems of 77 to 203 rows over 64- and 128-row tiles both ways, clusters of
 *     1 and 2: whole 128-row transposed tiles ran 1.07-1.45x the plan before on the 6 of more
 *     than 128 rows with 79 to 224 tiles (to 0.87-0.95 of cuBLAS), 0.41-0.75x with 20 to 48
 *     tiles; cut into stream-K slices they lost to 64-row ones; at 128 rows or fewer, where one
 *     normal row block reads the weights once, they gained nothing;
 *   - then the tree before and after alternating twice in one call: with the k-block time x0.8
 *     (GEMM_COVER_KB), 41 problems (34 public-model layers) 1.08x, 8 slower (to 0.80x), 6 of
 *     them with a last wave under half full (192, 280, 296 tiles); with x1.0, 29 more layers
 *     1.11x, the 2 slower (0.93x) with 296 tiles, and at offsets 16 bytes apart 2 of 4 slower
 *     (0.82-0.85x) against 64-row tiles: hence the bounds (32 bytes apart, not measured then,
 *     bounded as 16: the weights' box rows straddle two lines either way);
 *   - as landed, 74 layers of 15 other public models at random batch sizes, 34 of them at
 *     random 16-byte offsets, none seen before: 1.15x in geo-mean, 68 faster, 2 slower (0.91x:
 *     197x28672x4096; 0.92x), against cuBLAS 0.77 -> 0.90. */
#ifndef GEMM_COVER_WIDE_MIN_M
#define GEMM_COVER_WIDE_MIN_M 128u
#endif
#ifndef GEMM_COVER_KB_WIDE
#define GEMM_COVER_KB_WIDE 1.0
#endif
#ifndef GEMM_COVER_WIDE_MIN_FILL
#define GEMM_COVER_WIDE_MIN_FILL 0.5
#endif
/* Where a problem of 65 to 128 rows runs 64-row tiles transposed (the rules above), the normal
 * plan of 128-row tiles of one CTA, whole, runs instead where the model costs it at most
 * GEMM_ONE_BLOCK_KEEP times the transposed plan (with the cover terms): one such row block reads
 * the weights once, and reads the activations once per 176 to 256 columns where the 64-row tiles
 * transposed read them once per 64. The model with the cover terms counts only the weights'
 * bytes for the transposed tiles, and so misses the activations' traffic, as many bytes as the
 * weights' at 64 rows and more. Measured on an H200, 2026-11-30 (ops/NOTES.md): a sweep of 20
 * problems of 67 to 128 rows over 64- and 128-row tiles both ways put normal 128-row tiles whole
 * at 1.07-1.14x the transposed plan on the 3 of 24576 to 28672 columns, where the model costs
 * them 1.10-1.14x as much; 1.15 takes those 3 and no other of the 20. Then, the tree before and
 * after alternating twice in one call, 33 public-model layers none of it was drawn from (15 at
 * random 16-byte offsets): aligned 1.146x over 18, all faster; at offsets 1.081x over 15, 12
 * faster, the 3 slower (0.92-0.97x) with offsets 16 bytes apart, where 5 others gained
 * 1.04-1.10x (the 64-row tiles load both operands on their lines there, the 128-row ones not). */
#ifndef GEMM_ONE_BLOCK_KEEP
#define GEMM_ONE_BLOCK_KEEP 1.15
#endif
/* The narrowest block N (a multiple of 16) that covers m columns. */
static inline unsigned gemm_cover_bn(unsigned m) { return gemm_cdiv(m, 16u) * 16u; }

typedef struct gemm_plan {
  int variant;                 /* index of gemm_variant_at */
  clcrt_sched sched;           /* the scheduler to register the variant with */
  unsigned sk_tiles, sk_units; /* stream-K (clcrt_sk_make); 0, 0: every tile whole */
  unsigned sk_tail;            /* 1: the shared tiles last (clcrt_streamk.cuh, order 1) */
  int shift;                   /* 1: shift the k-blocks to align the loads (gemm_kshift) */
  int trans;                   /* 1: A and B swapped, the tiles compute D transposed (GemmArgs.trans) */
  double cost;                 /* the model's estimate, in microseconds */
} gemm_plan;

/* The name of the plan's tile shape as a descriptor names it: with a "t" after it when
 * transposed (NULL for a shape that has no transposed kernel). */
static inline const char *gemm_plan_variant_name(const gemm_plan *p) {
  return p->trans ? gemm_variant_name_t(p->variant) : gemm_variant_at(p->variant)->name;
}

static inline int gemm_variant_index(const char *name) {
  int i = gemm_variant_find(name);
  return i < 0 ? 0 : i;
}

/* 1. Microseconds per 64-deep k-block with every SM busy, [block M 64, 128][cluster 1, 2]
 * [block N / 16 - 1]: bench_gemm --wide on an H100 SXM, 2026-11-27. */
static const float GEMM_KB_US[2][2][16] = {
    {/* 64 x N */ {0.164f, 0.187f, 0.237f, 0.238f, 0.255f, 0.265f, 0.291f, 0.324f, 0.344f, 0.382f, 0.434f, 0.443f,
                  0.474f, 0.510f, 0.572f, 0.567f},
     /* 64 x N c2 */
     {0.153f, 0.168f, 0.234f, 0.236f, 0.242f, 0.253f, 0.268f, 0.278f, 0.302f, 0.322f, 0.343f, 0.357f, 0.383f, 0.404f,
      0.424f, 0.439f}},
    {/* 128 x N */ {0.290f, 0.311f, 0.337f, 0.378f, 0.387f, 0.411f, 0.430f, 0.419f, 0.432f, 0.473f, 0.522f, 0.555f,
                   0.612f, 0.661f, 0.723f, 0.782f},
     /* 128 x N c2 */
     {0.300f, 0.317f, 0.332f, 0.345f, 0.368f, 0.385f, 0.411f, 0.443f, 0.446f, 0.485f, 0.526f, 0.573f, 0.628f, 0.686f,
      0.736f, 0.786f}}};

/* 2. The shared constants (microseconds, bytes per microsecond), as scripts/gemm_fit.py --fit
 * chose them on the sweep (it reads them back from these lines). */
#define GEMM_FIT_T0 5.516
#define GEMM_FIT_FIRST 1.801
#define GEMM_FIT_EPI 3.039
#define GEMM_FIT_LAT_MEM 4.827
#define GEMM_FIT_LAT_L2 0.6129
#define GEMM_FIT_BW_MEM 3.157e+06
#define GEMM_FIT_BW_L2 8.191e+06
#define GEMM_FIT_SR 1.043
#define GEMM_FIT_ROWK 0.4689
#define GEMM_FIT_FX 2.643
#define GEMM_FIT_FX0 3.444
#define GEMM_FIT_FS 3.351
/* Per wave of 2-CTA clusters, beyond `first`: not fitted with the twelve above but scanned with
 * them held (scripts/gemm_fit.py --scan-c2). A cluster's two CTAs start and refill their rings
 * together, and the launch schedules pairs: over every tile shape timed back to back (H100
 * sweep, 117 shapes; H200, 47), a 2-CTA candidate ran 1.24-1.32x as long as the same shape in
 * 1-CTA tiles in geo-mean on runs under 0.1 ms, 1.02x past 0.3 ms. 3 us: ops/NOTES.md,
 * 2026-11-29. */
#define GEMM_FIT_C2 3.0
typedef struct gemm_model {
  double t0;          /* a run's fixed cost */
  double first;       /* per wave: the first loads of its tiles */
  double epi;         /* a 128 x 256 tile's epilogue (scaled by block M x block N) */
  double lat_mem;     /* a load's latency where the operands stream from memory */
  double lat_l2;      /* ... where they are reused from L2 */
  double bw_mem;      /* what all SMs load per microsecond, streaming from memory */
  double bw_l2;       /* ... from L2 */
  double stream_rows; /* at most this many clusters of rows: the operands stream */
  double rowk;        /* the share of a k-block's time that rows short of the tile do not save */
  double fx, fx0, fs; /* stream-K's fix-up: per slice and 128 rows, per run, per slice */
  double c2;          /* per wave of 2-CTA clusters, beyond `first` */
  /* Transposed tiles whose one column tile covers the problem's rows (GEMM_COVER_*; 0: costed
   * as any other tile): the k-block time's share of gemm_plan_kb_full, and of the latency term. */
  double cover_kb, cover_lat;
} gemm_model;

static const gemm_model GEMM_MODEL_H100 = {
    .t0 = GEMM_FIT_T0,          .first = GEMM_FIT_FIRST,     .epi = GEMM_FIT_EPI,    .lat_mem = GEMM_FIT_LAT_MEM,
    .lat_l2 = GEMM_FIT_LAT_L2,  .bw_mem = GEMM_FIT_BW_MEM,   .bw_l2 = GEMM_FIT_BW_L2, .stream_rows = GEMM_FIT_SR,
    .rowk = GEMM_FIT_ROWK,      .fx = GEMM_FIT_FX,           .fx0 = GEMM_FIT_FX0,    .fs = GEMM_FIT_FS,
    .c2 = GEMM_FIT_C2,
};

/* The H100 SXM's peak memory bandwidth (a 2619 MHz double-data-rate clock on a 5120-bit bus),
 * the device bw_mem was fitted on. */
#define GEMM_H100_PEAK_BW (2.0 * 2619e6 * (5120 / 8))
/* The model for a device whose peak memory bandwidth is mem_bw bytes per second
 * (clcrt_runtime_mem_bandwidth; 0: unknown, taken as the H100's): the H100's with the rate at
 * which operands stream from memory scaled by the two peaks' ratio (kept within 0.25 to 4). The
 * other terms stay: an H200 is an H100's processor with HBM3e, and the k-block times, L2 and
 * latencies are the processor's. Measured on an H200 (its driver reports 4.81e12; ops/NOTES.md):
 * of the decode, GEMV, vocabulary and generated shapes, the 26 of 88 whose plans change ran
 * 1.029x faster in geo-mean (18 faster, up to 1.20x; 8 slower, to 0.93x), the other 62 1.000x. */
static inline gemm_model gemm_model_for(double mem_bw) {
  gemm_model md = GEMM_MODEL_H100;
  if (mem_bw > 0) {
    const double s = mem_bw / GEMM_H100_PEAK_BW;
    md.bw_mem *= s < 0.25 ? 0.25 : s > 4.0 ? 4.0 : s;
  }
  return md;
}

static inline double gemm_plan_kb_full(const gemm_variant *v) {
  return GEMM_KB_US[v->bm == 128][v->cm == 2][(v->bn / 16u - 1u) & 15u];
}

/* The stages the latency term counts. The k-block times and the constants were measured and
 * fitted on rings of at most 8 stages; gemm_variant_make now gives narrow tiles deeper ones (up
 * to 16). Counted in full, they drew the plans of decode layers onto the narrowest tiles (64x32
 * in 16 stages), slower than before, and the GEMVs off 64x16 transposed; not counted, no plan
 * changes and the deeper rings alone measured level. So problems of more than
 * GEMM_DEEP_MIN_ROWS rows count up to GEMM_MODEL_DEEP_STAGES, the others up to 8: on an H200
 * (ops/NOTES.md) 8 of 72 decode, generated and offset shapes changed plan, each as fast or
 * faster (up to 1.23x: 53x4608x4096 in 64x48 tiles whole, 0.71 -> 0.88 of cuBLAS). */
#ifndef GEMM_MODEL_STAGES
#define GEMM_MODEL_STAGES 8u
#endif
#ifndef GEMM_DEEP_MIN_ROWS
#define GEMM_DEEP_MIN_ROWS 32u
#endif
#ifndef GEMM_MODEL_DEEP_STAGES
#define GEMM_MODEL_DEEP_STAGES 12u
#endif
static inline unsigned gemm_plan_stages(const gemm_variant *v, unsigned rows) {
  const unsigned cap = rows > GEMM_DEEP_MIN_ROWS ? GEMM_MODEL_DEEP_STAGES : GEMM_MODEL_STAGES;
  return v->stages < cap ? v->stages : cap;
}

/* The time of one k-block of variant v with u CTAs loading at once, for a problem of `rows` rows.
 * cover: a transposed plan whose one column tile covers the problem's rows, costed with the
 * model's cover terms where it has them: only the tiles' rows (the weights) stream from memory,
 * the columns (the activations) are the same lines of L2 for every tile. */
static inline double gemm_plan_kb(const gemm_model *md, const gemm_variant *v, unsigned u, unsigned rows,
                                  int stream, int cover) {
  const double ra = rows < v->bm ? rows : v->bm;
  const double per_sm = (ra * v->cm + v->bn) * 128.0 / v->cm; /* bytes per CTA: B shared by the cluster */
  const double ctas = u < 132u ? u : 132u;
  double kb = gemm_plan_kb_full(v) * (md->rowk + (1.0 - md->rowk) * ra / v->bm);
  double lat = (stream ? md->lat_mem : md->lat_l2) / gemm_plan_stages(v, rows);
  double bytes = ctas * per_sm / (stream ? md->bw_mem : md->bw_l2);
  if (cover && md->cover_kb > 0) {
    kb *= md->cover_kb;
    lat *= md->cover_lat;
    bytes = ctas * ra * 128.0 / md->bw_mem;
  }
  if (lat > kb) kb = lat;
  if (bytes > kb) kb = bytes;
  return kb;
}

/* The model's time of variant v on an m x n x k problem, sk_tiles of its tiles cut into
 * sk_units / sk_tiles slices after the whole ones (0, 0: every tile whole). */
static inline double gemm_plan_cost_t(const gemm_model *md, const gemm_variant *v, unsigned m, unsigned n, unsigned k,
                                      unsigned sk_tiles, unsigned sk_units, int sms, int trans) {
  const unsigned P = (unsigned)sms / v->cm, tm = gemm_cdiv(m, v->bm), T = gemm_cdiv(tm, v->cm) * gemm_cdiv(n, v->bn);
  const unsigned nk = gemm_cdiv(k, GEMM_BK);
  if (P == 0 || T == 0) return 0;
  /* The large operand streams from memory where few tiles share its rows: B (the weights) when
   * the row clusters are few; transposed (m x n the tiles' view, A the weights), when the column
   * tiles are. */
  const int stream = trans ? gemm_cdiv(n, v->bn) <= md->stream_rows : gemm_cdiv(tm, v->cm) <= md->stream_rows;
  const int cover = trans && stream;
  const double E = md->epi * v->bm * v->bn / 32768.0;
  const unsigned whole = T - sk_tiles, full = whole / P, rest = whole % P;
  double t = full * (nk * gemm_plan_kb(md, v, P * v->cm, m, stream, cover) + E);
  if (sk_units && sk_tiles) {
    const unsigned sl = sk_units / sk_tiles, ks = gemm_cdiv(nk, sl), units = rest + sk_units;
    const unsigned w = gemm_cdiv(units, P), uu = units < P ? units : P;
    const unsigned kbs = rest && nk > ks ? nk : ks;
    t += w * (kbs * gemm_plan_kb(md, v, uu * v->cm, m, stream, cover) + E);
    t += md->fx * sl * (m < v->bm ? m : v->bm) / 128.0 + md->fx0 + md->fs * sl;
  } else if (rest) {
    t += nk * gemm_plan_kb(md, v, rest * v->cm, m, stream, cover) + E;
  }
  return md->t0 + t + (md->first + (v->cm == 2 ? md->c2 : 0.0)) * gemm_cdiv(T, P);
}
static inline double gemm_plan_cost(const gemm_model *md, const gemm_variant *v, unsigned m, unsigned n, unsigned k,
                                    unsigned sk_tiles, unsigned sk_units, int sms) {
  return gemm_plan_cost_t(md, v, m, n, k, sk_tiles, sk_units, sms, 0);
}

/* Where the rows of both operands are off their lines (GEMM_ALIGN_ROWS_OFF), what all SMs load
 * from L2 per microsecond (5.28 TB/s, 40 GB/s an SM): each box row costs two lines, and a tile's
 * k-block takes at least as long as its rows take to load at this rate. On an H200, 2026-11-30
 * (ops/NOTES.md), 12919x7168x27912 loaded the rows of 128x176c2, 128x256, 128x128 and 128x128c2
 * tiles at 37-40 GB/s an SM (128x176c2: 0.70 us a k-block, 0.53 aligned); 128x256c2, the
 * fewest rows per multiply-add, ran at its aligned speed. */
#define GEMM_ROWS_OFF_L2 5.28e6

/* The model for loads `align`-byte aligned after the shift (gemm_load_align): where one
 * operand's rows stay off their 128-byte lines, the 2-CTA clusters' per-wave cost is left out.
 * Their multicast halves each CTA's share of B, and with it the lines a misaligned box row
 * straddles: on an H200, 2026-11-29, the align16 class lost 0.967 -> 0.949 with the cost counted
 * there (300x3584x18944 at random offsets, 128x160c2t -> 128x160t, 0.82 -> 0.70 of cuBLAS, where
 * the same shape aligned gained 0.90 -> 0.92). */
static inline gemm_model gemm_model_for_loads(double mem_bw, unsigned align) {
  gemm_model md = gemm_model_for(mem_bw);
  if (align < 128u) md.c2 = 0.0;
  if ((align & GEMM_ALIGN_ROWS_OFF) && md.bw_l2 > GEMM_ROWS_OFF_L2) md.bw_l2 = GEMM_ROWS_OFF_L2;
  return md;
}

/* The same with the cover terms (gemm_plan_kb's cover): the k-block time x kb, the latency term
 * x GEMM_COVER_LAT; for the transposed plans of 65 to GEMM_TRANS_SKINNY_M rows. */
static inline gemm_model gemm_model_cover(double mem_bw, unsigned align, double kb) {
  gemm_model md = gemm_model_for_loads(mem_bw, align);
  md.cover_kb = kb, md.cover_lat = GEMM_COVER_LAT;
  return md;
}

/* The decomposition `share` of an m x n x k problem for p->variant on `sms` SMs with model md,
 * into p. */
static inline void gemm_plan_share_md(gemm_plan *p, gemm_share share, unsigned m, unsigned n, unsigned k, int sms,
                                      const gemm_model *md) {
  const gemm_variant *v = gemm_variant_at(p->variant);
  const unsigned P = (unsigned)sms / v->cm, T = gemm_work_tiles(v, m, n), nk = gemm_cdiv(k, GEMM_BK);
  p->sk_tiles = p->sk_units = p->sk_tail = 0;
  if (P == 0 || T == 0) return;
  p->cost = gemm_plan_cost_t(md, v, m, n, k, 0, 0, sms, p->trans);
  if (share == GEMM_SHARE_WHOLE) return;
  if (share == GEMM_SHARE_ALL) {
    unsigned sl = P / T < 2 ? 2 : P / T;
    if (sl > nk) sl = nk;
    p->sk_tiles = T, p->sk_units = T * sl;
    p->cost = gemm_plan_cost_t(md, v, m, n, k, T, T * sl, sms, p->trans);
    return;
  }
  /* The tail's tiles in s slices, all at once (s * tail <= P), each slice at least
   * GEMM_SK_MIN_KB k-blocks. */
  const unsigned rest = T % P;
  for (unsigned sl = 2; sl <= GEMM_SK_MAX_SLICES && rest && rest * sl <= P && nk / sl >= GEMM_SK_MIN_KB; sl++) {
    const double c = gemm_plan_cost_t(md, v, m, n, k, rest, rest * sl, sms, p->trans);
    if (c < p->cost) p->cost = c, p->sk_tiles = rest, p->sk_units = rest * sl, p->sk_tail = 1;
  }
}
/* The same on a device of peak memory bandwidth mem_bw (gemm_model_for), loads aligned. */
static inline void gemm_plan_share(gemm_plan *p, gemm_share share, unsigned m, unsigned n, unsigned k, int sms,
                                   double mem_bw) {
  const gemm_model md = gemm_model_for(mem_bw);
  gemm_plan_share_md(p, share, m, n, k, sms, &md);
}

/* Variant i if the plan considers it: each tile shape once (the measured table's entries come
 * first), without the table's experiments (the first epilogue, a stage less), which are not
 * what the shape's calibration measured; else NULL. Decided once per program. */
static unsigned char gemm__plan_cand[GEMM_ALL_VARIANTS];
static pthread_once_t gemm__plan_cand_once = PTHREAD_ONCE_INIT;
static void gemm__plan_cand_make(void) {
  for (int i = 0; i < GEMM_ALL_VARIANTS; i++) {
    const gemm_variant *v = gemm_variant_at(i);
    gemm_variant g;
    char name[16];
    gemm__plan_cand[i] = v && gemm_variant_find(v->name) == i &&
                         (i >= GEMM_NUM_VARIANTS || (gemm_variant_make(&g, name, v->bm, v->bn, v->cm) &&
                                                     g.stages == v->stages && g.epi == v->epi));
  }
}
static inline const gemm_variant *gemm_plan_candidate(int i) {
  if (i < 0 || i >= GEMM_ALL_VARIANTS) return NULL;
  pthread_once(&gemm__plan_cand_once, gemm__plan_cand_make);
  return gemm__plan_cand[i] ? gemm_variant_at(i) : NULL;
}

/* The transposed epilogue's extra cost of variant v on an m x n problem (its tiles along n): its
 * 2-byte stores scattered over block N rows of D, GEMM_TRANS_EPI more epilogues per wave. */
static inline double gemm_plan_trans_epi(const gemm_variant *v, unsigned m, unsigned n, int sms) {
  return GEMM_TRANS_EPI * GEMM_MODEL_H100.epi * v->bm * v->bn / 32768.0 *
         gemm_cdiv(gemm_work_tiles(v, n, m), (unsigned)sms / v->cm);
}

/* Which tile shapes a plan looks at (gemm_plan_dense_sel): all, or only 64-row (128-row) tiles
 * of one CTA. */
enum { GEMM_SEL_ALL, GEMM_SEL_64_ONE, GEMM_SEL_128_ONE };

/* The plan of a dense m x n x k problem whose loads are `align`-byte aligned after the shift
 * (gemm_load_align) on a device of `sms` SMs: the lowest cost over every tile shape `sel`
 * admits, each with its best decomposition. A tie keeps the earlier shape (the measured
 * table's first, then the generated ones in order). About 300 costings: the op keeps its plans
 * per shape (gemm.c), so a shape pays for them once. */
static inline gemm_plan gemm_plan_dense_sel(unsigned m, unsigned n, unsigned k, unsigned align, int sms, double mem_bw,
                                            int trans, int sel) {
  const gemm_model md = gemm_model_for_loads(mem_bw, align);
  gemm_plan best;
  memset(&best, 0, sizeof best);
  int have = 0;
  for (int i = 0; i < GEMM_ALL_VARIANTS; i++) {
    const gemm_variant *v = gemm_plan_candidate(i);
    if (!v || (unsigned)sms / v->cm == 0 || (trans && !gemm_trans_ok(v))) continue;
    if (sel == GEMM_SEL_64_ONE && (v->bm != 64 || v->cm != 1)) continue;
    if (sel == GEMM_SEL_128_ONE && (v->bm != 128 || v->cm != 1)) continue;
    gemm_plan p;
    memset(&p, 0, sizeof p);
    p.variant = i;
    p.sched = CLCRT_SCHED_STEAL;
    p.shift = 1;
    p.trans = trans;
    if (trans) {
      gemm_plan_share_md(&p, GEMM_SHARE_TAIL, n, m, k, sms, &md);
      p.cost += gemm_plan_trans_epi(v, m, n, sms);
    } else {
      gemm_plan_share_md(&p, GEMM_SHARE_TAIL, m, n, k, sms, &md);
    }
    if (!have || p.cost < best.cost) best = p, have = 1;
  }
  return best;
}
static inline gemm_plan gemm_plan_dense_as(unsigned m, unsigned n, unsigned k, unsigned align, int sms, double mem_bw,
                                           int trans) {
  return gemm_plan_dense_sel(m, n, k, align, sms, mem_bw, trans, GEMM_SEL_ALL);
}

/* The plan of the bm x bn tiles of one CTA, transposed or not, with the decomposition of the
 * problem (swapped where transposed) that md costs lowest; a cost of 0 where there is no such
 * tile shape. */
static inline gemm_plan gemm_plan_of(unsigned bm, unsigned bn, int trans, unsigned m, unsigned n, unsigned k, int sms,
                                     const gemm_model *md) {
  gemm_plan t;
  memset(&t, 0, sizeof t);
  char name[16];
  snprintf(name, sizeof name, "%ux%u", bm, bn);
  const int i = gemm_variant_find(name);
  if (i < 0) return t;
  t.variant = i, t.sched = CLCRT_SCHED_STEAL, t.shift = 1, t.trans = trans;
  gemm_plan_share_md(&t, GEMM_SHARE_TAIL, trans ? n : m, trans ? m : n, k, sms, md);
  return t;
}

/* bm-row tiles transposed (bm 64 or 128), block N the narrowest that covers m (bmx16t to
 * bmx256t); a cost of 0 where m needs more than 256. */
static inline gemm_plan gemm_plan_cover_bm(unsigned bm, unsigned m, unsigned n, unsigned k, int sms,
                                           const gemm_model *md) {
  return gemm_plan_of(bm, gemm_cover_bn(m), 1, m, n, k, sms, md);
}
static inline gemm_plan gemm_plan_cover(unsigned m, unsigned n, unsigned k, int sms, const gemm_model *md) {
  return gemm_plan_cover_bm(64u, m, n, k, sms, md);
}

/* The same with the transposed epilogue's extra cost counted, as gemm_plan_dense_sel counts it. */
static inline gemm_plan gemm_plan_cover_bm_epi(unsigned bm, unsigned m, unsigned n, unsigned k, int sms,
                                               const gemm_model *md) {
  gemm_plan t = gemm_plan_cover_bm(bm, m, n, k, sms, md);
  if (t.cost > 0) t.cost += gemm_plan_trans_epi(gemm_variant_at(t.variant), m, n, sms);
  return t;
}
static inline gemm_plan gemm_plan_cover_epi(unsigned m, unsigned n, unsigned k, int sms, const gemm_model *md) {
  return gemm_plan_cover_bm_epi(64u, m, n, k, sms, md);
}

/* The one-CTA twin of 2-CTA variant v (same block M and N), normal, with the decomposition the
 * model for `align` costs lowest; a cost of 0 where there is none. */
static inline gemm_plan gemm_plan_twin_one(const gemm_variant *v, unsigned m, unsigned n, unsigned k, unsigned align,
                                           int sms, double mem_bw) {
  const gemm_model md = gemm_model_for_loads(mem_bw, align);
  return gemm_plan_of(v->bm, v->bn, 0, m, n, k, sms, &md);
}

/* The plan of a dense problem; trans_ok 0: not transposed (a caller that needs D's rows written
 * by row blocks, as clcrt_gemm_desc.done does). Transposed, the op swaps A and B and the tiles
 * compute D^T: a problem of few rows and many columns (a vocabulary head at a few hundred
 * tokens) then runs 128-row tiles along N, with block N fitted to M. Its epilogue's stores are
 * 2-byte and scattered over BN rows of D; the model charges GEMM_TRANS_EPI more epilogues per
 * wave for it, and takes the transposed plan only where it wins by GEMM_TRANS_GAIN, on
 * problems of GEMM_TRANS_MIN_M rows or more. Fewer rows go transposed by rule, in 64-row tiles
 * (GEMM_TRANS_GEMV_M, GEMM_TRANS_SKINNY_M). */
static inline gemm_plan gemm_plan_dense_t(unsigned m, unsigned n, unsigned k, unsigned align, int sms, double mem_bw,
                                          int trans_ok) {
  gemm_plan p = gemm_plan_dense_as(m, n, k, align, sms, mem_bw, 0);
  if (trans_ok && m >= GEMM_TRANS_MIN_M) {
    gemm_plan t = gemm_plan_dense_as(m, n, k, align, sms, mem_bw, 1);
    if (t.cost * GEMM_TRANS_GAIN < p.cost) p = t;
  }
  const gemm_variant *pv = gemm_variant_at(p.variant);
  const int few = m <= GEMM_TRANS_GEMV_M && (p.sk_units || (m <= GEMM_TRANS_NARROW_M && pv->bn <= GEMM_TRANS_NARROW_BN));
  const int skinny = m > GEMM_TRANS_GEMV_M && m <= GEMM_TRANS_SKINNY_M && (p.sk_units || pv->cm > 1);
  if (trans_ok && !p.trans && (few || skinny)) {
    /* A problem of few rows whose normal plan slices its tiles for stream-K, or (at most
     * GEMM_TRANS_NARROW_M rows) runs them whole but narrow, or one of 65 to GEMM_TRANS_SKINNY_M
     * rows whose normal plan slices its tiles or pairs them in clusters: 64-row tiles transposed
     * instead, block N the narrowest that covers m, with the model's decomposition of the swapped
     * problem, or stream-K over every SM where whole tiles would leave many idle on a long run. */
    const gemm_model md = gemm_model_for(mem_bw);
    gemm_plan t = gemm_plan_cover(m, n, k, sms, &md);
    if (t.cost > 0) {
      const unsigned T = gemm_work_tiles(gemm_variant_at(t.variant), n, m), nk = gemm_cdiv(k, GEMM_BK);
      if (!t.sk_units && m <= GEMM_SK_SMS_MAX_M && T < GEMM_SK_SMS_MAX_FILL * sms &&
          (uint64_t)T * nk >= (uint64_t)GEMM_SK_SMS_MIN_KB * sms)
        t.sk_tiles = T, t.sk_units = (unsigned)sms, t.sk_tail = 0;
      p = t;
    }
  } else if (trans_ok && !p.trans && m > GEMM_TRANS_GEMV_M && m <= GEMM_TRANS_SKINNY_M && m > pv->bm && m % pv->bm) {
    /* One of 65 to GEMM_TRANS_SKINNY_M rows whose normal plan runs whole tiles of one CTA in two
     * or more row blocks, the last one part empty: the same transposed tiles where the model
     * with its cover terms (GEMM_COVER_KB) costs them below the normal plan. */
    gemm_model md = gemm_model_cover(mem_bw, align, GEMM_COVER_KB);
    gemm_plan t = gemm_plan_cover_epi(m, n, k, sms, &md);
    if (pv->bm == 128 && (t.cost <= 0 || t.cost >= p.cost)) {
      /* Declined against 128-row tiles: asked again with GEMM_COVER_KB_128, plan and decision */
      md.cover_kb = GEMM_COVER_KB_128;
      t = gemm_plan_cover_epi(m, n, k, sms, &md);
    }
    if (t.cost > 0 && t.cost < p.cost) p = t;
  }
  if (p.trans && gemm_variant_at(p.variant)->bm == 64 && m > GEMM_TRANS_GEMV_M && m <= GEMM_COVER_WIDE_MIN_M) {
    /* 65 to 128 rows in 64-row tiles transposed: normal 128-row tiles of one CTA, whole, where
     * the model costs them within GEMM_ONE_BLOCK_KEEP of the transposed plan with its cover
     * terms. */
    const gemm_model md = gemm_model_cover(mem_bw, align, GEMM_COVER_KB);
    const gemm_plan c = gemm_plan_cover_epi(m, n, k, sms, &md);
    const gemm_plan q = gemm_plan_dense_sel(m, n, k, align, sms, mem_bw, 0, GEMM_SEL_128_ONE);
    if (c.cost > 0 && q.cost > 0 && !q.sk_units && q.cost <= GEMM_ONE_BLOCK_KEEP * c.cost) p = q;
  }
  if (trans_ok && sms > 0 && m > GEMM_COVER_WIDE_MIN_M && m <= GEMM_TRANS_SKINNY_M) {
    /* More rows than one 128-row block, at most GEMM_TRANS_SKINNY_M: 128-row tiles transposed,
     * whole, where the model with its cover terms costs them below the plan so far, within the
     * bounds GEMM_COVER_WIDE_MIN_M states. */
    const gemm_model md = gemm_model_cover(mem_bw, align, GEMM_COVER_KB_WIDE);
    const gemm_plan t = gemm_plan_cover_bm_epi(128u, m, n, k, sms, &md);
    const unsigned last = gemm_cdiv(n, 128u) % (unsigned)sms; /* the last wave's tiles, 0: full */
    const int ashift = (align & GEMM_ALIGN_APART) && (align & ~3u) < 64u && gemm_variant_at(p.variant)->bm == 64;
    if (t.cost > 0 && !t.sk_units && (!last || last >= GEMM_COVER_WIDE_MIN_FILL * sms) && !ashift && t.cost < p.cost)
      p = t;
  }
  const gemm_variant *v = gemm_variant_at(p.variant);
  if ((align & GEMM_ALIGN_APART) && !p.trans && v->bm == 64 && v->cm == 2) {
    /* Offsets that differ with the rows on their lines: the model leaves the clusters' per-wave
     * cost out (gemm_model_for_loads), but 64-row tiles load both operands on their lines there
     * (A-shift kernels), so between a 64-row cluster and 64-row tiles of one CTA the choice is
     * the aligned loads': the cluster at its cost with loads aligned (measured on an H200,
     * 2026-11-30, ops/NOTES.md: 279x3072x2048, 289x2560x2560 and four more went 1.21-1.51x
     * faster in 64-row tiles of one CTA). */
    const gemm_model aligned = gemm_model_for(mem_bw);
    const gemm_plan q = gemm_plan_dense_sel(m, n, k, align, sms, mem_bw, 0, GEMM_SEL_64_ONE);
    if (q.cost > 0 && q.cost < gemm_plan_cost_t(&aligned, v, m, n, k, p.sk_tiles, p.sk_units, sms, 0)) p = q;
  }
  v = gemm_variant_at(p.variant);
  if ((align == 128u || (align & GEMM_ALIGN_APART)) && !p.trans && v->bm == 64 && v->cm == 2 &&
      m > GEMM_C2_ONE_MIN_M && m <= GEMM_C2_ONE_MAX_M) {
    /* Loads on their lines (after the shift; or offsets apart, where 64-row tiles load both
     * operands on theirs and the choice is the aligned loads', as above), more than
     * GEMM_C2_ONE_MIN_M rows, up to GEMM_C2_ONE_MAX_M, 64-row tiles in 2-CTA clusters still: the
     * same tiles of one CTA, with the model's decomposition. */
    const gemm_plan q = gemm_plan_twin_one(v, m, n, k, align, sms, mem_bw);
    if (q.cost > 0) p = q;
  }
  v = gemm_variant_at(p.variant);
  if ((align == 128u || (align & GEMM_ALIGN_APART)) && v->cm == 2 && p.cost < GEMM_C2_SHORT_US) {
    /* A short run in 2-CTA clusters: the same tiles of one CTA (GEMM_C2_SHORT_US). */
    const gemm_model md = gemm_model_for_loads(mem_bw, align);
    gemm_plan q = gemm_plan_of(v->bm, v->bn, p.trans, m, n, k, sms, &md);
    if (q.cost > 0 && p.trans) q.cost += gemm_plan_trans_epi(gemm_variant_at(q.variant), m, n, sms);
    if (q.cost > 0) p = q;
  }
  return p;
}
static inline gemm_plan gemm_plan_dense(unsigned m, unsigned n, unsigned k, unsigned align, int sms, double mem_bw) {
  return gemm_plan_dense_t(m, n, k, align, sms, mem_bw, 1);
}
#endif
