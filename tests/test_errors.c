/* Failure messages per thread and per runtime (clcrt_errmsg, runtime/core/errmsg.c), in
 * compile-only mode (sm_90a: no GPU needed).
 *
 * Threads fail differently at the same time on one runtime and each must read exactly
 * its own message, many times over; a thread that never failed reads "no error"; a
 * message survives other threads' failures; a runtime created where a destroyed one
 * lived does not inherit its messages; calls without a runtime report through
 * clcrt_errmsg(NULL); memory stays bounded, is freed at thread exit and at destroy, and
 * an allocation failure while recording a message costs the message's tail, nothing
 * else. Every allocation goes through a counting allocator so that the memory claims
 * are checked, not assumed. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "alloc.h"
#include "clcrt.h"
#include "internal.h"

/* ---- a counting allocator (atomic: the threads here allocate concurrently) ---- */

static long g_live;

static void *count_malloc(size_t n) {
  void *p = malloc(n);
  if (p) __atomic_add_fetch(&g_live, 1, __ATOMIC_RELAXED);
  return p;
}
static void *count_calloc(size_t c, size_t n) {
  void *p = calloc(c, n);
  if (p) __atomic_add_fetch(&g_live, 1, __ATOMIC_RELAXED);
  return p;
}
static void *count_realloc(void *p, size_t n) {
  void *q = realloc(p, n);
  if (q && !p) __atomic_add_fetch(&g_live, 1, __ATOMIC_RELAXED);
  return q;
}
static void count_free(void *p) {
  if (p) __atomic_sub_fetch(&g_live, 1, __ATOMIC_RELAXED);
  free(p);
}
static long live(void) { return __atomic_load_n(&g_live, __ATOMIC_RELAXED); }

/* ---- helpers ---- */

static const char *const SCALE_SRC =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= a.alpha;\n"
    "}\n";

static clcrt_runtime *rt_new(void) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = "sm_90a";
  o.cache_dir = "";
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  ck_assert_msg(st == CLCRT_OK, "clcrt_runtime_create: %s: %s", clcrt_status_name(st), clcrt_errmsg(rt));
  return rt;
}

static clcrt_tile_desc scale_desc(void) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = SCALE_SRC;
  d.tile_fn = "scale_tile";
  d.args_type = "ScaleArgs";
  d.block = (clcrt_dim3){128, 1, 1};
  d.sched = CLCRT_SCHED_STEAL;
  return d;
}

/* A failure whose message is known exactly: a tile function that is not in the source.
 * Fills want with the message clcrt_errmsg must then return. */
static clcrt_status fail_name(clcrt_runtime *rt, const char *name, char *want, size_t n) {
  clcrt_tile_desc d = scale_desc();
  d.tile_fn = name;
  snprintf(want, n, "tile function \"%s\" does not appear in the source: check desc->tile_fn", name);
  clcrt_kernel *k = NULL;
  return clcrt_register(rt, &d, &k);
}

/* A syntax error on line `line` (>= 3) of the user's source: NVRTC reports scale_tile(line). */
static char *broken_source(int line) {
  size_t n = strlen(SCALE_SRC) + (size_t)line + 128;
  char *s = malloc(n);
  ck_assert_ptr_nonnull(s);
  int off = snprintf(s, n, "struct ScaleArgs { float *x; long n; float alpha; };\n");
  for (int i = 2; i < line; i++) off += snprintf(s + off, n - (size_t)off, "\n");
  snprintf(s + off, n - (size_t)off,
           "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) { long i = 1 +; }\n");
  return s;
}

/* ---- threads failing at the same time on one runtime ---- */

enum { NAME_THREADS = 4, COMPILE_THREADS = 2, NAME_ITERS = 3000, COMPILE_ITERS = 2 };

typedef struct worker {
  clcrt_runtime *rt;
  int id;
  int kind; /* 0: bad names, 1: compile errors, 2: never fails */
  volatile int *stop;
  char err[512]; /* the first disagreement, "" when none */
  long checks;
} worker;

