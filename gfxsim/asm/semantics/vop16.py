"""16-bit VALU per the CDNA3 ISA: binary16 and 16-bit integer operations in either half of a
VGPR, packed (VOP3P) pairs of them, packs, the binary16/fp8/bf8 conversions and the
mixed-precision fma. Numbers are the ISA table's entries (gfxsim/isa: half.py and the 16-bit
forms of floating/integer/compare/conversion); this module reads the halves and places results.

A 16-bit source is the low half of its register, the high half where VOP3's op_sel bit (VOP3P:
op_sel / op_sel_hi per result half) says so, or the SDWA-selected field. A 16-bit result goes to
the low half with the high half zeroed (gfx9's rule for these opcodes), to the high half with
the low half kept (VOP3 op_sel on the destination), into the SDWA destination field, or — for the
mixlo/mixhi forms — into its half with the other half kept. Provenance moves with the bytes: a
half is two bytes; an arithmetic result's two bytes carry the entry's rule over its sources'
halves; the bytes a write keeps keep theirs; a pack concatenates its halves' bytes."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import OPS, dequant, f32, no_mods, op, put, sdst_mask, u32
from .vop import SDWA_FIELD, sdwa_dst, sdwa_dst_prov, value_of, arith_prov, by_sgpr_value
from ... import isa
from ...isa.half import pack_halves
from ...machine.provenance import Prov
from ...machine.routing import route_prov
from ...machine.valueprov import elem_prov
from ...machine.vgpr import VGPRs

U16, U32, F16, F32, I16 = np.uint16, np.uint32, np.float16, np.float32, np.int16
HALF_TYPES = {"f16": F16, "u16": U16, "i16": I16}
# binary16 inline constants (the float ones the parser accepts)
_F16_CONST = {0.5: 0x3800, 1.0: 0x3C00, 2.0: 0x4000, 4.0: 0x4400}
INV_2PI_F16 = 0x3118


class Half:
    """One 16-bit source as an instruction reads it: ``bits`` uint16 [width] (modifiers applied)
    and ``value``, the 2-byte value as a back-end word (its bytes' provenance routed; None for a
    constant or an SGPR, which carry none)."""
    __slots__ = ("bits", "value")

    def __init__(self, bits, value):
        self.bits, self.value = bits, value


def _const16(st, o) -> int:
    if o.kind == "float":
        if abs(o.value - 0.15915494) < 1e-7:
            return INV_2PI_F16
        return _F16_CONST[abs(o.value)] | (0x8000 if o.value < 0 else 0)
    if o.kind == "int":
        return o.value & 0xFFFF                 # an inline integer or a literal: its low 16 bits
    raise st.error(f"operand {o.text} is not a 16-bit source")


def _field(st, d, k, nsrc, hi_list=None):
    """(shift, bits) of source k's field: an SDWA select, else a half chosen by op_sel (or the
    given per-half select list of a packed op)."""
    if d.enc == "sdwa":
        sel = d.ops.mods.get(f"src{k}_sel", "DWORD")
        return SDWA_FIELD.get(sel, (0, 16))        # DWORD: a 16-bit operation reads the low half
    sel = hi_list if hi_list is not None else d.ops.mods.get("op_sel", ())
    return (16, 16) if k < len(sel) and sel[k] else (0, 16)


def read_half(st, d, k, o, t, nsrc, sel_list=None) -> Half:
    """Source ``k`` (operand ``o``, element type ``t``) as a 16-bit half."""
    shift, bits = _field(st, d, k, nsrc, sel_list)
    if o.kind == "reg":
        if o.count != 1:
            raise st.error(f"operand {o.text}: one 32-bit register expected")
        word = st.lanewise(st.sread(o.first)) if o.file == "s" else st.vwords(o.file, o.first, 1)[0]
        x = (word >> U32(shift)) & U32((1 << bits) - 1)
        if o.sext:
            if d.enc != "sdwa" or t == "f16":
                raise st.error(f"sext({o.text}) outside an SDWA integer source")
            if bits < 16:
                x = np.where(x >> U32(bits - 1), x | U32(0xFFFF & ~((1 << bits) - 1)), x)
        x = (x & U32(0xFFFF)).astype(U16)
        value = None
        if st.w.provenance and o.file in "va":
            v = st.vread(o.file, o.first, 1)
            if v.prov is not None:
                n = bits // 8
                rows = np.full((4, st.w.pw), -1, np.int64)
                rows[:min(n, 2)] = (shift // 8 + np.arange(min(n, 2)))[:, None]
                if o.sext and n == 1:
                    rows[1] = shift // 8
                value = VGPRs(st.w, x.astype(U32)[None, :].copy(), "u32", route_prov(v.prov.per_byte(), rows, st.w.pw))
    else:
        if shift and (o.kind == "float" or const_hi_nonzero(o)):
            raise st.error(f"{d.mnemonic}: the high half of the constant {o.text} is not modelled")
        x = np.full(st.w.width, _const16(st, o), U16)
        value = None
    if o.neg or o.abs:
        if t != "f16":
            raise st.error(f"modifier on {o.text}: an integer source of {d.mnemonic}")
        x = x.copy()
        if o.abs:
            x &= U16(0x7FFF)
        if o.neg:
            x ^= U16(0x8000)
    return Half(x, value)


def const_hi_nonzero(o) -> bool:
    """An integer constant whose high 16 bits are not zero."""
    return o.kind == "int" and (o.value & 0xFFFFFFFF) >> 16 != 0


def typed(h: Half, t: str) -> np.ndarray:
    """The half's bits as its element type's values (f16, u16, i16)."""
    return h.bits.view(HALF_TYPES[t]) if t in HALF_TYPES else h.bits


def half_value(st, h: Half) -> VGPRs:
    """The half as a back-end value (a constant or an SGPR: a literal with no provenance)."""
    return h.value if h.value is not None else VGPRs(st.w, h.bits.astype(U32)[None, :].copy(), "u32", literal=True)


MAX_F16 = np.float16(65504.0)


def ovfl16(st, r, xs):
    """A binary16 result under MODE.FP16_OVFL (mode.py): where it set, a result that overflowed to
    infinity from finite sources is the largest finite value of its sign; a true infinity (an
    infinite source) stays. ``r`` as given where the result is not binary16 or the bit is clear."""
    from .mode import fp16_ovfl
    r = np.asarray(r)
    if r.dtype != np.float16:
        return r
    on = np.repeat(fp16_ovfl(st), st.lanes)
    if not on.any():
        return r
    finite = np.ones(r.shape, bool)
    for x in xs:
        x = np.asarray(x)
        if x.dtype.kind == "f":
            finite &= np.isfinite(x)
    over = on & np.isinf(r) & finite
    return np.where(over, np.where(r > 0, MAX_F16, -MAX_F16), r).astype(np.float16) if over.any() else r


def bits16(r) -> np.ndarray:
    """A 16-bit result's bits (a float16 array viewed, an integer one wrapped)."""
    r = np.asarray(r)
    return r.view(U16) if r.dtype.itemsize == 2 else r.astype(np.int64).astype(U16)


