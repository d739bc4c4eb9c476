"""Global (FLAT global segment) and scalar memory per the CDNA3 ISA.

A global address is 64-bit: ``vaddr`` a VGPR pair with ``off``, or a 32-bit VGPR offset plus
``saddr`` an SGPR pair, plus the signed 13-bit ``offset``. The launch maps every buffer to a
range of addresses (launch.AddressSpace); the lanes of one instruction are split by the buffer
they address and each part goes through the back end's global_load / global_store (tags,
provenance, store checks, out-of-bounds faults). Scalar loads read the kernarg segment or a
buffer through the back end's scalar_load, one dword at a time.
"""
from __future__ import annotations

import numpy as np

from ..origin import columns_carry_identity
from . import moved_as, no_mods, op, widen
from ...machine.vgpr import VGPRs
from .. import globaladdr
from ..launch import BASE, SPAN
from ..state import EXEC
from ...machine import jit

U32, U64 = np.uint32, np.uint64
# mnemonic suffix -> (bytes, how a sub-dword load fills its register: None, "u", "s", "d16_hi")
LOADS = {"dword": (4, None), "dwordx2": (8, None), "dwordx3": (12, None), "dwordx4": (16, None),
         "ubyte": (1, "u"), "sbyte": (1, "s"), "ushort": (2, "u"), "sshort": (2, "s")}
STORES = {"dword": (4, 0), "dwordx2": (8, 0), "dwordx3": (12, 0), "dwordx4": (16, 0),
          "byte": (1, 0), "short": (2, 0), "byte_d16_hi": (1, 2), "short_d16_hi": (2, 2)}


def _checked_offset(st, d, vaddr, saddr) -> int:
    """The instruction's offset, once it and the address operands are what global_address takes."""
    off = int(d.ops.mods.get("offset", 0))
    if not -4096 <= off < 4096:
        raise st.error(f"offset:{off} outside the 13-bit signed range")
    if saddr.kind == "off":
        if vaddr.kind != "reg" or vaddr.file != "v" or vaddr.count != 2:
            raise st.error(f"vaddr {vaddr.text}: a VGPR pair expected with off")
    else:
        if saddr.kind != "reg" or saddr.file != "s" or saddr.count != 2:
            raise st.error(f"saddr {saddr.text}: an SGPR pair expected")
        if vaddr.kind != "reg" or vaddr.file != "v" or vaddr.count != 1:
            raise st.error(f"vaddr {vaddr.text}: one VGPR (an offset) expected with saddr")
    return off


def global_address(st, d, vaddr, saddr):
    off = _checked_offset(st, d, vaddr, saddr)
    if saddr.kind == "off":
        w = st.vwords("v", vaddr.first, 2).astype(U64)
        base = w[0] | (w[1] << U64(32))
    else:
        base = st.lanewise64(st.sread64(saddr.first)) + st.vwords("v", vaddr.first, 1)[0].astype(U64)
    return base + U64(off % (1 << 64))                  # wraps modulo 2^64


def _one_buffer(st, d, vaddr, saddr):
    """What ``st.memory.one_buffer(global_address(...), EXEC)`` gives, (buffer, byte offsets) or
    None, in one compiled pass (globaladdr.py) where numba runs at this width; None also where
    the numpy path must decide (an SGPR pair that holds EXEC's half)."""
    off = _checked_offset(st, d, vaddr, saddr)
    pair = saddr.kind == "off"
    if not COMPILED_ADDRESS or not jit.worth_starting(st.w.width) or not (pair or 0 <= saddr.first <= EXEC - 2):
        return None
    words = st.vwords("v", vaddr.first, 2 if pair else 1)
    space = st.memory
    offs = np.empty(st.w.width, np.int64)
    k = globaladdr.buffer_offsets(words[0], words[-1], pair, st.s, 0 if pair else saddr.first, st.lanes,
                                  U64(off % (1 << 64)), st.exec, BASE, SPAN, len(space.buffers), offs)
    return None if k < 0 else (space.buffers[k], offs)


