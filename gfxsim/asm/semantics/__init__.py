"""Instruction semantics of the asm front end: one function per operation, registered by its
base mnemonic (the ``_e32``/``_e64``/``_sdwa`` encoding suffix stripped; ``Decoded.enc`` keeps
it). A function takes the wave state and the decoded instruction and returns the next pc, or
None for the next instruction. One module per family: sop (scalar ALU and program control),
vop (vector ALU, its numbers from the ISA table gfxsim/isa; vop16 its 16-bit halves and packs,
vop64 binary64 on register pairs, cvt8 the fp8/bf8 conversions), dpp (cross-lane source reads),
ds (LDS), mem (global and scalar memory), buffer (MUBUF), atomic, mfma (matrix), scratch (the private
segment: scratch_* and MUBUF on the private segment buffer), lanes (v_readlane/v_writelane),
flat (generic addresses: global, LDS or private memory by aperture).

Operand access shared by the families is here: ``u32`` reads a 32-bit source per lane (inline
constants, literals, SGPRs broadcast over each member's lanes, VGPRs), ``f32`` the same with the abs/neg modifiers
applied, ``u64`` a 64-bit source, ``f64`` a binary64 one, ``vsrc`` a vector source as a back-end
value (provenance with it); ``put`` writes a vector destination under EXEC. A DPP instruction's src0
(``Operand.dpp``) is read from its source lanes by all of them (dpp.py).
"""
from __future__ import annotations

import struct

import numpy as np
from ...errors import ArgumentError
from ..origin import sources_carry_identity
from ..state import EXEC, N_SGPR

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
    if o.kind == "reloc":
        from .sop import reloc32
        return reloc32(st, o)
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
        if o.dpp:
            return st.dpp.take("words")[0]              # src0 of a DPP instruction, from its source lanes
        if o.file == "s":
            return st.lanewise(st.sread(o.first))       # each member's SGPR over its lanes
        return st.vwords(o.file, o.first, 1)[0]
    if o.kind == "scc":
        return st.lanewise(st.scc)
    return np.full(w, const32(st, o), np.uint32)


def f32(st, o) -> np.ndarray:
    """A 32-bit float source with |x| then -x applied (on the sign bit, as the VOP3 modifiers)."""
    return _float_mods(u32(st, o, mods_ok=True), o)


def _float_mods(words: np.ndarray, o) -> np.ndarray:
    return float_mods(words, o.abs, o.neg)


def float_mods(words: np.ndarray, abs_: bool, neg: bool) -> np.ndarray:
    """32-bit words as floats with |x| then -x applied on the sign bit (a copy)."""
    b = words.copy()
    if abs_:
        b &= np.uint32(0x7FFFFFFF)
    if neg:
        b ^= np.uint32(0x80000000)
    return b.view(np.float32)


def source(o, t: str = "u32"):
    """The form of a 32-bit source ``reader(o, t)`` reads, decided once: ("v"|"a", register),
    ("s", register), ("sread", an EXEC half: read from the wave's mask), ("scc",) or ("const",
    word), each with the float modifiers (abs, neg) an "f32" read applies; None where ``reader``
    gives None. A block's generated code (blocks.py) reads the form as ``reader``'s function does,
    through the same WaveState arrays."""
    if o.dpp or o.sext or ((o.neg or o.abs) and t != "f32"):
        return None
    if o.kind == "reg" and o.count == 1:
        if o.file not in ("v", "a", "s") or not 0 <= o.first < (N_SGPR if o.file == "s" else 1 << 16):
            return None
        form = ("sread", o.first) if o.file == "s" and o.first in (EXEC, EXEC + 1) else (o.file, o.first)
    elif o.kind == "scc":
        form = ("scc",)
    elif o.kind in ("int", "float"):
        form = ("const", const32(None, o))
    else:
        return None
    return form, (bool(o.abs), bool(o.neg))


