/* Background builds of kernel variants (builder.h).
 *
 * Why a thread of the runtime's own rather than libuv's pool: the builds must be cancellable
 * and joined by clcrt_runtime_destroy whether or not the caller runs a libuv loop, and a run
 * must be able to ask for one from any thread without a loop. One thread per runtime is
 * enough: the builds a program needs are few (a handful of variants per kernel, each asked
 * for once), and one NVRTC at a time keeps them from taking the caller's cores.
 *
 * The queue is intrusive: registered kernels linked through their variants' table
 * (variants.h: next_queued), each with the bits of the variants still to build, so that
 * asking allocates nothing. The worker builds with no lock held (clcrt__kernel_variant: a
 * compile like a registration, found in the memory and disk caches like one, published in the
 * kernel's table when loaded).
 *
 * A run that asks (launch.c) takes the builder's lock for a few stores and does not wake the
 * worker: waking a sleeping thread is a system call that cost 2-8 us on the build machine
 * (pthread_cond_signal, measured), as much as the launch itself, and the point is that the
 * first run in a new situation costs what the later ones do. The idle worker looks at its
 * queue every IDLE_POLL_MS instead: a build starts at most that much later (against the
 * 100-200 ms it takes), for an idle cost of a few microseconds of CPU per poll. Every other
 * caller (stream creation, tracing enabled, registration) wakes it.
 *
 * A process forked after the thread started has no worker (threads do not survive fork):
 * the first request in the child starts one there.
 *
 * A process may exit with a build running (a program that returns from main without destroying
 * its runtime, an interpreter shutting down, a forked test child): NVRTC's static objects are
 * then torn down under the compile, which crashed in nvrtcCompileProgram (seen in the test
 * suites' forked children). An exit handler, registered when the first builder is made, stops
 * every builder of the process before what was registered earlier is torn down (exit handlers
 * run last-registered first; NVRTC's static objects are made when it loads, or by a compile
 * before then: a device runtime's warm-up, a registration): queued builds are dropped and the
 * running one finishes, so exit waits for at most one build. */
#include "builder.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "variants.h"

#define IDLE_POLL_MS 20

struct clcrt__builder {
  pthread_mutex_t lock;
  pthread_cond_t work;  /* something queued, or stop */
  pthread_cond_t idle;  /* the queue emptied and no build runs */
  pthread_t thread;
  unsigned forks;       /* the fork generation this state belongs to (after_fork) */
  int running;          /* the thread was started and not yet joined */
  int stop;
  int busy;             /* a build is running */
  clcrt_kernel *head, *tail;
  struct clcrt__builder *next_live; /* g_live, guarded by g_live_lock */
};

/* Every builder of the process, for the exit handler. Lock order: g_live_lock, then a
 * builder's lock. */
static pthread_mutex_t g_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct clcrt__builder *g_live;

static void *worker(void *arg) {
  clcrt_runtime *rt = arg;
  struct clcrt__builder *b = rt->builder;
  /* Builds load modules and set attributes while the caller's threads may be capturing graphs,
   * in the global mode too, which forbids potentially unsafe calls on every thread that does
   * not say otherwise: this one does (its calls are never part of a capture). */
  if (rt->cu && rt->cu->cuThreadExchangeStreamCaptureMode) {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    (void)rt->cu->cuThreadExchangeStreamCaptureMode(&mode);
  }
  pthread_mutex_lock(&b->lock);
  for (;;) {
    while (!b->stop && !b->head) {
      if (b->busy) {
        b->busy = 0;
        pthread_cond_broadcast(&b->idle);
      }
      struct timespec t;
      clock_gettime(CLOCK_MONOTONIC, &t);
      t.tv_nsec += IDLE_POLL_MS * 1000000L;
      if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&b->work, &b->lock, &t);
    }
    if (b->stop) break;
    clcrt_kernel *k0 = b->head;
    clcrt__variants *vs = k0->vars;
    b->head = vs->next_queued;
    if (!b->head) b->tail = NULL;
    vs->next_queued = NULL;
    vs->queued = 0;
    unsigned bits = vs->pending;
    vs->pending = 0;
    b->busy = 1;
    pthread_mutex_unlock(&b->lock);
    for (unsigned v = 1; v < CLCRT__VARIANTS && bits; v++) {
      if (!(bits & (1u << v))) continue;
      bits &= ~(1u << v);
      if (__atomic_load_n(&b->stop, __ATOMIC_RELAXED)) break;
      clcrt_kernel *o = NULL;
      double t0 = clcrt__now_ms();
      clcrt_status st = clcrt__kernel_variant(k0, v, &o);
      if (st != CLCRT_OK) {
        const char *m = clcrt__err_get(rt);
        clcrt__log(rt, CLCRT_LOG_WARN, "background build of variant %u of %s failed (its runs launch a fallback): %s",
                   v, k0->name, m ? m : clcrt_status_str(st));
        clcrt__err_forget(rt);
      } else {
        clcrt__log(rt, CLCRT_LOG_DEBUG, "variant %u of %s built in the background in %.1f ms", v, k0->name,
                   clcrt__now_ms() - t0);
      }
    }
    pthread_mutex_lock(&b->lock);
  }
  b->busy = 0;
  pthread_cond_broadcast(&b->idle);
  pthread_mutex_unlock(&b->lock);
  return NULL;
}

