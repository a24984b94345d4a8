/* The GEMM op (include/clcrt_ops.h): descriptors checked, a plan made, the kernel found, the
 * workspace reserved (gemm_ws.c) and one clcrt_run. Built on clcrt.h alone. */
#include <stdlib.h>
#include <string.h>

#include "gemm_ops.h"
#include "ops_src.h" /* generated: ops/gemm.cu and ops/gemm_abi.h as C strings */

/* ---- the source -------------------------------------------------------------------------- */

static char *g_source;
static pthread_once_t g_source_once = PTHREAD_ONCE_INIT;

static const clcrt__ops_src_file *embedded(const char *name) {
  for (const clcrt__ops_src_file *f = clcrt__ops_src; f->name; f++)
    if (!strcmp(f->name, name)) return f;
  return NULL;
}

/* gemm.cu with the text of each embedded header it includes (gemm_abi.h, gemm_wgmma.h) in place
 * of its #include line, #line directives keeping NVRTC's messages on the lines of each file. */
static void source_build(void) {
  static const char *const headers[] = {"gemm_abi.h", "gemm_wgmma.h"};
  const clcrt__ops_src_file *cu = embedded("gemm.cu");
  if (!cu) return;
  size_t cap = cu->len + 256;
  for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
    const clcrt__ops_src_file *h = embedded(headers[i]);
    if (!h) return;
    cap += h->len + 64;
  }
  char *s = malloc(cap);
  if (!s) return;
  size_t n = 0;
  const char *p = cu->text;
  unsigned line = 1;
  while (*p) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) + 1 : strlen(p);
    const clcrt__ops_src_file *h = NULL;
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
      char inc[64];
      int il = snprintf(inc, sizeof inc, "#include \"%s\"\n", headers[i]);
      if ((size_t)il == len && !strncmp(p, inc, len)) h = embedded(headers[i]);
    }
    int w = h ? snprintf(s + n, cap - n, "#line 1 \"%s\"\n%s\n#line %u \"gemm.cu\"\n", h->name, h->text, line + 1)
              : snprintf(s + n, cap - n, "%.*s", (int)len, p);
    if (w < 0 || (size_t)w >= cap - n) {
      free(s);
      return;
    }
    n += (size_t)w, p += len, line++;
  }
  g_source = s;
}

const char *clcrt_gemm_source(void) {
  pthread_once(&g_source_once, source_build);
  return g_source;
}

/* ---- variants ------------------------------------------------------------------------------ */

int clcrt_gemm_variant_count(void) { return GEMM_NUM_VARIANTS; }
unsigned clcrt_gemm_max_groups(void) { return GEMM_MAX_GROUPS; }

clcrt_status clcrt_gemm_variant_get(int i, clcrt_gemm_variant_info *out) {
  if (!out || out->size != sizeof *out)
    return clcrt_errmsg_set(NULL, CLCRT_E_INVALID, "clcrt_gemm_variant_get: out must be a clcrt_gemm_variant_info "
                                                   "made with CLCRT_GEMM_VARIANT_INFO_INIT");
  const gemm_variant *v = gemm_variant_at(i);
  if (!v)
    return clcrt_errmsg_set(NULL, CLCRT_E_NOT_FOUND, "clcrt_gemm_variant_get: %d: no such variant (0 to %d)", i,
                            GEMM_ALL_VARIANTS - 1);
  out->name = v->name, out->bm = v->bm, out->bn = v->bn, out->cluster_m = v->cm, out->stages = v->stages;
  out->epilogue = v->epi;
  return CLCRT_OK;
}

/* A variant's index by name; "BMxBN...t" names the same tile shape transposed (A and B swapped,
 * D^T computed: gemm_plan_dense_t), returned with GEMM_VI_TRANS set. -1: none. */
#define GEMM_VI_TRANS (1 << 20)
static int variant_index(const char *name) {
  int i = gemm_variant_find(name);
  const size_t len = strlen(name);
  if (i < 0 && len > 1 && len < 16 && name[len - 1] == 't') {
    char base[16];
    memcpy(base, name, len - 1);
    base[len - 1] = 0;
    if ((i = gemm_variant_find(base)) >= 0) i = gemm_trans_ok(gemm_variant_at(i)) ? i | GEMM_VI_TRANS : -1;
  }
  return i;
}
int clcrt_gemm_variant_find(const char *name) { return name ? gemm_variant_find(name) : -1; }

