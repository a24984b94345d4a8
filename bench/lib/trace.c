/* Section "trace": what tracing costs and what it shows (issue 14). */
#include "bench.h"

void bench_trace(void) {}
