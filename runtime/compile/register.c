/* Registration: validate, look up the memory cache, the disk cache, compile, load.
 * The memory cache is the runtime's kernel list keyed by the content hash; a kernel being
 * built is in the list already, so concurrent registrations of one key wait for it and
 * compile once. */
#include <stdio.h>
#include <string.h>

#include "builder.h"
#include "cache.h"
#include "checks.h"
#include "deps.h"
#include "internal.h"
#include "sched_state.h"
#include "variants.h"

static clcrt_kernel *find_key(clcrt_runtime *rt, const uint8_t *key) {
  for (clcrt_kernel *k = rt->kernels; k; k = k->next)
    if (k->cacheable && k->state != CLCRT__K_FAILED && memcmp(k->key, key, CLCRT__KEY_BYTES) == 0) return k;
  return NULL;
}

/* A registration served by k from memory; called with rt->lock held. Every registration that
 * finds k gets k itself, so its from_cache says how the latest one found it (atomic: info_get
 * reads it without the lock). */
static void mem_hit(clcrt_runtime *rt, clcrt_kernel *k) {
  rt->cstats.mem_hits++;
  __atomic_store_n(&k->from_cache, 1, __ATOMIC_RELAXED);
}

static void unlink_kernel(clcrt_runtime *rt, clcrt_kernel *k) {
  for (clcrt_kernel **pp = &rt->kernels; *pp; pp = &(*pp)->next)
    if (*pp == k) {
      *pp = k->next;
      return;
    }
}

/* Whether the headers k was compiled from (cache/deps.h) are still what they were; called
 * without the lock, on a kernel that is READY (its manifest no longer changes). A kernel
 * whose headers changed is taken out of the memory cache: it stays valid for whoever holds
 * it, but is never found again, so the registration compiles anew. */
static int deps_fresh(clcrt_runtime *rt, clcrt_kernel *k) {
  char why[512];
  if (!k->deps || clcrt__deps_check(k->deps, 1, 0, why, sizeof why)) return 1;
  clcrt__log(rt, CLCRT_LOG_DEBUG, "kernel %s in memory is stale: %s; compiling again", k->name, why);
  pthread_mutex_lock(&rt->lock);
  k->cacheable = 0;
  k->has_desc_key = 0;
  pthread_mutex_unlock(&rt->lock);
  return 0;
}

/* Moves a compiled or cached build into k and reads (and, with a device, loads) it. */
static clcrt_status adopt(clcrt_runtime *rt, clcrt_kernel *k, clcrt__build *b, int from_disk) {
  k->name = b->name, b->name = NULL;
  k->cubin = b->cubin, b->cubin = NULL;
  k->cubin_size = b->cubin_size;
  k->ptx = b->ptx, b->ptx = NULL;
  k->sched = b->sched;
  k->grid = b->grid;
  k->min_blocks = b->min_blocks;
  k->block = b->block;
  k->cluster = b->cluster;
  k->smem_bytes = b->smem_bytes;
  k->ring_bytes = b->sched == CLCRT_SCHED_STEAL || b->sched == CLCRT_SCHED_CLC
                      ? CLCRT__RING_OFF(b->smem_bytes) - b->smem_bytes + CLCRT__RING_BYTES
                      : 0;
  k->nthreads = b->block.x * b->block.y * b->block.z;
  k->cluster_size = b->cluster.x * b->cluster.y * b->cluster.z;
  k->compile_ms = from_disk ? 0 : b->compile_ms;
  k->from_cache = from_disk ? 2 : 0;
  k->deps = b->deps, b->deps = NULL;
  return clcrt__kernel_finish(rt, k);
}

/* Undoes adopt after a failed read of the cubin (nothing was loaded): the name goes back
 * to the build, which compiles next; the cached cubin and PTX are dropped. */
static void unadopt(clcrt_kernel *k, clcrt__build *b) {
  clcrt__cubin_free(&k->info);
  k->kinfo = NULL;
  b->name = k->name, k->name = NULL;
  clcrt__free(k->cubin), k->cubin = NULL, k->cubin_size = 0;
  clcrt__free(k->ptx), k->ptx = NULL;
  b->cubin = NULL, b->ptx = NULL, b->cubin_size = 0;
  clcrt__deps_free(k->deps), k->deps = NULL;
}

