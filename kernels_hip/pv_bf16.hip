// pv_bf16: the BF16 twin of pv_int8, side by side: W = P * sV rounded to bf16 (A), Vq converted
// to bf16 exactly (B), on the 16x16x16 bf16 matrix instruction with fp32 accumulation and no W
// scale. Twin of kernels_py/pv_bf16.py; the algorithm is kernels_py/ALGORITHMS.md "pv_bf16".
//
// pv_bf16(p, v_cache, v_scale, block_table, context_len, out): arguments as pv_int8.
// Per 64-token chunk a lane's 16-byte V load feeds four instructions m = 0..3; instruction m takes
// the lane's tokens 16*rowid + 4m .. +3 (A[row][k] and B[k][col] at lane .. + 16*(k/4), half k%4),
// so it consumes the tokens {16r + 4m + c : r < 4, c < 4}.
#include "int8_attention.h"

// bf16 per row of a wave's W slab: rows 34 dwords apart put the 16 rows of a ds_write_b16 (gfx936:
// one row per lane16id; CDNA3: rows i and 4+i) and the 16 lanes of a ds_read_b64 in distinct
// banks. (ds_read_b128 of 8 tokens would need rows 4 banks apart, which the gfx936 stores cannot
// have: so A is read as four 8-byte reads, one per instruction.)
constexpr int W16_STRIDE = TOKENS_PER_CHUNK + LDS_PAD / 2;
constexpr int N_MMA = 4;                          // instructions per 64-token chunk

// Round to nearest even (W is finite).
__device__ __forceinline__ uint16_t bf16_rne(float x) {
  const uint32_t u = __builtin_bit_cast(uint32_t, x);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
// Exact: |v| <= 128 needs at most 8 significant bits, bf16 has 8.
__device__ __forceinline__ uint16_t bf16_from_i8(int8_t v) {
  return (uint16_t)(__builtin_bit_cast(uint32_t, (float)v) >> 16);
}
// Bytes 4m .. 4m+3 of the lane's 16 V tokens as the B operand of instruction m.
__device__ __forceinline__ bf16x4 v_operand(int64x2 vq, int m) {
  const int64_t bytes = m < 2 ? vq.x : vq.y;
  bf16x4 b;
  for (int c = 0; c < 4; ++c) b[c] = bf16_from_i8((int8_t)(bytes >> (8 * (4 * (m % 2) + c))));
  return b;
}

template <bool TAIL>
__device__ __forceinline__ void pv_bf16_chunk(floatx4 (&o)[DTILES], const float* p, const int8_t* v_cache,
                                              const float* v_scale, const int* block_table, int context_len,
                                              int chunk_start, uint16_t* w_lds, int rowid, int lane16id) {
  float W[TLOOP][4];
  load_w<TAIL>(W, p, v_scale, block_table, context_len, chunk_start, rowid, lane16id);
  __syncwave();                                // the previous chunk's reads of w_lds are done
  for (int td = 0; td < TLOOP; ++td)
    for (int i = 0; i < 4; ++i)
      w_lds[d_row(rowid, lane16id, i) * W16_STRIDE + 16 * td + d_col(rowid, lane16id, i)] = bf16_rne(W[td][i]);
  __syncwave();
  // A lane: row lane16id, tokens 16*rowid + 4m .. +3 for instruction m (an 8-byte LDS read each).
  bf16x4 wa[N_MMA];
  for (int m = 0; m < N_MMA; ++m) wa[m] = *(const bf16x4*)(w_lds + lane16id * W16_STRIDE + 16 * rowid + 4 * m);

  const int t0 = chunk_start + 16 * rowid;
  const int n_valid = TAIL ? context_len - t0 : 16;
  const int8_t* v_tok = v_cache;
  if (n_valid > 0) v_tok += cache_head(block_table, 1, 0, t0) * HEAD_DIM * BLOCK_SIZE + t0 % BLOCK_SIZE;
  for (int dt = 0; dt < DTILES; ++dt) {
    const int8_t* v_col = v_tok + (16 * dt + lane16id) * BLOCK_SIZE;
    int64x2 vq = {0, 0};
    if (n_valid >= 16) vq = *(const int64x2*)v_col;                  // global_load_dwordx4
    else if (n_valid > 0) vq = load_v_partial(v_col, n_valid);
    for (int m = 0; m < N_MMA; ++m) o[dt] = mma_f32_16x16x16_bf16(wa[m], v_operand(vq, m), o[dt]);
  }
}

extern "C" __global__ __launch_bounds__(256) void pv_bf16(const float* p, const int8_t* v_cache, const float* v_scale,
                                                           const int* block_table, int context_len, float* out) {
  __shared__ uint16_t w_lds[NWARPS][16][W16_STRIDE];        // bf16 W slab of each wave: [row][token]
  __shared__ float o_lds[NWARPS - 1][16][O_STRIDE];         // partial O of waves 1..3

  const int warpid = __builtin_amdgcn_readfirstlane(threadIdx.x / WARP_SIZE);
  const int lane = threadIdx.x % WARP_SIZE;
  const int rowid = lane / 16;
  const int lane16id = lane % 16;

  floatx4 o[DTILES] = {};
  int chunk = warpid;
  for (; (chunk + 1) * TOKENS_PER_CHUNK <= context_len; chunk += NWARPS)
    pv_bf16_chunk<false>(o, p, v_cache, v_scale, block_table, context_len, chunk * TOKENS_PER_CHUNK,
                         &w_lds[warpid][0][0], rowid, lane16id);
  if (chunk * TOKENS_PER_CHUNK < context_len)     // this wave owns the partial last chunk
    pv_bf16_chunk<true>(o, p, v_cache, v_scale, block_table, context_len, chunk * TOKENS_PER_CHUNK,
                        &w_lds[warpid][0][0], rowid, lane16id);

  sum_waves(o, &o_lds[0][0][0], warpid, rowid, lane16id);
  if (warpid == 0)
    for (int dt = 0; dt < DTILES; ++dt)
      for (int i = 0; i < 4; ++i)
        out[d_row(rowid, lane16id, i) * HEAD_DIM + 16 * dt + d_col(rowid, lane16id, i)] = o[dt][i];
}
