// pv_int8: O[q][d] = sum_t P[q][t] * sV[t] * Vq[t][d] on the int8 16x16x32 matrix instruction,
// with W = P * sV quantized per 32-token group. Twin of kernels_py/pv_int8.py; the algorithm is
// kernels_py/ALGORITHMS.md "pv_int8" (the INT8 PV with per-token V scales).
//
// pv_int8_fragment(p, v_cache, v_scale, block_table, context_len, out)     the fix
// pv_int8_contiguous(p, v_cache, v_scale, block_table, context_len, out)   the bug
//   p[16][context_len] f32, v_cache[num_blocks][1][HEAD_DIM][BLOCK_SIZE] i8,
//   v_scale[num_blocks][1][BLOCK_SIZE] f32, block_table[] i32, out[16][HEAD_DIM] f32.
// One workgroup of 4 waves; wave warpid takes the 64-token chunks warpid + 4*iter. The cache
// holds one kv head.
#include "int8_attention.h"

// One 64-token chunk of a wave: W = P * sV in the QK output layout, quantized per scale group
// into the wave's LDS slab, then PV. TAIL: the chunk reaches past context_len.
template <Grouping GROUPING, bool TAIL>
__device__ __forceinline__ void pv_int8_chunk(floatx4 (&o)[DTILES], const float* p, const int8_t* v_cache,
                                              const float* v_scale, const int* block_table, int context_len,
                                              int chunk_start, int8_t* w_lds, int rowid, int lane16id) {
  float W[TLOOP][4], sw[2][4];
  load_w<TAIL>(W, p, v_scale, block_table, context_len, chunk_start, rowid, lane16id);
  __syncwave();                                // the previous chunk's reads of w_lds are done
  quantize_w<GROUPING>(sw, W, w_lds, rowid, lane16id);
  __syncwave();
  pv_chunk<TAIL>(o, w_lds, sw, v_cache, block_table, 1, 0, chunk_start, context_len, rowid, lane16id);
}

template <Grouping GROUPING>
__device__ __forceinline__ void pv_int8(const float* p, const int8_t* v_cache, const float* v_scale,
                                        const int* block_table, int context_len, float* out) {
  __shared__ int8_t w_lds[NWARPS][16][W_STRIDE];           // Wq slab of each wave: [row][token]
  __shared__ float o_lds[NWARPS - 1][16][O_STRIDE];        // partial O of waves 1..3

  const int warpid = __builtin_amdgcn_readfirstlane(threadIdx.x / WARP_SIZE);
  const int lane = threadIdx.x % WARP_SIZE;
  const int rowid = lane / 16;
  const int lane16id = lane % 16;

  floatx4 o[DTILES] = {};
  int chunk = warpid;
  for (; (chunk + 1) * TOKENS_PER_CHUNK <= context_len; chunk += NWARPS)
    pv_int8_chunk<GROUPING, false>(o, p, v_cache, v_scale, block_table, context_len, chunk * TOKENS_PER_CHUNK,
                                   &w_lds[warpid][0][0], rowid, lane16id);
  if (chunk * TOKENS_PER_CHUNK < context_len)     // this wave owns the partial last chunk
    pv_int8_chunk<GROUPING, true>(o, p, v_cache, v_scale, block_table, context_len, chunk * TOKENS_PER_CHUNK,
                                  &w_lds[warpid][0][0], rowid, lane16id);

  sum_waves(o, &o_lds[0][0][0], warpid, rowid, lane16id);
  if (warpid == 0)
    for (int dt = 0; dt < DTILES; ++dt)
      for (int i = 0; i < 4; ++i)
        out[d_row(rowid, lane16id, i) * HEAD_DIM + 16 * dt + d_col(rowid, lane16id, i)] = o[dt][i];
}

extern "C" __global__ __launch_bounds__(256) void pv_int8_fragment(const float* p, const int8_t* v_cache,
                                                                    const float* v_scale, const int* block_table,
                                                                    int context_len, float* out) {
  pv_int8<Grouping::fragment>(p, v_cache, v_scale, block_table, context_len, out);
}

extern "C" __global__ __launch_bounds__(256) void pv_int8_contiguous(const float* p, const int8_t* v_cache,
                                                                      const float* v_scale, const int* block_table,
                                                                      int context_len, float* out) {
  pv_int8<Grouping::contiguous>(p, v_cache, v_scale, block_table, context_len, out);
}
