"""fp32 arithmetic exactly as IEEE 754 binary32 with round-to-nearest-even and denormals kept
(``.amdhsa_float_denorm_mode_32 3``), plus the IEEE-mode min/max rules of the CDNA3 ISA.

numpy's float32 +, -, * and / are IEEE binary32 operations. A fused multiply-add is rounded
once: the product of two binary32 numbers is exact in binary64, the sum is taken in binary64
with its rounding error recovered exactly (TwoSum), and the one case where rounding that sum
to binary32 could differ from rounding the exact value — a binary64 sum that lands exactly on
a binary32 midpoint with a non-zero error — is decided by the error's sign.
"""
from __future__ import annotations

import numpy as np

F32, F64 = np.float32, np.float64
QNAN_BIT = np.uint32(0x00400000)
# per float type: the unsigned integer of its bits and its quiet-NaN bit (the top mantissa bit)
_BITS = {np.dtype(np.float32): (np.uint32, np.uint32(0x00400000)),
         np.dtype(np.float16): (np.uint16, np.uint16(0x0200)),
         np.dtype(np.float64): (np.uint64, np.uint64(0x0008000000000000))}
# The NaN an invalid operation returns on AMD GPUs: positive quiet, no payload (x86's is
# 0xffc00000). An input NaN is returned quieted instead (``quiet``).
CANONICAL_NAN = {np.dtype(np.float32): 0x7FC00000, np.dtype(np.float16): 0x7E00,
                 np.dtype(np.float64): 0x7FF8000000000000}
# The transcendental units' results that simulate the hardware's value correctly rounded: their
# last bit is not published (the ISA guides document them to 1 ulp).
APPROXIMATED = {m: "correctly rounded stand-in, hardware within 1 ulp"
                for m in ("v_exp_f32", "v_log_f32", "v_rcp_f32", "v_rcp_iflag_f32", "v_rsq_f32", "v_sqrt_f32")}


def has_nan(x) -> bool:
    """Whether the float array ``x`` holds a NaN, as ``np.isnan(x).any()`` answers: np.minimum
    propagates every NaN, so its reduction is NaN exactly then; one read pass instead of a bool
    array written and read (every float VALU result is asked this, on 0.1-1 M elements)."""
    x = np.asarray(x)
    return x.size != 0 and bool(np.isnan(np.minimum.reduce(x, axis=None)))


def canonical_nan(result, *inputs) -> np.ndarray:
    """``result`` with every NaN that no input NaN explains written as AMD's canonical NaN."""
    r = np.asarray(result)
    if r.dtype not in CANONICAL_NAN or not has_nan(r):
        return r
    made = np.isnan(r)
    for x in inputs:
        x = np.asarray(x)
        if x.dtype.kind == "f":
            made = made & ~np.isnan(np.broadcast_to(x, r.shape))
    u, _ = _BITS[r.dtype]
    nan = np.asarray(CANONICAL_NAN[r.dtype], u).view(r.dtype)
    return np.where(made, nan, r).astype(r.dtype)


def flush_denormals(x) -> np.ndarray:
    """Denormal values of ``x`` as zeros of their sign. The transcendental units flush their
    denormal inputs and results whatever the float mode says: ROCm's device libraries call
    __builtin_amdgcn_exp2f only where denormals may be lost (ocml native_exp2: "the approximate
    function expansion of generic exp2 has to handle denormals without DAZ, this does not"), and
    LLVM's AMDGPU back end scales the arguments of v_exp_f32, v_log_f32, v_rcp_f32, v_rsq_f32 and
    v_sqrt_f32 into the normal range whenever denormals must be kept (AMDGPULegalizerInfo.cpp
    legalizeFExp2, legalizeFlog2, legalizeFSQRTF32; AMDGPUCodeGenPrepare.cpp's rcp expansion)."""
    x = np.asarray(x)
    tiny = np.finfo(x.dtype).tiny
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x) < tiny, np.copysign(x.dtype.type(0), x), x).astype(x.dtype)


