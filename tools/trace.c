/* clcrt trace: the summary of a timeline trace (clcrt_trace_save_json's file) and its
 * picture (trace_draw.c). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static const char help[] =
    "usage: clcrt trace summary [--json] [--run N] FILE.json\n"
    "       clcrt trace draw [--run N] [--width W] [--height H] [--time-us T] -o OUT.png|OUT.svg FILE.json\n"
    "\n"
    "Reads a timeline trace written by clcrt_trace_save_json (Chrome/Perfetto trace-event\n"
    "JSON; open it in https://ui.perfetto.dev to browse it).\n"
    "\n"
    "summary  tiles, stolen tiles, runs, dropped records, span (first start to last end),\n"
    "         tail (from the first SM going idle for good to the last end), imbalance (the\n"
    "         busiest SM's busy time over the mean) and each SM's busy fraction\n"
    "  --json       one JSON document (schema \"clcrt-trace-summary-1\", see docs/tool.md)\n"
    "draw     SMs down the side, time across, one rectangle per tile coloured by cluster;\n"
    "         idle time is blank. PNG or SVG, chosen by the name given to -o\n"
    "  -o FILE      the picture (required)\n"
    "  --width W    pixels across (default 1200, 160 to 16384)\n"
    "  --height H   pixels down (default 800, 120 to 16384; at most 2^26 pixels in all)\n"
    "  --time-us T  a time axis T microseconds long (1 to 10^9), so that pictures of two\n"
    "               traces share one scale; a trace that lasts longer keeps its own\n"
    "both\n"
    "  --run N      only run N (runs are numbered on their stream from 0); by default all runs\n"
    "               share one time axis\n"
    "  -h, --help\n"
    "\n"
    "Exit codes: 0 success; 2 usage error (also a run the trace does not have); 3 the trace\n"
    "is missing, unreadable or damaged, or the picture cannot be written.\n";

static int usage(const char *fmt, const char *arg) {
  fprintf(stderr, "clcrt trace: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n\n%s", help);
  return TOOL_USAGE;
}

static int parse_num(const char *s, long long lo, long long hi, long long *v) {
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || end == s || *end || x < lo || x > hi) return -1;
  *v = x;
  return 0;
}

/* Loads path, keeping only run `run` when it is not -1. */
static int load(const char *path, long long run, clcrt_trace **out) {
  clcrt_trace *t;
  if (clcrt_trace_load_json(path, &t) != CLCRT_OK) {
    fprintf(stderr, "clcrt: %s\n", clcrt_errmsg(NULL));
    return TOOL_BADINPUT;
  }
  if (run < 0) {
    *out = t;
    return TOOL_OK;
  }
  size_t n, k = 0;
  const clcrt_trace_record *r = clcrt_trace_records(t, &n);
  clcrt_trace_record *keep = malloc((n ? n : 1) * sizeof *keep);
  if (!keep) {
    clcrt_trace_destroy(t);
    fprintf(stderr, "clcrt: %s: out of memory\n", path);
    return TOOL_BADINPUT;
  }
  unsigned long long lo = ~0ull, hi = 0;
  for (size_t i = 0; i < n; i++) {
    if (r[i].run == (unsigned long long)run) keep[k++] = r[i];
    if (r[i].run < lo) lo = r[i].run;
    if (r[i].run > hi) hi = r[i].run;
  }
  int rc = TOOL_OK;
  if (!k) {
    if (n) fprintf(stderr, "clcrt trace: %s has no run %lld (its runs are %llu to %llu)\n", path, run, lo, hi);
    else fprintf(stderr, "clcrt trace: %s has no run %lld (it holds no tiles)\n", path, run);
    rc = TOOL_USAGE;
  } else if (clcrt_trace_create(keep, k, clcrt_trace_dropped(t), out) != CLCRT_OK) {
    fprintf(stderr, "clcrt: %s\n", clcrt_errmsg(NULL));
    rc = TOOL_BADINPUT;
  }
  free(keep);
  clcrt_trace_destroy(t);
  return rc;
}

