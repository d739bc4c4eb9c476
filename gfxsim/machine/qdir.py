"""Quantization direction: which way a scale went into a matrix operand, and which way it comes out.

A quantizing kernel computes a group's extremum (``amax``), derives a scale from it (``amax/224``
or ``224/amax``), converts ``x * s`` or ``x / s`` to fp8/int8, feeds the bytes to a matrix
instruction and multiplies the result by a scale again. The amax must be applied once each way:
an operand made as ``x * amax^e`` needs its result rescaled by ``amax^-e``. Rescaling by
``amax^e`` again applies the scale twice (``dequant-direction``).

Marks (bits of ``Prov.flags``, travelling with the bytes as the other flags do):
``POS``/``NEG`` on a value proportional to ``amax^+1``/``amax^-1`` — an extremum reduction
result (a value with a footprint) is ``amax^+1``; a constant factor keeps the power, a reciprocal
or a division by it flips it; ``QPOS``/``QNEG`` on data (a value with provenance and no power)
multiplied by such a value: ``x * amax^+1`` / ``x * amax^-1``. Any other arithmetic clears them
(a product of two powers, a sum, data quantized twice), so a mark is only where the chain of
operations is one this module follows. Which amax is not recorded: a rescale by any amax's power
in the operand's direction is reported (a rescale by another group's amax is the scale-group
rule's to check).
"""
from __future__ import annotations

import numpy as np

from .jit import njit, running
from .provenance import Prov

POS = np.uint8(4)             # a value proportional to amax
NEG = np.uint8(8)             # ... to 1/amax
QPOS = np.uint8(16)           # data times amax (quantized that way)
QNEG = np.uint8(32)           # data over amax
MARKS = np.uint8(POS | NEG | QPOS | QNEG)
MARKS_TOGETHER = True         # product's and extremum's marks in one compiled pass over the flags (False: numpy)


def _sign(flags, plus, minus, shape) -> np.ndarray:
    if flags is None:
        return np.zeros(shape, np.int8)
    return ((flags & plus) != 0).astype(np.int8) - ((flags & minus) != 0).astype(np.int8)


def power(p: Prov | None, shape) -> np.ndarray:
    """Per element: +1 (amax), -1 (1/amax), 0 (no power)."""
    return _sign(None if p is None else p.flags, POS, NEG, shape)


def quantized(p: Prov | None, shape) -> np.ndarray:
    """Per element: +1 (data times amax), -1 (data over amax), 0 (not marked)."""
    return _sign(None if p is None else p.flags, QPOS, QNEG, shape)


def _const(p: Prov | None) -> bool:
    """No identity, footprint or mark anywhere: a number (a register file keeps cleared planes, so
    a constant written over tagged data reads back with planes of nothing)."""
    if p is None or p.empty_like():
        return True
    if p.flags is not None and (p.flags & MARKS).any():
        return False
    return not any((a >= 0).any() for a in p.ids.values()) and not any(m.nonempty().any() for m in p.fp.values())


def _with(p: Prov, e, q) -> Prov:
    """p with its marks replaced by power ``e`` and quantization ``q`` (int8 arrays)."""
    marks = (np.where(e > 0, POS, 0) | np.where(e < 0, NEG, 0) | np.where(q > 0, QPOS, 0)
             | np.where(q < 0, QNEG, 0)).astype(np.uint8)
    if p.flags is None:
        if not marks.any():
            return p
        return Prov(p.g, p.ids, p.fp, marks)
    flags = (p.flags & ~MARKS) | marks
    return Prov(p.g, p.ids, p.fp, flags if flags.any() else None)


_NO_FLAGS = np.empty(0, np.uint8)       # no flags (size 0: nothing to write)


def _flat_flags(pa: Prov | None, pb: Prov | None, out: Prov, shape) -> tuple | None:
    """The flags of a, b and out, each flat (an empty array: none), for the compiled passes; None
    where numba does not run (or MARKS_TOGETHER is off) or some flags are not uint8 of ``shape``
    (the numpy path broadcasts them)."""
    if not MARKS_TOGETHER or not running():
        return None
    got = []
    for p in (pa, pb, out):
        f = None if p is None else p.flags
        if f is None:
            got.append(_NO_FLAGS)
        elif f.dtype != np.uint8 or f.shape != shape:
            return None
        else:
            got.append(np.ascontiguousarray(f).reshape(-1))
    return tuple(got)


def _with_flags(out: Prov, res: np.ndarray, any_marks: bool, any_flags: bool) -> Prov:
    """``_with``'s answer from a compiled pass's flags ``res`` (out's unmarked bits and the new
    marks; the marks alone where out has no flags): out itself where it has no flags and gets no mark."""
    if out.flags is None:
        return Prov(out.g, out.ids, out.fp, res) if any_marks else out
    return Prov(out.g, out.ids, out.fp, res if any_flags else None)


@njit
def _marks_of(e, q):
    return (4 if e > 0 else 0) | (8 if e < 0 else 0) | (16 if q > 0 else 0) | (32 if q < 0 else 0)


