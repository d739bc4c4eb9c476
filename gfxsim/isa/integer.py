"""Integer and bitwise VALU instructions: wrap-around arithmetic (numpy integer arrays wrap
without a warning), shifts whose amount takes its low log2(bits) bits, bit fields."""
from __future__ import annotations

import numpy as np

from . import BYTE_EXTRACT, DIFFERENCE, EXTREMUM, PRODUCT, REDUCE, ROUTE, SUM, define
from .conversion import rounded, unfit, wrap

U32, I32, U64 = np.uint32, np.int32, np.uint64


def amount(s, x) -> np.ndarray:
    """A shift amount for x's element type: its low 5 bits for 32-bit x, 4 for 16-bit."""
    return (np.asarray(s) & (8 * x.dtype.itemsize - 1)).astype(x.dtype, copy=False)


def shl(s, x):
    return np.left_shift(x, amount(s, x))


def shr(s, x):
    """Logical for unsigned x, arithmetic for signed x."""
    return np.right_shift(x, amount(s, x))


def _i(x):
    return np.asarray(x).view(I32)


def _sh(x, bits=31):
    return (np.asarray(x) & U32(bits)).astype(U32)


def _mul_hi_u(a, b):
    return ((a.astype(U64) * b.astype(U64)) >> U64(32)).astype(U32)


def _mul_hi_i(a, b):
    p = _i(a).astype(np.int64) * _i(b).astype(np.int64)
    return (p >> 32).astype(np.int64).astype(U32)


def bfe_u(a, off, width):
    off, width = off & U32(31), width & U32(31)
    return ((a >> off) & ((U32(1) << width) - U32(1))).astype(U32)


def bfe_i(a, off, width):
    a, off, width = np.asarray(a), np.asarray(off), np.asarray(width)
    if a.dtype == U32 and off.size and width.size:
        o, w = int(off.flat[0]) & 31, int(width.flat[0]) & 31
        # one field for every lane (clang's constant operands), inside the word: shift it to the
        # top, then arithmetically back down
        if 0 < w and o + w <= 32 and off.shape in ((), a.shape) and width.shape in ((), a.shape) and \
                (off.ndim == 0 or (off == off.flat[0]).all()) and (width.ndim == 0 or (width == width.flat[0]).all()):
            return ((a << U32(32 - o - w)).view(np.int32) >> (32 - w)).view(U32)
    off, width = (off & U32(31)).astype(np.int64), (width & U32(31)).astype(np.int64)
    v = (a.astype(np.int64) >> off) & ((1 << width) - 1)
    sign = (width > 0) & ((v >> np.maximum(width - 1, 0)) & 1).astype(bool)
    return np.where(sign, v - (1 << width), v).astype(np.int64).astype(U32)


def _bfrev(a):
    """Reverse the 32 bits of each word."""
    b = np.unpackbits(np.ascontiguousarray(a, U32).view(np.uint8).reshape(-1, 4), axis=1, bitorder="little")
    return np.packbits(b[:, ::-1], axis=1, bitorder="little").view(U32).reshape(np.shape(a))


def _med3(a, b, c):
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def _lo24(a):
    return a & U32(0xFFFFFF)


def _i24(a):
    return bfe_i(a, U32(0), U32(24))


u, i = "u32", "i32"
# As conversions of the Python front end (conversion.py): v_bfe_i32/u32 of the low field extends an
# i8/i16/u8/u16, v_ashrrev_i32 by 31 makes an i64's high word, v_lshlrev_b32 by 16 a bf16's fp32.
_EXTENDS = {"convert": wrap, "checked": unfit}
# the same function on 32-bit and 16-bit arrays (and on signed ones: the bits are the same)
for _w, _t in ((32, "u32"), (16, "u16")):
    define(f"v_add_u{_w}", (_t, _t), _t, np.add, SUM, asm="valu" if _w == 32 else "own")
    define(f"v_sub_u{_w}", (_t, _t), _t, np.subtract, DIFFERENCE, asm="valu" if _w == 32 else "own")
    define(f"v_mul_lo_u{_w}", (_t, _t), _t, np.multiply, PRODUCT, asm="valu" if _w == 32 else "own")
    define(f"v_lshlrev_b{_w}", (_t, _t), _t, shl, ROUTE, asm="valu" if _w == 32 else "own",
           **({"convert": rounded} if _w == 32 else {}))
    define(f"v_lshrrev_b{_w}", (_t, _t), _t, shr, ROUTE, asm="valu" if _w == 32 else "own")
    define(f"v_ashrrev_i{_w}", (_t, f"i{_w}"), f"i{_w}", shr, ROUTE, asm="valu" if _w == 32 else "own",
           **(_EXTENDS if _w == 32 else {}))
    for _s in ("i", "u"):
        define(f"v_max_{_s}{_w}", (f"{_s}{_w}",) * 2, f"{_s}{_w}", np.maximum, EXTREMUM,
               asm="valu" if _w == 32 else "own")
        define(f"v_min_{_s}{_w}", (f"{_s}{_w}",) * 2, f"{_s}{_w}", np.minimum, EXTREMUM,
               asm="valu" if _w == 32 else "own")
