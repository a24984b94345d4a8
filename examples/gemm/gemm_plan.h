/* The GEMM's plan: (M, N, K, alignment of the loads, SM count) -> variant, cluster shape,
 * scheduler and decomposition, with no timing run (an oracle that tries everything is what the
 * benchmark has and a user has not). Included by gemm.h.
 *
 * The decision table. Each row cites the H100 measurement it rests on (bench/results/,
 * gemm-h100-2026-11-25*: run a = the first full bench_gemm with stream-K, run b = the run
 * this plan was checked with).
 *
 *  | when                       | variant, cluster        | decomposition                     | measured                                  |
 *  |----------------------------|-------------------------|-----------------------------------|-------------------------------------------|
 *  | any shape                  | 128x256 or 128x128, 1x1 | the lower of the cost model below | run a: whole tiles of the better of the   |
 *  |                            |                         |                                   | two at 0.94-1.14x cuBLAS on 33 of 37      |
 *  |                            |                         |                                   | model/odd/gemv shapes; 128x128 wins where |
 *  |                            |                         |                                   | 128x256 leaves SMs idle (1024x6144x4096:  |
 *  |                            |                         |                                   | 1.070 against 0.840)                      |
 *  | tiles < 1 wave or a short  | same                    | the tail's tiles cut into s equal | run a: shared ranges that start at        |
 *  | last wave                  |                         | k-slices (sk_units = tiles * s)   | scattered k (classic stream-K) lost L2    |
 *  |                            |                         | when it saves > 3%                | reuse: 1024x8192x28672 0.374x against     |
 *  |                            |                         |                                   | 1.043x whole; slices keep the units that  |
 *  |                            |                         |                                   | share operands at the same k              |
 *  | M <= 16 (a GEMV)           | same                    | same model; the fix-up costs ~0   | run a: 128x256 whole 1.044x at 112 tiles, |
 *  |                            |                         | (partials of M rows), so the      | shared tiles 0.89-1.10x where the tiles   |
 *  |                            |                         | slices fill every SM              | are fewer than the SMs                    |
 *  | loads at 16-byte offsets   | same                    | same                              | run a, align16: with the k-blocks shifted |
 *  |                            |                         |                                   | to align B, 128x256 whole 1.05-1.06x      |
 *  |                            |                         |                                   | (the 2-CTA variant 1.05x, stream-K 0.83-  |
 *  |                            |                         |                                   | 0.98x); rows at other pitches unmeasured  |
 *  | any                        | STEAL                   |                                   | run a: STATIC within +-2% of STEAL on the |
 *  |                            |                         |                                   | same plans                                |
 *
 * The cost model, in the time of one 128x256 k-block on one SM: a variant of T work tiles of
 * nk k-blocks on P = SMs units at once (every variant holds one CTA per SM) takes
 *   whole tiles:    ceil(T / P) * (nk * kb + E)
 *   tail in slices: (T - R') / P * (nk * kb + E) + ceil(R' s / P) * (ceil(nk / s) * kb + E)
 *                   + (FW + FR * s) * kb * rows / 128
 * for R' tail tiles (T mod P, or that plus one wave) cut into s slices (2..16, each at least
 * GEMM_SK_MIN_KB k-blocks): kb is the variant's k-block time (128x256 1, 128x128 0.51: run a,
 * 8192^3), E its per-tile epilogue (3 and 5: run a, 4096^3 against 8192^3), and the fix-up
 * writes a partial (FW = 1.5) and its last piece reads s of them (FR = 1 each), all scaled by
 * the rows a partial has (M rows up to 128). */
#ifndef CLCRT_EXAMPLES_GEMM_PLAN_H
#define CLCRT_EXAMPLES_GEMM_PLAN_H

typedef enum gemm_share {
  GEMM_SHARE_WHOLE, /* every tile whole */
  GEMM_SHARE_TAIL,  /* the cost model's choice for the variant (whole tiles where nothing pays) */
  GEMM_SHARE_ALL    /* every tile cut into slices, enough for every SM (tests, the oracle) */
} gemm_share;

#define GEMM_SK_MIN_KB 4u   /* the fewest k-blocks a slice gets */
#define GEMM_SK_MAX_SLICES 16u

typedef struct gemm_plan {
  int variant;                 /* index into GEMM_VARIANTS */
  clcrt_sched sched;           /* the scheduler to register the variant with */
  unsigned sk_tiles, sk_units; /* stream-K (clcrt_sk_make); 0, 0: every tile whole */
  int shift;                   /* 1: shift the k-blocks to align the loads (gemm_kshift) */
  double cost;                 /* the model's estimate (128x256 k-blocks) */
} gemm_plan;

static inline int gemm_variant_index(const char *name) {
  for (int i = 0; i < GEMM_NUM_VARIANTS; i++)
    if (!strcmp(GEMM_VARIANTS[i].name, name)) return i;
  return 0;
}

/* The model's k-block time and per-tile epilogue of a variant (see above). */
static inline double gemm_plan_kb(const gemm_variant *v) { return v->bn == 256 ? 1.0 : v->bn == 128 ? 0.51 : 0.27; }
static inline double gemm_plan_epi(const gemm_variant *v) { return v->bn == 256 ? 3.0 : v->bn == 128 ? 5.0 : 6.0; }

/* The decomposition `share` of an m x n x k problem for p->variant on `sms` SMs, into p. */
static inline void gemm_plan_share(gemm_plan *p, gemm_share share, unsigned m, unsigned n, unsigned k, int sms) {
  const gemm_variant *v = &GEMM_VARIANTS[p->variant];
  const unsigned P = (unsigned)sms / v->cm, T = gemm_work_tiles(v, m, n), nk = gemm_cdiv(k, GEMM_BK);
  const double kb = gemm_plan_kb(v), epi = gemm_plan_epi(v), rows = (m < v->bm ? m : v->bm) / 128.0;
  p->sk_tiles = p->sk_units = 0;
  p->cost = (double)gemm_cdiv(T, P) * (nk * kb + epi);
  if (share == GEMM_SHARE_WHOLE || P == 0 || T == 0) return;
  unsigned max_s = nk / GEMM_SK_MIN_KB;
  if (max_s > GEMM_SK_MAX_SLICES) max_s = GEMM_SK_MAX_SLICES;
  if (share == GEMM_SHARE_ALL) {
    unsigned s = P / T < 2 ? 2 : P / T;
    if (s > nk) s = nk;
    p->sk_tiles = T, p->sk_units = T * s;
    return;
  }
  const double whole = p->cost;
  const unsigned tails[2] = {T % P ? T % P : 0, T >= P && T % P ? T % P + P : 0};
  for (int ti = 0; ti < 2; ti++) {
    const unsigned r = tails[ti];
    if (!r) continue;
    for (unsigned s = 2; s <= max_s; s++) {
      double c = (double)((T - r) / P) * (nk * kb + epi) + (double)gemm_cdiv((unsigned long long)r * s, P) *
                     (gemm_cdiv(nk, s) * kb + epi) + (1.5 + 1.0 * s) * kb * rows;
      if (c < p->cost && c < 0.97 * whole) p->cost = c, p->sk_tiles = r, p->sk_units = r * s;
    }
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
