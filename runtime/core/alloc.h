/* One allocator for the whole library, so that tests can make any allocation fail. */
#ifndef CLCRT_ALLOC_H
#define CLCRT_ALLOC_H
#include <stddef.h>

#include "clcrt.h"

void *clcrt__malloc(size_t n);
void *clcrt__calloc(size_t count, size_t n);
void *clcrt__realloc(void *p, size_t n);
void clcrt__free(void *p);
char *clcrt__strdup(const char *s);

/* Blocks handed out by the current allocator and not yet freed (clcrt_replace_allocator in
 * runtime.c refuses to swap while any is live), and the swap itself. Apart from the
 * allocator, this file depends on nothing, so that the fuzz targets link it alone. */
long clcrt__alloc_live(void);
void clcrt__alloc_set(clcrt_malloc_fn m, clcrt_realloc_fn r, clcrt_calloc_fn c, clcrt_free_fn f);

/* Test hook: the Nth allocation from now (1-based) and every later one fail; 0 turns it off.
 * Returns how many allocations were made since the hook was last set. */
long clcrt__alloc_fail_after(long n);
#endif