def fma(a, b, c, t=F32) -> np.ndarray:
    """a*b + c rounded once to binary32 (arrays of float32 or float16; ``t`` np.float16: rounded
    once to binary16, as v_fma_f16 and v_fma_mixlo_f16)."""
    with np.errstate(all="ignore"):
        a, b, c = np.asarray(a, F32).astype(F64), np.asarray(b, F32).astype(F64), np.asarray(c, F32).astype(F64)
        p = a * b                                   # exact: 24 + 24 significant bits
        s = p + c
        bp = s - c                                  # TwoSum: s + e == p + c exactly
        e = (p - bp) + (c - (s - bp))
        if not e.any():                             # p + c exact in binary64 (most calls): one rounding
            return s.astype(t)
    return _round_once(s, e, t)


_LOW29, _MID29 = np.uint64((1 << 29) - 1), np.uint64(1 << 28)


def _round_once(s, e, t) -> np.ndarray:
    """The binary64 sum ``s`` of an exact value s + e rounded to ``t`` as the exact value would be
    (a tie of ``s`` between two ``t`` neighbours is decided by the sign of ``e``)."""
    if t is F32 and s.dtype == F64:
        # s and the exact value lie on the same side of every binary32 midpoint (each is a binary64
        # number) unless s is one: where every lane is zero or in binary32's normal range (biased
        # binary64 exponent 897..1150) and none is a midpoint there (low 29 mantissa bits 1 then 28
        # zeros), rounding s once is the answer
        bits = s.view(np.uint64)
        ex = (bits >> np.uint64(52)) & np.uint64(0x7FF)
        if (((ex >= 897) & (ex <= 1150)) | (s == 0)).all() and not ((bits & _LOW29) == _MID29).any():
            return s.astype(t)
    return _round_ties(s, e, t)


def _round_ties(s, e, t) -> np.ndarray:
    """_round_once by the neighbours of every lane (the general path)."""
    with np.errstate(all="ignore"):
        r = s.astype(t)
        r64 = r.astype(F64)
        toward = np.where(s > r64, t(np.inf), t(-np.inf))
        other = np.nextafter(r, toward)
        mid = (r64 + other.astype(F64)) * 0.5
        tie = np.isfinite(s) & np.isfinite(mid) & (s != r64) & (s == mid) & (e != 0)
        # on a tie the exact value lies on the side of the error: pick that neighbour
        up = (other.astype(F64) > r64) == (e > 0)
        out = np.where(tie & up, other, r)
        # p + c exactly zero keeps binary64's sign rule (-0 only for -0 + -0), the same in binary32
    return out.astype(t)


def fma64(a, b, c) -> np.ndarray:
    """a*b + c rounded once to binary64. Where the product is exact in binary64 (its Veltkamp/Dekker
    error is zero) numpy's one rounding of the sum is the answer; other finite lanes are computed
    exactly in rationals and rounded once (Python's int division rounds correctly)."""
    from fractions import Fraction
    with np.errstate(all="ignore"):
        a, b, c = np.broadcast_arrays(*(np.asarray(x, F64) for x in (a, b, c)))
        p = a * b
        split = F64(134217729.0)                    # 2^27 + 1
        ah = a * split - (a * split - a)
        bh = b * split - (b * split - b)
        e = ((ah * bh - p) + ah * (b - bh) + (a - ah) * bh) + (a - ah) * (b - bh)
        out = p + c
        hard = np.isfinite(a) & np.isfinite(b) & np.isfinite(c) & ~((e == 0) & np.isfinite(p) & (np.abs(p) > 2.0 ** -960))
    flat, fa, fb, fc = out.reshape(-1), a.reshape(-1), b.reshape(-1), c.reshape(-1)
    for i in np.nonzero(hard.reshape(-1))[0]:
        exact = Fraction(float(fa[i])) * Fraction(float(fb[i])) + Fraction(float(fc[i]))
        if exact == 0:           # an exact cancellation is +0; a zero product keeps IEEE's sign rule
            flat[i] = fa[i] * fb[i] + fc[i] if fa[i] * fb[i] == 0 else 0.0
            continue
        try:
            flat[i] = float(exact)
        except OverflowError:
            flat[i] = np.inf if exact > 0 else -np.inf
    return flat.reshape(out.shape)


