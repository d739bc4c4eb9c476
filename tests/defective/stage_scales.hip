// A kernel a user might write: wave 0 stages 64 per-channel scales in LDS, every wave of the
// 256-thread workgroup scales its 64 values by them. stage_scales forgets the __syncthreads()
// between the staging and the reads: run in order (wave 0 first) the numbers come out right and
// only the lds-race finding says anything; in any other order a wave reads the scales before wave
// 0 wrote them (gfxsim hip run ... --schedule reverse). stage_scales_fixed has the barrier.
#include <hip/hip_runtime.h>

template <bool kBarrier>
__device__ void stage_and_scale(const float* x, const float* scale, float* out) {
  __shared__ float scales[64];
  const int lane = threadIdx.x % 64;
  if (threadIdx.x < 64) scales[lane] = scale[lane];
  if (kBarrier) __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = x[i] * scales[lane];
}

extern "C" __global__ void stage_scales(const float* x, const float* scale, float* out) {
  stage_and_scale<false>(x, scale, out);
}

extern "C" __global__ void stage_scales_fixed(const float* x, const float* scale, float* out) {
  stage_and_scale<true>(x, scale, out);
}
