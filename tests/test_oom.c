/* Out-of-memory suite, after libuv's test-loop-oom: for N = 1, 2, 3, ... the Nth allocation
 * the library makes from now on (and every later one) fails, then a compile-only runtime is
 * created and a kernel registered. Every N must end in CLCRT_OK or CLCRT_E_NOMEM with a
 * message, never a crash, a wrong status or a leak, until N is large enough that nothing
 * failed. Leaks are caught two ways: a counting allocator (installed with
 * clcrt_replace_allocator) must be back to zero live blocks after every destroy, so the
 * failing N is named; and the ASan build (make test-asan) runs LeakSanitizer at exit.
 * NVRTC's own allocations do not go through clcrt's allocator and are not counted. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "clcrt.h"
#include "internal.h"

/* ---- a counting allocator ---- */

static long g_live;

static void *count_malloc(size_t n) {
  void *p = malloc(n);
  if (p) g_live++;
  return p;
}
static void *count_calloc(size_t c, size_t n) {
  void *p = calloc(c, n);
  if (p) g_live++;
  return p;
}
static void *count_realloc(void *p, size_t n) {
  void *q = realloc(p, n);
  if (q && !p) g_live++;
  return q;
}
static void count_free(void *p) {
  if (p) g_live--;
  free(p);
}

/* A header read from disk: the compile is traced and the header hashed into the cache's
 * manifest (cache/deps.h), which allocates too. setup writes the header (a name of its own,
 * so that suites running at once do not share it) and the source that includes it. */
static char g_hdr[64], g_hdr_src[512];

static void setup(void) {
  ck_assert_int_eq(clcrt_replace_allocator(count_malloc, count_realloc, count_calloc, count_free), CLCRT_OK);
  g_live = 0;
  snprintf(g_hdr, sizeof g_hdr, "/tmp/clcrt-oom-XXXXXX.h");
  int fd = mkstemps(g_hdr, 2);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, "#define OOM_FACTOR 2.0f\n", 24), 24);
  close(fd);
  snprintf(g_hdr_src, sizeof g_hdr_src,
           "#include \"%s\"\n"
           "struct ScaleArgs { float *x; long n; float alpha; };\n"
           "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
           "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
           "  if (i < a.n) a.x[i] *= a.alpha * OOM_FACTOR;\n"
           "}\n",
           g_hdr);
  /* Older than the cache's settling time by the first compile, so that it is hashed. */
  usleep(100 * 1000);
}

static void teardown(void) {
  clcrt__alloc_fail_after(0);
  unlink(g_hdr);
}

/* ---- sources ---- */

static const char *const SCALE_SRC =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= a.alpha;\n"
    "}\n";

static const char *const STATE_SRC =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "struct ScaleState { float alpha; };\n"
    "__device__ void scale_prologue(const ScaleArgs &a, ScaleState &s) { s.alpha = a.alpha * 2.0f; }\n"
    "__device__ void scale_state_tile(const clcrt::Tile &t, const ScaleArgs &a, ScaleState &s) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= s.alpha;\n"
    "}\n";

/* Line 3 does not parse: the failure path with NVRTC's log. */
static const char *const BROKEN_SRC =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x +;\n"
    "}\n";

typedef struct oom_case {
  const char *what;
  const char *arch;
  clcrt_sched sched;
  clcrt_dim3 cluster;
  const char *source, *tile_fn, *state_type, *prologue_fn;
  clcrt_status final; /* what the registration gives once no allocation fails */
} oom_case;

