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
def two_stage(prod, pexp, c, order, width, il, f, f2, mode, far, out):
    """D (float32 ``out`` [E]) of products ``prod`` [E, K] (exponents ``pexp``) and C ``c`` [E]
    through the steps of ``width`` K indices listed in ``order``; False where a step's result
    is not finite (the caller then leaves it to the step loop)."""
    E, K = prod.shape
    steps = K // width
    per = width // il
    for e in range(E):
        run = c[e]
        for s in range(steps):
            base = s * width
            e_dot = NONE
            dot = 0.0
            if il == 1:
                for j in range(width):
                    e_dot = max(e_dot, pexp[e, order[base + j]])
                q = _pow2(e_dot - f)
                for j in range(width):
                    dot += _cut(prod[e, order[base + j]], q, mode)
            else:
                for g in range(il):
                    eg = NONE
                    for j in range(per):
                        eg = max(eg, pexp[e, order[base + j * il + g]])
                    e_dot = max(e_dot, eg)
                dot_q = _pow2(e_dot - f)
                for g in range(il):
                    eg = NONE
                    for j in range(per):
                        eg = max(eg, pexp[e, order[base + j * il + g]])
                    qg = _pow2(eg - f)
                    part = 0.0
                    for j in range(per):
                        part += _cut(prod[e, order[base + j * il + g]], qg, mode)
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
                return False
            run = np.float64(d)
        out[e] = np.float32(run)
    return True
