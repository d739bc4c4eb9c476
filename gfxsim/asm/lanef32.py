"""One lane of the fp32 VALU rows as compiled scalar functions on the 32-bit words a register holds,
for an executor that runs a block's instructions lane by lane in numba (no numpy call per
instruction).

Each function takes its sources as words (uint32 bit patterns, so a NaN's payload is exact; an
"i32"/"u32" source is the word itself) and returns the result's word (np.uint32), bit for bit what
the ISA entry (gfxsim/isa: fp.py, floating.py, conversion.py, double.py) gives for the same sources
on contiguous arrays, as the asm front end's reads pass them:

- a NaN source is returned quieted, the first NaN source in the entry's order winning (numpy's
  contiguous loops return their first operand's NaN over a wave's width; the fused ones go through
  binary64, which keeps the payload); a NaN no source explains is the canonical NaN
  (fp.canonical_nan) where the entry asks for it, and the host's default NaN where it does not
  (v_mac_f32, and v_fma_f32's inf*0 beside a NaN addend, which the entry's canonical_nan keeps);
- v_fma_f32 (and v_fmac_f32) rounds once, with fp.fma's rule for a binary64 sum on a binary32
  midpoint (the error's sign decides);
- max/min/med3 follow fp._minmax in IEEE mode (a signalling NaN quieted, a quiet NaN yielding the
  other source, +0 above -0);
- the transcendental stand-ins (fp.APPROXIMATED) give the entry's correctly rounded bits; the
  caller still marks their results approximated, as the step does.

The float modifiers (abs, neg) are the caller's: applied to a source's word before the call, as
semantics.float_mods applies them. The asm front end runs with the float mode its launch accepts
(binary32 denormals kept, round to nearest even, IEEE mode), so no function here reads MODE; the
binary16 and fp8 rows, which read FP16_OVFL, are lanef16.py's. A compare's function gives the
lane's bit (result "mask"): the mask, its EXEC write (v_cmpx) and the lanes off EXEC writing 0 are
the caller's, as vop._cmp writes them.

``LANE_F32`` maps a mnemonic to its ``LaneF32``: the compiled function (``fn``: starts numba on
first use and makes every function of this module a dispatcher, so compiled code naming
``lanef32.v_add_f32`` may be compiled after it; call it with np.uint32 words), the same source run
by Python (``py``, for tests and debugging), its source types in argument order, whether it reads
MODE or VCC, what bit 32 of a wider result means (``flag``), whether its result is an approximation
the caller marks, and where the arguments are not the sources in order, which operands they are
(``order``: v_fmac_f32's (S0, S1, D)); packed rows apply a scalar row's function per half
(``halves``), the compares take their relation first (``code``).
"""
from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import numpy as np

from ..isa import fp
from ..machine.jit import njit

QNAN = 0x00400000
CANONICAL = 0x7FC00000              # fp.CANONICAL_NAN of binary32
SIGN = 0x80000000
ABS = 0x7FFFFFFF
INF = 0x7F800000


# ---- words and floats ---------------------------------------------------------------------------
@njit
def flt(w):
    """The float32 a word holds (w: any integer holding the 32 bits)."""
    return np.uint32(w).view(np.float32)


@njit
def word(x):
    """The word of a float32, as an int64 (arithmetic on words stays in int64)."""
    return np.int64(np.float32(x).view(np.uint32))


@njit
def is_nan(w):
    return (w & ABS) > INF


@njit
def _snan(w):
    return (w & ABS) > INF and (w & QNAN) == 0


@njit
def as_u32(w):
    return np.uint32(w)


@njit
def _finish(r):
    """The word of a float32 result; a NaN (no source was one) as the canonical NaN."""
    w = word(r)
    if is_nan(w):
        return np.uint32(CANONICAL)
    return np.uint32(w)


# ---- add, sub, mul ------------------------------------------------------------------------------
@njit
def v_add_f32(a, b):
    a, b = np.int64(a), np.int64(b)
    if is_nan(a):
        return as_u32(a | QNAN)
    if is_nan(b):
        return as_u32(b | QNAN)
    return _finish(flt(a) + flt(b))


@njit
def v_sub_f32(a, b):
    a, b = np.int64(a), np.int64(b)
    if is_nan(a):
        return as_u32(a | QNAN)
    if is_nan(b):
        return as_u32(b | QNAN)
    return _finish(flt(a) - flt(b))


@njit
def v_subrev_f32(a, b):
    """S1 - S0 (the entry computes b - a: S1's NaN first)."""
    a, b = np.int64(a), np.int64(b)
    if is_nan(b):
        return as_u32(b | QNAN)
    if is_nan(a):
        return as_u32(a | QNAN)
    return _finish(flt(b) - flt(a))