def global_parts(st, addr, nbytes):
    """(buffer, per-lane byte offsets, lanes) for every buffer the active lanes address."""
    return st.memory.split(st, addr, st.exec, nbytes)


def with_exec(st, lanes, fn):
    saved = st.exec
    if np.array_equal(lanes, saved):                  # EXEC already: no narrowing to make and undo
        try:
            return fn()
        finally:
            if st.exec is not saved:
                st.set_exec(saved)
    saved = saved.copy()
    st.set_exec(lanes)
    try:
        return fn()
    finally:
        st.set_exec(saved)


def load_lanes(st, dst, buf, offs, lanes, nbytes: int, fill):
    """Load ``nbytes`` per lane from byte ``offs`` [width] of ``buf`` into ``dst``, in ``lanes``
    only (``fill``: LOADS' sub-dword rule), through the back end's global_load."""
    def one():
        o = VGPRs(st.w, offs[None, :].astype(np.int64), "i64", literal=True)
        if fill is None:            # in the buffer's own element type: per-element provenance
            t = buf.dtype if nbytes % buf.itemsize == 0 else "u8"
            t = "u32" if moved_as(st, nbytes) == "u32" else t
            st.vwrite_value(dst.file, dst.first, st.w.global_load(buf, o, nbytes, t))
        else:
            v = st.w.global_load(buf, o, nbytes, {1: "u8", 2: "u16"}[nbytes] if fill == "u"
                                 else {1: "i8", 2: "i16"}[nbytes])
            st.vwrite_value(dst.file, dst.first, widen(st, v, fill == "s"))
    with_exec(st, lanes, one)


# sub-dword loads into one half of a register, the other half kept: suffix -> (bytes, signed, high half)
D16 = {"short_d16": (2, False, False), "short_d16_hi": (2, False, True),
       "ubyte_d16": (1, False, False), "ubyte_d16_hi": (1, False, True),
       "sbyte_d16": (1, True, False), "sbyte_d16_hi": (1, True, True)}


def load_d16(st, dst, buf, offs, lanes, kind: str, zero: bool = False):
    """A d16 load in ``lanes``: 1 or 2 bytes (a byte zero- or sign-extended to 16 bits) into bits
    [15:0] or [31:16] of ``dst``; the other half keeps its bits, written bits and provenance
    (``zero``: out of range, the half reads 0 with no identity)."""
    from ...machine.provenance import Prov
    nbytes, signed, hi = D16[kind]

    def one():
        old = st.vread(dst.file, dst.first, 1, "u8")
        if zero:
            half = VGPRs(st.w, np.zeros((2, st.w.width), np.uint8), "u8", literal=True)
        else:
            o = VGPRs(st.w, offs[None, :].astype(np.int64), "i64", literal=True)
            v = st.w.global_load(buf, o, nbytes, "u16" if nbytes == 2 else "i8" if signed else "u8")
            half = widen(st, v, signed)                  # 4 bytes: the low two are the 16-bit result
        h = half.val[0].astype(np.uint32) & np.uint32(0xFFFF) if half.dtype == "u32" else \
            half.val.astype(np.uint32)[0] | (half.val.astype(np.uint32)[1] << np.uint32(8))
        words = st.vwords(dst.file, dst.first, 1)[0].astype(np.uint32)
        words = (words & np.uint32(0xFFFF)) | (h << np.uint32(16)) if hi else (words & np.uint32(0xFFFF0000)) | h
        hp = None if half.prov is None else half.prov.per_byte().map(lambda a: a[0:2])
        op_ = None if old.prov is None else old.prov.per_byte()
        keep = None if op_ is None else op_.map(lambda a: a[0:2] if hi else a[2:4])
        prov = Prov.concat([keep, hp] if hi else [hp, keep], [2, 2], st.w.pw)
        ow, hw = old.written(), half.written()[0:2]
        valid = np.concatenate([ow[0:2], hw] if hi else [hw, ow[2:4]])
        st.vwrite_value(dst.file, dst.first, VGPRs(st.w, words[None, :], "u32", prov, valid, regs=(0, 1)))
    with_exec(st, lanes, one)


