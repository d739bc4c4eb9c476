// int8_attention.h: the pieces of kernels_py/ALGORITHMS.md that the INT8 attention twins share
// (Q quantization, the QK tile, W quantization per scale group, the PV chunk, the cross-wave sum).
// Twin of kernels_py/int8_attention.py, helper for helper: same names, parameters in the same
// order, same named constants (tests/test_twin_correspondence.py parses this file to check).
//
// Lane coordinates, as in ALGORITHMS.md: warpid = threadIdx.x / 64 (4 waves, 256 threads),
// lane = threadIdx.x % 64, rowid = lane / 16, lane16id = lane % 16. Values held "in the QK output
// layout" are D registers: register i of a lane is row d_row(i), column d_col(i) (gfxsim_hip.h).
//
// Rounding: quantization is rint(x * inv) with inv = 127/amax, scale = amax/127 (true divisions,
// once per group, as specified). Normalising by a sum (1/l) is a reciprocal and a multiply.
#pragma once
#include "gfxsim_hip.h"

#ifndef GFXSIM_HEAD_DIM
#define GFXSIM_HEAD_DIM 128
#endif
#ifndef GFXSIM_BLOCK_SIZE
#define GFXSIM_BLOCK_SIZE 16
#endif
constexpr int HEAD_DIM = GFXSIM_HEAD_DIM;
constexpr int BLOCK_SIZE = GFXSIM_BLOCK_SIZE;
static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "head_dim is 64 or 128");
static_assert(BLOCK_SIZE == 16 || BLOCK_SIZE == 32, "a lane's 16 V tokens must lie in one cache block");

constexpr int NWARPS = 4;                         // waves per workgroup
constexpr int TOKENS_PER_CHUNK = 64;              // a wave's tokens per iteration
constexpr int TLOOP = TOKENS_PER_CHUNK / 16;      // 16-token QK tiles per chunk
constexpr int QKHELOOP = HEAD_DIM / 32;           // K=32 QK steps over head_dim
constexpr int DTILES = HEAD_DIM / 16;             // 16-column PV tiles over head_dim
constexpr float QMAX = 127.0f;
constexpr float SM_SCALE = HEAD_DIM == 128 ? 0.0883883476483184405f : 0.125f;   // 1/sqrt(head_dim)
static_assert(TLOOP == 4, "row_sum adds the 4 tiles pairwise");
constexpr bool D_REGS_SHARE_ROW = GFXSIM_JUMP_LAYOUT;      // a lane's registers hold one D row (gfx936)

// LDS row strides (ALGORITHMS.md "LDS layouts"): 8 bytes of padding put the 16 rows that 16 lanes
// read 8 bytes of (Q and Wq, ds_read_b64) and the rows that the W stores hit in distinct banks;
// the partial outputs' f32 rows are 2 banks apart on gfx936 and 4 on CDNA3, so that the 4 registers
// a lane stores from the D layout never share a bank (kernels_py/fragments.conflict_free_stride).
constexpr int LDS_PAD = 8;
constexpr int Q_STRIDE = HEAD_DIM + LDS_PAD;                  // bytes per row of q_lds
constexpr int W_STRIDE = TOKENS_PER_CHUNK + LDS_PAD;          // bytes per row of a wave's Wq slab
constexpr int O_STRIDE = HEAD_DIM + (GFXSIM_JUMP_LAYOUT ? 2 : 4);   // floats per row of o_lds

enum class Grouping { fragment, contiguous };     // W scale groups: the fix, and the bug
enum class Reduce { max, sum };

// ---- small helpers ------------------------------------------------------------------------
template <int... MASKS>
__device__ __forceinline__ float max_over_lanes(float v) {
  ((v = __builtin_fmaxf(v, __shfl_xor(v, MASKS))), ...);
  return v;
}
template <int... MASKS>
__device__ __forceinline__ float sum_over_lanes(float v) {
  ((v += __shfl_xor(v, MASKS)), ...);
  return v;
}

// scale = amax/127 dequantizes, inv = 127/amax quantizes (kernels_py/reference/int8_cache.py). An amax
// below 127/FLT_MAX (0, or W underflowing in exp) would make inv inf and 0*inf NaN: scale = inv = 0.
constexpr float MIN_AMAX = QMAX / 3.40282347e38f;
__device__ __forceinline__ float quant_scale(float amax) { return amax >= MIN_AMAX ? amax / QMAX : 0.f; }
__device__ __forceinline__ float quant_inv(float amax) { return amax >= MIN_AMAX ? QMAX / amax : 0.f; }
// round half to even (v_rndne_f32), clamp to [-127, 127]
__device__ __forceinline__ int quantize(float x, float inv) {
  return (int)__builtin_fminf(__builtin_fmaxf(__builtin_rintf(x * inv), -QMAX), QMAX);
}

