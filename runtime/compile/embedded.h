/* The device-side sources in nvrtc_src/, embedded at build time (scripts/embed.c). */
#ifndef CLCRT_EMBEDDED_H
#define CLCRT_EMBEDDED_H
#include <stddef.h>
typedef struct clcrt__embedded_file {
  const char *name; /* file name, e.g. "clcrt_sched.cuh": what #include names */
  const char *text;
  size_t len;
} clcrt__embedded_file;
/* Terminated by an entry with name NULL. */
extern const clcrt__embedded_file clcrt__embedded[];
/* Programs outside the library (examples, tests, benchmarks) embed the user-side sources of
 * examples/DIR/NAME.cu the same way, with a header of their own generated beside them
 * ($(BUILD)/gen/user_src.h: user_src[]); libclcrt never does. */
#endif
