"""Serial accumulator datapaths: one fused multiply-add per K index in the C/D type ("fma": CDNA
f32/f64 v_mfma), and CDNA2's fp32 multiply-add tree with denormals flushed ("ftz_tree").

"fma" rounds a*b + c once per K index, in K order. fp32: the product of two fp32 values is exact
in float64, and the float64 sum with C is rounded to odd (its last bit set when inexact), which
float32 then rounds correctly. f64: the product is split exactly (``mma64.two_product``) and
``math.fsum`` rounds product and C once.
"""
from __future__ import annotations

import math

import numpy as np

from .mma64 import two_product

F32_EMIN = -126
# smallest normal exponent of each operand type: a subnormal input aligns (and flushes) as one of it
EMIN = {"f16": -14, "bf16": -126, "fp8": -7, "bf8": -15, "fp8_e4m3": -6, "fp8_e5m2": -14,
        "f32": -126, "xf32": -126, "f64": -1022}


def finish(acc, d) -> np.ndarray:
    """The fp32 result as the record writes it (its NaN bits)."""
    d = np.asarray(d).astype(np.float32)
    if acc.nan is not None:
        bits = np.where(np.isnan(d), np.uint32(acc.nan), d.view(np.uint32)).astype(np.uint32)
        d = bits.view(np.float32)
    return d


def _round_odd_f32(x, y):
    """fp32 of x + y (float64 values) rounded once to nearest even."""
    s = x + y
    err = (x - (s - (s - x))) + (y - (s - x))          # two-sum: s + err == x + y exactly
    u = s.view(np.uint64)
    sticky = (err != 0) & ((u & np.uint64(1)) == 0) & np.isfinite(s)
    odd = np.where(sticky, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return odd.astype(np.float32)


def fma_f32(a, b, c) -> np.ndarray:
    """fp32 fma(a, b, c) per element, one rounding (to nearest even)."""
    a, b, c = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
    with np.errstate(invalid="ignore", over="ignore"):
        return _round_odd_f32(a * b, c)


def fma_f64(a, b, c) -> np.ndarray:
    """f64 fma(a, b, c) per element, one rounding. Inputs whose product or its split could leave the
    normal range are summed as exact rationals (``float`` of a Fraction rounds once)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (a, b, c)))
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        p, e = two_product(a, b)
        plain = a * b + c
    # a finite product is exact, never inf: an infinite C wins over it
    out = np.where(np.isfinite(a) & np.isfinite(b) & np.isinf(c), c, plain)
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    tame = (((np.abs(a) > 2.0 ** -400) & (np.abs(a) < 2.0 ** 400) & (np.abs(b) > 2.0 ** -400)
             & (np.abs(b) < 2.0 ** 400)) | (a == 0) | (b == 0)) & (np.abs(c) < 2.0 ** 1000)
    # an exact zero is +0 (round to nearest), -0 only as a -0 product plus a -0 C
    neg_zero = ((a == 0) | (b == 0)) & (np.signbit(a) ^ np.signbit(b)) & (c == 0) & np.signbit(c)
    sign_zero = np.where(neg_zero, -0.0, 0.0)
    for idx in zip(*np.nonzero(finite)):
        if tame[idx]:
            out[idx] = math.fsum((float(p[idx]), float(e[idx]), float(c[idx])))
            if out[idx] != 0:
                continue
        from fractions import Fraction      # imports decimal (~10 ms): only here, where it is needed
        exact = Fraction(float(a[idx])) * Fraction(float(b[idx])) + Fraction(float(c[idx]))
        try:
            out[idx] = float(exact) if exact != 0 else sign_zero[idx]
        except OverflowError:
            out[idx] = math.inf if exact > 0 else -math.inf
        if out[idx] == 0 and exact != 0:         # rounded to zero: the sign of the exact value
            out[idx] = math.copysign(0.0, float(exact > 0) - 0.5)
    return out


def _flush(x, emin, keep_sign):
    x = np.asarray(x)
    small = np.abs(x) < 2.0 ** emin
    return np.where(small, x * 0 if keep_sign else 0, x).astype(x.dtype)


def _add(x, y):
    with np.errstate(over="ignore", invalid="ignore"):
        return _flush(x + y, F32_EMIN, True)


def serial_mma(acc, a, b, c, a_type: str | None = None, b_type: str | None = None) -> np.ndarray:
    """D ``[bl, M, N]`` of A ``[bl, M, K]``, B ``[bl, K, N]``, C by the "fma" or "ftz_tree" record."""
    a = np.asarray(a)[..., :, None, :]                          # [bl, M, 1, K]
    b = np.swapaxes(np.asarray(b), -1, -2)[..., None, :, :]     # [bl, 1, N, K]
    k = a.shape[-1]
    if acc.c_entry == "fma":
        f64 = np.asarray(c).dtype == np.float64
        run = np.asarray(c, np.float64 if f64 else np.float32)
        for i in range(k):
            run = (fma_f64 if f64 else fma_f32)(a[..., i], b[..., i], run)
        return run if f64 else finish(acc, run)
    # ftz_tree: fp32 products of inputs flushed to +0, each step's pairwise sum added to C
    a = _flush(np.asarray(a, np.float32), EMIN.get(a_type, F32_EMIN), False)
    b = _flush(np.asarray(b, np.float32), EMIN.get(b_type, F32_EMIN), False)
    with np.errstate(over="ignore", invalid="ignore"):
        p = _flush(a * b, F32_EMIN, True)
    run = _flush(np.asarray(c, np.float32), F32_EMIN, False)
    for i in range(0, k, acc.step):
        s = _add(p[..., i], p[..., i + 1])
        if acc.step == 4:
            s = _add(s, _add(p[..., i + 2], p[..., i + 3]))
        run = _add(run, s)
    return finish(acc, run)