@njit
def v_mul_f32(a, b):
    a, b = np.int64(a), np.int64(b)
    if is_nan(a):
        return as_u32(a | QNAN)
    if is_nan(b):
        return as_u32(b | QNAN)
    return _finish(flt(a) * flt(b))


# ---- fused multiply-add ---------------------------------------------------------------------------
@njit
def _step(w, up):
    """The word of the float32 next to a finite (or infinite) word's value toward +inf (up) or -inf."""
    if (w & ABS) == 0:
        return np.int64(1) if up else np.int64(SIGN | 1)
    if up == ((w & SIGN) == 0):
        return w + 1
    return w - 1


@njit
def _fma(a, b, c):
    """a*b + c rounded once to binary32, as fp.fma: the binary64 product is exact, the binary64 sum
    s carries the error e (TwoSum); where s lies on a binary32 midpoint and e is not zero the
    neighbour on e's side is taken (fp._round_ties). No source is a NaN here."""
    c64 = np.float64(flt(c))
    p = np.float64(flt(a)) * np.float64(flt(b))
    s = p + c64
    sb = np.int64(np.float64(s).view(np.uint64))
    ex = (sb >> 52) & 0x7FF
    if 897 <= ex <= 1150 and (sb & 0x1FFFFFFF) != 0x10000000:
        # s in binary32's normal range and not on a binary32 midpoint: s and the exact value round
        # alike (fp._round_once), whatever the error; no branch on data in this path
        return word(np.float32(s))
    bp = s - c64
    e = (p - bp) + (c64 - (s - bp))
    r = np.float32(s)
    if e == 0.0:
        return word(r)
    r64 = np.float64(r)
    if not (np.isfinite(s) and s != r64):
        return word(r)
    rw = word(r)
    ow = _step(rw, s > r64)
    o64 = np.float64(flt(ow))
    mid = (r64 + o64) * 0.5
    if np.isfinite(mid) and s == mid and (o64 > r64) == (e > 0.0):
        return ow
    return rw


@njit
def v_fma_f32(a, b, c):
    a, b, c = np.int64(a), np.int64(b), np.int64(c)
    if is_nan(a):
        return as_u32(a | QNAN)
    if is_nan(b):
        return as_u32(b | QNAN)
    if is_nan(c):
        p = np.float64(flt(a)) * np.float64(flt(b))
        if np.isnan(p):             # inf*0: the host's default NaN comes first, and c's NaN keeps it
            return as_u32(word(np.float32(p)))
        return as_u32(c | QNAN)
    w = _fma(a, b, c)
    if is_nan(w):
        return np.uint32(CANONICAL)
    return as_u32(w)


@njit
def v_mac_f32(x, y, acc):
    """gfx9's v_mac_f32 (S0, S1, D): x*y rounded, then + D rounded (vop._mac_math; no canonical NaN:
    an invalid operation gives the host's default NaN, as numpy's float32 arithmetic does)."""
    x, y, acc = np.int64(x), np.int64(y), np.int64(acc)
    if is_nan(x):
        return as_u32(x | QNAN)
    if is_nan(y):
        return as_u32(y | QNAN)
    p = flt(x) * flt(y)
    if is_nan(acc) and not np.isnan(p):
        return as_u32(acc | QNAN)
    return as_u32(word(p + flt(acc)))


# ---- IEEE-mode min, max, med3 ----------------------------------------------------------------------
@njit
def v_max_f32(a, b):
    a, b = np.int64(a), np.int64(b)
    if _snan(a):
        return as_u32(a | QNAN)
    if _snan(b):
        return as_u32(b | QNAN)
    if is_nan(a):
        return as_u32(b)
    if is_nan(b):
        return as_u32(a)
    fa, fb = flt(a), flt(b)
    if fa > fb or (fa == fb and (a & SIGN) == 0):
        return as_u32(a)
    return as_u32(b)


@njit
def v_min_f32(a, b):
    a, b = np.int64(a), np.int64(b)
    if _snan(a):
        return as_u32(a | QNAN)
    if _snan(b):
        return as_u32(b | QNAN)
    if is_nan(a):
        return as_u32(b)
    if is_nan(b):
        return as_u32(a)
    fa, fb = flt(a), flt(b)
    if fa < fb or (fa == fb and (a & SIGN) != 0):
        return as_u32(a)
    return as_u32(b)


@njit
def v_max3_f32(a, b, c):
    return v_max_f32(v_max_f32(a, b), c)


