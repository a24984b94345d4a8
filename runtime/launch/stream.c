/* Streams: life cycle, priorities and preemption, statistics, tracing. A clcrt_stream owns
 * its runs' scheduler state on the device: two sets of STEAL claim counters (sched_state.h;
 * each run zeroes the set of the next, so a run adds no launch of its own), optionally
 * statistics and a trace buffer. A stream runs on the whole device, or on a partition of its
 * SMs (a green context: one clcrt makes for an SM budget, green.c, or the user's own), which
 * launch.c sizes persistent grids for. Launches are in launch.c. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "async.h"
#include "builder.h"
#include "checks.h"
#include "sched_state.h"
#include "stream.h"
#include "variants.h"

clcrt_runtime *clcrt__stream_runtime(const clcrt_stream *s) { return s ? s->rt : NULL; }
CUstream clcrt_stream_cu(const clcrt_stream *s) { return s ? s->cu : NULL; }
int clcrt_stream_priority(const clcrt_stream *s) { return s ? (int)s->level : -1; }
int clcrt_stream_sms(const clcrt_stream *s) { return !s ? -1 : s->part.sms ? s->part.sms : s->rt->num_sms; }
int clcrt_stream_grid_sms(const clcrt_stream *s) { return s ? s->grid_sms : -1; }

int clcrt__stream_clusters(const clcrt_stream *s, const clcrt__occ *occ, unsigned cluster_size) {
  return clcrt__partition_clusters(occ, cluster_size, s->rt->num_sms, s->grid_sms, s->grid_align);
}

/* A stream clcrt made: on its green context (then the green context too, after the last of its
 * streams), or plain. */
static void destroy_cu(clcrt_stream *s) {
  if (s->part.green)
    clcrt__green_stream_destroy(s->rt, s->cu, &s->part);
  else
    s->rt->cu->cuStreamDestroy(s->cu);
}

#define KNOWN_FLAGS (CLCRT_STREAM_SM_ROUND_UP | CLCRT_STREAM_SM_ROUND_DOWN | CLCRT_STREAM_SM_REST)

/* The options' own consistency, before anything is made. */
static clcrt_status opts_check(clcrt_runtime *rt, const clcrt_stream_opts *o) {
  const char *fn = "clcrt_stream_create_ex";
  if (o->size < offsetof(clcrt_stream_opts, grid_sms) + sizeof o->grid_sms || o->size > sizeof *o)
    return clcrt__fail(rt, CLCRT_E_INVALID, "%s: opts->size is %zu: initialise the options with CLCRT_STREAM_OPTS_INIT",
                       fn, o->size);
  if (o->flags & ~KNOWN_FLAGS)
    return clcrt__fail(rt, CLCRT_E_INVALID, "%s: unknown flags 0x%x (CLCRT_STREAM_SM_* are 0x%x)", fn,
                       o->flags & ~KNOWN_FLAGS, KNOWN_FLAGS);
  if (o->cu && (o->sm_budget || o->priority || o->flags))
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "%s: a CUstream of your own takes no sm_budget, priority or flags (its context and priority "
                       "are its own): make the stream on a green context of yours, or leave cu NULL and let clcrt "
                       "make it",
                       fn);
  if ((o->flags & CLCRT_STREAM_SM_ROUND_UP) && (o->flags & CLCRT_STREAM_SM_ROUND_DOWN))
    return clcrt__fail(rt, CLCRT_E_INVALID, "%s: CLCRT_STREAM_SM_ROUND_UP and _ROUND_DOWN exclude each other", fn);
  if (o->flags && !o->sm_budget)
    return clcrt__fail(rt, CLCRT_E_INVALID, "%s: CLCRT_STREAM_SM_* flags need an sm_budget", fn);
  if (o->grid_sms > (unsigned)rt->num_sms)
    return clcrt__fail(rt, CLCRT_E_INVALID, "%s: grid_sms %u is more than this device's %d SMs", fn, o->grid_sms,
                       rt->num_sms);
  return CLCRT_OK;
}

clcrt_status clcrt_stream_create(clcrt_runtime *rt, CUstream cu, clcrt_stream **out) {
  clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
  o.cu = cu;
  return clcrt_stream_create_ex(rt, &o, out);
}

