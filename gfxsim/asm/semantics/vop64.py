"""Binary64 VALU (VOP1, VOP2, VOP3 and VOPC on VGPR pairs) per the CDNA3 ISA: every entry of the
ISA table with a binary64 operand or result (gfxsim/isa/double.py) through one row that reads
its sources as their types say, and the forms with implicit state (fmac, the division helpers,
the class test). A result's provenance is the entry's rule on the sources' values (a pair is one
8-byte element), as the 32-bit rows do.

Operands of a binary64 source: a register pair with -/|| on bit 63, an inline integer (its 64-bit
two's complement), an inline float (that value in binary64), or a 32-bit literal, which is the
high word (the low word 0)."""
from __future__ import annotations

import numpy as np

from . import OPS, f32, f64, no_mods, op, put64, sdst_mask, u32
from .vop import put_prov, value_of, arith_prov
from ... import isa
from ...machine.provenance import Prov
from ...machine.vgpr import VGPRs

U32, I32, U64, F64 = np.uint32, np.int32, np.uint64, np.float64

def _read(st, o, t):
    if t == "f64":
        return f64(st, o)
    if t == "f32":
        return f32(st, o)
    if o.neg or o.abs:
        raise st.error(f"modifier on {o.text}: an integer source")
    x = u32(st, o)
    return x.view(I32) if t == "i32" else x


def _src_value(st, o, t) -> VGPRs:
    """A source as a back-end value: a pair is one 8-byte element (its provenance with it)."""
    if t == "f64" and o.kind == "reg" and o.file in "va":
        return st.vread(o.file, o.first, 2, "u64")
    return value_of(st, o)


def _differ(name, xs):
    """See vop.addends_differ, in binary64."""
    rule = isa.entry(name).rule
    with np.errstate(all="ignore"):
        if rule.fused:
            x, y = xs[0] * xs[1], xs[2]
        elif rule.summing == "add":
            x, y = xs[0], xs[1]
        else:
            return None
        x, y = np.asarray(x, F64), np.asarray(y, F64)
        return ((x.view(np.int64) != y.view(np.int64)) | (x == 0) | (y == 0))[None, :]


def _prov(st, name, srcs, types, xs, size):
    """The result's provenance by the entry's rule, as one element of ``size`` bytes."""
    if not st.w.provenance or not any(o.kind == "reg" and o.file in "va" for o in srcs):
        return None
    vals = [_src_value(st, o, t) for o, t in zip(srcs, types)]
    p = arith_prov(st, name, vals, differ=_differ(name, xs))
    if p is None:
        return None
    if p.g != size:                     # one element per lane either way: its bytes are the result's
        p = Prov(size, p.ids, p.fp, p.flags) if p.g != 1 else p.per_element(size, st.w.machine.wide)
    return p


def _write(st, dst, r, t, prov):
    if t == "f64":
        bits = np.asarray(r, F64).view(U64)
        if prov is None:
            put64(st, dst, bits, decided=True)
        else:
            st.vwrite_value(dst.file, dst.first, VGPRs(st.w, bits[None, :].copy(), "u64", prov, regs=(dst.first, 2)))
        return
    r = np.asarray(r)
    put_prov(st, dst, r.view(U32) if r.dtype.itemsize == 4 else r.astype(U32), prov)


def _row(name, types, result, fn):
    @op(name)
    def run(st, d):
        no_mods(st, d)
        if len(d.ops) != 1 + len(types):
            raise st.error(f"{d.mnemonic} takes {1 + len(types)} operands, got {len(d.ops)}")
        dst, srcs = d.ops[0], d.ops.positional[1:]
        xs = [_read(st, o, t) for o, t in zip(srcs, types)]
        with np.errstate(all="ignore"):
            r = fn(*xs)
        _write(st, dst, r, result, _prov(st, name, srcs, types, xs, 8 if result == "f64" else 4))
    return run


_SPECIAL = {"v_div_scale_f64", "v_div_fmas_f64", "v_div_fixup_f64", "v_cmp_class_f64", "v_cmp_class_f32"}
for _e in isa.asm_entries("own"):
    if ("f64" in _e.srcs or _e.result == "f64") and _e.mnemonic not in _SPECIAL:
        _row(_e.mnemonic, _e.srcs, _e.result, _e.fn)


@op("v_fmac_f64")
def v_fmac_f64(st, d):
    """D = S0*S1 + D, rounded once."""
    no_mods(st, d)
    dst, a, b = d.ops.positional
    xs = [f64(st, a), f64(st, b), f64(st, dst)]
    r = isa.entry("v_fma_f64").fn(*xs)
    _write(st, dst, r, "f64", _prov(st, "v_fma_f64", (a, b, dst), ("f64",) * 3, xs, 8))


@op("v_div_scale_f64")
def v_div_scale_f64(st, d):
    no_mods(st, d)
    dst, sd, a, b, c = d.ops.positional
    xs = [f64(st, o) for o in (a, b, c)]
    r, vcc = isa.entry("v_div_scale_f64").fn(*xs)
    _write(st, dst, r, "f64", _prov(st, "v_div_scale_f64", (a,), ("f64",), xs[:1], 8))     # S0, scaled
    sdst_mask(st, sd, vcc & st.exec)


@op("v_div_fmas_f64")
def v_div_fmas_f64(st, d):
    """D = fma(S0, S1, S2) where VCC is clear; where it is set the ISA scales by 2^128 or 2^-128,
    which (as for v_div_fmas_f32) raises where it would change a finite non-zero result."""
    no_mods(st, d)
    dst, a, b, c = d.ops.positional
    xs = [f64(st, o) for o in (a, b, c)]
    r = isa.entry("v_div_fmas_f64").fn(*xs)
    vcc = st.mask_of(106) & st.exec & np.isfinite(r) & (r != 0)
    if vcc.any():
        raise st.error("v_div_fmas_f64 with VCC set (a quotient div_scale scaled on one side: operands 2^768 "
                       "apart, a denominator above 2^1022 or a subnormal quotient) is not modelled",
                       lane=int(np.argmax(vcc)))
    _write(st, dst, r, "f64", _prov(st, "v_div_fmas_f64", (a, b, c), ("f64",) * 3, xs, 8))


@op("v_div_fixup_f64")
def v_div_fixup_f64(st, d):
    no_mods(st, d)
    dst, a, b, c = d.ops.positional
    xs = [f64(st, o) for o in (a, b, c)]
    r, under = isa.entry("v_div_fixup_f64").fn(*xs)
    under &= st.exec
    if under.any():
        raise st.error("v_div_fixup_f64: a quotient below 2^-1075 (the ISA's underflow case) is not modelled",
                       lane=int(np.argmax(under)))
    _write(st, dst, r, "f64", _prov(st, "v_div_fixup_f64", (a, b, c), ("f64",) * 3, xs, 8))


def _cmp_class(name, t, x):
    @op(name)
    def run(st, d):
        no_mods(st, d)
        dst, a, m = d.ops.positional
        res = isa.entry(name.replace("v_cmpx_", "v_cmp_")).fn(_read(st, a, t), u32(st, m)) & st.exec
        sdst_mask(st, dst, res)
        if x:
            st.set_exec(res)
    return run


for _t in ("f64", "f32"):
    _cmp_class(f"v_cmp_class_{_t}", _t, False)
    _cmp_class(f"v_cmpx_class_{_t}", _t, True)


__all__ = ["OPS"]
