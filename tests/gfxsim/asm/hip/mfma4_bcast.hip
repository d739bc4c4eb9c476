// One block's A broadcast to all 16 blocks of v_mfma_f32_4x4x4_16b_f16 (CBSZ 4, ABID i), as a
// decode kernel broadcasts its query over 16 keys, with B first rotated within rows of 16 lanes by
// DPP (row_ror:4); then B's lanes rotated by BLGP 3. Compiled with -nogpuinc -nogpulib.
#define __global__ __attribute__((global))
typedef unsigned int uint32_t;
typedef _Float16 half4 __attribute__((ext_vector_type(4)));
typedef float float4 __attribute__((ext_vector_type(4)));
typedef int int2v __attribute__((ext_vector_type(2)));

extern "C" __global__ void mfma4_bcast(const half4* __restrict__ a, const half4* __restrict__ b,
                                       float4* __restrict__ out) {
  uint32_t lane = __builtin_amdgcn_workitem_id_x();
  uint32_t base = __builtin_amdgcn_workgroup_id_x() * 64;
  half4 av = a[base + lane];
  int2v bw = __builtin_bit_cast(int2v, b[base + lane]);
  bw.x = __builtin_amdgcn_update_dpp(0, bw.x, 0x124, 0xf, 0xf, false);   // row_ror:4
  bw.y = __builtin_amdgcn_update_dpp(0, bw.y, 0x124, 0xf, 0xf, false);
  half4 bv = __builtin_bit_cast(half4, bw);
  const float4 zero = {0.f, 0.f, 0.f, 0.f};
  float4* o = out + base * 17;
#define BCAST(i) o[(i) * 64 + lane] = __builtin_amdgcn_mfma_f32_4x4x4f16(av, bv, zero, 4, i, 0)
  BCAST(0); BCAST(1); BCAST(2); BCAST(3); BCAST(4); BCAST(5); BCAST(6); BCAST(7);
  BCAST(8); BCAST(9); BCAST(10); BCAST(11); BCAST(12); BCAST(13); BCAST(14); BCAST(15);
  o[16 * 64 + lane] = __builtin_amdgcn_mfma_f32_4x4x4f16(av, bv, zero, 0, 0, 3);
}
