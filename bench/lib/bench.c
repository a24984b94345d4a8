/* Shared by the benchmark programs (bench.h). */
#include "bench.h"

#include <nvrtc.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

const clcrt_driver *cu;
clcrt_runtime *rt;
clcrt_stream *st;
CUstream cs;
FILE *json;
const char *dump_dir;
const char *trace_dir;
double bench_host_us;
int quick;
static int json_first = 1;

/* The contenders: the default (AUTO: STEAL here, on a persistent grid, or one cluster per unit
 * for long units), STEAL on a full grid, the two other schedulers, and STEAL on an explicit
 * persistent grid (STEAL before long units), to keep the default's choice measured.
 * CLCRT_BENCH_EXP=1 adds the last four, experiments: STEAL whose waits poll
 * (no suspend-time hint, -DCLCRT_WAIT_HINT=0), STATIC with a static shared-memory array in its
 * tile function (scale and classes tiles: what shared memory alone costs a short run), and
 * STATIC with an mbarrier instruction that never runs (the compiler then reserves 1 KiB of
 * shared memory per CTA, as in every STEAL kernel); and one of STEAL round two (docs/results.md):
 * STEAL whose 1-CTA clusters always claim ahead (-DCLCRT_STEAL_EARLY=1).
 * CLCRT_BENCH_EXP=NAME[,NAME...] adds only the experiments named. */
static const contender k_all[] = {
    {"steal", CLCRT_SCHED_AUTO, CLCRT_GRID_AUTO, NULL},
    {"steal-full", CLCRT_SCHED_STEAL, CLCRT_GRID_FULL, NULL},
    {"static", CLCRT_SCHED_STATIC, CLCRT_GRID_AUTO, NULL},
    {"fixed", CLCRT_SCHED_FIXED, CLCRT_GRID_AUTO, NULL},
    {"steal-persist", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, NULL},
    {"steal-poll", CLCRT_SCHED_AUTO, CLCRT_GRID_AUTO, "-DCLCRT_WAIT_HINT=0"},
    {"static-smem", CLCRT_SCHED_STATIC, CLCRT_GRID_AUTO, "-DEXP_SMEM=1"},
    {"static-mbar", CLCRT_SCHED_STATIC, CLCRT_GRID_AUTO, "-DEXP_MBAR=1"},
    {"steal-early", CLCRT_SCHED_AUTO, CLCRT_GRID_AUTO, "-DCLCRT_STEAL_EARLY=1"},
};
enum { N_ALL = (int)(sizeof k_all / sizeof k_all[0]), N_EXPERIMENTS = 4 };
const contender *k_contenders = k_all;
int k_ncontenders = N_ALL - N_EXPERIMENTS;
static contender k_picked[N_ALL];

/* Whether the comma-separated list names `name`. */
int bench_listed(const char *list, const char *name) {
  const size_t n = strlen(name);
  for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
    if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
  return 0;
}

