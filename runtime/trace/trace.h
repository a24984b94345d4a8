/* Timeline traces on the host: the records of clcrt_stream_trace_read and
 * clcrt_trace_create, their JSON (trace_json.c) and their summary (trace.c). */
#ifndef CLCRT_TRACE_INTERNAL_H
#define CLCRT_TRACE_INTERNAL_H
#include <stddef.h>

#include "clcrt.h"

/* Every trace satisfies, whoever made it: records sorted by start_ns (ties by sm, then
 * tile, then the order they came in), end_ns >= start_ns, sm < CLCRT_TRACE_MAX_SMS,
 * reserved == 0. Readers (summary, JSON writer, the tool's picture) rely on all four. */
struct clcrt_trace {
  clcrt_trace_record *rec; /* NULL when count is 0 */
  size_t count;
  unsigned long long dropped;
  size_t runs; /* distinct run numbers among the records */
};

/* For stream.c: a trace from records copied off the device. Takes ownership of `records`
 * (a clcrt__malloc'd array of `count`, may be NULL when count is 0) and frees it on
 * failure. Records with end_ns == 0 are slots the device never filled and are left out
 * (not counted as dropped); the rest are sorted. A record whose end precedes its start
 * or whose SM id is CLCRT_TRACE_MAX_SMS or more means the device wrote garbage:
 * CLCRT_E_CORRUPT with the record's index in clcrt_errmsg(NULL). */
clcrt_status clcrt__trace_adopt(clcrt_trace_record *records, size_t count, unsigned long long dropped,
                                clcrt_trace **out);

/* The same for trace_json.c and clcrt_trace_create: `bad` is the status a record that
 * breaks the rules above gets (CLCRT_E_INVALID for the caller's records), and holes are
 * kept unless drop_holes. */
clcrt_status clcrt__trace_build(clcrt_trace_record *records, size_t count, unsigned long long dropped, int drop_holes,
                                clcrt_status bad, clcrt_trace **out);

/* clcrt_trace_load_json's parser on text in memory (n bytes, no NUL needed; `name` is
 * the file's name in messages): the entry point for a fuzzer. */
clcrt_status clcrt__trace_parse_json(const char *text, size_t n, const char *name, clcrt_trace **out);

/* The JSON trace format's version, written as otherData.clcrt_trace_version. */
#define CLCRT__TRACE_JSON_VERSION 1
#endif