@njit
def v_min3_f32(a, b, c):
    return v_min_f32(v_min_f32(a, b), c)


@njit
def v_med3_f32(a, b, c):
    """fp.med3: with a NaN source the min3; else the max of the two that are not the max3."""
    if is_nan(np.int64(a)) or is_nan(np.int64(b)) or is_nan(np.int64(c)):
        return v_min3_f32(a, b, c)
    a, b, c = np.int64(a), np.int64(b), np.int64(c)
    ab = _max_num(a, b)
    m = flt(_max_num(ab, c))
    # all three candidates, then a choice (selects, not branches on the data)
    bc, ac = _max_num(b, c), _max_num(a, c)
    return as_u32(bc if m == flt(a) else ac if m == flt(b) else ab)


@njit
def _max_num(a, b):
    """v_max_f32 of two words neither of which is a NaN: +0 above -0."""
    fa, fb = flt(a), flt(b)
    return a if fa > fb or (fa == fb and (a & SIGN) == 0) else b


# ---- rounding to integers, fract ------------------------------------------------------------------
@njit
def v_rndne_f32(a):
    a = np.int64(a)
    if is_nan(a):
        return as_u32(a | QNAN)
    return as_u32(word(np.rint(flt(a))))


@njit
def v_trunc_f32(a):
    a = np.int64(a)
    if is_nan(a):
        return as_u32(a | QNAN)
    return as_u32(word(np.trunc(flt(a))))


@njit
def v_floor_f32(a):
    a = np.int64(a)
    if is_nan(a):
        return as_u32(a | QNAN)
    return as_u32(word(np.floor(flt(a))))


@njit
def v_ceil_f32(a):
    a = np.int64(a)
    if is_nan(a):
        return as_u32(a | QNAN)
    return as_u32(word(np.ceil(flt(a))))


@njit
def v_fract_f32(a):
    """a - floor(a) in binary32; an infinity gives the canonical NaN."""
    a = np.int64(a)
    if is_nan(a):
        return as_u32(a | QNAN)
    if (a & ABS) == INF:
        return np.uint32(CANONICAL)
    x = flt(a)
    return as_u32(word(x - np.floor(x)))


# ---- reciprocal, square roots (denormal inputs and results flushed, fp.flush_denormals) --------------
@njit
def _flushed(w):
    """A word with a denormal value as the zero of its sign."""
    if (w & INF) == 0:
        return w & SIGN
    return w


@njit
def v_rcp_f32(a):
    """fp.rcp: 1/x correctly rounded of the flushed input, the result flushed."""
    a = np.int64(a)
    if is_nan(a):
        return as_u32(a | QNAN)
    x = _flushed(a)
    if (x & ABS) == 0:                      # numba's division raises on a zero divisor: 1/±0 = ±inf
        return as_u32((x & SIGN) | INF)
    return as_u32(_flushed(word(np.float32(1.0) / flt(x))))


@njit
def v_sqrt_f32(a):
    a = np.int64(a)
    if is_nan(a):
        return as_u32(a | QNAN)
    x = flt(_flushed(a))
    if x < 0:
        return np.uint32(CANONICAL)
    return as_u32(word(np.sqrt(x)))


@njit
def v_rsq_f32(a):
    """double.rsq: 1/sqrt in binary64 of the flushed input, rounded to binary32; a negative input
    gives the canonical NaN."""
    a = np.int64(a)
    if is_nan(a):
        return as_u32(a | QNAN)
    f = _flushed(a)
    if (f & ABS) == 0:                      # 1/sqrt(±0) = ±inf (numba's division raises on a zero divisor)
        return as_u32((f & SIGN) | INF)
    x = np.float64(flt(f))
    if x < 0:
        return np.uint32(CANONICAL)
    return as_u32(word(np.float32(1.0 / np.sqrt(x))))


# ---- conversions ------------------------------------------------------------------------------------
@njit
def v_cvt_f32_i32(a):
    """int32 to binary32, rounded to nearest even."""
    v = np.int64(a)
    if v >= 0x80000000:
        v -= 0x100000000
    return as_u32(word(np.float32(np.float64(v))))


@njit
def v_cvt_f32_u32(a):
    return as_u32(word(np.float32(np.float64(np.int64(a)))))


@njit
def v_cvt_i32_f32(a):
    """Toward zero, saturated to int32, NaN -> 0."""
    a = np.int64(a)
    if is_nan(a):
        return np.uint32(0)
    x = np.float64(flt(a))
    if x >= 2147483648.0:
        return np.uint32(0x7FFFFFFF)
    if x <= -2147483648.0:
        return np.uint32(0x80000000)
    return as_u32(np.int64(x) & 0xFFFFFFFF)


