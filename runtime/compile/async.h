/* Internal hooks of the libuv glue (async.c) for the stream subsystem. */
#ifndef CLCRT_ASYNC_H
#define CLCRT_ASYNC_H
#include "clcrt.h"

/* Delivers st to every notification (clcrt_run_notify) on s whose host function has not
 * run yet, and detaches them from the driver. The stream calls it when it learns that
 * the stream failed (a sticky fault seen by clcrt_stream_sync or clcrt_stream_destroy):
 * after a fault the driver never runs those host functions, and without this the loop
 * would wait for ever. Safe from any thread; a no-op when nothing is pending. The few
 * bytes of a detached notification whose host function never runs are not reclaimed. */
void clcrt__notify_fail(const clcrt_stream *s, clcrt_status st);

/* For clcrt_runtime_destroy: waits for rt's asynchronous compiles that are running, then
 * detaches every request of rt not yet delivered, so that none touches rt again and each
 * callback gets CLCRT_E_CANCELLED with no kernel. Returns without waiting for a loop. */
void clcrt__async_orphan(clcrt_runtime *rt);
#endif
