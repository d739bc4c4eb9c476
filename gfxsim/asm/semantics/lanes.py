"""One lane of a VGPR to or from an SGPR (VOP3, CDNA3 ISA): ``v_readlane_b32`` and
``v_writelane_b32``. clang spills SGPRs into VGPR lanes with them (and reads them back), and
wave reductions read one lane. Both ignore EXEC: the lane is named by the lane select (an SGPR,
M0 or a constant; its low 6 bits), per member of a batch. SGPRs carry no provenance: the lane
written holds none (or the unknown-origin mark of its SGPR), and an SGPR read from a lane whose
bytes carry identities is of unknown origin (gfxsim/asm/origin.py), as with v_readfirstlane_b32."""
from __future__ import annotations

import numpy as np

from . import no_mods, op, u32
from .vop import lanes_carry_identity


def _lane_select(st, o) -> np.ndarray:
    """The lane each member selects: int64 [members]."""
    if o.kind == "reg" and o.file in "va":
        raise st.error(f"lane select {o.text}: an SGPR, M0 or a constant expected")
    return (u32(st, o).reshape(st.members, st.lanes)[:, 0] & np.uint32(st.lanes - 1)).astype(np.int64)


@op("v_readlane_b32")
def v_readlane_b32(st, d):
    no_mods(st, d)
    dst, src, sel = d.ops.positional
    if dst.kind != "reg" or dst.file != "s" or dst.count != 1:
        raise st.error(f"v_readlane_b32 writes an SGPR, got {dst.text}")
    if src.kind != "reg" or src.file not in "va" or src.count != 1:
        raise st.error(f"v_readlane_b32 reads one VGPR, got {src.text}")
    lane = _lane_select(st, sel)
    words = st.vwords(src.file, src.first, 1)[0].reshape(st.members, st.lanes)
    if st.w.provenance:
        st.taint_s = lanes_carry_identity(st, st.vread(src.file, src.first, 1), np.arange(st.members) * st.lanes + lane)
    st.swrite(dst.first, words[np.arange(st.members), lane])


@op("v_writelane_b32")
def v_writelane_b32(st, d):
    no_mods(st, d)
    dst, src, sel = d.ops.positional
    if dst.kind != "reg" or dst.file not in "va" or dst.count != 1:
        raise st.error(f"v_writelane_b32 writes one VGPR, got {dst.text}")
    if src.kind == "reg" and src.file in "va":
        raise st.error(f"v_writelane_b32 writes an SGPR or a constant, got {src.text}")
    lane = _lane_select(st, sel)
    members = np.ones(st.members, bool) if st.act is None else st.act
    one = (np.arange(st.lanes)[None, :] == lane[:, None]) & members[:, None]
    saved = st.exec.copy()
    st.set_exec(one.reshape(-1))
    try:
        st.vwrite(dst.file, dst.first, u32(st, src)[None, :])
    finally:
        st.set_exec(saved)
