#include "gpu.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The probe runs in a child process: CUDA must not be initialised in the parent before
 * Check forks the tests. */
void gpu_skip_if_absent(const char *suite) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    clcrt_runtime *rt = NULL;
    clcrt_status st = clcrt_runtime_create(&rt, NULL);
    if (st != CLCRT_OK) {
      printf("%s: SKIP: no GPU to run on (%s: %s)\n", suite, clcrt_status_name(st), clcrt_errmsg(rt));
      fflush(stdout);
      _exit(3);
    }
    clcrt_runtime_destroy(rt);
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
    printf("%s: SKIP: the GPU probe process failed\n", suite);
    exit(0);
  }
  if (WEXITSTATUS(status) == 3) exit(0);
}

static const clcrt__driver *g_cu;

clcrt_runtime *gpu_runtime(void) {
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, NULL);
  ck_assert_msg(st == CLCRT_OK, "runtime: %s", clcrt_errmsg(rt));
  g_cu = rt->cu;
  ck_assert_int_eq(g_cu->cuCtxSetCurrent(rt->ctx), CUDA_SUCCESS);
  return rt;
}

const clcrt__driver *gpu_cu(void) { return g_cu; }

CUdeviceptr gpu_alloc(size_t bytes) {
  CUdeviceptr p = 0;
  ck_assert_int_eq(g_cu->cuMemAlloc(&p, bytes ? bytes : 4), CUDA_SUCCESS);
  return p;
}
void gpu_free(CUdeviceptr p) {
  if (p) g_cu->cuMemFree(p);
}
void gpu_put(CUdeviceptr dst, const void *src, size_t bytes) {
  ck_assert_int_eq(g_cu->cuMemcpyHtoD(dst, src, bytes), CUDA_SUCCESS);
  /* From pageable memory the copy returns before its DMA lands, on the legacy stream, which
   * clcrt's non-blocking streams do not wait for: wait for it here (a poisoned output was
   * seen overwriting a kernel's results). */
  ck_assert_int_eq(g_cu->cuStreamSynchronize(CU_STREAM_LEGACY), CUDA_SUCCESS);
}
void gpu_get(void *dst, CUdeviceptr src, size_t bytes) {
  ck_assert_int_eq(g_cu->cuMemcpyDtoH(dst, src, bytes), CUDA_SUCCESS);
}
/* A copy that has landed when this returns (gpu_put). */
void gpu_fill_u8(CUdeviceptr dst, unsigned char v, size_t bytes) {
  unsigned char *h = malloc(bytes ? bytes : 1);
  ck_assert_ptr_nonnull(h);
  memset(h, v, bytes);
  gpu_put(dst, h, bytes);
  free(h);
}

void fill_random(float *x, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

int gpu_under_sanitizer(void) {
  const char *s = getenv("CLCRT_TEST_SANITIZER");
  return s && *s && strcmp(s, "0") != 0;
}

uint64_t gpu_test_seed(const char *suite) {
  const char *s = getenv("CLCRT_TEST_SEED");
  if (!s || !*s) return 0;
  char *end;
  const unsigned long long v = strtoull(s, &end, 0);
  if (*end) {
    fprintf(stderr, "%s: CLCRT_TEST_SEED=%s is not a number\n", suite, s);
    exit(2);
  }
  printf("%s: CLCRT_TEST_SEED=%llu\n", suite, v);
  return v;
}