def reader(o, t: str = "u32"):
    """The read of a 32-bit source decided once for a translated step (translate.py): a function of
    the wave state giving what ``u32`` (t "u32"), ``u32`` as int32 ("i32") or ``f32`` ("f32")
    gives, through the same WaveState reads; None where the operand needs the generic path (a DPP
    or SDWA source, a modifier the read refuses, a register range, a relocation)."""
    if o.dpp or o.sext or ((o.neg or o.abs) and t != "f32"):
        return None
    if o.kind == "reg" and o.count == 1:
        f, i = o.file, o.first
        if f == "s":
            def get(st):
                return st.lanewise(st.sread(i))     # each member's SGPR over its lanes
        else:
            def get(st):
                return st.vwords(f, i, 1)[0]
    elif o.kind == "scc":
        def get(st):
            return st.lanewise(st.scc)
    elif o.kind in ("int", "float"):
        c = const32(None, o)
        made = {}                           # per wave width: one read-only array, not a new one per read

        def get(st):
            a = made.get(st.w.width)
            if a is None:
                a = made[st.w.width] = np.full(st.w.width, c, np.uint32)
                a.flags.writeable = False
            return a
    else:
        return None
    if t == "f32":
        if not (o.neg or o.abs):         # the words as floats, not a copy (as the u32 reads give them)
            return lambda st: get(st).view(np.float32)
        return lambda st: _float_mods(get(st), o)
    if t == "i32":
        return lambda st: get(st).view(np.int32)
    return get


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
        ww = (st.dpp.take("words") if o.dpp else st.vwords(o.file, o.first, 2)).astype(np.uint64)
        return ww[0] | (ww[1] << np.uint64(32))
    if o.kind == "int" and (o.inline or 0 <= o.value < (1 << 31)):     # see sop.LITERAL64
        return np.full(w, o.value & ((1 << 64) - 1), np.uint64)
    raise st.error(f"operand {o.text} is not a 64-bit source (64-bit literals and float constants are not modelled)")


def mask_source(o):
    """The form of a lane-mask source held in an SGPR pair (``st.mask_of``), as ``source`` gives
    forms; None where ``mask_src`` would refuse it."""
    if o.kind != "reg" or o.file != "s" or o.count != 2 or not 0 <= o.first <= N_SGPR - 2:
        return None
    return ("mask", o.first), (False, False)


def source64(o):
    """The form of a 64-bit source ``reader64(o)`` reads, as ``source`` gives forms: ("v"|"a",
    first register), ("sread", an SGPR pair), ("const", value); None where ``reader64`` gives None."""
    if o.neg or o.abs or o.sext or o.dpp:
        return None
    if o.kind == "reg" and o.count == 2:
        if o.file == "s":
            form = ("sread", o.first)
        elif o.file in ("v", "a") and o.first >= 0:
            form = (o.file, o.first)
        else:
            return None
    elif o.kind == "int" and (o.inline or 0 <= o.value < (1 << 31)):
        form = ("const", o.value & ((1 << 64) - 1))
    else:
        return None
    return form, (False, False)


class Inline:
    """An instruction's work without provenance (WaveState.lean) in a form a block writes into its
    own source (blocks.py), so the block neither calls a step nor dispatches per operand: ``srcs``
    the sources' forms (``source``), each read as ``reader`` reads it; ``call`` a function of
    their arrays giving the result words (uint32 [count, width] or [width]); ``dst`` (file, first
    register, count) written under EXEC as WaveState.vwrite writes words where no register holds
    provenance (written bits set, fresh marks cleared); ``keep`` (dequant.KEEPS): a function of
    the wave state giving the lanes whose result stays a fresh matrix result (read before the write,
    set after it, as the prepared step does). A semantics function's ``inline(decoded)`` gives it,
    or None where the instruction needs its step; the test holding each to its function is
    tests/gfxsim/asm/test_asm_inline.py.

    A source's type is "u32", "i32", "f32", "u64" (a 64-bit vector source: ``source64``), "pair"
    (two registers' words [2, width], or an SGPR pair's over the lanes), "mask" (an
    SGPR pair's lanes, ``mask_source``) or, for a scalar instruction (dst file "s"), "s32"/"s64" (one
    number per member, as ``sop.s_reader`` reads it) and "scc" (SCC itself); a scalar ``call`` gives
    (result, SCC or None), written as WaveState.swrite/swrite64 and set_scc write them. ``copy``:
    the instruction is a register copy (WaveState.vcopy) of ``srcs[0]``'s registers; no call. A
    ``dst`` ("mask", first, exec too) takes the call's lanes under EXEC as a compare writes them
    (``st.set_mask``, and ``st.set_exec`` where exec too is true)."""
    __slots__ = ("srcs", "call", "dst", "keep", "copy")

    def __init__(self, srcs, call, dst, keep=None, copy=False):
        self.srcs, self.call, self.dst, self.keep, self.copy = tuple(srcs), call, dst, keep, copy


def reader64(o):
    """The read of a 64-bit source decided once for a translated step: what ``u64`` gives, through
    the same WaveState reads; None where the operand needs the generic path (which names what is
    wrong with it)."""
    if o.neg or o.abs or o.sext or o.dpp:
        return None
    if o.kind == "reg" and o.count == 2:
        f, i = o.file, o.first
        if f == "s":
            return lambda st: st.lanewise64(st.sread64(i))
        # the pair's words [2, width] as one uint64 per lane (little-endian: low word first)
        return lambda st: st.vwords(f, i, 2).T.copy().view(np.uint64)[:, 0]
    if o.kind == "int" and (o.inline or 0 <= o.value < (1 << 31)):
        c = o.value & ((1 << 64) - 1)
        return lambda st: np.full(st.w.width, c, np.uint64)
    return None


