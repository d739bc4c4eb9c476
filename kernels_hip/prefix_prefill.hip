// prefix_prefill: new query tokens attend causally over the paged INT8 cache (the prefix and the
// new tokens themselves), with an online softmax; W = p~ * sV is quantized per fragment group as
// in pv_int8. Twin of kernels_py/prefix_prefill.py; the algorithm is kernels_py/ALGORITHMS.md
// "prefix_prefill".
//
// prefix_prefill(q, k_cache, v_cache, k_scale, v_scale, block_table, context_len, query_len, out,
//                num_heads, num_kv_heads)
//   q[query_len][num_heads][HEAD_DIM] f32: the new tokens, already written to the cache, at
//   positions context_len - query_len .. context_len - 1; caches and scales as in ALGORITHMS.md;
//   block_table[] i32 of the sequence; out[query_len][num_heads][HEAD_DIM] f32.
//   Grid (ceil(query_len / 64), num_heads), 256 threads: wave warpid owns the 16 query rows
//   16*(4*blockIdx.x + warpid) .. of query head blockIdx.y (kv head h / ratio). Query row qi at
//   position pos = context_len - query_len + qi sees the tokens t <= pos.
#include "int8_attention.h"

// One 64-token chunk of a wave: S, the online-softmax update of m and l, W, o = alpha*o + PV.
// TAIL: the chunk reaches past wave_end (the tokens any of the wave's rows sees).
template <Grouping GROUPING, bool TAIL>
__device__ __forceinline__ void prefix_prefill_chunk(
    floatx4 (&o)[DTILES], float (&m)[4], float (&l)[4], const int (&row_end)[4], const int64_t (&qa)[QKHELOOP],
    const float (&sq)[4], const int8_t* k_cache, const int8_t* v_cache, const float* k_scale, const float* v_scale,
    const int* block_table, int num_kv_heads, int kvh, int chunk_start, int wave_end, int8_t* w_lds, int rowid,
    int lane16id) {
  float s[TLOOP][4];
  qk_chunk<TAIL>(s, qa, sq, k_cache, k_scale, block_table, num_kv_heads, kvh, chunk_start, wave_end, rowid,
                 lane16id);
  for (int td = 0; td < TLOOP; ++td)                       // causal mask: row i sees t < row_end[i]
    for (int i = 0; i < 4; ++i)
      if (chunk_start + 16 * td + d_col(rowid, lane16id, i) >= row_end[i]) s[td][i] = -__builtin_inff();

  // m_new = max(m, rowmax), alpha = exp(m - m_new), p~ = exp(s - m_new), l = alpha*l + sum p~.
  float rowmax[4], m_new[4], alpha[4], rowsum[4], p[TLOOP][4];
  row_max(rowmax, s, rowid, lane16id);
  for (int i = 0; i < 4; ++i) {
    m_new[i] = __builtin_fmaxf(m[i], rowmax[i]);
    alpha[i] = __builtin_expf(m[i] - m_new[i]);           // m = -inf before the first chunk: alpha = 0
  }
  for (int td = 0; td < TLOOP; ++td)
    for (int i = 0; i < 4; ++i) p[td][i] = __builtin_expf(s[td][i] - m_new[i]);
  row_sum(rowsum, p, rowid, lane16id);
  for (int i = 0; i < 4; ++i) {
    l[i] = alpha[i] * l[i] + rowsum[i];
    m[i] = m_new[i];
  }

  // W = p~ * sV; masked tokens have p~ = 0, tokens at or past wave_end load no scale.
  float W[TLOOP][4], sw[2][4];
  for (int td = 0; td < TLOOP; ++td) {
    const int tile_start = chunk_start + 16 * td;
    for (int i = 0; i < 4; ++i) W[td][i] = 0.f;
    if (TAIL && tile_start >= wave_end) continue;
    const int64_t slot0 = tile_slot(block_table, num_kv_heads, kvh, tile_start);
    for (int i = 0; i < 4; ++i) {
      const int token_offset = d_col(rowid, lane16id, i);
      if (!TAIL || tile_start + token_offset < wave_end) W[td][i] = p[td][i] * v_scale[slot0 + token_offset];
    }
  }
  __syncwave();                                            // the previous chunk's reads of w_lds are done
  quantize_w<GROUPING>(sw, W, w_lds, rowid, lane16id);
  __syncwave();
  for (int dt = 0; dt < DTILES; ++dt)
    for (int i = 0; i < 4; ++i) o[dt][i] *= alpha[i];
  pv_chunk<TAIL>(o, w_lds, sw, v_cache, block_table, num_kv_heads, kvh, chunk_start, wave_end, rowid, lane16id);
}

