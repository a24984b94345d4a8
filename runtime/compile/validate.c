/* Validation of tile descriptions: every field, the names against the source, the options
 * against what the runtime must choose itself, the shared memory against the limits. What
 * passes is resolved into a clcrt__build (compile.c). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* A C++ name: identifiers separated by "::". Anything else could inject code into the
 * generated entry. */
static int is_cxx_name(const char *s) {
  if (!s || !*s) return 0;
  const char *p = s;
  if (p[0] == ':' && p[1] == ':') p += 2;
  for (;;) {
    if (!(isalpha((unsigned char)*p) || *p == '_')) return 0;
    while (isalnum((unsigned char)*p) || *p == '_') p++;
    if (!*p) return 1;
    if (p[0] != ':' || p[1] != ':') return 0;
    p += 2;
  }
}

/* The source as the preprocessor reads it: a backslash at the end of a line joins the
 * next one ("scale_\<newline>tile" is scale_tile). Skips any such splices at p. */
static const char *unsplice(const char *p) {
  for (;;) {
    if (p[0] == '\\' && p[1] == '\n') p += 2;
    else if (p[0] == '\\' && p[1] == '\r' && p[2] == '\n') p += 3;
    else return p;
  }
}

static int is_ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Whether the last component of a C++ name occurs in src as a whole identifier (line
 * splices joined). A cheap check that turns the commonest mistake (a misspelt name) into a
 * clear message before NVRTC runs; NVRTC still has the last word. */
static int mentions(const char *src, const char *name) {
  const char *last = strrchr(name, ':');
  last = last ? last + 1 : name;
  for (const char *p = unsplice(src); *p;) {
    if (!is_ident_char(*p)) {
      p = unsplice(p + 1);
      continue;
    }
    const char *want = last;
    while (is_ident_char(*p)) {
      if (*want == *p) want++;
      else want = "\x01"; /* a mismatch: read the rest of the identifier, match nothing */
      p = unsplice(p + 1);
    }
    if (!*want) return 1;
  }
  return 0;
}

/* Whether src pastes tokens (## or its digraph %:%:, line splices joined): then a name may
 * be made by a macro (NAME##_tile) and not appear whole anywhere, so its absence is NVRTC's
 * to judge, not the cheap check's. */
static int pastes_tokens(const char *src) {
  for (const char *p = unsplice(src); *p;) {
    const char *q = p[0] == '#' ? unsplice(p + 1) : p[0] == '%' && p[1] == ':' ? unsplice(p + 2) : NULL;
    if (q && (q[0] == '#' || (q[0] == '%' && q[1] == ':'))) return 1;
    p = unsplice(p + 1);
  }
  return 0;
}

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* Whether option o is name, alone or with "=value". */
static int is_opt(const char *o, const char *name) {
  size_t n = strlen(name);
  return strncmp(o, name, n) == 0 && (o[n] == 0 || o[n] == '=');
}

/* Why option o would make NVRTC's output something other than a cubin holding the whole
 * kernel, or NULL. NVRTC 13.0 accepts each of these and then produces no cubin (LTO or
 * OptiX IR), a cubin without the kernel (syntax only), or a relocatable one for a device
 * link that never comes; the failure used to surface later as "an empty cubin" or "no
 * entry named ...", without the option's name. */
