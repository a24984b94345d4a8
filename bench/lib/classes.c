/* Section "classes": the workload classes where a scheduler's fixed costs show.
 *   demo        the README example: x *= 1.5 over 64 Mi floats, one float per thread (1 KiB
 *               tiles): 262144 tiny units; what AUTO must get right;
 *   backtoback  500 runs back to back on one stream, 1024 short tiles each (4 KiB of y = a*x
 *               per tile, 4 MiB per run, which stays in L2): the fixed cost of every run;
 *   prologue    uniform tiles whose CTA needs a 32 KiB shared-memory table, built once per CTA
 *               by the prologue (the hand-written one-block-per-tile kernel builds it per tile,
 *               the persistent reference once per block);
 *   tinypro     tiny uniform tiles behind the same kind of prologue, a whole run of about 80 us
 *               (a case reported at 0.84x STATIC): a 32 KiB table with 1 KiB tiles, an 8 KiB
 *               table with 4 KiB tiles, and tables that fill the SM's shared memory with
 *               exactly 6 or 3 CTAs.
 *               With uniform tiles there is nothing to balance: STEAL's goal is STATIC's time.
 * Ratios are to the best hand-written reference, as elsewhere. */
#include <math.h>
#include <string.h>

#include "bench.h"

extern const char *k_scale_src, *k_scale_ref;

/* ---- demo -------------------------------------------------------------------------- */

#define DEMO_COMMON                                                                         \
  "struct DemoArgs { float *x; long n; float alpha; };\n"                                   \
  "__device__ __forceinline__ void demo_body(unsigned long long tile, const DemoArgs &a) {\n" \
  "  long i = (long)tile * blockDim.x + threadIdx.x;\n"                                      \
  "  if (i < a.n) a.x[i] *= a.alpha;\n"                                                      \
  "}\n"
static const char *k_demo_tile =
    DEMO_COMMON "__device__ void demo_tile(const clcrt::Tile &t, const DemoArgs &a) { demo_body(t.linear, a); }\n";
static const char *k_demo_ref =
    DEMO_COMMON
    "extern \"C\" __global__ void __launch_bounds__(256) ref_block(const __grid_constant__ DemoArgs a) {\n"
    "  demo_body(blockIdx.x, a);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) ref_persist(const __grid_constant__ DemoArgs a, unsigned "
    "long long ntiles) {\n"
    "  for (unsigned long long t = blockIdx.x; t < ntiles; t += gridDim.x) demo_body(t, a);\n"
    "}\n";

static void bench_demo(void) {
  const long n = 64l << 20;
  const unsigned long long ntiles = (unsigned long long)(n + 255) / 256;
  struct {
    CUdeviceptr x;
    long n;
    float alpha;
  } args = {0, n, 1.5f};
  float *hx = malloc(n * 4), *hy = malloc(n * 4);
  unsigned long long seed = 7;
  for (long i = 0; i < n; i++) hx[i] = (float)bench_urand(&seed) - 0.5f;
  CK(cu->cuMemAlloc(&args.x, n * 4));
  printf("\ndemo: x *= 1.5 over %ld floats, one per thread, 256 threads per tile (%llu tiles of 1 KiB)\n", n, ntiles);
  CUlibrary lib = compile_ref(k_demo_ref, NULL, "demo");
  lctx rb = {.fn = lib_fn(lib, "ref_block"), .grid = (unsigned)ntiles, .args = &args, .ntiles = ntiles};
  lctx rp = {.fn = lib_fn(lib, "ref_persist"), .args = &args, .ntiles = ntiles};
  rp.grid = (unsigned)(occupancy_blocks(rp.fn, 256, 0) * clcrt_runtime_num_sms(rt));
  /* One run from fresh data must give x * 1.5 exactly; timing then runs on whatever x holds
   * (finite values: 1.5^35 times a number below 1 stays far from overflow). */
#define CHECK_DEMO(name, launch, ctx)                                  \
  do {                                                                 \
    bench_put(args.x, hx, n * 4);                                      \
    launch(ctx);                                                       \
    CK(cu->cuStreamSynchronize(cs));                                   \
    CK(cu->cuMemcpyDtoH(hy, args.x, n * 4));                           \
    for (long i = 0; i < n; i++)                                       \
      if (hy[i] != hx[i] * 1.5f) {                                     \
        fprintf(stderr, "demo: %s wrong at %ld\n", name, i);           \
        exit(1);                                                       \
      }                                                                \
    bench_put(args.x, hx, n * 4);                                      \
  } while (0)
  CHECK_DEMO("ref-block", launch_ref, &rb);
  double t0 = time_median(launch_ref, &rb);
  CHECK_DEMO("ref-persist", launch_ref, &rp);
  double t1 = time_median(launch_ref, &rp);
  double best = t0 < t1 ? t0 : t1;
  emit("demo", "1KiB", 1, "ref-block", t0, best / t0, 0);
  emit("demo", "1KiB", 1, "ref-persist", t1, best / t1, 0);
  for (int c = 0; c < k_ncontenders; c++) {
    lctx lc = {.k = reg2(k_demo_tile, "demo_tile", "DemoArgs", k_contenders[c].sched, k_contenders[c].grid, 1, NULL,
                         k_contenders[c].define),
               .args = &args,
               .args_size = sizeof args,
               .ntiles = ntiles};
    CHECK_DEMO(k_contenders[c].name, launch_clcrt, &lc);
    double t = time_median(launch_clcrt, &lc);
    emit("demo", "1KiB", 1, k_contenders[c].name, t, best / t, 0);
  }
#undef CHECK_DEMO
  cu->cuLibraryUnload(lib);
  cu->cuMemFree(args.x);
  free(hx), free(hy);
}

