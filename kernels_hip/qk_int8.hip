// qk_int8: S[q][t] = (sum_d Qq[q][d] * Kq[t][d]) * sQ[q] * sK[t] * (1/sqrt(head_dim)) on the int8
// 16x16x32 matrix instruction; Q is quantized per row in the kernel. Twin of
// kernels_py/qk_int8.py; the algorithm is kernels_py/ALGORITHMS.md "qk_int8".
//
// qk_int8(q, k_cache, k_scale, block_table, context_len, s_out)
//   q[16][HEAD_DIM] f32, k_cache[num_blocks][1][HEAD_DIM/16][BLOCK_SIZE][16] i8,
//   k_scale[num_blocks][1][BLOCK_SIZE] f32, block_table[] i32, s_out[16][context_len] f32.
// One workgroup of 4 waves; wave warpid takes the 64-token chunks warpid + 4*iter. Tokens at or
// past context_len load nothing and are not written. The cache holds one kv head.
#include "int8_attention.h"

// S of one 64-token chunk, stored from the QK output layout. TAIL: the chunk reaches past
// context_len.
template <bool TAIL>
__device__ __forceinline__ void qk_int8_chunk(const int64_t (&qa)[QKHELOOP], const float (&sq)[4],
                                              const int8_t* k_cache, const float* k_scale, const int* block_table,
                                              int context_len, float* s_out, int chunk_start, int rowid,
                                              int lane16id) {
  float s[TLOOP][4];
  qk_chunk<TAIL>(s, qa, sq, k_cache, k_scale, block_table, 1, 0, chunk_start, context_len, rowid, lane16id);
  for (int td = 0; td < TLOOP; ++td)
    for (int i = 0; i < 4; ++i) {
      const int qrow = d_row(rowid, lane16id, i);
      const int token_offset = d_col(rowid, lane16id, i);
      const int t = chunk_start + 16 * td + token_offset;
      if (!TAIL || t < context_len) s_out[qrow * context_len + t] = s[td][i];
    }
}

extern "C" __global__ __launch_bounds__(256) void qk_int8(const float* q, const int8_t* k_cache, const float* k_scale,
                                                           const int* block_table, int context_len, float* s_out) {
  __shared__ int8_t q_lds[16][Q_STRIDE];        // Qq[row][head element]
  __shared__ float sq_lds[16];                  // sQ[row]

  const int warpid = __builtin_amdgcn_readfirstlane(threadIdx.x / WARP_SIZE);
  const int lane = threadIdx.x % WARP_SIZE;
  const int rowid = lane / 16;
  const int lane16id = lane % 16;

  // Q: wave warpid quantizes 4 rows, q_row(warpid, rowid).
  const int row = q_row(warpid, rowid);
  quantize_q_row(q + row * HEAD_DIM, true, lane16id, q_lds[row], &sq_lds[row]);
  __syncthreads();
  int64_t qa[QKHELOOP];
  float sq[4];
  load_q_operand(qa, sq, &q_lds[0][0], sq_lds, rowid, lane16id);

  int chunk = warpid;
  for (; (chunk + 1) * TOKENS_PER_CHUNK <= context_len; chunk += NWARPS)
    qk_int8_chunk<false>(qa, sq, k_cache, k_scale, block_table, context_len, s_out, chunk * TOKENS_PER_CHUNK,
                         rowid, lane16id);
  if (chunk * TOKENS_PER_CHUNK < context_len)     // this wave owns the partial last chunk
    qk_int8_chunk<true>(qa, sq, k_cache, k_scale, block_table, context_len, s_out, chunk * TOKENS_PER_CHUNK,
                        rowid, lane16id);
}
