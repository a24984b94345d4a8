/* The CUDA driver API, loaded lazily: libcuda.so.1 is dlopen'ed on first use and every
 * entry point is taken through cuGetProcAddress into one table. The library therefore
 * loads and compiles on machines with no driver, and tests can swap the table to inject
 * driver failures. */
#ifndef CLCRT_DRIVER_H
#define CLCRT_DRIVER_H
#include <cuda.h>

/* X(name): every driver entry point clcrt uses. The typedef comes from cuda.h's own
 * prototype (which maps e.g. cuMemAlloc to cuMemAlloc_v2), the string from the base name.
 * cuGetProcAddress returns the newest ABI of a name for CUDA_VERSION, so only names whose
 * cuda.h prototype IS that newest ABI may be listed: cuCtxSynchronize, for one, is not
 * (cuda.h's is the 2.0 ABI, CUDA 13.0 returns cuCtxSynchronize_v2(CUcontext)). The test
 * tests/test_driver.c guards this list against cudaTypedefs.h. */
#define CLCRT_DRIVER_MAP(X)          \
  X(cuInit)                          \
  X(cuDriverGetVersion)              \
  X(cuGetErrorName)                  \
  X(cuGetErrorString)                \
  X(cuDeviceGet)                     \
  X(cuDeviceGetCount)                \
  X(cuDeviceGetAttribute)            \
  X(cuDeviceGetName)                 \
  X(cuDevicePrimaryCtxRetain)        \
  X(cuDevicePrimaryCtxRelease)       \
  X(cuCtxSetCurrent)                 \
  X(cuCtxGetCurrent)                 \
  X(cuCtxPushCurrent)                \
  X(cuCtxPopCurrent)                 \
  X(cuLibraryLoadData)               \
  X(cuLibraryUnload)                 \
  X(cuLibraryGetKernel)              \
  X(cuKernelGetFunction)             \
  X(cuFuncSetAttribute)              \
  X(cuFuncGetAttribute)              \
  X(cuFuncGetParamInfo)              \
  X(cuOccupancyMaxActiveClusters)    \
  X(cuLaunchKernelEx)                \
  X(cuLaunchHostFunc)                \
  X(cuStreamCreate)                  \
  X(cuStreamDestroy)                 \
  X(cuStreamSynchronize)             \
  X(cuStreamQuery)                   \
  X(cuStreamGetCaptureInfo)          \
  X(cuStreamIsCapturing)             \
  X(cuMemAlloc)                      \
  X(cuMemFree)                       \
  X(cuMemsetD8)                      \
  X(cuMemcpyHtoD)                    \
  X(cuMemcpyDtoH)                    \
  X(cuMemcpyHtoDAsync)               \
  X(cuMemcpyDtoHAsync)               \
  X(cuMemcpyDtoDAsync)               \
  X(cuMemsetD32Async)                \
  X(cuStreamBeginCapture)            \
  X(cuStreamEndCapture)              \
  X(cuGraphInstantiateWithFlags)     \
  X(cuGraphLaunch)                   \
  X(cuGraphExecDestroy)              \
  X(cuGraphDestroy)                  \
  X(cuEventCreate)                   \
  X(cuEventRecord)                   \
  X(cuEventSynchronize)              \
  X(cuEventElapsedTime)              \
  X(cuEventDestroy)                  \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuStreamGetPriority)             \
  X(cuCtxGetStreamPriorityRange)     \
  X(cuStreamWriteValue32)            \
  X(cuMemsetD8Async)                 \
  X(cuTensorMapEncodeTiled)         \
  X(cuStreamCreateWithPriority)     \
  X(cuEventQuery)                    \
  X(cuMemHostAlloc)                  \
  X(cuMemHostGetDevicePointer)       \
  X(cuMemFreeHost)                   \
  X(cuStreamWaitEvent)

/* X(field, symbol, version): entry points clcrt can do without, NULL where the driver lacks
 * them. They serve SM budgets (green contexts: runtime/launch/green.c), which a driver older
 * than CUDA 12.4 (12.5 for the stream functions) does not have: a budget is then refused with
 * CLCRT_E_UNSUPPORTED, and everything else works as before. Each is asked for at the version
 * that introduced the ABI of its prototype here (cuGetProcAddress returns the ABI of that
 * version, so a later driver's new ABI of the same name can never slip in), and `symbol` is
 * the name cuGetProcAddress knows it by: cuStreamGetCtx_v2 is "cuStreamGetCtx" at 12.5. The
 * test tests/test_driver.c checks every (symbol, version) against cudaTypedefs.h. */
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
