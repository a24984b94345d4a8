/* clcrt's op library: GEMMs built on the public API of clcrt.h alone (the runtime never
 * depends on it). One call per run: clcrt_gemm plans the problem, compiles or finds the tile
 * function the plan picked, keeps the stream's workspace and launches, asynchronously, on a
 * clcrt_stream.
 *
 *   dense    D (m x n) = A (m x k) . B (n x k)^T          (torch.nn.functional.linear(A, B))
 *   grouped  for each group g of G: its sizes[g] rows of A, one after another, times B_g^T into
 *            the same rows of D; the sizes are int32 in device memory (read by the kernel, so
 *            routing needs no host sync); the weights B_g stacked as one (G*n) x k matrix
 *   masked   the same with group g's rows at row g * m of A and D (m: the rows each group may
 *            have; sizes above m count as m): a launch that does not depend on the sizes, so
 *            one CUDA graph serves every routing
 *
 * bf16 operands, fp32 accumulation, bf16 output. Row-major with a row pitch (lda, ldb, ldd
 * elements; 0: packed): A and B need pitches that are a multiple of 8 elements and addresses
 * 16-byte aligned (TMA), k a multiple of 8; D needs 2-byte alignment (16-byte aligned rows
 * store faster). Any m, n >= 1.
 *
 * Errors are a status plus clcrt_errmsg(rt) of the runtime the op was made with, as for every
 * clcrt call; nothing prints.
 *
 * State and its invariants (ops/gemm_ws.c says why each holds):
 *   1. Stream-K runs share partial tiles through a workspace: one per CUstream (runs on one
 *      stream are ordered, so one serves them all), made on the first run that needs it and
 *      grown, never shrunk; its counters and its partials are separate allocations.
 *   2. The counters are zero whenever no run is in flight on their stream: they are zeroed on
 *      that stream when made, and every run leaves the counters it used at zero.
 *   3. A run captured into a CUDA graph never uses a stream's workspace: each capture (and
 *      each stream in it) gets its own, zeroed when made and owned by the graph, freed after
 *      the graph is destroyed. Replays of one graph exec are ordered by CUDA, so they share it.
 *   4. A grouped run whose sizes do not fit (adding up to more rows than A and D have, or
 *      negative) computes what fits, never touches memory past the operands, and reports it:
 *      the next grouped call on the same stream fails with CLCRT_E_INVALID and a message
 *      naming the sizes (and does not run), or, with CLCRT_GEMM_CHECKED, the call itself
 *      synchronises and fails. Runs replayed from a graph clamp the same way but report
 *      nothing.
 * Threads may share a clcrt_ops: calls on different streams run in parallel, calls on one
 * stream take its lock. */
#ifndef CLCRT_OPS_H
#define CLCRT_OPS_H

#include "clcrt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clcrt_ops clcrt_ops; /* opaque: the op library's state for one runtime */

/* rt must outlive ops. Compile-only runtimes are accepted: clcrt_gemm_kernel and
 * clcrt_gemm_plan_get work, clcrt_gemm refuses (CLCRT_E_NO_DEVICE). */
CLCRT_API clcrt_status clcrt_ops_create(clcrt_runtime *rt, clcrt_ops **out);
/* Frees the streams' workspaces with cuMemFree and cuMemFreeHost, which wait for the device's
 * work first; the streams the op ran on need not be alive. NULL: no-op. */
CLCRT_API void clcrt_ops_destroy(clcrt_ops *ops);
/* Waits for s's work and frees its workspace: call it before destroying a stream the op ran
 * on while the ops lives on. A later run on the stream makes a new one. */
CLCRT_API clcrt_status clcrt_ops_stream_release(clcrt_ops *ops, clcrt_stream *s);

typedef enum clcrt_gemm_layout {
  CLCRT_GEMM_DENSE = 0,
  CLCRT_GEMM_GROUPED,
  CLCRT_GEMM_MASKED
} clcrt_gemm_layout;

/* How a dense problem's k dimension is shared between work units. */
typedef enum clcrt_gemm_split {
  CLCRT_GEMM_SPLIT_AUTO = 0, /* the plan's cost model: whole tiles, or stream-K for a thin last wave */
  CLCRT_GEMM_SPLIT_NONE,     /* every tile whole */
  CLCRT_GEMM_SPLIT_ALL       /* every tile cut into k-slices (stream-K everywhere: tests, the oracle) */
} clcrt_gemm_split;

