/* clcrt — persistent, work-stealing tile schedulers for NVIDIA GPUs as a library call.
 *
 * A tile function written in CUDA C++ is compiled at run time with NVRTC into a scheduler
 * template and launched as thread-block clusters. On sm_100+ the clusters steal work with
 * the hardware's Cluster Launch Control; on sm_90 the same protocol runs in software.
 *
 * This is the whole public API. Conventions:
 *   - every function that can fail returns a clcrt_status; CLCRT_OK is 0;
 *   - the detail of the last failure is clcrt_errmsg(rt): per thread, like cudaGetLastError
 *     (a failure on one thread never changes the message another thread reads); calls that
 *     take no runtime (the trace functions), and calls given a NULL handle, leave theirs in
 *     clcrt_errmsg(NULL);
 *   - handles are opaque; destroy(NULL) is a no-op;
 *   - option structs start with `size` and have an ..._INIT macro (designated initializers,
 *     every field named: C99 and later, C++20, and GNU C++ before it); zero means "default".
 */
#ifndef CLCRT_H
#define CLCRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CLCRT_API __attribute__((visibility("default")))
#else
#define CLCRT_API
#endif

/* Same typedefs as <cuda.h> and <uv.h>, so this header needs neither. */
typedef struct CUstream_st *CUstream;
typedef struct uv_loop_s uv_loop_t;

#define CLCRT_VERSION_MAJOR 0
#define CLCRT_VERSION_MINOR 1
#define CLCRT_VERSION_PATCH 0

/* The status table: X(name, message). It generates the enum, clcrt_status_name and
 * clcrt_status_str, so the three can never disagree. */
#define CLCRT_STATUS_MAP(X)                                                                   \
  X(OK, "success")                                                                            \
  X(E_INVALID, "an argument is invalid")                                                      \
  X(E_COMPILE, "NVRTC could not compile the tile function")                                  \
  X(E_NO_DEVICE, "no CUDA driver or GPU is available")                                       \
  X(E_UNSUPPORTED, "the operation is not supported on this architecture or configuration")   \
  X(E_CUDA, "a CUDA driver call failed")                                                      \
  X(E_NOMEM, "out of memory")                                                                 \
  X(E_IO, "a file could not be read or written")                                              \
  X(E_CORRUPT, "a file is damaged or not in the expected format")                            \
  X(E_NOT_FOUND, "the requested item does not exist")                                         \
  X(E_BUSY, "the handle still has work in flight")                                            \
  X(E_CANCELLED, "the operation was cancelled: its runtime was destroyed before it finished")

typedef enum clcrt_status {
#define CLCRT__STATUS_ENUM(name, msg) CLCRT_##name,
  CLCRT_STATUS_MAP(CLCRT__STATUS_ENUM)
#undef CLCRT__STATUS_ENUM
  CLCRT_STATUS_COUNT_
} clcrt_status;

CLCRT_API const char *clcrt_status_name(clcrt_status s); /* "CLCRT_E_COMPILE" */
CLCRT_API const char *clcrt_status_str(clcrt_status s);  /* a sentence */

typedef struct clcrt_runtime clcrt_runtime; /* opaque */
typedef struct clcrt_kernel clcrt_kernel;   /* opaque, owned by its runtime */
typedef struct clcrt_stream clcrt_stream;   /* opaque: a CUstream plus its scheduler context */

typedef struct clcrt_dim3 {
  unsigned x, y, z;
} clcrt_dim3;

typedef enum clcrt_sched {
  CLCRT_SCHED_AUTO = 0, /* CLC on sm_100 and later, STEAL otherwise */
  CLCRT_SCHED_CLC,      /* hardware Cluster Launch Control (sm_100+) */
  CLCRT_SCHED_STEAL,    /* software work counter per stream (sm_90+) */
  CLCRT_SCHED_STATIC,   /* persistent grid, tile += number of clusters */
  CLCRT_SCHED_FIXED     /* one cluster per cluster-shaped block of tiles */
} clcrt_sched;
/* "auto", "clc", "steal", "static", "fixed"; "unknown" for any other value. */
CLCRT_API const char *clcrt_sched_name(clcrt_sched s);

/* How many clusters a STEAL kernel launches. FULL launches one cluster per work unit;
 * clusters that start after the work is gone leave at once. PERSISTENT launches as many
 * clusters as fit on the device at once. AUTO is PERSISTENT, except while a stream of
 * higher priority exists on the device: then the clusters that fit at once plus
 * preempt_waves (clcrt_runtime_opts, $CLCRT_PREEMPT_WAVES; default 2) waves of reserve, so that
 * the run can yield (docs/design.md: Preemption; docs/results.md: Preemption); and except for long units: a kernel with
 * no prologue and no state whose earlier runs measured units of at least steal_long_cycles
 * ($CLCRT_STEAL_LONG_CYCLES; default 4000) cycles per CTA of its cluster runs one cluster per
 * unit, which the GPU's block scheduler hands out as clusters finish, with no claims, preempted
 * as FIXED is (docs/design.md: Long units). */
typedef enum clcrt_grid {
  CLCRT_GRID_AUTO = 0,
  CLCRT_GRID_FULL,
  CLCRT_GRID_PERSISTENT
} clcrt_grid;

typedef enum clcrt_log_level { CLCRT_LOG_DEBUG = 0, CLCRT_LOG_INFO, CLCRT_LOG_WARN } clcrt_log_level;
typedef void (*clcrt_log_fn)(void *user, clcrt_log_level level, const char *msg);

