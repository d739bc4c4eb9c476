// QK^T on v_mfma_f32_16x16x32_fp8_fp8 with Q quantized to fp8 at run time, in two versions that
// differ in one place: the quantization scale and how the logits are rescaled.
//   fixed = 1:  s = q_max / 224, Q8 = fp8(q / s) fills the fp8 range, logits *= s     (undone)
//   fixed = 0:  s = 224 / q_max, Q8 = fp8(q / s), logits /= s   (applied twice: x (q_max/224)^2)
// A defective/fixed pair for a check that a quantization scale is undone on the matrix result.
//   q      [16 heads][32] f32        k      [16 tokens][32] e4m3 FNUZ bytes
//   logits [16 tokens][16 heads] f32  = scale * k_scale * K Q^T (fixed)
// One wave of 64 lanes.
#include "gfxsim_hip.h"

typedef long long i64;

extern "C" __global__ __launch_bounds__(64) void qk_fp8_scaled(const float* q, const i64* k, float* logits,
                                                                float scale, float k_scale, int fixed) {
  const int lane = threadIdx.x;
  const int col = lane & 15;          // head: B/D column; token: A row
  const int grp = lane >> 4;          // k = 8*grp .. 8*grp+7
  const float* mine = q + col * 32 + 8 * grp;
  float m = 0.f;
  for (int j = 0; j < 8; ++j) m = __builtin_fmaxf(m, __builtin_fabsf(mine[j]));
  for (int x = 1; x < 64; x <<= 1) m = __builtin_fmaxf(m, __shfl_xor(m, x));     // every lane: the wave's max
  const float s = m > 0.f ? (fixed ? m / 224.f : 224.f / m) : 1.f;
  int lo = 0, hi = 0;                 // 8 fp8 values, 4 per dword
  lo = __builtin_amdgcn_cvt_pk_fp8_f32(mine[0] / s, mine[1] / s, lo, false);
  lo = __builtin_amdgcn_cvt_pk_fp8_f32(mine[2] / s, mine[3] / s, lo, true);
  hi = __builtin_amdgcn_cvt_pk_fp8_f32(mine[4] / s, mine[5] / s, hi, false);
  hi = __builtin_amdgcn_cvt_pk_fp8_f32(mine[6] / s, mine[7] / s, hi, true);
  const i64 qb = (i64)(unsigned)lo | ((i64)(unsigned)hi << 32);
  const i64 ka = k[col * 4 + grp];
  floatx4 acc = floatx4{0.f, 0.f, 0.f, 0.f};
  acc = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(ka, qb, acc, 0, 0, 0);
  const float back = fixed ? s : 1.f / s;
  for (int i = 0; i < 4; ++i) logits[(4 * grp + i) * 16 + col] = acc[i] * scale * k_scale * back;
}
