/* Runtime handles: creation (device or compile-only), destruction and logging. The
 * failure messages are in errmsg.c. */
#include <ctype.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "async.h"
#include "builder.h"
#include "cache.h"
#include "checks.h"
#include "env.h"
#include "internal.h"
#include "sched_state.h"
#include "warmup.h"

double clcrt__now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

const char *clcrt__sched_name(clcrt_sched s) {
  switch (s) {
    case CLCRT_SCHED_AUTO: return "auto";
    case CLCRT_SCHED_CLC: return "clc";
    case CLCRT_SCHED_STEAL: return "steal";
    case CLCRT_SCHED_STATIC: return "static";
    case CLCRT_SCHED_FIXED: return "fixed";
  }
  return "unknown";
}

/* Most lines fit the stack buffer; a longer one (a long entry name, then the reason that
 * matters) is formatted whole into an allocation, and only cut, marked so, when that
 * allocation fails: a line cut at a fixed size used to lose its reason. */
void clcrt__log(clcrt_runtime *rt, clcrt_log_level lvl, const char *fmt, ...) {
  if (!rt || !rt->opts.log) return;
  static const char cut[] = " ... (truncated: out of memory)";
  char buf[1024], *line = buf;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof buf) {
    char *big = clcrt__malloc((size_t)n + 1);
    if (big) {
      va_start(ap, fmt);
      vsnprintf(big, (size_t)n + 1, fmt, ap);
      va_end(ap);
      line = big;
    } else {
      memcpy(buf + sizeof buf - sizeof cut, cut, sizeof cut);
    }
  }
  rt->opts.log(rt->opts.log_user, lvl, line);
  if (line != buf) clcrt__free(line);
}

const char *clcrt__cu_name(const clcrt_runtime *rt, CUresult r) {
  const char *name = NULL;
  if (rt && rt->cu && rt->cu->cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
  return "an unknown CUDA error";
}

const char *clcrt_runtime_arch(const clcrt_runtime *rt) { return rt ? rt->arch : NULL; }
int clcrt_runtime_compile_only(const clcrt_runtime *rt) { return rt ? rt->compile_only : 0; }
int clcrt_runtime_num_sms(const clcrt_runtime *rt) { return rt && !rt->compile_only ? rt->num_sms : 0; }
double clcrt_runtime_mem_bandwidth(const clcrt_runtime *rt) { return rt && !rt->compile_only ? rt->mem_bw : 0.0; }
/* A copy of the table's public part, made when the device was opened: the library's table
 * has more entries (driver.h), and programs get exactly the struct the header declares. */
const clcrt_driver *clcrt_runtime_driver(const clcrt_runtime *rt) { return rt && rt->cu ? &rt->cu_pub : NULL; }
CUcontext clcrt_runtime_context(const clcrt_runtime *rt) { return rt ? rt->ctx : NULL; }
const char *clcrt_sched_name(clcrt_sched s) { return clcrt__sched_name(s); }

int clcrt__nvrtc_archs(int *out, int max) {
  /* No allocation here: a failed one would read as "this NVRTC supports no architecture"
   * and turn an out-of-memory into CLCRT_E_UNSUPPORTED. NVRTC knows a few dozen at most. */
  int n = 0, all[256];
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 256) return 0;
  if (nvrtcGetSupportedArchs(all) != NVRTC_SUCCESS) return 0;
  if (n > max) n = max;
  memcpy(out, all, (size_t)n * sizeof *all);
  return n;
}

static void list_archs(char *buf, size_t len, const int *archs, int n) {
  size_t off = 0;
  buf[0] = 0;
  for (int i = 0; i < n && off < len; i++) off += (size_t)snprintf(buf + off, len - off, "%ssm_%d", i ? ", " : "", archs[i]);
}

/* "sm_90a" -> sm 90, suffix 'a'. Returns 0 when the text is not of that form. */
static int parse_arch(const char *s, int *sm, char *suffix) {
  if (strncmp(s, "sm_", 3) != 0 || !isdigit((unsigned char)s[3])) return 0;
  const char *p = s + 3;
  int v = 0;
  while (isdigit((unsigned char)*p)) {
    v = v * 10 + (*p - '0');
    if (v > 10000) return 0;
    p++;
  }
  *suffix = 0;
  if (*p == 'a' || *p == 'f') *suffix = *p++;
  if (*p) return 0;
  *sm = v;
  return 1;
}