clcrt_status clcrt_stream_create_ex(clcrt_runtime *rt, const clcrt_stream_opts *opts, clcrt_stream **out) {
  if (!rt) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_stream_create: the runtime is NULL");
  if (!out) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_stream_create: out is NULL");
  *out = NULL;
  clcrt_stream_opts o = CLCRT_STREAM_OPTS_INIT;
  if (opts) {
    if (opts->size < sizeof(size_t) || opts->size > sizeof o)
      return clcrt__fail(rt, CLCRT_E_INVALID,
                         "clcrt_stream_create_ex: opts->size is %zu: initialise the options with "
                         "CLCRT_STREAM_OPTS_INIT",
                         opts->size);
    memcpy(&o, opts, opts->size);
  }
  if (rt->compile_only)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "this runtime only compiles (target_arch %s): create one without target_arch to run kernels",
                       rt->arch);
  clcrt_status st = opts_check(rt, &o);
  if (st != CLCRT_OK) return st;
  /* In the runtime's context; a caller's other context is current again on return. */
  clcrt__ctx_saved sv;
  if ((st = clcrt__ctx_push(rt, &sv)) != CLCRT_OK) return st;
  clcrt_stream *s = clcrt__calloc(1, sizeof *s);
  if (!s) {
    clcrt__ctx_leave(rt, &sv);
    return clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory allocating a stream");
  }
  s->rt = rt;
  /* clcrt's levels (0 the least urgent) to CUDA's numbers (prio_least down to prio_greatest). */
  int cuda_prio = rt->prio_least - (int)(o.priority > CLCRT__MAX_LEVEL ? CLCRT__MAX_LEVEL : o.priority);
  if (cuda_prio < rt->prio_greatest) cuda_prio = rt->prio_greatest;
  if (o.cu) {
    s->cu = o.cu;
    if ((st = clcrt__green_of_stream(rt, o.cu, &s->part)) != CLCRT_OK) goto fail;
  } else if (o.sm_budget) {
    if ((st = clcrt__green_stream(rt, o.sm_budget, o.flags, cuda_prio, &s->cu, &s->part)) != CLCRT_OK) goto fail;
    s->owned = 1;
  } else if (o.priority) {
    CU_CHECK_GOTO(rt, cuStreamCreateWithPriority(&s->cu, CU_STREAM_NON_BLOCKING, cuda_prio), st, fail);
    s->owned = 1;
  } else {
    CU_CHECK_GOTO(rt, cuStreamCreate(&s->cu, CU_STREAM_NON_BLOCKING), st, fail);
    s->owned = 1;
  }
  s->grid_sms = o.grid_sms ? (int)o.grid_sms : s->part.sms ? s->part.sms : rt->num_sms;
  /* Whole groups only where the grid is sized for the partition itself. */
  s->grid_align = s->part.sms && s->grid_sms == s->part.sms ? s->part.align : 0;
  /* CUDA numbers priorities downwards from the least (0) to the greatest (-5 on an H100). */
  int prio = 0;
  CU_CHECK_GOTO(rt, cuStreamGetPriority(s->cu, &prio), st, fail);
  int level = rt->prio_least - prio;
  if (level < 0) level = 0;
  if (level > (int)CLCRT__MAX_LEVEL) level = (int)CLCRT__MAX_LEVEL;
  s->level = (unsigned)level;
  CU_CHECK_GOTO(rt, cuMemAlloc(&s->state, CLCRT__STREAM_STATE_BYTES), st, fail);
  if ((st = clcrt__zero_device(rt, s->state, CLCRT__STREAM_STATE_BYTES)) != CLCRT_OK) goto fail;
  s->yield_slot = clcrt__devstate_stream_add(rt->devstate, s->level);
  /* Runs need a stream: the thread that builds their variants starts with the first. Once
   * streams of two priorities live, runs can be preempted: their yielding variants are built
   * before such a run needs them. */
  clcrt__builder_start(rt);
  clcrt__variants_preemptible(rt, NULL);
  *out = s;
  clcrt__ctx_leave(rt, &sv);
  return CLCRT_OK;
fail:
  if (s->state) rt->cu->cuMemFree(s->state);
  if (s->owned) destroy_cu(s);
  clcrt__free(s);
  clcrt__ctx_leave(rt, &sv);
  return st;
}

