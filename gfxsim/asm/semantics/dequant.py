"""Dequant recognition: compiled code carries no ``group_scale`` mark, so the asm
front end finds where a quantization scale meets a matrix result.

The rule. A matrix instruction's D is *fresh*. Freshness moves with the value through accvgpr
moves, v_mov, int->float conversions (v_cvt_f32_i32/u32), f32<->f16 conversions (v_cvt_f16_f32,
v_cvt_f32_f16), ds_bpermute, and the pure multiplies of its dequant chain (v_mul_f32, each half
of v_pk_mul_f32); any other write clears it.
Every fp multiply that consumes a fresh value — v_mul_f32, the product of v_fma_f32 /
v_fmac_f32, each half of v_pk_mul_f32 / v_pk_fma_f32 after op_sel — by a value of some origin
applies a scale: the other multiplicand. It is marked as the Python twins mark theirs
(Wave.group_scale), so the back end's check (scales.py) compares its footprint — what the
reductions that made it (v_max*, bpermute, ...) were over, carried by the arithmetic provenance —
with the instruction's K sets. So each factor of ``acc * sQ * sK * sKc`` is checked wherever it
sits; a scale product computed first (``acc * (sQ * sK)``) is checked as the product of its parts
(valueprov.scale_product).

The back end also checks that the scale undoes the quantization of the instruction's operands
(``machine/qdir.py``: its marks are made by the VALU entries, ``vop.MARKED``).

A multiplicand of no origin — no identity and no footprint in any field: a per-tensor scale such
as a V scale or a softmax scale, a literal, a value from an untagged buffer — is no group scale:
nothing says which tokens it covers, so it is not checked (``acc * SM_SCALE * s_group``: the group
scale that follows is the one checked).

Limits: freshness does not follow a value through LDS or memory, through a sum of two results
(acc0 + acc1 before the scale), or through integer arithmetic (bf16 conversions are shifts); a
multiply in f16 is no dequant; a scale applied by division is not seen. ``ENABLED = False``
turns the recognition off; the scale check is then listed as not run.
"""
from __future__ import annotations

import numpy as np

from ...machine.fold import Fold
from ...machine.provenance import COVER, RESERVED, WINDOW, Prov

ENABLED = True
# conversions a fresh value stays fresh through (int->float, and between fp widths)
KEEPS = {"v_cvt_f32_i32", "v_cvt_f32_u32", "v_cvt_f16_f32", "v_cvt_f32_f16"}


def fresh(st, o) -> np.ndarray:
    """Per lane: whether operand ``o`` (one VGPR/AGPR) holds a fresh matrix result."""
    row = _fresh_row(st, o) if ENABLED else None
    return np.zeros(st.w.width, bool) if row is None else row.copy()


def _fresh_row(st, o) -> np.ndarray | None:
    """The freshness bits operand ``o`` reads, as a view (None: an operand that is never fresh)."""
    if o.kind != "reg" or o.file not in "va":
        return None
    return st.dpp.fresh[0] if o.dpp else st.fresh[o.file][o.first]   # DPP's src0: its source lanes' bits


def apply(st, res_vals, scale_vals, lanes):
    """The dequant of fresh ``res_vals`` by ``scale_vals`` (back-end values) in ``lanes``: the
    scale is marked and checked against the result's instructions. Returns the marked scale."""
    w = st.w
    saved = st.exec.copy()
    st.set_exec(saved & lanes)
    try:
        marked = w.group_scale(scale_vals)
        w.check_scale_application(res_vals, marked)
    finally:
        st.set_exec(saved)
    return marked


def multiply(st, srcs, vals, k0=0, k1=1, half=None):
    """Sources k0 and k1 of an fp multiply: if one is fresh where the other is not, apply the
    dequant and return the values with the marked scale in its place (else ``vals`` unchanged).
    ``half``: the half of a packed multiply (v_pk_mul_f32) these sources make."""
    if not ENABLED or not st.w.provenance:
        return vals, False
    ex = st.exec
    fa, fb = _fresh_in(st, srcs[k0], ex), _fresh_in(st, srcs[k1], ex)
    ya, yb = fa is not None and bool(fa.any()), fb is not None and bool(fb.any())
    if ya == yb:
        return vals, False
    res, sc = (k0, k1) if ya else (k1, k0)
    lanes = fa if ya else fb
    keep_fresh(st, lanes, half)               # by a constant or a scale: still the matrix result
    lanes = lanes & _of_origin(st, vals[sc])   # a per-tensor factor is no group scale
    if not lanes.any():
        return vals, False
    vals = list(vals)
    vals[sc] = apply(st, vals[res], vals[sc], lanes)
    o = srcs[res]
    if o.dpp:                                  # the product carries it on
        st.fresh[o.file][o.first, st.dpp.cols[lanes]] = False
    else:                                      # (row[lanes] = False, without gathering the lanes)
        row = st.fresh[o.file][o.first]
        np.logical_and(row, ~lanes, out=row)
    return vals, True


def _fresh_in(st, o, ex) -> np.ndarray | None:
    """``fresh(st, o) & ex`` without its copy (None: an operand that is never fresh)."""
    row = _fresh_row(st, o)
    return None if row is None else row & ex


def keep_fresh(st, lanes, half=None):
    """The product a pure multiply writes stays a fresh matrix result in ``lanes`` (an fma adds
    another value: its result is not the matrix result)."""
    name = "" if st.current is None else st.current.ins.mnemonic
    if half is None:
        if name.startswith("v_mul_f32"):
            st.fresh_out = lanes if st.fresh_out is None else st.fresh_out | lanes
    elif name.startswith("v_pk_mul_f32"):
        out = np.zeros((2, st.w.width), bool) if st.fresh_out is None else st.fresh_out
        out[half] |= lanes
        st.fresh_out = out


def _of_origin(st, v) -> np.ndarray:
    """Per lane: whether a value carries an identity or a footprint in some field (what makes it
    a scale whose coverage can be checked)."""
    w = st.w
    some = None if w.fold is None or v.prov is None else folded_origin(w.fold, v.prov)
    if some is None:
        p = w.unfold_prov(v.prov, "a dequant's multiplicand")
        some = None if p is None else p.origin_columns()
    return np.zeros(w.width, bool) if some is None else some


def folded_origin(fold: Fold, p: Prov) -> np.ndarray | None:
    """``fold.unfold(p).origin_columns()`` from the representatives' columns, without placing the
    planes for every member: where no member's shift can make a present value or footprint absent
    (each field's smallest value, or window, plus its smallest shift stays >= 0; footprints move by
    whole windows and hold no set wider than one) and nothing names a result (its names would be
    moved per member). None where that is not so, or nothing is held: the caller unfolds, which
    raises what unfolding raises."""
    if "@mma" in p.ids and (p.ids["@mma"] >= 0).any():
        return None
    for f, a in p.ids.items():
        if f in RESERVED:
            continue
        present = a >= 0
        if not present.any():
            continue
        s = fold.shift.get(f)
        if s is None or int(a[present].min()) + int(np.where(fold.known[f], s, 0).min()) < 0:
            return None
    for f, m in p.fp.items():
        s = fold.shift.get(f.removeprefix(COVER))
        if s is None:
            continue
        sh = np.where(fold.known[f.removeprefix(COVER)], s, 0)
        if not sh.any():
            continue
        narrow = m.base >= 0
        if (m.wide != 0).any() or (sh % WINDOW).any() or \
                (narrow.any() and int(m.base[narrow].min()) + int(sh.min()) < 0):
            return None
    some = p.origin_columns()
    return None if some is None else fold.expand_cols(some)
