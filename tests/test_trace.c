/* Timeline traces on the host (runtime/trace*.c, runtime/trace/json_parse.c) and `clcrt trace`:
 * building traces from records, the Perfetto JSON writer (checked field by field with
 * Python's json where python3 is there), exact round trips, the summary on hand-computed
 * cases, hostile files for the loader and the tool, every allocation failing in turn, and
 * the pictures (PNG header and pixels, well-formed SVG). The 1M-record export is timed and
 * printed, not asserted: targets live in benchmarks, not in timed tests. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "clcrt.h"
#include "trace.h"

static char tmpdir[256];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/clcrt-test-trace-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void) {
  clcrt__alloc_fail_after(0);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

/* A path in the test's directory, in one of four buffers used in turn: copy one that
 * must outlive three more calls. */
static const char *tpath(const char *name) {
  static char buf[4][512];
  static int k;
  char *b = buf[k++ % 4];
  snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
  return b;
}

static void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}
static void write_text(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  char *b = malloc(cap + 1);
  size_t r;
  while (b && (r = fread(b + len, 1, cap - len, f)) > 0) {
    len += r;
    if (len == cap) b = realloc(b, (cap *= 2) + 1);
  }
  fclose(f);
  if (b) b[len] = 0;
  *n = len;
  return b;
}

static int have_python(void) { return system("command -v python3 >/dev/null 2>&1") == 0; }

/* Runs python3 on a script with arguments; returns its exit status. */
static int python(const char *script, const char *args) {
  const char *sp = tpath("check.py");
  write_text(sp, script);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "python3 %s %s", sp, args);
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static clcrt_trace_record rec(uint64_t start, uint64_t end, unsigned sm, unsigned cluster, uint64_t tile) {
  clcrt_trace_record r;
  memset(&r, 0, sizeof r);
  r.start_ns = start;
  r.end_ns = end;
  r.sm = (uint16_t)sm;
  r.cluster = cluster;
  r.tile = tile;
  r.unit = (uint32_t)tile;
  return r;
}

/* A work-stealing schedule: nsm SMs x per CTAs, each taking the next tile when it is
 * free; 5% of the tiles cost 50x. Starts near a real %globaltimer value. */
static clcrt_trace_record *simulate(unsigned nsm, unsigned per, size_t n, unsigned run, uint64_t seed) {
  unsigned nc = nsm * per;
  uint64_t *free_at = calloc(nc, sizeof *free_at);
  clcrt_trace_record *r = calloc(n, sizeof *r);
  ck_assert(free_at && r);
  rng_state = seed;
  const uint64_t base = 1763800000000000000ull;
  for (size_t i = 0; i < n; i++) {
    unsigned c = 0;
    for (unsigned k = 1; k < nc; k++)
      if (free_at[k] < free_at[c]) c = k;
    uint64_t d = 2000 + rnd() % 500;
    if (rnd() % 20 == 0) d *= 50;
    r[i] = rec(base + free_at[c] + 100, base + free_at[c] + 100 + d, c % nsm, c, i);
    r[i].flags = free_at[c] ? CLCRT_TRACE_STOLEN : 0;
    r[i].cta_rank = 0;
    r[i].run = run;
    free_at[c] += 100 + d;
  }
  free(free_at);
  return r;
}

static clcrt_trace *make(const clcrt_trace_record *r, size_t n, unsigned long long dropped) {
  clcrt_trace *t = NULL;
  ck_assert_msg(clcrt_trace_create(r, n, dropped, &t) == CLCRT_OK, "%s", clcrt_errmsg(NULL));
  return t;
}

static void summarize(const clcrt_trace *t, clcrt_trace_summary *s) {
  memset(s, 0xff, sizeof *s);
  s->size = sizeof *s;
  ck_assert_msg(clcrt_trace_summarize(t, s) == CLCRT_OK, "%s", clcrt_errmsg(NULL));
}

/* ---- building traces ---- */

START_TEST(create_sorts_and_checks) {
  clcrt_trace_record r[6] = {rec(50, 60, 3, 0, 9), rec(10, 20, 2, 0, 7), rec(10, 30, 1, 0, 8),
                             rec(10, 20, 2, 0, 5), rec(10, 20, 2, 0, 5), rec(0, 5, 0, 0, 1)};
  r[3].unit = 100; /* r[3] and r[4] tie on everything sorted: their order must stay */
  r[4].unit = 200;
  r[2].reserved = 77;
  clcrt_trace *t = make(r, 6, 0);
  size_t n;
  const clcrt_trace_record *s = clcrt_trace_records(t, &n);
  ck_assert_uint_eq(n, 6);
  uint64_t want_tile[6] = {1, 8, 5, 5, 7, 9};
  for (int i = 0; i < 6; i++) ck_assert_uint_eq(s[i].tile, want_tile[i]);
  ck_assert_uint_eq(s[2].unit, 100);
  ck_assert_uint_eq(s[3].unit, 200);
  ck_assert_uint_eq(s[1].reserved, 0);
  ck_assert_uint_eq(r[2].reserved, 77); /* the caller's records are copied, not touched */
  clcrt_trace_destroy(t);

  /* Refusals, each with its message in clcrt_errmsg(NULL). */
  clcrt_trace_record bad = rec(100, 99, 0, 0, 4);
  ck_assert_int_eq(clcrt_trace_create(&bad, 1, 0, &t), CLCRT_E_INVALID);
  ck_assert_ptr_null(t);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(NULL), "ends before it starts"));
  bad = rec(1, 2, CLCRT_TRACE_MAX_SMS, 0, 4);
  ck_assert_int_eq(clcrt_trace_create(&bad, 1, 0, &t), CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(NULL), "CLCRT_TRACE_MAX_SMS"));
  ck_assert_int_eq(clcrt_trace_create(NULL, 3, 0, &t), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_trace_create(r, 1, 0, NULL), CLCRT_E_INVALID);
  /* An empty trace, and NULL everywhere. */
  ck_assert_int_eq(clcrt_trace_create(NULL, 0, 7, &t), CLCRT_OK);
  ck_assert_ptr_null(clcrt_trace_records(t, &n));
  ck_assert_uint_eq(n, 0);
  ck_assert_uint_eq(clcrt_trace_dropped(t), 7);
  clcrt_trace_destroy(t);
  clcrt_trace_destroy(NULL);
  ck_assert_ptr_null(clcrt_trace_records(NULL, &n));
  ck_assert_uint_eq(n, 0);
  ck_assert_uint_eq(clcrt_trace_dropped(NULL), 0);
  ck_assert_int_eq(clcrt_trace_save_json(NULL, tpath("x.json")), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_trace_load_json(NULL, &t), CLCRT_E_INVALID);
  clcrt_trace_summary sum = {.size = sizeof sum};
  ck_assert_int_eq(clcrt_trace_summarize(NULL, &sum), CLCRT_E_INVALID);
}
END_TEST

