/* Traces as Chrome/Perfetto trace-event JSON: clcrt_trace_save_json (trace_load.c reads
 * the files back).
 *
 * The file:
 *   {"displayTimeUnit":"ns",
 *    "otherData":{"clcrt_trace_version":1,"records":N,"dropped":D,"runs":R,"t0_ns":T},
 *    "traceEvents":[
 *     {"ph":"M","pid":1,"tid":6,"ts":0,"name":"process_name","args":{"name":"run 0"}},
 *     {"ph":"M","pid":1,"tid":6,"ts":0,"name":"thread_name","args":{"name":"SM 5"}},
 *     {"ph":"M","pid":1,"tid":1030,"ts":0,"name":"thread_name","args":{"name":"SM 5 lane 1"}}, ...
 *     {"ph":"X","pid":1,"tid":6,"ts":0.250,"dur":1.125,"name":"tile 12","cat":"stolen",
 *      "args":{"tile":12,"unit":3,"cluster":2,"cta_rank":0,"sm":5,"stolen":true,
 *              "start_ns":1732000000000000250,"end_ns":1732000000000001375,"run":0}}, ...]}
 *
 *   - One process per run, one complete event per tile, and per SM as many threads
 *     (tracks) as it ran tiles at once, since Perfetto drops complete events that overlap
 *     on a track without nesting (see assign_lanes). pid is run + 1 and tid is
 *     1 + sm + 1024 * lane, so an SM whose tiles never overlap is tid sm + 1: Perfetto
 *     treats pid 0 and tid 0 as the kernel's idle task (its maintainers ask synthetic
 *     traces to start at 1). Names ("run 0", "SM 5", "SM 5 lane 1") and sort indices carry
 *     the real numbers.
 *   - ts and dur are microseconds with three decimals (exact nanoseconds), ts counted from
 *     the trace's first start (t0_ns): %globaltimer values near 1.7e18 ns do not survive a
 *     double, small offsets do. The records' own fields are in args as integers, and
 *     clcrt_trace_load_json reads only those, so a save and a load give back the records
 *     bit for bit.
 *   - Events carry no arrays: Perfetto's tokenizer refuses arrays at an event's top level.
 *
 * The writer formats every number itself into a 1 MiB buffer (no printf per field): a
 * trace of a million tiles is about 245 MB of JSON, and the target is a second. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "trace.h"

#define WBUF_CAP (1u << 20)
#define WBUF_SLACK 1024 /* more than one event, the longest thing written between checks */

typedef struct wbuf {
  char *buf;
  size_t len;
  int fd;
  int err; /* errno of the first failed write */
} wbuf;

static void wflush(wbuf *w) {
  size_t off = 0;
  while (off < w->len && !w->err) {
    ssize_t r = write(w->fd, w->buf + off, w->len - off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) w->err = r < 0 ? errno : EIO;
    else off += (size_t)r;
  }
  w->len = 0;
}

static inline void wmaybe(wbuf *w) {
  if (w->len > WBUF_CAP - WBUF_SLACK) wflush(w);
}

static inline void wput(wbuf *w, const char *s, size_t n) {
  memcpy(w->buf + w->len, s, n);
  w->len += n;
}
#define WLIT(w, lit) wput((w), lit, sizeof(lit) - 1)