/* clcrt_gemm_desc.flags */
#define CLCRT_GEMM_CHECKED 1u  /* synchronise after the run and fail if a grouped run's sizes did not fit
                                  (refused during graph capture) */
#define CLCRT_GEMM_MEASURED 2u /* dense: the plan measured once per shape class (timing the candidate plans
                                  on these operands, which synchronises) and kept in the runtime's store,
                                  then read back in this and later processes */

typedef struct clcrt_gemm_desc {
  size_t size;
  clcrt_gemm_layout layout;
  clcrt_dtype dtype;                /* CLCRT_DTYPE_BF16, the only one so far */
  unsigned m, n, k;                 /* dense, grouped: m rows of A and D; masked: rows per group */
  unsigned long long a, b, d;       /* device addresses */
  unsigned long long lda, ldb, ldd; /* elements between rows; 0: packed (k, k, n) */
  unsigned groups;                  /* grouped, masked: G (1..clcrt_gemm_max_groups()) */
  unsigned long long group_sizes;   /* grouped, masked: G int32 in device memory */
  const char *variant;              /* NULL: the plan's; else a name from clcrt_gemm_variant_get, or
                                       one with "t" after it: the same tile shape transposed (A and B
                                       swapped, D^T computed; dense, without done; not 128x256c2) */
  clcrt_sched sched;                /* AUTO: the plan's (STEAL on sm_90; the variant the plan keeps) */
  clcrt_gemm_split split;           /* dense only */
  unsigned flags;                   /* CLCRT_GEMM_* */
  /* dense, optional (0: none): the device address of ceil(m / 64) uint32 counters, one per 64
   * rows of D, for a consumer on the same GPU that works on D's rows while the GEMM still runs
   * (on another stream: python/clcrt/tp.py reduces across GPUs this way). Each run adds rows x n
   * to the counter of every 64-row block (rows: the block's rows below m), in parts, each part
   * added with a GPU-scope release once the part's outputs are stored. So a reader on this GPU
   * that loads a counter with acquire semantics and finds it at (runs so far) x rows x n, modulo
   * 2^32, may read the block (a peer GPU's reader needs this GPU to forward it). The op never
   * resets them: zero them once, keep a running target. n at most 2^24. CLCRT_GEMM_MEASURED's
   * timing runs add nothing: only the run itself counts. */
  unsigned long long done;
} clcrt_gemm_desc;

#define CLCRT_GEMM_DESC_INIT                                                                                   \
  {.size = sizeof(clcrt_gemm_desc), .layout = CLCRT_GEMM_DENSE, .dtype = CLCRT_DTYPE_BF16, .m = 0, .n = 0,     \
   .k = 0, .a = 0, .b = 0, .d = 0, .lda = 0, .ldb = 0, .ldd = 0, .groups = 0, .group_sizes = 0,               \
   .variant = NULL, .sched = CLCRT_SCHED_AUTO, .split = CLCRT_GEMM_SPLIT_AUTO, .flags = 0, .done = 0}

/* Runs the GEMM on s, asynchronously. m == 0 or n == 0 is a no-op. The first run of a variant
 * compiles it (or loads it from the disk cache); clcrt_gemm_prepare does that ahead. An output
 * that shares memory with a or b is refused (CLCRT_E_INVALID): the tiles read them while others
 * store d. Beside them is fine (other columns of the same rows, other rows). */
CLCRT_API clcrt_status clcrt_gemm(clcrt_ops *ops, clcrt_stream *s, const clcrt_gemm_desc *d);

/* What clcrt_gemm would run for d on s (s NULL: the whole device), without running it. */
typedef struct clcrt_gemm_plan_info {
  size_t size;
  const char *variant;    /* static name, e.g. "128x256", or "128x160c2t" for a transposed plan */
  clcrt_sched sched;      /* as registered */
  unsigned bm, bn, cluster_m;
  unsigned splits;        /* k-slices of a shared tile, rounded up (1: every tile whole) */
  unsigned shared_tiles;  /* tiles cut into slices */
  unsigned units;         /* the shared tiles' stream-K units: shared_tiles x splits, or not a
                             multiple of shared_tiles where the units' ranges of k-blocks cross
                             tiles; 0: every tile whole */
  clcrt_dim3 tiles;       /* the launch's tile grid */
  unsigned long long workspace_bytes; /* stream-K partials and counters */
} clcrt_gemm_plan_info;
#define CLCRT_GEMM_PLAN_INFO_INIT                                                                              \
  {.size = sizeof(clcrt_gemm_plan_info), .variant = NULL, .sched = CLCRT_SCHED_AUTO, .bm = 0, .bn = 0,        \
   .cluster_m = 0, .splits = 0, .shared_tiles = 0, .units = 0, .tiles = {0, 0, 0}, .workspace_bytes = 0}