def store_lanes(st, buf, offs, lanes, value, nbytes: int):
    """Store ``value``'s first ``nbytes`` per lane to byte ``offs`` [width] of ``buf``, in ``lanes``
    only, through the back end's global_store."""
    def one():
        o = VGPRs(st.w, offs[None, :].astype(np.int64), "i64", literal=True)
        st.w.global_store(buf, o, value, nbytes)
    with_exec(st, lanes, one)


def _load_words(st, dst, addr, nbytes: int) -> bool:
    """A load of whole dwords without provenance (``st.lean``) as words straight into ``dst``
    (Wave.global_load_words) where its active lanes address one buffer and it needs none of the
    general path's faults or findings; False, having done nothing, otherwise."""
    w = st.w
    one = st.memory.one_buffer(addr, st.exec, w.exec_full)
    if one is None:
        return False
    words = w.global_load_words(*one, nbytes)
    if words is None:
        return False
    st.vwrite(dst.file, dst.first, words)
    return True


def _store_words(st, data, addr, nbytes: int) -> bool:
    """A store of whole dwords without provenance (``st.lean``) from ``data``'s words
    (Wave.global_store_words) where its registers are written in every active lane and its active
    lanes address one buffer in bounds; False, having done nothing, otherwise."""
    if nbytes % 4 or not st.vall_written(data.file, data.first, data.count):
        return False
    w = st.w
    one = st.memory.one_buffer(addr, st.exec, w.exec_full)
    return one is not None and w.global_store_words(*one, st.vwords(data.file, data.first, data.count), nbytes)


