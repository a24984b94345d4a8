/* Background builds of kernel variants: one worker thread per runtime, so that no run ever
 * compiles (runtime/launch/plan.c says what a run launches until its variant is built). */
#ifndef CLCRT_BUILDER_H
#define CLCRT_BUILDER_H
#include "internal.h"

/* Starts the runtime's worker thread if it has none (the first stream does: a runtime runs
 * nothing without one, and a thread started here costs no run its start-up). Idempotent. A
 * thread that cannot be started is logged; runs then keep their fallbacks. */
void clcrt__builder_start(clcrt_runtime *rt);
/* Asks for variant v (CLCRT_USE_* bits) of the registered kernel k0 to be built in the
 * background. Returns at once: a load when v was asked for before; else a short lock, and with
 * `wake` a wake-up of the worker (a system call: runs pass 0, and the worker finds their
 * requests within its poll). A variant asked for once is never asked for again (a failed
 * build is logged; clcrt_kernel_prepare still builds it, synchronously). */
void clcrt__builder_request(const clcrt_kernel *k0, unsigned v, int wake);
/* The same for every registered kernel of rt that has code for v (STEAL kernels for the STEAL
 * bits), and that is not on an explicitly persistent grid when v has CLCRT_USE_PREEMPT (such a
 * grid never yields). */
void clcrt__builder_request_all(clcrt_runtime *rt, unsigned v);
/* Waits until no build is queued or running (tests, and callers that time things). */
void clcrt__builder_wait(clcrt_runtime *rt);
/* Drops the builds still queued, waits for the one running, ends the thread (runtime
 * destroy, before any kernel is freed). */
void clcrt__builder_stop(clcrt_runtime *rt);
#endif
