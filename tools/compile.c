/* clcrt compile: the compile clcrt_register does, ahead of time and without a GPU, through
 * the public API in compile-only mode (clcrt_runtime_opts.target_arch). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "clcrt.h"
#include "env.h"
#include "tool.h"

static const char help[] =
    "usage: clcrt compile --arch ARCH --fn NAME --args TYPE [OPTIONS] FILE.cu\n"
    "\n"
    "Compiles the tile function NAME in FILE.cu into clcrt's scheduler template with NVRTC,\n"
    "exactly as clcrt_register would, for ARCH (e.g. sm_90a, sm_100a), with no GPU or\n"
    "driver needed, writes the cubin and prints a summary of the kernel. The entry symbol is\n"
    "clcrt_<sched>_<NAME>. The result also lands in the compile cache unless --no-cache.\n"
    "\n"
    "  --arch ARCH            target architecture, e.g. sm_90a or sm_100a (required)\n"
    "  --fn NAME              the tile function (required)\n"
    "  --args TYPE            the Args struct the tile function takes (required)\n"
    "  --sched S              auto (default: clc on sm_100+, steal otherwise), clc, steal, static, fixed\n"
    "  --grid G               steal only: auto (default), full, persistent\n"
    "  --block X[,Y[,Z]]      threads per CTA (default 128,1,1)\n"
    "  --cluster X[,Y[,Z]]    CTAs per cluster (default 1,1,1)\n"
    "  --smem BYTES           dynamic shared memory per CTA (default 0); K and M suffixes\n"
    "                         count 1024 and 1048576 bytes (48K = 49152)\n"
    "  --state TYPE --prologue FN   optional per-CTA state made once per CTA by FN\n"
    "  -X, --nvrtc-opt OPT    an extra NVRTC option (repeatable), e.g. -X -DTILE=64\n"
    "  --cuda-home DIR        CUDA toolkit whose include directories NVRTC gets\n"
    "  -o OUT                 output cubin (default NAME.ARCH.cubin)\n"
    "  --ptx OUT.ptx          also write the PTX\n"
    "  --variant USES         the variant that runs with USES launch instead of the kernel as\n"
    "                         registered: a comma list of trace (traced runs and runs with\n"
    "                         statistics on), graph (runs captured into a graph), preempt\n"
    "                         (runs that can be preempted) and short (runs with no more units\n"
    "                         than clusters fit at once); graph, preempt, short: steal only\n"
    "  --observed             the same as --variant trace\n"
    "  --no-cache             do not read or write the disk cache\n"
    "  -q, --quiet            print nothing on success\n"
    "  -h, --help\n"
    "\n"
    "Exit codes: 0 written; 2 usage error (also an unsupported combination, e.g. --sched clc\n"
    "for sm_90a); 3 FILE.cu unreadable (or not text: it holds a NUL byte) or OUT not writable;\n"
    "4 compile error (NVRTC's log is printed on stderr).\n";

/* --variant: a comma list of trace, graph, preempt, short (observed: an alias of trace). */
static int parse_uses(const char *s, unsigned *uses) {
  static const struct { const char *name; unsigned bit; } words[] = {
      {"trace", CLCRT_USE_TRACE}, {"observed", CLCRT_USE_TRACE}, {"graph", CLCRT_USE_GRAPH},
      {"preempt", CLCRT_USE_PREEMPT}, {"short", CLCRT_USE_SHORT}};
  const char *p = s;
  for (;;) {
    size_t n = strcspn(p, ",");
    size_t i = 0;
    for (; i < sizeof words / sizeof words[0]; i++)
      if (n == strlen(words[i].name) && strncmp(p, words[i].name, n) == 0) break;
    if (i == sizeof words / sizeof words[0]) return -1;
    *uses |= words[i].bit;
    if (!p[n]) return 0;
    p += n + 1;
  }
}

static int parse_dim3(const char *s, clcrt_dim3 *d) {
  unsigned long v[3] = {1, 1, 1};
  const char *p = s;
  for (int i = 0; i < 3; i++) {
    char *end;
    errno = 0;
    if (*p < '0' || *p > '9') return -1;
    v[i] = strtoul(p, &end, 10);
    if (errno || v[i] == 0 || v[i] > 0xffffffffUL) return -1;
    p = end;
    if (*p == 0) break;
    if (*p != ',' || i == 2) return -1;
    p++;
  }
  d->x = (unsigned)v[0];
  d->y = (unsigned)v[1];
  d->z = (unsigned)v[2];
  return 0;
}

