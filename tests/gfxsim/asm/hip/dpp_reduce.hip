// Wave-level scan and max written with the DPP builtins, in the style of a hand-tuned reduction:
// clang -O3 turns them into v_mov_b32_dpp and fuses some into v_add_f32_dpp. Compiled with the
// twins' flags (-nogpuinc -nogpulib), so it needs nothing from hip_runtime.h.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
typedef unsigned int uint32_t;

// DPP_CTRL codes (Vega / CDNA3 ISA)
#define ROW_SHR(n) (0x110 + (n))
#define ROW_ROR(n) (0x120 + (n))
#define WAVE_SHR1 0x138
#define ROW_MIRROR 0x140
#define ROW_HALF_MIRROR 0x141
#define ROW_BCAST15 0x142
#define ROW_BCAST31 0x143
#define QUAD_PERM(a, b, c, d) ((a) | ((b) << 2) | ((c) << 4) | ((d) << 6))

__device__ static inline float bits(int x) { return __builtin_bit_cast(float, x); }
__device__ static inline int word(float x) { return __builtin_bit_cast(int, x); }

// old = 0 where a lane is not written: an add of the identity
#define ADD_DPP(v, ctrl, rmask, bmask) \
  v += bits(__builtin_amdgcn_update_dpp(0, word(v), ctrl, rmask, bmask, false))
#define MAX_DPP(v, ctrl) \
  v = __builtin_fmaxf(v, bits(__builtin_amdgcn_mov_dpp(word(v), ctrl, 0xf, 0xf, true)))

extern "C" __global__ void dpp_reduce(const float* __restrict__ xs, const float* __restrict__ ys,
                           float* __restrict__ scan, float* __restrict__ vmax, float* __restrict__ excl) {
  uint32_t lane = __builtin_amdgcn_workitem_id_x();
  uint32_t i = __builtin_amdgcn_workgroup_id_x() * 64 + lane;
  // inclusive scan of xs over the wave
  float v = xs[i];
  ADD_DPP(v, ROW_SHR(1), 0xf, 0xf);
  ADD_DPP(v, ROW_SHR(2), 0xf, 0xf);
  ADD_DPP(v, ROW_SHR(4), 0xf, 0xe);
  ADD_DPP(v, ROW_SHR(8), 0xf, 0xc);
  ADD_DPP(v, ROW_BCAST15, 0xa, 0xf);
  ADD_DPP(v, ROW_BCAST31, 0xc, 0xf);
  scan[i] = v;
  // exclusive scan: every lane takes the lane below's; lane 0 reads out of range (bound_ctrl: 0)
  excl[i] = bits(__builtin_amdgcn_mov_dpp(word(v), WAVE_SHR1, 0xf, 0xf, true));
  // max of ys: within quads, halves of rows, rows, then across rows through ds_bpermute
  float m = ys[i];
  MAX_DPP(m, QUAD_PERM(1, 0, 3, 2));
  MAX_DPP(m, QUAD_PERM(2, 3, 0, 1));
  MAX_DPP(m, ROW_HALF_MIRROR);
  MAX_DPP(m, ROW_ROR(8));
  MAX_DPP(m, ROW_MIRROR);
  m = __builtin_fmaxf(m, bits(__builtin_amdgcn_ds_bpermute((int)((lane ^ 16) * 4), word(m))));
  m = __builtin_fmaxf(m, bits(__builtin_amdgcn_ds_bpermute((int)((lane ^ 32) * 4), word(m))));
  vmax[i] = m;
}