/* The worker's condition times out on the monotonic clock (a change of the wall clock must not
 * stop its polls). */
static int init_work(pthread_cond_t *c) {
  pthread_condattr_t a;
  if (pthread_condattr_init(&a) != 0) return -1;
  int e = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  if (e == 0) e = pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
  return e;
}

/* Called with b->lock held, in the process the builder serves (after_fork). */
static void start_locked(clcrt_runtime *rt, struct clcrt__builder *b) {
  if (b->running) return;
  b->busy = 0;
  int e = pthread_create(&b->thread, NULL, worker, rt);
  if (e != 0) {
    clcrt__log(rt, CLCRT_LOG_WARN,
               "no thread for background builds (pthread_create: error %d): runs that need a variant not built yet "
               "launch a fallback until clcrt_kernel_prepare builds it",
               e);
    return;
  }
  b->running = 1;
}

/* In a child forked after the builder started, only the forking thread exists: the worker is
 * gone, and the lock and conditions may hold state of threads that are not there. Made new
 * for the child, whose first request starts a worker of its own (what was queued stays).
 * Children are told apart by a generation that a fork handler raises (getpid is a system
 * call, which the run that asks must not make). */
static unsigned g_forks;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static void in_child(void) {
  __atomic_add_fetch(&g_forks, 1u, __ATOMIC_RELAXED);
  pthread_mutex_init(&g_live_lock, NULL); /* another thread may have held it at the fork */
}
static void at_exit(void);
static void atfork_init(void) {
  (void)pthread_atfork(NULL, NULL, in_child);
  (void)atexit(at_exit);
}

static void after_fork(struct clcrt__builder *b, unsigned forks) {
  pthread_mutex_init(&b->lock, NULL);
  init_work(&b->work);
  pthread_cond_init(&b->idle, NULL);
  b->running = b->busy = 0;
  b->forks = forks;
}

/* b, made new first when this is a forked child of the process it was made in. */
static struct clcrt__builder *here(struct clcrt__builder *b) {
  if (b) {
    unsigned forks = __atomic_load_n(&g_forks, __ATOMIC_RELAXED);
    if (b->forks != forks) after_fork(b, forks);
  }
  return b;
}

/* The runtime's builder, made new first in a forked child. */
static struct clcrt__builder *builder_here(clcrt_runtime *rt) {
  return here(__atomic_load_n(&rt->builder, __ATOMIC_ACQUIRE));
}

/* Stops b's worker: the builds still queued are dropped, the one running finishes (NVRTC
 * cannot be interrupted), the thread is joined. No request is taken afterwards. */
static void stop_worker(struct clcrt__builder *b) {
  pthread_mutex_lock(&b->lock);
  __atomic_store_n(&b->stop, 1, __ATOMIC_RELAXED); /* the worker reads it between builds, unlocked */
  for (clcrt_kernel *k = b->head, *next; k; k = next) {
    next = k->vars->next_queued;
    k->vars->next_queued = NULL, k->vars->queued = 0, k->vars->pending = 0;
  }
  b->head = b->tail = NULL;
  pthread_cond_signal(&b->work);
  int join = b->running;
  b->running = 0;
  pthread_mutex_unlock(&b->lock);
  if (join) pthread_join(b->thread, NULL);
}

/* Before the process's static objects (NVRTC's among them) are torn down: no build runs on. */
static void at_exit(void) {
  pthread_mutex_lock(&g_live_lock);
  for (struct clcrt__builder *b = g_live; b; b = b->next_live) stop_worker(here(b));
  pthread_mutex_unlock(&g_live_lock);
}

