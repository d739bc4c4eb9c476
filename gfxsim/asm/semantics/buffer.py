"""MUBUF buffer loads and stores through a V# buffer resource descriptor, per the CDNA3 ISA.

The descriptor is four aligned SGPRs: word 0 and word 1[15:0] the 48-bit base address, word 1
[29:16] the stride, [31] swizzle_enable; word 2 num_records; word 3 the dst_sel/format word, of
which an untyped access reads only add_tid_enable ([23]: the lane id is added to the index). A
lane's address is base + soffset + offset + stride * index, with offset = the VGPR offset
(``offen``) + the instruction's 12-bit ``offset:``, index = the VGPR index (``idxen``; with both,
the index is the first VGPR of the pair) + the lane id under add_tid_enable.

Range checking (the hardware's, as gfx9 does it): a raw buffer (stride 0) checks the offset — not
soffset — in 4-byte pieces: a piece is in range when it ends at or below num_records; a
structured buffer (stride != 0) checks index < num_records. An out-of-range piece of a load reads
0, of a store is dropped. Swizzled descriptors are refused.

What is reported (``buffer-out-of-range``, one finding per instruction and reason, naming the
lanes and the first byte offset) — the hardware hides both, and only one of them is deliberate:

- *masked*: a lane whose offset has bit 31 set (offset >= 0x80000000) and is out of range. This is
  how Triton and composable_kernel mask a raw-buffer lane (num_records 0x7ffffffe or the tensor's
  size, the lane's offset moved to 0x80000000): reads 0, not reported.
- ``num_records``: any other out-of-range piece: the kernel indexed past the range its own
  descriptor declares; the hardware reads 0 (drops the store), and the finding says so.
- ``buffer``: a piece in range of num_records but outside the buffer the descriptor's base points
  into — the overrun the hardware lets through (a raw descriptor's num_records is often far larger
  than the tensor): it would read another allocation or unmapped memory. The simulator reads 0 and
  drops the store, and reports it. A base address in no buffer at all, with lanes in range, is a
  MemoryFault naming the lane and the address, as a global load's.

Every in-range piece goes through the back end's global_load / global_store (tags, provenance,
store checks), as the FLAT global instructions do (mem.py); the instruction is one trace event
however many pieces it took. Forms: loads of 1-16 bytes (sub-dword ones zero- or sign-extended),
the d16 loads into one half of a register, ``lds`` (buffer_load_dword to LDS at M0 + offset: +
4 * lane), stores of 1-16 bytes and their d16_hi forms; the atomics are atomic.py's.
"""
from __future__ import annotations

import numpy as np

from . import no_mods, op
from .mem import D16, LOADS, STORES, load_d16, load_lanes, store_lanes, with_exec
from ..launch import BASE, SPAN
from ..state import M0
from ...arch.kslots import format_token_set
from ...machine.errors import MemoryFault
from ...machine.vgpr import VGPRs

U32, U64 = np.uint32, np.uint64
MASKED = 0x80000000              # an offset at or past this, out of range: a deliberately masked lane
CACHE_BITS = ("glc", "slc", "sc0", "sc1", "nt")


def descriptor(st, o) -> dict:
    """The V# in SGPRs ``o`` (4 aligned): per-column base, stride, num_records, add_tid_enable
    (uint64 [width] each) — each member's own descriptor over its lanes."""
    if o.kind != "reg" or o.file != "s" or o.count != 4 or o.first % 4:
        raise st.error(f"resource {o.text}: a buffer descriptor is 4 aligned SGPRs (s[4n:4n+3])")
    w = [st.sread(o.first + k) for k in range(4)]
    act = st.act if st.act is not None else np.ones(st.members, bool)
    if ((w[1] >> U64(31)) & U64(1))[act].any():
        raise st.error(f"resource {o.text}: swizzle_enable is set (word 1 = 0x{int(w[1][act][0]):08x}); "
                       "swizzled buffers are not modelled")
    return {"base": st.lanewise64(w[0] | ((w[1] & U64(0xFFFF)) << U64(32))),
            "stride": st.lanewise64((w[1] >> U64(16)) & U64(0x3FFF)),
            "num_records": st.lanewise64(w[2]),
            "add_tid": st.lanewise64((w[3] >> U64(23)) & U64(1))}


