/* The headers a compile read, from NVRTC's time trace (cache/deps.h says why and what is
 * done with them). A compile that wants them (clcrt__build.want_deps) gets a private
 * directory for the trace, one trace file per attempt: ptxas merges into an existing
 * trace file and fails on one from an earlier compile, so names are never reused. */
#ifndef CLCRT_HEADERS_H
#define CLCRT_HEADERS_H
#include <limits.h>
#include <time.h>

#include "internal.h"

typedef struct clcrt__hdr_trace {
  char dir[PATH_MAX];          /* "" when there is none */
  char opt[2][PATH_MAX + 40];  /* --fdevice-time-trace=<dir>/t<attempt> */
  struct timespec started[2]; /* CLOCK_REALTIME before each attempt */
} clcrt__hdr_trace;

/* Makes the directory. 0 on success; else -1 with b->deps_why set (the compile goes on,
 * uncached). */
int clcrt__hdr_trace_begin(clcrt__hdr_trace *t, clcrt__build *b);
/* Reads the trace of attempt (0 or 1) into b->deps, or says why not in b->deps_why. */
void clcrt__hdr_trace_collect(clcrt_runtime *rt, clcrt__hdr_trace *t, int attempt, clcrt__build *b);
/* Removes the directory and what NVRTC wrote in it. */
void clcrt__hdr_trace_end(clcrt__hdr_trace *t);
#endif