@njit
def v_cvt_u32_f32(a):
    """Toward zero, saturated to uint32, NaN -> 0."""
    a = np.int64(a)
    if is_nan(a):
        return np.uint32(0)
    x = np.float64(flt(a))
    if x >= 4294967296.0:
        return np.uint32(0xFFFFFFFF)
    if x <= 0.0:
        return np.uint32(0)
    return as_u32(np.int64(x))


@njit
def v_cvt_f32_ubyte0(a):
    return as_u32(word(np.float32(np.int64(a) & 0xFF)))


@njit
def v_cvt_f32_ubyte1(a):
    return as_u32(word(np.float32((np.int64(a) >> 8) & 0xFF)))


@njit
def v_cvt_f32_ubyte2(a):
    return as_u32(word(np.float32((np.int64(a) >> 16) & 0xFF)))


@njit
def v_cvt_f32_ubyte3(a):
    return as_u32(word(np.float32((np.int64(a) >> 24) & 0xFF)))


# ---- exponent fields ----------------------------------------------------------------------------------
@njit
def v_ldexp_f32(a, e):
    """a * 2^e with e (int32) clamped to [-400, 400]: exact in binary64, then rounded once."""
    a = np.int64(a)
    if is_nan(a):
        return as_u32(a | QNAN)
    k = np.int64(e)
    if k >= 0x80000000:
        k -= 0x100000000
    k = min(max(k, -400), 400)
    x = np.float64(flt(a))
    # 2^k as two binary64 factors (2^±400 is beyond neither's range); the first product is exact
    h = k // 2
    return as_u32(word(np.float32(x * pow2(h) * pow2(k - h))))


@njit
def pow2(k):
    """2^k as a binary64, k in [-1022, 1023]."""
    return np.uint64((k + 1023) << 52).view(np.float64)


@njit
def v_frexp_mant_f32(a):
    """The significand in [0.5, 1) with a's sign; zeros, infinities and NaNs as they are."""
    a = np.int64(a)
    m = a & ABS
    if m == 0 or m >= INF:
        return as_u32(a)
    if m < 0x00800000:                       # denormal: normalise the mantissa
        while m < 0x00800000:
            m <<= 1
    return as_u32((a & SIGN) | (126 << 23) | (m & 0x007FFFFF))


@njit
def v_frexp_exp_i32_f32(a):
    """The exponent e of a = m * 2^e, m in [0.5, 1); 0 for zero, infinity and NaN."""
    a = np.int64(a)
    m = a & ABS
    if m == 0 or m >= INF:
        return np.uint32(0)
    e = m >> 23
    if e == 0:
        e = 1
        while m < 0x00800000:
            m <<= 1
            e -= 1
    return as_u32((e - 126) & 0xFFFFFFFF)


# ---- the transcendental stand-ins (fp.APPROXIMATED): correctly rounded, as fp.exp2 and fp.log2 -------
# A binary64 result y rounds to the entry's binary32 bits unless y lies close to a binary32 midpoint,
# where the entry decides from a 60-digit value: such a lane (about one in twenty million) is
# computed again in double-double arithmetic (~100 bits; a binary32 input's 2^x or log2(x) lies
# about 2^-56 or more from a midpoint, relatively) and rounded from that.
_NEAR_ULPS = 16.0      # binary64 ulps: the entry's own threshold (4) plus the libms' difference (1 here)
#                        with room, so outside it round(y) is the entry's


def _dd(q) -> tuple[float, float]:
    """A rational as a double-double (hi, lo)."""
    from fractions import Fraction
    hi = float(q)
    return hi, float(Fraction(q) - Fraction(hi))


def _dd_table(qs) -> np.ndarray:
    return np.array([_dd(q) for q in qs], np.float64)


def _constants():
    from fractions import Fraction
    from math import factorial
    # ln 2 and 1/ln 2 to 40 digits, as double-doubles
    ln2 = Fraction("0.6931471805599453094172321214581765680755")
    inv_fact = _dd_table(Fraction(1, factorial(k)) for k in range(28))
    inv_odd = _dd_table(Fraction(1, 2 * k + 1) for k in range(28))
    return np.array(_dd(ln2)), np.array(_dd(1 / ln2)), inv_fact, inv_odd


_LN2, _INV_LN2, _INV_FACT, _INV_ODD = _constants()


@njit
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@njit
def _split(a):
    c = 134217729.0 * a                     # 2^27 + 1 (Veltkamp)
    hi = c - (c - a)
    return hi, a - hi


