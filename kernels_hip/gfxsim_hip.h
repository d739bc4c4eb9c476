// gfxsim_hip.h: what the HIP twins need from hip_runtime.h, and the matrix builtins per target.
//
// The twins are compiled with `-nogpuinc -nogpulib`: no HIP headers and no device libraries, so
// threadIdx/blockIdx read the hardware registers (v0, s2..s4) directly, and the code objects
// have no hidden kernel arguments and no external calls. gfxsim's asm front end can then set up
// a wave from the explicit arguments alone.
//
// Targets:
//   gfx940/gfx941/gfx942/gfx950  v_mfma_*, CDNA3 C/D layout (GFXSIM_JUMP_LAYOUT 0).
//   gfx936/gfx928 (Hygon DTK)    v_mmac_*, "jump" C/D layout (GFXSIM_JUMP_LAYOUT 1).
//   gfx936 stand-in              `gfxsim hip build --arch gfx936`: compiled for gfx942 with
//                                -DGFXSIM_JUMP_LAYOUT=1. No upstream clang knows gfx936, and the
//                                A/B operand layouts of v_mfma_i32_16x16x32_i8 and
//                                v_mmac_i32_16x16x32_i8 are identical, so the code keeps gfx936's
//                                index formulas and gfxsim executes its v_mfma with gfx936's D
//                                layout. On a real gfx942 that build computes wrong results.
#pragma once

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __forceinline__ __attribute__((always_inline)) inline
#define __launch_bounds__(max_threads) __attribute__((amdgpu_flat_work_group_size(1, max_threads)))

typedef __INT8_TYPE__ int8_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __INT32_TYPE__ int32_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __INT64_TYPE__ int64_t;

typedef int32_t int32x4 __attribute__((ext_vector_type(4)));
typedef float floatx4 __attribute__((ext_vector_type(4)));
typedef int64_t int64x2 __attribute__((ext_vector_type(2)));    // 16 bytes: global_load_dwordx4
typedef uint16_t bf16x4 __attribute__((ext_vector_type(4)));    // 4 bf16 bit patterns, 2 VGPRs
typedef uint16_t bf16x8 __attribute__((ext_vector_type(8)));

// threadIdx.x / blockIdx.{x,y,z} as in hip_runtime.h (properties, no storage).
struct __gfxsim_threadIdx {
  static __device__ uint32_t __get_x() { return __builtin_amdgcn_workitem_id_x(); }
  __declspec(property(get = __get_x)) uint32_t x;
};
struct __gfxsim_blockIdx {
  static __device__ uint32_t __get_x() { return __builtin_amdgcn_workgroup_id_x(); }
  static __device__ uint32_t __get_y() { return __builtin_amdgcn_workgroup_id_y(); }
  static __device__ uint32_t __get_z() { return __builtin_amdgcn_workgroup_id_z(); }
  __declspec(property(get = __get_x)) uint32_t x;
  __declspec(property(get = __get_y)) uint32_t y;
  __declspec(property(get = __get_z)) uint32_t z;
};
extern const __device__ __attribute__((weak)) __gfxsim_threadIdx threadIdx;
extern const __device__ __attribute__((weak)) __gfxsim_blockIdx blockIdx;

constexpr int WARP_SIZE = 64;

__device__ __forceinline__ void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// LDS written by some lanes of a wave and read by other lanes of the same wave: the wave's LDS
// instructions execute in order, so only the compiler has to be kept from reordering them.
__device__ __forceinline__ void __syncwave() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}

__device__ __forceinline__ int min(int a, int b) { return a < b ? a : b; }

__device__ __forceinline__ uint32_t __lane_id() {
  return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}

// ds_bpermute_b32 addresses the source lane in bytes.
__device__ __forceinline__ float __shfl_xor(float var, int lane_mask) {
  const int src = (int)(__lane_id() ^ lane_mask) << 2;
  return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(src, __builtin_bit_cast(int, var)));
}