void bench_open(const char *json_path) {
  const char *exp = getenv("CLCRT_BENCH_EXP");
  if (exp && !strcmp(exp, "1")) {
    k_ncontenders = N_ALL;
  } else if (exp && *exp) {
    int n = 0;
    for (int i = 0; i < N_ALL; i++)
      if (i < N_ALL - N_EXPERIMENTS || bench_listed(exp, k_all[i].name)) k_picked[n++] = k_all[i];
    k_contenders = k_picked, k_ncontenders = n;
  }
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = "";
  if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) {
    printf("bench: SKIP: %s\n", clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
    exit(0);
  }
  cu = clcrt_runtime_driver(rt);
  CK(cu->cuCtxSetCurrent(clcrt_runtime_context(rt)));
  if (clcrt_stream_create(rt, NULL, &st) != CLCRT_OK) {
    fprintf(stderr, "stream: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  cs = clcrt_stream_cu(st);
  char name[256] = "";
  CUdevice dev = 0;
  if (cu->cuDeviceGet(&dev, o.device) == CUDA_SUCCESS) cu->cuDeviceGetName(name, sizeof name, dev);
  if (json_path && !(json = fopen(json_path, "w"))) {
    perror(json_path);
    exit(1);
  }
  if (json)
    fprintf(json, "{\"device\":\"%s\",\"arch\":\"%s\",\"sms\":%d,\"results\":[", name, clcrt_runtime_arch(rt),
            clcrt_runtime_num_sms(rt));
  printf("clcrt bench on %s (%s, %d SMs): median of %d runs after %d warm-ups; ratio = best reference / contender\n",
         name, clcrt_runtime_arch(rt), clcrt_runtime_num_sms(rt), REPS, WARMUP);
}

void bench_close(void) {
  if (json) {
    fprintf(json, "\n]}\n");
    fclose(json);
  }
  clcrt_stream_destroy(st);
  clcrt_runtime_destroy(rt);
}

static void dump_cubin(const char *name, const void *data, size_t size) {
  if (!dump_dir) return;
  char path[512];
  snprintf(path, sizeof path, "%s/%s.cubin", dump_dir, name);
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(data, 1, size, f);
    fclose(f);
  }
}

int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

double time_batch(launch_fn f, void *ctx, int inner, int reps) {
  CUevent e0, e1;
  CK(cu->cuEventCreate(&e0, 0));
  CK(cu->cuEventCreate(&e1, 0));
  for (int i = 0; i < WARMUP; i++)
    for (int j = 0; j < inner; j++) f(ctx);
  float ms[64];
  if (reps > 64) reps = 64;
  float host[64];
  for (int i = 0; i < reps; i++) {
    CK(cu->cuEventRecord(e0, cs));
    double h0 = bench_now_ms();
    for (int j = 0; j < inner; j++) f(ctx);
    host[i] = (float)((bench_now_ms() - h0) * 1e3 / inner);
    CK(cu->cuEventRecord(e1, cs));
    CK(cu->cuEventSynchronize(e1));
    CK(cu->cuEventElapsedTime(&ms[i], e0, e1));
  }
  qsort(host, (size_t)reps, sizeof host[0], cmp_float);
  bench_host_us = host[reps / 2];
  cu->cuEventDestroy(e0);
  cu->cuEventDestroy(e1);
  qsort(ms, (size_t)reps, sizeof ms[0], cmp_float);
  return reps % 2 ? ms[reps / 2] : (ms[reps / 2 - 1] + ms[reps / 2]) / 2;
}

const char *bench_cu_name(CUresult r) {
  const char *s = NULL;
  return cu && cu->cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "an unknown CUDA error";
}

double bench_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

void bench_put(CUdeviceptr dst, const void *src, size_t bytes) {
  CK(cu->cuMemcpyHtoD(dst, src, bytes));
  CK(cu->cuStreamSynchronize(CU_STREAM_LEGACY));
}

double time_median(launch_fn f, void *ctx) { return time_batch(f, ctx, 1, REPS); }

double time_graph(launch_fn f, void *ctx, int inner, int reps, CUgraphExec *keep) {
  CUgraph g;
  CUgraphExec e;
  CK(cu->cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  for (int j = 0; j < inner; j++) f(ctx);
  CK(cu->cuStreamEndCapture(cs, &g));
  CK(cu->cuGraphInstantiateWithFlags(&e, g, 0));
  CK(cu->cuGraphDestroy(g));
  CUevent e0, e1;
  CK(cu->cuEventCreate(&e0, 0));
  CK(cu->cuEventCreate(&e1, 0));
  for (int i = 0; i < WARMUP; i++) CK(cu->cuGraphLaunch(e, cs));
  float ms[64];
  if (reps > 64) reps = 64;
  for (int i = 0; i < reps; i++) {
    CK(cu->cuEventRecord(e0, cs));
    CK(cu->cuGraphLaunch(e, cs));
    CK(cu->cuEventRecord(e1, cs));
    CK(cu->cuEventSynchronize(e1));
    CK(cu->cuEventElapsedTime(&ms[i], e0, e1));
  }
  cu->cuEventDestroy(e0);
  cu->cuEventDestroy(e1);
  if (keep)
    *keep = e;
  else
    cu->cuGraphExecDestroy(e);
  qsort(ms, (size_t)reps, sizeof ms[0], cmp_float);
  return reps % 2 ? ms[reps / 2] : (ms[reps / 2 - 1] + ms[reps / 2]) / 2;
}

CUlibrary compile_ref(const char *src, const char *define, const char *what) {
  nvrtcProgram p;
  char arch[64];
  snprintf(arch, sizeof arch, "--gpu-architecture=%s", clcrt_runtime_arch(rt));
  const char *opts[] = {arch, "-std=c++17", define};
  if (nvrtcCreateProgram(&p, src, "ref.cu", 0, NULL, NULL) != NVRTC_SUCCESS) exit(1);
  if (nvrtcCompileProgram(p, define ? 3 : 2, opts) != NVRTC_SUCCESS) {
    size_t n;
    nvrtcGetProgramLogSize(p, &n);
    char *log = malloc(n);
    nvrtcGetProgramLog(p, log);
    fprintf(stderr, "reference kernel %s: %s\n", what, log);
    exit(1);
  }
  size_t n;
  nvrtcGetCUBINSize(p, &n);
  char *cubin = malloc(n);
  nvrtcGetCUBIN(p, cubin);
  nvrtcDestroyProgram(&p);
  char name[96];
  snprintf(name, sizeof name, "ref_%s%s", what, define ? define + 2 : "");
  dump_cubin(name, cubin, n);
  CUlibrary lib;
  CK(cu->cuLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
  free(cubin);
  return lib;
}

CUfunction lib_fn(CUlibrary lib, const char *name) {
  CUkernel k;
  CUfunction f;
  CK(cu->cuLibraryGetKernel(&k, lib, name));
  CK(cu->cuKernelGetFunction(&f, k));
  return f;
}

int occupancy_blocks(CUfunction f, unsigned threads, unsigned smem) {
  int n = 0;
  if (smem > 48 * 1024) CK(cu->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem));
  CK(cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, (int)threads, smem));
  if (n < 1) {
    fprintf(stderr, "reference kernel does not fit on an SM\n");
    exit(1);
  }
  return n;
}

clcrt_kernel *reg_desc(const clcrt_tile_desc *d, const char *what) {
  clcrt_kernel *k = NULL;
  /* With the variants short runs, graph captures and traces launch built now: no run builds
   * one, and until it is built in the background a run launches a fallback, which a timing
   * must not measure. */
  if (clcrt_register(rt, d, &k) != CLCRT_OK ||
      clcrt_kernel_prepare(k, CLCRT_USE_SHORT | CLCRT_USE_GRAPH | CLCRT_USE_TRACE) != CLCRT_OK) {
    fprintf(stderr, "register %s: %s\n", what, clcrt_errmsg(rt));
    exit(1);
  }
  const void *cubin;
  size_t size;
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  if (dump_dir && clcrt_kernel_cubin(k, &cubin, &size) == CLCRT_OK && clcrt_kernel_info_get(k, &info) == CLCRT_OK) {
    char name[200];
    snprintf(name, sizeof name, "%s_c%u_%s", info.name, info.cluster.x, what);
    dump_cubin(name, cubin, size);
  }
  return k;
}

clcrt_kernel *reg2(const char *src, const char *fn, const char *args, clcrt_sched sched, clcrt_grid grid, unsigned cl,
                   const char *define, const char *define2) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = src, d.tile_fn = fn, d.args_type = args;
  d.block = (clcrt_dim3){256, 1, 1};
  d.cluster = (clcrt_dim3){cl, 1, 1};
  d.sched = sched, d.grid = grid;
  const char *opts[2];
  int no = 0;
  if (define) opts[no++] = define;
  if (define2) opts[no++] = define2;
  d.options = opts, d.num_options = no;
  char what[96];
  snprintf(what, sizeof what, "%s%s%s", fn, define2 ? "_" : "", define2 ? define2 + 2 : "");
  return reg_desc(&d, what);
}