// Cache addressing (vLLM ROCm layout, x = 16 int8 per 16 bytes):
//   k_cache[blk][kvh][HEAD_DIM/16][BLOCK_SIZE][16], v_cache[blk][kvh][HEAD_DIM][BLOCK_SIZE],
//   k_scale/v_scale[blk][kvh][BLOCK_SIZE]; logical token t sits in block_table[t / BLOCK_SIZE].
__device__ __forceinline__ int64_t cache_head(const int* block_table, int num_kv_heads, int kvh, int t) {
  return (int64_t)block_table[t / BLOCK_SIZE] * num_kv_heads + kvh;
}
// A 16-token tile that starts at a multiple of 16 lies in one cache block (BLOCK_SIZE is 16 or
// 32): its tokens are slots tile_slot + 0..15 of the [blk][kvh][BLOCK_SIZE] scale arrays.
__device__ __forceinline__ int64_t tile_slot(const int* block_table, int num_kv_heads, int kvh, int tile_start) {
  return cache_head(block_table, num_kv_heads, kvh, tile_start) * BLOCK_SIZE + tile_start % BLOCK_SIZE;
}

// ---- Q: per-row quantization into LDS ------------------------------------------------------
// The Q row that the 16-lane row rowid quantizes in pass k (the pass of wave k, or pass k of one
// wave): 2k + rowid/2 + 8*(rowid%2). The two rows of one 4-byte ds_write phase (rowid 0 and 1, at
// head_dim 64) lie 8 rows = 16 banks apart, so the store is conflict-free with Q_STRIDE.
__device__ __forceinline__ int q_row(int k, int rowid) { return 2 * k + rowid / 2 + 8 * (rowid % 2); }

// One q row per 16-lane row of the wave; lane16id holds HEAD_DIM/16 consecutive elements, stored
// as one HEAD_DIM/16-byte write. Writes Qq[HEAD_DIM] and sQ = amax/127; valid == false quantizes
// a zero row.
__device__ __forceinline__ void quantize_q_row(const float* q_row, bool valid, int lane16id, int8_t* q_lds_row,
                                               float* sq_lds_row) {
  constexpr int QE = HEAD_DIM / 16;
  float x[QE] = {};
  if (valid)
    for (int e = 0; e < QE / 4; ++e) *(floatx4*)&x[4 * e] = *(const floatx4*)(q_row + lane16id * QE + 4 * e);
  float amax = __builtin_fabsf(x[0]);
  for (int e = 1; e < QE; ++e) amax = __builtin_fmaxf(amax, __builtin_fabsf(x[e]));
  amax = max_over_lanes<1, 2, 4, 8>(amax);
  const float inv = quant_inv(amax);
  int8_t qq[QE];
  for (int e = 0; e < QE; ++e) qq[e] = (int8_t)quantize(x[e], inv);
  __builtin_memcpy(q_lds_row + lane16id * QE, qq, QE);
  if (lane16id == 0) *sq_lds_row = quant_scale(amax);
}

// A operand of every QK step kstep (row lane16id, head elements 32*kstep + 8*rowid .. +7) and
// sQ of every output register's row, read once per kernel.
__device__ __forceinline__ void load_q_operand(int64_t (&qa)[QKHELOOP], float (&sq)[4], const int8_t* q_lds,
                                               const float* sq_lds, int rowid, int lane16id) {
  for (int kstep = 0; kstep < QKHELOOP; ++kstep)
    qa[kstep] = *(const int64_t*)(q_lds + lane16id * Q_STRIDE + 32 * kstep + 8 * rowid);
  for (int i = 0; i < 4; ++i) sq[i] = sq_lds[d_row(rowid, lane16id, i)];
}

