/* The Python package's library is built without runtime/compile/async.c, the libuv glue,
 * and this file stands in for it. Why: the library must load where libuv is not installed,
 * and libuv cannot be linked into a shared object from Debian's libuv_a.a, whose objects are
 * not all position-independent (core.c.o and udp.c.o reference environ and in6addr_any with
 * PC32 relocations, which a shared object cannot resolve). Python has no libuv loop to
 * deliver completions to anyway: the package offers Runtime.register_async (a thread pool)
 * and Stream.done (a future) instead. */
#include "async.h"
#include "internal.h"

/* No asynchronous compile can be pending: clcrt_register_async refuses every request below. */
void clcrt__async_orphan(clcrt_runtime *rt) { (void)rt; }

/* No notification can be pending: clcrt_run_notify refuses every request below. */
void clcrt__notify_fail(const clcrt_stream *s, clcrt_status st) {
  (void)s;
  (void)st;
}

clcrt_status clcrt_register_async(clcrt_runtime *rt, const clcrt_tile_desc *d, uv_loop_t *loop, clcrt_register_cb cb,
                                  void *user) {
  (void)d, (void)loop, (void)cb, (void)user;
  if (!rt) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_register_async: the runtime is NULL");
  return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                     "clcrt_register_async: the Python package's library has no libuv; use "
                     "Runtime.register_async, which compiles on a thread pool");
}

clcrt_status clcrt_run_notify(clcrt_stream *s, uv_loop_t *loop, clcrt_notify_cb cb, void *user) {
  (void)loop, (void)cb, (void)user;
  if (!s) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_run_notify: the stream is NULL");
  return clcrt__fail(clcrt__stream_runtime(s), CLCRT_E_UNSUPPORTED,
                     "clcrt_run_notify: the Python package's library has no libuv; use Stream.done, which returns "
                     "a future");
}
