/* The GEMM's plan: (M, N, K, alignment of the loads, SM count) -> variant, cluster shape,
 * scheduler and decomposition, with no timing run (an oracle that tries everything is what the
 * benchmark has and a user has not). Included by gemm_internal.h.
 *
 * The decision table. Each row cites the H100 measurements it rests on, in
 * bench/results/gemm-h100-2026-11-25X.txt: a, stream-K with balanced shared ranges first
 * (classic data-parallel + stream-K); b, tile-aligned slices and a first cost model; c, the
 * model as below with the shared units first; d, this plan (shared units last).
 *
 *  | when                         | variant, cluster     | decomposition                      | measured                                   |
 *  |------------------------------|----------------------|------------------------------------|--------------------------------------------|
 *  | every shape                  | 128x256 or 128x128   | the lower modelled time (below)    | a: whole tiles of the better of the two at |
 *  |                              | (1 CTA), the model's |                                    | >= 0.97x cuBLAS on 30 of 37 model/odd/     |
 *  |                              | pick                 |                                    | gemv shapes; 128x128 where 128x256 leaves  |
 *  |                              |                      |                                    | SMs idle (d: 1024x6144x4096 1.049,         |
 *  |                              |                      |                                    | 2048x576x7168 1.135, 512x4096x14336 1.065) |
 *  | the last wave at most half   | same                 | its tiles cut into s = 2..4 equal  | a: balanced ranges that start at scattered |
 *  | full, and slices pay         |                      | k-slices, all at once (units =     | k lost L2 reuse (1024x8192x28672 0.374x,   |
 *  |                              |                      | tail * s <= SMs), run after the    | whole 1.043x); b: more slices or rounds    |
 *  |                              |                      | whole tiles (clcrt_streamk.cuh     | lost (256x7168x18432: 7 slices in 3 rounds |
 *  |                              |                      | order 1)                           | 0.467x, 2 slices 0.938x); c against d, the |
 *  |                              |                      |                                    | slices first desynchronise the waves after |
 *  |                              |                      |                                    | them: 1024x7168x16384 0.928x -> 1.098x,    |
 *  |                              |                      |                                    | 256x10240x8192 0.825x -> 0.944x            |
 *  | M <= 16 (a GEMV)             | same                 | same model: memory-bound, so the   | d: B at 0.80-0.93 of the copy's bandwidth  |
 *  |                              |                      | slices put every SM on B           | for 4 of 7 GEMVs; 0.67 and 0.38 where B is |
 *  |                              |                      |                                    | 117 and 33 MB (see NOTES.md)               |
 *  | loads at 16-byte offsets     | same                 | same (the k-blocks are shifted to  | a, align16: 128x256 whole 1.05-1.06x, the  |
 *  |                              |                      | align B; A too when its offset is  | 2-CTA variant 1.05x; d: the plan 1.00-     |
 *  |                              |                      | B's)                               | 1.22x; rows at other pitches unmeasured    |
 *  | every shape                  | STEAL                |                                    | d: STATIC within +-5% of STEAL on the same |
 *  |                              |                      |                                    | plans, neither ahead throughout            |
 *
 * The model, in the time of one 128x256 k-block (0.69 us) on one SM, for a variant of T work
 * tiles of nk k-blocks on P = SMs units at once (every variant holds one CTA per SM), T = W P
 * + R: each phase (a wave of units at once) takes the longer of its tensor-core time, kbs *
 * kb + E, and its memory time, the bytes of its tiles (their share of A, B and D) at
 * min(2.7 TB/s, units * per-SM rate); whole tiles are W full waves and one of R; sliced, the
 * last is R * s units of ceil(nk / s) k-blocks, plus the fix-up, (2 * rows / 128 + 5 * s) *
 * kb (a partial written; s read back by the last piece, latency-bound: one warp per 16
 * rows). kb and E: 128x256 1 and 3, 128x128 0.51 and 5 (a: 8192^3, and 4096^3 against it);
 * per-SM rate: 128x256 50 GB/s, 128x128 28 GB/s (b: GEMVs and 128x8192x8192 on 32-80 SMs). */
#ifndef CLCRT_OPS_GEMM_PLAN_H
#define CLCRT_OPS_GEMM_PLAN_H

typedef enum gemm_share {
  GEMM_SHARE_WHOLE, /* every tile whole */
  GEMM_SHARE_TAIL,  /* the cost model's choice for the variant (whole tiles where nothing pays) */
  GEMM_SHARE_ALL    /* every tile cut into slices, enough for every SM (tests, the oracle) */
} gemm_share;

#define GEMM_SK_MIN_KB 4u     /* the fewest k-blocks a slice gets */
#define GEMM_SK_MAX_SLICES 4u /* b: 7 and 9 slices lost to 2 (0.47x against 0.94x) */

typedef struct gemm_plan {
  int variant;                 /* index into GEMM_VARIANTS */
  clcrt_sched sched;           /* the scheduler to register the variant with */
  unsigned sk_tiles, sk_units; /* stream-K (clcrt_sk_make); 0, 0: every tile whole */
  unsigned sk_tail;            /* 1: the shared tiles last (clcrt_streamk.cuh, order 1) */
  int shift;                   /* 1: shift the k-blocks to align the loads (gemm_kshift) */
  double cost;                 /* the model's estimate, in 128x256 k-blocks */
} gemm_plan;

static inline int gemm_variant_index(const char *name) {
  for (int i = 0; i < GEMM_NUM_VARIANTS; i++)
    if (!strcmp(GEMM_VARIANTS[i].name, name)) return i;
  return 0;
}

