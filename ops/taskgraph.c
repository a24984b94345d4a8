/* Task graphs (include/clcrt_ops.h): several tile functions in one launch, with tile-level
 * dependencies. Built on clcrt.h alone, like the GEMM op: the graph is one generated tile
 * function (clcrt_tg_tile) that takes a ticket per tile, waits on the counters of the tiles it
 * needs, calls the node's tile function and releases its own counters; the runtime registers
 * and schedules it like any other. The header states the protocol and why no run can hang;
 * here is how the pieces are laid out.
 *
 * Counters (uint32 words of the op's counter workspace, zero at rest):
 *   word 0            the next ticket
 *   word 1            tiles finished (but the last ticket's); that ticket's CTA waits for the
 *                     others, then zeroes every word of the run
 *   eoff[e] ...       edge e's counters, one per group of producer tiles a consumer tile waits
 *                     on: ALL 1 (target: the producer's tiles); SAME one per consumer tile
 *                     (target 1); ROWS one per producer row block (target: its tiles); KSLICES
 *                     one per consumer tile (target: the slices); CUSTOM one per producer tile
 *                     (target 1)
 * The offsets depend on the run's tile counts, so they travel in the Args (clcrt_tg_args):
 * the header words, then every node's Args at a 64-byte boundary (the alignment of a tensor
 * map, the largest any Args has), checked by static_asserts in the generated source. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "gemm_ops.h"

struct clcrt_taskgraph {
  clcrt_ops *ops;
  const clcrt_kernel *k;
  char *src;
  unsigned nn, ne;
  clcrt_task_node nodes[CLCRT_TASKGRAPH_MAX_NODES];
  clcrt_task_edge edges[CLCRT_TASKGRAPH_MAX_EDGES];
  size_t off[CLCRT_TASKGRAPH_MAX_NODES];     /* each node's Args in clcrt_tg_args */
  size_t args_bytes;                         /* sizeof(clcrt_tg_args) */
  CUdeviceptr trace;                         /* 0: not tracing */
  size_t trace_cap;                          /* records */
  unsigned runs;                             /* traced runs so far (atomic) */
  int async_reads;                           /* CLCRT_TASKGRAPH_ASYNC_READS */
};

/* Header words of clcrt_tg_args, in order: ctr, trace (8 bytes each), total, words, trace_cap,
 * run, end[nn], tx[nn], ty[nn], eoff[max(ne, 1)]. */
#define TG_HDR_BYTES(nn, ne) (16u + 4u * (4u + 3u * (nn) + ((ne) ? (ne) : 1u)))
/* The trace buffer: a count word (64 bytes with padding), then records of TG_REC_BYTES. */
#define TG_REC_BYTES 48u
#define TG_TRACE_HDR 64u
typedef struct tg_rec {
  uint64_t taken, ready, end; /* globaltimer: the ticket taken, the waits done, the tile function returned */
  uint32_t node, tile, ticket, run, sm, pad;
} tg_rec;
_Static_assert(sizeof(tg_rec) == TG_REC_BYTES, "tg_rec: the device's layout");

static size_t round64(size_t x) { return (x + 63u) & ~(size_t)63u; }

static clcrt_status bad(clcrt_ops *ops, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static clcrt_status bad(clcrt_ops *ops, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return clcrt_errmsg_set(ops ? ops->rt : NULL, CLCRT_E_INVALID, "%s", msg);
}

static int is_ident(const char *s) {
  if (!s || !*s || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == ':'))
      return 0;
  return strlen(s) < 200;
}

static const char *kind_name(clcrt_dep_kind k) {
  static const char *const names[] = {"ALL", "SAME", "ROWS", "KSLICES", "CUSTOM"};
  return (unsigned)k <= CLCRT_DEP_CUSTOM ? names[k] : "unknown";
}