START_TEST(adopt_drops_holes) {
  clcrt_trace_record *r = clcrt__malloc(5 * sizeof *r);
  r[0] = rec(30, 40, 1, 0, 3);
  r[1] = rec(0, 0, 0, 0, 99); /* holes: never filled by the device */
  r[2] = rec(10, 20, 0, 0, 1);
  r[3] = rec(12345, 0, 2, 0, 98);
  r[4] = rec(20, 30, 1, 0, 2);
  clcrt_trace *t = NULL;
  ck_assert_int_eq(clcrt__trace_adopt(r, 5, 3, &t), CLCRT_OK);
  size_t n;
  const clcrt_trace_record *s = clcrt_trace_records(t, &n);
  ck_assert_uint_eq(n, 3);
  ck_assert_uint_eq(s[0].tile, 1);
  ck_assert_uint_eq(s[1].tile, 2);
  ck_assert_uint_eq(s[2].tile, 3);
  ck_assert_uint_eq(clcrt_trace_dropped(t), 3);
  clcrt_trace_destroy(t);
  /* Garbage from the device is refused, and the array still freed (ASan checks). */
  r = clcrt__malloc(2 * sizeof *r);
  r[0] = rec(10, 20, 0, 0, 1);
  r[1] = rec(50, 40, 0, 0, 2);
  ck_assert_int_eq(clcrt__trace_adopt(r, 2, 0, &t), CLCRT_E_CORRUPT);
  ck_assert_ptr_null(t);
  ck_assert_int_eq(clcrt__trace_adopt(NULL, 0, 0, &t), CLCRT_OK);
  ck_assert_uint_eq(clcrt_trace_records(t, &n) == NULL && n == 0, 1);
  clcrt_trace_destroy(t);
  r = clcrt__malloc(sizeof *r);
  ck_assert_int_eq(clcrt__trace_adopt(r, 1, 0, NULL), CLCRT_E_INVALID);
}
END_TEST

/* ---- the summary, on cases worked out by hand ---- */

START_TEST(summary_by_hand) {
  clcrt_trace_summary s;
  /* One SM: [0,10] and [5,15] overlap (two CTAs), [20,30] after an idle gap, [22,25]
   * nested: busy 15 + 10 = 25 of a span of 30; one SM, so no tail. */
  clcrt_trace_record a[4] = {rec(1000, 1010, 0, 0, 0), rec(1005, 1015, 0, 1, 1), rec(1020, 1030, 0, 0, 2),
                             rec(1022, 1025, 0, 1, 3)};
  a[1].flags = CLCRT_TRACE_STOLEN;
  a[3].flags = CLCRT_TRACE_STOLEN | 0x80;
  clcrt_trace *t = make(a, 4, 2);
  summarize(t, &s);
  ck_assert_uint_eq(s.tiles, 4);
  ck_assert_uint_eq(s.steals, 2);
  ck_assert_uint_eq(s.runs, 1);
  ck_assert_uint_eq(s.dropped, 2);
  ck_assert_uint_eq(s.num_sms, 1);
  ck_assert_double_eq(s.span_ns, 30);
  ck_assert_double_eq_tol(s.busy_fraction[0], 25.0 / 30, 1e-12);
  ck_assert_double_eq_tol(s.busy_mean, 25.0 / 30, 1e-12);
  ck_assert_double_eq(s.imbalance, 1);
  ck_assert_double_eq(s.tail_ns, 0);
  clcrt_trace_destroy(t);

  /* SM 0 busy [0,100]; SM 1 [0,40] and [60,80], idle between; SM 3 [40,50] and [50,60],
   * which touch: busy 100, 60 and 20 of a span of 100, mean 60, imbalance 100 / 60. SM 3
   * goes idle for good first, at 60; the last tile ends at 100: tail 40. SM 2 ran
   * nothing: num_sms is still 4, and SM 2 does not count in the means. Runs 0, 5, 7. */
  clcrt_trace_record b[5] = {rec(0, 100, 0, 0, 0), rec(0, 40, 1, 1, 1), rec(60, 80, 1, 1, 2), rec(50, 60, 3, 2, 3),
                             rec(40, 50, 3, 2, 4)};
  b[0].run = 0, b[1].run = 0, b[2].run = 5, b[3].run = 7, b[4].run = 5;
  t = make(b, 5, 0);
  summarize(t, &s);
  ck_assert_uint_eq(s.num_sms, 4);
  ck_assert_uint_eq(s.runs, 3);
  ck_assert_double_eq(s.span_ns, 100);
  ck_assert_double_eq_tol(s.busy_fraction[0], 1.0, 1e-12);
  ck_assert_double_eq_tol(s.busy_fraction[1], 0.6, 1e-12);
  ck_assert_double_eq(s.busy_fraction[2], 0);
  ck_assert_double_eq_tol(s.busy_fraction[3], 0.2, 1e-12);
  ck_assert_double_eq_tol(s.busy_mean, (1.0 + 0.6 + 0.2) / 3, 1e-12);
  ck_assert_double_eq_tol(s.imbalance, 100.0 / (180.0 / 3), 1e-12);
  ck_assert_double_eq(s.tail_ns, 100 - 60);   /* SM 3 stopped first, at 60 */
  ck_assert_double_eq(s.busy_fraction[4], 0); /* beyond num_sms: zero, not left as it was */
  clcrt_trace_destroy(t);

  /* Tiles that take no time: span 0, nothing busy, no division by zero. */
  clcrt_trace_record c[2] = {rec(7, 7, 0, 0, 0), rec(7, 7, 5, 0, 1)};
  t = make(c, 2, 0);
  summarize(t, &s);
  ck_assert_uint_eq(s.num_sms, 6);
  ck_assert_double_eq(s.span_ns, 0);
  ck_assert_double_eq(s.busy_mean, 0);
  ck_assert_double_eq(s.imbalance, 0);
  ck_assert_double_eq(s.tail_ns, 0);
  clcrt_trace_destroy(t);

  /* Empty: all zero. */
  t = make(NULL, 0, 0);
  summarize(t, &s);
  ck_assert(s.tiles == 0 && s.steals == 0 && s.runs == 0 && s.num_sms == 0 && s.span_ns == 0 && s.tail_ns == 0 &&
            s.imbalance == 0 && s.busy_mean == 0 && s.busy_fraction[0] == 0);
  /* size: too small is refused; a shorter struct (an older caller's) gets only its part. */
  s.size = 0;
  ck_assert_int_eq(clcrt_trace_summarize(t, &s), CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(NULL), "sizeof(clcrt_trace_summary)"));
  clcrt_trace_destroy(t);
  t = make(b, 5, 0);
  memset(&s, 0xab, sizeof s);
  s.size = offsetof(clcrt_trace_summary, busy_fraction);
  ck_assert_int_eq(clcrt_trace_summarize(t, &s), CLCRT_OK);
  ck_assert_uint_eq(s.tiles, 5);
  unsigned char *tail = (unsigned char *)s.busy_fraction;
  ck_assert_uint_eq(tail[0], 0xab);
  clcrt_trace_destroy(t);
}
END_TEST

/* ---- the JSON writer ---- */

