/* Section "trace": what tracing costs. A workload's tile function is registered
 * twice, once with tracing compiled out (-DCLCRT_TRACE=0) and once as every kernel is built;
 * the second is timed with tracing off and on (every tile recorded, the buffer large enough
 * for every timed run). Since kernels are built without trace code and traced runs launch
 * the observed variant (CLCRT_USE_TRACE), "out" and "off" run the same code: their difference
 * is the noise of the measurement, and "on" is the whole cost of a traced run. Rounds
 * alternate the three so that clock drift falls on all of them alike; each figure is the median over the
 * rounds of the per-round medians. The workloads are in scale.c and work.c
 * (bench_trace_scale, bench_trace_work), which also save the README's timelines. */
#include "bench.h"

static double median(double *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double t = v[j];
      v[j] = v[j - 1], v[j - 1] = t;
    }
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void trace_overhead(const char *workload, const char *who, unsigned cl, lctx *out, lctx *in) {
  enum { ROUNDS = 7 };
  double t_out[ROUNDS], t_off[ROUNDS], t_on[ROUNDS];
  const int rounds = quick ? 3 : ROUNDS;
  clcrt_stream *s = in->s ? in->s : st;
  const size_t runs = WARMUP + REPS;
  unsigned long long kept = 0, dropped = 0;
  for (int r = 0; r < rounds; r++) {
    t_out[r] = time_median(launch_clcrt, out);
    t_off[r] = time_median(launch_clcrt, in);
    if (clcrt_stream_trace_enable(s, runs * (size_t)in->ntiles + 65536) != CLCRT_OK) {
      fprintf(stderr, "trace: %s\n", clcrt_errmsg(rt));
      exit(1);
    }
    t_on[r] = time_median(launch_clcrt, in);
    clcrt_trace *tr = NULL;
    if (clcrt_stream_trace_read(s, &tr) != CLCRT_OK) {
      fprintf(stderr, "trace: %s\n", clcrt_errmsg(rt));
      exit(1);
    }
    size_t n = 0;
    clcrt_trace_records(tr, &n);
    kept += n, dropped += clcrt_trace_dropped(tr);
    if (n != runs * in->ntiles) {
      fprintf(stderr, "trace %s %s: %zu records for %zu runs of %llu tiles (%llu dropped)\n", workload, who, n, runs,
              in->ntiles, clcrt_trace_dropped(tr));
      exit(1);
    }
    clcrt_trace_destroy(tr);
    clcrt_stream_trace_enable(s, 0);
  }
  double mo = median(t_out, rounds), mf = median(t_off, rounds), mn = median(t_on, rounds);
  printf("  trace     %-9s c%u %-7s compiled out %8.4f ms  off %8.4f ms (%+5.2f%%)  on %8.4f ms (%+5.2f%% vs off)  "
         "%llu records\n",
         workload, cl, who, mo, mf, 100 * (mf / mo - 1), mn, 100 * (mn / mf - 1), kept);
  emit_json("\"workload\":\"trace\",\"class\":\"%s\",\"cluster\":%u,\"contender\":\"%s\",\"out_ms\":%.5f,"
            "\"off_ms\":%.5f,\"on_ms\":%.5f,\"off_pct\":%.3f,\"on_pct\":%.3f,\"records\":%llu,\"dropped\":%llu",
            workload, cl, who, mo, mf, mn, 100 * (mf / mo - 1), 100 * (mn / mf - 1), kept, dropped);
}

void bench_trace(void) {
  printf("\ntrace: tracing compiled out (-DCLCRT_TRACE=0), off (the default variant: the same code), and on (the "
         "observed variant); "
         "median of per-round medians\n");
  bench_trace_scale();
  bench_trace_work();
}
