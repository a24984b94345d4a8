/* SM partitions for streams with an SM budget (green.h).
 *
 * A budget of N SMs becomes one cuDevSmResourceSplitByCount of the device's SM resource into
 * a group of N SMs and the remainder, a green context per side that a stream uses
 * (cuDevResourceGenerateDesc, cuGreenCtxCreate) and streams on it (cuGreenCtxStreamCreate).
 * Splits are kept in one list for the process, by device context and group size: every
 * stream with the same partition shares its green context (two streams of 16 SMs run on the
 * same 16 SMs, as two streams of one device share the device), and the remainder of a split
 * is disjoint from its group (CLCRT_STREAM_SM_REST). A side's green context is made by the
 * first stream that needs it and destroyed after the last one's stream, as the driver wants
 * (cuGreenCtxDestroy leaves streams on it unusable). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "green.h"

struct clcrt__green {
  const clcrt__driver *cu; /* the table the green contexts were made with */
  CUcontext ctx;           /* the device's primary context: the key, with sms */
  unsigned sms;            /* SMs of the group side */
  unsigned dev_align;      /* the device's co-scheduled alignment: the group side is whole groups of it */
  CUdevResource res[2];    /* [0] the group, [1] the remainder, of one split */
  CUgreenCtx g[2];         /* made on first use */
  int refs[2];             /* streams on each side */
  struct clcrt__green *next;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static clcrt__green *g_splits;

int clcrt__partition_clusters(const clcrt__occ *occ, unsigned cluster_size, int dev_sms, int sms, unsigned align) {
  const int dev = occ->clusters;
  if (dev_sms <= 0 || sms >= dev_sms || dev <= 0) return dev;
  if (cluster_size < 1) cluster_size = 1;
  const long long per_sm = occ->blocks_per_sm;
  long long n = -1;
  if (per_sm > 0 && align > 1 && sms % (int)align == 0) {
    long long per_group = (long long)align * per_sm / cluster_size;
    if (per_group > 0) n = (long long)(sms / (int)align) * per_group;
  }
  if (n < 0) n = per_sm > 0 && cluster_size == 1 ? per_sm * sms : (long long)dev * sms / dev_sms;
  if (n > dev) n = dev;
  return n < 1 ? 1 : (int)n;
}

/* What a green-context call failing this way means for a budget: the driver or device
 * cannot partition (unsupported), or something else went wrong. */
static clcrt_status green_fail(clcrt_runtime *rt, CUresult r, const char *call) {
  if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_RESOURCE_TYPE)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "%s failed with %s: this device or driver does not partition SMs into green contexts; create "
                       "the stream without sm_budget",
                       call, clcrt__cu_name(rt, r));
  return clcrt__fail(rt, CLCRT_E_CUDA, "%s failed with %s", call, clcrt__cu_name(rt, r));
}

/* Splits the device's SMs into a group of at least `want` and the remainder. Returns the
 * group's SMs, 0 when the driver makes no such group, -1 on a failure (recorded). */
static int split(clcrt_runtime *rt, const CUdevResource *dev, unsigned want, CUdevResource *group,
                 CUdevResource *rest) {
  CUdevResource g, r;
  unsigned n = 1;
  memset(&g, 0, sizeof g), memset(&r, 0, sizeof r);
  CUresult e = rt->cu->cuDevSmResourceSplitByCount(&g, &n, dev, &r, 0, want);
  /* A count the device cannot group is answered with an invalid configuration or no group. */
  if (e == CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION || e == CUDA_ERROR_INVALID_VALUE) return 0;
  if (e != CUDA_SUCCESS) {
    green_fail(rt, e, "cuDevSmResourceSplitByCount");
    return -1;
  }
  if (n < 1 || g.type != CU_DEV_RESOURCE_TYPE_SM) return 0;
  if (group) *group = g;
  if (rest) *rest = r;
  return (int)g.sm.smCount;
}

/* The largest partition of at most `budget` SMs (and at least `min`) the driver makes: 0 when
 * none, -1 on a failure. Tries multiples of the group size downwards, since the driver may
 * round a request up further than the group size says. */
static int largest_below(clcrt_runtime *rt, const CUdevResource *dev, unsigned budget, unsigned min,
                         unsigned align) {
  for (unsigned down = budget / align * align; down >= min && down > 0; down = down > align ? down - align : 0) {
    int g = split(rt, dev, down, NULL, NULL);
    if (g < 0) return -1;
    if (g > 0 && (unsigned)g <= budget) return g;
  }
  return 0;
}

/* The size of the partition a budget of `budget` SMs gets under `flags`, or a refusal that
 * says what the device can make. */
