// paged_attention_decode: INT8-KV-cache decode attention per 256-token partition (QK int8, exact
// partition softmax, W = P * sV quantized per scale group, PV int8), and the reduce kernel that
// merges the partitions. Twin of kernels_py/paged_attention_decode.py; the algorithm is
// kernels_py/ALGORITHMS.md "paged_attention_decode (+ reduce)".
//
// paged_attention_decode_fragment / _contiguous(q, k_cache, v_cache, k_scale, v_scale,
//     block_tables, context_lens, exp_sums, max_logits, tmp_out,
//     num_heads, num_kv_heads, max_blocks, max_partitions)
//   q[num_seqs][num_heads][HEAD_DIM] f32; caches and scales as in ALGORITHMS.md;
//   block_tables[num_seqs][max_blocks], context_lens[num_seqs] i32;
//   exp_sums / max_logits[num_seqs][num_heads][max_partitions] f32,
//   tmp_out[num_seqs][num_heads][max_partitions][HEAD_DIM] f32.
//   Grid (num_seqs, max_partitions, num_kv_heads), 256 threads. Partitions that start at or
//   past the sequence's context length write nothing.
// paged_attention_reduce(tmp_out, exp_sums, max_logits, context_lens, out, num_heads, max_partitions)
//   out[num_seqs][num_heads][HEAD_DIM] f32. Grid (num_heads, num_seqs), HEAD_DIM threads (one
//   wave per 64 head elements).
#include "int8_attention.h"

constexpr int PARTITION_SIZE = NWARPS * TOKENS_PER_CHUNK;   // 256 tokens, 64 per wave

// One per-row value combined over the workgroup's waves: the row's leader lanes write it to
// red_lds[warpid][row], a barrier, then every lane combines the waves' values in wave order.
template <Reduce OP>
__device__ __forceinline__ void across_waves(float (&out)[4], const float (&v)[4], float* red_lds, int warpid,
                                             int rowid, int lane16id) {
  if (d_row_leader(rowid, lane16id))
    for (int i = 0; i < 4; ++i) red_lds[warpid * 16 + d_row(rowid, lane16id, i)] = v[i];
  __syncthreads();
  for (int i = 0; i < 4; ++i) {
    out[i] = red_lds[d_row(rowid, lane16id, i)];
    for (int k = 1; k < NWARPS; ++k) {
      const float x = red_lds[k * 16 + d_row(rowid, lane16id, i)];
      out[i] = OP == Reduce::max ? __builtin_fmaxf(out[i], x) : out[i] + x;
    }
  }
}