typedef struct clcrt_runtime_opts {
  size_t size;
  int device;              /* CUDA device ordinal */
  const char *target_arch; /* e.g. "sm_100a": compile-only, no GPU or driver needed; NULL: the device's own */
  const char *cache_dir;   /* NULL: $CLCRT_CACHE_DIR, else $XDG_CACHE_HOME/clcrt, else ~/.cache/clcrt; "": no disk cache */
  clcrt_log_fn log;        /* optional: the library never prints; it reports here */
  void *log_user;
  const char *cuda_home;   /* NULL: $CUDA_HOME, else $CUDA_PATH, else /usr/local/cuda; its include and
                              include/cccl dirs are given to NVRTC. One named here or in the environment
                              must be a toolkit (include/cuda.h or include/cuda_runtime.h, at most 1000
                              bytes), else clcrt_runtime_create fails with CLCRT_E_INVALID; the default
                              may be absent (NVRTC's built-in headers serve most tile functions) */
  /* Tunables. 0 is the default; the environment variable named, when set to a valid value,
   * overrides the field (to try a value without rebuilding). Out of range: clcrt_runtime_create
   * fails with CLCRT_E_INVALID. */
  unsigned steal_chunk_cycles; /* $CLCRT_STEAL_CHUNK_CYCLES: a STEAL claim takes units lasting about this
                                  many cycles (1-CTA clusters: at 8 or more CTAs per SM, 8 / n times as
                                  many at n < 8; default 8000, at most 10^7) */
  unsigned steal_long_cycles;  /* $CLCRT_STEAL_LONG_CYCLES: a STEAL kernel on an AUTO grid whose units
                                  measured at least this many cycles per CTA of its cluster runs one cluster
                                  per unit (default 4000, at most 10^8; CLCRT_OPT_OFF: never) */
  unsigned preempt_waves;      /* $CLCRT_PREEMPT_WAVES: waves of reserve clusters of a STEAL grid that may
                                  yield (default 2, at most 64) */
  unsigned long long cache_max_bytes; /* $CLCRT_CACHE_MAX_BYTES: the disk cache's size cap (default 1 GiB;
                                         CLCRT_OPT_OFF: no cap) */
  int warmup;                  /* $CLCRT_WARMUP: NVRTC's start-up while a device runtime is created (0: the
                                  default, on; > 0 on; < 0 off) */
} clcrt_runtime_opts;

/* A tunable of clcrt_runtime_opts switched off, where its comment says it can be. */
#define CLCRT_OPT_OFF 0xffffffffu

#define CLCRT_RUNTIME_OPTS_INIT                                                                                \
  {.size = sizeof(clcrt_runtime_opts), .device = 0, .target_arch = NULL, .cache_dir = NULL, .log = NULL,       \
   .log_user = NULL, .cuda_home = NULL, .steal_chunk_cycles = 0, .steal_long_cycles = 0, .preempt_waves = 0,   \
   .cache_max_bytes = 0, .warmup = 0}

typedef struct clcrt_tile_desc {
  size_t size;
  const char *source;   /* CUDA C++: the Args struct and the tile function */
  const char *tile_fn;  /* __device__ void tile_fn(const clcrt::Tile &t, const Args &a) */
  const char *args_type; /* name of Args */
  clcrt_dim3 block;     /* threads per CTA */
  clcrt_dim3 cluster;   /* CTAs per cluster; {0,0,0} means {1,1,1} */
  unsigned smem_bytes;  /* dynamic shared memory per CTA (STEAL and CLC add up to 143 bytes after it
                           for their response ring, to runs that use it; the device's limit counts them) */
  clcrt_sched sched;
  const char *const *options; /* extra NVRTC options */
  int num_options;
  const char *state_type;  /* optional per-CTA state... */
  const char *prologue_fn; /* ...made once per CTA: __device__ void p(const Args &a, State &s);
                              the tile function then takes (const clcrt::Tile &, const Args &, State &) */
  clcrt_grid grid;         /* STEAL only: full or persistent grid */
  const char *include_digest; /* optional: a digest (any string) vouching for every header outside
                                 the template and the toolkit. Without it, the headers a compile reads
                                 from disk are recorded (NVRTC's time trace) and hashed again on every
                                 cache hit, memory or disk, so an edited header is never served stale;
                                 a compile with -I, -include or precompiled-header options, or whose
                                 source uses __has_include, is then not cached. With it, nothing is
                                 recorded or checked: a new digest is a new key */
  unsigned min_blocks_per_sm; /* 0: none; n: __launch_bounds__(threads, n), which caps the registers
                                 per thread so that n CTAs fit on an SM (setmaxnreg needs a cap) */
} clcrt_tile_desc;

#define CLCRT_TILE_DESC_INIT                                                                                   \
  {.size = sizeof(clcrt_tile_desc), .source = NULL, .tile_fn = NULL, .args_type = NULL, .block = {0, 0, 0},    \
   .cluster = {0, 0, 0}, .smem_bytes = 0, .sched = CLCRT_SCHED_AUTO, .options = NULL, .num_options = 0,        \
   .state_type = NULL, .prologue_fn = NULL, .grid = CLCRT_GRID_AUTO, .include_digest = NULL,                   \
   .min_blocks_per_sm = 0}

/* Replace the allocator (like uv_replace_allocator). Call before any other function: while
 * any block from the current allocator is still in use (a runtime, a trace, a thread's
 * error message) it is refused with CLCRT_E_BUSY, since those blocks would reach the new
 * free function. All four functions are required (CLCRT_E_INVALID otherwise). */
typedef void *(*clcrt_malloc_fn)(size_t);
typedef void *(*clcrt_realloc_fn)(void *, size_t);
typedef void *(*clcrt_calloc_fn)(size_t, size_t);
typedef void (*clcrt_free_fn)(void *);
CLCRT_API clcrt_status clcrt_replace_allocator(clcrt_malloc_fn m, clcrt_realloc_fn r, clcrt_calloc_fn c,
                                               clcrt_free_fn f);