def _float(x) -> np.ndarray:
    """x as an array of its float type (f16 and f64 stay; anything else is binary32)."""
    x = np.asarray(x)
    return x if x.dtype in _BITS else x.astype(F32)


def is_snan(x) -> np.ndarray:
    x = _float(x)
    u, q = _BITS[x.dtype]
    return np.isnan(x) & ((x.view(u) & q) == 0)


def quiet(x) -> np.ndarray:
    x = _float(x)
    u, q = _BITS[x.dtype]
    return (x.view(u) | q).view(x.dtype)


def _minmax(a, b, is_max: bool, ieee: bool = True):
    """V_MAX_F32 / V_MIN_F32 (and the f16 forms, on arrays of any shape): IEEE mode returns a
    quieted signalling NaN, a quiet NaN yields the other operand, and +0 is greater than -0."""
    fast = np.maximum(a, b) if is_max else np.minimum(a, b)
    least = None
    if fast.dtype in _BITS:     # NaN where fast holds a NaN (has_nan), else its least value
        least = np.minimum.reduce(fast, axis=None) if fast.size else fast.dtype.type(1)
    if least is not None and not np.isnan(least):
        # no NaN: numpy's answer is the ISA's but where +0 meets -0 (a clamp of rounded values
        # meets zeros all the time, so only those elements are mended, not the whole array); all
        # of it above zero (an absmax) holds no zero to look for
        if least > 0:
            return fast
        # a mend needs both operands zero: a broadcast operand (a clamp's bound) with none needs none
        small = b if np.size(b) < np.size(a) else a if np.size(a) < np.size(b) else None
        if small is not None and not (np.asarray(small) == 0).any():
            return fast
        zero = fast == 0
        if not zero.any():
            return fast
        mixed = zero & (np.signbit(a) != np.signbit(b))
        if not mixed.any():
            return fast
        out = np.array(np.broadcast_to(fast, mixed.shape))
        out[mixed] = fast.dtype.type(0.0 if is_max else -0.0)
        return out
    return _minmax_exact(a, b, is_max, ieee)


def _minmax_exact(a, b, is_max: bool, ieee: bool = True):
    """_minmax by the ISA's rules element by element, NaNs and signed zeros included (the path
    _minmax's numpy answer is held to)."""
    a, b = np.broadcast_arrays(_float(a), _float(b))
    if is_max:
        pick_a = (a > b) | ((a == b) & ~np.signbit(a))
    else:
        pick_a = (a < b) | ((a == b) & np.signbit(a))
    out = np.where(pick_a, a, b)
    out = np.where(np.isnan(b), a, out)
    out = np.where(np.isnan(a), b, out)
    if ieee:
        out = np.where(is_snan(b), quiet(b), out)
        out = np.where(is_snan(a), quiet(a), out)
    return out.astype(a.dtype)


def fmax(a, b, ieee=True):
    return _minmax(a, b, True, ieee)


def fmin(a, b, ieee=True):
    return _minmax(a, b, False, ieee)