/* ---- back-to-back short runs --------------------------------------------------------- */

/* After y was filled with NaN and the runs finished on cs: y must be 1.25 * x everywhere. */
static void b2b_verify(CUdeviceptr y, float *hy, const float *hx, unsigned long long n, const char *how,
                       const char *name) {
  CK(cu->cuStreamSynchronize(cs));
  CK(cu->cuMemcpyDtoH(hy, y, n * 4));
  for (unsigned long long i = 0; i < n; i++)
    if (hy[i] != 1.25f * hx[i]) {
      fprintf(stderr, "backtoback%s: %s wrong at %llu\n", how, name, i);
      exit(1);
    }
}

/* ref_block with clcrt's 128 bytes of scheduler parameters as a second, unused parameter:
 * what the parameter size alone costs a graph's kernel nodes. */
static const char *k_ref_p128 =
    "struct Pad128 { unsigned w[32]; };\n"
    "extern \"C\" __global__ void __launch_bounds__(256) ref_block_p128(const __grid_constant__ ScaleArgs a, "
    "const __grid_constant__ Pad128 pad) {\n"
    "  scale_body(blockIdx.x, a);\n"
    "}\n"
    /* and with the entry FIXED once had (before STEAL round two, docs/results.md): the launched
     * unit from a flag word and the grid's 3-D coordinates (pad.w[4]: flags, bit 1 set; w[5], w[6]:
     * units along x and y) */
    "extern \"C\" __global__ void __launch_bounds__(256) ref_block_entry(const __grid_constant__ ScaleArgs a, "
    "const __grid_constant__ Pad128 pad) {\n"
    "  unsigned u = blockIdx.x;\n"
    "  if (pad.w[4] & 2u) u = blockIdx.x + pad.w[5] * (blockIdx.y + pad.w[6] * blockIdx.z);\n"
    "  scale_body(u, a);\n"
    "}\n";

static unsigned p128_pad[32];
static void launch_ref_p128(void *p) {
  unsigned *pad = p128_pad;
  lctx *c = p;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = c->grid, cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 256, cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = cs;
  void *kp[2] = {c->args, pad};
  CK(cu->cuLaunchKernelEx(&cfg, c->fn, kp, NULL));
}

