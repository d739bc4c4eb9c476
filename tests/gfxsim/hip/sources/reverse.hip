// out = reverse(x + bias) through dynamic LDS (extern __shared__, sized at launch); bias may be null.
#include <hip/hip_runtime.h>

extern __shared__ float staged[];

__global__ void reverse(float* out, const float* x, const float* bias) {
  const int t = threadIdx.x;
  staged[t] = x[t] + (bias ? bias[t] : 0.0f);
  __syncthreads();
  out[t] = staged[blockDim.x - 1 - t];
}