def med3(a, b, c, ieee=True):
    """V_MED3_F32: with any NaN the min3; else the middle value (max of the two that are not
    the max3). Without a NaN, and with no lane where two operands are zeros, numpy's min/max."""
    fa, fb, fc = (np.asarray(x) for x in (a, b, c))
    if fa.dtype == fb.dtype == fc.dtype and fa.dtype in _BITS:
        # no NaN and no zero in any lane (the smallest magnitude is > 0; a NaN makes it NaN): the
        # median is one value with one encoding, which numpy's min/max find as the ISA's rules do
        least = np.minimum(np.minimum(np.abs(fa), np.abs(fb)), np.abs(fc))
        if (least > 0).all():
            return np.maximum(np.minimum(fa, fb), np.minimum(np.maximum(fa, fb), fc))
        # no NaN, and at most one zero in any lane (a clamp between non-zero bounds): no two
        # operands are +0 and -0, so every comparison is strict or between equal encodings
        if not np.isnan(least).any() and ((fa == 0).view(np.uint8) + (fb == 0) + (fc == 0) <= 1).all():
            return np.maximum(np.minimum(fa, fb), np.minimum(np.maximum(fa, fb), fc))
    mx = fmax(fmax(a, b, ieee), c, ieee)
    nan = np.isnan(a) | np.isnan(b) | np.isnan(c)
    out = np.where(mx == a, fmax(b, c, ieee), np.where(mx == b, fmax(a, c, ieee), fmax(a, b, ieee)))
    return np.where(nan, fmin(fmin(a, b, ieee), c, ieee), out).astype(mx.dtype)


def rcp(x):
    """V_RCP_F32 as the correctly rounded 1/x of the input with denormals flushed, its denormal
    results flushed (``flush_denormals``). Hardware's is an approximation whose CDNA3 bits are not
    published (documented as 1 ulp): a simulated result may differ from the GPU's by that ulp;
    inside clang's division sequence the fma refinement makes the quotient correctly rounded
    either way (div_scale keeps its operands normal)."""
    with np.errstate(all="ignore"):
        return flush_denormals((F32(1.0) / flush_denormals(np.asarray(x, F32))).astype(F32))


def _round_f64_to_f32(y, exact_of, y_exact):
    """binary64 approximations ``y`` (error < 1 binary64 ulp) rounded to binary32 correctly: where
    ``y`` lies within 4 binary64 ulps of a binary32 midpoint the value is recomputed to 60 digits
    by ``exact_of(i)`` (a Decimal) and rounded from that; where ``y_exact`` the binary64 value is
    the exact result and numpy's rounding of it is already correct."""
    y = np.asarray(y, F64)
    bits = np.ascontiguousarray(y).view(np.uint64)
    ex = (bits >> np.uint64(52)) & np.uint64(0x7FF)
    if ((ex >= 897) & (ex <= 1150)).all():
        # every lane in binary32's normal range: a lane within 4 binary64 ulps of a binary32 midpoint
        # has its low 29 mantissa bits within 4 of 1 followed by 28 zeros; where none has, no lane
        # is recomputed and numpy's rounding is the answer
        near = np.abs((bits & _LOW29).astype(np.int64) - (1 << 28)) <= 4
        if not near.any():
            return y.astype(F32)
    return _round_near_midpoints(y, exact_of, y_exact)


def _round_near_midpoints(y, exact_of, y_exact):
    """_round_f64_to_f32 by each lane's distance to its binary32 neighbours' midpoint (the general path)."""
    from decimal import Decimal
    shape = y.shape
    y, y_exact = y.reshape(-1), np.broadcast_to(y_exact, shape).reshape(-1)
    r = y.astype(F32)
    r64 = r.astype(F64)
    toward = np.where(y > r64, F32(np.inf), F32(-np.inf))
    other = np.nextafter(r, toward)
    mid = (r64 + other.astype(F64)) * 0.5
    ulp = np.spacing(np.abs(y))
    close = np.isfinite(y) & np.isfinite(mid) & (np.abs(y - mid) <= 4 * ulp) & (y != r64) & ~y_exact
    out = r.copy()
    for i in np.nonzero(close)[0]:
        ex = exact_of(int(i))
        lo, hi = sorted([r[i], other[i]], key=float)
        m = (Decimal(float(lo)) + Decimal(float(hi))) / 2
        if ex < m:
            out[i] = lo
        elif ex > m:
            out[i] = hi
        else:                                            # an exact tie: to even
            out[i] = lo if (np.asarray(lo, F32).view(np.uint32) & 1) == 0 else hi
    return out.reshape(shape)


