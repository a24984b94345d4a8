/* libFuzzer target for the trace loader (clcrt_trace_load_json's parser): any byte string
 * must give either a trace or CLCRT_E_* with a message, never a crash, a hang, a leak or a
 * read outside the input. A trace it returns must satisfy what clcrt_trace_create promises
 * (sorted by start, no record ending before it starts, SM ids below CLCRT_TRACE_MAX_SMS), and
 * must summarise. Built and run by scripts/fuzz.sh. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "clcrt.h"
#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  clcrt_trace *t = NULL;
  if (clcrt__trace_parse_json((const char *)data, size, "fuzz", &t) != CLCRT_OK) {
    if (t || !clcrt_errmsg(NULL)[0]) __builtin_trap(); /* a failure has a message and no trace */
    return 0;
  }
  size_t n = 0;
  const clcrt_trace_record *r = clcrt_trace_records(t, &n);
  for (size_t i = 0; i < n; i++) {
    if (r[i].end_ns < r[i].start_ns || r[i].sm >= CLCRT_TRACE_MAX_SMS) __builtin_trap();
    if (i && r[i - 1].start_ns > r[i].start_ns) __builtin_trap();
  }
  static clcrt_trace_summary s; /* 8 KiB: not on the fuzzer's stack */
  s = (clcrt_trace_summary)CLCRT_TRACE_SUMMARY_INIT;
  if (clcrt_trace_summarize(t, &s) != CLCRT_OK || s.tiles != n) __builtin_trap();
  clcrt_trace_destroy(t);
  return 0;
}