static clcrt_status check_desc(clcrt_ops *ops, const clcrt_taskgraph_desc *d) {
  if (!d || d->size != sizeof *d)
    return bad(ops, "clcrt_taskgraph_create: the descriptor is NULL or its size is not sizeof(clcrt_taskgraph_desc) "
                    "(start from CLCRT_TASKGRAPH_DESC_INIT)");
  if (!d->source || !*d->source) return bad(ops, "clcrt_taskgraph_create: the source is empty");
  if (d->num_nodes < 1 || d->num_nodes > CLCRT_TASKGRAPH_MAX_NODES || !d->nodes)
    return bad(ops, "clcrt_taskgraph_create: %u nodes; a graph has 1 to %u (and nodes must not be NULL)", d->num_nodes,
               CLCRT_TASKGRAPH_MAX_NODES);
  if (d->flags & ~CLCRT_TASKGRAPH_ASYNC_READS)
    return bad(ops, "clcrt_taskgraph_create: flags 0x%x has bits that are no CLCRT_TASKGRAPH_* flag", d->flags);
  if (d->num_edges > CLCRT_TASKGRAPH_MAX_EDGES || (d->num_edges && !d->edges))
    return bad(ops, "clcrt_taskgraph_create: %u edges; a graph has at most %u (and edges must not be NULL)",
               d->num_edges, CLCRT_TASKGRAPH_MAX_EDGES);
  for (unsigned i = 0; i < d->num_nodes; i++) {
    const clcrt_task_node *n = &d->nodes[i];
    if (!is_ident(n->tile_fn) || !is_ident(n->args_type))
      return bad(ops, "clcrt_taskgraph_create: node %u needs the names of its tile function and its Args type", i);
    if (n->prefetch_fn && !is_ident(n->prefetch_fn))
      return bad(ops, "clcrt_taskgraph_create: node %u (%s): prefetch_fn is not a function name (NULL: none)", i,
                 n->tile_fn);
    if (n->args_size == 0 || n->args_size > CLCRT_TASKGRAPH_MAX_ARGS)
      return bad(ops, "clcrt_taskgraph_create: node %u (%s): args_size %zu; give sizeof(%s), 1 to %u bytes", i,
                 n->tile_fn, n->args_size, n->args_type, CLCRT_TASKGRAPH_MAX_ARGS);
  }
  for (unsigned e = 0; e < d->num_edges; e++) {
    const clcrt_task_edge *x = &d->edges[e];
    if (x->from >= d->num_nodes || x->to >= d->num_nodes || x->from >= x->to)
      return bad(ops,
                 "clcrt_taskgraph_create: edge %u goes from node %u to node %u; edges go from a node to a later one "
                 "(list the nodes so that producers come first; %u nodes)",
                 e, x->from, x->to, d->num_nodes);
    switch (x->kind) {
      case CLCRT_DEP_ALL:
      case CLCRT_DEP_SAME:
        break;
      case CLCRT_DEP_ROWS:
        if (x->a == 0 || x->b == 0)
          return bad(ops, "clcrt_taskgraph_create: edge %u (ROWS) needs a >= 1 consumer and b >= 1 producer tiles "
                          "per row block (a %u, b %u)", e, x->a, x->b);
        break;
      case CLCRT_DEP_KSLICES:
        if (x->a == 0) return bad(ops, "clcrt_taskgraph_create: edge %u (KSLICES) needs a >= 1 slices", e);
        break;
      case CLCRT_DEP_CUSTOM:
        if (!is_ident(x->fn))
          return bad(ops, "clcrt_taskgraph_create: edge %u (CUSTOM) needs fn, the name of a __device__ uint2 "
                          "fn(unsigned tile, unsigned tiles, unsigned producer_tiles) in the source", e);
        break;
      default:
        return bad(ops, "clcrt_taskgraph_create: edge %u has kind %d; use a clcrt_dep_kind", e, (int)x->kind);
    }
  }
  return CLCRT_OK;
}

/* ---- the generated source --------------------------------------------------------------------- */

typedef struct sbuf {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->oom = 1;
      return;
    }
    if (b->p && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap <= b->len + (size_t)n) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) {
      b->oom = 1;
      return;
    }
    b->p = q, b->cap = cap;
  }
}