def exp2(x):
    """V_EXP_F32 as the correctly rounded 2^x (the hardware's is documented to 1 ulp; its bits
    are not published). Exact for integer x; 2^-inf = 0, 2^inf = inf, NaN stays NaN.

    A result below 2^-126 (x < -126) is flushed to +0 (``flush_denormals``) whatever the denormal mode: the hardware
    gives no denormal results, which is why LLVM's AMDGPU lowering of llvm.exp2.f32 with fp32
    denormals on computes 2^(x+64) * 2^-64 for x < -126 and emits the bare instruction only
    where denormals may flush (llvm.amdgcn.exp2, Triton's exp2 under its default ftz)."""
    from decimal import Decimal, localcontext
    x = np.asarray(x, F32)
    with np.errstate(all="ignore"):
        y = np.exp2(x.astype(F64))

    def exact(i):
        with localcontext() as ctx:
            ctx.prec = 60
            return (Decimal(float(x.flat[i])) * Decimal(2).ln()).exp()
    with np.errstate(all="ignore"):
        return flush_denormals(_round_f64_to_f32(y, exact, ~np.isfinite(x) | (x == np.round(x))))


def log2(x):
    """V_LOG_F32 as the correctly rounded log2(x) of the input with denormals flushed (hardware:
    1 ulp); log2(+-0) = -inf, negative -> the canonical NaN."""
    from decimal import Decimal, localcontext
    x0 = np.asarray(x, F32)
    x = flush_denormals(x0)
    with np.errstate(all="ignore"):
        y = np.log2(x.astype(F64))

    def exact(i):
        with localcontext() as ctx:
            ctx.prec = 60
            return Decimal(float(x.flat[i])).ln() / Decimal(2).ln()
    with np.errstate(all="ignore"):
        m, _ = np.frexp(x)
        return canonical_nan(_round_f64_to_f32(y, exact, ~np.isfinite(x) | (x <= 0) | (m == 0.5)), x0)