def _differ(name, xs):
    """See vop.addends_differ, on the halves' values."""
    rule = isa.entry(name).rule
    with np.errstate(all="ignore"):
        if rule.fused:
            x, y = np.asarray(xs[0], np.float64) * np.asarray(xs[1], np.float64), np.asarray(xs[2], np.float64)
        elif rule.summing == "add":
            x, y = (np.asarray(v, np.float64) for v in xs[:2])
        else:
            return None
        return ((x.view(np.int64) != y.view(np.int64)) | (x == 0) | (y == 0))[None, :]


def result_prov(st, name: str, vals, xs) -> Prov | None:
    """The provenance of one 16-bit element from its sources' values, by the entry's rule."""
    if not st.w.provenance or all(v.prov is None for v in vals):
        return None
    return arith_prov(st, name, vals, differ=_differ(name, xs))


def place(st, d, dst, r, prov, *, half_bits: bool, nsrc: int) -> None:
    """Write result ``r`` (uint16 [width] when ``half_bits``, else uint32) and its provenance (one
    element's, or per byte) to ``dst`` per the destination rule (module docstring)."""
    w = st.w.pw
    new = None if prov is None else prov.per_byte()
    if d.enc == "sdwa":
        word = sdwa_dst(st, d, dst, np.asarray(r).astype(U32))
        if new is not None and d.ops.mods.get("dst_sel", "DWORD") != "DWORD":
            new = sdwa_dst_prov(st, d, dst, route_prov(new, _rows(new, half_bits, w), w) if half_bits else new)
        elif new is not None and half_bits:
            new = route_prov(new, _rows(new, True, w), w)
        elif new is None and _keeps_named_bytes(st, d, dst):
            new = sdwa_dst_prov(st, d, dst, Prov(1, {}))
        return _put(st, dst, word, new)
    if not half_bits:
        return _put(st, dst, np.asarray(r, U32), new if new is None else route_prov(new, _rows(new, False, w), w))
    sel = d.ops.mods.get("op_sel", ())
    hi = len(sel) > nsrc and sel[nsrc]
    r = np.asarray(r).astype(U32)
    if not hi:
        return _put(st, dst, r, None if new is None else route_prov(new, _rows(new, True, w), w))
    word = (st.vwords(dst.file, dst.first, 1)[0] & U32(0xFFFF)) | (r << U32(16))
    old = st.vread(dst.file, dst.first, 1).prov if st.w.provenance else None
    if new is None and old is None:
        return _put(st, dst, word, None)
    both = Prov.concat([new, None if old is None else old.per_byte()], [4 if new is None else new.shape[0], 4], w)
    n = 4 if new is None else new.shape[0]
    order = [n, n + 1, 0, min(1, n - 1)]              # the old low half, the result's two bytes
    rows = np.broadcast_to(np.array(order)[:, None], (4, w))
    return _put(st, dst, word, route_prov(both, rows, w))


