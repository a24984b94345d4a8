/* The GEMM benchmark's shapes (bench/lib/gemm_classes.c), checked on the CPU: a shape the op
 * refuses (k not a multiple of 8) or one too large for the card would end a GPU session's run
 * halfway, so every table entry and thousands of generated shapes are checked here, with the
 * seed's properties (the same seed draws the same shapes and offsets) and the selection. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/lib/gemm_classes.c"

#define ALL_CAP 1024

static int class_index(const char *cls) {
  for (int c = 0; bgemm_classes[c]; c++)
    if (!strcmp(bgemm_classes[c], cls)) return c;
  return -1;
}

/* What bench_gemm can run: k a multiple of 8 (TMA), every dimension positive, operands under
 * its pool's 6 Gi elements and the two outputs (clcrt's and cuBLAS's) under 8 GB. */
static void check_runnable(const bgemm_shape *s) {
  ck_assert_msg(s->m > 0 && s->n > 0 && s->k > 0 && s->k % 8 == 0, "%s %s: %ux%ux%u", s->cls, s->label, s->m, s->n,
                s->k);
  ck_assert_msg((unsigned long long)s->n * s->k <= (6ull << 30) && (unsigned long long)s->m * s->k <= (6ull << 30),
                "%s %s: operands too large", s->cls, s->label);
  ck_assert_msg(2ull * 2 * s->m * s->n <= 8000000000ull, "%s %s: outputs too large", s->cls, s->label);
  ck_assert_msg(s->label[0] != 0, "%s: no label", s->cls);
  ck_assert_int_ge(class_index(s->cls), 0);
}

START_TEST(table_shapes_are_runnable) {
  bgemm_shape *all = calloc(ALL_CAP, sizeof *all);
  const int n = bgemm_select(NULL, 0, 0, BGEMM_SEED_DEFAULT, all, ALL_CAP);
  int per_class[16] = {0}, quick[16] = {0};
  for (int i = 0; i < n; i++) {
    const bgemm_shape *s = &all[i];
    check_runnable(s);
    const int c = class_index(s->cls);
    per_class[c]++, quick[c] += s->quick;
    if (!strcmp(s->cls, "decode")) ck_assert_msg(s->m >= 1 && s->m <= 64, "decode %s: M %u", s->label, s->m);
    if (!strcmp(s->cls, "gemv")) ck_assert_uint_le(s->m, 16);
    if (!strcmp(s->cls, "vocab")) {
      ck_assert_msg(s->m <= 3000 && s->n >= 32000, "vocab %s: %ux%u", s->label, s->m, s->n);
      ck_assert_ptr_nonnull(strstr(s->label, "lm_head"));
    }
  }
  /* Every fixed class has shapes, and a few of them for --quick; gen has none in the table. */
  for (int c = 0; bgemm_classes[c]; c++) {
    if (!strcmp(bgemm_classes[c], "gen")) {
      ck_assert_int_eq(per_class[c], 0);
      continue;
    }
    ck_assert_msg(per_class[c] > 0 && quick[c] > 0 && quick[c] <= 3, "class %s: %d shapes, %d quick",
                  bgemm_classes[c], per_class[c], quick[c]);
  }
  ck_assert_int_ge(per_class[class_index("decode")], 30);
  ck_assert_int_ge(per_class[class_index("vocab")], 12);
  free(all);
}
END_TEST

START_TEST(generated_shapes_are_runnable_and_spread) {
  enum { SEEDS = 300, N = 24 };
  bgemm_shape g[N];
  int small = 0, heads = 0, odd = 0, total = 0, kinds[6] = {0};
  static const char *const kind_names[6] = {"qkv ", "o ", "gate_up ", "up ", "down ", "lm_head "};
  for (uint64_t seed = 0; seed < SEEDS; seed++) {
    bgemm_gen(seed, N, g);
    for (int i = 0; i < N; i++) {
      check_runnable(&g[i]);
      ck_assert_str_eq(g[i].cls, "gen");
      ck_assert_uint_le(g[i].m, 16384);
      total++;
      small += g[i].m <= 64;
      odd += g[i].k % 64 != 0 || g[i].n % 64 != 0;
      for (int q = 0; q < 6; q++) kinds[q] += !strncmp(g[i].label, kind_names[q], strlen(kind_names[q]));
      if (!strncmp(g[i].label, "lm_head", 7)) {
        heads++;
        ck_assert_uint_le(g[i].m, 4096);
        ck_assert_uint_ge(g[i].n, 32000);
      }
    }
  }
  /* The draw's shares (bgemm_gen): M <= 64 for a quarter plus 6/14 of the rest, heads 8%. */
  ck_assert_msg(small > total * 45 / 100 && small < total * 70 / 100, "%d of %d with M <= 64", small, total);
  ck_assert_msg(heads > total * 5 / 100 && heads < total * 11 / 100, "%d of %d heads", heads, total);
  ck_assert_msg(odd > total * 3 / 100, "%d of %d odd", odd, total);
  for (int q = 0; q < 6; q++) ck_assert_msg(kinds[q] > total / 25, "layer %s drawn %d times", kind_names[q], kinds[q]);
}
END_TEST