static void *worker_main(void *p) {
  worker *w = p;
  char name[64], want[256];
  if (w->kind == 0) {
    for (int it = 0; it < NAME_ITERS && !w->err[0]; it++) {
      snprintf(name, sizeof name, "missing_fn_t%d_i%d", w->id, it);
      clcrt_status st = fail_name(w->rt, name, want, sizeof want);
      /* Read it several times while the other threads go on failing: never another
       * thread's message, never a torn one. */
      for (int r = 0; r < 4; r++, w->checks++) {
        const char *got = clcrt_errmsg(w->rt);
        if (st != CLCRT_E_INVALID || strcmp(got, want) != 0) {
          snprintf(w->err, sizeof w->err, "thread %d, iteration %d: status %s, message \"%s\", want \"%s\"", w->id,
                   it, clcrt_status_name(st), got, want);
          break;
        }
        if (r == 1) sched_yield();
      }
    }
  } else if (w->kind == 1) {
    int line = 3 + 2 * w->id;
    char *src = broken_source(line);
    char mine[64], other[64];
    snprintf(mine, sizeof mine, "scale_tile(%d)", line);
    for (int it = 0; it < COMPILE_ITERS && !w->err[0]; it++) {
      clcrt_tile_desc d = scale_desc();
      d.source = src;
      clcrt_kernel *k = NULL;
      clcrt_status st = clcrt_register(w->rt, &d, &k);
      for (int r = 0; r < 50 && !w->err[0]; r++, w->checks++) {
        const char *got = clcrt_errmsg(w->rt);
        int foreign = 0;
        for (int l = 3; l < 3 + 2 * (NAME_THREADS + COMPILE_THREADS); l += 2) {
          snprintf(other, sizeof other, "scale_tile(%d)", l);
          foreign |= l != line && strstr(got, other) != NULL;
        }
        if (st != CLCRT_E_COMPILE || !strstr(got, mine) || foreign || strstr(got, "missing_fn"))
          snprintf(w->err, sizeof w->err, "thread %d (line %d): status %s, message \"%.300s\"", w->id, line,
                   clcrt_status_name(st), got);
        sched_yield();
      }
    }
    free(src);
  } else {
    while (!*w->stop && !w->err[0]) {
      const char *got = clcrt_errmsg(w->rt);
      if (strcmp(got, "no error") != 0)
        snprintf(w->err, sizeof w->err, "a thread that never failed reads \"%.300s\"", got);
      w->checks++;
      sched_yield();
    }
  }
  return NULL;
}

START_TEST(threads_read_their_own_messages) {
  clcrt_runtime *rt = rt_new();
  volatile int stop = 0;
  enum { N = NAME_THREADS + COMPILE_THREADS + 1 };
  worker w[N];
  pthread_t th[N];
  for (int i = 0; i < N; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].rt = rt;
    w[i].id = i;
    w[i].kind = i < NAME_THREADS ? 0 : i < NAME_THREADS + COMPILE_THREADS ? 1 : 2;
    w[i].stop = &stop;
    ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < N - 1; i++) pthread_join(th[i], NULL);
  stop = 1;
  pthread_join(th[N - 1], NULL);
  for (int i = 0; i < N; i++) {
    ck_assert_msg(!w[i].err[0], "%s", w[i].err);
    ck_assert_int_gt(w[i].checks, 0);
  }
  /* This thread never failed on rt either. */
  ck_assert_str_eq(clcrt_errmsg(rt), "no error");
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- a message survives the failures of other threads ---- */

typedef struct other {
  clcrt_runtime *rt;
  char want[256];
  clcrt_status st;
  char got[256];
} other;

static void *other_fails(void *p) {
  other *o = p;
  o->st = fail_name(o->rt, "the_other_threads_fn", o->want, sizeof o->want);
  snprintf(o->got, sizeof o->got, "%s", clcrt_errmsg(o->rt));
  return NULL;
}

START_TEST(message_survives_other_threads) {
  clcrt_runtime *rt = rt_new();
  char want[256];
  ck_assert_int_eq(fail_name(rt, "the_main_threads_fn", want, sizeof want), CLCRT_E_INVALID);
  const char *before = clcrt_errmsg(rt);
  ck_assert_str_eq(before, want);
  for (int i = 0; i < 8; i++) {
    other o = {.rt = rt};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, other_fails, &o), 0);
    pthread_join(t, NULL);
    ck_assert_int_eq(o.st, CLCRT_E_INVALID);
    ck_assert_str_eq(o.got, o.want);
    ck_assert_str_eq(clcrt_errmsg(rt), want);
  }
  /* The pointer handed out earlier still holds this thread's message. */
  ck_assert_str_eq(before, want);
  /* A success does not clear the last failure (as with cudaPeekAtLastError, the message
   * is the last failure's, not the last call's). */
  clcrt_tile_desc d = scale_desc();
  clcrt_kernel *k = NULL;
  ck_assert_int_eq(clcrt_register(rt, &d, &k), CLCRT_OK);
  ck_assert_str_eq(clcrt_errmsg(rt), want);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- a new runtime where a destroyed one lived ---- */

