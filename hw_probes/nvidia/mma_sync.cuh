// One warp per experiment: load C, run ITERS chained mma.sync (D of step i is C of step i+1), store D.
// Register words come in per lane exactly as the layout file places them: A 4, B 2, C/D 4 words.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

template <class Mma>
__global__ void mma_kernel(const uint32_t* A, const uint32_t* B, const uint32_t* C, uint32_t* D, int iters) {
  const int e = blockIdx.x, lane = threadIdx.x;
  uint32_t c[4], d[4];
  for (int i = 0; i < 4; ++i) c[i] = C[(e * 32 + lane) * 4 + i];
  for (int it = 0; it < iters; ++it) {
    const uint32_t* a = A + ((e * iters + it) * 32 + lane) * 4;
    const uint32_t* b = B + ((e * iters + it) * 32 + lane) * 2;
    Mma::run(d, a, b, c);
    for (int i = 0; i < 4; ++i) c[i] = d[i];
  }
  for (int i = 0; i < 4; ++i) D[(e * 32 + lane) * 4 + i] = c[i];
}

template <class Mma>
static int launch(int n_exp, int iters, const uint32_t* A, const uint32_t* B, const uint32_t* C, uint32_t* D) {
  size_t na = size_t(n_exp) * iters * 32 * 4, nb = size_t(n_exp) * iters * 32 * 2, nc = size_t(n_exp) * 32 * 4;
  uint32_t *dA, *dB, *dC, *dD;
  cudaMalloc(&dA, na * 4); cudaMalloc(&dB, nb * 4); cudaMalloc(&dC, nc * 4); cudaMalloc(&dD, nc * 4);
  cudaMemcpy(dA, A, na * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dB, B, nb * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dC, C, nc * 4, cudaMemcpyHostToDevice);
  mma_kernel<Mma><<<n_exp, 32>>>(dA, dB, dC, dD, iters);
  cudaError_t err = cudaDeviceSynchronize();
  if (err == cudaSuccess) err = cudaMemcpy(D, dD, nc * 4, cudaMemcpyDeviceToHost);
  cudaFree(dA); cudaFree(dB); cudaFree(dC); cudaFree(dD);
  return int(err);
}

#define MMA_INT(NAME, PTX)                                                                         \
  struct NAME {                                                                                    \
    __device__ static void run(uint32_t* d, const uint32_t* a, const uint32_t* b, const uint32_t* c) { \
      asm volatile(PTX " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"                 \
                   : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),             \
                     "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));                                  \
    }                                                                                              \
  };

#define MMA_F32(NAME, PTX)                                                                         \
  struct NAME {                                                                                    \
    __device__ static void run(uint32_t* d, const uint32_t* a, const uint32_t* b, const uint32_t* c) { \
      float f[4];                                                                                  \
      asm volatile(PTX " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"                 \
                   : "=f"(f[0]), "=f"(f[1]), "=f"(f[2]), "=f"(f[3])                                \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),             \
                     "f"(__uint_as_float(c[0])), "f"(__uint_as_float(c[1])),                       \
                     "f"(__uint_as_float(c[2])), "f"(__uint_as_float(c[3])));                      \
      for (int i = 0; i < 4; ++i) d[i] = __float_as_uint(f[i]);                                    \
    }                                                                                              \
  };
