"""One lane of the binary16 and fp8 rows (the 16-bit VALU rows' entries as vop16.py runs them, and
gfx942's fp8/bf8 conversions as cvt8.py does), as lanef32.py gives the fp32 rows: compiled scalar
functions on register words, bit for bit the entries on a wave's contiguous arrays (numpy's float16
loops, through binary32, or binary64 where the entry evaluates there; ml_dtypes' fnuz casts), with
vop16.ovfl16's and cvt8.saturated's MODE.FP16_OVFL from the member's MODE word (``reads_mode``).

A binary16 source or result is its bits in the low half of the word ("f16"), an fp8 source its byte
("fp8", "bf8"): which half or byte of a register it comes from or goes to (op_sel, SDWA, the high
half zeroed, the word of a packed fp8 pair) is the caller's, as vop16.py and cvt8.py place them.
``LANE_F16`` maps a mnemonic to its lanef32.LaneF32 (its ``fn`` compiles lanef32's functions first:
these call them through that module).
"""
from __future__ import annotations

import numpy as np

from . import lanef32          # compiled functions by the module: jit.njit rebinds their names
from ..machine.jit import njit
from .lanef32 import ABS, INF, SIGN, lane

# ---- binary16 conversions (numpy's own rounding and NaN rules, as the entries' casts) --------------
FP16_OVFL = 23                      # MODE bit (semantics/mode.py): an overflow gives ±65504


@njit
def _half(a):
    """numpy's binary32 to binary16 of a word (int64 bits): rounded to nearest even, an overflow
    infinite; a NaN keeps its sign and the top of its payload (1 where none is left: still a NaN)."""
    sign = (a >> 16) & 0x8000
    m = a & ABS
    if m > INF:
        h = 0x7C00 + ((m & 0x007FFFFF) >> 13)
        if h == 0x7C00:
            h += 1
        return sign | h
    if m >= 0x477FF000:                     # 65520 and up (65504 + half an ulp, odd below): inf
        return sign | 0x7C00
    e = m >> 23
    mant = m & 0x007FFFFF
    if e >= 113:                            # a normal binary16
        h = ((e - 112) << 10) | (mant >> 13)
        rem = mant & 0x1FFF
        if rem > 0x1000 or (rem == 0x1000 and (h & 1) == 1):
            h += 1
        return sign | h
    shift = 126 - e                         # a binary16 denormal (or zero): units of 2^-24
    if e == 0 or shift >= 25:
        return sign
    sig = mant | 0x00800000
    q = sig >> shift
    rem = sig & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    if rem > half or (rem == half and (q & 1) == 1):
        q += 1
    return sign | q


@njit
def _ovfl16(h, finite, mode):
    """vop16.ovfl16: with MODE.FP16_OVFL an infinite binary16 result of finite sources is ±65504."""
    if finite and (h & 0x7FFF) == 0x7C00 and (np.int64(mode) >> FP16_OVFL) & 1:
        return (h & 0x8000) | 0x7BFF
    return h


@njit
def v_cvt_f16_f32(a, mode):
    """binary32 to binary16 bits (in the low half) as numpy casts (_half); with MODE.FP16_OVFL a
    finite source that overflows gives ±65504 (vop16.ovfl16)."""
    a = np.int64(a)
    return lanef32.as_u32(_ovfl16(_half(a), (a & INF) != INF, mode))


@njit
def v_cvt_f32_f16(h):
    """binary16 bits (the low half) to binary32, exactly; a NaN's payload moved up, not quieted."""
    h = np.int64(h) & 0xFFFF
    sign = (h & 0x8000) << 16
    e = (h >> 10) & 0x1F
    mant = h & 0x3FF
    if e == 0x1F:
        return lanef32.as_u32(sign | INF | (mant << 13))
    if e == 0:
        if mant == 0:
            return lanef32.as_u32(sign)
        return lanef32.as_u32(sign | lanef32.word(np.float32(np.float64(mant) * 5.9604644775390625e-08)))
    return lanef32.as_u32(sign | ((e + 112) << 23) | (mant << 13))