define("v_subrev_u32", (u, u), u, lambda a, b: b - a, DIFFERENCE)
define("v_and_b32", (u, u), u, np.bitwise_and, ROUTE)
define("v_or_b32", (u, u), u, np.bitwise_or, ROUTE)
define("v_xor_b32", (u, u), u, np.bitwise_xor, ROUTE)
define("v_not_b32", (u,), u, np.invert)
define("v_mul_hi_u32", (u, u), u, _mul_hi_u)
define("v_mul_hi_i32", (u, u), u, _mul_hi_i)
define("v_mul_u32_u24", (u, u), u, lambda a, b: _lo24(a) * _lo24(b))
define("v_mul_i32_i24", (u, u), u, lambda a, b: _i24(a) * _i24(b))
define("v_mad_u32_u24", (u, u, u), u, lambda a, b, c: _lo24(a) * _lo24(b) + c)
define("v_mad_i32_i24", (u, u, u), u, lambda a, b, c: _i24(a) * _i24(b) + c)
define("v_lshl_or_b32", (u, u, u), u, lambda a, b, c: (a << _sh(b)) | c, ROUTE)
define("v_and_or_b32", (u, u, u), u, lambda a, b, c: (a & b) | c, ROUTE)
define("v_or3_b32", (u, u, u), u, lambda a, b, c: a | b | c, ROUTE)
define("v_xad_u32", (u, u, u), u, lambda a, b, c: (a ^ b) + c)
define("v_add3_u32", (u, u, u), u, lambda a, b, c: a + b + c, SUM)
define("v_lshl_add_u32", (u, u, u), u, lambda a, b, c: (a << _sh(b)) + c)
define("v_add_lshl_u32", (u, u, u), u, lambda a, b, c: (a + b) << _sh(c))
define("v_bfe_u32", (u, u, u), u, bfe_u, BYTE_EXTRACT, **_EXTENDS)
define("v_bfe_i32", (u, u, u), u, bfe_i, BYTE_EXTRACT, **_EXTENDS)
define("v_bfi_b32", (u, u, u), u, lambda a, b, c: (a & b) | (~a & c))
define("v_alignbit_b32", (u, u, u), u, lambda a, b, c: (((a.astype(U64) << U64(32)) | b.astype(U64))
                                                       >> (c & U32(31)).astype(U64)).astype(U32), BYTE_EXTRACT)
define("v_alignbyte_b32", (u, u, u), u, lambda a, b, c: (((a.astype(U64) << U64(32)) | b.astype(U64))
                                                        >> (U64(8) * (c & U32(3)).astype(U64))).astype(U32), BYTE_EXTRACT)
define("v_med3_i32", (i, i, i), i, _med3, REDUCE)
define("v_med3_u32", (u, u, u), u, _med3, REDUCE)
define("v_min3_i32", (i, i, i), i, lambda a, b, c: np.minimum(np.minimum(a, b), c), REDUCE)
define("v_max3_i32", (i, i, i), i, lambda a, b, c: np.maximum(np.maximum(a, b), c), REDUCE)
define("v_min3_u32", (u, u, u), u, lambda a, b, c: np.minimum(np.minimum(a, b), c), REDUCE)
define("v_max3_u32", (u, u, u), u, lambda a, b, c: np.maximum(np.maximum(a, b), c), REDUCE)
define("v_bfrev_b32", (u,), u, _bfrev)
define("v_bcnt_u32_b32", (u, u), u, lambda a, b: np.bitwise_count(a).astype(U32) + b)


def _ffbh_u(a):
    """V_FFBH_U32: the number of leading zeros (the first 1 from the MSB), 0xffffffff for 0."""
    a = np.asarray(a, U32)
    lead = 31 - np.floor(np.log2(np.maximum(a, 1).astype(np.float64))).astype(np.int64)
    return np.where(a == 0, U32(0xFFFFFFFF), lead.astype(U32))


def _ffbl(a):
    """V_FFBL_B32: the index of the lowest 1 bit, 0xffffffff for 0."""
    a = np.asarray(a, U32)
    low = a & (~a + U32(1))
    return np.where(a == 0, U32(0xFFFFFFFF), _ffbh_u(low) ^ U32(31))


def _ffbh_i(a):
    """V_FFBH_I32: the position, counted from the MSB (bit 31 is position 0), of the first bit that
    differs from the sign bit; 0xffffffff for 0 and -1."""
    a = np.asarray(a, U32)
    n = _ffbh_u(np.where(a >> U32(31), ~a, a))
    return np.where((a == 0) | (a == U32(0xFFFFFFFF)), U32(0xFFFFFFFF), n)


define("v_ffbh_u32", (u,), u, _ffbh_u)
define("v_ffbl_b32", (u,), u, _ffbl)
define("v_ffbh_i32", (u,), u, _ffbh_i)
del u, i

__all__ = ["amount", "bfe_i", "bfe_u", "shl", "shr"]