static size_t str_size(const char *s) { return s ? strlen(s) + 1 : 0; }

static char *put_str(char **at, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = memcpy(*at, s, n);
  *at += n;
  return d;
}

clcrt_tile_desc *clcrt__desc_dup(const clcrt_tile_desc *dd) {
  /* A shorter (older) descriptor: the fields it lacks keep their defaults. */
  clcrt_tile_desc full = CLCRT_TILE_DESC_INIT;
  memcpy(&full, dd, dd->size < sizeof full ? dd->size : sizeof full);
  full.size = sizeof full;
  const clcrt_tile_desc *d = &full;
  size_t nopt = d->num_options > 0 ? (size_t)d->num_options : 0;
  size_t bytes = sizeof *d + nopt * sizeof(char *);
  bytes += str_size(d->source) + str_size(d->tile_fn) + str_size(d->args_type) + str_size(d->state_type) +
           str_size(d->prologue_fn) + str_size(d->include_digest);
  for (size_t i = 0; i < nopt; i++) bytes += str_size(d->options[i]);
  clcrt_tile_desc *c = clcrt__calloc(1, bytes);
  if (!c) return NULL;
  char **opts = (char **)(c + 1);
  char *at = (char *)(opts + nopt);
  *c = *d;
  c->source = put_str(&at, d->source);
  c->tile_fn = put_str(&at, d->tile_fn);
  c->args_type = put_str(&at, d->args_type);
  c->state_type = put_str(&at, d->state_type);
  c->prologue_fn = put_str(&at, d->prologue_fn);
  c->include_digest = put_str(&at, d->include_digest);
  for (size_t i = 0; i < nopt; i++) opts[i] = put_str(&at, d->options[i]);
  c->options = nopt ? (const char *const *)opts : NULL;
  return c;
}

/* The fast path of a registration: the same description again, found by a key of the
 * description itself, so that neither the translation unit nor the content key is built (see
 * clcrt__desc_key for why only kernels with a cacheable content key carry one). Returns the
 * kernel, counted as a memory hit, or NULL. */
static clcrt_kernel *find_by_desc_key(clcrt_runtime *rt, const uint8_t dk[CLCRT__KEY_BYTES]) {
  pthread_mutex_lock(&rt->lock);
  clcrt_kernel *hit = NULL;
  for (clcrt_kernel *k = rt->kernels; k && !hit; k = k->next)
    if (k->has_desc_key && k->state == CLCRT__K_READY && memcmp(k->desc_key, dk, CLCRT__KEY_BYTES) == 0) hit = k;
  if (hit && !hit->deps) {
    mem_hit(rt, hit);
    pthread_mutex_unlock(&rt->lock);
    return hit;
  }
  pthread_mutex_unlock(&rt->lock);
  /* A kernel compiled from headers on disk: a hit only while they are unchanged. */
  if (hit && deps_fresh(rt, hit)) {
    pthread_mutex_lock(&rt->lock);
    mem_hit(rt, hit);
    pthread_mutex_unlock(&rt->lock);
    return hit;
  }
  return NULL;
}

/* The memory cache by content key: a kernel being built under the key is waited for, and a
 * ready one is a hit (*hit, counted). Else a new kernel is entered in the list as BUILDING
 * (*k), so that concurrent registrations of the key wait for this one and compile once; the
 * registered kernel carries its variants' table in the same allocation. CLCRT_E_NOMEM with
 * neither set where that allocation fails (the caller reports it). */