/* Runtimes. opts NULL: device 0. When creation fails after a handle was allocated, the
 * handle is still returned in *out so that clcrt_errmsg can explain; destroy it. */
CLCRT_API clcrt_status clcrt_runtime_create(clcrt_runtime **out, const clcrt_runtime_opts *opts);
CLCRT_API void clcrt_runtime_destroy(clcrt_runtime *rt); /* NULL is a no-op */
CLCRT_API const char *clcrt_errmsg(const clcrt_runtime *rt); /* detail of the last failure */
/* Records a failure's detail (printf format) as this thread's clcrt_errmsg(rt), as the
 * library's own calls do, and returns st: for libraries built on clcrt (the op library of
 * clcrt_ops.h), so that their errors read like every other call's. */
CLCRT_API clcrt_status clcrt_errmsg_set(const clcrt_runtime *rt, clcrt_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The architecture kernels are compiled for, e.g. "sm_90a". */
CLCRT_API const char *clcrt_runtime_arch(const clcrt_runtime *rt);
/* 1 when the runtime only compiles (target_arch given), 0 when it can run kernels. */
CLCRT_API int clcrt_runtime_compile_only(const clcrt_runtime *rt);
/* Streaming multiprocessors of the runtime's device; 0 in compile-only mode. */
CLCRT_API int clcrt_runtime_num_sms(const clcrt_runtime *rt);
/* The device's peak memory bandwidth in bytes per second, from the memory clock and bus width
 * its driver reports (double data rate): 4.81e12 on an H200 (and 3.35e12 by an H100 SXM's
 * datasheet clock and bus). 0 in compile-only mode or where the driver reports neither. A cost
 * model's input (the GEMM plan's), not a measurement: a copy moved 87% of it on that H200. */
CLCRT_API double clcrt_runtime_mem_bandwidth(const clcrt_runtime *rt);
/* The runtime's CUDA driver table and context: see the end of this header (needs <cuda.h>). */

/* Kernels. Registration compiles (or finds in the cache) and, with a device, loads. */
CLCRT_API clcrt_status clcrt_register(clcrt_runtime *rt, const clcrt_tile_desc *d, clcrt_kernel **out);
CLCRT_API clcrt_status clcrt_kernel_cubin(const clcrt_kernel *k, const void **data, size_t *size);
CLCRT_API clcrt_status clcrt_kernel_ptx(const clcrt_kernel *k, const char **ptx);
/* Variants. A kernel is compiled with its tile loop and nothing it may never use: a run that
 * uses one of the following launches a variant of the kernel compiled with it (a compile like
 * the registration's, found in the memory and disk caches like any other). No run compiles or
 * waits for a compile: variants are built before runs need them, the observed ones (TRACE) when
 * a stream starts tracing or keeping statistics (and at registration while one does), the
 * yielding ones (PREEMPT) in the background once streams of two priorities live; the others in
 * the background after the first run that wanted one. Until its variant is built a run
 * launches a correct fallback: the kernel as registered (or observed) with one cluster per
 * work unit and no claims, which needs no graph state and yields by itself. The runtime's
 * thread that builds them may call the log callback.
 *   CLCRT_USE_TRACE    a traced run, or one with statistics on (trace and statistics code)
 *   CLCRT_USE_GRAPH    a STEAL run captured into a graph (claims from per-launch graph state)
 *   CLCRT_USE_PREEMPT  a STEAL run that can be preempted (yielding code): on a full or AUTO
 *                      grid, on a stream below the priority of another live clcrt stream
 *                      of the device
 *   CLCRT_USE_SHORT    a STEAL run with no more work units than clusters fit at once (on a
 *                      persistent or AUTO grid), or a run of long units (AUTO grid, see
 *                      clcrt_grid): every cluster runs one unit of its own and nothing is
 *                      claimed, so the variant has no claim code at all (short runs pay for
 *                      the code a kernel carries); it replaces GRAPH and PREEMPT
 * A run that uses several launches the variant with all of them. clcrt_kernel_prepare builds
 * now the variants for every combination of `uses` (an OR of CLCRT_USE_*): call it before
 * timing or capturing so that runs launch the variants, not the fallback. Outside STEAL only
 * CLCRT_USE_TRACE has a variant (the other bits are accepted and cost nothing).
 * clcrt_kernel_info_get, _cubin and _ptx describe the kernel as registered. */
#define CLCRT_USE_TRACE 1u
#define CLCRT_USE_GRAPH 2u
#define CLCRT_USE_PREEMPT 4u
#define CLCRT_USE_SHORT 8u
CLCRT_API clcrt_status clcrt_kernel_prepare(const clcrt_kernel *k, unsigned uses);
/* The variant a run with `uses` launches (k itself for 0), built now if it is not yet. *out is
 * a kernel of the same runtime whose info, cubin and PTX read like any kernel's; it is valid
 * as long as k (pass k itself to clcrt_run, which picks the variant). The observed variant of
 * traced runs is clcrt_kernel_variant(k, CLCRT_USE_TRACE, out). */
CLCRT_API clcrt_status clcrt_kernel_variant(const clcrt_kernel *k, unsigned uses, const clcrt_kernel **out);

typedef struct clcrt_kernel_info {
  size_t size;
  const char *name;       /* entry symbol in the cubin, e.g. "clcrt_steal_scale_tile" */
  const char *arch;       /* "sm_90a" */
  clcrt_sched sched;      /* the resolved scheduler (never AUTO) */
  clcrt_grid grid;        /* the resolved grid kind (FULL or PERSISTENT) */
  clcrt_dim3 block, cluster;
  int registers;          /* per thread, from the cubin */
  int stack_bytes;        /* per-thread stack frame, from the cubin */
  unsigned static_smem;   /* bytes of static shared memory, as the cubin records it (1 KiB the compiler
                             reserves where the kernel uses mbarriers included) */
  unsigned dynamic_smem;  /* as registered (STEAL's and CLC's response ring comes after it, 128 bytes
                             at smem_bytes rounded up to 16, in the runs that use it) */
  size_t param_bytes;     /* size of the Args parameter (the driver's word; in compile-only mode the cubin's) */
  int has_clc;            /* the cubin contains UGETNEXTWORKID (clusterlaunchcontrol.try_cancel) */
  double compile_ms;      /* NVRTC time of the compile that made this kernel (0 when it came from the
                             disk cache) */
  int from_cache;         /* 0 compiled, 1 memory cache, 2 disk cache: how the latest registration
                             that returned this kernel found it (registrations that find the same
                             kernel all get the same handle) */
} clcrt_kernel_info;

#define CLCRT_KERNEL_INFO_INIT                                                                                 \
  {.size = sizeof(clcrt_kernel_info), .name = NULL, .arch = NULL, .sched = CLCRT_SCHED_AUTO,                    \
   .grid = CLCRT_GRID_AUTO, .block = {0, 0, 0}, .cluster = {0, 0, 0}, .registers = 0, .stack_bytes = 0,         \
   .static_smem = 0, .dynamic_smem = 0, .param_bytes = 0, .has_clc = 0, .compile_ms = 0.0, .from_cache = 0}
CLCRT_API clcrt_status clcrt_kernel_info_get(const clcrt_kernel *k, clcrt_kernel_info *info);

/* Streams. cu NULL: clcrt creates and owns a non-blocking stream. A CUstream of a green context has
 * its persistent grids sized for that context's SMs (see clcrt_stream_create_ex, SM budgets). */
CLCRT_API clcrt_status clcrt_stream_create(clcrt_runtime *rt, CUstream cu, clcrt_stream **out);
CLCRT_API void clcrt_stream_destroy(clcrt_stream *s); /* NULL is a no-op; waits for the stream's work */
CLCRT_API CUstream clcrt_stream_cu(const clcrt_stream *s);
/* Asynchronous, like a kernel launch. args/args_size: the host copy of Args; the size is
 * checked against the compiled kernel. An empty tile grid is a no-op. */
CLCRT_API clcrt_status clcrt_run(clcrt_stream *s, const clcrt_kernel *k, clcrt_dim3 tiles, const void *args,
                                 size_t args_size);
/* clcrt_run with flags (0: clcrt_run). CLCRT_RUN_PDL (sm_90+; ignored below, or with CLCRT_PDL=0 in
 * the environment): programmatic dependent launch. The run's grid starts launching while the
 * grid before it on the stream finishes; every clcrt kernel waits for that grid to complete
 * before its first access to memory (griddepcontrol.wait, the first statement of its entry), so
 * results are the same either way. What overlaps is the launch: measured on the H100 (GEMMs back
 * to back) it saved 0.5 to 1.9 us per run on runs of 13 to 22 us, and cost runs of 37 to 92 us
 * 2 to 8 us (docs/results.md, GEMM): ask for it on short runs only. */
#define CLCRT_RUN_PDL 1u
CLCRT_API clcrt_status clcrt_run_ex(clcrt_stream *s, const clcrt_kernel *k, clcrt_dim3 tiles, const void *args,
                                    size_t args_size, unsigned flags);
CLCRT_API clcrt_status clcrt_stream_sync(clcrt_stream *s);

/* Statistics of the runs on a stream (off by default; no device work when off). Runs with
 * statistics on launch the kernel's observed variant, as traced runs do (see tracing): enabling
 * builds the observed variant of every kernel of the runtime first (a compile each, once). */
typedef struct clcrt_stream_stats {
  size_t size;
  unsigned long long runs;      /* runs since the statistics were enabled or reset */
  unsigned long long tiles;     /* tiles handed to the tile function */
  unsigned long long steals;    /* work units a cluster obtained beyond its first */
  unsigned num_sms;             /* entries in tiles_per_sm */
  const unsigned long long *tiles_per_sm; /* valid until the next call on the stream */
  unsigned long long clusters;  /* clusters that obtained at least one unit */
  unsigned long long max_units_per_cluster;
} clcrt_stream_stats;
#define CLCRT_STREAM_STATS_INIT                                                                                \
  {.size = sizeof(clcrt_stream_stats), .runs = 0, .tiles = 0, .steals = 0, .num_sms = 0, .tiles_per_sm = NULL, \
   .clusters = 0, .max_units_per_cluster = 0}
CLCRT_API clcrt_status clcrt_stream_stats_enable(clcrt_stream *s, int on);
/* Synchronises the stream, then reads and resets the counters. */
CLCRT_API clcrt_status clcrt_stream_stats_read(clcrt_stream *s, clcrt_stream_stats *out);

/* Priorities and preemption. A stream's priority is that of its CUstream
 * (cuStreamCreateWithPriority), read once at clcrt_stream_create and normalised: 0 is the
 * device's lowest priority, larger is more urgent. While work of a higher priority runs on
 * the device, STEAL runs of lower priority stop claiming units after their current ones
 * and leave their SMs; the units they leave are run when the urgent work is done (see
 * docs/design.md, "Preemption"). A clcrt_run on a stream of higher than the lowest priority does
 * this by itself; clcrt_preempt_begin/end bracket other work (your own kernels) enqueued
 * on s, a stream of higher than the lowest priority. Pairs nest; each call is enqueued on
 * s like a kernel (and captured into graphs like one). */
CLCRT_API int clcrt_stream_priority(const clcrt_stream *s); /* -1 for NULL */
CLCRT_API clcrt_status clcrt_preempt_begin(clcrt_stream *s);
CLCRT_API clcrt_status clcrt_preempt_end(clcrt_stream *s);

/* Timeline tracing (off by default). A kernel is compiled with no trace or statistics code at
 * all; a run on a traced stream, or one with statistics on, launches the kernel's observed
 * variant instead (CLCRT_USE_TRACE, see variants). -DCLCRT_TRACE=0 in a descriptor's options compiles the recording out of the observed
 * variant too. While on, thread 0 of
 * every CTA records each of its tiles on the device into a buffer of `capacity` records
 * (48 bytes each): the first `capacity` are kept, however the tiles spread over the SMs, and
 * the rest counted (clcrt_trace_dropped), never written out of bounds. Each record costs
 * one atomic on a counter the device shares (what that costs: make bench, section trace).
 * Times are %globaltimer nanoseconds as thread 0 of the CTA saw them (at the resolution the
 * GPU updates that timer with). A run captured into a graph records into the buffer of the
 * stream it was captured from, under the run number it had then: disable tracing while
 * capturing graphs that outlive the buffer. */
typedef struct clcrt_trace_record {
  uint64_t start_ns, end_ns; /* the tile function's call, as thread 0 saw it */
  uint64_t tile;             /* the tile's linear index */
  uint32_t unit;             /* the work unit (cluster-shaped block of tiles) */
  uint32_t cluster;          /* the cluster's index in the launched grid */
  uint32_t run;              /* the run on the stream, counted from 0 since tracing was enabled */
  uint16_t sm;               /* %smid */
  uint8_t cta_rank;          /* the CTA's rank in its cluster */
  uint8_t flags;             /* CLCRT_TRACE_STOLEN, CLCRT_TRACE_WAIT */
  uint32_t reserved;
} clcrt_trace_record;
#define CLCRT_TRACE_STOLEN 1u /* STEAL and CLC: the unit was claimed, not the cluster's first (never set
                                 by STATIC, whose later units are its own, nor by FIXED) */
