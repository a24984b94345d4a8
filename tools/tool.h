/* The clcrt command-line tool: shared declarations. Each subcommand lives in its own file
 * (compile.c, inspect.c, diff.c, cache.c, trace.c); clcrt.c dispatches. docs/tool.md is the manual. */
#ifndef CLCRT_TOOL_H
#define CLCRT_TOOL_H
#include <stddef.h>
#include <stdint.h>
#include <getopt.h>
#include <stdio.h>

#include "clcrt.h"
#include "cubin.h"

/* Exit codes, documented in docs/tool.md; scripts depend on them, so they never change. */
enum {
  TOOL_OK = 0,        /* success */
  TOOL_CHECK = 1,     /* diff --fail-on: a named resource grew */
  TOOL_USAGE = 2,     /* the command line is wrong */
  TOOL_BADINPUT = 3,  /* an input file is missing, unreadable, damaged or not a cubin; or a file-system error */
  TOOL_COMPILE = 4,   /* compile: NVRTC rejected the source (its log is printed) or the compile failed */
  TOOL_NOTOOL = 5     /* inspect --sass: nvdisasm is not on the PATH */
};

#define TOOL_MAX_FILE (1u << 30) /* larger inputs are refused rather than read into memory */

/* Before a command's getopt_long loop: optind 0 makes glibc start afresh (the dispatcher's own
 * scan stopped at the command, "+"), so the command's options may come before or after its
 * files, as nvcc takes them, up to "--"; opterr 0: the command words its own errors. */
static inline void tool_getopt_start(void) {
  optind = 0;
  opterr = 0;
}

/* A file read into memory and the cubin found in it. A cubin file is the cubin itself; a
 * compile-cache entry (<key>.clce) carries one after its header. */
typedef struct tool_input {
  const char *path;
  uint8_t *data;
  size_t size;
  const uint8_t *elf;    /* the cubin inside data */
  size_t elf_size;
  int is_cache_entry;
  clcrt__cubin cubin;
  long long dynamic_smem; /* cache entries record it; -1 for plain cubins */
  int entry_sched;        /* cache entries: the clcrt_sched it was built with; -1 otherwise */
  char err[256];          /* why loading failed */
} tool_input;

/* Reads path and parses the cubin in it. Returns TOOL_OK, or TOOL_BADINPUT with the
 * reason in in->err (the caller prints it). Free with tool_input_free in either case. */
int tool_input_load(tool_input *in, const char *path);
void tool_input_free(tool_input *in);

/* The compile cache (cacheio.c, through runtime/cache/diskcache.h). */
int tool_cache_available(void);
int tool_is_cache_entry(const uint8_t *data, size_t size);
int tool_cache_locate(tool_input *in); /* -1 with in->err set */

/* Reads a whole regular file (directories, devices and files over TOOL_MAX_FILE are
 * refused). Returns 0, or -1 with a reason in err. */
int tool_read_file(const char *path, uint8_t **data, size_t *size, char *err, size_t errlen);

/* Whether -h/--help is among argv[1..]. */
int tool_wants_help(int argc, char **argv);

/* JSON output helpers (json.c). */
void json_str(FILE *f, const char *s);
void json_int_or_null(FILE *f, long long v, int known);
void json_dims(FILE *f, const uint32_t d[3]); /* null when all zero */
void json_kernel(FILE *f, const clcrt__cubin_kernel *k, long long dynamic_smem, const char *indent); /* -1: unknown */
void json_cubin_header(FILE *f, const tool_input *in);

int cmd_compile(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_trace(int argc, char **argv);

/* clcrt trace draw (trace_draw.c): the timeline as a PNG or an SVG picture. */
typedef struct tool_draw_opts {
  const char *out;  /* *.png or *.svg */
  int svg;
  int width, height;
  long long run;    /* the run drawn, -1: all runs on one time axis */
  unsigned long long time_ns; /* 0, or the length of the time axis (longer traces keep their own) */
} tool_draw_opts;
/* TOOL_OK, or TOOL_BADINPUT with the reason in err (the output could not be written). */
int tool_trace_draw(const clcrt_trace *t, const clcrt_trace_summary *s, const tool_draw_opts *o, char *err,
                    size_t errlen);

/* The picture font (trace_font.c): TOOL_FONT_H strings of TOOL_FONT_W characters, '#' for
 * ink, for a code point (U+00B5 is 'µ'; others outside printable ASCII draw as '?'). */
#define TOOL_FONT_W 5
#define TOOL_FONT_H 7
const char *const *tool_font_glyph(unsigned cp);
#endif
