/* A small pull parser for JSON text held in memory (RFC 8259), for reading trace files.
 *
 * The caller walks the document: it asks what kind of value comes next, then takes it
 * (a string or number as a span of the input, nothing copied), enters it (objects and
 * arrays, member by member) or skips it. Every input is treated as hostile: the parser
 * never reads past `end`, nests at most CLCRT__JP_MAX_DEPTH deep (recursion is bounded by
 * that), allocates nothing, and every loop consumes input, so it cannot hang. The first
 * error stops it: every later call fails, and clcrt__jp_error says what and where. */
#ifndef CLCRT_JSON_PARSE_H
#define CLCRT_JSON_PARSE_H
#include <stddef.h>
#include <stdint.h>

#define CLCRT__JP_MAX_DEPTH 64

typedef enum clcrt__jp_type {
  CLCRT__JP_ERROR = 0, /* no value starts here (or an earlier error) */
  CLCRT__JP_OBJECT,
  CLCRT__JP_ARRAY,
  CLCRT__JP_STRING,
  CLCRT__JP_NUMBER,
  CLCRT__JP_TRUE,
  CLCRT__JP_FALSE,
  CLCRT__JP_NULL
} clcrt__jp_type;

/* A string's contents between the quotes, still escaped, or a number's text. */
typedef struct clcrt__jp_span {
  const char *s;
  size_t n;
  int escaped; /* strings: holds a backslash escape */
} clcrt__jp_span;

typedef struct clcrt__jp {
  const char *base, *p, *end;
  int depth;
  const char *err_at; /* where the first error was found; NULL while there is none */
  char err[160];
} clcrt__jp;

void clcrt__jp_init(clcrt__jp *j, const char *text, size_t n);

/* What the next value is (whitespace skipped; nothing consumed). */
clcrt__jp_type clcrt__jp_peek(clcrt__jp *j);
const char *clcrt__jp_type_name(clcrt__jp_type t); /* "an object", "a string", ... */

/* Take one value of that kind; 0 on success, -1 on error. */
int clcrt__jp_string(clcrt__jp *j, clcrt__jp_span *out);
int clcrt__jp_number(clcrt__jp *j, clcrt__jp_span *out);
int clcrt__jp_literal(clcrt__jp *j, clcrt__jp_type *out); /* true, false or null */
int clcrt__jp_skip(clcrt__jp *j);                         /* any value, checked */

/* Objects: clcrt__jp_object_begin consumes '{'; then each clcrt__jp_object_next returns 1
 * with the next key read and its ':' consumed (the caller takes or skips the value), 0
 * when the object ended ('}' consumed), -1 on error. `first` starts at 1. Arrays alike:
 * clcrt__jp_array_next returns 1 when a value follows. */
int clcrt__jp_object_begin(clcrt__jp *j);
int clcrt__jp_object_next(clcrt__jp *j, clcrt__jp_span *key, int *first);
int clcrt__jp_array_begin(clcrt__jp *j);
int clcrt__jp_array_next(clcrt__jp *j, int *first);

/* Nothing but whitespace left: 0, else -1 with an error. */
int clcrt__jp_finish(clcrt__jp *j);

/* Records an error at the current position (the first one wins); returns -1. */
int clcrt__jp_fail(clcrt__jp *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int clcrt__jp_fail_at(clcrt__jp *j, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "line L, column C (byte B)" for a position in the text, 1-based line and column. */
void clcrt__jp_where(const clcrt__jp *j, const char *at, char *buf, size_t n);

/* Whether a string span, unescaped, equals the NUL-terminated ASCII lit. */
int clcrt__jp_eq(clcrt__jp_span s, const char *lit);

/* A number span as an unsigned 64-bit integer: 0, or -1 with the reason in why
 * ("negative", "not an integer", "does not fit in 64 bits"). */
int clcrt__jp_u64(clcrt__jp_span s, uint64_t *v, const char **why);
#endif