def _keeps_named_bytes(st, d, dst) -> bool:
    """An SDWA write that keeps bytes of the old register which carry provenance."""
    return (st.w.provenance and d.ops.mods.get("dst_unused") == "UNUSED_PRESERVE"
            and d.ops.mods.get("dst_sel", "DWORD") != "DWORD" and st.vread(dst.file, dst.first, 1).prov is not None)


def _rows(p, half_bits, w):
    """Rows of a result element's per-byte provenance ``p`` for the four bytes of a word: its two
    bytes then none for a half, its four for a word."""
    n = p.shape[0]
    if half_bits:
        order = [0, min(1, n - 1), -1, -1]
    else:
        order = [min(i, n - 1) for i in range(4)]
    return np.broadcast_to(np.array(order)[:, None], (4, w))


def _put(st, dst, word, prov):
    word = np.asarray(word, U32)
    if prov is None:
        put(st, dst, word, decided=True)
    else:
        st.vwrite_value(dst.file, dst.first, VGPRs(st.w, word[None, :].copy(), "u32", prov, regs=(dst.first, 1)))


def _read_src(st, d, k, o, t, n):
    """A source of a 16-bit row: a half, or a whole 32-bit word for an f32/i32/u32 source."""
    if t in HALF_TYPES:
        h = read_half(st, d, k, o, t, n)
        return typed(h, t), half_value(st, h)
    if d.enc == "sdwa" and d.ops.mods.get(f"src{k}_sel", "DWORD") != "DWORD":
        raise st.error(f"SDWA select on the 32-bit source {o.text} of {d.mnemonic} is not modelled")
    x = f32(st, o) if t == "f32" else u32(st, o)
    return (x.view(np.int32) if t == "i32" else x), value_of(st, o)


