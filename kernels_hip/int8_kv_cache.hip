// int8_kv_cache: the producer. Quantizes one token's K and V of one kv head per token (absmax/127
// over head_dim) into the paged INT8 cache. Twin of kernels_py/int8_kv_cache.py; the algorithm
// is kernels_py/ALGORITHMS.md "int8_kv_cache".
//
// int8_kv_cache(key, value, slot_mapping, k_cache, v_cache, k_scale, v_scale, num_kv_heads)
//   key, value[num_tokens][num_kv_heads][HEAD_DIM] f32; slot_mapping[num_tokens] i32 (-1: skip);
//   k_cache[num_blocks][num_kv_heads][HEAD_DIM/16][BLOCK_SIZE][16] i8,
//   v_cache[num_blocks][num_kv_heads][HEAD_DIM][BLOCK_SIZE] i8,
//   k_scale, v_scale[num_blocks][num_kv_heads][BLOCK_SIZE] f32.
//   Grid (num_tokens, num_kv_heads), one wave: lane holds head elements lane + 64*e.
// Smooth-K (subtracting the per-channel mean of K) is the caller's job.
#include "int8_attention.h"

extern "C" __global__ __launch_bounds__(WARP_SIZE) void int8_kv_cache(
    const float* key, const float* value, const int* slot_mapping, int8_t* k_cache, int8_t* v_cache, float* k_scale,
    float* v_scale, int num_kv_heads) {
  constexpr int HE = HEAD_DIM / WARP_SIZE;                 // head elements per lane
  const int token = blockIdx.x, kvh = blockIdx.y;
  const int lane = threadIdx.x;
  const int slot = slot_mapping[token];
  if (slot < 0) return;                                    // padding token
  const int blk = slot / BLOCK_SIZE, off = slot % BLOCK_SIZE;

  const int64_t src = ((int64_t)token * num_kv_heads + kvh) * HEAD_DIM;
  float k[HE], v[HE], amax_k = 0.f, amax_v = 0.f;
  for (int e = 0; e < HE; ++e) {
    k[e] = key[src + lane + WARP_SIZE * e];
    v[e] = value[src + lane + WARP_SIZE * e];
    amax_k = __builtin_fmaxf(amax_k, __builtin_fabsf(k[e]));
    amax_v = __builtin_fmaxf(amax_v, __builtin_fabsf(v[e]));
  }
  amax_k = max_over_lanes<32, 16, 8, 4, 2, 1>(amax_k);
  amax_v = max_over_lanes<32, 16, 8, 4, 2, 1>(amax_v);
  const float inv_k = quant_inv(amax_k), inv_v = quant_inv(amax_v);

  const int64_t head = (int64_t)blk * num_kv_heads + kvh;
  for (int e = 0; e < HE; ++e) {
    const int d = lane + WARP_SIZE * e;
    k_cache[head * HEAD_DIM * BLOCK_SIZE + (d / 16) * BLOCK_SIZE * 16 + off * 16 + d % 16] = (int8_t)quantize(k[e], inv_k);
    v_cache[head * HEAD_DIM * BLOCK_SIZE + d * BLOCK_SIZE + off] = (int8_t)quantize(v[e], inv_v);
  }
  if (lane == 0) {
    k_scale[head * BLOCK_SIZE + off] = quant_scale(amax_k);
    v_scale[head * BLOCK_SIZE + off] = quant_scale(amax_v);
  }
}
