/* Section "work": compute tiles of unequal cost. Each tile is 256 threads running a chain of
 * dependent FMAs whose length comes from a per-tile cost table, so every class of workload
 * runs the same code:
 *   skew       about 5% of the tiles cost 50x the others (expert loads, early exits);
 *   ramp       tile i costs in proportion to i;
 *   lognormal  heavy-tailed random costs, lognormal with sigma 1 (skewed expert loads);
 *   lognormal1.5  the same with sigma 1.5 (a heavier tail than the benchmark measured before);
 *   triangle   causal-attention rows: row r costs r + 1, fewer and longer tiles;
 *   uniform    equal costs (FIXED against the hand-written kernel: code generation);
 * at cluster sizes 1, 2 and 4 where the class is about clusters. After its time, each clcrt
 * contender's row shows the tail, imbalance and mean busy fraction of one traced run. The references are the same
 * tile body as a hand-written one-block-per-tile kernel and a grid-stride persistent kernel.
 * Outputs are checked against the CPU on a sample of tiles (every tile is checked for NaN:
 * the output is poisoned first). */
#include <math.h>
#include <string.h>

#include "bench.h"

#define WORK_COMMON                                                                              \
  "struct WorkArgs { float *out; const unsigned *cost; unsigned long long ntiles; };\n"          \
  "__device__ __forceinline__ void work_body(unsigned long long i, const WorkArgs &a) {\n"       \
  "  unsigned n = a.cost[i];\n"                                                                  \
  "  float v = __fadd_rn(__fmul_rn((float)threadIdx.x, 1e-3f), (float)(i % 1024));\n"            \
  "#pragma unroll 8\n"                                                                           \
  "  for (unsigned k = 0; k < n; k++) v = fmaf(v, 0.99990f, 0.00013f);\n"                         \
  "  a.out[i * blockDim.x + threadIdx.x] = v;\n"                                                 \
  "}\n"

const char *k_work_tile =
    WORK_COMMON "__device__ void work_tile(const clcrt::Tile &t, const WorkArgs &a) { work_body(t.linear, a); }\n";
static const char *k_work_ref =
    WORK_COMMON
    "extern \"C\" __global__ void __launch_bounds__(256) ref_block(const __grid_constant__ WorkArgs a) {\n"
    "  work_body(blockIdx.x, a);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) ref_persist(const __grid_constant__ WorkArgs a, unsigned "
    "long long ntiles) {\n"
    "  for (unsigned long long t = blockIdx.x; t < ntiles; t += gridDim.x) work_body(t, a);\n"
    "}\n";

typedef struct {
  CUdeviceptr out, cost;
  unsigned long long ntiles;
} WorkArgs;

float work_value(unsigned long long i, unsigned tid, unsigned n) {
  float v = tid * 1e-3f + (float)(i % 1024);
  for (unsigned k = 0; k < n; k++) v = fmaf(v, 0.99990f, 0.00013f);
  return v;
}

const char *const k_class_names[NCLASSES] = {"skew", "ramp", "lognormal", "triangle", "uniform", "lognormal1.5"};

/* The cost table of a class: FMAs per thread for each tile. */
unsigned *make_costs(int cls, unsigned long long n, unsigned base) {
  unsigned *c = malloc(n * sizeof *c);
  unsigned long long seed = 0x9E3779B97F4A7C15ull + (unsigned long long)cls;
  for (unsigned long long i = 0; i < n; i++) {
    double v = base;
    switch (cls) {
      case SKEW: {
        unsigned h = (unsigned)i * 2654435761u;
        h ^= h >> 15;
        v = (h % 20u == 0) ? 50.0 * base : base;
        break;
      }
      case RAMP:
      case TRIANGLE: v = 2.0 * base * (double)(i + 1) / (double)n; break;
      case LOGNORMAL:
      case LOGNORMAL15: {
        /* exp(sigma z - sigma^2 / 2): mean 1 */
        const double sigma = cls == LOGNORMAL ? 1.0 : 1.5;
        double u1 = bench_urand(&seed), u2 = bench_urand(&seed);
        double z = sqrt(-2.0 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2);
        v = base * exp(sigma * z - 0.5 * sigma * sigma);
        break;
      }
      default: break;
    }
    c[i] = v < 1 ? 1u : v > 4e8 ? 400000000u : (unsigned)v;
  }
  return c;
}