static clcrt_status bad_variant(const clcrt_ops *ops, const char *name) {
  char list[256] = "";
  for (int i = 0; i < GEMM_NUM_VARIANTS; i++) {
    strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
    strncat(list, GEMM_VARIANTS[i].name, sizeof list - strlen(list) - 1);
  }
  return clcrt_errmsg_set(ops->rt, CLCRT_E_INVALID,
                          "gemm: no variant \"%.64s\": one of %s, or a tile shape BMxBN or BMxBNc2 (BM 64 or 128, BN "
                          "a multiple of 16 up to 256)",
                          name, list);
}

/* ---- the handle ----------------------------------------------------------------------------- */

clcrt_status clcrt_ops_create(clcrt_runtime *rt, clcrt_ops **out) {
  if (out) *out = NULL;
  if (!rt || !out)
    return clcrt_errmsg_set(rt, CLCRT_E_INVALID, "clcrt_ops_create: %s is NULL", rt ? "out" : "the runtime");
  const char *src = clcrt_gemm_source();
  if (!src) return clcrt_errmsg_set(rt, CLCRT_E_NOMEM, "clcrt_ops_create: no memory for the GEMM's source");
  /* Aligned as its cached tensor maps are (64 bytes): calloc promises 16. */
  clcrt_ops *ops = NULL;
  if (posix_memalign((void **)&ops, _Alignof(clcrt_ops), sizeof *ops) != 0 || !ops)
    return clcrt_errmsg_set(rt, CLCRT_E_NOMEM, "clcrt_ops_create: out of memory");
  memset(ops, 0, sizeof *ops);
  ops->rt = rt;
  ops->src = src;
  if (!clcrt_runtime_compile_only(rt)) {
    ops->cu = clcrt_runtime_driver(rt);
    ops->ctx = clcrt_runtime_context(rt);
  }
  pthread_mutex_init(&ops->lock, NULL);
  pthread_mutex_init(&ops->map_lock, NULL);
  pthread_mutex_init(&ops->plan_lock, NULL);
  *out = ops;
  return CLCRT_OK;
}

void clcrt_ops_destroy(clcrt_ops *ops) {
  if (!ops) return;
  if (ops->cu && ops->ctx) (void)ops->cu->cuCtxPushCurrent(ops->ctx);
  gemm__ws_destroy_all(ops);
  if (ops->cu && ops->ctx) {
    CUcontext prev;
    (void)ops->cu->cuCtxPopCurrent(&prev);
  }
  pthread_mutex_destroy(&ops->lock);
  pthread_mutex_destroy(&ops->map_lock);
  pthread_mutex_destroy(&ops->plan_lock);
  free(ops);
}

clcrt_status gemm__ctx_enter(clcrt_ops *ops, gemm_ctx *c) {
  c->pushed = 0;
  if (!ops->cu || !ops->ctx) return CLCRT_OK;
  CUcontext cur = NULL;
  if (ops->cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ops->ctx) return CLCRT_OK;
  const CUresult r = cur ? ops->cu->cuCtxPushCurrent(ops->ctx) : ops->cu->cuCtxSetCurrent(ops->ctx);
  if (r != CUDA_SUCCESS)
    return clcrt_errmsg_set(ops->rt, CLCRT_E_CUDA, "gemm: making the runtime's context current failed (CUDA error %d)",
                            (int)r);
  c->pushed = cur != NULL;
  return CLCRT_OK;
}

void gemm__ctx_leave(clcrt_ops *ops, const gemm_ctx *c) {
  CUcontext popped;
  if (c->pushed) (void)ops->cu->cuCtxPopCurrent(&popped);
}

