// An int8 QK^T tile dequantized by a chain of factors: a per-row Q scale, a per-token K scale (each
// the max over the row's / token's 32 dims) and a K channel-group scale (the max over the channel
// factors of the dims the instruction sums). -DWRONG_GROUP takes the channel-group scale over dims
// 0..15 only. -DFIRST applies it first, -DCOMBINED multiplies the three scales first and applies
// their product; -DLITERAL applies a softmax scale (a constant) before them; -DHALF rounds the result
// to f16 and back before the chain.
#include <hip/hip_runtime.h>
#include <stdint.h>

typedef int32_t int32x4 __attribute__((ext_vector_type(4)));

// each lane starts at its own element (the loads stay per lane, with their provenance)
__device__ float group_max(const float* x, int n, int start) {
  float m = 0.0f;
  for (int d = 0; d < n; ++d) m = fmaxf(m, x[(start + d) % n]);
  return m;
}

__global__ void qk_chain(const int8_t* q8, const int8_t* k8, const float* sq_d, const float* sk_d,
                         const float* kc, float* out) {
  const int lane = threadIdx.x, row = lane % 16, g = lane / 16;
  const int64_t a = *reinterpret_cast<const int64_t*>(q8 + row * 32 + 8 * g);
  const int64_t b = *reinterpret_cast<const int64_t*>(k8 + row * 32 + 8 * g);
  const int32x4 acc = __builtin_amdgcn_mfma_i32_16x16x32_i8(a, b, int32x4{0, 0, 0, 0}, 0, 0, 0);
#ifdef WRONG_GROUP
  const float skc = group_max(kc, 16, row);
#else
  const float skc = group_max(kc, 32, row);
#endif
  const float sk = group_max(sk_d + row * 32, 32, 0);
  for (int i = 0; i < 4; ++i) {
    const int m = 4 * g + i, n = row;
#ifdef HALF
    const float x = (float)(_Float16)(float)acc[i];
#else
    const float x = (float)acc[i];
#endif
    const float sq = group_max(sq_d + m * 32, 32, 0);
#if defined(FIRST)
    out[m * 16 + n] = x * skc * sq * sk;
#elif defined(COMBINED)
    out[m * 16 + n] = x * (sq * sk * skc);
#elif defined(LITERAL)
    out[m * 16 + n] = x * 0.17677669f * sq * sk * skc;
#else
    out[m * 16 + n] = x * sq * sk * skc;
#endif
  }
}