static int write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(data, 1, n, f) == n;
  ok &= fclose(f) == 0;
  return ok ? 0 : -1;
}

/* The library's messages name what a C caller sets (desc->tile_fn, opts.target_arch,
 * CLCRT_SCHED_STEAL); this command's user set it with a flag. Tried in order at each word;
 * a field without a flag (desc->min_blocks_per_sm) keeps its C name. */
static const struct {
  const char *c, *flag;
} flag_words[] = {
    {"desc->tile_fn", "--fn"},
    {"desc->args_type", "--args"},
    {"desc->state_type", "--state"},
    {"desc->prologue_fn", "--prologue"},
    {"desc->smem_bytes is", "--smem"},
    {"desc->grid", "--grid"},
    {"desc->options", "--nvrtc-opt"}, /* its index is dropped: the option's text follows */
    {"set opts.cuda_home to NULL", "leave out --cuda-home"},
    {"opts.cuda_home", "--cuda-home"},
    {"opts.target_arch", "--arch"},
    {"target_arch", "--arch"},
    {"CLCRT_SCHED_AUTO", "--sched auto"},
    {"CLCRT_SCHED_CLC", "--sched clc"},
    {"CLCRT_SCHED_STEAL", "--sched steal"},
    {"CLCRT_SCHED_STATIC", "--sched static"},
    {"CLCRT_SCHED_FIXED", "--sched fixed"},
    {"CLCRT_GRID_AUTO", "--grid auto"},
    {"CLCRT_GRID_FULL", "--grid full"},
    {"CLCRT_GRID_PERSISTENT", "--grid persistent"},
};

static int word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* The entry of flag_words whose C name is the whole word at p in msg, or -1. */
static int flag_word_at(const char *msg, const char *p) {
  if (p > msg && word_char(p[-1])) return -1;
  for (size_t i = 0; i < sizeof flag_words / sizeof *flag_words; i++) {
    size_t n = strlen(flag_words[i].c);
    if (strncmp(p, flag_words[i].c, n) == 0 && !word_char(p[n])) return (int)i;
  }
  return -1;
}

/* Prints the library's message msg with its C names in flag_words replaced by the flags. */
static void put_flag_words(FILE *f, const char *msg) {
  for (const char *p = msg; *p;) {
    int i = flag_word_at(msg, p);
    if (i < 0) {
      fputc(*p++, f);
      continue;
    }
    fputs(flag_words[i].flag, f);
    p += strlen(flag_words[i].c);
    size_t digits = *p == '[' ? strspn(p + 1, "0123456789") : 0; /* desc->options[N] */
    if (digits && p[digits + 1] == ']') p += digits + 2;
  }
}

static int usage_err(const char *msg, const char *arg) {
  fprintf(stderr, "clcrt compile: %s%s%s\n\n%s", msg, arg ? " " : "", arg ? arg : "", help);
  return TOOL_USAGE;
}

/* Names the required options that are missing, and only those. */
static int missing_required(const char *arch, const char *fn, const char *args) {
  const char *names[3];
  int n = 0;
  if (!arch) names[n++] = "--arch";
  if (!fn) names[n++] = "--fn";
  if (!args) names[n++] = "--args";
  char msg[64];
  if (n == 1) snprintf(msg, sizeof msg, "%s is required", names[0]);
  else if (n == 2) snprintf(msg, sizeof msg, "%s and %s are required", names[0], names[1]);
  else snprintf(msg, sizeof msg, "%s, %s and %s are required", names[0], names[1], names[2]);
  return usage_err(msg, NULL);
}