clcrt_status gemm__kernel_get(clcrt_ops *ops, int v, clcrt_sched sched, int kind, const clcrt_kernel **out) {
  const char *arch = clcrt_runtime_arch(ops->rt);
  if (!arch || strncmp(arch, "sm_90", 5))
    return clcrt_errmsg_set(ops->rt, CLCRT_E_UNSUPPORTED,
                            "gemm: the GEMM's tile functions are written for Hopper (wgmma, sm_90a); this runtime "
                            "compiles for %s, where they do not exist yet",
                            arch ? arch : "no architecture");
  pthread_mutex_lock(&ops->lock);
  const clcrt_kernel *k = ops->kernels[v][sched][kind];
  pthread_mutex_unlock(&ops->lock);
  if (!k) {
    /* Compiled outside the lock: the runtime compiles one key once however many threads ask,
     * and gives each the same kernel. */
    clcrt_kernel *nk = NULL;
    clcrt_status st = gemm_register_kind(ops->rt, ops->src, gemm_variant_at(v), sched, kind, NULL, &nk);
    if (st != CLCRT_OK) return st;
    pthread_mutex_lock(&ops->lock);
    if (!ops->kernels[v][sched][kind]) ops->kernels[v][sched][kind] = nk;
    k = ops->kernels[v][sched][kind];
    pthread_mutex_unlock(&ops->lock);
  }
  *out = k;
  return CLCRT_OK;
}

/* ---- tensor maps, cached ------------------------------------------------------------------- */

static clcrt_status map_cached(void *user, clcrt_runtime *rt, clcrt_tensor_map *out, uint64_t base, uint64_t rows,
                               uint64_t cols, uint64_t pitch_bytes, uint32_t box_rows, uint32_t box_cols,
                               clcrt_l2_promotion promotion) {
  clcrt_ops *ops = user;
  const uint64_t box = (uint64_t)promotion << 48 | (uint64_t)box_rows << 32 | box_cols;
  uint64_t h = (base >> 4) * 0x9E3779B97F4A7C15ull ^ rows * 0xBF58476D1CE4E5B9ull ^ (pitch_bytes + box);
  gemm_map_entry *e = &ops->maps[(h >> 40) % GEMM_MAP_CACHE];
  pthread_mutex_lock(&ops->map_lock);
  if (e->base == base && e->rows == rows && e->cols == cols && e->pitch == pitch_bytes && e->box == box) {
    *out = e->map;
    pthread_mutex_unlock(&ops->map_lock);
    return CLCRT_OK;
  }
  pthread_mutex_unlock(&ops->map_lock);
  clcrt_status st = clcrt_tensor_map_2d_l2(rt, out, CLCRT_DTYPE_BF16, base, rows, cols, pitch_bytes, box_rows,
                                           box_cols, CLCRT_SWIZZLE_128B, promotion);
  if (st != CLCRT_OK) return st;
  pthread_mutex_lock(&ops->map_lock);
  e->base = base, e->rows = rows, e->cols = cols, e->pitch = pitch_bytes, e->box = box, e->map = *out;
  pthread_mutex_unlock(&ops->map_lock);
  return CLCRT_OK;
}

/* ---- default plans, cached ----------------------------------------------------------------- */

/* trans_ok 0: a plan that keeps D's rows in tiles (done counts them by 64-row blocks). */
static gemm_plan plan_cached(clcrt_ops *ops, unsigned m, unsigned n, unsigned k, unsigned align, int sms,
                             int trans_ok) {
  const uint64_t h = (m * 0x9E3779B97F4A7C15ull) ^ (n * 0xBF58476D1CE4E5B9ull) ^ (k * 0x94D049BB133111EBull) ^
                     ((uint64_t)align << 20) ^ (uint64_t)(unsigned)sms ^ ((uint64_t)trans_ok << 40);
  gemm_plan_entry *e = &ops->plans[(h ^ h >> 29) % GEMM_PLAN_CACHE];
  pthread_mutex_lock(&ops->plan_lock);
  if (e->sms == sms && e->m == m && e->n == n && e->k == k && e->align == align && e->trans_ok == trans_ok) {
    gemm_plan p = e->plan;
    pthread_mutex_unlock(&ops->plan_lock);
    return p;
  }
  pthread_mutex_unlock(&ops->plan_lock);
  /* Outside the lock: the same answer however often. */
  gemm_plan p = gemm_plan_dense_t(m, n, k, align, sms, clcrt_runtime_mem_bandwidth(ops->rt), trans_ok);
  pthread_mutex_lock(&ops->plan_lock);
  e->m = m, e->n = n, e->k = k, e->align = align, e->sms = sms, e->trans_ok = trans_ok, e->plan = p;
  pthread_mutex_unlock(&ops->plan_lock);
  return p;
}

/* ---- checking a descriptor ------------------------------------------------------------------ */

