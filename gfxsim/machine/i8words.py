"""An 8-bit integer matrix instruction's D from its operands' register words, compiled (the
provenance-off words path, matrix.MatrixOps.mma_words): each element's K products summed exactly
in int32, C added in int64, the sum wrapped to int32 where D's plan puts it. The numpy path it
replaces (the operands gathered as floats, one batched GEMM, C added: matrix._mma_i8) makes a dozen
calls and two remembered operand copies per instruction; this is one pass over 16 x 16 x 32 products.
"""
from __future__ import annotations

import numpy as np

from .jit import njit


def exact_in_int32(k: int) -> bool:
    """Whether K products of two 8-bit numbers (at most 255 * 255 each) sum inside int32."""
    return k * 255 * 255 < 2 ** 31


@njit
def mma_i8(a, b, c, pa, pb, tc, td, d) -> bool:
    """D = A.B + C for one instruction of every member and block: ``a``, ``b`` the operands'
    elements (int8 or uint8, flat: words.view(type).reshape(-1)); ``pa`` ``[blocks, M, K]``, ``pb``
    ``[blocks, K, N]`` their word plans (plans.word_plan); ``c`` C's words as int32 (flat; empty: C
    is 0) read through ``tc``; ``d`` D's words as int32 (flat) written through ``td`` (both ``[blocks,
    M, N]``, plans.flat_plan). Returns whether some sum left int32 (D is then wrapped as written:
    the caller asks the numpy path where)."""
    nb, M, K = pa.shape
    N = pb.shape[2]
    at = np.empty((M, K), np.int32)
    bt = np.empty((N, K), np.int32)            # B's columns as rows: the products run along both
    has_c = c.shape[0] > 0
    over = False
    for blk in range(nb):
        for m in range(M):
            for k in range(K):
                at[m, k] = a[pa[blk, m, k]]
        for k in range(K):
            for n in range(N):
                bt[n, k] = b[pb[blk, k, n]]
        for m in range(M):
            for n in range(N):
                s = np.int32(0)
                for k in range(K):
                    s += at[m, k] * bt[n, k]
                t = np.int64(s)
                if has_c:
                    t += np.int64(c[tc[blk, m, n]])
                if t < -2 ** 31 or t > 2 ** 31 - 1:
                    over = True
                d[td[blk, m, n]] = np.int32(t)
    return over
