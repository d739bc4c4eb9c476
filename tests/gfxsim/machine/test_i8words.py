"""mma_words' 8-bit integer records as one compiled pass (i8words.py, matrix.I8_COMPILED) leave what
the numpy GEMM leaves: D's words, the matrix records, the findings (an int32 overflow named at the
same element), for every 8-bit record shape (one block and several), C as registers or the
constant 0, C near the int32 limits, and a batch of several members."""
from __future__ import annotations

import numpy as np
import pytest

from gfxsim.machine import i8words, matrix
from gfxsim.machine.launch import Machine
from gfxsim.machine.wave import Wave
from gfxsim.machine.workgroup import Workgroup

_GEMM = matrix._mma_i8
RECORDS = [("gfx942", "v_mfma_i32_16x16x32_i8"), ("gfx942", "v_mfma_i32_32x32x16_i8"),
           ("gfx942", "v_mfma_i32_4x4x4_16b_i8"), ("gfx942", "v_mfma_i32_16x16x4_4b_i8"),
           ("gfx90a", "v_mfma_i32_32x32x8i8"), ("gfx936", "v_mmac_i32_16x16x32_i8")]


def _issue(arch, name, members, c_kind, seed, compiled, monkeypatch):
    monkeypatch.setattr(matrix, "I8_COMPILED", compiled)
    calls = []
    real, gemm = _compiled(), _GEMM

    def counted(*a):
        calls.append("compiled")
        return real(*a)

    def numpy_gemm(*a):
        calls.append("numpy")
        return gemm(*a)
    monkeypatch.setattr(i8words, "mma_i8", counted)
    monkeypatch.setattr(matrix, "_mma_i8", numpy_gemm)
    m = Machine(arch, "i8words", trace=False, provenance=False)
    w = Wave(m, Workgroup(m, [(g, 0, 0) for g in range(members)], 1), 0)
    insn = w.insn(name)
    rng = np.random.default_rng(seed)

    def words(op):
        return rng.integers(0, 1 << 32, (insn.regs(op), w.width), dtype=np.uint64).astype(np.uint32)
    a, b = words("A"), words("B")
    c = None
    if c_kind == "random":
        c = words("C")
    elif c_kind == "near the limits":           # sums of either sign pass int32's ends in some elements
        c = np.where(rng.random((insn.regs("C"), w.width)) < 0.5, 2 ** 31 - 3, 2 ** 31 + 2).astype(np.uint32)
    elif c_kind == "near the bottom":           # only negative sums pass an end
        c = np.full((insn.regs("C"), w.width), 2 ** 31 + 2, np.uint32)
    d = w.mma_words(name, a, b, c, label="L")
    recs = [(r.first, r.insn.mnemonic, r.label, r.live, r.exec_mask.tobytes()) for r in m.mma_log.records]
    return d, recs, [(f.kind, f.message, f.lane) for f in m.findings], calls


_REAL: list = []


def _compiled():
    """i8words.mma_i8 itself (numba's dispatcher, made by a first call on no elements), before any
    test wrapped it."""
    if not _REAL:
        e = np.zeros((0, 1, 1), np.int64)
        i8words.mma_i8(np.zeros(1, np.int8), np.zeros(1, np.int8), np.zeros(0, np.int32), e, e, e, e,
                       np.zeros(1, np.int32))
        _REAL.append(i8words.mma_i8)
    return _REAL[0]


@pytest.mark.parametrize("arch,name", RECORDS)
@pytest.mark.parametrize("members", [1, 3])
@pytest.mark.parametrize("c_kind", ["zero", "random", "near the limits", "near the bottom"])
def test_the_compiled_pass_leaves_what_the_numpy_gemm_leaves(arch, name, members, c_kind, monkeypatch):
    for seed in range(2):
        got = _issue(arch, name, members, c_kind, seed, True, monkeypatch)
        want = _issue(arch, name, members, c_kind, seed, False, monkeypatch)
        # each path taken where it says: an overflow found compiled is located by the numpy GEMM
        over = c_kind.startswith("near")
        assert got[3] == ["compiled"] + ["numpy"] * over and want[3] == ["numpy"]
        np.testing.assert_array_equal(got[0], want[0], err_msg=f"{name} {members} {c_kind}")
        assert got[1] == want[1] and len(got[1]) == 1
        assert got[2] == want[2]
        if over:
            assert [f[0] for f in got[2]] == ["int32-overflow"]
        else:
            assert got[2] == []


def test_only_records_whose_sums_stay_in_int32_take_it():
    assert i8words.exact_in_int32(64) and not i8words.exact_in_int32(1 << 16)