static clcrt_status bad(const clcrt_ops *ops, const char *fmt, unsigned long long x, unsigned long long y) {
  return clcrt_errmsg_set(ops->rt, CLCRT_E_INVALID, fmt, x, y);
}

/* Whether two row-strided regions of bytes share one: base, rows, pitch and row width in bytes.
 * Exact where both have one row or the same pitch (the rows' byte columns compared modulo the
 * pitch: columns of one buffer side by side do not meet), else whether their spans meet. */
static int regions_meet(uint64_t b1, uint64_t r1, uint64_t p1, uint64_t w1, uint64_t b2, uint64_t r2, uint64_t p2,
                        uint64_t w2) {
  if (!r1 || !r2 || !w1 || !w2) return 0;
  if (b1 + (r1 - 1) * p1 + w1 <= b2 || b2 + (r2 - 1) * p2 + w2 <= b1) return 0;
  if (r1 == 1 && r2 == 1) return 1;
  if (r1 == 1) p1 = p2;
  if (r2 == 1) p2 = p1;
  if (p1 != p2 || w1 > p1 || w2 > p2) return 1;
  const uint64_t s1 = b1 % p1, s2 = b2 % p1;
  return (s2 + p1 - s1) % p1 < w1 || (s1 + p1 - s2) % p1 < w2;
}

/* D must not share memory with A or B: the tiles read A and B while others store D, so such a
 * run gives wrong numbers silently (torch refuses such an out= too). Checked for runs only: a
 * plan described (clcrt_gemm_plan_get) reads nothing. */
static clcrt_status check_overlap(const clcrt_ops *ops, const clcrt_gemm_desc *d, const gemm_ld *ld) {
  const uint64_t g = d->layout == CLCRT_GEMM_DENSE ? 1 : d->groups;
  const uint64_t rows_a = d->layout == CLCRT_GEMM_MASKED ? g * d->m : d->m, rows_b = g * d->n;
  const uint64_t k2 = 2ull * d->k, n2 = 2ull * d->n;
  if (regions_meet(d->d, rows_a, 2 * ld->d, n2, d->a, rows_a, 2 * ld->a, k2))
    return bad(ops, "gemm: the output d (0x%llx) shares memory with a (0x%llx): the op reads a while it writes d; "
               "give d memory of its own", d->d, d->a);
  if (regions_meet(d->d, rows_a, 2 * ld->d, n2, d->b, rows_b, 2 * ld->b, k2))
    return bad(ops, "gemm: the output d (0x%llx) shares memory with b (0x%llx): the op reads b while it writes d; "
               "give d memory of its own", d->d, d->b);
  return CLCRT_OK;
}

