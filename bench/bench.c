/* `make bench`: clcrt's schedulers side by side with hand-written reference kernels, in one
 * process on the GPU. The sections live in bench/lib/ (each file's comment says what it
 * measures): scale (uniform memory-bound tiles), work (compute tiles of unequal cost: skew,
 * ramp, lognormal, triangle, uniform), classes (the README demo, back-to-back short runs, a
 * per-CTA table built by the prologue), preempt (an urgent kernel's latency behind a long
 * run), armed (what being preemptible costs), trace (tracing's cost and what it shows),
 * overhead (host cost of clcrt_run), share (streams with an SM budget: scaling, the grid a
 * budget gets, a GEMM overlapped with a communication-like copy; bench/lib/share.c) and
 * firstrun (the host time of the first run that needs a variant, against later runs).
 * Usage: bench [--json FILE] [--quick] [--dump DIR] [--traces DIR] [--only SECTION[,SECTION...]] */
#include <stdio.h>
#include <string.h>

#include "lib/bench.h"

static int wanted(const char *only, const char *name) {
  if (!only) return 1;
  size_t n = strlen(name);
  for (const char *p = only; (p = strstr(p, name)) != NULL; p += n)
    if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
  return 0;
}

int main(int argc, char **argv) {
  /* Line by line into a file too: a run stopped by a time limit keeps the rows it printed. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *json_path = NULL, *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else if (!strcmp(argv[i], "--traces") && i + 1 < argc)
      trace_dir = argv[++i];
    else if (!strcmp(argv[i], "--dump") && i + 1 < argc)
      dump_dir = argv[++i];
    else {
      fprintf(stderr, "usage: bench [--json FILE] [--quick] [--dump DIR] [--traces DIR] [--only "
                      "scale,work,classes,preempt,armed,trace,overhead,share,firstrun]\n");
      return 2;
    }
  }
  bench_open(json_path);
  if (wanted(only, "classes")) bench_classes();
  if (wanted(only, "scale")) bench_scale();
  if (wanted(only, "work")) bench_work();
  if (wanted(only, "preempt")) bench_preempt();
  if (wanted(only, "armed")) bench_armed();
  if (wanted(only, "trace")) bench_trace();
  if (wanted(only, "overhead")) bench_overhead();
  if (wanted(only, "share")) bench_share();
  if (wanted(only, "firstrun")) bench_firstrun();
  bench_close();
  return 0;
}
