/* clcrt_trace_load_json: a trace back from trace-event JSON (the format is described in
 * trace_json.c).
 *
 * What is accepted: the object form ({"traceEvents":[...], ...}) or the bare array form of
 * the trace-event format. A tile is an event with "ph":"X" whose args hold the record's
 * fields; such an event must hold all of them (tile, unit, cluster, cta_rank, sm, stolen,
 * start_ns, end_ns, run; flags optional) as unsigned integers in range (stolen may be true
 * or false), and its end may not precede its start. Other events are ignored. ts and dur are
 * not read (the integers in args are exact, they are not), but must be numbers where
 * present, and dur may not be negative. otherData's clcrt_trace_version (a newer one is
 * refused), dropped and records (the count of tile events, which must match) are read when
 * present. A file with neither tile events nor that metadata is not a clcrt trace.
 *
 * The input is hostile until proven otherwise: only regular files are read (a FIFO would
 * block), the parser is bounded (json_parse.c), memory is the file plus the records it
 * really holds, and every refusal names the place (line, column, byte) and what was wrong. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "json_parse.h"
#include "trace.h"

enum {
  F_TILE = 1 << 0,
  F_UNIT = 1 << 1,
  F_CLUSTER = 1 << 2,
  F_RANK = 1 << 3,
  F_SM = 1 << 4,
  F_STOLEN = 1 << 5,
  F_START = 1 << 6,
  F_END = 1 << 7,
  F_RUN = 1 << 8,
  F_FLAGS = 1 << 9, /* optional */
  F_ALL = (1 << 9) - 1
};

static const struct field {
  const char *name;
  size_t len;
  unsigned bit;
  uint64_t max;
} fields[] = {
#define FIELD(name, bit, max)                                                                                          \
  { name, sizeof(name) - 1, bit, max }
    FIELD("tile", F_TILE, UINT64_MAX),
    FIELD("unit", F_UNIT, UINT32_MAX),
    FIELD("cluster", F_CLUSTER, UINT32_MAX),
    FIELD("cta_rank", F_RANK, UINT8_MAX),
    FIELD("sm", F_SM, CLCRT_TRACE_MAX_SMS - 1),
    FIELD("stolen", F_STOLEN, 1),
    FIELD("start_ns", F_START, UINT64_MAX),
    FIELD("end_ns", F_END, UINT64_MAX),
    FIELD("run", F_RUN, UINT32_MAX),
    FIELD("flags", F_FLAGS, UINT8_MAX),
#undef FIELD
};
#define NFIELDS (sizeof fields / sizeof fields[0])

/* Key comparison without a strlen per call: a million events have ten million keys. */
static inline int key_is(clcrt__jp_span k, const char *lit, size_t len) {
  if (k.escaped) return clcrt__jp_eq(k, lit);
  return k.n == len && memcmp(k.s, lit, len) == 0;
}
#define KEY(k, lit) key_is((k), lit, sizeof(lit) - 1)

typedef struct loader {
  clcrt__jp j;
  clcrt_trace_record *rec;
  size_t n, cap;
  size_t event; /* index of the event being read in traceEvents */
  int have_version, have_count, seen_events;
  uint64_t dropped, count;
  clcrt_status st; /* CLCRT_E_NOMEM when that, not the file, is the problem */
  int ctx;         /* what is being read, for messages: CTX_* */
} loader;

enum { CTX_OTHER, CTX_EVENT, CTX_ARGS };

/* Names what is being read ("traceEvents[12].args"); only formatted when something failed. */
static const char *ctx_name(const loader *l, char *buf, size_t n) {
  switch (l->ctx) {
  case CTX_OTHER: return "otherData";
  default: snprintf(buf, n, "traceEvents[%zu]%s", l->event, l->ctx == CTX_ARGS ? ".args" : ""); return buf;
  }
}

/* At most 40 characters of a number, for messages about huge ones. */
static int shown(const clcrt__jp_span *s) { return s->n > 40 ? 40 : (int)s->n; }

static int read_uint(loader *l, const char *name, uint64_t max, uint64_t *v) {
  clcrt__jp *j = &l->j;
  clcrt__jp_span s;
  clcrt__jp_type t = clcrt__jp_peek(j);
  const char *at = j->p, *why;
  char where[64];
  if (t == CLCRT__JP_ERROR) return -1;
  if (t != CLCRT__JP_NUMBER)
    return clcrt__jp_fail(j, "%s.%s is %s, not an unsigned integer", ctx_name(l, where, sizeof where), name,
                          clcrt__jp_type_name(t));
  if (clcrt__jp_number(j, &s)) return -1;
  if (clcrt__jp_u64(s, v, &why))
    return clcrt__jp_fail_at(j, at, "%s.%s = %.*s%s %s", ctx_name(l, where, sizeof where), name, shown(&s), s.s,
                             s.n > 40 ? "..." : "", why);
  if (*v > max)
    return clcrt__jp_fail_at(j, at, "%s.%s = %llu is out of range (at most %llu)", ctx_name(l, where, sizeof where),
                             name, (unsigned long long)*v, (unsigned long long)max);
  return 0;
}

