"""Accumulator models: how one matrix instruction turns K products and C into an fp32 D.

A record's ``AccumulatorPrecision`` picks the datapath (its docstring states each); this module
computes the dot-product adders ("exact", "fused", "after", "two_stage"), ``accum_serial`` the
serial ones ("fma", "ftz_tree"). What each record's model rests on is in the record: the H200
probe (hw_probes/nvidia/README.md) for sm_90, MMA-Sim's published models (arXiv 2511.10909,
replayed bit for bit by tests/gfxsim/arch/test_mmasim_golden.py) for CDNA and Ada.

Inputs are float64 arrays: products ``[..., K]`` (exact: every product of two <=16-bit floats is)
and ``c`` ``[...]`` (fp32 values). A term is a significand and an exponent: the exponent of a
product is the sum of its inputs' exponents (a subnormal input counting as its type's smallest
normal exponent), so its significand lies in [0, 4). The adders' exact sums are formed in float64,
exact while the kept bits plus log2 of the term count stay within 52.
"""
from __future__ import annotations

import numpy as np

from . import accum_jit           # compiled functions by the module: jit.njit rebinds their names
from .accum_serial import EMIN, F32_EMIN, finish, serial_mma
from .jit import running

NONE = -(1 << 20)        # the exponent of a zero term that never sets the alignment


def exponent(x, emin: int | None = None) -> np.ndarray:
    """floor(log2|x|) per element, at least ``emin`` when given; NONE where x == 0."""
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore"):
        _, e = np.frexp(np.where(np.isfinite(x), x, 0.0))
    e = e.astype(np.int64) - 1
    if emin is not None:
        e = np.maximum(e, emin)
    return np.where(x == 0, NONE, e)


def product_terms(a, b, a_emin: int | None = None, b_emin: int | None = None):
    """Products ``[..., M, N, K]`` of A ``[..., M, K]`` and B ``[..., K, N]`` with their alignment
    exponents: the sum of the inputs' exponents, as a multiplier forms it (significand in [1, 4))."""
    a = np.asarray(a, np.float64)
    b = np.swapaxes(np.asarray(b, np.float64), -1, -2)
    with np.errstate(invalid="ignore", over="ignore"):
        prod = a[..., :, None, :] * b[..., None, :, :]
    pexp = exponent(a, a_emin)[..., :, None, :] + exponent(b, b_emin)[..., None, :, :]
    return prod, np.where((prod == 0) | ~np.isfinite(prod), NONE, pexp)


def _pow2(e):
    # maximum then minimum: np.clip's bounds checks on integer arrays cost more than the work here;
    # int32 exponents: numpy's ldexp has a loop for them, int64 ones take a slower path (2x)
    return np.ldexp(1.0, np.minimum(np.maximum(e, -1074), 1023).astype(np.int32))


def _cut(x, quantum, rounding):
    q = x / quantum
    if rounding == "floor":
        return np.floor(q) * quantum
    return (np.trunc(q) if rounding == "truncate" else np.round(q)) * quantum     # np.round: ties to even


def to_f32(x, rounding):
    """float64 -> float32, to nearest even or toward zero (toward zero, a value of 2^128 or more
    still overflows to inf, as the models' fp32 write does)."""
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore"):
        near = x.astype(np.float32)
    if rounding == "nearest":
        return near
    over = np.abs(near.astype(np.float64)) > np.abs(x)          # nearest went away from zero: step back
    d = np.where(over, np.nextafter(near, np.float32(0)), near).astype(np.float32)
    return np.where(np.abs(x) >= 2.0 ** 128, near, d).astype(np.float32)


def fused_sum(terms, exps, bits, rounding):
    """Align ``terms`` [..., n] to the largest of ``exps``, cut each to ``bits`` fraction bits, sum
    exactly. Returns (sum, alignment exponent)."""
    emax = exps.max(axis=-1)
    return _cut(terms, _pow2(emax - bits)[..., None], rounding).sum(axis=-1), emax


