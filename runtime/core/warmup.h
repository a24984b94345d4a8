/* NVRTC warm-up during the creation of a device runtime (warmup.c says why and when). */
#ifndef CLCRT_WARMUP_H
#define CLCRT_WARMUP_H

/* Starts the process's warm-up on a background thread, once per process (the caller asks only
 * when its runtime's warmup tunable is on: opts.warmup, CLCRT_WARMUP). Returns 1 when this
 * call started it; the caller must then call clcrt__warmup_stop before it returns to its own
 * caller. */
int clcrt__warmup_start(void);
/* Cancels the warm-up if it is still compiling and joins its thread. */
void clcrt__warmup_stop(void);

/* For tests: how the process's warm-up went. */
typedef struct clcrt__warmup_info {
  int started;   /* a warm-up thread was started */
  int completed; /* its compile finished (not cancelled, not failed) */
  int running;   /* its thread is still alive */
  double ms;     /* from start to the end of its compile */
} clcrt__warmup_info;
void clcrt__warmup_get(clcrt__warmup_info *out);
#endif