#define CLCRT_TRACE_WAIT 2u   /* a task graph's tile waiting for the tiles it needs (clcrt_ops.h), from its
                                 ticket to the end of its waits: not a tile; clcrt_trace_summarize leaves it
                                 out of tiles and busy time, the JSON names it "wait N" */
#define CLCRT_TRACE_MAX_SMS 1024

typedef struct clcrt_trace clcrt_trace; /* opaque: a set of records, owned by the caller */

/* capacity 0 turns tracing off; a new capacity replaces the buffer (and its records).
 * Synchronises the stream when the buffer changes. Enabling builds the observed variant of every
 * kernel of the runtime first (a compile each, once); should one be missing all the same (its
 * build failed), runs of that kernel record nothing and their tiles count as dropped. */
CLCRT_API clcrt_status clcrt_stream_trace_enable(clcrt_stream *s, size_t capacity);
/* Synchronises the stream, takes every record written since the last read (sorted by
 * start time) and empties the device buffer. Destroy the result with clcrt_trace_destroy. */
CLCRT_API clcrt_status clcrt_stream_trace_read(clcrt_stream *s, clcrt_trace **out);
/* A trace from records of your own, copied and sorted by start_ns (ties: sm, then tile;
 * otherwise in the order given). A record ending before it starts, or with
 * sm >= CLCRT_TRACE_MAX_SMS, is refused (CLCRT_E_INVALID). reserved reads back 0. */
