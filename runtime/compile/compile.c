/* The generated translation unit and NVRTC (descriptions are validated in validate.c). */
#include <ctype.h>
#include <nvrtc.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checks.h"
#include "deps.h"
#include "embedded.h"
#include "headers.h"
#include "internal.h"

/* ---- a small growable string ---- */
typedef struct sbuf {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = clcrt__realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }
static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  /* Formats straight into the buffer, growing it first when the text does not fit: names
   * in the generated entry may be long, and a cut one would garble the translation unit. */
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || b->oom) {
    b->oom = 1;
    return;
  }
  sb_add(b, "", 0); /* makes sure there is a buffer */
  if (b->oom) return;
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = b->cap;
    while (cap < b->len + (size_t)n + 1) cap *= 2;
    char *p = clcrt__realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* ---- NVRTC's -minimal ---- */

/* Whether an identifier may name something that NVRTC's -minimal leaves out of its built-in
 * headers: the texture and surface functions (tex2D, surf2Dwrite, ...), the device runtime
 * (cudaMalloc, cudaGetLastError, launches from device code) and the CUDA runtime's types and
 * constants (cudaError_t, cudaStream_t, cudaTextureObject_t, ...). Conservative: anything
 * spelt with "cuda" in any case, or starting with "tex" or "surf" (leading underscores aside,
 * or after a "_"), except the compiler's own macros, which -minimal keeps. */
static int minimal_risky_ident(const char *id, size_t n) {
  static const char *const keep[] = {"__CUDACC__", "__CUDACC_RTC__", "__CUDA_ARCH__", "__CUDACC_VER_MAJOR__",
                                     "__CUDACC_VER_MINOR__", "__CUDACC_VER_BUILD__", "__CUDA_ARCH_SPECIFIC__",
                                     "__CUDA_ARCH_FAMILY_SPECIFIC__"};
  char lc[64];
  if (n >= sizeof lc) n = sizeof lc - 1; /* a longer name is judged by its first 63 characters */
  for (size_t i = 0; i < n; i++) lc[i] = (char)tolower((unsigned char)id[i]);
  lc[n] = 0;
  if (strstr(lc, "cuda")) {
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
      if (strlen(keep[i]) == n && !strncmp(keep[i], id, n)) return 0;
    return 1;
  }
  const char *t = lc;
  while (*t == '_') t++;
  return starts(t, "tex") || starts(t, "surf") || strstr(t, "_tex") || strstr(t, "_surf");
}

/* Whether text names nothing -minimal leaves out, launches no kernel and includes nothing
 * but clcrt's own embedded headers. Comments and strings are scanned like code: a false
 * alarm costs only the speed-up. */
static int minimal_text_ok(const char *s) {
  for (const char *p = s; *p;) {
    if (isalpha((unsigned char)*p) || *p == '_') {
      const char *q = p;
      while (isalnum((unsigned char)*q) || *q == '_') q++;
      if (minimal_risky_ident(p, (size_t)(q - p))) return 0;
      p = q;
    } else if (*p == '<' && p[1] == '<' && p[2] == '<') {
      return 0;
    } else if (*p == '#') {
      const char *q = p + 1;
      while (*q == ' ' || *q == '\t') q++;
      if (starts(q, "include")) {
        q += 7;
        while (*q == ' ' || *q == '\t') q++;
        if (*q != '"' && *q != '<') return 0;
        char close = *q == '"' ? '"' : '>';
        const char *name = ++q;
        while (*q && *q != close && *q != '\n') q++;
        int embedded = 0;
        for (const clcrt__embedded_file *f = clcrt__embedded; f->name && !embedded; f++)
          embedded = strlen(f->name) == (size_t)(q - name) && !strncmp(f->name, name, (size_t)(q - name));
        if (!embedded) return 0;
      }
      p = q;
    } else {
      p++;
    }
  }
  return 1;
}