extern "C" __global__ __launch_bounds__(256) void prefix_prefill(
    const float* q, const int8_t* k_cache, const int8_t* v_cache, const float* k_scale, const float* v_scale,
    const int* block_table, int context_len, int query_len, float* out, int num_heads, int num_kv_heads) {
  __shared__ int8_t q_lds[NWARPS][16][Q_STRIDE];           // Qq of each wave's 16 rows
  __shared__ float sq_lds[NWARPS][16];
  __shared__ int8_t w_lds[NWARPS][16][W_STRIDE];           // Wq slab of each wave: [row][token]

  const int h = blockIdx.y;
  const int kvh = h / (num_heads / num_kv_heads);
  const int warpid = __builtin_amdgcn_readfirstlane(threadIdx.x / WARP_SIZE);
  const int lane = threadIdx.x % WARP_SIZE;
  const int rowid = lane / 16;
  const int lane16id = lane % 16;

  const int wave_q0 = 16 * (NWARPS * blockIdx.x + warpid);  // the wave's first query row
  if (wave_q0 >= query_len) return;                          // the waves share no LDS and no barrier
  const int query_start = context_len - query_len;           // position of query row 0

  // Q: the wave's 16 rows, 4 per pass (row q_row(pass, rowid)), quantized per row.
  for (int pass = 0; pass < 4; ++pass) {
    const int row = q_row(pass, rowid);
    const int qi = wave_q0 + row;
    quantize_q_row(q + ((int64_t)qi * num_heads + h) * HEAD_DIM, qi < query_len, lane16id, q_lds[warpid][row],
                   &sq_lds[warpid][row]);
  }
  __syncwave();
  int64_t qa[QKHELOOP];
  float sq[4];
  load_q_operand(qa, sq, &q_lds[warpid][0][0], sq_lds[warpid], rowid, lane16id);

  // Row i of the D layout sees t < row_end[i]; rows past query_len (never stored) take the last
  // row's limit. wave_end: the tokens any row of the wave sees.
  int row_end[4];
  for (int i = 0; i < 4; ++i)
    row_end[i] = query_start + min(wave_q0 + d_row(rowid, lane16id, i), query_len - 1) + 1;
  const int wave_end = query_start + min(wave_q0 + 15, query_len - 1) + 1;

  floatx4 o[DTILES] = {};
  float m[4], l[4];
  for (int i = 0; i < 4; ++i) m[i] = -__builtin_inff(), l[i] = 0.f;
  int chunk_start = 0;
  for (; chunk_start + TOKENS_PER_CHUNK <= wave_end; chunk_start += TOKENS_PER_CHUNK)
    prefix_prefill_chunk<Grouping::fragment, false>(o, m, l, row_end, qa, sq, k_cache, v_cache, k_scale, v_scale, block_table,
                                num_kv_heads, kvh, chunk_start, wave_end, &w_lds[warpid][0][0], rowid,
                                lane16id);
  if (chunk_start < wave_end)
    prefix_prefill_chunk<Grouping::fragment, true>(o, m, l, row_end, qa, sq, k_cache, v_cache, k_scale, v_scale, block_table,
                               num_kv_heads, kvh, chunk_start, wave_end, &w_lds[warpid][0][0], rowid,
                               lane16id);

  // out = o / l
  for (int i = 0; i < 4; ++i) {
    const int qi = wave_q0 + d_row(rowid, lane16id, i);
    const float inv_l = 1.0f / l[i];
    if (qi < query_len)
      for (int dt = 0; dt < DTILES; ++dt)
        out[((int64_t)qi * num_heads + h) * HEAD_DIM + 16 * dt + d_col(rowid, lane16id, i)] = o[dt][i] * inv_l;
  }
}
