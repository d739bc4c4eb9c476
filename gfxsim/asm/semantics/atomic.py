"""Atomics (FLAT global ``global_atomic_*``, ``flat_atomic_*``, MUBUF ``buffer_atomic_*``, and the LDS
``ds_*`` ones below) per the CDNA3 ISA: a read-modify-write of 4 bytes (8 for the ``_x2`` and f64 forms) per lane; with glc
(gfx90a) or sc0 (gfx940+) the instruction returns the value memory held before its operation.

Order: the lanes of one instruction apply their operations one after another in lane order (a
batch's members in member order), so lanes that hit the same address see each other's results —
the returned values are those of that order (the hardware serialises same-address atomics in an
order it does not document; lane order is the deterministic choice). Workgroups order their
atomics as the launch schedules them.

Numbers come from the ISA table where an entry fits (v_add_u32, v_max_i32, v_add_f32, v_add_f16,
...: the same rounding, NaN and denormal rules); 64-bit integers wrap, f64 adds round to nearest
even (numpy's binary64).

Provenance: a returned value carries what the memory held — the bytes' own provenance when no
earlier lane of the instruction changed them, the data of the lane whose swap put it there, or
none after an arithmetic update. The memory keeps its provenance where nothing changed it (a
failed cmpswap, a max that kept the old value), takes the data's where a swap, cmpswap or an
extremum put that lane's data there, and has none after add/sub/and/or/xor/inc/dec (an arithmetic
result carries no identity). One event per instruction.

LDS atomics (``ds_add_u32``, ``ds_add_rtn_u32``, ``ds_cmpst_rtn_b32``, ...) are the same operations
on the workgroup's LDS, through lds_load/lds_store (bounds, alignment, bank conflicts, provenance).
Atomics do not race with each other, so their accesses are not entered in the LDS race tracker:
a plain access that races with an atomic one is not reported.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import no_mods, op
from .buffer import CACHE_BITS, address, check, classify
from .mem import flat, global_address, global_parts, store_lanes, with_exec
from ...isa import entry
from ...machine.vgpr import VGPRs

U32, U64 = np.uint32, np.uint64
ORIGINAL, ARITH = -1, -2                      # where an address's current value came from (else a column)


def _isa(mnemonic, t):
    fn = entry(mnemonic).fn
    return lambda a, b: np.asarray(fn(a.view(t), b.view(t))).astype(t).view(a.dtype)


def _halves(fn, t):
    """A packed 16-bit op on each half of a dword."""
    def run(a, b):
        lo = fn((a & U32(0xFFFF)).astype(np.uint16).view(t), (b & U32(0xFFFF)).astype(np.uint16).view(t))
        hi = fn((a >> U32(16)).astype(np.uint16).view(t), (b >> U32(16)).astype(np.uint16).view(t))
        return np.asarray(lo).view(np.uint16).astype(U32) | (np.asarray(hi).view(np.uint16).astype(U32) << U32(16))
    return run


def _bf16_add(a, b):
    """bf16 + bf16 through binary32, rounded to nearest even back to bf16 (a NaN stays quiet)."""
    f = (a.astype(U32) << U32(16)).view(np.float32) + (b.astype(U32) << U32(16)).view(np.float32)
    bits = f.view(U32)
    r = (bits + U32(0x7FFF) + ((bits >> U32(16)) & U32(1))) >> U32(16)
    r = np.where(np.isnan(f), (bits >> U32(16)) | U32(0x40), r)
    return r.astype(np.uint16)


def _pk_bf16(a, b):
    lo = _bf16_add((a & U32(0xFFFF)).astype(np.uint16), (b & U32(0xFFFF)).astype(np.uint16))
    hi = _bf16_add((a >> U32(16)).astype(np.uint16), (b >> U32(16)).astype(np.uint16))
    return lo.astype(U32) | (hi.astype(U32) << U32(16))


def _f64(fn):
    return lambda a, b: fn(a.view(np.float64), b.view(np.float64)).astype(np.float64).view(U64)


def _fminmax64(is_max):
    def run(a, b):
        out = np.fmax(a, b) if is_max else np.fmin(a, b)           # a NaN gives the other operand
        zero = (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))
        return np.where(zero, 0.0 if is_max else -0.0, out)
    return run


def _inc(a, b):
    return np.where(a >= b, a.dtype.type(0), a + a.dtype.type(1))


def _dec(a, b):
    return np.where((a == 0) | (a > b), b, a - a.dtype.type(1))


def _int64(fn):
    return lambda a, b: fn(a.view(np.int64), b.view(np.int64)).view(U64)


# name -> (bytes, rule, fn(old, data) -> new): rule "arith" (a new number), "pick" (one of the two
# operands), "swap", "cmpswap" (fn unused)
OPS = {
    "add": (4, "arith", _isa("v_add_u32", U32)), "sub": (4, "arith", _isa("v_sub_u32", U32)),
    "smax": (4, "pick", _isa("v_max_i32", np.int32)), "umax": (4, "pick", _isa("v_max_u32", U32)),
    "smin": (4, "pick", _isa("v_min_i32", np.int32)), "umin": (4, "pick", _isa("v_min_u32", U32)),
    "and": (4, "arith", _isa("v_and_b32", U32)), "or": (4, "arith", _isa("v_or_b32", U32)),
    "xor": (4, "arith", _isa("v_xor_b32", U32)), "inc": (4, "arith", _inc), "dec": (4, "arith", _dec),
    "swap": (4, "swap", None), "cmpswap": (4, "cmpswap", None),
    "add_f32": (4, "arith", _isa("v_add_f32", np.float32)),
    "pk_add_f16": (4, "arith", _halves(entry("v_add_f16").fn, np.float16)),
    "pk_add_bf16": (4, "arith", _pk_bf16),
    "add_x2": (8, "arith", lambda a, b: a + b), "sub_x2": (8, "arith", lambda a, b: a - b),
    "smax_x2": (8, "pick", _int64(np.maximum)), "umax_x2": (8, "pick", np.maximum),
    "smin_x2": (8, "pick", _int64(np.minimum)), "umin_x2": (8, "pick", np.minimum),
    "and_x2": (8, "arith", np.bitwise_and), "or_x2": (8, "arith", np.bitwise_or),
    "xor_x2": (8, "arith", np.bitwise_xor), "inc_x2": (8, "arith", _inc), "dec_x2": (8, "arith", _dec),
    "swap_x2": (8, "swap", None), "cmpswap_x2": (8, "cmpswap", None),
    "add_f64": (8, "arith", _f64(np.add)), "max_f64": (8, "pick", _f64(_fminmax64(True))),
    "min_f64": (8, "pick", _f64(_fminmax64(False))),
}


def _words(st, o, nbytes):
    """A data operand's numbers: uint32 or uint64 [width]."""
    w = st.vwords(o.file, o.first, nbytes // 4)
    if nbytes == 4:
        return w[0].copy()
    return w[0].astype(U64) | (w[1].astype(U64) << U64(32))


def rmw(st, kind: str, keys, lanes, data_o, cmp_o, dst_o, load, store):
    """One atomic instruction's read-modify-write in ``lanes`` (their addresses ``keys`` [width]:
    equal keys are one location) through ``load(lanes)`` (a back-end load of the old bytes:
    bounds, alignment, provenance, uninitialized bytes) and ``store(mask, value)``."""
    nbytes, rule, fn = OPS[kind]
    w = st.w
    cols = np.nonzero(lanes)[0]
    before = load(lanes)
    ut = U32 if nbytes == 4 else U64
    raw = np.ascontiguousarray(np.asarray(before.val).T).view(np.uint8).reshape(w.width, -1)[:, :nbytes]
    mem = np.ascontiguousarray(raw[cols]).view(ut)[:, 0]
    data = _words(st, data_o, nbytes)
    cmp = None if cmp_o is None else _words(st, cmp_o, nbytes)
    offs = keys
    # the lanes in order, one round per rank among lanes of the same address
    addrs, inv = np.unique(offs[cols], return_inverse=True)
    cur = np.zeros(len(addrs), ut)
    cur[inv] = mem
    cur_src = np.full(len(addrs), ORIGINAL, np.int64)
    ret = np.zeros(w.width, ut)
    ret_src = np.full(w.width, ORIGINAL, np.int64)
    rank = np.zeros(len(cols), np.int64)
    seen: dict = {}
    for i, a in enumerate(inv.tolist()):
        rank[i] = seen.get(a, 0)
        seen[a] = rank[i] + 1
    for r in range(int(rank.max()) + 1 if len(cols) else 0):
        sel = rank == r
        c, a = cols[sel], inv[sel]
        ret[c], ret_src[c] = cur[a], cur_src[a]
        x = data[c]
        if rule == "swap":
            cur[a], cur_src[a] = x, c
        elif rule == "cmpswap":
            hit = cur[a] == cmp[c]
            cur[a] = np.where(hit, x, cur[a])
            cur_src[a] = np.where(hit, c, cur_src[a])
        else:
            new = np.asarray(fn(cur[a].copy(), x)).astype(ut)
            if rule == "pick":
                took = new != cur[a]
                cur_src[a] = np.where(took, c, cur_src[a])
            else:
                cur_src[a] = ARITH
            cur[a] = new
    value = st.vread(data_o.file, data_o.first, nbytes // 4, "u8")
    if dst_o is not None:
        _returned(st, dst_o, lanes, before, ret, ret_src, value, nbytes)
    # the memory: each changed address written once, from the lane whose data it holds, or (an
    # arithmetic result) from the last lane at it, with no identity
    last = np.full(len(addrs), -1, np.int64)
    np.maximum.at(last, inv, cols)                    # the last lane at each address
    moved = np.zeros(w.width, bool)
    moved[cur_src[cur_src >= 0]] = True
    if moved.any():
        store(moved, value)
    arith = cur_src == ARITH
    if arith.any():
        words = np.zeros((nbytes // 4, w.width), U32)
        fin = np.zeros(w.width, ut)
        fin[last[arith]] = cur[arith]
        words[:] = fin.view(U32).reshape(w.width, nbytes // 4).T if nbytes == 8 else fin[None, :]
        where = np.zeros(w.width, bool)
        where[last[arith]] = True
        store(where, VGPRs(w, words, "u32", regs=(data_o.first, nbytes // 4)))
    return value


def _cmp(data, rule, nbytes):
    """The compare value of a cmpswap: the upper half of its data registers (global, buffer)."""
    return replace(data, first=data.first + nbytes // 4, count=nbytes // 4) if rule == "cmpswap" else None


def _global_memory(st, buf, offs, nbytes):
    """(load, store) of an atomic on byte ``offs`` of ``buf``."""
    t = buf.dtype if nbytes % buf.itemsize == 0 else "u8"
    o = VGPRs(st.w, offs[None, :].astype(np.int64), "i64", literal=True)
    return (lambda lanes: with_exec(st, lanes, lambda: st.w.global_load(buf, o, nbytes, t)),
            lambda mask, value: store_lanes(st, buf, offs, mask, value, nbytes))


def _returned(st, dst, lanes, before, ret, ret_src, value, nbytes):
    w = st.w
    own = lanes & (ret_src == ORIGINAL)
    if own.any():
        with_exec(st, own, lambda: st.vwrite_value(dst.file, dst.first, before))
    routed = lanes & (ret_src >= 0)
    if routed.any():
        srcl = np.where(routed, ret_src, 0) % st.lanes
        with_exec(st, routed, lambda: st.vwrite_value(dst.file, dst.first, w.bpermute(value, srcl)))
    arith = lanes & (ret_src == ARITH)
    if arith.any():
        words = ret.view(U32).reshape(w.width, nbytes // 4).T if nbytes == 8 else ret[None, :]
        with_exec(st, arith, lambda: st.vwrite(dst.file, dst.first, np.ascontiguousarray(words)))


def _muted(st, fn):
    tr = st.w.machine.trace
    tr.muted += 1
    try:
        return fn()
    finally:
        tr.muted -= 1


def _check_data(st, o, nbytes, rule, what):
    n = nbytes // 4 * (2 if rule == "cmpswap" else 1)
    if o.kind != "reg" or o.file not in "va" or o.count != n:
        raise st.error(f"{what} {o.text}: {n} VGPRs expected")


def _global_atomic(kind):
    nbytes, rule, _ = OPS[kind]

    def run(st, d):
        no_mods(st, d, ("offset", *CACHE_BITS))
        pos = d.ops.positional
        if len(pos) == 4:
            dst, vaddr, data, saddr = pos
            _check_data(st, dst, nbytes, "", "destination")
        elif len(pos) == 3:
            dst, (vaddr, data, saddr) = None, pos
        else:
            raise st.error(f"{d.mnemonic} takes [vdst,] vaddr, vdata, saddr|off (flat_: [vdst,] vaddr, vdata)")
        _check_data(st, data, nbytes, rule, "data")
        addr = global_address(st, d, vaddr, saddr)
        value = None
        for buf, offs, lanes in global_parts(st, addr, nbytes):
            value = _muted(st, lambda: rmw(st, kind, offs, lanes, data, _cmp(data, rule, nbytes), dst,
                                           *_global_memory(st, buf, offs, nbytes)))
        _event(st, d, dst, data, value)
    return run


def _event(st, d, dst, data, value):
    outs = [] if dst is None else [st.vread(dst.file, dst.first, dst.count)]
    st.w.event(d.ins.mnemonic, ins=[] if value is None else [value], outs=outs)


def _buffer_atomic(kind):
    nbytes, rule, _ = OPS[kind]

    def run(st, d):
        no_mods(st, d, ("offset", "offen", "idxen", *CACHE_BITS))
        data, vaddr, rsrc, soff = d.ops.positional
        _check_data(st, data, nbytes, rule, "data")
        returns = bool(d.ops.mods.get("glc") or d.ops.mods.get("sc0"))
        dst = None
        if returns:
            dst = replace(data, count=nbytes // 4)
        a = address(st, d, vaddr, rsrc, soff)
        parts, oob, _ = classify(st, a, nbytes, d.ins.mnemonic)
        check(st, d, "atomic", a, parts, oob, nbytes)
        value, done = None, np.zeros(st.w.width, bool)
        for buf, offs, lanes, good, _ in parts:
            whole = good.all(axis=0) & lanes
            if whole.any():
                value = _muted(st, lambda: rmw(st, kind, offs, whole, data, _cmp(data, rule, nbytes), dst,
                                               *_global_memory(st, buf, offs, nbytes)))
                done |= whole
        zero = st.exec & ~done                         # out of range: dropped, returns 0
        if dst is not None and zero.any():
            with_exec(st, zero, lambda: st.vwrite(dst.file, dst.first, np.zeros((dst.count, st.w.width), U32)))
        _event(st, d, dst, data, value)
    return run


# LDS atomics: ds_<op>_<type> and ds_<op>_rtn_<type> -> the operation of OPS (the float min/max
# exist only here)
OPS["min_f32"] = (4, "pick", _isa("v_min_f32", np.float32))
OPS["max_f32"] = (4, "pick", _isa("v_max_f32", np.float32))
DS = {"add_u32": "add", "sub_u32": "sub", "inc_u32": "inc", "dec_u32": "dec", "min_i32": "smin", "max_i32": "smax",
      "min_u32": "umin", "max_u32": "umax", "and_b32": "and", "or_b32": "or", "xor_b32": "xor",
      "add_f32": "add_f32", "min_f32": "min_f32", "max_f32": "max_f32", "pk_add_f16": "pk_add_f16",
      "pk_add_bf16": "pk_add_bf16", "cmpst_b32": "cmpswap",
      "add_u64": "add_x2", "sub_u64": "sub_x2", "inc_u64": "inc_x2", "dec_u64": "dec_x2", "min_i64": "smin_x2",
      "max_i64": "smax_x2", "min_u64": "umin_x2", "max_u64": "umax_x2", "and_b64": "and_x2", "or_b64": "or_x2",
      "xor_b64": "xor_x2", "cmpst_b64": "cmpswap_x2", "add_f64": "add_f64", "min_f64": "min_f64",
      "max_f64": "max_f64"}


def _ds_atomic(kind, rtn):
    nbytes, rule, _ = OPS[kind]

    def run(st, d):
        no_mods(st, d, ("offset",))
        pos = list(d.ops.positional)
        dst = pos.pop(0) if rtn else None
        if dst is not None:
            _check_data(st, dst, nbytes, "", "destination")
        want = 3 if rule == "cmpswap" else 2
        if len(pos) != want:
            raise st.error(f"{d.mnemonic} takes {'vdst, ' if rtn else ''}vaddr, "
                           f"{'vcmp, vdata' if rule == 'cmpswap' else 'vdata'}")
        vaddr, *rest = pos
        cmp, data = (rest[0], rest[1]) if rule == "cmpswap" else (None, rest[0])
        for o in rest:
            _check_data(st, o, nbytes, "", "data")
        if vaddr.kind != "reg" or vaddr.file != "v" or vaddr.count != 1:
            raise st.error(f"DS address {vaddr.text}: one VGPR expected")
        if st.lds is None:
            raise st.error("LDS atomic in a kernel whose descriptor allocates no LDS (group segment 0)")
        a = (st.vwords("v", vaddr.first, 1)[0].astype(np.int64) + int(d.ops.mods.get("offset", 0))) & 0xFFFFFFFF
        addr = VGPRs(st.w, a[None, :], "i64", literal=True)
        keys = a + (np.arange(st.w.width) // st.lanes) * (1 << 32)        # each member's own LDS
        m = st.w.machine
        races, m.check_races = m.check_races, False
        try:
            value = _muted(st, lambda: rmw(
                st, kind, keys, st.exec.copy(), data, cmp, dst,
                lambda lanes: with_exec(st, lanes, lambda: st.w.lds_load(st.lds, addr, nbytes, "u8")),
                lambda mask, v: with_exec(st, mask, lambda: st.w.lds_store(st.lds, addr, v, nbytes))))
        finally:
            m.check_races = races
        _event(st, d, dst, data, value)
    return run


for _name, _k in DS.items():
    _base, _, _t = _name.rpartition("_")
    op(f"ds_{_base}_rtn_{_t}")(_ds_atomic(_k, True))
    op(f"ds_{_name}")(_ds_atomic(_k, False))
op("ds_wrxchg_rtn_b32")(_ds_atomic("swap", True))
op("ds_wrxchg_rtn_b64")(_ds_atomic("swap_x2", True))

for _k in [k for k in OPS if k not in ("min_f32", "max_f32")]:
    op(f"global_atomic_{_k}")(_global_atomic(_k))
    op(f"buffer_atomic_{_k}")(_buffer_atomic(_k))
    op(f"flat_atomic_{_k}")(flat(_global_atomic(_k)))