/* Validates an architecture against what this NVRTC supports and writes rt->arch. */
static clcrt_status set_arch(clcrt_runtime *rt, int sm, char suffix, const char *what) {
  int archs[64];
  int n = clcrt__nvrtc_archs(archs, 64);
  char list[512];
  list_archs(list, sizeof list, archs, n);
  int found = 0;
  for (int i = 0; i < n; i++) found |= archs[i] == sm;
  if (!found)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "%s sm_%d is not supported by this NVRTC (%d.%d), which supports: %s", what, sm,
                       rt->nvrtc_major, rt->nvrtc_minor, list);
  if (suffix == 'a' && sm < 90)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED, "%s sm_%da: architecture-specific ('a') targets start at sm_90",
                       what, sm);
  if (suffix == 'f' && sm < 100)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED, "%s sm_%df: family ('f') targets start at sm_100", what, sm);
  if (sm < 90)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "%s sm_%d: clcrt needs sm_90 or newer (thread-block clusters, mbarrier transactions)",
                       what, sm);
  snprintf(rt->arch, sizeof rt->arch, "sm_%d%s", sm, suffix == 'a' ? "a" : suffix == 'f' ? "f" : "");
  rt->sm = sm;
  return CLCRT_OK;
}

static clcrt_status open_device(clcrt_runtime *rt) {
  char why[1024];
  rt->cu = clcrt__driver_get(why, sizeof why);
  if (!rt->cu) return clcrt__fail(rt, CLCRT_E_NO_DEVICE, "%s", why);
  CUresult r = rt->cu->cuInit(0);
  if (r != CUDA_SUCCESS) {
    clcrt_status st = clcrt__fail(rt, CLCRT_E_NO_DEVICE,
                                  "cuInit failed with %s: no usable GPU. Check the driver (nvidia-smi), or set "
                                  "opts.target_arch (e.g. \"sm_90a\") to compile without a GPU",
                                  clcrt__cu_name(rt, r));
    rt->cu = NULL;
    return st;
  }
#define COPY(name) rt->cu_pub.name = rt->cu->name;
  CLCRT_DRIVER_MAP(COPY)
#undef COPY
  int count = 0;
  CU_CHECK(rt, cuDeviceGetCount(&count));
  if (count == 0) {
    rt->cu = NULL;
    return clcrt__fail(rt, CLCRT_E_NO_DEVICE, "the CUDA driver found no GPU; set opts.target_arch to compile only");
  }
  if (rt->opts.device < 0 || rt->opts.device >= count)
    return clcrt__fail(rt, CLCRT_E_INVALID, "device %d does not exist: this machine has %d GPU%s (0..%d)",
                       rt->opts.device, count, count == 1 ? "" : "s", count - 1);
  CU_CHECK(rt, cuDeviceGet(&rt->dev, rt->opts.device));
  int major = 0, minor = 0, cluster_ok = 0;
  CU_CHECK(rt, cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, rt->dev));
  CU_CHECK(rt, cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, rt->dev));
  CU_CHECK(rt, cuDeviceGetAttribute(&rt->num_sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, rt->dev));
  CU_CHECK(rt, cuDeviceGetAttribute(&rt->max_smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                    rt->dev));
  CU_CHECK(rt, cuDeviceGetAttribute(&cluster_ok, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, rt->dev));
  /* Peak memory bandwidth: twice the memory clock (kHz) times the bus (bits) in bytes. Not every
   * driver reports both: a failure or a zero leaves it unknown, which is no error. */
  int mem_khz = 0, bus_bits = 0;
  rt->mem_bw = 0;
  if (rt->cu->cuDeviceGetAttribute(&mem_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, rt->dev) == CUDA_SUCCESS &&
      rt->cu->cuDeviceGetAttribute(&bus_bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, rt->dev) == CUDA_SUCCESS &&
      mem_khz > 0 && bus_bits > 0)
    rt->mem_bw = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0);
  int sm = major * 10 + minor;
  if (!cluster_ok || sm < 90)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "device %d is sm_%d: clcrt needs sm_90 or newer (thread-block clusters)", rt->opts.device, sm);
  /* The exact architecture with its 'a' suffix; a device newer than this NVRTC knows is
   * clamped to the newest supported minor of its major, without the suffix (an 'a' cubin
   * runs only on its own architecture, a plain one on later minors). */
  int archs[64], n = clcrt__nvrtc_archs(archs, 64), best = 0;
  for (int i = 0; i < n; i++)
    if (archs[i] == sm) best = sm;
  if (best) return set_arch(rt, sm, 'a', "device");
  for (int i = 0; i < n; i++)
    if (archs[i] / 10 == major && archs[i] <= sm && archs[i] > best) best = archs[i];
  if (!best) return set_arch(rt, sm, 'a', "device"); /* fails with the list */
  clcrt__log(rt, CLCRT_LOG_WARN, "device is sm_%d, which this NVRTC does not know: compiling for sm_%d", sm, best);
  return set_arch(rt, best, 0, "device");
}

