/* The GEMM plan's measured mode: on the first call with a new shape class, time the candidate
 * plans on the caller's own operands and keep the winner in clcrt's persistent store
 * (clcrt_store_put, scoped by device); later calls, in this process or another, read it back
 * and time nothing. Included by gemm_internal.h.
 *
 * The shape class is (M rounded up to a power of two, N, K, whether the loads are 128-byte
 * aligned after the shift): N and K are a layer's weights, M its tokens, which vary from call
 * to call. What is stored is a rule, not numbers: the variant, the scheduler, and whole tiles
 * or the last wave's tiles in s slices, which gemm_measure_apply turns into the exact
 * decomposition of each M of the class.
 *
 * Candidates beyond the measured variants: three generated tile shapes (gemm_measure_shapes),
 * whole tiles. Timing is the caller's: a callback that runs a plan on the operands and returns its time,
 * so that this header needs no driver calls (the example and the tests time with CUDA events
 * through their own driver access). Candidates: gemm_plan_dense's own plan, then 128x256 and
 * 128x128 with whole tiles and with 2, 3 and 4 slices of a last wave at most half full, under
 * STEAL, and the plan's variant and decomposition under STATIC. */
#ifndef CLCRT_OPS_GEMM_MEASURE_H
#define CLCRT_OPS_GEMM_MEASURE_H

#define GEMM_MEASURE_NS "clcrt-gemm"
#define GEMM_MEASURE_MAX 16
#define GEMM_MEASURE_MAGIC 0x31504d47u /* "GMP1" */

/* Runs plan p on the caller's operands and returns its time in ms (a median of a few runs
 * after a warm-up is what the example does); a negative time drops the candidate. Build the
 * variant the runs launch first (clcrt_kernel_prepare with CLCRT_USE_SHORT: a STEAL run whose
 * grid claims nothing launches it): clcrt builds it in the background otherwise, and the runs
 * timed meanwhile would be the fallback's. */
typedef double (*gemm_time_fn)(void *user, const gemm_plan *p);

/* The rule kept in the store (little-endian words). */
typedef struct gemm_measure_rule {
  uint32_t magic, variant, sched, slices; /* slices 0: whole tiles */
} gemm_measure_rule;

/* The store's key of an m x n x k problem's class. */
static inline void gemm_measure_key(unsigned m, unsigned n, unsigned k, unsigned align, char *key, size_t cap) {
  unsigned mc = 1;
  while (mc < m && mc < 0x80000000u) mc <<= 1;
  snprintf(key, cap, "dense-m%u-n%u-k%u-%s", mc, n, k, align >= 128 ? "lines" : "offset");
}

/* The plan a rule gives an m x n x k problem on `sms` SMs (of peak memory bandwidth mem_bw,
 * gemm_model_for: the plan's cost); 0 when the rule is not one this version makes (a damaged or
 * foreign entry). */
static inline int gemm_measure_apply(const gemm_measure_rule *r, unsigned m, unsigned n, unsigned k, int sms,
                                     double mem_bw, gemm_plan *out) {
  if (r->magic != GEMM_MEASURE_MAGIC || r->variant >= (uint32_t)GEMM_ALL_VARIANTS ||
      !gemm_variant_at((int)r->variant) || r->slices > GEMM_SK_MAX_SLICES ||
      (r->sched != CLCRT_SCHED_STEAL && r->sched != CLCRT_SCHED_STATIC))
    return 0;
  gemm_plan p;
  memset(&p, 0, sizeof p);
  p.variant = (int)r->variant;
  p.sched = (clcrt_sched)r->sched;
  p.shift = 1;
  gemm_plan_share(&p, GEMM_SHARE_WHOLE, m, n, k, sms, mem_bw);
  const gemm_variant *v = gemm_variant_at(p.variant);
  const unsigned P = (unsigned)sms / v->cm, T = gemm_work_tiles(v, m, n), rest = P ? T % P : 0;
  if (r->slices >= 2 && rest && rest * r->slices <= P && gemm_cdiv(k, GEMM_BK) / r->slices >= 1)
    p.sk_tiles = rest, p.sk_units = rest * r->slices, p.sk_tail = 1;
  *out = p;
  return 1;
}

/* The rule of a plan (0 slices for whole tiles). */
static inline gemm_measure_rule gemm_measure_rule_of(const gemm_plan *p) {
  gemm_measure_rule r = {GEMM_MEASURE_MAGIC, (uint32_t)p->variant, (uint32_t)p->sched,
                         p->sk_units && p->sk_tiles ? p->sk_units / p->sk_tiles : 0u};
  return r;
}

/* Up to `max` generated tile shapes (variant indices) for an m x n problem on `sms` SMs, by the
 * first heuristic DeepGEMM used: the fewest waves of work tiles, then the fullest last wave,
 * then the wider tile. Block M 64 where M is at most 64 (a 128-row tile would be mostly
 * padding), 128 otherwise; one CTA per cluster. Their speed is not in the cost model yet:
 * the measured mode times them beside the measured variants. */