void clcrt_stream_destroy(clcrt_stream *s) {
  if (!s) return;
  clcrt_runtime *rt = s->rt;
  clcrt__ctx_saved sv;
  if (clcrt__ctx_push(rt, &sv) == CLCRT_OK) {
    /* Still inside clcrt_preempt_begin: lift it, or lower-priority runs yield for ever. */
    if (s->preempt_depth > 0) {
      s->preempt_depth = 0;
      (void)clcrt__stream_preempt_write(s, 0);
    }
    /* Wait for the stream's runs: they use the buffers we are about to free. A faulted
     * context returns an error at once rather than hanging; after a fault, notifications
     * still pending will never fire: fail them on their loops. */
    if (rt->cu->cuStreamSynchronize(s->cu) != CUDA_SUCCESS) clcrt__notify_fail(s, CLCRT_E_CUDA);
    if (s->stats) rt->cu->cuMemFree(s->stats);
    if (s->trace) rt->cu->cuMemFree(s->trace);
    rt->cu->cuMemFree(s->state);
    if (s->owned) destroy_cu(s);
    clcrt__ctx_leave(rt, &sv);
  }
  if (rt->devstate) clcrt__devstate_stream_remove(rt->devstate, s->level);
  if (s->observing) __atomic_sub_fetch(&rt->observing, 1, __ATOMIC_SEQ_CST);
  clcrt__free(s);
}

clcrt_status clcrt_stream_sync(clcrt_stream *s) {
  if (!s) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_stream_sync: the stream is NULL");
  clcrt__ctx_saved sv;
  clcrt_status st = clcrt__ctx_push(s->rt, &sv);
  if (st != CLCRT_OK) return st;
  CUresult r = s->rt->cu->cuStreamSynchronize(s->cu);
  clcrt__ctx_leave(s->rt, &sv);
  if (r != CUDA_SUCCESS) {
    /* After a fault the driver never runs the host functions behind clcrt_run_notify. */
    clcrt__notify_fail(s, CLCRT_E_CUDA);
    return clcrt__fail(s->rt, CLCRT_E_CUDA,
                       "the stream's work failed with %s: a tile function faulted or the launch was invalid; the "
                       "CUDA context is unusable after a fault (destroy the runtime)",
                       clcrt__cu_name(s->rt, r));
  }
  return CLCRT_OK;
}

/* ---- priorities and preemption ---------------------------------------------------- */

clcrt_status clcrt__stream_preempt_write(clcrt_stream *s, unsigned value) {
  clcrt_runtime *rt = s->rt;
  CUdeviceptr w = rt->devstate->yield + 4ull * s->yield_slot;
  /* The default flags order the write after the stream's earlier work, so "end" is seen
   * only once the urgent work is done. */
  CU_CHECK(rt, cuStreamWriteValue32(s->cu, w, value, CU_STREAM_WRITE_VALUE_DEFAULT));
  return CLCRT_OK;
}

static clcrt_status preempt_check(clcrt_stream *s, const char *fn) {
  if (!s) return clcrt__fail_norts(CLCRT_E_INVALID, "%s: the stream is NULL", fn);
  if (s->level == 0)
    return clcrt__fail(s->rt, CLCRT_E_INVALID,
                       "%s: the stream has the device's lowest priority, so there is nothing it could preempt: "
                       "create its CUstream with cuStreamCreateWithPriority (a priority above %d) and wrap that",
                       fn, s->rt->prio_least);
  return CLCRT_OK;
}

clcrt_status clcrt_preempt_begin(clcrt_stream *s) {
  clcrt_status st = preempt_check(s, "clcrt_preempt_begin");
  if (st != CLCRT_OK) return st;
  clcrt__ctx_saved sv;
  if ((st = clcrt__ctx_push(s->rt, &sv)) != CLCRT_OK) return st;
  if (s->preempt_depth == 0) st = clcrt__stream_preempt_write(s, s->level);
  if (st == CLCRT_OK) s->preempt_depth++;
  clcrt__ctx_leave(s->rt, &sv);
  return st;
}

clcrt_status clcrt_preempt_end(clcrt_stream *s) {
  clcrt_status st = preempt_check(s, "clcrt_preempt_end");
  if (st != CLCRT_OK) return st;
  if (s->preempt_depth == 0)
    return clcrt__fail(s->rt, CLCRT_E_INVALID,
                       "clcrt_preempt_end without a matching clcrt_preempt_begin on this stream");
  clcrt__ctx_saved sv;
  if ((st = clcrt__ctx_push(s->rt, &sv)) != CLCRT_OK) return st;
  if (s->preempt_depth == 1) st = clcrt__stream_preempt_write(s, 0);
  if (st == CLCRT_OK) s->preempt_depth--;
  clcrt__ctx_leave(s->rt, &sv);
  return st;
}

