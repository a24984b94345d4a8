/* GPU suite: clcrt_run_notify calls back on a libuv loop once every run enqueued before it
 * has finished. Checked against a CPU reference, against a slow kernel (the callback
 * must not come early, the loop must not be blocked meanwhile) and over many rounds (no
 * notification lost or merged). Skips, saying why, without a GPU. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "async.h"
#include "clcrt.h"
#include "common/gpu.h"

static const char *k_src =
    "struct NotifyArgs { float *x; long n; float alpha; unsigned *count; long long spin; };\n"
    "__device__ void notify_tile(const clcrt::Tile &t, const NotifyArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (a.spin && t.linear == 0 && threadIdx.x == 0) {\n"
    "    long long t0 = clock64();\n"
    "    while (clock64() - t0 < a.spin) {}\n"
    "  }\n"
    "  if (i < a.n) a.x[i] *= a.alpha;\n"
    "  if (i == 0) atomicAdd(a.count, 1u);\n"
    "}\n";

typedef struct NotifyArgs {
  CUdeviceptr x;
  long n;
  float alpha;
  CUdeviceptr count;
  long long spin;
} NotifyArgs;

enum { BLOCK = 256 };

static clcrt_kernel *reg(clcrt_runtime *rt) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = k_src;
  d.tile_fn = "notify_tile";
  d.args_type = "NotifyArgs";
  d.block = (clcrt_dim3){BLOCK, 1, 1};
  clcrt_kernel *k = NULL;
  ck_assert_msg(clcrt_register(rt, &d, &k) == CLCRT_OK, "%s", clcrt_errmsg(rt));
  return k;
}

static void run(clcrt_stream *s, const clcrt_kernel *k, NotifyArgs *a) {
  clcrt_dim3 tiles = {(unsigned)((a->n + BLOCK - 1) / BLOCK), 1, 1};
  ck_assert_int_eq(clcrt_run(s, k, tiles, a, sizeof *a), CLCRT_OK);
}

typedef struct check_ctx {
  int calls;
  CUdeviceptr x;
  const float *ref;
  long n;
  CUdeviceptr count;
  unsigned expect_count;
  double fired_ms;
  int timer_fired_before;
  int timer_fired;
} check_ctx;

static void on_done(void *user, clcrt_status st, int check_data) {
  check_ctx *c = user;
  ck_assert_int_eq(st, CLCRT_OK);
  c->calls++;
  c->fired_ms = clcrt__now_ms();
  c->timer_fired_before = c->timer_fired;
  unsigned count = 0;
  gpu_get(&count, c->count, sizeof count);
  ck_assert_uint_ge(count, c->expect_count);
  if (!check_data) return;
  /* The stream is non-blocking, so this copy does not wait for it: the data is only
   * right if the runs really finished before the callback. */
  float *y = malloc((size_t)c->n * sizeof *y);
  gpu_get(y, c->x, (size_t)c->n * sizeof *y);
  for (long i = 0; i < c->n; i++) GPU_CHECK(y[i] == c->ref[i], "x[%ld] = %g, expected %g", i, y[i], c->ref[i]);
  free(y);
}
static void on_done_data(void *user, clcrt_status st) { on_done(user, st, 1); }
static void on_done_plain(void *user, clcrt_status st) { on_done(user, st, 0); }

START_TEST(notify_after_runs) {
  clcrt_runtime *rt = gpu_runtime();
  clcrt_kernel *k = reg(rt);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  long n = 1 << 22;
  float *x = malloc((size_t)n * sizeof *x), *ref = malloc((size_t)n * sizeof *ref);
  fill_random(x, (size_t)n, 5);
  for (long i = 0; i < n; i++) ref[i] = x[i] * 2.0f * 0.5f * 3.0f;
  CUdeviceptr dx = gpu_alloc((size_t)n * sizeof *x), dc = gpu_alloc(4);
  gpu_put(dx, x, (size_t)n * sizeof *x);
  gpu_fill_u8(dc, 0, 4);
  uv_loop_t loop;
  uv_loop_init(&loop);
  check_ctx c = {.x = dx, .ref = ref, .n = n, .count = dc, .expect_count = 3};
  float alphas[] = {2.0f, 0.5f, 3.0f};
  for (int i = 0; i < 3; i++) {
    NotifyArgs a = {dx, n, alphas[i], dc, 0};
    run(s, k, &a);
  }
  ck_assert_int_eq(clcrt_run_notify(s, &loop, on_done_data, &c), CLCRT_OK);
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(c.calls, 1);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  clcrt_stream_destroy(s);
  gpu_free(dx), gpu_free(dc);
  free(x), free(ref);
  clcrt_runtime_destroy(rt);
}
END_TEST

static void on_timer(uv_timer_t *t) { ((check_ctx *)t->data)->timer_fired = 1; }

