/* clcrt's ABI between the runtime (C11, runtime/) and the device template (CUDA C++ that
 * NVRTC compiles, nvrtc_src/): the parameters every kernel takes after Args, the layout of
 * the device memory runs claim from and record into, and the variant bits. Declared once,
 * here, in the common subset of C11 and CUDA C++: embedded for NVRTC with the template
 * (Makefile: TEMPLATE) and included by the runtime (core/internal.h). Both compilers check
 * every field of clcrt__params against the offsets written in CLCRT__PARAMS_LAYOUT, so a
 * field that one side would lay out differently is a compile error on that side, and the
 * loaded kernel's parameter size is checked once more at load time (compile/kernel.c).
 * How the device uses these words, and why: nvrtc_src/clcrt_ring.cuh (the protocol),
 * clcrt_steal.cuh (claims), clcrt_variant.cuh (graph table, preemption, trace). */
#ifndef CLCRT_ABI_H
#define CLCRT_ABI_H

#ifdef __CUDACC_RTC__
/* The device: addresses are typed pointers. NVRTC's front end has no __builtin_offsetof;
 * its own __INTADDR__ folds the classic null-pointer form into a constant. */
#define CLCRT__DPTR(type) type *
#define CLCRT__OFFSETOF(type, field) ((unsigned long)__INTADDR__(&(((type *)0)->field)))
#define CLCRT__ASSERT(cond, msg) static_assert(cond, msg)
#else
/* The host: a device address is a CUdeviceptr. */
#include <stddef.h>
#include <stdint.h>
#define CLCRT__DPTR(type) uint64_t
#define CLCRT__OFFSETOF(type, field) offsetof(type, field)
#ifdef __cplusplus
#define CLCRT__ASSERT(cond, msg) static_assert(cond, msg)
#else
#define CLCRT__ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
#endif

/* The scheduler parameters, passed to every kernel by value after Args (a __grid_constant__
 * parameter; the device calls them clcrt::Params). First what a run of one cluster per unit
 * reads (FIXED, STEAL's SHORT variant), right after Args: the parameters are read through
 * the constant cache, and a short kernel's first read of a line it shares with no one is a
 * miss on the path to its first load. */
typedef struct clcrt__params {
  unsigned flags;               /* CLCRT__PF_* */
  unsigned units[3];            /* work units: ceil(tiles / cluster shape) */
  unsigned seq;                 /* the run's sequence number on its stream (which claim line) */
  unsigned num_units;           /* units[0] * units[1] * units[2] */
  unsigned long long state;     /* STEAL: the stream's two claim lines, or the context's graph table */
  unsigned tiles[3];            /* the tile grid */
  unsigned num_clusters;        /* clusters launched */
  CLCRT__DPTR(unsigned long long) stats; /* optional statistics: [0] tiles, [1] steals, [2] clusters,
                                            [3] max units per cluster, [4 + sm] tiles per SM */
  unsigned long long trace;     /* optional: the stream's trace buffer (CLCRT__TRACE_*) */
  CLCRT__DPTR(const unsigned) yield; /* optional: the device's preemption words; 0: never yield */
  unsigned run;                 /* the run's number, for the trace */
  unsigned chunk_cycles;        /* STEAL: a claim takes units lasting about this many cycles */
  unsigned active;              /* clusters that run at once: min(launched, resident) */
  unsigned prio;                /* the run's priority level: it yields to any higher level */
  unsigned div1_mul, div1_shr;  /* fast division by units[0] (mul 0: by 1) */
  unsigned div2_mul, div2_shr;  /* fast division by units[1] */
  unsigned guide_mul, guide_shr; /* fast division by 2 * active */
  unsigned claim_base;          /* STEAL: units below are the clusters' own (cluster c's first is c);
                                   claims start here */
  unsigned yield_words;         /* preemption words in use, a multiple of 4 (at most 32) */
  CLCRT__DPTR(unsigned) unit_cycles; /* optional, STEAL: CLCRT__HINT_WORDS words of mapped host memory where
                                        the first clusters of a claiming run leave their cycles per unit */
} clcrt__params;

/* Every field's byte offset: checked by both compilers (below), and by tests/test_core.c
 * against the device's layout through a compiled kernel. */
#define CLCRT__PARAMS_LAYOUT(X)                                                                                   \
  X(flags, 0) X(units, 4) X(seq, 16) X(num_units, 20) X(state, 24) X(tiles, 32) X(num_clusters, 44) X(stats, 48) \
  X(trace, 56) X(yield, 64) X(run, 72) X(chunk_cycles, 76) X(active, 80) X(prio, 84) X(div1_mul, 88)            \
  X(div1_shr, 92) X(div2_mul, 96) X(div2_shr, 100) X(guide_mul, 104) X(guide_shr, 108) X(claim_base, 112)        \
  X(yield_words, 116) X(unit_cycles, 120)
