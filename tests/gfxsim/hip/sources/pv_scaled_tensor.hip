// pv_scaled.hip with a per-tensor factor (a V scale of the whole cache, untagged) applied to each
// matrix result before its per-token-group scale: the per-tensor factor covers every token and is no
// group scale; the group scale after it is the one checked. -DCONTIGUOUS takes each group scale over
// the wrong tokens; -DTENSOR_ONLY applies the per-tensor factor alone.
#include <hip/hip_runtime.h>
#include <stdint.h>

typedef int32_t int32x4 __attribute__((ext_vector_type(4)));

__global__ void pv_scaled_tensor(const int8_t* p, const int8_t* v, const float* s_tok, const float* v_scale,
                                 float* out) {
  const int lane = threadIdx.x, row = lane % 16, g = lane / 16;
  const int64_t* p16 = reinterpret_cast<const int64_t*>(p + row * 64 + 16 * g);
  const int64_t* v16 = reinterpret_cast<const int64_t*>(v + row * 64 + 16 * g);
  float scale[2];
  int32x4 acc[2];
  for (int j = 0; j < 2; ++j) {
    float m = 0.0f;
    for (int i = 0; i < 8; ++i) {
#ifdef CONTIGUOUS
      m = fmaxf(m, s_tok[32 * j + 8 * g + i]);
#else
      m = fmaxf(m, s_tok[16 * g + 8 * j + i]);
#endif
    }
    m = fmaxf(m, __shfl_xor(m, 16));
    scale[j] = fmaxf(m, __shfl_xor(m, 32));
    acc[j] = __builtin_amdgcn_mfma_i32_16x16x32_i8(p16[j], v16[j], int32x4{0, 0, 0, 0}, 0, 0, 0);
  }
  const float vs = v_scale[0];
  for (int i = 0; i < 4; ++i) {
    const int m = 4 * g + i, n = row;
#ifdef TENSOR_ONLY
    out[m * 16 + n] = (float)acc[0][i] * vs + (float)acc[1][i] * vs;
#else
    out[m * 16 + n] = ((float)acc[0][i] * vs) * scale[0] + ((float)acc[1][i] * vs) * scale[1];
#endif
  }
}
