"""Without provenance a matrix instruction reads its operands' words (Wave.mma_words) instead of
values made by register reads: the same registers, written bits, fresh marks, findings and matrix
records as the value path, for every kind of record (8-bit integer with and without an int32
overflow, bf16/f16/fp8/xf32 two-stage, f32 fma, an f64 one the words path leaves to the values),
C as registers (D's own included) or 0, any bit pattern (NaN and infinities), and an operand with
never-written bytes (left to the value path's finding)."""
from __future__ import annotations

import numpy as np
import pytest
from support.asm_sandbox import Sandbox
from support.records import field_key

LINES = ["v_mfma_i32_16x16x32_i8 v[4:7], v[0:1], v[2:3], 0",
         "v_mfma_i32_16x16x32_i8 v[4:7], v[0:1], v[2:3], v[4:7]",
         "v_mfma_i32_32x32x16_i8 a[0:15], v[0:1], v[2:3], a[0:15]",
         "v_mfma_f32_16x16x16_bf16 a[0:3], v[0:1], v[2:3], a[4:7]",
         "v_mfma_f32_16x16x16_bf16 v[4:7], v[0:1], v[2:3], 0",
         "v_mfma_f32_16x16x16_f16 v[4:7], v[0:1], v[2:3], v[4:7]",
         "v_mfma_f32_32x32x8_bf16 a[0:15], v[0:1], v[2:3], a[0:15]",
         "v_mfma_f32_16x16x32_fp8_fp8 v[4:7], v[0:1], v[2:3], v[4:7]",
         "v_mfma_f32_16x16x32_bf8_fp8 v[4:7], v[0:1], v[2:3], v[8:11]",
         "v_mfma_f32_16x16x8_xf32 v[4:7], v[0:1], v[2:3], v[4:7]",
         "v_mfma_f32_16x16x4_f32 v[4:7], v0, v1, v[4:7]",
         "v_mfma_f64_16x16x4_f64 v[4:11], v[0:1], v[2:3], v[4:11]",
         "v_mfma_i32_16x16x32_i8 v[4:7], v[12:13], v[2:3], 0"]          # v12, v13 never written


def _run(line: str, seed: int, lean: bool, finite: bool, arch: str = "gfx942"):
    rng = np.random.default_rng(seed)
    sb = Sandbox(arch)
    for r in range(12):
        if finite:                      # small normal floats in every 8/16/32-bit reading: sums stay finite
            words = rng.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32) & np.uint32(0x3B3B3B3B)
        else:
            words = rng.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32)
        sb.v[r] = words
    if "v[4:7]" in line and "i32" in line and seed % 2:
        sb.v[4] = np.full(64, 2**31 - 5, np.uint32)          # C near the int32 top: the sums overflow
    for r in range(16):
        sb.st.vwrite("a", r, rng.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32)[None, :])
    sb.st.lean = lean
    sb.run(line)
    st = sb.st
    recs = [(r.first, r.insn.mnemonic, r.label, r.live, r.exec_mask.tobytes(), field_key(r.a), field_key(r.b))
            for r in sb.m.mma_log.records]
    return dict(v=st.v.words.copy(), vw=st.v.written.copy(), a=st.a.words.copy(), aw=st.a.written.copy(),
                fv=st.fresh["v"].copy(), fa=st.fresh["a"].copy(), records=recs,
                findings=[(f.kind, f.message, f.lane) for f in sb.m.findings])


@pytest.mark.parametrize("line", LINES)
@pytest.mark.parametrize("finite", [True, False])
def test_the_words_path_leaves_what_the_value_path_leaves(line, finite):
    for seed in range(2):
        got, want = _run(line, seed, True, finite), _run(line, seed, False, finite)
        assert got["records"] == want["records"] and len(want["records"]) == 1
        assert got["findings"] == want["findings"]
        for k in ("v", "vw", "a", "aw", "fv", "fa"):
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{line}: {k}")


def test_the_cases_are_what_they_say():
    """An overflow finding, a never-written operand's finding, and results that are not all finite."""
    kinds = {f[0] for f in _run(LINES[1], 1, True, True)["findings"]}
    assert "int32-overflow" in kinds
    assert "uninitialized-read" in {f[0] for f in _run(LINES[-1], 0, True, True)["findings"]}
    d = _run(LINES[4], 0, True, False)["v"][4:8].view(np.float32)
    assert not np.isfinite(d).all()
    assert np.isfinite(_run(LINES[4], 0, True, True)["v"][4:8].view(np.float32)).all()


def test_a_gfx936_mmac_takes_the_words_path_alike():
    line = "v_mfma_f32_16x16x16_f16 v[4:7], v[0:1], v[2:3], v[4:7]"
    got, want = _run(line, 0, True, True, "gfx936"), _run(line, 0, False, True, "gfx936")
    assert got["records"] == want["records"] and got["findings"] == want["findings"]
    np.testing.assert_array_equal(got["v"], want["v"])