/* The protocol's device side (include/clcrt_ops.h, task graphs). */
static const char TG_LIB[] =
    "namespace clcrt_tg {\n"
    "__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {\n"
    "  unsigned v;\n"
    "  asm volatile(\"ld.acquire.gpu.global.u32 %0, [%1];\" : \"=r\"(v) : \"l\"(p) : \"memory\");\n"
    "  return v;\n"
    "}\n"
    "// Counter adds after a tile's stores: one fence, then relaxed adds (a release each, as one).\n"
    "__device__ __forceinline__ void fence() { asm volatile(\"fence.acq_rel.gpu;\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ void add(unsigned *p) {\n"
    "  asm volatile(\"red.relaxed.gpu.global.add.u32 [%0], 1;\" ::\"l\"(p) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void release_add(unsigned *p) {\n"
    "  asm volatile(\"red.release.gpu.global.add.u32 [%0], 1;\" ::\"l\"(p) : \"memory\");\n"
    "}\n"
    "// Polls until *p reaches target; the tile it waits on runs on a CTA that holds a lower ticket.\n"
    "__device__ __forceinline__ void wait(const unsigned *p, unsigned target) {\n"
    "  unsigned ns = 32;\n"
    "  while (ld_acquire(p) < target) {\n"
    "    __nanosleep(ns);\n"
    "    if (ns < 512) ns *= 2;\n"
    "  }\n"
    "}\n"
    "// After the waits, with CLCRT_TASKGRAPH_ASYNC_READS: the data they cover may be read by TMA.\n"
    "__device__ __forceinline__ void proxy_fence() {\n"
    "#if __CUDA_ARCH__ >= 900\n"
    "  asm volatile(\"fence.proxy.async.global;\" ::: \"memory\");\n"
    "#endif\n"
    "}\n"
    "struct Rec { unsigned long long taken, ready, end; unsigned node, tile, ticket, run, sm, pad; };\n"
    "__device__ __forceinline__ unsigned long long now() {\n"
    "  unsigned long long t;\n"
    "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)::\"memory\");\n"
    "  return t;\n"
    "}\n"
    "// A traced run (clcrt_taskgraph_trace_enable): thread 0 records its tile.\n"
    "__device__ __noinline__ void record(unsigned char *buf, unsigned cap, unsigned run, unsigned node, unsigned tile,\n"
    "                                    unsigned ticket, unsigned long long taken, unsigned long long ready) {\n"
    "  const unsigned long long end = now();\n"
    "  const unsigned i = atomicAdd((unsigned *)buf, 1u);\n"
    "  if (i >= cap) return;\n"
    "  Rec *r = (Rec *)(buf + 64) + i;\n"
    "  unsigned sm;\n"
    "  asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(sm));\n"
    "  r->taken = taken, r->ready = ready, r->end = end;\n"
    "  r->node = node, r->tile = tile, r->ticket = ticket, r->run = run, r->sm = sm, r->pad = 0;\n"
    "}\n"
    "__device__ __forceinline__ clcrt::Tile at(const clcrt::Tile &t, unsigned l, unsigned tx, unsigned ty,\n"
    "                                          unsigned ticket) {\n"
    "  clcrt::Tile r = t;\n"
    "  r.coord = make_uint3(l % tx, (l / tx) % ty, l / (tx * ty));\n"
    "  r.linear = l;\n"
    "  r.unit = ticket;\n"
    "  return r;\n"
    "}\n"
    "}  // namespace clcrt_tg\n";

static void gen_wait(sbuf *b, const clcrt_task_edge *x, unsigned e) {
  const unsigned p = x->from;
  put(b, "      {  // edge %u: node %u, %s\n", e, p, kind_name(x->kind));
  if (p)
    put(b, "        const unsigned tp = g.end[%u] - g.end[%u];\n", p, p - 1);
  else
    put(b, "        const unsigned tp = g.end[0];\n");
  put(b, "        unsigned *c = g.ctr + g.eoff[%u];\n        (void)tp;\n", e);
  switch (x->kind) {
    case CLCRT_DEP_ALL: /* once per CTA: the counter stays complete until the run ends */
      put(b, "        if (!(s_all[%u] & %uu)) clcrt_tg::wait(c, tp), s_all[%u] |= %uu;\n", e / 32, 1u << (e % 32), e / 32,
          1u << (e % 32));
      break;
    case CLCRT_DEP_SAME:
      put(b, "        if (l < tp) clcrt_tg::wait(c + l, 1u);\n");
      break;
    case CLCRT_DEP_ROWS:
      put(b, "        const unsigned r = l / %uu;\n", x->a);
      put(b, "        if (r * %uu < tp) clcrt_tg::wait(c + r, min(%uu, tp - r * %uu));\n", x->b, x->b, x->b);
      break;
    case CLCRT_DEP_KSLICES:
      put(b, "        clcrt_tg::wait(c + l, %uu);\n", x->a);
      break;
    case CLCRT_DEP_CUSTOM:
      put(b, "        const uint2 r = %s(l, tc, tp);\n", x->fn);
      put(b, "        for (unsigned j = r.x; j < min(r.y, tp); j++) clcrt_tg::wait(c + j, 1u);\n");
      break;
  }
  put(b, "      }\n");
}

