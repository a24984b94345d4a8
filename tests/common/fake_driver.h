/* The part of a fake H100 driver that the CPU suites which run clcrt_run without a GPU share
 * (test_launch, test_share): one device of FAKE_SMS SMs, its primary context FAKE_CTX, device
 * memory that is host memory, and calls that succeed and do nothing else. A suite fills its
 * table with fake_driver_base, then sets the entries it observes or shapes itself (launches,
 * streams, occupancy, libraries) and installs the table with clcrt__driver_override. */
#ifndef CLCRT_TEST_FAKE_DRIVER_H
#define CLCRT_TEST_FAKE_DRIVER_H
#include "driver.h"

enum { FAKE_SMS = 132 };
#define FAKE_CTX ((CUcontext)0x1000)

/* The current context: cuCtxSetCurrent's default sets it, cuCtxGetCurrent reads it, and
 * cuCtxPushCurrent and cuCtxPopCurrent keep a stack of them (fake_pushes counts the pushes). */
extern CUcontext fake_current;
extern int fake_pushes;

/* Zeroes t and sets the shared entries: cuInit, cuDeviceGetCount/Get/GetAttribute/GetName
 * (compute capability 9.0, FAKE_SMS SMs, 227 KiB of opt-in shared memory, clusters, an H100
 * SXM's memory clock and bus),
 * cuDevicePrimaryCtxRetain/Release, cuCtxSetCurrent/GetCurrent/PushCurrent/PopCurrent,
 * cuCtxGetStreamPriorityRange
 * (0 to -5), cuLibraryUnload, cuLibraryGetKernel and cuKernelGetFunction (the handle passed on),
 * cuFuncGetAttribute (0) and cuFuncSetAttribute, cuStreamSynchronize, cuMemAlloc/Free,
 * cuMemcpyHtoD/DtoH, cuStreamWriteValue32 (done at once), cuMemHostGetDevicePointer (the host
 * address) and cuMemFreeHost. */
void fake_driver_base(clcrt__driver *t);
#endif