#define CLCRT__PARAMS_BYTES 128u
#define CLCRT__PARAMS_CHECK(field, offset)                          \
  CLCRT__ASSERT(CLCRT__OFFSETOF(clcrt__params, field) == (offset), \
                "clcrt__params." #field " is not at byte " #offset);
CLCRT__PARAMS_LAYOUT(CLCRT__PARAMS_CHECK)
CLCRT__ASSERT(sizeof(clcrt__params) == CLCRT__PARAMS_BYTES, "clcrt__params is not CLCRT__PARAMS_BYTES long");

/* clcrt__params.flags. */
#define CLCRT__PF_GRAPH 1u /* state is the context's graph table (a run captured into a graph) */
#define CLCRT__PF_GRID3 2u /* one cluster per unit launched as a 3-D grid of units (FIXED, SHORT) */

/* The variants of a kernel: what it is compiled with beyond its tile loop (the template's
 * V). These are the public CLCRT_USE_* of include/clcrt.h, the API, repeated here token for
 * token because NVRTC never sees that header: on the host both definitions are seen, and a
 * difference is a redefinition error (-Werror). A registered kernel is variant 0; a run
 * launches the variant with the bits it uses (runtime/launch/launch.c), built by
 * clcrt__kernel_variant (runtime/compile/register.c).
 *   CLCRT_USE_TRACE    timeline trace and statistics: traced runs, runs with statistics on
 *   CLCRT_USE_GRAPH    STEAL claims from the context's graph table: runs captured into a graph
 *   CLCRT_USE_PREEMPT  STEAL clusters may yield to higher-priority work: runs that can be preempted
 *   CLCRT_USE_SHORT    STEAL without claim code: every cluster runs the unit of its own and
 *                      leaves, as under FIXED (runs with no more units than clusters fit at
 *                      once, and runs of long units); it replaces GRAPH and PREEMPT
 * Leaving out what a run does not use keeps the kernel small: the README kernel's STEAL cubin
 * has about half the instructions without GRAPH and PREEMPT, and its first compile takes
 * about a quarter less (README, Compile). */
#define CLCRT_USE_TRACE 1u
#define CLCRT_USE_GRAPH 2u
#define CLCRT_USE_PREEMPT 4u
#define CLCRT_USE_SHORT 8u
#define CLCRT__USE_ALL 15u /* every bit */
#define CLCRT__VARIANTS 16 /* variants of a kernel, by bits: CLCRT__USE_ALL + 1 */
CLCRT__ASSERT(CLCRT__USE_ALL == (CLCRT_USE_TRACE | CLCRT_USE_GRAPH | CLCRT_USE_PREEMPT | CLCRT_USE_SHORT) &&
                  CLCRT__VARIANTS == CLCRT__USE_ALL + 1,
              "CLCRT__USE_ALL names every variant bit");

/* Claim lines. A STEAL run claims units from a 128-byte line of its own: word
 * CLCRT__LINE_CTR is the claim counter, word CLCRT__LINE_STARTED counts the clusters that
 * started with work left (runs that may yield). A stream's state (clcrt__params.state) is
 * two lines: claiming run n claims from line n % 2 and zeroes line (n + 1) % 2 for the next
 * (runs that claim nothing take no number and touch neither line). */
#define CLCRT__LINE_WORDS 32u
#define CLCRT__LINE_CTR 0u
#define CLCRT__LINE_STARTED 1u

/* The graph table (state of a run captured into a graph): a first line with the table's lock
 * (word CLCRT__TABLE_LOCK) and reach (CLCRT__TABLE_REACH: the longest probe any launch
 * needed), then CLCRT__TABLE_SLOTS slots of CLCRT__SLOT_WORDS words: the owning launch's
 * %gridid (64 bits at CLCRT__SLOT_GRIDID), {clusters that left, clusters launched} (one
 * 64-bit word at CLCRT__SLOT_COUNT: the slot is live while the first is below the second),
 * then the launch's claim line (at CLCRT__SLOT_CLAIMS). */
#define CLCRT__TABLE_LOCK 0u
#define CLCRT__TABLE_REACH 1u
#define CLCRT__TABLE_SLOTS 256u
#define CLCRT__SLOT_WORDS (2u * CLCRT__LINE_WORDS)
#define CLCRT__SLOT_GRIDID 0u
#define CLCRT__SLOT_COUNT 4u
#define CLCRT__SLOT_CLAIMS CLCRT__LINE_WORDS

/* A stream's trace buffer (clcrt__params.trace): a header line ([0] the capacity in
 * records), the record counter at word CLCRT__TRACE_HDR_WORDS (alone on its line), then the
 * records, CLCRT__TRACE_RECORD_BYTES each (include/clcrt.h: clcrt_trace_record), from byte
 * CLCRT__TRACE_RECORDS. */
#define CLCRT__TRACE_HDR_WORDS CLCRT__LINE_WORDS
#define CLCRT__TRACE_RECORDS (2u * 4u * CLCRT__TRACE_HDR_WORDS)
#define CLCRT__TRACE_RECORD_BYTES 48u

/* Long units (clcrt__params.unit_cycles): the first CLCRT__HINT_WORDS clusters of a claiming
 * STEAL run each leave their measured cycles per unit in a word of their own. */
#define CLCRT__HINT_WORDS 8u

/* STEAL's and CLC's response ring (nvrtc_src/clcrt_ring.cuh): CLCRT__RING_BYTES of dynamic
 * shared memory at CLCRT__RING_OFF(smem_bytes), after the tile function's own (a template
 * argument of the kernel, so that its addresses cost no registers). */
#define CLCRT__RING_BYTES 128u
#define CLCRT__RING_OFF(smem) (((smem) + 15u) & ~15u)
#endif