static void gen_release(sbuf *b, const clcrt_task_edge *x, unsigned e) {
  const unsigned c = x->to;
  put(b, "      {  // edge %u: node %u, %s\n", e, c, kind_name(x->kind));
  put(b, "        unsigned *c = g.ctr + g.eoff[%u];\n", e);
  switch (x->kind) {
    case CLCRT_DEP_ALL:
      put(b, "        clcrt_tg::add(c);\n");
      break;
    case CLCRT_DEP_SAME:
      put(b, "        if (l < g.end[%u] - g.end[%u]) clcrt_tg::add(c + l);\n", c, c - 1);
      break;
    case CLCRT_DEP_ROWS:
      put(b, "        clcrt_tg::add(c + l / %uu);\n", x->b);
      break;
    case CLCRT_DEP_KSLICES:
      put(b, "        clcrt_tg::add(c + l %% (g.end[%u] - g.end[%u]));\n", c, c - 1);
      break;
    case CLCRT_DEP_CUSTOM:
      put(b, "        clcrt_tg::add(c + l);\n");
      break;
  }
  put(b, "      }\n");
}

static char *generate(clcrt_taskgraph *g, const char *user) {
  sbuf b = {0};
  const unsigned nn = g->nn, ne = g->ne, all_words = ne ? (ne + 31) / 32 : 1u;
  put(&b, "%s\n\n// ---- generated by clcrt_taskgraph_create ----\n%s\n", user, TG_LIB);
  put(&b, "struct clcrt_tg_args {\n  unsigned *ctr;\n  unsigned char *trace;\n"
          "  unsigned total, words, trace_cap, run;\n");
  put(&b, "  unsigned end[%u], tx[%u], ty[%u], eoff[%u];\n", nn, nn, nn, ne ? ne : 1u);
  for (unsigned i = 0; i < nn; i++) put(&b, "  alignas(64) %s a%u;\n", g->nodes[i].args_type, i);
  put(&b, "};\n");
  put(&b, "static_assert(sizeof(clcrt_tg_args) == %zu, \"clcrt_tg_args: layout differs from the host's\");\n",
      g->args_bytes);
  for (unsigned i = 0; i < nn; i++) {
    put(&b, "static_assert(sizeof(%s) == %zu, \"node %u: sizeof(%s) is not the descriptor's args_size\");\n",
        g->nodes[i].args_type, g->nodes[i].args_size, i, g->nodes[i].args_type);
    /* with the size and an alignment of at most 64, alignas(64) puts each at the host's offset */
    put(&b, "static_assert(alignof(%s) <= 64, \"node %u: %s needs an alignment above 64\");\n", g->nodes[i].args_type,
        i, g->nodes[i].args_type);
  }
  put(&b,
      "\n__device__ void clcrt_tg_tile(const clcrt::Tile &t, const clcrt_tg_args &g) {\n"
      "  // Two slots: thread 0 writes the next tile's ticket while a slow warp may still read this one.\n"
      "  __shared__ unsigned s_ticket[2];\n"
      "  __shared__ unsigned s_all[%u];  // thread 0's: the ALL edges this CTA saw complete\n"
      "  const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
      "  const bool t0 = tid == 0;\n"
      "  // The releases are another warp's (warp 1's first thread), so that its fence and adds\n"
      "  // overlap thread 0's next ticket instead of delaying it.\n"
      "  const bool rel = blockDim.x * blockDim.y * blockDim.z > 32u ? tid == 32u : t0;\n"
      "  if (t0 && t.iteration == 0)\n"
      "    for (unsigned i = 0; i < %uu; i++) s_all[i] = 0u;\n"
      "  if (t0) s_ticket[t.iteration & 1u] = atomicAdd(g.ctr, 1u);\n"
      "  const bool traced = t0 && g.trace;\n"
      "  const unsigned long long taken = traced ? clcrt_tg::now() : 0ull;\n"
      "  __syncthreads();\n"
      "  const unsigned k = s_ticket[t.iteration & 1u];\n",
      all_words, all_words);
  for (unsigned i = 0; i < nn; i++) {
    int in = 0, out = 0;
    for (unsigned e = 0; e < ne; e++) in += g->edges[e].to == i, out += g->edges[e].from == i;
    const char *pf = g->nodes[i].prefetch_fn;
    put(&b, "  %sif (k < g.end[%u]) {  // node %u: %s\n", i ? "else " : "", i, i, g->nodes[i].tile_fn);
    if (i)
      put(&b, "    const unsigned l = k - g.end[%u], tc = g.end[%u] - g.end[%u];\n", i - 1, i, i - 1);
    else
      put(&b, "    const unsigned l = k, tc = g.end[0];\n");
    put(&b, "    (void)tc;\n    const clcrt::Tile lt = clcrt_tg::at(t, l, g.tx[%u], g.ty[%u], k);\n", i, i);
    if (pf && *pf) put(&b, "    %s(lt, g.a%u);  // before the waits: nothing another node writes\n", pf, i);
    if (in) {
      put(&b, "    if (t0) {\n");
      for (unsigned e = 0; e < ne; e++)
        if (g->edges[e].to == i) gen_wait(&b, &g->edges[e], e);
      put(&b, "    }\n    __syncthreads();\n%s", g->async_reads ? "    clcrt_tg::proxy_fence();\n" : "");
    }
    /* a node that waits on none has no wait record (ready = taken) */
    put(&b, "    const unsigned long long ready = %s;\n", in ? "traced ? clcrt_tg::now() : 0ull" : "taken");
    put(&b, "    %s(lt, g.a%u);\n", g->nodes[i].tile_fn, i);
    put(&b, "    if (traced) clcrt_tg::record(g.trace, g.trace_cap, g.run, %uu, l, k, taken, ready);\n", i);
    if (out) {
      put(&b, "    __syncthreads();\n    if (rel) {\n      clcrt_tg::fence();\n");
      for (unsigned e = 0; e < ne; e++)
        if (g->edges[e].from == i) gen_release(&b, &g->edges[e], e);
      put(&b, "    }\n");
    }
    put(&b, "  }\n");
  }
  put(&b,
      "  // Word 1 counts finished tiles. The last ticket's CTA waits until every other tile has\n"
      "  // finished (they hold lower tickets: the wait ends), then zeroes the run's counters, so\n"
      "  // that the next run on the stream finds them at zero.\n"
      "  if (k == g.total - 1u) {\n"
      "    if (t0) clcrt_tg::wait(g.ctr + 1, g.total - 1u);\n"
      "    __syncthreads();\n"
      "    const unsigned n = blockDim.x * blockDim.y * blockDim.z;\n"
      "    for (unsigned i = tid; i < g.words; i += n) g.ctr[i] = 0u;\n"
      "  } else if (rel) {\n"
      "    clcrt_tg::release_add(g.ctr + 1);\n"
      "  }\n"
      "}\n");
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  return b.p;
}