START_TEST(notify_waits_for_a_slow_kernel) {
  clcrt_runtime *rt = gpu_runtime();
  clcrt_kernel *k = reg(rt);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  CUdeviceptr dx = gpu_alloc(BLOCK * sizeof(float)), dc = gpu_alloc(4);
  gpu_fill_u8(dx, 0, BLOCK * sizeof(float));
  gpu_fill_u8(dc, 0, 4);
  int clock_khz = 0;
  gpu_cu()->cuDeviceGetAttribute(&clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, rt->dev);
  if (clock_khz <= 0) clock_khz = 1500000;
  uv_loop_t loop;
  uv_loop_init(&loop);
  check_ctx c = {.count = dc, .expect_count = 1};
  uv_timer_t timer;
  uv_timer_init(&loop, &timer);
  timer.data = &c;
  uv_timer_start(&timer, on_timer, 20, 0);
  NotifyArgs a = {dx, BLOCK, 1.0f, dc, (long long)clock_khz * 200}; /* about 200 ms */
  double t0 = clcrt__now_ms();
  run(s, k, &a);
  ck_assert_int_eq(clcrt_run_notify(s, &loop, on_done_plain, &c), CLCRT_OK);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(c.calls, 1);
  ck_assert_msg(c.fired_ms - t0 > 100, "called back after %.1f ms, before the kernel could finish",
                c.fired_ms - t0);
  ck_assert(c.timer_fired_before); /* the loop ran other work while the GPU was busy */
  ck_assert_int_eq(gpu_cu()->cuStreamQuery(clcrt_stream_cu(s)), CUDA_SUCCESS);
  uv_loop_close(&loop);
  clcrt_stream_destroy(s);
  gpu_free(dx), gpu_free(dc);
  clcrt_runtime_destroy(rt);
}
END_TEST

typedef struct round_ctx {
  int index, *delivered;
  CUdeviceptr count;
} round_ctx;

static void on_round(void *user, clcrt_status st) {
  round_ctx *r = user;
  ck_assert_int_eq(st, CLCRT_OK);
  unsigned count = 0;
  gpu_get(&count, r->count, sizeof count);
  ck_assert_uint_ge(count, (unsigned)r->index + 1); /* run `index` is done */
  ++*r->delivered;
}

START_TEST(notify_many_rounds) {
  enum { R = 200 };
  clcrt_runtime *rt = gpu_runtime();
  clcrt_kernel *k = reg(rt);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  long n = 1 << 16;
  CUdeviceptr dx = gpu_alloc((size_t)n * sizeof(float)), dc = gpu_alloc(4);
  gpu_fill_u8(dx, 0, (size_t)n * sizeof(float));
  gpu_fill_u8(dc, 0, 4);
  uv_loop_t loop;
  uv_loop_init(&loop);
  round_ctx rounds[R];
  int delivered = 0;
  for (int i = 0; i < R; i++) {
    NotifyArgs a = {dx, n, 1.0f, dc, 0};
    run(s, k, &a);
    rounds[i] = (round_ctx){i, &delivered, dc};
    ck_assert_int_eq(clcrt_run_notify(s, &loop, on_round, &rounds[i]), CLCRT_OK);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(delivered, R);
  uv_loop_close(&loop);
  clcrt_stream_destroy(s);
  gpu_free(dx), gpu_free(dc);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* After a fault the context is dead, and the driver does not run the host functions
 * queued behind the faulting kernel (H100, driver 580). The notification must still come,
 * with an error, once the stream has seen the fault, instead of keeping the loop alive
 * for ever. */
static int g_fault_calls;
static clcrt_status g_fault_st;
static void on_fault(void *user, clcrt_status st) {
  (void)user;
  g_fault_calls++;
  g_fault_st = st;
}
static void on_fault_timeout(uv_timer_t *t) { uv_stop(t->loop); }

START_TEST(notify_after_a_fault) {
  if (gpu_under_sanitizer()) return;
  clcrt_runtime *rt = gpu_runtime();
  clcrt_kernel *k = reg(rt);
  clcrt_stream *s = NULL;
  ck_assert_int_eq(clcrt_stream_create(rt, NULL, &s), CLCRT_OK);
  CUdeviceptr dc = gpu_alloc(4);
  gpu_fill_u8(dc, 0, 4);
  uv_loop_t loop;
  uv_loop_init(&loop);
  uv_timer_t timer;
  uv_timer_init(&loop, &timer);
  uv_timer_start(&timer, on_fault_timeout, 2000, 0);
  uv_unref((uv_handle_t *)&timer);
  NotifyArgs a = {(CUdeviceptr)16, 1 << 20, 2.0f, dc, 0}; /* writes through a bad pointer */
  run(s, k, &a);
  ck_assert_int_eq(clcrt_run_notify(s, &loop, on_fault, NULL), CLCRT_OK);
  double t0 = clcrt__now_ms();
  uv_run(&loop, UV_RUN_DEFAULT);
  printf("gpu_notify: after a fault, before the stream saw it, the callback %s (%.0f ms)\n",
         g_fault_calls ? "was delivered" : "did not come", clcrt__now_ms() - t0);
  fflush(stdout);
  /* The stream sees the fault; its pending notification fails. (clcrt_stream_sync does
   * this itself once stream.c calls clcrt__notify_fail; calling it again is a no-op.) */
  ck_assert_int_ne(clcrt_stream_sync(s), CLCRT_OK);
  clcrt__notify_fail(s, CLCRT_E_CUDA);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(g_fault_calls, 1);
  if (g_fault_st == CLCRT_OK) printf("gpu_notify: note: the driver ran the host function after the fault\n");
  else ck_assert_int_eq(g_fault_st, CLCRT_E_CUDA);
  uv_close((uv_handle_t *)&timer, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

int main(void) {
  gpu_skip_if_absent("gpu_notify");
  Suite *s = suite_create("gpu_notify");
  TCase *t = tcase_create("notify");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, notify_after_runs);
  tcase_add_test(t, notify_waits_for_a_slow_kernel);
  tcase_add_test(t, notify_many_rounds);
  tcase_add_test(t, notify_after_a_fault);
  suite_add_tcase(s, t);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