typedef struct holder {
  clcrt_runtime *rt; /* the runtime to fail on, then the one to read */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int phase; /* 0: fail on rt; 1: failed; 2: read rt (a new runtime); 3: done */
  char got[256];
} holder;

static void *holder_main(void *p) {
  holder *h = p;
  char want[256];
  pthread_mutex_lock(&h->lock);
  fail_name(h->rt, "old_runtimes_fn", want, sizeof want);
  h->phase = 1;
  pthread_cond_broadcast(&h->cond);
  while (h->phase != 2) pthread_cond_wait(&h->cond, &h->lock);
  snprintf(h->got, sizeof h->got, "%s", clcrt_errmsg(h->rt));
  h->phase = 3;
  pthread_cond_broadcast(&h->cond);
  pthread_mutex_unlock(&h->lock);
  return NULL;
}

START_TEST(new_runtime_does_not_inherit_messages) {
  int same_address = 0;
  for (int round = 0; round < 20; round++) {
    holder h = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    h.rt = rt_new();
    char want[256];
    ck_assert_int_eq(fail_name(h.rt, "old_runtimes_fn", want, sizeof want), CLCRT_E_INVALID);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, holder_main, &h), 0);
    pthread_mutex_lock(&h.lock);
    while (h.phase != 1) pthread_cond_wait(&h.cond, &h.lock);
    /* Both threads hold a message for the old runtime; the other thread stays alive. */
    clcrt_runtime *old = h.rt;
    clcrt_runtime_destroy(old);
    clcrt_runtime *rt = rt_new();
    same_address += rt == old;
    ck_assert_str_eq(clcrt_errmsg(rt), "no error");
    h.rt = rt;
    h.phase = 2;
    pthread_cond_broadcast(&h.cond);
    while (h.phase != 3) pthread_cond_wait(&h.cond, &h.lock);
    pthread_mutex_unlock(&h.lock);
    pthread_join(t, NULL);
    ck_assert_msg(strcmp(h.got, "no error") == 0, "round %d (%s address): the other thread reads \"%s\"", round,
                  rt == old ? "same" : "another", h.got);
    clcrt_runtime_destroy(rt);
  }
  /* Not an assertion (the allocator decides), but the case this test is about. */
  printf("new_runtime_does_not_inherit_messages: %d of 20 new runtimes reused the old address\n", same_address);
  fflush(stdout);
}
END_TEST

/* ---- calls without a runtime ---- */

typedef struct null_reader {
  char got[256];
} null_reader;

static void *read_null(void *p) {
  null_reader *r = p;
  snprintf(r->got, sizeof r->got, "%s", clcrt_errmsg(NULL));
  return NULL;
}

START_TEST(errmsg_null) {
  ck_assert_str_eq(clcrt_errmsg(NULL), "no runtime (NULL handle)");
  /* clcrt_runtime_create fails before it has a handle: explained here. */
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.size = 3;
  clcrt_runtime *rt = (clcrt_runtime *)&rt;
  ck_assert_int_eq(clcrt_runtime_create(&rt, &o), CLCRT_E_INVALID);
  ck_assert_ptr_null(rt);
  ck_assert_msg(strstr(clcrt_errmsg(NULL), "opts->size is 3") && strstr(clcrt_errmsg(NULL), "CLCRT_RUNTIME_OPTS_INIT"),
                "%s", clcrt_errmsg(NULL));
  ck_assert_int_eq(clcrt_runtime_create(NULL, NULL), CLCRT_E_INVALID);
  ck_assert_str_eq(clcrt_errmsg(NULL), "clcrt_runtime_create: out is NULL");
  /* The internal entry point of the trace functions. */
  ck_assert_int_eq(clcrt__fail_norts(CLCRT_E_IO, "trace %d: %s", 7, "no such file"), CLCRT_E_IO);
  ck_assert_str_eq(clcrt_errmsg(NULL), "trace 7: no such file");
  /* Per thread as well. */
  null_reader r;
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, read_null, &r), 0);
  pthread_join(t, NULL);
  ck_assert_str_eq(r.got, "no runtime (NULL handle)");
  /* Runtimes and NULL do not mix: a runtime's failure leaves clcrt_errmsg(NULL) alone. */
  rt = rt_new();
  char want[256];
  fail_name(rt, "some_fn", want, sizeof want);
  ck_assert_str_eq(clcrt_errmsg(NULL), "trace 7: no such file");
  ck_assert_str_eq(clcrt_errmsg(rt), want);
  clcrt_runtime_destroy(rt);
  ck_assert_str_eq(clcrt_errmsg(NULL), "trace 7: no such file");
}
END_TEST

