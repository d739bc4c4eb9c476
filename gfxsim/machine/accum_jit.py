"""The "two_stage" accumulator datapath (accum._finite_two_stage: CDNA3 f16/bf16/xf32/fp8 and the
MMACs) compiled, one output element at a time, for a process that runs numba already: the same
values as the numpy path, so the same bits (tests/gfxsim/machine/test_accum.py holds both to the
step loop).

A step's fused group is counted in quanta: each term's cut is trunc(p x 2^(f - e)) quanta of
2^(e - f), e the group's largest exponent. Both factors are exact powers of two, so that is the
number _cut gives (x / q and x times 1/q are one exact quotient); the quanta are integers whose
sum is exact under the bound accum._finite_two_stage checks, so their total times the quantum
(an integer below 2^53 times a power of two is a double) is the sum of the cut terms in any
order, +0 for a zero total as numpy's sum from +0. Powers of two come from a table and a
double's exponent from its bits, where libm's ldexp and frexp cost more than the arithmetic.
"""
from __future__ import annotations

import math

import numpy as np

from .jit import njit

NONE = -(1 << 20)                  # accum.NONE: the exponent of a zero term
TRUNCATE, NEAREST, FLOOR = 0, 1, 2
ROUNDING = {"truncate": TRUNCATE, "nearest": NEAREST, "floor": FLOOR}
_P2 = np.ldexp(1.0, np.arange(-1074, 1024))     # 2^e at e + 1074 (a constant of the compiled code)


@njit
def _pow2(e):
    """2^e, e clamped to [-1074, 1023] (accum._pow2)."""
    return _P2[min(max(e, -1074), 1023) + 1074]


@njit
def _cut(x, q, mode):
    # x / q, as x times 1/q where that is a power of two too (q >= 2^-1023): both are the exact
    # quotient rounded once, so the same bits
    y = x * (1.0 / q) if q >= 2.0 ** -1023 else x / q
    return _round(y, mode) * q


@njit
def _round(y, mode):
    if mode == TRUNCATE:
        return np.trunc(y)
    if mode == FLOOR:
        return np.floor(y)
    return np.rint(y)                  # ties to even, as np.round


@njit
def _e32(x):
    if x == 0.0:
        return -126
    return max(math.frexp(x)[1] - 1, -126)