_MODS = {"e32": (), "e64": ("op_sel",), "sdwa": ("dst_sel", "dst_unused", "src0_sel", "src1_sel")}


def _mods(st, d):
    no_mods(st, d, _MODS.get(d.enc, ("op_sel",)))


# 16-bit shifts by a uniform whole-byte amount move bytes: which result byte comes from which
# source byte (amount 8; amount 0 keeps both)
_SHIFT_ROWS = {"v_lshlrev_b16": [-1, 0], "v_lshrrev_b16": [1, -1], "v_ashrrev_i16": [1, 1]}


def _row16(e):
    name, types, result = e.mnemonic, e.srcs, e.result
    n = len(types)
    half_out = result in HALF_TYPES

    @op(name)
    def run(st, d):
        _mods(st, d)
        if len(d.ops) != 1 + n:
            raise st.error(f"{d.mnemonic} takes {1 + n} operands, got {len(d.ops)}")
        dst, srcs = d.ops[0], d.ops.positional[1:]
        keep = dequant.fresh(st, srcs[0]) if name in dequant.KEEPS and d.enc != "sdwa" else None
        read = [_read_src(st, d, k, o, t, n) for k, (o, t) in enumerate(zip(srcs, types))]
        xs = [x for x, _ in read]
        with np.errstate(all="ignore"):
            r = e.fn(*xs)
        if isinstance(r, tuple):                 # v_div_fixup_f16: (D, lanes in its underflow case)
            r, under = r
            if (under & st.exec).any():
                raise st.error(f"{d.mnemonic}: a quotient in the ISA's underflow case is not modelled",
                               lane=int(np.argmax(under & st.exec)))
        vals = [v for _, v in read]
        prov = None
        if name in _SHIFT_ROWS and st.w.provenance and vals[1].prov is not None and \
                (srcs[0].kind != "reg" or srcs[0].file == "s"):
            def routed(split):
                amt = int(_read_src(st, d, 0, srcs[0], types[0], n)[0][0]) & 15
                if amt % 8:
                    return result_prov(st, name, vals, xs)
                rows = [0, 1] if amt == 0 else _SHIFT_ROWS[name]
                return route_prov(vals[1].prov.per_byte(), np.broadcast_to(np.array(rows + [-1, -1])[:, None],
                                                                           (4, st.w.pw)), st.w.pw)
            prov = by_sgpr_value(st, srcs[:1], routed)
        else:
            prov = result_prov(st, name, vals, xs)
        if half_out:
            place(st, d, dst, bits16(ovfl16(st, r, xs)), prov, half_bits=True, nsrc=n)
        else:
            r = np.asarray(r)
            place(st, d, dst, r.view(U32) if r.dtype.itemsize == 4 else r.astype(U32), prov, half_bits=False, nsrc=n)
        if keep is not None:               # a matrix result converted between fp widths: still fresh
            st.set_fresh(dst.file, dst.first, keep[None, :])
    return run


def _cmp16(e):
    name, types = e.mnemonic, e.srcs
    x = name.startswith("v_cmpx_")

    @op(name)
    def run(st, d):
        no_mods(st, d, ("src0_sel", "src1_sel") if d.enc == "sdwa" else ())
        dst, a, b = d.ops.positional
        va, vb = (typed(read_half(st, d, k, o, t, 2), t) for k, (o, t) in enumerate(zip((a, b), types)))
        res = np.asarray(e.fn(va, vb), bool) & st.exec
        sdst_mask(st, dst, res)
        if x:
            st.set_exec(res)
    return run


_OWN = {"v_pack_b32_f16", "v_cvt_pkrtz_f16_f32", "v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16",
        "v_cvt_pk_fp8_f32", "v_cvt_pk_bf8_f32", "v_cvt_f32_fp8", "v_cvt_f32_bf8", "v_cvt_pk_f32_fp8",
        "v_cvt_pk_f32_bf8"}