/* The descriptor checked, its pitches filled in (ld) and its variant found (*vi, -1 none). */
static clcrt_status check_desc(const clcrt_ops *ops, const clcrt_gemm_desc *d, gemm_ld *ld, int *vi) {
  if (!d || d->size != sizeof *d)
    return clcrt_errmsg_set(ops->rt, CLCRT_E_INVALID, "gemm: the descriptor is %s: make it with CLCRT_GEMM_DESC_INIT",
                            d ? "of another size" : "NULL");
  if (d->layout > CLCRT_GEMM_MASKED) return bad(ops, "gemm: layout %llu is not a clcrt_gemm_layout%.0llu", d->layout, 0);
  if (d->dtype != CLCRT_DTYPE_BF16)
    return bad(ops, "gemm: dtype %llu: only CLCRT_DTYPE_BF16 operands are supported%.0llu", d->dtype, 0);
  if ((unsigned)d->sched > CLCRT_SCHED_FIXED) return bad(ops, "gemm: sched %llu is not a clcrt_sched%.0llu", d->sched, 0);
  if ((unsigned)d->split > CLCRT_GEMM_SPLIT_ALL)
    return bad(ops, "gemm: split %llu is not a clcrt_gemm_split%.0llu", d->split, 0);
  if (d->flags & ~(CLCRT_GEMM_CHECKED | CLCRT_GEMM_MEASURED))
    return bad(ops, "gemm: flags 0x%llx: only CLCRT_GEMM_CHECKED and CLCRT_GEMM_MEASURED exist%.0llu", d->flags, 0);
  if (d->k == 0 || d->k % 8)
    return bad(ops, "gemm: k = %llu: a positive multiple of 8 is needed (TMA loads rows of a multiple of 16 bytes)%.0llu",
               d->k, 0);
  ld->a = d->lda ? d->lda : d->k, ld->b = d->ldb ? d->ldb : d->k, ld->d = d->ldd ? d->ldd : d->n;
  if (ld->a < d->k || ld->a % 8)
    return bad(ops, "gemm: lda = %llu: at least k = %llu and a multiple of 8 elements (TMA row pitch)", ld->a, d->k);
  if (ld->b < d->k || ld->b % 8)
    return bad(ops, "gemm: ldb = %llu: at least k = %llu and a multiple of 8 elements (TMA row pitch)", ld->b, d->k);
  if (ld->d < d->n) return bad(ops, "gemm: ldd = %llu: at least n = %llu", ld->d, d->n);
  if (!d->a || !d->b || !d->d) return bad(ops, "gemm: an operand address is 0 (a 0x%llx, b 0x%llx, or d)", d->a, d->b);
  if (d->a % 16 || d->b % 16)
    return bad(ops, "gemm: a (0x%llx) and b (0x%llx) must be 16-byte aligned (TMA): pass an aligned copy", d->a, d->b);
  if (d->d % 2) return bad(ops, "gemm: d (0x%llx) must be 2-byte aligned (bf16)%.0llu", d->d, 0);
  if (d->layout != CLCRT_GEMM_DENSE) {
    if (d->groups == 0 || d->groups > GEMM_MAX_GROUPS)
      return bad(ops, "grouped gemm: %llu groups: 1 to %llu", d->groups, GEMM_MAX_GROUPS);
    if (!d->group_sizes || d->group_sizes % 4)
      return bad(ops, "grouped gemm: group_sizes 0x%llx must be a 4-byte aligned device address of %llu int32",
                 d->group_sizes, d->groups);
    if (d->layout == CLCRT_GEMM_MASKED && (unsigned long long)d->groups * d->m > 0x7fffffffull)
      return bad(ops, "masked gemm: %llu groups of %llu rows: more than 2^31 - 1 rows", d->groups, d->m);
    if (d->split != CLCRT_GEMM_SPLIT_AUTO || (d->flags & CLCRT_GEMM_MEASURED))
      return bad(ops, "grouped gemm: split and CLCRT_GEMM_MEASURED are for dense problems (split %llu, flags 0x%llx)",
                 d->split, d->flags);
  }
  if (d->done) {
    if (d->layout != CLCRT_GEMM_DENSE)
      return bad(ops, "gemm: done (0x%llx) is for dense problems (layout %llu)", d->done, d->layout);
    if (d->done % 4)
      return bad(ops, "gemm: done (0x%llx) must be a 4-byte aligned device address of ceil(m / 64) = %llu uint32",
                 d->done, ((unsigned long long)d->m + 63) / 64);
    if (d->n > (1u << 24))
      return bad(ops, "gemm: n = %llu: done's counters take n up to 2^24 = %llu (split the columns)", d->n, 1u << 24);
  }
  /* Tiles of 64 x 64 at the least: their count must fit the launch's 32 bits. */
  if (((unsigned long long)d->m + 63) / 64 * (((unsigned long long)d->n + 63) / 64) *
          (d->layout == CLCRT_GEMM_MASKED ? d->groups : 1) >
      0x7fffffffull)
    return bad(ops, "gemm: %llu x %llu is too large a problem for one launch: split it", d->m, d->n);
  *vi = -1;
  if (d->variant && (*vi = variant_index(d->variant)) < 0) return bad_variant(ops, d->variant);
  if (*vi >= 0 && (*vi & GEMM_VI_TRANS) && (d->done || d->layout != CLCRT_GEMM_DENSE))
    return clcrt_errmsg_set(ops->rt, CLCRT_E_INVALID,
                            "gemm: variant \"%.32s\" is transposed (its tiles hold columns of D): not for grouped "
                            "problems or with done; name the shape without the t",
                            d->variant);
  return CLCRT_OK;
}

/* ---- planning -------------------------------------------------------------------------------- */

/* What a call runs: the plan, its Args and launch. */
typedef struct gemm_call {
  gemm_plan plan;
  clcrt_sched sched;
  gemm_args args;
  clcrt_dim3 tiles;
  size_t part_bytes, ctr_bytes;
} gemm_call;