def _specials(prod, c):
    """(mask, value) of the outputs a NaN or infinite term decides: NaN if any term is NaN or
    infinities of both signs meet, else the infinity."""
    terms = np.concatenate([prod, c[..., None]], axis=-1)
    nan = np.isnan(terms).any(axis=-1)
    pos = (terms == np.inf).any(axis=-1)
    neg = (terms == -np.inf).any(axis=-1)
    value = np.where(nan | (pos & neg), np.nan, np.where(pos, np.inf, -np.inf))
    return nan | pos | neg, value


def steps_of(acc, k: int) -> list[list[int]]:
    """The K indices of each step of the record ``acc`` for an instruction of ``k`` products."""
    if acc.k_steps is not None:
        return [list(s) for s in acc.k_steps]
    step = acc.step or k
    return [list(range(i, min(i + step, k))) for i in range(0, k, step)]


def _fused_step(acc, prod, pexp, run):
    """One step of the "fused" adder: C (``run``) among the products."""
    zero = NONE if acc.zero_exponent is None else acc.zero_exponent
    terms = np.concatenate([prod, run[..., None]], axis=-1)
    exps = np.concatenate([np.where(prod == 0, zero, pexp), np.where(run == 0, zero, exponent(run, F32_EMIN))[..., None]],
                          axis=-1)
    s, e = fused_sum(terms, exps, acc.mantissa_bits, acc.rounding)
    return s


def _dot(acc, prod, pexp):
    """The products of one step through the fused adder, ``interleave`` groups each on its own,
    their sums aligned and cut toward -inf again. Returns (exact value, alignment exponent)."""
    f = acc.mantissa_bits
    if acc.interleave == 1:
        return fused_sum(prod, pexp, f, acc.rounding)
    parts = [fused_sum(prod[..., g::acc.interleave], pexp[..., g::acc.interleave], f, acc.rounding)
             for g in range(acc.interleave)]
    e = np.max([p[1] for p in parts], axis=0)
    q = _pow2(e - f)
    return sum(_cut(p[0], q, "floor") for p in parts), e


def _two_stage_step(acc, prod, pexp, c):
    f, f2 = acc.mantissa_bits, acc.c_bits
    dot, e_dot = _dot(acc, prod, pexp)
    e_c = np.where(c == 0, F32_EMIN, exponent(c, F32_EMIN))
    e = np.maximum(e_dot, e_c)
    c_cut = _cut(c, _pow2(e - f), "floor")
    if acc.c_far_drops:
        c_cut = np.where(e_c < e - f - 1, 0.0, c_cut)
    s = _cut(dot, _pow2(e - (f2 + 1)), "floor") + c_cut
    s = _cut(s, _pow2(np.where(s == 0, F32_EMIN, exponent(s, F32_EMIN)) - f2), "floor")
    return to_f32(s, acc.final_rounding or acc.rounding)


def _finite_to_f32(x, rounding):
    """to_f32 of a finite ``x`` whose nearest fp32 values are all finite; None where one is not."""
    with np.errstate(over="ignore"):
        near = x.astype(np.float32)
    if not np.isfinite(near).all():
        return None
    if rounding == "nearest":
        return near
    over = np.abs(near.astype(np.float64)) > np.abs(x)          # nearest went away from zero: step back
    return np.where(over, np.nextafter(near, np.float32(0)), near)


def _finite_shape(acc, k: int):
    """The steps of a "fused"/"after" instruction of ``k`` products where _finite_steps applies
    (equal steps, no interleave, partial sums exact), else None."""
    steps = steps_of(acc, k)
    width = len(steps[0])
    if acc.interleave != 1 or any(len(s) != width for s in steps) or \
            (4 * width + 2) << acc.mantissa_bits > 1 << 53:
        return None
    return steps