@njit
def _product_pass(fa, fb, fo, ca, cb, divide, res):
    """``product``'s marks element by element (POS 4, NEG 8, QPOS 16, QNEG 32; an empty flags
    array: none) into ``res`` with out's other bits; returns (any mark, any bit)."""
    any_m = False
    any_f = False
    for i in range(res.size):
        a = np.int64(fa[i]) if fa.size else 0
        b = np.int64(fb[i]) if fb.size else 0
        ea = (1 if a & 4 else 0) - (1 if a & 8 else 0)
        qa = (1 if a & 16 else 0) - (1 if a & 32 else 0)
        eb = (1 if b & 4 else 0) - (1 if b & 8 else 0)
        if divide:
            eb = -eb
        qb = (1 if b & 16 else 0) - (1 if b & 32 else 0)
        if cb:                                   # x * c, x / c: x's marks
            e, q = ea, qa
        elif ca:                                 # c * x keeps them; c / x flips a power, not data
            e, q = eb, (0 if divide else qb)
        else:                                    # data x amax^e: quantized that way
            e = 0
            q = eb if (ea == 0 and qa == 0 and eb != 0) else 0
            if not divide and eb == 0 and qb == 0 and ea != 0:
                q = ea
        m = _marks_of(e, q)
        f = ((np.int64(fo[i]) & 195) | m) if fo.size else m      # 195: ~MARKS
        res[i] = f
        any_m = any_m or m != 0
        any_f = any_f or f != 0
    return any_m, any_f


@njit
def _plain(flag):
    """No 1/amax power (power >= 0) and no quantized data (quantized == 0)."""
    x = np.int64(flag)
    return not (x & 8 and not x & 4) and (x & 16 != 0) == (x & 32 != 0)


@njit
def _extremum_pass(fa, fb, fo, reduced, res):
    """``extremum``'s marks element by element: POS where a footprint was reduced over and
    neither side holds 1/amax or quantized data; into ``res`` with out's other bits."""
    any_m = False
    any_f = False
    for i in range(res.size):
        plain = reduced[i] and (fa.size == 0 or _plain(fa[i])) and (fb.size == 0 or _plain(fb[i]))
        m = 4 if plain else 0
        f = ((np.int64(fo[i]) & 195) | m) if fo.size else m
        res[i] = f
        any_m = any_m or m != 0
        any_f = any_f or f != 0
    return any_m, any_f


def clamped(pa: Prov | None, out: Prov | None) -> Prov | None:
    """``out`` with ``pa``'s marks: a clamp of ``a`` between constants (v_med3_f32 a, lo, hi, the
    saturation before an fp8 conversion) is still ``a``, up to the range it saturates at."""
    if pa is None or out is None or out.shape is None:
        return out
    shape = out.shape
    return _with(out, power(pa, shape), quantized(pa, shape))


def joined(pa: Prov | None, pb: Prov | None, out: Prov | None) -> Prov | None:
    """``out`` (per byte) with each byte's marks from the side that holds it: an or/xor that packs
    bytes of two values (quantized fp8/int8 bytes shifted into one word). A byte both sides mark
    is a mix of two values and keeps none."""
    if out is None or out.shape is None:
        return out
    shape = out.shape
    fa = np.zeros(shape, np.uint8) if pa is None or pa.flags is None else np.broadcast_to(pa.flags & MARKS, shape)
    fb = np.zeros(shape, np.uint8) if pb is None or pb.flags is None else np.broadcast_to(pb.flags & MARKS, shape)
    marks = np.where(fa == 0, fb, np.where(fb == 0, fa, 0)).astype(np.uint8)
    if not marks.any() and (out.flags is None or not (out.flags & MARKS).any()):
        return out
    flags = marks if out.flags is None else (out.flags & ~MARKS) | marks
    return Prov(out.g, out.ids, out.fp, flags)


def product(pa: Prov | None, pb: Prov | None, out: Prov | None, divide: bool = False) -> Prov | None:
    """``out`` (the provenance of a*b, or a/b when ``divide``) with its marks (a, b: per element,
    equally shaped; None for a number without provenance)."""
    if out is None or out.shape is None:
        return out
    shape = out.shape
    ca, cb = _const(pa), _const(pb)
    if ca and cb:
        return out
    flat = _flat_flags(pa, pb, out, shape)
    if flat is not None:                     # the same marks, one compiled pass over the flags
        res = np.empty(shape, np.uint8)
        return _with_flags(out, res, *_product_pass(*flat, ca, cb, divide, res.reshape(-1)))
    s = -1 if divide else 1
    ea, eb = power(pa, shape), s * power(pb, shape)
    qa, qb = quantized(pa, shape), quantized(pb, shape)
    zero = np.zeros(shape, np.int8)
    if cb:                                   # x * c, x / c: x's marks
        return _with(out, ea, qa)
    if ca:                                   # c * x keeps them; c / x flips a power, not data
        return _with(out, eb, zero if divide else qb)
    data_a, data_b = (ea == 0) & (qa == 0), (eb == 0) & (qb == 0)
    q = np.where(data_a & (eb != 0), eb, 0)  # data x amax^e: quantized that way
    if not divide:
        q = np.where(data_b & (ea != 0), ea, q)
    return _with(out, zero, q.astype(np.int8))


