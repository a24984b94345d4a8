/* The CUDA driver API, loaded lazily: libcuda.so.1 is dlopen'ed on first use and every
 * entry point is taken through cuGetProcAddress into one table. The library therefore
 * loads and compiles on machines with no driver, and tests can swap the table to inject
 * driver failures. */
#ifndef CLCRT_DRIVER_H
#define CLCRT_DRIVER_H
#include <cuda.h>

/* The list of entry points clcrt needs (CLCRT_DRIVER_MAP) and the table of them (clcrt_driver)
 * are public: programs use the runtime's table (clcrt_runtime_driver) to start where libcuda is
 * missing, as the library does. Declared by clcrt.h once <cuda.h> is in. */
#include "clcrt.h"

/* X(field, symbol, version): entry points clcrt can do without, NULL where the driver lacks
 * them. They serve SM budgets (green contexts: runtime/launch/green.c), which a driver older
 * than CUDA 12.4 (12.5 for the stream functions) does not have: a budget is then refused with
 * CLCRT_E_UNSUPPORTED, and everything else works as before. Each is asked for at the version
 * that introduced the ABI of its prototype here (cuGetProcAddress returns the ABI of that
 * version, so a later driver's new ABI of the same name can never slip in), and `symbol` is
 * the name cuGetProcAddress knows it by: cuStreamGetCtx_v2 is "cuStreamGetCtx" at 12.5. The
 * test tests/test_driver.c checks every (symbol, version) against cudaTypedefs.h. They are not
 * public: programs have no use for them through clcrt, and cuda.h before 12.5 lacks some. */
#define CLCRT_DRIVER_OPT_MAP(X)                                   \
  X(cuDeviceGetDevResource, "cuDeviceGetDevResource", 12040)      \
  X(cuDevSmResourceSplitByCount, "cuDevSmResourceSplitByCount", 12040) \
  X(cuDevResourceGenerateDesc, "cuDevResourceGenerateDesc", 12040) \
  X(cuGreenCtxCreate, "cuGreenCtxCreate", 12040)                  \
  X(cuGreenCtxDestroy, "cuGreenCtxDestroy", 12040)                \
  X(cuGreenCtxGetDevResource, "cuGreenCtxGetDevResource", 12040)  \
  X(cuCtxFromGreenCtx, "cuCtxFromGreenCtx", 12040)                \
  X(cuGreenCtxStreamCreate, "cuGreenCtxStreamCreate", 12050)      \
  X(cuStreamGetCtx_v2, "cuStreamGetCtx", 12050)

/* The library's table: the public one's fields, in its order, then the optional entries. The
 * runtime hands programs a clcrt_driver copied from it (runtime.c: rt->cu_pub), not this. */
typedef struct clcrt__driver {
#define CLCRT__DRV_FIELD(name) __typeof__(name) *name;
  CLCRT_DRIVER_MAP(CLCRT__DRV_FIELD)
#undef CLCRT__DRV_FIELD
#define CLCRT__DRV_OPT_FIELD(field, symbol, version) __typeof__(field) *field;
  CLCRT_DRIVER_OPT_MAP(CLCRT__DRV_OPT_FIELD)
#undef CLCRT__DRV_OPT_FIELD
} clcrt__driver;

/* Loads the driver once (thread-safe). Returns the table, or NULL with a sentence in
 * err saying why (no libcuda, too old, cuInit failed...). *cu_err gets cuInit's result. */
const clcrt__driver *clcrt__driver_get(char *err, size_t errlen);

/* The names in CLCRT_DRIVER_MAP, NULL-terminated (for tests). */
extern const char *const clcrt__driver_names[];
/* CLCRT_DRIVER_OPT_MAP's symbols and versions, ending with a NULL symbol (for tests). */
typedef struct clcrt__driver_opt_name {
  const char *field, *symbol;
  int version;
} clcrt__driver_opt_name;
extern const clcrt__driver_opt_name clcrt__driver_opt_names[];

/* Tests: replace the table (NULL restores the real one). The real table is loaded first
 * when possible so that a test can copy it and change single entries. */
void clcrt__driver_override(const clcrt__driver *table);
/* Tests: pretend libcuda cannot be loaded (1) or undo that (0). */
void clcrt__driver_pretend_missing(int missing);
#endif
