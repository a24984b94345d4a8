/* Helpers for the GPU suites: skip without a GPU, device buffers through the runtime's
 * driver table, random data. */
#ifndef CLCRT_TEST_GPU_H
#define CLCRT_TEST_GPU_H
#include <stddef.h>
#include <stdint.h>

#include "clcrt.h"
#include "driver.h"
#include "internal.h"

/* Exits 0 with "SKIP: <reason>" when no GPU runtime can be created. */
void gpu_skip_if_absent(const char *suite);
/* A device runtime with its context current on this thread (asserts). */
clcrt_runtime *gpu_runtime(void);
const clcrt__driver *gpu_cu(void);
CUdeviceptr gpu_alloc(size_t bytes);
void gpu_free(CUdeviceptr p);
void gpu_put(CUdeviceptr dst, const void *src, size_t bytes);
void gpu_get(void *dst, CUdeviceptr src, size_t bytes);
void gpu_fill_u8(CUdeviceptr dst, unsigned char v, size_t bytes);
/* Deterministic pseudo-random floats in [-1, 1). */
void fill_random(float *x, size_t n, uint64_t seed);
/* An assertion for loops over many elements: a passing ck_assert writes a mark point to
 * Check's pipe in fork mode (a system call each), which over millions of elements takes
 * minutes; this one costs nothing until it fails. Needs <check.h>. */
#define GPU_CHECK(cond, ...)                   \
  do {                                         \
    if (!(cond)) ck_abort_msg(__VA_ARGS__);    \
  } while (0)
/* 1 when running under compute-sanitizer (smaller problems, no fault test). */
int gpu_under_sanitizer(void);
/* CLCRT_TEST_SEED: 0 where unset (the suites' fixed sequences, so that a failure replays), else
 * the number, which the suite mixes into its generators to draw other sequences; printed as
 * "<suite>: CLCRT_TEST_SEED=N". Not a number: says so and exits 2. */
uint64_t gpu_test_seed(const char *suite);
#endif