/* ---- memory: bounded, freed at destroy and at thread exit ---- */

/* A name long enough that its message does not fit in a slot (a heap buffer per slot). */
static void long_name(char *buf, size_t n, int i) {
  int off = snprintf(buf, n, "fn_%d_", i);
  memset(buf + off, 'x', n - (size_t)off - 1);
  buf[n - 1] = 0;
}

START_TEST(memory_bounded_and_freed_at_destroy) {
  enum { R = 20 };
  long base = live();
  clcrt_runtime *rts[R];
  for (int i = 0; i < R; i++) rts[i] = rt_new();
  long with_runtimes = live();
  char name[600], want[800];
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < R; i++) {
      long_name(name, sizeof name, i);
      ck_assert_int_eq(fail_name(rts[i], name, want, sizeof want), CLCRT_E_INVALID);
      ck_assert_str_eq(clcrt_errmsg(rts[i]), want);
    }
  /* One table and at most one long buffer per slot (8), however many runtimes failed. */
  long held = live() - with_runtimes;
  ck_assert_msg(held >= 1 && held <= 1 + 8, "the thread holds %ld blocks for its messages", held);
  /* The last eight runtimes keep their messages; the older ones' slots were reused. */
  for (int i = 0; i < R; i++) {
    long_name(name, sizeof name, i);
    snprintf(want, sizeof want, "tile function \"%s\" does not appear in the source: check desc->tile_fn", name);
    if (i >= R - 8) ck_assert_str_eq(clcrt_errmsg(rts[i]), want);
    else ck_assert_str_eq(clcrt_errmsg(rts[i]), "no error");
  }
  for (int i = 0; i < R; i++) clcrt_runtime_destroy(rts[i]);
  ck_assert_msg(live() == base, "%ld blocks left after destroying every runtime", live() - base);
}
END_TEST

typedef struct exiter {
  clcrt_runtime *rt;
  clcrt_status st;
  long held;
} exiter;

static void *fail_and_exit(void *p) {
  exiter *e = p;
  char name[600], want[800];
  long before = live();
  long_name(name, sizeof name, 1);
  e->st = fail_name(e->rt, name, want, sizeof want);
  e->held = live() - before;
  return NULL;
}

START_TEST(memory_freed_at_thread_exit) {
  clcrt_runtime *rt = rt_new();
  long before = live();
  for (int i = 0; i < 10; i++) {
    exiter e = {.rt = rt};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fail_and_exit, &e), 0);
    pthread_join(t, NULL);
    ck_assert_int_eq(e.st, CLCRT_E_INVALID);
    ck_assert_int_ge(e.held, 1);
    ck_assert_msg(live() == before, "thread %d left %ld blocks behind", i, live() - before);
  }
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- no memory while recording a message ---- */

START_TEST(out_of_memory_while_recording) {
  clcrt_runtime *a = rt_new(), *b = rt_new();
  char name[600], want[800];
  long_name(name, sizeof name, 1);
  /* No table can be allocated: the message is cut to the static per-thread buffer. */
  clcrt__alloc_fail_after(1);
  ck_assert_int_eq(fail_name(a, name, want, sizeof want), CLCRT_E_INVALID);
  clcrt__alloc_fail_after(0);
  const char *got = clcrt_errmsg(a);
  ck_assert_msg(strlen(got) < strlen(want) && strncmp(got, want, 40) == 0 && strstr(got, "... (truncated)"), "%s", got);
  ck_assert_str_eq(clcrt_errmsg(b), "no error");
  /* Memory is back: b's failure gets a table, and a's cut message moves into it. */
  char want_b[256];
  ck_assert_int_eq(fail_name(b, "b_fn", want_b, sizeof want_b), CLCRT_E_INVALID);
  ck_assert_str_eq(clcrt_errmsg(b), want_b);
  ck_assert_msg(strncmp(clcrt_errmsg(a), want, 40) == 0 && strstr(clcrt_errmsg(a), "... (truncated)"), "%s",
                clcrt_errmsg(a));
  /* With a table but no memory for a long buffer: cut to the slot. */
  long_name(name, sizeof name, 2);
  clcrt__alloc_fail_after(1);
  ck_assert_int_eq(fail_name(b, name, want, sizeof want), CLCRT_E_INVALID);
  clcrt__alloc_fail_after(0);
  ck_assert_msg(strncmp(clcrt_errmsg(b), want, 40) == 0 && strstr(clcrt_errmsg(b), "... (truncated)"), "%s",
                clcrt_errmsg(b));
  /* And with memory, whole. */
  ck_assert_int_eq(fail_name(b, name, want, sizeof want), CLCRT_E_INVALID);
  ck_assert_str_eq(clcrt_errmsg(b), want);
  clcrt_runtime_destroy(a);
  clcrt_runtime_destroy(b);
}
END_TEST

