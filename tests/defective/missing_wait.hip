// A user's hand-written load: y[i] = x[i] * s with the global load in inline asm, which the
// compiler cannot see, so it inserts no s_waitcnt for it: the multiply reads v before the load has
// returned -> missing-wait, NaN outputs. -DFIXED waits for it (the fixed twin).
#include <hip/hip_runtime.h>

__global__ void scale_asm_load(const float* x, float* y, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v;
  asm volatile("global_load_dword %0, %1, off" : "=v"(v) : "v"(x + i) : "memory");
#ifdef FIXED
  asm volatile("s_waitcnt vmcnt(0)" ::: "memory");
#endif
  y[i] = v * s;
}