/* NVRTC's -minimal (12.4 and newer) omits the parts of NVRTC's built-in headers named above,
 * which the front end then parses in less than half the time (NVRTC 13.0, README example,
 * 2-core build machine: 6 instead of 14 ms of a 150-200 ms compile; 2.7% fewer host
 * instructions in all), and changes nothing else: the cubins of the README example (STEAL,
 * STATIC, FIXED) and of the GEMM op (STATIC, FIXED) are byte for byte the same. It is
 * used when neither the source nor the user's options could need what it omits; a compile
 * that fails with it is run again without it (clcrt__build_compile), so this check only has
 * to be conservative, and -minimal is not part of the cache key. */
static int minimal_ok(const clcrt_tile_desc *d) {
  if (!minimal_text_ok(d->source)) return 0;
  for (int i = 0; i < d->num_options; i++) {
    const char *o = d->options[i];
    if (starts(o, "-include") || starts(o, "--pre-include") || starts(o, "-minimal") || starts(o, "--minimal") ||
        !minimal_text_ok(o))
      return 0;
  }
  return 1;
}

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The generated entry of kernel `name`: its launch bounds and cluster shape, the prologue where
 * there is one, and the template's tile loop for b's scheduler, cluster and variant around the
 * tile function. */
static void write_entry(sbuf *entry, const clcrt__build *b, const clcrt_tile_desc *d, const char *name,
                        unsigned variant) {
  unsigned nt = b->block.x * b->block.y * b->block.z;
  /* A 1-CTA cluster is launched as a plain grid: measured on the H100, an explicit
   * __cluster_dims__(1,1,1) launch schedules CTAs markedly slower (docs/results.md, Schedulers). */
  char bounds[48];
  if (b->min_blocks)
    snprintf(bounds, sizeof bounds, "__launch_bounds__(%u, %u)", nt, b->min_blocks);
  else
    snprintf(bounds, sizeof bounds, "__launch_bounds__(%u)", nt);
  if (b->cluster.x * b->cluster.y * b->cluster.z > 1)
    sb_printf(entry, "extern \"C\" __global__ void %s __cluster_dims__(%u, %u, %u)\n", bounds, b->cluster.x,
              b->cluster.y, b->cluster.z);
  else
    sb_printf(entry, "extern \"C\" __global__ void %s\n", bounds);
  /* The entry's own names end in an underscore after a clcrt_ prefix, so that no tile
   * function, prologue or type of the user's (a tile function called "t" or "args") is
   * shadowed by them. */
  sb_printf(entry,
            "%s(const __grid_constant__ %s clcrt_args_, const __grid_constant__ clcrt::Params clcrt_params_) {\n",
            name, d->args_type);
  /* First, before the prologue and the scheduler touch global memory: a run launched with
   * programmatic dependent launch (launch.c) starts while the grid before it on the stream
   * finishes, and that grid may still write what this one reads (the tile function's inputs,
   * the stream's claim line, which a STEAL run zeroes for the next). What overlaps is the
   * launch itself. Without the launch attribute the wait passes at once. */
  sb_puts(entry, "  clcrt::ptx::grid_dep_wait();\n");
  if (d->state_type)
    sb_printf(entry, "  %s clcrt_state_;\n  %s(clcrt_args_, clcrt_state_);\n", d->state_type, d->prologue_fn);
  /* The same text, and so the same cache entry, for bits that name no code of the scheduler's. */
  unsigned v = clcrt__variant_bits(b->sched, variant);
  /* run<>'s first parameter is the scheduler: clcrt_sched's values are the template's
   * clcrt::SCHED_* (nvrtc_src/clcrt_loop.cuh says so), so the value passes as it is. */
  sb_printf(entry,
            "  clcrt::run<%d, %u, %u, %u, %u, %u, %uu>(clcrt_params_, [&](const clcrt::Tile &clcrt_tile_) { "
            "%s(clcrt_tile_, clcrt_args_%s); });\n",
            (int)b->sched, b->cluster.x, b->cluster.y, b->cluster.z, nt, CLCRT__RING_OFF(b->smem_bytes), v,
            d->tile_fn, d->state_type ? ", clcrt_state_" : "");
  sb_puts(entry, "}\n");
}