static clcrt_status resolve(clcrt_runtime *rt, unsigned budget, unsigned flags, CUdevResource *dev,
                            unsigned *out) {
  CUresult e = rt->cu->cuDeviceGetDevResource(rt->dev, dev, CU_DEV_RESOURCE_TYPE_SM);
  if (e != CUDA_SUCCESS) return green_fail(rt, e, "cuDeviceGetDevResource");
  unsigned total = dev->sm.smCount, min = dev->sm.minSmPartitionSize, align = dev->sm.smCoscheduledAlignment;
  if (min < 1) min = 1;
  if (align < 1) align = 1;
  if (budget > total)
    return clcrt__fail(rt, CLCRT_E_INVALID, "an SM budget of %u is more than this device's %u SMs", budget, total);
  if (budget < min && !(flags & CLCRT_STREAM_SM_ROUND_UP))
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "an SM budget of %u is below the smallest partition this device makes (%u SMs): ask for at "
                       "least %u, or pass CLCRT_STREAM_SM_ROUND_UP",
                       budget, min, min);
  int g = split(rt, dev, budget < min ? min : budget, NULL, NULL);
  if (g < 0) return CLCRT_E_CUDA;
  if (g > 0 && ((unsigned)g == budget || (flags & CLCRT_STREAM_SM_ROUND_UP))) {
    *out = (unsigned)g;
    return CLCRT_OK;
  }
  int down = largest_below(rt, dev, budget, min, align);
  if (down < 0) return CLCRT_E_CUDA;
  if (down > 0 && (flags & CLCRT_STREAM_SM_ROUND_DOWN)) {
    *out = (unsigned)down;
    return CLCRT_OK;
  }
  char below[96] = "";
  if (down > 0)
    snprintf(below, sizeof below, " or %d (CLCRT_STREAM_SM_ROUND_DOWN gives that)", down);
  if (g == 0)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "the driver makes no partition of %u SMs on this device (%u SMs, partitioned in co-scheduled "
                       "groups of %u, at least %u per partition; SMs outside whole groups belong to none): ask for "
                       "fewer%s",
                       budget, total, align, min, below);
  return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                     "an SM budget of %u cannot be honoured exactly: this device (%u SMs) is partitioned in "
                     "co-scheduled groups of %u SMs, at least %u per partition, and the driver would make %d; ask for "
                     "%d (CLCRT_STREAM_SM_ROUND_UP accepts that)%s",
                     budget, total, align, min, g, g, below);
}

/* Finds or makes the split of rt's device with a group of `sms` SMs; call with g_lock held. */
static clcrt_status split_get(clcrt_runtime *rt, const CUdevResource *dev, unsigned sms, clcrt__green **out) {
  for (clcrt__green *s = g_splits; s; s = s->next)
    if (s->ctx == rt->ctx && s->sms == sms && s->cu == rt->cu) {
      *out = s;
      return CLCRT_OK;
    }
  clcrt__green *s = clcrt__calloc(1, sizeof *s);
  if (!s) return clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory for an SM partition");
  int g = split(rt, dev, sms, &s->res[0], &s->res[1]);
  if (g != (int)sms) {
    clcrt__free(s);
    if (g < 0) return CLCRT_E_CUDA;
    return clcrt__fail(rt, CLCRT_E_CUDA,
                       "cuDevSmResourceSplitByCount made a group of %d SMs for a request of %u it answered with %u "
                       "before",
                       g, sms, sms);
  }
  s->cu = rt->cu, s->ctx = rt->ctx, s->sms = sms;
  s->dev_align = dev->sm.smCoscheduledAlignment;
  s->next = g_splits;
  g_splits = s;
  *out = s;
  return CLCRT_OK;
}

