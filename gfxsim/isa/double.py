"""Binary64 VALU instructions (operands and results in VGPR pairs): IEEE binary64 arithmetic with
round to nearest even and denormals kept (``.amdhsa_float_denorm_mode_16_64 3``), the IEEE-mode
min/max, the conversions to and from binary64, the division helpers and the float class test.

The asm front end runs every entry here through its own binary64 row (asm/semantics/vop64.py):
the Python front end has no binary64 values."""
from __future__ import annotations

import numpy as np

from . import EXTREMUM, FUSED, KEEP, PRODUCT, QUANTIZE, SUM, define, fp

F64, F32, I32, U32 = np.float64, np.float32, np.int32, np.uint32


def _f(fn, t=F64):
    def run(*a):
        with np.errstate(all="ignore"):
            return np.asarray(fn(*a)).astype(t, copy=False)
    return run


def _fract(a):
    """x - floor(x), below 1.0 (the largest binary64 below 1 where the difference rounds up); NaN for inf."""
    with np.errstate(all="ignore"):
        r = np.minimum(a - np.floor(a), np.nextafter(F64(1), F64(0)))
    return np.where(np.isinf(a), F64(np.nan), np.where(np.isnan(a), a, r))


def _to_int(lo: float, hi: float, t):
    """Round toward zero, saturate to [lo, hi], NaN -> 0."""
    def run(a):
        with np.errstate(invalid="ignore"):
            x = np.trunc(np.asarray(a, F64))
        return np.where(np.isnan(x), 0, np.clip(x, lo, hi)).astype(np.int64).astype(t)
    return run


def frexp_mant(a) -> np.ndarray:
    """V_FREXP_MANT: the significand in [0.5, 1) with a's sign; inf and NaN are returned as they are."""
    return np.frexp(a)[0].astype(np.asarray(a).dtype, copy=False)


def frexp_exp(a) -> np.ndarray:
    """V_FREXP_EXP_I32: the exponent e of a = m * 2^e, m in [0.5, 1); 0 for zero, inf and NaN."""
    return np.where(np.isfinite(a), np.frexp(a)[1], 0).astype(I32)


def rsq(a) -> np.ndarray:
    """1/sqrt(x) in binary64, two roundings: the hardware's approximation (documented to 1 ulp) has
    unpublished bits; clang's sqrt and division sequences refine it with fmas either way. A binary32
    input's denormals are flushed first (fp.flush_denormals); a negative input gives the canonical NaN."""
    a = np.asarray(a)
    x = fp.flush_denormals(a) if a.dtype == np.float32 else a
    with np.errstate(all="ignore"):
        return fp.canonical_nan((F64(1) / np.sqrt(np.asarray(x, F64))).astype(a.dtype), a).astype(F64)


# float class bits of V_CMP_CLASS: the classes in bit order
def float_class(x) -> np.ndarray:
    """The one class bit of each element (V_CMP_CLASS's mask): 0 signalling NaN, 1 quiet NaN,
    2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf."""
    x = np.asarray(x)
    neg = np.signbit(x)
    tiny = np.finfo(x.dtype).tiny
    mag = np.abs(x)
    with np.errstate(invalid="ignore"):
        k = np.where(np.isinf(x), 9, np.where(mag == 0, 6, np.where(mag < tiny, 7, 8)))
    k = np.where(neg & ~np.isnan(x), 11 - k, k)
    k = np.where(np.isnan(x), np.where(fp.is_snan(x), 0, 1), k)
    return (U32(1) << k.astype(U32)).astype(U32)


def cmp_class(x, mask) -> np.ndarray:
    """V_CMP_CLASS: whether x's class bit is set in ``mask``."""
    return (float_class(x) & np.asarray(mask, U32)) != 0


d, f, i, u = "f64", "f32", "i32", "u32"
define("v_add_f64", (d, d), d, _f(np.add), SUM, asm="own")
define("v_mul_f64", (d, d), d, _f(np.multiply), PRODUCT, asm="own")
define("v_fma_f64", (d, d, d), d, fp.fma64, FUSED, asm="own")
define("v_max_f64", (d, d), d, fp.fmax, EXTREMUM, asm="own")
define("v_min_f64", (d, d), d, fp.fmin, EXTREMUM, asm="own")
define("v_ldexp_f64", (d, i), d, _f(lambda a, e: np.ldexp(a, np.clip(e, -2200, 2200))), asm="own")
define("v_rcp_f64", (d,), d, _f(lambda a: F64(1) / a), asm="own")      # correctly rounded (hardware: 1 ulp)
define("v_rsq_f64", (d,), d, rsq, asm="own")
define("v_sqrt_f64", (d,), d, _f(np.sqrt), asm="own")
define("v_fract_f64", (d,), d, _f(_fract), asm="own")
define("v_trunc_f64", (d,), d, _f(np.trunc), asm="own")
define("v_ceil_f64", (d,), d, _f(np.ceil), asm="own")
define("v_floor_f64", (d,), d, _f(np.floor), asm="own")
define("v_rndne_f64", (d,), d, _f(np.rint), asm="own")
define("v_frexp_mant_f64", (d,), d, _f(frexp_mant), asm="own")
define("v_frexp_exp_i32_f64", (d,), i, frexp_exp, asm="own")
define("v_cvt_f64_f32", (f,), d, _f(lambda a: a.astype(F64)), asm="own")
define("v_cvt_f32_f64", (d,), f, _f(lambda a: a.astype(F32), F32), asm="own")
define("v_cvt_f64_i32", (i,), d, _f(lambda a: a.astype(F64)), asm="own")
define("v_cvt_f64_u32", (u,), d, _f(lambda a: a.astype(F64)), asm="own")
define("v_cvt_i32_f64", (d,), i, _to_int(-2.0 ** 31, 2.0 ** 31 - 1, I32), QUANTIZE, asm="own")
define("v_cvt_u32_f64", (d,), u, _to_int(0.0, 2.0 ** 32 - 1, U32), QUANTIZE, asm="own")
define("v_div_scale_f64", (d, d, d), d, lambda a, b, c: fp.div_scale(a, b, c, F64), KEEP, asm="own")
define("v_div_fmas_f64", (d, d, d), d, fp.fma64, FUSED, asm="own")       # VCC clear: a plain fma
define("v_div_fixup_f64", (d, d, d), d, lambda a, b, c: fp.div_fixup(a, b, c, F64), KEEP, asm="own")
define("v_cmp_class_f64", (d, u), "mask", cmp_class, asm="own")
define("v_cmp_class_f32", (f, u), "mask", cmp_class, asm="own")
define("v_cmp_class_f16", ("f16", "u16"), "mask", cmp_class, asm="own")      # run by the 16-bit rows
define("v_cmpx_class_f16", ("f16", "u16"), "mask", cmp_class, asm="own")
define("v_frexp_mant_f32", (f,), f, _f(frexp_mant, F32))
define("v_frexp_exp_i32_f32", (f,), i, frexp_exp)
define("v_rsq_f32", (f,), f, lambda a: rsq(np.asarray(a, F32)).astype(F32))
del d, f, i, u

__all__ = ["cmp_class", "float_class", "frexp_exp", "frexp_mant", "rsq"]