def _finite_steps(acc, prod, pexp, c):
    """accumulate's "fused" and "after" datapaths where no term is NaN or infinite and no step's
    result overflows, with a step's products cut at once and C's cut added to their sum; None
    where that is not so or the sum could be inexact (the general loop then runs). Each cut term
    is a multiple of the step's quantum below 2^(bits + 2) quanta (a product's significand is
    below 4, C's below 2), so while (4 x products + 2) x 2^bits <= 2^53 every partial sum is
    exact, and the sum is the general loop's whatever the order (a zero sum is +0 in both: numpy's
    sum starts from +0)."""
    steps = _finite_shape(acc, prod.shape[-1])
    if steps is None or not (np.isfinite(prod).all() and np.isfinite(c).all()):
        return None
    order = [k for s in steps for k in s]
    shape = prod.shape[:-1] + (len(steps), len(steps[0]))
    p = prod.reshape(shape) if order == list(range(prod.shape[-1])) else prod[..., order].reshape(shape)
    e = pexp.reshape(shape) if order == list(range(prod.shape[-1])) else pexp[..., order].reshape(shape)
    if acc.zero_exponent is not None:
        e = np.where(p == 0, acc.zero_exponent, e)
    return _finite_run(acc, p, c, e.max(axis=-1))


def _finite_operands(acc, a, b, c, a_emin, b_emin):
    """mma_f32 by _finite_steps from the operands: A's columns and B's rows put in the steps' K
    order first (hundreds of elements where the products are thousands), the products and their
    exponent sums formed in that order (the same numbers product_terms gives, reordered). None
    where _finite_steps would give None. Finite inputs of at most 32 bits have finite float64
    products (below 2^256)."""
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    steps = _finite_shape(acc, a.shape[-1])
    if steps is None or not (np.isfinite(a).all() and np.isfinite(b).all() and np.isfinite(c).all()) or \
            max(np.abs(a).max(initial=0.0), np.abs(b).max(initial=0.0)) >= 2.0 ** 128:
        return None
    order = [k for s in steps for k in s]
    if order != list(range(a.shape[-1])):
        a, b = a[..., order], b[..., order, :]
    b = np.swapaxes(b, -1, -2)
    sw = (len(steps), len(steps[0]))
    prod = (a[..., :, None, :] * b[..., None, :, :]).reshape(a.shape[:-1] + (b.shape[-2],) + sw)
    # a step's alignment: the max of its products' exponent sums, formed as int32 [M, N, steps,
    # width] from A's and B's (NONE at a zero input). A zero product's sum is then NONE plus at
    # most a few hundred where its exponent is NONE: it sets no alignment either way, and a step
    # of zeros only has a quantum below 2^-1074 either way (_pow2 clamps), so every cut is the same
    ea = exponent(a, a_emin).astype(np.int32).reshape(a.shape[:-1] + sw)
    eb = exponent(b, b_emin).astype(np.int32).reshape(b.shape[:-1] + sw)
    pmax = (ea[..., :, None, :, :] + eb[..., None, :, :, :]).max(axis=-1)
    if acc.zero_exponent is not None:        # a zero product's exponent is the record's: it joins the max
        za = (a == 0).reshape(a.shape[:-1] + sw).any(axis=-1)
        zb = (b == 0).reshape(b.shape[:-1] + sw).any(axis=-1)
        pmax = np.where(za[..., :, None, :] | zb[..., None, :, :], np.maximum(pmax, acc.zero_exponent), pmax)
    return _finite_run(acc, prod, c, pmax)


def _cut_sum(x, quantum, rounding):
    """The sum over the last axis of ``x`` cut to ``quantum`` (a power of two per row): the cut
    terms' counts of quanta summed, then scaled once (exact where _finite_steps applies: integers
    below 2^53, scaled by a power of two; a zero keeps its sign as in _cut)."""
    q = x / quantum[..., None]
    q = np.floor(q, out=q) if rounding == "floor" else np.trunc(q, out=q) if rounding == "truncate" else \
        np.round(q, out=q)
    return q.sum(axis=-1) * quantum


