/* Streams: a CUstream plus the scheduler state of the runs enqueued on it. Shared by
 * stream.c (life cycle, statistics, tracing, preemption) and launch.c (clcrt_run). */
#ifndef CLCRT_STREAM_H
#define CLCRT_STREAM_H
#include "green.h"
#include "internal.h"

#define CLCRT__STATS_SMS 1024 /* %smid is masked into this many slots */
#define CLCRT__STATS_WORDS (4 + CLCRT__STATS_SMS)

struct clcrt_stream {
  clcrt_runtime *rt;
  CUstream cu;
  int owned;
  CUdeviceptr state;  /* two claim sets (sched_state.h) */
  uint32_t seq;       /* the next STEAL run's sequence number: which set it claims from */
  int launch_lock;    /* orders seq and launches when several threads run on one stream */

  /* SMs (clcrt_stream_create_ex): launch.c sizes persistent grids for grid_sms, which is
   * rt->num_sms unless the stream has a partition (green context) or opts.grid_sms. */
  int grid_sms;
  unsigned grid_align;   /* SMs per co-scheduled group of grid_sms, where they are the partition's: 0 otherwise */
  clcrt__partition part; /* the stream's green context: sms 0 when none */

  unsigned level;      /* priority level: 0 is the device's lowest */
  unsigned yield_slot; /* level > 0: this stream's preemption word */
  int preempt_depth;   /* open clcrt_preempt_begin calls */

  CUdeviceptr stats; /* CLCRT__STATS_WORDS x u64, 0 when off */
  unsigned long long host_stats[CLCRT__STATS_WORDS];
  unsigned long long runs;

  CUdeviceptr trace;      /* header, per-region counters, records; 0 when off */
  size_t trace_bytes;
  unsigned trace_cap;     /* records the buffer holds */
  uint32_t trace_runs;    /* runs traced since tracing was enabled */
  unsigned long long trace_lost; /* records of runs launched without the observed variant (launch.c) */
  int observing;          /* counted in rt->observing: trace or stats on */
  int obs_lost_logged;
};

/* Clusters of a kernel of cluster_size CTAs, whose occupancy on the whole device is occ, that
 * fit at once in the SMs s's grids are sized for: what the plan derives for s's runs (plan.h:
 * grid_sms; green.h: clcrt__partition_clusters), for tests and the GPU probe. */
int clcrt__stream_clusters(const clcrt_stream *s, const clcrt__occ *occ, unsigned cluster_size);
/* Counts s in rt->observing while it records a trace or statistics, after either changed. */
void clcrt__stream_observing(clcrt_stream *s);

/* Enqueues the preemption word's write on s (value: s->level to begin, 0 to end). */
clcrt_status clcrt__stream_preempt_write(clcrt_stream *s, unsigned value);
#endif
