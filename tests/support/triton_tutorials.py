"""Triton tutorial-style kernels (softmax, layer norm, a masked matmul, flash attention, reductions,
scans, sorts, atomics, math functions, every tl.dot operand type, tensor descriptors, fp8 casts):
the instruction mix Triton emits for gfx942, each run on the asm front end against numpy in
tests/gfxsim/triton/test_triton_tutorials.py. Import after ``support.triton_small.need_triton()``."""
import triton
import triton.language as tl


@triton.jit
def softmax(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=float("-inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * cols + offs, e / tl.sum(e, 0), mask=offs < cols)


@triton.jit
def layernorm(x_ptr, y_ptr, w_ptr, b_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, 0) / cols
    d = tl.where(m, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(d * d, 0) / cols + eps)
    y = d * rstd * tl.load(w_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m)
    tl.store(y_ptr + row * cols + offs, y.to(tl.float16), mask=m)


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def matmul_desc(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    a_d = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_d = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    c_d = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    m0, n0 = tl.program_id(0) * BM, tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_d.load([m0, k]), b_d.load([k, n0]))
    c_d.store([m0, n0], acc.to(tl.float16))


@triton.jit
def attention(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, sm_scale, HEAD: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, HEAD)
    q = tl.load(q_ptr + rm[:, None] * HEAD + rd[None, :], mask=rm[:, None] < seq_len, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD), tl.float32)
    for start in range(0, seq_len, BLOCK_N):
        rn = start + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + rn[None, :] * HEAD + rd[:, None], mask=rn[None, :] < seq_len, other=0.0)
        s = tl.where(rn[None, :] < seq_len, tl.dot(q, kt) * (sm_scale * 1.4426950408889634), float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + rn[:, None] * HEAD + rd[None, :], mask=rn[:, None] < seq_len, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    tl.store(o_ptr + rm[:, None] * HEAD + rd[None, :], (acc / l_i[:, None]).to(tl.float16), mask=rm[:, None] < seq_len)


@triton.jit
def dots(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, KIND: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    if KIND == 0:
        c = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    elif KIND == 1:
        c = tl.dot(a, b, input_precision="ieee")
    elif KIND == 2:
        c = tl.dot(a.to(tl.float16), b.to(tl.float16))
    else:
        c = tl.dot(a.to(tl.int8), b.to(tl.int8)).to(tl.float32)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


@triton.jit
def math_ops(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + 0 * BLOCK + offs, tl.exp(x))
    tl.store(out_ptr + 1 * BLOCK + offs, tl.log(tl.abs(x) + 1))
    tl.store(out_ptr + 2 * BLOCK + offs, tl.sqrt(tl.abs(x)))
    tl.store(out_ptr + 3 * BLOCK + offs, tl.rsqrt(tl.abs(x) + 1))
    tl.store(out_ptr + 4 * BLOCK + offs, tl.sigmoid(x))
    tl.store(out_ptr + 5 * BLOCK + offs, tl.sin(x))
    tl.store(out_ptr + 6 * BLOCK + offs, tl.cos(x))
    tl.store(out_ptr + 7 * BLOCK + offs, x / (x + 3.0))
    tl.store(out_ptr + 8 * BLOCK + offs, tl.math.erf(x))
    tl.store(out_ptr + 9 * BLOCK + offs, tl.extra.hip.libdevice.tanh(x))
    tl.store(out_ptr + 10 * BLOCK + offs, tl.floor(x) + tl.ceil(x))
    tl.store(out_ptr + 11 * BLOCK + offs, tl.fma(x, x, 1.0))
    tl.store(out_ptr + 12 * BLOCK + offs, (x * 100).to(tl.int32).to(tl.float32))
    tl.store(out_ptr + 13 * BLOCK + offs, x.to(tl.bfloat16).to(tl.float32))


@triton.jit
def lanes(x_ptr, i_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    i = tl.load(i_ptr + offs)
    tl.store(out_ptr + offs, tl.sort(x, 0))
    tl.store(out_ptr + BLOCK + offs, tl.cumsum(x, 0))
    tl.store(out_ptr + 2 * BLOCK + offs, (i // 7).to(tl.float32) + (i >> 2).to(tl.float32))
    tl.store(out_ptr + 3 * BLOCK + offs, tl.argmax(x, 0).to(tl.float32) + tl.argmin(x, 0).to(tl.float32) * 1000 + 0 * x)
    tl.store(out_ptr + 4 * BLOCK + offs, tl.umulhi(i.to(tl.uint32), i.to(tl.uint32)).to(tl.float32))
    tl.store(out_ptr + 5 * BLOCK + offs, tl.xor_sum(i, 0).to(tl.float32) + 0 * x)
    tl.store(out_ptr + 6 * BLOCK + offs, tl.rand(0, offs))


@triton.jit
def atomics(x_ptr, o_ptr, h_ptr, c_ptr, f_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0, cache_modifier=".cg")
    tl.atomic_max(o_ptr, tl.max(tl.where(m, x, float("-inf")), 0))
    tl.atomic_min(o_ptr + 1, tl.min(tl.where(m, x, float("inf")), 0))
    tl.atomic_add(h_ptr + (offs % 8), 1, mask=m)
    tl.atomic_cas(c_ptr, 0, 7)
    tl.atomic_xchg(c_ptr + 1, 5)
    tl.atomic_add(f_ptr + offs % 4, x.to(tl.float16), mask=m)


@triton.jit
def wide_rows(x_ptr, y_ptr, stride, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * stride + offs)
    a, b = tl.split(tl.join(x, x * 2))
    tl.store(y_ptr + r * BLOCK + offs, a + b)
