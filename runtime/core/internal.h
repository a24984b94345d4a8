/* Internal structures shared by the runtime's subsystems. Not installed. */
#ifndef CLCRT_INTERNAL_H
#define CLCRT_INTERNAL_H
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#include "alloc.h"
#include "clcrt.h"
#include "cubin.h"
#include "driver.h"

#define CLCRT__ERRMSG_MAX 16384
#define CLCRT__CUDA_HOME_MAX 1000 /* bytes of a toolkit path (runtime.c: check_cuda_home) */
#define CLCRT__KEY_BYTES 32

/* The scheduler parameters (clcrt__params), the layout of the device memory runs claim from
 * and record into, and the variant bits (CLCRT_USE_*, CLCRT__USE_ALL, CLCRT__VARIANTS): the
 * ABI with the device template, declared once in nvrtc_src/clcrt_abi.h. */
#include "clcrt_abi.h"

/* Every CLCRT__HW_RECHECK-th run a kernel of long units would launch one cluster per unit is
 * launched persistent instead, so that its units are measured again (launch.c). Mapped host
 * memory for the measured cycles per unit (CLCRT__HINT_WORDS words a kernel): CLCRT__HINT_STRIDE
 * bytes per kernel in pages of CLCRT__HINT_PAGE bytes. */
#define CLCRT__HINT_STRIDE 64u
#define CLCRT__HINT_PAGE 65536u
#define CLCRT__HW_RECHECK 64u

typedef enum { CLCRT__K_BUILDING = 0, CLCRT__K_READY, CLCRT__K_FAILED } clcrt__kstate;

/* Occupancy of a loaded STEAL or STATIC kernel (kernel.c, at load): clusters resident at once
 * on the whole device, the fast division by twice that (a claiming run's guided bound), and the
 * kernel's CTAs per SM, from which a stream's SM partition derives its own count (green.h). */
typedef struct clcrt__occ {
  int clusters;
  uint32_t guide_mul, guide_shr;
  int blocks_per_sm; /* 0: unknown (the driver did not say for a cluster kernel) */
} clcrt__occ;

struct clcrt_kernel {
  /* What clcrt_run reads on every run, together at the start: the driver's launch path evicts
   * these lines between runs, so every line the run touches costs a miss (host overhead). */
  clcrt_runtime *rt;
  struct clcrt_kernel *base;   /* the registered kernel (variant 0); itself there */
  CUfunction fn;
  size_t args_size;            /* Args parameter size, from cuFuncGetParamInfo */
  clcrt_sched sched;
  clcrt_grid grid;
  clcrt_dim3 block, cluster;
  unsigned nthreads, cluster_size;
  unsigned smem_bytes;
  unsigned ring_bytes;         /* STEAL and CLC: CLCRT__RING_OFF(smem_bytes) - smem_bytes + CLCRT__RING_BYTES */
  unsigned variant;            /* CLCRT_USE_* bits this kernel was compiled with (0: as registered) */
  struct clcrt__variants *vars; /* the registered kernel's variants (variants.h), allocated with it */
  /* STEAL on an AUTO grid with no prologue (the base's): CLCRT__HINT_WORDS words of measured
   * cycles per unit in mapped host memory and their device address, or NULL / 0. */
  const volatile uint32_t *unit_cycles;
  uint64_t unit_cycles_dev;
  clcrt__occ occ;              /* STEAL and STATIC with a device: set at load (kernel.c) */

  struct clcrt_kernel *next;   /* the runtime's list (and memory cache) */
  clcrt__kstate state;         /* guarded by rt->lock */
  uint8_t key[CLCRT__KEY_BYTES];
  int cacheable;               /* key is valid */
  uint8_t desc_key[CLCRT__KEY_BYTES]; /* key of the registering description (memory fast path) */
  int has_desc_key;

  char *name;                  /* entry symbol */

  void *cubin;
  size_t cubin_size;
  char *ptx;                   /* NULL from a disk-cache entry without PTX: clcrt_kernel_ptx says E_NOT_FOUND */
  clcrt__cubin info;           /* parsed cubin */
  const clcrt__cubin_kernel *kinfo;
  double compile_ms;
  int from_cache;
  struct clcrt__deps *deps;    /* files outside the key this kernel was compiled from (cache/deps.h), or NULL */