static void run_class(int cls, unsigned long long ntiles, unsigned base, const unsigned *clusters, int nclusters) {
  unsigned *hc = make_costs(cls, ntiles, base);
  unsigned long long total = 0;
  unsigned cmax = 0;
  for (unsigned long long i = 0; i < ntiles; i++) total += hc[i], cmax = hc[i] > cmax ? hc[i] : cmax;
  printf("\n%s: %llu tiles x 256 threads, mean %.0f dependent FMAs per thread, max %u\n", k_class_names[cls], ntiles,
         (double)total / (double)ntiles, cmax);
  float *hy = malloc(ntiles * 256 * 4);
  WorkArgs args = {0, 0, ntiles};
  CK(cu->cuMemAlloc(&args.out, ntiles * 256 * 4));
  CK(cu->cuMemAlloc(&args.cost, ntiles * 4));
  bench_put(args.cost, hc, ntiles * 4);
  CUlibrary lib = compile_ref(k_work_ref, NULL, "work");
  lctx rb = {.fn = lib_fn(lib, "ref_block"), .grid = (unsigned)ntiles, .args = &args, .ntiles = ntiles};
  lctx rp = {.fn = lib_fn(lib, "ref_persist"), .args = &args, .ntiles = ntiles};
  rp.grid = (unsigned)(occupancy_blocks(rp.fn, 256, 0) * clcrt_runtime_num_sms(rt));
  const char *who = k_class_names[cls];
  /* Checks the output of the launch just made: NaN anywhere, or a sampled value wrong. */
#define CHECK_OUTPUT(name)                                                                               \
  do {                                                                                                   \
    CK(cu->cuStreamSynchronize(cs));                                                                     \
    CK(cu->cuMemcpyDtoH(hy, args.out, ntiles * 256 * 4));                                                \
    for (unsigned long long i = 0; i < ntiles; i++)                                                      \
      for (unsigned t = 0; t < 256; t += 51)                                                             \
        if (!(hy[i * 256 + t] == hy[i * 256 + t]) ||                                                     \
            (i % 97 == 0 && t == 51 && hy[i * 256 + t] != work_value(i, t, hc[i]))) {                   \
          fprintf(stderr, "%s: %s wrong at tile %llu\n", who, name, i);                                  \
          exit(1);                                                                                       \
        }                                                                                                \
  } while (0)
  lctx *refs[2] = {&rb, &rp};
  const char *ref_names[2] = {"ref-block", "ref-persist"};
  double tref[2];
  for (int r = 0; r < 2; r++) {
    CK(cu->cuMemsetD32Async(args.out, 0x7fc00000u, ntiles * 256, cs));
    launch_ref(refs[r]);
    CHECK_OUTPUT(ref_names[r]);
    tref[r] = time_median(launch_ref, refs[r]);
  }
  double best = tref[0] < tref[1] ? tref[0] : tref[1];
  emit(who, "-", 1, "ref-block", tref[0], best / tref[0], 0);
  emit(who, "-", 1, "ref-persist", tref[1], best / tref[1], 0);
  for (int ci = 0; ci < nclusters; ci++)
    for (int c = 0; c < k_ncontenders; c++) {
      unsigned cl = clusters[ci];
      lctx lc = {.k = reg2(k_work_tile, "work_tile", "WorkArgs", k_contenders[c].sched, k_contenders[c].grid, cl, NULL,
                           k_contenders[c].define),
                 .args = &args,
                 .args_size = sizeof args,
                 .ntiles = ntiles};
      CK(cu->cuMemsetD32Async(args.out, 0x7fc00000u, ntiles * 256, cs));
      launch_clcrt(&lc);
      CHECK_OUTPUT(k_contenders[c].name);
      double t = time_median(launch_clcrt, &lc);
      clcrt_trace_summary sum = CLCRT_TRACE_SUMMARY_INIT;
      emit_traced(who, "-", cl, k_contenders[c].name, t, best / t, 0, trace_once(&lc, &sum, NULL) ? &sum : NULL);
    }
  /* The references once more, after every contender: how far the card's clocks drifted over
   * the section (compute tiles heat it up; the contenders that run last would pay for it). */
  for (int r = 0; r < 2; r++) {
    double again = time_median(launch_ref, refs[r]);
    printf("  %-9s %-8s %-2s %-18s %8.4f ms  (%+.1f%% against its first time)\n", who, "-", "c1",
           r ? "ref-persist again" : "ref-block again", again, 100.0 * (again / tref[r] - 1.0));
    emit_json("\"workload\":\"%s\",\"contender\":\"%s again\",\"median_ms\":%.5f,\"first_ms\":%.5f", who,
              ref_names[r], again, tref[r]);
  }
#undef CHECK_OUTPUT
  cu->cuLibraryUnload(lib);
  cu->cuMemFree(args.out);
  cu->cuMemFree(args.cost);
  free(hy);
  free(hc);
}

