"""Per-thread scale groups derived from a record's accumulator layout (SageAttention2's question).

A scale on M or N factors out of the dot product, so a kernel may give every row (column) of the
result its own scale, but a thread can apply a scale cheaply only if one value serves every
element it holds. Rows (columns) held by exactly the same set of lanes can therefore share one
scale: that set is the row's (column's) group. On mma.sync m16n8 (C/D: row = groupID + 8*(i//2),
col = 2*threadID_in_group + i%2) this gives SageAttention2's per-thread quantization: Q row r in
group r % 8, K token n in group (n % 8) // 2. The same derivation on CDNA gives rows in groups of
four (i // 4) and one column per lane.
"""
from __future__ import annotations

import numpy as np

from .matrix_insn import MatrixInstruction
from ..errors import ArgumentError


def _groups(lanes_of):
    """Index of each row/column's lane set, numbered in order of first appearance."""
    seen, out = {}, []
    for s in lanes_of:
        out.append(seen.setdefault(s, len(seen)))
    return np.array(out, np.int64)


def scale_groups(insn: MatrixInstruction, operand: str = "D"):
    """(row_group [M], col_group [N]) of one block of ``operand`` (C or D): rows (columns) held by
    the same lanes share a group."""
    return layout_groups(insn.operand(operand))


def layout_groups(lay):
    """``scale_groups`` of one C/D ``OperandLayout`` (a record's, or one a kernel assumed)."""
    if lay.operand not in ("C", "D"):
        raise ArgumentError(f"scale groups are defined on the result (C/D), not operand {lay.operand!r}")
    t = lay.table()
    t = t[t["block"] == 0]
    rows = [frozenset(t["lane"][t["row"] == r].tolist()) for r in range(lay.rows)]
    cols = [frozenset(t["lane"][t["col"] == c].tolist()) for c in range(lay.cols)]
    return _groups(rows), _groups(cols)


def tiled_groups(insn: MatrixInstruction, rows: int, cols: int, operand: str = "D"):
    """Groups over a warp tile of ``rows`` x ``cols`` results made of whole instruction tiles (the
    same lanes hold the same positions of every tile): SageAttention2's WARPQ rows x 64 tokens."""
    lay = insn.operand(operand)
    if rows % lay.rows or cols % lay.cols:
        raise ArgumentError(f"a {rows}x{cols} tile is not made of whole {lay.rows}x{lay.cols} tiles of {insn.mnemonic}")
    rg, cg = scale_groups(insn, operand)
    return rg[np.arange(rows) % lay.rows], cg[np.arange(cols) % lay.cols]


def lane_groups(lay, rows: int, cols: int):
    """(row group [lanes], col group [lanes]) of every lane over a ``rows`` x ``cols`` warp tile of
    C/D layout ``lay`` (whole tiles): the one scale a thread needs on M and the one on N. A layout
    where some lane holds rows (columns) of two groups has no per-thread scale: ValueError."""
    if rows % lay.rows or cols % lay.cols:
        raise ArgumentError(f"a {rows}x{cols} tile is not made of whole {lay.rows}x{lay.cols} tiles")
    rg, cg = layout_groups(lay)
    t = lay.table()
    t = t[t["block"] == 0]
    out = []
    for g, axis in ((rg, "row"), (cg, "col")):
        per_lane = np.full(lay.n_lanes, -1, np.int64)
        for lane in range(lay.n_lanes):
            got = set(g[t[axis][t["lane"] == lane]].tolist())
            if len(got) != 1:
                raise ArgumentError(f"lane {lane} holds {axis}s of groups {sorted(got)}: no per-thread {axis} scale")
            per_lane[lane] = got.pop()
        out.append(per_lane)
    return out[0], out[1]
