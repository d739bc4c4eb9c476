"""Triton's own AMD MFMA and dot-operand linear layouts (Gluon's to_linear_layout of
AMDMFMALayout / DotOperandLayout, version 3 = gfx942) against gfxsim's gfx942 records, slot for slot:
a third oracle beside the vendor's closed forms and the hardware probes.

A Triton linear layout maps (register, lane) to tensor coordinates: each set bit of the register
index and of the lane XORs in its basis vector. Triton's register index counts elements, so it is
gfxsim's reg * elements-per-register + elem. (At exit nanobind may list ir.attribute instances
as leaked: triton's layout-to-IR conversion keeps them, whatever the caller frees.)"""
from __future__ import annotations

import numpy as np
import pytest

from support.triton_small import need_triton

need_triton()
pytest.importorskip("triton.experimental.gluon", reason="this triton has no Gluon (to_linear_layout came with 3.6)")
from triton._C.libtriton import gluon_ir, ir  # noqa: E402
from triton.experimental.gluon.language import DotOperandLayout  # noqa: E402
from triton.experimental.gluon.language.amd import AMDMFMALayout  # noqa: E402

from gfxsim.arch import get_arch  # noqa: E402

RECORDS = get_arch("gfx942").instructions
SPARSE = sorted(mn for mn in RECORDS if mn.startswith("v_smfmac_"))
# One tile per instruction: 32x32 and 16x16, and the 4x4 sixteen-block ones as Triton's 4x64 / 64x4
# (the blocks side by side along N, or along M transposed).
SINGLE = sorted(mn for mn, i in RECORDS.items() if i.blocks == 1 and mn not in SPARSE)
FOUR_BY_64 = sorted(mn for mn, i in RECORDS.items() if i.blocks == 16 and i.M == i.N == 4)
# Triton's MFMA layout has no block axis but the 4x64 form's: the 2- and 4-block records
# (independent 32x32 / 16x16 / 4x4 products per block) have no Triton layout.
NOT_EXPRESSIBLE = sorted(set(RECORDS) - set(SINGLE) - set(FOUR_BY_64) - set(SPARSE))


@pytest.fixture(scope="module")
def builder():
    ctx = ir.context()
    ir.load_dialects(ctx)
    b = gluon_ir.GluonOpBuilder(ctx)
    b.ctx = ctx                     # keep the context alive with the builder
    return b


def linear(builder, layout, shape):
    return builder.to_linear_layout(layout._to_ir(builder), shape)


def apply(ll, lane: int, reg: int) -> tuple[int, int]:
    x = np.zeros(2, np.int64)
    for bit, base in enumerate(ll.reg_bases):
        if reg >> bit & 1:
            x ^= base
    for bit, base in enumerate(ll.lane_bases):
        if lane >> bit & 1:
            x ^= base
    return int(x[0]), int(x[1])


def slots(lay, fold):
    """{(lane, element index): fold(row, col, block)} over every slot of a gfxsim operand."""
    out = {}
    for lane in range(64):
        for reg in range(lay.reg_slots):
            for e in range(lay.n_elems):
                r, c, k = (int(v) for v in lay.to_matrix(lane, reg, e))
                out[(lane, reg * lay.n_elems + e)] = fold(r, c, k)
    return out


def mismatches(ll, want: dict, repeats: bool = False) -> list:
    """The slots where Triton's layout and the record disagree (at most 4). ``repeats``: Triton's
    layout may hold more registers than the record, each beyond the record's a repeat (zero basis)."""
    n = (max(f for _, f in want) + 1).bit_length() - 1
    assert len(ll.reg_bases) == n or repeats and all(list(v) == [0, 0] for v in ll.reg_bases[n:]), ll
    return [(k, apply(ll, *k), v) for k, v in want.items() if apply(ll, *k) != v][:4]


def mfma(insn, transposed: bool, shape=None):
    return AMDMFMALayout(version=3, instr_shape=list(shape or (insn.M, insn.N)) + [insn.K], transposed=transposed,
                         warps_per_cta=[1, 1], element_bitwidth=insn.cd.bits)


def test_every_record_is_compared_or_named():
    assert len(SINGLE) >= 19 and len(FOUR_BY_64) == 4
    assert all(RECORDS[mn].blocks in (2, 4) for mn in NOT_EXPRESSIBLE), NOT_EXPRESSIBLE