/* An event's args: the record's fields into r, which of them were there into *have. */
static int read_args(loader *l, clcrt_trace_record *r, unsigned *have) {
  clcrt__jp *j = &l->j;
  clcrt__jp_span key;
  int first = 1, rc;
  if (clcrt__jp_object_begin(j)) return -1;
  while ((rc = clcrt__jp_object_next(j, &key, &first)) == 1) {
    const struct field *f = NULL;
    for (size_t i = 0; i < NFIELDS && !f; i++)
      if (key_is(key, fields[i].name, fields[i].len)) f = &fields[i];
    if (!f) {
      if (clcrt__jp_skip(j)) return -1;
      continue;
    }
    uint64_t v;
    clcrt__jp_type t = clcrt__jp_peek(j);
    if (f->bit == F_STOLEN && (t == CLCRT__JP_TRUE || t == CLCRT__JP_FALSE)) {
      if (clcrt__jp_literal(j, &t)) return -1;
      v = t == CLCRT__JP_TRUE;
    } else if (read_uint(l, f->name, f->max, &v)) {
      return -1;
    }
    *have |= f->bit;
    switch (f->bit) {
    case F_TILE: r->tile = v; break;
    case F_UNIT: r->unit = (uint32_t)v; break;
    case F_CLUSTER: r->cluster = (uint32_t)v; break;
    case F_RANK: r->cta_rank = (uint8_t)v; break;
    case F_SM: r->sm = (uint16_t)v; break;
    case F_STOLEN: r->flags = (uint8_t)((r->flags & ~CLCRT_TRACE_STOLEN) | (v ? CLCRT_TRACE_STOLEN : 0)); break;
    case F_START: r->start_ns = v; break;
    case F_END: r->end_ns = v; break;
    case F_RUN: r->run = (uint32_t)v; break;
    case F_FLAGS: r->flags = (uint8_t)(v | (r->flags & CLCRT_TRACE_STOLEN)); break;
    }
  }
  return rc;
}

static int push(loader *l, const clcrt_trace_record *r) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 1024;
    clcrt_trace_record *p = clcrt__realloc(l->rec, cap * sizeof *p);
    if (!p) {
      l->st = CLCRT_E_NOMEM;
      return clcrt__jp_fail(&l->j, "out of memory after %zu tile events", l->n);
    }
    l->rec = p;
    l->cap = cap;
  }
  l->rec[l->n++] = *r;
  return 0;
}