@njit
def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@njit
def _dd_add(ah, al, bh, bl):
    s, e = _two_sum(ah, bh)
    e += al + bl
    hi = s + e
    return hi, e - (hi - s)


@njit
def _dd_mul(ah, al, bh, bl):
    p, e = _two_prod(ah, bh)
    e += ah * bl + al * bh
    hi = p + e
    return hi, e - (hi - p)


@njit
def _dd_round(hi, lo):
    """The binary32 word nearest hi + lo (a positive value, not a binary32 midpoint), ties to even."""
    r = np.float32(hi)
    r64 = np.float64(r)
    up = (hi - r64) > -lo                   # hi - r64 is exact: r is hi's nearest binary32
    if (hi - r64) == -lo:
        return word(r)
    o = _step(word(r), up)
    o64 = np.float64(flt(o))
    mid = (r64 + o64) * 0.5
    d = hi - mid                            # exact: mid lies within a binade of hi
    if d == -lo:                            # an exact tie: to even
        return o if (o & 1) == 0 else word(r)
    if (d > -lo) == up:
        return o
    return word(r)


@njit
def _exp2_exact(x):
    """2^x, x a non-integer binary64 in (-127, 128), rounded to binary32 through double-double."""
    hi, lo = _exp2_dd(x)
    return _dd_round(hi, lo)


@njit
def _exp2_dd(x):
    """2^x as a double-double: x = n + f (|f| <= 1/2, exact), 2^f = exp(f ln 2) by its Taylor
    series, times 2^n."""
    n = np.floor(x + 0.5)
    f = x - n
    th, tl = _dd_mul(f, 0.0, _LN2[0], _LN2[1])
    k = _INV_FACT.shape[0] - 1
    rh, rl = _INV_FACT[k, 0], _INV_FACT[k, 1]
    while k > 0:
        k -= 1
        rh, rl = _dd_mul(rh, rl, th, tl)
        rh, rl = _dd_add(rh, rl, _INV_FACT[k, 0], _INV_FACT[k, 1])
    scale = pow2(np.int64(n))
    return rh * scale, rl * scale


@njit
def _log2_exact(x):
    """|log2 x|, x a positive normal binary32 (as binary64) not a power of two, rounded to binary32
    through double-double."""
    hi, lo = _log2_dd(x)
    if hi < 0:
        hi, lo = -hi, -lo
    return _dd_round(hi, lo)


@njit
def _log2_dd(x):
    """log2 x as a double-double: x = m 2^e with m in [0.7, 1.4), ln m = 2 atanh(s), s = (m-1)/(m+1)."""
    w = np.int64(np.float64(x).view(np.uint64))
    e = ((w >> 52) & 0x7FF) - 1023
    m = x * pow2(-e)
    if m > 1.4142135623730951:
        m *= 0.5
        e += 1
    num, den = m - 1.0, m + 1.0                 # both exact
    q = num / den
    p, pe = _two_prod(q, den)
    sh, sl = _two_sum(q, ((num - p) - pe) / den)
    zh, zl = _dd_mul(sh, sl, sh, sl)
    k = _INV_ODD.shape[0] - 1
    rh, rl = _INV_ODD[k, 0], _INV_ODD[k, 1]
    while k > 0:
        k -= 1
        rh, rl = _dd_mul(rh, rl, zh, zl)
        rh, rl = _dd_add(rh, rl, _INV_ODD[k, 0], _INV_ODD[k, 1])
    rh, rl = _dd_mul(rh, rl, 2.0 * sh, 2.0 * sl)            # ln m
    rh, rl = _dd_mul(rh, rl, _INV_LN2[0], _INV_LN2[1])      # log2 m
    return _dd_add(np.float64(e), 0.0, rh, rl)


@njit
def _ulp64(y):
    """A binary64 ulp of the positive normal binary64 y."""
    return pow2(((np.int64(np.float64(y).view(np.uint64)) >> 52) & 0x7FF) - 1075)


@njit
def _near_midpoint(y):
    """Whether the positive finite binary64 y lies within _NEAR_ULPS of a binary32 midpoint."""
    r = np.float32(y)
    r64 = np.float64(r)
    if not np.isfinite(r64) or y == r64:
        return False
    o64 = np.float64(flt(_step(word(r), y > r64)))
    mid = (r64 + o64) * 0.5
    return np.isfinite(mid) and abs(y - mid) <= _NEAR_ULPS * _ulp64(y)


