"""Index formulas that depend on a matrix instruction's layout, derived from its record.

The kernels never write "rowid + 4*i" (gfx936) or "4*rowid + i" (CDNA3) by hand: they ask the
record which D[m][n] a lane's register i holds, and which lanes share a row. A kernel may still
force one arch's hand-written formula (``formula="gfx936"|"gfx942"``) to show what the debugger
reports when a formula is run on the wrong arch.
"""
from __future__ import annotations

import numpy as np
from gfxsim.errors import ArgumentError, NotFoundError

# The hand-written formulas of the two archs, for the wrong-arch experiment only.
HAND_FORMULAS = {
    "gfx936": lambda lane, i: (lane % 16, lane // 16 + 4 * i),      # (m, n): jump layout
    "gfx942": lambda lane, i: (4 * (lane // 16) + i, lane % 16),    # CDNA3
}


def int8_mma(arch) -> str:
    """The arch's 16x16x32 int8 matrix instruction."""
    for mn in ("v_mmac_i32_16x16x32_i8", "v_mfma_i32_16x16x32_i8"):
        if mn in arch.instructions:
            return mn
    raise NotFoundError(f"{arch.name} has no 16x16x32 int8 matrix instruction")


def bf16_mma(arch) -> str:
    for mn in ("v_mmac_f32_16x16x16_bf16", "v_mfma_f32_16x16x16_bf16", "v_mfma_f32_16x16x16bf16_1k"):
        if mn in arch.instructions:
            return mn
    raise NotFoundError(f"{arch.name} has no 16x16x16 bf16 matrix instruction")


class DLayout:
    """Where a lane's output registers sit in D, for one instruction (or a forced formula)."""

    def __init__(self, w, insn, formula: str = "derived"):
        lay = insn.operand("D")
        self.n_regs = lay.n_regs
        lane = np.arange(w.lanes)
        if formula == "derived":
            mn = [lay.to_matrix(lane, i, 0)[:2] for i in range(self.n_regs)]
        elif formula in HAND_FORMULAS:
            mn = [HAND_FORMULAS[formula](lane, i) for i in range(self.n_regs)]
        else:
            raise ArgumentError(f"formula must be 'derived', 'gfx936' or 'gfx942', got {formula!r}")
        self._rows = np.stack([m for m, _ in mn])            # [regs, lanes]
        self._cols = np.stack([n for _, n in mn])
        # lanes that hold the same row m differ only in the lane bits that feed the column
        self.row_xor_masks = _lane_masks(lay, "col") if formula == "derived" else \
            ([16, 32] if formula == "gfx936" else [1, 2, 4, 8])
        self.regs_share_row = all(d.axis == "col" for d in lay.reg) if formula == "derived" else formula == "gfx936"
        self.w = w

    def rows(self):
        """qrow: the D row of each output register, as i32 values [regs, lanes]."""
        return self.w.from_lanes(self._rows, "i32")

    def cols(self):
        """The D column of each output register (a token for QK, a head element for PV)."""
        return self.w.from_lanes(self._cols, "i32")

    def row_leader(self):
        """True on one lane per (row, register): the lanes whose column-bits are zero."""
        lane = np.arange(self.w.lanes)
        lead = np.ones(self.w.lanes, bool)
        for m in self.row_xor_masks:
            lead &= (lane & m) == 0
        return lead

    def reduce_rows(self, vals, op="max"):
        """Combine values that belong to the same D row: over registers (when a lane's registers
        share a row) and then over the lanes holding that row. ``vals`` is a [regs]-element value."""
        w = self.w
        fn = {"max": w.max, "sum": lambda a, b: a + b}[op]
        if self.regs_share_row:
            acc = vals[0]
            for i in range(1, vals.n):
                acc = fn(acc, vals[i])
            vals = w.cat(*([acc] * self.n_regs))
        for m in self.row_xor_masks:
            vals = fn(vals, w.shfl_xor(vals, m))
        return vals


def _lane_masks(lay, axis):
    masks, place = [], 1
    for d in lay.lane:
        if d.axis == axis:
            e = 1
            while e < d.extent:
                masks.append(place * e)
                e *= 2
        place *= d.extent
    return masks


def conflict_free_stride(dlay, row_elems: int, elem_bytes: int = 4, banks: int = 32) -> int:
    """Smallest LDS row stride (in elements, >= row_elems) for which every lane storing its output
    register i at [row][col] of a row-major tile hits distinct banks (gfx9 model). The D layout
    decides it: gfx936 wants rows 2 banks apart, CDNA3 4."""
    from gfxsim.machine.banks import bank_conflicts
    lanes = dlay.w.lanes                    # one wave's lanes (the columns of a batch repeat them)
    rows, cols = dlay._rows[:, :lanes], dlay._cols[:, :lanes]
    active = np.ones(lanes, bool)
    for pad in range(0, banks):
        stride = row_elems + pad
        if all(bank_conflicts((rows[i] * stride + cols[i]) * elem_bytes, active, elem_bytes)[0] == 1
               for i in range(dlay.n_regs)):
            return stride
    return row_elems