clcrt_status clcrt__build_prepare(clcrt_runtime *rt, const clcrt_tile_desc *d, unsigned variant, clcrt__build *b) {
  memset(b, 0, sizeof *b);
  b->variant = variant;
  clcrt_status st = clcrt__build_validate(rt, d, b);
  if (st != CLCRT_OK) return st;
  /* cuda_home was checked by clcrt_runtime_create: at most CLCRT__CUDA_HOME_MAX bytes, so
   * the include options below hold it whole. */

  sbuf name = {0};
  sb_printf(&name, "clcrt_%s_", clcrt__sched_name(b->sched));
  for (const char *p = d->tile_fn; *p; p++) sb_add(&name, *p == ':' ? "_" : p, 1);

  /* The translation unit includes three headers NVRTC holds in memory: the template, the
   * user's source under the tile function's name, and the generated entry under
   * "clcrt_entry", so that NVRTC's messages point at "scale_tile(3)" or "clcrt_entry(2)".
   * It used to splice them with #line directives instead, but NVRTC 13.0's time trace,
   * which the cache relies on (cache/deps.h), crashes in a later compile of the process
   * after a compile with #line in its main file (reproduced with NVRTC alone), and never
   * did with headers in memory. A tile function called clcrt_entry gets another name. */
  const char *user_name = strcmp(d->tile_fn, "clcrt_entry") ? d->tile_fn : "clcrt_entry (the tile function)";
  sbuf tu = {0}, tu_entry = {0}, *entry = &tu_entry;
  sb_printf(&tu, "#include \"clcrt.cuh\"\n#include \"%s\"\n#include \"clcrt_entry\"\n", user_name);
  write_entry(entry, b, d, name.p ? name.p : "", variant);

  /* Canonical options: the runtime's, then the user's in their order (order matters for
   * -D/-U). The include directories of the toolkit are given when present so that tile
   * functions can include <cuda_bf16.h> and CCCL headers. */
  char inc1[1100], inc2[1100];
  snprintf(inc1, sizeof inc1, "%s/include", rt->opts.cuda_home);
  snprintf(inc2, sizeof inc2, "%s/include/cccl", rt->opts.cuda_home);
  char archopt[64];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", rt->arch);
  const char *fixed[4] = {archopt, "-std=c++17", NULL, NULL};
  int nf = 2;
  char incopt1[1200], incopt2[1200];
  if (is_dir(inc1)) {
    snprintf(incopt1, sizeof incopt1, "-I%s", inc1);
    fixed[nf++] = incopt1;
  }
  if (is_dir(inc2)) {
    snprintf(incopt2, sizeof incopt2, "-I%s", inc2);
    fixed[nf++] = incopt2;
  }
  b->num_options = nf + d->num_options;
  b->options = clcrt__calloc((size_t)b->num_options, sizeof(char *));
  int oom = tu.oom || entry->oom || name.oom || !b->options;
  for (int i = 0; !oom && i < b->num_options; i++) {
    b->options[i] = clcrt__strdup(i < nf ? fixed[i] : d->options[i - nf]);
    oom |= !b->options[i];
  }
  b->minimal = minimal_ok(d);
  size_t srclen = strlen(d->source);
  b->may_read_files = clcrt__text_may_read_files(d->source, srclen);
  b->probes_files = clcrt__text_probes_files(d->source, srclen);
  b->user_name = clcrt__strdup(user_name);
  b->user_src = clcrt__strdup(d->source);
  oom |= !b->user_name || !b->user_src;
  b->entry = entry->p;
  b->source = tu.p;
  b->name = name.p;
  if (oom) {
    clcrt__build_free(b);
    return clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory building the translation unit");
  }
  return CLCRT_OK;
}