def reciprocal(pa: Prov | None, out: Prov | None) -> Prov | None:
    """1/a: a power flips; anything else loses its marks."""
    if out is None or _const(pa) or out.shape is None:
        return out
    shape = out.shape
    return _with(out, -power(pa, shape), np.zeros(shape, np.int8))


def extremum(pa: Prov | None, pb: Prov | None, out: Prov | None) -> Prov | None:
    """max/min: a reduction of data (the result has a footprint) is amax^+1; a bound by a number
    (a clamp) keeps its operand's marks; an extremum of other marks loses them."""
    if out is None or _const(pa) or _const(pb) or out.shape is None:
        return out
    shape = out.shape
    reduced = np.zeros(shape, np.bool_)
    for m in out.fp.values():
        reduced |= m.nonempty()
    flat = _flat_flags(pa, pb, out, shape)
    if flat is not None:                     # the same marks, one compiled pass over the flags
        res = np.empty(shape, np.uint8)
        return _with_flags(out, res, *_extremum_pass(*flat, reduced.reshape(-1), res.reshape(-1)))
    plain = np.ones(shape, np.bool_)
    for p in (pa, pb):
        plain &= (power(p, shape) >= 0) & (quantized(p, shape) == 0)
    return _with(out, (reduced & plain).astype(np.int8), np.zeros(shape, np.int8))


def operand_direction(marks_gathered: np.ndarray) -> np.ndarray:
    """Per A row (B column) of an operand's gathered quantization marks ``[nb, M|N, K]`` (+1, -1,
    0): the direction every K slot shares, 0 where they do not all share one."""
    first = marks_gathered[:, :, :1]
    return np.where((marks_gathered == first).all(axis=2), first[:, :, 0], 0).astype(np.int8)


def operand_direction_at(flags: np.ndarray, plan: np.ndarray, operand: str):
    """``operand_direction`` of the marks of ``flags`` [rows, width] gathered through an operand's
    flat plan (A: [nb, M, K], B: [nb, K, N]), in one compiled pass that reads the flags where the
    plan points (no marks plane, no gather); None where numba does not run (the caller gathers)."""
    if not running() or flags.dtype != np.uint8 or plan.ndim != 3 or 0 in plan.shape:
        return None
    nb, P, Q = plan.shape
    out = np.empty((nb, Q if operand == "B" else P), np.int8)
    _direction_pass(np.ascontiguousarray(flags).reshape(-1), plan, operand == "B", QPOS, QNEG, out)
    return out


def operand_directions_at(flags: list, plan: np.ndarray, operand: str):
    """``[None if no byte of f carries a mark else operand_direction_at(f, plan, operand) for f in
    flags]`` (uint8 planes of one shape: the distinct operands of one side of mma_many) in one
    compiled pass over the marked ones stacked, each operand's plan moved to its own plane; None
    where numba does not run or the planes differ in shape or type (the caller asks each)."""
    f0 = flags[0]
    if not running() or f0 is None or f0.ndim != 2 or any(f is None or f.dtype != np.uint8 or f.shape != f0.shape for f in flags):
        return None
    stacked = np.stack(flags)
    at = np.nonzero((stacked & (QPOS | QNEG)).reshape(len(flags), -1).any(axis=1))[0]
    out = [None] * len(flags)
    if not len(at):
        return out
    moved = plan[None] + (np.arange(len(at)) * f0.size).astype(plan.dtype)[:, None, None, None]
    got = operand_direction_at(stacked[at].reshape(-1, f0.shape[1]), moved.reshape((-1,) + plan.shape[1:]), operand)
    if got is None:
        return None
    nb = plan.shape[0]
    for j, i in enumerate(at.tolist()):
        out[i] = got[j * nb:(j + 1) * nb]
    return out


@njit
def _direction_pass(flags, plan, transposed, qpos, qneg, out):
    """out[b, r]: the quantization direction (+1 QPOS, -1 QNEG, 0 neither or both) every K slot of
    row r shares, 0 where they differ. Rows are the plan's middle axis, K its last; ``transposed``
    (B's [nb, K, N] plan): rows its last axis, K its middle."""
    nb, P, Q = plan.shape
    rows, ks = (Q, P) if transposed else (P, Q)
    for b in range(nb):
        for r in range(rows):
            first = 0
            d = 0
            for k in range(ks):
                f = flags[plan[b, k, r]] if transposed else flags[plan[b, r, k]]
                s = (1 if f & qpos else 0) - (1 if f & qneg else 0)
                if k == 0:
                    first = s
                    d = s
                elif s != first:
                    d = 0
                    break
            out[b, r] = d


__all__ = ["POS", "NEG", "QPOS", "QNEG", "MARKS", "power", "quantized", "product", "reciprocal", "extremum",
           "operand_direction", "clamped", "joined"]
