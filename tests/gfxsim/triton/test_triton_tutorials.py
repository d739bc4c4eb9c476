"""Tutorial-style Triton kernels on the asm front end, each against numpy and silent: every
instruction Triton emits for them has semantics (VALU of every width, DPP and permute reductions,
MUBUF and global atomics, LDS layout conversions, every MFMA tl.dot picks, MODE, the ocml math)."""
import math

import ml_dtypes
import numpy as np
import pytest

from support.triton_small import need_triton

need_triton()

from gfxsim import triton as gt  # noqa: E402
from support import triton_tutorials as tk  # noqa: E402

RNG = np.random.default_rng(0)


def _silent(run):
    assert run.findings == [] or {f.kind for f in run.findings} <= {"lds-bank-conflict"}, run.findings[:3]


def test_softmax_and_layernorm():
    x = RNG.standard_normal((4, 100)).astype(np.float32)
    out, run, _ = gt.run(tk.softmax, (4,), x, np.zeros_like(x), 100, BLOCK=128)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out["y_ptr"], e / e.sum(1, keepdims=True), rtol=1e-6, atol=1e-7)
    _silent(run)
    h = x.astype(np.float16)
    w, b = RNG.standard_normal(100).astype(np.float32), RNG.standard_normal(100).astype(np.float32)
    out, run, _ = gt.run(tk.layernorm, (4,), h, np.zeros_like(h), w, b, 100, 1e-5, BLOCK=128)
    d = h.astype(np.float64) - h.astype(np.float64).mean(1, keepdims=True)
    want = d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(out["y_ptr"].astype(np.float64), want, atol=4e-3)
    _silent(run)


@pytest.mark.parametrize("kernel", ["matmul", "matmul_desc"])
def test_masked_matmul(kernel):
    M, N, K = (40, 72, 50) if kernel == "matmul" else (64, 64, 96)
    a = RNG.standard_normal((M, K)).astype(np.float16)
    b = RNG.standard_normal((K, N)).astype(np.float16)
    out, run, _ = gt.run(getattr(tk, kernel), (2, 3), a, b, np.zeros((M, N), np.float16), M, N, K, BM=32, BN=32, BK=32)
    np.testing.assert_allclose(out["c_ptr"].astype(np.float32), a.astype(np.float32) @ b.astype(np.float32),
                               atol=2e-2, rtol=2e-3)
    _silent(run)


def test_flash_attention_with_a_masked_tail():
    L, D = 100, 64
    q, k, v = (RNG.standard_normal((L, D)).astype(np.float16) for _ in range(3))
    out, run, _ = gt.run(tk.attention, (4,), q, k, v, np.zeros((L, D), np.float16), L, 0.125, HEAD=D, BLOCK_M=32,
                         BLOCK_N=32)
    s = q.astype(np.float64) @ k.astype(np.float64).T * 0.125
    p = np.exp(s - s.max(1, keepdims=True))
    np.testing.assert_allclose(out["o_ptr"], (p / p.sum(1, keepdims=True)) @ v.astype(np.float64), atol=2e-3)
    _silent(run)


@pytest.mark.parametrize("kind, mfma", [(0, "v_mfma_f32_32x32x8_bf16"), (1, "v_mfma_f32_32x32x2_f32"),
                                        (2, "v_mfma_f32_32x32x8_f16"), (3, "v_mfma_i32_32x32x16_i8")])
def test_every_dot_operand_type(kind, mfma):
    a = RNG.integers(-3, 4, (32, 32)).astype(np.float32)
    b = RNG.integers(-3, 4, (32, 32)).astype(np.float32)
    out, run, k = gt.run(tk.dots, (1,), a, b, np.zeros((32, 32), np.float32), M=32, N=32, K=32, KIND=kind)
    assert mfma in {i.mnemonic for i in k.instructions}
    np.testing.assert_array_equal(out["c_ptr"], a @ b)
    _silent(run)


def test_math_functions():
    x = (RNG.standard_normal(256) * 3).astype(np.float32)
    out, run, _ = gt.run(tk.math_ops, (1,), x, np.zeros(14 * 256, np.float32), BLOCK=256)
    o, f = out["out_ptr"].reshape(14, 256).astype(np.float64), x.astype(np.float64)
    want = [np.exp(f), np.log(np.abs(f) + 1), np.sqrt(np.abs(f)), 1 / np.sqrt(np.abs(f) + 1), 1 / (1 + np.exp(-f)),
            np.sin(f), np.cos(f), f / (f + 3), [math.erf(v) for v in f], np.tanh(f), np.floor(f) + np.ceil(f),
            f * f + 1, np.trunc(x * np.float32(100)), x.astype(ml_dtypes.bfloat16).astype(np.float64)]
    for k, w in enumerate(want):
        np.testing.assert_allclose(o[k], w, rtol=2e-6, atol=1e-6, err_msg=f"output {k}")
    _silent(run)


def test_sorts_scans_argmax_integer_division_and_rand():
    x = RNG.standard_normal(256).astype(np.float32)
    i = RNG.integers(0, 1000, 256).astype(np.int32)
    out, run, _ = gt.run(tk.lanes, (1,), x, i, np.zeros(7 * 256, np.float32), BLOCK=256)
    o = out["out_ptr"].reshape(7, 256)
    np.testing.assert_array_equal(o[0], np.sort(x))
    np.testing.assert_allclose(o[1], np.cumsum(x.astype(np.float64)), atol=1e-5)
    np.testing.assert_array_equal(o[2], (i // 7 + (i >> 2)).astype(np.float32))
    assert (o[3] == np.argmax(x) + 1000 * np.argmin(x)).all()
    np.testing.assert_array_equal(o[4], ((i.astype(np.uint64) ** 2) >> 32).astype(np.float32))
    assert (o[5] == np.bitwise_xor.reduce(i)).all()
    assert 0 <= o[6].min() and o[6].max() < 1 and len(set(o[6].tolist())) > 250
    _silent(run)


def test_atomics():
    n = 1000
    x = RNG.standard_normal(n).astype(np.float32)
    out, run, _ = gt.run(tk.atomics, (4,), x, np.array([-1e9, 1e9], np.float32), np.zeros(8, np.int32),
                         np.zeros(2, np.int32), np.zeros(4, np.float16), n, BLOCK=256)
    assert out["o_ptr"].tolist() == [x.max(), x.min()]
    assert out["h_ptr"].tolist() == [125] * 8 and out["c_ptr"].tolist() == [7, 5]
    want = [x[k::4].astype(np.float16).astype(np.float64).sum() for k in range(4)]
    np.testing.assert_allclose(out["f_ptr"].astype(np.float64), want, atol=0.1)
    _silent(run)


def test_int64_row_offsets_join_and_split():
    x = RNG.standard_normal((4, 300)).astype(np.float32)
    out, run, _ = gt.run(tk.wide_rows, (4,), x, np.zeros((4, 256), np.float32), 300, BLOCK=256)
    np.testing.assert_array_equal(out["y_ptr"], 3 * x[:, :256])
    _silent(run)