/* ---- create, run, destroy --------------------------------------------------------------------- */

clcrt_status clcrt_taskgraph_create(clcrt_ops *ops, const clcrt_taskgraph_desc *d, clcrt_taskgraph **out) {
  if (!ops || !out) return clcrt_errmsg_set(ops ? ops->rt : NULL, CLCRT_E_INVALID, "clcrt_taskgraph_create: a NULL argument");
  *out = NULL;
  clcrt_status st = check_desc(ops, d);
  if (st != CLCRT_OK) return st;
  clcrt_taskgraph *g = calloc(1, sizeof *g);
  if (!g) return clcrt_errmsg_set(ops->rt, CLCRT_E_NOMEM, "clcrt_taskgraph_create: out of memory");
  g->ops = ops, g->nn = d->num_nodes, g->ne = d->num_edges;
  g->async_reads = (d->flags & CLCRT_TASKGRAPH_ASYNC_READS) != 0;
  memcpy(g->nodes, d->nodes, d->num_nodes * sizeof *d->nodes);
  if (d->num_edges) memcpy(g->edges, d->edges, d->num_edges * sizeof *d->edges);
  size_t at = TG_HDR_BYTES(g->nn, g->ne);
  for (unsigned i = 0; i < g->nn; i++) {
    g->off[i] = round64(at);
    at = g->off[i] + g->nodes[i].args_size;
  }
  g->args_bytes = round64(at);
  if (g->args_bytes > CLCRT_TASKGRAPH_MAX_ARGS + 64u) {
    st = bad(ops, "clcrt_taskgraph_create: the nodes' Args take %zu bytes with the graph's own words and 64-byte "
                  "alignment, more than the %u a launch carries; pass large data through device memory",
             g->args_bytes, CLCRT_TASKGRAPH_MAX_ARGS + 64u);
    free(g);
    return st;
  }
  g->src = generate(g, d->source);
  /* The names are the caller's: they need to live through this call only. */
  for (unsigned i = 0; i < g->nn; i++) g->nodes[i].tile_fn = g->nodes[i].args_type = g->nodes[i].prefetch_fn = NULL;
  for (unsigned e = 0; e < g->ne; e++) g->edges[e].fn = NULL;
  if (!g->src) {
    free(g);
    return clcrt_errmsg_set(ops->rt, CLCRT_E_NOMEM, "clcrt_taskgraph_create: out of memory for the source");
  }
  clcrt_tile_desc td = CLCRT_TILE_DESC_INIT;
  td.source = g->src;
  td.tile_fn = "clcrt_tg_tile";
  td.args_type = "clcrt_tg_args";
  td.block = d->block;
  td.smem_bytes = d->smem_bytes;
  td.sched = d->sched;
  td.grid = d->grid;
  td.options = d->options;
  td.num_options = d->num_options;
  td.min_blocks_per_sm = d->min_blocks_per_sm;
  clcrt_kernel *k = NULL;
  if ((st = clcrt_register(ops->rt, &td, &k)) != CLCRT_OK) {
    free(g->src);
    free(g);
    return st; /* clcrt_register's message: NVRTC's log for a compile error */
  }
  g->k = k;
  *out = g;
  return CLCRT_OK;
}