@njit
def v_exp_f32(a):
    """fp.exp2: 2^x correctly rounded, exact at integers, a result below 2^-126 flushed to +0."""
    a = np.int64(a)
    if is_nan(a):
        return as_u32(a | QNAN)
    if a == INF:
        return np.uint32(INF)
    if a == SIGN | INF:
        return np.uint32(0)
    x = np.float64(flt(a))
    if x >= 128.0:
        return np.uint32(INF)
    if x < -127.0:                          # below 2^-127: a denormal at most, flushed
        return np.uint32(0)
    if x == np.floor(x):
        if x < -126.0:
            return np.uint32(0)
        return as_u32(word(np.float32(pow2(np.int64(x)))))
    y = np.exp2(x)
    w = _exp2_exact(x) if _near_midpoint(y) else word(np.float32(y))
    if w < TINY:
        return np.uint32(0)
    return as_u32(w)


@njit
def v_log_f32(a):
    """fp.log2: log2 correctly rounded of the input with denormals flushed; log2(±0) = -inf, a
    negative input the canonical NaN, exact at powers of two."""
    a = np.int64(a)
    if is_nan(a):
        return as_u32(a | QNAN)
    f = _flushed(a)
    if (f & ABS) == 0:
        return np.uint32(SIGN | INF)
    if f & SIGN:
        return np.uint32(CANONICAL)
    if f == INF:
        return np.uint32(INF)
    if (f & 0x007FFFFF) == 0:
        return as_u32(word(np.float32(np.float64((f >> 23) - 127))))
    x = np.float64(flt(f))
    y = np.log2(x)
    if _near_midpoint(abs(y)):
        return as_u32(_log2_exact(x) | (SIGN if y < 0 else 0))
    return as_u32(word(np.float32(y)))


# ---- the division helpers: a word and a flag (bit 32 of the np.uint64 returned) ------------------------
TINY = 0x00800000                   # the smallest normal binary32's word
FLAG = np.uint64(1 << 32)


@njit
def _scaled(w, k):
    """ldexp of a binary32 word by 2^k (|k| <= 64), rounded once; a NaN quieted (np.ldexp's)."""
    if is_nan(w):
        return w | QNAN
    return word(np.float32(np.float64(flt(w)) * pow2(k)))


@njit
def _tiny(w):
    """|x| < the smallest normal and not zero: a denormal."""
    m = w & ABS
    return 0 < m < TINY


@njit
def v_div_scale_f32(s0, s1, s2):
    """fp.div_scale (S0 to scale, S1 denominator, S2 numerator): D, and VCC in bit 32."""
    s0, s1, s2 = np.int64(s0), np.int64(s1), np.int64(s2)
    f0, f1, f2 = flt(s0), flt(s1), flt(s2)
    if f1 == 0 or f2 == 0:                  # D = NaN, VCC = 1
        return np.uint64(CANONICAL) | FLAG
    e1, e2 = (s1 >> 23) & 0xFF, (s2 >> 23) & 0xFF
    if e2 - e1 >= 96:
        return np.uint64(_scaled(s0, 64) if f0 == f1 else s0) | FLAG
    if _tiny(s1):
        return np.uint64(_scaled(s0, 64))
    q = word(f2 / f1)
    r = word(np.float32(1.0) / f1)
    if _tiny(r):
        if not is_nan(q) and (q & ABS) >= TINY:
            return np.uint64(_scaled(s0, 64) if f0 == f1 else s0) | FLAG
        return np.uint64(_scaled(s0, -64))
    if _tiny(q):
        return np.uint64(_scaled(s0, 64) if f0 == f2 else s0) | FLAG
    if e2 <= 23:
        return np.uint64(_scaled(s0, 64))
    return np.uint64(s0)


@njit
def v_div_fmas_f32(a, b, c, vcc):
    """fma(S0, S1, S2) as v_fma_f32; bit 32 set where the lane's VCC is set and the result is finite
    and not zero: a case the step refuses (its caller must take the step, which names it)."""
    w = np.int64(v_fma_f32(a, b, c))
    if vcc and (w & ABS) != 0 and (w & INF) != INF:
        return np.uint64(w) | FLAG
    return np.uint64(w)


@njit
def v_div_fixup_f32(s0, s1, s2):
    """fp.div_fixup (S0 quotient, S1 denominator, S2 numerator): D, and in bit 32 the ISA's
    underflow case the step refuses (its caller must take the step, which names it)."""
    s0, s1, s2 = np.int64(s0), np.int64(s1), np.int64(s2)
    sign = (s1 ^ s2) & SIGN
    if is_nan(s2):
        return np.uint64(s2 | QNAN)
    if is_nan(s1):
        return np.uint64(s1 | QNAN)
    z1, z2 = (s1 & ABS) == 0, (s2 & ABS) == 0
    i1, i2 = (s1 & ABS) == INF, (s2 & ABS) == INF
    if (z1 and z2) or (i1 and i2):
        return np.uint64(CANONICAL)
    if z1 or i2:
        return np.uint64(sign | INF)
    if i1 or z2:
        return np.uint64(sign)
    d = np.uint64((s0 & ABS) | sign)
    if ((s2 >> 23) & 0xFF) - ((s1 >> 23) & 0xFF) < -150:
        return d | FLAG
    return d