def _soffset(st, o) -> np.ndarray:
    if o.kind == "reg" and o.file == "s" and o.count == 1:
        return st.lanewise64(st.sread(o.first))
    if o.kind == "int" and o.inline and o.value >= 0:
        return np.full(st.w.width, o.value, U64)
    raise st.error(f"soffset {o.text}: an SGPR or a non-negative inline constant expected")


def address(st, d, vaddr, rsrc, soffset) -> dict:
    """Per column: the 64-bit address, the offset and index the range check reads, the descriptor."""
    mods = d.ops.mods
    if mods.get("addr64") or mods.get("tfe"):
        what = next(m for m in ("addr64", "tfe") if mods.get(m))
        raise st.error(f"{d.mnemonic} with {what} is not modelled")
    inst = int(mods.get("offset", 0))
    if not 0 <= inst < 4096:
        raise st.error(f"offset:{inst} outside the 12-bit unsigned range")
    offen, idxen = bool(mods.get("offen")), bool(mods.get("idxen"))
    n = int(offen) + int(idxen)
    if n == 0:
        if vaddr.kind != "off":
            raise st.error(f"vaddr {vaddr.text}: 'off' expected without offen or idxen")
        words = None
    else:
        if vaddr.kind != "reg" or vaddr.file != "v" or vaddr.count != n:
            raise st.error(f"vaddr {vaddr.text}: {n} VGPR(s) expected with " + " and ".join(
                m for m, on in (("idxen", idxen), ("offen", offen)) if on))
        words = st.vwords("v", vaddr.first, n).astype(U64)
    desc = descriptor(st, rsrc)
    width = st.w.width
    index = words[0] if idxen else np.zeros(width, U64)
    index = index + desc["add_tid"] * (np.arange(width, dtype=U64) % U64(st.lanes))
    offset = (words[-1] if offen else np.zeros(width, U64)) + U64(inst)
    addr = desc["base"] + _soffset(st, soffset) + offset + desc["stride"] * index
    return {"addr": addr, "offset": offset, "index": index, **desc}


def pieces(nbytes: int) -> list[tuple[int, int]]:
    """(byte position, size) of the 4-byte pieces the range check takes an access in."""
    return [(p, min(4, nbytes - p)) for p in range(0, nbytes, 4)]