CLCRT_API clcrt_status clcrt_trace_create(const clcrt_trace_record *records, size_t count,
                                          unsigned long long dropped, clcrt_trace **out);
CLCRT_API void clcrt_trace_destroy(clcrt_trace *t); /* NULL is a no-op */
/* Sorted by start_ns (ties: sm, then tile); valid until clcrt_trace_destroy; NULL when empty. */
CLCRT_API const clcrt_trace_record *clcrt_trace_records(const clcrt_trace *t, size_t *count);
CLCRT_API unsigned long long clcrt_trace_dropped(const clcrt_trace *t); /* records that did not fit */
/* Chrome/Perfetto trace-event JSON (open it in ui.perfetto.dev): one process per run
 * (pid = run + 1); per SM one track per tile it ran at once (tid = 1 + sm + 1024 * lane:
 * Perfetto drops complete events that overlap on one track, and co-resident CTAs overlap);
 * one complete event per tile with every record field as integers in args; ts/dur in us
 * from the first start. clcrt_trace_load_json reads such files back exactly, and any
 * trace-event file whose X events carry those args. Hostile input is an error with line,
 * column and byte in clcrt_errmsg(NULL), never a crash. A regular file is written under a
 * temporary name and renamed. */
CLCRT_API clcrt_status clcrt_trace_save_json(const clcrt_trace *t, const char *path);
CLCRT_API clcrt_status clcrt_trace_load_json(const char *path, clcrt_trace **out);

/* A trace of several runs is one timeline: time between runs counts as idle. */
typedef struct clcrt_trace_summary {
  size_t size; /* sizeof(clcrt_trace_summary): use CLCRT_TRACE_SUMMARY_INIT */
  unsigned long long tiles, steals, runs, dropped;
  unsigned num_sms;   /* 1 + the highest SM id that ran a tile (0 when empty) */
  double span_ns;     /* first start to last end */
  double tail_ns;     /* the last end minus the earliest, over SMs that ran a tile, of that SM's last end */
  double imbalance;   /* max/mean busy time over SMs that ran a tile; 0 when none was busy */
  double busy_mean;   /* mean busy fraction of those SMs */
  /* per SM: length of the union of its tile intervals (CTAs sharing an SM overlap) / span;
   * 0 for SMs that ran none, when span is 0, and from num_sms on */
  double busy_fraction[CLCRT_TRACE_MAX_SMS];
} clcrt_trace_summary;
#define CLCRT_TRACE_SUMMARY_INIT                                                                               \
  {.size = sizeof(clcrt_trace_summary), .tiles = 0, .steals = 0, .runs = 0, .dropped = 0, .num_sms = 0,        \
   .span_ns = 0, .tail_ns = 0, .imbalance = 0, .busy_mean = 0, .busy_fraction = {0}}
