"""Register element types: numpy views of 32-bit VGPR words, via ml_dtypes for bf16/fp8."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..arch.dtypes import ELEM_TYPES

NP = {name: np.dtype(t.numpy) for name, t in ELEM_TYPES.items()}
NP["i64"] = np.dtype(np.int64)
NP["u64"] = np.dtype(np.uint64)
FLOAT = {n for n, t in ELEM_TYPES.items() if t.is_float}
INT = set(NP) - FLOAT
SIGNED = {"i8", "i16", "i32", "i64"}

# Poison: what a never-written register or LDS byte reads as (a quiet NaN pattern in every
# 32-bit word) so a kernel that uses it produces visible garbage, never a plausible zero.
POISON_WORD = 0x7FBADBAD
POISON_BYTES = np.frombuffer(np.uint32(POISON_WORD).tobytes(), np.uint8)


def np_dtype(name: str) -> np.dtype:
    try:
        return NP[name]
    except KeyError:
        raise ValueError(f"unknown register element type {name!r}; known: {', '.join(NP)}") from None


def dtype_name(dt) -> str:
    """The register type name of ``dt``: an ISA-style string ("i8", "f32", "bf16") or anything
    numpy accepts as a dtype (np.int8, "int8", np.dtype("float32"))."""
    if isinstance(dt, str) and dt in NP:
        return dt
    try:
        d = np.dtype(dt)
    except TypeError:
        raise ValueError(f"unknown register element type {dt!r}; known: {', '.join(NP)}") from None
    for k, v in NP.items():
        if v == d:
            return k
    raise ValueError(f"no register type for numpy dtype {d}; known: {', '.join(NP)}")


def itemsize(name: str) -> int:
    return np_dtype(name).itemsize


def to_bytes(val: np.ndarray) -> np.ndarray:
    """[n, lanes] typed -> [n*itemsize, lanes] uint8, little-endian per lane."""
    n, lanes = val.shape
    return np.ascontiguousarray(val.T).view(np.uint8).reshape(lanes, -1).T.copy()


def from_bytes(raw: np.ndarray, name: str) -> np.ndarray:
    """[nbytes, lanes] uint8 -> [nbytes/itemsize, lanes] typed."""
    dt = np_dtype(name)
    nb, lanes = raw.shape
    if nb % dt.itemsize:
        raise ValueError(f"{nb} bytes do not hold a whole number of {name} elements")
    return np.ascontiguousarray(raw.T).view(dt).reshape(lanes, -1).T.copy()


__all__ = ["NP", "FLOAT", "INT", "SIGNED", "POISON_WORD", "np_dtype", "dtype_name", "itemsize", "to_bytes", "from_bytes",
           "ml_dtypes"]