@njit
def _core(ao, ea, bo, eb, M, N, c, width, il, f, f2, mode, far, out):
    """D (float32 ``out`` [bl * M * N]) of A rows ``ao`` [bl * M, K] and B columns ``bo`` [bl * N, K],
    both in step order (their inputs' exponents ``ea``, ``eb``), and C ``c`` [bl * M * N]; False
    where a product is not finite or reaches 2^128, or a step's result is not finite. One call
    per instruction, every loop inline (a compiled call taking arrays costs more than a step's
    arithmetic)."""
    K = ao.shape[1]
    prod = np.empty(K)
    pexp = np.empty(K, np.int64)
    word = np.empty(1)                  # a double's bits: its uint64 view
    bits = word.view(np.uint64)
    per = width // il
    for r in range(ao.shape[0]):
        for n in range(N):
            q = (r // M) * N + n
            bad = False
            for k in range(K):
                p = ao[r, k] * bo[q, k]
                bad |= not abs(p) < 2.0 ** 128                # NaN compares False
                prod[k] = p
                pexp[k] = NONE if p == 0.0 else ea[r, k] + eb[q, k]
            if bad:
                return False
            run = c[r * N + n]
            for base in range(0, K, width):
                # the step's fused dot product (il groups each on its own, their sums cut toward -inf)
                e_dot = NONE
                for j in range(width):
                    e_dot = max(e_dot, pexp[base + j])
                if il == 1 and e_dot - f >= -1022:
                    inv = _P2[f - e_dot + 1074]
                    t = 0.0
                    for j in range(width):
                        t += _round(prod[base + j] * inv, mode)
                    dot = t * _P2[e_dot - f + 1074]
                else:
                    dot = _groups(prod, pexp, base, e_dot, il, per, f, mode)
                # the second adder: dot and C cut toward -inf, summed, cut to f2 bits, rounded to fp32
                # nearest even; every quantum here is at least 2^(-126 - f2 - 1), a normal double
                word[0] = run
                be = np.int64((bits[0] >> np.uint64(52)) & np.uint64(0x7FF))
                e_c = _e32(run) if be == 0 else max(be - 1023, -126)
                top = max(e_dot, e_c)
                c_cut = np.floor(run * _P2[f - top + 1074]) * _P2[top - f + 1074]
                if far and e_c < top - f - 1:
                    c_cut = 0.0
                t = np.floor(dot * _P2[f2 + 1 - top + 1074]) * _P2[top - (f2 + 1) + 1074] + c_cut
                word[0] = t
                be = np.int64((bits[0] >> np.uint64(52)) & np.uint64(0x7FF))
                et = _e32(t) if be == 0 else max(be - 1023, -126)
                d = np.float32(np.floor(t * _P2[f2 - et + 1074]) * _P2[et - f2 + 1074])
                if not np.isfinite(d):
                    return False
                run = np.float64(d)
            out[r * N + n] = np.float32(run)
    return True


@njit
def _groups(prod, pexp, base, e_dot, il, per, f, mode):
    """A step's dot product as ``il`` interleaved groups (terms g, g + il, ...), each aligned to its
    largest exponent and summed in quanta, their sums cut toward -inf to the step's; a group with
    no nonzero term (quantum below 2^-1022) takes _cut, as the loop does."""
    dot_q = _pow2(e_dot - f)
    dot = 0.0
    for g in range(il):
        eg = NONE
        for j in range(per):
            eg = max(eg, pexp[base + g + j * il])
        if eg - f < -1022:
            q = _pow2(eg - f)
            part = 0.0
            for j in range(per):
                part += _cut(prod[base + g + j * il], q, mode)
        else:
            inv = _P2[f - eg + 1074]
            t = 0.0
            for j in range(per):
                t += _round(prod[base + g + j * il] * inv, mode)
            part = t * _P2[eg - f + 1074]
        dot += part if il == 1 else _cut(part, dot_q, FLOOR)
    return dot


@njit
def two_stage(prod: np.ndarray, pexp: np.ndarray, c: np.ndarray, order: np.ndarray, width: int, il: int, f: int,
              f2: int, mode: int, far: bool, out: np.ndarray) -> bool:
    """D (float32 ``out`` [E]) of products ``prod`` [E, K] (exponents ``pexp``) and C ``c`` [E]
    through the steps of ``width`` K indices listed in ``order``; False where a step's result
    is not finite (the caller then leaves it to the step loop). Each product is formed again as
    itself times 1 with its own exponent (plus 0)."""
    E, K = prod.shape
    p = np.empty((E, K))
    pe = np.empty((E, K), np.int64)
    for e in range(E):
        for k in range(K):
            p[e, k] = prod[e, order[k]]
            pe[e, k] = pexp[e, order[k]]
    return _core(p, pe, np.ones((1, K)), np.zeros((1, K), np.int64), E, 1, c, width, il, f, f2, mode, far, out)


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
    reaches 2^128, C is not finite, or a step's result is not finite. A's rows and B's columns
    are put in the steps' K order once, with their inputs' exponents."""
    bl, M, K = a.shape
    N = b.shape[2]
    for v in c.ravel():
        if not np.isfinite(v):
            return False
    ao = np.empty((bl * M, K))
    bo = np.empty((bl * N, K))
    ea = np.zeros((bl * M, K), np.int64)                 # each input's exponent, once (zero: unused)
    eb = np.zeros((bl * N, K), np.int64)
    for x in range(bl):
        for k in range(K):
            src = order[k]
            for m in range(M):
                v = a[x, m, src]
                ao[x * M + m, k] = v
                if v != 0.0 and np.isfinite(v):
                    ea[x * M + m, k] = _exponent(v, a_emin)
            for n in range(N):
                v = b[x, src, n]
                bo[x * N + n, k] = v
                if v != 0.0 and np.isfinite(v):
                    eb[x * N + n, k] = _exponent(v, b_emin)
    if il == 1:
        got = _core_n(ao, ea, bo, eb, M, N, c.reshape(bl * M * N), width, f, f2, mode, far, out.reshape(bl * M * N))
        if got >= 0:
            return got == 1
    return _core(ao, ea, bo, eb, M, N, c.reshape(bl * M * N), width, il, f, f2, mode, far, out.reshape(bl * M * N))


@njit
def _core_n(ao, ea, bo, eb, M, N, c, width, f, f2, mode, far, out):
    """_core of a record without interleaved groups, a row of D at a time: each step's
    alignment, cut sum and second adder over the N columns together (loops a compiler makes
    vector code of). 1: done; 0: a product or a step's result is not finite (the caller's False);
    -1: a step's largest nonzero product lies below 2^(f - 1022), where a quantum is no normal
    double (then _core, element by element)."""
    K = ao.shape[1]
    bt = np.empty((K, N))                   # one block's B, K-major: a row of products is contiguous
    ebt = np.empty((K, N), np.int64)
    e_dot = np.empty(N, np.int64)
    t = np.empty(N)
    run = np.empty(N)
    pw = np.empty(N, np.int64)              # powers of two made from their exponent bits
    pf = pw.view(np.float64)
    qw = np.empty(N, np.int64)
    qf = qw.view(np.float64)
    rb = run.view(np.int64)
    tb = t.view(np.int64)
    bl = ao.shape[0] // M
    for x in range(bl):
        for k in range(K):
            for n in range(N):
                bt[k, n] = bo[x * N + n, k]
                ebt[k, n] = eb[x * N + n, k]
        for m in range(M):
            r = x * M + m
            for n in range(N):
                run[n] = c[r * N + n]
            for base in range(0, K, width):
                bad = False
                for n in range(N):
                    e_dot[n] = NONE
                for k in range(base, base + width):
                    av = ao[r, k]
                    ae = ea[r, k]
                    for n in range(N):
                        p = av * bt[k, n]
                        bad |= not abs(p) < 2.0 ** 128          # NaN compares False
                        e_dot[n] = max(e_dot[n], NONE if p == 0.0 else ae + ebt[k, n])
                if bad:
                    return 0
                low = False
                for n in range(N):                  # 2^(f - e) and 2^(e - f); 1 where no term is nonzero
                    e = e_dot[n]
                    none = e == NONE
                    low |= not none and e - f < -1022
                    pw[n] = 1023 << 52 if none else (f - e + 1023) << 52
                    qw[n] = 1023 << 52 if none else (e - f + 1023) << 52
                if low:
                    return -1
                for n in range(N):
                    t[n] = 0.0
                for k in range(base, base + width):
                    av = ao[r, k]
                    if mode == TRUNCATE:
                        for n in range(N):
                            t[n] += np.trunc(av * bt[k, n] * pf[n])
                    else:
                        for n in range(N):
                            t[n] += _round(av * bt[k, n] * pf[n], mode)
                for n in range(N):                  # the second adder (_core's), top >= -126: normal quanta
                    dot = t[n] * qf[n]
                    be = (rb[n] >> 52) & 0x7FF      # run is an fp32 value: zero, or a normal double
                    e_c = -126 if be == 0 else max(be - 1023, -126)
                    top = max(e_dot[n], e_c)
                    pw[n] = (f - top + 1023) << 52
                    qw[n] = (top - f + 1023) << 52
                    c_cut = np.floor(run[n] * pf[n]) * qf[n]
                    if far and e_c < top - f - 1:
                        c_cut = 0.0
                    pw[n] = (f2 + 1 - top + 1023) << 52
                    qw[n] = (top - (f2 + 1) + 1023) << 52
                    t[n] = np.floor(dot * pf[n]) * qf[n] + c_cut
                    be = (tb[n] >> 52) & 0x7FF      # a multiple of 2^(top - f2 - 1): zero or normal
                    et = -126 if be == 0 else max(be - 1023, -126)
                    pw[n] = (f2 - et + 1023) << 52
                    qw[n] = (et - f2 + 1023) << 52
                    d = np.float32(np.floor(t[n] * pf[n]) * qf[n])
                    bad |= not np.isfinite(d)
                    run[n] = np.float64(d)
                if bad:
                    return 0
            for n in range(N):
                out[r * N + n] = np.float32(run[n])
    return 1