static clcrt_status device_setup(clcrt_runtime *rt) {
  CU_CHECK(rt, cuDevicePrimaryCtxRetain(&rt->ctx, rt->dev));
  /* Hopper and Blackwell datacenter parts run clusters of 16 with the non-portable
   * attribute; whether a kernel may is checked per kernel at launch. */
  rt->max_cluster_size = 16;
  /* In the new context; a caller's other context is current again on return (a thread with
   * none keeps this one current). */
  clcrt__ctx_saved sv;
  clcrt_status st = clcrt__ctx_push(rt, &sv);
  if (st != CLCRT_OK) return st;
  CUresult r = rt->cu->cuCtxGetStreamPriorityRange(&rt->prio_least, &rt->prio_greatest);
  /* The graph claim table and the preemption words of this context (sched_state.h). */
  st = r == CUDA_SUCCESS ? clcrt__devstate_acquire(rt) : CLCRT__CU_FAIL(rt, r, cuCtxGetStreamPriorityRange);
  clcrt__ctx_leave(rt, &sv);
  return st;
}

/* Asks the driver which context is current rather than remembering it: the user, or
 * another runtime on another device, may have changed it since (a cached answer once let
 * a launch go to the wrong context). cuCtxGetCurrent costs tens of nanoseconds. */
clcrt_status clcrt__ctx_push(clcrt_runtime *rt, clcrt__ctx_saved *sv) {
  sv->pushed = 0;
  if (rt->compile_only) return CLCRT_OK;
  CUcontext cur = NULL;
  if (rt->cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == rt->ctx) return CLCRT_OK;
  if (!cur) {
    CU_CHECK(rt, cuCtxSetCurrent(rt->ctx));
    return CLCRT_OK;
  }
  CU_CHECK(rt, cuCtxPushCurrent(rt->ctx));
  sv->pushed = 1;
  return CLCRT_OK;
}

void clcrt__ctx_leave(clcrt_runtime *rt, const clcrt__ctx_saved *sv) {
  CUcontext popped;
  if (sv->pushed) (void)rt->cu->cuCtxPopCurrent(&popped);
}

/* The toolkit whose include directories NVRTC gets (compile.c). One named by the caller
 * (opts.cuda_home, CUDA_HOME or CUDA_PATH) must be a toolkit: a wrong path used to be
 * accepted, and a tile function including <cuda_bf16.h> then failed with NVRTC's "no
 * directories in search list". A toolkit is recognised by include/cuda.h or
 * include/cuda_runtime.h. The default, /usr/local/cuda, may be absent: most tile functions
 * need nothing but NVRTC's built-in headers, and a machine with only the driver and NVRTC
 * can still compile them. */