/* The kernel a planned call runs (GEMM_KIND_*). */
static int call_kind(const clcrt_gemm_desc *d, const gemm_call *c) {
  return d->layout != CLCRT_GEMM_DENSE ? GEMM_KIND_GROUPED : gemm_kind_dense(&c->args);
}

/* encode 0: no tensor maps (a plan described, not run; compile-only runtimes have no driver). */
static clcrt_status plan_call(clcrt_ops *ops, clcrt_stream *s, gemm_ws *w, const clcrt_gemm_desc *d, gemm_ld ld,
                              int vi, int encode, gemm_call *c) {
  clcrt_runtime *rt = encode ? ops->rt : NULL;
  const gemm_enc enc = {map_cached, ops};
  const int sms = s ? clcrt_stream_grid_sms(s) : clcrt_runtime_num_sms(ops->rt) > 0 ? clcrt_runtime_num_sms(ops->rt)
                                                                                    : 132;
  const double bw = clcrt_runtime_mem_bandwidth(ops->rt); /* the plan's model (gemm_model_for) */
  clcrt_status st;
  memset(c, 0, sizeof *c);
  if (d->layout == CLCRT_GEMM_DENSE) {
    const unsigned align = gemm_load_align_ld(d->a, d->b, ld.a, ld.b);
    if ((d->flags & CLCRT_GEMM_MEASURED) && w) {
      if ((st = gemm__plan_measured(ops, s, w, d, ld, align, sms, &c->plan)) != CLCRT_OK) return st;
    } else if (d->flags & CLCRT_GEMM_MEASURED) {
      if (!gemm__rule_lookup(ops, d, align, sms, &c->plan))
        return clcrt_errmsg_set(ops->rt, CLCRT_E_NOT_FOUND,
                                "gemm: no measured plan for this shape class yet: the first clcrt_gemm with "
                                "CLCRT_GEMM_MEASURED makes it");
    } else {
      c->plan = plan_cached(ops, d->m, d->n, d->k, align, sms, !d->done);
    }
    const int vt = vi >= 0 && (vi & GEMM_VI_TRANS);
    if (vi >= 0 && ((vi & ~GEMM_VI_TRANS) != c->plan.variant || vt != c->plan.trans)) {
      c->plan.variant = vi & ~GEMM_VI_TRANS; /* a variant asked for keeps the plan's rule for its decomposition */
      c->plan.trans = vt;
      gemm_plan_share(&c->plan, GEMM_SHARE_TAIL, vt ? d->n : d->m, vt ? d->m : d->n, d->k, sms, bw);
    }
    const unsigned pm = c->plan.trans ? d->n : d->m, pn = c->plan.trans ? d->m : d->n; /* the tiles' view */
    if (d->split == CLCRT_GEMM_SPLIT_NONE) gemm_plan_share(&c->plan, GEMM_SHARE_WHOLE, pm, pn, d->k, sms, bw);
    if (d->split == CLCRT_GEMM_SPLIT_ALL) gemm_plan_share(&c->plan, GEMM_SHARE_ALL, pm, pn, d->k, sms, bw);
    if ((st = gemm_dense_args_ld(&enc, rt, &c->plan, &c->args, d->a, d->b, d->d, d->m, d->n, d->k, ld, 0, 0)) != CLCRT_OK)
      return st;
    c->args.done = d->done;
    const gemm_variant *v = gemm_variant_at(c->plan.variant);
    c->tiles = gemm_dense_tiles(v, &c->args);
    if (c->args.sk_units) c->part_bytes = gemm_ws_bytes(v, &c->args), c->ctr_bytes = gemm_ctr_bytes(v, &c->args);
  } else {
    /* Grouped: the default variant (the plan for grouped problems has one candidate). */
    c->plan.variant = vi >= 0 ? vi : 0;
    c->plan.sched = CLCRT_SCHED_STEAL;
    const gemm_variant *v = gemm_variant_at(c->plan.variant);
    const unsigned rows = d->layout == CLCRT_GEMM_MASKED ? 0 : d->m, per = d->layout == CLCRT_GEMM_MASKED ? d->m : 0;
    if ((st = gemm_grouped_args_ld(&enc, rt, v, &c->args, d->a, d->b, d->d, rows, d->n, d->k, ld, d->groups,
                                   d->group_sizes, per)) != CLCRT_OK)
      return st;
    c->tiles = gemm_grouped_tiles(v, &c->args);
  }
  c->sched = d->sched != CLCRT_SCHED_AUTO ? d->sched : c->plan.sched;
  return CLCRT_OK;
}

