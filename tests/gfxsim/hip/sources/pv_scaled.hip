// A 16x16 PV tile over 64 tokens: two int8 matrix instructions, each consuming 32 tokens, each
// dequantized by a per-token-group scale (the max of s_tok over the group). Each lane loads 16
// consecutive tokens of its row of P and of V: bytes 0-7 feed instruction 0, bytes 8-15 instruction 1,
// so instruction j consumes tokens {16g + 8j + i : g < 4, i < 8}. -DCONTIGUOUS takes each scale over
// tokens 32j..32j+31 instead: the wrong group.
#include <hip/hip_runtime.h>
#include <stdint.h>

typedef int32_t int32x4 __attribute__((ext_vector_type(4)));

__device__ int32x4 mma_i8(int64_t a, int64_t b, int32x4 c) {
#if defined(__gfx936__)
  return __builtin_amdgcn_mmac_i32_16x16x32i8(a, b, c);             // v_mmac_i32_16x16x32_i8
#else
  return __builtin_amdgcn_mfma_i32_16x16x32_i8(a, b, c, 0, 0, 0);   // v_mfma_i32_16x16x32_i8
#endif
}

__global__ void pv_scaled(const int8_t* p, const int8_t* v, const float* s_tok, float* out) {
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
    acc[j] = mma_i8(p16[j], v16[j], int32x4{0, 0, 0, 0});
  }
  for (int i = 0; i < 4; ++i) {
#if defined(__gfx936__)
    const int m = row, n = g + 4 * i;                                // jump layout
#else
    const int m = 4 * g + i, n = row;                                // CDNA3 layout
#endif
    out[m * 16 + n] = (float)acc[0][i] * scale[0] + (float)acc[1][i] * scale[1];
  }
}
