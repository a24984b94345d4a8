/* Asynchrony with libuv: compiles on the loop's thread pool, completions on the loop.
 *
 * clcrt_register_async queues the blocking clcrt_register on libuv's thread pool
 * (uv_queue_work) with a deep copy of the description, so the caller's strings may go
 * away as soon as it returns. How many compiles run at once is the pool's size
 * (UV_THREADPOOL_SIZE, default 4); how many NVRTC instances run at once is bounded by the
 * core count in compile.c. The result is delivered by the after-work callback, on the
 * loop's thread.
 *
 * clcrt_runtime_destroy waits for compiles that are running (NVRTC cannot be stopped), never
 * for one still queued nor for a loop that may not be running: every request of the
 * runtime not yet delivered is orphaned, and its callback gets CLCRT_E_CANCELLED with no
 * kernel. A callback therefore never receives a kernel that was freed with its runtime.
 *
 * clcrt_run_notify enqueues a host function on the stream (cuLaunchHostFunc) that only
 * calls uv_async_send: host functions run on a driver thread that must not call CUDA and
 * should not be held up, and uv_async_send is the one libuv call that is safe from any
 * thread. The callback then runs on the loop. Each notification has its own uv_async_t,
 * so signals are never coalesced into one.
 *
 * After a device fault the driver does not run the host functions queued behind it, so
 * a notification would never come and its handle would keep the loop alive for ever.
 * The stream fails such notifications with clcrt__notify_fail (async.h) when it sees
 * the error: in clcrt_stream_sync and clcrt_stream_destroy. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "async.h"
#include "checks.h"
#include "internal.h"

/* ---- asynchronous registration ----------------------------------------------------- */

/* A request lives from clcrt_register_async until its callback has run on the loop, and
 * may outlive its runtime: clcrt_runtime_destroy orphans every request of the runtime
 * that has not been delivered yet (clcrt__async_orphan). An orphaned request never
 * touches the runtime again: if its work had not started it compiles nothing, and its
 * callback gets CLCRT_E_CANCELLED with no kernel (the runtime's kernels are gone). The
 * fields below `lock` are guarded by g_req_lock, which is not the runtime's, so that the
 * pool thread and the loop can look at a request whose runtime is gone. */
typedef struct reg_req {
  uv_work_t work;
  clcrt_tile_desc *desc; /* a deep copy (clcrt__desc_dup) */
  clcrt_register_cb cb;
  void *user;
  clcrt_status st;
  clcrt_kernel *k;
  char *errmsg;
  /* lock: g_req_lock */
  clcrt_runtime *rt;            /* NULL once orphaned */
  int running;                  /* the work is compiling with rt: destroy waits for it */
  struct reg_req *prev, *next;  /* g_reqs: not yet delivered */
} reg_req;

static pthread_mutex_t g_req_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_req_cond = PTHREAD_COND_INITIALIZER; /* a request stopped running */
static reg_req *g_reqs;

static void req_unlist(reg_req *r) {
  if (r->prev) r->prev->next = r->next;
  else if (g_reqs == r) g_reqs = r->next;
  if (r->next) r->next->prev = r->prev;
  r->prev = r->next = NULL;
}

void clcrt__async_orphan(clcrt_runtime *rt) {
  pthread_mutex_lock(&g_req_lock);
  for (;;) {
    int running = 0;
    for (reg_req *r = g_reqs; r; r = r->next) {
      if (r->rt != rt) continue;
      if (r->running) running = 1;
      else r->rt = NULL; /* not started, or done: it will never touch rt */
    }
    if (!running) break;
    /* A compile in progress holds rt; NVRTC cannot be interrupted. */
    pthread_cond_wait(&g_req_cond, &g_req_lock);
  }
  pthread_mutex_unlock(&g_req_lock);
}

static void reg_work(uv_work_t *w) {
  reg_req *r = w->data;
  pthread_mutex_lock(&g_req_lock);
  clcrt_runtime *rt = r->rt;
  r->running = rt != NULL;
  pthread_mutex_unlock(&g_req_lock);
  if (!rt) return; /* orphaned before it started: nothing to compile for */
  r->st = clcrt_register(rt, r->desc, &r->k);
  /* Messages are per thread: this is the pool thread's own, which no other compile can
   * overwrite. It is copied for the loop's thread and then dropped (also after a success,
   * which may have recovered from a failure on the way), so that the pool thread holds
   * nothing for a runtime that may be destroyed next. */
  if (r->st != CLCRT_OK) {
    const char *m = clcrt__err_get(rt);
    r->errmsg = clcrt__strdup(m ? m : clcrt_status_str(r->st));
  }
  clcrt__err_forget(rt);
  pthread_mutex_lock(&g_req_lock);
  r->running = 0;
  pthread_cond_broadcast(&g_req_cond);
  pthread_mutex_unlock(&g_req_lock); /* after this the request never touches rt again */
}