CLCRT_API clcrt_status clcrt_trace_summarize(const clcrt_trace *t, clcrt_trace_summary *out);

/* Host helpers for tile functions. A 2-D tensor map for TMA loads and stores
 * (cuTensorMapEncodeTiled): rows x cols elements, row-major with row_stride_bytes between
 * rows, boxes of box_rows x box_cols. Put it in Args (its alignment is the 64 bytes TMA
 * needs) and use it from the tile function through the address of that Args field. */
typedef enum clcrt_dtype { CLCRT_DTYPE_BF16 = 0, CLCRT_DTYPE_F16, CLCRT_DTYPE_F32, CLCRT_DTYPE_U8 } clcrt_dtype;
typedef enum clcrt_swizzle {
  CLCRT_SWIZZLE_NONE = 0,
  CLCRT_SWIZZLE_32B,
  CLCRT_SWIZZLE_64B,
  CLCRT_SWIZZLE_128B
} clcrt_swizzle;
typedef struct clcrt_tensor_map {
  uint64_t opaque[16];
} __attribute__((aligned(64))) clcrt_tensor_map;
CLCRT_API clcrt_status clcrt_tensor_map_2d(clcrt_runtime *rt, clcrt_tensor_map *out, clcrt_dtype dtype,
                                           unsigned long long base, uint64_t rows, uint64_t cols,
                                           uint64_t row_stride_bytes, uint32_t box_rows, uint32_t box_cols,
                                           clcrt_swizzle swizzle);
/* The same with the L2 promotion of the map's loads given (clcrt_tensor_map_2d promotes to
 * 256 bytes). A stream read once in narrow boxes may run faster without: the GEMM's weights in
 * its 64-row transposed tiles do (ops/NOTES.md). */
typedef enum clcrt_l2_promotion {
  CLCRT_L2_PROMOTION_256B = 0,
  CLCRT_L2_PROMOTION_NONE,
  CLCRT_L2_PROMOTION_64B,
  CLCRT_L2_PROMOTION_128B
} clcrt_l2_promotion;
CLCRT_API clcrt_status clcrt_tensor_map_2d_l2(clcrt_runtime *rt, clcrt_tensor_map *out, clcrt_dtype dtype,
                                              unsigned long long base, uint64_t rows, uint64_t cols,
                                              uint64_t row_stride_bytes, uint32_t box_rows, uint32_t box_cols,
                                              clcrt_swizzle swizzle, clcrt_l2_promotion promotion);

/* Compile cache counters of a runtime (an observed variant, see tracing, counts as a kernel of
 * its own). */
typedef struct clcrt_cache_stats {
  size_t size;
  unsigned long long mem_hits, disk_hits, misses, uncached;
  double compile_ms, load_ms; /* summed over the runtime's life */
} clcrt_cache_stats;
#define CLCRT_CACHE_STATS_INIT                                                                                 \
  {.size = sizeof(clcrt_cache_stats), .mem_hits = 0, .disk_hits = 0, .misses = 0, .uncached = 0,              \
   .compile_ms = 0.0, .load_ms = 0.0}
CLCRT_API clcrt_status clcrt_cache_stats_get(const clcrt_runtime *rt, clcrt_cache_stats *out);
/* The disk cache directory the runtime uses, as an absolute path, valid while rt lives; NULL
 * when it uses none (turned off, or refused at creation: opts.log says why). */
CLCRT_API const char *clcrt_runtime_cache_dir(const clcrt_runtime *rt);

/* Asynchronous compile on libuv's thread pool: returns at once; cb runs on `loop` with the
 * status, the kernel (NULL on failure) and the failure's message (NULL on success). Call it
 * on the loop's thread. At most as many NVRTC compiles run at once as the machine has cores.
 * Destroying the runtime first is safe: clcrt_runtime_destroy waits for the runtime's
 * compiles that are running (not for queued ones, nor for the loop), and every callback
 * not yet delivered then gets CLCRT_E_CANCELLED with a NULL kernel, never a freed one; run
 * the loop afterwards so that those callbacks free their requests. */
typedef void (*clcrt_register_cb)(void *user, clcrt_status st, clcrt_kernel *k, const char *errmsg);
CLCRT_API clcrt_status clcrt_register_async(clcrt_runtime *rt, const clcrt_tile_desc *d, uv_loop_t *loop,
                                            clcrt_register_cb cb, void *user);

/* Completion on a loop: cb runs on `loop` once every run enqueued on s before this call
 * has finished (cuLaunchHostFunc + uv_async_send). Call it on the loop's thread; it is
 * refused during graph capture. After a device fault the callback gets CLCRT_E_CUDA once
 * clcrt_stream_sync or clcrt_stream_destroy has seen the fault. */
typedef void (*clcrt_notify_cb)(void *user, clcrt_status st);
CLCRT_API clcrt_status clcrt_run_notify(clcrt_stream *s, uv_loop_t *loop, clcrt_notify_cb cb, void *user);