const clcrt_kernel *clcrt_taskgraph_kernel(const clcrt_taskgraph *g) { return g ? g->k : NULL; }
const char *clcrt_taskgraph_source(const clcrt_taskgraph *g) { return g ? g->src : NULL; }

void clcrt_taskgraph_destroy(clcrt_taskgraph *g) {
  if (!g) return;
  if (g->trace) {
    gemm_ctx cx;
    const int entered = gemm__ctx_enter(g->ops, &cx) == CLCRT_OK;
    (void)g->ops->cu->cuMemFree(g->trace);
    if (entered) gemm__ctx_leave(g->ops, &cx);
  }
  free(g->src);
  free(g);
}

/* The run's header words into hdr (TG_HDR_BYTES): tickets, counter offsets; its tiles into
 * *total and its counter words into *words. */
static clcrt_status layout_run(clcrt_taskgraph *g, const clcrt_dim3 *tiles, unsigned char *hdr, unsigned *total_out,
                               unsigned *words_out) {
  clcrt_ops *ops = g->ops;
  const unsigned nn = g->nn, ne = g->ne;
  unsigned long long cnt[CLCRT_TASKGRAPH_MAX_NODES], total = 0;
  unsigned end[CLCRT_TASKGRAPH_MAX_NODES], tx[CLCRT_TASKGRAPH_MAX_NODES], ty[CLCRT_TASKGRAPH_MAX_NODES];
  unsigned eoff[CLCRT_TASKGRAPH_MAX_EDGES + 1];
  for (unsigned i = 0; i < nn; i++) {
    const clcrt_dim3 t = tiles[i];
    cnt[i] = (unsigned long long)t.x * t.y * t.z;
    total += cnt[i];
    if (total > 0x7fffffffull)
      return bad(ops, "clcrt_taskgraph_run: %llu tiles up to node %u; a run has at most 2^31 - 1", total, i);
    end[i] = (unsigned)total;
    tx[i] = t.x ? t.x : 1u, ty[i] = t.y ? t.y : 1u;
  }
  unsigned long long words = 2;
  for (unsigned e = 0; e < ne; e++) {
    const clcrt_task_edge *x = &g->edges[e];
    const unsigned long long tp = cnt[x->from], tc = cnt[x->to];
    unsigned long long n = 0;
    switch (x->kind) {
      case CLCRT_DEP_ALL: n = 1; break;
      case CLCRT_DEP_SAME:
        if (tc > tp)
          return bad(ops, "clcrt_taskgraph_run: edge %u (SAME) from node %u (%llu tiles) to node %u (%llu tiles): "
                          "every consumer tile needs the producer tile of its index; give the producer as many "
                          "tiles or more", e, x->from, tp, x->to, tc);
        n = tc;
        break;
      case CLCRT_DEP_ROWS: n = (tp + x->b - 1) / x->b; break;
      case CLCRT_DEP_KSLICES:
        if (tp != (unsigned long long)x->a * tc)
          return bad(ops, "clcrt_taskgraph_run: edge %u (KSLICES, %u slices) from node %u (%llu tiles) to node %u "
                          "(%llu tiles): the producer needs slices x consumer tiles = %llu tiles", e, x->a, x->from,
                     tp, x->to, tc, (unsigned long long)x->a * tc);
        n = tc;
        break;
      case CLCRT_DEP_CUSTOM: n = tp; break;
    }
    eoff[e] = (unsigned)words;
    words += n;
    if (words > 0x3fffffffull) return bad(ops, "clcrt_taskgraph_run: the run needs %llu counters; too many", words);
  }
  if (!ne) eoff[0] = 0;
  unsigned tot = (unsigned)total, w32 = (unsigned)words, cap = 0, run = 0;
  unsigned long long tr = (unsigned long long)g->trace;
  if (tr) {
    cap = g->trace_cap > 0xffffffffu ? 0xffffffffu : (unsigned)g->trace_cap;
    run = __atomic_fetch_add(&g->runs, 1u, __ATOMIC_RELAXED);
  }
  unsigned char *p = hdr + 8; /* ctr: filled by the caller */
  memcpy(p, &tr, 8), p += 8;
  memcpy(p, &tot, 4), p += 4;
  memcpy(p, &w32, 4), p += 4;
  memcpy(p, &cap, 4), p += 4;
  memcpy(p, &run, 4), p += 4;
  memcpy(p, end, 4u * nn), p += 4u * nn;
  memcpy(p, tx, 4u * nn), p += 4u * nn;
  memcpy(p, ty, 4u * nn), p += 4u * nn;
  memcpy(p, eoff, 4u * (ne ? ne : 1u));
  *total_out = tot, *words_out = w32;
  return CLCRT_OK;
}