def _global_load(kind):
    nbytes, fill = LOADS[kind]

    def run(st, d):
        no_mods(st, d, ("offset", "sc0", "sc1", "nt", "glc", "slc"))
        dst, vaddr, saddr = d.ops.positional
        if dst.kind != "reg" or dst.file not in "va" or dst.count != max(1, nbytes // 4):
            raise st.error(f"destination {dst.text} does not hold {nbytes} bytes")
        if fill is None and st.lean:
            one = _one_buffer(st, d, vaddr, saddr)
            words = None if one is None else st.w.global_load_words(*one, nbytes)
            if words is not None:
                st.vwrite(dst.file, dst.first, words)
                return
        addr = global_address(st, d, vaddr, saddr)
        if fill is None and st.lean and _load_words(st, dst, addr, nbytes):
            return
        for buf, offs, lanes in global_parts(st, addr, nbytes):
            load_lanes(st, dst, buf, offs, lanes, nbytes, fill)
    return run


def _global_store(kind):
    nbytes, byte0 = STORES[kind]

    def run(st, d):
        no_mods(st, d, ("offset", "sc0", "sc1", "nt", "glc", "slc"))
        vaddr, data, saddr = d.ops.positional
        if data.kind != "reg" or data.file not in "va" or data.count != max(1, nbytes // 4):
            raise st.error(f"data {data.text} does not hold {nbytes} bytes")
        if not byte0 and st.lean and not nbytes % 4 and st.vall_written(data.file, data.first, data.count):
            one = _one_buffer(st, d, vaddr, saddr)
            if one is not None and st.w.global_store_words(*one, st.vwords(data.file, data.first, data.count), nbytes):
                return
        addr = global_address(st, d, vaddr, saddr)
        if not byte0 and st.lean and _store_words(st, data, addr, nbytes):
            return
        value = st.vread(data.file, data.first, data.count, "u8" if byte0 or nbytes % 4 else moved_as(st, nbytes))
        if byte0:
            value = value.bytes(byte0, nbytes)
        for buf, offs, lanes in global_parts(st, addr, nbytes):
            store_lanes(st, buf, offs, lanes, value, nbytes)
    return run


def _global_load_d16(kind):
    def run(st, d):
        no_mods(st, d, ("offset", "sc0", "sc1", "nt", "glc", "slc"))
        dst, vaddr, saddr = d.ops.positional
        if dst.kind != "reg" or dst.file not in "va" or dst.count != 1:
            raise st.error(f"destination {dst.text}: one VGPR expected")
        addr = global_address(st, d, vaddr, saddr)
        for buf, offs, lanes in global_parts(st, addr, D16[kind][0]):
            load_d16(st, dst, buf, offs, lanes, kind)
    return run


for _k in LOADS:
    op(f"global_load_{_k}")(_global_load(_k))
for _k in D16:
    op(f"global_load_{_k}")(_global_load_d16(_k))


def flat(run):
    """A FLAT instruction as its global twin: a 64-bit VGPR address and no saddr. Only addresses
    inside the launch's buffers are modelled; one in the LDS or private aperture is in no buffer
    and faults, naming the lane and the address."""
    from dataclasses import replace
    from ..operands import Operand
    off = Operand("off", text="off")

    def wrapped(st, d):
        return run(st, replace(d, ops=replace(d.ops, positional=(*d.ops.positional, off))))
    return wrapped


for _k in STORES:
    op(f"global_store_{_k}")(_global_store(_k))
for _k in LOADS:
    op(f"flat_load_{_k}")(flat(_global_load(_k)))
for _k in D16:
    op(f"flat_load_{_k}")(flat(_global_load_d16(_k)))
for _k in STORES:
    op(f"flat_store_{_k}")(flat(_global_store(_k)))


# a global access's address and buffer in one compiled pass where numba runs (False: numpy, the A/B)
COMPILED_ADDRESS = True
# an s_load all executing members make at one address, without origin marks, written as one block
# of SGPRs (False: each SGPR through WaveState.swrite, and _tagged asked without provenance: the A/B)
LEAN_SLOAD = True
SMEM = {"s_load_dword": 1, "s_load_dwordx2": 2, "s_load_dwordx4": 4, "s_load_dwordx8": 8, "s_load_dwordx16": 16}


def _tagged(w, buf, rels: list, nbytes: int) -> np.ndarray:
    """Per start in ``rels``: whether bytes [rel, rel+nbytes) of a buffer carry identities (the
    SGPRs they are loaded into become of unknown origin: origin.py). One gather for every start:
    a batch's members read as many addresses as there are partitions."""
    if not w.provenance or (buf.prov is None and not buf.tag_fields):
        return np.zeros(len(rels), bool)
    addr = np.arange(nbytes)[:, None] + np.asarray(rels, np.int64)[None, :]     # [nbytes, starts]
    return columns_carry_identity(buf.load_prov(addr, 1, w.machine), len(rels))


def _s_load(n):
    def run(st, d):
        no_mods(st, d, ("glc", "offset"))
        dst, base, off = d.ops.positional
        if dst.kind != "reg" or dst.file != "s" or dst.count != n:
            raise st.error(f"destination {dst.text}: {n} SGPRs expected")
        if base.kind != "reg" or base.file != "s" or base.count != 2:
            raise st.error(f"base {base.text}: an SGPR pair expected")
        if off.kind == "int":
            o = U64(off.value)
        elif off.kind == "reg" and off.file == "s" and off.count == 1:
            o = st.sread(off.first)
        else:
            raise st.error(f"offset {off.text}: an immediate or an SGPR expected")
        o = o + U64(d.ops.mods.get("offset", 0))        # gfx9: an SGPR offset plus an immediate one
        addr = ((st.sread64(base.first) + o) & ~U64(3)).tolist()    # SMEM addresses are dword aligned (wraps mod 2^64)
        members = range(st.members) if st.act is None else np.nonzero(st.act)[0].tolist()
        groups = {}
        for m in members:                                # members reading the same address load once
            groups.setdefault(addr[m], []).append(m)
        w, live = st.w, st.w.live
        got = []                                         # (buffer, start, members, dwords) per group
        try:
            for a, ms in groups.items():
                if len(groups) > 1:                      # each group's loads are its members' events
                    w.live = ms
                buf, rel = st.memory.scalar(st, a, 4 * n)
                got.append((buf, rel, ms, w.scalar_load_dwords(buf, rel, n)))
        finally:
            w.live = live
        if LEAN_SLOAD and not w.provenance:              # no byte carries an identity (_tagged)
            st.taint_s = None
        else:
            tagged = np.zeros(st.members, bool)
            bufs = []                                    # each buffer once, by identity
            for g in got:
                if not any(g[0] is b for b in bufs):
                    bufs.append(g[0])
            for buf in bufs:
                mine = [g for g in got if g[0] is buf]
                for g, t in zip(mine, _tagged(w, buf, [g[1] for g in mine], 4 * n).tolist()):
                    tagged[g[2]] = t
            st.taint_s = tagged if tagged.any() else None    # an SGPR holds no provenance: origin.py
        if LEAN_SLOAD and len(got) == 1 and st.act is None and not st.any_unknown and st.taint_s is None and \
                dst.first + n <= EXEC:                   # swrite of one value for all, in brief
            st.s[:, dst.first:dst.first + n] = np.array(got[0][3], np.uint32)
            st.s_written[dst.first:dst.first + n] = True
            return
        out = np.zeros((n, st.members), U64)
        for _, _, ms, words in got:
            out[:, ms] = np.array(words, U64)[:, None]
        st.swrite(dst.first, *out)
    return run


for _n, _c in SMEM.items():
    op(_n)(_s_load(_c))


def _s_buffer_load(n):
    """s_buffer_load_dword*: n dwords at the V#'s base + offset (dword aligned); a dword whose
    bytes are not all below num_records reads 0 (the SMEM range check, as the vector one's)."""
    def run(st, d):
        no_mods(st, d, ("glc", "offset"))
        dst, rsrc, off = d.ops.positional
        if dst.kind != "reg" or dst.file != "s" or dst.count != n:
            raise st.error(f"destination {dst.text}: {n} SGPRs expected")
        if rsrc.kind != "reg" or rsrc.file != "s" or rsrc.count != 4 or rsrc.first % 4:
            raise st.error(f"resource {rsrc.text}: a buffer descriptor is 4 aligned SGPRs (s[4n:4n+3])")
        if off.kind == "int":
            o = np.full(st.members, off.value, U64)
        elif off.kind == "reg" and off.file == "s" and off.count == 1:
            o = st.sread(off.first)
        else:
            raise st.error(f"offset {off.text}: an immediate or an SGPR expected")
        o = (o + U64(d.ops.mods.get("offset", 0))) & ~U64(3)
        base = st.sread(rsrc.first) | ((st.sread(rsrc.first + 1) & U64(0xFFFF)) << U64(32))
        records = st.sread(rsrc.first + 2)
        members = np.nonzero(st.act)[0] if st.act is not None else np.arange(st.members)
        out = np.zeros((n, st.members), U64)
        tagged = np.zeros(st.members, bool)
        w, tr = st.w, st.w.machine.trace
        tr.muted += 1                                    # one event for the instruction, below
        try:
            for m in members.tolist():
                for k in range(n):
                    if int(o[m]) + 4 * k + 4 > int(records[m]):
                        continue                         # out of range: 0
                    buf, rel = st.memory.scalar(st, int(base[m] + o[m]) + 4 * k, 4)
                    out[k, m] = w.scalar_load(buf, rel, "u32", identities_marked=True)
                    tagged[m] |= bool(_tagged(w, buf, [rel], 4)[0])
        finally:
            tr.muted -= 1
        st.taint_s = tagged if tagged.any() else None    # an SGPR holds no provenance: origin.py
        st.swrite(dst.first, *out)
        w.event(d.ins.mnemonic)
    return run


for _n, _c in SMEM.items():
    op(_n.replace("s_load", "s_buffer_load"))(_s_buffer_load(_c))