def words64(r: np.ndarray) -> np.ndarray:
    """uint64 [width] -> its low and high words [2, width] (a view), as put64 writes them."""
    return np.ascontiguousarray(r, np.uint64).view(np.uint32).reshape(-1, 2).T


INV_2PI_F64 = 0.15915494309189532          # the 1/(2*pi) inline constant, as binary64
SIGN64 = np.uint64(1 << 63)


def f64_bits(st, o) -> np.ndarray:
    """A binary64 source per lane: uint64 [width], modifiers applied."""
    w = st.w.width
    if o.sext:
        raise st.error(f"sext({o.text}) on a binary64 source")
    if o.kind == "reg":
        if o.count != 2:
            raise st.error(f"operand {o.text}: a 64-bit register pair expected")
        if o.file == "s":
            b = st.lanewise64(st.sread64(o.first)).astype(np.uint64)
        else:
            ww = st.vwords(o.file, o.first, 2).astype(np.uint64)
            b = ww[0] | (ww[1] << np.uint64(32))
    elif o.kind == "float":
        v = INV_2PI_F64 if abs(o.value - 0.15915494) < 1e-7 else o.value
        b = np.full(w, np.float64(v).view(np.uint64), np.uint64)
    elif o.kind == "int" and o.inline:
        b = np.full(w, o.value & ((1 << 64) - 1), np.uint64)
    elif o.kind == "int":
        b = np.full(w, (o.value & 0xFFFFFFFF) << 32, np.uint64)     # a literal is the high word
    else:
        raise st.error(f"operand {o.text} is not a binary64 source")
    b = b.copy()
    if o.abs:
        b &= ~SIGN64
    if o.neg:
        b ^= SIGN64
    return b


def f64(st, o) -> np.ndarray:
    return f64_bits(st, o).view(np.float64)


def vsrc(st, o, n: int = 1):
    """A VGPR/AGPR source of ``n`` registers as a back-end value (its bytes' provenance and written
    bits); a DPP instruction's src0 as its lanes read it."""
    if o.dpp:
        return st.dpp.take("value")
    return st.vread(o.file, o.first, n)


def vdst_ok(o, n: int = 1) -> bool:
    """Whether ``o`` is a destination ``put`` takes without an error: ``n`` VGPRs or AGPRs."""
    return o.kind == "reg" and o.file in ("v", "a") and o.count == n


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


def put64(st, o, value, *, decided: bool = False):
    value = np.asarray(value, np.uint64)
    put(st, o, np.stack([(value & np.uint64(0xFFFFFFFF)).astype(np.uint32), (value >> np.uint64(32)).astype(np.uint32)]),
        decided=decided)


def sdst_mask(st, o, mask):
    """Write a lane mask to an SGPR-pair destination (VCC or s[n:n+1])."""
    if o.kind != "reg" or o.file != "s" or o.count != 2:
        raise st.error(f"destination {o.text} is not an SGPR pair")
    st.set_mask(o.first, mask)


def mask_src(st, o) -> np.ndarray:
    if o.kind != "reg" or o.file != "s" or o.count != 2:
        raise st.error(f"operand {o.text} is not an SGPR pair (a lane mask)")
    return st.mask_of(o.first)


DWORD_MOVES = True          # False: every memory instruction's data moved as bytes (the tests comparing both)


def moved_as(st, nbytes: int) -> str:
    """The type a memory instruction moves ``nbytes`` of register data as: dwords where that leaves
    the same register bits and written bits as bytes do (a whole number of dwords, and neither
    provenance, kept per element of the type, nor a trace, whose operands show it), which spares
    each side's byte<->dword conversions; else bytes."""
    m = st.w.machine
    return "u32" if DWORD_MOVES and nbytes % 4 == 0 and not m.provenance and not m.trace.enabled else "u8"


def no_mods(st, d, allowed=()):
    for k in d.ops.mods:                 # most have none or one, allowed: no sets made per instruction
        if k not in allowed:
            extra = set(d.ops.mods) - set(allowed)
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


from . import atomic, buffer, cvt8, dequant, dpp, ds, lanes, mem, mfma, mode, sop, vop, vop16, vop64  # noqa: E402,F401  (they register their operations)
# last: the private segment's MUBUF forms wrap the global MUBUF semantics registered above, and the
# FLAT forms (global, LDS or private by aperture) replace global-only ones
from . import flat, scratch  # noqa: E402,F401

