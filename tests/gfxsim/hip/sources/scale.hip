// out[i] = x[i] * s over a grid-stride loop: threadIdx, blockIdx, blockDim and gridDim from
// hip_runtime.h (the device library's __ockl_* calls and the hidden kernel arguments).
#include <hip/hip_runtime.h>

__global__ void scale(float* out, const float* x, float s, int count) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += blockDim.x * gridDim.x)
    out[i] = x[i] * s;
}
