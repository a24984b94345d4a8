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
  unsigned align;      /* SMs per co-scheduled group of the partition (0 or 1: not grouped) */
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
 * `dev_sms`, where the whole device fits `dev_clusters` (the occupancy query, which answers for
 * the kernel's context: the whole device). Derived, not queried:
 *   - CTAs per SM: ceil(dev_clusters * cluster_size / dev_sms), exact as long as the clusters
 *     that GPC boundaries cost the whole device come to fewer CTAs than it has SMs;
 *   - a partition of whole co-scheduled groups of `align` SMs (each sure to lie in one GPC, as
 *     a cluster must) holds floor(align * CTAs per SM / cluster_size) clusters per group;
 *   - otherwise (not whole groups, or a cluster larger than a group holds) the device's
 *     clusters in proportion, floor(dev_clusters * sms / dev_sms);
 * at least 1, at most dev_clusters. Exact for 1-CTA kernels (blocks per SM times SMs). */
int clcrt__partition_clusters(int dev_clusters, unsigned cluster_size, int dev_sms, int sms, unsigned align);
#endif