static void bench_backtoback(void) {
  enum { RUNS = 500, TILES = 1024 };
  const unsigned long long n4 = (unsigned long long)TILES * 256; /* one float4 per thread: 4 KiB tiles */
  struct {
    CUdeviceptr x, y;
    unsigned long long n4;
    float a;
  } args = {0, 0, n4, 1.25f};
  CK(cu->cuMemAlloc(&args.x, n4 * 16));
  CK(cu->cuMemAlloc(&args.y, n4 * 16));
  float *hx = malloc(n4 * 16), *hy = malloc(n4 * 16);
  unsigned long long seed = 11;
  for (unsigned long long i = 0; i < n4 * 4; i++) hx[i] = (float)bench_urand(&seed);
  bench_put(args.x, hx, n4 * 16);
  printf("\nbacktoback: %d runs on one stream, %d tiles of 4 KiB each (y = a*x); time of all %d runs\n", RUNS, TILES,
         RUNS);
  char *src = malloc(strlen(k_scale_ref) + strlen(k_ref_p128) + 1);
  strcat(strcpy(src, k_scale_ref), k_ref_p128);
  CUlibrary lib = compile_ref(src, "-DPER=1", "scale");
  free(src);
  lctx rb = {.fn = lib_fn(lib, "ref_block"), .grid = TILES, .args = &args, .ntiles = TILES};
  lctx rb128 = {.fn = lib_fn(lib, "ref_block_p128"), .grid = TILES, .args = &args, .ntiles = TILES};
  lctx rp = {.fn = lib_fn(lib, "ref_persist"), .args = &args, .ntiles = TILES};
  rp.grid = (unsigned)(occupancy_blocks(rp.fn, 256, 0) * clcrt_runtime_num_sms(rt));
  if (rp.grid > TILES) rp.grid = TILES;
#define CHECK_B2B(name, launch, ctx)                                     \
  do {                                                                   \
    CK(cu->cuMemsetD32Async(args.y, 0x7fc00000u, n4 * 4, cs));            \
    for (int r = 0; r < 3; r++) launch(ctx);                             \
    b2b_verify(args.y, hy, hx, n4 * 4, "", name);                        \
  } while (0)
  /* The same runs captured into one graph and replayed: the GPU's time alone, with no host
   * launch cost in the way (on a stream, 500 launches are bound by the host's launch rate
   * whenever it is slower than the GPU's 3-4 us per run). */
#define GRAPH_B2B(name, launch, ctx, out)                                \
  do {                                                                   \
    CUgraphExec ge;                                                      \
    out = time_graph(launch, ctx, RUNS, 7, &ge);                         \
    CK(cu->cuMemsetD32Async(args.y, 0x7fc00000u, n4 * 4, cs));           \
    CK(cu->cuGraphLaunch(ge, cs));                                       \
    b2b_verify(args.y, hy, hx, n4 * 4, " graph", name);                  \
    CK(cu->cuGraphExecDestroy(ge));                                      \
  } while (0)
  CHECK_B2B("ref-block", launch_ref, &rb);
  double t0 = time_batch(launch_ref, &rb, RUNS, 7), h0 = bench_host_us, g0;
  GRAPH_B2B("ref-block", launch_ref, &rb, g0);
  CHECK_B2B("ref-persist", launch_ref, &rp);
  double t1 = time_batch(launch_ref, &rp, RUNS, 7), h1 = bench_host_us, g1;
  GRAPH_B2B("ref-persist", launch_ref, &rp, g1);
  double g128, gentry;
  GRAPH_B2B("ref-block-p128", launch_ref_p128, &rb128, g128);
  /* What FIXED's and STEAL's short runs paid before STEAL round two: the reference with the
   * entry code they had (the unit's index waits for a flag word, then for the grid's y and z). */
  p128_pad[4] = 2u, p128_pad[5] = TILES, p128_pad[6] = 1;
  lctx rbe = rb128;
  rbe.fn = lib_fn(lib, "ref_block_entry");
  GRAPH_B2B("ref-block-entry", launch_ref_p128, &rbe, gentry);
  printf("  host per launch: ref-block %.2f us, ref-persist %.2f us\n", h0, h1);
  double best = t0 < t1 ? t0 : t1, gbest = g0 < g1 ? g0 : g1;
  emit("backtoback", "500x1024", 1, "ref-block", t0, best / t0, 0);
  emit("backtoback", "500x1024", 1, "ref-persist", t1, best / t1, 0);
  double *gt = calloc((size_t)k_ncontenders, sizeof *gt);
  for (int c = 0; c < k_ncontenders; c++) {
    lctx lc = {.k = reg2(k_scale_src, "scale_tile", "ScaleArgs", k_contenders[c].sched, k_contenders[c].grid, 1,
                         "-DPER=1", k_contenders[c].define),
               .args = &args,
               .args_size = sizeof args,
               .ntiles = TILES};
    CHECK_B2B(k_contenders[c].name, launch_clcrt, &lc);
    double t = time_batch(launch_clcrt, &lc, RUNS, 7), host = bench_host_us;
    GRAPH_B2B(k_contenders[c].name, launch_clcrt, &lc, gt[c]);
    double one = time_median(launch_clcrt, &lc); /* one run alone, events around it */
    emit("backtoback", "500x1024", 1, k_contenders[c].name, t, best / t, 0);
    clcrt_stream_stats ss = CLCRT_STREAM_STATS_INIT;
    if (clcrt_stream_stats_enable(st, 1) != CLCRT_OK) exit(1);
    launch_clcrt(&lc);
    if (clcrt_stream_stats_read(st, &ss) != CLCRT_OK || clcrt_stream_stats_enable(st, 0) != CLCRT_OK) exit(1);
    printf("  %-9s %-8s    %-16s host %.2f us per clcrt_run, GPU %.2f us per run in the batch, %.2f us alone; "
           "%llu clusters, at most %llu units per cluster\n",
           "", "", "", host, t * 1e3 / RUNS, one * 1e3, ss.clusters, ss.max_units_per_cluster);
  }
  printf("  the same %d runs as one graph, replayed (GPU time alone; %.2f and %.2f us per run for the references):\n",
         RUNS, g0 * 1e3 / RUNS, g1 * 1e3 / RUNS);
  emit("b2b-graph", "500x1024", 1, "ref-block", g0, gbest / g0, 0);
  emit("b2b-graph", "500x1024", 1, "ref-persist", g1, gbest / g1, 0);
  for (int c = 0; c < k_ncontenders; c++) emit("b2b-graph", "500x1024", 1, k_contenders[c].name, gt[c], gbest / gt[c], 0);
  printf("  (not a contender: ref-block with clcrt's 128 bytes of scheduler parameters as an unused second parameter)\n");
  emit("b2b-graph", "500x1024", 1, "ref-block-p128", g128, gbest / g128, 0);
  printf("  (nor this: the same with the entry code FIXED and STEAL's short runs once had, the unit behind a "
         "flag word)\n");
  emit("b2b-graph", "500x1024", 1, "ref-block-entry", gentry, gbest / gentry, 0);
  free(gt);
#undef GRAPH_B2B
#undef CHECK_B2B
  cu->cuLibraryUnload(lib);
  cu->cuMemFree(args.x), cu->cuMemFree(args.y);
  free(hx), free(hy);
}

