/* A small pull parser for JSON text in memory; see json_parse.h. Strict RFC 8259 grammar
 * (no comments, no trailing commas, no leading zeros, no raw control characters in
 * strings), except that bytes of 0x80 and above in strings are taken as they are rather
 * than checked as UTF-8: nothing here interprets them. */
#include "json_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int is_digit(char c) { return (unsigned)(c - '0') < 10u; }

static int hex_val(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void clcrt__jp_init(clcrt__jp *j, const char *text, size_t n) {
  memset(j, 0, sizeof *j);
  j->base = j->p = text;
  j->end = text + n;
}

static int vfail(clcrt__jp *j, const char *at, const char *fmt, va_list ap) {
  if (j->err_at) return -1; /* the first error is the one worth reporting */
  j->err_at = at;
  vsnprintf(j->err, sizeof j->err, fmt, ap);
  return -1;
}

int clcrt__jp_fail(clcrt__jp *j, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(j, j->p, fmt, ap);
  va_end(ap);
  return -1;
}

int clcrt__jp_fail_at(clcrt__jp *j, const char *at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(j, at, fmt, ap);
  va_end(ap);
  return -1;
}

void clcrt__jp_where(const clcrt__jp *j, const char *at, char *buf, size_t n) {
  if (!at || at < j->base || at > j->end) at = j->p;
  size_t line = 1;
  const char *line_start = j->base, *q = j->base;
  while (q < at) {
    const char *nl = memchr(q, '\n', (size_t)(at - q));
    if (!nl) break;
    line++;
    q = line_start = nl + 1;
  }
  snprintf(buf, n, "line %zu, column %zu (byte %zu)", line, (size_t)(at - line_start) + 1, (size_t)(at - j->base));
}

static void skip_ws(clcrt__jp *j) {
  const char *p = j->p, *e = j->end;
  while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
  j->p = p;
}

/* Names the byte at the current position for an error message. */
static const char *describe(const clcrt__jp *j, char *buf, size_t n) {
  if (j->p >= j->end) return "the end of the file";
  unsigned char c = (unsigned char)*j->p;
  if (c >= 0x21 && c < 0x7f) snprintf(buf, n, "'%c'", c);
  else snprintf(buf, n, "byte 0x%02x", c);
  return buf;
}

clcrt__jp_type clcrt__jp_peek(clcrt__jp *j) {
  if (j->err_at) return CLCRT__JP_ERROR;
  skip_ws(j);
  if (j->p >= j->end) {
    clcrt__jp_fail(j, "the file ends where a value should be");
    return CLCRT__JP_ERROR;
  }
  switch (*j->p) {
  case '{': return CLCRT__JP_OBJECT;
  case '[': return CLCRT__JP_ARRAY;
  case '"': return CLCRT__JP_STRING;
  case 't': return CLCRT__JP_TRUE;
  case 'f': return CLCRT__JP_FALSE;
  case 'n': return CLCRT__JP_NULL;
  default:
    if (*j->p == '-' || is_digit(*j->p)) return CLCRT__JP_NUMBER;
  }
  char b[16];
  clcrt__jp_fail(j, "expected a value, found %s", describe(j, b, sizeof b));
  return CLCRT__JP_ERROR;
}

const char *clcrt__jp_type_name(clcrt__jp_type t) {
  switch (t) {
  case CLCRT__JP_OBJECT: return "an object";
  case CLCRT__JP_ARRAY: return "an array";
  case CLCRT__JP_STRING: return "a string";
  case CLCRT__JP_NUMBER: return "a number";
  case CLCRT__JP_TRUE: return "true";
  case CLCRT__JP_FALSE: return "false";
  case CLCRT__JP_NULL: return "null";
  default: return "not a value";
  }
}

int clcrt__jp_string(clcrt__jp *j, clcrt__jp_span *out) {
  if (clcrt__jp_peek(j) != CLCRT__JP_STRING) return clcrt__jp_fail(j, "expected a string");
  const char *open = j->p, *p = open + 1, *e = j->end;
  int escaped = 0;
  for (;;) {
    if (p >= e) return clcrt__jp_fail_at(j, open, "a string that starts here never ends");
    unsigned char c = (unsigned char)*p;
    if (c == '"') break;
    if (c < 0x20) {
      j->p = p;
      return clcrt__jp_fail(j, "byte 0x%02x inside a string (control characters must be escaped)", c);
    }
    if (c != '\\') {
      p++;
      continue;
    }
    escaped = 1;
    if (p + 1 >= e) return clcrt__jp_fail_at(j, open, "a string that starts here never ends");
    switch (p[1]) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't': p += 2; break;
    case 'u':
      for (int k = 2; k < 6; k++)
        if (p + k >= e || hex_val(p[k]) < 0) {
          j->p = p;
          return clcrt__jp_fail(j, "a \\u escape needs four hex digits");
        }
      p += 6;
      break;
    default: j->p = p; return clcrt__jp_fail(j, "invalid escape in a string");
    }
  }
  out->s = open + 1;
  out->n = (size_t)(p - open - 1);
  out->escaped = escaped;
  j->p = p + 1;
  return 0;
}

