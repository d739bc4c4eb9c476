"""One lane of a VGPR to an SGPR and back (v_readlane_b32, v_writelane_b32), per the CDNA3 ISA:
the lane is S1[5:0] (an SGPR or an inline constant), each member of a batch its own. clang's wave
reductions (an atomicAdd of a per-lane value) step through the active lanes with them, and clang
spills SGPRs into VGPR lanes with them. SGPRs carry no provenance: an SGPR read from a lane whose
bytes carry an identity is of unknown origin (origin.py, as after v_readfirstlane_b32), and a lane
written from such an SGPR is marked (the executor's taint_in)."""
from __future__ import annotations

import numpy as np

from . import no_mods, op, u32
from .sop import s32
from ..origin import bytes_carry_identity


def _lane(st, o) -> np.ndarray:
    """The selected lane of each member, as a column: int64 [members]."""
    return (s32(st, o) & np.uint64(st.lanes - 1)).astype(np.int64) + np.arange(st.members) * st.lanes


@op("v_readlane_b32")
def v_readlane_b32(st, d):
    """D (an SGPR) = S0[lane], read whether or not that lane is active."""
    no_mods(st, d)
    dst, src, sel = d.ops.positional
    if dst.kind != "reg" or dst.file != "s" or dst.count != 1:
        raise st.error(f"v_readlane_b32 writes an SGPR, got {dst.text}")
    cols = _lane(st, sel)
    if st.w.provenance and src.kind == "reg" and src.file in "va":
        st.taint_s = _carry_identity(st, st.vread(src.file, src.first, 1), cols)
    st.swrite(dst.first, u32(st, src)[cols])


def _carry_identity(st, v, cols) -> np.ndarray | None:
    """Per member: whether the value's bytes in column ``cols[m]`` carry an identity; None where
    none does."""
    if v.prov is None:
        return None
    p = v.prov.per_byte()
    if st.w.fold is not None:                      # folded columns: the whole register decides
        out = np.full(st.members, bytes_carry_identity(p), bool)
    else:
        out = np.array([bytes_carry_identity(p.map(lambda a, c=c: a[:, c:c + 1])) for c in cols.tolist()], bool)
    return out if out.any() else None


@op("v_writelane_b32")
def v_writelane_b32(st, d):
    """D[lane] = S0 (a scalar: the written word carries no provenance), whatever EXEC says."""
    no_mods(st, d)
    dst, src, sel = d.ops.positional
    if dst.kind != "reg" or dst.file not in "va" or dst.count != 1:
        raise st.error(f"v_writelane_b32 writes one VGPR, got {dst.text}")
    value = u32(st, src)
    one = np.zeros(st.w.width, bool)
    cols = _lane(st, sel)
    act = st.act if st.act is not None else np.ones(st.members, bool)
    one[cols[act]] = True
    saved = st.exec.copy()
    st.set_exec(one)
    try:
        st.vwrite(dst.file, dst.first, value[None, :])
    finally:
        st.set_exec(saved)