void bench_work(void) {
  const unsigned long long n = quick ? 4000 : 20000;
  static const unsigned c124[] = {1, 2, 4}, c12[] = {1, 2}, c1[] = {1};
  const char *only = getenv("CLCRT_BENCH_CLASS"); /* classes, comma-separated (profiling runs) */
  printf("\ncompute tiles of unequal cost (ratio: best hand-written reference / contender)\n");
#define CLASS(c) (!only || bench_listed(only, k_class_names[c]))
  if (CLASS(SKEW)) run_class(SKEW, n, 1000, c124, 3);
  if (CLASS(RAMP)) run_class(RAMP, n, 1000, c124, 3);
  if (CLASS(LOGNORMAL)) run_class(LOGNORMAL, n, 1000, c12, 2);
  if (CLASS(TRIANGLE)) run_class(TRIANGLE, quick ? 2048 : 4096, 4000, c1, 1);
  if (CLASS(UNIFORM)) run_class(UNIFORM, n, 1000, c1, 1);
  if (CLASS(LOGNORMAL15)) run_class(LOGNORMAL15, n, 1000, c12, 2);
#undef CLASS
}

/* Section "armed": what it costs that STEAL runs may be preempted when nothing urgent comes.
 * The same workloads with STEAL as AUTO chooses it, first with no stream of higher priority
 * (a persistent grid), then while one exists (a full grid that checks the preemption words
 * between claims); the ratio is the first time over the second. */
/* One workload armed and not: not armed, armed (a stream of the highest priority exists,
 * nothing runs on it), not armed again; the ratio takes the better of the two not-armed
 * times. */
void armed_pair(const char *what, const char *param, lctx *lc) {
  int least = 0, greatest = 0;
  CK(cu->cuCtxGetStreamPriorityRange(&least, &greatest));
  if (clcrt_kernel_prepare(lc->k, CLCRT_USE_PREEMPT) != CLCRT_OK) exit(1); /* armed runs yield: built now */
  double t_off = time_median(launch_clcrt, lc);
  CUstream chi;
  clcrt_stream *hi;
  CK(cu->cuStreamCreateWithPriority(&chi, CU_STREAM_NON_BLOCKING, greatest));
  if (clcrt_stream_create(rt, chi, &hi) != CLCRT_OK) exit(1);
  double t_on = time_median(launch_clcrt, lc);
  clcrt_stream_destroy(hi);
  cu->cuStreamDestroy(chi);
  double t_off2 = time_median(launch_clcrt, lc);
  double off = t_off < t_off2 ? t_off : t_off2;
  printf("  armed     %-9s %-5s not armed %8.4f ms (again %8.4f)  armed %8.4f ms  armed / not armed %.3fx\n", what,
         param, t_off, t_off2, t_on, off / t_on);
  emit_json("\"workload\":\"armed\",\"class\":\"%s\",\"param\":\"%s\",\"off_ms\":%.5f,\"off2_ms\":%.5f,\"on_ms\":%.5f",
            what, param, t_off, t_off2, t_on);
}

