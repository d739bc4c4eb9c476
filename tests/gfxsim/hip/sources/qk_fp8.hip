// One fp8 QK^T tile: K [16 tokens][32 dims] times Q [16 heads][32 dims] by one
// v_mfma_f32_16x16x32_fp8_fp8, Q quantized to fp8 in the kernel with one scale per wave from the
// largest |q|. Lane l holds token/head l % 16, dims 8 (l / 16) .. +7 of both. q_scale = 224 / q_max
// maps q_max to 224; quantizing by q * q_scale and rescaling the result by k_scale / q_scale undoes it.
// -DSAME_DIRECTION quantizes by q / q_scale instead: the result is then off by (q_max / 224)^2.
// -DSHFL_DOWN reduces q_max with __shfl_down: lane l gets the max over lanes l..63 only.
// -DRCP divides by multiplying with v_rcp_f32 (as fast-math code does) instead of clang's division.
// -DSATURATE clamps each quantized value to the fp8 range first (clang's v_med3_f32), and -DPACK
// converts each pair into a word of its own and packs the halves with a shift and an or.
#include <hip/hip_runtime.h>
#include <stdint.h>

#ifdef RCP
#define DIV(a, b) ((a) * __builtin_amdgcn_rcpf(b))
#else
#define DIV(a, b) ((a) / (b))
#endif

typedef float floatx4 __attribute__((ext_vector_type(4)));

__global__ void qk_fp8(const uint8_t* k8, const float* q, float k_scale, float* out) {
  const int lane = threadIdx.x, row = lane % 16, g = lane / 16;
  const float* qr = q + row * 32 + 8 * g;
  float q_max = 0.0f;
  for (int i = 0; i < 8; ++i) q_max = fmaxf(q_max, fabsf(qr[i]));
  for (int offset = 32; offset > 0; offset /= 2) {
#ifdef SHFL_DOWN
    q_max = fmaxf(q_max, __shfl_down(q_max, offset));
#else
    q_max = fmaxf(q_max, __shfl_xor(q_max, offset));
#endif
  }
  const float q_scale = DIV(224.0f, q_max);
  int32_t w[2];
  for (int h = 0; h < 2; ++h) {
    float x[4];
    for (int i = 0; i < 4; ++i) {
#ifdef SAME_DIRECTION
      x[i] = DIV(qr[4 * h + i], q_scale);
#else
      x[i] = qr[4 * h + i] * q_scale;
#endif
#ifdef SATURATE
      x[i] = fminf(fmaxf(x[i], -240.0f), 240.0f);
#endif
    }
#ifdef PACK
    const uint32_t lo = (uint32_t)__builtin_amdgcn_cvt_pk_fp8_f32(x[0], x[1], 0, false) & 0xffffu;
    const uint32_t hi = (uint32_t)__builtin_amdgcn_cvt_pk_fp8_f32(x[2], x[3], 0, false) & 0xffffu;
    w[h] = (int32_t)(lo | (hi << 16));
#else
    int32_t p = __builtin_amdgcn_cvt_pk_fp8_f32(x[0], x[1], 0, false);
    w[h] = __builtin_amdgcn_cvt_pk_fp8_f32(x[2], x[3], p, true);
#endif
  }
  const int64_t q8 = (int64_t)(uint32_t)w[0] | ((int64_t)(uint32_t)w[1] << 32);
  const int64_t kk = *reinterpret_cast<const int64_t*>(k8 + row * 32 + 8 * g);
  floatx4 d = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(kk, q8, floatx4{0, 0, 0, 0}, 0, 0, 0);
  const float scale2 = DIV(k_scale, q_scale);
  for (int i = 0; i < 4; ++i) out[(4 * g + i) * 16 + row] = d[i] * scale2;
}
