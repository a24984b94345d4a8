/* General helpers of the Python package's library (see shim.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "clcrt_ops.h"
#include "layout_gen.h"
#include "shim.h"

clcrt_status clcrt_py_run(clcrt_stream *s, const clcrt_kernel *k, unsigned x, unsigned y, unsigned z,
                          const void *args, size_t size) {
  return clcrt_run(s, k, (clcrt_dim3){x, y, z}, args, size);
}

/* ---- layouts ---------------------------------------------------------------------- */

typedef struct layout_field {
  const char *type, *field;
  size_t offset, size;
} layout_field;

/* Every structure the package declares (S) and its fields (F), as python/gen_types.py read
 * them from the headers; layout_gen.h is made by the build and also holds the assertions that
 * ctypes lays each one out as the compiler does. */
#define F(T, f) {#T, #f, offsetof(T, f), sizeof(((T *)0)->f)},
#define S(T) {#T, NULL, 0, sizeof(T)},
static const layout_field fields[] = {CLCRT_PY_LAYOUT(S, F)};
#undef F
#undef S

static char layout_text[CLCRT_PY_LAYOUT_TEXT_BYTES];
static pthread_once_t layout_once = PTHREAD_ONCE_INIT;

static void layout_build(void) {
  size_t off = 0;
  for (size_t i = 0; i < sizeof fields / sizeof fields[0] && off < sizeof layout_text; i++) {
    const layout_field *f = &fields[i];
    int n = f->field ? snprintf(layout_text + off, sizeof layout_text - off, "%s.%s %zu %zu\n", f->type, f->field,
                                f->offset, f->size)
                     : snprintf(layout_text + off, sizeof layout_text - off, "%s %zu\n", f->type, f->size);
    if (n < 0) break;
    off += (size_t)n;
  }
}

const char *clcrt_py_layout(void) {
  pthread_once(&layout_once, layout_build);
  return layout_text;
}
