"""C = A @ B over one tile per program: fp16, int8 and fp8 (gfx942's e4m3fnuz, and e5m2fnuz as
bf8) operands through tl.dot, which Triton lowers to MFMA (v_mfma_f32_32x32x8_f16,
v_mfma_i32_32x32x16_i8, v_mfma_f32_32x32x16_fp8_fp8 / _bf8_bf8 at these shapes). A is M x K,
B is K x N, both row-major; C is M x N, fp32 (int32 for int8)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import triton
import triton.language as tl


@triton.jit
def gemm_tile(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr, INT: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if INT:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
        if INT:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        else:
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


FP8 = ml_dtypes.float8_e4m3fnuz
BF8 = ml_dtypes.float8_e5m2fnuz


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact products summed in float64 (int64 for int8), returned in the kernel's output type."""
    if a.dtype == np.int8:
        return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