static void fmt_ns(char *b, size_t n, double ns) {
  if (ns < 1e4) snprintf(b, n, "%.0f ns", ns);
  else if (ns < 1e7) snprintf(b, n, "%.3f us", ns / 1e3);
  else snprintf(b, n, "%.3f ms", ns / 1e6);
}

/* Which SMs ran a tile: a busy fraction of 0 does not tell (a tile may take no time). */
static void sms_that_ran(const clcrt_trace *t, unsigned char *ran) {
  size_t n;
  const clcrt_trace_record *r = clcrt_trace_records(t, &n);
  memset(ran, 0, CLCRT_TRACE_MAX_SMS);
  for (size_t i = 0; i < n; i++) ran[r[i].sm] = 1;
}

static void print_text(const char *path, const clcrt_trace_summary *s, const unsigned char *ran) {
  char a[32], b[32];
  unsigned nran = 0, lo = 0, hi = 0;
  for (unsigned i = 0; i < s->num_sms; i++) {
    if (!ran[i]) continue;
    if (!nran || s->busy_fraction[i] < s->busy_fraction[lo]) lo = i;
    if (!nran || s->busy_fraction[i] > s->busy_fraction[hi]) hi = i;
    nran++;
  }
  printf("%s: %llu tiles, %llu run%s, %u SMs, %llu stolen, %llu dropped\n", path, s->tiles, s->runs,
         s->runs == 1 ? "" : "s", nran, s->steals, s->dropped);
  if (!s->tiles) return;
  fmt_ns(a, sizeof a, s->span_ns);
  printf("  span        %s (first start to last end)\n", a);
  fmt_ns(b, sizeof b, s->tail_ns);
  printf("  tail        %s, %.1f%% of the span (first SM idle for good to the last end)\n", b,
         s->span_ns > 0 ? 100 * s->tail_ns / s->span_ns : 0.0);
  printf("  imbalance   %.3f (the busiest SM's busy time over the mean)\n", s->imbalance);
  printf("  busy        %.1f%% on average; least %.1f%% (SM %u), most %.1f%% (SM %u)\n", 100 * s->busy_mean,
         100 * s->busy_fraction[lo], lo, 100 * s->busy_fraction[hi], hi);
  printf("busy %% per SM (- ran no tile):\n");
  for (unsigned i = 0; i < s->num_sms; i++) {
    if (i % 10 == 0) printf("%s  SM %4u:", i ? "\n" : "", i);
    if (ran[i]) printf(" %5.1f", 100 * s->busy_fraction[i]);
    else printf("     -");
  }
  printf("\n");
}

static void print_json(const char *path, long long run, const clcrt_trace_summary *s, const unsigned char *ran) {
  printf("{\"schema\": \"clcrt-trace-summary-1\", \"path\": ");
  json_str(stdout, path);
  printf(", \"run\": ");
  json_int_or_null(stdout, run, run >= 0);
  printf(",\n \"tiles\": %llu, \"steals\": %llu, \"runs\": %llu, \"dropped\": %llu, \"num_sms\": %u,\n", s->tiles,
         s->steals, s->runs, s->dropped, s->num_sms);
  printf(" \"span_ns\": %.0f, \"tail_ns\": %.0f, \"imbalance\": %.6f, \"busy_mean\": %.6f,\n \"busy_fraction\": [",
         s->span_ns, s->tail_ns, s->imbalance, s->busy_mean);
  for (unsigned i = 0; i < s->num_sms; i++) {
    if (i) printf(i % 10 ? ", " : ",\n   ");
    if (ran[i]) printf("%.6f", s->busy_fraction[i]);
    else printf("null");
  }
  printf("]}\n");
}