/* ---- a per-CTA table built by the prologue ----------------------------------------------- */

/* Uniform tiles whose CTA needs a table in shared memory: TAB floats (a power of 2, sums of 8
 * sines) built once per CTA by the prologue (the hand-written one-block-per-tile kernel builds
 * it per tile, the persistent one once per block); PER floats per thread, 256 threads: tiles
 * of PER KiB. TAB and PER are #defined ahead of this text (with_defines). */
#define TABLE_COMMON                                                                             \
  "struct TabArgs { const float *x; float *y; unsigned long long n; };\n"                        \
  "__device__ __forceinline__ void build_table(float *tab) {\n"                                  \
  "  for (unsigned k = threadIdx.x; k < TAB; k += blockDim.x) {\n"                               \
  "    float v = 0.f;\n"                                                                         \
  "    for (int j = 1; j <= 8; j++) v += __sinf(k * 0.0007f * j) / j;\n"                          \
  "    tab[k] = v;\n"                                                                            \
  "  }\n"                                                                                        \
  "  __syncthreads();\n"                                                                         \
  "}\n"                                                                                          \
  "__device__ __forceinline__ void table_body(unsigned long long tile, const TabArgs &a, const float *tab) {\n" \
  "  unsigned long long base = tile * (256ull * PER) + threadIdx.x;\n"                            \
  "#pragma unroll\n"                                                                             \
  "  for (int j = 0; j < PER; j++) { unsigned long long i = base + j * 256ull;\n"                 \
  "    if (i < a.n) a.y[i] = a.x[i] * tab[(unsigned)(i * 2654435761u) & (TAB - 1u)]; }\n"         \
  "}\n"
#define TABLE_TILE                                                                               \
  TABLE_COMMON                                                                                   \
  "struct TabState { const float *tab; };\n"                                                     \
  "__device__ void table_prologue(const TabArgs &a, TabState &s) {\n"                            \
  "  float *tab = (float *)clcrt::smem(); build_table(tab); s.tab = tab;\n"                      \
  "}\n"                                                                                          \
  "__device__ void table_tile(const clcrt::Tile &t, const TabArgs &a, TabState &s) { table_body(t.linear, a, s.tab); }\n"