static const char digits2[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                 "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                 "8081828384858687888990919293949596979899";

static inline void wu64(wbuf *w, uint64_t v) {
  char tmp[20];
  char *p = tmp + sizeof tmp;
  while (v >= 100) {
    unsigned d = (unsigned)(v % 100) * 2;
    v /= 100;
    *--p = digits2[d + 1];
    *--p = digits2[d];
  }
  if (v >= 10) {
    *--p = digits2[v * 2 + 1];
    *--p = digits2[v * 2];
  } else {
    *--p = (char)('0' + v);
  }
  wput(w, p, (size_t)(tmp + sizeof tmp - p));
}

/* Nanoseconds as microseconds with exactly three decimals. */
static inline void wus(wbuf *w, uint64_t ns) {
  wu64(w, ns / 1000);
  unsigned f = (unsigned)(ns % 1000);
  char t[4] = {'.', (char)('0' + f / 100), (char)('0' + f / 10 % 10), (char)('0' + f % 10)};
  wput(w, t, 4);
}

/* Tracks. Perfetto drops a complete event that overlaps another on its track without
 * nesting in it, and the CTAs sharing an SM overlap all the time; so each SM gets as many
 * tracks ("lanes") as it ran tiles at once: a tile takes the lowest-numbered lane free at
 * its start (lane 0 is "SM k", the others "SM k lane j"). tid = 1 + sm + 1024 * lane. */
#define MAX_LANE ((1u << 20) - 1) /* tids stay below 2^30; a deeper SM shares its last lane */

typedef struct busy {
  uint64_t end;
  uint32_t lane;
} busy;

static int busy_less(busy a, busy b) { return a.end < b.end || (a.end == b.end && a.lane < b.lane); }

static void busy_push(busy *h, size_t *n, busy v) {
  size_t i = (*n)++;
  for (; i && busy_less(v, h[(i - 1) / 2]); i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
  h[i] = v;
}

static busy busy_pop(busy *h, size_t *n) {
  busy top = h[0], v = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && busy_less(h[c + 1], h[c])) c++;
    if (!busy_less(h[c], v)) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = v;
  return top;
}

static void lane_push(uint32_t *h, size_t *n, uint32_t v) {
  size_t i = (*n)++;
  for (; i && v < h[(i - 1) / 2]; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
  h[i] = v;
}

static uint32_t lane_pop(uint32_t *h, size_t *n) {
  uint32_t top = h[0], v = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] < h[c]) c++;
    if (h[c] >= v) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = v;
  return top;
}

/* Each record's lane, SM by SM in start order (a heap of busy lanes by end, a heap of
 * free lanes by number: O(n log lanes)). NULL when memory runs out. */
static uint32_t *assign_lanes(const clcrt_trace *t, uint32_t *max_lane) {
  size_t n = t->count, maxc = 1;
  uint32_t *first = clcrt__calloc(CLCRT_TRACE_MAX_SMS + 1, sizeof *first);
  uint32_t *order = clcrt__malloc((n ? n : 1) * sizeof *order);
  uint32_t *lane = clcrt__malloc((n ? n : 1) * sizeof *lane);
  busy *bh = NULL;
  uint32_t *fh = NULL;
  *max_lane = 0;
  if (!first || !order || !lane) goto fail;
  /* Records grouped by SM, in start order within each (a counting sort). */
  for (size_t i = 0; i < n; i++) first[t->rec[i].sm + 1]++;
  for (unsigned sm = 0; sm < CLCRT_TRACE_MAX_SMS; sm++) {
    if (first[sm + 1] > maxc) maxc = first[sm + 1];
    first[sm + 1] += first[sm];
  }
  for (size_t i = 0; i < n; i++) order[first[t->rec[i].sm]++] = (uint32_t)i;
  if (!(bh = clcrt__malloc(maxc * sizeof *bh)) || !(fh = clcrt__malloc(maxc * sizeof *fh))) goto fail;
  size_t k = 0;
  for (unsigned sm = 0; sm < CLCRT_TRACE_MAX_SMS; sm++) {
    size_t nb = 0, nf = 0;
    uint32_t lanes = 0;
    for (; k < first[sm]; k++) { /* first[sm] is now the end of SM sm's records */
      const clcrt_trace_record *r = &t->rec[order[k]];
      while (nb && bh[0].end <= r->start_ns) lane_push(fh, &nf, busy_pop(bh, &nb).lane);
      uint32_t l = nf ? lane_pop(fh, &nf) : lanes++;
      busy_push(bh, &nb, (busy){r->end_ns, l});
      lane[order[k]] = l;
      if (l > *max_lane) *max_lane = l;
    }
  }
  clcrt__free(first);
  clcrt__free(order);
  clcrt__free(bh);
  clcrt__free(fh);
  return lane;
fail:
  clcrt__free(first);
  clcrt__free(order);
  clcrt__free(lane);
  clcrt__free(bh);
  clcrt__free(fh);
  return NULL;
}

static uint64_t tid_of(const clcrt_trace_record *r, uint32_t lane) {
  return 1 + (uint64_t)r->sm + 1024ull * (lane < MAX_LANE ? lane : MAX_LANE);
}

static int u64_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Distinct (run, tid) pairs, sorted, for the process and thread names: an open-addressing
 * set sized for the most tracks there can be. */
