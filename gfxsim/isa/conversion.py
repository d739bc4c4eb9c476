"""Conversions between element types: the VOP1 conversions (round to nearest even into floats;
toward zero and saturating, NaN -> 0, into integers), and the integer moves the Python front end
names by the instruction that performs them (a sign or zero extension is ``v_bfe_i32``/``_u32`` of
the low field, the high word of an i64 ``v_ashrrev_i32`` by 31).

An integer conversion moves bits: it wraps. The Python front end asks for a *checked* one (option
``checked``: the elements that do not fit the destination type), so a silent wrap cannot hide a
bug in a kernel; the asm front end, like the hardware, moves the bits."""
from __future__ import annotations

import numpy as np

from . import QUANTIZE, define

F32, F16, I32, U32 = np.float32, np.float16, np.int32, np.uint32


def wrap(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """An integer move: the destination type's view of the bits (two's complement)."""
    return x.astype(dtype)


def unfit(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Per element: whether the integer x lies outside ``dtype``'s range (a checked conversion)."""
    info = np.iinfo(dtype)
    wide = x.astype(np.int64)
    return (wide < info.min) | (wide > info.max)


def rounded(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Into a float type, rounded once to nearest even (integers through binary64, where they are
    exact); beyond the type's range an infinity, without a warning."""
    with np.errstate(over="ignore", invalid="ignore"):
        return (x.astype(np.float64) if x.dtype.kind in "iu" else x).astype(dtype)


def numpy_type(name: str) -> np.dtype:
    """The numpy dtype of an element type name (bf16 and fp8 from ml_dtypes, imported on first use)."""
    from ..arch.dtypes import ELEM_TYPES
    return np.dtype(ELEM_TYPES[name].numpy)


def _to_f32(a):
    return np.asarray(a).astype(F32)


def _in_range(x, lo: float, hi: float) -> bool:
    """Whether every element is a number in [lo, hi): numpy's cast (C's truncation toward zero)
    is then the instruction's, with no float64 copy (NaN compares false)."""
    x = np.asarray(x)
    return x.dtype.kind == "f" and bool(((x >= x.dtype.type(lo)) & (x < x.dtype.type(hi))).all())


def _cvt_i32_f32(x):
    """Round toward zero, saturate to the int32 range, NaN -> 0."""
    if _in_range(x, -2.0 ** 31, 2.0 ** 31):
        return np.asarray(x).astype(I32)
    with np.errstate(invalid="ignore"):              # a signalling NaN widened: a NaN, no warning
        t = np.trunc(x.astype(np.float64))
    return np.where(np.isnan(t), 0, np.minimum(np.maximum(t, -2.0 ** 31), 2.0 ** 31 - 1)).astype(I32)


def _cvt_u32_f32(x):
    if _in_range(x, 0.0, 2.0 ** 32):
        return np.asarray(x).astype(U32)
    with np.errstate(invalid="ignore"):              # a signalling NaN widened: a NaN, no warning
        t = np.trunc(x.astype(np.float64))
    return np.where(np.isnan(t), 0, np.minimum(np.maximum(t, 0.0), 2.0 ** 32 - 1)).astype(U32)


def _fp8(name):
    """A conversion into an fp8 type of ml_dtypes (imported on first use: it costs a second)."""
    def run(a):
        import ml_dtypes
        return np.asarray(a, F32).astype(getattr(ml_dtypes, name))
    return run


u, i, f = "u32", "i32", "f32"
define("v_cvt_f32_i32", (i,), f, _to_f32)
define("v_cvt_f32_u32", (u,), f, _to_f32)
# quantized: a new operand (an MMA's A or B), no longer a matrix result that travels
define("v_cvt_i32_f32", (f,), i, _cvt_i32_f32, QUANTIZE)
define("v_cvt_u32_f32", (f,), u, _cvt_u32_f32, QUANTIZE)
for _k in range(4):
    define(f"v_cvt_f32_ubyte{_k}", (u,), f,
           lambda a, k=_k: ((np.asarray(a).astype(U32, copy=False) >> U32(8 * k)) & U32(0xFF)).astype(F32))
define("v_cvt_f16_f32", (f,), "f16", lambda a: rounded(np.asarray(a, F32), np.dtype(F16)), asm="own")
define("v_cvt_f32_f16", ("f16",), f, _to_f32, asm="own")
define("v_cvt_f16_i16", ("i16",), "f16", lambda a: rounded(np.asarray(a), F16), asm="own")
# one opcode, two encodings: gfx942's fp8 is e4m3fnuz, gfx950's the OCP e4m3 (the element type says)
# each source rounded to nearest even; beyond the type's range NaN (0x80: the fnuz types have no
# infinity, and gfx942's encoding has no clamp bit)
define("v_cvt_pk_fp8_f32", (f, f), "fp8", _fp8("float8_e4m3fnuz"), asm="own", convert=rounded)
define("v_cvt_pk_bf8_f32", (f, f), "bf8", _fp8("float8_e5m2fnuz"), asm="own", convert=rounded)
define("v_cvt_f32_fp8", ("fp8",), f, _to_f32, asm="own")
define("v_cvt_f32_bf8", ("bf8",), f, _to_f32, asm="own")
del u, i, f

__all__ = ["numpy_type", "rounded", "unfit", "wrap"]
