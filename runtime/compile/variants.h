/* A registered kernel's variants (CLCRT_USE_* bits): which are built, their occupancy, what runs of
 * the kernel count, and the background builds asked for. register.c builds variants (now, for
 * clcrt_kernel_variant, clcrt_kernel_prepare and the observed variant of tracing), builder.c in
 * the background for runs (launch.c asks, never waits). */
#ifndef CLCRT_VARIANTS_H
#define CLCRT_VARIANTS_H
#include "internal.h"

/* Behind a pointer from the registered kernel and from each of its variants: runs and variant
 * builds update it through a const clcrt_kernel *, which is honest C (the fields of the handle
 * itself never change once it is handed out). */
typedef struct clcrt__variants {
  unsigned ready;                           /* bit v: var[v] is built and occ[v] set (atomic, release) */
  unsigned requested;                       /* bit v: a background build of v was asked for (atomic) */
  unsigned hw_runs;                         /* runs that could have gone one cluster per unit (racy count; launch.c) */
  struct clcrt_kernel *var[CLCRT__VARIANTS]; /* by bits, once built (atomic); var[0] the registered kernel */
  clcrt__occ occ[CLCRT__VARIANTS];
  /* The background builder's queue (builder.c), guarded by rt->lock. */
  unsigned pending;                         /* bit v: queued for a build */
  struct clcrt_kernel *next_queued;         /* the queue, through registered kernels */
  int queued;
} clcrt__variants;

/* Calls fn on every registered kernel of rt that is ready (not the variants), until fn fails;
 * returns the first failure. fn runs with no lock held; kernels registered meanwhile may be
 * missed (registration sees to their own variants). */
clcrt_status clcrt__registered_each(clcrt_runtime *rt, clcrt_status (*fn)(const clcrt_kernel *k, void *arg),
                                    void *arg);
/* A stream of rt is about to record a trace or statistics: rt->observing is raised (so that
 * kernels registered from now on get their observed variant too), then every registered kernel
 * gets its observed variant now, synchronously, so that no traced run lacks it; where runs can
 * be preempted, the observed yielding variants follow in the background. On failure the count
 * is lowered again. clcrt__observe_release lowers it once the stream's own count is set. */
clcrt_status clcrt__observe_hold(clcrt_runtime *rt);
void clcrt__observe_release(clcrt_runtime *rt);
/* Streams of two priority levels live on the device (clcrt_stream_create, clcrt_register):
 * the yielding variants (observed ones too while a stream observes) in the background. */
void clcrt__variants_preemptible(clcrt_runtime *rt, const clcrt_kernel *k);
#endif