static clcrt_status find_or_enter(clcrt_runtime *rt, const uint8_t key[CLCRT__KEY_BYTES], int cacheable,
                                  unsigned variant, clcrt_kernel *base, clcrt_kernel **hit, clcrt_kernel **k) {
  *hit = *k = NULL;
  pthread_mutex_lock(&rt->lock);
  while (cacheable) {
    clcrt_kernel *h;
    while ((h = find_key(rt, key)) && h->state == CLCRT__K_BUILDING) pthread_cond_wait(&rt->cond, &rt->lock);
    if (!h) break;
    if (h->deps) {
      /* Checked without the lock (it reads files); a stale kernel is not found again. */
      pthread_mutex_unlock(&rt->lock);
      int fresh = deps_fresh(rt, h);
      pthread_mutex_lock(&rt->lock);
      if (!fresh) continue;
    }
    mem_hit(rt, h);
    pthread_mutex_unlock(&rt->lock);
    *hit = h;
    return CLCRT_OK;
  }
  clcrt_kernel *n = clcrt__calloc(1, sizeof *n + (base ? 0 : sizeof(clcrt__variants)));
  if (!n) {
    pthread_mutex_unlock(&rt->lock);
    return CLCRT_E_NOMEM;
  }
  n->rt = rt;
  n->variant = variant;
  n->base = base ? base : n;
  n->vars = base ? base->vars : (clcrt__variants *)(n + 1);
  n->state = CLCRT__K_BUILDING;
  n->cacheable = cacheable;
  memcpy(n->key, key, CLCRT__KEY_BYTES);
  n->next = rt->kernels;
  rt->kernels = n;
  pthread_mutex_unlock(&rt->lock);
  *k = n;
  return CLCRT_OK;
}

/* Fills k, entered as BUILDING, from the disk cache or else by compiling b (storing the result
 * on disk where it may be found again). *cacheable turns 0 where the compile read headers that
 * are not known; *from_disk says which way k was made. */
static clcrt_status load_or_compile(clcrt_runtime *rt, clcrt_kernel *k, clcrt__build *b,
                                    const uint8_t key[CLCRT__KEY_BYTES], int *cacheable, int *from_disk) {
  clcrt_status st = CLCRT_OK;
  *from_disk = *cacheable && clcrt__disk_get(rt, key, b);
  if (*from_disk) {
    st = adopt(rt, k, b, 1);
    /* An entry whose checksum holds but whose cubin cannot be read (written by a buggy
     * or foreign writer) is a miss like any damaged entry: compile, and the store below
     * replaces it. */
    if (st == CLCRT_E_CORRUPT) {
      clcrt__log(rt, CLCRT_LOG_WARN, "disk cache entry for %s is unusable (%s): compiling again", k->name,
                 clcrt__err_get(rt) ? clcrt__err_get(rt) : "unreadable cubin");
      unadopt(k, b);
      *from_disk = 0;
    }
  }
  if (!*from_disk) {
    st = clcrt__build_compile(rt, b);
    if (st == CLCRT_OK && b->want_deps && !b->deps) {
      /* The headers it read are not known: the kernel is used, never stored or found. */
      clcrt__log(rt, CLCRT_LOG_DEBUG, "%s is not cached: %s", b->name, b->deps_why);
      *cacheable = 0;
    }
    if (b->deps && !b->deps->n) clcrt__deps_free(b->deps), b->deps = NULL; /* read nothing outside the key */
    if (st == CLCRT_OK && *cacheable) clcrt__disk_put(rt, key, b);
    if (st == CLCRT_OK) st = adopt(rt, k, b, 0);
  }
  return st;
}

/* Ends k's build under the runtime's lock: a kernel made (st CLCRT_OK) becomes READY, with its
 * description key dk (NULL: none) and its variants' table where it is the registered kernel,
 * and is counted; a failed one leaves the list. Either way the registrations waiting for it
 * wake. Returns why a STEAL kernel that may run long units has no words for its unit times
 * (NULL: it has them, or needs none), for the caller to log outside the lock. */
