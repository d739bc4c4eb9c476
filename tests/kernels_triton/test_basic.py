"""vector add and the fp16 / int8 / fp8 GEMM tiles, compiled by triton for gfx942 as a launch from
tensors specialises them, run on the asm front end against their numpy references."""
from __future__ import annotations

import numpy as np
import pytest

from support.triton_local import asm_text  # skips the module without triton

from gfxsim.triton import run
from kernels_triton import gemm
from kernels_triton.vector_add import reference as add_reference
from kernels_triton.vector_add import vector_add


def errors(r) -> list:
    """The findings that say the kernel is wrong (bank conflicts only cost time)."""
    return [f for f in r.findings if not f.is_performance]


def test_vector_add_masked_tail():
    rng = np.random.default_rng(1)
    n = 1000                                # 4 programs of 256, the last one 232 lanes
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out, r, _ = run(vector_add, (4,), x, y, np.full(n, np.nan, np.float32), n, BLOCK=256)
    assert np.array_equal(out["out_ptr"], add_reference(x, y))
    assert errors(r) == []
    text = asm_text(vector_add, x, y, out["out_ptr"], n, BLOCK=256)
    assert "buffer_load_dword" in text and "buffer_store_dword" in text     # the production MUBUF path


def test_vector_add_unspecialised_is_global():
    """The plain form (no divisibility / pointer-range hints) loads through global_load."""
    n = 300
    x, y = np.arange(n, dtype=np.float32), np.full(n, 2, np.float32)
    out, r, _ = run(vector_add, (2,), x, y, np.zeros(n, np.float32), n, BLOCK=256, plain=True)
    assert np.array_equal(out["out_ptr"], x + y)
    assert "global_load" in asm_text(vector_add, x, y, x, n, BLOCK=256, plain=True)


CASES = {   # operand type: (operands, MFMA Triton picks, BLOCK_K)
    "fp16": (lambda rng, s: rng.standard_normal(s).astype(np.float16), "v_mfma_f32_32x32x8_f16", 16),
    "int8": (lambda rng, s: rng.integers(-128, 128, s).astype(np.int8), "v_mfma_i32_32x32x16_i8", 32),
    "fp8": (lambda rng, s: rng.standard_normal(s).astype(gemm.FP8), "v_mfma_f32_32x32x16_fp8_fp8", 32),
    "bf8": (lambda rng, s: rng.standard_normal(s).astype(gemm.BF8), "v_mfma_f32_32x32x16_bf8_bf8", 32),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_gemm_tile(kind):
    make, mfma, block_k = CASES[kind]
    rng = np.random.default_rng(2)
    M, N, K = 64, 64, 64
    a, b = make(rng, (M, K)), make(rng, (K, N))
    c = np.zeros((M, N), np.int32 if kind == "int8" else np.float32)
    kw = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=block_k, INT=kind == "int8")
    assert mfma in asm_text(gemm.gemm_tile, a, b, c, M, N, K, num_warps=1, **kw)
    out, r, _ = run(gemm.gemm_tile, (2, 2), a, b, c, M, N, K, num_warps=1, **kw)   # one wave per 32x32 tile
    ref = gemm.reference(a, b)
    if kind == "int8":
        assert np.array_equal(out["c_ptr"], ref)
    else:      # fp32 accumulation in the MFMA's order against float64 sums
        np.testing.assert_allclose(out["c_ptr"], ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    assert errors(r) == []
    k_step = 8 if kind == "fp16" else 16          # the MFMA's K
    assert len(r.records) == 4 * K // k_step      # 4 programs, each K/k_step MFMAs


@pytest.mark.parametrize("kpack,mm", [(1, 16), (2, 16), (2, 32)])
def test_gemm_k_slot_tokens_show_kwidth(kpack, mm):
    """K tagged by its index: each MFMA's K slots name the k they hold. With kpack=2 Triton packs
    8 consecutive k a lane (kWidth 8), so instruction j of a K=32 step holds k = 8*(s//4) + 4*j + s%4
    (s its K slot; the oracle in test_layout_oracle.py), not a contiguous run."""
    from gfxsim import Buffer
    rng = np.random.default_rng(5)
    M = N = mm
    K = 32
    a = Buffer("a", rng.standard_normal((M, K)).astype(np.float16), tags={"token": np.arange(K)[None, :]})
    b = Buffer("b", rng.standard_normal((K, N)).astype(np.float16), tags={"token": np.arange(K)[:, None]})
    out, r, _ = run(gemm.gemm_tile, (1, 1), a, b, np.zeros((M, N), np.float32), M, N, K, num_warps=1,
                 compile_options=dict(kpack=kpack), BLOCK_M=mm, BLOCK_N=mm, BLOCK_K=K, INT=False)
    np.testing.assert_allclose(out["c_ptr"], gemm.reference(a.array, b.array), rtol=0, atol=1e-4)
    ks = 16 if mm == 16 else 8                       # the MFMA's K
    s = np.arange(ks)
    for j, rec in enumerate(r.records):
        want = 8 * (s // 4) + 4 * (j % 2) + s % 4 + 16 * (j // 2) * (mm == 32) if kpack == 2 else ks * j + s
        assert rec.k_slots("A").tolist() == rec.k_slots("B").tolist() == [want.tolist()], (j, rec.k_slots("A"))