static clcrt_status check_cuda_home(clcrt_runtime *rt, const char *from) {
  const char *home = rt->opts.cuda_home;
  size_t len = strlen(home);
  if (len > CLCRT__CUDA_HOME_MAX)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "the CUDA toolkit path (%s) is %zu characters long: at most %d (it is passed to NVRTC whole, "
                       "with /include/cccl after it)",
                       from, len, CLCRT__CUDA_HOME_MAX);
  if (!strcmp(from, "the default")) return CLCRT_OK;
  static const char *const probes[] = {"include/cuda.h", "include/cuda_runtime.h"};
  for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
    char path[CLCRT__CUDA_HOME_MAX + 64];
    struct stat s;
    snprintf(path, sizeof path, "%s/%s", home, probes[i]);
    if (stat(path, &s) == 0 && S_ISREG(s.st_mode)) return CLCRT_OK;
  }
  int opt = !strcmp(from, "opts.cuda_home");
  return clcrt__fail(rt, CLCRT_E_INVALID,
                     "the CUDA toolkit \"%s\" (%s) has neither include/cuda.h nor include/cuda_runtime.h: name the "
                     "toolkit's own directory (the one with bin/nvcc and include/), or %s%s to use /usr/local/cuda "
                     "where it exists",
                     home, from, opt ? "set opts.cuda_home to NULL" : "unset ", opt ? "" : from);
}

/* The allocator may change only while nothing it handed out is in use: a runtime created
 * before a swap used to be freed by the new free function. */
clcrt_status clcrt_replace_allocator(clcrt_malloc_fn m, clcrt_realloc_fn r, clcrt_calloc_fn c, clcrt_free_fn f) {
  if (!m || !r || !c || !f)
    return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_replace_allocator: the %s function is NULL: give all four",
                             !m ? "malloc" : !r ? "realloc" : !c ? "calloc" : "free");
  long live = clcrt__alloc_live();
  if (live != 0)
    return clcrt__fail_norts(CLCRT_E_BUSY,
                             "clcrt_replace_allocator: %ld block%s from the current allocator %s still in use (a "
                             "runtime, a trace, an error message...), and would be freed by the new one: call it "
                             "before any other clcrt function",
                             live, live == 1 ? "" : "s", live == 1 ? "is" : "are");
  clcrt__alloc_set(m, r, c, f);
  return CLCRT_OK;
}

static char *dup_opt(const char *s, int *ok) {
  if (!s) return NULL;
  char *d = clcrt__strdup(s);
  if (!d) *ok = 0;
  return d;
}

