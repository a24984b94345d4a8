/* Failure messages: the last failure per thread and per runtime, like cudaGetLastError.
 *
 * A message used to live in one buffer on the runtime, which any thread's failure
 * overwrote: two threads failing at once read each other's messages, or a torn one. Now
 * every thread keeps its own small table, so a failure on thread A never changes what
 * thread B reads, and no lock is needed to write or read a message.
 *
 *   - Entries are keyed by the runtime's id (rt->err_id), a process-wide counter that
 *     never repeats, not by its address: a runtime created after another was destroyed
 *     often gets the same address, and must not inherit the old messages.
 *   - A thread keeps at most SLOTS runtimes; a failure on one more reuses the slot used
 *     least recently, so a long-lived thread that creates many runtimes stays bounded.
 *     A runtime whose slot was reused reads "no error" on that thread.
 *   - Calls that take no runtime (clcrt_runtime_create before it has a handle, the trace
 *     functions) record theirs in one more slot, read by clcrt_errmsg(NULL).
 *   - A message of up to INLINE_BYTES lives in the slot; a longer one (an NVRTC log) in a
 *     buffer allocated once for the slot and grown as needed, at most CLCRT__ERRMSG_MAX
 *     bytes, truncated with "... (truncated)" beyond that.
 *   - Nothing here fails: when the thread's table or a long message's buffer cannot be
 *     allocated, the message is cut to what fits (in the slot, or in a small static
 *     per-thread buffer when there is no table), never dropped in favour of a crash.
 *   - The table is freed at thread exit (a pthread key destructor), and as soon as it
 *     holds nothing: clcrt_runtime_destroy forgets the calling thread's entry for the
 *     runtime, so a program that creates, fails and destroys runtimes on one thread
 *     holds no memory afterwards. Other threads' entries for a destroyed runtime stay
 *     until those threads exit or reuse the slot; their id can never match again.
 *
 * The string clcrt_errmsg returns belongs to the calling thread. It stays valid until the
 * next failure on that thread with the same runtime, until the runtime is destroyed on
 * that thread, or until the thread exits. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define SLOTS 8
#define INLINE_BYTES 256
#define TRUNCATED "... (truncated)"

typedef struct err_slot {
  uint64_t id;              /* the runtime's err_id (0 for the slot of calls without one) */
  uint64_t used;            /* the thread's clock at the last failure: least recently used goes first */
  const char *text;         /* NULL: empty; else inline_ or heap */
  char *heap;               /* a long message's buffer, heap_cap bytes */
  size_t heap_cap;
  char inline_[INLINE_BYTES];
} err_slot;

typedef struct err_table {
  err_slot slot[SLOTS];
  err_slot none;            /* failures of calls that take no runtime */
  uint64_t clock;
} err_table;

static __thread err_table *t_table;

/* Where a message goes when the thread has no table (its allocation failed, or no key
 * for the destructor could be had): cut to INLINE_BYTES, one runtime at a time. */
static __thread struct {
  uint64_t id;
  int set;
  char text[INLINE_BYTES];
} t_fallback;

static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static int g_key_ok;

static void table_free(err_table *t) {
  for (int i = 0; i < SLOTS; i++) clcrt__free(t->slot[i].heap);
  clcrt__free(t->none.heap);
  clcrt__free(t);
}

/* Runs at thread exit, while the thread's TLS is still there (glibc frees it later). */
static void thread_exit(void *p) {
  err_table *t = p;
  if (t == t_table) t_table = NULL;
  table_free(t);
}

static void key_init(void) { g_key_ok = pthread_key_create(&g_key, thread_exit) == 0; }

/* If the library is unloaded (dlclose) the key's destructor would point at unmapped code
 * in every thread that still has a table: delete the key first. Those tables are then
 * lost, as is the rest of an unloaded library's memory. */
__attribute__((destructor)) static void key_fini(void) {
  if (g_key_ok) {
    g_key_ok = 0;
    pthread_key_delete(g_key);
  }
}

static void slot_clear(err_slot *s) {
  clcrt__free(s->heap);
  memset(s, 0, sizeof *s);
}

static err_slot *find(err_table *t, uint64_t id) {
  if (!t) return NULL;
  if (id == 0) return t->none.text ? &t->none : NULL;
  for (int i = 0; i < SLOTS; i++)
    if (t->slot[i].text && t->slot[i].id == id) return &t->slot[i];
  return NULL;
}

/* The slot to write id's message in: its own, else a free one, else the least recently
 * used (its buffer is kept for the new message). */
static err_slot *claim(err_table *t, uint64_t id) {
  if (id == 0) return &t->none;
  err_slot *s = find(t, id), *lru = &t->slot[0];
  for (int i = 0; !s && i < SLOTS; i++) {
    if (!t->slot[i].text) s = &t->slot[i];
    else if (t->slot[i].used < lru->used) lru = &t->slot[i];
  }
  return s ? s : lru;
}

