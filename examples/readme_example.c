/* Scales a vector on the GPU with a clcrt tile function. Exit status: 0 the result is right,
 * 2 no GPU to run on, 1 any other failure; every failure prints why. It calls the driver API
 * itself (cuMemAlloc), so it links libcuda: where no driver is installed, the loader refuses
 * to start it (exit 127). */
#include <clcrt.h>
#include <cuda.h>
#include <stdio.h>

static const char *src =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= a.alpha;\n"
    "}\n";
typedef struct { float *x; long n; float alpha; } ScaleArgs; /* the host mirror of Args */

static int cu_ok(CUresult r, const char *call) {
  const char *name = NULL;
  if (r != CUDA_SUCCESS)
    fprintf(stderr, "%s: %s\n", call, cuGetErrorName(r, &name) == CUDA_SUCCESS ? name : "error");
  return r == CUDA_SUCCESS;
}

int main(void) {
  const long n = 1 << 24;
  clcrt_runtime *rt = NULL;
  clcrt_kernel *k = NULL; /* owned by rt */
  clcrt_stream *s = NULL;
  CUdeviceptr x = 0;
  float last = 0;
  int rc = 1;
  clcrt_status st = clcrt_runtime_create(&rt, NULL); /* device 0; its context is made current */
  if (st != CLCRT_OK) {
    rc = st == CLCRT_E_NO_DEVICE ? 2 : 1; /* rt may be set even so: it holds the message */
    fprintf(stderr, "clcrt_runtime_create: %s: %s\n", clcrt_status_name(st), clcrt_errmsg(rt));
    goto out;
  }
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = src; d.tile_fn = "scale_tile"; d.args_type = "ScaleArgs";
  d.block = (clcrt_dim3){256, 1, 1}; /* sched AUTO: CLC on sm_100+, STEAL on sm_90 */
  if (clcrt_register(rt, &d, &k) != CLCRT_OK || clcrt_stream_create(rt, NULL, &s) != CLCRT_OK)
    goto clcrt_failed;
  /* Work queued on the clcrt stream's CUstream is ordered with its runs. */
  if (!cu_ok(cuMemAlloc(&x, n * sizeof(float)), "cuMemAlloc") ||
      !cu_ok(cuMemsetD32Async(x, 0x40000000u /* 2.0f */, n, clcrt_stream_cu(s)), "cuMemset"))
    goto out;
  ScaleArgs a = {(float *)x, n, 1.5f};
  if (clcrt_run(s, k, (clcrt_dim3){(unsigned)((n + 255) / 256), 1, 1}, &a, sizeof a) != CLCRT_OK ||
      clcrt_stream_sync(s) != CLCRT_OK)
    goto clcrt_failed;
  if (!cu_ok(cuMemcpyDtoH(&last, x + (n - 1) * sizeof(float), sizeof last), "cuMemcpyDtoH"))
    goto out;
  printf("x[%ld] = %g (2 * 1.5)\n", n - 1, last);
  rc = last == 3.0f ? 0 : 1;
  goto out;
clcrt_failed:
  fprintf(stderr, "clcrt: %s\n", clcrt_errmsg(rt));
out:
  if (x) cu_ok(cuMemFree(x), "cuMemFree");
  clcrt_stream_destroy(s);
  clcrt_runtime_destroy(rt);
  return rc;
}