clcrt_status clcrt_runtime_create(clcrt_runtime **out, const clcrt_runtime_opts *opts) {
  /* Failures before there is a handle are explained by clcrt_errmsg(NULL). */
  if (!out) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_runtime_create: out is NULL");
  *out = NULL;
  clcrt_runtime_opts def = CLCRT_RUNTIME_OPTS_INIT;
  if (opts && (opts->size < offsetof(clcrt_runtime_opts, target_arch) + sizeof(char *) ||
               opts->size > sizeof(clcrt_runtime_opts)))
    return clcrt__fail_norts(CLCRT_E_INVALID,
                             "clcrt_runtime_create: opts->size is %zu: initialise the options with "
                             "CLCRT_RUNTIME_OPTS_INIT",
                             opts->size);
  clcrt_runtime *rt = clcrt__calloc(1, sizeof *rt);
  if (!rt) return clcrt__fail_norts(CLCRT_E_NOMEM, "clcrt_runtime_create: out of memory for the handle");
  rt->err_id = clcrt__err_new_id();
  *out = rt;
  rt->opts = def;
  if (opts) memcpy(&rt->opts, opts, opts->size);
  rt->opts.size = sizeof rt->opts;
  if (pthread_mutex_init(&rt->lock, NULL) != 0) return clcrt__fail(rt, CLCRT_E_NOMEM, "pthread_mutex_init failed");
  rt->lock_ok = 1;
  if (pthread_cond_init(&rt->cond, NULL) != 0) return clcrt__fail(rt, CLCRT_E_NOMEM, "pthread_cond_init failed");
  rt->cond_ok = 1;
  int ok = 1;
  rt->opts.target_arch = rt->target_arch_own = dup_opt(rt->opts.target_arch, &ok);
  rt->opts.cache_dir = rt->cache_dir_own = dup_opt(rt->opts.cache_dir, &ok);
  rt->opts.cuda_home = rt->cuda_home_own = dup_opt(rt->opts.cuda_home, &ok);
  if (!ok) return clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory copying the runtime options");
  const char *home_from = "opts.cuda_home";
  if (!rt->opts.cuda_home && (rt->opts.cuda_home = clcrt__env_get()->cuda_home) != NULL)
    home_from = clcrt__env_get()->cuda_home_var;
  if (!rt->opts.cuda_home) rt->opts.cuda_home = "/usr/local/cuda", home_from = "the default";
  clcrt__tunables tun;
  char why[256];
  if (!clcrt__tunables_get(&rt->opts, &tun, why, sizeof why)) return clcrt__fail(rt, CLCRT_E_INVALID, "%s", why);
  rt->chunk_cycles = tun.chunk_cycles;
  rt->long_cycles = tun.long_cycles;
  rt->preempt_waves = tun.preempt_waves;
  rt->cache_max_bytes = tun.cache_max_bytes;
  rt->warmup = tun.warmup;
  rt->pdl = clcrt__env_get()->pdl; /* launch.c also asks for sm_90+ (rt->sm is set below) */

  nvrtcVersion(&rt->nvrtc_major, &rt->nvrtc_minor);
  clcrt_status st = check_cuda_home(rt, home_from);
  if (st != CLCRT_OK) return st;
  if (rt->opts.target_arch) {
    int sm;
    char suffix;
    if (!parse_arch(rt->opts.target_arch, &sm, &suffix))
      return clcrt__fail(rt, CLCRT_E_INVALID,
                         "target_arch \"%s\" is not an architecture: write sm_<number> with an optional a or f "
                         "suffix, e.g. \"sm_90a\" or \"sm_100a\"",
                         rt->opts.target_arch);
    if ((st = set_arch(rt, sm, suffix, "target_arch")) != CLCRT_OK) return st;
    rt->compile_only = 1;
    rt->max_cluster_size = 16;
  } else {
    /* NVRTC's one-time start-up runs while the driver sets the device up, and is over
     * (done or cancelled) before this returns (warmup.c). */
    int warming = rt->warmup && clcrt__warmup_start();
    st = open_device(rt);
    if (st == CLCRT_OK) st = device_setup(rt);
    if (warming) clcrt__warmup_stop();
    if (st != CLCRT_OK) return st;
  }
  if ((st = clcrt__cache_init(rt)) != CLCRT_OK) return st;
  return CLCRT_OK;
}

void clcrt_runtime_destroy(clcrt_runtime *rt) {
  if (!rt) return;
  /* Asynchronous compiles that are running hold the runtime: wait for those; the rest are
   * detached, and their callbacks, still to run on their loop, get CLCRT_E_CANCELLED and no
   * kernel (async.c). */
  clcrt__async_orphan(rt);
  /* Then the background builds (after the async compiles, whose registrations may ask for
   * some): queued ones are dropped, a running one finishes, so that no kernel is freed under
   * a build. */
  clcrt__builder_stop(rt);
  clcrt__ctx_saved sv = {0};
  if (rt->cu && rt->ctx) (void)clcrt__ctx_push(rt, &sv);
  for (clcrt_kernel *k = rt->kernels, *next; k; k = next) {
    next = k->next;
    clcrt__kernel_free(k);
  }
  clcrt__cache_fini(rt);
  if (rt->hint_pages) clcrt__hint_free(rt); /* after the kernels: no run of theirs is in flight */
  if (rt->devstate) clcrt__devstate_release(rt);
  /* The caller's context back before the release, which may end the primary context (its
   * last reference), and a pushed context that has ended may not pop. */
  if (rt->cu) clcrt__ctx_leave(rt, &sv);
  if (rt->cu && rt->ctx) rt->cu->cuDevicePrimaryCtxRelease(rt->dev);
  clcrt__free(rt->target_arch_own);
  clcrt__free(rt->cache_dir_own);
  clcrt__free(rt->cuda_home_own);
  if (rt->cond_ok) pthread_cond_destroy(&rt->cond);
  if (rt->lock_ok) pthread_mutex_destroy(&rt->lock);
  /* This thread's message for rt goes now; other threads' entries are keyed by an id that
   * no later runtime has, and go with their thread (errmsg.c). */
  clcrt__err_forget(rt);
  clcrt__free(rt);
}