static const char *publish(clcrt_runtime *rt, clcrt_kernel *k, clcrt_status st, int cacheable, int from_disk,
                           const uint8_t *dk) {
  pthread_mutex_lock(&rt->lock);
  /* Long units (launch.c): a STEAL kernel on an AUTO grid with nothing made per CTA may run
   * one cluster per unit, once its units are measured long; without the words (a device that
   * cannot map host memory) it always runs persistent. */
  const char *no_hint = NULL;
  if (st == CLCRT_OK && !k->variant && !rt->compile_only && k->sched == CLCRT_SCHED_STEAL &&
      k->grid == CLCRT_GRID_AUTO && !k->desc->prologue_fn && !k->desc->state_type)
    no_hint = clcrt__hint_slot(rt, &k->unit_cycles, &k->unit_cycles_dev);
  if (st == CLCRT_OK) {
    k->cacheable = cacheable;
    if (!k->variant) { /* before any other thread can find it */
      k->vars->var[0] = k;
      k->vars->occ[0] = k->occ;
      __atomic_store_n(&k->vars->ready, 1u, __ATOMIC_RELEASE);
    }
    k->state = CLCRT__K_READY;
    if (cacheable && dk) {
      memcpy(k->desc_key, dk, CLCRT__KEY_BYTES);
      k->has_desc_key = 1;
    }
    if (from_disk)
      rt->cstats.disk_hits++;
    else if (cacheable)
      rt->cstats.misses++;
    else
      rt->cstats.uncached++;
    rt->cstats.compile_ms += k->compile_ms;
  } else {
    unlink_kernel(rt, k);
  }
  pthread_cond_broadcast(&rt->cond);
  pthread_mutex_unlock(&rt->lock);
  return no_hint;
}

/* The registered kernel (variant 0, base NULL) or one of its variants (CLCRT_USE_* bits, base
 * the registered kernel): found in memory by its description (default variants only) or its
 * content key, else loaded from the disk cache or compiled. */
static clcrt_status register_variant(clcrt_runtime *rt, const clcrt_tile_desc *d, unsigned variant,
                                     clcrt_kernel *base, clcrt_kernel **out) {
  uint8_t dk[CLCRT__KEY_BYTES];
  const int have_dk = !variant && clcrt__desc_key(d, dk);
  clcrt_kernel *hit = have_dk ? find_by_desc_key(rt, dk) : NULL;
  if (hit) {
    *out = hit;
    return CLCRT_OK;
  }

  clcrt__build b;
  clcrt_status st = clcrt__build_prepare(rt, d, variant, &b);
  if (st != CLCRT_OK) return st;
  uint8_t key[CLCRT__KEY_BYTES] = {0};
  int cacheable = clcrt__cache_key(rt, &b, key);
  clcrt_kernel *k;
  if (find_or_enter(rt, key, cacheable, variant, base, &hit, &k) != CLCRT_OK) {
    clcrt__build_free(&b);
    return clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory allocating a kernel");
  }
  if (hit) {
    clcrt__build_free(&b);
    *out = hit;
    return CLCRT_OK;
  }

  int from_disk;
  st = load_or_compile(rt, k, &b, key, &cacheable, &from_disk);
  clcrt__build_free(&b);
  /* What the variants are compiled from, when a run first needs one. */
  if (st == CLCRT_OK && !variant && !(k->desc = clcrt__desc_dup(d)))
    st = clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory keeping the description of %s", k->name);
  const char *no_hint = publish(rt, k, st, cacheable, from_disk, have_dk ? dk : NULL);
  if (no_hint)
    clcrt__log(rt, CLCRT_LOG_DEBUG, "kernel %s: no mapped host memory for its unit times (%s): its runs stay persistent",
               k->name, no_hint);
  if (st != CLCRT_OK) {
    clcrt__kernel_free(k);
    return st;
  }
  *out = k;
  return CLCRT_OK;
}

clcrt_status clcrt_register(clcrt_runtime *rt, const clcrt_tile_desc *d, clcrt_kernel **out) {
  if (!rt) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_register: the runtime is NULL");
  if (!out) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_register: out is NULL");
  *out = NULL;
  if (!d) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_register: the tile descriptor is NULL");
  clcrt_kernel *k = NULL;
  clcrt_status st = register_variant(rt, d, 0, NULL, &k);
  if (st != CLCRT_OK) return st;
  /* While a stream of the runtime records a trace or statistics, a kernel is handed out with
   * its observed variant (found in the caches like any kernel when it was built before), so
   * that no traced run of it goes unrecorded (variants.h). */
  if (__atomic_load_n(&rt->observing, __ATOMIC_SEQ_CST) > 0) {
    clcrt_kernel *o = NULL;
    if ((st = clcrt__kernel_variant(k, CLCRT_USE_TRACE, &o)) != CLCRT_OK) return st;
  }
  clcrt__variants_preemptible(rt, k);
  *out = k;
  return CLCRT_OK;
}