/* Sharing the GPU: streams with an SM budget (docs/sharing.md).
 *
 * A persistent grid takes every SM it may: on a plain stream, the whole device. An SM budget
 * gives a stream a part of the device (a CUDA green context: the driver's own SM partition,
 * CUDA 12.4+), so that other work (communication kernels, another model) keeps the rest, and
 * clcrt sizes the stream's persistent grids for that part. clcrt_stream_create_ex makes such
 * a stream, or wraps a CUstream of your own green context (clcrt_stream_create does that
 * too: either way the grid is sized for the stream's green context, found with
 * cuStreamGetCtx_v2 and cuGreenCtxGetDevResource).
 *
 *   cu         NULL: clcrt creates the stream (and owns it); else your CUstream, plain or of a
 *              green context of yours (which stays yours: destroy it after the clcrt stream).
 *              A CUstream of your own takes neither sm_budget nor priority: its own apply.
 *   sm_budget  0: no budget (the whole device, or your stream's green context). N: the stream
 *              runs on a green context of N SMs that clcrt makes and shares between every
 *              stream of the process with the same partition of the device, destroying it
 *              with the last of them. The driver partitions SMs in co-scheduled groups (8 on
 *              H100, at least 8 per partition): a budget it cannot make exactly is refused
 *              (CLCRT_E_UNSUPPORTED, the message says which sizes it can make) unless flags
 *              allow rounding; more SMs than the device has is CLCRT_E_INVALID. A driver
 *              without green contexts gives CLCRT_E_UNSUPPORTED.
 *   priority   clcrt's levels (clcrt_stream_priority): 0 the device's lowest (CUDA's default),
 *              larger is more urgent, clamped to the device's range; for a stream clcrt creates.
 *   flags      CLCRT_STREAM_SM_ROUND_UP: accept the smallest partition of at least sm_budget
 *              SMs; CLCRT_STREAM_SM_ROUND_DOWN: the largest of at most sm_budget (at least the
 *              minimum); CLCRT_STREAM_SM_REST: the stream runs on the SMs a budget of
 *              sm_budget leaves (the rest of the same split, disjoint from that budget's
 *              partition: the other side of a GEMM on sm_budget SMs, e.g. communication).
 *   grid_sms   0: persistent grids (STEAL, STATIC) are sized for the stream's SMs. N (at most
 *              the device's SMs): for N SMs instead, e.g. the whole device's on a budget
 *              stream (an oversubscribed grid, as before budgets), or fewer than the device's
 *              on a plain stream (a smaller grid and nothing else: other work may still take
 *              those SMs; runs of one cluster per unit, FIXED's, are not limited).
 * Cluster occupancy inside a partition is derived, not queried per run: on a budget's own
 * partition (whole co-scheduled groups of G SMs, 8 on an H100), floor(G x the kernel's CTAs per
 * SM / cluster size) clusters per group, what the H100 ran at once; elsewhere (the remainder
 * side, a user's green context, grid_sms) CTAs per SM x SMs for 1-CTA kernels, and the whole
 * device's clusters in proportion for clusters, an estimate (docs/sharing.md says why and what
 * the H100 measured). */
typedef struct clcrt_stream_opts {
  size_t size;
  CUstream cu;
  unsigned sm_budget;
  unsigned priority;
  unsigned flags;
  unsigned grid_sms;
} clcrt_stream_opts;
#define CLCRT_STREAM_OPTS_INIT                                                                                 \
  {.size = sizeof(clcrt_stream_opts), .cu = NULL, .sm_budget = 0, .priority = 0, .flags = 0, .grid_sms = 0}
#define CLCRT_STREAM_SM_ROUND_UP 1u
#define CLCRT_STREAM_SM_ROUND_DOWN 2u
#define CLCRT_STREAM_SM_REST 4u
/* opts NULL is clcrt_stream_create(rt, NULL, out). */
CLCRT_API clcrt_status clcrt_stream_create_ex(clcrt_runtime *rt, const clcrt_stream_opts *opts, clcrt_stream **out);
/* SMs the stream's runs may use: its green context's, else the device's (-1 for NULL). */
CLCRT_API int clcrt_stream_sms(const clcrt_stream *s);
/* SMs its persistent grids are sized for: grid_sms when given, else clcrt_stream_sms (-1 for NULL). */
CLCRT_API int clcrt_stream_grid_sms(const clcrt_stream *s);

/* A small persistent key-value store in the runtime's cache directory, for results a
 * program measures once and reuses in later processes (a GEMM's chosen plan). Entries
 * are scoped by the runtime's device (architecture, device name and SM count; in
 * compile-only mode the architecture), so another GPU never reads them. Values are at
 * most CLCRT_STORE_MAX_VALUE bytes (64 KiB). A namespace and a key are 1 to
 * CLCRT_STORE_MAX_NAME bytes, with no '/' and no control characters. Entries live in
 * <cache dir>/store, one file each, written atomically (another process, or thread, reads
 * the old value or the new one whole, never a mix); they are not evicted, and
 * `clcrt cache ls` lists them, `clcrt cache clear` removes them. */
#define CLCRT_STORE_MAX_VALUE 65536u
#define CLCRT_STORE_MAX_NAME 255u
/* Replaces any value of ns/key. CLCRT_E_INVALID for bad arguments; CLCRT_E_UNSUPPORTED when
 * the store is off (no disk cache); CLCRT_E_IO when the cache directory cannot be written
 * (a read-only cache still serves clcrt_store_get). */
CLCRT_API clcrt_status clcrt_store_put(clcrt_runtime *rt, const char *ns, const char *key,
                                       const void *value, size_t size);
/* CLCRT_E_NOT_FOUND when there is no entry (or the store is off: no disk cache); a damaged
 * entry reads as not found and is removed. *size gets the value's size; with cap too small,
 * CLCRT_E_INVALID and *size the size needed. */
