/* The NVRTC warm-up of device runtimes (runtime/core/warmup.c), on a machine without a GPU:
 * a fake driver table stands in for the driver, its cuInit taking as long as a real
 * device's set-up, then failing (CLCRT_E_NO_DEVICE). Checked: the warm-up runs during a
 * slow set-up and is over when clcrt_runtime_create returns (no thread left behind); a
 * fast failure cancels it; compile-only runtimes and CLCRT_WARMUP=0 start none; a fork
 * while it compiles waits for it, and the child compiles normally. */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clcrt.h"
#include "driver.h"
#include "warmup.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int threads(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

/* ---- a fake driver: cuInit takes g_init_ms, then finds no device ---- */

static int g_init_ms;
static CUresult CUDAAPI fake_init(unsigned flags) {
  (void)flags;
  usleep((useconds_t)g_init_ms * 1000);
  return CUDA_ERROR_NO_DEVICE;
}
static CUresult CUDAAPI fake_error_name(CUresult r, const char **s) {
  (void)r;
  *s = "CUDA_ERROR_NO_DEVICE";
  return CUDA_SUCCESS;
}
static clcrt__driver g_fake;

static void use_fake_driver(int init_ms) {
  memset(&g_fake, 0, sizeof g_fake);
  g_fake.cuInit = fake_init;
  g_fake.cuGetErrorName = fake_error_name;
  g_init_ms = init_ms;
  clcrt__driver_override(&g_fake);
}

/* Creates a device runtime (which the fake driver fails) and returns its wall time. */
static double create_device_runtime(void) {
  clcrt_runtime *rt = NULL;
  double t0 = now_ms();
  clcrt_status st = clcrt_runtime_create(&rt, NULL);
  double ms = now_ms() - t0;
  ck_assert_msg(st == CLCRT_E_NO_DEVICE, "%s: %s", clcrt_status_name(st), clcrt_errmsg(rt));
  clcrt_runtime_destroy(rt);
  return ms;
}

static const char *const SCALE_SRC =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= a.alpha;\n"
    "}\n";

static clcrt_status compile_readme(void) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = "sm_90a";
  o.cache_dir = "";
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  if (st == CLCRT_OK) {
    clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
    d.source = SCALE_SRC;
    d.tile_fn = "scale_tile";
    d.args_type = "ScaleArgs";
    d.block = (clcrt_dim3){128, 1, 1};
    clcrt_kernel *k = NULL;
    st = clcrt_register(rt, &d, &k);
  }
  clcrt_runtime_destroy(rt);
  return st;
}

/* ---- tests ---- */

START_TEST(slow_device_setup_completes_the_warmup) {
  use_fake_driver(1500);
  int before = threads();
  double ms = create_device_runtime();
  clcrt__warmup_info w;
  clcrt__warmup_get(&w);
  ck_assert_int_eq(w.started, 1);
  ck_assert_int_eq(w.running, 0);
  ck_assert_msg(w.completed, "the warm-up did not finish in 1.5 s");
  ck_assert(w.ms > 0 && w.ms < ms);
  ck_assert_int_eq(threads(), before);
  printf("warm-up: an empty kernel for sm_90 in %.1f ms, during a 1500 ms device set-up (create: %.1f ms)\n", w.ms,
         ms);
  fflush(stdout);
  /* Once per process. */
  create_device_runtime();
  clcrt__warmup_info again;
  clcrt__warmup_get(&again);
  ck_assert(again.ms == w.ms);
  clcrt__driver_override(NULL);
  ck_assert_int_eq(compile_readme(), CLCRT_OK);
}
END_TEST

START_TEST(fast_failure_cancels_the_warmup) {
  clcrt__driver_pretend_missing(1);
  int before = threads();
  double ms = create_device_runtime();
  clcrt__warmup_info w;
  clcrt__warmup_get(&w);
  ck_assert_int_eq(w.started, 1);
  ck_assert_int_eq(w.running, 0);
  ck_assert_int_eq(threads(), before);
  printf("warm-up cancelled by a failure at once: create took %.1f ms (warm-up %s after %.1f ms)\n", ms,
         w.completed ? "completed" : "stopped", w.ms);
  fflush(stdout);
  clcrt__driver_pretend_missing(0);
  ck_assert_int_eq(compile_readme(), CLCRT_OK);
}
END_TEST

START_TEST(compile_only_runtimes_start_none) {
  ck_assert_int_eq(compile_readme(), CLCRT_OK);
  clcrt__warmup_info w;
  clcrt__warmup_get(&w);
  ck_assert_int_eq(w.started, 0);
}
END_TEST

START_TEST(environment_turns_it_off) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("CLCRT_WARMUP", "0", 1);
    clcrt__driver_pretend_missing(1);
    clcrt_runtime *rt = NULL;
    clcrt_status st = clcrt_runtime_create(&rt, NULL);
    clcrt_runtime_destroy(rt);
    clcrt__warmup_info w;
    clcrt__warmup_get(&w);
    _exit(st == CLCRT_E_NO_DEVICE && !w.started ? 0 : 1);
  }
  int ws;
  waitpid(pid, &ws, 0);
  ck_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}
END_TEST

static void *create_in_thread(void *p) {
  (void)p;
  clcrt_runtime *rt = NULL;
  clcrt_runtime_create(&rt, NULL);
  clcrt_runtime_destroy(rt);
  return NULL;
}

/* A fork from another thread while the warm-up compiles: the fork waits for it to stop,
 * so that the child never holds NVRTC in the middle of a compile, and compiles itself. */
START_TEST(fork_while_warming_up) {
  use_fake_driver(3000);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, create_in_thread, NULL), 0);
  clcrt__warmup_info w = {0};
  for (int i = 0; i < 2000 && !w.running; i++) {
    usleep(1000);
    clcrt__warmup_get(&w);
  }
  ck_assert_msg(w.running, "the warm-up never started");
  usleep(5000); /* inside NVRTC by now */
  pid_t pid = fork();
  if (pid == 0) {
    alarm(60);
    clcrt__driver_override(NULL);
    _exit(compile_readme() == CLCRT_OK ? 0 : 1);
  }
  clcrt__warmup_get(&w);
  ck_assert_int_eq(w.running, 0); /* the fork waited for it */
  int ws;
  waitpid(pid, &ws, 0);
  ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the child could not compile (status %d)", ws);
  pthread_join(t, NULL);
  clcrt__driver_override(NULL);
}
END_TEST

static Suite *warmup_suite(void) {
  Suite *s = suite_create("warmup");
  TCase *tc = tcase_create("warmup");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, slow_device_setup_completes_the_warmup);
  tcase_add_test(tc, fast_failure_cancels_the_warmup);
  tcase_add_test(tc, compile_only_runtimes_start_none);
  tcase_add_test(tc, environment_turns_it_off);
  tcase_add_test(tc, fork_while_warming_up);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(warmup_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