/* Drops a split with no stream on either side; call with g_lock held. */
static void split_put(clcrt__green *s) {
  if (s->refs[0] || s->refs[1]) return;
  for (clcrt__green **p = &g_splits; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  clcrt__free(s);
}

static int have_green(const clcrt__driver *cu) {
  return cu->cuDeviceGetDevResource && cu->cuDevSmResourceSplitByCount && cu->cuDevResourceGenerateDesc &&
         cu->cuGreenCtxCreate && cu->cuGreenCtxDestroy && cu->cuGreenCtxStreamCreate;
}

clcrt_status clcrt__green_stream(clcrt_runtime *rt, unsigned budget, unsigned flags, int prio, CUstream *cu,
                                 clcrt__partition *p) {
  memset(p, 0, sizeof *p);
  if (!have_green(rt->cu)) {
    int v = 0;
    rt->cu->cuDriverGetVersion(&v);
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "this CUDA driver (CUDA %d.%d) has no green contexts, which SM budgets are made of "
                       "(cuGreenCtxCreate needs CUDA 12.4, cuGreenCtxStreamCreate 12.5): update the driver, or create "
                       "the stream without sm_budget",
                       v / 1000, v % 1000 / 10);
  }
  CUdevResource dev;
  unsigned sms = 0;
  clcrt_status st = resolve(rt, budget, flags, &dev, &sms);
  if (st != CLCRT_OK) return st;
  const int side = (flags & CLCRT_STREAM_SM_REST) ? 1 : 0;
  pthread_mutex_lock(&g_lock);
  clcrt__green *s = NULL;
  if ((st = split_get(rt, &dev, sms, &s)) != CLCRT_OK) goto out;
  if (s->res[side].sm.smCount == 0) {
    st = clcrt__fail(rt, CLCRT_E_UNSUPPORTED, "a budget of %u SMs leaves no SMs of this device's %u for the rest",
                     sms, dev.sm.smCount);
    goto put;
  }
  if (!s->g[side]) {
    CUdevResourceDesc desc;
    CU_CHECK_GOTO(rt, cuDevResourceGenerateDesc(&desc, &s->res[side], 1), st, put);
    CU_CHECK_GOTO(rt, cuGreenCtxCreate(&s->g[side], desc, rt->dev, CU_GREEN_CTX_DEFAULT_STREAM), st, put);
  }
  CU_CHECK_GOTO(rt, cuGreenCtxStreamCreate(cu, s->g[side], CU_STREAM_NON_BLOCKING, prio), st, unmade);
  s->refs[side]++;
  p->green = s, p->rest = side;
  p->sms = (int)s->res[side].sm.smCount;
  /* The H100's driver (580) reports an alignment of 0 for both sides of a split (the GPU probe
   * printed "groups of 0"), which left budgets in proportion to the device's clusters, short of
   * what they ran (9 of 9 counts measured on budgets of 16, 64 and 120 SMs). The group side is
   * made of whole co-scheduled groups of the device's (the split rounds to them), so it takes
   * the device's alignment; the remainder keeps its own (the SMs outside whole groups are in
   * it). */
  p->align = s->res[side].sm.smCoscheduledAlignment;
  if (side == 0 && p->align < 2) p->align = s->dev_align;
  goto out;
unmade:
  if (s->refs[side] == 0) {
    rt->cu->cuGreenCtxDestroy(s->g[side]);
    s->g[side] = NULL;
  }
put:
  split_put(s);
out:
  pthread_mutex_unlock(&g_lock);
  return st;
}

void clcrt__green_stream_destroy(clcrt_runtime *rt, CUstream cu, clcrt__partition *p) {
  clcrt__green *s = p->green;
  rt->cu->cuStreamDestroy(cu);
  if (!s) return;
  pthread_mutex_lock(&g_lock);
  if (--s->refs[p->rest] == 0) {
    s->cu->cuGreenCtxDestroy(s->g[p->rest]);
    s->g[p->rest] = NULL;
  }
  split_put(s);
  pthread_mutex_unlock(&g_lock);
  p->green = NULL;
}

clcrt_status clcrt__green_of_stream(clcrt_runtime *rt, CUstream cu, clcrt__partition *p) {
  memset(p, 0, sizeof *p);
  /* A driver without these has no streams of green contexts that it could tell apart (12.4
   * has green contexts but not cuStreamGetCtx_v2: such a stream is sized for the device). */
  if (!rt->cu->cuStreamGetCtx_v2 || !rt->cu->cuGreenCtxGetDevResource) return CLCRT_OK;
  CUcontext ctx = NULL;
  CUgreenCtx g = NULL;
  CUresult e = rt->cu->cuStreamGetCtx_v2(cu, &ctx, &g);
  if (e != CUDA_SUCCESS) {
    /* Not worth refusing a stream that ran before budgets existed: its grids are sized for
     * the whole device, as they were. */
    clcrt__log(rt, CLCRT_LOG_WARN,
               "cuStreamGetCtx_v2 failed with %s: the stream's runs are sized for the whole device",
               clcrt__cu_name(rt, e));
    return CLCRT_OK;
  }
  if (!g) return CLCRT_OK;
  CUdevResource r;
  memset(&r, 0, sizeof r);
  CU_CHECK(rt, cuGreenCtxGetDevResource(g, &r, CU_DEV_RESOURCE_TYPE_SM));
  p->sms = (int)r.sm.smCount;
  p->align = r.sm.smCoscheduledAlignment;
  return CLCRT_OK;
}