void launch_ref(void *p) {
  lctx *c = p;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = c->grid, cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = c->threads ? c->threads : 256, cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = c->smem;
  cfg.hStream = cs;
  void *kp[2] = {c->args, &c->ntiles};
  CK(cu->cuLaunchKernelEx(&cfg, c->fn, kp, NULL));
}

void launch_clcrt(void *p) {
  lctx *c = p;
  if (clcrt_run(c->s ? c->s : st, c->k, (clcrt_dim3){(unsigned)c->ntiles, 1, 1}, c->args, c->args_size) != CLCRT_OK) {
    fprintf(stderr, "clcrt_run: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
}

void launch_copy(void *p) {
  lctx *c = p;
  CK(cu->cuMemcpyDtoDAsync(c->dst, c->src, c->bytes, cs));
}

void emit(const char *workload, const char *param, unsigned cl, const char *who, double ms, double ratio,
          double pct_copy) {
  emit_traced(workload, param, cl, who, ms, ratio, pct_copy, NULL);
}

void emit_traced(const char *workload, const char *param, unsigned cl, const char *who, double ms, double ratio,
                 double pct_copy, const clcrt_trace_summary *sum) {
  printf("  %-9s %-8s c%u %-16s %9.4f ms  %6.3fx", workload, param, cl, who, ms, ratio);
  if (pct_copy > 0) printf("  %5.1f%% of copy", pct_copy);
  if (sum) printf("  tail %7.1f us  imbalance %.3f  busy %.3f", sum->tail_ns / 1e3, sum->imbalance, sum->busy_mean);
  printf("\n");
  if (sum)
    emit_json("\"workload\":\"%s\",\"param\":\"%s\",\"cluster\":%u,\"contender\":\"%s\",\"median_ms\":%.5f,"
              "\"ratio_to_best_ref\":%.4f,\"pct_of_copy\":%.2f,\"tail_us\":%.2f,\"imbalance\":%.4f,"
              "\"busy_mean\":%.4f,\"traced_span_us\":%.2f",
              workload, param, cl, who, ms, ratio, pct_copy, sum->tail_ns / 1e3, sum->imbalance, sum->busy_mean,
              sum->span_ns / 1e3);
  else
    emit_json("\"workload\":\"%s\",\"param\":\"%s\",\"cluster\":%u,\"contender\":\"%s\",\"median_ms\":%.5f,"
              "\"ratio_to_best_ref\":%.4f,\"pct_of_copy\":%.2f",
              workload, param, cl, who, ms, ratio, pct_copy);
}

int trace_once(void *p, clcrt_trace_summary *sum, const char *save_path) {
  lctx *c = p;
  clcrt_stream *s = c->s ? c->s : st;
  clcrt_trace *tr = NULL;
  int ok = clcrt_stream_trace_enable(s, (size_t)c->ntiles * 2 + 65536) == CLCRT_OK;
  if (ok) {
    launch_clcrt(c);
    ok = clcrt_stream_trace_read(s, &tr) == CLCRT_OK && clcrt_trace_summarize(tr, sum) == CLCRT_OK;
  }
  if (ok && save_path && clcrt_trace_save_json(tr, save_path) != CLCRT_OK) {
    fprintf(stderr, "trace: %s\n", clcrt_errmsg(NULL));
    ok = 0;
  }
  if (!ok) fprintf(stderr, "trace: %s / %s\n", clcrt_errmsg(rt), clcrt_errmsg(NULL));
  clcrt_trace_destroy(tr);
  clcrt_stream_trace_enable(s, 0);
  return ok;
}

void emit_json(const char *fmt, ...) {
  if (!json) return;
  fprintf(json, "%s\n  {", json_first ? "" : ",");
  va_list ap;
  va_start(ap, fmt);
  vfprintf(json, fmt, ap);
  va_end(ap);
  fprintf(json, "}");
  json_first = 0;
}

unsigned long long bench_rand(unsigned long long *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}
double bench_urand(unsigned long long *s) { return (double)(bench_rand(s) >> 11) / 9007199254740992.0; }