@pytest.mark.parametrize("mn", SPARSE)
def test_sparse_records_d(builder, mn):
    """Triton's AMD backend has no sparse dot, so a v_smfmac's compressed A and its index have no
    Triton layout; its C/D is the dense MFMA's of the same M x N, which Triton's layout gives."""
    insn = RECORDS[mn]
    d = insn.operand("D")
    assert mismatches(linear(builder, mfma(insn, False), [insn.M, insn.N]), slots(d, lambda r, c, k: (r, c))) == []
    assert mismatches(linear(builder, mfma(insn, True), [insn.M, insn.N]), slots(d, lambda r, c, k: (c, r))) == []


@pytest.mark.parametrize("mn", SINGLE)
def test_single_tile_records(builder, mn):
    insn = RECORDS[mn]
    d = insn.operand("D")
    assert mismatches(linear(builder, mfma(insn, False), [insn.M, insn.N]), slots(d, lambda r, c, k: (r, c))) == []
    # transposed: Triton computes Dᵀ = BᵀAᵀ, so tensor (m, n) sits where the record holds (n, m)
    assert mismatches(linear(builder, mfma(insn, True), [insn.M, insn.N]), slots(d, lambda r, c, k: (c, r))) == []
    for idx, op, shape in ((0, "A", [insn.M, insn.K]), (1, "B", [insn.K, insn.N])):
        lay = insn.operand(op)
        ll = linear(builder, DotOperandLayout(idx, mfma(insn, False), lay.elems_per_lane), shape)
        assert mismatches(ll, slots(lay, lambda r, c, k: (r, c))) == [], op


@pytest.mark.parametrize("mn", FOUR_BY_64)
def test_four_by_sixty_four(builder, mn):
    insn = RECORDS[mn]
    d = insn.operand("D")
    assert mismatches(linear(builder, mfma(insn, False, (4, 64)), [4, 64]),
                      slots(d, lambda r, c, k: (r, 4 * k + c))) == []
    assert mismatches(linear(builder, mfma(insn, True, (4, 64)), [4, 64]),
                      slots(d, lambda r, c, k: (c, 4 * k + r))) == []
    assert mismatches(linear(builder, mfma(insn, True, (64, 4)), [64, 4]),
                      slots(d, lambda r, c, k: (4 * k + c, r))) == []
    a, b = insn.operand("A"), insn.operand("B")
    # A is one 4 x K block every block reads (Triton's lanes 4.. repeat it); B's blocks tile N
    parent = mfma(insn, False, (4, 64))
    ll = linear(builder, DotOperandLayout(0, parent, a.elems_per_lane), [4, insn.K])
    assert mismatches(ll, slots(a, lambda r, c, k: (r, c))) == []
    # Triton's 4x64 B operand spans 64 k a lane; at the record's K its further registers repeat it
    ll = linear(builder, DotOperandLayout(1, parent, b.elems_per_lane), [insn.K, 64])
    assert mismatches(ll, slots(b, lambda r, c, k: (r, 4 * k + c)), repeats=True) == []


@pytest.mark.parametrize("mn", ["v_mfma_f32_16x16x16_f16", "v_mfma_f32_32x32x8_f16", "v_mfma_f32_16x16x16_bf16"])
def test_kwidth_8_k_order(builder, mn):
    """kWidth 8 on a 16-bit MFMA of 4 elements per lane: a lane's 8 consecutive k feed two
    instructions, the first 4 instruction 0, the next 4 instruction 1. So instruction j's K slot s
    holds tensor k = 8*(s//4) + 4*j + s%4, not the contiguous 4*... of kWidth 4."""
    insn = RECORDS[mn]
    a = insn.operand("A")
    ll = linear(builder, DotOperandLayout(0, mfma(insn, False), 8), [insn.M, 2 * insn.K])
    for lane in range(64):
        for i in range(8):
            j, e = divmod(i, 4)
            row, s, _ = (int(v) for v in a.to_matrix(lane, e // 2, e % 2))
            assert apply(ll, lane, i) == (row, 8 * (s // 4) + 4 * j + s % 4), (lane, i)
