"""One CDNA v_mfma_* record from its row in an arch's table: shape, types, cycles, modifiers.

Every CDNA matrix operand follows two layout families (matrix_insn.ab_kgroups for A/B,
matrix_insn.cd_cdna for C/D), parameterised by the shape, the block count and the element width,
so a row of facts is the whole record.
"""
from __future__ import annotations

from . import accumulators
from .dtypes import elem_type
from .layout import OperandLayout
from .matrix_insn import MatrixInstruction, ab_kgroups, cd_cdna

BROADCAST = ("cbsz", "abid", "blgp")     # multi-block instructions: A-block broadcast and B swizzle
SWIZZLE = ("blgp",)
INDEX_SET = ("cbsz", "abid")             # v_smfmac_*: which set of compression fields Src2 gives
SPARSE_NOTE = ("4:2 structured sparse A, held compressed (two of every four K values) with a compression "
               "index in Src2 (one 4-bit field per group of four K: bits 1:0 and 3:2 the positions of its "
               "two stored values); C is D (Vdst); CBSZ/ABID: CBSZ 0 takes index set ABID (the fields of "
               "16-bit A from bit 8*ABID, of 8-bit A from bit 16*ABID), CBSZ != 0 set 0; BLGP not supported")


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


def index_layout(m: int, k: int, wave: int = 64) -> OperandLayout:
    """Src2 of a v_smfmac_*: field g (K 4g..4g+3) of row i at lane i + M*(g // gpl), bits 4*(g % gpl),
    gpl = the groups one lane holds (as A's K is split over lane groups)."""
    groups = wave // m
    gpl = k // 4 // groups
    return OperandLayout("K", m, k // 4, 1, 4, lane=[(m, "row", 1), (groups, "col", gpl)], reg=[],
                         elem=[(gpl, "col", 1)], wave_size=wave)


def smfmac(mnemonic: str, m: int, n: int, k: int, a_type: str, b_type: str, cd_type: str, cycles: int,
           builtin: str, source: str) -> MatrixInstruction:
    """A sparse record: A compressed (M x K/2 in the dense A family's layout), B, C/D as the dense
    families, the compression index from ``index_layout``."""
    bits = {op: elem_type(t).bits for op, t in (("A", a_type), ("B", b_type), ("C", cd_type))}
    layouts = {"A": ab_kgroups("A", m, k // 2, bits["A"]), "B": ab_kgroups("B", n, k, bits["B"]),
               "C": cd_cdna("C", m, n, bits["C"]), "D": cd_cdna("D", m, n, bits["C"])}
    acc = accumulators.sparse(a_type, cd_type)
    return MatrixInstruction(mnemonic, m, n, k, 1, a_type, b_type, cd_type, layouts, source=source, cycles=cycles,
                             builtin=builtin, modifiers=INDEX_SET, notes=SPARSE_NOTE, index=index_layout(m, k),
                             **({"accumulator": acc} if acc else {}))
