/* Check macros for driver and NVRTC calls (after NCCL's checks.h). Each records the
 * failing statement, file:line and the error's name on the runtime, then returns or jumps
 * to a cleanup label, so cleanup runs in reverse order through labels. */
#ifndef CLCRT_CHECKS_H
#define CLCRT_CHECKS_H
#include <nvrtc.h>

#include "internal.h"

#define CLCRT__CU_FAIL(rt, r, call)                                                                   \
  clcrt__fail((rt), CLCRT_E_CUDA, "%s failed with %s (%s:%d)", #call, clcrt__cu_name((rt), (r)), \
              __FILE__, __LINE__)

/* CU_CHECK(rt, cuX(...)): returns CLCRT_E_CUDA. CU_CHECK_GOTO(rt, call, st, label). */
#define CU_CHECK(rt, call)                                      \
  do {                                                          \
    CUresult clcrt__r = (rt)->cu->call;                         \
    if (clcrt__r != CUDA_SUCCESS) return CLCRT__CU_FAIL(rt, clcrt__r, call); \
  } while (0)

#define CU_CHECK_GOTO(rt, call, st, label)                      \
  do {                                                          \
    CUresult clcrt__r = (rt)->cu->call;                         \
    if (clcrt__r != CUDA_SUCCESS) {                             \
      (st) = CLCRT__CU_FAIL(rt, clcrt__r, call);                \
      goto label;                                               \
    }                                                           \
  } while (0)

#define NVRTC_CHECK_GOTO(rt, call, st, label)                                                          \
  do {                                                                                                 \
    nvrtcResult clcrt__n = (call);                                                                     \
    if (clcrt__n != NVRTC_SUCCESS) {                                                                   \
      (st) = clcrt__fail((rt), clcrt__n == NVRTC_ERROR_OUT_OF_MEMORY ? CLCRT_E_NOMEM : CLCRT_E_COMPILE, \
                         "%s failed with %s (%s:%d)", #call, nvrtcGetErrorString(clcrt__n), __FILE__,  \
                         __LINE__);                                                                    \
      goto label;                                                                                      \
    }                                                                                                  \
  } while (0)

#define NOMEM_GOTO(rt, ptr, st, label)                                                   \
  do {                                                                                   \
    if (!(ptr)) {                                                                        \
      (st) = clcrt__fail((rt), CLCRT_E_NOMEM, "out of memory at %s:%d", __FILE__, __LINE__); \
      goto label;                                                                        \
    }                                                                                    \
  } while (0)
#endif
