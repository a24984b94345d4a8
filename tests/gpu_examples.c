/* GPU suite: the teaching examples (examples/ragged_sum.c, stencil2d.c, splitk.c,
 * taskgraph_chain.c) run as they are, compiled into this suite with their main renamed. Each
 * checks every result against a CPU reference on data it poisons first, under AUTO, STATIC and
 * FIXED, and returns 0 only when all match (splitk also when all three give the same bits); any
 * other status fails the test.
 * tests/test_guide.c compiles the same code on the CPU. Skips, saying why, without a GPU. */
#include <check.h>
#include <stdio.h>

#include "clcrt.h"
#include "clcrt_ops.h"
#include "common/gpu.h"

int ragged_sum_main(void);
int stencil2d_main(void);
int splitk_main(void);
int taskgraph_chain_main(void);
#define main ragged_sum_main
#include "../examples/ragged_sum.c"
#undef main
#define main stencil2d_main
#include "../examples/stencil2d.c"
#undef main
#define main splitk_main
#include "../examples/splitk.c"
#undef main
#define main taskgraph_chain_main
#include "../examples/taskgraph_chain.c"
#undef main

START_TEST(ragged_sum_is_right) { ck_assert_int_eq(ragged_sum_main(), 0); }
END_TEST

START_TEST(stencil2d_is_right) { ck_assert_int_eq(stencil2d_main(), 0); }
END_TEST

START_TEST(splitk_is_right_and_deterministic) { ck_assert_int_eq(splitk_main(), 0); }
END_TEST

START_TEST(taskgraph_chain_is_right) { ck_assert_int_eq(taskgraph_chain_main(), 0); }
END_TEST

int main(void) {
  gpu_skip_if_absent("gpu_examples");
  Suite *s = suite_create("gpu_examples");
  TCase *t = tcase_create("examples");
  tcase_set_timeout(t, 300);
  tcase_add_test(t, ragged_sum_is_right);
  tcase_add_test(t, stencil2d_is_right);
  tcase_add_test(t, splitk_is_right_and_deterministic);
  tcase_add_test(t, taskgraph_chain_is_right);
  suite_add_tcase(s, t);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