int clcrt__jp_number(clcrt__jp *j, clcrt__jp_span *out) {
  if (clcrt__jp_peek(j) != CLCRT__JP_NUMBER) return clcrt__jp_fail(j, "expected a number");
  const char *s = j->p, *p = s, *e = j->end;
  if (*p == '-') p++;
  if (p >= e || !is_digit(*p)) {
    j->p = p;
    return clcrt__jp_fail(j, "a number needs a digit after '-'");
  }
  if (*p == '0') {
    p++;
    if (p < e && is_digit(*p)) {
      j->p = p;
      return clcrt__jp_fail(j, "a number may not have leading zeros");
    }
  } else {
    while (p < e && is_digit(*p)) p++;
  }
  if (p < e && *p == '.') {
    p++;
    if (p >= e || !is_digit(*p)) {
      j->p = p;
      return clcrt__jp_fail(j, "a number needs a digit after '.'");
    }
    while (p < e && is_digit(*p)) p++;
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < e && (*p == '+' || *p == '-')) p++;
    if (p >= e || !is_digit(*p)) {
      j->p = p;
      return clcrt__jp_fail(j, "a number needs a digit in its exponent");
    }
    while (p < e && is_digit(*p)) p++;
  }
  out->s = s;
  out->n = (size_t)(p - s);
  out->escaped = 0;
  j->p = p;
  return 0;
}

int clcrt__jp_literal(clcrt__jp *j, clcrt__jp_type *out) {
  clcrt__jp_type t = clcrt__jp_peek(j);
  const char *word = t == CLCRT__JP_TRUE    ? "true"
                     : t == CLCRT__JP_FALSE ? "false"
                     : t == CLCRT__JP_NULL  ? "null"
                                            : NULL;
  if (!word) return clcrt__jp_fail(j, "expected true, false or null");
  size_t n = strlen(word);
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return clcrt__jp_fail(j, "expected %s", word);
  j->p += n;
  *out = t;
  return 0;
}

static int enter(clcrt__jp *j, clcrt__jp_type want) {
  if (clcrt__jp_peek(j) != want) return clcrt__jp_fail(j, "expected %s", clcrt__jp_type_name(want));
  if (j->depth >= CLCRT__JP_MAX_DEPTH) return clcrt__jp_fail(j, "values nested more than %d deep", CLCRT__JP_MAX_DEPTH);
  j->depth++;
  j->p++;
  return 0;
}

int clcrt__jp_object_begin(clcrt__jp *j) { return enter(j, CLCRT__JP_OBJECT); }
int clcrt__jp_array_begin(clcrt__jp *j) { return enter(j, CLCRT__JP_ARRAY); }

int clcrt__jp_object_next(clcrt__jp *j, clcrt__jp_span *key, int *first) {
  if (j->err_at) return -1;
  skip_ws(j);
  if (j->p >= j->end) return clcrt__jp_fail(j, "the file ends inside an object");
  if (*j->p == '}') {
    j->p++;
    j->depth--;
    return 0;
  }
  char b[16];
  if (!*first) {
    if (*j->p != ',')
      return clcrt__jp_fail(j, "expected ',' or '}' after an object member, found %s", describe(j, b, sizeof b));
    j->p++;
    skip_ws(j);
  }
  *first = 0;
  if (j->p >= j->end || *j->p != '"')
    return clcrt__jp_fail(j, "expected a key (a string), found %s", describe(j, b, sizeof b));
  if (clcrt__jp_string(j, key) != 0) return -1;
  skip_ws(j);
  if (j->p >= j->end || *j->p != ':')
    return clcrt__jp_fail(j, "expected ':' after a key, found %s", describe(j, b, sizeof b));
  j->p++;
  return 1;
}

