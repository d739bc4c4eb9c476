"""Instruction semantics of the asm front end: one function per operation, registered by its
base mnemonic (the ``_e32``/``_e64``/``_sdwa`` encoding suffix stripped; ``Decoded.enc`` keeps
it). A function takes the wave state and the decoded instruction and returns the next pc, or
None for the next instruction. One module per family: sop (scalar ALU and program control),
vop (vector ALU, its numbers from the ISA table gfxsim/isa), ds (LDS), mem (global and scalar memory), mfma (matrix).

Operand access shared by the families is here: ``u32`` reads a 32-bit source per lane (inline
constants, literals, SGPRs broadcast over each member's lanes, VGPRs), ``f32`` the same with the abs/neg modifiers
applied, ``u64`` a 64-bit source; ``put`` writes a vector destination under EXEC.
"""
from __future__ import annotations

import struct

import numpy as np
from ...errors import ArgumentError
from ..origin import sources_carry_identity

OPS: dict = {}


def op(*names):
    def reg(fn):
        for n in names:
            if n in OPS:
                raise ArgumentError(f"semantics for {n} defined twice")
            OPS[n] = fn
        return fn
    return reg


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def const32(st, o) -> int:
    if o.kind == "int":
        return o.value & 0xFFFFFFFF
    if o.kind == "float":
        return f32_bits(o.value)          # LLVM prints 1/(2*pi) as 0.15915494: f32 0x3e22f983
    raise st.error(f"operand {o.text} is not a 32-bit source")


def u32(st, o, *, mods_ok=False) -> np.ndarray:
    """A 32-bit source per lane: uint32 [width]."""
    if (o.neg or o.abs) and not mods_ok:
        raise st.error(f"modifier on {o.text}: integer operands take no -/|| modifiers")
    if o.sext:
        raise st.error(f"sext({o.text}) outside an SDWA instruction")
    w = st.w.width
    if o.kind == "reg":
        if o.count != 1:
            raise st.error(f"operand {o.text}: one 32-bit register expected")
        if o.file == "s":
            return st.lanewise(st.sread(o.first))       # each member's SGPR over its lanes
        return st.vwords(o.file, o.first, 1)[0]
    if o.kind == "scc":
        return st.lanewise(st.scc)
    return np.full(w, const32(st, o), np.uint32)


def f32(st, o) -> np.ndarray:
    """A 32-bit float source with |x| then -x applied (on the sign bit, as the VOP3 modifiers)."""
    b = u32(st, o, mods_ok=True).copy()
    if o.abs:
        b &= np.uint32(0x7FFFFFFF)
    if o.neg:
        b ^= np.uint32(0x80000000)
    return b.view(np.float32)


def u64(st, o) -> np.ndarray:
    """A 64-bit source per lane: uint64 [width]. Inline integers sign-extend to 64 bits."""
    if o.neg or o.abs or o.sext:
        raise st.error(f"modifier on 64-bit operand {o.text}")
    w = st.w.width
    if o.kind == "reg":
        if o.count != 2:
            raise st.error(f"operand {o.text}: a 64-bit register pair expected")
        if o.file == "s":
            return st.lanewise64(st.sread64(o.first))
        ww = st.vwords(o.file, o.first, 2).astype(np.uint64)
        return ww[0] | (ww[1] << np.uint64(32))
    if o.kind == "int" and (o.inline or 0 <= o.value < (1 << 31)):     # see sop.LITERAL64
        return np.full(w, o.value & ((1 << 64) - 1), np.uint64)
    raise st.error(f"operand {o.text} is not a 64-bit source (64-bit literals and float constants are not modelled)")


def put(st, o, words, *, decided: bool = False):
    """Write a VGPR/AGPR destination (uint32 [n, width] or [width]) under EXEC, with no provenance.
    ``decided``: the instruction's provenance rule gave none; otherwise a result computed from VGPR
    bytes that carry identities is marked of unknown origin (origin.py), never silently cleared."""
    if o.kind != "reg" or o.file not in "va":
        raise st.error(f"destination {o.text} is not a vector register")
    words = np.asarray(words)
    if words.ndim == 1:
        words = words[None, :]
    if words.shape[0] != o.count:
        raise st.error(f"destination {o.text} has {o.count} registers, the result {words.shape[0]}")
    st.vwrite(o.file, o.first, words.astype(np.uint32, copy=False))
    if not decided and st.w.provenance and st.current is not None and st.taint_v is None \
            and sources_carry_identity(st, st.current):
        st.taint_v = np.ones(st.members, bool)      # no route for these bytes: of unknown origin (origin.py)
        try:
            st.mark_unknown(o.file, o.first, o.count)
        finally:
            st.taint_v = None


def put64(st, o, value):
    value = np.asarray(value, np.uint64)
    put(st, o, np.stack([(value & np.uint64(0xFFFFFFFF)).astype(np.uint32), (value >> np.uint64(32)).astype(np.uint32)]))


def sdst_mask(st, o, mask):
    """Write a lane mask to an SGPR-pair destination (VCC or s[n:n+1])."""
    if o.kind != "reg" or o.file != "s" or o.count != 2:
        raise st.error(f"destination {o.text} is not an SGPR pair")
    st.set_mask(o.first, mask)


def mask_src(st, o) -> np.ndarray:
    if o.kind != "reg" or o.file != "s" or o.count != 2:
        raise st.error(f"operand {o.text} is not an SGPR pair (a lane mask)")
    return st.mask_of(o.first)


def no_mods(st, d, allowed=()):
    extra = set(d.ops.mods) - set(allowed)
    if extra:
        raise st.error(f"unsupported modifier {', '.join(sorted(extra))} on {d.mnemonic}")


def count(st, d, n):
    if len(d.ops) != n:
        raise st.error(f"{d.mnemonic} takes {n} operands, got {len(d.ops)}")


def widen(st, v, signed: bool):
    """A 1- or 2-byte loaded value zero- (signed: sign-) extended to a 32-bit word, its bytes'
    provenance kept: the extension bytes carry none (zero) or the top byte's (sign copies)."""
    from ...machine.provenance import Prov
    from ...machine.vgpr import VGPRs
    k = v.nbytes
    words = v.val[0].astype(np.int64).astype(np.uint32)[None, :]
    prov = None
    if v.prov is not None:
        p = v.prov.per_byte()
        top = p.map(lambda a: a[k - 1:k]) if signed else None
        prov = Prov.concat([p] + [top] * (4 - k), [k] + [1] * (4 - k), st.w.pw)
    return VGPRs(st.w, words, "u32", prov, None if v.valid is None else
                 np.concatenate([v.valid] + [v.valid[k - 1:k]] * (4 - k)), regs=(0, 1))


from . import dequant, ds, mem, mfma, sop, vop  # noqa: E402,F401  (they register their operations)
