/* SM partitions (CUDA green contexts) for streams with an SM budget (clcrt_stream_create_ex):
 * the partitions clcrt makes, shared between the streams of one size, and the partition of a
 * user's CUstream. The driver entries are optional ones of the table (driver.h): a driver
 * without them gives CLCRT_E_UNSUPPORTED for a budget and "no partition" for a user stream. */
#ifndef CLCRT_GREEN_H
#define CLCRT_GREEN_H
#include "internal.h"

typedef struct clcrt__green clcrt__green; /* a split of a device clcrt made: its two sides */

/* Where a stream runs. sms 0: on the whole device. */
typedef struct clcrt__partition {
  clcrt__green *green; /* the split clcrt made for the stream, or NULL (none, or the user's) */
  int rest;            /* the split's remainder side (CLCRT_STREAM_SM_REST) */
  int sms;             /* SMs of the partition, 0: none */
  unsigned align;      /* SMs per co-scheduled group the partition is made of (0 or 1: not known to be whole
                          groups): for a budget's own side, the device's alignment (its split is made of whole
                          groups, though the driver reports 0 for the split's resource); for the remainder and a
                          user's green context, what the driver reports for their resource */
} clcrt__partition;

/* Makes (or shares) the partition of `budget` SMs of rt's device that `flags`
 * (CLCRT_STREAM_SM_*) allow, and a non-blocking stream on it at CUDA priority `prio`, owned
 * by the caller until clcrt__green_stream_destroy. A budget the device cannot honour is an
 * error whose message says which partitions it can make. */
clcrt_status clcrt__green_stream(clcrt_runtime *rt, unsigned budget, unsigned flags, int prio, CUstream *cu,
                                 clcrt__partition *p);
/* Destroys a stream of clcrt__green_stream, then the green context when no stream uses it. */
void clcrt__green_stream_destroy(clcrt_runtime *rt, CUstream cu, clcrt__partition *p);
/* The partition of a user's CUstream: its green context's SMs (cuStreamGetCtx_v2,
 * cuGreenCtxGetDevResource), or sms 0 when it has none or the driver cannot tell. */
clcrt_status clcrt__green_of_stream(clcrt_runtime *rt, CUstream cu, clcrt__partition *p);

/* Clusters of a kernel of `cluster_size` CTAs that fit at once on `sms` SMs of a device of
 * `dev_sms`, for a kernel whose occupancy on the whole device is `occ` (kernel.c: clusters from
 * cuOccupancyMaxActiveClusters, CTAs per SM from cuOccupancyMaxActiveBlocksPerMultiprocessor).
 * Derived, not queried (the plan is a pure function, and the device's query answers for the
 * whole device):
 *   - a partition of whole co-scheduled groups of `align` SMs, each sure to lie in one GPC as a
 *     cluster must, holds floor(align x CTAs per SM / cluster_size) clusters per group. This is
 *     what the H100 ran at once on budgets of 16, 64 and 120 SMs (groups of 8) for 4-CTA
 *     clusters at 0, 100 and 200 KiB of shared memory, all 9 (docs/sharing.md); the device's
 *     own count is no basis for it, since it includes what GPC boundaries cost the whole
 *     device, which whole groups do not pay;
 *   - otherwise (not whole groups, a cluster larger than a group holds, or CTAs per SM unknown)
 *     1-CTA kernels get CTAs per SM x sms, exactly, and clusters the device's in proportion,
 *     floor(occ->clusters x sms / dev_sms), an estimate;
 * at least 1, at most occ->clusters. sms >= dev_sms: occ->clusters. */
int clcrt__partition_clusters(const clcrt__occ *occ, unsigned cluster_size, int dev_sms, int sms, unsigned align);
#endif
