/* The files a compile read from disk: the compile cache's manifest (the idea is ccache's).
 *
 * A cache key covers what is known before a compile: the source, the options, the
 * template, NVRTC and the toolkit. The headers a tile function reads from disk are not
 * known then, however they are spelt (#include </abs/x.h>, <../../x.h>, a comment between
 * the # and include, %:include, a line splice after the #, a macro): guessing them from
 * the text misses cases. NVRTC 13.0 has no -M/-MD/-MF option (each is refused as
 * unrecognised), so the list comes from its time trace instead: a compile that may read a
 * file runs with --fdevice-time-trace, whose "Processing Header File" events name every
 * file the preprocessor opened, as it opened it (checked on nested, relative, absolute
 * and quoted includes, with four compiles at once in one process).
 *
 * The files outside the embedded template, NVRTC's built-in headers and the toolkit's
 * include directory (the key covers those by identity) are hashed (SHA-256) and stored
 * with the entry. A lookup hashes them again: a changed or missing file is a miss, which
 * compiles and replaces the entry. The memory cache checks its kernels the same way on
 * every hit, first by stat (size, mtime, ctime, inode) and by hashing only when that
 * differs, so that a header edited while the process runs is seen too.
 *
 * A source that cannot read a file outside the key is not traced (see
 * clcrt__text_may_read_files: no include, or only the template's and the toolkit's
 * headers, named plainly). The trace has two costs, both NVRTC 13.0's: time (ptxas merges
 * the trace file: medians 59.3 -> 68.6 ms for the README kernel with NVRTC alone, 12
 * alternating runs on the 2-core build machine), and
 * memory NVRTC never frees (13.7 KB for a one-line kernel, 125 KB for the README kernel
 * with a header, per traced compile, counted by LeakSanitizer). And traced compiles whose
 * main files hold #line directives crash NVRTC in a later traced compile of the process
 * (reproduced with NVRTC alone), which is why the translation unit has none (compile.c).
 *
 * A header reached through the toolkit's include directories is taken to be the
 * toolkit's: the key covers the toolkit by its identity, not header by header.
 *
 * What cannot be covered makes a compile uncached, never a stale hit: a header modified
 * less than CLCRT__DEPS_SETTLE_MS before the compile started (or during it: the content
 * hashed afterwards might not be the content compiled), a file that cannot be read back,
 * a path with a control character, a trace that is missing or does not list the
 * template's own header (a format this library does not know), and a source or header
 * that probes for files with __has_include (whose answer depends on files that are never
 * opened). Not covered: a file that appears later in an earlier directory of the search
 * path and would shadow one that was read (the current directory for quoted includes;
 * user -I directories need include_digest anyway), and __has_include spelt by token
 * pasting. */
#ifndef CLCRT_DEPS_H
#define CLCRT_DEPS_H
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "clcrt.h"

/* A header must have been left alone this long before a compile for the compile to be
 * stored: file times come from the kernel's coarse clock, which may lag by a tick. */
#define CLCRT__DEPS_SETTLE_MS 50
/* A header larger than this is not hashed (the compile is not cached). */
#define CLCRT__DEPS_MAX_FILE (64u << 20)

typedef struct clcrt__dep {
  char *path;      /* as NVRTC opened it: a relative path is relative to the working directory */
  uint8_t sha[32]; /* SHA-256 of the content */
  uint64_t size;
  /* The file's identity when it was hashed, for the memory cache's quick check. */
  int have_stat;
  uint64_t ino, dev;
  int64_t mtime_ns, ctime_ns;
} clcrt__dep;

typedef struct clcrt__deps {
  size_t n;
  clcrt__dep *v;
} clcrt__deps;

typedef struct clcrt__deps_ctx {
  const char *toolkit_inc;        /* realpath of <cuda_home>/include, or NULL: files under it are the toolkit's */
  const char *const *mem_names;   /* headers NVRTC gets in memory besides the template's */
  int num_mem_names;
  const char *canary;             /* a header every compile includes: the trace must list it */
  struct timespec started;        /* CLOCK_REALTIME when NVRTC started */
} clcrt__deps_ctx;

/* Whether text could make the preprocessor open a file outside the key: it holds the
 * identifier include, include_next or import (line splices joined), or a universal
 * character name, except in lines that are exactly #include "<a header of clcrt's
 * template>" (NVRTC takes it from memory) or #include <name> with a relative name that does
 * not climb with ".." (only the toolkit's include directories are searched for it, unless
 * the user gives -I, which makes the compile uncached anyway). A sound over-approximation:
 * a directive's name is a whole identifier, never made by a macro, and every other
 * spelling counts. Text for which this is 0 needs no trace. */
int clcrt__text_may_read_files(const char *text, size_t n);
/* Whether text holds __has_include, __has_include_next or __has_embed (splices joined). */
int clcrt__text_probes_files(const char *text, size_t n);

/* The manifest of a compile from its NVRTC time trace (json, n bytes). CLCRT_OK with *out
 * (possibly empty); CLCRT_E_UNSUPPORTED when the compile cannot be cached, with why;
 * CLCRT_E_NOMEM. */
clcrt_status clcrt__deps_from_trace(const char *json, size_t n, const clcrt__deps_ctx *ctx, clcrt__deps **out,
                                    char *why, size_t wn);

/* 1 when every file still has the content recorded, else 0 with why ("<path> changed",
 * "<path> cannot be read: ..."). quick: a file whose stat matches the recorded one is not
 * hashed again. record: fill in the stat of the files hashed (only for a manifest no other
 * thread reads). */
int clcrt__deps_check(clcrt__deps *d, int quick, int record, char *why, size_t wn);

/* Text form, for disk entries: one line per file, "<64 hex digits> <size> <path>\n". "" for
 * none. NULL when out of memory. */
char *clcrt__deps_encode(const clcrt__deps *d);
/* Parses the text form. CLCRT_E_CORRUPT when malformed, CLCRT_E_NOMEM. */
clcrt_status clcrt__deps_decode(const char *text, clcrt__deps **out);
void clcrt__deps_free(clcrt__deps *d);
#endif
