"""The dense form of a sparse record (v_smfmac_*): the instruction the matrix unit runs once the
compression index has put A's stored values back at their K positions (zeros elsewhere).

Its A is the dense M x K operand of the CDNA A family; a lane's dense values are exactly the groups
its compressed values come from (compressed columns 2g, 2g+1 are group g, K 4g..4g+3), so the
expansion never moves a value to another lane. B, C, D, accumulator and name are the record's.
"""
from __future__ import annotations

from dataclasses import replace

from .matrix_insn import MatrixInstruction, ab_kgroups
from ..errors import ArgumentError

_TWINS: dict[int, tuple[MatrixInstruction, MatrixInstruction]] = {}


def dense_twin(insn: MatrixInstruction) -> MatrixInstruction:
    """The record's dense form (made once per record)."""
    if not insn.sparse:
        raise ArgumentError(f"{insn.mnemonic} is not a sparse instruction")
    got = _TWINS.get(id(insn))
    if got is None or got[0] is not insn:
        dense_a = ab_kgroups("A", insn.M, insn.K, insn.a.bits)
        twin = replace(insn, layouts={**insn.layouts, "A": dense_a}, index=None,
                       notes=f"dense form of {insn.mnemonic} (A expanded by its compression index)")
        got = _TWINS[id(insn)] = (insn, twin)
    return got[1]


def index_sets(insn: MatrixInstruction) -> int:
    """How many sets of compression fields one 32-bit Src2 holds: two bits per stored value of a lane."""
    return 32 // (2 * insn.elems("A"))
