/* NVRTC warm-up: the first compile in a process pays for work that later compiles do not.
 *
 * Measured on the 2-core build machine (NVRTC 13.0, README example, STEAL, sm_90a; see
 * docs/results.md, "Compile, first runs, background builds", for the table): the first compile in a fresh process
 * takes about 10 ms more than the next ones with the libraries in the page cache, and
 * 20-30 ms more when libnvrtc and libnvrtc-builtins must first be read from disk. That
 * one-time part is: NVRTC loading libnvrtc-builtins (and libstdc++), its initialisation,
 * and the first touches of the front end's, the optimizer's and ptxas' code pages and of
 * a fresh heap. An empty kernel pays most of it (about 25-30 ms here).
 *
 * Creating a device runtime spends tens to hundreds of milliseconds in the driver
 * (cuInit, the primary context) without using NVRTC, so clcrt_runtime_create runs that
 * one-time part meanwhile: a thread asks the kernel to read both libraries ahead
 * (posix_fadvise WILLNEED) and compiles an empty kernel for sm_90 (the device's own
 * architecture is not known until cuInit has run; ptxas' start-up is shared by every
 * architecture). Once the device is set up, the warm-up is cancelled if it is still
 * compiling (nvrtcSetFlowCallback) and its thread joined, so:
 *   - no thread of clcrt's outlives clcrt_runtime_create: nothing to join at destroy,
 *     nothing running at exit(), when the library is unloaded or when the process forks
 *     after create (a fork from another thread during create waits for the warm-up to
 *     stop: a child must never inherit NVRTC in the middle of a compile);
 *   - creation takes at most the cancellation's latency longer (about 13 ms measured,
 *     paid only when the device was set up faster than the warm-up ran).
 * Compile-only runtimes get no warm-up: nothing overlaps with it there, and a first
 * compile that follows at once was measured 12 ms slower with a warm-up racing it than
 * without one. It runs once per process (the first device runtime), uses no clcrt
 * allocation (the OOM tests count those), and opts.warmup < 0 or CLCRT_WARMUP=0 turns it off. */
#include "warmup.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static pthread_t g_thread;
static int g_started, g_running, g_completed, g_cancel;
static double g_t0, g_ms;

/* Called by NVRTC at points of the compile: 1 cancels it. */
static int flow(void *payload, void *reserved) {
  (void)payload, (void)reserved;
  return __atomic_load_n(&g_cancel, __ATOMIC_RELAXED);
}

static void prefetch(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED); /* asynchronous: the kernel reads on */
  close(fd);
}

static void prefetch_libraries(void) {
  Dl_info info;
  if (!dladdr((void *)(uintptr_t)nvrtcCompileProgram, &info) || !info.dli_fname) return;
  prefetch(info.dli_fname);
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  const char *slash = strrchr(info.dli_fname, '/');
  char path[4096];
  int n = slash ? (int)(slash - info.dli_fname) : 1;
  if (snprintf(path, sizeof path, "%.*s/libnvrtc-builtins.so.%d.%d", n, slash ? info.dli_fname : ".", major, minor) <
      (int)sizeof path)
    prefetch(path);
}

static void *warmup_main(void *arg) {
  (void)arg;
  prefetch_libraries();
  int ok = 0;
  nvrtcProgram prog = NULL;
  if (nvrtcCreateProgram(&prog, "extern \"C\" __global__ void clcrt_warmup() {}\n", "clcrt_warmup.cu", 0, NULL,
                         NULL) == NVRTC_SUCCESS) {
    static const char *const opts[] = {"--gpu-architecture=sm_90", "-std=c++17"};
    if (nvrtcSetFlowCallback(prog, flow, NULL) == NVRTC_SUCCESS && !__atomic_load_n(&g_cancel, __ATOMIC_RELAXED))
      ok = nvrtcCompileProgram(prog, 2, opts) == NVRTC_SUCCESS;
    nvrtcDestroyProgram(&prog);
  }
  pthread_mutex_lock(&g_lock);
  g_completed = ok;
  g_ms = clcrt__now_ms() - g_t0;
  g_running = 0;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_lock);
  return NULL;
}

/* A fork while the warm-up compiles would give the child NVRTC's locks held by a thread
 * it does not have: the fork waits for the warm-up to stop, and no warm-up starts while
 * it is under way (the lock is held across it). */
static void atfork_prepare(void) {
  pthread_mutex_lock(&g_lock);
  if (g_running) __atomic_store_n(&g_cancel, 1, __ATOMIC_RELAXED);
  while (g_running) pthread_cond_wait(&g_cond, &g_lock);
}
static void atfork_release(void) { pthread_mutex_unlock(&g_lock); }
static void atfork_init(void) { pthread_atfork(atfork_prepare, atfork_release, atfork_release); }

int clcrt__warmup_start(void) {
  pthread_once(&g_atfork_once, atfork_init);
  pthread_mutex_lock(&g_lock);
  if (g_started) {
    pthread_mutex_unlock(&g_lock);
    return 0;
  }
  g_started = 1; /* once per process, whatever happens next */
  __atomic_store_n(&g_cancel, 0, __ATOMIC_RELAXED);
  g_t0 = clcrt__now_ms();
  /* The thread takes no signal meant for the application. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int e = pthread_create(&g_thread, NULL, warmup_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  g_running = e == 0;
  pthread_mutex_unlock(&g_lock);
  return e == 0;
}

void clcrt__warmup_stop(void) {
  __atomic_store_n(&g_cancel, 1, __ATOMIC_RELAXED);
  pthread_join(g_thread, NULL);
}

void clcrt__warmup_get(clcrt__warmup_info *out) {
  pthread_mutex_lock(&g_lock);
  out->started = g_started;
  out->completed = g_completed;
  out->running = g_running;
  out->ms = g_ms;
  pthread_mutex_unlock(&g_lock);
}
