/* Tracing on a stream (include/clcrt.h, "Timeline tracing"): the device buffer and reading
 * it back. The buffer's layout is part of the ABI (CLCRT__TRACE_* in nvrtc_src/clcrt_abi.h);
 * the device side is trace_record in nvrtc_src/clcrt_variant.cuh; writing, loading and
 * summarising traces is trace.c.
 *
 * Layout of the buffer: a header line ([0] the capacity in records), the counter on its own
 * 128-byte line, then `capacity` records of 48 bytes. Every traced tile takes the next index
 * from the counter and writes its record there if it is below the capacity; the counter goes
 * on past it, so the host knows how many did not fit. One counter for the whole device keeps
 * exactly the first `capacity` records however the tiles spread over the SMs (per-SM shares
 * cut the busiest SMs short), at one atomic per tile, issued by thread 0 of a CTA after the
 * tile function returns. */
#include <string.h>

#include "checks.h"
#include "sched_state.h"
#include "stream.h"
#include "trace.h"
#include "variants.h"

_Static_assert(sizeof(clcrt_trace_record) == CLCRT__TRACE_RECORD_BYTES, "clcrt_trace_record must match trace_record");
#define TRACE_COUNTER_OFFSET (CLCRT__TRACE_HDR_WORDS * 4u)
#define TRACE_MAX_RECORDS 0x7fffffffull /* the device's counter is 32 bits, and must not wrap */

static clcrt_status trace_enable(clcrt_stream *s, size_t capacity);

clcrt_status clcrt_stream_trace_enable(clcrt_stream *s, size_t capacity) {
  if (!s) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_stream_trace_enable: the stream is NULL");
  /* Traced runs launch the observed variants: built now, not by a run (variants.h). */
  const int hold = capacity > 0 && capacity <= TRACE_MAX_RECORDS;
  clcrt_status st = hold ? clcrt__observe_hold(s->rt) : CLCRT_OK;
  if (st != CLCRT_OK) return st;
  clcrt__ctx_saved sv;
  if ((st = clcrt__ctx_push(s->rt, &sv)) == CLCRT_OK) {
    st = trace_enable(s, capacity);
    clcrt__ctx_leave(s->rt, &sv);
  }
  clcrt__stream_observing(s);
  if (hold) clcrt__observe_release(s->rt);
  return st;
}

/* In the runtime's context (clcrt_stream_trace_enable). */
static clcrt_status trace_enable(clcrt_stream *s, size_t capacity) {
  clcrt_runtime *rt = s->rt;
  if (capacity > TRACE_MAX_RECORDS)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_stream_trace_enable: capacity %zu records is too large: at most %llu (%u bytes of "
                       "device memory each); tracing is left as it was",
                       capacity, TRACE_MAX_RECORDS, CLCRT__TRACE_RECORD_BYTES);
  clcrt_status st;
  if (s->trace) {
    CU_CHECK(rt, cuStreamSynchronize(s->cu));
    rt->cu->cuMemFree(s->trace);
    s->trace = 0;
    s->trace_bytes = 0;
  }
  if (capacity == 0) return CLCRT_OK;
  size_t bytes = CLCRT__TRACE_RECORDS + capacity * CLCRT__TRACE_RECORD_BYTES;
  CU_CHECK(rt, cuStreamSynchronize(s->cu));
  CUresult r = rt->cu->cuMemAlloc(&s->trace, bytes);
  if (r != CUDA_SUCCESS) {
    s->trace = 0;
    return clcrt__fail(rt, r == CUDA_ERROR_OUT_OF_MEMORY ? CLCRT_E_NOMEM : CLCRT_E_CUDA,
                       "clcrt_stream_trace_enable: cuMemAlloc of %zu bytes for %zu records failed with %s", bytes,
                       capacity, clcrt__cu_name(rt, r));
  }
  uint32_t cap = (uint32_t)capacity;
  unsigned char hdr[CLCRT__TRACE_RECORDS];
  memset(hdr, 0, sizeof hdr);
  memcpy(hdr, &cap, sizeof cap);
  if ((st = clcrt__put_device(rt, s->trace, hdr, sizeof hdr)) != CLCRT_OK) goto fail;
  s->trace_bytes = bytes;
  s->trace_cap = cap;
  s->trace_runs = 0;
  s->trace_lost = 0;
  return CLCRT_OK;
fail:
  rt->cu->cuMemFree(s->trace);
  s->trace = 0;
  return st;
}

static clcrt_status trace_read(clcrt_stream *s, clcrt_trace **out);

clcrt_status clcrt_stream_trace_read(clcrt_stream *s, clcrt_trace **out) {
  if (!s) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_stream_trace_read: the stream is NULL");
  clcrt__ctx_saved sv;
  clcrt_status st = clcrt__ctx_push(s->rt, &sv);
  if (st != CLCRT_OK) return st;
  st = trace_read(s, out);
  clcrt__ctx_leave(s->rt, &sv);
  return st;
}

/* clcrt_stream_trace_read in the runtime's context. */
static clcrt_status trace_read(clcrt_stream *s, clcrt_trace **out) {
  clcrt_runtime *rt = s->rt;
  if (!out) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_stream_trace_read: out is NULL");
  *out = NULL;
  if (!s->trace)
    return clcrt__fail(rt, CLCRT_E_INVALID, "tracing is off on this stream: call clcrt_stream_trace_enable first");
  clcrt_status st;
  if ((st = clcrt_stream_sync(s)) != CLCRT_OK) return st;
  uint32_t count = 0;
  CU_CHECK(rt, cuMemcpyDtoH(&count, s->trace + TRACE_COUNTER_OFFSET, sizeof count));
  const uint32_t cap = s->trace_cap, kept = count < cap ? count : cap;
  /* Runs launched without the observed variant recorded nothing: their tiles count as dropped. */
  const unsigned long long dropped = count - kept + s->trace_lost;
  clcrt_trace_record *recs = clcrt__malloc((kept ? kept : 1) * sizeof *recs);
  if (!recs) return clcrt__fail(rt, CLCRT_E_NOMEM, "clcrt_stream_trace_read: out of memory for %u records", kept);
  if (kept)
    CU_CHECK_GOTO(rt, cuMemcpyDtoH(recs, s->trace + CLCRT__TRACE_RECORDS, (size_t)kept * CLCRT__TRACE_RECORD_BYTES),
                  st, out);
  /* Empty the buffer for the next runs: the counter only (records past it are never read). */
  if ((st = clcrt__zero_device(rt, s->trace + TRACE_COUNTER_OFFSET, sizeof count)) != CLCRT_OK) goto out;
  s->trace_lost = 0;
  st = clcrt__trace_adopt(recs, kept, dropped, out);
  recs = NULL; /* adopted, or freed by adopt on failure */
  if (st != CLCRT_OK) clcrt__fail(rt, st, "clcrt_stream_trace_read: %s", clcrt_errmsg(NULL));
out:
  clcrt__free(recs);
  return st;
}