def _finite_run(acc, p, c, pmax):
    """_finite_steps' steps: products ``p`` ``[..., steps, width]``, C ``[...]``, each step's
    alignment exponent ``pmax`` ``[..., steps]`` (the max of its products', a zero product's the
    record's zero exponent)."""
    zero = NONE if acc.zero_exponent is None else acc.zero_exponent
    final = acc.final_rounding or acc.rounding
    after = acc.c_entry == "after"
    run = c
    for i in range(p.shape[-2]):
        if after and i == 0:             # C has not joined: the run is +0, which sets no alignment
            emax = np.maximum(pmax[..., 0], zero)
            q = _pow2(emax - acc.mantissa_bits)
            total = _cut_sum(p[..., 0, :], q, acc.rounding) + 0.0
        else:
            _, er = np.frexp(run)                          # run is finite: exponent() without its guards
            er = np.where(run == 0, NONE, np.maximum(er.astype(np.int64) - 1, F32_EMIN))
            if zero != NONE:
                er = np.where(run == 0, zero, er)
            emax = np.maximum(pmax[..., i], er)
            q = _pow2(emax - acc.mantissa_bits)
            total = _cut_sum(p[..., i, :], q, acc.rounding) + _cut(run, q, acc.rounding)
        d = _finite_to_f32(total, final)
        if d is None:
            return None
        if acc.result_bits is not None:
            d = truncate_mantissa(d, acc.result_bits) if final == "truncate" else round_mantissa(d, acc.result_bits)
        if not np.isfinite(d).all():
            return None
        run = d.astype(np.float64)
    if after:                                                   # C joins last, by an fp32 add
        with np.errstate(invalid="ignore", over="ignore"):
            run = run.astype(np.float32) + c.astype(np.float32)
    return finish(acc, run)


def _e32(x):
    """exponent(x, F32_EMIN) of a finite ``x``, with F32_EMIN where x == 0 (two_stage's C and sum)."""
    _, e = np.frexp(x)
    return np.where(x == 0, F32_EMIN, np.maximum(e.astype(np.int64) - 1, F32_EMIN))


def _halving(x, axis, op):
    """``op`` (np.maximum, or np.add of an exact sum) reduced along ``axis`` by halving it while its
    length is even: numpy reduces a short inner axis several times slower. A sum comes back
    with -0 where every term is -0; the caller adds +0, as numpy's sum starts from it."""
    tail = (slice(None),) * (-1 - axis)             # the axes after ``axis`` (a negative index)
    while x.shape[axis] > 1 and x.shape[axis] % 2 == 0:
        x = op(x[(..., slice(0, None, 2), *tail)], x[(..., slice(1, None, 2), *tail)])
    return x[(..., 0, *tail)] if x.shape[axis] == 1 else op.reduce(x, axis=axis)


