/* The op library's state (include/clcrt_ops.h): a runtime's registered GEMM kernels, its
 * streams' workspaces and its graphs' workspaces. Internal to ops/; built on clcrt.h alone. */
#ifndef CLCRT_OPS_GEMM_OPS_H
#define CLCRT_OPS_GEMM_OPS_H
#include <pthread.h>

#include <cuda.h> /* types only: calls go through the runtime's driver table */

#include "clcrt.h"
#include "clcrt_ops.h"
#include "gemm_internal.h"

#define GEMM_NUM_SCHEDS 5 /* clcrt_sched values */

/* A stream's workspace (invariants 1, 2 and 4 of clcrt_ops.h). */
typedef struct gemm_ws {
  struct gemm_ws *next;
  CUstream cu;
  unsigned long long thread; /* CU_STREAM_PER_THREAD is one stream per thread: the thread's id, else 0 */
  pthread_mutex_t lock;      /* held from a call's plan to its launch */
  CUdeviceptr part, ctr;     /* stream-K partials; counters, zero at rest */
  size_t part_bytes, ctr_bytes;
  volatile unsigned *misuse; /* 2 words of mapped host memory a grouped run writes (GemmArgs.misuse) */
  CUdeviceptr misuse_dev;
} gemm_ws;

/* A graph's workspace (invariant 3): owned by the graph through a CUDA user object. refs: one
 * for the ops, one for the graph; whichever lets go last frees the host record, and the device
 * memory is freed by the ops once the graph has let go (the destructor may not call CUDA). */
typedef struct gemm_cap_ws {
  struct gemm_cap_ws *next;
  unsigned long long capture; /* the capture sequence's id */
  CUstream cu;
  CUdeviceptr part, ctr;
  size_t part_bytes, ctr_bytes;
  int refs;                   /* atomic */
  int dead;                   /* atomic: the graph let go */
} gemm_cap_ws;

/* A measured plan's rule, kept in memory after the store gave it (CLCRT_GEMM_MEASURED). */
typedef struct gemm_rule_entry {
  char key[96];
  gemm_measure_rule rule;
} gemm_rule_entry;
#define GEMM_RULE_CACHE 64

/* Encoded tensor maps, keyed by what they encode: a run whose operands were seen before (the
 * weights of a layer, a benchmark's buffers) skips cuTensorMapEncodeTiled. A map depends on its
 * key alone, so an entry stays right whatever was freed or reallocated at that address. */
typedef struct gemm_map_entry {
  uint64_t base, rows, pitch, cols, box; /* box: L2 promotion << 48 | rows << 32 | columns */
  clcrt_tensor_map map;
} gemm_map_entry;
#define GEMM_MAP_CACHE 64

/* The default plans made (gemm_plan_dense costs every tile shape, a few microseconds), keyed by
 * what they depend on: a layer's shape pays for its plan once. */
typedef struct gemm_plan_entry {
  unsigned m, n, k, align;
  int sms;      /* 0: empty */
  int trans_ok; /* the plan may be transposed (no done counters: gemm_plan_dense_t) */
  gemm_plan plan;
} gemm_plan_entry;
#define GEMM_PLAN_CACHE 256

struct clcrt_ops {
  clcrt_runtime *rt;
  const clcrt_driver *cu; /* NULL in compile-only mode */
  CUcontext ctx;
  const char *src;
  pthread_mutex_t lock; /* kernels, the lists, the rule cache */
  const clcrt_kernel *kernels[GEMM_ALL_VARIANTS][GEMM_NUM_SCHEDS][GEMM_KINDS]; /* GEMM_KIND_* */
  gemm_ws *ws;
  gemm_cap_ws *caps;
  CUstream zero; /* private stream that zeroes graph workspaces' counters, made when first needed */
  gemm_rule_entry rules[GEMM_RULE_CACHE];
  unsigned nrules;
  pthread_mutex_t map_lock;
  gemm_map_entry maps[GEMM_MAP_CACHE];
  pthread_mutex_t plan_lock;
  gemm_plan_entry plans[GEMM_PLAN_CACHE];
};

