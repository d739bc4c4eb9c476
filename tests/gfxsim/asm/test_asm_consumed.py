"""What a value consumed (token-coverage, double-count) on compiled code: clang's expf computes
x*c_hi + x*c_lo, two functions of one value added — not two partial sums of it — while a partial
sum added twice, or a value added to itself, is still a double count (semantics/vop.py
addends_differ; the compiled twins' runs are in test_asm_twins.py)."""
from __future__ import annotations

import numpy as np
import pytest

from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.machine.memory import Buffer

# two K=32 matrix instructions over tokens 0-31 and 32-63 (B bytes from k, tagged by K slot), their
# D[.][.] register 0 summed in v10 (acc0 + acc1: every token once), then BODY makes v11, stored
HEAD = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[6:7], s[0:1], 0x8
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v1, 3, v0
  global_load_dwordx2 v[4:5], v1, s[4:5]
  global_load_dwordx2 v[6:7], v1, s[4:5] offset:512
  v_mov_b32_e32 v2, 0x1010101
  v_mov_b32_e32 v3, 0x1010101
  s_waitcnt vmcnt(0)
  v_mfma_i32_16x16x32_i8 a[0:3], v[2:3], v[4:5], 0
  v_mfma_i32_16x16x32_i8 a[4:7], v[2:3], v[6:7], 0
  s_nop 7
  v_accvgpr_read_b32 v8, a0
  v_accvgpr_read_b32 v9, a4
  v_cvt_f32_i32_e32 v8, v8
  v_cvt_f32_i32_e32 v9, v9
  v_add_f32_e32 v10, v8, v9
"""
TAIL = """
  v_lshlrev_b32_e32 v12, 2, v0
  global_store_dword v12, v11, s[6:7]
"""
EXPF = """
  s_mov_b32 s8, 0x3fb8aa3b
  v_mul_f32_e32 v13, 0x3fb8aa3b, v10
  v_fma_f32 v14, v10, s8, -v13
  v_fmac_f32_e32 v14, 0x32a5705f, v10
  v_add_f32_e32 v11, v13, v14
"""
BODIES = {"expf": EXPF, "acc1 twice": "  v_add_f32_e32 v11, v10, v9", "v10 + v10": "  v_add_f32_e32 v11, v10, v10"}


def _run(body):
    rng = np.random.default_rng(0)
    k = rng.integers(1, 100, (2, 64, 8)).astype(np.int8)
    tok = 32 * np.arange(2)[:, None, None] + 8 * (np.arange(64) // 16)[None, :, None] + np.arange(8)[None, None, :]
    out = Buffer.empty("out", (64,), np.float32).expect("token", 0, 64)
    kern = kernel_from_text(HEAD + body + TAIL, "consumed", args=[("k", "global_buffer", 8), ("out", "global_buffer", 8)],
                            agprs=8)
    return run_asm(kern, args={"k": Buffer("k", k, {"token": tok}), "out": out}), out


def test_expf_of_a_sum_consumes_every_token_once():
    run, out = _run(EXPF)
    assert not run.findings, [f.message for f in run.findings]
    assert run.checks_not_run == []
    assert np.isfinite(out.array).all()


@pytest.mark.parametrize("body, twice", [("acc1 twice", range(32, 64)), ("v10 + v10", range(0, 64))])
def test_a_partial_sum_added_again_is_a_double_count(body, twice):
    run, _ = _run(BODIES[body])
    kinds = sorted({f.kind for f in run.findings})
    assert kinds == ["double-count", "token-coverage"], [f.message for f in run.findings]
    (cov,) = run.findings_of("token-coverage")
    assert cov.details["multiple"] == {t: 2 for t in twice} and not cov.details["never"]
    if body == "v10 + v10":
        assert any("the same value twice" in f.message for f in run.findings_of("double-count"))