def _finite_two_stage(acc, prod, pexp, c):
    """accumulate's "two_stage" datapath where no term is NaN, no product reaches 2^128 and no
    step's result overflows: every step's fused dot product formed at once (the steps' products
    do not depend on C), then C carried through the steps' second adders; None where that is not
    so (the general loop then runs). Each cut product is a multiple of its group's quantum below
    2^(bits + 2) quanta, so while 4 x width x 2^bits <= 2^53 a step's (and its groups') sums are
    exact, equal to the loop's whatever the order; every other operation is the loop's own, on
    the same values (a zero sum is +0 in both: numpy's sum starts from +0). Where numba runs
    already (a run with provenance) and the result rounds to nearest, accum_jit does the same
    operations one element at a time."""
    k = prod.shape[-1]
    steps = steps_of(acc, k)
    width, il, f = len(steps[0]), acc.interleave, acc.mantissa_bits
    if any(len(s) != width for s in steps) or width % il or (4 * width) << f > 1 << 53:
        return None
    if not (np.abs(prod).max(initial=0.0) < 2.0 ** 128 and np.isfinite(c).all()):    # NaN compares False
        return None
    order = [i for s in steps for i in s]
    if (acc.final_rounding or acc.rounding) == "nearest" and running():     # numba runs already: compiled
        n = prod.size // k
        out = np.empty(n, np.float32)
        if not accum_jit.two_stage(np.ascontiguousarray(prod.reshape(n, k)), np.ascontiguousarray(pexp.reshape(n, k), np.int64),
                         np.ascontiguousarray(np.broadcast_to(c, prod.shape[:-1])).reshape(n), np.array(order, np.int64),
                         width, il, f, acc.c_bits, accum_jit.ROUNDING[acc.rounding], acc.c_far_drops, out):
            return None
        return finish(acc, out.reshape(prod.shape[:-1]))
    shape = prod.shape[:-1] + (len(steps), width)
    if order == list(range(k)):
        p, e = prod.reshape(shape), pexp.reshape(shape)
    else:
        p, e = prod[..., order].reshape(shape), pexp[..., order].reshape(shape)
    if il == 1:                                                   # _dot: one fused group per step
        e_dot = _halving(e, -1, np.maximum)
        dot = _halving(_cut(p, _pow2(e_dot - f)[..., None], acc.rounding), -1, np.add) + 0.0
    else:                                                         # group g: a step's terms g, g + il, ...
        grouped = shape[:-1] + (width // il, il)
        eg = _halving(e.reshape(grouped), -2, np.maximum)
        sums = _halving(_cut(p.reshape(grouped), _pow2(eg - f)[..., None, :], acc.rounding), -2, np.add) + 0.0
        e_dot = _halving(eg, -1, np.maximum)
        dot = _halving(_cut(sums, _pow2(e_dot - f)[..., None], "floor"), -1, np.add) + 0.0
    f2, final, run = acc.c_bits, acc.final_rounding or acc.rounding, c
    for i in range(len(steps)):                                   # _two_stage_step, C carried
        e_c = _e32(run)
        top = np.maximum(e_dot[..., i], e_c)
        c_cut = _cut(run, _pow2(top - f), "floor")
        if acc.c_far_drops:
            c_cut = np.where(e_c < top - f - 1, 0.0, c_cut)
        s = _cut(dot[..., i], _pow2(top - (f2 + 1)), "floor") + c_cut
        s = _cut(s, _pow2(_e32(s) - f2), "floor")
        with np.errstate(over="ignore"):
            d = to_f32(s, final)
        if not np.isfinite(d).all():
            return None
        run = d.astype(np.float64)
    return finish(acc, run)


def accumulate(acc, prod, pexp, c):
    """D (float32 ``[...]``) from products ``[..., K]`` (alignment exponents ``pexp``) and C ``[...]``
    by the record ``acc`` (an ``AccumulatorPrecision``)."""
    prod = np.asarray(prod, np.float64)
    c = np.asarray(c, np.float64)
    if acc.c_entry == "exact":
        with np.errstate(invalid="ignore", over="ignore"):
            d = (prod.sum(axis=-1) + c).astype(np.float32)
        if acc.mantissa_bits is not None:
            d = round_mantissa(d, acc.mantissa_bits) if acc.rounding == "nearest" else \
                truncate_mantissa(d, acc.mantissa_bits)
        return d
    if acc.c_entry in ("fused", "after"):
        d = _finite_steps(acc, prod, pexp, c)
        if d is not None:
            return d
    if acc.c_entry == "two_stage":
        d = _finite_two_stage(acc, prod, pexp, c)
        if d is not None:
            return d
    return _stepwise(acc, prod, pexp, c)


def _stepwise(acc, prod, pexp, c):
    """accumulate's adders step by step, each step's terms looked at for NaN and infinities."""
    if acc.c_entry == "two_stage":               # products beyond fp32's range overflow first
        with np.errstate(invalid="ignore", over="ignore"):
            prod = np.where(np.abs(prod) >= 2.0 ** 128, prod * np.inf, prod)
    final = acc.final_rounding or acc.rounding
    run = c if acc.c_entry != "after" else np.zeros_like(c)
    finite = bool(np.isfinite(prod).all())       # the common case: no step has a special term to look for
    for ks in steps_of(acc, prod.shape[-1]):
        p, pe = prod[..., ks], pexp[..., ks]
        if finite and np.isfinite(run).all():    # a step's sum may overflow: run is looked at each step
            special, value, r = False, None, run
        else:
            special, value = _specials(p, run)
            p = np.where(np.isfinite(p), p, 0.0)
            r = np.where(np.isfinite(run), run, 0.0)
        with np.errstate(over="ignore"):
            if acc.c_entry == "two_stage":
                d = _two_stage_step(acc, p, pe, r)
            else:
                d = to_f32(_fused_step(acc, p, pe, r), final)
                if acc.result_bits is not None:
                    d = truncate_mantissa(d, acc.result_bits) if final == "truncate" else \
                        round_mantissa(d, acc.result_bits)
        run = np.where(special, value, d.astype(np.float64)) if special is not False else d.astype(np.float64)
    if acc.c_entry == "after":                                  # C joins last, by an fp32 add
        with np.errstate(invalid="ignore", over="ignore"):
            run = run.astype(np.float32) + c.astype(np.float32)
    return finish(acc, run)


def mma_f32(acc, a, b, c, a_type: str | None = None, b_type: str | None = None) -> np.ndarray:
    """D = A.B + C of float inputs ``[bl, M, K] x [bl, K, N] + [bl, M, N]`` under the record ``acc``;
    ``a_type``/``b_type`` (ISA type names) give a subnormal input its alignment exponent."""
    if acc.c_entry in ("fma", "ftz_tree"):
        return serial_mma(acc, a, b, c, a_type, b_type)
    if acc.c_entry in ("fused", "after"):
        d = _finite_operands(acc, a, b, c, EMIN.get(a_type), EMIN.get(b_type))
        if d is not None:
            return d
    if acc.c_entry == "two_stage" and running():
        d = _compiled_two_stage(acc, a, b, c, EMIN.get(a_type), EMIN.get(b_type))
        if d is not None:
            return d
    if acc.c_entry == "two_stage":
        d = _two_stage_operands(acc, a, b, c, EMIN.get(a_type), EMIN.get(b_type))
        if d is not None:
            return d
    prod, pexp = product_terms(a, b, EMIN.get(a_type), EMIN.get(b_type))
    return accumulate(acc, prod, pexp, c)


_ZERO = -(1 << 40)           # a zero input's exponent: any sum with it lies below NONE
# inputs within 2^-400..2^400: no product rounds to zero, every quantum is normal. As biased exponent
# fields (what the bits hold): a nonzero input's field lies in _FIELD_LO .. _FIELD_LO + _FIELD_SPAN
_FIELD_LO, _FIELD_SPAN = 1023 - 400, 799
_F32_FIELD = 1023 + F32_EMIN  # fp32's smallest normal exponent as a biased field (C and the sums clamp to it)


def _field(x):
    """The biased exponent field of doubles (11 bits; a finite fp32 value's is 897 or more unless 0)."""
    return (x.view(np.int64) >> 52) & 0x7FF


def _fold_width(x, op):
    """``op`` (np.maximum, or np.add of an exact sum) reduced over axis 1 of ``x``, the width of
    the steps, by joining its halves (contiguous blocks) while its length is even. A sum comes
    back with -0 where every term is -0; the caller adds +0, as numpy's sum starts from it."""
    while x.shape[1] > 1 and x.shape[1] % 2 == 0:
        h = x.shape[1] // 2
        x = op(x[:, :h], x[:, h:])
    return x[:, 0] if x.shape[1] == 1 else op.reduce(x, axis=1)


def _two_stage_operands(acc, a, b, c, a_emin, b_emin):
    """mma_f32 of a "two_stage" record without interleaved groups in few numpy calls (the path of
    a process without numba, ~70 calls whatever the batch): A's columns and B's rows put in the
    steps' order, side by side in one array so their exponents are read from their bits at once (a
    zero input's far below NONE, so a step of zero products aligns at NONE or below: its quantum's
    exponent is capped, its cut terms stay +-0); each step's cut products counted in quanta as
    accum_jit counts them (exact integers, scaled once); then C through the second adders with
    powers of two made from biased exponent fields. None where _finite_two_stage would leave it to
    the loop, or an input lies outside 2^-400..2^400 (the product path then runs). A step whose D
    is not finite makes every later D infinite or NaN (C then is), so one look at the last D finds
    it; a finite D is what ``finish`` writes."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if acc.interleave != 1 or a.ndim != 3:
        return None
    plan = _operand_plan(acc, a.shape[-1])
    if plan is None:
        return None
    order, n_steps, width = plan
    # K leads: A as [K, bl, M], B as [K, bl, N], so the products are [steps, width, bl, M, N] and a
    # step's terms are reduced over contiguous blocks (max, and sums that are exact in any order)
    ak, bk = a.transpose(2, 0, 1), b.transpose(1, 0, 2)
    if order is not None:
        ak, bk = ak[order], bk[order]
    ab = np.concatenate((ak.reshape(-1), bk.reshape(-1)))                     # A, then B
    field = _field(ab)
    zero = ab == 0
    if not (np.where(zero, _FIELD_LO, field) - _FIELD_LO).view(np.uint64).max() <= _FIELD_SPAN:    # NaN fails
        return None
    e = field - 1023
    na = ak.size
    if a_emin is not None and a_emin == b_emin:
        np.maximum(e, a_emin, out=e)
    else:
        for part, emin in ((e[:na], a_emin), (e[na:], b_emin)):
            if emin is not None:
                np.maximum(part, emin, out=part)
    np.copyto(e, _ZERO, where=zero)
    ak, bk = ab[:na].reshape(ak.shape), ab[na:].reshape(bk.shape)
    ea, eb = e[:na].reshape(ak.shape), e[na:].reshape(bk.shape)
    shape = (n_steps, width) + ak.shape[1:] + bk.shape[2:]                  # [steps, width, bl, M, N]
    prod = (ak[:, :, :, None] * bk[:, :, None, :]).reshape(shape)
    e_dot = _fold_width((ea[:, :, :, None] + eb[:, :, None, :]).reshape(shape), np.maximum)    # [steps, bl, M, N]
    # |product| < 2^(its exponent + 2): only a step aligned at 2^127 or above can hold one of 2^128
    if e_dot.max(initial=NONE) >= 127 and not np.abs(prod).max(initial=0.0) < 2.0 ** 128:
        return None
    f = acc.mantissa_bits
    # 2^(f - e_dot), a power of two (dividing by it is exact); a step of zero products (e_dot at
    # NONE or below) gets 2^1000, which keeps its +-0 terms +-0
    inv = (np.minimum(f + 1023 - e_dot, 1023 + 1000) << 52).view(np.float64)
    t = prod * inv[:, None]
    t = np.trunc(t, out=t) if acc.rounding == "truncate" else np.floor(t, out=t) if acc.rounding == "floor" else \
        np.round(t, out=t)
    dot = _fold_width(t, np.add) / inv + 0.0
    top_dot = e_dot + 1023                                # biased (a step of zeros: far below C's)
    f2, final = acc.c_bits, acc.final_rounding or acc.rounding
    run = np.ascontiguousarray(np.broadcast_to(np.asarray(c, np.float64), dot.shape[1:]))
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(n_steps):                          # _finite_two_stage's second adders: normal quanta
            e_c = np.maximum(_field(run), _F32_FIELD)     # C's exponent (at least fp32's smallest normal)
            top = np.maximum(top_dot[i], e_c)
            p = ((f + 2046 - top) << 52).view(np.float64)             # 2^(f - top)
            c_cut = np.floor(run * p) / p
            if acc.c_far_drops:
                c_cut = np.where(e_c < top - f - 1, 0.0, c_cut)
            p = ((f2 + 1 + 2046 - top) << 52).view(np.float64)        # 2^(f2 + 1 - top)
            s = np.floor(dot[i] * p) / p + c_cut
            p = ((f2 + 2046 - np.maximum(_field(s), _F32_FIELD)) << 52).view(np.float64)
            s = np.floor(s * p) / p
            d = s.astype(np.float32) if final == "nearest" else to_f32(s, final)
            run = d.astype(np.float64)
    if not np.isfinite(run).all():                        # C not finite, or a step's D
        return None
    return d


_PLANS: dict = {}           # (the record's step fields, K) -> _operand_plan's answer


def _operand_plan(acc, k: int):
    """(the steps' K order as an index list, None where it is 0..k-1; the step count; the step
    width) of a "two_stage" record for ``k`` products, as _two_stage_operands takes them; None
    where it takes none (unequal steps, or sums that could be inexact)."""
    steps = None if acc.k_steps is None else tuple(tuple(x) for x in acc.k_steps)
    key = (steps, acc.step, acc.mantissa_bits, k)           # what it reads
    got = _PLANS.get(key, _PLANS)            # None is an answer: the dict itself marks none yet
    if got is _PLANS:
        steps = steps_of(acc, k)
        width = len(steps[0])
        order = [i for s in steps for i in s]
        ok = all(len(s) == width for s in steps) and (4 * width) << acc.mantissa_bits <= 1 << 53
        got = _PLANS[key] = (None if order == list(range(k)) else order, len(steps), width) if ok else None
    return got


def _compiled_two_stage(acc, a, b, c, a_emin, b_emin):
    """mma_f32 of a "two_stage" record by accum_jit.two_stage_mma, products and exponents formed
    there as product_terms forms them; None where _finite_two_stage would leave it to the loop
    (or the record is not one it takes: final rounding not to nearest, unequal steps, inexact sums).
    A D the kernel gives is finite, so finish's NaN bits leave it as it is."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.ndim != 3:
        return None
    shape = _two_stage_shape(acc, a.shape[-1])
    if shape is None:
        return None
    order, width, il = shape
    c = np.asarray(c, np.float64)
    want = a.shape[:2] + b.shape[2:]
    c = np.ascontiguousarray(c if c.shape == want else np.broadcast_to(c, want))
    none = -(1 << 30)                                   # no smallest normal exponent: no clamp
    out = np.empty(want, np.float32)
    if not accum_jit.two_stage_mma(np.ascontiguousarray(a), np.ascontiguousarray(b), c, none if a_emin is None else a_emin,
                                   none if b_emin is None else b_emin, order, width, il, acc.mantissa_bits, acc.c_bits,
                                   accum_jit.ROUNDING[acc.rounding], acc.c_far_drops, out):
        return None
    return out


_SHAPES: dict = {}          # (the record's step fields, K) -> _two_stage_shape's answer


def _two_stage_shape(acc, k: int):
    """(the steps' K order as an int64 array, step width, interleave) of a "two_stage" record the
    compiled path takes for ``k`` products; None where it takes none (see _compiled_two_stage)."""
    steps = None if acc.k_steps is None else tuple(tuple(x) for x in acc.k_steps)
    key = (steps, acc.step, acc.interleave, acc.mantissa_bits, acc.final_rounding, acc.rounding, k)   # what it reads
    got = _SHAPES.get(key, _SHAPES)            # None is an answer: the dict itself marks none yet
    if got is _SHAPES:
        steps = steps_of(acc, k)
        width, il, f = len(steps[0]), acc.interleave, acc.mantissa_bits
        ok = (acc.final_rounding or acc.rounding) == "nearest" and all(len(s) == width for s in steps) and \
            not width % il and (4 * width) << f <= 1 << 53
        order = np.array([i for s in steps for i in s], np.int64)
        order.setflags(write=False)
        got = _SHAPES[key] = (order, width, il) if ok else None
    return got


def truncate_mantissa(x, bits):
    """fp32 values cut (toward zero) to ``bits`` explicit mantissa bits."""
    x = np.asarray(x, np.float32)
    drop = 23 - bits
    if drop <= 0:
        return x
    u = x.view(np.uint32) & np.uint32(~((1 << drop) - 1) & 0xFFFFFFFF)
    return u.view(np.float32)


def round_mantissa(x: np.ndarray, bits: int) -> np.ndarray:
    """Round fp32 values to ``bits`` explicit mantissa bits (nearest, ties to even)."""
    x = np.asarray(x, np.float32)
    drop = 23 - bits
    if drop <= 0:
        return x
    u = x.view(np.uint32).astype(np.uint64)
    half = np.uint64(1 << (drop - 1))
    lsb = (u >> np.uint64(drop)) & np.uint64(1)
    u = (u + half - np.uint64(1) + lsb) & ~np.uint64((1 << drop) - 1)
    return u.astype(np.uint32).view(np.float32)
