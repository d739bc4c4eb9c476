"""DPP (data-parallel primitives, the ``_dpp`` form of VOP1/VOP2 instructions) per the Vega / CDNA3
ISA: src0, a VGPR, is read from another lane of the same wave, chosen by DPP_CTRL; the instruction
then computes as its plain form.

    quad_perm:[a,b,c,d]   lane l reads (l & ~3) + sel[l & 3]
    row_shl:n / row_shr:n lane l reads l + n / l - n within its row of 16 (outside the row: invalid)
    row_ror:n             l reads (l - n) mod 16 within its row
    wave_shl:1 / wave_shr:1   l reads l + 1 / l - 1 (lane 63 / lane 0: invalid)
    wave_rol:1 / wave_ror:1   l reads (l + 1) / (l - 1) mod 64
    row_mirror            l reads 15 - (l mod 16) within its row; row_half_mirror: within each 8
    row_bcast:15          rows 1..3 read the last lane of the row before (row 0: invalid)
    row_bcast:31          rows 2 and 3 read lane 31 (rows 0 and 1: invalid)
    row_newbcast:n        (gfx90a, gfx940+) each row reads its lane n

A source lane that is out of range or inactive (EXEC clear: gfx9 has no ``fi``, so inactive lanes are
never fetched) is invalid: with ``bound_ctrl`` the lane reads 0, else the lane is not written.
LLVM writes the bit as ``bound_ctrl:1`` (older versions ``bound_ctrl:0``, which on gfx9 encodes the
same bit). Lanes of rows cleared in ``row_mask`` or banks (groups of 4 lanes in a row) cleared in
``bank_mask`` are not written either: the instruction runs with them out of EXEC, so the
destination keeps its old value there (and a carry-out SGPR reads 0 there, as for inactive lanes).
gfx9 has no DPP form of VOPC or VOP3 instructions.

The source moves lane to lane through the back end's bpermute (each byte's provenance with it),
never across the members of a batch; ``Source`` is what the instruction's src0 reads
(semantics.u32 / vsrc), set on the wave state while the instruction runs.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from ...errors import GfxSimError
from ...machine.provenance import Prov
from ...machine.vgpr import VGPRs

ROW = 16
SHIFTS = {"row_shl": 0x100, "row_shr": 0x110, "row_ror": 0x120, "row_newbcast": 0x150}   # + n (1..15; newbcast 0..15)
WAVE = {"wave_shl": 0x130, "wave_rol": 0x134, "wave_shr": 0x138, "wave_ror": 0x13C}      # n = 1 only
FIXED = {"row_mirror": 0x140, "row_half_mirror": 0x141}
BCAST = {15: 0x142, 31: 0x143}
CONTROLS = ("quad_perm", *SHIFTS, *WAVE, *FIXED, "row_bcast")
MODS = (*CONTROLS, "row_mask", "bank_mask", "bound_ctrl")


class DppError(GfxSimError, ValueError):
    """A DPP control the ISA does not define (the caller adds kernel and line)."""


@dataclass(frozen=True)
class Control:
    """A decoded DPP word: DPP_CTRL as encoded, the row and bank masks, BOUND_CTRL."""
    code: int
    row_mask: int = 0xF
    bank_mask: int = 0xF
    bound_ctrl: bool = False

    def source_lanes(self, lanes: int = 64) -> tuple[np.ndarray, np.ndarray]:
        """(src, in_range) per lane of one wave: the lane each lane reads and whether that is a lane."""
        l = np.arange(lanes)
        row, r = l & ~(ROW - 1), l & (ROW - 1)
        c = self.code
        ok = np.ones(lanes, bool)
        if c <= 0xFF:
            sel = np.array([(c >> (2 * k)) & 3 for k in range(4)])
            src = (l & ~3) | sel[l & 3]
        elif 0x101 <= c <= 0x10F:
            src, ok = l + (c - 0x100), r + (c - 0x100) < ROW
        elif 0x111 <= c <= 0x11F:
            src, ok = l - (c - 0x110), r - (c - 0x110) >= 0
        elif 0x121 <= c <= 0x12F:
            src = row | ((r - (c - 0x120)) & (ROW - 1))
        elif c == 0x130:
            src, ok = l + 1, l + 1 < lanes
        elif c == 0x134:
            src = (l + 1) % lanes
        elif c == 0x138:
            src, ok = l - 1, l >= 1
        elif c == 0x13C:
            src = (l - 1) % lanes
        elif c == 0x140:
            src = row | (ROW - 1 - r)
        elif c == 0x141:
            src = (l & ~7) | (7 - (l & 7))
        elif c == 0x142:
            src, ok = row - 1, row >= ROW
        elif c == 0x143:
            src, ok = np.full(lanes, 31), l >= 32
        elif 0x150 <= c <= 0x15F:
            src = row | (c - 0x150)
        else:
            raise DppError(f"DPP_CTRL {c:#x} is reserved")
        return np.where(ok, src, l).astype(np.int64), ok

    def enabled(self, lanes: int = 64) -> np.ndarray:
        """Per lane: its row and bank are enabled (row_mask bit l/16, bank_mask bit (l mod 16)/4)."""
        l = np.arange(lanes)
        return ((self.row_mask >> (l // ROW)) & 1).astype(bool) & ((self.bank_mask >> ((l % ROW) // 4)) & 1).astype(bool)


def control(mods) -> Control:
    """The DPP control of an instruction's modifiers (exactly one DPP_CTRL form)."""
    given = [k for k in CONTROLS if k in mods]
    if len(given) != 1:
        raise DppError(f"a DPP instruction takes one of {', '.join(CONTROLS)}; got {', '.join(given) or 'none'}")
    k, v = given[0], mods[given[0]]
    if k == "quad_perm":
        code = sum(s << (2 * i) for i, s in enumerate(v))
    elif k in SHIFTS:
        if not (0 if k == "row_newbcast" else 1) <= v <= 15:
            raise DppError(f"{k}:{v}: the shift is 1..15" if k != "row_newbcast" else f"{k}:{v}: the lane is 0..15")
        code = SHIFTS[k] + v
    elif k in WAVE:
        if v != 1:
            raise DppError(f"{k}:{v}: a wave shift or rotate is by 1")
        code = WAVE[k]
    elif k in FIXED:
        code = FIXED[k]
    else:
        if v not in BCAST:
            raise DppError(f"row_bcast:{v}: row_bcast is 15 or 31")
        code = BCAST[v]
    masks = {}
    for m in ("row_mask", "bank_mask"):
        masks[m] = mods.get(m, 0xF)
        if not 0 <= masks[m] <= 0xF:
            raise DppError(f"{m}:{masks[m]:#x}: a 4-bit mask")
    bc = mods.get("bound_ctrl")
    if bc not in (None, 0, 1):
        raise DppError(f"bound_ctrl:{bc}: 0 or 1 (both set BOUND_CTRL on gfx9)")
    return Control(code, masks["row_mask"], masks["bank_mask"], bc is not None)