static const char *output_option(const char *o) {
  static const struct {
    const char *name, *why;
  } table[] = {
      {"-fdevice-syntax-only", "it only checks the syntax, and NVRTC then makes no code for the kernel"},
      {"--fdevice-syntax-only", "it only checks the syntax, and NVRTC then makes no code for the kernel"},
      {"-dlto", "it makes NVRTC emit LTO IR for a later device link instead of a cubin"},
      {"--dlink-time-opt", "it makes NVRTC emit LTO IR for a later device link instead of a cubin"},
      {"-gen-opt-lto", "it belongs to link-time optimisation (-dlto), which makes no cubin"},
      {"--gen-opt-lto", "it belongs to link-time optimisation (-dlto), which makes no cubin"},
      {"-optix-ir", "it makes NVRTC emit OptiX IR instead of a cubin"},
      {"--optix-ir", "it makes NVRTC emit OptiX IR instead of a cubin"},
      {"--device-c", "it makes relocatable device code for a device link that never comes"},
      {"-ewp", "extensible whole-program mode is for a later device link"},
      {"--extensible-whole-program", "extensible whole-program mode is for a later device link"},
      {"-fdevice-time-trace", "the runtime asks NVRTC for this trace itself, to learn which headers a compile reads"},
      {"--fdevice-time-trace", "the runtime asks NVRTC for this trace itself, to learn which headers a compile reads"},
  };
  for (size_t i = 0; i < sizeof table / sizeof *table; i++)
    if (is_opt(o, table[i].name)) return table[i].why;
  /* ptxas's own "compile only" makes the same relocatable cubin as -rdc. */
  const char *v = starts(o, "-Xptxas=") ? o + 8 : starts(o, "--ptxas-options=") ? o + 16 : NULL;
  for (; v && *v; v += strspn(v, ",")) {
    size_t n = strcspn(v, ",");
    if ((n == 2 && !strncmp(v, "-c", 2)) || (n == 14 && !strncmp(v, "--compile-only", 14)))
      return "ptxas's compile-only mode makes relocatable code for a device link that never comes";
    v += n;
  }
  return NULL;
}

unsigned clcrt__arch_smem_limit(int sm) {
  if (sm == 120 || sm == 121) return 99 * 1024;
  return 227 * 1024; /* sm_90, sm_100, sm_103, sm_110 */
}

/* The descriptor's size and its names: the source, the tile function, the Args type and, given
 * together or not at all, the State type and the prologue, each a C++ name that appears in the
 * source (unless the source pastes tokens, when NVRTC judges). */
static clcrt_status check_names(clcrt_runtime *rt, const clcrt_tile_desc *d) {
  if (d->size < offsetof(clcrt_tile_desc, prologue_fn) + sizeof(char *) || d->size > sizeof(clcrt_tile_desc))
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "desc->size is %zu: initialise the descriptor with CLCRT_TILE_DESC_INIT", d->size);
  if (!d->source) return clcrt__fail(rt, CLCRT_E_INVALID, "desc->source is NULL: pass the tile function's CUDA C++");
  if (!d->source[0] || strspn(d->source, " \t\r\n") == strlen(d->source))
    return clcrt__fail(rt, CLCRT_E_INVALID, "desc->source is empty: pass the tile function's CUDA C++");
  if (!d->tile_fn) return clcrt__fail(rt, CLCRT_E_INVALID, "desc->tile_fn is NULL: name the tile function");
  if (!d->args_type) return clcrt__fail(rt, CLCRT_E_INVALID, "desc->args_type is NULL: name the Args struct");
  if (!is_cxx_name(d->tile_fn))
    return clcrt__fail(rt, CLCRT_E_INVALID, "desc->tile_fn \"%s\" is not a C++ function name", d->tile_fn);
  if (!is_cxx_name(d->args_type))
    return clcrt__fail(rt, CLCRT_E_INVALID, "desc->args_type \"%s\" is not a C++ type name", d->args_type);
  int pasted = pastes_tokens(d->source);
  if (!pasted && !mentions(d->source, d->tile_fn))
    return clcrt__fail(rt, CLCRT_E_INVALID, "tile function \"%s\" does not appear in the source: check desc->tile_fn",
                       d->tile_fn);
  if (!pasted && !mentions(d->source, d->args_type))
    return clcrt__fail(rt, CLCRT_E_INVALID, "Args type \"%s\" does not appear in the source: check desc->args_type",
                       d->args_type);
  if ((d->state_type == NULL) != (d->prologue_fn == NULL))
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "desc->state_type and desc->prologue_fn go together: give both (per-CTA state made by the "
                       "prologue) or neither");
  if (d->state_type) {
    if (!is_cxx_name(d->state_type) || (!pasted && !mentions(d->source, d->state_type)))
      return clcrt__fail(rt, CLCRT_E_INVALID, "State type \"%s\" is not a name that appears in the source",
                         d->state_type);
    if (!is_cxx_name(d->prologue_fn) || (!pasted && !mentions(d->source, d->prologue_fn)))
      return clcrt__fail(rt, CLCRT_E_INVALID, "prologue \"%s\" is not a function name that appears in the source",
                         d->prologue_fn);
  }
  return CLCRT_OK;
}

/* The block, and the cluster with {0,0,0} read as (1,1,1), into *bl, *cl and the block's
 * thread count *nt. */