START_TEST(the_seed_draws_the_same_again) {
  bgemm_shape a[24], b[24];
  bgemm_gen(12345, 24, a);
  bgemm_gen(12345, 24, b);
  ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
  bgemm_gen(12346, 24, b);
  int differ = 0;
  for (int i = 0; i < 24; i++) differ += a[i].m != b[i].m || a[i].n != b[i].n || a[i].k != b[i].k;
  ck_assert_int_gt(differ, 12);
  /* A generated class selected with others draws what bgemm_gen draws. */
  bgemm_shape sel[64];
  const int n = bgemm_select("odd,gen", 0, 24, 12345, sel, 64);
  ck_assert_int_eq(n, 6 + 24);
  for (int i = 0; i < 24; i++) ck_assert(sel[6 + i].m == a[i].m && sel[6 + i].n == a[i].n && sel[6 + i].k == a[i].k);
}
END_TEST

START_TEST(align16_offsets) {
  bgemm_shape all[256];
  const int n = bgemm_select("align16", 0, 0, 1, all, 256);
  ck_assert_int_ge(n, 8);
  int seen_a[8] = {0}, seen_b[8] = {0}, differ = 0;
  for (uint64_t seed = 0; seed < 64; seed++)
    for (int i = 0; i < n; i++) {
      unsigned oa, ob, oa2, ob2;
      bgemm_offsets16(seed, &all[i], &oa, &ob);
      bgemm_offsets16(seed, &all[i], &oa2, &ob2);
      ck_assert(oa == oa2 && ob == ob2);
      ck_assert(oa % 16 == 0 && oa <= 112 && ob % 16 == 0 && ob <= 112);
      seen_a[oa / 16]++, seen_b[ob / 16]++;
      differ += oa != ob;
    }
  /* Every offset drawn for each operand, and A's and B's independently. */
  for (int q = 0; q < 8; q++) ck_assert_msg(seen_a[q] > 0 && seen_b[q] > 0, "offset %d never drawn", 16 * q);
  ck_assert_int_gt(differ, n * 64 / 2);
}
END_TEST

START_TEST(class_lists_and_quick) {
  char bad[32];
  ck_assert_ptr_null(bgemm_classes_check("bench,model,odd,gemv,decode,vocab,align16,gen", bad, sizeof bad));
  ck_assert_ptr_nonnull(bgemm_classes_check("decode,vocabs", bad, sizeof bad));
  ck_assert_str_eq(bad, "vocabs");
  ck_assert_ptr_nonnull(bgemm_classes_check("gen,", bad, sizeof bad));
  ck_assert_str_eq(bad, "");
  bgemm_shape sel[ALL_CAP];
  /* A listed class runs alone. */
  int n = bgemm_select("vocab", 0, 24, 1, sel, ALL_CAP);
  for (int i = 0; i < n; i++) ck_assert_str_eq(sel[i].cls, "vocab");
  n = bgemm_select("decode", 1, 24, 1, sel, ALL_CAP);
  ck_assert_int_ge(n, 1);
  ck_assert_int_le(n, 3);
  for (int i = 0; i < n; i++) ck_assert(!strcmp(sel[i].cls, "decode") && sel[i].quick);
  /* --quick over every class: some of each, and the generated ones asked for. */
  n = bgemm_select(NULL, 1, BGEMM_GEN_QUICK, 1, sel, ALL_CAP);
  int got[16] = {0};
  for (int i = 0; i < n; i++) got[class_index(sel[i].cls)]++;
  for (int c = 0; bgemm_classes[c]; c++) ck_assert_msg(got[c] > 0, "--quick runs no %s shape", bgemm_classes[c]);
  ck_assert_int_eq(got[class_index("gen")], (int)BGEMM_GEN_QUICK);
  ck_assert_int_le(n, bgemm_select_bound(BGEMM_GEN_QUICK));
}
END_TEST

START_TEST(seed_arguments) {
  uint64_t s = 0;
  ck_assert(bgemm_seed_parse("12", &s) && s == 12);
  ck_assert(bgemm_seed_parse("0x10", &s) && s == 16);
  ck_assert(bgemm_seed_parse("random", &s));
  ck_assert(s <= 0xffffffffull);
  ck_assert(!bgemm_seed_parse("x", &s));
  ck_assert(!bgemm_seed_parse("-1", &s));
  ck_assert(!bgemm_seed_parse("", &s));
  ck_assert(!bgemm_seed_parse("12abc", &s));
}
END_TEST

int main(void) {
  Suite *s = suite_create("bench_gemm");
  TCase *tc = tcase_create("shapes");
  tcase_add_test(tc, table_shapes_are_runnable);
  tcase_add_test(tc, generated_shapes_are_runnable_and_spread);
  tcase_add_test(tc, the_seed_draws_the_same_again);
  tcase_add_test(tc, align16_offsets);
  tcase_add_test(tc, class_lists_and_quick);
  tcase_add_test(tc, seed_arguments);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
