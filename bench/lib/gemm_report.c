/* The GEMM benchmark's dense summary (bench/bench_gemm.c): a row per shape, then per class the
 * default's geo-mean of min(ratio, 1) and its worst against cuBLASLt, in the figure the
 * targets use (back to back for shapes under BGEMM_SHORT_MS, else the rounds; bench_gemm.c's
 * header says why), the rounds' beside it, and the oracle's. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gemm_bench.h"

/* Geo-means and worsts of a set of shapes' ratios. */
typedef struct agg {
  int n, skipped, wrong;   /* wrong: the default's output failed its check (not timed) */
  double lt, lt1, lr1, lo; /* sums of logs: target, min(target, 1), min(rounds, 1), oracle */
  double wt, wr, wo;       /* worsts: target, rounds, oracle */
} agg;

static void agg_add(agg *a, const bgemm_summary *s) {
  if (s->skipped || s->target_ratio <= 0) {
    if (s->skipped)
      a->skipped++;
    else
      a->wrong++;
    return;
  }
  if (!a->n) a->wt = a->wr = a->wo = 1e9;
  a->n++;
  a->lt += log(s->target_ratio), a->lt1 += log(s->target_ratio < 1 ? s->target_ratio : 1);
  a->lr1 += log(s->def_ratio < 1 ? s->def_ratio : 1), a->lo += log(s->oracle_ratio);
  if (s->target_ratio < a->wt) a->wt = s->target_ratio;
  if (s->def_ratio < a->wr) a->wr = s->def_ratio;
  if (s->oracle_ratio < a->wo) a->wo = s->oracle_ratio;
}

static void agg_print(const char *name, const agg *a, uint64_t seed, bgemm_row_fn row) {
  if (!a->n && !a->skipped && !a->wrong) return;
  const double n = a->n ? a->n : 1;
  const double geo = exp(a->lt / n), geo1 = exp(a->lt1 / n), rgeo1 = exp(a->lr1 / n), ogeo = exp(a->lo / n);
  const double wt = a->n ? a->wt : 0, wr = a->n ? a->wr : 0, wo = a->n ? a->wo : 0;
  printf("  %-20s %6d %7d %5d %9.3f %9.3f %7.3f %10.3f %7.3f %10.3f %7.3f\n", name, a->n, a->skipped, a->wrong, geo,
         geo1, wt, rgeo1, wr, ogeo, wo);
  row("{\"section\":\"dense-classes\",\"classes\":\"%s\",\"seed\":%llu,\"shapes\":%d,\"skipped\":%d,\"wrong\":%d,"
      "\"timing\":\"target\",\"default_geomean\":%.4f,\"default_geomean_min1\":%.4f,\"default_worst\":%.4f,"
      "\"rounds_geomean_min1\":%.4f,\"rounds_worst\":%.4f,\"oracle_geomean\":%.4f,\"oracle_worst\":%.4f}",
      name, (unsigned long long)seed, a->n, a->skipped, a->wrong, geo, geo1, wt, rgeo1, wr, ogeo, wo);
}

/* Operands off 128-byte lines against the same shapes aligned (bgemm_summary.vs_aligned): the
 * shapes of class cls (NULL: every one), geo-mean, worst, and how many are within 10%. */
static void aligned_line(const bgemm_summary *sums, int count, const char *cls, uint64_t seed, bgemm_row_fn row) {
  int n = 0, within = 0;
  double lg = 0, worst = 1e9;
  const char *wname = "";
  for (int i = 0; i < count; i++) {
    const bgemm_summary *s = &sums[i];
    if (s->vs_aligned <= 0 || (cls && strcmp(s->sh->cls, cls))) continue;
    n++, lg += log(s->vs_aligned), within += s->vs_aligned >= 1 / 1.1;
    if (s->vs_aligned < worst) worst = s->vs_aligned, wname = s->shape;
  }
  if (!n) return;
  printf("  %-20s %6d %9.3f %7.3f %7d/%-3d  %s\n", cls ? cls : "all", n, exp(lg / n), worst, within, n, wname);
  row("{\"section\":\"dense-aligned-classes\",\"classes\":\"%s\",\"seed\":%llu,\"shapes\":%d,"
      "\"vs_aligned_geomean\":%.4f,\"vs_aligned_worst\":%.4f,\"within_10pct\":%d}",
      cls ? cls : "all", (unsigned long long)seed, n, exp(lg / n), worst, within);
}