// ---- QK ------------------------------------------------------------------------------------
// One 16x16 S tile as int32 D: sum over the QKHELOOP steps of Qq (A) x Kq^T (B).
// B lane: token n = lane16id (slot tile_slot + lane16id), head elements 32*kstep + 8*rowid .. +7,
// one 8-byte load per step. A lane with valid == false loads nothing and contributes zeros.
__device__ __forceinline__ int32x4 qk_tile(const int64_t (&qa)[QKHELOOP], const int8_t* k_cache, int64_t tile_slot,
                                           bool valid, int rowid, int lane16id) {
  int64_t kb[QKHELOOP] = {};
  if (valid) {
    const int64_t slot = tile_slot + lane16id;
    const int8_t* k_tok = k_cache + (slot / BLOCK_SIZE) * HEAD_DIM * BLOCK_SIZE + (slot % BLOCK_SIZE) * 16;
    for (int kstep = 0; kstep < QKHELOOP; ++kstep) {
      const int d = 32 * kstep + 8 * rowid;
      kb[kstep] = *(const int64_t*)(k_tok + (d / 16) * BLOCK_SIZE * 16 + d % 16);
    }
  }
  int32x4 acc = {0, 0, 0, 0};
  for (int kstep = 0; kstep < QKHELOOP; ++kstep) acc = mma_i32_16x16x32_i8(qa[kstep], kb[kstep], acc);
  return acc;
}

// S of a wave's 64-token chunk in the QK output layout: s[td][i] is row qrow = d_row(i), token
// chunk_start + 16*td + token_offset with token_offset = d_col(i);
// S = float(acc) * sQ[qrow] * sK[t] * (1/sqrt(head_dim)).
// TAIL (the chunk reaches past limit): tokens t >= limit load nothing and get S = -inf.
template <bool TAIL>
__device__ __forceinline__ void qk_chunk(float (&s)[TLOOP][4], const int64_t (&qa)[QKHELOOP], const float (&sq)[4],
                                         const int8_t* k_cache, const float* k_scale, const int* block_table,
                                         int num_kv_heads, int kvh, int chunk_start, int limit, int rowid,
                                         int lane16id) {
  for (int td = 0; td < TLOOP; ++td) {
    const int tile_start = chunk_start + 16 * td;
    for (int i = 0; i < 4; ++i) s[td][i] = -__builtin_inff();
    if (TAIL && tile_start >= limit) continue;
    const int64_t slot0 = tile_slot(block_table, num_kv_heads, kvh, tile_start);
    const int32x4 acc = qk_tile(qa, k_cache, slot0, !TAIL || tile_start + lane16id < limit, rowid, lane16id);
    for (int i = 0; i < 4; ++i) {
      const int token_offset = d_col(rowid, lane16id, i);
      if (!TAIL || tile_start + token_offset < limit)
        s[td][i] = (float)acc[i] * sq[i] * k_scale[slot0 + token_offset] * SM_SCALE;
    }
  }
}

// Max / sum over the wave's values in the same row as register i, for every register i: over the
// TLOOP tiles, then over the registers that share the row (all of them on gfx936, none on CDNA3),
// then over the lanes holding the row.
__device__ __forceinline__ void row_max(float (&out)[4], const float (&x)[TLOOP][4], int rowid, int lane16id) {
  float tiles[4];
  for (int k = 0; k < 4; ++k) {
    tiles[k] = x[0][k];
    for (int td = 1; td < TLOOP; ++td) tiles[k] = __builtin_fmaxf(tiles[k], x[td][k]);
  }
  if (D_REGS_SHARE_ROW) {
    float v = tiles[0];
    for (int k = 1; k < 4; ++k) v = __builtin_fmaxf(v, tiles[k]);
    for (int k = 0; k < 4; ++k) tiles[k] = v;
  }
  for (int i = 0; i < 4; ++i) out[i] = max_over_lanes<D_SAME_ROW_LANES>(tiles[i]);
}
__device__ __forceinline__ void row_sum(float (&out)[4], const float (&x)[TLOOP][4], int rowid, int lane16id) {
  float tiles[4];
  for (int k = 0; k < 4; ++k) tiles[k] = (x[0][k] + x[1][k]) + (x[2][k] + x[3][k]);
  if (D_REGS_SHARE_ROW) {
    float v = tiles[0];
    for (int k = 1; k < 4; ++k) v = v + tiles[k];                // registers in order 0..3
    for (int k = 0; k < 4; ++k) tiles[k] = v;
  }
  for (int i = 0; i < 4; ++i) out[i] = sum_over_lanes<D_SAME_ROW_LANES>(tiles[i]);
}

