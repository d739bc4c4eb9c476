// Kernels that exercise the launch ABI: hidden arguments, null pointers, a by-value struct
// holding pointers, dynamic LDS, the private segment (a local array and register spills).
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))

static __attribute__((device)) unsigned tid() { return __builtin_amdgcn_workitem_id_x(); }

// the implicit (hidden) arguments, word by word, as the kernel sees them
extern "C" __global__ void implicit_words(unsigned* out) {
  const unsigned* ia = (const unsigned*)__builtin_amdgcn_implicitarg_ptr();
  unsigned t = tid();
  if (t < 64) out[__builtin_amdgcn_workgroup_id_x() * 64 + t] = ia[t];
}

// blockDim/gridDim the way hip_runtime.h reads them, one value per work-item
extern "C" __global__ void dims(int* out) {
  unsigned bx = __builtin_amdgcn_workgroup_size_x(), by = __builtin_amdgcn_workgroup_size_y();
  const unsigned* ia = (const unsigned*)__builtin_amdgcn_implicitarg_ptr();
  unsigned gx = ia[0], gy = ia[1];
  unsigned x = __builtin_amdgcn_workitem_id_x(), y = __builtin_amdgcn_workitem_id_y();
  unsigned i = (__builtin_amdgcn_workgroup_id_y() * by + y) * (gx * bx) + __builtin_amdgcn_workgroup_id_x() * bx + x;
  out[i] = (int)(gx * 1000000 + gy * 10000 + bx * 100 + by);
}

// the AQL dispatch packet: workgroup sizes, grid sizes (work-items), private and group segment sizes
extern "C" __global__ void packet(unsigned* out) {
  const unsigned short* p16 = (const unsigned short*)__builtin_amdgcn_dispatch_ptr();
  const unsigned* p32 = (const unsigned*)p16;
  unsigned t = tid();
  if (t < 8) out[__builtin_amdgcn_workgroup_id_x() * 8 + t] = t < 3 ? p16[2 + t] : p32[t];
}

// an optional pointer, as vLLM's alibi_slopes: null means "none"
extern "C" __global__ void optional_bias(float* out, const float* x, const float* bias) {
  unsigned t = tid();
  out[t] = x[t] + (bias ? bias[t] : 0.0f);
}

// the same, dereferencing the pointer unconditionally
extern "C" __global__ void required_bias(float* out, const float* x, const float* bias) {
  unsigned t = tid();
  out[t] = x[t] + bias[t];
}

// a 96-byte struct passed by value, pointers inside it
struct Params {
  const float* a;
  const float* b;
  int n;
  float scale;
  float* c;
  int extra[16];
};
extern "C" __global__ void by_value_struct(Params p) {
  unsigned t = tid();
  if ((int)t < p.n) p.c[t] = (p.a[t] + p.b[t]) * p.scale + (float)p.extra[5];  // 96 bytes in all
}

// extern __shared__ sized at launch, after a fixed __shared__ array
extern "C" __global__ void dynamic_lds(float* out, unsigned* lds_size) {
  extern __shared__ float dyn[];
  __shared__ float fixed[16];
  unsigned t = tid();
  if (t < 16) fixed[t] = 100.0f * t;
  dyn[t] = 2.0f * t;
  __builtin_amdgcn_s_barrier();
  out[t] = dyn[(t + 1) & 63] + fixed[t & 15];
  if (t == 0) *lds_size = *(const unsigned*)((const char*)__builtin_amdgcn_implicitarg_ptr() + 120);
}

// a local array indexed by data: clang keeps it in the private segment
extern "C" __global__ void local_array(int* out, const int* idx, int n) {
  int a[64];
  unsigned t = tid(), g = __builtin_amdgcn_workgroup_id_x() * 64 + t;
  for (int i = 0; i < 64; ++i) a[i] = i * (int)t + n;
  out[g] = a[idx[g] & 63];
}

// more live values than the register budget holds: clang spills
extern "C" __global__ void __attribute__((amdgpu_num_vgpr(24))) spill(float* out, const float* in) {
  unsigned t = tid();
  float v[40];
#pragma unroll
  for (int i = 0; i < 40; ++i) v[i] = in[t * 40 + i];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 40; ++i) s += v[i] * v[39 - i];
#pragma unroll
  for (int i = 0; i < 40; ++i) out[t * 40 + i] = v[i] * s;
}

// a table of pointers read from memory: clang cannot tell their address space (flat_* accesses)
extern "C" __global__ void pointer_table(float* const* rows, float* const* outs, int n) {
  unsigned t = tid(), r = __builtin_amdgcn_workgroup_id_x();
  if ((int)t < n) outs[r][t] = rows[r][t] * 2.0f + (float)r;
}

// one generic pointer to LDS, private or global memory by lane (src_shared_base, src_private_base)
extern "C" __global__ void generic_pointer(float* g, int sel) {
  __shared__ float lds[64];
  float priv[16];
  unsigned t = tid();
  lds[t] = t;
  for (int i = 0; i < 16; ++i) priv[i] = i * t;
  float* p = (t & sel) ? &lds[t ^ 1] : ((t & 2) ? &priv[t & 15] : g + t);
  __builtin_amdgcn_s_barrier();
  g[t + 64] = *p;
}

// every SGPR taken by an inline asm: clang spills the live scalars into VGPR lanes around it
#define EVERY_SGPR \
    "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13", \
    "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s24", "s25", "s26", "s27", \
    "s28", "s29", "s30", "s31", "s33", "s34", "s35", "s36", "s37", "s38", "s39", "s40", "s41", "s42", \
    "s43", "s44", "s45", "s46", "s47", "s48", "s49", "s50", "s51", "s52", "s53", "s54", "s55", "s56", \
    "s57", "s58", "s59", "s60", "s61", "s62", "s63", "s64", "s65", "s66", "s67", "s68", "s69", "s70", \
    "s71", "s72", "s73", "s74", "s75", "s76", "s77", "s78", "s79", "s80", "s81", "s82", "s83", "s84", \
    "s85", "s86", "s87", "s88", "s89", "s90", "s91", "s92", "s93", "s94", "s95", "s96", "s97", "s98", \
    "s99"
extern "C" __global__ void sgpr_spill(int* out, const int* in) {
  unsigned t = tid();
  int a = in[0], b = in[1], c = in[2], d = in[3];
  asm volatile("; every SGPR clobbered" ::: EVERY_SGPR);
  out[t] = (a * 3 + b) * (int)t + c - d;
}
