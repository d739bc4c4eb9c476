"""The "two_stage" accumulator datapath (accum._finite_two_stage: CDNA3 f16/bf16/xf32/fp8 and the
MMACs) compiled, one output element at a time, for a process that runs numba already (a run with
provenance): the same operations on the same float64 values in the same order as the numpy
path, so the same bits (tests/gfxsim/machine/test_accum.py holds both to the step loop).

Each step's fused groups are summed in K order from +0, as exact as the numpy path's sums under
the same bound (accum._finite_two_stage), so the order does not matter.
"""
from __future__ import annotations

import math

import numpy as np

from .jit import njit

NONE = -(1 << 20)                  # accum.NONE: the exponent of a zero term
TRUNCATE, NEAREST, FLOOR = 0, 1, 2
ROUNDING = {"truncate": TRUNCATE, "nearest": NEAREST, "floor": FLOOR}


@njit
def _pow2(e):
    return math.ldexp(1.0, min(max(e, -1074), 1023))


@njit
def _cut(x, q, mode):
    # x / q, as x times 1/q where that is a power of two too (q >= 2^-1023): both are the exact
    # quotient rounded once, so the same bits
    y = x * (1.0 / q) if q >= 2.0 ** -1023 else x / q
    if mode == TRUNCATE:
        y = np.trunc(y)
    elif mode == FLOOR:
        y = np.floor(y)
    else:
        y = np.rint(y)                 # ties to even, as np.round
    return y * q


@njit
def _e32(x):
    if x == 0.0:
        return -126
    return max(math.frexp(x)[1] - 1, -126)


@njit
def _steps(prod, pexp, run, order, width, il, f, f2, mode, far):
    """One element's D from its products ``prod`` [K] (exponents ``pexp``) and C ``run``, and
    whether every step's result is finite."""
    steps = prod.shape[0] // width
    per = width // il
    for s in range(steps):
        base = s * width
        e_dot = NONE
        dot = 0.0
        if il == 1:
            for j in range(width):
                e_dot = max(e_dot, pexp[order[base + j]])
            q = _pow2(e_dot - f)
            for j in range(width):
                dot += _cut(prod[order[base + j]], q, mode)
        else:
            for g in range(il):
                eg = NONE
                for j in range(per):
                    eg = max(eg, pexp[order[base + j * il + g]])
                e_dot = max(e_dot, eg)
            dot_q = _pow2(e_dot - f)
            for g in range(il):
                eg = NONE
                for j in range(per):
                    eg = max(eg, pexp[order[base + j * il + g]])
                qg = _pow2(eg - f)
                part = 0.0
                for j in range(per):
                    part += _cut(prod[order[base + j * il + g]], qg, mode)
                dot += _cut(part, dot_q, FLOOR)
        e_c = _e32(run)
        top = max(e_dot, e_c)
        c_cut = _cut(run, _pow2(top - f), FLOOR)
        if far and e_c < top - f - 1:
            c_cut = 0.0
        t = _cut(dot, _pow2(top - (f2 + 1)), FLOOR) + c_cut
        t = _cut(t, _pow2(_e32(t) - f2), FLOOR)
        d = np.float32(t)
        if not np.isfinite(d):
            return run, False
        run = np.float64(d)
    return run, True


@njit
def two_stage(prod: np.ndarray, pexp: np.ndarray, c: np.ndarray, order: np.ndarray, width: int, il: int, f: int,
              f2: int, mode: int, far: bool, out: np.ndarray) -> bool:
    """D (float32 ``out`` [E]) of products ``prod`` [E, K] (exponents ``pexp``) and C ``c`` [E]
    through the steps of ``width`` K indices listed in ``order``; False where a step's result
    is not finite (the caller then leaves it to the step loop)."""
    for e in range(prod.shape[0]):
        run, ok = _steps(prod[e], pexp[e], c[e], order, width, il, f, f2, mode, far)
        if not ok:
            return False
        out[e] = np.float32(run)
    return True


@njit
def _exponent(x, emin):
    """accum.exponent of one finite, nonzero input."""
    return max(math.frexp(x)[1] - 1, emin)


@njit
def two_stage_mma(a: np.ndarray, b: np.ndarray, c: np.ndarray, a_emin: int, b_emin: int, order: np.ndarray, width: int,
                  il: int, f: int, f2: int, mode: int, far: bool, out: np.ndarray) -> bool:
    """two_stage of A ``[bl, M, K]`` x B ``[bl, K, N]`` + C ``[bl, M, N]`` (float64) with the
    products and their exponents formed here as accum.product_terms forms them (an input below
    its type's normal range aligning as ``*_emin``); False where a product is not finite or
    reaches 2^128, or a step's result is not finite."""
    bl, M, K = a.shape
    N = b.shape[2]
    ea = np.zeros((bl, M, K), np.int64)                 # each input's exponent, once (zero: unused)
    eb = np.zeros((bl, K, N), np.int64)
    for x in range(bl):
        for k in range(K):
            for m in range(M):
                if a[x, m, k] != 0.0 and np.isfinite(a[x, m, k]):
                    ea[x, m, k] = _exponent(a[x, m, k], a_emin)
            for n in range(N):
                if b[x, k, n] != 0.0 and np.isfinite(b[x, k, n]):
                    eb[x, k, n] = _exponent(b[x, k, n], b_emin)
    prod = np.empty(K)
    pexp = np.empty(K, np.int64)
    for x in range(bl):
        for m in range(M):
            for n in range(N):
                for k in range(K):
                    p = a[x, m, k] * b[x, k, n]
                    if not abs(p) < 2.0 ** 128:          # NaN compares False
                        return False
                    prod[k] = p
                    pexp[k] = NONE if p == 0.0 else ea[x, m, k] + eb[x, k, n]
                run, ok = _steps(prod, pexp, c[x, m, n], order, width, il, f, f2, mode, far)
                if not ok:
                    return False
                out[x, m, n] = np.float32(run)
    return True
