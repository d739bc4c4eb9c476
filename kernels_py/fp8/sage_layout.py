"""What SageAttention2 reads off NVIDIA's mma.sync fragment tables, derived from gfxsim's records.

Nothing here is written for one layout: every index comes from the records' (lane, reg, elem) ->
(row, col) tables, so the same code gives SageAttention2's formulas on sm_89/sm_90
(Q row r -> scale r % 8, K token n -> (n % 8) // 2, V permuted 0,1,8,9,2,3,10,11,...) and fails
loudly on a layout where they do not hold.

  frag(insn, op)          per lane, the (row, col) of every element slot (reg-major), [lanes, slots]
  row_slots(insn)         the D registers of a lane that hold one row (lane-independent)
  pv_a_from_qk(qk, pv)    which QK result (n8 tile, D register) fills each PV A slot, and the
                          token permutation this implies for V: the QK accumulator feeds PV as is
"""
from __future__ import annotations

import numpy as np
from gfxsim.errors import ArgumentError

QK_MMA = {"int8": "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
          "int4": "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32"}
PV_MMA = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
QMAX = {"int8": 127, "int4": 7}
WARPQ = 32           # query rows of one warp (two m16 tiles)
BLKK = 64            # tokens of one K block (SageAttention2's CTA_K / WARPK)
FP8_MAX = 448.0
S_FP8_OFFSET = np.float32(8.807)     # log2(448): P~ = 2^(x - m + 8.807) in [0, 448], a static scale


def frag(insn, op):
    """(rows, cols) [lanes, slots] of operand ``op``'s block 0, slot = reg * elems_per_reg + elem."""
    lay = insn.operand(op)
    t = lay.table()
    t = t[t["block"] == 0]
    per = max(1, 32 // lay.elem_bits)
    slot = t["reg"] * per + t["elem"]
    rows = np.full((lay.n_lanes, lay.n_regs * per), -1, np.int64)
    cols = rows.copy()
    rows[t["lane"], slot] = t["row"]
    cols[t["lane"], slot] = t["col"]
    return rows, cols


def contiguous_runs(insn, op, axis: str):
    """Per lane, the first element of each register and the run length: the elements of one
    register are consecutive along ``axis`` (so one vector load fills it). ValueError if not."""
    lay = insn.operand(op)
    rows, cols = frag(insn, op)
    along = cols if axis == "col" else rows
    per = rows.shape[1] // lay.n_regs
    r = along.reshape(lay.n_lanes, lay.n_regs, per)
    if not (np.diff(r, axis=2) == 1).all():
        raise ArgumentError(f"{insn.mnemonic} {op}: a register's elements are not consecutive along {axis}")
    return per


def row_slots(insn):
    """The D registers that share a row, as lists [[0, 1], [2, 3]] (the same for every lane)."""
    rows, _ = frag(insn, "D")
    out = []
    for i in range(rows.shape[1]):
        for grp in out:
            if (rows[:, grp[0]] == rows[:, i]).all():
                grp.append(i)
                break
        else:
            if any((rows[:, g[0]] == rows[:, i]).any() for g in out):
                raise ArgumentError(f"{insn.mnemonic}: D registers share rows on some lanes only")
            out.append([i])
    return out


def sharers(groups_per_lane):
    """For every lane, the lanes of its group in order: [lanes, group size]."""
    g = np.asarray(groups_per_lane)
    lists = [np.nonzero(g == x)[0] for x in g]
    if len({len(x) for x in lists}) != 1:
        raise ArgumentError("groups of unequal size")
    return np.stack(lists)


def pv_a_from_qk(qk, pv):
    """(source [slots] of (n8 tile offset, D register), perm [K]) for feeding the QK result of one
    lane straight into the A operand of the PV instruction: the lane's D values of a row, in
    (tile, register) order, fill its A slots of that row in slot order. ``perm[k]`` is the token
    (within the PV instruction's K tokens) that A's K slot k then holds, so V's row k must be token
    perm[k]. Both must be lane-independent, or no permutation of V makes the shortcut exact."""
    drows, dcols = frag(qk, "D")
    arows, acols = frag(pv, "A")
    lanes, n_slots = arows.shape
    K, N = pv.K, qk.N
    if K % N:
        raise ArgumentError(f"PV K {K} is not a whole number of QK n{N} tiles")
    tiles = K // N
    source, perm = None, np.full(K, -1, np.int64)
    for lane in range(lanes):
        held = [(j, i, drows[lane, i], j * N + dcols[lane, i]) for j in range(tiles) for i in range(drows.shape[1])]
        src = []
        for s in range(n_slots):
            row = arows[lane, s]
            used = sum(1 for q in range(s) if arows[lane, q] == row)
            mine = [h for h in held if h[2] == row]
            if used >= len(mine):
                raise ArgumentError(f"lane {lane}: A row {row} has more slots than QK results")
            j, i, _, tok = mine[used]
            src.append((j, i))
            k = acols[lane, s]
            if perm[k] not in (-1, tok):
                raise ArgumentError(f"K slot {k} would need tokens {perm[k]} and {tok}: no single V permutation")
            perm[k] = tok
        if source is None:
            source = src
        elif src != source:
            raise ArgumentError(f"lane {lane} packs its QK results in another order than lane 0")
    return source, perm


def permuted_columns(tokens: int, perm) -> np.ndarray:
    """The token each column of a transposed, permuted V holds (SageAttention2's
    TransposePadPermuteKernel): column c * K + k holds token c * K + perm[k], K = len(perm) (the
    PV instruction's K), so a lane's B elements of one K step are its K slots, side by side."""
    K = len(perm)
    if tokens % K:
        raise ArgumentError(f"{tokens} tokens are not a whole number of PV K steps of {K}")
    col = np.arange(tokens)
    return (col // K) * K + np.asarray(perm)[col % K]
