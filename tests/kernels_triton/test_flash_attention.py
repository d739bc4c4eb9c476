"""The Triton flash-attention forward (online softmax, masked tail) against exact attention, and
its unmasked-tail twin: the read of K and V past n_keys is a buffer-out-of-range finding."""
from __future__ import annotations

import inspect

import numpy as np

from support.triton_local import asm_text  # skips the module without triton

from gfxsim.triton import run
from kernels_triton import flash_attention as fa

NQ, NK, D = 64, 80, 64          # 80 keys: two full 32-key blocks and a tail of 16
SCALE = 0.125


def launch(mask_tail: bool):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((n, D)).astype(np.float16) for n in (NQ, NK, NK))
    o = np.full((NQ, D), np.nan, np.float32)
    kw = dict(HEAD_DIM=D, BLOCK_M=32, BLOCK_N=32, MASK_TAIL=mask_tail)
    out, r, _ = run(fa.flash_attention_fwd, (NQ // 32,), q, k, v, o, NQ, NK, SCALE, **kw)
    return out["o_ptr"], r, fa.reference(q, k, v, SCALE), asm_text(fa.flash_attention_fwd, q, k, v, o, NQ, NK,
                                                                      SCALE, **kw)


def line_of(text: str) -> int:
    src, first = inspect.getsourcelines(fa.flash_attention_fwd.fn)
    return first + next(i for i, s in enumerate(src) if text in s)


def test_masked_tail_matches_and_is_silent():
    o, r, ref, asm = launch(True)
    assert "v_mfma_f32_32x32x8_f16" in asm and "v_exp_f32" in asm
    # P is rounded to fp16 for the PV dot; the reference keeps it exact
    np.testing.assert_allclose(o, ref, rtol=0, atol=2e-3)
    assert [f for f in r.findings if not f.is_performance] == []


def test_unmasked_tail_reads_past_k():
    o, r, ref, _ = launch(False)
    bad = [f for f in r.findings if f.kind == "buffer-out-of-range"]
    assert {f.details.get("buffer") or f.message.split("'")[1] for f in bad} == {"k_ptr", "v_ptr"}
    k_line = line_of("k = tl.load(k_ptr + rn[None, :] * HEAD_DIM + rd[:, None])")
    assert any(f.source and f.source.endswith(f"flash_attention.py:{k_line}") for f in bad), [f.source for f in bad]
    assert all("past the end" in f.message and f"byte offset {NK * D * 2}" in f.message for f in bad)
    assert not np.allclose(o, ref, atol=2e-3)         # the tail's zeros entered the softmax