static const oom_case CASES[] = {
    {"README example, sm_90a, STEAL", "sm_90a", CLCRT_SCHED_STEAL, {1, 1, 1}, NULL, "scale_tile", NULL, NULL,
     CLCRT_OK},
    {"prologue and state, sm_100a, CLC, cluster (2,1,1)", "sm_100a", CLCRT_SCHED_CLC, {2, 1, 1}, NULL,
     "scale_state_tile", "ScaleState", "scale_prologue", CLCRT_OK},
    {"syntax error, sm_90a", "sm_90a", CLCRT_SCHED_FIXED, {1, 1, 1}, NULL, "scale_tile", NULL, NULL, CLCRT_E_COMPILE},
    {"a header from disk, sm_90a, FIXED", "sm_90a", CLCRT_SCHED_FIXED, {1, 1, 1}, NULL, "scale_tile", NULL, NULL,
     CLCRT_OK},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static const char *case_source(int i) {
  return i == 0 ? SCALE_SRC : i == 1 ? STATE_SRC : i == 2 ? BROKEN_SRC : g_hdr_src;
}

/* One attempt with allocation number n failing; returns the registration's status, or
 * the creation's status when creation failed. */
static clcrt_status attempt(int ci, long n, char *msg, size_t msglen) {
  const oom_case *c = &CASES[ci];
  clcrt__alloc_fail_after(n);
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = c->arch;
  o.cache_dir = "";
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  if (st != CLCRT_OK) {
    ck_assert_msg(st == CLCRT_E_NOMEM, "%s, allocation %ld fails: clcrt_runtime_create gave %s, want CLCRT_E_NOMEM: %s",
                  c->what, n, clcrt_status_name(st), rt ? clcrt_errmsg(rt) : "(no handle)");
    if (rt)
      ck_assert_msg(strstr(clcrt_errmsg(rt), "memory"), "%s, allocation %ld fails: message \"%s\"", c->what, n,
                    clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
  } else {
    clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
    d.source = case_source(ci);
    d.tile_fn = c->tile_fn;
    d.args_type = "ScaleArgs";
    d.state_type = c->state_type;
    d.prologue_fn = c->prologue_fn;
    d.block = (clcrt_dim3){128, 1, 1};
    d.cluster = c->cluster;
    d.sched = c->sched;
    clcrt_kernel *k = NULL;
    st = clcrt_register(rt, &d, &k);
    ck_assert_msg(st == c->final || st == CLCRT_E_NOMEM,
                  "%s, allocation %ld fails: clcrt_register gave %s, want %s or CLCRT_E_NOMEM: %s", c->what, n,
                  clcrt_status_name(st), clcrt_status_name(c->final), clcrt_errmsg(rt));
    if (st == CLCRT_E_NOMEM)
      ck_assert_msg(strstr(clcrt_errmsg(rt), "memory"), "%s, allocation %ld fails: message \"%s\"", c->what, n,
                    clcrt_errmsg(rt));
    if (st == CLCRT_OK) {
      ck_assert_ptr_nonnull(k);
      clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
      ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
      ck_assert_int_gt(info.registers, 0);
    } else {
      ck_assert_ptr_null(k);
    }
    /* A compile error whose log could not be copied is still a compile error. */
    if (st == CLCRT_E_COMPILE)
      ck_assert_msg(strstr(clcrt_errmsg(rt), "scale_tile(3)") || strstr(clcrt_errmsg(rt), "(no log)"),
                    "%s, allocation %ld fails: message \"%s\"", c->what, n, clcrt_errmsg(rt));
    snprintf(msg, msglen, "%s", clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
  }
  ck_assert_msg(g_live == 0, "%s, allocation %ld fails: %ld blocks leaked (status %s)", c->what, n, g_live,
                clcrt_status_name(st));
  return st;
}

START_TEST(test_oom) {
  const oom_case *c = &CASES[_i];
  long n, made = 0;
  int nomem = 0;
  for (n = 1; n < 100000; n++) {
    char msg[4096] = "";
    clcrt_status st = attempt(_i, n, msg, sizeof msg);
    made = clcrt__alloc_fail_after(0);
    if (made >= n) {
      /* Allocation n failed: attempt() checked that the result is CLCRT_E_NOMEM (or the
       * compile error the source deserves). */
      nomem += st == CLCRT_E_NOMEM;
      continue;
    }
    /* Nothing failed: the full result, with the full message. */
    ck_assert_msg(st == c->final, "%s: with no allocation failing (%ld made) the result was %s, want %s: %s",
                  c->what, made, clcrt_status_name(st), clcrt_status_name(c->final), msg);
    if (st == CLCRT_E_COMPILE) ck_assert_msg(strstr(msg, "scale_tile(3)"), "%s: message \"%s\"", c->what, msg);
    break;
  }
  ck_assert_msg(n > 1, "%s: no allocation at all?", c->what);
  printf("oom: %s: each of its %ld allocations failed in turn: %d gave CLCRT_E_NOMEM, %ld %s; then %s\n", c->what,
         n - 1, nomem, n - 1 - nomem, c->final == CLCRT_E_COMPILE ? "the compile error without its log" : "other",
         clcrt_status_name(c->final));
  fflush(stdout);
}
END_TEST

/* The hook itself: counts allocations and fails from the Nth on. */
START_TEST(test_hook) {
  clcrt__alloc_fail_after(3);
  void *a = clcrt__malloc(8), *b = clcrt__calloc(2, 8), *c = clcrt__malloc(8), *d = clcrt__realloc(NULL, 8);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_nonnull(b);
  ck_assert_ptr_null(c);
  ck_assert_ptr_null(d);
  ck_assert_ptr_null(clcrt__strdup("x"));
  ck_assert_int_eq(clcrt__alloc_fail_after(0), 5);
  clcrt__free(a);
  clcrt__free(b);
  clcrt__free(NULL);
  ck_assert_int_eq(g_live, 0);
  ck_assert_int_eq(clcrt_replace_allocator(NULL, count_realloc, count_calloc, count_free), CLCRT_E_INVALID);
}
END_TEST

/* The allocator cannot change while blocks of the current one are in use: a runtime created
 * before the swap used to be destroyed with the new free function. Refused with a message
 * while anything is live; allowed again once everything went back. */
START_TEST(test_replace_while_in_use) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = "sm_90a";
  o.cache_dir = "";
  clcrt_runtime *rt = NULL;
  ck_assert_int_eq(clcrt_runtime_create(&rt, &o), CLCRT_OK);
  ck_assert_int_gt(g_live, 0);
  ck_assert_int_eq(clcrt_replace_allocator(malloc, realloc, calloc, free), CLCRT_E_BUSY);
  ck_assert_msg(strstr(clcrt_errmsg(NULL), "still in use") && strstr(clcrt_errmsg(NULL), "before any other"), "%s",
                clcrt_errmsg(NULL));
  clcrt_runtime_destroy(rt); /* freed by count_free: g_live would go wrong otherwise */
  clcrt__err_forget(NULL);   /* the message above is a block too */
  ck_assert_int_eq(g_live, 0);
  ck_assert_int_eq(clcrt_replace_allocator(count_malloc, count_realloc, count_calloc, count_free), CLCRT_OK);
}
END_TEST

static Suite *oom_suite(void) {
  Suite *s = suite_create("oom");
  TCase *tc = tcase_create("oom");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_hook);
  tcase_add_test(tc, test_replace_while_in_use);
  tcase_add_loop_test(tc, test_oom, 0, NCASES);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(oom_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