clcrt_status clcrt_gemm_plan_get(clcrt_ops *ops, const clcrt_stream *s, const clcrt_gemm_desc *d,
                                 clcrt_gemm_plan_info *out) {
  if (!ops) return clcrt_errmsg_set(NULL, CLCRT_E_INVALID, "clcrt_gemm_plan_get: ops is NULL");
  if (!out || out->size != sizeof *out)
    return clcrt_errmsg_set(ops->rt, CLCRT_E_INVALID,
                            "clcrt_gemm_plan_get: out must be made with CLCRT_GEMM_PLAN_INFO_INIT");
  gemm_ld ld;
  int vi;
  gemm_call c;
  clcrt_status st = check_desc(ops, d, &ld, &vi);
  if (st != CLCRT_OK || (st = plan_call(ops, (clcrt_stream *)s, NULL, d, ld, vi, 0, &c)) != CLCRT_OK) return st;
  const gemm_variant *v = gemm_variant_at(c.plan.variant);
  out->variant = gemm_plan_variant_name(&c.plan);
  out->sched = c.sched, out->bm = v->bm, out->bn = v->bn, out->cluster_m = v->cm;
  out->shared_tiles = c.args.sk_tiles;
  out->splits = c.args.sk_tiles ? gemm_cdiv(c.args.sk_units, c.args.sk_tiles) : 1;
  out->units = c.args.sk_units;
  out->tiles = c.tiles;
  out->workspace_bytes = c.part_bytes + c.ctr_bytes;
  return CLCRT_OK;
}

/* ---- running ---------------------------------------------------------------------------------- */

static clcrt_status run_locked(clcrt_ops *ops, clcrt_stream *s, gemm_ws *w, const clcrt_gemm_desc *d, gemm_ld ld,
                               int vi) {
  clcrt_status st;
  int capturing = -1; /* not asked yet */
  if ((d->flags & (CLCRT_GEMM_CHECKED | CLCRT_GEMM_MEASURED)) || d->layout == CLCRT_GEMM_GROUPED) {
    if ((st = gemm__ws_capturing(ops, w, "gemm", &capturing)) != CLCRT_OK) return st;
    if (capturing && (d->flags & (CLCRT_GEMM_CHECKED | CLCRT_GEMM_MEASURED)))
      return clcrt_errmsg_set(ops->rt, CLCRT_E_INVALID,
                              "gemm: CLCRT_GEMM_CHECKED and CLCRT_GEMM_MEASURED synchronise the stream: not while it "
                              "is captured into a graph");
    if (d->layout == CLCRT_GEMM_GROUPED && !capturing &&
        (st = gemm__ws_misuse(ops, w, d->m, "an earlier grouped gemm")) != CLCRT_OK)
      return st;
  }
  gemm_call c;
  if ((st = plan_call(ops, s, w, d, ld, vi, 1, &c)) != CLCRT_OK) return st;
  if (d->layout == CLCRT_GEMM_GROUPED && !capturing) c.args.misuse = w->misuse_dev;
  if (c.part_bytes) {
    CUdeviceptr part, ctr;
    if (capturing < 0 && (st = gemm__ws_capturing(ops, w, "gemm", &capturing)) != CLCRT_OK) return st;
    if ((st = gemm__ws_reserve(ops, w, capturing, c.part_bytes, c.ctr_bytes, &part, &ctr)) != CLCRT_OK) return st;
    c.args.ws = part, c.args.ctr = ctr;
  }
  const clcrt_kernel *k;
  if ((st = gemm__kernel_get(ops, c.plan.variant, c.sched, call_kind(d, &c), &k)) != CLCRT_OK) return st;
  /* Programmatic dependent launch on short runs only (include/clcrt.h, CLCRT_RUN_PDL). */
  const unsigned run_flags = d->layout == CLCRT_GEMM_DENSE && c.plan.cost > 0 && c.plan.cost <= GEMM_PDL_MAX_US
                                 ? CLCRT_RUN_PDL
                                 : 0u;
  if ((st = clcrt_run_ex(s, k, c.tiles, &c.args, sizeof c.args, run_flags)) != CLCRT_OK) return st;
  if ((d->flags & CLCRT_GEMM_CHECKED) && d->layout == CLCRT_GEMM_GROUPED) {
    CUresult r = ops->cu->cuStreamSynchronize(w->cu);
    if (r != CUDA_SUCCESS)
      return clcrt_errmsg_set(ops->rt, CLCRT_E_CUDA, "gemm: cuStreamSynchronize (CLCRT_GEMM_CHECKED) failed (%d)", r);
    return gemm__ws_misuse(ops, w, d->m, "this grouped gemm");
  }
  return CLCRT_OK;
}