static uint64_t *track_keys(const clcrt_trace *t, const uint32_t *lane, uint32_t max_lane, size_t *nkeys) {
  size_t bound = t->count, per_run = (size_t)CLCRT_TRACE_MAX_SMS * ((size_t)max_lane + 1);
  if (t->runs && per_run <= SIZE_MAX / t->runs && t->runs * per_run < bound) bound = t->runs * per_run;
  size_t cap = 16;
  while (cap < 2 * bound) cap *= 2;
  uint64_t *set = clcrt__calloc(cap, sizeof *set);
  uint64_t *list = clcrt__malloc((bound ? bound : 1) * sizeof *list);
  if (!set || !list) {
    clcrt__free(set);
    clcrt__free(list);
    return NULL;
  }
  size_t n = 0;
  uint64_t prev = 0;
  for (size_t i = 0; i < t->count; i++) {
    uint64_t key = (uint64_t)t->rec[i].run << 32 | tid_of(&t->rec[i], lane[i]); /* never 0: tid >= 1 */
    if (key == prev) continue;
    prev = key;
    size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
    while (set[h] && set[h] != key) h = (h + 1) & (cap - 1);
    if (!set[h]) {
      set[h] = key;
      list[n++] = key;
    }
  }
  clcrt__free(set);
  qsort(list, n, sizeof *list, u64_cmp);
  *nkeys = n;
  return list;
}

/* A metadata event: args {argkey: value}, or {argkey: "prefix<value>[ lane <lane>]"}. */
static void write_meta(wbuf *w, uint64_t pid, uint64_t tid, const char *name, const char *argkey, const char *prefix,
                       uint64_t value, uint64_t lane, int *first) {
  if (!*first) WLIT(w, ",\n");
  *first = 0;
  WLIT(w, "{\"ph\":\"M\",\"pid\":");
  wu64(w, pid);
  WLIT(w, ",\"tid\":");
  wu64(w, tid);
  WLIT(w, ",\"ts\":0,\"name\":\"");
  wput(w, name, strlen(name));
  WLIT(w, "\",\"args\":{\"");
  wput(w, argkey, strlen(argkey));
  WLIT(w, "\":");
  if (prefix) {
    WLIT(w, "\"");
    wput(w, prefix, strlen(prefix));
    wu64(w, value);
    if (lane) {
      WLIT(w, " lane ");
      wu64(w, lane);
    }
    WLIT(w, "\"}}");
  } else {
    wu64(w, value);
    WLIT(w, "}}");
  }
  wmaybe(w);
}

static void write_trace(wbuf *w, const clcrt_trace *t, const uint32_t *lane, const uint64_t *keys, size_t nkeys) {
  uint64_t t0 = t->count ? t->rec[0].start_ns : 0;
  WLIT(w, "{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"clcrt_trace_version\":");
  wu64(w, CLCRT__TRACE_JSON_VERSION);
  WLIT(w, ",\"records\":");
  wu64(w, t->count);
  WLIT(w, ",\"dropped\":");
  wu64(w, t->dropped);
  WLIT(w, ",\"runs\":");
  wu64(w, t->runs);
  WLIT(w, ",\"t0_ns\":");
  wu64(w, t0);
  WLIT(w, "},\n\"traceEvents\":[\n");
  int first = 1;
  for (size_t i = 0; i < nkeys; i++) {
    uint64_t run = keys[i] >> 32, tid = keys[i] & 0xffffffffu, sm = (tid - 1) % 1024, ln = (tid - 1) / 1024;
    if (i == 0 || run != keys[i - 1] >> 32) {
      /* A process's name event goes on a track that exists, its first. */
      write_meta(w, run + 1, tid, "process_name", "name", "run ", run, 0, &first);
      write_meta(w, run + 1, tid, "process_sort_index", "sort_index", NULL, run, 0, &first);
    }
    write_meta(w, run + 1, tid, "thread_name", "name", "SM ", sm, ln, &first);
    write_meta(w, run + 1, tid, "thread_sort_index", "sort_index", NULL, sm * 1024 + (ln < 1024 ? ln : 1023), 0,
               &first);
  }
  for (size_t i = 0; i < t->count && !w->err; i++) {
    const clcrt_trace_record *r = &t->rec[i];
    int stolen = (r->flags & CLCRT_TRACE_STOLEN) != 0;
    if (!first) WLIT(w, ",\n");
    first = 0;
    WLIT(w, "{\"ph\":\"X\",\"pid\":");
    wu64(w, (uint64_t)r->run + 1);
    WLIT(w, ",\"tid\":");
    wu64(w, tid_of(r, lane[i]));
    WLIT(w, ",\"ts\":");
    wus(w, r->start_ns - t0);
    WLIT(w, ",\"dur\":");
    wus(w, r->end_ns - r->start_ns);
    if (r->flags & CLCRT_TRACE_WAIT)
      WLIT(w, ",\"name\":\"wait ");
    else
      WLIT(w, ",\"name\":\"tile ");
    wu64(w, r->tile);
    if (stolen) WLIT(w, "\",\"cat\":\"stolen\",\"args\":{\"tile\":");
    else WLIT(w, "\",\"cat\":\"own\",\"args\":{\"tile\":");
    wu64(w, r->tile);
    WLIT(w, ",\"unit\":");
    wu64(w, r->unit);
    WLIT(w, ",\"cluster\":");
    wu64(w, r->cluster);
    WLIT(w, ",\"cta_rank\":");
    wu64(w, r->cta_rank);
    WLIT(w, ",\"sm\":");
    wu64(w, r->sm);
    if (stolen) WLIT(w, ",\"stolen\":true,\"start_ns\":");
    else WLIT(w, ",\"stolen\":false,\"start_ns\":");
    wu64(w, r->start_ns);
    WLIT(w, ",\"end_ns\":");
    wu64(w, r->end_ns);
    WLIT(w, ",\"run\":");
    wu64(w, r->run);
    if (r->flags & ~CLCRT_TRACE_STOLEN) { /* bits a later clcrt may define: kept for the round trip */
      WLIT(w, ",\"flags\":");
      wu64(w, r->flags);
    }
    WLIT(w, "}}");
    wmaybe(w);
  }
  WLIT(w, "\n]}\n");
  wflush(w);
}