static inline int gemm_measure_shapes(unsigned m, unsigned n, int sms, int *out, int max) {
  int nb = 0;
  unsigned waves[8];
  double fill[8];
  if (max > 8) max = 8;
  for (int i = GEMM_NUM_VARIANTS; i < GEMM_ALL_VARIANTS && sms > 0; i++) {
    const gemm_variant *v = gemm_variant_at(i);
    if (!v || v->cm != 1 || (v->bm == 64) != (m <= 64)) continue;
    const unsigned T = gemm_work_tiles(v, m, n), w = (T + (unsigned)sms - 1) / (unsigned)sms;
    const double f = (double)T / ((double)w * sms);
    int at = nb;
    while (at > 0 && (w < waves[at - 1] || (w == waves[at - 1] && f > fill[at - 1] + 1e-9) ||
                      (w == waves[at - 1] && f > fill[at - 1] - 1e-9 && v->bn > gemm_variant_at(out[at - 1])->bn)))
      at--;
    if (at >= max) continue;
    for (int j = (nb < max ? nb : max - 1); j > at; j--) out[j] = out[j - 1], waves[j] = waves[j - 1], fill[j] = fill[j - 1];
    out[at] = i, waves[at] = w, fill[at] = f;
    if (nb < max) nb++;
  }
  return nb;
}

/* The candidates for an m x n x k problem (the model's plan first); returns how many. */
static inline int gemm_measure_candidates(unsigned m, unsigned n, unsigned k, unsigned align, int sms, double mem_bw,
                                          gemm_plan *c) {
  int nc = 0;
  /* Not transposed: a stored rule names a tile shape and slices of the normal orientation. */
  gemm_plan def = gemm_plan_dense_t(m, n, k, align, sms, mem_bw, 0);
  gemm_measure_rule rules[GEMM_MEASURE_MAX];
  rules[nc] = gemm_measure_rule_of(&def), c[nc++] = def;
  static const char *const vars[] = {"128x256", "128x128"};
  for (int vi = 0; vi < 2; vi++)
    for (uint32_t s = 0; s <= GEMM_SK_MAX_SLICES; s++) {
      if (s == 1) continue;
      gemm_measure_rule r = {GEMM_MEASURE_MAGIC, (uint32_t)gemm_variant_index(vars[vi]), CLCRT_SCHED_STEAL, s};
      gemm_plan p;
      if (!gemm_measure_apply(&r, m, n, k, sms, mem_bw, &p) || (s && !p.sk_units)) continue; /* no such slices here */
      int dup = 0;
      for (int i = 0; i < nc; i++)
        dup |= rules[i].variant == r.variant && rules[i].sched == r.sched && rules[i].slices == r.slices;
      if (!dup && nc < GEMM_MEASURE_MAX - 1) rules[nc] = r, c[nc++] = p;
    }
  int shapes[3];
  const int ns = gemm_measure_shapes(m, n, sms, shapes, 3);
  for (int i = 0; i < ns && nc < GEMM_MEASURE_MAX - 1; i++) {
    gemm_measure_rule r = {GEMM_MEASURE_MAGIC, (uint32_t)shapes[i], CLCRT_SCHED_STEAL, 0};
    gemm_plan p;
    if (gemm_measure_apply(&r, m, n, k, sms, mem_bw, &p)) rules[nc] = r, c[nc++] = p;
  }
  gemm_plan st = def;
  st.sched = CLCRT_SCHED_STATIC;
  c[nc++] = st;
  return nc;
}

/* The plan of an m x n x k problem whose loads are `align`-byte aligned (gemm_load_align) on
 * `sms` SMs: the stored rule of its class when there is one (*timed = 0), else every
 * candidate timed with time(user, plan) and the fastest kept in rt's store (*timed = how many
 * ran). A store that cannot be written (no disk cache, a read-only directory) costs the
 * measurement again next time, nothing else: the plan is still the fastest measured, and
 * *stored says whether it was kept. */
static inline clcrt_status gemm_plan_measured(clcrt_runtime *rt, unsigned m, unsigned n, unsigned k, unsigned align,
                                              int sms, gemm_time_fn time, void *user, gemm_plan *out,
                                              unsigned *timed, int *stored) {
  char key[96];
  gemm_measure_key(m, n, k, align, key, sizeof key);
  gemm_measure_rule r;
  size_t size = 0;
  *timed = 0, *stored = 0;
  clcrt_status st = clcrt_store_get(rt, GEMM_MEASURE_NS, key, &r, sizeof r, &size);
  const double mem_bw = clcrt_runtime_mem_bandwidth(rt);
  if (st == CLCRT_OK && size == sizeof r && gemm_measure_apply(&r, m, n, k, sms, mem_bw, out)) {
    *stored = 1;
    return CLCRT_OK;
  }
  gemm_plan c[GEMM_MEASURE_MAX];
  const int nc = gemm_measure_candidates(m, n, k, align, sms, mem_bw, c);
  int best = -1;
  double best_ms = 0;
  for (int i = 0; i < nc; i++) {
    double ms = time(user, &c[i]);
    (*timed)++;
    if (ms >= 0 && (best < 0 || ms < best_ms)) best = i, best_ms = ms;
  }
  if (best < 0) return CLCRT_E_INVALID; /* the callback ran none */
  *out = c[best];
  r = gemm_measure_rule_of(&c[best]);
  *stored = clcrt_store_put(rt, GEMM_MEASURE_NS, key, &r, sizeof r) == CLCRT_OK;
  return CLCRT_OK;
}
#endif