static void reg_after(uv_work_t *w, int status) {
  reg_req *r = w->data;
  pthread_mutex_lock(&g_req_lock);
  int orphaned = r->rt == NULL;
  req_unlist(r);
  pthread_mutex_unlock(&g_req_lock);
  const char *msg = NULL;
  if (orphaned) {
    r->st = CLCRT_E_CANCELLED;
    msg = "the runtime was destroyed before this compile was delivered: its kernels went with it (destroy the "
          "runtime only after the callbacks of its asynchronous compiles have run)";
  } else if (status == UV_ECANCELED) {
    r->st = CLCRT_E_BUSY;
    msg = "the compile was cancelled before it started";
  } else if (r->st != CLCRT_OK) {
    msg = r->errmsg ? r->errmsg : clcrt_status_str(r->st);
  }
  r->cb(r->user, r->st, r->st == CLCRT_OK ? r->k : NULL, msg);
  clcrt__free(r->errmsg);
  clcrt__free(r->desc);
  clcrt__free(r);
}

clcrt_status clcrt_register_async(clcrt_runtime *rt, const clcrt_tile_desc *d, uv_loop_t *loop,
                                  clcrt_register_cb cb, void *user) {
  if (!rt) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_register_async: the runtime is NULL");
  if (!d || !loop || !cb)
    return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_register_async: %s is NULL",
                       !d ? "the tile descriptor" : !loop ? "the loop" : "the callback");
  if (d->size < offsetof(clcrt_tile_desc, num_options) + sizeof d->num_options || d->size > sizeof(clcrt_tile_desc))
    return clcrt__fail(rt, CLCRT_E_INVALID, "desc->size is %zu: initialise the descriptor with CLCRT_TILE_DESC_INIT",
                       d->size);
  /* A shorter (older) descriptor: the fields it lacks keep their defaults. */
  clcrt_tile_desc full = CLCRT_TILE_DESC_INIT;
  memcpy(&full, d, d->size);
  full.size = sizeof full;
  if (full.num_options < 0 || (full.num_options > 0 && !full.options))
    return clcrt__fail(rt, CLCRT_E_INVALID, "desc->options/num_options: %d options at %p", full.num_options,
                       (const void *)full.options);
  for (int i = 0; i < full.num_options; i++)
    if (!full.options[i]) return clcrt__fail(rt, CLCRT_E_INVALID, "desc->options[%d] is NULL", i);

  reg_req *r = clcrt__calloc(1, sizeof *r);
  if (r && !(r->desc = clcrt__desc_dup(&full))) clcrt__free(r), r = NULL;
  if (!r) return clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory queueing an asynchronous compile");
  r->rt = rt;
  r->cb = cb;
  r->user = user;
  r->work.data = r;
  /* Listed before it is queued: the work may start on a pool thread at once. */
  pthread_mutex_lock(&g_req_lock);
  r->next = g_reqs;
  if (g_reqs) g_reqs->prev = r;
  g_reqs = r;
  pthread_mutex_unlock(&g_req_lock);
  int e = uv_queue_work(loop, &r->work, reg_work, reg_after);
  if (e != 0) {
    pthread_mutex_lock(&g_req_lock);
    req_unlist(r);
    pthread_mutex_unlock(&g_req_lock);
    clcrt__free(r->desc);
    clcrt__free(r);
    return clcrt__fail(rt, CLCRT_E_INVALID, "uv_queue_work failed with %s: %s", uv_err_name(e), uv_strerror(e));
  }
  return CLCRT_OK;
}

/* ---- completions on a loop ---------------------------------------------------------- */

/* A notification is shared by the driver's thread (the host function) and the loop (the
 * handle), and after a device fault the host function never runs at all (measured on an
 * H100, driver 580). Pending notifications are therefore listed, so that the stream can
 * fail them (clcrt__notify_fail), and each is freed by whichever side finishes last. */
typedef struct notify_req {
  uv_async_t async;
  clcrt_notify_cb cb;
  void *user;
  const clcrt_stream *stream;
  clcrt_status st;
  struct notify_req *prev, *next; /* the pending list, while listed */
  int listed, host_pending, closed;
} notify_req;

static pthread_mutex_t g_notify_lock = PTHREAD_MUTEX_INITIALIZER;
static notify_req *g_pending;

static void unlist(notify_req *n) {
  if (n->prev) n->prev->next = n->next;
  else g_pending = n->next;
  if (n->next) n->next->prev = n->prev;
  n->prev = n->next = NULL;
  n->listed = 0;
}

