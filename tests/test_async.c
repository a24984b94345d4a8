/* Asynchronous compiles on libuv's thread pool, in compile-only mode (sm_90a: no GPU).
 * The completion callback after real runs is tests/gpu_notify.c. */
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "clcrt.h"
#include "internal.h"

static char g_dir[256];

static int rm_one(const char *p, const struct stat *s, int flag, struct FTW *f) {
  (void)s, (void)flag, (void)f;
  return remove(p);
}
static void dir_setup(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/clcrt-async-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(g_dir));
}
static void dir_teardown(void) { nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static clcrt_runtime *rt_new(void) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = "sm_90a";
  o.cache_dir = g_dir;
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  ck_assert_msg(st == CLCRT_OK, "runtime: %s", clcrt_errmsg(rt));
  return rt;
}

static const char *SCALE =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= a.alpha * VARIANT;\n"
    "}\n";

/* Variant v: -DVARIANT=<v>, so every variant is its own key and its own compile. */
static clcrt_tile_desc variant(int v, char *opt, size_t n, const char **opts) {
  snprintf(opt, n, "-DVARIANT=%d", v + 1);
  opts[0] = opt;
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = SCALE;
  d.tile_fn = "scale_tile";
  d.args_type = "ScaleArgs";
  d.block = (clcrt_dim3){128, 1, 1};
  d.sched = CLCRT_SCHED_STEAL;
  d.options = opts;
  d.num_options = 1;
  return d;
}

typedef struct result {
  int calls;
  clcrt_status st;
  clcrt_kernel *k;
  char msg[512];
  uv_thread_t thread;
} result;

static void on_registered(void *user, clcrt_status st, clcrt_kernel *k, const char *msg) {
  result *r = user;
  r->calls++;
  r->st = st;
  r->k = k;
  r->thread = uv_thread_self();
  snprintf(r->msg, sizeof r->msg, "%s", msg ? msg : "");
}

