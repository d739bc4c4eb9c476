// mma.sync e4m3 -> f32 (sm_89+, PTX ISA 8.4+ for sm_90): a separate library so an older nvcc
// that rejects it leaves the other instructions measurable.
#include "mma_sync.cuh"

MMA_F32(MmaE4M3, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")

extern "C" int probe_mma(const char* which, int n_exp, int iters, const uint32_t* A, const uint32_t* B,
                         const uint32_t* C, uint32_t* D) {
  if (which[0] == 'e') return launch<MmaE4M3>(n_exp, iters, A, B, C, D);
  return -1;
}