int clcrt__jp_array_next(clcrt__jp *j, int *first) {
  if (j->err_at) return -1;
  skip_ws(j);
  if (j->p >= j->end) return clcrt__jp_fail(j, "the file ends inside an array");
  if (*j->p == ']') {
    j->p++;
    j->depth--;
    return 0;
  }
  if (!*first) {
    char b[16];
    if (*j->p != ',')
      return clcrt__jp_fail(j, "expected ',' or ']' after an array element, found %s", describe(j, b, sizeof b));
    j->p++;
  }
  *first = 0;
  return 1;
}

int clcrt__jp_skip(clcrt__jp *j) {
  clcrt__jp_span s;
  clcrt__jp_type t;
  int first = 1, r;
  switch (clcrt__jp_peek(j)) {
  case CLCRT__JP_OBJECT:
    if (clcrt__jp_object_begin(j)) return -1;
    while ((r = clcrt__jp_object_next(j, &s, &first)) == 1)
      if (clcrt__jp_skip(j)) return -1;
    return r;
  case CLCRT__JP_ARRAY:
    if (clcrt__jp_array_begin(j)) return -1;
    while ((r = clcrt__jp_array_next(j, &first)) == 1)
      if (clcrt__jp_skip(j)) return -1;
    return r;
  case CLCRT__JP_STRING: return clcrt__jp_string(j, &s);
  case CLCRT__JP_NUMBER: return clcrt__jp_number(j, &s);
  case CLCRT__JP_TRUE:
  case CLCRT__JP_FALSE:
  case CLCRT__JP_NULL: return clcrt__jp_literal(j, &t);
  default: return -1;
  }
}

int clcrt__jp_finish(clcrt__jp *j) {
  if (j->err_at) return -1;
  skip_ws(j);
  char b[16];
  if (j->p < j->end) return clcrt__jp_fail(j, "%s after the end of the JSON document", describe(j, b, sizeof b));
  return 0;
}

int clcrt__jp_eq(clcrt__jp_span s, const char *lit) {
  size_t len = strlen(lit);
  if (!s.escaped) return s.n == len && memcmp(s.s, lit, len) == 0;
  /* Escapes were checked by clcrt__jp_string; decode them one by one. lit is ASCII, so a
   * code point above 0x7f (or a raw byte above it) never matches. */
  const char *p = s.s, *e = s.s + s.n;
  while (p < e) {
    unsigned cp = (unsigned char)*p++;
    if (cp == '\\') {
      char c = *p++;
      switch (c) {
      case 'b': cp = '\b'; break;
      case 'f': cp = '\f'; break;
      case 'n': cp = '\n'; break;
      case 'r': cp = '\r'; break;
      case 't': cp = '\t'; break;
      case 'u':
        cp = 0;
        for (int k = 0; k < 4; k++) cp = cp * 16 + (unsigned)hex_val(*p++);
        break;
      default: cp = (unsigned char)c;
      }
    }
    if (!*lit || cp != (unsigned char)*lit) return 0;
    lit++;
  }
  return *lit == 0;
}

int clcrt__jp_u64(clcrt__jp_span s, uint64_t *v, const char **why) {
  if (s.n && s.s[0] == '-') {
    *why = "is negative";
    return -1;
  }
  uint64_t x = 0;
  for (size_t i = 0; i < s.n; i++) {
    char c = s.s[i];
    if (!is_digit(c)) {
      *why = "is not an integer";
      return -1;
    }
    unsigned d = (unsigned)(c - '0');
    if (x > (UINT64_MAX - d) / 10) {
      /* Keep scanning: a fraction or exponent later on is the better reason. */
      for (size_t k = i; k < s.n; k++)
        if (!is_digit(s.s[k])) {
          *why = "is not an integer";
          return -1;
        }
      *why = "does not fit in 64 bits";
      return -1;
    }
    x = x * 10 + d;
  }
  if (!s.n) {
    *why = "is empty";
    return -1;
  }
  *v = x;
  return 0;
}