for _e in isa.asm_entries("own"):
    if _e.mnemonic in _OWN or _e.mnemonic in OPS:
        continue
    if _e.result == "mask" and any(t in HALF_TYPES for t in _e.srcs):
        _cmp16(_e)
    elif any(t in HALF_TYPES for t in _e.srcs) or _e.result in HALF_TYPES:
        _row16(_e)


# -- packs ----------------------------------------------------------------------------------------
@op("v_pack_b32_f16")
def v_pack_b32_f16(st, d):
    """D = {S1 half, S0 half}: the halves' bytes, routed (a -/|| flips or clears a sign bit)."""
    no_mods(st, d, ("op_sel",))
    sel = d.ops.mods.get("op_sel", ())
    if len(sel) > 2 and sel[2]:
        raise st.error("v_pack_b32_f16 with op_sel on the destination is not modelled")
    dst, a, b = d.ops.positional
    ha, hb = (read_half(st, d, k, o, "f16", 2) for k, o in enumerate((a, b)))
    word = pack_halves(ha.bits, hb.bits)
    prov = None
    if ha.value is not None or hb.value is not None:
        pa, pb = (None if h.value is None else h.value.prov.per_byte() for h in (ha, hb))
        both = Prov.concat([pa, pb], [4, 4], st.w.pw)
        prov = route_prov(both, np.broadcast_to(np.array([0, 1, 4, 5])[:, None], (4, st.w.pw)), st.w.pw)
    _put(st, dst, word, prov)


def _elem_bytes(st, v, n):
    """One element's provenance as ``n`` byte rows (each byte names the element)."""
    p = elem_prov(st.w, v, 1) if v is not None else None
    if p is None:
        return None
    return route_prov(p.per_byte(), np.zeros((n, st.w.pw), np.int64), st.w.pw)


@op("v_cvt_pkrtz_f16_f32")
def v_cvt_pkrtz_f16_f32(st, d):
    """D = {rtz_f16(S1), rtz_f16(S0)}: each half named by its binary32 source."""
    no_mods(st, d)
    dst, a, b = d.ops.positional
    word = isa.entry("v_cvt_pkrtz_f16_f32").fn(f32(st, a), f32(st, b))
    prov = None
    if st.w.provenance:
        pa, pb = (_elem_bytes(st, value_of(st, o), 2) if o.kind == "reg" and o.file in "va" else None for o in (a, b))
        prov = Prov.concat([pa, pb], [2, 2], st.w.pw)
    _put(st, dst, word, prov)


# -- packed 16-bit (VOP3P): each half is the scalar instruction's entry ------------------------------
PK16 = {"v_pk_add_f16": "v_add_f16", "v_pk_mul_f16": "v_mul_f16", "v_pk_fma_f16": "v_fma_f16",
        "v_pk_max_f16": "v_max_f16", "v_pk_min_f16": "v_min_f16",
        "v_pk_add_u16": "v_add_u16", "v_pk_add_i16": "v_add_u16", "v_pk_sub_u16": "v_sub_u16",
        "v_pk_sub_i16": "v_sub_u16", "v_pk_mul_lo_u16": "v_mul_lo_u16", "v_pk_lshlrev_b16": "v_lshlrev_b16",
        "v_pk_lshrrev_b16": "v_lshrrev_b16", "v_pk_ashrrev_i16": "v_ashrrev_i16",
        "v_pk_max_u16": "v_max_u16", "v_pk_min_u16": "v_min_u16", "v_pk_max_i16": "v_max_i16",
        "v_pk_min_i16": "v_min_i16", "v_pk_mad_u16": "v_mad_u16", "v_pk_mad_i16": "v_mad_i16"}


