"""Element types of matrix operands, by the names the ISA uses, backed by ml_dtypes/numpy."""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class ElemType:
    name: str          # short ISA-style name: i8, f16, bf16, fp8 (e4m3), bf8 (e5m2), i32, f32
    bits: int
    numpy: type
    is_float: bool
    description: str


ELEM_TYPES = {t.name: t for t in (
    ElemType("i8", 8, np.int8, False, "signed 8-bit integer"),
    ElemType("u8", 8, np.uint8, False, "unsigned 8-bit integer"),
    ElemType("i16", 16, np.int16, False, "signed 16-bit integer"),
    ElemType("f16", 16, np.float16, True, "IEEE binary16"),
    ElemType("bf16", 16, ml_dtypes.bfloat16, True, "bfloat16"),
    ElemType("fp8", 8, ml_dtypes.float8_e4m3fnuz, True, "FP8 E4M3 (CDNA3 'fp8', NaN-only-zero encoding)"),
    ElemType("bf8", 8, ml_dtypes.float8_e5m2fnuz, True, "FP8 E5M2 (CDNA3 'bf8')"),
    ElemType("fp8_e4m3", 8, ml_dtypes.float8_e4m3fn, True, "OCP FP8 E4M3 (NVIDIA, gfx950)"),
    ElemType("fp8_e5m2", 8, ml_dtypes.float8_e5m2, True, "OCP FP8 E5M2"),
    ElemType("i32", 32, np.int32, False, "signed 32-bit integer"),
    ElemType("u32", 32, np.uint32, False, "unsigned 32-bit integer"),
    ElemType("f32", 32, np.float32, True, "IEEE binary32"),
)}


def elem_type(name: str) -> ElemType:
    try:
        return ELEM_TYPES[name]
    except KeyError:
        raise ValueError(f"unknown element type {name!r}; known: {', '.join(ELEM_TYPES)}") from None