clcrt_status clcrt_taskgraph_run(clcrt_taskgraph *g, clcrt_stream *s, const clcrt_dim3 *tiles,
                                 const void *const *args) {
  return clcrt_taskgraph_run_ex(g, s, tiles, args, 0);
}

clcrt_status clcrt_taskgraph_run_ex(clcrt_taskgraph *g, clcrt_stream *s, const clcrt_dim3 *tiles,
                                    const void *const *args, unsigned flags) {
  if (!g) return clcrt_errmsg_set(NULL, CLCRT_E_INVALID, "clcrt_taskgraph_run: the graph is NULL");
  clcrt_ops *ops = g->ops;
  if (flags & ~CLCRT_RUN_PDL)
    return bad(ops, "clcrt_taskgraph_run_ex: flags 0x%x: only CLCRT_RUN_PDL (0x%x) is defined", flags, CLCRT_RUN_PDL);
  if (!s || !tiles || !args)
    return bad(ops, "clcrt_taskgraph_run: %s is NULL", !s ? "the stream" : !tiles ? "tiles" : "args");
  if (!ops->cu)
    return clcrt_errmsg_set(ops->rt, CLCRT_E_NO_DEVICE, "clcrt_taskgraph_run: the runtime only compiles (target_arch): no GPU");
  for (unsigned i = 0; i < g->nn; i++)
    if (!args[i]) return bad(ops, "clcrt_taskgraph_run: args[%u] is NULL; every node needs its Args", i);
  _Alignas(64) unsigned char buf[CLCRT_TASKGRAPH_MAX_ARGS + 64u];
  memset(buf, 0, g->args_bytes);
  unsigned total = 0, words = 0;
  clcrt_status st = layout_run(g, tiles, buf, &total, &words);
  if (st != CLCRT_OK) return st;
  if (total == 0) return CLCRT_OK;
  for (unsigned i = 0; i < g->nn; i++) memcpy(buf + g->off[i], args[i], g->nodes[i].args_size);
  gemm_ctx cx;
  if ((st = gemm__ctx_enter(ops, &cx)) != CLCRT_OK) return st;
  gemm_ws *w;
  if ((st = gemm__ws_stream(ops, s, &w)) == CLCRT_OK) {
    int capturing = 0;
    CUdeviceptr part = 0, ctr = 0;
    if ((st = gemm__ws_capturing(ops, w, "clcrt_taskgraph_run", &capturing)) == CLCRT_OK &&
        (st = gemm__ws_reserve(ops, w, capturing, 0, (size_t)words * 4u, &part, &ctr)) == CLCRT_OK) {
      unsigned long long c = (unsigned long long)ctr;
      memcpy(buf, &c, 8);
      st = clcrt_run_ex(s, g->k, (clcrt_dim3){total, 1, 1}, buf, g->args_bytes, flags);
    }
    gemm__ws_unlock(w);
  }
  gemm__ctx_leave(ops, &cx);
  return st;
}

/* ---- tracing ---------------------------------------------------------------------------------- */