def _pk16(name, scalar):
    e = isa.entry(scalar)
    n = len(e.srcs)

    @op(name)
    def run(st, d):
        no_mods(st, d, ("op_sel", "op_sel_hi", "neg_lo", "neg_hi"))
        if len(d.ops) != n + 1:
            raise st.error(f"{d.mnemonic} takes {n + 1} operands, got {len(d.ops)}")
        mods = d.ops.mods
        sel, sel_hi = mods.get("op_sel", (0,) * n), mods.get("op_sel_hi", (1,) * n)
        neg = {False: mods.get("neg_lo", (0,) * n), True: mods.get("neg_hi", (0,) * n)}
        dst, srcs = d.ops[0], d.ops.positional[1:]
        halves, provs = [], []
        for hi in (False, True):
            read = []
            for k, (o, t) in enumerate(zip(srcs, e.srcs)):
                if neg[hi][k] and t != "f16":
                    raise st.error(f"{d.mnemonic}: neg on the integer source {o.text}")
                o2 = replace(o, neg=bool(neg[hi][k]) != o.neg) if neg[hi][k] else o
                read.append(read_half(st, d, k, o2, t, n, sel_hi if hi else sel))
            xs = [typed(h, t) for h, t in zip(read, e.srcs)]
            with np.errstate(all="ignore"):
                halves.append(bits16(ovfl16(st, e.fn(*xs), xs)))
            vals = [half_value(st, h) for h in read]
            p = result_prov(st, scalar, vals, xs)
            provs.append(None if p is None else route_prov(p.per_byte(), np.broadcast_to(
                np.array([0, min(1, p.per_byte().shape[0] - 1)])[:, None], (2, st.w.pw)), st.w.pw))
        _put(st, dst, pack_halves(halves[0], halves[1]), Prov.concat(provs, [2, 2], st.w.pw))
    return run


for _n, _s in PK16.items():
    _pk16(_n, _s)


# -- the mixed-precision fma ----------------------------------------------------------------------
def _mix(name):
    e = isa.entry(name)

    @op(name)
    def run(st, d):
        """op_sel_hi[k] = 1: source k is a binary16 half (op_sel[k] picks which), else binary32."""
        no_mods(st, d, ("op_sel", "op_sel_hi"))
        dst, *srcs = d.ops.positional
        sel, sel_hi = d.ops.mods.get("op_sel", (0, 0, 0)), d.ops.mods.get("op_sel_hi", (0, 0, 0))
        xs, vals = [], []
        for k, o in enumerate(srcs):
            if sel_hi[k]:
                h = read_half(st, d, k, o, "f16", 3, sel)
                xs.append(h.bits.view(F16).astype(F32))
                vals.append(half_value(st, h))
            else:
                if sel[k] and o.kind == "reg":
                    raise st.error(f"{d.mnemonic}: op_sel on the binary32 source {o.text}")
                xs.append(f32(st, o))
                vals.append(value_of(st, o))
        with np.errstate(all="ignore"):
            r = e.fn(*xs)
        prov = result_prov(st, name, vals, xs)
        if name == "v_fma_mix_f32":
            place(st, d, dst, np.asarray(r, F32).view(U32), prov, half_bits=False, nsrc=3)
            return
        bits = bits16(ovfl16(st, r, xs)).astype(U32)
        old = st.vwords(dst.file, dst.first, 1)[0]
        hi = name == "v_fma_mixhi_f16"
        word = (old & U32(0xFFFF)) | (bits << U32(16)) if hi else (old & U32(0xFFFF0000)) | bits
        oldp = st.vread(dst.file, dst.first, 1).prov if st.w.provenance else None
        newp = None if prov is None else route_prov(prov.per_byte(), np.zeros((2, st.w.pw), np.int64), st.w.pw)
        keep = None if oldp is None else oldp.per_byte()
        if newp is None and keep is None:
            return _put(st, dst, word, None)
        both = Prov.concat([newp, keep], [2, 4], st.w.pw)
        rows = [2, 3, 0, 1] if hi else [0, 1, 4, 5]
        _put(st, dst, word, route_prov(both, np.broadcast_to(np.array(rows)[:, None], (4, st.w.pw)), st.w.pw))
    return run


for _n in ("v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16"):
    _mix(_n)


__all__ = ["HALF_TYPES", "OPS", "PK16", "place", "read_half", "ovfl16"]
