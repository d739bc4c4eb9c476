// A small paged decode attention in the shape production ROCm kernels take: a KV cache in blocks
// addressed through a block table, the query heads of one KV head as the 16 columns of
// v_mfma_f32_16x16x16_bf16 (QK^T and PV), per-partition max / exp-sum / partial output, then a
// reduce over partitions. Written for gfxsim's tests; the numbers are checked against numpy.
//
//   q        [seqs][heads][HEAD] bf16 bits
//   k_cache  [blocks][kv_heads][HEAD/8][BLOCK][8] bf16 bits (8 dims = 16 bytes per token row)
//   v_cache  [blocks][kv_heads][HEAD][BLOCK] bf16 bits (a dim's tokens contiguous)
//   block_tables [seqs][max_blocks], context_lens [seqs]
//   max_logits, exp_sums [seqs][heads][partitions] f32; partial [seqs][heads][partitions][HEAD] f32
// Grid (seqs, partitions, kv_heads), one wave of 64 lanes per workgroup.
#include "gfxsim_hip.h"

constexpr int HEAD = 32;
constexpr int BLOCK = 16;
constexpr int TILES = 4;                 // 16-token tiles per partition
constexpr int PART = 16 * TILES;         // tokens per partition
constexpr int DTILES = HEAD / 16;        // 16-dim slices of the head

typedef short short4v __attribute__((ext_vector_type(4)));

__device__ __forceinline__ float bf16_to_f32(uint16_t b) {
  return __builtin_bit_cast(float, (uint32_t)b << 16);
}

