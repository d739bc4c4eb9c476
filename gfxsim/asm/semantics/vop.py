"""Vector ALU (VOP1, VOP2, VOP3, VOPC, VOP3P and their SDWA forms) per the CDNA3 ISA.

Most operations are one row of ``VALU``, an entry of the ISA table (gfxsim/isa) both front ends
share: its source types, a numpy function of the sources and its provenance rule. Operations
with implicit state (carries through VCC or an SGPR pair, compares, cndmask, the division
helpers, lane counts), byte routing (moves, v_perm_b32 through the back end, so provenance
travels) and packed fp32 have their own functions; compares and the division helpers still take
their numbers from the table.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import (OPS, Inline, const32, f32, f64, mask_source, mask_src, no_mods, op, put, put64, reader, reader64, sdst_mask,
               source, source64, u32, u64, vdst_ok, vsrc, words64)
from . import dequant
from ... import isa
from ...isa.moves import byte_permute
from ...machine.encoding import numeric
from ...machine.provenance import Prov
from ...machine.routing import route_prov, shift_prov
from ...machine.valueprov import combine, elem_prov, merged, sum_of_results, with_marks
from ...machine.vgpr import VGPRs
from ..origin import bytes_carry_identity, columns_carry_identity

U32, I32, F32, U64 = np.uint32, np.int32, np.float32, np.uint64


def _i(x):
    return np.asarray(x).view(I32)


# The rows of the generic VALU path: every ISA entry of the "valu" form, its source types and its
# numbers (gfxsim/isa); integer ops wrap modulo 2^32, shift amounts take their low 5 bits.
VALU = {e.mnemonic: (e.srcs, e.fn) for e in isa.asm_entries("valu")}

# VOP3 forms with float modifiers allowed on their float sources; clamp/omod are refused
_FLOAT_TYPES = {"f32"}

# Byte routing (the entries whose rule routes bytes): the same operation on back-end values, whose
# provenance (each result byte's identities, routing.py) the result takes; the value itself is the
# entry's. A shift routes when its amount is uniform (a constant or an SGPR), else its result keeps
# the fields its operands agree on, as the Python front end's shift by a per-lane amount.
_ROUTE_VIA = {
    "v_and_b32": lambda a, b: a & b,
    "v_or_b32": lambda a, b: a | b,
    "v_xor_b32": lambda a, b: a ^ b,
    "v_lshlrev_b32": lambda a, b: b << a if a.literal else None,
    "v_lshrrev_b32": lambda a, b: b >> a if a.literal else None,
    "v_ashrrev_i32": lambda a, b: b.w.bitcast(b, "i32") >> int(a.val[0, 0]) if a.literal else None,
    "v_lshl_or_b32": lambda a, b, c: (a << b) | c if b.literal else None,
    "v_and_or_b32": lambda a, b, c: (a & b) | c,
    "v_or3_b32": lambda a, b, c: a | b | c,
}
ROUTE = {n: _ROUTE_VIA[n] for n, (_, _) in VALU.items() if isa.entry(n).rule.routes}


# Arithmetic: the back end's rule for the same operation (valu.py: a field survives where the
# operands agree; a reduction — max, min, add — unites footprints; a sum of two matrix results is
# named by a pair record), so a compiled value carries what its Python twin's would: each entry's
# provenance rule (isa.Rule), read by name.
def _rule(name: str) -> isa.Rule:
    e = isa.TABLE.get(name)
    return isa.KEEP if e is None else e.rule


def addends_differ(st, name, srcs):
    """Per lane, [1, width]: whether the two addends of an add (or c and a*b of an fma) differ —
    as the instruction uses them (modifiers applied, the product exact), by bits — or are zero.
    Two addends named by the same value (valueprov.sum_of_results) are that value added to itself,
    a double count, only where they are equal and non-zero; where they differ they are two
    functions of it (clang's expf: x*c_hi + x*c_lo; a division's Newton steps: q + e*q), and a
    zero (x = 0 in expf) says nothing. None for operations that add nothing."""
    with np.errstate(all="ignore"):
        rule = _rule(name)
        if rule.fused:
            a, b, c = (f32(st, o).astype(np.float64) for o in srcs[:3])
            x, y = a * b, c
        elif rule.summing == "add" and len(srcs) >= 2:
            x, y = (f32(st, o).astype(np.float64) if "f32" in name else u32(st, o).astype(np.float64)
                    for o in srcs[:2])
        else:
            return None
        return ((x.view(np.int64) != y.view(np.int64)) | (x == 0) | (y == 0))[None, :]


def arith_prov(st, name, vals, dequantized=False, differ=None):
    """``_arith_prov`` without the encoding planes: arithmetic writes a number of its own type."""
    return numeric(_arith_prov(st, name, vals, dequantized, differ))


def _arith_prov(st, name, vals, dequantized=False, differ=None):
    """Provenance of an elementwise result from its sources' back-end values (None if none has any).
    ``dequantized``: the product applied a scale to a matrix result, which keeps its identities
    but not the scale's footprint or mark (the back end's dequant, valu.py). ``differ``: see
    ``addends_differ`` (None: two operands named by one instruction's one element are never a sum),
    or a function giving it, called only where two matrix results meet."""
    w = st.w
    if not w.provenance or all(v.prov is None for v in vals):
        return None
    rule = _rule(name)
    if rule.fused:                          # c + a*b, as valu.fma: a product, then an add
        ab = merged(w, vals[0], vals[1], 1, product=True, op=name)
        if dequantized and ab is not None:
            ab = Prov(ab.g, ab.ids)
        pc = elem_prov(w, vals[2], 1)
        if pc is None and not dequantized:      # a*b + a number: a*b's quantization marks (qdir.py)
            ab = with_marks(w, "mul", vals[0], vals[1], ab, 1)
        p = combine(w, ab, pc, True, "reduction", name, vals[2:3])
        if ab is not None and pc is not None and "@mma" in ab.ids and "@mma" in pc.ids:
            p = sum_of_results(w, ab, pc, p, one_element=_one_element(differ))
        return p
    red = rule.reducing
    p = merged(w, vals[0], vals[1] if len(vals) > 1 else None, 1, red, rule.summing, product=rule.product,
               extremum=rule.extremum, one_element=_one_element(differ), op=name)
    if dequantized and p is not None:
        return Prov(p.g, p.ids)
    for v in vals[2:]:
        p = combine(w, p, elem_prov(w, v, 1), red, "reduction" if (red or rule.summing) and not rule.extremum else None,
                    name, (v,))
    if rule.quantizes and p is not None and "@mma" in p.ids:
        p = Prov(p.g, {f: a for f, a in p.ids.items() if f not in ("@mma", "@mn")}, p.fp, p.flags)
    if name in MARKED:
        op_, x, y = MARKED[name]
        p = with_marks(w, op_, vals[x], None if y is None else vals[y], p, 1)
    elif name == "v_med3_f32" and not any(_has_origin(v) for v in vals[1:]):
        p = with_marks(w, "clamp", vals[0], None, p, 1)           # a saturation between constants
    return p


def _one_element(differ):
    """sum_of_results' ``one_element`` from ``differ`` (None: True), a function staying one."""
    if differ is None:
        return True
    if callable(differ):
        return lambda: _one_element(differ())
    return differ


def _has_origin(v) -> bool:
    """Whether a value carries an identity or a footprint anywhere (else a constant, for qdir.py)."""
    some = None if v.prov is None else v.prov.origin_columns()
    return some is not None and bool(some.any())


# the operations whose quantization-direction marks are followed (qdir.py): (operation, a, b);
# v_div_fixup_f32 S0, S1, S2 is S2 / S1 (S0 is the quotient's approximation, from the same two)
MARKED = {"v_mul_f32": ("mul", 0, 1), "v_rcp_f32": ("rcp", 0, None), "v_max_f32": ("extremum", 0, 1),
          "v_min_f32": ("extremum", 0, 1), "v_div_fixup_f32": ("div", 2, 1)}


def _src_values(st, d, srcs):
    """Each source as a back-end value; an SDWA byte/word select keeps the selected bytes' identity."""
    vals = [value_of(st, o) for o in srcs]
    if d.enc == "sdwa":
        for k, (o, v) in enumerate(zip(srcs, vals)):
            sel = d.ops.mods.get(f"src{k}_sel", "DWORD")
            if sel != "DWORD" and v.prov is not None:
                first, n = SDWA_FIELD[sel][0] // 8, SDWA_FIELD[sel][1] // 8
                rows = np.full((4, st.w.pw), -1, np.int64)      # zero extension: bytes of no one
                rows[:n] = first + np.arange(n)[:, None]
                if o.sext:
                    rows[n:] = first + n - 1              # sign extension repeats the top byte
                # the selected field as the instruction reads it: its value and its bytes' provenance
                vals[k] = VGPRs(st.w, _sdwa_src(st, d, k, o, "u32")[None, :], "u32",
                                route_prov(v.prov.per_byte(), rows, st.w.pw))
    return vals


def _result_prov(st, d, name, srcs):
    """The provenance of a VALU table row's result: routed bytes where the operation moves bytes,
    the arithmetic rule otherwise."""
    if not st.w.provenance or not any(o.kind == "reg" and o.file in "va" and (o.dpp or st.vhas_prov(o.file, o.first, o.count))
                                      for o in srcs):
        return None                   # no source register holds provenance: none to compute
    vals = _src_values(st, d, srcs)
    if all(v.prov is None for v in vals):
        return None
    if name in ROUTE:                 # SDWA sources arrive with their selected bytes routed
        def routed(split):
            vs = _src_values(st, d, srcs) if split else vals
            out = ROUTE[name](*vs)
            # a per-lane shift amount moves no whole bytes: the fields the operands agree on (valu.py)
            return arith_prov(st, name, vs) if out is None else out.prov
        return by_sgpr_value(st, srcs, routed)
    if name in BYTE_EXTRACT:
        return by_sgpr_value(st, srcs, lambda split: BYTE_EXTRACT[name](
            st, srcs, _src_values(st, d, srcs) if split else vals))
    hit = False
    if name in MULTIPLIES:
        vals, hit = dequant.multiply(st, srcs, vals)
    # the addends compared only where two matrix results meet (sum_of_results): most adds have none
    return arith_prov(st, name, vals, dequantized=hit, differ=lambda: addends_differ(st, name, srcs))


def by_sgpr_value(st, srcs, compute):
    """``compute(split)``'s provenance (split: its values must be read again), where a byte route
    depends on a uniform operand's value (a shift amount, a field offset): the back end takes that
    value as one number for the wave, but an SGPR differs between the members of a batch, so each
    group of members holding the same SGPR values gets the route computed with theirs, and their
    columns take it."""
    M = st.members
    regs = sorted({o.first + k for o in srcs if o.kind == "reg" and o.file == "s" for k in range(o.count)}
                  - {126, 127})
    if M == 1 or not regs:
        return compute(False)
    act = np.nonzero(st.act if st.act is not None else np.ones(M, bool))[0]
    held = st.s[:, regs]
    if (held == held[act[0]]).all():     # every member's column 0 holds the same (members sitting out too)
        return compute(False)
    keys, inv = np.unique(held[act], axis=0, return_inverse=True)
    saved = st.s[:, regs].copy()
    out, shape = None, None
    try:
        for k, key in enumerate(keys):
            st.s[:, regs] = key
            p = compute(True)
            if p is None:
                continue
            shape = p.shape if shape is None else shape
            member = np.zeros(M, bool)
            member[act[inv.reshape(-1) == k]] = True
            cols = st.w.pcols(np.repeat(member, st.lanes)[None, :], "a byte route by SGPR value")
            out = p if out is None else Prov.select(cols, p, out, shape)
    finally:
        st.s[:, regs] = saved
    return out


MULTIPLIES = {"v_mul_f32", "v_fma_f32"}          # the fp multiplies a dequant is recognised at


def _bfe_prov(signed):
    """v_bfe_u32/i32 D = S0[off +: width]: with a whole-byte offset and width (uniform), the bytes
    move to the bottom; the extension bytes carry nothing (zero) or the top byte's identity."""
    def rule(st, srcs, vals):
        if srcs[1].kind == "reg" or srcs[2].kind == "reg" or vals[0].prov is None:
            return arith_prov(st, "v_bfe", vals[:1])
        off, width = int(vals[1].val[0, 0]) & 31, int(vals[2].val[0, 0]) & 31
        if off % 8 or width % 8 or not width:
            return arith_prov(st, "v_bfe", vals[:1])
        nb = width // 8
        rows = np.full((4, st.w.pw), -1, np.int64)
        for i in range(4):
            if i < nb and off // 8 + i < 4:
                rows[i] = off // 8 + i
            elif signed:
                rows[i] = min(off // 8 + nb - 1, 3)
        return route_prov(vals[0].prov.per_byte(), rows, st.w.pw)
    return rule


def _align_prov(bits_per_unit):
    """v_alignbit_b32 / v_alignbyte_b32 D = ({S0, S1} >> shift)[31:0]: with a uniform whole-byte
    shift, result byte i is byte i + shift/8 of S1's four bytes then S0's."""
    def rule(st, srcs, vals):
        if srcs[2].kind == "reg" or all(v.prov is None for v in vals[:2]):
            return arith_prov(st, "v_alignbit", vals[:2])
        shift = (int(vals[2].val[0, 0]) & (31 if bits_per_unit == 1 else 3)) * bits_per_unit
        if shift % 8:
            return arith_prov(st, "v_alignbit", vals[:2])
        width = st.w.pw                     # provenance columns
        both = Prov.concat([None if v.prov is None else v.prov.per_byte() for v in (vals[1], vals[0])], [4, 4], width)
        rows = np.broadcast_to((np.arange(4) + shift // 8)[:, None], (4, width))
        return route_prov(both, rows, width)
    return rule


BYTE_EXTRACT = {n: _align_prov(8 if n == "v_alignbyte_b32" else 1) if n.startswith("v_align") else
                _bfe_prov(n == "v_bfe_i32") for n in VALU if isa.entry(n).rule.byte_extract}
SDWA_FIELD = {"BYTE_0": (0, 8), "BYTE_1": (8, 8), "BYTE_2": (16, 8), "BYTE_3": (24, 8),     # (shift, bits)
              "WORD_0": (0, 16), "WORD_1": (16, 16)}


def _read(st, o, t):
    if t == "f32":
        return f32(st, o)
    if t == "i32":
        return u32(st, o).view(I32)
    return u32(st, o)


def _sdwa_src(st, d, k, o, t):
    """An SDWA source: the selected byte/word, zero- or (sext) sign-extended."""
    sel = d.ops.mods.get(f"src{k}_sel", "DWORD")
    if o.kind != "reg" and sel != "DWORD":
        raise st.error(f"SDWA select {sel} on a non-register source {o.text}")
    plain = o if not o.sext else type(o)(o.kind, o.file, o.first, o.count, o.value, o.text, o.neg, o.abs, False)
    if t == "f32":
        if sel != "DWORD" or o.sext:
            raise st.error(f"SDWA select {sel} / sext on the fp32 source {o.text} is not modelled")
        return f32(st, plain)
    if sel == "DWORD" and o.sext:
        raise st.error(f"sext({o.text}) with a DWORD select")
    x = sdwa_select(u32(st, plain), sel, o.sext)
    return x.view(I32) if t == "i32" else x


def sdwa_select(x, sel: str, sext: bool):
    """An integer SDWA source's words: the byte or word ``sel`` picks, zero- or (sext) sign-extended."""
    if sel == "DWORD":
        return x
    shift, bits = SDWA_FIELD[sel]
    x = (x >> U32(shift)) & U32((1 << bits) - 1)
    if sext:
        x = np.where(x >> U32(bits - 1), x | U32((0xFFFFFFFF << bits) & 0xFFFFFFFF), x).astype(U32)
    return x


def sdwa_dst(st, d, dst, r):
    sel = d.ops.mods.get("dst_sel", "DWORD")
    if sel == "DWORD":
        return r
    unused = d.ops.mods.get("dst_unused", "UNUSED_PAD")
    old = st.vwords(dst.file, dst.first, 1)[0] if unused == "UNUSED_PRESERVE" else None
    return sdwa_place(r, sel, unused, old)


def sdwa_place(r, sel: str, unused: str, old=None):
    """An SDWA result's words in the destination field ``sel``: zeros around it (UNUSED_PAD), its
    top bit above it (UNUSED_SEXT) or the destination's ``old`` words (UNUSED_PRESERVE)."""
    if sel == "DWORD":
        return r
    shift, bits = SDWA_FIELD[sel]
    field = (r & U32((1 << bits) - 1)) << U32(shift)
    fmask = U32(((1 << bits) - 1) << shift)
    if unused == "UNUSED_PAD":
        return field
    if unused == "UNUSED_PRESERVE":
        return (old & ~fmask) | field
    top = (field >> U32(shift + bits - 1)) & U32(1)            # UNUSED_SEXT: sign-extend above
    above = U32((0xFFFFFFFF << (shift + bits)) & 0xFFFFFFFF)
    return np.where(top.astype(bool), field | above, field).astype(U32)


def sdwa_dst_prov(st, d, dst, prov):
    """A partial-word SDWA destination routes bytes like its value: the result's low bytes land in
    the selected field; the bytes around it carry nothing (UNUSED_PAD: zero), the field's top
    byte's identity (UNUSED_SEXT) or the old register's bytes (UNUSED_PRESERVE)."""
    shift, bits = SDWA_FIELD[d.ops.mods["dst_sel"]]
    first, n = shift // 8, bits // 8
    unused = d.ops.mods.get("dst_unused", "UNUSED_PAD")
    width = st.w.pw                     # provenance columns
    rows = np.full((4, width), -1, np.int64)
    rows[first:first + n] = np.arange(n)[:, None]
    new = prov.per_byte()
    if unused == "UNUSED_SEXT":
        rows[first + n:] = n - 1
    elif unused == "UNUSED_PRESERVE":
        old = st.vread(dst.file, dst.first, 1).prov
        outside = np.ones(4, bool)
        outside[first:first + n] = False
        rows[outside] = 4 + np.nonzero(outside)[0][:, None]          # rows 4..7: the old register's bytes
        new = Prov.concat([new, None if old is None else old.per_byte()], [4, 4], width)
    return route_prov(new, rows, width)


# VOP3 clamp on the unsigned add/sub: the result saturates to [0, 2^32 - 1] instead of wrapping
# (CDNA3 ISA, "clamp": integer operations clamp to the type's range; LLVM's usub.sat/uadd.sat)
_CLAMP_U32 = {"v_add_u32": lambda a, b: a + b, "v_sub_u32": lambda a, b: a - b, "v_subrev_u32": lambda a, b: b - a}


def _valu_check(d, name, types) -> str | None:
    """What is wrong with a VALU table row's operands (count, modifiers), or None: it depends on
    the instruction alone, so a translated step (translate.py) checks it once."""
    if len(d.ops) != 1 + len(types):
        return f"{d.mnemonic} takes {1 + len(types)} operands, got {len(d.ops)}"
    sdwa = d.enc == "sdwa"
    allowed = ("dst_sel", "dst_unused", "src0_sel", "src1_sel") if sdwa else ("clamp",) if _clamps(d, name) else ()
    extra = set(d.ops.mods) - set(allowed)
    if extra:
        return f"unsupported modifier {', '.join(sorted(extra))} on {d.mnemonic}"
    if not sdwa:
        for o, t in zip(d.ops.positional[1:], types):
            if (o.neg or o.abs) and t not in _FLOAT_TYPES:
                return f"modifier on {o.text}: an integer source of {d.mnemonic}"
    return None


def _clamps(d, name) -> bool:
    return bool(d.ops.mods.get("clamp")) and name in _CLAMP_U32 and d.enc == "e64"


def _valu(name, types, fn):
    def finish(st, d, vals):
        """The instruction from its sources read: its numbers, provenance and destination."""
        sdwa = d.enc == "sdwa"
        dst, srcs = d.ops[0], d.ops.positional[1:]
        if _clamps(d, name):
            wide = _CLAMP_U32[name](*(np.asarray(v).view(U32).astype(np.int64) for v in vals))
            r = np.clip(wide, 0, 0xFFFFFFFF).astype(U32)
        else:
            r = np.asarray(fn(*vals))
            r = r.view(U32) if r.dtype.itemsize == 4 else r.astype(U32)
        keep = dequant.fresh(st, srcs[0]) if name in dequant.KEEPS and not sdwa else None
        prov = _result_prov(st, d, name, srcs)
        if sdwa:
            r = sdwa_dst(st, d, dst, r)
            if d.ops.mods.get("dst_sel", "DWORD") != "DWORD" and prov is not None:
                prov = sdwa_dst_prov(st, d, dst, prov)
        if prov is None:
            put(st, dst, r, decided=True)
        else:
            st.vwrite_value(dst.file, dst.first, VGPRs(st.w, r[None, :].copy(), "u32", prov, regs=(dst.first, 1)))
        if keep is not None:
            st.set_fresh(dst.file, dst.first, keep[None, :])

    @op(name)
    def run(st, d):
        wrong = _valu_check(d, name, types)
        if wrong is not None:
            raise st.error(wrong)
        srcs = d.ops.positional[1:]
        if d.enc == "sdwa":
            vals = [_sdwa_src(st, d, k, o, t) for k, (o, t) in enumerate(zip(srcs, types))]
        else:
            vals = [_read(st, o, t) for o, t in zip(srcs, types)]
        finish(st, d, vals)

    def prepare(d):
        """The step of one instruction, its operand checks made and its sources' reads decided
        (None: a check fails, and run names what is wrong when a wave gets there)."""
        if _valu_check(d, name, types) is not None:
            return None
        srcs = d.ops.positional[1:]
        if d.enc == "sdwa":                 # the function itself, its static checks made (a block may write
            return (lambda st: run(st, d)) if vdst_ok(d.ops[0]) and _sdwa_inline(d, fn, types) else None  # its template)
        reads = [reader(o, t) for o, t in zip(srcs, types)]
        if None in reads or not vdst_ok(d.ops[0]):
            return None
        done = finish if _clamps(d, name) else _lean_finish(d, name, fn, finish)
        if len(reads) == 1:
            r0, = reads
            return lambda st: done(st, d, (r0(st),))
        if len(reads) == 2:
            r0, r1 = reads
            return lambda st: done(st, d, (r0(st), r1(st)))
        return lambda st: done(st, d, [r(st) for r in reads])

    def inline(d):
        """The step's lean work for a block's source (semantics.Inline): the sources as prepare
        reads them, the entry's numbers, the words as _lean_finish writes them."""
        if _valu_check(d, name, types) is not None or _clamps(d, name) or not vdst_ok(d.ops[0]):
            return None
        if d.enc == "sdwa":
            return _sdwa_inline(d, fn, types)
        srcs = d.ops.positional[1:]
        forms = [source(o, t) for o, t in zip(srcs, types)]
        if None in forms:
            return None
        dst, src0 = d.ops[0], srcs[0]
        keep = (lambda st: dequant.fresh(st, src0)) if name in dequant.KEEPS else None
        return Inline(zip(forms, types), _words_of(fn), (dst.file, dst.first, 1), keep)

    run.prepare = prepare
    run.inline = inline
    return run


def _sdwa_inline(d, fn, types):
    """An SDWA row's lean work for a block's source (semantics.Inline): each source as _sdwa_src
    reads it (sdwa_select), the entry's numbers, the result placed as sdwa_dst places it (the
    destination read as one more source where UNUSED_PRESERVE keeps its bits); None where the
    function refuses the form (it names what is wrong)."""
    mods, dst = d.ops.mods, d.ops[0]
    forms, picks = [], []
    for k, (o, t) in enumerate(zip(d.ops.positional[1:], types)):
        sel = mods.get(f"src{k}_sel", "DWORD")
        if (o.kind != "reg" and sel != "DWORD") or (sel == "DWORD" and o.sext) or (t == "f32" and sel != "DWORD"):
            return None
        form = source(replace(o, sext=False), t)
        if form is None:
            return None
        forms.append((form, t))
        picks.append((sel, bool(o.sext), t))
    sel, unused = mods.get("dst_sel", "DWORD"), mods.get("dst_unused", "UNUSED_PAD")
    if sel != "DWORD" and unused == "UNUSED_PRESERVE":
        forms.append((((dst.file, dst.first), (False, False)), "u32"))
    words = _words_of(fn)

    def call(*vals):
        xs = [v if t == "f32" else sdwa_select(v.view(U32), p, x).view(I32 if t == "i32" else U32)
              for v, (p, x, t) in zip(vals, picks)]
        return sdwa_place(words(*xs), sel, unused, vals[-1] if len(vals) > len(picks) else None)
    return Inline(forms, call, (dst.file, dst.first, 1))


def _words_of(fn):
    """fn's result as the uint32 words a register takes (as _lean_finish converts it)."""
    def call(*vals):
        r = np.asarray(fn(*vals))
        return r.view(U32) if r.dtype.itemsize == 4 else r.astype(U32)
    return call


def _lean_finish(d, name, fn, finish):
    """finish for a prepared step whose destination is one VGPR/AGPR, not SDWA, not clamped: without
    provenance (st.lean) the result's words go straight into the register file (what finish's
    put does when the rule gives no provenance), else finish itself."""
    dst, src0 = d.ops[0], d.ops.positional[1]
    f, i = dst.file, dst.first
    keeps = name in dequant.KEEPS

    def done(st, d, vals):
        if not st.lean:
            return finish(st, d, vals)
        keep = dequant.fresh(st, src0) if keeps else None
        r = np.asarray(fn(*vals))
        st.vwrite(f, i, r.view(U32) if r.dtype.itemsize == 4 else r.astype(U32))
        if keep is not None:
            st.set_fresh(f, i, keep[None, :])
    return done


for _n, (_t, _fn) in VALU.items():
    _valu(_n, _t, _fn)


def _mac_math(mnemonic: str):
    """(acc, x, y) -> f32 D of v_fmac_f32 (fused) or v_mac_f32 (gfx9, not fused: the product
    rounded first): the function, its step and its block template compute it here."""
    if mnemonic == "v_fmac_f32":
        fma = isa.entry("v_fma_f32").fn
        return lambda acc, x, y: fma(x, y, acc)

    def mac(acc, x, y):
        with np.errstate(all="ignore"):
            return (x * y + acc).astype(F32)
    return mac


@op("v_fmac_f32", "v_mac_f32")
def v_fmac_f32(st, d):
    """D = S0*S1 + D: fused for fmac; v_mac_f32 (gfx9, not fused) rounds the product first."""
    no_mods(st, d)
    dst, a, b = d.ops.positional
    r = _mac_math(d.mnemonic)(f32(st, dst), f32(st, a), f32(st, b))
    put_prov(st, dst, r.view(U32), _result_prov(st, d, "v_fma_f32", (a, b, dst)))


def _fmac_form(d, operand):
    """The destination and the forms ``operand`` gives (reader for a step, source for a block's
    source) of D, S0 and S1 as f32; None where the checks refuse the form."""
    if d.ops.mods or len(d.ops.positional) != 3 or d.enc not in ("e32", "e64", ""):
        return None
    dst, a, b = d.ops.positional
    got = [operand(o, "f32") for o in (dst, a, b)]
    if None in got or not vdst_ok(dst):
        return None
    return dst, got


def _fmac_prepare(d):
    """v_fmac_f32 / v_mac_f32's step: without provenance its sources read as a VALU row's are and
    its result written as words; with provenance (or a form the checks refuse) the function above."""
    form = _fmac_form(d, reader)
    if form is None:
        return None
    dst, (r_acc, r_a, r_b) = form
    math = _mac_math(d.mnemonic)
    f, i = dst.file, dst.first

    def step(st):
        if not st.lean:
            return v_fmac_f32(st, d)
        st.vwrite(f, i, math(r_acc(st), r_a(st), r_b(st)).view(U32))
    return step


v_fmac_f32.prepare = _fmac_prepare


def _fmac_inline(d):
    """_fmac_prepare's lean work for a block's source (semantics.Inline)."""
    form = _fmac_form(d, source)
    if form is None:
        return None
    dst, forms = form
    math = _mac_math(d.mnemonic)
    return Inline(zip(forms, ("f32",) * 3), lambda acc, x, y: math(acc, x, y).view(U32), (dst.file, dst.first, 1))


v_fmac_f32.inline = _fmac_inline


@op("v_fmamk_f32", "v_fmaak_f32", "v_madmk_f32", "v_madak_f32")
def v_fma_k_f32(st, d):
    """D = a*b + c in the printed operand order (mk: S0, K, S1; ak: S0, S1, K; K the literal):
    fused for fma*, the product rounded first for the gfx9 mad* forms."""
    no_mods(st, d)
    dst, a, b, c = d.ops.positional
    srcs = (a, b, c)
    x, y, z = (f32(st, o) for o in srcs)
    if d.mnemonic.startswith("v_fma"):
        r = isa.entry("v_fma_f32").fn(x, y, z)
    else:
        with np.errstate(all="ignore"):
            r = (x * y + z).astype(F32)
    put_prov(st, dst, r.view(U32), _result_prov(st, d, "v_fma_f32", srcs))


@op("v_nop")
def v_nop(st, d):
    no_mods(st, d)


# -- moves: VGPR sources move their bytes' provenance ----------------------------------------
def _move(st, dst, src, n):
    if src.kind == "reg" and src.file in "va" and not (src.neg or src.abs or src.sext):
        if src.count != n:
            raise st.error(f"source {src.text}: {n} register(s) expected")
        if st.lean and not src.dpp:                 # no provenance: words, written bits, fresh marks
            st.vcopy(dst.file, dst.first, src.file, src.first, n)
            return
        keep = st.dpp.fresh.copy() if src.dpp else st.fresh[src.file][src.first:src.first + n].copy()
        st.vwrite_value(dst.file, dst.first, vsrc(st, src, n))
        st.set_fresh(dst.file, dst.first, keep)
    elif n == 1:
        put(st, dst, u32(st, src))
    else:
        put64(st, dst, u64(st, src))


@op("v_mov_b32")
def v_mov_b32(st, d):
    if d.enc == "sdwa":
        return _valu_sdwa_mov(st, d)
    no_mods(st, d)
    _move(st, d.ops[0], d.ops[1], 1)


def _valu_sdwa_mov(st, d):
    """An SDWA move routes bytes: the selected source field (zero- or sign-extended) lands in the
    destination field, with the old register's bytes around it where dst_unused preserves them."""
    no_mods(st, d, ("dst_sel", "dst_unused", "src0_sel"))
    dst, src = d.ops[0], d.ops[1]
    r = sdwa_dst(st, d, dst, _sdwa_src(st, d, 0, src, "u32"))
    prov = None
    if st.w.provenance and src.kind == "reg" and src.file in "va":
        prov = _src_values(st, d, [src])[0].prov
        if prov is not None and d.ops.mods.get("dst_sel", "DWORD") != "DWORD":
            prov = sdwa_dst_prov(st, d, dst, prov)
        elif prov is None and d.ops.mods.get("dst_unused") == "UNUSED_PRESERVE":
            prov = sdwa_dst_prov(st, d, dst, Prov(1, {}))
    if prov is None:
        put(st, dst, r, decided=True)
    else:
        st.vwrite_value(dst.file, dst.first, VGPRs(st.w, r[None, :].copy(), "u32", prov, regs=(dst.first, 1)))


@op("v_mov_b64")
def v_mov_b64(st, d):
    no_mods(st, d)
    _move(st, d.ops[0], d.ops[1], 2)


@op("v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_accvgpr_mov_b32")
def v_accvgpr(st, d):
    no_mods(st, d)
    want = {"v_accvgpr_read_b32": ("v", "a"), "v_accvgpr_write_b32": ("a", "v"),
            "v_accvgpr_mov_b32": ("a", "a")}[d.mnemonic]
    dst, src = d.ops.positional
    if dst.kind != "reg" or dst.file != want[0] or (src.kind == "reg" and src.file not in (want[1], "s")):
        raise st.error(f"{d.mnemonic} moves {want[1]} -> {want[0]}, got {src.text} -> {dst.text}")
    _move(st, dst, src, 1)


def _move_step(d, dst, src, fn):
    """A 32-bit move's step without provenance: a VGPR/AGPR source copied with its written bits and
    fresh marks (vcopy), a constant or SGPR written as put writes it; with provenance, or a source
    form _move refuses or reads otherwise, the function."""
    if d.ops.mods or d.enc not in ("e32", "e64", "") or not vdst_ok(dst):
        return None
    f, i = dst.file, dst.first
    if src.kind == "reg" and src.file in "va":
        if src.count != 1 or src.neg or src.abs or src.sext or src.dpp:
            return None
        sf, si = src.file, src.first

        def step(st):
            if not st.lean:
                return fn(st, d)
            st.vcopy(f, i, sf, si, 1)
        return step
    r = reader(src)
    if r is None:
        return None

    def step(st):
        if not st.lean:
            return fn(st, d)
        st.vwrite(f, i, r(st))
    return step


v_mov_b32.prepare = lambda d: None if len(d.ops.positional) != 2 else _move_step(d, *d.ops.positional, v_mov_b32)


def _move_inline(d):
    """_move_step's lean work for a block's source (semantics.Inline): a constant or an SGPR
    written as words, a register copied with its written bits and fresh marks (vcopy)."""
    if len(d.ops.positional) != 2 or d.ops.mods or d.enc not in ("e32", "e64", ""):
        return None
    return _move_inline_of(*d.ops.positional)


def _move_inline_of(dst, src):
    if not vdst_ok(dst):
        return None
    if src.kind == "reg" and src.file in "va":
        if src.count != 1 or src.neg or src.abs or src.sext or src.dpp or src.first < 0:
            return None
        return Inline([(((src.file, src.first), (False, False)), "u32")], None, (dst.file, dst.first, 1), copy=True)
    form = source(src)
    return None if form is None else Inline([(form, "u32")], _same, (dst.file, dst.first, 1))


def _same(x):
    return x


v_mov_b32.inline = _move_inline


def _accvgpr_prepare(d):
    if len(d.ops.positional) != 2:
        return None
    want = {"v_accvgpr_read_b32": ("v", "a"), "v_accvgpr_write_b32": ("a", "v"),
            "v_accvgpr_mov_b32": ("a", "a")}[d.mnemonic]
    dst, src = d.ops.positional
    if dst.kind != "reg" or dst.file != want[0] or (src.kind == "reg" and src.file not in (want[1], "s")):
        return None
    return _move_step(d, dst, src, v_accvgpr)


v_accvgpr.prepare = _accvgpr_prepare


def _accvgpr_inline(d):
    """_accvgpr_prepare's lean work for a block's source (semantics.Inline)."""
    if len(d.ops.positional) != 2 or d.ops.mods or d.enc not in ("e32", "e64", ""):
        return None
    want = {"v_accvgpr_read_b32": ("v", "a"), "v_accvgpr_write_b32": ("a", "v"),
            "v_accvgpr_mov_b32": ("a", "a")}[d.mnemonic]
    dst, src = d.ops.positional
    if dst.kind != "reg" or dst.file != want[0] or (src.kind == "reg" and src.file not in (want[1], "s")):
        return None
    return _move_inline_of(dst, src)


v_accvgpr.inline = _accvgpr_inline


@op("v_readfirstlane_b32")
def v_readfirstlane_b32(st, d):
    no_mods(st, d)
    dst, src = d.ops.positional
    if dst.kind != "reg" or dst.file != "s" or dst.count != 1:
        raise st.error(f"v_readfirstlane_b32 writes an SGPR, got {dst.text}")
    ex = st.exec.reshape(st.members, st.lanes)
    lane = np.argmax(ex, axis=1)                   # each member's first active lane (0 if none)
    if st.w.provenance and src.kind == "reg" and src.file in "va":
        st.taint_s = lanes_carry_identity(st, st.vread(src.file, src.first, 1), np.arange(st.members) * st.lanes + lane)
    st.swrite(dst.first, u32(st, src).reshape(st.members, st.lanes)[np.arange(st.members), lane])


def lanes_carry_identity(st, v, cols) -> np.ndarray | None:
    """Per member: whether the value's bytes in column ``cols[m]`` carry an identity (an SGPR
    cannot hold it: origin.py); None where none does."""
    if v.prov is None:
        return None
    p = v.prov.per_byte()
    if st.w.fold is not None:                      # folded columns: the whole register decides
        out = np.full(st.members, bytes_carry_identity(p), bool)
    else:
        out = columns_carry_identity(p, st.members * st.lanes)[cols]
    return out if out.any() else None


@op("v_perm_b32")
def v_perm_b32(st, d):
    """D = byte_permute({S0, S1}, S2) through the back end (each byte's provenance routed)."""
    no_mods(st, d)
    dst, s0, s1, sel = d.ops.positional
    for o in (s0, s1):
        if o.neg or o.abs or o.sext:
            raise st.error(f"modifier on {o.text}: v_perm_b32 takes plain 32-bit sources")
    if st.lean and _written(st, s0) and _written(st, s1):       # no provenance to route, no read to report
        st.vwrite(dst.file, dst.first, byte_permute(u32(st, s0), u32(st, s1), u32(st, sel))[0])
        return
    a, b = (value_of(st, o) for o in (s0, s1))
    r = st.w.perm(a, b, VGPRs(st.w, u32(st, sel)[None, :].copy(), "u32", literal=True))
    st.vwrite_value(dst.file, dst.first, r)


def _written(st, o) -> bool:
    """Whether a 32-bit source has every byte written in every lane (a constant or SGPR always)."""
    return o.kind != "reg" or o.file not in "va" or st.vall_written(o.file, o.first)


def put_prov(st, dst, words, prov):
    """Write one register's words with ``prov`` (None: no identity)."""
    if prov is None:
        put(st, dst, words, decided=True)
    else:
        st.vwrite_value(dst.file, dst.first, VGPRs(st.w, np.asarray(words, U32)[None, :].copy(), "u32", prov,
                                                   regs=(dst.first, 1)))


def value_of(st, o) -> VGPRs:
    """A 32-bit source as a back-end value: a VGPR with its provenance (a -/|| modifier changes
    the sign bit, not whose value it is), else the plain word."""
    if o.kind == "reg" and o.file in "va":
        if o.count != 1:
            raise st.error(f"operand {o.text}: one 32-bit register expected")
        return vsrc(st, o)
    return VGPRs(st.w, u32(st, o, mods_ok=True)[None, :].copy(), "u32", literal=True)


@op("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32")
def v_mbcnt(st, d):
    """D = popcount(S0 & lanes below this one, in the low / high 32 lanes) + S1."""
    no_mods(st, d)
    dst, s0, s1 = d.ops.positional
    a, b = u32(st, s0).astype(np.uint64), u32(st, s1)
    lane = np.arange(st.w.width) % st.lanes
    below = np.where(lane >= 64, U64(0xFFFFFFFFFFFFFFFF), (U64(1) << lane.astype(U64)) - U64(1))
    part = below & U64(0xFFFFFFFF) if d.mnemonic.endswith("lo_u32_b32") else below >> U64(32)
    cnt = np.bitwise_count(a & part).astype(U32)
    put(st, dst, cnt + b)


# -- 64-bit -------------------------------------------------------------------------------------
@op("v_lshl_add_u64")
def v_lshl_add_u64(st, d):
    """D = (S0 << S1[2:0]) + S2 (gfx940: the shift is 0..4)."""
    no_mods(st, d)
    dst, a, s, c = d.ops.positional
    sh = u32(st, s).astype(U64) & U64(7)
    if (sh[st.exec] > 4).any():
        raise st.error("v_lshl_add_u64 shift above 4")
    put64(st, dst, (u64(st, a) << sh) + u64(st, c))


def lshl_add_form(d, operand):
    """A constant shift (clang's form): the destination, the two addends as ``operand`` takes them
    (reader64 for a step, source64 for a block's source) and the shift; None for any other form."""
    if d.ops.mods or len(d.ops.positional) != 4:
        return None
    dst, a, s, c = d.ops.positional
    ra, rc = operand(a), operand(c)
    if s.kind != "int" or s.neg or s.abs or s.sext or (s.value & 7) > 4 or ra is None or rc is None \
            or not vdst_ok(dst, 2):
        return None
    return dst, ra, rc, U64(s.value & 7)


def _lshl_add_prepare(d):
    """The step of a constant shift: without provenance the sum's words written as put64 writes
    them; with provenance, another shift or a form the function refuses, the function."""
    form = lshl_add_form(d, reader64)
    if form is None:
        return None
    dst, ra, rc, sh = form
    f, i = dst.file, dst.first

    def step(st):
        if not st.lean:
            return v_lshl_add_u64(st, d)
        st.vwrite(f, i, words64((ra(st) << sh) + rc(st)))
    return step


v_lshl_add_u64.prepare = _lshl_add_prepare


def _lshl_add_inline(d):
    """_lshl_add_prepare's lean work for a block's source (semantics.Inline)."""
    form = lshl_add_form(d, source64)
    if form is None:
        return None
    dst, fa, fc, sh = form
    return Inline([(fa, "u64"), (fc, "u64")], lambda x, y: words64((x << sh) + y), (dst.file, dst.first, 2))


v_lshl_add_u64.inline = _lshl_add_inline


@op("v_lshlrev_b64", "v_lshrrev_b64", "v_ashrrev_i64")
def v_shift64(st, d):
    no_mods(st, d)
    dst, s, a = d.ops.positional
    sh = u32(st, s).astype(U64) & U64(63)
    x = u64(st, a)
    if d.mnemonic == "v_lshlrev_b64":
        r = x << sh
    elif d.mnemonic == "v_lshrrev_b64":
        r = x >> sh
    else:
        r = (x.view(np.int64) >> sh.astype(np.int64)).view(U64)
    prov = None
    uniform = s.kind != "reg" or s.file == "s"
    if st.w.provenance and uniform and a.kind == "reg" and a.file in "va":
        v = st.vread(a.file, a.first, 2, "i64" if d.mnemonic == "v_ashrrev_i64" else "u64")
        if v.prov is not None:     # a uniform shift routes the bytes (the back end's rule, routing.py)
            kind = "shl" if d.mnemonic == "v_lshlrev_b64" else "shr"
            prov = by_sgpr_value(st, (s,), lambda split: shift_prov(
                v.prov.per_byte(), int(u32(st, s)[0]) & 63, 8, kind, v.dtype, 1, st.w.pw, st.w.machine.wide))
    if prov is None:
        put64(st, dst, r)
    else:
        st.vwrite_value(dst.file, dst.first, VGPRs(st.w, r[None, :].copy(), "u64", prov, regs=(dst.first, 2)))


def _shift64_prepare(d):
    """The step of a constant shift: without provenance the shifted words written as put64 writes
    them; with provenance (the bytes' routes) or another form, the function."""
    if d.ops.mods or len(d.ops.positional) != 3:
        return None
    dst, s, a = d.ops.positional
    ra = reader64(a)
    if s.kind != "int" or s.neg or s.abs or s.sext or ra is None or not vdst_ok(dst, 2):
        return None
    sh, f, i, m = U64(s.value & 63), dst.file, dst.first, d.mnemonic

    def step(st):
        if not st.lean:
            return v_shift64(st, d)
        x = ra(st)
        if m == "v_lshlrev_b64":
            r = x << sh
        elif m == "v_lshrrev_b64":
            r = x >> sh
        else:
            r = (x.view(np.int64) >> sh.astype(np.int64)).view(U64)
        st.vwrite(f, i, words64(r))
    return step


v_shift64.prepare = _shift64_prepare


@op("v_mad_u64_u32", "v_mad_i64_i32")
def v_mad64(st, d):
    """{D, carry} = S0 * S1 + S2 (64-bit): the carry out of the 64-bit sum goes to the SGPR pair."""
    no_mods(st, d)
    dst, sd, a, b, c = d.ops.positional
    x, y = u32(st, a), u32(st, b)
    z = u64(st, c)
    if d.mnemonic == "v_mad_u64_u32":
        p = x.astype(U64) * y.astype(U64)            # exact: below 2^64
        tot = p + z                                  # wraps modulo 2^64
        carry = tot < p
    else:
        p = (_i(x).astype(np.int64) * _i(y).astype(np.int64)).view(U64)
        tot = p + z
        # signed overflow of p + z: both operands' signs differ from the sum's
        carry = (((p ^ tot) & (z ^ tot)) >> U64(63)).astype(bool)
    put64(st, dst, tot)
    sdst_mask(st, sd, carry & st.exec)


# -- carries: VOP2 (vcc) and VOP3b (an SGPR pair) forms alike --------------------------------------
def _carry(name, fn, has_in):
    @op(name)
    def run(st, d):
        no_mods(st, d)
        ops = d.ops.positional
        if len(ops) != (5 if has_in else 4):
            raise st.error(f"{d.mnemonic} takes {5 if has_in else 4} operands, got {len(ops)}")
        dst, cout, a, b = ops[:4]
        cin = mask_src(st, ops[4]).astype(np.int64) if has_in else 0
        x, y = u32(st, a).astype(np.int64), u32(st, b).astype(np.int64)
        r, c = fn(x, y, cin)
        prov = None         # an add or subtract: the rule of the 32-bit one without carry
        if st.w.provenance and any(o.kind == "reg" and o.file in "va" for o in (a, b)):
            prov = arith_prov(st, "v_sub_u32" if "sub" in name else "v_add_u32", [value_of(st, a), value_of(st, b)])
        put_prov(st, dst, (r & 0xFFFFFFFF).astype(U32), prov)
        sdst_mask(st, cout, c & st.exec)
    return run


_carry("v_add_co_u32", lambda a, b, c: (a + b, a + b > 0xFFFFFFFF), False)
_carry("v_sub_co_u32", lambda a, b, c: (a - b, b > a), False)
_carry("v_subrev_co_u32", lambda a, b, c: (b - a, a > b), False)
_carry("v_addc_co_u32", lambda a, b, c: (a + b + c, a + b + c > 0xFFFFFFFF), True)
_carry("v_subb_co_u32", lambda a, b, c: (a - b - c, b + c > a), True)
_carry("v_subbrev_co_u32", lambda a, b, c: (b - a - c, a + c > b), True)


@op("v_cndmask_b32")
def v_cndmask_b32(st, d):
    """D = mask ? S1 : S0; the mask is VCC (e32, SDWA) or the SGPR pair operand (e64). SDWA selects
    a field of each source (a 16-bit half: WORD_0/WORD_1) and places the result's field."""
    sdwa = d.enc == "sdwa"
    no_mods(st, d, ("dst_sel", "dst_unused", "src0_sel", "src1_sel") if sdwa else ())
    dst, a, b, m = d.ops.positional
    mask = mask_src(st, m)
    if sdwa:
        x, y = (_sdwa_src(st, d, k, o, "u32") for k, o in enumerate((a, b)))
    else:
        x, y = f32(st, a).view(U32), f32(st, b).view(U32)
    prov = None
    if st.w.provenance and any(o.kind == "reg" and o.file in "va" for o in (a, b)):
        va, vb = _src_values(st, d, (a, b)) if sdwa else (value_of(st, a), value_of(st, b))
        if va.prov is not None or vb.prov is not None:      # each lane's value keeps its identity
            cond = st.w.pcols(mask[None, :], "a v_cndmask_b32 mask")
            if not sdwa and all(v.prov is None or v.prov.g == 4 for v in (va, vb)):
                # whole words move: each byte takes its word's provenance, so selecting the words'
                # is the per-byte select, written per element
                prov = Prov.select(cond, vb.prov, va.prov, (1, st.w.pw))
            else:                                                                 # a byte move: per byte
                prov = Prov.select(cond, None if vb.prov is None else vb.prov.per_byte(),
                                   None if va.prov is None else va.prov.per_byte(), (4, st.w.pw))
    r = isa.entry("v_cndmask_b32").fn(x, y, mask)
    if sdwa:
        r = sdwa_dst(st, d, dst, r)
        if d.ops.mods.get("dst_sel", "DWORD") != "DWORD" and (prov is not None or (
                st.w.provenance and d.ops.mods.get("dst_unused") == "UNUSED_PRESERVE"
                and st.vread(dst.file, dst.first, 1).prov is not None)):
            prov = sdwa_dst_prov(st, d, dst, prov if prov is not None else Prov(1, {}))
    put_prov(st, dst, r, prov)


def _cndmask_prepare(d):
    """The step of the e32/e64 forms: without provenance the selected words written as put_prov
    writes them (no rule gives a provenance then); with provenance, SDWA or a form the function
    refuses, the function."""
    if d.enc == "sdwa" or d.ops.mods or len(d.ops.positional) != 4:
        return None
    dst, a, b, m = d.ops.positional
    ra, rb = reader(a, "f32"), reader(b, "f32")
    if ra is None or rb is None or m.kind != "reg" or m.file != "s" or m.count != 2 or not vdst_ok(dst):
        return None
    fn, f, i, mi = isa.entry("v_cndmask_b32").fn, dst.file, dst.first, m.first

    def step(st):
        if not st.lean:
            return v_cndmask_b32(st, d)
        st.vwrite(f, i, fn(ra(st).view(U32), rb(st).view(U32), st.mask_of(mi)))
    return step


v_cndmask_b32.prepare = _cndmask_prepare


def _cndmask_inline(d):
    """_cndmask_prepare's lean work for a block's source (semantics.Inline)."""
    if d.enc == "sdwa" or d.ops.mods or len(d.ops.positional) != 4:
        return None
    dst, a, b, m = d.ops.positional
    forms = [source(a, "f32"), source(b, "f32"), mask_source(m)]
    if None in forms or not vdst_ok(dst):
        return None
    fn = isa.entry("v_cndmask_b32").fn

    def call(x, y, mask):
        return np.asarray(fn(x.view(U32), y.view(U32), mask)).astype(U32, copy=False)
    return Inline(zip(forms, ("f32", "f32", "mask")), call, (dst.file, dst.first, 1))


v_cndmask_b32.inline = _cndmask_inline


# -- compares: v_cmp[x]_<op>_<type>, the table's "cmp" entries ----------------------------------------
def _cmp(name, x, rel, t):
    @op(name)
    def run(st, d):
        sdwa = d.enc == "sdwa"
        no_mods(st, d, ("src0_sel", "src1_sel") if sdwa else ())
        dst, a, b = d.ops.positional
        if sdwa and t in ("f32", "i32", "u32"):          # a byte or word of each source, extended
            va, vb = (_sdwa_src(st, d, k, o, t) for k, o in enumerate((a, b)))
        elif t == "f32":
            va, vb = f32(st, a), f32(st, b)
        elif t == "f64":
            va, vb = f64(st, a), f64(st, b)
        elif t in ("i32", "u32"):
            va, vb = u32(st, a), u32(st, b)
            if t == "i32":
                va, vb = va.view(I32), vb.view(I32)
        else:
            va, vb = u64(st, a), u64(st, b)
            if t == "i64":
                va, vb = va.view(np.int64), vb.view(np.int64)
        res = np.asarray(rel(va, vb), bool) & st.exec         # inactive lanes write 0
        sdst_mask(st, dst, res)
        if x:
            st.set_exec(res)

    def prepare(d):
        """The step of the e32/e64 forms with 32- or 64-bit integer or f32 sources: the reads decided
        once, the rest as run (a compare writes no register provenance, so one step serves both modes)."""
        if d.enc == "sdwa" or d.ops.mods or len(d.ops.positional) != 3:
            return None
        dst, a, b = d.ops.positional
        if t in ("f32", "i32", "u32"):
            ra, rb = reader(a, t), reader(b, t)
        elif t in ("u64", "i64"):
            ra, rb = reader64(a), reader64(b)
        else:
            return None
        if ra is None or rb is None or dst.kind != "reg" or dst.file != "s" or dst.count != 2:
            return None
        signed64, first = t == "i64", dst.first

        def step(st):
            va, vb = ra(st), rb(st)
            if signed64:
                va, vb = va.view(np.int64), vb.view(np.int64)
            res = np.asarray(rel(va, vb), bool) & st.exec
            st.set_mask(first, res)
            if x:
                st.set_exec(res)
        return step

    def inline(d):
        """prepare's work for a block's source (semantics.Inline): the sources as prepare reads them,
        the relation's lanes under EXEC written to the SGPR pair (and EXEC, for v_cmpx)."""
        if prepare(d) is None:
            return None
        dst, a, b = d.ops.positional
        if t in ("f32", "i32", "u32"):
            forms, tt = [source(a, t), source(b, t)], t
        else:
            forms, tt = [source64(a), source64(b)], "u64"
        if None in forms:
            return None
        if t == "i64":
            def call(va, vb):
                return rel(va.view(np.int64), vb.view(np.int64))
        else:
            call = rel
        return Inline([(forms[0], tt), (forms[1], tt)], call, ("mask", dst.first, x))

    run.prepare = prepare
    run.inline = inline
    return run


for _e in isa.asm_entries("cmp"):
    _cmp(_e.mnemonic, _e.mnemonic.startswith("v_cmpx_"), _e.fn, _e.srcs[0])


# -- the division helpers ---------------------------------------------------------------------------
@op("v_div_scale_f32")
def v_div_scale_f32(st, d):
    no_mods(st, d)
    dst, sd, a, b, c = d.ops.positional
    r, vcc = isa.entry("v_div_scale_f32").fn(f32(st, a), f32(st, b), f32(st, c))
    put_prov(st, dst, r.view(U32), _result_prov(st, d, "v_div_scale_f32", (a,)))      # S0, scaled
    sdst_mask(st, sd, vcc & st.exec)


@op("v_div_fmas_f32")
def v_div_fmas_f32(st, d):
    """D = fma(S0, S1, S2) where VCC is clear. Where VCC is set (div_scale scaled one side of the
    division: exponents 96 or more apart, a denominator above 2^126, a subnormal quotient) the ISA
    scales the result by 2^64 or 2^-64; the published pseudocode of that choice is known to be
    inexact, so a lane where it would change a finite non-zero result raises instead of guessing.
    (A zero, infinite or NaN result is the same under either scale; v_div_fixup then decides.)"""
    no_mods(st, d)
    dst, a, b, c = d.ops.positional
    r = isa.entry("v_div_fmas_f32").fn(f32(st, a), f32(st, b), f32(st, c))
    vcc = st.mask_of(106) & st.exec & np.isfinite(r) & (r != 0)
    if vcc.any():
        raise st.error("v_div_fmas_f32 with VCC set (a quotient div_scale scaled on one side: operands 2^96 "
                       "apart, a denominator above 2^126 or a subnormal quotient) is not modelled",
                       lane=int(np.argmax(vcc)))
    put_prov(st, dst, r.view(U32), _result_prov(st, d, "v_div_fmas_f32", (a, b, c)))


@op("v_div_fixup_f32")
def v_div_fixup_f32(st, d):
    no_mods(st, d)
    dst, a, b, c = d.ops.positional
    r, under = isa.entry("v_div_fixup_f32").fn(f32(st, a), f32(st, b), f32(st, c))
    under &= st.exec
    if under.any():
        raise st.error("v_div_fixup_f32: a quotient below 2^-150 (the ISA's underflow case) is not modelled",
                       lane=int(np.argmax(under)))
    put_prov(st, dst, r.view(U32), _result_prov(st, d, "v_div_fixup_f32", (a, b, c)))


def _div_prepare(fn, scale: bool):
    """The division helpers' steps: without provenance their sources read as decided once and the
    result written as put_prov writes it (no rule gives a provenance then); the lanes' checks and
    VCC as the functions make them. With provenance, or a form the function refuses, the function."""
    name = fn.__name__

    def prepare(d):
        pos = d.ops.positional
        if d.ops.mods or len(pos) != (5 if scale else 4):
            return None
        dst, srcs = pos[0], pos[-3:]
        reads = [reader(o, "f32") for o in srcs]
        sd = pos[1] if scale else None
        if None in reads or not vdst_ok(dst) or (scale and (sd.kind != "reg" or sd.file != "s" or sd.count != 2)):
            return None
        entry = isa.entry(name).fn
        f, i = dst.file, dst.first
        ra, rb, rc = reads

        def step(st):
            if not st.lean:
                return fn(st, d)
            x, y, z = ra(st), rb(st), rc(st)
            if name == "v_div_scale_f32":
                r, vcc = entry(x, y, z)
                st.vwrite(f, i, r.view(U32))
                st.set_mask(sd.first, vcc & st.exec)
                return
            if name == "v_div_fmas_f32":
                r = entry(x, y, z)
                bad = st.mask_of(106) & st.exec & np.isfinite(r) & (r != 0)
                if bad.any():
                    return fn(st, d)              # the function names the lanes
            else:
                r, under = entry(x, y, z)
                if (under & st.exec).any():
                    return fn(st, d)
            st.vwrite(f, i, r.view(U32))
        return step
    fn.prepare = prepare


_div_prepare(v_div_scale_f32, True)
_div_prepare(v_div_fmas_f32, False)
_div_prepare(v_div_fixup_f32, False)


# -- packed fp32 (gfx940 VOP3P on register pairs) ------------------------------------------------------
# each half is the scalar instruction's entry
PK = {"v_pk_mul_f32": (2, isa.entry("v_mul_f32").fn), "v_pk_add_f32": (2, isa.entry("v_add_f32").fn),
      "v_pk_fma_f32": (3, isa.entry("v_fma_f32").fn)}


def _pk(name, n, fn):
    @op(name)
    def run(st, d):
        no_mods(st, d, ("op_sel", "op_sel_hi", "neg_lo", "neg_hi"))
        if len(d.ops) != n + 1:
            raise st.error(f"{d.mnemonic} takes {n + 1} operands, got {len(d.ops)}")
        mods = d.ops.mods
        sel = mods.get("op_sel", (0,) * n)
        sel_hi = mods.get("op_sel_hi", (1,) * n)
        neg_lo = mods.get("neg_lo", (0,) * n)
        neg_hi = mods.get("neg_hi", (0,) * n)
        for m in (sel, sel_hi, neg_lo, neg_hi):
            if len(m) != n:
                raise st.error(f"{d.mnemonic}: op_sel/neg lists must have {n} entries")
        dst, srcs = d.ops[0], d.ops.positional[1:]
        halves = []
        for k, o in enumerate(srcs):
            if o.kind in ("int", "float") and not (o.neg or o.abs):
                # an inline constant is the low half; which value a half-select of 1 reads is not
                # settled here, so it is allowed only where it reads the low half or the constant is 0
                c = const32(st, o)
                if c != 0 and (sel[k] or sel_hi[k]):
                    raise st.error(f"{d.mnemonic}: the high half of the constant {o.text} is not modelled")
                halves.append([np.full(st.w.width, c, U32), np.full(st.w.width, c, U32)])
                continue
            if o.kind != "reg" or o.count != 2 or o.neg or o.abs:
                raise st.error(f"{d.mnemonic}: source {o.text} must be a register pair or an inline constant "
                               "(-/|| forms of packed fp32 sources are not modelled)")
            if o.file == "s":
                halves.append([st.lanewise(st.sread(o.first)), st.lanewise(st.sread(o.first + 1))])
            else:
                ww = st.vwords(o.file, o.first, 2)
                halves.append([ww[0].copy(), ww[1].copy()])

        def operand(k, hi):
            x = halves[k][(sel_hi if hi else sel)[k]].copy()
            if (neg_hi if hi else neg_lo)[k]:
                x ^= U32(0x80000000)
            return x.view(F32)

        with np.errstate(all="ignore"):
            lo = np.asarray(fn(*[operand(k, False) for k in range(n)]), F32)
            hi = np.asarray(fn(*[operand(k, True) for k in range(n)]), F32)
        words = np.stack([lo.view(U32), hi.view(U32)])
        prov = None
        if st.w.provenance and any(o.kind == "reg" and o.file in "va" for o in srcs):
            scalar = {"v_pk_mul_f32": "v_mul_f32", "v_pk_add_f32": "v_add_f32", "v_pk_fma_f32": "v_fma_f32"}[name]
            halves_p = []
            for hi_half in (False, True):           # each half from the sources' selected halves
                if dst.kind == "reg" and st.kernel.liveness.dead_after(st.pc, dst.file, dst.first + hi_half):
                    halves_p.append(None)           # a half clang lets die: not a value the kernel made
                    continue
                vals, regs = [], []
                for k, o in enumerate(srcs):
                    h = (sel_hi if hi_half else sel)[k]
                    regs.append(replace(o, first=o.first + h, count=1) if o.kind == "reg" else o)
                    vals.append(st.vread(o.file, o.first + h, 1) if o.kind == "reg" and o.file in "va" else
                                VGPRs(st.w, np.zeros((1, st.w.width), U32), "u32", literal=True))
                hit = False
                if scalar in MULTIPLIES:
                    vals, hit = dequant.multiply(st, regs, vals, half=int(hi_half))
                op_h, differ = scalar, None
                neg = neg_hi if hi_half else neg_lo
                if name == "v_pk_add_f32" and neg[0] != neg[1]:      # one side negated: a subtraction
                    op_h = "v_sub_f32" if neg[1] else "v_subrev_f32"
                with np.errstate(all="ignore"):       # a signalling NaN widened, inf * 0: NaNs, no warning
                    x = [operand(k, hi_half).astype(np.float64) for k in range(n)]
                    a_, b_ = (x[0], x[1]) if n == 2 else (x[0] * x[1], x[2])
                if op_h in ("v_add_f32", "v_fma_f32"):               # see addends_differ
                    differ = ((a_.view(np.int64) != b_.view(np.int64)) | (a_ == 0) | (b_ == 0))[None, :]
                halves_p.append(arith_prov(st, op_h, vals, dequantized=hit, differ=differ))
            if any(p_ is not None for p_ in halves_p):
                prov = Prov.concat(halves_p, [1, 1], st.w.pw)
        if prov is None:
            put(st, dst, words, decided=True)
        else:
            st.vwrite_value(dst.file, dst.first, VGPRs(st.w, words.copy(), "u32", prov, regs=(dst.first, 2)))

    def prepare(d):
        """Without provenance (st.lean) both halves at once: each source's selected halves as one
        [2, width] operand (the entry is elementwise), the words written as run's put writes them;
        with provenance, or a form run refuses or reads otherwise, run itself."""
        reads = reads_of(d)
        if reads is None:
            return None
        dst = d.ops[0]

        def operands(st):
            out = []
            for o, c, pick, neg in reads:
                if o is None:
                    x = np.full((2, st.w.width), c, U32)
                elif o.file == "s":
                    h = (st.lanewise(st.sread(o.first)), st.lanewise(st.sread(o.first + 1)))
                    x = np.stack([h[pick[0]], h[pick[1]]])
                else:
                    x = st.vwords(o.file, o.first, 2)[pick]          # a copy
                if neg is not None:
                    x ^= neg
                out.append(x.view(F32))
            return out

        def step(st):
            if not st.lean:
                return run(st, d)
            r = np.asarray(fn(*operands(st)), F32)         # the entries keep their own errstate
            st.vwrite(dst.file, dst.first, r.view(U32))
        return step

    def reads_of(d):
        """Per source (register or None, constant, halves picked, sign flips [2, 1] or None), decided
        once; None where run refuses the form or reads it otherwise."""
        mods = d.ops.mods
        if set(mods) - {"op_sel", "op_sel_hi", "neg_lo", "neg_hi"} or len(d.ops) != n + 1:
            return None
        sel, sel_hi = mods.get("op_sel", (0,) * n), mods.get("op_sel_hi", (1,) * n)
        neg_lo, neg_hi = mods.get("neg_lo", (0,) * n), mods.get("neg_hi", (0,) * n)
        if any(len(m) != n for m in (sel, sel_hi, neg_lo, neg_hi)) or not vdst_ok(d.ops[0], 2):
            return None
        reads = []
        for k, o in enumerate(d.ops.positional[1:]):
            pick = (int(sel[k]), int(sel_hi[k]))
            neg = np.array([[0x80000000 if neg_lo[k] else 0], [0x80000000 if neg_hi[k] else 0]], U32)
            neg = neg if neg.any() else None
            if o.kind in ("int", "float") and not (o.neg or o.abs):
                c = const32(None, o)
                if c != 0 and any(pick):
                    return None
                reads.append((None, c, None, neg))
            elif o.kind == "reg" and o.count == 2 and not (o.neg or o.abs) and o.file in "vas":
                reads.append((o, None, list(pick), neg))
            else:
                return None
        return reads

    def inline(d):
        """prepare's lean work for a block's source (semantics.Inline): each source's register pair
        (or constant) read as operands() reads it, its halves picked and signs flipped in the call."""
        reads = reads_of(d)
        if reads is None:
            return None
        forms, how = [], []
        for o, c, pick, neg in reads:
            if o is None:
                forms.append(((("const", c), (False, False)), "u32"))
            elif o.first < 0:
                return None
            else:
                forms.append((((o.file, o.first), (False, False)), "pair"))
            how.append((pick, neg))

        def call(*xs):
            ops = []
            for x, (pick, neg) in zip(xs, how):
                x = np.stack((x, x)) if pick is None else x[pick]          # a copy either way
                if neg is not None:
                    x ^= neg
                ops.append(x.view(F32))
            return np.asarray(fn(*ops), F32).view(U32)
        dst = d.ops[0]
        return Inline(forms, call, (dst.file, dst.first, 2))

    run.prepare = prepare
    run.inline = inline
    return run


for _n, (_k, _fn) in PK.items():
    _pk(_n, _k, _fn)


@op("v_pk_mov_b32")
def v_pk_mov_b32(st, d):
    """D.lo = S0[op_sel[0]], D.hi = S1[op_sel[1]] (32-bit halves of two register pairs)."""
    no_mods(st, d, ("op_sel",))
    dst, a, b = d.ops.positional
    sel = d.ops.mods.get("op_sel", (0, 0))
    lo = st.vwords(a.file, a.first, 2)[sel[0]].copy() if a.file in "va" else st.lanewise(st.sread(a.first + sel[0]))
    hi = st.vwords(b.file, b.first, 2)[sel[1]].copy() if b.file in "va" else st.lanewise(st.sread(b.first + sel[1]))
    halves = [st.vread(o.file, o.first + k, 1).prov if st.w.provenance and o.file in "va" else None
              for o, k in ((a, sel[0]), (b, sel[1]))]          # a move: each half's bytes keep theirs
    prov = Prov.concat([None if h is None else h.per_byte() for h in halves], [4, 4], st.w.pw)
    if prov is None:
        put(st, dst, np.stack([lo, hi]), decided=True)
    else:
        st.vwrite_value(dst.file, dst.first, VGPRs(st.w, np.stack([lo, hi]), "u32", prov, regs=(dst.first, 2)))


__all__ = ["VALU", "OPS"]
