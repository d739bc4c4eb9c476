"""Bytes of unknown origin in the asm front end: where an instruction cannot route its bytes'
provenance, its result is marked (the UNKNOWN flag of gfxsim.machine.provenance), so a token is
never silently lost on its way to a matrix instruction's K slot.

A vector result written without provenance (``put``: carries, 64-bit multiply-adds, ...) from
VGPR sources whose bytes carry identities is marked (``sources_carry_identity``).

SGPRs carry no provenance; this tracks which of them hold bytes of unknown origin.

An SGPR is of unknown origin after an ``s_load`` whose bytes carry identities (tokens, heads, ...)
or a ``v_readfirstlane``/``v_readlane`` of such a VGPR, and after any scalar instruction that
reads one (the taint follows SALU arithmetic and moves). A vector instruction that reads one as
data writes its VGPR destination with the UNKNOWN flag (gfxsim.machine.provenance), which a
matrix instruction reports when it reaches a K slot. Addresses and offsets are not data: memory
instructions take their bytes' provenance from memory. WaveState holds the state
(``s_unknown``, ``taint_s``, ``taint_v``); the executor calls ``taint_in`` before an instruction
only once some SGPR is marked, so kernels that never load tagged bytes into SGPRs pay nothing.
"""
from __future__ import annotations

import numpy as np


_NOT_DATA = ("s_load", "s_buffer_load", "s_store", "s_dcache", "global_", "buffer_", "ds_", "scratch_", "flat_",
             "s_cbranch", "s_branch", "s_waitcnt", "s_setpc", "s_swappc", "s_getpc", "v_readlane", "v_readfirstlane")
# VOP3b: the second operand is a carry or scale mask written, not read
_SDST_SECOND = ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32", "v_addc_co_u32", "v_subb_co_u32",
                "v_subbrev_co_u32", "v_div_scale_f32", "v_div_scale_f64", "v_mad_u64_u32", "v_mad_i64_i32")


def taint_in(st, d) -> None:
    """Before ``d`` runs: which executing members read an SGPR of unknown origin as data; their
    SGPR (scalar) or VGPR (vector) writes of this instruction are marked."""
    m = d.ins.mnemonic
    if m.startswith(_NOT_DATA):
        return
    pos = d.ops.positional
    if m.startswith(("s_cmp", "s_bitcmp")):
        srcs = pos
    else:
        srcs = pos[2:] if m in _SDST_SECOND else pos[1:]
    taint = None
    for o in srcs:
        if o.kind == "reg" and o.file == "s" and o.first + o.count <= st.s_unknown.shape[1]:
            t = st.s_unknown[:, o.first:o.first + o.count].any(axis=1)
            taint = t if taint is None else taint | t
    if taint is None or not taint.any():
        return
    if st.act is not None:
        taint = taint & st.act
    if m.startswith("v_"):
        st.taint_v = taint
    else:
        st.taint_s = taint


def bytes_carry_identity(p) -> bool:
    """Whether a provenance (of bytes read into SGPRs) names anything a scalar register cannot hold."""
    from ..machine.provenance import RESERVED, UNKNOWN
    if p is None:
        return False
    if p.flags is not None and (p.flags & UNKNOWN).any():
        return True
    return any(f not in RESERVED and (a >= 0).any() for f, a in p.ids.items())


def columns_carry_identity(p, n: int) -> np.ndarray:
    """``bytes_carry_identity`` of each of the ``n`` columns of a provenance (bool [n])."""
    from ..machine.provenance import RESERVED, UNKNOWN
    out = np.zeros(n, bool)
    if p is None:
        return out
    if p.flags is not None:
        out |= (p.flags & UNKNOWN).any(axis=0)
    for f, a in p.ids.items():
        if f not in RESERVED:
            out |= (a >= 0).any(axis=0)
    return out


def sources_carry_identity(st, d) -> bool:
    """Whether an instruction's VGPR/AGPR sources (the destination, first, not counted) hold bytes
    that carry an identity in the executing lanes."""
    pos = d.ops.positional
    srcs = pos[2:] if d.ins.mnemonic in _SDST_SECOND else pos[1:]
    for o in srcs:
        if o.kind == "reg" and o.file in "va":
            rf = st.regfile(o.file)
            if rf.prov is None or not rf.has[o.first:o.first + o.count].any():
                continue
            if bytes_carry_identity(st.vread(o.file, o.first, o.count).prov):
                return True
    return False