template <Grouping GROUPING>
__device__ __forceinline__ void paged_attention_decode(
    const float* q, const int8_t* k_cache, const int8_t* v_cache, const float* k_scale, const float* v_scale,
    const int* block_tables, const int* context_lens, float* exp_sums, float* max_logits, float* tmp_out,
    int num_heads, int num_kv_heads, int max_blocks, int max_partitions) {
  __shared__ int8_t q_lds[16][Q_STRIDE];                   // Qq of the GQA group, rows >= gqa zero
  __shared__ float sq_lds[16];
  __shared__ float red_lds[2][NWARPS][16];                 // each wave's row max, then row sum
  __shared__ int8_t w_lds[NWARPS][16][W_STRIDE];           // Wq slab of each wave: [row][token]
  __shared__ float o_lds[NWARPS - 1][16][O_STRIDE];        // partial O of waves 1..3

  const int seq = blockIdx.x, partition = blockIdx.y, kvh = blockIdx.z;
  const int context_len = context_lens[seq];
  const int partition_start = partition * PARTITION_SIZE;
  if (partition_start >= context_len) return;
  const int gqa = num_heads / num_kv_heads;                 // query heads of this kv head: rows 0..gqa-1
  const int* block_table = block_tables + (int64_t)seq * max_blocks;

  const int warpid = __builtin_amdgcn_readfirstlane(threadIdx.x / WARP_SIZE);
  const int lane = threadIdx.x % WARP_SIZE;
  const int rowid = lane / 16;
  const int lane16id = lane % 16;

  // 1. Q rows of the GQA group, quantized per row: wave warpid takes rows q_row(warpid, rowid).
  const int row = q_row(warpid, rowid);
  quantize_q_row(q + ((int64_t)seq * num_heads + kvh * gqa + row) * HEAD_DIM, row < gqa, lane16id, q_lds[row],
                 &sq_lds[row]);
  __syncthreads();
  int64_t qa[QKHELOOP];
  float sq[4];
  load_q_operand(qa, sq, &q_lds[0][0], sq_lds, rowid, lane16id);

  // 2. QK of the wave's 64 tokens; tokens at or past the context get -inf. One chunk per wave,
  //    so the limit-checked (TAIL) path serves all of them: the last partition may end inside it.
  const int chunk_start = partition_start + warpid * TOKENS_PER_CHUNK;
  float s[TLOOP][4];
  qk_chunk<true>(s, qa, sq, k_cache, k_scale, block_table, num_kv_heads, kvh, chunk_start, context_len, rowid,
                 lane16id);

  // 3. Partition max m and sum l per row: over the wave's lanes holding the row, then over the
  //    4 waves through LDS in wave order. P = exp(S - m) * (1/l).
  float mx[4], m[4], e[TLOOP][4], ls[4], l[4], inv_l[4];
  row_max(mx, s, rowid, lane16id);
  across_waves<Reduce::max>(m, mx, &red_lds[0][0][0], warpid, rowid, lane16id);
  for (int td = 0; td < TLOOP; ++td)
    for (int i = 0; i < 4; ++i) e[td][i] = __builtin_expf(s[td][i] - m[i]);
  row_sum(ls, e, rowid, lane16id);
  across_waves<Reduce::sum>(l, ls, &red_lds[1][0][0], warpid, rowid, lane16id);
  for (int i = 0; i < 4; ++i) inv_l[i] = 1.0f / l[i];

  // 4. W = P * sV, quantized per scale group, and PV over the wave's chunk.
  float W[TLOOP][4], sw[2][4];
  for (int td = 0; td < TLOOP; ++td) {
    const int tile_start = chunk_start + 16 * td;
    for (int i = 0; i < 4; ++i) W[td][i] = 0.f;
    if (tile_start >= context_len) continue;
    const int64_t slot0 = tile_slot(block_table, num_kv_heads, kvh, tile_start);
    for (int i = 0; i < 4; ++i) {
      const int token_offset = d_col(rowid, lane16id, i);
      if (tile_start + token_offset < context_len) W[td][i] = e[td][i] * inv_l[i] * v_scale[slot0 + token_offset];
    }
  }
  quantize_w<GROUPING>(sw, W, &w_lds[warpid][0][0], rowid, lane16id);
  __syncwave();
  floatx4 o[DTILES] = {};
  pv_chunk<true>(o, &w_lds[warpid][0][0], sw, v_cache, block_table, num_kv_heads, kvh, chunk_start, context_len,
                 rowid, lane16id);

  // 5. The waves' partial outputs, summed in wave order: tmp_out[seq][kvh*gqa + row][partition][d]
  //    for the rows < gqa; max_logits = m and exp_sums = l from wave 0's row leaders.
  const int64_t head0 = (int64_t)seq * num_heads + kvh * gqa;
  sum_waves(o, &o_lds[0][0][0], warpid, rowid, lane16id);
  if (warpid == 0)
    for (int dt = 0; dt < DTILES; ++dt)
      for (int i = 0; i < 4; ++i) {
        const int qrow = d_row(rowid, lane16id, i);
        if (qrow < gqa)
          tmp_out[((head0 + qrow) * max_partitions + partition) * HEAD_DIM + 16 * dt + d_col(rowid, lane16id, i)] =
              o[dt][i];
      }
  if (warpid == 0 && d_row_leader(rowid, lane16id))
    for (int i = 0; i < 4; ++i) {
      const int qrow = d_row(rowid, lane16id, i);
      if (qrow < gqa) {
        max_logits[(head0 + qrow) * max_partitions + partition] = m[i];
        exp_sums[(head0 + qrow) * max_partitions + partition] = l[i];
      }
    }
}

#define DECODE_ARGS                                                                                              \
  const float *q, const int8_t *k_cache, const int8_t *v_cache, const float *k_scale, const float *v_scale,        \
      const int *block_tables, const int *context_lens, float *exp_sums, float *max_logits, float *tmp_out,        \
      int num_heads, int num_kv_heads, int max_blocks, int max_partitions
#define DECODE_CALL                                                                                              \
  q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens, exp_sums, max_logits, tmp_out, num_heads,    \
      num_kv_heads, max_blocks, max_partitions

extern "C" __global__ __launch_bounds__(256) void paged_attention_decode_fragment(DECODE_ARGS) {
  paged_attention_decode<Grouping::fragment>(DECODE_CALL);
}
extern "C" __global__ __launch_bounds__(256) void paged_attention_decode_contiguous(DECODE_ARGS) {
  paged_attention_decode<Grouping::contiguous>(DECODE_CALL);
}

// M = max_p m_p, w_p = l_p * exp(m_p - M), out[d] = sum_p tmp_out_p[d] * w_p / sum_p w_p, over the
// partitions p < ceil(context_len / 256) of the sequence.
extern "C" __global__ __launch_bounds__(HEAD_DIM) void paged_attention_reduce(
    const float* tmp_out, const float* exp_sums, const float* max_logits, const int* context_lens, float* out,
    int num_heads, int max_partitions) {
  const int head = blockIdx.x, seq = blockIdx.y;
  const int d = threadIdx.x;
  const int num_partitions = (context_lens[seq] + PARTITION_SIZE - 1) / PARTITION_SIZE;
  const int64_t seq_head = (int64_t)seq * num_heads + head;
  const float* m_p = max_logits + seq_head * max_partitions;
  const float* l_p = exp_sums + seq_head * max_partitions;
  const float* o_p = tmp_out + seq_head * max_partitions * HEAD_DIM + d;

  float M = -__builtin_inff();
  for (int p = 0; p < num_partitions; ++p) M = __builtin_fmaxf(M, m_p[p]);
  float acc = 0.f, w_sum = 0.f;
  for (int p = 0; p < num_partitions; ++p) {
    const float w_p = l_p[p] * __builtin_expf(m_p[p] - M);
    acc += o_p[p * HEAD_DIM] * w_p;
    w_sum += w_p;
  }
  out[seq_head * HEAD_DIM + d] = acc / w_sum;        // one division per element either way
}