__device__ __forceinline__ uint16_t f32_to_bf16(float f) {    // nearest, ties to even
  const uint32_t u = __builtin_bit_cast(uint32_t, f);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// 4 consecutive bf16 values (8 bytes) as one MFMA operand
__device__ __forceinline__ short4v load4(const uint16_t* p) {
  return *reinterpret_cast<const short4v*>(p);
}

extern "C" __global__ __launch_bounds__(64) void paged_mfma16_qkv(
    const uint16_t* q, const uint16_t* k_cache, const uint16_t* v_cache, const int* block_tables,
    const int* context_lens, float* max_logits, float* exp_sums, float* partial, int kv_heads, int gqa,
    int max_blocks, int partitions, float scale) {
  const int seq = blockIdx.x, part = blockIdx.y, kvh = blockIdx.z;
  const int lane = threadIdx.x;
  const int col = lane & 15;             // the query head (B/D column) this lane serves
  const int grp = lane >> 4;             // which 4 of the 16 k (or D rows) it holds
  const int ctx = context_lens[seq];
  const int first = part * PART;
  if (first >= ctx) return;
  const int heads = kv_heads * gqa;
  const int head = kvh * gqa + col;
  const int* table = block_tables + seq * max_blocks;

  // Q^T as B: B[k = dim][n = head]; this lane holds dims 16*dt + 4*grp .. +3 of its head
  short4v qb[DTILES];
  for (int dt = 0; dt < DTILES; ++dt) {
    qb[dt] = short4v{0, 0, 0, 0};
    if (col < gqa) qb[dt] = load4(q + ((int64_t)seq * heads + head) * HEAD + 16 * dt + 4 * grp);
  }

  // S = K Q^T, one 16-token tile at a time: A[m = token][k = dim]
  floatx4 s[TILES];
  for (int t = 0; t < TILES; ++t) {
    const int tok = first + 16 * t + col;          // the A row this lane loads
    s[t] = floatx4{0.f, 0.f, 0.f, 0.f};
    for (int dt = 0; dt < DTILES; ++dt) {
      short4v ka = short4v{0, 0, 0, 0};
      if (tok < ctx) {
        const int blk = table[tok / BLOCK];
        const int dim = 16 * dt + 4 * grp;
        const int64_t row = (((int64_t)blk * kv_heads + kvh) * (HEAD / 8) + dim / 8) * BLOCK + tok % BLOCK;
        ka = load4(k_cache + row * 8 + dim % 8);
      }
      s[t] = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(ka, qb[dt], s[t], 0, 0, 0);
    }
  }

  // D[m = token 4*grp + i][n = head]: a head's 64 scores sit in lanes col, col+16, col+32, col+48
  float m = -1e30f;
  for (int t = 0; t < TILES; ++t)
    for (int i = 0; i < 4; ++i) {
      const bool live = first + 16 * t + 4 * grp + i < ctx;
      s[t][i] = live ? s[t][i] * scale : -1e30f;
      m = s[t][i] > m ? s[t][i] : m;
    }
  m = __builtin_fmaxf(m, __shfl_xor(m, 16));
  m = __builtin_fmaxf(m, __shfl_xor(m, 32));
  float l = 0.f;
  short4v pb[TILES];                     // P^T as B of PV: same lanes and slots as S
  for (int t = 0; t < TILES; ++t) {
    for (int i = 0; i < 4; ++i) {
      const bool live = first + 16 * t + 4 * grp + i < ctx;
      const float e = live ? __builtin_expf(s[t][i] - m) : 0.f;
      l += e;
      pb[t][i] = (short)f32_to_bf16(e);
    }
  }
  l += __shfl_xor(l, 16);
  l += __shfl_xor(l, 32);

  // O^T = V^T P^T: A[m = dim][k = token], this lane's 4 tokens are contiguous in the V block
  for (int dt = 0; dt < DTILES; ++dt) {
    floatx4 o = floatx4{0.f, 0.f, 0.f, 0.f};
    for (int t = 0; t < TILES; ++t) {
      const int tok = first + 16 * t + 4 * grp;
      short4v va = short4v{0, 0, 0, 0};
      if (tok < ctx) {
        const int blk = table[tok / BLOCK];
        const int64_t row = ((int64_t)blk * kv_heads + kvh) * HEAD + 16 * dt + col;
        va = load4(v_cache + row * BLOCK + tok % BLOCK);
      }
      o = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(va, pb[t], o, 0, 0, 0);
    }
    // o[i] = O[dim 16*dt + 4*grp + i][head col]; the tokens past ctx inside a live group are
    // zero in P, so their V values (whatever the slot holds) add nothing
    if (col < gqa) {
      float* dst = partial + (((int64_t)seq * heads + head) * partitions + part) * HEAD + 16 * dt + 4 * grp;
      for (int i = 0; i < 4; ++i) dst[i] = o[i] / l;
    }
  }
  if (grp == 0 && col < gqa) {
    const int64_t at = ((int64_t)seq * heads + head) * partitions + part;
    max_logits[at] = m;
    exp_sums[at] = l;
  }
}

// out[seq][head][d] = sum_p partial_p[d] * l_p e^(m_p - M) / sum_p l_p e^(m_p - M), M = max_p m_p.
// Grid (heads, seqs), one wave; lane d < HEAD owns one output dim.
extern "C" __global__ __launch_bounds__(64) void paged_mfma16_reduce(
    const float* max_logits, const float* exp_sums, const float* partial, const int* context_lens,
    float* out, int heads, int partitions) {
  const int head = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
  if (d >= HEAD) return;
  const int used = (context_lens[seq] + PART - 1) / PART;
  const int64_t base = ((int64_t)seq * heads + head) * partitions;
  float big = -1e30f;
  for (int p = 0; p < used; ++p) big = __builtin_fmaxf(big, max_logits[base + p]);
  float num = 0.f, den = 0.f;
  for (int p = 0; p < used; ++p) {
    const float w = exp_sums[base + p] * __builtin_expf(max_logits[base + p] - big);
    num += partial[(base + p) * HEAD + d] * w;
    den += w;
  }
  out[((int64_t)seq * heads + head) * HEAD + d] = num / den;
}