def _exponent(x, t=F32):
    """The biased exponent field."""
    if t is F64:
        return ((np.asarray(x, F64).view(np.uint64) >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    return ((np.asarray(x, F32).view(np.uint32) >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)


# V_DIV_SCALE's constants per width: (exponent gap, scale exponent, "numerator tiny" exponent, the
# quotient's underflow gap of V_DIV_FIXUP)
_DIV = {F32: (96, 64, 23, 150), F64: (768, 128, 53, 1075)}


def div_scale(s0, s1, s2, t=F32):
    """V_DIV_SCALE_F32 (``t`` np.float64: V_DIV_SCALE_F64) D, VCC = (S0 to scale, S1 denominator, S2 numerator).
    Returns (D, VCC) and the lanes whose case scales only one operand (VCC = 1), which the caller reports."""
    T = t
    gap, k, small, _ = _DIV[t]
    s0, s1, s2 = (np.asarray(x, T) for x in (s0, s1, s2))
    if T is F32 and s0.size and s0.shape == s1.shape == s2.shape and _div_plain(s1, s2):
        return s0.copy(), np.zeros(s0.shape, bool)
    tiny = np.finfo(T).tiny
    with np.errstate(all="ignore"):
        d = s0.copy()
        vcc = np.zeros(s0.shape, bool)
        zero = (s1 == 0) | (s2 == 0)
        # a zero numerator or denominator: D = NaN as the ISA's pseudocode says, but VCC = 1
        # where the pseudocode writes 0 (RDNA3 hardware, as an independent emulator's tests
        # found; not measured on CDNA). v_div_fmas then sees a NaN and v_div_fixup decides.
        vcc |= zero
        e1, e2 = _exponent(s1, t), _exponent(s2, t)
        q = s2 / s1
        r = T(1) / s1
        done = zero.copy()
        d = np.where(zero, T(np.nan), d)
        c = ~done & (e2 - e1 >= gap)
        vcc |= c
        d = np.where(c & (s0 == s1), np.ldexp(s0, k).astype(T), d)
        done |= c
        c = ~done & (np.abs(s1) < tiny) & (s1 != 0)                 # S1 denormal
        d = np.where(c, np.ldexp(s0, k).astype(T), d)
        done |= c
        rden = (np.abs(r) < tiny) & (r != 0)
        qnorm = np.abs(q) >= tiny
        c = ~done & rden & qnorm
        vcc |= c
        d = np.where(c & (s0 == s1), np.ldexp(s0, k).astype(T), d)
        done |= c
        c = ~done & rden
        d = np.where(c, np.ldexp(s0, -k).astype(T), d)
        done |= c
        c = ~done & (np.abs(q) < tiny) & (q != 0)
        vcc |= c
        d = np.where(c & (s0 == s2), np.ldexp(s0, k).astype(T), d)
        done |= c
        c = ~done & (e2 <= small)                                      # numerator tiny
        d = np.where(c, np.ldexp(s0, k).astype(T), d)
    return d.astype(T), vcc


def _div_plain(s1, s2) -> bool:
    """Whether no lane of a binary32 V_DIV_SCALE meets any of its cases (D = S0, VCC = 0): both
    operands normal and finite with biased exponents e1 in [1, 252] (1/S1 normal), e2 in [24, 254]
    (the numerator not tiny) and -124 <= e2 - e1 <= 95 (the quotient normal, no exponent gap)."""
    e1, e2 = _exponent(s1, F32), _exponent(s2, F32)
    gap = e2 - e1
    return bool(e1.min() >= 1 and e1.max() <= 252 and e2.min() >= 24 and e2.max() <= 254
                and gap.min() >= -124 and gap.max() <= 95)


def _fixup_plain(s1, s2) -> bool:
    """Whether no lane of a binary32 V_DIV_FIXUP meets a special case (D = S0 with the division's
    sign, no underflow): both operands normal and finite (biased exponents in [1, 254]: no NaN, inf,
    zero) and e2 - e1 >= -150."""
    e1, e2 = _exponent(s1, F32), _exponent(s2, F32)
    return bool(e1.min() >= 1 and e1.max() <= 254 and e2.min() >= 1 and e2.max() <= 254
                and (e2 - e1).min() >= -_DIV[F32][3])


def div_fixup(s0, s1, s2, t=F32):
    """V_DIV_FIXUP_F32 (``t`` np.float64: V_DIV_FIXUP_F64) D = (S0 quotient, S1 denominator, S2 numerator): the
    IEEE special cases of S2/S1, else the quotient with the sign of the division. Returns (D, lanes
    in the underflow case the caller reports as not modelled)."""
    T = t
    under_gap = _DIV[t][3]
    u, _ = _BITS[np.dtype(t)]
    default_nan = np.full(np.shape(s0), u(CANONICAL_NAN[np.dtype(t)])).view(T)
    s0, s1, s2 = (np.asarray(x, T) for x in (s0, s1, s2))
    sign = np.signbit(s1) ^ np.signbit(s2)
    if T is F32 and s0.size and s0.shape == s1.shape == s2.shape and _fixup_plain(s1, s2):
        return np.where(sign, -np.abs(s0), np.abs(s0)).astype(T), np.zeros(s0.shape, bool)
    inf = np.where(sign, T(-np.inf), T(np.inf))
    zero = np.where(sign, T(-0.0), T(0.0))
    d = np.where(sign, -np.abs(s0), np.abs(s0)).astype(T)
    e1, e2 = _exponent(s1, t), _exponent(s2, t)
    under = (e2 - e1 < -under_gap) & np.isfinite(s1) & np.isfinite(s2) & (s1 != 0) & (s2 != 0)
    rules = [
        (np.isnan(s2), quiet(s2)),
        (np.isnan(s1), quiet(s1)),
        ((s1 == 0) & (s2 == 0), default_nan),
        (np.isinf(s1) & np.isinf(s2), default_nan),
        ((s1 == 0) | np.isinf(s2), inf),
        (np.isinf(s1) | (s2 == 0), zero),
    ]
    out, taken = d, np.zeros(s0.shape, bool)
    for cond, val in rules:
        c = cond & ~taken
        out = np.where(c, val, out)
        taken |= c
    return out.astype(T), under & ~taken
