/* Scheduler state in device memory, shared by the runtimes of a process: a stream's two
 * claim lines (stream.c), the context's graph table and preemption words (here). Their
 * layout is part of the ABI (nvrtc_src/clcrt_abi.h); how runs use them is described once,
 * with the device code: nvrtc_src/clcrt_steal.cuh (claim lines), clcrt_variant.cuh (the
 * graph table, preemption).
 * Preemption words: CLCRT__YIELD_SLOTS 32-bit words; a stream of priority level L > 0 owns
 * one and writes L there (cuStreamWriteValue32) while its urgent work runs, 0 after. */
#ifndef CLCRT_SCHED_STATE_H
#define CLCRT_SCHED_STATE_H
#include "internal.h"

#define CLCRT__STREAM_STATE_BYTES (2u * CLCRT__LINE_WORDS * 4u)
#define CLCRT__TABLE_BYTES ((size_t)(CLCRT__LINE_WORDS + CLCRT__TABLE_SLOTS * CLCRT__SLOT_WORDS) * 4u)
#define CLCRT__YIELD_SLOTS 32u
#define CLCRT__MAX_LEVEL 7u

/* One per CUDA context (the primary context of a device), shared by every runtime of the
 * process on that context, so that two runtimes preempt each other's runs. */
typedef struct clcrt__devstate {
  CUcontext ctx;
  int refs;                          /* runtimes using it; guarded by the registry lock */
  CUdeviceptr table;                 /* graph claim table, CLCRT__TABLE_BYTES, zeroed */
  CUdeviceptr yield;                 /* CLCRT__YIELD_SLOTS words, zeroed */
  unsigned next_slot;                /* yield slots handed out round-robin */
  int live[CLCRT__MAX_LEVEL + 1];    /* live streams per priority level */
  struct clcrt__devstate *next;
} clcrt__devstate;

/* Finds or makes the state of rt's context (device memory allocated and zeroed once). */
clcrt_status clcrt__devstate_acquire(clcrt_runtime *rt);
void clcrt__devstate_release(clcrt_runtime *rt);

/* A stream of priority level `level` came (returns its yield slot; none for level 0) or went. */
unsigned clcrt__devstate_stream_add(clcrt__devstate *d, unsigned level);
void clcrt__devstate_stream_remove(clcrt__devstate *d, unsigned level);
/* Whether a live stream of a level above `level` exists: only then can a run be preempted. */
int clcrt__devstate_higher(const clcrt__devstate *d, unsigned level);
/* Whether live streams of two different levels exist: runs of some of them can be preempted. */
int clcrt__devstate_mixed(const clcrt__devstate *d);

/* Long units (launch.c): CLCRT__HINT_WORDS words of mapped host memory, zeroed, for a kernel's
 * measured cycles per unit, at *host and (for the device) *dev. Taken from the runtime's
 * pages (allocated CLCRT__HINT_PAGE bytes at a time); call with rt->lock held. Returns NULL,
 * or why none could be had (nothing changed; no error is recorded). */
const char *clcrt__hint_slot(clcrt_runtime *rt, const volatile uint32_t **host, uint64_t *dev);
/* Frees the runtime's pages (runtime destroy). */
void clcrt__hint_free(clcrt_runtime *rt);

/* Zeroes device memory with a synchronous copy (not a memset on the legacy stream, which a
 * non-blocking stream would not be ordered after). For set-up only, never per run. */
clcrt_status clcrt__zero_device(clcrt_runtime *rt, CUdeviceptr p, size_t bytes);
/* Copies host bytes to the device and returns once they have landed (complete before any
 * later launch on any stream). */
clcrt_status clcrt__put_device(clcrt_runtime *rt, CUdeviceptr p, const void *src, size_t bytes);
#endif