int cmd_compile(int argc, char **argv) {
  static const struct option opts[] = {
      {"arch", required_argument, NULL, 'a'},    {"fn", required_argument, NULL, 'f'},
      {"args", required_argument, NULL, 'A'},    {"sched", required_argument, NULL, 's'},
      {"grid", required_argument, NULL, 'g'},    {"block", required_argument, NULL, 'b'},
      {"cluster", required_argument, NULL, 'c'}, {"smem", required_argument, NULL, 'm'},
      {"state", required_argument, NULL, 'S'},   {"prologue", required_argument, NULL, 'P'},
      {"nvrtc-opt", required_argument, NULL, 'X'}, {"cuda-home", required_argument, NULL, 'H'},
      {"ptx", required_argument, NULL, 'p'},     {"no-cache", no_argument, NULL, 'n'},
      {"quiet", no_argument, NULL, 'q'},         {"help", no_argument, NULL, 'h'},
      {"observed", no_argument, NULL, 'O'},      {"variant", required_argument, NULL, 'V'},
      {0, 0, 0, 0}};
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  clcrt_runtime_opts ro = CLCRT_RUNTIME_OPTS_INIT;
  const char *out = NULL, *ptx_out = NULL;
  int quiet = 0, o;
  unsigned uses = 0;
  d.block = (clcrt_dim3){128, 1, 1};
  d.cluster = (clcrt_dim3){1, 1, 1};
  const char **xopts = calloc((size_t)argc + 1, sizeof(char *));
  if (!xopts) return TOOL_BADINPUT;
  tool_getopt_start();
  int rc = TOOL_OK;
  while ((o = getopt_long(argc, argv, "ho:X:q", opts, NULL)) != -1) {
    switch (o) {
      case 'a': ro.target_arch = optarg; break;
      case 'f': d.tile_fn = optarg; break;
      case 'A': d.args_type = optarg; break;
      case 's':
        if (strcmp(optarg, "auto") == 0) d.sched = CLCRT_SCHED_AUTO;
        else if (strcmp(optarg, "clc") == 0) d.sched = CLCRT_SCHED_CLC;
        else if (strcmp(optarg, "steal") == 0) d.sched = CLCRT_SCHED_STEAL;
        else if (strcmp(optarg, "static") == 0) d.sched = CLCRT_SCHED_STATIC;
        else if (strcmp(optarg, "fixed") == 0) d.sched = CLCRT_SCHED_FIXED;
        else rc = usage_err("--sched must be auto, clc, steal, static or fixed, not", optarg);
        break;
      case 'g':
        if (strcmp(optarg, "auto") == 0) d.grid = CLCRT_GRID_AUTO;
        else if (strcmp(optarg, "full") == 0) d.grid = CLCRT_GRID_FULL;
        else if (strcmp(optarg, "persistent") == 0) d.grid = CLCRT_GRID_PERSISTENT;
        else rc = usage_err("--grid must be auto, full or persistent, not", optarg);
        break;
      case 'b':
        if (parse_dim3(optarg, &d.block)) rc = usage_err("--block wants X[,Y[,Z]] of positive integers, not", optarg);
        break;
      case 'c':
        if (parse_dim3(optarg, &d.cluster)) rc = usage_err("--cluster wants X[,Y[,Z]] of positive integers, not", optarg);
        break;
      case 'm': {
        /* The same sizes the cache's cap takes ($CLCRT_CACHE_MAX_BYTES): 49152, 48K, 48KiB. */
        unsigned long long v = 0;
        if (!clcrt__parse_bytes(optarg, &v) || v > 0xffffffffull)
          rc = usage_err("--smem wants a number of bytes, with an optional K or M suffix (48K = 49152), not",
                         optarg);
        d.smem_bytes = (unsigned)v;
        break;
      }
      case 'S': d.state_type = optarg; break;
      case 'P': d.prologue_fn = optarg; break;
      case 'X': xopts[d.num_options++] = optarg; break;
      case 'H': ro.cuda_home = optarg; break;
      case 'o': out = optarg; break;
      case 'p': ptx_out = optarg; break;
      case 'n': ro.cache_dir = ""; break;
      case 'q': quiet = 1; break;
      case 'O': uses |= CLCRT_USE_TRACE; break;
      case 'V':
        if (parse_uses(optarg, &uses))
          rc = usage_err("--variant wants a comma list of trace, graph, preempt and short, not", optarg);
        break;
      case 'h': fputs(help, stdout); free(xopts); return TOOL_OK;
      default: rc = usage_err("unknown option or missing value:", argv[optind - 1]);
    }
    if (rc != TOOL_OK) {
      free(xopts);
      return rc;
    }
  }
  d.options = xopts;
  if (!ro.target_arch || !d.tile_fn || !d.args_type) rc = missing_required(ro.target_arch, d.tile_fn, d.args_type);
  else if (argc - optind != 1) rc = usage_err("expected exactly one FILE.cu", NULL);
  else if ((d.state_type == NULL) != (d.prologue_fn == NULL)) rc = usage_err("--state and --prologue go together", NULL);
  if (rc != TOOL_OK) {
    free(xopts);
    return rc;
  }
  const char *src_path = argv[optind];
  uint8_t *src = NULL;
  size_t n = 0;
  char err[256];
  if (tool_read_file(src_path, &src, &n, err, sizeof err) != 0) {
    fprintf(stderr, "clcrt: %s: %s\n", src_path, err);
    free(xopts);
    return TOOL_BADINPUT;
  }
  /* The descriptor takes the source as a C string: a NUL would end it there, and the rest
   * would be compiled away without a word. */
  const uint8_t *nul = memchr(src, 0, n);
  if (nul) {
    fprintf(stderr, "clcrt: %s: byte %zu is a NUL: a CUDA source is text, and the compile would stop there\n",
            src_path, (size_t)(nul - src));
    free(src);
    free(xopts);
    return TOOL_BADINPUT;
  }
  char *text = realloc(src, n + 1);
  if (!text) {
    free(src);
    free(xopts);
    return TOOL_BADINPUT;
  }
  text[n] = 0;
  d.source = text;
  char *defout = NULL;
  if (!out) {
    size_t l = strlen(d.tile_fn) + strlen(ro.target_arch) + 8;
    if ((defout = malloc(l))) snprintf(defout, l, "%s.%s.cubin", d.tile_fn, ro.target_arch);
    out = defout;
  }

  clcrt_runtime *rt = NULL;
  clcrt_kernel *rk = NULL;
  const clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &ro);
  if (st == CLCRT_OK) st = clcrt_register(rt, &d, &rk);
  k = rk;
  if (st == CLCRT_OK && uses) st = clcrt_kernel_variant(rk, uses, &k); /* also lands in the disk cache */
  if (st != CLCRT_OK) {
    const char *detail = rt ? clcrt_errmsg(rt) : NULL;
    fprintf(stderr, "clcrt compile: %s: %s\n", clcrt_status_name(st), clcrt_status_str(st));
    if (detail && *detail && st == CLCRT_E_COMPILE) {
      fprintf(stderr, "%s\n", detail); /* NVRTC's log, which quotes the user's code */
    } else if (detail && *detail) {
      put_flag_words(stderr, detail);
      fputc('\n', stderr);
    }
    rc = st == CLCRT_E_INVALID || st == CLCRT_E_UNSUPPORTED ? TOOL_USAGE : st == CLCRT_E_IO ? TOOL_BADINPUT : TOOL_COMPILE;
    goto done;
  }
  const void *cubin = NULL;
  size_t cubin_size = 0;
  if (clcrt_kernel_cubin(k, &cubin, &cubin_size) != CLCRT_OK || !cubin || !cubin_size) {
    fprintf(stderr, "clcrt compile: the compile produced no cubin\n");
    rc = TOOL_COMPILE;
    goto done;
  }
  if (!out || write_file(out, cubin, cubin_size) != 0) {
    fprintf(stderr, "clcrt: %s: cannot write: %s\n", out ? out : "(output)", strerror(errno));
    rc = TOOL_BADINPUT;
    goto done;
  }
  if (ptx_out) {
    const char *ptx = NULL;
    if (clcrt_kernel_ptx(k, &ptx) != CLCRT_OK || !ptx) {
      fprintf(stderr, "clcrt compile: no PTX is available for this kernel (a cache hit stores only the cubin)\n");
    } else if (write_file(ptx_out, ptx, strlen(ptx)) != 0) {
      fprintf(stderr, "clcrt: %s: cannot write: %s\n", ptx_out, strerror(errno));
      rc = TOOL_BADINPUT;
      goto done;
    }
  }
  if (!quiet) {
    clcrt__cubin c;
    char perr[256];
    char vdesc[80] = "";
    if (uses)
      snprintf(vdesc, sizeof vdesc, ", the variant for%s%s%s%s", uses & CLCRT_USE_TRACE ? " trace" : "",
               uses & CLCRT_USE_GRAPH ? " graph" : "", uses & CLCRT_USE_PREEMPT ? " preempt" : "",
               uses & CLCRT_USE_SHORT ? " short" : "");
    printf("wrote %s (%zu bytes%s)\n", out, cubin_size, vdesc);
    if (clcrt__cubin_parse(cubin, cubin_size, &c, perr, sizeof perr) == 0) {
      for (size_t i = 0; i < c.num_kernels; i++) {
        const clcrt__cubin_kernel *kk = &c.kernels[i];
        printf("  %s %s: %d registers, %d bytes stack, %" PRIu64 " bytes static shared, %d bytes params, CLC %s\n",
               c.arch, kk->name, kk->registers, kk->frame_bytes, kk->static_smem, kk->param_bytes,
               kk->has_clc ? "yes" : "no");
      }
      clcrt__cubin_free(&c);
    } else {
      printf("  (the cubin could not be read back: %s)\n", perr);
    }
  }
done:
  clcrt_runtime_destroy(rt);
  free(defout);
  free(text);
  free(xopts);
  return rc;
}