// ---- matrix instructions ------------------------------------------------------------------
// A[m][k] at lane m + 16*(k/8) (i8) or m + 16*(k/4) (bf16) on every target here; only C/D differ.
#if defined(__gfx936__) || defined(__gfx928__)
#if defined(GFXSIM_JUMP_LAYOUT) && !GFXSIM_JUMP_LAYOUT
#error "gfx936/gfx928 MMAC always writes D in the jump layout"
#endif
#define GFXSIM_JUMP_LAYOUT 1
__device__ __forceinline__ int32x4 mma_i32_16x16x32_i8(int64_t a, int64_t b, int32x4 c) {
  return __builtin_amdgcn_mmac_i32_16x16x32i8(a, b, c);            // v_mmac_i32_16x16x32_i8
}
__device__ __forceinline__ floatx4 mma_f32_16x16x16_bf16(bf16x4 a, bf16x4 b, floatx4 c) {
  return __builtin_amdgcn_mmac_f32_16x16x16bf16(a, b, c);          // v_mmac_f32_16x16x16_bf16
}
#elif defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__)
#ifndef GFXSIM_JUMP_LAYOUT
#define GFXSIM_JUMP_LAYOUT 0
#endif
__device__ __forceinline__ int32x4 mma_i32_16x16x32_i8(int64_t a, int64_t b, int32x4 c) {
  return __builtin_amdgcn_mfma_i32_16x16x32_i8(a, b, c, 0, 0, 0);  // v_mfma_i32_16x16x32_i8
}
__device__ __forceinline__ floatx4 mma_f32_16x16x16_bf16(bf16x4 a, bf16x4 b, floatx4 c) {
  return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(short __attribute__((ext_vector_type(4))), a),
                                                   __builtin_bit_cast(short __attribute__((ext_vector_type(4))), b),
                                                   c, 0, 0, 0);     // v_mfma_f32_16x16x16_bf16
}
#else
#error "gfxsim_hip.h: compile for gfx940/gfx941/gfx942/gfx950, or gfx936/gfx928 with the Hygon DTK"
#endif

// ---- where D[m][n] lives: the only arch-dependent index formulas ---------------------------
// Register i of lane (rowid = lane/16, lane16id = lane%16) holds D[d_row][d_col].
#if GFXSIM_JUMP_LAYOUT
// gfx936 "jump" layout: D[m][n] at lane m + 16*(n%4), reg n/4.
__device__ __forceinline__ int d_row(int /*rowid*/, int lane16id, int /*i*/) { return lane16id; }
__device__ __forceinline__ int d_col(int rowid, int /*lane16id*/, int i) { return rowid + 4 * i; }
// Lanes holding the same D row: the 4 lanes of one lane16id; one of them (rowid 0) leads.
#define D_SAME_ROW_LANES 16, 32
__device__ __forceinline__ bool d_row_leader(int rowid, int /*lane16id*/) { return rowid == 0; }
// ... and the same 8-column half (col/8 = i/2 is a register index, not a lane index); the row's
// other half is in register i^2 of the same lane.
#define D_SAME_ROW_HALF_LANES 16, 32
__device__ __forceinline__ float other_half(const float (&v)[4], int i) { return v[i ^ 2]; }
#else
// CDNA3: D[m][n] at lane n + 16*(m/4), reg m%4.
__device__ __forceinline__ int d_row(int rowid, int /*lane16id*/, int i) { return 4 * rowid + i; }
__device__ __forceinline__ int d_col(int /*rowid*/, int lane16id, int /*i*/) { return lane16id; }
// Lanes holding the same D row (register by register): the 16 lanes of one rowid; lane16id 0 leads.
#define D_SAME_ROW_LANES 1, 2, 4, 8
__device__ __forceinline__ bool d_row_leader(int /*rowid*/, int lane16id) { return lane16id == 0; }
// ... and the same 8-column half: col/8 = lane16id/8, so bit 3 of the lane stays fixed; the row's
// other half is in register i of lane ^ 8.
#define D_SAME_ROW_HALF_LANES 1, 2, 4
__device__ __forceinline__ float other_half(const float (&v)[4], int i) { return __shfl_xor(v[i], 8); }
#endif