// ---- W = P * sV, quantized per scale group --------------------------------------------------
// The scale group of a token (offset within the 64-token chunk), i.e. the instruction j its
// scale is applied to.
//   fragment:   pv_tile = (token % 16) / 8, the instruction that consumes the token
//               (gfx936: token_offset = rowid + 4i, so i/2; CDNA3: lane16id/8);
//   contiguous: token / 32, tokens 0-31 | 32-63 (the bug).
template <Grouping GROUPING>
__device__ __forceinline__ int scale_group(int token) {
  return GROUPING == Grouping::fragment ? token % 16 / 8 : token / 32;
}

// W[td][i] in the QK output layout. Writes Wq to w_lds[16 rows][W_STRIDE] (this wave's slab) and
// returns sw[j][i], the scale of instruction j for register i's row, held by every lane of the row.
//   fragment:   own = the amax of register i's group (its row, pv_tile) over the registers and the
//               lanes holding it; the row's other group comes from the register or lane holding it
//               (other_half), so both instructions' scales stay in registers.
//   contiguous: the amax of tiles 2g, 2g+1 over the whole row, per group g.
template <Grouping GROUPING>
__device__ __forceinline__ void quantize_w(float (&sw)[2][4], const float (&W)[TLOOP][4], int8_t* w_lds, int rowid,
                                           int lane16id) {
  float inv[TLOOP][4];                                       // what each value is quantized with
  if constexpr (GROUPING == Grouping::fragment) {
    float own[4];
    for (int i = 0; i < 4; ++i) {
      const int pv_tile = scale_group<GROUPING>(d_col(rowid, lane16id, i));
      float amax = 0.f;
      for (int k = 0; k < 4; ++k)
        if (d_row(rowid, lane16id, k) == d_row(rowid, lane16id, i) &&
            scale_group<GROUPING>(d_col(rowid, lane16id, k)) == pv_tile)
          for (int td = 0; td < TLOOP; ++td) amax = __builtin_fmaxf(amax, __builtin_fabsf(W[td][k]));
      own[i] = max_over_lanes<D_SAME_ROW_HALF_LANES>(amax);
    }
    for (int i = 0; i < 4; ++i) {
      const bool first = scale_group<GROUPING>(d_col(rowid, lane16id, i)) == 0;
      const float other = other_half(own, i);
      sw[0][i] = quant_scale(first ? own[i] : other);
      sw[1][i] = quant_scale(first ? other : own[i]);
      for (int td = 0; td < TLOOP; ++td) inv[td][i] = quant_inv(own[i]);
    }
  } else {
    for (int g = 0; g < 2; ++g) {
      float in_group[TLOOP][4], amax[4];
      for (int td = 0; td < TLOOP; ++td)
        for (int i = 0; i < 4; ++i) in_group[td][i] = td / 2 == g ? __builtin_fabsf(W[td][i]) : 0.f;
      row_max(amax, in_group, rowid, lane16id);
      for (int i = 0; i < 4; ++i) {
        sw[g][i] = quant_scale(amax[i]);
        for (int td = 2 * g; td < 2 * g + 2; ++td) inv[td][i] = quant_inv(amax[i]);
      }
    }
  }
  for (int td = 0; td < TLOOP; ++td)
    for (int i = 0; i < 4; ++i)
      w_lds[d_row(rowid, lane16id, i) * W_STRIDE + 16 * td + d_col(rowid, lane16id, i)] =
          (int8_t)quantize(W[td][i], inv[td][i]);
}

// ---- PV ------------------------------------------------------------------------------------
// The first n_valid (< 16) tokens of a V column the context ends inside, byte by byte, so that
// nothing past the end is loaded; the missing tokens are zero.
__device__ __forceinline__ int64x2 load_v_partial(const int8_t* v_col, int n_valid) {
  int64_t lo = 0, hi = 0;
  for (int b = 0; b < n_valid; ++b) {
    const int64_t byte = (uint8_t)v_col[b];
    if (b < 8) lo |= byte << (8 * b);
    else hi |= byte << (8 * (b - 8));
  }
  return (int64x2){lo, hi};
}