/* The kernel of variant v, scheduler sched, dense or grouped: registered on first use, then
 * kept in ops->kernels (gemm.c). */
/* kind: 0 dense, 1 grouped, 2 dense transposed (GEMM_TRANS: gemm_plan.trans) */
clcrt_status gemm__kernel_get(clcrt_ops *ops, int v, clcrt_sched sched, int kind, const clcrt_kernel **out);

/* Workspaces (gemm_ws.c). The lock of the returned stream workspace is held: release it with
 * gemm_ws_unlock after the launch. */
clcrt_status gemm__ws_stream(clcrt_ops *ops, clcrt_stream *s, gemm_ws **out);
void gemm__ws_unlock(gemm_ws *w);
/* Whether w's stream is being captured into a graph (who: the caller, for the message). Asked
 * only where the answer changes what a run does (a workspace, a misuse word, a flag that
 * synchronises): a dense GEMM with whole tiles needs none, and clcrt_run asks the driver itself. */
clcrt_status gemm__ws_capturing(clcrt_ops *ops, gemm_ws *w, const char *who, int *capturing);
/* Partials of part_bytes and counters of ctr_bytes, valid on w's stream (grown as needed,
 * counters zero). With the stream capturing: a graph's workspace instead (invariant 3). */
clcrt_status gemm__ws_reserve(clcrt_ops *ops, gemm_ws *w, int capturing, size_t part_bytes, size_t ctr_bytes,
                              CUdeviceptr *part, CUdeviceptr *ctr);
/* Reports and clears what an earlier grouped run wrote to w->misuse (CLCRT_E_INVALID), else OK. */
clcrt_status gemm__ws_misuse(clcrt_ops *ops, gemm_ws *w, unsigned rows, const char *when);
/* Frees the graph workspaces whose graphs let go. Call with ops->lock held. */
void gemm__ws_collect(clcrt_ops *ops);
void gemm__ws_destroy_all(clcrt_ops *ops);

/* Measured plans (gemm_measure.c): the rule of d's class from memory or the store (1), or 0;
 * and the measured plan, timed on d's operands when no rule is found. */
int gemm__rule_lookup(clcrt_ops *ops, const clcrt_gemm_desc *d, unsigned align, int sms, gemm_plan *out);
clcrt_status gemm__plan_measured(clcrt_ops *ops, clcrt_stream *s, gemm_ws *w, const clcrt_gemm_desc *d, gemm_ld ld,
                                 unsigned align, int sms, gemm_plan *out);

/* Every entry of the op library that reaches the driver (an allocation, a memset, a launch)
 * runs in its runtime's context: a thread whose current context is another device's (a
 * PyTorch thread whose current device is another GPU) had stream-K counters allocated on that
 * device, and the kernel then read them across devices (an illegal address, found by the
 * every-device differential test). The thread's own context is current again on return; a
 * thread with none keeps the runtime's, as clcrt_run leaves it (include/clcrt.h, clcrt_runtime_context).
 * The same rule as the runtime's clcrt__ctx_push, written again here because the op library uses
 * the public API alone (clcrt_runtime_driver and clcrt_runtime_context). Entered once per call:
 * the clcrt_run inside then finds the context current and only asks (cuCtxGetCurrent). */
typedef struct gemm_ctx {
  int pushed;
} gemm_ctx;
clcrt_status gemm__ctx_enter(clcrt_ops *ops, gemm_ctx *c);
void gemm__ctx_leave(clcrt_ops *ops, const gemm_ctx *c);

/* Runs a driver call in relaxed capture mode, so that an allocation made while another thread
 * captures a graph in global mode neither fails nor breaks that capture. */
CUresult gemm__relaxed_begin(const clcrt_driver *cu, CUstreamCaptureMode *saved);
void gemm__relaxed_end(const clcrt_driver *cu, CUstreamCaptureMode *saved);
#endif