clcrt_status clcrt__registered_each(clcrt_runtime *rt, clcrt_status (*fn)(const clcrt_kernel *k, void *arg),
                                    void *arg) {
  /* Collected under the runtime's lock, called after it (fn may build, which takes it). A
   * ready kernel is never unlinked before the runtime goes, so the walk resumes after the last
   * one collected. */
  enum { BATCH = 64 };
  const clcrt_kernel *batch[BATCH];
  clcrt_kernel *from = NULL;
  for (;;) {
    int n = 0;
    pthread_mutex_lock(&rt->lock);
    clcrt_kernel *k = from ? from->next : rt->kernels;
    for (; k && n < BATCH; k = k->next) {
      if (k->state != CLCRT__K_READY) continue;
      from = k;
      if (!k->variant && k->desc) batch[n++] = k;
    }
    const int more = k != NULL;
    pthread_mutex_unlock(&rt->lock);
    for (int i = 0; i < n; i++) {
      clcrt_status st = fn(batch[i], arg);
      if (st != CLCRT_OK) return st;
    }
    if (!more) return CLCRT_OK;
  }
}

static clcrt_status observe_one(const clcrt_kernel *k, void *arg) {
  (void)arg;
  clcrt_kernel *o = NULL;
  return clcrt__kernel_variant(k, CLCRT_USE_TRACE, &o);
}

clcrt_status clcrt__observe_hold(clcrt_runtime *rt) {
  __atomic_add_fetch(&rt->observing, 1, __ATOMIC_SEQ_CST);
  clcrt_status st = clcrt__registered_each(rt, observe_one, NULL);
  if (st != CLCRT_OK) {
    clcrt__observe_release(rt);
    return st;
  }
  clcrt__variants_preemptible(rt, NULL);
  return CLCRT_OK;
}

void clcrt__observe_release(clcrt_runtime *rt) { __atomic_sub_fetch(&rt->observing, 1, __ATOMIC_SEQ_CST); }

void clcrt__variants_preemptible(clcrt_runtime *rt, const clcrt_kernel *k) {
  if (!rt->devstate || !clcrt__devstate_mixed(rt->devstate)) return;
  const int obs = __atomic_load_n(&rt->observing, __ATOMIC_SEQ_CST) > 0;
  if (!k) {
    clcrt__builder_request_all(rt, CLCRT_USE_PREEMPT);
    if (obs) clcrt__builder_request_all(rt, CLCRT_USE_TRACE | CLCRT_USE_PREEMPT);
  } else if (k->sched == CLCRT_SCHED_STEAL && k->grid != CLCRT_GRID_PERSISTENT) {
    clcrt__builder_request(k, CLCRT_USE_PREEMPT, 1);
    if (obs) clcrt__builder_request(k, CLCRT_USE_TRACE | CLCRT_USE_PREEMPT, 1);
  }
}

static clcrt_status bad_uses(const clcrt_kernel *k, const char *fn, unsigned uses) {
  return clcrt__fail(k->rt, CLCRT_E_INVALID,
                     "%s(%s): uses 0x%x has bits that are not CLCRT_USE_TRACE, CLCRT_USE_GRAPH, "
                     "CLCRT_USE_PREEMPT or CLCRT_USE_SHORT (0x%x unknown)",
                     fn, k->name, uses, uses & ~CLCRT__USE_ALL);
}