CLCRT_API clcrt_status clcrt_gemm_plan_get(clcrt_ops *ops, const clcrt_stream *s, const clcrt_gemm_desc *d,
                                           clcrt_gemm_plan_info *out);

/* The compiled shapes of the tile functions; 0 is the default. */
typedef struct clcrt_gemm_variant_info {
  size_t size;
  const char *name;
  unsigned bm, bn, cluster_m, stages, epilogue;
} clcrt_gemm_variant_info;
#define CLCRT_GEMM_VARIANT_INFO_INIT                                                                           \
  {.size = sizeof(clcrt_gemm_variant_info), .name = NULL, .bm = 0, .bn = 0, .cluster_m = 0, .stages = 0,      \
   .epilogue = 0}
CLCRT_API int clcrt_gemm_variant_count(void);
/* Variants 0 .. clcrt_gemm_variant_count() - 1 are the measured ones; the indices after them are
 * the other tile shapes the tile functions are written for ("BMxBN" or "BMxBNc2": block M 64 or
 * 128, block N a multiple of 16 from 16 to 256, 1 or 2 CTAs sharing B), which a descriptor may
 * name too (their speed is not measured yet). CLCRT_E_NOT_FOUND past the last. */
CLCRT_API clcrt_status clcrt_gemm_variant_get(int i, clcrt_gemm_variant_info *out);
/* The index of a variant by name (clcrt_gemm_variant_get), or -1. */
CLCRT_API int clcrt_gemm_variant_find(const char *name);
CLCRT_API unsigned clcrt_gemm_max_groups(void);

/* The registered kernel of a variant (NULL: the default) for a layout and scheduler, compiled
 * now if it is not yet: for its info, cubin and PTX (clcrt_kernel_info_get ...). Owned by the
 * runtime. */
CLCRT_API clcrt_status clcrt_gemm_kernel(clcrt_ops *ops, const char *variant, clcrt_sched sched,
                                         clcrt_gemm_layout layout, const clcrt_kernel **out);
/* Builds ahead what clcrt_gemm(ops, s, d) will launch: its kernel and the kernel's variants
 * for `uses` (clcrt_kernel_prepare), so that timed or captured runs launch no fallback. */
CLCRT_API clcrt_status clcrt_gemm_prepare(clcrt_ops *ops, const clcrt_stream *s, const clcrt_gemm_desc *d,
                                          unsigned uses);

/* The tile functions' CUDA source as the op compiles it (ops/gemm.cu with ops/gemm_abi.h in
 * place of its #include), embedded in the library. */
CLCRT_API const char *clcrt_gemm_source(void);


