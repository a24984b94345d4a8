/* Timeline traces on the host: building a trace from records (the caller's, the device's,
 * a JSON file's), reading it back, and its summary. The JSON format is trace_json.c.
 *
 * A trace keeps its records sorted by start time, so every reader can walk them in one
 * pass: the summary merges each SM's intervals as they come, the JSON writer emits them in
 * time order, the tool draws them left to right. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "trace.h"

/* The sort key: start, SM, tile, then the position the record came in, so that the order
 * is total and qsort's lack of stability cannot show. */
typedef struct sort_key {
  uint64_t start, tile;
  uint32_t sm, idx;
} sort_key;

static int key_cmp(const void *a, const void *b) {
  const sort_key *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  if (x->sm != y->sm) return x->sm < y->sm ? -1 : 1;
  if (x->tile != y->tile) return x->tile < y->tile ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int rec_before(const clcrt_trace_record *x, const clcrt_trace_record *y) {
  if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns;
  if (x->sm != y->sm) return x->sm < y->sm;
  return x->tile < y->tile;
}

/* Sorts recs[0..n) in place. Files written by clcrt_trace_save_json come back sorted, so
 * that case costs one pass. Returns CLCRT_E_NOMEM (with a message) or CLCRT_OK. */
static clcrt_status sort_records(clcrt_trace_record *recs, size_t n) {
  size_t i = 1;
  while (i < n && !rec_before(&recs[i], &recs[i - 1])) i++;
  if (i >= n) return CLCRT_OK;
  if (n > UINT32_MAX)
    return clcrt__fail_norts(CLCRT_E_INVALID, "trace: %zu records are more than the 2^32 - 1 a trace holds", n);
  sort_key *keys = clcrt__malloc(n * sizeof *keys);
  clcrt_trace_record *tmp = clcrt__malloc(n * sizeof *tmp);
  if (!keys || !tmp) {
    clcrt__free(keys);
    clcrt__free(tmp);
    return clcrt__fail_norts(CLCRT_E_NOMEM, "trace: out of memory sorting %zu records", n);
  }
  for (i = 0; i < n; i++) keys[i] = (sort_key){recs[i].start_ns, recs[i].tile, recs[i].sm, (uint32_t)i};
  qsort(keys, n, sizeof *keys, key_cmp);
  for (i = 0; i < n; i++) tmp[i] = recs[keys[i].idx];
  memcpy(recs, tmp, n * sizeof *tmp);
  clcrt__free(keys);
  clcrt__free(tmp);
  return CLCRT_OK;
}

static int u32_cmp(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Distinct run numbers. Runs on one stream are ordered, so sorted by start time the run
 * numbers almost always come in non-decreasing order and one pass counts them; otherwise
 * a sorted copy does. 0 with *ok = 0 when memory runs out. */
static size_t count_runs(const clcrt_trace_record *recs, size_t n, int *ok) {
  *ok = 1;
  if (!n) return 0;
  size_t runs = 1, i;
  for (i = 1; i < n && recs[i].run >= recs[i - 1].run; i++) runs += recs[i].run != recs[i - 1].run;
  if (i == n) return runs;
  uint32_t *r = clcrt__malloc(n * sizeof *r);
  if (!r) {
    *ok = 0;
    return 0;
  }
  for (i = 0; i < n; i++) r[i] = recs[i].run;
  qsort(r, n, sizeof *r, u32_cmp);
  runs = 1;
  for (i = 1; i < n; i++) runs += r[i] != r[i - 1];
  clcrt__free(r);
  return runs;
}

clcrt_status clcrt__trace_build(clcrt_trace_record *recs, size_t n, unsigned long long dropped, int drop_holes,
                                clcrt_status bad, clcrt_trace **out) {
  clcrt_status st = CLCRT_OK;
  if (drop_holes) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
      if (recs[i].end_ns != 0) recs[k++] = recs[i];
    n = k;
  }
  for (size_t i = 0; i < n; i++) {
    if (recs[i].end_ns < recs[i].start_ns) {
      st = clcrt__fail_norts(bad, "trace: record %zu ends before it starts (start_ns %llu, end_ns %llu)", i,
                             (unsigned long long)recs[i].start_ns, (unsigned long long)recs[i].end_ns);
      goto fail;
    }
    if (recs[i].sm >= CLCRT_TRACE_MAX_SMS) {
      st = clcrt__fail_norts(bad, "trace: record %zu has SM id %u; SM ids must be below CLCRT_TRACE_MAX_SMS (%d)", i,
                             (unsigned)recs[i].sm, CLCRT_TRACE_MAX_SMS);
      goto fail;
    }
    recs[i].reserved = 0;
  }
  if ((st = sort_records(recs, n)) != CLCRT_OK) goto fail;
  int ok;
  size_t runs = count_runs(recs, n, &ok);
  if (!ok) {
    st = clcrt__fail_norts(CLCRT_E_NOMEM, "trace: out of memory counting the runs of %zu records", n);
    goto fail;
  }
  clcrt_trace *t = clcrt__calloc(1, sizeof *t);
  if (!t) {
    st = clcrt__fail_norts(CLCRT_E_NOMEM, "trace: out of memory");
    goto fail;
  }
  if (!n) {
    clcrt__free(recs);
    recs = NULL;
  }
  t->rec = recs;
  t->count = n;
  t->dropped = dropped;
  t->runs = runs;
  *out = t;
  return CLCRT_OK;
fail:
  clcrt__free(recs);
  return st;
}

clcrt_status clcrt__trace_adopt(clcrt_trace_record *records, size_t count, unsigned long long dropped,
                                clcrt_trace **out) {
  if (!out) {
    clcrt__free(records);
    return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt__trace_adopt: out is NULL");
  }
  *out = NULL;
  if (!records && count) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt__trace_adopt: %zu records at NULL", count);
  return clcrt__trace_build(records, count, dropped, 1, CLCRT_E_CORRUPT, out);
}

clcrt_status clcrt_trace_create(const clcrt_trace_record *records, size_t count, unsigned long long dropped,
                                clcrt_trace **out) {
  if (!out) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_trace_create: out is NULL");
  *out = NULL;
  if (!records && count) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_trace_create: %zu records at NULL", count);
  if (count > SIZE_MAX / sizeof *records)
    return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_trace_create: %zu records do not fit in memory", count);
  clcrt_trace_record *copy = NULL;
  if (count) {
    if (!(copy = clcrt__malloc(count * sizeof *copy)))
      return clcrt__fail_norts(CLCRT_E_NOMEM, "clcrt_trace_create: out of memory for %zu records", count);
    memcpy(copy, records, count * sizeof *copy);
  }
  return clcrt__trace_build(copy, count, dropped, 0, CLCRT_E_INVALID, out);
}

void clcrt_trace_destroy(clcrt_trace *t) {
  if (!t) return;
  clcrt__free(t->rec);
  clcrt__free(t);
}

const clcrt_trace_record *clcrt_trace_records(const clcrt_trace *t, size_t *count) {
  if (count) *count = t ? t->count : 0;
  return t ? t->rec : NULL;
}

unsigned long long clcrt_trace_dropped(const clcrt_trace *t) { return t ? t->dropped : 0; }

/* Per SM while summarising: the interval being merged, the busy time so far, the last end. */
typedef struct sm_acc {
  uint64_t cur_start, cur_end, busy, last_end;
  int ran;
} sm_acc;

clcrt_status clcrt_trace_summarize(const clcrt_trace *t, clcrt_trace_summary *out) {
  if (!t || !out)
    return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_trace_summarize: %s is NULL", t ? "out" : "the trace");
  if (out->size < sizeof(size_t) || out->size > sizeof *out)
    return clcrt__fail_norts(CLCRT_E_INVALID,
                             "clcrt_trace_summarize: out->size is %zu; set it to sizeof(clcrt_trace_summary) (%zu)",
                             out->size, sizeof *out);
  /* Built whole, then copied up to out->size, so an older caller's smaller struct works. */
  clcrt_trace_summary *v = clcrt__calloc(1, sizeof *v);
  sm_acc *acc = clcrt__calloc(CLCRT_TRACE_MAX_SMS, sizeof *acc);
  if (!v || !acc) {
    clcrt__free(v);
    clcrt__free(acc);
    return clcrt__fail_norts(CLCRT_E_NOMEM, "clcrt_trace_summarize: out of memory");
  }
  v->size = out->size;
  v->runs = t->runs;
  v->dropped = t->dropped;
  if (t->count) {
    uint64_t first = t->rec[0].start_ns, last = 0;
    unsigned hi = 0;
    for (size_t i = 0; i < t->count; i++) {
      const clcrt_trace_record *r = &t->rec[i];
      if (r->flags & CLCRT_TRACE_WAIT) continue; /* a task graph's wait: no tile, no work */
      sm_acc *a = &acc[r->sm];
      v->tiles++;
      v->steals += (r->flags & CLCRT_TRACE_STOLEN) != 0;
      if (r->sm > hi) hi = r->sm;
      if (r->end_ns > last) last = r->end_ns;
      /* Several CTAs share an SM, so its intervals overlap: busy time is their union,
       * merged as they come in start order. */
      if (!a->ran) {
        a->ran = 1;
        a->cur_start = r->start_ns;
        a->cur_end = r->end_ns;
      } else if (r->start_ns > a->cur_end) {
        a->busy += a->cur_end - a->cur_start;
        a->cur_start = r->start_ns;
        a->cur_end = r->end_ns;
      } else if (r->end_ns > a->cur_end) {
        a->cur_end = r->end_ns;
      }
      if (r->end_ns > a->last_end) a->last_end = r->end_ns;
    }
    if (v->tiles == 0) goto done; /* waits only: nothing ran */
    v->num_sms = hi + 1;
    v->span_ns = (double)(last - first);
    uint64_t first_idle = UINT64_MAX, max_busy = 0;
    double sum_busy = 0, sum_frac = 0;
    unsigned ran = 0;
    for (unsigned s = 0; s < v->num_sms; s++) {
      sm_acc *a = &acc[s];
      if (!a->ran) continue;
      a->busy += a->cur_end - a->cur_start;
      ran++;
      sum_busy += (double)a->busy;
      if (a->busy > max_busy) max_busy = a->busy;
      if (a->last_end < first_idle) first_idle = a->last_end;
      v->busy_fraction[s] = v->span_ns > 0 ? (double)a->busy / v->span_ns : 0.0;
      sum_frac += v->busy_fraction[s];
    }
    v->tail_ns = (double)(last - first_idle);
    v->busy_mean = ran ? sum_frac / ran : 0.0;
    double mean_busy = ran ? sum_busy / ran : 0.0;
    v->imbalance = mean_busy > 0 ? (double)max_busy / mean_busy : 0.0;
  }
done:
  memcpy(out, v, out->size);
  clcrt__free(v);
  clcrt__free(acc);
  return CLCRT_OK;
}