/* Perfetto's needs, checked on every event: ph, ts, pid, tid (from 1: Perfetto treats 0
 * as the kernel's idle task), name; dur on complete events; no arrays at an event's top
 * level; names for every process and track; ts/dur equal to the records' integers. */
static const char perfetto_check[] =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1]))\n"
    "want, dropped = int(sys.argv[2]), int(sys.argv[3])\n"
    "assert isinstance(d, dict) and isinstance(d['traceEvents'], list)\n"
    "assert d['displayTimeUnit'] == 'ns'\n"
    "od = d['otherData']\n"
    "assert od['clcrt_trace_version'] == 1 and od['records'] == want and od['dropped'] == dropped, od\n"
    "x, procs, threads, used, tracks = 0, set(), set(), set(), {}\n"
    "for e in d['traceEvents']:\n"
    "    for k in ('ph', 'ts', 'pid', 'tid', 'name'):\n"
    "        assert k in e, (k, e)\n"
    "    assert type(e['pid']) is int and e['pid'] >= 1 and type(e['tid']) is int and e['tid'] >= 1, e\n"
    "    assert isinstance(e['name'], str) and isinstance(e['ts'], (int, float)) and e['ts'] >= 0, e\n"
    "    assert not any(isinstance(v, list) for v in e.values()), e\n"
    "    if e['ph'] == 'X':\n"
    "        x += 1\n"
    "        a = e['args']\n"
    "        assert isinstance(e['dur'], (int, float)) and e['dur'] >= 0, e\n"
    "        for k in ('tile', 'unit', 'cluster', 'cta_rank', 'sm', 'start_ns', 'end_ns', 'run'):\n"
    "            assert type(a[k]) is int and a[k] >= 0, (k, e)\n"
    "        assert type(a['stolen']) is bool and e['cat'] == ('stolen' if a['stolen'] else 'own'), e\n"
    "        assert e['pid'] == a['run'] + 1 and (e['tid'] - 1) % 1024 == a['sm'], e\n"
    "        assert e['name'] == 'tile %d' % a['tile'], e\n"
    "        assert round(e['ts'] * 1000) == a['start_ns'] - od['t0_ns'], e\n"
    "        assert round(e['dur'] * 1000) == a['end_ns'] - a['start_ns'], e\n"
    "        used.add((e['pid'], e['tid']))\n"
    "        tracks.setdefault((e['pid'], e['tid']), []).append((a['start_ns'], a['end_ns']))\n"
    "    elif e['ph'] == 'M':\n"
    "        assert isinstance(e['args'], dict), e\n"
    "        if e['name'] == 'process_name':\n"
    "            procs.add(e['pid']); assert e['args']['name'] == 'run %d' % (e['pid'] - 1)\n"
    "        elif e['name'] == 'thread_name':\n"
    "            threads.add((e['pid'], e['tid'])); sm, lane = (e['tid'] - 1) % 1024, (e['tid'] - 1) // 1024\n"
    "            assert e['args']['name'] == ('SM %d lane %d' % (sm, lane) if lane else 'SM %d' % sm), e\n"
    "        else: assert e['name'] in ('process_sort_index', 'thread_sort_index'), e\n"
    "    else:\n"
    "        assert False, e\n"
    "assert x == want, (x, want)\n"
    "assert used <= threads and {p for p, t in used} <= procs, (used - threads, procs)\n"
    "for k, v in tracks.items():  # Perfetto drops complete events that overlap on a track\n"
    "    v.sort()\n"
    "    assert all(v[i][1] <= v[i + 1][0] for i in range(len(v) - 1)), ('overlap on track', k)\n";

static void check_perfetto(const char *path, size_t n, unsigned long long dropped) {
  if (!have_python()) return;
  char args[700];
  snprintf(args, sizeof args, "%s %zu %llu", path, n, dropped);
  ck_assert_msg(python(perfetto_check, args) == 0, "%s fails the trace-event checks", path);
}

START_TEST(json_writer) {
  /* A small trace, every field set, two runs. */
  clcrt_trace_record *r = simulate(8, 2, 300, 0, 1);
  for (size_t i = 150; i < 300; i++) r[i].run = 1, r[i].cta_rank = (uint8_t)(i % 3);
  clcrt_trace *t = make(r, 300, 0);
  ck_assert_int_eq(clcrt_trace_save_json(t, tpath("small.json")), CLCRT_OK);
  check_perfetto(tpath("small.json"), 300, 0);
  size_t n;
  char *text = slurp(tpath("small.json"), &n);
  ck_assert_ptr_nonnull(strstr(text, "\"name\":\"run 1\""));
  ck_assert_ptr_nonnull(strstr(text, "\"name\":\"SM 7\""));
  free(text);
  clcrt_trace_destroy(t);
  free(r);

  /* Tiles overlapping on one SM (nested, staggered, touching, empty) go on separate
   * tracks: the check above fails any overlap on a track. */
  clcrt_trace_record ov[8] = {rec(1000, 1100, 3, 0, 0), rec(1010, 1020, 3, 1, 1), rec(1015, 1030, 3, 2, 2),
                              rec(1020, 1040, 3, 1, 3), rec(1100, 1110, 3, 0, 4), rec(1100, 1100, 3, 3, 5),
                              rec(1030, 1200, 3, 2, 6), rec(1040, 1050, 4, 0, 7)};
  t = make(ov, 8, 0);
  ck_assert_int_eq(clcrt_trace_save_json(t, tpath("overlap.json")), CLCRT_OK);
  check_perfetto(tpath("overlap.json"), 8, 0);
  text = slurp(tpath("overlap.json"), &n);
  ck_assert_ptr_nonnull(strstr(text, "\"name\":\"SM 3 lane 2\""));
  ck_assert_ptr_null(strstr(text, "\"name\":\"SM 3 lane 3\"")); /* three at once at most */
  free(text);
  clcrt_trace_destroy(t);

  /* Empty: a valid document, no events, loads back empty. */
  t = make(NULL, 0, 0);
  ck_assert_int_eq(clcrt_trace_save_json(t, tpath("empty.json")), CLCRT_OK);
  check_perfetto(tpath("empty.json"), 0, 0);
  clcrt_trace_destroy(t);
  ck_assert_int_eq(clcrt_trace_load_json(tpath("empty.json"), &t), CLCRT_OK);
  ck_assert_ptr_null(clcrt_trace_records(t, &n));
  ck_assert_uint_eq(n, 0);
  clcrt_trace_destroy(t);

  /* Overflowed: the records that fit, and the count of those that did not. */
  r = simulate(4, 1, 64, 0, 2);
  t = make(r, 64, 123456789012345ull);
  ck_assert_int_eq(clcrt_trace_save_json(t, tpath("over.json")), CLCRT_OK);
  check_perfetto(tpath("over.json"), 64, 123456789012345ull);
  clcrt_trace_destroy(t);
  ck_assert_int_eq(clcrt_trace_load_json(tpath("over.json"), &t), CLCRT_OK);
  ck_assert_uint_eq(clcrt_trace_dropped(t), 123456789012345ull);
  clcrt_trace_destroy(t);
  free(r);

  /* The file is replaced whole; a directory that does not exist is an error. */
  write_text(tpath("old.json"), "old contents");
  t = make(NULL, 0, 1);
  ck_assert_int_eq(clcrt_trace_save_json(t, tpath("old.json")), CLCRT_OK);
  ck_assert_int_eq(clcrt_trace_save_json(t, "/nonexistent-dir/x.json"), CLCRT_E_IO);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(NULL), "nonexistent-dir"));
  ck_assert_int_eq(clcrt_trace_save_json(t, "/dev/null"), CLCRT_OK); /* written in place */
  clcrt_trace_destroy(t);
  ck_assert_int_eq(clcrt_trace_load_json(tpath("old.json"), &t), CLCRT_OK);
  ck_assert_uint_eq(clcrt_trace_dropped(t), 1);
  clcrt_trace_destroy(t);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "test $(ls %s | grep -c tmp) = 0", tmpdir);
  ck_assert_msg(system(cmd) == 0, "a temporary file was left behind");
}
END_TEST