def classify(st, a: dict, nbytes: int, what: str):
    """The buffer the descriptor's base points into, the byte offsets into it, and per piece
    [pieces, width] the active lanes that access it (``good``) and those out of num_records,
    masked, and past the buffer. A base in no buffer with lanes in range is a MemoryFault."""
    space = st.memory
    act = st.exec
    ps = pieces(nbytes)
    raw = a["stride"] == 0
    in_range = np.stack([np.where(raw, a["offset"] + U64(p + s) <= a["num_records"], a["index"] < a["num_records"])
                         for p, s in ps])
    out = act[None, :] & ~in_range
    masked = out & (raw & (a["offset"] >= U64(MASKED)))[None, :]
    above = a["base"] >= U64(BASE)
    bufs = np.where(above, (a["base"] - np.where(above, U64(BASE), U64(0))) // U64(SPAN), U64(1 << 62)).astype(np.int64)
    known = act & (bufs < len(space.buffers))
    lost = act & ~known & in_range.any(axis=0)
    if lost.any():
        lane = int(np.argmax(lost))
        raise st.error(f"{what}: lane {lane % st.lanes}'s descriptor base 0x{int(a['base'][lane]):x} is in no buffer "
                       f"({space.describe()})", cls=MemoryFault, lane=lane, address=int(a["addr"][lane]))
    parts = []
    for k in sorted(set(bufs[act & known].tolist())):
        buf = space.buffers[k]
        lanes = act & known & (bufs == k)
        rel = (a["addr"].astype(np.int64) - np.int64(space.base[buf.name]))
        inside = np.stack([(rel + p >= 0) & (rel + p + s <= buf.nbytes) for p, s in ps])
        good = lanes[None, :] & in_range & inside
        past = lanes[None, :] & in_range & ~inside
        parts.append((buf, np.where(lanes, rel, 0), lanes, good, past))
    return parts, out & ~masked, masked


def report(st, d, kind: str, reason: str, bad, a, buf_name: str, nbytes: int, buf_bytes: int):
    """One buffer-out-of-range finding per member with lanes in ``bad`` [pieces, width]."""
    cols = bad.any(axis=0)
    for m in np.unique(np.nonzero(cols)[0] // st.lanes).tolist():
        sl = slice(m * st.lanes, (m + 1) * st.lanes)
        lanes = np.nonzero(cols[sl])[0].tolist()
        first = m * st.lanes + lanes[0]
        off = int(a["offset"][first]) + 4 * int(np.argmax(bad[:, first]))
        num = int(a["num_records"][first])
        if reason == "num_records":
            why = (f"past num_records {num} of its descriptor (the hardware {'reads 0' if kind == 'load' else 'drops it'}"
                   f"; a masked lane's offset would be at or past 0x{MASKED:x})")
        else:
            why = (f"inside num_records {num} but past the end of {buf_name!r} ({buf_bytes} B): the hardware would "
                   f"{'read' if kind == 'load' else 'write'} another allocation; the simulator "
                   f"{'reads 0' if kind == 'load' else 'drops it'}")
        st.w.finding("buffer-out-of-range", f"{d.ins.mnemonic}: lanes {format_token_set(lanes)} access byte offset {off} "
                     f"{why}", lane=first, address=off, buffer=buf_name, reason=reason, access=kind,
                     lanes=lanes, offset=off, num_records=num, nbytes=nbytes)


def check(st, d, kind, a, parts, oob, nbytes):
    name = parts[0][0].name if parts else "(no buffer: the base is in none)"
    size = parts[0][0].nbytes if parts else 0
    if oob.any():
        report(st, d, kind, "num_records", oob, a, name, nbytes, size)
    for buf, _, _, _, past in parts:
        if past.any():
            report(st, d, kind, "buffer", past, a, buf.name, nbytes, buf.nbytes)


def one_event(run):
    """Run a buffer instruction's back-end accesses (none, one, or one per range-checked piece)
    muted, then record the instruction as one event: its VGPR operands, the buffer and the byte
    offsets — so every instruction is one event, an entirely out-of-range one too."""
    def wrapped(st, d):
        tr = st.w.machine.trace
        tr.muted += 1
        try:
            ins, outs, details = run(st, d)
        finally:
            tr.muted -= 1
        st.w.event(d.ins.mnemonic, ins=ins, outs=outs, **details)
    return wrapped


def _details(a, parts) -> dict:
    if not parts:
        return {"buffer": None}
    buf, offs = parts[0][0], parts[0][1]
    return {"buffer": buf.name, "address": offs.astype(np.int64)}


def _to_lds(st, d):
    """buffer_load_dword ... lds: each lane's dword goes to LDS byte M0 + offset: + 4 * lane
    instead of a VGPR (out of range: 0 is written)."""
    vaddr, rsrc, soff = d.ops.positional
    if st.lds is None:
        raise st.error("buffer load to LDS in a kernel whose descriptor allocates no LDS (group segment 0)")
    a = address(st, d, vaddr, rsrc, soff)
    parts, oob, _ = classify(st, a, 4, d.ins.mnemonic)
    check(st, d, "load", a, parts, oob, 4)
    lane = np.arange(st.w.width, dtype=np.int64) % st.lanes
    dest = VGPRs(st.w, (st.lanewise64(st.sread(M0)).astype(np.int64) + int(d.ops.mods.get("offset", 0))
                        + 4 * lane)[None, :], "i64", literal=True)
    done = np.zeros(st.w.width, bool)
    for buf, offs, lanes, good, _ in parts:
        g = good[0]
        if g.any():
            o = VGPRs(st.w, offs[None, :].astype(np.int64), "i64", literal=True)
            t = buf.dtype if 4 % buf.itemsize == 0 else "u8"
            with_exec(st, g, lambda: st.w.lds_store(st.lds, dest, st.w.global_load(buf, o, 4, t), 4))
            done |= g
    zero = st.exec & ~done
    if zero.any():
        with_exec(st, zero, lambda: st.w.lds_store(st.lds, dest, VGPRs(st.w, np.zeros((1, st.w.width), U32), "u32",
                                                                       literal=True), 4))
    return [], [], _details(a, parts)


def _buffer_load(kind):
    nbytes, fill = LOADS[kind]

    @one_event
    def run(st, d):
        if d.ops.mods.get("lds"):
            if kind != "dword":
                raise st.error(f"{d.mnemonic} lds: only buffer_load_dword writes LDS here (a sub-dword LDS "
                               "load's layout is not modelled)")
            no_mods(st, d, ("offset", "offen", "idxen", "lds", *CACHE_BITS))
            return _to_lds(st, d)
        no_mods(st, d, ("offset", "offen", "idxen", *CACHE_BITS))
        dst, vaddr, rsrc, soff = d.ops.positional
        if dst.kind != "reg" or dst.file not in "va" or dst.count != max(1, nbytes // 4):
            raise st.error(f"destination {dst.text} does not hold {nbytes} bytes")
        a = address(st, d, vaddr, rsrc, soff)
        parts, oob, _ = classify(st, a, nbytes, d.ins.mnemonic)
        check(st, d, "load", a, parts, oob, nbytes)
        ps = pieces(nbytes)
        loaded = np.zeros((len(ps), st.w.width), bool)
        for buf, offs, lanes, good, _ in parts:
            whole = good.all(axis=0) & lanes
            if whole.any():
                load_lanes(st, dst, buf, offs, whole, nbytes, fill)
                loaded[:, whole] = True
            for k, (p, s) in enumerate(ps):          # lanes with some pieces in range: those pieces alone
                some = good[k] & ~whole
                if some.any():
                    load_lanes(st, _reg(dst, p), buf, offs + p, some, s, None)
                    loaded[k, some] = True
        zero = st.exec[None, :] & ~loaded
        for k in range(len(ps)):                      # out-of-range pieces read 0
            if zero[k].any():
                with_exec(st, zero[k], lambda k=k: st.vwrite(dst.file, dst.first + k, np.zeros(st.w.width, U32)))
        return [], [st.vread(dst.file, dst.first, dst.count)], _details(a, parts)
    return run


def _reg(o, byte):
    from dataclasses import replace
    return replace(o, first=o.first + byte // 4, count=1)


def _buffer_store(kind):
    nbytes, byte0 = STORES[kind]

    @one_event
    def run(st, d):
        no_mods(st, d, ("offset", "offen", "idxen", *CACHE_BITS))
        data, vaddr, rsrc, soff = d.ops.positional
        if data.kind != "reg" or data.file not in "va" or data.count != max(1, nbytes // 4):
            raise st.error(f"data {data.text} does not hold {nbytes} bytes")
        a = address(st, d, vaddr, rsrc, soff)
        parts, oob, _ = classify(st, a, nbytes, d.ins.mnemonic)
        check(st, d, "store", a, parts, oob, nbytes)
        value = st.vread(data.file, data.first, data.count, "u8")
        if byte0:
            value = value.bytes(byte0, nbytes)
        ps = pieces(nbytes)
        for buf, offs, lanes, good, _ in parts:
            whole = good.all(axis=0) & lanes
            if whole.any():
                store_lanes(st, buf, offs, whole, value, nbytes)
            for k, (p, s) in enumerate(ps):          # the in-range pieces of the other lanes
                some = good[k] & ~whole
                if some.any():
                    store_lanes(st, buf, offs + p, some, value.bytes(p, s), s)
        return [value], [], _details(a, parts)
    return run


def _buffer_load_d16(kind):
    nbytes = D16[kind][0]

    @one_event
    def run(st, d):
        no_mods(st, d, ("offset", "offen", "idxen", *CACHE_BITS))
        dst, vaddr, rsrc, soff = d.ops.positional
        if dst.kind != "reg" or dst.file not in "va" or dst.count != 1:
            raise st.error(f"destination {dst.text}: one VGPR expected")
        a = address(st, d, vaddr, rsrc, soff)
        parts, oob, _ = classify(st, a, nbytes, d.ins.mnemonic)
        check(st, d, "load", a, parts, oob, nbytes)
        loaded = np.zeros(st.w.width, bool)
        for buf, offs, lanes, good, _ in parts:
            if good[0].any():
                load_d16(st, dst, buf, offs, good[0], kind)
                loaded |= good[0]
        zero = st.exec & ~loaded                    # out of range: the half reads 0, the other is kept
        if zero.any():
            load_d16(st, dst, None, None, zero, kind, zero=True)
        return [], [st.vread(dst.file, dst.first, 1)], _details(a, parts)
    return run


for _k in LOADS:
    op(f"buffer_load_{_k}")(_buffer_load(_k))
for _k in D16:
    op(f"buffer_load_{_k}")(_buffer_load_d16(_k))
for _k in STORES:
    op(f"buffer_store_{_k}")(_buffer_store(_k))
