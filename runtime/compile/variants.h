/* A registered kernel's variants (CLCRT__V_*): which are built, their occupancy, what runs of
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
  struct clcrt_kernel *var[CLCRT__V_COUNT]; /* by bits, once built (atomic); var[0] the registered kernel */
  clcrt__occ occ[CLCRT__V_COUNT];
  /* The background builder's queue (builder.c), guarded by rt->lock. */
  unsigned pending;                         /* bit v: queued for a build */
  struct clcrt_kernel *next_queued;         /* the queue, through registered kernels */
  int queued;
} clcrt__variants;
#endif