// o[dt][i] += float(acc_0[i]) * sw[0][i] + float(acc_1[i]) * sw[1][i] over one 64-token chunk
// (the chunk's two products added first, as the references do).
// B lane (rowid, lane16id): column d = 16*dt + lane16id, tokens 16*rowid .. +15 of the chunk in
// one 16-byte load (global_load_dwordx4); bytes 8j..8j+7 feed instruction j, which so consumes
// the tokens {16r + 8j + b : r < 4, b < 8}.
// A lane: row lane16id, Wq[lane16id][16*rowid + 8j .. +7], one 8-byte LDS read per j.
// TAIL (the chunk reaches past limit): a lane whose 16 tokens all exist still loads them at once;
// otherwise it loads the existing ones byte by byte, or nothing.
template <bool TAIL>
__device__ __forceinline__ void pv_chunk(floatx4 (&o)[DTILES], const int8_t* w_lds, const float (&sw)[2][4],
                                         const int8_t* v_cache, const int* block_table, int num_kv_heads, int kvh,
                                         int chunk_start, int limit, int rowid, int lane16id) {
  int64_t wq[2];
  for (int j = 0; j < 2; ++j) wq[j] = *(const int64_t*)(w_lds + lane16id * W_STRIDE + 16 * rowid + 8 * j);
  const int t0 = chunk_start + 16 * rowid;
  const int n_valid = TAIL ? limit - t0 : 16;
  const int8_t* v_tok = v_cache;
  if (n_valid > 0)
    v_tok += cache_head(block_table, num_kv_heads, kvh, t0) * HEAD_DIM * BLOCK_SIZE + t0 % BLOCK_SIZE;
  for (int dt = 0; dt < DTILES; ++dt) {
    const int8_t* v_col = v_tok + (16 * dt + lane16id) * BLOCK_SIZE;
    int64x2 vq = {0, 0};
    if (n_valid >= 16) vq = *(const int64x2*)v_col;
    else if (n_valid > 0) vq = load_v_partial(v_col, n_valid);
    const int32x4 zero = {0, 0, 0, 0};
    const int32x4 acc0 = mma_i32_16x16x32_i8(wq[0], vq.x, zero);
    const int32x4 acc1 = mma_i32_16x16x32_i8(wq[1], vq.y, zero);
    for (int i = 0; i < 4; ++i) o[dt][i] += (float)acc0[i] * sw[0][i] + (float)acc1[i] * sw[1][i];
  }
}

// W = P * sV of a chunk in the QK output layout, from the standalone kernels' p[16][context_len]
// (one kv head). TAIL: tokens at or past context_len are 0 and load nothing.
template <bool TAIL>
__device__ __forceinline__ void load_w(float (&W)[TLOOP][4], const float* p, const float* v_scale,
                                       const int* block_table, int context_len, int chunk_start, int rowid,
                                       int lane16id) {
  for (int td = 0; td < TLOOP; ++td) {
    const int tile_start = chunk_start + 16 * td;
    for (int i = 0; i < 4; ++i) W[td][i] = 0.f;
    if (TAIL && tile_start >= context_len) continue;
    const int64_t slot0 = tile_slot(block_table, 1, 0, tile_start);
    for (int i = 0; i < 4; ++i) {
      const int qrow = d_row(rowid, lane16id, i);
      const int token_offset = d_col(rowid, lane16id, i);
      const int t = tile_start + token_offset;
      if (!TAIL || t < context_len) W[td][i] = p[qrow * context_len + t] * v_scale[slot0 + token_offset];
    }
  }
}

// ---- the 4 waves' partial outputs ------------------------------------------------------------
// Waves 1..3 publish o (D layout) to o_lds[NWARPS-1][16][O_STRIDE]; wave 0 adds them in wave
// order, so its o ends as ((o0 + o1) + o2) + o3 (three waves' partials keep the decode kernel's LDS
// within half of 64 KiB: two workgroups per CU). Every thread of the workgroup must call this.
__device__ __forceinline__ void sum_waves(floatx4 (&o)[DTILES], float* o_lds, int warpid, int rowid, int lane16id) {
  if (warpid > 0)
    for (int dt = 0; dt < DTILES; ++dt)
      for (int i = 0; i < 4; ++i)
        o_lds[((warpid - 1) * 16 + d_row(rowid, lane16id, i)) * O_STRIDE + 16 * dt + d_col(rowid, lane16id, i)] =
            o[dt][i];
  __syncthreads();
  if (warpid == 0)
    for (int k = 1; k < NWARPS; ++k)
      for (int dt = 0; dt < DTILES; ++dt)
        for (int i = 0; i < 4; ++i)
          o[dt][i] += o_lds[((k - 1) * 16 + d_row(rowid, lane16id, i)) * O_STRIDE + 16 * dt + d_col(rowid, lane16id, i)];
}