static int read_event(loader *l) {
  clcrt__jp *j = &l->j;
  char where[64];
  l->ctx = CTX_EVENT;
  clcrt__jp_type t = clcrt__jp_peek(j);
  const char *at = j->p;
  if (t == CLCRT__JP_ERROR) return -1;
  if (t != CLCRT__JP_OBJECT)
    return clcrt__jp_fail(j, "%s is %s, not an object", ctx_name(l, where, sizeof where), clcrt__jp_type_name(t));
  clcrt_trace_record r;
  memset(&r, 0, sizeof r);
  unsigned have = 0;
  int is_x = 0, neg_dur = 0, first = 1, rc;
  clcrt__jp_span key, s;
  if (clcrt__jp_object_begin(j)) return -1;
  while ((rc = clcrt__jp_object_next(j, &key, &first)) == 1) {
    t = clcrt__jp_peek(j);
    if (t == CLCRT__JP_ERROR) return -1;
    const char *name = NULL, *want = NULL;
    if (KEY(key, "ph")) {
      name = "ph";
      if (t != CLCRT__JP_STRING) want = "a string";
      else if (clcrt__jp_string(j, &s)) return -1;
      else is_x = clcrt__jp_eq(s, "X");
    } else if (KEY(key, "args")) {
      name = "args";
      if (t != CLCRT__JP_OBJECT) want = "an object";
      else {
        l->ctx = CTX_ARGS;
        if (read_args(l, &r, &have)) return -1;
        l->ctx = CTX_EVENT;
      }
    } else if (KEY(key, "ts") || KEY(key, "dur")) {
      name = KEY(key, "ts") ? "ts" : "dur";
      if (t != CLCRT__JP_NUMBER) want = "a number";
      else if (clcrt__jp_number(j, &s)) return -1;
      else if (name[0] == 'd' && s.s[0] == '-') /* "-0" and "-0.000e5" are no negative durations */
        for (size_t i = 1; i < s.n && !neg_dur && s.s[i] != 'e' && s.s[i] != 'E'; i++)
          neg_dur = s.s[i] >= '1' && s.s[i] <= '9';
    } else if (KEY(key, "pid") || KEY(key, "tid")) {
      name = KEY(key, "pid") ? "pid" : "tid";
      if (t != CLCRT__JP_NUMBER && t != CLCRT__JP_STRING) want = "a number or a string";
      else if (clcrt__jp_skip(j)) return -1;
    } else if (KEY(key, "name") || KEY(key, "cat")) {
      name = KEY(key, "name") ? "name" : "cat";
      if (t != CLCRT__JP_STRING) want = "a string";
      else if (clcrt__jp_skip(j)) return -1;
    } else if (clcrt__jp_skip(j)) {
      return -1;
    }
    if (want)
      return clcrt__jp_fail(j, "%s.%s is %s, not %s", ctx_name(l, where, sizeof where), name, clcrt__jp_type_name(t),
                            want);
  }
  if (rc < 0) return -1;
  if (!is_x || !(have & F_ALL)) return 0; /* not a tile */
  if ((have & F_ALL) != F_ALL) {
    for (size_t i = 0; i < NFIELDS; i++)
      if ((fields[i].bit & F_ALL) && !(have & fields[i].bit))
        return clcrt__jp_fail_at(j, at, "%s: a tile event without args.%s", ctx_name(l, where, sizeof where),
                                 fields[i].name);
  }
  if (neg_dur) return clcrt__jp_fail_at(j, at, "%s: negative dur", ctx_name(l, where, sizeof where));
  if (r.end_ns < r.start_ns)
    return clcrt__jp_fail_at(j, at, "%s: negative duration (args.end_ns %llu is before args.start_ns %llu)",
                             ctx_name(l, where, sizeof where), (unsigned long long)r.end_ns,
                             (unsigned long long)r.start_ns);
  return push(l, &r);
}

static int read_events(loader *l, const char *name) {
  clcrt__jp *j = &l->j;
  clcrt__jp_type t = clcrt__jp_peek(j);
  if (t == CLCRT__JP_ERROR) return -1;
  if (t != CLCRT__JP_ARRAY) return clcrt__jp_fail(j, "%s is %s, not an array", name, clcrt__jp_type_name(t));
  if (l->seen_events) return clcrt__jp_fail(j, "a second traceEvents");
  l->seen_events = 1;
  int first = 1, rc;
  if (clcrt__jp_array_begin(j)) return -1;
  while ((rc = clcrt__jp_array_next(j, &first)) == 1) {
    if (read_event(l)) return -1;
    l->event++;
  }
  return rc;
}

static int read_other(loader *l) {
  clcrt__jp *j = &l->j;
  clcrt__jp_span key;
  int first = 1, rc;
  /* otherData is free-form in the trace-event format: only ours is checked. */
  if (clcrt__jp_peek(j) != CLCRT__JP_OBJECT) return clcrt__jp_skip(j);
  l->ctx = CTX_OTHER;
  if (clcrt__jp_object_begin(j)) return -1;
  while ((rc = clcrt__jp_object_next(j, &key, &first)) == 1) {
    uint64_t v;
    clcrt__jp_peek(j); /* past the whitespace, so that `at` is the value's place */
    const char *at = j->p;
    if (KEY(key, "clcrt_trace_version")) {
      if (read_uint(l, "clcrt_trace_version", UINT64_MAX, &v)) return -1;
      if (v == 0 || v > CLCRT__TRACE_JSON_VERSION)
        return clcrt__jp_fail_at(j, at, "clcrt trace format version %llu; this clcrt reads version %d%s",
                                 (unsigned long long)v, CLCRT__TRACE_JSON_VERSION,
                                 v ? " (written by a newer clcrt?)" : "");
      l->have_version = 1;
    } else if (KEY(key, "records")) {
      if (read_uint(l, "records", UINT64_MAX, &l->count)) return -1;
      l->have_count = 1;
    } else if (KEY(key, "dropped")) {
      if (read_uint(l, "dropped", UINT64_MAX, &v)) return -1;
      l->dropped = v;
    } else if (clcrt__jp_skip(j)) {
      return -1;
    }
  }
  return rc;
}

