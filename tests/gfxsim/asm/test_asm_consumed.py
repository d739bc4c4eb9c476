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


# A packed add computes both halves; clang keeps one and lets the other die (overwritten before any
# read), often one value added to itself by the op_sel it happened to pick. lo = acc0 + acc1,
# hi = acc1 + acc1; the kernel stores lo (the hi half dies) or, the defective twin, hi.
PACKED = """
  v_mov_b32_e32 v16, v8
  v_mov_b32_e32 v17, v9
  v_mov_b32_e32 v18, v9
  v_mov_b32_e32 v19, 0
  v_pk_add_f32 v[20:21], v[16:17], v[18:19] op_sel_hi:[1,0]
  v_mov_b32_e32 v21, 0
  v_mov_b32_e32 v11, {stored}
"""


def test_a_dead_half_of_a_packed_add_is_no_sum():
    run, out = _run(PACKED.format(stored="v20"))
    assert not run.findings, [f.message for f in run.findings]
    assert np.isfinite(out.array).all()


def test_the_live_half_of_a_packed_add_is_still_checked():
    run, _ = _run(PACKED.format(stored="v21").replace("  v_mov_b32_e32 v21, 0\n", ""))
    assert sorted({f.kind for f in run.findings}) == ["double-count", "token-coverage"], \
        [f.message for f in run.findings]
    (cov,) = run.findings_of("token-coverage")
    assert cov.details["multiple"] == {t: 2 for t in range(32, 64)}


def test_liveness_is_conservative():
    """Dead only when overwritten whole on the straight-line code before any read; a read, a branch,
    an EXEC change or a partial (SDWA) write first keeps it live."""
    k = kernel_from_text("""
  v_pk_add_f32 v[2:3], v[4:5], v[6:7]
  v_mov_b32_e32 v3, 0
  v_add_f32_e32 v8, v2, v2
  s_cbranch_scc0 .LBB0_1
  v_mov_b32_e32 v2, 0
.LBB0_1:
  v_pk_mul_f32 v[10:11], v[4:5], v[6:7]
  s_and_saveexec_b64 s[8:9], vcc
  v_mov_b32_e32 v11, 0
  v_pk_fma_f32 v[12:13], v[4:5], v[6:7], v[12:13]
  v_mov_b32_sdwa v13, v1 dst_sel:WORD_0 dst_unused:UNUSED_PRESERVE src0_sel:DWORD
  v_mov_b32_e32 v10, v13
""")
    live = k.liveness
    assert live.dead_after(0, "v", 3) and not live.dead_after(0, "v", 2)      # v2 read by v_add first
    assert not live.dead_after(2, "v", 8)                                     # a branch before any write
    assert not live.dead_after(5, "v", 11)                                    # an EXEC change first
    assert not live.dead_after(8, "v", 13)                                    # an SDWA write keeps bytes


def test_partial_and_accumulating_writes_keep_a_value_live():
    """A 16-bit result in the high half (op_sel on the destination), mixlo/mixhi, the fp8 packs
    and the fmac accumulators read or keep their destination: the value before them stays live;
    a 16-bit result in the low half (the high half zeroed) overwrites it."""
    k = kernel_from_text("""
  v_pk_add_f32 v[2:3], v[4:5], v[6:7]
  v_fma_f16 v3, v1, v1, v1 op_sel:[0,0,0,1]
  v_pk_add_f32 v[8:9], v[4:5], v[6:7]
  v_fma_mixlo_f16 v9, v1, v1, v1
  v_pk_add_f32 v[10:11], v[4:5], v[6:7]
  v_cvt_pk_fp8_f32 v11, v1, v1
  v_pk_add_f32 v[12:13], v[4:5], v[6:7]
  v_fmac_f32_e32 v13, v1, v1
  v_pk_add_f32 v[14:15], v[4:5], v[6:7]
  v_add_f16_e32 v15, v1, v1
""")
    live = k.liveness
    for i, r in ((0, 3), (2, 9), (4, 11), (6, 13)):
        assert not live.dead_after(i, "v", r), f"v{r}"
    assert live.dead_after(8, "v", 15)
