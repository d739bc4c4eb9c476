// A kernel a user might write: dequantize an int8 K cache [seq][head][dim] with its per-(seq, head)
// scale, k_scale[seq][head], one work-item per element over a grid-wide index. kv_scale_index
// flattens the scale's index as head-major (head * num_seqs + seq) while the buffer is seq-major:
// every (seq, head) but the first and last reads another sequence's or head's scale. The products
// are identity-mismatch findings on seq and head (gfxsim hip run ... --tag k:0=seq --tag k:1=head
// --tag k_scale:0=seq --tag k_scale:1=head). kv_scale_index_fixed indexes seq * num_heads + head.
#include <hip/hip_runtime.h>
#include <stdint.h>

template <bool kSeqMajor>
__device__ void dequant(const int8_t* k, const float* k_scale, float* out, int num_seqs, int num_heads,
                        int head_dim) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= num_seqs * num_heads * head_dim) return;
  const int seq = i / (num_heads * head_dim), head = i / head_dim % num_heads;
  const int s = kSeqMajor ? seq * num_heads + head : head * num_seqs + seq;
  out[i] = (float)k[i] * k_scale[s];
}

extern "C" __global__ void kv_scale_index(const int8_t* k, const float* k_scale, float* out, int num_seqs,
                                          int num_heads, int head_dim) {
  dequant<false>(k, k_scale, out, num_seqs, num_heads, head_dim);
}

extern "C" __global__ void kv_scale_index_fixed(const int8_t* k, const float* k_scale, float* out, int num_seqs,
                                                int num_heads, int head_dim) {
  dequant<true>(k, k_scale, out, num_seqs, num_heads, head_dim);
}
