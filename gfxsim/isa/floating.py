"""Floating-point VALU instructions: IEEE binary32 (and binary16) arithmetic with round to nearest
even and denormals kept, the ISA's IEEE-mode min/max, and the transcendental approximations the
simulator evaluates correctly rounded (fp.py says where that differs from the hardware)."""
from __future__ import annotations

import numpy as np

from . import DIFFERENCE, EXTREMUM, FUSED, KEEP, PRODUCT, REDUCE, SUM, define, fp

F32, F16 = np.float32, np.float16


def _f(fn, t=F32):
    """A float operation evaluated with floating-point warnings off (NaN/inf are values here)."""
    def run(*a):
        with np.errstate(all="ignore"):
            return fp.canonical_nan(np.asarray(fn(*a)).astype(t, copy=False), *a)
    return run


def _fract(a):
    return np.where(np.isinf(a), F32(np.nan), a - np.floor(a))


f, i, h = "f32", "i32", "f16"
for _w, _t, _nt in ((32, f, F32), (16, h, F16)):
    _asm = "valu" if _w == 32 else "own"
    define(f"v_add_f{_w}", (_t, _t), _t, _f(np.add, _nt), SUM, asm=_asm)
    define(f"v_sub_f{_w}", (_t, _t), _t, _f(np.subtract, _nt), DIFFERENCE, asm=_asm)
    define(f"v_mul_f{_w}", (_t, _t), _t, _f(np.multiply, _nt), PRODUCT, asm=_asm)
    define(f"v_max_f{_w}", (_t, _t), _t, fp.fmax, EXTREMUM, asm=_asm)
    define(f"v_min_f{_w}", (_t, _t), _t, fp.fmin, EXTREMUM, asm=_asm)
define("v_subrev_f32", (f, f), f, _f(lambda a, b: b - a), DIFFERENCE)
define("v_fma_f32", (f, f, f), f, lambda a, b, c: fp.canonical_nan(fp.fma(a, b, c), a, b, c), FUSED)
define("v_max3_f32", (f, f, f), f, lambda a, b, c: fp.fmax(fp.fmax(a, b), c), REDUCE)
define("v_min3_f32", (f, f, f), f, lambda a, b, c: fp.fmin(fp.fmin(a, b), c), REDUCE)
define("v_med3_f32", (f, f, f), f, fp.med3, REDUCE)
define("v_rndne_f32", (f,), f, _f(np.rint))                # IEEE roundToIntegralTiesToEven (keeps -0)
define("v_trunc_f32", (f,), f, _f(np.trunc))
define("v_floor_f32", (f,), f, _f(np.floor))
define("v_ceil_f32", (f,), f, _f(np.ceil))
define("v_fract_f32", (f,), f, _f(_fract))
define("v_rcp_f32", (f,), f, fp.rcp)
define("v_rcp_iflag_f32", (f,), f, fp.rcp)                 # the rcp of integer division: same value
define("v_exp_f32", (f,), f, fp.exp2)
define("v_log_f32", (f,), f, fp.log2)
# correctly rounded (hardware: 1 ulp) of the input with denormals flushed (fp.flush_denormals)
define("v_sqrt_f32", (f,), f, _f(lambda a: np.sqrt(fp.flush_denormals(np.asarray(a, F32)))))
define("v_ldexp_f32", (f, i), f, _f(lambda a, e: np.ldexp(a, np.clip(e, -400, 400))))
# the division helpers: (D, VCC) of div_scale; (D, lanes in the underflow case the asm front end
# reports as not modelled) of div_fixup
define("v_div_scale_f32", (f, f, f), f, fp.div_scale, KEEP, asm="own")
define("v_div_fmas_f32", (f, f, f), f, lambda a, b, c: fp.canonical_nan(fp.fma(a, b, c), a, b, c), FUSED,
       asm="own")     # VCC clear: a plain fma
define("v_div_fixup_f32", (f, f, f), f, fp.div_fixup, KEEP, asm="own")
# the f16 fixup's special cases (NaN, 0/0, inf/inf, x/0, x/inf, the sign) are binary32's, decided on
# the widened operands; its underflow case is binary32's too (pseudo.div_f16 states the quotient)
define("v_div_fixup_f16", (h, h, h), h,
       lambda a, b, c: tuple(np.asarray(x).astype(F16) if x.dtype.kind == "f" else x
                             for x in fp.div_fixup(*(np.asarray(v).astype(F32) for v in (a, b, c)))), KEEP, asm="own")
del f, i, h

__all__: list[str] = []