/* A regular file (or a new one) is written under a temporary name and renamed, so a
 * failed save never leaves a half-written trace where a good one was; anything else (a
 * device, a FIFO, a symbolic link), or a file whose directory we may not write, is
 * written in place. */
clcrt_status clcrt_trace_save_json(const clcrt_trace *t, const char *path) {
  if (!t || !path)
    return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_trace_save_json: %s is NULL", t ? "path" : "the trace");
  clcrt_status st = CLCRT_OK;
  wbuf w = {.fd = -1};
  char *tmp = NULL;
  size_t nkeys = 0;
  uint32_t max_lane = 0, *lane = assign_lanes(t, &max_lane);
  uint64_t *keys = lane ? track_keys(t, lane, max_lane, &nkeys) : NULL;
  w.buf = clcrt__malloc(WBUF_CAP);
  if (!keys || !w.buf) {
    st = clcrt__fail_norts(CLCRT_E_NOMEM, "clcrt_trace_save_json: out of memory");
    goto done;
  }
  struct stat sb;
  int in_place = lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode);
  if (in_place) {
    w.fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  } else {
    static unsigned long counter;
    size_t n = strlen(path) + 64;
    if (!(tmp = clcrt__malloc(n))) {
      st = clcrt__fail_norts(CLCRT_E_NOMEM, "clcrt_trace_save_json: out of memory");
      goto done;
    }
    snprintf(tmp, n, "%s.tmp-%ld-%lu", path, (long)getpid(), __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    w.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (w.fd < 0 && errno == EACCES && access(path, W_OK) == 0) {
      /* A writable file in a directory we may not create files in: write it in place. */
      clcrt__free(tmp);
      tmp = NULL;
      w.fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    }
  }
  if (w.fd < 0) {
    st =
        clcrt__fail_norts(CLCRT_E_IO, "clcrt_trace_save_json: cannot create %s: %s", tmp ? tmp : path, strerror(errno));
    goto done;
  }
  write_trace(&w, t, lane, keys, nkeys);
  if (close(w.fd) != 0 && !w.err) w.err = errno;
  w.fd = -1;
  if (w.err) {
    st = clcrt__fail_norts(CLCRT_E_IO, "clcrt_trace_save_json: writing %s: %s", path, strerror(w.err));
    goto done;
  }
  if (tmp && rename(tmp, path) != 0) {
    st = clcrt__fail_norts(CLCRT_E_IO, "clcrt_trace_save_json: cannot rename %s to %s: %s", tmp, path, strerror(errno));
    goto done;
  }
  clcrt__free(tmp);
  tmp = NULL;
done:
  if (w.fd >= 0) close(w.fd);
  if (tmp) unlink(tmp);
  clcrt__free(tmp);
  clcrt__free(w.buf);
  clcrt__free(keys);
  clcrt__free(lane);
  return st;
}