static void aligned_print(const bgemm_summary *sums, int count, uint64_t seed, bgemm_row_fn row) {
  int any = 0;
  for (int i = 0; i < count; i++) any |= sums[i].vs_aligned > 0;
  if (!any) return;
  printf("\n  operands off 128-byte lines: the default's speed there over its speed on aligned copies (target "
         "figure; within 10%%: at least %.3f):\n", 1 / 1.1);
  printf("  %-20s %6s %9s %7s %11s  %s\n", "class", "shapes", "geo", "worst", "within 10%", "(worst)");
  for (int c = 0; bgemm_classes[c]; c++) aligned_line(sums, count, bgemm_classes[c], seed, row);
  aligned_line(sums, count, "custom", seed, row);
  aligned_line(sums, count, NULL, seed, row);
}

void bgemm_summary_print(const bgemm_summary *sums, int count, uint64_t seed, bgemm_row_fn row) {
  if (!count) return;
  printf("\ndense summary (seed %llu): ratio = cuBLAS time / clcrt time. default = clcrt_gemm with a default "
         "descriptor, timed in the rounds and back to back; target = the figure the targets use (back to back where "
         "cuBLAS runs under %.0f us, else the rounds); oracle = the best contender of the rounds\n",
         (unsigned long long)seed, BGEMM_SHORT_MS * 1e3);
  printf("  %-8s %-24s %-20s %9s  %-34s %7s %7s %7s  %7s %s\n", "class", "layer", "shape", "cuBLAS TF", "default plan",
         "rounds", "b2b", "target", "oracle", "(which)");
  for (int i = 0; i < count; i++) {
    const bgemm_summary *s = &sums[i];
    if (s->skipped) {
      printf("  %-8s %-24s %-20s skipped\n", s->sh->cls, s->sh->label, s->shape);
      continue;
    }
    char extra[80] = "";
    if (s->gemv_frac > 0 && s->gemv_frac_same > 0)
      snprintf(extra, sizeof extra, "  B at %.2f of copy, %.2f of a same-size copy", s->gemv_frac,
               s->gemv_frac_same);
    else if (s->gemv_frac > 0)
      snprintf(extra, sizeof extra, "  B at %.2f of copy", s->gemv_frac);
    printf("  %-8s %-24s %-20s %9.1f  %-34s %7.3f %7.3f %7.3f  %7.3f %s%s\n", s->sh->cls, s->sh->label, s->shape,
           s->cublas_tflops, s->def_what, s->def_ratio, s->def_b2b_ratio, s->target_ratio, s->oracle_ratio,
           s->oracle_what, extra);
  }
  printf("\n  per class, the default against cuBLASLt (target figure; the rounds' beside it) and the oracle (rounds):\n");
  printf("  %-20s %6s %7s %5s %9s %9s %7s %10s %7s %10s %7s\n", "class", "shapes", "skipped", "wrong", "geo", "geo<=1",
         "worst", "rnd geo<=1", "worst", "oracle geo", "worst");
  for (int c = 0; bgemm_classes[c]; c++) {
    agg a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < count; i++)
      if (!strcmp(sums[i].sh->cls, bgemm_classes[c])) agg_add(&a, &sums[i]);
    agg_print(bgemm_classes[c], &a, seed, row);
  }
  /* As earlier runs grouped them, --shape's, and everything. */
  agg old, custom, all;
  memset(&old, 0, sizeof old), memset(&custom, 0, sizeof custom), memset(&all, 0, sizeof all);
  for (int i = 0; i < count; i++) {
    const char *c = sums[i].sh->cls;
    if (!strcmp(c, "model") || !strcmp(c, "odd") || !strcmp(c, "gemv")) agg_add(&old, &sums[i]);
    if (!strcmp(c, "custom")) agg_add(&custom, &sums[i]);
    agg_add(&all, &sums[i]);
  }
  agg_print("model + odd + gemv", &old, seed, row);
  agg_print("custom", &custom, seed, row);
  agg_print("all", &all, seed, row);
  aligned_print(sums, count, seed, row);
}
