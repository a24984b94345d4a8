/* cache_timing: what the compile cache buys, measured.
 *
 *   build/examples/cache_timing [runs]
 *
 * 1. cold compile of the README's scale_tile (a fresh key each time: NVRTC, disk write,
 *    load);
 * 2. disk hit in a fresh runtime (read, validate, load);
 * 3. memory hit (the same description registered again);
 * 4. eight variants compiled one after another, then with clcrt_register_async on a
 *    libuv loop.
 *
 *   build/examples/cache_timing --first [ARCH]
 *
 * measures only what a program pays at its start when the disk cache is cold: in this fresh
 * process, clcrt_runtime_create (which starts NVRTC on a thread on a GPU machine unless
 * CLCRT_WARMUP=0), then the first clcrt_register of the README example, disk cache off.
 * With ARCH (e.g. sm_90a) the runtime is compile-only, as without a GPU.
 * Run it several times, as separate processes.
 * With a GPU, "load" is cuLibraryLoadData plus the kernel's attributes; without one the
 * runtime is compile-only (sm_90a) and "load" is parsing the cubin. Medians are printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "clcrt.h"

static const char *SCALE =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= a.alpha;\n"
    "}\n";

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static const char *g_arch; /* NULL: the device's own */
static char g_dir[256];

static clcrt_runtime *runtime(const char *cache_dir) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = g_arch;
  o.cache_dir = cache_dir;
  clcrt_runtime *rt = NULL;
  if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) {
    fprintf(stderr, "cache_timing: runtime: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  return rt;
}

/* The README example; variant v >= 0 adds -DCLCRT_VARIANT=v, a new key. */
static clcrt_tile_desc desc(int v, char *opt, const char **opts) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = SCALE;
  d.tile_fn = "scale_tile";
  d.args_type = "ScaleArgs";
  d.block = (clcrt_dim3){256, 1, 1};
  if (v >= 0) {
    sprintf(opt, "-DCLCRT_VARIANT=%d", v);
    opts[0] = opt;
    d.options = opts;
    d.num_options = 1;
  }
  return d;
}

static clcrt_kernel *reg(clcrt_runtime *rt, const clcrt_tile_desc *d) {
  clcrt_kernel *k = NULL;
  if (clcrt_register(rt, d, &k) != CLCRT_OK) {
    fprintf(stderr, "cache_timing: register: %s\n", clcrt_errmsg(rt));
    exit(1);
  }
  return k;
}

static int g_pending;
static void on_registered(void *user, clcrt_status st, clcrt_kernel *k, const char *msg) {
  (void)user, (void)k;
  if (st != CLCRT_OK) {
    fprintf(stderr, "cache_timing: async register: %s\n", msg);
    exit(1);
  }
  g_pending--;
}