/* ---- Task graphs: several tile functions in one persistent grid ----------------------------------
 *
 * A task graph is a chain (or any DAG) of tile functions, written in one source, that runs as
 * one launch: a decode layer's RMSNorm -> projections -> activation -> projection + residual,
 * without a launch, a ramp-up and a tail between the steps. Each node is a tile function with
 * its own Args and its own tile count (given per run); each edge says which of the producer's
 * tiles one of the consumer's tiles needs. clcrt compiles one kernel whose tile function
 * dispatches to the nodes, and the kernel runs under any scheduler like any registered kernel.
 *
 * Order and waits. Every tile the kernel runs first takes a ticket: one atomic on a counter of
 * the run, so tickets are handed out in the order tiles start, only to CTAs that are running.
 * Ticket t runs tile t of the node-major order (node 0's tiles, then node 1's, ...). Edges go
 * from a lower node to a higher one, so a tile waits only on tiles of lower tickets. Why no
 * run can hang: take the lowest ticket that never finishes; every tile it waits on has a lower
 * ticket, was taken by a CTA that is running it (tickets are taken only by running CTAs, which
 * keep their SM until the tile returns: clcrt yields only between tiles) and so finishes, and
 * then so does it. This holds for every scheduler, FIXED included (its CTAs take tickets as
 * they start), under preemption by streams of higher priority, on SM budgets and in graphs.
 * The wait is thread 0's acquire polls, then a CTA barrier; the release is a CTA barrier, then
 * the fence and adds of the second warp's first thread, whose round trips then overlap thread
 * 0's next ticket (thread 0's own in a one-warp CTA), so a node's stores are visible to the
 * tiles that wait on it (to TMA reads too with CLCRT_TASKGRAPH_ASYNC_READS, which adds a proxy
 * fence after each wait).
 * A CTA that has seen an ALL edge complete does not poll it again for its later tiles. Every
 * thread of the CTA calls the tile function, as without a graph; the dispatcher adds one
 * barrier per tile (after the ticket) and one per wait and per release.
 *
 * Reading what another node wrote: plain loads (TMA with CLCRT_TASKGRAPH_ASYNC_READS). Not
 * ld.global.nc / __ldg, and not `const T *__restrict__` pointers to such data: the read-only
 * path may serve stale lines.
 *
 * State: the counters live in the op library's stream workspace (invariants 1 to 3 above: one
 * per stream, one per captured graph); every run leaves them at zero (the CTA of the last
 * ticket waits for every other tile to finish and zeroes them), so runs on one stream and
 * replays of one graph need no reset launch. */

typedef enum clcrt_dep_kind {
  CLCRT_DEP_ALL = 0, /* every consumer tile needs every producer tile */
  CLCRT_DEP_SAME,    /* consumer tile i needs producer tile i (a run needs as many producer tiles or more) */
  CLCRT_DEP_ROWS,    /* row blocks: consumer tiles i with i / a == g need producer tiles j with j / b == g (a
                        row of a tiles needs the producer's row of b tiles; groups past the producer's last
                        need nothing) */
  CLCRT_DEP_KSLICES, /* a reduction over a K slices: the producer has a x (the consumer's) tiles, slice-major,
                        and consumer tile i needs producer tiles i, C + i, 2C + i, ... (C: consumer tiles) */
  CLCRT_DEP_CUSTOM   /* fn: __device__ uint2 fn(unsigned tile, unsigned tiles, unsigned producer_tiles) in the
                        source gives [x, y): consumer tile `tile` needs producer tiles x .. y - 1 (clamped
                        to the producer's tiles) */
} clcrt_dep_kind;

#define CLCRT_TASKGRAPH_MAX_NODES 32u
#define CLCRT_TASKGRAPH_MAX_EDGES 128u
#define CLCRT_TASKGRAPH_MAX_ARGS 4096u /* a node's Args at most; the graph's (its words, then every node's
                                          Args at a 64-byte boundary) at most this + 64 bytes */

typedef struct clcrt_task_node {
  const char *tile_fn;     /* __device__ void f(const clcrt::Tile &t, const Args &a) in the graph's source;
                              t: the tile in the node's grid (coord, linear), unit its ticket */
  const char *args_type;   /* its Args */
  size_t args_size;        /* sizeof(Args): checked against the compiled struct */
  const char *prefetch_fn; /* optional (NULL: none): called like tile_fn for the same tile, before its
                              waits: for loads that need no other node (weights into L2 or shared
                              memory), so that they overlap the wait. It must not read what another
                              node writes */
} clcrt_task_node;

typedef struct clcrt_task_edge {
  unsigned from, to; /* node indices, from < to */
  clcrt_dep_kind kind;
  unsigned a, b;     /* ROWS: consumer and producer tiles per row block; KSLICES: a, the slices */
  const char *fn;    /* CUSTOM: the function's name */
} clcrt_task_edge;

typedef struct clcrt_taskgraph_desc {
  size_t size;
  const char *source;             /* every node's Args and tile function (and CUSTOM functions) */
  const clcrt_task_node *nodes;   /* in an order where every edge goes forward */
  unsigned num_nodes;             /* 1 .. CLCRT_TASKGRAPH_MAX_NODES */
  const clcrt_task_edge *edges;
  unsigned num_edges;             /* 0 .. CLCRT_TASKGRAPH_MAX_EDGES */
  clcrt_dim3 block;               /* threads per CTA, every node's */
  unsigned smem_bytes;            /* dynamic shared memory: the largest node's */
  clcrt_sched sched;              /* as for clcrt_register (no clusters: 1-CTA units) */
  clcrt_grid grid;
  const char *const *options;     /* extra NVRTC options */
  int num_options;
  unsigned min_blocks_per_sm;
  unsigned flags;                 /* CLCRT_TASKGRAPH_* */
} clcrt_taskgraph_desc;