void clcrt__builder_start(clcrt_runtime *rt) {
  pthread_once(&g_atfork_once, atfork_init);
  pthread_mutex_lock(&rt->lock);
  struct clcrt__builder *b = rt->builder;
  if (!b && (b = clcrt__calloc(1, sizeof *b)) != NULL) {
    int ok = pthread_mutex_init(&b->lock, NULL) == 0;
    if (ok && init_work(&b->work) != 0) pthread_mutex_destroy(&b->lock), ok = 0;
    if (ok && pthread_cond_init(&b->idle, NULL) != 0)
      pthread_cond_destroy(&b->work), pthread_mutex_destroy(&b->lock), ok = 0;
    b->forks = __atomic_load_n(&g_forks, __ATOMIC_RELAXED);
    if (ok) {
      pthread_mutex_lock(&g_live_lock);
      b->next_live = g_live;
      g_live = b;
      pthread_mutex_unlock(&g_live_lock);
      __atomic_store_n(&rt->builder, b, __ATOMIC_RELEASE);
    } else {
      clcrt__free(b), b = NULL;
    }
  }
  pthread_mutex_unlock(&rt->lock);
  if (!b) {
    clcrt__log(rt, CLCRT_LOG_WARN, "out of memory for the background builder: runs launch fallbacks for variants");
    return;
  }
  b = builder_here(rt);
  pthread_mutex_lock(&b->lock);
  start_locked(rt, b);
  pthread_mutex_unlock(&b->lock);
}

void clcrt__builder_request(const clcrt_kernel *k0, unsigned v, int wake) {
  clcrt__variants *vs = k0->vars;
  const unsigned bit = 1u << v;
  if (__atomic_load_n(&vs->requested, __ATOMIC_RELAXED) & bit) return;
  if (__atomic_fetch_or(&vs->requested, bit, __ATOMIC_RELAXED) & bit) return; /* another thread asked first */
  clcrt_runtime *rt = k0->rt;
  struct clcrt__builder *b = builder_here(rt);
  if (!b) { /* no stream yet (runs need one): a later request may find a builder */
    __atomic_and_fetch(&vs->requested, ~bit, __ATOMIC_RELAXED);
    return;
  }
  pthread_mutex_lock(&b->lock);
  if (!b->stop) {
    start_locked(rt, b);
    vs->pending |= bit;
    if (!vs->queued) {
      vs->queued = 1;
      vs->next_queued = NULL;
      if (b->tail)
        b->tail->vars->next_queued = k0->base;
      else
        b->head = k0->base;
      b->tail = k0->base;
    }
    if (wake) pthread_cond_signal(&b->work);
  }
  pthread_mutex_unlock(&b->lock);
}

typedef struct {
  unsigned v;
} all_ctx;
static clcrt_status request_one(const clcrt_kernel *k, void *arg) {
  unsigned v = ((all_ctx *)arg)->v;
  if (clcrt__variant_bits(k->sched, v) != v) return CLCRT_OK;
  if ((v & CLCRT_USE_PREEMPT) && k->grid == CLCRT_GRID_PERSISTENT) return CLCRT_OK;
  if (!((__atomic_load_n(&k->vars->ready, __ATOMIC_ACQUIRE) >> v) & 1u)) clcrt__builder_request(k, v, 1);
  return CLCRT_OK;
}
void clcrt__builder_request_all(clcrt_runtime *rt, unsigned v) {
  all_ctx c = {v};
  (void)clcrt__registered_each(rt, request_one, &c);
}

void clcrt__builder_wait(clcrt_runtime *rt) {
  struct clcrt__builder *b = builder_here(rt);
  if (!b) return;
  pthread_mutex_lock(&b->lock);
  if (b->head) pthread_cond_signal(&b->work); /* queued by a run, which does not wake it */
  while (b->running && (b->head || b->busy)) pthread_cond_wait(&b->idle, &b->lock);
  pthread_mutex_unlock(&b->lock);
}

void clcrt__builder_stop(clcrt_runtime *rt) {
  /* Under g_live_lock throughout, so that the exit handler never joins this worker too. */
  pthread_mutex_lock(&g_live_lock);
  struct clcrt__builder *b = builder_here(rt);
  if (!b) {
    pthread_mutex_unlock(&g_live_lock);
    return;
  }
  for (struct clcrt__builder **p = &g_live; *p; p = &(*p)->next_live)
    if (*p == b) {
      *p = b->next_live;
      break;
    }
  /* What is still queued is dropped: the kernels are about to be freed. */
  stop_worker(b);
  pthread_mutex_unlock(&g_live_lock);
  pthread_cond_destroy(&b->idle);
  pthread_cond_destroy(&b->work);
  pthread_mutex_destroy(&b->lock);
  clcrt__free(b);
  rt->builder = NULL;
}