static void round_trip(const clcrt_trace_record *r, size_t n, unsigned long long dropped, const char *what) {
  clcrt_trace *t = make(r, n, dropped), *u = NULL;
  ck_assert_int_eq(clcrt_trace_save_json(t, tpath("rt.json")), CLCRT_OK);
  ck_assert_msg(clcrt_trace_load_json(tpath("rt.json"), &u) == CLCRT_OK, "%s: %s", what, clcrt_errmsg(NULL));
  size_t a, b;
  const clcrt_trace_record *x = clcrt_trace_records(t, &a), *y = clcrt_trace_records(u, &b);
  ck_assert_uint_eq(a, b);
  ck_assert_msg(a == 0 || memcmp(x, y, a * sizeof *x) == 0, "%s: records differ after a round trip", what);
  ck_assert_uint_eq(clcrt_trace_dropped(u), dropped);
  clcrt_trace_destroy(t);
  clcrt_trace_destroy(u);
}

START_TEST(exact_round_trip) {
  static const size_t sizes[] = {1, 2, 17, 1000, 30000};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    size_t n = sizes[k];
    clcrt_trace_record *r = calloc(n, sizeof *r);
    rng_state = 1000 + k;
    for (size_t i = 0; i < n; i++) {
      /* Every field over its whole range, times included: the integers must survive. */
      uint64_t a = rnd(), b = rnd();
      if (k == 1) a = UINT64_MAX, b = UINT64_MAX - (i == 0); /* the extremes */
      r[i].start_ns = a < b ? a : b;
      r[i].end_ns = a < b ? b : a;
      r[i].tile = rnd();
      r[i].unit = (uint32_t)rnd();
      r[i].cluster = (uint32_t)rnd();
      r[i].run = (uint32_t)(k == 4 ? rnd() % 7 : rnd());
      r[i].sm = (uint16_t)(rnd() % CLCRT_TRACE_MAX_SMS);
      r[i].cta_rank = (uint8_t)rnd();
      r[i].flags = (uint8_t)rnd();
    }
    char what[64];
    snprintf(what, sizeof what, "%zu random records", n);
    round_trip(r, n, k == 2 ? ~0ull : rnd(), what);
    free(r);
  }
  clcrt_trace_record *r = simulate(132, 2, 5000, 3, 9);
  round_trip(r, 5000, 0, "a simulated schedule");
  check_perfetto(tpath("rt.json"), 5000, 0);
  free(r);
}
END_TEST

/* ---- hostile files ---- */

typedef struct hostile {
  const char *what, *text, *expect; /* expect: a part of the message */
} hostile;

#define EV(args) "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":0.01,\"name\":\"t\",\"args\":{" args "}}"
#define OK_ARGS "\"tile\":1,\"unit\":1,\"cluster\":0,\"cta_rank\":0,\"sm\":0,\"stolen\":false,\"run\":0"
#define GOOD EV(OK_ARGS ",\"start_ns\":10,\"end_ns\":20")
#define DOC(events) "{\"traceEvents\":[" events "]}"

static const hostile hostiles[] = {
    {"truncated", "{\"traceEvents\":[" GOOD, "the file ends inside an array"},
    {"truncated in a string", "{\"traceEvents\":[{\"ph\":\"X", "never ends"},
    {"truncated in a number", "{\"traceEvents\":[{\"ts\":-", "digit after '-'"},
    {"not JSON", "hello world", "expected a value, found 'h'"},
    {"HTML", "<html><body>404</body></html>", "found '<'"},
    {"a string document", "\"traceEvents\"", "the document is a string"},
    {"traceEvents an object", "{\"traceEvents\":{}}", "traceEvents is an object, not an array"},
    {"an event a number", DOC("5"), "traceEvents[0] is a number, not an object"},
    {"args an array", DOC("{\"ph\":\"X\",\"args\":[1]}"), "traceEvents[0].args is an array, not an object"},
    {"ph a number", DOC("{\"ph\":88}"), "traceEvents[0].ph is a number, not a string"},
    {"ts a string", DOC("{\"ph\":\"X\",\"ts\":\"12\"}"), "traceEvents[0].ts is a string, not a number"},
    {"start_ns a string", DOC(EV(OK_ARGS ",\"start_ns\":\"10\",\"end_ns\":20")),
     "traceEvents[0].args.start_ns is a string, not an unsigned integer"},
    {"stolen a string", DOC(EV("\"stolen\":\"yes\"")), "args.stolen is a string"},
    {"start_ns 10^30", DOC(EV(OK_ARGS ",\"start_ns\":1000000000000000000000000000000,\"end_ns\":20")),
     "does not fit in 64 bits"},
    {"start_ns 2^64", DOC(EV(OK_ARGS ",\"start_ns\":18446744073709551616,\"end_ns\":20")), "does not fit in 64 bits"},
    {"start_ns 1e30", DOC(EV(OK_ARGS ",\"start_ns\":1e30,\"end_ns\":20")), "is not an integer"},
    {"start_ns 1.5", DOC(EV(OK_ARGS ",\"start_ns\":1.5,\"end_ns\":20")), "is not an integer"},
    {"sm too big", DOC(EV("\"sm\":5000")), "args.sm = 5000 is out of range (at most 1023)"},
    {"cta_rank 256", DOC(EV("\"cta_rank\":256")), "out of range (at most 255)"},
    {"run 2^32", DOC(EV("\"run\":4294967296")), "out of range"},
    {"negative tile", DOC(EV("\"tile\":-1")), "args.tile = -1 is negative"},
    {"negative duration", DOC(EV(OK_ARGS ",\"start_ns\":30,\"end_ns\":20")), "negative duration"},
    {"negative dur", DOC("{\"ph\":\"X\",\"dur\":-1.5,\"args\":{" OK_ARGS ",\"start_ns\":10,\"end_ns\":20}}"),
     "negative dur"},
    {"missing end_ns", DOC(EV(OK_ARGS ",\"start_ns\":10")), "a tile event without args.end_ns"},
    {"missing sm",
     DOC(EV("\"tile\":1,\"unit\":1,\"cluster\":0,\"cta_rank\":0,\"stolen\":false,\"run\":0,"
            "\"start_ns\":1,\"end_ns\":2")),
     "without args.sm"},
    {"records mismatch", "{\"otherData\":{\"clcrt_trace_version\":1,\"records\":2},\"traceEvents\":[" GOOD "]}",
     "says 2 tile events, the file holds 1"},
    {"newer version", "{\"otherData\":{\"clcrt_trace_version\":2},\"traceEvents\":[]}", "newer clcrt"},
    {"not ours", DOC("{\"ph\":\"X\",\"ts\":1,\"dur\":2,\"pid\":1,\"tid\":1,\"name\":\"x\"}"),
     "not a trace written by clcrt_trace_save_json"},
    {"garbage after", DOC(GOOD) " x", "'x' after the end of the JSON document"},
    {"two documents", DOC(GOOD) DOC(GOOD), "after the end of the JSON document"},
    {"trailing comma", DOC(GOOD ","), "expected a value, found ']'"},
    {"leading zero", DOC("{\"ts\":01}"), "leading zeros"},
    {"bad escape", DOC("{\"name\":\"a\\x\"}"), "invalid escape"},
    {"bad \\u", DOC("{\"name\":\"a\\u12G4\"}"), "four hex digits"},
    {"raw newline in a string", DOC("{\"name\":\"a\nb\"}"), "byte 0x0a inside a string"},
    {"missing colon", "{\"traceEvents\" []}", "expected ':' after a key"},
    {"bare word", DOC("{\"foo\":tru}"), "expected true"},
    {"a second traceEvents", "{\"traceEvents\":[],\"traceEvents\":[]}", "a second traceEvents"},
    {"a huge number", NULL, "does not fit in 64 bits"}, /* built below: 100000 digits */
    {"deep nesting", NULL, "nested more than 64 deep"}, /* built below */
    {"NUL in a string", NULL, "byte 0x00 inside a string"},
    {"NUL between values", NULL, "byte 0x00"},
};

