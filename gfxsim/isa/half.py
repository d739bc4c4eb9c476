"""16-bit VALU instructions beyond the Python front end's (gfx9 binary16 and 16-bit integer forms,
their conversions and packs, fp8/bf8 decoding, and the mixed-precision fma) on typed arrays:
binary16 arithmetic rounds once to nearest even with denormals kept; the transcendental ones are
evaluated in binary64 and rounded to binary16 (the hardware's are documented to 1 ulp, their bits
unpublished). The asm front end runs them through asm/semantics/vop16.py, which also reads the
halves (op_sel, SDWA selects) and places the result's."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import DIFFERENCE, FUSED, QUANTIZE, REDUCE, ROUTE, define, fp


F16, F32, F64, U16, I16, U32 = np.float16, np.float32, np.float64, np.uint16, np.int16, np.uint32


def _h(fn):
    """A binary16 result of a binary64 evaluation, rounded once (no warnings: NaN/inf are values)."""
    def run(*a):
        with np.errstate(all="ignore"):
            return np.asarray(fn(*(np.asarray(x).astype(F64) for x in a))).astype(F16)
    return run


def _sat16(lo: int, hi: int, t):
    """Round toward zero, saturate to the 16-bit range, NaN -> 0."""
    def run(a):
        with np.errstate(invalid="ignore"):
            x = np.trunc(np.asarray(a).astype(F64))
        return np.where(np.isnan(x), 0, np.clip(x, lo, hi)).astype(np.int64).astype(t)
    return run


def rtz_f16(x) -> np.ndarray:
    """binary32 to binary16 rounded toward zero: a finite value beyond the range is the largest
    finite binary16 (65504) of its sign; infinities and NaNs stay."""
    x = np.asarray(x, F32)
    with np.errstate(all="ignore"):
        r = x.astype(F16)
        away = np.isfinite(x) & (np.abs(r.astype(F32)) > np.abs(x))
        r = np.where(away, np.nextafter(r, F16(0)), r)
    return r.astype(F16)


def pack_halves(lo, hi) -> np.ndarray:
    """A 32-bit word of two 16-bit halves (bits)."""
    return np.asarray(lo).view(U16).astype(U32) | (np.asarray(hi).view(U16).astype(U32) << U32(16))


def _ldexp(a, e):
    e16 = np.asarray(e).astype(np.int64)
    return np.ldexp(a, np.clip(e16, -100, 100))


# (mantissa bits, exponent bias) of gfx942's fp8 (e4m3fnuz) and bf8 (e5m2fnuz)
FP8_FORMATS = {"fp8": (3, 8), "bf8": (2, 16)}


def stochastic_fp8(kind: str) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """V_CVT_SR_{FP8,BF8}_F32 D.byte = S0 rounded with the random word S1: the low (23 - m) bits of
    S1 are added to S0's significand below the kept m bits, then the sum is truncated (a carry out
    moves the exponent up), as AMD's software models of the conversion do. Beyond the largest
    finite value, infinities and NaNs: 0x80 (NaN, as the round-to-nearest form); zero (either
    sign): 0. Returns (bits uint8, lanes whose result is an fp8 denormal or below — there AMD's
    models differ on which random bits are used, so the caller refuses them)."""
    m, bias = FP8_FORMATS[kind]

    def run(x, rng):
        w = np.asarray(x, F32).view(U32).astype(np.int64)
        r = np.asarray(rng, U32).astype(np.int64)
        sign = (w >> 31) & 1
        e32 = (w >> 23) & 0xFF
        sig = (w & 0x7FFFFF) | (1 << 23)
        e = e32 - 127 + bias                       # the fp8 exponent field
        s = sig + (r & ((1 << (23 - m)) - 1))
        carry = s >> 24
        e = e + carry
        mant = (s >> (23 - m + carry)) & ((1 << m) - 1)
        out = (sign << 7) | (np.clip(e, 0, 255) << m) | mant
        special = (e32 == 0xFF) | (e > (1 << (7 - m)) - 1)
        zero = (w & 0x7FFFFFFF) == 0
        out = np.where(special, 0x80, np.where(zero, 0, out))
        low = ~special & ~zero & (e < 1)
        return out.astype(np.uint8), low
    return run


h, u, i, f = "f16", "u16", "i16", "f32"
define("v_subrev_f16", (h, h), h, _h(lambda a, b: b - a), DIFFERENCE, asm="own")
define("v_fma_f16", (h, h, h), h, lambda a, b, c: fp.fma(a, b, c, F16), FUSED, asm="own")
define("v_ldexp_f16", (h, i), h, _h(_ldexp), asm="own")           # the exponent: S1's low 16 bits, signed
define("v_exp_f16", (h,), h, _h(np.exp2), asm="own")
define("v_log_f16", (h,), h, _h(np.log2), asm="own")
define("v_rcp_f16", (h,), h, _h(lambda a: 1.0 / a), asm="own")
define("v_sqrt_f16", (h,), h, _h(np.sqrt), asm="own")
define("v_rsq_f16", (h,), h, _h(lambda a: 1.0 / np.sqrt(a)), asm="own")
define("v_trunc_f16", (h,), h, _h(np.trunc), asm="own")
define("v_floor_f16", (h,), h, _h(np.floor), asm="own")
define("v_ceil_f16", (h,), h, _h(np.ceil), asm="own")
define("v_rndne_f16", (h,), h, _h(np.rint), asm="own")
define("v_cvt_f16_u16", (u,), h, lambda a: np.asarray(a).astype(F64).astype(F16), asm="own")
define("v_cvt_u16_f16", (h,), u, _sat16(0, 0xFFFF, U16), QUANTIZE, asm="own")
define("v_cvt_i16_f16", (h,), i, _sat16(-0x8000, 0x7FFF, I16), QUANTIZE, asm="own")
define("v_cvt_pkrtz_f16_f32", (f, f), "u32", lambda a, b: pack_halves(rtz_f16(a), rtz_f16(b)), asm="own")
define("v_pack_b32_f16", (h, h), "u32", pack_halves, ROUTE, asm="own")
define("v_subrev_u16", (u, u), u, lambda a, b: b - a, DIFFERENCE, asm="own")
define("v_mad_u16", (u, u, u), u, lambda a, b, c: a * b + c, asm="own")
define("v_mad_i16", (i, i, i), i, lambda a, b, c: a * b + c, asm="own")
# the mixed-precision fma: each source binary32 or (op_sel_hi) a binary16 half, widened exactly;
# one rounding, to binary32 or to the binary16 half of the destination
define("v_fma_mix_f32", (f, f, f), f, fp.fma, FUSED, asm="own")
define("v_fma_mixlo_f16", (f, f, f), h, lambda a, b, c: fp.fma(a, b, c, F16), FUSED, asm="own")
define("v_fma_mixhi_f16", (f, f, f), h, lambda a, b, c: fp.fma(a, b, c, F16), FUSED, asm="own")
define("v_med3_f16", (h, h, h), h, fp.med3, REDUCE, asm="own")
define("v_max3_f16", (h, h, h), h, lambda a, b, c: fp.fmax(fp.fmax(a, b), c), REDUCE, asm="own")
define("v_min3_f16", (h, h, h), h, lambda a, b, c: fp.fmin(fp.fmin(a, b), c), REDUCE, asm="own")
for _t in (u, i):
    define(f"v_med3_{_t}", (_t,) * 3, _t, lambda a, b, c: np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c)),
           REDUCE, asm="own")
    define(f"v_max3_{_t}", (_t,) * 3, _t, lambda a, b, c: np.maximum(np.maximum(a, b), c), REDUCE, asm="own")
    define(f"v_min3_{_t}", (_t,) * 3, _t, lambda a, b, c: np.minimum(np.minimum(a, b), c), REDUCE, asm="own")
define("v_fract_f16", (h,), h, _h(lambda a: np.where(np.isinf(a), np.nan, np.minimum(a - np.floor(a),
                                                                                       F64(1 - 2.0 ** -11)))), asm="own")
define("v_frexp_mant_f16", (h,), h, lambda a: np.frexp(np.asarray(a, F16))[0].astype(F16), asm="own")
define("v_frexp_exp_i16_f16", (h,), i, lambda a: np.where(np.isfinite(a), np.frexp(np.asarray(a, F16))[1], 0)
       .astype(I16), asm="own")
define("v_cvt_sr_fp8_f32", (f, "u32"), "fp8", stochastic_fp8("fp8"), asm="own")
define("v_cvt_sr_bf8_f32", (f, "u32"), "bf8", stochastic_fp8("bf8"), asm="own")
define("v_cvt_pk_f32_fp8", ("fp8",), f, lambda a: np.asarray(a).astype(F32), asm="own")
define("v_cvt_pk_f32_bf8", ("bf8",), f, lambda a: np.asarray(a).astype(F32), asm="own")
del h, u, i, f

__all__ = ["FP8_FORMATS", "pack_halves", "rtz_f16", "stochastic_fp8"]