/* ---- statistics -------------------------------------------------------------------- */

void clcrt__stream_observing(clcrt_stream *s) {
  const int now = s->trace || s->stats;
  if (now != s->observing) __atomic_add_fetch(&s->rt->observing, now ? 1 : -1, __ATOMIC_SEQ_CST);
  s->observing = now;
}

static clcrt_status stats_enable(clcrt_stream *s, int on);

clcrt_status clcrt_stream_stats_enable(clcrt_stream *s, int on) {
  if (!s) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_stream_stats_enable: the stream is NULL");
  /* Runs with statistics on launch the observed variants: built now, not by a run. */
  const int hold = on && !s->stats;
  clcrt_status st = hold ? clcrt__observe_hold(s->rt) : CLCRT_OK;
  if (st != CLCRT_OK) return st;
  clcrt__ctx_saved sv;
  if ((st = clcrt__ctx_push(s->rt, &sv)) == CLCRT_OK) {
    st = stats_enable(s, on);
    clcrt__ctx_leave(s->rt, &sv);
  }
  clcrt__stream_observing(s);
  if (hold) clcrt__observe_release(s->rt);
  return st;
}

/* In the runtime's context (clcrt_stream_stats_enable). */
static clcrt_status stats_enable(clcrt_stream *s, int on) {
  clcrt_runtime *rt = s->rt;
  clcrt_status st;
  if (on && !s->stats) {
    CU_CHECK(rt, cuStreamSynchronize(s->cu));
    CU_CHECK(rt, cuMemAlloc(&s->stats, CLCRT__STATS_WORDS * 8));
    if ((st = clcrt__zero_device(rt, s->stats, CLCRT__STATS_WORDS * 8)) != CLCRT_OK) {
      rt->cu->cuMemFree(s->stats);
      s->stats = 0;
      return st;
    }
    s->runs = 0;
  } else if (!on && s->stats) {
    CU_CHECK(rt, cuStreamSynchronize(s->cu));
    rt->cu->cuMemFree(s->stats);
    s->stats = 0;
  }
  return CLCRT_OK;
}

static clcrt_status stats_read(clcrt_stream *s, clcrt_stream_stats *out);

clcrt_status clcrt_stream_stats_read(clcrt_stream *s, clcrt_stream_stats *out) {
  if (!s) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_stream_stats_read: the stream is NULL");
  clcrt__ctx_saved sv;
  clcrt_status st = clcrt__ctx_push(s->rt, &sv);
  if (st != CLCRT_OK) return st;
  st = stats_read(s, out);
  clcrt__ctx_leave(s->rt, &sv);
  return st;
}

/* clcrt_stream_stats_read in the runtime's context. */
static clcrt_status stats_read(clcrt_stream *s, clcrt_stream_stats *out) {
  clcrt_runtime *rt = s->rt;
  if (!out) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_stream_stats_read: out is NULL");
  if (out->size < sizeof(size_t) || out->size > sizeof *out)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_stream_stats_read: out->size is %zu: initialise it with CLCRT_STREAM_STATS_INIT",
                       out->size);
  if (!s->stats)
    return clcrt__fail(rt, CLCRT_E_INVALID, "statistics are off on this stream: call clcrt_stream_stats_enable first");
  clcrt_status st;
  if ((st = clcrt_stream_sync(s)) != CLCRT_OK) return st;
  CU_CHECK(rt, cuMemcpyDtoH(s->host_stats, s->stats, sizeof s->host_stats));
  if ((st = clcrt__zero_device(rt, s->stats, CLCRT__STATS_WORDS * 8)) != CLCRT_OK) return st;
  unsigned nsm = (unsigned)rt->num_sms;
  for (unsigned i = 0; i < CLCRT__STATS_SMS; i++)
    if (s->host_stats[4 + i] && i + 1 > nsm) nsm = i + 1;
  clcrt_stream_stats v;
  memset(&v, 0, sizeof v);
  v.size = out->size;
  v.runs = s->runs;
  v.tiles = s->host_stats[0];
  v.steals = s->host_stats[1];
  v.clusters = s->host_stats[2];
  v.max_units_per_cluster = s->host_stats[3];
  v.num_sms = nsm;
  v.tiles_per_sm = &s->host_stats[4];
  memcpy(out, &v, out->size);
  s->runs = 0;
  return CLCRT_OK;
}
