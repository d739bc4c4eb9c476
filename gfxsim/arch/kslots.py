"""Which tokens each matrix instruction consumes when lanes load consecutive tokens along K.

The INT8 PV question: each lane loads ``load_bytes`` consecutive 8-bit tokens of one column
(V cache token-innermost) with a single vector load; lane group g = lane // MN gets tokens
``load_bytes*g ..``; the loaded registers then feed consecutive instructions, ``regs(op)`` VGPRs each.
"""
from __future__ import annotations

import numpy as np

from .matrix_insn import MatrixInstruction
from ..errors import ArgumentError


def k_lane_groups(lay) -> int:
    """How many lane groups split K (CDNA 16x16x32: lane // 16, 4 groups; PTX m16n8k32: lane % 4, 4)."""
    k_axis = "col" if lay.operand == "A" else "row"
    n = 1
    for d in lay.lane:
        if d.axis == k_axis:
            n *= d.extent
    return n


def tokens_per_instruction(insn: MatrixInstruction, operand: str = "B", load_bytes: int = 16):
    """Return ``tokens[m][k]``: the token feeding K slot k of instruction m, for the
    ``ceil(load_bytes * 8 / (regs*32))`` instructions one load feeds (-1 where a K slot gets
    no loaded byte, e.g. an 8-byte load that covers only part of the fragment, or the last
    instruction of a 12-byte load into 8-byte fragments)."""
    lay = insn.operand(operand)
    op = lay.operand
    if op not in ("A", "B"):
        raise ArgumentError(f"token sets are defined for K-carrying operands A and B, not {operand!r}")
    if lay.elem_bits % 8:
        raise ArgumentError(f"token sets need byte-sized elements; {insn.mnemonic} packs {lay.elem_bits}-bit "
                         f"elements in operand {op}")
    if load_bytes % 4 or load_bytes <= 0:
        raise ArgumentError(f"load_bytes must be a positive multiple of 4 (got {load_bytes})")
    k_axis, mn_axis = ("col", "row") if op == "A" else ("row", "col")
    if any(d.axis == mn_axis for d in lay.reg + lay.elem):
        raise ArgumentError(f"token sets need all registers of a lane on one {'row' if op == 'A' else 'column'}; "
                         f"operand {op} of {insn.mnemonic} spreads a lane's registers over several")
    ebytes = lay.elem_bits // 8
    op_bytes = lay.n_regs * 4
    n_insn = -(-load_bytes // op_bytes)          # a partial last fragment is still fed
    tokens_per_lane = load_bytes // ebytes
    out = np.full((n_insn, insn.K), -1, np.int64)
    # lane index along M/N is irrelevant to the token: use the first row/column.
    k = np.arange(insn.K)
    kw = dict(row=k, col=np.zeros_like(k)) if k_axis == "row" else dict(row=np.zeros_like(k), col=k)
    lane, reg, elem = lay.to_register(**kw)
    # the lane's K group: its lane digits on K read as one mixed-radix number
    group, place, radix = np.zeros_like(lane), 1, 1
    for d in lay.lane:
        if d.axis == k_axis:
            group = group + ((lane // place) % d.extent) * radix
            radix *= d.extent
        place *= d.extent
    for m in range(n_insn):
        byte = (m * lay.n_regs + reg * lay.words_per_reg) * 4 + elem * ebytes     # reg: a pair for 64-bit
        ok = byte < load_bytes
        out[m, ok] = group[ok] * tokens_per_lane + byte[ok] // ebytes
    return out


def format_token_set(tokens) -> str:
    """Compact ranges: [0..7,16..23] -> '{0-7,16-23}'."""
    if isinstance(tokens, (set, frozenset)):
        tokens = list(tokens)
    t = sorted({int(x) for x in np.asarray(tokens).ravel() if x >= 0})
    if not t:
        return "{}"
    runs, start, prev = [], t[0], t[0]
    for x in t[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        runs.append(f"{start}-{prev}" if prev > start else f"{start}")
        if x is not None:
            start = prev = x
    return "{" + ",".join(runs) + "}"