/* A message longer than the cap is cut, with the mark, at the cap. */
START_TEST(long_message_truncated) {
  clcrt_runtime *rt = rt_new();
  size_t n = 3 * CLCRT__ERRMSG_MAX;
  char *name = malloc(n), want[64];
  long_name(name, n, 3);
  ck_assert_int_eq(fail_name(rt, name, want, sizeof want), CLCRT_E_INVALID);
  const char *got = clcrt_errmsg(rt);
  ck_assert_uint_eq(strlen(got), CLCRT__ERRMSG_MAX - 1);
  ck_assert_str_eq(got + strlen(got) - strlen("... (truncated)"), "... (truncated)");
  ck_assert(strncmp(got, "tile function \"fn_3_xxx", 23) == 0);
  free(name);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- asynchronous compiles deliver their own thread's message ---- */

enum { ASYNC_N = 12 };
typedef struct async_res {
  int calls;
  clcrt_status st;
  char msg[512];
} async_res;

static void on_registered(void *user, clcrt_status st, clcrt_kernel *k, const char *msg) {
  (void)k;
  async_res *r = user;
  r->calls++;
  r->st = st;
  snprintf(r->msg, sizeof r->msg, "%s", msg ? msg : "");
}

START_TEST(async_failures_carry_their_own_message) {
  clcrt_runtime *rt = rt_new();
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  async_res res[ASYNC_N];
  char names[ASYNC_N][64];
  char *srcs[ASYNC_N];
  memset(res, 0, sizeof res);
  for (int i = 0; i < ASYNC_N; i++) {
    clcrt_tile_desc d = scale_desc();
    srcs[i] = NULL;
    if (i % 3 == 0) {
      /* A compile error on its own line: slow, so failures overlap. */
      srcs[i] = broken_source(3 + i);
      d.source = srcs[i];
    } else {
      snprintf(names[i], sizeof names[i], "async_missing_%d", i);
      d.tile_fn = names[i];
    }
    ck_assert_int_eq(clcrt_register_async(rt, &d, &loop, on_registered, &res[i]), CLCRT_OK);
  }
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  for (int i = 0; i < ASYNC_N; i++) {
    ck_assert_int_eq(res[i].calls, 1);
    char mine[64];
    if (i % 3 == 0) {
      ck_assert_int_eq(res[i].st, CLCRT_E_COMPILE);
      snprintf(mine, sizeof mine, "scale_tile(%d)", 3 + i);
    } else {
      ck_assert_int_eq(res[i].st, CLCRT_E_INVALID);
      snprintf(mine, sizeof mine, "\"async_missing_%d\"", i);
    }
    ck_assert_msg(strstr(res[i].msg, mine), "compile %d: message \"%s\" does not mention %s", i, res[i].msg, mine);
    free(srcs[i]);
  }
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  ck_assert_str_eq(clcrt_errmsg(rt), "no error");
  clcrt_runtime_destroy(rt);
}
END_TEST

static Suite *errors_suite(void) {
  Suite *s = suite_create("errors");
  TCase *tc = tcase_create("threads");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, threads_read_their_own_messages);
  tcase_add_test(tc, message_survives_other_threads);
  tcase_add_test(tc, new_runtime_does_not_inherit_messages);
  tcase_add_test(tc, errmsg_null);
  tcase_add_test(tc, async_failures_carry_their_own_message);
  suite_add_tcase(s, tc);
  tc = tcase_create("memory");
  tcase_add_test(tc, memory_bounded_and_freed_at_destroy);
  tcase_add_test(tc, memory_freed_at_thread_exit);
  tcase_add_test(tc, out_of_memory_while_recording);
  tcase_add_test(tc, long_message_truncated);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  if (clcrt_replace_allocator(count_malloc, count_realloc, count_calloc, count_free) != CLCRT_OK) return EXIT_FAILURE;
  SRunner *sr = srunner_create(errors_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
