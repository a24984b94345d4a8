#include "alloc.h"

#include <stdlib.h>
#include <string.h>

#include "clcrt.h"

static clcrt_malloc_fn g_malloc = malloc;
static clcrt_realloc_fn g_realloc = realloc;
static clcrt_calloc_fn g_calloc = calloc;
static clcrt_free_fn g_free = free;

/* The failure-injection counter is process-wide and only meant for single-threaded tests;
 * atomics keep it well-defined if a test does use threads. */
static long g_fail_at;
static long g_count;

static int should_fail(void) {
  long c = __atomic_add_fetch(&g_count, 1, __ATOMIC_RELAXED);
  long f = __atomic_load_n(&g_fail_at, __ATOMIC_RELAXED);
  return f > 0 && c >= f;
}

long clcrt__alloc_fail_after(long n) {
  long c = __atomic_exchange_n(&g_count, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&g_fail_at, n, __ATOMIC_RELAXED);
  return c;
}

/* Blocks the current allocator has handed out and clcrt has not yet given back. Replacing
 * the allocator while any is live would hand them to the new free function: a runtime
 * created before the swap used to be destroyed with the wrong allocator. */
static long g_live;

long clcrt__alloc_live(void) { return __atomic_load_n(&g_live, __ATOMIC_ACQUIRE); }

void clcrt__alloc_set(clcrt_malloc_fn m, clcrt_realloc_fn r, clcrt_calloc_fn c, clcrt_free_fn f) {
  g_malloc = m;
  g_realloc = r;
  g_calloc = c;
  g_free = f;
}

static void *counted(void *p) {
  if (p) __atomic_add_fetch(&g_live, 1, __ATOMIC_RELAXED);
  return p;
}

void *clcrt__malloc(size_t n) { return should_fail() ? NULL : counted(g_malloc(n ? n : 1)); }
void *clcrt__calloc(size_t count, size_t n) {
  return should_fail() ? NULL : counted(g_calloc(count ? count : 1, n ? n : 1));
}
void *clcrt__realloc(void *p, size_t n) {
  if (should_fail()) return NULL;
  void *q = g_realloc(p, n ? n : 1);
  return p ? q : counted(q); /* growing a live block makes no new one */
}
void clcrt__free(void *p) {
  if (!p) return;
  __atomic_sub_fetch(&g_live, 1, __ATOMIC_RELAXED);
  g_free(p);
}
char *clcrt__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = clcrt__malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}