/* The text of hostiles[i] (built for the ones too big or too binary for a literal). */
static char *hostile_text(size_t i, size_t *n) {
  const hostile *h = &hostiles[i];
  char *b;
  if (h->text) {
    *n = strlen(h->text);
    b = malloc(*n + 1);
    memcpy(b, h->text, *n + 1);
    return b;
  }
  b = calloc(1, 300000);
  if (strcmp(h->what, "a huge number") == 0) {
    strcpy(b, "{\"traceEvents\":[{\"ph\":\"X\",\"args\":{\"tile\":");
    size_t k = strlen(b);
    memset(b + k, '7', 100000);
    strcpy(b + k + 100000, "}}]}");
    *n = strlen(b);
  } else if (strcmp(h->what, "deep nesting") == 0) {
    strcpy(b, "{\"traceEvents\":[{\"args\":{\"x\":");
    size_t k = strlen(b);
    memset(b + k, '[', 100000);
    *n = k + 100000;
  } else if (strcmp(h->what, "NUL in a string") == 0) {
    *n = (size_t)sprintf(b, "{\"traceEvents\":[{\"name\":\"ab");
    b[(*n)++] = 0;
    *n += (size_t)sprintf(b + *n, "c\"}]}");
  } else {
    *n = (size_t)sprintf(b, "{\"traceEvents\":[");
    b[(*n)++] = 0;
    *n += (size_t)sprintf(b + *n, "]}");
  }
  return b;
}

START_TEST(load_hostile) {
  for (size_t i = 0; i < sizeof hostiles / sizeof *hostiles; i++) {
    size_t n;
    char *text = hostile_text(i, &n);
    write_bytes(tpath("h.json"), text, n);
    free(text);
    clcrt_trace *t = (clcrt_trace *)1;
    clcrt_status st = clcrt_trace_load_json(tpath("h.json"), &t);
    const char *msg = clcrt_errmsg(NULL);
    ck_assert_msg(st == CLCRT_E_CORRUPT, "%s: status %s (%s)", hostiles[i].what, clcrt_status_name(st), msg);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(msg, hostiles[i].expect) != NULL, "%s: expected \"%s\" in: %s", hostiles[i].what,
                  hostiles[i].expect, msg);
    ck_assert_msg(strstr(msg, "line ") && strstr(msg, "byte "), "%s: no position in: %s", hostiles[i].what, msg);
  }
  /* What is accepted: the bare array form, escaped keys, ts of any size, extra fields. */
  write_text(tpath("ok.json"), "[" GOOD ",\n " EV(OK_ARGS ",\"start_ns\":1,\"end_ns\":2,\"extra\":[{}]") "]");
  clcrt_trace *t;
  ck_assert_msg(clcrt_trace_load_json(tpath("ok.json"), &t) == CLCRT_OK, "%s", clcrt_errmsg(NULL));
  size_t n;
  ck_assert_uint_eq(clcrt_trace_records(t, &n)[0].start_ns, 1);
  ck_assert_uint_eq(n, 2);
  clcrt_trace_destroy(t);
  write_text(tpath("ok.json"), "{\"tr\\u0061ceEvents\":[{\"ph\":\"X\",\"ts\":1e400,\"args\":{" OK_ARGS
                               ",\"st\\u0061rt_ns\":5,\"end_ns\":6}}], \"otherData\": \"free-form\"}");
  ck_assert_msg(clcrt_trace_load_json(tpath("ok.json"), &t) == CLCRT_OK, "%s", clcrt_errmsg(NULL));
  ck_assert_uint_eq(clcrt_trace_records(t, &n)[0].start_ns, 5);
  clcrt_trace_destroy(t);
  /* Files that are not files. */
  ck_assert_int_eq(clcrt_trace_load_json(tmpdir, &t), CLCRT_E_IO);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(NULL), "is a directory"));
  ck_assert_int_eq(clcrt_trace_load_json(tpath("missing.json"), &t), CLCRT_E_IO);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(NULL), "No such file"));
  ck_assert_int_eq(mkfifo(tpath("fifo"), 0600), 0);
  ck_assert_int_eq(clcrt_trace_load_json(tpath("fifo"), &t), CLCRT_E_IO); /* must not block */
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(NULL), "not a regular file"));
  write_text(tpath("empty.json"), "");
  ck_assert_int_eq(clcrt_trace_load_json(tpath("empty.json"), &t), CLCRT_E_CORRUPT);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(NULL), "empty"));
}
END_TEST

/* A real file cut at every length, and with bytes flipped at random: an error or a trace,
 * never a crash (ASan and UBSan watch the same run in make test-asan). */
