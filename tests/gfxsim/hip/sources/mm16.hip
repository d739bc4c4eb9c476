// D = A * B for one 16x16x16 tile of 16-bit floats (f16, or bf16 with -DBF16), f32 result: a
// kernel written for both gfx936 (MMAC builtin, jump layout D) and gfx942 (MFMA builtin). A is
// [m][k] and B is given as bt[n][k], so each lane's 4 K elements are one 8-byte load.
#include <hip/hip_runtime.h>

#ifdef BF16
typedef short in4 __attribute__((ext_vector_type(4)));
#else
typedef _Float16 in4 __attribute__((ext_vector_type(4)));
#endif
typedef float float4_ __attribute__((ext_vector_type(4)));

__global__ void mm16(const long* a, const long* bt, float* d) {
  const int lane = threadIdx.x, r = lane % 16, g = lane / 16;
  const in4 av = __builtin_bit_cast(in4, a[r * 4 + g]);     // A[r][4g..4g+3]
  const in4 bv = __builtin_bit_cast(in4, bt[r * 4 + g]);    // B[4g..4g+3][r]
  float4_ acc = {0.0f, 0.0f, 0.0f, 0.0f};
#if defined(__gfx936__)
#ifdef BF16
  acc = __builtin_amdgcn_mmac_f32_16x16x16bf16(av, bv, acc);
#else
  acc = __builtin_amdgcn_mmac_f32_16x16x16f16(av, bv, acc);
#endif
  for (int i = 0; i < 4; ++i) d[r * 16 + g + 4 * i] = acc[i];       // D[r][g + 4i]: jump layout
#else
#ifdef BF16
  acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(av, bv, acc, 0, 0, 0);
#else
  acc = __builtin_amdgcn_mfma_f32_16x16x16f16(av, bv, acc, 0, 0, 0);
#endif
  for (int i = 0; i < 4; ++i) d[(4 * g + i) * 16 + r] = acc[i];     // D[4g + i][r]: CDNA3 layout
#endif
}
