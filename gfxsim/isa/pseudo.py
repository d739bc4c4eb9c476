"""Pseudo-ops: operations of the Python front end that no single instruction performs. Each
states its numbers once and lists the instructions it stands for (``expands``), e.g. ``e**x`` is
``v_mul_f32`` by log2(e), then ``v_exp_f32``, which computes 2**x.

The numbers are the operation's exact result (a quotient correctly rounded, as clang's
division sequence makes it; e**x correctly rounded where the hardware's pair of instructions is
within an ulp or two), not a step-by-step model of the sequence."""
from __future__ import annotations

import numpy as np

from . import KEEP, PRODUCT, define
from .conversion import numpy_type, rounded, unfit, wrap

DIV_F32 = ("v_div_scale_f32", "v_rcp_f32", "v_fma_f32", "v_div_fmas_f32", "v_div_fixup_f32")
IDIV = ("v_cvt_f32_u32", "v_rcp_iflag_f32", "v_mul_f32", "v_cvt_u32_f32", "v_mul_lo_u32", "v_mul_hi_u32",
        "v_sub_u32", "v_cndmask_b32")


def div_const(x: np.ndarray, d: int) -> np.ndarray:
    """x // d (floor) for a positive int d, as a new array: a shift where d is a power of two (most
    tensor extents; what the compiler emits, exact for negative x in two's complement), several
    times faster than an integer division per element."""
    return np.right_shift(x, d.bit_length() - 1) if d & (d - 1) == 0 else np.floor_divide(x, d)


def mod_const(x: np.ndarray, d: int) -> np.ndarray:
    """x % d (floor, non-negative) for a positive int d, as a new array: a mask where d is a power
    of two."""
    return np.bitwise_and(x, d - 1) if d & (d - 1) == 0 else np.mod(x, d)


def _quiet(fn):
    def run(*a):
        with np.errstate(all="ignore"):
            return fn(*a)
    return run


def _floor_div(x, y):
    """Floor division; a zero divisor (which the caller reports) gives x // 1."""
    return np.floor_divide(x, np.where(y == 0, 1, y))


def _floor_mod(x, y):
    return np.mod(x, np.where(y == 0, 1, y))


def _via_f64(fn):
    """fn evaluated in float64 and rounded once to the value's type: correctly rounded except in
    the rare double-rounding case (numpy's float32 exp is up to 2 ulp off)."""
    return lambda v: fn(v.astype(np.float64)).astype(v.dtype)


def pseudo(name: str, srcs, result: str, fn, rule=KEEP, *expands: str, **options):
    return define(f"pseudo.{name}", srcs, result, fn, rule, asm=None, expands=expands, **options)


pseudo("div_f32", ("f32", "f32"), "f32", _quiet(np.divide), PRODUCT, *DIV_F32)
pseudo("div_f16", ("f16", "f16"), "f16", _quiet(np.divide), PRODUCT,
       "v_cvt_f32_f16", "v_rcp_f32", "v_mul_f32", "v_cvt_f16_f32", "v_div_fixup_f16")
for _t in ("i32", "u32"):
    pseudo(f"div_{_t}", (_t, _t), _t, _floor_div, KEEP, *IDIV, by_constant=div_const)
    pseudo(f"rem_{_t}", (_t, _t), _t, _floor_mod, KEEP, *IDIV, by_constant=mod_const)
pseudo("exp_f32", ("f32",), "f32", _quiet(_via_f64(np.exp)), KEEP, "v_mul_f32", "v_exp_f32")   # e**x = 2**(x*log2 e)
pseudo("abs_i32", ("i32",), "i32", np.abs, KEEP, "v_sub_u32", "v_max_i32")
# integer narrowing: the low field (v_and_b32), checked like every integer move
for _d in ("i8", "u8", "i16"):
    pseudo(f"cvt_{_d}_i32", ("i32",), _d, lambda x, d=_d: wrap(x, numpy_type(d)), KEEP, "v_and_b32",
           convert=wrap, checked=unfit)
# float conversions without one instruction: rounded once from the exact value
_FLOAT_CVT = {
    "cvt_bf16_f32": ("f32", "bf16", ("v_bfe_u32", "v_add3_u32", "v_cndmask_b32", "v_lshrrev_b32")),
    "cvt_bf16_i8": ("i8", "bf16", ("v_bfe_i32", "v_cvt_f32_i32", "v_lshrrev_b32")),      # exact: 8 bits fit
    "cvt_f16_i8": ("i8", "f16", ("v_bfe_i32", "v_cvt_f16_i16")),
    "cvt_bf16_i32": ("i32", "bf16", ("v_cvt_f32_i32", "v_bfe_u32", "v_add3_u32", "v_lshrrev_b32")),
    "cvt_bf16_f16": ("f16", "bf16", ("v_cvt_f32_f16", "v_bfe_u32", "v_add3_u32", "v_lshrrev_b32")),
    "cvt_f16_bf16": ("bf16", "f16", ("v_lshlrev_b32", "v_cvt_f16_f32")),
    "cvt_f16_i32": ("i32", "f16", ("v_cvt_f32_i32", "v_cvt_f16_f32")),
}
for _n, (_s, _d, _x) in _FLOAT_CVT.items():
    pseudo(_n, (_s,), _d, lambda x, d=_d: rounded(x, numpy_type(d)), KEEP, *_x)

__all__ = ["DIV_F32", "IDIV", "div_const", "mod_const"]
