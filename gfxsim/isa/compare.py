"""VOPC compares: v_cmp[x]_<relation>_<type> D = a lane mask (the x forms also write EXEC). Float
relations follow IEEE: the ordered ones are false with a NaN, the n* ("not") ones true."""
from __future__ import annotations

import numpy as np

from . import NONE, define


def _ord(a, b):
    return ~np.isnan(a) & ~np.isnan(b)


FLOAT = {"f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "lt": np.less, "eq": np.equal,
         "le": np.less_equal, "gt": np.greater, "lg": lambda a, b: _ord(a, b) & (a != b), "ge": np.greater_equal,
         "o": _ord, "u": lambda a, b: ~_ord(a, b), "nge": lambda a, b: ~(a >= b),
         "nlg": lambda a, b: ~(_ord(a, b) & (a != b)), "ngt": lambda a, b: ~(a > b), "nle": lambda a, b: ~(a <= b),
         "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
         "tru": lambda a, b: np.ones(np.broadcast(a, b).shape, bool)}
INTEGER = {"f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "lt": np.less, "eq": np.equal,
           "le": np.less_equal, "gt": np.greater, "ne": np.not_equal, "lg": np.not_equal, "ge": np.greater_equal,
           "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool)}


def _quiet(rel):
    """A float relation with NaN operands raising no warning (a NaN is a value here)."""
    def run(a, b):
        with np.errstate(invalid="ignore"):
            return rel(a, b)
    return run


for _t in ("f32", "i32", "u32", "i64", "u64", "f64", "f16", "i16", "u16"):
    _asm = "cmp" if _t in ("f32", "i32", "u32", "i64", "u64", "f64") else "own"     # 16-bit: half selects
    for _c, _rel in (FLOAT if _t[0] == "f" else INTEGER).items():
        for _x in ("", "x"):
            define(f"v_cmp{_x}_{_c}_{_t}", (_t, _t), "mask", _quiet(_rel) if _t[0] == "f" else _rel, NONE, asm=_asm)

__all__ = ["FLOAT", "INTEGER"]