# ---- binary16 arithmetic (the 16-bit rows' entries: numpy's float16 loops, through binary32, or
# binary64 where the entry evaluates there; vop16.ovfl16 on the result) --------------------------------
ABS16, INF16, QNAN16, SIGN16 = 0x7FFF, 0x7C00, 0x0200, 0x8000
CANONICAL16 = 0x7E00                # fp.CANONICAL_NAN of binary16
DEFAULT_NAN16 = 0xFE00              # the host's default NaN (x86: negative) cast to binary16


@njit
def _nan16(h):
    return (h & ABS16) > INF16


@njit
def _snan16(h):
    return (h & ABS16) > INF16 and (h & QNAN16) == 0


@njit
def _wide(h):
    """A binary16's value as binary64 (exact; a NaN's payload is not needed: callers test for NaN first)."""
    return np.float64(lanef32.flt(v_cvt_f32_f16(h)))


@njit
def _half64(x):
    """numpy's binary64 to binary16 (rounded to nearest even, an overflow infinite), of a non-NaN
    value or the host's default NaN."""
    if np.isnan(x):
        return np.int64(DEFAULT_NAN16)
    w = np.int64(np.float64(x).view(np.uint64))
    sign = (w >> 48) & 0x8000
    m = w & 0x7FFFFFFFFFFFFFFF
    if m >= 0x40EFFE0000000000:             # 65520 and up: inf
        return sign | 0x7C00
    e = m >> 52
    mant = m & 0x000FFFFFFFFFFFFF
    if e >= 1009:                           # a normal binary16
        h = ((e - 1008) << 10) | (mant >> 42)
        rem = mant & 0x3FFFFFFFFFF
        half = np.int64(1) << 41
        if rem > half or (rem == half and (h & 1) == 1):
            h += 1
        return sign | h
    shift = 1051 - e                        # a binary16 denormal (or zero): units of 2^-24
    if shift >= 54:
        return sign
    sig = mant | (np.int64(1) << 52)
    q = sig >> shift
    rem = sig & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    if rem > half or (rem == half and (q & 1) == 1):
        q += 1
    return sign | q


@njit
def _arith16(op, a, b, mode):
    """add (0), sub (1), mul (2) of two binary16 halves as numpy's float16 loops: in binary32,
    rounded to binary16; a source NaN quieted (the second source's first for the commutative add and
    mul, as numpy's compiled loops order them), another NaN the canonical one."""
    a, b = np.int64(a) & 0xFFFF, np.int64(b) & 0xFFFF
    if op != 1 and _nan16(b):
        return lanef32.as_u32(b | QNAN16)
    if _nan16(a):
        return lanef32.as_u32(a | QNAN16)
    if _nan16(b):
        return lanef32.as_u32(b | QNAN16)
    x, y = np.float32(_wide(a)), np.float32(_wide(b))
    r = x + y if op == 0 else x - y if op == 1 else x * y
    w = lanef32.word(r)
    if lanef32.is_nan(w):
        return np.uint32(CANONICAL16)
    return lanef32.as_u32(_ovfl16(_half(w), (a & INF16) != INF16 and (b & INF16) != INF16, mode))


@njit
def v_add_f16(a, b, mode):
    return _arith16(0, a, b, mode)


@njit
def v_sub_f16(a, b, mode):
    return _arith16(1, a, b, mode)


@njit
def v_mul_f16(a, b, mode):
    return _arith16(2, a, b, mode)


@njit
def v_subrev_f16(a, b, mode):
    """S1 - S0 in binary64, rounded once (half._h): S1's NaN first; no canonical NaN."""
    a, b = np.int64(a) & 0xFFFF, np.int64(b) & 0xFFFF
    if _nan16(b):
        return lanef32.as_u32(b | QNAN16)
    if _nan16(a):
        return lanef32.as_u32(a | QNAN16)
    h = _half64(_wide(b) - _wide(a))
    return lanef32.as_u32(_ovfl16(h, (a & INF16) != INF16 and (b & INF16) != INF16, mode))


@njit
def _step16(h, up):
    if (h & ABS16) == 0:
        return np.int64(1) if up else np.int64(SIGN16 | 1)
    if up == ((h & SIGN16) == 0):
        return h + 1
    return h - 1