clcrt_status clcrt_taskgraph_trace_enable(clcrt_taskgraph *g, size_t capacity) {
  if (!g) return clcrt_errmsg_set(NULL, CLCRT_E_INVALID, "clcrt_taskgraph_trace_enable: the graph is NULL");
  clcrt_ops *ops = g->ops;
  if (!ops->cu)
    return clcrt_errmsg_set(ops->rt, CLCRT_E_NO_DEVICE, "clcrt_taskgraph_trace_enable: the runtime only compiles");
  if (capacity > (1u << 26))
    return bad(ops, "clcrt_taskgraph_trace_enable: %zu records; at most 2^26 (%u bytes each)", capacity, TG_REC_BYTES);
  if (capacity == g->trace_cap && (capacity == 0) == (g->trace == 0)) return CLCRT_OK;
  gemm_ctx cx;
  clcrt_status st = gemm__ctx_enter(ops, &cx);
  if (st != CLCRT_OK) return st;
  CUstreamCaptureMode mode;
  CUresult r = gemm__relaxed_begin(ops->cu, &mode);
  if (r == CUDA_SUCCESS) {
    if (g->trace) (void)ops->cu->cuMemFree(g->trace); /* cuMemFree waits for the device's work */
    g->trace = 0, g->trace_cap = 0;
    if (capacity) {
      CUdeviceptr d = 0;
      r = ops->cu->cuMemAlloc(&d, TG_TRACE_HDR + capacity * TG_REC_BYTES);
      if (r == CUDA_SUCCESS && (r = ops->cu->cuMemsetD8(d, 0, TG_TRACE_HDR)) != CUDA_SUCCESS) (void)ops->cu->cuMemFree(d);
      if (r == CUDA_SUCCESS) g->trace = d, g->trace_cap = capacity, g->runs = 0;
    }
    gemm__relaxed_end(ops->cu, &mode);
  }
  gemm__ctx_leave(ops, &cx);
  if (r != CUDA_SUCCESS)
    return clcrt_errmsg_set(ops->rt, r == CUDA_ERROR_OUT_OF_MEMORY ? CLCRT_E_NOMEM : CLCRT_E_CUDA,
                            "clcrt_taskgraph_trace_enable: the trace buffer could not be made (CUDA error %d)", (int)r);
  return CLCRT_OK;
}

clcrt_status clcrt_taskgraph_trace_read(clcrt_taskgraph *g, clcrt_stream *s, clcrt_trace **out) {
  if (!g || !s || !out)
    return clcrt_errmsg_set(g ? g->ops->rt : NULL, CLCRT_E_INVALID, "clcrt_taskgraph_trace_read: a NULL argument");
  *out = NULL;
  clcrt_ops *ops = g->ops;
  if (!g->trace)
    return bad(ops, "clcrt_taskgraph_trace_read: tracing is off; call clcrt_taskgraph_trace_enable before the runs");
  gemm_ctx cx;
  clcrt_status st0 = gemm__ctx_enter(ops, &cx);
  if (st0 != CLCRT_OK) return st0;
  CUresult r = ops->cu->cuStreamSynchronize(clcrt_stream_cu(s));
  uint32_t count = 0;
  if (r == CUDA_SUCCESS) r = ops->cu->cuMemcpyDtoH(&count, g->trace, 4);
  const size_t n = count < g->trace_cap ? count : g->trace_cap;
  tg_rec *dev = n ? malloc(n * sizeof *dev) : NULL;
  clcrt_trace_record *rec = n ? calloc(2 * n, sizeof *rec) : NULL;
  if (n && (!dev || !rec)) {
    free(dev), free(rec);
    gemm__ctx_leave(ops, &cx);
    return clcrt_errmsg_set(ops->rt, CLCRT_E_NOMEM, "clcrt_taskgraph_trace_read: out of memory for %zu records", n);
  }
  if (r == CUDA_SUCCESS && n) r = ops->cu->cuMemcpyDtoH(dev, g->trace + TG_TRACE_HDR, n * sizeof *dev);
  if (r == CUDA_SUCCESS) r = ops->cu->cuMemsetD8(g->trace, 0, 4);
  gemm__ctx_leave(ops, &cx);
  if (r != CUDA_SUCCESS) {
    free(dev), free(rec);
    return clcrt_errmsg_set(ops->rt, CLCRT_E_CUDA, "clcrt_taskgraph_trace_read: reading the records failed (CUDA error %d)",
                            (int)r);
  }
  /* Per tile: its wait (when it had one) and its tile function, as clcrt_trace records. */
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    const tg_rec *d = &dev[i];
    clcrt_trace_record base = {0};
    base.tile = d->tile, base.unit = d->node, base.cluster = d->ticket, base.run = d->run;
    base.sm = (uint16_t)(d->sm < CLCRT_TRACE_MAX_SMS ? d->sm : CLCRT_TRACE_MAX_SMS - 1);
    if (d->ready > d->taken) {
      rec[m] = base, rec[m].start_ns = d->taken, rec[m].end_ns = d->ready, rec[m].flags = CLCRT_TRACE_WAIT;
      m++;
    }
    rec[m] = base, rec[m].start_ns = d->ready, rec[m].end_ns = d->end >= d->ready ? d->end : d->ready;
    m++;
  }
  clcrt_status st = clcrt_trace_create(rec, m, count - n, out);
  free(dev), free(rec);
  return st;
}