clcrt_status clcrt_kernel_variant(const clcrt_kernel *k, unsigned uses, const clcrt_kernel **out) {
  if (!k) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_kernel_variant: the kernel is NULL");
  if (!out) return clcrt__fail(k->rt, CLCRT_E_INVALID, "clcrt_kernel_variant: out is NULL");
  *out = NULL;
  if (uses & ~CLCRT__USE_ALL) return bad_uses(k, "clcrt_kernel_variant", uses);
  clcrt_kernel *o = NULL;
  clcrt_status st = clcrt__kernel_variant(k, uses, &o);
  if (st == CLCRT_OK) *out = o;
  return st;
}

clcrt_status clcrt_kernel_prepare(const clcrt_kernel *k, unsigned uses) {
  if (!k) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_kernel_prepare: the kernel is NULL");
  if (uses & ~CLCRT__USE_ALL) return bad_uses(k, "clcrt_kernel_prepare", uses);
  /* Every combination of the uses: a run needs the variant with exactly its own (combinations
   * that name the same variant are built once). */
  for (unsigned v = 1; v <= CLCRT__USE_ALL; v++) {
    if ((v & uses) != v) continue;
    clcrt_kernel *o = NULL;
    clcrt_status st = clcrt__kernel_variant(k, v, &o);
    if (st != CLCRT_OK) return st;
  }
  return CLCRT_OK;
}

/* What a variant's bits are for, for messages. */
static void variant_uses(unsigned v, char *buf, size_t n) {
  snprintf(buf, n, "%s%s%s%s%s%s%s", v & CLCRT_USE_TRACE ? "a traced run, or one with statistics on" : "",
           (v & CLCRT_USE_TRACE) && (v & ~CLCRT_USE_TRACE) ? ", and " : "",
           v & CLCRT_USE_GRAPH ? "a run captured into a graph" : "",
           (v & CLCRT_USE_GRAPH) && (v & CLCRT_USE_PREEMPT) ? ", and " : "",
           v & CLCRT_USE_PREEMPT ? "a run that can be preempted" : "",
           (v & CLCRT_USE_SHORT) && (v & CLCRT_USE_TRACE) ? ", and " : "",
           v & CLCRT_USE_SHORT ? "a run that claims nothing" : "");
}

unsigned clcrt__variant_bits(clcrt_sched sched, unsigned bits) {
  unsigned v = bits & (sched == CLCRT_SCHED_STEAL ? CLCRT__USE_ALL : CLCRT_USE_TRACE);
  return v & CLCRT_USE_SHORT ? v & (CLCRT_USE_SHORT | CLCRT_USE_TRACE) : v;
}

/* Compiled (or found in the memory or disk cache) like any registration: concurrent first
 * uses wait for one compile and get the same kernel. Bits that name no code of the kernel's
 * scheduler never build a copy of the same kernel (clcrt__variant_bits). Published in the
 * registered kernel's table (variants.h) with its occupancy: runs launch it from then on. */
clcrt_status clcrt__kernel_variant(const clcrt_kernel *k, unsigned bits, clcrt_kernel **out) {
  clcrt_kernel *base = k->base; /* set for every kernel (register_variant) */
  clcrt__variants *vs = k->vars;
  unsigned v = clcrt__variant_bits(k->sched, k->variant | bits);
  if (v == 0) {
    *out = base;
    return CLCRT_OK;
  }
  clcrt_kernel *o = __atomic_load_n(&vs->var[v], __ATOMIC_ACQUIRE);
  if (!o) {
    clcrt_status st = register_variant(k->rt, base->desc, v, base, &o);
    if (st != CLCRT_OK) {
      char why[512], uses[160];
      const char *m = clcrt__err_get(k->rt);
      snprintf(why, sizeof why, "%s", m ? m : clcrt_status_str(st));
      variant_uses(v, uses, sizeof uses);
      return clcrt__fail(k->rt, st, "kernel %s: its variant for %s could not be built: %s", k->name, uses, why);
    }
    vs->occ[v] = o->occ; /* before the pointer and the bit: a run that sees either reads it */
    __atomic_store_n(&vs->var[v], o, __ATOMIC_RELEASE);
    __atomic_or_fetch(&vs->ready, 1u << v, __ATOMIC_RELEASE);
  }
  *out = o;
  return CLCRT_OK;
}