@njit
def v_fma_f16(a, b, c, mode):
    """fp.fma(a, b, c, float16): rounded once to binary16 (an inf*0 or inf-inf the host's default
    NaN, the entry asking for no canonical one)."""
    a, b, c = np.int64(a) & 0xFFFF, np.int64(b) & 0xFFFF, np.int64(c) & 0xFFFF
    if _nan16(a):
        return lanef32.as_u32(a | QNAN16)
    if _nan16(b):
        return lanef32.as_u32(b | QNAN16)
    p = _wide(a) * _wide(b)
    if _nan16(c):
        return lanef32.as_u32(DEFAULT_NAN16 if np.isnan(p) else c | QNAN16)
    c64 = _wide(c)
    s = p + c64
    bp = s - c64
    e = (p - bp) + (c64 - (s - bp))
    h = _half64(s)
    if e != 0.0 and np.isfinite(s):                 # fp._round_ties in binary16
        r64 = _wide(h)
        if s != r64:
            o = _step16(h, s > r64)
            o64 = _wide(o)
            mid = (r64 + o64) * 0.5
            if np.isfinite(mid) and s == mid and (o64 > r64) == (e > 0.0):
                h = o
    finite = (a & INF16) != INF16 and (b & INF16) != INF16 and (c & INF16) != INF16
    return lanef32.as_u32(_ovfl16(h, finite, mode))


@njit
def _minmax16(a, b, is_max):
    """fp._minmax in IEEE mode on binary16 halves."""
    a, b = np.int64(a) & 0xFFFF, np.int64(b) & 0xFFFF
    if _snan16(a):
        return a | QNAN16
    if _snan16(b):
        return b | QNAN16
    if _nan16(a):
        return b
    if _nan16(b):
        return a
    x, y = _wide(a), _wide(b)
    if is_max:
        pick = x > y or (x == y and (a & SIGN16) == 0)
    else:
        pick = x < y or (x == y and (a & SIGN16) != 0)
    return a if pick else b


@njit
def v_max_f16(a, b):
    return lanef32.as_u32(_minmax16(a, b, True))


@njit
def v_min_f16(a, b):
    return lanef32.as_u32(_minmax16(a, b, False))


@njit
def v_max3_f16(a, b, c):
    return lanef32.as_u32(_minmax16(_minmax16(a, b, True), c, True))


@njit
def v_min3_f16(a, b, c):
    return lanef32.as_u32(_minmax16(_minmax16(a, b, False), c, False))


@njit
def v_med3_f16(a, b, c):
    """fp.med3 on binary16 halves."""
    a, b, c = np.int64(a) & 0xFFFF, np.int64(b) & 0xFFFF, np.int64(c) & 0xFFFF
    if _nan16(a) or _nan16(b) or _nan16(c):
        return v_min3_f16(a, b, c)
    m = _wide(_minmax16(_minmax16(a, b, True), c, True))
    bc, ac, ab = _minmax16(b, c, True), _minmax16(a, c, True), _minmax16(a, b, True)
    return lanef32.as_u32(bc if m == _wide(a) else ac if m == _wide(b) else ab)


@njit
def _rtz16(a):
    """half.rtz_f16 of a binary32 word: numpy's cast, then one step toward zero where it rounded
    away (an overflow: 65504)."""
    h = _half(a)
    if (a & INF) != INF and (h & ABS16) != 0 and abs(_wide(h)) > abs(np.float64(lanef32.flt(a))):
        h -= 1                                      # one step toward zero: the magnitude's bits
    return h


@njit
def v_cvt_pkrtz_f16_f32(a, b):
    """{rtz_f16(S1), rtz_f16(S0)}: S0's half low, S1's high."""
    return lanef32.as_u32(_rtz16(np.int64(a)) | (_rtz16(np.int64(b)) << 16))


# ---- gfx942's fp8/bf8 (e4m3fnuz / e5m2fnuz: 0x80 the only NaN, no infinity, no -0) -----------------
# (mantissa bits, exponent bias, the largest finite value) as ml_dtypes casts them (conversion.py)
FP8 = (3, 8, 240.0)
BF8 = (2, 16, 57344.0)