  /* Device side; all zero in compile-only mode. */
  CUlibrary lib;
  CUkernel kern;
  size_t args_offset, params_offset;
  unsigned min_blocks;         /* desc.min_blocks_per_sm */
  clcrt_tile_desc *desc;       /* the registered description (one allocation); NULL in other variants */
};

struct clcrt_runtime {
  clcrt_runtime_opts opts;     /* copied; strings owned below */
  char *target_arch_own, *cache_dir_own, *cuda_home_own;
  char arch[16];               /* "sm_90a" */
  int sm;                      /* 90, 100, ... */
  int compile_only;

  const clcrt__driver *cu;     /* NULL in compile-only mode */
  clcrt_driver cu_pub;         /* the public part of *cu, for clcrt_runtime_driver (driver.h) */
  CUdevice dev;
  CUcontext ctx;               /* the device's primary context, retained */
  int num_sms;
  double mem_bw;               /* peak memory bytes per second (clcrt_runtime_mem_bandwidth); 0 unknown */
  int max_smem_optin;          /* bytes of dynamic shared memory a CTA may opt in to */
  /* Tunables (env.c: clcrt__tunables_get, options and environment), read once here. */
  unsigned chunk_cycles;       /* clcrt_run copies it into every STEAL run */
  unsigned long_cycles;        /* launch.c: long units; 0 never */
  unsigned preempt_waves;      /* plan.c */
  unsigned long long cache_max_bytes; /* the disk cache's cap; 0 none */
  int warmup;
  int pdl;                     /* launch.c: runs go with programmatic dependent launch (sm_90+, CLCRT_PDL) */
  /* Mapped host memory for kernels' measured unit times (CLCRT__HINT_*), a page at a time;
   * guarded by lock. */
  struct clcrt__hint_page *hint_pages;
  unsigned hint_used;          /* bytes handed out of the newest page */
  int max_cluster_size;        /* 16 where non-portable sizes are allowed, else 8 */

  pthread_mutex_t lock;        /* kernels, stats */
  pthread_cond_t cond;         /* a kernel finished building */
  int lock_ok, cond_ok;
  clcrt_kernel *kernels;
  uint64_t err_id;             /* errmsg.c: this runtime's key in every thread's messages, never reused */
  clcrt_cache_stats cstats;

  struct clcrt__devstate *devstate; /* sched_state.c: graph claim table, preemption words */
  int prio_least, prio_greatest;    /* cuCtxGetStreamPriorityRange (CUDA numbers: lower is more urgent) */

  char *disk_dir;              /* resolved disk cache directory, NULL when off */
  int nvrtc_major, nvrtc_minor;
  struct clcrt__builder *builder; /* background builds of variants (builder.c), from the first stream */
  int observing;               /* streams recording a trace or statistics (atomic; variants.h) */
};

/* errmsg.c. Records the detail of a failure as the calling thread's last message for rt
 * (clcrt_errmsg) and returns st. A NULL rt records it for clcrt_errmsg(NULL), as
 * clcrt__fail_norts does: the place of calls that take no runtime (trace functions). */
