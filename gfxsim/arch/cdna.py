"""One CDNA v_mfma_* record from its row in an arch's table: shape, types, cycles, modifiers.

Every CDNA matrix operand follows two layout families (matrix_insn.ab_kgroups for A/B,
matrix_insn.cd_cdna for C/D), parameterised by the shape, the block count and the element width,
so a row of facts is the whole record.
"""
from __future__ import annotations

from . import accumulators
from .dtypes import elem_type
from .matrix_insn import MatrixInstruction, ab_kgroups, cd_cdna

BROADCAST = ("cbsz", "abid", "blgp")     # multi-block instructions: A-block broadcast and B swizzle
SWIZZLE = ("blgp",)


def modifier_note(cd_type: str, family: str, modifiers: tuple[str, ...]) -> str:
    """What the instruction's CBSZ/ABID/BLGP fields do, as the calculator and the ISA guides state."""
    if not modifiers:
        return "CBSZ, ABID and BLGP not supported (must be 0)"
    parts = []
    if "cbsz" in modifiers:
        parts.append("CBSZ/ABID: block ABID of each group of 2^CBSZ blocks broadcasts its A to the group")
    if cd_type == "f64" and family == "CDNA3":
        parts.append("BLGP: bit 0 negates A, bit 1 negates B, bit 2 negates C (not a lane swizzle)")
    else:
        parts.append("BLGP: B lane-group swizzle (0 none; 1/2 lanes 0-31/32-63 to both halves; 3 rotate "
                     "by 16; 4-7 one 16-lane group to all four)")
    if "cbsz" not in modifiers:
        parts.append("CBSZ/ABID not supported")
    return "; ".join(parts)


def mfma(mnemonic: str, m: int, n: int, k: int, blocks: int, a_type: str, b_type: str, cd_type: str,
         cycles: int, modifiers: tuple[str, ...], builtin: str, source: str, family: str,
         notes: str = "") -> MatrixInstruction:
    """The record of one row: layouts from the CDNA families, notes from the modifiers."""
    bits = {op: elem_type(t).bits for op, t in (("A", a_type), ("B", b_type), ("C", cd_type))}
    layouts = {"A": ab_kgroups("A", m, k, bits["A"], blocks=blocks),
               "B": ab_kgroups("B", n, k, bits["B"], blocks=blocks),
               "C": cd_cdna("C", m, n, bits["C"], blocks=blocks),
               "D": cd_cdna("D", m, n, bits["C"], blocks=blocks)}
    note = modifier_note(cd_type, family, modifiers)
    acc = accumulators.cdna(family, mnemonic, a_type, cd_type)
    return MatrixInstruction(mnemonic, m, n, k, blocks, a_type, b_type, cd_type, layouts, source=source,
                             cycles=cycles, builtin=builtin, modifiers=modifiers, **({"accumulator": acc} if acc else {}),
                             notes=f"{notes}; {note}" if notes else note)