/* The model's k-block time and per-tile epilogue of a variant (see above). */
/* Measured for block M 128 at block N 256, 128 and 64; other shapes (the generated ones) are
 * the line through those points, scaled by block M: provisional until they are measured. */
static inline double gemm_plan_kb(const gemm_variant *v) {
  if (v->bm == 128 && (v->bn == 256 || v->bn == 128 || v->bn == 64)) return v->bn == 256 ? 1.0 : v->bn == 128 ? 0.51 : 0.27;
  return v->bm / 128.0 * (0.027 + 0.0038 * v->bn);
}
static inline double gemm_plan_epi(const gemm_variant *v) {
  if (v->bn == 256 || v->bn == 128 || v->bn == 64) return v->bn == 256 ? 3.0 : v->bn == 128 ? 5.0 : 6.0;
  return 6.5 - 3.5 * v->bn / 256.0;
}

/* One phase of a run: `units` units at once (at most P), each `kbs` k-blocks of a variant,
 * moving `bytes` from memory: the longer of the tensor-core time and the memory time, the
 * memory reaching gemm_plan_sm_bw per streaming SM up to GEMM_PLAN_BW in all. */
#define GEMM_PLAN_KB_US 0.69 /* one 128x256 k-block: a, 1024x8192x28672 whole */
#define GEMM_PLAN_BW 2.7e12  /* b: 4x8192x28672 sliced over 128 SMs, 2.73 TB/s */
/* Per streaming SM, b: 128x256 on 32-40 SMs 41-56 GB/s, 128x128 on 64-80 SMs 25-32 GB/s (a
 * stage of 128x128 carries half the bytes of B). */
static inline double gemm_plan_sm_bw(const gemm_variant *v) { return v->bn >= 256 ? 50e9 : 28e9; }
static inline double gemm_plan_phase(const gemm_variant *v, unsigned units, unsigned kbs, double bytes) {
  double mma = kbs * gemm_plan_kb(v) + gemm_plan_epi(v);
  double bw = units * gemm_plan_sm_bw(v) * v->cm;
  if (bw > GEMM_PLAN_BW) bw = GEMM_PLAN_BW;
  double mem = bytes / bw / (GEMM_PLAN_KB_US * 1e-6);
  return mma > mem ? mma : mem;
}

/* The decomposition `share` of an m x n x k problem for p->variant on `sms` SMs, into p. */
static inline void gemm_plan_share(gemm_plan *p, gemm_share share, unsigned m, unsigned n, unsigned k, int sms) {
  const gemm_variant *v = gemm_variant_at(p->variant);
  const unsigned P = (unsigned)sms / v->cm, T = gemm_work_tiles(v, m, n), nk = gemm_cdiv(k, GEMM_BK);
  p->sk_tiles = p->sk_units = p->sk_tail = 0;
  if (P == 0 || T == 0) return;
  /* Bytes per tile: its share of A, B and D, each read or written once. */
  const double per_tile = ((double)m * k + (double)n * k + (double)m * n) * 2.0 / T;
  const unsigned full = T / P, rest = T % P;
  p->cost = full * gemm_plan_phase(v, P, nk, per_tile * P) + (rest ? gemm_plan_phase(v, rest, nk, per_tile * rest) : 0);
  if (share == GEMM_SHARE_WHOLE) return;
  if (share == GEMM_SHARE_ALL) {
    unsigned sl = P / T < 2 ? 2 : P / T;
    if (sl > nk) sl = nk;
    p->sk_tiles = T, p->sk_units = T * sl;
    return;
  }
  /* The tail's tiles in s slices, all at once (s * tail <= P), each slice at least
   * GEMM_SK_MIN_KB k-blocks, plus the fix-up (see the top of this file). */
  const double whole = p->cost;
  for (unsigned sl = 2; sl <= GEMM_SK_MAX_SLICES && rest && rest * sl <= P && nk / sl >= GEMM_SK_MIN_KB; sl++) {
    double c = full * gemm_plan_phase(v, P, nk, per_tile * P) + gemm_plan_phase(v, rest * sl, gemm_cdiv(nk, sl), per_tile * rest) +
               (2.0 * (m < v->bm ? m : v->bm) / 128.0 + 5.0 * sl) * gemm_plan_kb(v);
    if (c < p->cost && c < 0.97 * whole) p->cost = c, p->sk_tiles = rest, p->sk_units = rest * sl, p->sk_tail = 1;
  }
}

/* The plan of a dense m x n x k problem whose loads are `align`-byte aligned after the shift
 * (gemm_load_align) on a device of `sms` SMs: the lower cost of 128x256 and 128x128, each with
 * its best decomposition. `align` selects nothing at present: with the shift the measured
 * 16-byte-offset shapes ran best on the same plan as aligned ones (table above). */
static inline gemm_plan gemm_plan_dense(unsigned m, unsigned n, unsigned k, unsigned align, int sms) {
  (void)align;
  static const char *const candidates[] = {"128x256", "128x128"};
  gemm_plan best;
  memset(&best, 0, sizeof best);
  for (int i = 0; i < 2; i++) {
    gemm_plan p;
    memset(&p, 0, sizeof p);
    p.variant = gemm_variant_index(candidates[i]);
    p.sched = CLCRT_SCHED_STEAL;
    p.shift = 1;
    gemm_plan_share(&p, GEMM_SHARE_TAIL, m, n, k, sms);
    if (i == 0 || p.cost < best.cost) best = p;
  }
  return best;
}
#endif