clcrt_status clcrt__fail(clcrt_runtime *rt, clcrt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
clcrt_status clcrt__vfail(clcrt_runtime *rt, clcrt_status st, const char *fmt, va_list ap);
clcrt_status clcrt__fail_norts(clcrt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t clcrt__err_new_id(void);                     /* a runtime's err_id */
const char *clcrt__err_get(const clcrt_runtime *rt);  /* this thread's message, NULL when none */
void clcrt__err_forget(const clcrt_runtime *rt);      /* drops this thread's message for rt */
void clcrt__log(clcrt_runtime *rt, clcrt_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Makes rt's context current on this thread for the length of one call (no-op in compile-only
 * mode): where the thread had another context current (another device's, as a PyTorch thread
 * whose current device is another GPU has), rt's is pushed and clcrt__ctx_leave pops it, so the
 * caller finds its own again; where it had none, rt's is made current and stays. */
typedef struct clcrt__ctx_saved {
  int pushed;
} clcrt__ctx_saved;
clcrt_status clcrt__ctx_push(clcrt_runtime *rt, clcrt__ctx_saved *sv);
void clcrt__ctx_leave(clcrt_runtime *rt, const clcrt__ctx_saved *sv);

/* The name of a driver error, e.g. "CUDA_ERROR_ILLEGAL_ADDRESS". */
const char *clcrt__cu_name(const clcrt_runtime *rt, CUresult r);

double clcrt__now_ms(void);
const char *clcrt__sched_name(clcrt_sched s);

/* compile.c: validation, the generated translation unit, NVRTC. */
typedef struct clcrt__build {
  /* resolved description */
  clcrt_sched sched;
  clcrt_grid grid;
  clcrt_dim3 block, cluster;
  unsigned smem_bytes;
  unsigned min_blocks;       /* __launch_bounds__ minimum blocks per SM, 0: none */
  char *name;                /* entry symbol */
  char *source;              /* the translation unit: it includes the template, user_src and entry */
  char **options;            /* canonical NVRTC options, in order */
  int num_options;
  int has_user_include_dirs; /* -I/--include-path, -include or a PCH option given by the user */
  int may_read_files;        /* the source may include a file from disk (cache/deps.h) */
  int probes_files;          /* the source uses __has_include (cache/deps.h) */
  int want_deps;             /* compile with NVRTC's time trace to learn the files it reads (cache.c) */
  char *user_name;           /* the user's source is the in-memory header of this name (the tile function's) */
  char *user_src;            /* ... with this text */
  char *entry;               /* the generated entry: the in-memory header "clcrt_entry" */
  int minimal;               /* compile with NVRTC's -minimal (compile.c: minimal_ok) */
  unsigned variant;          /* CLCRT_USE_* bits (the template's V) */
  const char *include_digest;
  /* results */
  void *cubin;
  size_t cubin_size;
  char *ptx;
  double compile_ms;
  struct clcrt__deps *deps;  /* want_deps: the files the compile read outside the key, NULL when unknown */
  char deps_why[384];        /* want_deps and no deps: why */
} clcrt__build;

/* validate.c: checks d and fills the resolved description into b (scheduler, grid, block,
 * cluster, shared memory, user include options). */
clcrt_status clcrt__build_validate(clcrt_runtime *rt, const clcrt_tile_desc *d, clcrt__build *b);
/* variant: CLCRT_USE_* bits, as clcrt__variant_bits gives them. */
clcrt_status clcrt__build_prepare(clcrt_runtime *rt, const clcrt_tile_desc *d, unsigned variant, clcrt__build *b);
clcrt_status clcrt__build_compile(clcrt_runtime *rt, clcrt__build *b);
void clcrt__build_free(clcrt__build *b);

/* stream.c */
clcrt_runtime *clcrt__stream_runtime(const clcrt_stream *s);

/* register.c */
/* A deep copy of d in one allocation (clcrt__free), or NULL when out of memory. */
clcrt_tile_desc *clcrt__desc_dup(const clcrt_tile_desc *d);
/* The variant bits a kernel of scheduler `sched` is compiled with for `bits`: bits its
 * scheduler has no code for are dropped (all but CLCRT_USE_TRACE outside STEAL), and so are
 * GRAPH and PREEMPT with SHORT (a run that claims nothing neither claims from a graph nor yields). One
 * variant, one translation unit, one cache entry. */
unsigned clcrt__variant_bits(clcrt_sched sched, unsigned bits);
/* The variant of k with k's bits and `bits` (CLCRT_USE_*; k itself when it has them all),
 * compiled and loaded on first use. */
clcrt_status clcrt__kernel_variant(const clcrt_kernel *k, unsigned bits, clcrt_kernel **out);

/* kernel.c */
clcrt_status clcrt__kernel_finish(clcrt_runtime *rt, clcrt_kernel *k); /* parse cubin, load */
/* kernel.c: what load records in k->occ for STEAL and STATIC kernels, for any loaded kernel
 * (its real block size and dynamic shared memory with the response ring). */
clcrt_status clcrt__kernel_occupancy(clcrt_runtime *rt, const clcrt_kernel *k, clcrt__occ *out);
void clcrt__kernel_free(clcrt_kernel *k);

/* compile.c: the shared memory a CTA may opt in to on an architecture (static and dynamic
 * together; 232448 bytes on sm_90 and sm_100), for compile-only runtimes, which have no
 * device to ask. */
unsigned clcrt__arch_smem_limit(int sm);

/* Supported NVRTC architectures, e.g. 90, 100; returns the count. */
int clcrt__nvrtc_archs(int *out, int max);
#endif
