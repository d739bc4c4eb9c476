// mma.sync s8, s4, f16 and bf16 (sm_80+). Built by probe.py into a shared library called through ctypes.
#include "mma_sync.cuh"

MMA_INT(MmaS8, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
MMA_INT(MmaS4, "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32")
MMA_F32(MmaF16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
MMA_F32(MmaBF16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")

extern "C" int probe_mma(const char* which, int n_exp, int iters, const uint32_t* A, const uint32_t* B,
                         const uint32_t* C, uint32_t* D) {
  const char* s = which;
  if (s[0] == 's' && s[1] == '8') return launch<MmaS8>(n_exp, iters, A, B, C, D);
  if (s[0] == 's' && s[1] == '4') return launch<MmaS4>(n_exp, iters, A, B, C, D);
  if (s[0] == 'f' && s[1] == '1') return launch<MmaF16>(n_exp, iters, A, B, C, D);
  if (s[0] == 'b' && s[1] == 'f') return launch<MmaBF16>(n_exp, iters, A, B, C, D);
  return -1;
}

extern "C" int probe_device(char* name, int n, int* major, int* minor, int* driver, int* runtime) {
  cudaDeviceProp p;
  int err = int(cudaGetDeviceProperties(&p, 0));
  if (err) return err;
  for (int i = 0; i < n - 1 && p.name[i]; ++i) { name[i] = p.name[i]; name[i + 1] = 0; }
  *major = p.major; *minor = p.minor;
  cudaDriverGetVersion(driver);
  cudaRuntimeGetVersion(runtime);
  return 0;
}
