// A user's int8 QK^T over two 16-token tiles, each the sum of two 32-dim k-steps chained through
// the accumulator of v_mfma_i32_16x16x32_i8: q [16 rows][64 dims], k [32 tokens][64 dims], lane l
// holds row / token l % 16 and dims 32 j + 8 (l / 16) .. +7 of k-step j. out [2 tiles][16 rows][16
// tokens] int32. -DCARRIED is the defect: the accumulator is zeroed once, before the tiles, so tile 1
// starts from tile 0's sums (accumulator-carried); without it, once per tile.
#include <hip/hip_runtime.h>
#include <stdint.h>

typedef int32_t intx4 __attribute__((ext_vector_type(4)));

__global__ void qk_tiles(const int64_t* q, const int64_t* k, int32_t* out) {
  const int lane = threadIdx.x, r = lane % 16, g = lane / 16;
  intx4 acc = {0, 0, 0, 0};
  for (int t = 0; t < 2; ++t) {
#ifndef CARRIED
    acc = intx4{0, 0, 0, 0};
#endif
    for (int j = 0; j < 2; ++j) {
      const int64_t a = q[r * 8 + 4 * j + g];                  // Q[r][32 j + 8 g .. +7]
      const int64_t b = k[(16 * t + r) * 8 + 4 * j + g];       // K[16 t + r][32 j + 8 g .. +7]
      acc = __builtin_amdgcn_mfma_i32_16x16x32_i8(a, b, acc, 0, 0, 0);
    }
    for (int i = 0; i < 4; ++i) out[(t * 16 + 4 * g + i) * 16 + r] = acc[i];   // D[4 g + i][r]
  }
}