static void notify_closed(uv_handle_t *h) {
  notify_req *n = h->data;
  pthread_mutex_lock(&g_notify_lock);
  n->closed = 1;
  int free_now = !n->host_pending;
  pthread_mutex_unlock(&g_notify_lock);
  if (free_now) clcrt__free(n);
}

static void notify_fired(uv_async_t *a) {
  notify_req *n = a->data;
  n->cb(n->user, n->st);
  uv_close((uv_handle_t *)&n->async, notify_closed);
}

/* Runs on the driver's thread once the stream reaches it: a signal, nothing else. Exactly
 * one of this and clcrt__notify_fail sends, whichever takes the notification off the list. */
static void CUDA_CB notify_host(void *p) {
  notify_req *n = p;
  pthread_mutex_lock(&g_notify_lock);
  n->host_pending = 0;
  int send = n->listed, free_now = !n->listed && n->closed;
  if (send) unlist(n);
  if (send) uv_async_send(&n->async);
  pthread_mutex_unlock(&g_notify_lock);
  if (free_now) clcrt__free(n);
}

void clcrt__notify_fail(const clcrt_stream *s, clcrt_status st) {
  pthread_mutex_lock(&g_notify_lock);
  for (notify_req *n = g_pending, *next; n; n = next) {
    next = n->next;
    if (n->stream != s) continue;
    unlist(n);
    n->st = st;
    uv_async_send(&n->async);
  }
  pthread_mutex_unlock(&g_notify_lock);
}

static clcrt_status notify_entered(clcrt_runtime *rt, clcrt_stream *s, uv_loop_t *loop, clcrt_notify_cb cb,
                                   void *user);

clcrt_status clcrt_run_notify(clcrt_stream *s, uv_loop_t *loop, clcrt_notify_cb cb, void *user) {
  clcrt_runtime *rt = clcrt__stream_runtime(s);
  if (!rt) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_run_notify: the stream is NULL");
  if (!loop || !cb)
    return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_run_notify: %s is NULL", !loop ? "the loop" : "the callback");
  if (!rt->cu) return clcrt__fail(rt, CLCRT_E_UNSUPPORTED, "clcrt_run_notify: the runtime only compiles");
  clcrt__ctx_saved sv;
  clcrt_status st = clcrt__ctx_push(rt, &sv);
  if (st != CLCRT_OK) return st;
  st = notify_entered(rt, s, loop, cb, user);
  clcrt__ctx_leave(rt, &sv);
  return st;
}

/* clcrt_run_notify in the runtime's context. */
static clcrt_status notify_entered(clcrt_runtime *rt, clcrt_stream *s, uv_loop_t *loop, clcrt_notify_cb cb,
                                   void *user) {
  CUstream cs = clcrt_stream_cu(s);
  /* In a graph the host function would run on every replay, long after the one-shot
   * handle is gone. Notification belongs to the replay, not to the capture. */
  CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
  CU_CHECK(rt, cuStreamGetCaptureInfo(cs, &cap, NULL, NULL, NULL, NULL, NULL));
  if (cap != CU_STREAM_CAPTURE_STATUS_NONE)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "clcrt_run_notify: the stream is being captured into a graph; call it on the stream the graph "
                       "is launched on");

  notify_req *n = clcrt__calloc(1, sizeof *n);
  if (!n) return clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory for a notification");
  n->cb = cb;
  n->user = user;
  int e = uv_async_init(loop, &n->async, notify_fired);
  if (e != 0) {
    clcrt__free(n);
    return clcrt__fail(rt, CLCRT_E_INVALID, "uv_async_init failed with %s: %s", uv_err_name(e), uv_strerror(e));
  }
  n->async.data = n;
  n->stream = s;
  n->st = CLCRT_OK;
  /* Listed before the launch: the host function may run before cuLaunchHostFunc returns. */
  pthread_mutex_lock(&g_notify_lock);
  n->listed = n->host_pending = 1;
  n->next = g_pending;
  if (g_pending) g_pending->prev = n;
  g_pending = n;
  pthread_mutex_unlock(&g_notify_lock);
  CUresult r = rt->cu->cuLaunchHostFunc(cs, notify_host, n);
  if (r != CUDA_SUCCESS) {
    pthread_mutex_lock(&g_notify_lock);
    unlist(n);
    n->host_pending = 0;
    pthread_mutex_unlock(&g_notify_lock);
    uv_close((uv_handle_t *)&n->async, notify_closed); /* freed on the loop; cb never runs */
    return CLCRT__CU_FAIL(rt, r, cuLaunchHostFunc(cs, notify_host, n));
  }
  return CLCRT_OK;
}
