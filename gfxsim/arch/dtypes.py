"""Element types of matrix operands, by the names the ISA uses, backed by ml_dtypes/numpy.

The arch layer needs only names and bit widths; the numpy scalar types of bf16 and the FP8
formats come from ml_dtypes, which is imported on the first use of ``ElemType.numpy`` (when
values are computed), not on import: ml_dtypes 0.7 alone takes over a second to import, and
`gfxsim layout` never touches a value.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from ..errors import ArgumentError


@cache
def _resolve(ref: str) -> type:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class ElemType:
    name: str          # short ISA-style name: i8, f16, bf16, fp8 (e4m3), bf8 (e5m2), i32, f32, xf32, f64
    bits: int
    numpy_ref: type | str   # numpy scalar type, or "module:attr" naming one (imported on first use)
    is_float: bool
    description: str
    encoding: str | None = None   # how its bytes encode a number (ENCODINGS); None: not checked


    @property
    def numpy(self) -> type:
        """The numpy scalar type (np.int8, ml_dtypes.bfloat16, ...); imports its module on first use."""
        ref = self.numpy_ref
        return _resolve(ref) if isinstance(ref, str) else ref


# Byte encodings whose misreading is a bug class of its own (format-mismatch): the FP8 formats
# (OCP's fn/e5m2 and CDNA3's NaN-only-zero fnuz pair differ in bias and NaN), the 16-bit floats,
# the 8- and 4-bit integers. Wider types are not tracked: arithmetic writes them.
ENCODINGS = ("e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz", "bf16", "f16", "i8", "u8", "i4")

ELEM_TYPES = {t.name: t for t in (
    ElemType("i8", 8, "numpy:int8", False, "signed 8-bit integer", "i8"),
    ElemType("i4", 4, "ml_dtypes:int4", False, "signed 4-bit integer (packed 8 per 32-bit register)", "i4"),
    ElemType("u8", 8, "numpy:uint8", False, "unsigned 8-bit integer", "u8"),
    ElemType("i16", 16, "numpy:int16", False, "signed 16-bit integer"),
    ElemType("u16", 16, "numpy:uint16", False, "unsigned 16-bit integer (global_load_ushort, ds_read_u16)"),
    ElemType("f16", 16, "numpy:float16", True, "IEEE binary16", "f16"),
    ElemType("bf16", 16, "ml_dtypes:bfloat16", True, "bfloat16", "bf16"),
    ElemType("fp8", 8, "ml_dtypes:float8_e4m3fnuz", True, "FP8 E4M3 (CDNA3 'fp8', NaN-only-zero encoding)", "e4m3fnuz"),
    ElemType("bf8", 8, "ml_dtypes:float8_e5m2fnuz", True, "FP8 E5M2 (CDNA3 'bf8')", "e5m2fnuz"),
    ElemType("fp8_e4m3", 8, "ml_dtypes:float8_e4m3fn", True, "OCP FP8 E4M3 (NVIDIA, gfx950)", "e4m3fn"),
    ElemType("fp8_e5m2", 8, "ml_dtypes:float8_e5m2", True, "OCP FP8 E5M2", "e5m2"),
    ElemType("i32", 32, "numpy:int32", False, "signed 32-bit integer"),
    ElemType("u32", 32, "numpy:uint32", False, "unsigned 32-bit integer"),
    ElemType("f32", 32, "numpy:float32", True, "IEEE binary32"),
    # CDNA3 xf32 MFMA operands: fp32 registers the matrix unit reads with 10 mantissa bits
    # (1 sign, 8 exponent, 10 mantissa; gfxsim.machine.mma cuts them)
    ElemType("xf32", 32, "numpy:float32", True, "XF32: fp32 registers read with 10 mantissa bits"),
    ElemType("f64", 64, "numpy:float64", True, "IEEE binary64 (a register pair)"),
)}


def elem_type(name: str) -> ElemType:
    try:
        return ELEM_TYPES[name]
    except KeyError:
        raise ArgumentError(f"unknown element type {name!r}; known: {', '.join(ELEM_TYPES)}") from None