static int read_doc(loader *l) {
  clcrt__jp *j = &l->j;
  clcrt__jp_span key;
  int first = 1, rc = 0;
  clcrt__jp_type t = clcrt__jp_peek(j);
  if (t == CLCRT__JP_ARRAY) {
    if (read_events(l, "the document")) return -1;
  } else if (t == CLCRT__JP_OBJECT) {
    if (clcrt__jp_object_begin(j)) return -1;
    while ((rc = clcrt__jp_object_next(j, &key, &first)) == 1) {
      if (KEY(key, "traceEvents")) rc = read_events(l, "traceEvents");
      else if (KEY(key, "otherData")) rc = read_other(l);
      else rc = clcrt__jp_skip(j);
      if (rc) return -1;
    }
    if (rc < 0) return -1;
  } else {
    if (t != CLCRT__JP_ERROR)
      clcrt__jp_fail(j, "the document is %s, not a trace-event object or array", clcrt__jp_type_name(t));
    return -1;
  }
  if (clcrt__jp_finish(j)) return -1;
  if (!l->n && !l->have_version)
    return clcrt__jp_fail_at(j, j->base,
                             "no clcrt tile events (\"ph\":\"X\" with clcrt's args) and no "
                             "otherData.clcrt_trace_version: not a trace written by clcrt_trace_save_json");
  if (l->have_count && l->count != l->n)
    return clcrt__jp_fail_at(j, j->base, "otherData.records says %llu tile events, the file holds %zu (cut or edited?)",
                             (unsigned long long)l->count, l->n);
  return 0;
}

/* The whole file; only regular files (a FIFO could block forever, a device never end). */
static clcrt_status read_file(const char *path, char **data, size_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return clcrt__fail_norts(CLCRT_E_IO, "clcrt_trace_load_json: %s: %s", path, strerror(errno));
  clcrt_status st = CLCRT_OK;
  char *buf = NULL;
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    st = clcrt__fail_norts(CLCRT_E_IO, "clcrt_trace_load_json: %s: %s", path, strerror(errno));
    goto done;
  }
  if (!S_ISREG(sb.st_mode)) {
    st = clcrt__fail_norts(CLCRT_E_IO, "clcrt_trace_load_json: %s: %s", path,
                           S_ISDIR(sb.st_mode) ? "is a directory" : "is not a regular file");
    goto done;
  }
  if ((unsigned long long)sb.st_size >= SIZE_MAX / 2) {
    st = clcrt__fail_norts(CLCRT_E_NOMEM, "clcrt_trace_load_json: %s: %lld bytes do not fit in memory", path,
                           (long long)sb.st_size);
    goto done;
  }
  size_t n = (size_t)sb.st_size, got = 0;
  if (!(buf = clcrt__malloc(n + 1))) {
    st = clcrt__fail_norts(CLCRT_E_NOMEM, "clcrt_trace_load_json: %s: out of memory for %zu bytes", path, n);
    goto done;
  }
  /* A file that shrinks meanwhile is read as it is now; the parser finds the cut. */
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      st = clcrt__fail_norts(CLCRT_E_IO, "clcrt_trace_load_json: %s: %s", path, strerror(errno));
      goto done;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  buf[got] = 0;
  *data = buf;
  *size = got;
  buf = NULL;
done:
  clcrt__free(buf);
  close(fd);
  return st;
}

clcrt_status clcrt__trace_parse_json(const char *text, size_t n, const char *name, clcrt_trace **out) {
  *out = NULL;
  if (!n) return clcrt__fail_norts(CLCRT_E_CORRUPT, "clcrt_trace_load_json: %s: the file is empty", name);
  loader l;
  memset(&l, 0, sizeof l);
  l.st = CLCRT_E_CORRUPT;
  clcrt__jp_init(&l.j, text, n);
  if (read_doc(&l) != 0) {
    char where[96];
    clcrt__jp_where(&l.j, l.j.err_at, where, sizeof where);
    clcrt__free(l.rec);
    return clcrt__fail_norts(l.st, "clcrt_trace_load_json: %s: %s: %s", name, where, l.j.err);
  }
  /* Already checked record by record, so only memory can fail here. */
  return clcrt__trace_build(l.rec, l.n, l.dropped, 0, CLCRT_E_CORRUPT, out);
}

clcrt_status clcrt_trace_load_json(const char *path, clcrt_trace **out) {
  if (!path || !out)
    return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_trace_load_json: %s is NULL", path ? "out" : "path");
  *out = NULL;
  char *data = NULL;
  size_t size = 0;
  clcrt_status st = read_file(path, &data, &size);
  if (st != CLCRT_OK) return st;
  st = clcrt__trace_parse_json(data, size, path, out);
  clcrt__free(data);
  return st;
}