clcrt_status clcrt_gemm(clcrt_ops *ops, clcrt_stream *s, const clcrt_gemm_desc *d) {
  if (!ops) return clcrt_errmsg_set(NULL, CLCRT_E_INVALID, "clcrt_gemm: ops is NULL");
  if (!s) return clcrt_errmsg_set(ops->rt, CLCRT_E_INVALID, "clcrt_gemm: the stream is NULL");
  if (!ops->cu)
    return clcrt_errmsg_set(ops->rt, CLCRT_E_NO_DEVICE, "clcrt_gemm: the runtime only compiles (target_arch): no GPU");
  gemm_ld ld;
  int vi;
  clcrt_status st = check_desc(ops, d, &ld, &vi);
  if (st != CLCRT_OK || (st = check_overlap(ops, d, &ld)) != CLCRT_OK) return st;
  if (d->m == 0 || d->n == 0) return CLCRT_OK;
  gemm_ctx cx;
  if ((st = gemm__ctx_enter(ops, &cx)) != CLCRT_OK) return st;
  gemm_ws *w;
  if ((st = gemm__ws_stream(ops, s, &w)) == CLCRT_OK) {
    st = run_locked(ops, s, w, d, ld, vi);
    gemm__ws_unlock(w);
  }
  gemm__ctx_leave(ops, &cx);
  return st;
}

clcrt_status clcrt_gemm_kernel(clcrt_ops *ops, const char *variant, clcrt_sched sched, clcrt_gemm_layout layout,
                               const clcrt_kernel **out) {
  if (!ops || !out) return clcrt_errmsg_set(ops ? ops->rt : NULL, CLCRT_E_INVALID, "clcrt_gemm_kernel: a NULL argument");
  *out = NULL;
  int vi = variant ? variant_index(variant) : 0;
  if (vi < 0) return bad_variant(ops, variant);
  const int trans = (vi & GEMM_VI_TRANS) != 0;
  vi &= ~GEMM_VI_TRANS;
  if (trans && layout != CLCRT_GEMM_DENSE)
    return bad(ops, "clcrt_gemm_kernel: a transposed variant is for dense problems (layout %llu)%.0llu", layout, 0);
  if ((unsigned)sched > CLCRT_SCHED_FIXED || (unsigned)layout > CLCRT_GEMM_MASKED)
    return bad(ops, "clcrt_gemm_kernel: sched %llu or layout %llu is out of range", sched, layout);
  return gemm__kernel_get(ops, vi, sched == CLCRT_SCHED_AUTO ? CLCRT_SCHED_STEAL : sched,
                          layout != CLCRT_GEMM_DENSE ? GEMM_KIND_GROUPED : trans ? GEMM_KIND_TRANS : GEMM_KIND_DENSE,
                          out);
}

clcrt_status clcrt_gemm_prepare(clcrt_ops *ops, const clcrt_stream *s, const clcrt_gemm_desc *d, unsigned uses) {
  if (!ops) return clcrt_errmsg_set(NULL, CLCRT_E_INVALID, "clcrt_gemm_prepare: ops is NULL");
  gemm_ld ld;
  int vi;
  gemm_call c;
  clcrt_status st = check_desc(ops, d, &ld, &vi);
  if (st != CLCRT_OK) return st;
  clcrt_gemm_desc plain = *d;
  plain.flags &= ~CLCRT_GEMM_MEASURED; /* the measured plan is made by running */
  if ((st = plan_call(ops, (clcrt_stream *)s, NULL, &plain, ld, vi, 0, &c)) != CLCRT_OK) return st;
  const clcrt_kernel *k;
  if ((st = gemm__kernel_get(ops, c.plan.variant, c.sched, call_kind(d, &c), &k)) != CLCRT_OK) return st;
  return uses ? clcrt_kernel_prepare(k, uses) : CLCRT_OK;
}
