/* One allocator for the whole library, so that tests can make any allocation fail. */
#ifndef CLCRT_ALLOC_H
#define CLCRT_ALLOC_H
#include <stddef.h>

void *clcrt__malloc(size_t n);
void *clcrt__calloc(size_t count, size_t n);
void *clcrt__realloc(void *p, size_t n);
void clcrt__free(void *p);
char *clcrt__strdup(const char *s);

/* Test hook: the Nth allocation from now (1-based) and every later one fail; 0 turns it off.
 * Returns how many allocations were made since the hook was last set. */
long clcrt__alloc_fail_after(long n);
#endif