/* NVRTC instances at once are bounded by the core count: more only thrash. */
static pthread_mutex_t g_slots_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_slots_cond = PTHREAD_COND_INITIALIZER;
static long g_slots_used, g_slots_max;

static void slot_take(void) {
  pthread_mutex_lock(&g_slots_lock);
  if (!g_slots_max) {
    g_slots_max = sysconf(_SC_NPROCESSORS_ONLN);
    if (g_slots_max < 1) g_slots_max = 1;
  }
  while (g_slots_used >= g_slots_max) pthread_cond_wait(&g_slots_cond, &g_slots_lock);
  g_slots_used++;
  pthread_mutex_unlock(&g_slots_lock);
}
static void slot_give(void) {
  pthread_mutex_lock(&g_slots_lock);
  g_slots_used--;
  pthread_cond_signal(&g_slots_cond);
  pthread_mutex_unlock(&g_slots_lock);
}

/* A compile that failed: NVRTC's log in the message, with a hint where the log points at the
 * generated entry rather than the user's code. */
static clcrt_status fail_compile(clcrt_runtime *rt, const clcrt__build *b, nvrtcProgram prog, nvrtcResult r) {
  size_t n = 0;
  char *log = NULL;
  if (nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 0 && (log = clcrt__malloc(n)) &&
      nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
    log[0] = 0;
  /* The front end ("Formal parameter space overflowed") and ptxas ("uses too much
   * parameter space") both place this error at the entry, whose signature is not the
   * problem: Args is. */
  int params = log && strstr(log, "parameter space");
  int in_entry = log && strstr(log, "clcrt_entry");
  clcrt_status st =
      clcrt__fail(rt, r == NVRTC_ERROR_OUT_OF_MEMORY ? CLCRT_E_NOMEM : CLCRT_E_COMPILE,
                  "NVRTC could not compile tile function \"%s\" for %s (%s):\n%s%s", b->name, rt->arch,
                  nvrtcGetErrorString(r), log ? log : "(no log)",
                  params ? "\nhint: Args is passed to the kernel by value, after the scheduler's 128 bytes of "
                           "parameters, and a kernel's parameters hold at most 32,764 bytes: keep large data in "
                           "device memory and put a pointer to it in Args"
                  : in_entry ? "\nhint: the generated entry (\"clcrt_entry\") calls the tile function as fn(const "
                               "clcrt::Tile &, const Args &[, State &]) and the prologue as p(const Args &, State "
                               "&): check their signatures and the names in the descriptor"
                             : "");
  clcrt__free(log);
  return st;
}

clcrt_status clcrt__build_compile(clcrt_runtime *rt, clcrt__build *b) {
  clcrt_status st = CLCRT_OK;
  nvrtcProgram prog = NULL;
  /* The template's headers, then the user's source and the entry (clcrt__build_prepare). */
  const char *hdr_text[18], *hdr_name[18];
  int nh = 0;
  for (const clcrt__embedded_file *f = clcrt__embedded; f->name && nh < 16; f++, nh++) {
    hdr_text[nh] = f->text;
    hdr_name[nh] = f->name;
  }
  hdr_name[nh] = b->user_name, hdr_text[nh++] = b->user_src;
  hdr_name[nh] = "clcrt_entry", hdr_text[nh++] = b->entry;
  /* Where the cache needs the headers the compile reads: NVRTC's time trace (headers.h). */
  clcrt__hdr_trace trace;
  int traced = b->want_deps && clcrt__hdr_trace_begin(&trace, b) == 0, attempt = 0;
  if (!traced) trace.dir[0] = 0;
  /* The canonical options, then the trace and -minimal where the source allows it
   * (minimal_ok); a second attempt without -minimal has a trace of its own. */
  const char **opts = clcrt__calloc((size_t)b->num_options + 2, sizeof(char *));
  NOMEM_GOTO(rt, opts, st, out);
  for (int i = 0; i < b->num_options; i++) opts[i] = b->options[i];
  int nopts = b->num_options, minimal = b->minimal;
  if (traced) opts[nopts++] = trace.opt[0];
  if (minimal) opts[nopts++] = "-minimal";
  double t0 = clcrt__now_ms();
  NVRTC_CHECK_GOTO(rt, nvrtcCreateProgram(&prog, b->source, "clcrt_tu.cu", nh, hdr_text, hdr_name), st, out);
  slot_take();
  clock_gettime(CLOCK_REALTIME, &trace.started[0]);
  nvrtcResult r = nvrtcCompileProgram(prog, nopts, opts);
  if (r == NVRTC_ERROR_COMPILATION && minimal) {
    /* Something the check did not see needed what -minimal omits, or the source has an
     * error: compile it as it would have been, so that the result and the log are the ones
     * without -minimal. */
    nvrtcDestroyProgram(&prog);
    prog = NULL;
    attempt = 1;
    nopts = b->num_options;
    if (traced) opts[nopts++] = trace.opt[1];
    clock_gettime(CLOCK_REALTIME, &trace.started[1]);
    r = nvrtcCreateProgram(&prog, b->source, "clcrt_tu.cu", nh, hdr_text, hdr_name);
    if (r == NVRTC_SUCCESS) r = nvrtcCompileProgram(prog, nopts, opts);
  }
  slot_give();
  b->compile_ms = clcrt__now_ms() - t0;
  if (!prog) {
    st = clcrt__fail(rt, r == NVRTC_ERROR_OUT_OF_MEMORY ? CLCRT_E_NOMEM : CLCRT_E_COMPILE,
                     "nvrtcCreateProgram failed for tile function \"%s\" (%s)", b->name, nvrtcGetErrorString(r));
    goto out;
  }
  if (r != NVRTC_SUCCESS) {
    st = fail_compile(rt, b, prog, r);
    goto out;
  }
  size_t n = 0;
  NVRTC_CHECK_GOTO(rt, nvrtcGetCUBINSize(prog, &n), st, out);
  if (n == 0) {
    st = clcrt__fail(rt, CLCRT_E_COMPILE, "NVRTC produced an empty cubin for %s (%s)", b->name, rt->arch);
    goto out;
  }
  b->cubin = clcrt__malloc(n);
  NOMEM_GOTO(rt, b->cubin, st, out);
  NVRTC_CHECK_GOTO(rt, nvrtcGetCUBIN(prog, b->cubin), st, out);
  b->cubin_size = n;
  n = 0;
  if (nvrtcGetPTXSize(prog, &n) == NVRTC_SUCCESS && n > 0) {
    b->ptx = clcrt__malloc(n);
    NOMEM_GOTO(rt, b->ptx, st, out);
    NVRTC_CHECK_GOTO(rt, nvrtcGetPTX(prog, b->ptx), st, out);
  }
  if (traced) clcrt__hdr_trace_collect(rt, &trace, attempt, b);
out:
  if (prog) nvrtcDestroyProgram(&prog);
  if (traced) clcrt__hdr_trace_end(&trace);
  clcrt__free(opts);
  return st;
}

void clcrt__build_free(clcrt__build *b) {
  if (!b) return;
  clcrt__free(b->name);
  clcrt__free(b->user_name);
  clcrt__free(b->user_src);
  clcrt__free(b->entry);
  clcrt__deps_free(b->deps);
  clcrt__free(b->source);
  for (int i = 0; b->options && i < b->num_options; i++) clcrt__free(b->options[i]);
  clcrt__free(b->options);
  clcrt__free(b->cubin);
  clcrt__free(b->ptx);
  memset(b, 0, sizeof *b);
}