START_TEST(load_cut_and_flipped) {
  clcrt_trace_record *r = simulate(3, 2, 12, 0, 4);
  clcrt_trace *t = make(r, 12, 5);
  free(r);
  ck_assert_int_eq(clcrt_trace_save_json(t, tpath("good.json")), CLCRT_OK);
  clcrt_trace_destroy(t);
  size_t n;
  char *good = slurp(tpath("good.json"), &n);
  size_t last = (size_t)(strrchr(good, '}') - good);
  for (size_t cut = 0; cut <= last; cut++) {
    write_bytes(tpath("cut.json"), good, cut);
    clcrt_status st = clcrt_trace_load_json(tpath("cut.json"), &t);
    ck_assert_msg(st == CLCRT_E_CORRUPT, "cut at %zu of %zu: %s", cut, n, clcrt_status_name(st));
  }
  char *bad = malloc(n);
  rng_state = 77;
  int ok = 0;
  for (int k = 0; k < 3000; k++) {
    memcpy(bad, good, n);
    for (int f = 0, nf = 1 + (int)(rnd() % 4); f < nf; f++) bad[rnd() % n] = (char)rnd();
    write_bytes(tpath("flip.json"), bad, n);
    clcrt_status st = clcrt_trace_load_json(tpath("flip.json"), &t);
    ck_assert_msg(st == CLCRT_OK || st == CLCRT_E_CORRUPT, "flip %d: %s", k, clcrt_status_name(st));
    if (st == CLCRT_OK) ok++, clcrt_trace_destroy(t);
    else ck_assert(strlen(clcrt_errmsg(NULL)) > 20);
  }
  printf("trace: 3000 damaged copies of a %zu-byte trace: %d still loaded, %d refused\n", n, ok, 3000 - ok);
  free(bad);
  free(good);
}
END_TEST

/* ---- every allocation failing in turn ---- */

START_TEST(allocation_failures) {
  clcrt_trace_record *r = simulate(4, 2, 40, 0, 5);
  for (size_t i = 0; i < 40; i += 3) r[i].start_ns -= 5000; /* unsorted: the sort allocates */
  clcrt_trace *good = make(r, 40, 0);
  ck_assert_int_eq(clcrt_trace_save_json(good, tpath("oom.json")), CLCRT_OK);
  int nomem = 0;
  for (long k = 1;; k++) {
    clcrt_trace *t = NULL, *u = NULL;
    clcrt_trace_summary s = {.size = sizeof s};
    clcrt__alloc_fail_after(k);
    clcrt_status st = clcrt_trace_create(r, 40, 0, &t);
    if (st == CLCRT_OK) st = clcrt_trace_summarize(t, &s);
    if (st == CLCRT_OK) st = clcrt_trace_save_json(t, tpath("oom2.json"));
    if (st == CLCRT_OK) st = clcrt_trace_load_json(tpath("oom.json"), &u);
    long made = clcrt__alloc_fail_after(0);
    clcrt_trace_destroy(t);
    clcrt_trace_destroy(u);
    if (st == CLCRT_OK) {
      ck_assert_int_lt(made, k);
      break;
    }
    ck_assert_msg(st == CLCRT_E_NOMEM, "allocation %ld failing gave %s: %s", k, clcrt_status_name(st),
                  clcrt_errmsg(NULL));
    ck_assert_ptr_nonnull(strstr(clcrt_errmsg(NULL), "out of memory"));
    nomem++;
  }
  printf("trace: each of %d allocations failed in turn: CLCRT_E_NOMEM every time, then CLCRT_OK\n", nomem);
  ck_assert_int_ge(nomem, 8);
  clcrt_trace_destroy(good);
  free(r);
}
END_TEST

/* ---- the tool ---- */

static const char *tool(void) {
  const char *t = getenv("CLCRT_TEST_TOOL");
  return t && *t ? t : "build/clcrt";
}

static char *out_text, *err_text;

static int run(const char *fmt, ...) {
  char args[4096], cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "%s %s > %s/out 2> %s/err", tool(), args, tmpdir, tmpdir);
  int st = system(cmd);
  free(out_text);
  free(err_text);
  size_t n;
  out_text = slurp(tpath("out"), &n);
  err_text = slurp(tpath("err"), &n);
  ck_assert_msg(out_text && err_text, "could not read the output of: %s", cmd);
  ck_assert_msg(WIFEXITED(st), "killed: %s", cmd);
  if (WEXITSTATUS(st) && getenv("CLCRT_TEST_VERBOSE"))
    fprintf(stderr, "%s: exit %d:\n%s", cmd, WEXITSTATUS(st), err_text);
  return WEXITSTATUS(st);
}

static void has(const char *text, const char *what) {
  ck_assert_msg(strstr(text, what) != NULL, "expected \"%s\" in:\n%s", what, text);
}

/* Two runs on three SMs, by hand: run 0: SM 0 [0,1000] and [1000,2000], SM 1 [0,500]
 * (stolen). Run 1: SM 2 [5000,6000]. */
static void write_hand_trace(const char *path) {
  clcrt_trace_record r[4] = {rec(1000000, 1001000, 0, 0, 0), rec(1001000, 1002000, 0, 0, 1),
                             rec(1000000, 1000500, 1, 1, 2), rec(1005000, 1006000, 2, 2, 3)};
  r[2].flags = CLCRT_TRACE_STOLEN;
  r[3].run = 1;
  clcrt_trace *t = make(r, 4, 3);
  ck_assert_int_eq(clcrt_trace_save_json(t, path), CLCRT_OK);
  clcrt_trace_destroy(t);
}

START_TEST(tool_summary) {
  char p[512]; /* tpath's buffers rotate: a path kept across calls is copied */
  snprintf(p, sizeof p, "%s", tpath("hand.json"));
  write_hand_trace(p);
  ck_assert_int_eq(run("trace summary %s", p), 0);
  has(out_text, "4 tiles, 2 runs, 3 SMs, 1 stolen, 3 dropped");
  has(out_text, "span        6000 ns");
  has(out_text, "tail        5500 ns, 91.7% of the span"); /* SM 1 idle for good at 500 */
  has(out_text, "SM    0:  33.3   8.3  16.7");
  ck_assert_int_eq(run("trace summary --json %s", p), 0);
  has(out_text, "\"schema\": \"clcrt-trace-summary-1\"");
  has(out_text, "\"tiles\": 4, \"steals\": 1, \"runs\": 2, \"dropped\": 3, \"num_sms\": 3");
  has(out_text, "\"span_ns\": 6000, \"tail_ns\": 5500");
  if (have_python()) {
    char a[600];
    snprintf(a, sizeof a, "%s/out", tmpdir);
    ck_assert_int_eq(python("import json,sys; d=json.load(open(sys.argv[1])); assert len(d['busy_fraction'])==3\n", a),
                     0);
  }
  /* One run: SM 2 did not run in it. */
  ck_assert_int_eq(run("trace summary --run 0 --json %s", p), 0);
  has(out_text, "\"run\": 0");
  has(out_text, "\"tiles\": 3, \"steals\": 1, \"runs\": 1");
  has(out_text, "\"span_ns\": 2000, \"tail_ns\": 1500");
  ck_assert_int_eq(run("trace summary --run 9 %s", p), 2);
  has(err_text, "has no run 9 (its runs are 0 to 1)");
  /* Usage errors. */
  ck_assert_int_eq(run("trace"), 2);
  ck_assert_int_eq(run("trace frob %s", p), 2);
  has(err_text, "unknown subcommand");
  ck_assert_int_eq(run("trace summary"), 2);
  ck_assert_int_eq(run("trace summary %s %s", p, p), 2);
  ck_assert_int_eq(run("trace summary --bogus %s", p), 2);
  ck_assert_int_eq(run("trace summary --run x %s", p), 2);
  ck_assert_int_eq(run("trace summary --run -1 %s", p), 2);
  ck_assert_int_eq(run("trace summary -o x.png %s", p), 2);
  ck_assert_int_eq(run("trace --help"), 0);
  has(out_text, "usage: clcrt trace summary");
  has(out_text, "Exit codes");
  ck_assert_int_eq(run("--help"), 0);
  has(out_text, "  trace ");
}
END_TEST

