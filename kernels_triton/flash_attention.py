"""Flash-attention forward over one head: O = softmax(Q Kᵀ · sm_scale) V, fp16 Q/K/V, fp32 out.

Each program takes BLOCK_M query rows and walks the keys BLOCK_N at a time with the online
softmax (running max m, running sum l, the accumulator rescaled by exp2(m_old - m_new)); the
exponentials are exp2 of log2(e)-scaled scores, as Triton's tutorial writes them. The last key
block is partial when n_keys is not a multiple of BLOCK_N: MASK_TAIL=True masks its loads and
sets its scores to -inf; MASK_TAIL=False is the defect, reading K and V past n_keys."""
from __future__ import annotations

import numpy as np
import triton
import triton.language as tl


@triton.jit
def flash_attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr, n_queries, n_keys, sm_scale,
                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        MASK_TAIL: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + rm[:, None] * HEAD_DIM + rd[None, :], mask=rm[:, None] < n_queries, other=0.0)
    qk_scale = sm_scale * 1.44269504          # log2(e): exp(x) = exp2(x * log2(e))
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    for start in range(0, n_keys, BLOCK_N):
        rn = start + tl.arange(0, BLOCK_N)
        if MASK_TAIL:
            keep = rn < n_keys
            k = tl.load(k_ptr + rn[None, :] * HEAD_DIM + rd[:, None], mask=keep[None, :], other=0.0)
            v = tl.load(v_ptr + rn[:, None] * HEAD_DIM + rd[None, :], mask=keep[:, None], other=0.0)
            s = tl.dot(q, k) * qk_scale
            s = tl.where(keep[None, :], s, float("-inf"))
        else:
            k = tl.load(k_ptr + rn[None, :] * HEAD_DIM + rd[:, None])
            v = tl.load(v_ptr + rn[:, None] * HEAD_DIM + rd[None, :])
            s = tl.dot(q, k) * qk_scale
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    o = acc / l_i[:, None]
    tl.store(o_ptr + rm[:, None] * HEAD_DIM + rd[None, :], o, mask=rm[:, None] < n_queries)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, sm_scale: float) -> np.ndarray:
    """Exact softmax attention in float64 of the fp16 inputs, as fp32; P is not rounded to fp16
    here, so a comparison allows fp16's relative error on P."""
    s = q.astype(np.float64) @ k.astype(np.float64).T * sm_scale
    p = np.exp(s - s.max(1, keepdims=True))
    return (p @ v.astype(np.float64) / p.sum(1, keepdims=True)).astype(np.float32)
