"""The f64 matrix instructions' arithmetic (v_mfma_f64_*): D = A.B + C with the exact sum of the
K products and C rounded once to f64, the f64 counterpart of the "exact fp32" default model.

A product of two doubles is split exactly into a rounded product and its error (Dekker's
two-product, Veltkamp splitting), and ``math.fsum`` rounds the sum of all those terms exactly.
The split is exact while no product overflows or falls to the subnormal range; elements whose
inputs lie outside (|x| beyond 2^500 or a nonzero product below 2^-900) and non-finite ones
take the plain float64 sum of the rounded products instead.
"""
from __future__ import annotations

import math

import numpy as np

_SPLIT = 134217729.0           # 2^27 + 1: Veltkamp's constant for 53-bit significands
_BIG, _TINY = 2.0 ** 500, 2.0 ** -900


def _split(x):
    t = _SPLIT * x
    hi = t - (t - x)
    return hi, x - hi


def two_product(a, b):
    """(p, e) with p = fl(a*b) and p + e == a*b exactly (finite, in-range inputs)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def mma_f64(a, b, c):
    """D ``[bl, M, N]`` float64 of A ``[bl, M, K]``, B ``[bl, K, N]``, C ``[bl, M, N]``."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    x = a[:, :, None, :]                          # [bl, M, 1, K]
    y = np.swapaxes(b, 1, 2)[:, None, :, :]       # [bl, 1, N, K]
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        p, e = two_product(x, y)
        plain = p.sum(axis=-1) + c
    ok = np.isfinite(plain) & np.isfinite(e).all(axis=-1) & \
        (np.abs(x) < _BIG).all(axis=-1) & (np.abs(y) < _BIG).all(axis=-1) & \
        ((p == 0) | (np.abs(p) > _TINY)).all(axis=-1)
    out = plain.copy()
    terms = np.concatenate([p, e, c[..., None]], axis=-1)       # [bl, M, N, 2K+1]
    for idx in zip(*np.nonzero(ok)):
        out[idx] = math.fsum(terms[idx].tolist())
    return out