START_TEST(tool_hostile) {
  static const char *const cases[][2] = {
      {"{\"traceEvents\":[{\"ph\":\"X\",\"args\":{\"tile\":", "the file ends"},
      {DOC(EV("\"tile\":\"many\"")), "args.tile is a string, not an unsigned integer"},
      {DOC(EV(OK_ARGS ",\"start_ns\":123456789012345678901234567890,\"end_ns\":1")), "does not fit in 64 bits"},
      {DOC(EV(OK_ARGS ",\"start_ns\":9,\"end_ns\":1")), "negative duration"},
      {"\x89PNG\r\n\x1a\n", "expected a value, found byte 0x89"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    write_text(tpath("bad.json"), cases[i][0]);
    ck_assert_int_eq(run("trace summary %s", tpath("bad.json")), 3);
    has(err_text, cases[i][1]);
    has(err_text, "line 1, column");
    ck_assert_int_eq(run("trace draw %s -o %s", tpath("bad.json"), tpath("bad.png")), 3);
    has(err_text, cases[i][1]);
    ck_assert_int_ne(access(tpath("bad.png"), F_OK), 0);
  }
  ck_assert_int_eq(run("trace summary %s", tpath("none.json")), 3);
  has(err_text, "No such file");
  ck_assert_int_eq(run("trace summary %s", tmpdir), 3);
  has(err_text, "is a directory");
  ck_assert_int_eq(run("trace summary /dev/zero"), 3);
  has(err_text, "not a regular file");
}
END_TEST

/* PNG: the signature and IHDR's width and height (big-endian, bytes 16..23). */
static void png_size(const char *path, unsigned *w, unsigned *h) {
  size_t n;
  unsigned char *d = (unsigned char *)slurp(path, &n);
  ck_assert_msg(d && n > 33, "%s: no PNG", path);
  ck_assert_int_eq(memcmp(d, "\x89PNG\r\n\x1a\n", 8), 0);
  ck_assert_int_eq(memcmp(d + 12, "IHDR", 4), 0);
  *w = (unsigned)d[16] << 24 | (unsigned)d[17] << 16 | (unsigned)d[18] << 8 | d[19];
  *h = (unsigned)d[20] << 24 | (unsigned)d[21] << 16 | (unsigned)d[22] << 8 | d[23];
  free(d);
}

/* Decodes the PNG (zlib and the five row filters, in Python) and looks down two columns:
 * at 30% of the width both SMs run (cluster 0's and cluster 1's colours appear), at 85%
 * only SM 1 does (cluster 0's colour must not appear there: idle is blank). */
static const char pixel_check[] =
    "import sys, zlib, struct\n"
    "d = open(sys.argv[1], 'rb').read()\n"
    "w, h, depth, ctype = struct.unpack('>IIBB', d[16:26])\n"
    "assert depth == 8 and ctype == 2\n"
    "pos, idat = 8, b''\n"
    "while pos < len(d):\n"
    "    n, = struct.unpack('>I', d[pos:pos + 4]); kind = d[pos + 4:pos + 8]\n"
    "    if kind == b'IDAT': idat += d[pos + 8:pos + 8 + n]\n"
    "    pos += 12 + n\n"
    "raw, stride, prev, rows = zlib.decompress(idat), w * 3, bytearray(w * 3), []\n"
    "for y in range(h):\n"
    "    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])\n"
    "    for i in range(stride):\n"
    "        a = line[i - 3] if i >= 3 else 0; b = prev[i]; c = prev[i - 3] if i >= 3 else 0\n"
    "        if f == 1: line[i] = (line[i] + a) & 255\n"
    "        elif f == 2: line[i] = (line[i] + b) & 255\n"
    "        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255\n"
    "        elif f == 4:\n"
    "            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)\n"
    "            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255\n"
    "    rows.append(line); prev = line\n"
    "def column(x): return {tuple(rows[y][x * 3:x * 3 + 3]) for y in range(h)}\n"
    "def seen(c, col): return c in col or tuple(v * 3 // 5 for v in c) in col  # a tile's darker first column\n"
    "c0, c1 = (31, 119, 180), (255, 127, 14)\n"
    "early, late = column(int(w * 0.30)), column(int(w * 0.85))\n"
    "assert seen(c0, early) and seen(c1, early), 'both SMs run early'\n"
    "assert seen(c1, late) and not seen(c0, late), 'SM 0 is idle late'\n"
    "assert (255, 255, 255) in late\n";

START_TEST(tool_draw) {
  /* SM 0 (cluster 0) busy over the first half, SM 1 (cluster 1) over all of it. */
  clcrt_trace_record r[40];
  for (int i = 0; i < 20; i++) {
    r[i] = rec(1000000 + i * 5000, 1000000 + i * 5000 + 4900, 1, 1, (uint64_t)i);
    r[20 + i] = rec(1000000 + i * 2500, 1000000 + i * 2500 + 2400, 0, 0, 20 + (uint64_t)i);
  }
  clcrt_trace *t = make(r, 40, 0);
  char p[512];
  snprintf(p, sizeof p, "%s", tpath("two.json"));
  ck_assert_int_eq(clcrt_trace_save_json(t, p), CLCRT_OK);
  clcrt_trace_destroy(t);
  unsigned w, h;
  ck_assert_int_eq(run("trace draw %s -o %s", p, tpath("a.png")), 0);
  png_size(tpath("a.png"), &w, &h);
  ck_assert(w == 1200 && h == 800);
  ck_assert_int_eq(run("trace draw --width 640 --height 360 -o %s %s", tpath("b.PNG"), p), 0);
  png_size(tpath("b.PNG"), &w, &h);
  ck_assert(w == 640 && h == 360);
  if (have_python()) {
    char a[600];
    snprintf(a, sizeof a, "%s", tpath("b.PNG"));
    ck_assert_msg(python(pixel_check, a) == 0, "the picture does not show the schedule");
  }
  /* A time axis of 200 us for a trace of 100 us: the tiles end before the middle. */
  ck_assert_int_eq(run("trace draw --time-us 200 --width 640 --height 360 -o %s %s", tpath("d.png"), p), 0);
  png_size(tpath("d.png"), &w, &h);
  ck_assert(w == 640 && h == 360);
  if (have_python()) {
    char a[600];
    snprintf(a, sizeof a, "%s", tpath("d.png"));
    char check[sizeof pixel_check + 300];
    snprintf(check, sizeof check, "%s", pixel_check);
    /* Reuse the decoder: cut the assertions, check that 85% across is empty. */
    char *cut = strstr(check, "early, late =");
    ck_assert_ptr_nonnull(cut);
    snprintf(cut, sizeof check - (size_t)(cut - check), "%s",
             "early, late = column(int(w * 0.30)), column(int(w * 0.85))\n"
             "assert seen(c0, early) and seen(c1, early), 'both SMs run early'\n"
             "assert not seen(c0, late) and not seen(c1, late), 'past the end of the trace'\n");
    ck_assert_msg(python(check, a) == 0, "--time-us does not stretch the axis");
  }
  ck_assert_int_eq(run("trace draw --time-us 0 -o %s %s", tpath("x.png"), p), 2);
  ck_assert_int_eq(run("trace summary --time-us 5 %s", p), 2);
  ck_assert_int_eq(run("trace draw %s -o %s --width 1600 --height 900", p, tpath("c.svg")), 0);
  size_t n;
  char *svg = slurp(tpath("c.svg"), &n);
  has(svg, "width=\"1600\" height=\"900\"");
  has(svg, "<title>tile 0, unit 0, cluster 1");
  ck_assert_ptr_nonnull(strstr(svg, "</svg>"));
  free(svg);
  if (have_python()) {
    char a[600];
    snprintf(a, sizeof a, "%s", tpath("c.svg"));
    ck_assert_int_eq(python("import sys, xml.etree.ElementTree as E\n"
                            "r = E.parse(sys.argv[1]).getroot()\n"
                            "assert r.tag == '{http://www.w3.org/2000/svg}svg' and r.get('width') == '1600' and "
                            "r.get('height') == '900'\n"
                            "assert len(r.findall('{http://www.w3.org/2000/svg}rect')) >= 40\n",
                            a),
                     0);
  }
  /* An empty trace draws (axes, no tiles); a run of its own; output errors. */
  t = make(NULL, 0, 0);
  ck_assert_int_eq(clcrt_trace_save_json(t, tpath("empty.json")), CLCRT_OK);
  clcrt_trace_destroy(t);
  ck_assert_int_eq(run("trace draw %s -o %s", tpath("empty.json"), tpath("e.png")), 0);
  png_size(tpath("e.png"), &w, &h);
  ck_assert(w == 1200 && h == 800);
  write_hand_trace(tpath("hand.json"));
  ck_assert_int_eq(run("trace draw --run 1 %s -o %s", tpath("hand.json"), tpath("r.svg")), 0);
  svg = slurp(tpath("r.svg"), &n);
  has(svg, "1 tile on 3 SMs");
  has(svg, ", run 1");
  free(svg);
  ck_assert_int_eq(run("trace draw %s -o /nonexistent-dir/x.png", p), 3);
  ck_assert_int_eq(run("trace draw %s -o /nonexistent-dir/x.svg", p), 3);
  ck_assert_int_eq(run("trace draw %s -o %s", p, tpath("x.gif")), 2);
  ck_assert_int_eq(run("trace draw %s", p), 2);
  ck_assert_int_eq(run("trace draw --width 10 -o %s %s", tpath("x.png"), p), 2);
  ck_assert_int_eq(run("trace draw --height 99999 -o %s %s", tpath("x.png"), p), 2);
  ck_assert_int_eq(run("trace draw --width 16384 --height 16384 -o %s %s", tpath("x.png"), p), 2);
  ck_assert_int_eq(run("trace draw --json -o %s %s", tpath("x.png"), p), 2);
}
END_TEST

/* ---- a million tiles: timed, printed, not asserted ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

START_TEST(million_records) {
  const size_t n = 1000000;
  /* 132 SMs x 2 CTAs through 1M tiles by round robin (the stealing simulation is
   * quadratic in CTAs per tile, too slow for a test): each SM's tiles back to back. */
  clcrt_trace_record *r = calloc(n, sizeof *r);
  uint64_t at[264] = {0};
  rng_state = 3;
  for (size_t i = 0; i < n; i++) {
    unsigned c = (unsigned)(i % 264);
    uint64_t d = 2000 + rnd() % 3000;
    r[i] = rec(1763800000000000000ull + at[c], 1763800000000000000ull + at[c] + d, c % 132, c, i);
    r[i].flags = i >= 264 ? CLCRT_TRACE_STOLEN : 0;
    at[c] += d + 50;
  }
  double t0 = now_s();
  clcrt_trace *t = make(r, n, 0);
  double t1 = now_s();
  ck_assert_int_eq(clcrt_trace_save_json(t, tpath("m.json")), CLCRT_OK);
  double t2 = now_s();
  clcrt_trace *u;
  ck_assert_int_eq(clcrt_trace_load_json(tpath("m.json"), &u), CLCRT_OK);
  double t3 = now_s();
  clcrt_trace_summary s = {.size = sizeof s};
  ck_assert_int_eq(clcrt_trace_summarize(u, &s), CLCRT_OK);
  double t4 = now_s();
  size_t a, b;
  const clcrt_trace_record *x = clcrt_trace_records(t, &a), *y = clcrt_trace_records(u, &b);
  ck_assert(a == n && b == n && memcmp(x, y, n * sizeof *x) == 0);
  struct stat st;
  ck_assert_int_eq(stat(tpath("m.json"), &st), 0);
  ck_assert_int_eq(run("trace draw %s -o %s", tpath("m.json"), tpath("m.png")), 0);
  double t5 = now_s();
  ck_assert_int_eq(run("trace draw %s -o %s", tpath("m.json"), tpath("m.svg")), 0);
  double t6 = now_s();
  struct stat sv;
  ck_assert_int_eq(stat(tpath("m.svg"), &sv), 0);
  printf("trace: 1M records: create (sort) %.3f s, save_json %.3f s (%.0f MB), load_json %.3f s, summarize %.3f s; "
         "`clcrt trace draw` (load included) PNG %.2f s, SVG %.2f s (%.1f MB)\n",
         t1 - t0, t2 - t1, st.st_size / 1e6, t3 - t2, t4 - t3, t5 - t4, t6 - t5, sv.st_size / 1e6);
  clcrt_trace_destroy(t);
  clcrt_trace_destroy(u);
  free(r);
}
END_TEST

int main(void) {
  Suite *s = suite_create("trace");
  TCase *c = tcase_create("trace");
  tcase_add_checked_fixture(c, setup, teardown);
  tcase_set_timeout(c, 300);
  tcase_add_test(c, create_sorts_and_checks);
  tcase_add_test(c, adopt_drops_holes);
  tcase_add_test(c, summary_by_hand);
  tcase_add_test(c, json_writer);
  tcase_add_test(c, exact_round_trip);
  tcase_add_test(c, load_hostile);
  tcase_add_test(c, load_cut_and_flipped);
  tcase_add_test(c, allocation_failures);
  tcase_add_test(c, tool_summary);
  tcase_add_test(c, tool_hostile);
  tcase_add_test(c, tool_draw);
  tcase_add_test(c, million_records);
  suite_add_tcase(s, c);
  SRunner *r = srunner_create(s);
  srunner_set_fork_status(r, CK_FORK);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