/* clcrt_taskgraph_desc.flags */
#define CLCRT_TASKGRAPH_ASYNC_READS 1u /* a node reads what another node wrote through TMA (the async proxy):
                                          a proxy fence follows every wait */

#define CLCRT_TASKGRAPH_DESC_INIT                                                                              \
  {.size = sizeof(clcrt_taskgraph_desc), .source = NULL, .nodes = NULL, .num_nodes = 0, .edges = NULL,         \
   .num_edges = 0, .block = {0, 0, 0}, .smem_bytes = 0, .sched = CLCRT_SCHED_AUTO, .grid = CLCRT_GRID_AUTO,   \
   .options = NULL, .num_options = 0, .min_blocks_per_sm = 0, .flags = 0}

typedef struct clcrt_taskgraph clcrt_taskgraph; /* opaque */

/* Checks the graph, generates its dispatching tile function and registers it (a compile, or
 * the caches). Compile-only runtimes are accepted (clcrt_taskgraph_kernel, for the cubin). */
CLCRT_API clcrt_status clcrt_taskgraph_create(clcrt_ops *ops, const clcrt_taskgraph_desc *d, clcrt_taskgraph **out);
/* Runs every node once on s, asynchronously: tiles[i] is node i's tile grid ({0,0,0}: none),
 * args[i] its Args (args_size bytes, as in the descriptor). A run whose tile counts break an
 * edge (SAME with fewer producer tiles, KSLICES with a producer count that is not a x the
 * consumer's) is refused with a message. */
CLCRT_API clcrt_status clcrt_taskgraph_run(clcrt_taskgraph *g, clcrt_stream *s, const clcrt_dim3 *tiles,
                                           const void *const *args);
/* clcrt_taskgraph_run with flags (0: clcrt_taskgraph_run): CLCRT_RUN_PDL launches the graph's grid
 * with programmatic dependent launch, as clcrt_run_ex does (include/clcrt.h): it starts launching
 * while the grid before it on the stream finishes, and waits for that grid before it touches
 * memory. For a block of a model run after another kernel; other bits are refused. */
CLCRT_API clcrt_status clcrt_taskgraph_run_ex(clcrt_taskgraph *g, clcrt_stream *s, const clcrt_dim3 *tiles,
                                              const void *const *args, unsigned flags);
/* The registered kernel (owned by the runtime): info, cubin, PTX, clcrt_kernel_prepare. */
CLCRT_API const clcrt_kernel *clcrt_taskgraph_kernel(const clcrt_taskgraph *g);
/* The generated source, as compiled (valid while g lives). */
CLCRT_API const char *clcrt_taskgraph_source(const clcrt_taskgraph *g);
/* Tracing (off by default): every tile the runs of g execute, on any stream, into a device buffer
 * of `capacity` tiles (48 bytes each, at most 2^26); tiles past it are counted as dropped. 0
 * turns it off. Call it while no run of g is in flight. A traced tile costs thread 0 a few
 * timer reads and one atomic. */
CLCRT_API clcrt_status clcrt_taskgraph_trace_enable(clcrt_taskgraph *g, size_t capacity);
/* Synchronises s (runs on other streams must have finished too), then takes the records of
 * every traced run since the last read as a clcrt_trace (destroy it with clcrt_trace_destroy):
 * per tile, a record of its tile function (tile: its index in its node; unit: the node;
 * cluster: its ticket; run: the traced run of g, from 0; sm) and, where it waited, one of the
 * wait before it, from its ticket to the end of its waits (flags CLCRT_TRACE_WAIT). The usual
 * JSON (clcrt_trace_save_json: Perfetto) and summary (which leaves the waits out) apply. */
CLCRT_API clcrt_status clcrt_taskgraph_trace_read(clcrt_taskgraph *g, clcrt_stream *s, clcrt_trace **out);
/* Frees g and its trace buffer; runs already enqueued keep running. NULL is a no-op. Destroy
 * every task graph of an op library before clcrt_ops_destroy. */
CLCRT_API void clcrt_taskgraph_destroy(clcrt_taskgraph *g);

#ifdef __cplusplus
}
#endif
#endif /* CLCRT_OPS_H */