# ---- compares: one lane's bit ------------------------------------------------------------------------
# the relations of the VOPC f32 compares in their encoding order (isa.compare.FLOAT's)
RELATIONS = ("f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "tru")


@njit
def cmp_f32(rel, a, b):
    """Relation ``rel`` (its index in RELATIONS) of two binary32 words, IEEE: the ordered relations
    are false with a NaN, the n* ones true."""
    a, b = np.int64(a), np.int64(b)
    fa, fb = flt(a), flt(b)
    if rel == 0:
        return False
    if rel == 1:
        return fa < fb
    if rel == 2:
        return fa == fb
    if rel == 3:
        return fa <= fb
    if rel == 4:
        return fa > fb
    ordered = not is_nan(a) and not is_nan(b)
    if rel == 5:
        return ordered and fa != fb
    if rel == 6:
        return fa >= fb
    if rel == 7:
        return ordered
    if rel == 8:
        return not ordered
    if rel == 9:
        return not fa >= fb
    if rel == 10:
        return not (ordered and fa != fb)
    if rel == 11:
        return not fa > fb
    if rel == 12:
        return not fa <= fb
    if rel == 13:
        return not fa == fb
    if rel == 14:
        return not fa < fb
    return True


@njit
def v_cmp_class_f32(a, mask):
    """Whether the class bit of a (double.float_class: 0 signalling NaN, 1 quiet NaN, 2 -inf, 3
    -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf) is set in the mask word."""
    a = np.int64(a)
    m = a & ABS
    if m > INF:
        k = 1 if (m & QNAN) else 0
    else:
        k = 9 if m == INF else 6 if m == 0 else 7 if m < TINY else 8
        if a & SIGN:
            k = 11 - k
    return (np.int64(mask) >> k) & 1 == 1


# ---- the registry ---------------------------------------------------------------------------------
@njit
def _ready():
    return 0


def _dispatcher(name: str, module: str = __name__):
    """The compiled function ``name`` of ``module`` (this one or lanef16). The first call makes every
    function of this module a dispatcher (jit.njit swaps a module's marked functions when one of them
    is first called), then of ``module``, whose functions call this one's: compiled code that names
    them (``lanef32.v_add_f32``) may be compiled after it."""
    g = sys.modules[module].__dict__
    if not hasattr(g[name], "stats"):              # still jit.njit's lazy wrapper
        _ready()
        g["_ready"]()
    return g[name]


_PY: dict = {}


def _python(name: str, module: str = __name__):
    """``name`` of ``module`` run by Python: its source with every compiled function it calls, of
    its module or of this one, also run by Python."""
    return _python_globals(module)[name]


def _python_globals(module: str) -> dict:
    """``module``'s globals with each compiled function its Python function (bound to these globals),
    and this module, where it names it, as a namespace of this module's Python functions."""
    if module not in _PY:
        g = dict(sys.modules[module].__dict__)
        _PY[module] = g
        for k, v in list(g.items()):
            if v is sys.modules[__name__] and module != __name__:
                g[k] = types.SimpleNamespace(**_python_globals(__name__))
            py = getattr(v, "py_func", None)
            if py is not None and py.__module__ == module:
                g[k] = types.FunctionType(py.__code__, g, k, py.__defaults__)
    return _PY[module]


@dataclass(frozen=True)
class LaneF32:
    """One instruction's lane function (see the module docstring)."""
    mnemonic: str
    name: str                       # the function's name in this module
    srcs: tuple[str, ...]           # source types ("f32", "i32", "u32", "f16", "fp8", "bf8") in argument order
    result: str                     # the result's type ("f16": its bits in the low half of the word returned)
    reads_mode: bool = False        # the function takes the member's MODE word as one more, last, argument
    approximated: bool = False      # the caller marks the result approximated (fp.APPROXIMATED)
    order: tuple[str, ...] = ()     # the operands the arguments are, where not the sources in order
    reads_vcc: bool = False         # the function takes the lane's VCC bit after its sources (before MODE)
    flag: str = ""                  # "vcc": np.uint64 returned, the result's word and VCC in bit 32;
    #                                 "refuse": bit 32 marks a lane the step refuses (take the step)
    halves: int = 1                 # 2: a packed fp32 instruction, the function applied to each half's
    #                                 selected (and negated) words (vop.PK)
    code: int = -1                  # a compare (result "mask", a bool per lane): the relation's index in
    #                                 RELATIONS, the function's first argument (cmp_f32(code, a, b))
    module: str = __name__          # the module holding the function (lanef16's for binary16 and fp8)

    @property
    def fn(self):
        """The compiled function (numba's dispatcher): call it from compiled code on np.uint32 words."""
        return _dispatcher(self.name, self.module)

    @property
    def py(self):
        """The same function run by Python (np.uint32 words in, np.uint32 out)."""
        return _python(self.name, self.module)


def lane(mnemonic: str, srcs: tuple[str, ...], result: str = "f32", name: str | None = None,
         order: tuple[str, ...] = (), reads_mode: bool = False, reads_vcc: bool = False, flag: str = "",
         halves: int = 1, code: int = -1, module: str = __name__) -> LaneF32:
    """A registry entry (approximated as fp.APPROXIMATED says)."""
    return LaneF32(mnemonic, name or mnemonic, srcs, result, reads_mode, mnemonic in fp.APPROXIMATED, order,
                   reads_vcc, flag, halves, code, module)


_lane = lane


_F1, _F2, _F3 = ("f32",), ("f32", "f32"), ("f32", "f32", "f32")
LANE_F32: dict[str, LaneF32] = {e.mnemonic: e for e in (
    _lane("v_add_f32", _F2), _lane("v_sub_f32", _F2), _lane("v_subrev_f32", _F2), _lane("v_mul_f32", _F2),
    _lane("v_fma_f32", _F3),
    _lane("v_fmac_f32", _F3, name="v_fma_f32", order=("S0", "S1", "D")),
    _lane("v_mac_f32", _F3, order=("S0", "S1", "D")),
    # a*b + c of the printed operands (vop.v_fma_k_f32: mk S0, K, S1; ak S0, S1, K)
    _lane("v_fmamk_f32", _F3, name="v_fma_f32"), _lane("v_fmaak_f32", _F3, name="v_fma_f32"),
    _lane("v_madmk_f32", _F3, name="v_mac_f32"), _lane("v_madak_f32", _F3, name="v_mac_f32"),
    _lane("v_max_f32", _F2), _lane("v_min_f32", _F2),
    _lane("v_max3_f32", _F3), _lane("v_min3_f32", _F3), _lane("v_med3_f32", _F3),
    _lane("v_rndne_f32", _F1), _lane("v_trunc_f32", _F1), _lane("v_floor_f32", _F1), _lane("v_ceil_f32", _F1),
    _lane("v_fract_f32", _F1),
    _lane("v_rcp_f32", _F1), _lane("v_rcp_iflag_f32", _F1, name="v_rcp_f32"), _lane("v_sqrt_f32", _F1),
    _lane("v_rsq_f32", _F1),
    _lane("v_cvt_f32_i32", ("i32",)), _lane("v_cvt_f32_u32", ("u32",)),
    _lane("v_cvt_i32_f32", _F1, "i32"), _lane("v_cvt_u32_f32", _F1, "u32"),
    *(_lane(f"v_cvt_f32_ubyte{k}", ("u32",)) for k in range(4)),
    _lane("v_ldexp_f32", ("f32", "i32")),
    _lane("v_frexp_mant_f32", _F1), _lane("v_frexp_exp_i32_f32", _F1, "i32"),
    _lane("v_exp_f32", _F1), _lane("v_log_f32", _F1),
    _lane("v_div_scale_f32", _F3, flag="vcc"), _lane("v_div_fmas_f32", _F3, reads_vcc=True, flag="refuse"),
    _lane("v_div_fixup_f32", _F3, flag="refuse"),
    _lane("v_pk_add_f32", _F2, name="v_add_f32", halves=2), _lane("v_pk_mul_f32", _F2, name="v_mul_f32", halves=2),
    _lane("v_pk_fma_f32", _F3, name="v_fma_f32", halves=2),
    *(_lane(f"v_cmp{x}_{r}_f32", _F2, "mask", name="cmp_f32", code=k) for k, r in enumerate(RELATIONS) for x in ("", "x")),
    _lane("v_cmp_class_f32", ("f32", "u32"), "mask"), _lane("v_cmpx_class_f32", ("f32", "u32"), "mask",
                                                           name="v_cmp_class_f32"),
)}

__all__ = ["LANE_F32", "LaneF32"]