static const char *k_table_src = TABLE_TILE;
/* The share section's: a 32 KiB table, 16 KiB tiles. */
const char *k_table_tile = "#define TAB 8192u\n#define PER 16\n" TABLE_TILE;
static const char *k_table_ref =
    TABLE_COMMON
    "extern \"C\" __global__ void __launch_bounds__(256) ref_block(const __grid_constant__ TabArgs a) {\n"
    "  extern __shared__ float tab[]; build_table(tab); table_body(blockIdx.x, a, tab);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) ref_persist(const __grid_constant__ TabArgs a, unsigned "
    "long long ntiles) {\n"
    "  extern __shared__ float tab[]; build_table(tab);\n"
    "  for (unsigned long long t = blockIdx.x; t < ntiles; t += gridDim.x) table_body(t, a, tab);\n"
    "}\n";

float table_value(unsigned k) {
  float v = 0.f;
  for (int j = 1; j <= 8; j++) v += sinf(k * 0.0007f * j) / j;
  return v;
}

static char *with_defines(const char *src, unsigned tab, unsigned per) {
  char head[64];
  int n = snprintf(head, sizeof head, "#define TAB %uu\n#define PER %u\n", tab, per);
  char *s = malloc((size_t)n + strlen(src) + 1);
  memcpy(s, head, (size_t)n);
  strcpy(s + n, src);
  return s;
}

/* One shape: a table of `tab` floats (a power of 2) in `smem` bytes of shared memory (the rest
 * unused: a table sized to fill an SM with a given number of CTAs), tiles of `per` KiB. */
static void bench_table_case(const char *workload, const char *param, unsigned tab, unsigned smem, unsigned per,
                             unsigned long long ntiles) {
  const unsigned long long n = ntiles * 256 * per;
  struct {
    CUdeviceptr x, y;
    unsigned long long n;
  } args = {0, 0, n};
  CK(cu->cuMemAlloc(&args.x, n * 4));
  CK(cu->cuMemAlloc(&args.y, n * 4));
  float *hx = malloc(n * 4), *hy = malloc(n * 4);
  unsigned long long seed = 17 + per;
  for (unsigned long long i = 0; i < n; i++) hx[i] = (float)bench_urand(&seed);
  bench_put(args.x, hx, n * 4);
  printf("\n%s %s: %llu tiles of %u KiB, each CTA first builds a %u KiB table (sums of 8 sines) in %u bytes of "
         "shared memory\n", workload, param, ntiles, per, tab / 256, smem);
  char *ref_src = with_defines(k_table_ref, tab, per), *tile_src = with_defines(k_table_src, tab, per);
  CUlibrary lib = compile_ref(ref_src, NULL, "table");
  lctx rb = {.fn = lib_fn(lib, "ref_block"), .grid = (unsigned)ntiles, .smem = smem, .args = &args, .ntiles = ntiles};
  lctx rp = {.fn = lib_fn(lib, "ref_persist"), .smem = smem, .args = &args, .ntiles = ntiles};
  occupancy_blocks(rb.fn, 256, smem);
  const int per_sm = occupancy_blocks(rp.fn, 256, smem);
  rp.grid = (unsigned)(per_sm * clcrt_runtime_num_sms(rt));
#define CHECK_TABLE(name, launch, ctx)                                                      \
  do {                                                                                     \
    CK(cu->cuMemsetD32Async(args.y, 0x7fc00000u, n, cs));                                   \
    launch(ctx);                                                                           \
    CK(cu->cuStreamSynchronize(cs));                                                       \
    CK(cu->cuMemcpyDtoH(hy, args.y, n * 4));                                               \
    for (unsigned long long i = 0; i < n; i++) {                                           \
      float want = hx[i] * table_value((unsigned)(i * 2654435761u) & (tab - 1u));          \
      if (!(fabsf(hy[i] - want) <= 2e-3f * (1.f + fabsf(want)))) {                         \
        fprintf(stderr, "%s: %s wrong at %llu: %g, want %g\n", workload, name, i, hy[i], want); \
        exit(1);                                                                           \
      }                                                                                    \
      i += 61; /* every tile, a few elements of it: sines on the CPU are slow */        \
    }                                                                                      \
  } while (0)
  CHECK_TABLE("ref-block", launch_ref, &rb);
  double t0 = time_median(launch_ref, &rb);
  CHECK_TABLE("ref-persist", launch_ref, &rp);
  double t1 = time_median(launch_ref, &rp);
  double best = t0 < t1 ? t0 : t1;
  emit(workload, param, 1, "ref-block", t0, best / t0, 0);
  emit(workload, param, 1, "ref-persist", t1, best / t1, 0);
  printf("  %-9s %-8s    %-16s %d CTAs per SM\n", "", "", "ref-persist", per_sm);
  for (int c = 0; c < k_ncontenders; c++) {
    clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
    d.source = tile_src, d.tile_fn = "table_tile", d.args_type = "TabArgs";
    d.state_type = "TabState", d.prologue_fn = "table_prologue";
    d.block = (clcrt_dim3){256, 1, 1};
    d.smem_bytes = smem;
    d.sched = k_contenders[c].sched, d.grid = k_contenders[c].grid;
    const char *opts[1] = {k_contenders[c].define};
    d.options = opts, d.num_options = k_contenders[c].define ? 1 : 0;
    lctx lc = {.k = reg_desc(&d, "table_tile"), .args = &args, .args_size = sizeof args, .ntiles = ntiles};
    CHECK_TABLE(k_contenders[c].name, launch_clcrt, &lc);
    double t = time_median(launch_clcrt, &lc);
    /* A trace of one more run: its tail and balance (and the timeline, with --traces DIR). */
    char path[512], *q;
    if (trace_dir) {
      snprintf(path, sizeof path, "%s/%s-%s-%s.json", trace_dir, workload, param, k_contenders[c].name);
      for (q = path + strlen(trace_dir) + 1; (q = strchr(q, '/')) != NULL;) *q = '-';
    }
    clcrt_trace_summary sum = CLCRT_TRACE_SUMMARY_INIT;
    emit_traced(workload, param, 1, k_contenders[c].name, t, best / t, 0,
                trace_once(&lc, &sum, trace_dir ? path : NULL) ? &sum : NULL);
    /* The grid it ran on: clusters that got a unit (a persistent grid's are all resident). */
    clcrt_stream_stats ss = CLCRT_STREAM_STATS_INIT;
    if (clcrt_stream_stats_enable(st, 1) != CLCRT_OK) exit(1);
    launch_clcrt(&lc);
    if (clcrt_stream_stats_read(st, &ss) != CLCRT_OK || clcrt_stream_stats_enable(st, 0) != CLCRT_OK) exit(1);
    printf("  %-9s %-8s    %-16s %llu clusters (%.2f per SM), at most %llu units per cluster\n", "", "", "",
           ss.clusters, (double)ss.clusters / clcrt_runtime_num_sms(rt), ss.max_units_per_cluster);
  }
#undef CHECK_TABLE
  free(ref_src), free(tile_src);
  cu->cuLibraryUnload(lib);
  cu->cuMemFree(args.x), cu->cuMemFree(args.y);
  free(hx), free(hy);
}