static clcrt_status check_shape(clcrt_runtime *rt, const clcrt_tile_desc *d, clcrt_dim3 *bl, clcrt_dim3 *cl,
                                unsigned long long *nt) {
  *bl = d->block;
  if (bl->x == 0 || bl->y == 0 || bl->z == 0)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "block (%u,%u,%u) has a zero dimension: every CTA needs at least one thread", bl->x, bl->y,
                       bl->z);
  *nt = (unsigned long long)bl->x * bl->y * bl->z;
  if (*nt > 1024 || bl->z > 64)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "block (%u,%u,%u) has %llu threads: a CTA holds at most 1024 (and z at most 64)", bl->x, bl->y,
                       bl->z, *nt);

  *cl = d->cluster;
  if (cl->x == 0 && cl->y == 0 && cl->z == 0) *cl = (clcrt_dim3){1, 1, 1};
  if (cl->x == 0 || cl->y == 0 || cl->z == 0)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "cluster (%u,%u,%u) mixes zero and non-zero dimensions: give all three, or {0,0,0} for "
                       "(1,1,1)",
                       cl->x, cl->y, cl->z);
  unsigned long long cs = (unsigned long long)cl->x * cl->y * cl->z;
  if (cs > 16)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "cluster (%u,%u,%u) has %llu CTAs: %s allows at most 8 (portable) or 16 (non-portable)", cl->x,
                       cl->y, cl->z, cs, rt->arch);
  return CLCRT_OK;
}

/* The scheduler (AUTO resolved for the device: CLC from sm_100, else STEAL) and the grid kind
 * (resolved for every scheduler but STEAL, whose AUTO grid is chosen per run) into *s and *g. */
static clcrt_status resolve_sched_grid(clcrt_runtime *rt, const clcrt_tile_desc *d, clcrt_sched *s, clcrt_grid *g) {
  if ((unsigned)d->sched > CLCRT_SCHED_FIXED)
    return clcrt__fail(rt, CLCRT_E_INVALID, "desc->sched is %d, not a clcrt_sched value", (int)d->sched);
  *s = d->sched == CLCRT_SCHED_AUTO ? (rt->sm >= 100 ? CLCRT_SCHED_CLC : CLCRT_SCHED_STEAL) : d->sched;
  if (*s == CLCRT_SCHED_CLC && rt->sm < 100)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "CLCRT_SCHED_CLC needs Cluster Launch Control (sm_100 or newer); %s has none: use "
                       "CLCRT_SCHED_STEAL or CLCRT_SCHED_AUTO",
                       rt->arch);

  *g = d->size > offsetof(clcrt_tile_desc, grid) ? d->grid : CLCRT_GRID_AUTO;
  if ((unsigned)*g > CLCRT_GRID_PERSISTENT)
    return clcrt__fail(rt, CLCRT_E_INVALID, "desc->grid is %d, not a clcrt_grid value", (int)*g);
  if (*s == CLCRT_SCHED_STEAL) {
    /* AUTO stays AUTO: the grid is chosen per run (launch.c), persistent unless a stream of
     * higher priority exists, when a full grid lets the run yield. */
  } else {
    clcrt_grid natural = *s == CLCRT_SCHED_STATIC ? CLCRT_GRID_PERSISTENT : CLCRT_GRID_FULL;
    if (*g != CLCRT_GRID_AUTO && *g != natural)
      return clcrt__fail(rt, CLCRT_E_INVALID,
                         "desc->grid applies to CLCRT_SCHED_STEAL only: %s always launches a %s grid",
                         clcrt__sched_name(*s), natural == CLCRT_GRID_FULL ? "full" : "persistent");
    *g = natural;
  }
  return CLCRT_OK;
}

/* The tile function's dynamic shared memory against the device's (or, compile-only, the
 * architecture's) limit, less what scheduler s's response ring needs after it. */