START_TEST(async_compiles_variants_on_a_loop) {
  enum { N = 8 };
  clcrt_runtime *rt = rt_new();
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  result res[N];
  memset(res, 0, sizeof res);
  for (int i = 0; i < N; i++) {
    char opt[32];
    const char *opts[1];
    clcrt_tile_desc d = variant(i, opt, sizeof opt, opts); /* gone when the call returns */
    ck_assert_int_eq(clcrt_register_async(rt, &d, &loop, on_registered, &res[i]), CLCRT_OK);
  }
  /* Returned at once: nothing is delivered before the loop runs. */
  for (int i = 0; i < N; i++) ck_assert_int_eq(res[i].calls, 0);
  uv_thread_t self = uv_thread_self();
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(res[i].calls, 1);
    ck_assert_msg(res[i].st == CLCRT_OK, "variant %d: %s", i, res[i].msg);
    ck_assert_ptr_nonnull(res[i].k);
    ck_assert(uv_thread_equal(&res[i].thread, &self)); /* delivered on the loop's thread */
    for (int j = 0; j < i; j++) ck_assert_ptr_ne(res[i].k, res[j].k);
  }
  clcrt_cache_stats s = CLCRT_CACHE_STATS_INIT;
  clcrt_cache_stats_get(rt, &s);
  ck_assert_uint_eq(s.misses, N);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  clcrt_runtime_destroy(rt);

  /* A second runtime gets all of them from the disk, still asynchronously. */
  rt = rt_new();
  uv_loop_init(&loop);
  memset(res, 0, sizeof res);
  for (int i = 0; i < N; i++) {
    char opt[32];
    const char *opts[1];
    clcrt_tile_desc d = variant(i, opt, sizeof opt, opts);
    ck_assert_int_eq(clcrt_register_async(rt, &d, &loop, on_registered, &res[i]), CLCRT_OK);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  for (int i = 0; i < N; i++) ck_assert_int_eq(res[i].st, CLCRT_OK);
  clcrt_cache_stats_get(rt, &s);
  ck_assert_uint_eq(s.disk_hits, N);
  uv_loop_close(&loop);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(async_one_key_compiles_once) {
  enum { N = 6 };
  clcrt_runtime *rt = rt_new();
  uv_loop_t loop;
  uv_loop_init(&loop);
  result res[N];
  memset(res, 0, sizeof res);
  char opt[32];
  const char *opts[1];
  clcrt_tile_desc d = variant(0, opt, sizeof opt, opts);
  for (int i = 0; i < N; i++) ck_assert_int_eq(clcrt_register_async(rt, &d, &loop, on_registered, &res[i]), CLCRT_OK);
  uv_run(&loop, UV_RUN_DEFAULT);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(res[i].st, CLCRT_OK);
    ck_assert_ptr_eq(res[i].k, res[0].k);
  }
  clcrt_cache_stats s = CLCRT_CACHE_STATS_INIT;
  clcrt_cache_stats_get(rt, &s);
  ck_assert_uint_eq(s.misses, 1);
  ck_assert_uint_eq(s.mem_hits, N - 1);
  uv_loop_close(&loop);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(async_failure_carries_the_message) {
  clcrt_runtime *rt = rt_new();
  uv_loop_t loop;
  uv_loop_init(&loop);
  result bad = {0}, good = {0};
  char opt[32];
  const char *opts[1];
  clcrt_tile_desc d = variant(0, opt, sizeof opt, opts);
  clcrt_tile_desc b = d;
  b.source =
      "struct ScaleArgs { float *x; };\n"
      "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) { this_is_not_declared(); }\n";
  ck_assert_int_eq(clcrt_register_async(rt, &b, &loop, on_registered, &bad), CLCRT_OK);
  ck_assert_int_eq(clcrt_register_async(rt, &d, &loop, on_registered, &good), CLCRT_OK);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(bad.calls, 1);
  ck_assert_int_eq(bad.st, CLCRT_E_COMPILE);
  ck_assert_ptr_null(bad.k);
  ck_assert_msg(strstr(bad.msg, "this_is_not_declared") != NULL, "message: %s", bad.msg);
  ck_assert_int_eq(good.st, CLCRT_OK);
  uv_loop_close(&loop);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(async_arguments) {
  clcrt_runtime *rt = rt_new();
  uv_loop_t loop;
  uv_loop_init(&loop);
  result r = {0};
  char opt[32];
  const char *opts[1];
  clcrt_tile_desc d = variant(0, opt, sizeof opt, opts);
  ck_assert_int_eq(clcrt_register_async(NULL, &d, &loop, on_registered, &r), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_register_async(rt, NULL, &loop, on_registered, &r), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_register_async(rt, &d, NULL, on_registered, &r), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_register_async(rt, &d, &loop, NULL, &r), CLCRT_E_INVALID);
  clcrt_tile_desc z = d;
  z.size = 3;
  ck_assert_int_eq(clcrt_register_async(rt, &z, &loop, on_registered, &r), CLCRT_E_INVALID);
  z = d;
  z.num_options = -1;
  ck_assert_int_eq(clcrt_register_async(rt, &z, &loop, on_registered, &r), CLCRT_E_INVALID);
  /* Out of memory while queueing: a status now, no callback later. */
  clcrt__alloc_fail_after(1);
  clcrt_status st = clcrt_register_async(rt, &d, &loop, on_registered, &r);
  clcrt__alloc_fail_after(0);
  ck_assert_int_eq(st, CLCRT_E_NOMEM);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(r.calls, 0);
  /* Notifications need a stream of a runtime with a device. */
  ck_assert_int_eq(clcrt_run_notify(NULL, &loop, NULL, NULL), CLCRT_E_INVALID);
  uv_loop_close(&loop);
  clcrt_runtime_destroy(rt); /* nothing live: returns at once */
}
END_TEST

/* Destroying the runtime from the loop thread while compiles run waits for the running
 * ones, and does not wait for their delivery (which needs the very loop the caller is
 * blocking). The callbacks after the destroy get no kernel: theirs went with the runtime. */
static clcrt_runtime *g_rt;
static int g_delivered;
static void destroy_in_first(void *user, clcrt_status st, clcrt_kernel *k, const char *msg) {
  (void)user;
  if (g_delivered++ == 0) {
    ck_assert_int_eq(st, CLCRT_OK);
    ck_assert_ptr_nonnull(k);
    clcrt_runtime_destroy(g_rt);
    g_rt = NULL;
  } else {
    ck_assert_int_eq(st, CLCRT_E_CANCELLED);
    ck_assert_ptr_null(k);
    ck_assert_ptr_nonnull(strstr(msg, "destroyed"));
  }
}

START_TEST(async_destroy_from_the_loop) {
  g_rt = rt_new();
  uv_loop_t loop;
  uv_loop_init(&loop);
  for (int i = 0; i < 4; i++) {
    char opt[32];
    const char *opts[1];
    clcrt_tile_desc d = variant(i, opt, sizeof opt, opts);
    ck_assert_int_eq(clcrt_register_async(g_rt, &d, &loop, destroy_in_first, NULL), CLCRT_OK);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(g_delivered, 4);
  ck_assert_ptr_null(g_rt);
  uv_loop_close(&loop);
}
END_TEST

/* clcrt_register_async, clcrt_runtime_destroy, then uv_run: the callbacks get
 * CLCRT_E_CANCELLED and no kernel. They used to get CLCRT_OK and a kernel destroy had
 * freed (a heap use-after-free under ASan as soon as it was read). The first compile is
 * a memory hit, so its work is over before the destroy; the others may be queued or
 * running when it comes: every one is cancelled alike. */
static void expect_cancelled(void *user, clcrt_status st, clcrt_kernel *k, const char *msg) {
  result *r = user;
  r->calls++;
  r->st = st;
  r->k = k;
  snprintf(r->msg, sizeof r->msg, "%s", msg ? msg : "");
  if (k) { /* read it: freed memory shows here under ASan */
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    clcrt_kernel_info_get(k, &info);
  }
}

START_TEST(async_destroy_before_the_loop_runs) {
  enum { N = 4 };
  clcrt_runtime *rt = rt_new();
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  char opt[N][32];
  const char *opts[N][1];
  clcrt_tile_desc d[N];
  for (int i = 0; i < N; i++) d[i] = variant(i, opt[i], sizeof opt[i], opts[i]);
  clcrt_kernel *k0 = NULL;
  ck_assert_int_eq(clcrt_register(rt, &d[0], &k0), CLCRT_OK);
  result r[N];
  memset(r, 0, sizeof r);
  for (int i = 0; i < N; i++) ck_assert_int_eq(clcrt_register_async(rt, &d[i], &loop, expect_cancelled, &r[i]), CLCRT_OK);
  usleep(200 * 1000); /* the memory hit's work is done by now */
  clcrt_runtime_destroy(rt);
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(r[i].calls, 1);
    ck_assert_msg(r[i].st == CLCRT_E_CANCELLED, "compile %d: %s (%s)", i, clcrt_status_name(r[i].st), r[i].msg);
    ck_assert_ptr_null(r[i].k);
    ck_assert_ptr_nonnull(strstr(r[i].msg, "destroyed"));
  }
  ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

static Suite *async_suite(void) {
  Suite *s = suite_create("async");
  TCase *t = tcase_create("register_async");
  tcase_add_checked_fixture(t, dir_setup, dir_teardown);
  tcase_set_timeout(t, 300);
  tcase_add_test(t, async_compiles_variants_on_a_loop);
  tcase_add_test(t, async_one_key_compiles_once);
  tcase_add_test(t, async_failure_carries_the_message);
  tcase_add_test(t, async_arguments);
  tcase_add_test(t, async_destroy_from_the_loop);
  tcase_add_test(t, async_destroy_before_the_loop_runs);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(async_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