/* Shapes of the class: two ordinary ones, and tables that fill an SM's shared memory with
 * exactly 6 or 3 CTAs (users size them so): the SM's shared memory over the CTAs, less the
 * 1 KiB the driver reserves per CTA and the 1 KiB the compiler reserves in these kernels
 * (.nv.shared.reserved: clcrt_kernel_info's static_smem). */
static void bench_tinypro(void) {
  int sm_smem = 0, reserved = 0;
  CUdevice dev;
  CK(cu->cuDeviceGet(&dev, 0));
  CK(cu->cuDeviceGetAttribute(&sm_smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev));
  CK(cu->cuDeviceGetAttribute(&reserved, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, dev));
  const unsigned q = quick ? 4 : 1;
  const unsigned fill6 = ((unsigned)(sm_smem / 6 - reserved - 1024)) & ~127u;
  const unsigned fill3 = ((unsigned)(sm_smem / 3 - reserved - 1024)) & ~127u;
  bench_table_case("tinypro", "32KiB/1KiB", 8192, 32768, 1, 98304 / q);
  bench_table_case("tinypro", "8KiB/4KiB", 2048, 8192, 4, 24576 / q);
  bench_table_case("tinypro", "fill6/1KiB", 8192, fill6, 1, 98304 / q);
  bench_table_case("tinypro", "fill3/2KiB", 16384, fill3, 2, 49152 / q);
}

void bench_classes(void) {
  const char *only = getenv("CLCRT_BENCH_CLASS"); /* classes, comma-separated (profiling runs) */
  if (!only || bench_listed(only, "demo")) bench_demo();
  if (!only || bench_listed(only, "backtoback")) bench_backtoback();
  /* The class "prologue": the same kernel with a 32 KiB table and 16 KiB tiles. */
  if (!only || bench_listed(only, "prologue")) bench_table_case("prologue", "32KiB", 8192, 32768, 16, quick ? 16384 : 65536);
  if (!only || bench_listed(only, "tinypro")) bench_tinypro();
}
