"""A Triton flash-attention forward (online softmax, masked tail) for the bench's Triton figure:
`gfxsim triton bench/triton_attention.py:attn_fwd` runs it on the asm front end."""
import triton
import triton.language as tl


@triton.jit
def attn_fwd(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, sm_scale, HEAD: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr):
    # one program: BLOCK_M query rows against every key, BLOCK_N keys at a time
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, HEAD)
    q = tl.load(q_ptr + rm[:, None] * HEAD + rd[None, :], mask=rm[:, None] < seq_len, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD), tl.float32)
    scale = sm_scale * 1.4426950408889634            # exp(x) = exp2(x * log2 e)
    for start in range(0, seq_len, BLOCK_N):
        rn = start + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + rn[None, :] * HEAD + rd[:, None], mask=rn[None, :] < seq_len, other=0.0)
        s = tl.where(rn[None, :] < seq_len, tl.dot(q, kt) * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + rn[:, None] * HEAD + rd[None, :], mask=rn[:, None] < seq_len, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    tl.store(o_ptr + rm[:, None] * HEAD + rd[None, :], (acc / l_i[:, None]).to(tl.float16), mask=rm[:, None] < seq_len)