def src0_index(ops) -> int:
    """src0 of a DPP instruction: the first VGPR after the destination (VOP2 carries name VCC before it)."""
    for i, o in enumerate(ops.positional[1:], 1):
        if o.kind == "reg" and o.file == "v":
            return i
    raise DppError("a DPP instruction's src0 is a VGPR; none is given")


def check(ops) -> Control:
    """The DPP control of a DPP instruction's operands, checked: one VGPR src0, or a pair with
    row_newbcast (the only DPP of 64-bit operations, gfx90a and gfx940+)."""
    ctrl = control(ops.mods)
    o = ops.positional[src0_index(ops)]
    if o.count == 2 and not 0x150 <= ctrl.code <= 0x15F:
        raise DppError(f"src0 {o.text}: a 64-bit DPP operand takes only row_newbcast")
    if o.count not in (1, 2):
        raise DppError(f"src0 {o.text}: one VGPR (or a pair for a 64-bit move) expected")
    return ctrl


def strip(d, ctrl: Control, index: int):
    """The decoded instruction as its plain form runs it: src0 marked (Operand.dpp), DPP modifiers gone."""
    from ..operands import Operands
    o = d.ops.positional[index]
    pos = list(d.ops.positional)
    pos[index] = replace(o, dpp=True)
    mods = {k: v for k, v in d.ops.mods.items() if k not in MODS}
    tokens = tuple(t for t in d.ops.mod_tokens if t.split(":")[0] not in MODS)
    return replace(d, ops=Operands(tuple(pos), MappingProxyType(mods), tokens), dpp=ctrl)


@dataclass
class Source:
    """src0 as the enabled lanes read it: words [n, width] (0 where the source lane is invalid), the
    back-end value (provenance moved from the source lanes), the fresh bits moved alike, and the
    column each column read. ``taken``: the instruction read it (through semantics.u32 / u64 / vsrc)."""
    words: np.ndarray
    value: VGPRs
    fresh: np.ndarray
    cols: np.ndarray
    taken: bool = False

    def take(self, what: str):
        self.taken = True
        return self.words if what == "words" else self.value


def read(st, o, ctrl: Control) -> tuple[Source, np.ndarray]:
    """(the Source of operand ``o``, the lanes the instruction writes) under the current EXEC."""
    w = st.w
    src, ok = ctrl.source_lanes(st.lanes)
    src = np.tile(src, st.members)
    cols = w.member_starts + src
    ex = st.exec.copy()
    valid = np.tile(ok, st.members) & ex[cols]
    writes = ex & np.tile(ctrl.enabled(st.lanes), st.members) & (valid | ctrl.bound_ctrl)
    v = st.vread(o.file, o.first, o.count)
    written, v.valid = v.valid, None        # a VALU read reports nothing; the written bits move with the value
    moved = w.bpermute(v, src)
    words = np.where(valid, moved.val.view(np.uint32), np.uint32(0)).astype(np.uint32)
    prov = moved.prov
    if prov is not None and not valid.all():        # an invalid source reads 0, a value of no one
        prov = Prov.select(w.pcols(valid[None, :], "a DPP source's valid lanes"), prov, None, prov.shape)
    if written is not None:
        written = np.where(valid, written[:, cols], True)
    value = VGPRs(w, words, "u32", prov, written, regs=(o.first, o.count))
    fresh = st.fresh[o.file][o.first:o.first + o.count][:, cols] & valid
    return Source(words, value, fresh, cols), writes


def executor(base, stripped):
    """The DPP form of ``base`` (a plain VOP1/VOP2 semantics function) for one decoded instruction:
    src0 read across lanes, the instruction run on the lanes it writes, EXEC restored after."""
    index = next(i for i, o in enumerate(stripped.ops.positional) if o.dpp)

    def run(st, d):
        ctrl = stripped.dpp
        o = stripped.ops.positional[index]
        source, writes = read(st, o, ctrl)
        saved = st.exec.copy()
        st.dpp = source
        st.set_exec(writes)
        try:
            nxt = base(st, stripped)
            if not source.taken:        # semantics that read the register itself would miss the move
                raise st.error(f"{d.ins.mnemonic}: the semantics of {d.mnemonic} read src0 {o.text} without "
                               "the DPP source path (semantics.u32 / vsrc)")
            return nxt
        finally:
            st.dpp = None
            st.set_exec(saved)
    return run