void bench_armed(void) {
  static const int classes[] = {UNIFORM, SKEW, LOGNORMAL};
  const unsigned long long n = quick ? 4000 : 20000;
  printf("\narmed: STEAL with no stream of higher priority, and with one (nothing runs on it)\n");
  for (size_t ci = 0; ci < sizeof classes / sizeof classes[0]; ci++) {
    int cls = classes[ci];
    unsigned *hc = make_costs(cls, n, 1000);
    WorkArgs args = {0, 0, n};
    CK(cu->cuMemAlloc(&args.out, n * 256 * 4));
    CK(cu->cuMemAlloc(&args.cost, n * 4));
    bench_put(args.cost, hc, n * 4);
    lctx lc = {.k = reg2(k_work_tile, "work_tile", "WorkArgs", CLCRT_SCHED_AUTO, CLCRT_GRID_AUTO, 1, NULL, NULL),
               .args = &args,
               .args_size = sizeof args,
               .ntiles = n};
    armed_pair(k_class_names[cls], "c1", &lc);
    cu->cuMemFree(args.out), cu->cuMemFree(args.cost);
    free(hc);
  }
  bench_armed_scale();
}

/* Tracing's cost on the skewed mix (trace.c), and the README's timelines: one traced run of
 * the skewed mix under STEAL and under STATIC, saved as JSON in --traces DIR. */
void bench_trace_work(void) {
  const unsigned long long n = quick ? 4000 : 20000;
  unsigned *hc = make_costs(SKEW, n, 1000);
  WorkArgs args = {0, 0, n};
  CK(cu->cuMemAlloc(&args.out, n * 256 * 4));
  CK(cu->cuMemAlloc(&args.cost, n * 4));
  bench_put(args.cost, hc, n * 4);
  static const clcrt_sched scheds[] = {CLCRT_SCHED_AUTO, CLCRT_SCHED_STATIC};
  static const char *const names[] = {"steal", "static"};
  for (int i = 0; i < 2; i++) {
    lctx out = {.k = reg2(k_work_tile, "work_tile", "WorkArgs", scheds[i], CLCRT_GRID_AUTO, 1, "-DCLCRT_TRACE=0", NULL),
                .args = &args,
                .args_size = sizeof args,
                .ntiles = n};
    lctx in = out;
    in.k = reg2(k_work_tile, "work_tile", "WorkArgs", scheds[i], CLCRT_GRID_AUTO, 1, NULL, NULL);
    trace_overhead("skew", names[i], 1, &out, &in);
    clcrt_trace_summary sum = CLCRT_TRACE_SUMMARY_INIT;
    char path[512];
    snprintf(path, sizeof path, "%s/trace_skew_%s.json", trace_dir ? trace_dir : ".", names[i]);
    if (trace_once(&in, &sum, trace_dir ? path : NULL))
      printf("  timeline  skew      c1 %-7s %llu tiles, %llu stolen, span %.1f us, tail %.1f us, imbalance %.3f, "
             "busy %.3f%s%s\n",
             names[i], sum.tiles, sum.steals, sum.span_ns / 1e3, sum.tail_ns / 1e3, sum.imbalance, sum.busy_mean,
             trace_dir ? ", saved to " : "", trace_dir ? path : "");
  }
  cu->cuMemFree(args.out), cu->cuMemFree(args.cost);
  free(hc);
}