CLCRT_API clcrt_status clcrt_store_get(clcrt_runtime *rt, const char *ns, const char *key,
                                       void *value, size_t cap, size_t *size);

#ifdef __cplusplus
}
#endif
#endif /* CLCRT_H */

/* The CUDA driver as the runtime loaded it: libcuda.so.1 opened at run time and every entry
 * point taken through cuGetProcAddress, so that a program that makes its own driver calls
 * through this table (device buffers, events, graphs) needs no libcuda to link or to start,
 * as the runtime needs none (a missing driver is CLCRT_E_NO_DEVICE from clcrt_runtime_create,
 * not a loader error). Declared once <cuda.h> has been included, before or after this header
 * (this part has a guard of its own). Entries are only ever appended. */
#if defined(CUDA_VERSION) && !defined(CLCRT_H_DRIVER)
#define CLCRT_H_DRIVER
#ifdef __cplusplus
extern "C" {
#endif
/* X(name): every driver entry point in the table. Each field has the type of cuda.h's own
 * prototype (which maps e.g. cuMemAlloc to cuMemAlloc_v2), looked up by the base name.
 * cuGetProcAddress returns the newest ABI of a name for CUDA_VERSION, so only names whose
 * cuda.h prototype IS that newest ABI may be listed: cuCtxSynchronize, for one, is not
 * (cuda.h's is the 2.0 ABI, CUDA 13.0 returns cuCtxSynchronize_v2(CUcontext)). The test
 * tests/test_driver.c guards this list against cudaTypedefs.h. */
#define CLCRT_DRIVER_MAP(X)          \
  X(cuInit)                          \
  X(cuDriverGetVersion)              \
  X(cuGetErrorName)                  \
  X(cuGetErrorString)                \
  X(cuDeviceGet)                     \
  X(cuDeviceGetCount)                \
  X(cuDeviceGetAttribute)            \
  X(cuDeviceGetName)                 \
  X(cuDevicePrimaryCtxRetain)        \
  X(cuDevicePrimaryCtxRelease)       \
  X(cuCtxSetCurrent)                 \
  X(cuCtxGetCurrent)                 \
  X(cuCtxPushCurrent)                \
  X(cuCtxPopCurrent)                 \
  X(cuLibraryLoadData)               \
  X(cuLibraryUnload)                 \
  X(cuLibraryGetKernel)              \
  X(cuKernelGetFunction)             \
  X(cuFuncSetAttribute)              \
  X(cuFuncGetAttribute)              \
  X(cuFuncGetParamInfo)              \
  X(cuOccupancyMaxActiveClusters)    \
  X(cuLaunchKernelEx)                \
  X(cuLaunchHostFunc)                \
  X(cuStreamCreate)                  \
  X(cuStreamDestroy)                 \
  X(cuStreamSynchronize)             \
  X(cuStreamQuery)                   \
  X(cuStreamGetCaptureInfo)          \
  X(cuStreamIsCapturing)             \
  X(cuMemAlloc)                      \
  X(cuMemFree)                       \
  X(cuMemsetD8)                      \
  X(cuMemcpyHtoD)                    \
  X(cuMemcpyDtoH)                    \
  X(cuMemcpyHtoDAsync)               \
  X(cuMemcpyDtoHAsync)               \
  X(cuMemcpyDtoDAsync)               \
  X(cuMemsetD32Async)                \
  X(cuStreamBeginCapture)            \
  X(cuStreamEndCapture)              \
  X(cuGraphInstantiateWithFlags)     \
  X(cuGraphLaunch)                   \
  X(cuGraphExecDestroy)              \
  X(cuGraphDestroy)                  \
  X(cuEventCreate)                   \
  X(cuEventRecord)                   \
  X(cuEventSynchronize)              \
  X(cuEventElapsedTime)              \
  X(cuEventDestroy)                  \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuStreamGetPriority)             \
  X(cuCtxGetStreamPriorityRange)     \
  X(cuStreamWriteValue32)            \
  X(cuMemsetD8Async)                 \
  X(cuTensorMapEncodeTiled)         \
  X(cuStreamCreateWithPriority)     \
  X(cuEventQuery)                    \
  X(cuMemHostAlloc)                  \
  X(cuMemHostGetDevicePointer)       \
  X(cuMemFreeHost)                   \
  X(cuStreamWaitEvent)               \
  X(cuThreadExchangeStreamCaptureMode) \
  X(cuUserObjectCreate)              \
  X(cuUserObjectRelease)             \
  X(cuGraphRetainUserObject)

#ifdef __cplusplus
#define CLCRT__DRIVER_FIELD(name) decltype(name) *name;
#else
#define CLCRT__DRIVER_FIELD(name) __typeof__(name) *name;
#endif
typedef struct clcrt_driver {
  CLCRT_DRIVER_MAP(CLCRT__DRIVER_FIELD)
} clcrt_driver;
#undef CLCRT__DRIVER_FIELD

/* The runtime's driver table; NULL in compile-only mode. */
CLCRT_API const clcrt_driver *clcrt_runtime_driver(const clcrt_runtime *rt);
/* The device's primary context, which the runtime retains: make it current (cuCtxSetCurrent)
 * before driver calls of your own on a thread. NULL in compile-only mode. clcrt's calls run in
 * it: where the calling thread has another context current (another device's, as a PyTorch
 * thread whose current device is another GPU has), they push this one and pop it before they
 * return, so the thread finds its own again, as torch's operators leave the current device;
 * where the thread has none, they make this one current and leave it so. */
CLCRT_API CUcontext clcrt_runtime_context(const clcrt_runtime *rt);
#ifdef __cplusplus
}
#endif
#endif /* CLCRT_H_DRIVER */
