// Test fixture: compiled with -maxrregcount=32 so that the big local array spills; the
// kernel also has a stack frame and no launch bounds (they would override -maxrregcount).
extern "C" __global__ void spill_kernel(const float *in, float *out, int n, int k) {
  float acc[96];
#pragma unroll
  for (int i = 0; i < 96; ++i) acc[i] = in[(threadIdx.x + i * k) % n];
  for (int r = 0; r < k; ++r) {
#pragma unroll
    for (int i = 0; i < 96; ++i) acc[i] = acc[i] * acc[(i + r) % 96] + 1.0f;
  }
  float s = 0;
#pragma unroll
  for (int i = 0; i < 96; ++i) s += acc[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
