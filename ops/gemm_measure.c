/* CLCRT_GEMM_MEASURED: the plan of a dense problem's shape class measured once, on the caller's
 * operands and stream, and kept in the runtime's store (gemm_measure.h says what a class is and
 * what is stored); later calls find the rule in memory (or the store) and time nothing. */
#include <string.h>

#include "gemm_ops.h"

typedef struct timer {
  clcrt_ops *ops;
  clcrt_stream *s;
  gemm_ws *w;
  const clcrt_gemm_desc *d;
  gemm_ld ld;
} timer;

/* Plan p on the caller's operands: 2 runs to warm up, the median of 5 timed with events; -1
 * drops the candidate. The short variant is built first: a STEAL run that claims nothing
 * launches it, and the runs would otherwise time the fallback while it builds. */
static double time_plan(void *user, const gemm_plan *p) {
  timer *t = user;
  const clcrt_driver *cu = t->ops->cu;
  clcrt_runtime *rt = t->ops->rt;
  const clcrt_kernel *k = NULL;
  gemm_args a;
  const gemm_variant *v = gemm_variant_at(p->variant);
  const clcrt_gemm_desc *d = t->d;
  if (gemm_dense_args_ld(NULL, rt, p, &a, d->a, d->b, d->d, d->m, d->n, d->k, t->ld, 0, 0) != CLCRT_OK ||
      gemm__kernel_get(t->ops, p->variant, p->sched, gemm_kind_dense(&a), &k) != CLCRT_OK ||
      clcrt_kernel_prepare(k, CLCRT_USE_SHORT) != CLCRT_OK)
    return -1;
  if (a.sk_units) {
    CUdeviceptr part, ctr;
    if (gemm__ws_reserve(t->ops, t->w, 0, gemm_ws_bytes(v, &a), gemm_ctr_bytes(v, &a), &part, &ctr) != CLCRT_OK)
      return -1;
    a.ws = part, a.ctr = ctr;
  }
  CUevent e0 = NULL, e1 = NULL;
  float ms[5] = {0};
  double r = -1;
  if (cu->cuEventCreate(&e0, 0) || cu->cuEventCreate(&e1, 0)) goto out;
  for (int i = 0; i < 7; i++) {
    if (cu->cuEventRecord(e0, t->w->cu) || clcrt_run(t->s, k, gemm_dense_tiles(v, &a), &a, sizeof a) != CLCRT_OK ||
        cu->cuEventRecord(e1, t->w->cu) || cu->cuEventSynchronize(e1) ||
        (i >= 2 && cu->cuEventElapsedTime(&ms[i - 2], e0, e1)))
      goto out;
  }
  for (int i = 1; i < 5; i++)
    for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
      float x = ms[j];
      ms[j] = ms[j - 1], ms[j - 1] = x;
    }
  r = ms[2];
out:
  if (e0) cu->cuEventDestroy(e0);
  if (e1) cu->cuEventDestroy(e1);
  return r;
}

static void remember(clcrt_ops *ops, const char *key, const gemm_plan *p) {
  pthread_mutex_lock(&ops->lock);
  gemm_rule_entry *e = &ops->rules[ops->nrules < GEMM_RULE_CACHE ? ops->nrules++ : ops->nrules - 1];
  snprintf(e->key, sizeof e->key, "%s", key);
  e->rule = gemm_measure_rule_of(p);
  pthread_mutex_unlock(&ops->lock);
}

int gemm__rule_lookup(clcrt_ops *ops, const clcrt_gemm_desc *d, unsigned align, int sms, gemm_plan *out) {
  char key[96];
  gemm_measure_key(d->m, d->n, d->k, align, key, sizeof key);
  const double bw = clcrt_runtime_mem_bandwidth(ops->rt);
  pthread_mutex_lock(&ops->lock);
  for (unsigned i = 0; i < ops->nrules; i++)
    if (!strcmp(ops->rules[i].key, key) && gemm_measure_apply(&ops->rules[i].rule, d->m, d->n, d->k, sms, bw, out)) {
      pthread_mutex_unlock(&ops->lock);
      return 1;
    }
  pthread_mutex_unlock(&ops->lock);
  gemm_measure_rule r;
  size_t size = 0;
  if (clcrt_store_get(ops->rt, GEMM_MEASURE_NS, key, &r, sizeof r, &size) == CLCRT_OK && size == sizeof r &&
      gemm_measure_apply(&r, d->m, d->n, d->k, sms, bw, out)) {
    remember(ops, key, out);
    return 1;
  }
  return 0;
}

clcrt_status gemm__plan_measured(clcrt_ops *ops, clcrt_stream *s, gemm_ws *w, const clcrt_gemm_desc *d, gemm_ld ld,
                                 unsigned align, int sms, gemm_plan *out) {
  if (gemm__rule_lookup(ops, d, align, sms, out)) return CLCRT_OK;
  char key[96];
  gemm_measure_key(d->m, d->n, d->k, align, key, sizeof key);
  timer t = {ops, s, w, d, ld};
  unsigned timed = 0;
  int stored = 0;
  clcrt_status st = gemm_plan_measured(ops->rt, d->m, d->n, d->k, align, sms, time_plan, &t, out, &timed, &stored);
  if (st != CLCRT_OK)
    return clcrt_errmsg_set(ops->rt, st, "gemm (measured): no candidate plan could be timed on these operands");
  remember(ops, key, out);
  return CLCRT_OK;
}