static clcrt_status check_smem(clcrt_runtime *rt, const clcrt_tile_desc *d, clcrt_sched s) {
  unsigned limit = rt->compile_only ? clcrt__arch_smem_limit(rt->sm) : (unsigned)rt->max_smem_optin;
  /* STEAL's and CLC's response ring follows the tile function's shared memory (internal.h). */
  unsigned ring = s == CLCRT_SCHED_STEAL || s == CLCRT_SCHED_CLC ? CLCRT__RING_BYTES + 15u : 0u;
  if (d->smem_bytes > limit - ring) {
    char ring_note[96] = "";
    if (ring) snprintf(ring_note, sizeof ring_note, ", and the scheduler's response ring needs up to %u of them", ring);
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "desc->smem_bytes is %u: %s%s allows at most %u bytes of dynamic shared memory per CTA%s",
                       d->smem_bytes, rt->compile_only ? "" : "this device, ", rt->arch, limit, ring_note);
  }
  return CLCRT_OK;
}

/* NVRTC options: none that chooses the architecture or the output, none that makes something
 * other than a cubin of the whole kernel. Options that read headers the runtime cannot vouch
 * for set b->has_user_include_dirs. */
static clcrt_status check_options(clcrt_runtime *rt, const clcrt_tile_desc *d, clcrt__build *b) {
  if (d->num_options < 0 || (d->num_options > 0 && !d->options))
    return clcrt__fail(rt, CLCRT_E_INVALID, "desc->options/num_options: %d options at %p", d->num_options,
                       (const void *)d->options);
  for (int i = 0; i < d->num_options; i++) {
    const char *o = d->options[i];
    if (!o) return clcrt__fail(rt, CLCRT_E_INVALID, "desc->options[%d] is NULL", i);
    if (starts(o, "-arch") || starts(o, "--gpu-architecture") || starts(o, "-gencode") || starts(o, "--relocatable") ||
        starts(o, "-rdc") || starts(o, "-dc"))
      return clcrt__fail(rt, CLCRT_E_INVALID,
                         "desc->options[%d] \"%s\": the architecture and the output are chosen by the runtime (set "
                         "opts.target_arch instead)",
                         i, o);
    const char *why = output_option(o);
    if (why)
      return clcrt__fail(rt, CLCRT_E_INVALID,
                         "desc->options[%d] \"%s\" is refused: %s; clcrt needs a cubin of the whole kernel to load", i,
                         o, why);
    /* Headers the runtime cannot vouch for without include_digest: user include
     * directories (a file placed later in an earlier one would shadow the one read),
     * pre-included files, and precompiled headers, which NVRTC reads whole. */
    if (starts(o, "-I") || starts(o, "--include-path") || starts(o, "-include") || starts(o, "--pre-include") ||
        starts(o, "-pch") || starts(o, "--pch") || starts(o, "-use-pch") || starts(o, "--use-pch") ||
        starts(o, "-create-pch") || starts(o, "--create-pch"))
      b->has_user_include_dirs = 1;
  }
  return CLCRT_OK;
}

clcrt_status clcrt__build_validate(clcrt_runtime *rt, const clcrt_tile_desc *d, clcrt__build *b) {
  clcrt_status st;
  if ((st = check_names(rt, d)) != CLCRT_OK) return st;
  clcrt_dim3 bl, cl;
  unsigned long long nt = 0; /* set by check_shape, as s and g by resolve_sched_grid */
  if ((st = check_shape(rt, d, &bl, &cl, &nt)) != CLCRT_OK) return st;
  clcrt_sched s = CLCRT_SCHED_AUTO;
  clcrt_grid g = CLCRT_GRID_AUTO;
  if ((st = resolve_sched_grid(rt, d, &s, &g)) != CLCRT_OK) return st;
  if ((st = check_smem(rt, d, s)) != CLCRT_OK) return st;
  if ((st = check_options(rt, d, b)) != CLCRT_OK) return st;

  unsigned minb = d->size > offsetof(clcrt_tile_desc, min_blocks_per_sm) ? d->min_blocks_per_sm : 0;
  if (minb > 32 || (unsigned long long)minb * nt > 2048)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "desc->min_blocks_per_sm is %u: with %llu threads per CTA at most %llu CTAs fit on an SM (2048 "
                       "threads, 32 CTAs)",
                       minb, nt, 2048 / nt < 32 ? 2048 / nt : 32);
  b->min_blocks = minb;
  b->sched = s;
  b->grid = g;
  b->block = bl;
  b->cluster = cl;
  b->smem_bytes = d->smem_bytes;
  b->include_digest = d->size > offsetof(clcrt_tile_desc, include_digest) ? d->include_digest : NULL;
  return CLCRT_OK;
}