/* The calling thread's table, allocated on its first failure; NULL when that is not
 * possible (then the fallback buffer is used). */
static err_table *table_get(void) {
  if (t_table) return t_table;
  pthread_once(&g_key_once, key_init);
  if (!g_key_ok) return NULL; /* without the destructor a table would leak at thread exit */
  err_table *t = clcrt__calloc(1, sizeof *t);
  if (!t) return NULL;
  if (pthread_setspecific(g_key, t) != 0) {
    clcrt__free(t);
    return NULL;
  }
  t_table = t;
  if (t_fallback.set) {
    /* A message written while there was no table moves in, so it is not lost. */
    err_slot *s = claim(t, t_fallback.id);
    s->id = t_fallback.id;
    s->used = ++t->clock;
    memcpy(s->inline_, t_fallback.text, sizeof s->inline_);
    s->text = s->inline_;
    t_fallback.set = 0;
  }
  return t;
}

static void mark_truncated(char *buf, size_t size) {
  if (size > sizeof TRUNCATED) memcpy(buf + size - sizeof TRUNCATED, TRUNCATED, sizeof TRUNCATED);
}

static void record(uint64_t id, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  err_table *t = table_get();
  if (!t) {
    /* A message for another runtime is replaced: the fallback holds one at a time. */
    int n = vsnprintf(t_fallback.text, sizeof t_fallback.text, fmt, ap);
    if (n >= (int)sizeof t_fallback.text) mark_truncated(t_fallback.text, sizeof t_fallback.text);
    t_fallback.id = id;
    t_fallback.set = 1;
    va_end(ap2);
    return;
  }
  if (t_fallback.set && t_fallback.id == id) t_fallback.set = 0;
  err_slot *s = claim(t, id);
  s->id = id;
  s->used = ++t->clock;
  int n = vsnprintf(s->inline_, sizeof s->inline_, fmt, ap);
  s->text = s->inline_;
  if (n < 0) {
    snprintf(s->inline_, sizeof s->inline_, "(the message could not be formatted)");
  } else if ((size_t)n >= sizeof s->inline_) {
    size_t need = (size_t)n + 1 > CLCRT__ERRMSG_MAX ? CLCRT__ERRMSG_MAX : (size_t)n + 1;
    if (s->heap_cap < need) {
      char *p = clcrt__malloc(need);
      if (p) {
        clcrt__free(s->heap);
        s->heap = p;
        s->heap_cap = need;
      }
    }
    if (s->heap_cap >= need) {
      vsnprintf(s->heap, need, fmt, ap2);
      if ((size_t)n + 1 > need) mark_truncated(s->heap, need);
      s->text = s->heap;
    } else {
      mark_truncated(s->inline_, sizeof s->inline_); /* no memory for the whole message */
    }
  }
  va_end(ap2);
}

clcrt_status clcrt__vfail(clcrt_runtime *rt, clcrt_status st, const char *fmt, va_list ap) {
  record(rt ? rt->err_id : 0, fmt, ap);
  return st;
}

clcrt_status clcrt__fail(clcrt_runtime *rt, clcrt_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(rt ? rt->err_id : 0, fmt, ap);
  va_end(ap);
  return st;
}

clcrt_status clcrt__fail_norts(clcrt_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(0, fmt, ap);
  va_end(ap);
  return st;
}

uint64_t clcrt__err_new_id(void) {
  static uint64_t g_next;
  return __atomic_add_fetch(&g_next, 1, __ATOMIC_RELAXED);
}

const char *clcrt__err_get(const clcrt_runtime *rt) {
  uint64_t id = rt ? rt->err_id : 0;
  err_slot *s = find(t_table, id);
  if (s) return s->text;
  if (t_fallback.set && t_fallback.id == id) return t_fallback.text;
  return NULL;
}

void clcrt__err_forget(const clcrt_runtime *rt) {
  uint64_t id = rt ? rt->err_id : 0;
  if (t_fallback.set && t_fallback.id == id) t_fallback.set = 0;
  err_table *t = t_table;
  err_slot *s = find(t, id);
  if (!s) return;
  slot_clear(s);
  /* An empty table is freed at once rather than at thread exit. */
  if (t->none.text) return;
  for (int i = 0; i < SLOTS; i++)
    if (t->slot[i].text) return;
  t_table = NULL;
  pthread_setspecific(g_key, NULL);
  table_free(t);
}

clcrt_status clcrt_errmsg_set(const clcrt_runtime *rt, clcrt_status st, const char *fmt, ...) {
  if (!fmt) return st;
  va_list ap;
  va_start(ap, fmt);
  record(rt ? rt->err_id : 0, fmt, ap);
  va_end(ap);
  return st;
}

const char *clcrt_errmsg(const clcrt_runtime *rt) {
  const char *m = clcrt__err_get(rt);
  if (m) return m;
  return rt ? "no error" : "no runtime (NULL handle)";
}
