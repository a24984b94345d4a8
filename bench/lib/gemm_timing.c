/* Timing for the GEMM benchmark (bench/bench_gemm.c), with CUDA events on one stream.
 *
 * Two figures per contender, because they answer different questions:
 *   rounds        every contender once per round, the stream idle between runs: the
 *                 contenders of a shape share the card's clock and temperature changes
 *                 instead of taking turns at them (how this benchmark has always compared);
 *   back to back  one contender's runs queued one after another between one event pair, as
 *                 a user's loop or a layer stack runs them: no idle gap before each run, so a
 *                 short kernel is timed without the launch latency the rounds put in front of
 *                 it, and without the clock ramp that an idle gap lets down. If the host
 *                 queues a run more slowly than the GPU executes it, the batch measures the
 *                 host: the host's time per run is reported beside it for that reason. (Once
 *                 the driver's launch queue is full, about a thousand launches, the host waits
 *                 for the GPU and its time per run approaches the GPU's; a host time well
 *                 below the batch's time per run says the host kept ahead.)
 * The host's clock here is CLOCK_MONOTONIC. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gemm_bench.h"

#define TCK(t, x)                                                                          \
  do {                                                                                     \
    CUresult r_ = (x);                                                                     \
    if (r_ != CUDA_SUCCESS) {                                                              \
      const char *s_ = NULL;                                                               \
      (t)->cu->cuGetErrorName(r_, &s_);                                                    \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?");    \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
/* Sorts v. */
static double median_of(double *v, int n) {
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bgemm_time_rounds(const bgemm_timer *t, bgemm_timed *c, int n) {
  const int reps = t->reps;
  CUevent e0, e1;
  TCK(t, t->cu->cuEventCreate(&e0, 0));
  TCK(t, t->cu->cuEventCreate(&e1, 0));
  double *ms = malloc(sizeof(double) * (size_t)n * (size_t)reps);
  if (!ms) {
    fprintf(stderr, "bgemm_time_rounds: out of memory\n");
    exit(1);
  }
  for (int r = 0; r < t->warmup + reps; r++)
    for (int i = 0; i < n; i++) {
      TCK(t, t->cu->cuEventRecord(e0, t->cs));
      c[i].fn(c[i].ctx);
      TCK(t, t->cu->cuEventRecord(e1, t->cs));
      TCK(t, t->cu->cuEventSynchronize(e1));
      float f;
      TCK(t, t->cu->cuEventElapsedTime(&f, e0, e1));
      if (r >= t->warmup) ms[(size_t)i * reps + (r - t->warmup)] = f;
    }
  for (int i = 0; i < n; i++) {
    c[i].ms = median_of(ms + (size_t)i * reps, reps);
    c[i].min = ms[(size_t)i * reps];
  }
  free(ms);
  t->cu->cuEventDestroy(e0), t->cu->cuEventDestroy(e1);
}

void bgemm_time_b2b(const bgemm_timer *t, bgemm_timed *c, int n, int runs) {
  enum { REPS = BGEMM_B2B_REPS };
  CUevent e0, e1;
  TCK(t, t->cu->cuEventCreate(&e0, 0));
  TCK(t, t->cu->cuEventCreate(&e1, 0));
  double *ms = malloc(sizeof(double) * (size_t)n * REPS), *host = malloc(sizeof(double) * (size_t)n * REPS);
  if (!ms || !host) {
    fprintf(stderr, "bgemm_time_b2b: out of memory\n");
    exit(1);
  }
  for (int r = 0; r < BGEMM_B2B_WARMUP + REPS; r++)
    for (int i = 0; i < n; i++) {
      /* One run ahead of the first event: the batch starts on a busy GPU, as it would in the
       * middle of a loop, not with the host's first enqueue in front of it. */
      c[i].fn(c[i].ctx);
      TCK(t, t->cu->cuEventRecord(e0, t->cs));
      const double h0 = now_us();
      for (int j = 0; j < runs; j++) c[i].fn(c[i].ctx);
      const double h1 = now_us();
      TCK(t, t->cu->cuEventRecord(e1, t->cs));
      TCK(t, t->cu->cuEventSynchronize(e1));
      float f;
      TCK(t, t->cu->cuEventElapsedTime(&f, e0, e1));
      if (r >= BGEMM_B2B_WARMUP) {
        ms[(size_t)i * REPS + (r - BGEMM_B2B_WARMUP)] = f / runs;
        host[(size_t)i * REPS + (r - BGEMM_B2B_WARMUP)] = (h1 - h0) / runs;
      }
    }
  for (int i = 0; i < n; i++) {
    c[i].b2b_ms = median_of(ms + (size_t)i * REPS, REPS);
    c[i].b2b_min = ms[(size_t)i * REPS];
    c[i].host_us = median_of(host + (size_t)i * REPS, REPS);
  }
  free(ms), free(host);
  t->cu->cuEventDestroy(e0), t->cu->cuEventDestroy(e1);
}

int bgemm_b2b_runs(double ms_per_run) {
  if (!(ms_per_run > 0)) return 1;
  double r = BGEMM_B2B_MS / ms_per_run;
  return r < 1 ? 1 : r > 4096 ? 4096 : (int)(r + 0.999);
}