/* One line: create, first register (of which NVRTC), in this fresh process. */
static int first_compile(const char *arch) {
  double t0 = now_ms();
  clcrt_runtime *rt = NULL;
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = "";
  o.target_arch = arch;
  if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) {
    clcrt_runtime_destroy(rt);
    rt = NULL;
    o.target_arch = "sm_90a";
    t0 = now_ms();
    if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) return fprintf(stderr, "cache_timing: %s\n", clcrt_errmsg(rt)), 1;
  }
  double t1 = now_ms();
  char opt[64];
  const char *opts[1];
  clcrt_tile_desc d = desc(-1, opt, opts);
  clcrt_kernel *k = reg(rt, &d);
  double t2 = now_ms();
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  clcrt_kernel_info_get(k, &info);
  const char *w = getenv("CLCRT_WARMUP");
  printf("first compile in a fresh process (%s, warm-up %s): runtime create %.1f ms, first register %.1f ms "
         "(NVRTC %.1f ms)\n",
         clcrt_runtime_arch(rt), clcrt_runtime_compile_only(rt) ? "never (compile-only)" : (w && !strcmp(w, "0") ? "off" : "on"),
         t1 - t0, t2 - t1, info.compile_ms);
  clcrt_runtime_destroy(rt);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--first")) return first_compile(argc > 2 ? argv[2] : NULL);
  int runs = argc > 1 ? atoi(argv[1]) : 7;
  if (runs < 1) runs = 1;
  clcrt_runtime *probe = NULL;
  if (clcrt_runtime_create(&probe, NULL) != CLCRT_OK) g_arch = "sm_90a";
  clcrt_runtime_destroy(probe);
  snprintf(g_dir, sizeof g_dir, "/tmp/clcrt-timing-XXXXXX");
  if (!mkdtemp(g_dir)) return perror("mkdtemp"), 1;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  printf("cache_timing: %s, %ld cores, cache in %s\n",
         g_arch ? "compile-only sm_90a (no GPU: \"load\" = cubin parse)" : "GPU (load = cuLibraryLoadData)", cores,
         g_dir);

  char opt[64];
  const char *opts[1];
  /* NVRTC's first compile in a process pays its own start-up; keep it out of the numbers. */
  clcrt_runtime *rt = runtime("");
  clcrt_tile_desc d = desc(-1000, opt, opts);
  reg(rt, &d);
  clcrt_runtime_destroy(rt);

  /* 1. Cold: a new key each run, through a fresh runtime with the disk cache on. */
  double *t = calloc((size_t)runs > 200000 ? (size_t)runs : 200000, sizeof *t);
  for (int i = 0; i < runs; i++) {
    rt = runtime(g_dir);
    d = desc(i, opt, opts);
    double t0 = now_ms();
    reg(rt, &d);
    t[i] = now_ms() - t0;
    clcrt_runtime_destroy(rt);
  }
  double cold = median(t, runs);
  /* The README example itself, once, for the record. */
  rt = runtime(g_dir);
  d = desc(-1, opt, opts);
  double t0 = now_ms();
  reg(rt, &d);
  double readme_cold = now_ms() - t0;
  clcrt_runtime_destroy(rt);

  /* 2. Disk hit: a fresh runtime finds the README example on disk. */
  int hits = runs * 3;
  for (int i = 0; i < hits; i++) {
    rt = runtime(g_dir);
    t0 = now_ms();
    reg(rt, &d);
    t[i] = now_ms() - t0;
    clcrt_cache_stats s = CLCRT_CACHE_STATS_INIT;
    clcrt_cache_stats_get(rt, &s);
    if (s.disk_hits != 1) fprintf(stderr, "cache_timing: expected a disk hit\n"), exit(1);
    clcrt_runtime_destroy(rt);
  }
  double disk = median(t, hits);

  /* 3. Memory hit: the same description again, in batches to see past the clock. */
  rt = runtime(g_dir);
  reg(rt, &d);
  int batches = 200, per = 1000;
  for (int b = 0; b < batches; b++) {
    t0 = now_ms();
    for (int i = 0; i < per; i++) reg(rt, &d);
    t[b] = (now_ms() - t0) * 1e3 / per;
  }
  double mem_us = median(t, batches);
  clcrt_runtime_destroy(rt);

  /* 4. Eight variants, disk cache off so that every one compiles. */
  enum { V = 8 };
  double seq[16], par[16];
  int reps = runs < 16 ? (runs < 3 ? runs : 3) : 3;
  for (int r = 0; r < reps; r++) {
    char opt8[V][64];
    const char *opts8[V][1];
    rt = runtime("");
    t0 = now_ms();
    for (int v = 0; v < V; v++) {
      clcrt_tile_desc dv = desc(100 * (r + 1) + v, opt8[v], opts8[v]);
      reg(rt, &dv);
    }
    seq[r] = now_ms() - t0;
    clcrt_runtime_destroy(rt);

    rt = runtime("");
    uv_loop_t loop;
    uv_loop_init(&loop);
    t0 = now_ms();
    g_pending = V;
    for (int v = 0; v < V; v++) {
      clcrt_tile_desc dv = desc(100 * (r + 1) + 50 + v, opt8[v], opts8[v]);
      if (clcrt_register_async(rt, &dv, &loop, on_registered, NULL) != CLCRT_OK) return 1;
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    par[r] = now_ms() - t0;
    uv_loop_close(&loop);
    clcrt_runtime_destroy(rt);
  }
  double s8 = median(seq, reps), p8 = median(par, reps);

  printf("cold compile, README scale_tile:      %8.2f ms (median of %d new keys; this exact one: %.2f ms)\n", cold,
         runs, readme_cold);
  printf("disk hit incl. load, fresh runtime:   %8.3f ms (median of %d)\n", disk, hits);
  printf("memory hit:                           %8.3f us (median of %d batches of %d)\n", mem_us, batches, per);
  printf("8 variants, one after another:        %8.1f ms\n", s8);
  printf("8 variants, clcrt_register_async:     %8.1f ms  (%.2fx, %ld cores, median of %d)\n", p8, s8 / p8, cores,
         reps);
  free(t);
  return 0;
}
