/* The CUDA driver API, loaded lazily: libcuda.so.1 is dlopen'ed on first use and every
 * entry point is taken through cuGetProcAddress into one table. The library therefore
 * loads and compiles on machines with no driver, and tests can swap the table to inject
 * driver failures. */
#ifndef CLCRT_DRIVER_H
#define CLCRT_DRIVER_H
#include <cuda.h>

/* The table and its list of entry points (CLCRT_DRIVER_MAP) are public: programs use the
 * runtime's table (clcrt_runtime_driver) to start where libcuda is missing, as the library
 * does. Declared by clcrt.h once <cuda.h> is in. */
#include "clcrt.h"
typedef clcrt_driver clcrt__driver;

/* Loads the driver once (thread-safe). Returns the table, or NULL with a sentence in
 * err saying why (no libcuda, too old, cuInit failed...). *cu_err gets cuInit's result. */
const clcrt__driver *clcrt__driver_get(char *err, size_t errlen);

/* The names in CLCRT_DRIVER_MAP, NULL-terminated (for tests). */
extern const char *const clcrt__driver_names[];

/* Tests: replace the table (NULL restores the real one). The real table is loaded first
 * when possible so that a test can copy it and change single entries. */
void clcrt__driver_override(const clcrt__driver *table);
/* Tests: pretend libcuda cannot be loaded (1) or undo that (0). */
void clcrt__driver_pretend_missing(int missing);
#endif