@njit
def _to8(w, mbits, bias, top, mode):
    """A binary32 word to fnuz bits, rounded to nearest even; NaN, infinities and values beyond the
    range 0x80, the last ±top with MODE.FP16_OVFL (cvt8.saturated); what rounds to zero +0."""
    w = np.int64(w)
    neg = (w & SIGN) != 0
    m = w & ABS
    if m >= INF:
        return np.int64(0x80)
    v = np.float64(lanef32.flt(m))
    if v == 0.0:
        return np.int64(0)
    e = (m >> 23) - 127                         # v's binade (a binary32 denormal rounds to 0 below)
    q = lanef32.pow2(max(e, 1 - bias) - mbits)         # the grid of v's binade, or the denormals'
    r = np.rint(v / q) * q
    if r == 0.0:
        return np.int64(0)
    if r > top:
        if (np.int64(mode) >> FP16_OVFL) & 1:
            r = top
        else:
            return np.int64(0x80)
    rb = np.int64(np.float64(r).view(np.uint64))
    re = ((rb >> 52) & 0x7FF) - 1023
    if re < 1 - bias:                           # a denormal: the exponent field 0
        bits = np.int64(r / lanef32.pow2(1 - bias - mbits))
    else:
        bits = ((re + bias) << mbits) | ((rb >> (52 - mbits)) & ((1 << mbits) - 1))
    return bits | (0x80 if neg else 0)


@njit
def _from8(b, mbits, bias):
    """fnuz bits to a binary32 word, exactly; 0x80 the NaN ml_dtypes gives (0xFFC00000)."""
    b = np.int64(b) & 0xFF
    if b == 0x80:
        return np.int64(0xFFC00000)
    e = (b & 0x7F) >> mbits
    mant = b & ((1 << mbits) - 1)
    if e == 0:
        v = mant * lanef32.pow2(1 - bias - mbits)
    else:
        v = (1.0 + mant * lanef32.pow2(-mbits)) * lanef32.pow2(e - bias)
    return lanef32.word(np.float32(-v if b & 0x80 else v))


@njit
def v_cvt_pk_fp8_f32(a, b, mode):
    """{fp8(S1), fp8(S0)} in the low 16 bits (the word of D they go to, op_sel, is the caller's)."""
    return lanef32.as_u32(_to8(a, FP8[0], FP8[1], FP8[2], mode) | (_to8(b, FP8[0], FP8[1], FP8[2], mode) << 8))


@njit
def v_cvt_pk_bf8_f32(a, b, mode):
    return lanef32.as_u32(_to8(a, BF8[0], BF8[1], BF8[2], mode) | (_to8(b, BF8[0], BF8[1], BF8[2], mode) << 8))


@njit
def v_cvt_f32_fp8(b):
    """The byte's fp8 value (the byte selected, byte 0 or an SDWA select, is the caller's)."""
    return lanef32.as_u32(_from8(b, FP8[0], FP8[1]))


@njit
def v_cvt_f32_bf8(b):
    return lanef32.as_u32(_from8(b, BF8[0], BF8[1]))


@njit
def _ready():
    return 0


_F2 = ("f32", "f32")
LANE_F16: dict[str, lanef32.LaneF32] = {e.mnemonic: e for e in (
    lane("v_cvt_f16_f32", ("f32",), "f16", reads_mode=True, module=__name__),
    lane("v_cvt_f32_f16", ("f16",), module=__name__),
    *(lane(f"v_{n}_f16", ("f16", "f16"), "f16", reads_mode=True, module=__name__) for n in ("add", "sub", "subrev", "mul")),
    lane("v_fma_f16", ("f16",) * 3, "f16", reads_mode=True, module=__name__),
    lane("v_max_f16", ("f16", "f16"), "f16", module=__name__), lane("v_min_f16", ("f16", "f16"), "f16", module=__name__),
    *(lane(f"v_{n}_f16", ("f16",) * 3, "f16", module=__name__) for n in ("max3", "min3", "med3")),
    lane("v_cvt_pkrtz_f16_f32", _F2, "u32", module=__name__),
    lane("v_cvt_pk_fp8_f32", _F2, "u32", reads_mode=True, module=__name__),
    lane("v_cvt_pk_bf8_f32", _F2, "u32", reads_mode=True, module=__name__),
    lane("v_cvt_f32_fp8", ("fp8",), module=__name__), lane("v_cvt_f32_bf8", ("bf8",), module=__name__),
)}

__all__ = ["FP16_OVFL", "LANE_F16"]
