/* The shared part of the CPU suites' fake H100 driver (fake_driver.h says what it holds). */
#include "fake_driver.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CUcontext fake_current;
int fake_pushes;

static CUresult CUDAAPI f_init(unsigned f) { (void)f; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_count(int *n) { *n = 1; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_device_get(CUdevice *d, int i) { *d = i; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_attr(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = FAKE_SMS; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
  case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = 1; break;
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break; /* an H100 SXM's HBM3: kHz */
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
  default: *v = 0;
  }
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_name(char *s, int n, CUdevice d) {
  (void)d;
  snprintf(s, (size_t)n, "fake H100");
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_retain(CUcontext *c, CUdevice d) { (void)d; *c = FAKE_CTX; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_release(CUdevice d) { (void)d; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_set_current(CUcontext c) { fake_current = c; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_get_current(CUcontext *c) { *c = fake_current; return CUDA_SUCCESS; }
/* The context stack: as the driver's (per thread there; the suites push and pop on one). */
static CUcontext fake_stack[16];
static int fake_depth;
static CUresult CUDAAPI f_push_current(CUcontext c) {
  if (fake_depth == 16) return CUDA_ERROR_INVALID_VALUE;
  fake_stack[fake_depth++] = fake_current;
  fake_current = c;
  fake_pushes++;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_pop_current(CUcontext *c) {
  if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
  if (c) *c = fake_current;
  fake_current = fake_depth ? fake_stack[--fake_depth] : NULL;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_prio_range(int *least, int *greatest) { *least = 0, *greatest = -5; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_lib_unload(CUlibrary l) { (void)l; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_get_kernel(CUkernel *k, CUlibrary l, const char *name) {
  (void)name;
  *k = (CUkernel)(uintptr_t)l;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_kernel_fn(CUfunction *f, CUkernel k) { *f = (CUfunction)(uintptr_t)k; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_func_get(int *v, CUfunction_attribute a, CUfunction f) {
  (void)a, (void)f;
  *v = 0;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_func_set(CUfunction f, CUfunction_attribute a, int v) {
  (void)f, (void)a, (void)v;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_stream_sync(CUstream s) { (void)s; return CUDA_SUCCESS; }
/* Device memory is host memory. */
static CUresult CUDAAPI f_alloc(CUdeviceptr *p, size_t n) {
  void *m = calloc(1, n);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = (CUdeviceptr)(uintptr_t)m;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_free(CUdeviceptr p) { free((void *)(uintptr_t)p); return CUDA_SUCCESS; }
static CUresult CUDAAPI f_htod(CUdeviceptr d, const void *h, size_t n) {
  memcpy((void *)(uintptr_t)d, h, n);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_dtoh(void *h, CUdeviceptr d, size_t n) {
  memcpy(h, (const void *)(uintptr_t)d, n);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_write32(CUstream s, CUdeviceptr d, cuuint32_t v, unsigned flags) {
  (void)s, (void)flags;
  *(cuuint32_t *)(uintptr_t)d = v;
  return CUDA_SUCCESS;
}
/* Mapped host memory: the device address is the host's (as with unified addressing). */
static CUresult CUDAAPI f_host_dev(CUdeviceptr *d, void *p, unsigned flags) {
  (void)flags;
  *d = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_host_free(void *p) {
  free(p);
  return CUDA_SUCCESS;
}

void fake_driver_base(clcrt__driver *t) {
  memset(t, 0, sizeof *t);
  t->cuInit = f_init;
  t->cuDeviceGetCount = f_count;
  t->cuDeviceGet = f_device_get;
  t->cuDeviceGetAttribute = f_attr;
  t->cuDeviceGetName = f_name;
  t->cuDevicePrimaryCtxRetain = f_retain;
  t->cuDevicePrimaryCtxRelease = f_release;
  t->cuCtxSetCurrent = f_set_current;
  t->cuCtxGetCurrent = f_get_current;
  t->cuCtxPushCurrent = f_push_current;
  t->cuCtxPopCurrent = f_pop_current;
  t->cuCtxGetStreamPriorityRange = f_prio_range;
  t->cuLibraryUnload = f_lib_unload;
  t->cuLibraryGetKernel = f_get_kernel;
  t->cuKernelGetFunction = f_kernel_fn;
  t->cuFuncGetAttribute = f_func_get;
  t->cuFuncSetAttribute = f_func_set;
  t->cuStreamSynchronize = f_stream_sync;
  t->cuMemAlloc = f_alloc;
  t->cuMemFree = f_free;
  t->cuMemcpyHtoD = f_htod;
  t->cuMemcpyDtoH = f_dtoh;
  t->cuStreamWriteValue32 = f_write32;
  t->cuMemHostGetDevicePointer = f_host_dev;
  t->cuMemFreeHost = f_host_free;
}