int cmd_trace(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"run", required_argument, NULL, 'r'},
                                       {"width", required_argument, NULL, 'W'},
                                       {"height", required_argument, NULL, 'H'},
                                       {"time-us", required_argument, NULL, 'T'},
                                       {"output", required_argument, NULL, 'o'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    fputs(help, argc < 2 ? stderr : stdout);
    return argc < 2 ? TOOL_USAGE : TOOL_OK;
  }
  const char *sub = argv[1];
  int draw = strcmp(sub, "draw") == 0;
  if (!draw && strcmp(sub, "summary") != 0) return usage("unknown subcommand '%s'", sub);
  int json = 0, o;
  long long run = -1, width = 1200, height = 800, time_us = 0;
  const char *out = NULL;
  tool_getopt_start();
  argc--, argv++;
  while ((o = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
    switch (o) {
    case 'j': json = 1; break;
    case 'o': out = optarg; break;
    case 'r':
      if (parse_num(optarg, 0, 0xffffffffll, &run)) return usage("--run wants a run number, not '%s'", optarg);
      break;
    case 'W':
      if (parse_num(optarg, 160, 16384, &width)) return usage("--width wants 160 to 16384 pixels, not '%s'", optarg);
      break;
    case 'H':
      if (parse_num(optarg, 120, 16384, &height)) return usage("--height wants 120 to 16384 pixels, not '%s'", optarg);
      break;
    case 'T':
      if (parse_num(optarg, 1, 1000000000ll, &time_us))
        return usage("--time-us wants 1 to 1000000000 microseconds, not '%s'", optarg);
      break;
    case 'h': fputs(help, stdout); return TOOL_OK;
    default: return usage("unknown option or missing value: '%s'", argv[optind - 1]);
    }
  }
  if (optind != argc - 1) return usage("%s", optind >= argc ? "no FILE.json given" : "one FILE.json only");
  const char *path = argv[optind];
  if (draw && json) return usage("%s", "--json is for summary");
  if (width * height > (1ll << 26)) /* 192 MB of pixels; a bigger picture is a typo more often than a wish */
    return usage("%s", "--width times --height may be at most 67108864 pixels");
  if (!draw && out) return usage("%s", "-o is for draw");
  if (!draw && (width != 1200 || height != 800 || time_us)) return usage("%s", "--width, --height and --time-us are for draw");
  int svg = 0;
  if (draw) {
    size_t n = out ? strlen(out) : 0;
    if (!out) return usage("%s", "draw needs -o OUT.png or -o OUT.svg");
    if (n > 4 && strcasecmp(out + n - 4, ".svg") == 0) svg = 1;
    else if (!(n > 4 && strcasecmp(out + n - 4, ".png") == 0))
      return usage("-o names the picture: OUT.png or OUT.svg, not '%s'", out);
  }
  clcrt_trace *t;
  int rc = load(path, run, &t);
  if (rc != TOOL_OK) return rc;
  clcrt_trace_summary *s = calloc(1, sizeof *s);
  unsigned char *ran = malloc(CLCRT_TRACE_MAX_SMS);
  if (!s || !ran) {
    fprintf(stderr, "clcrt: out of memory\n");
    rc = TOOL_BADINPUT;
    goto done;
  }
  s->size = sizeof *s;
  if (clcrt_trace_summarize(t, s) != CLCRT_OK) {
    fprintf(stderr, "clcrt: %s\n", clcrt_errmsg(NULL));
    rc = TOOL_BADINPUT;
    goto done;
  }
  sms_that_ran(t, ran);
  if (!draw) {
    if (json) print_json(path, run, s, ran);
    else print_text(path, s, ran);
  } else {
    char err[512];
    tool_draw_opts d = {out, svg, (int)width, (int)height, run, (unsigned long long)time_us * 1000ull};
    if ((rc = tool_trace_draw(t, s, &d, err, sizeof err)) != TOOL_OK) fprintf(stderr, "clcrt: %s: %s\n", out, err);
  }
done:
  free(s);
  free(ran);
  clcrt_trace_destroy(t);
  return rc;
}
