"""Symmetric INT8 quantization on the wave, with the recipe of ALGORITHMS.md.

scale = amax/127, inv = 127/amax, q = clamp(rint(x*inv), -127, 127); an amax of 0, or one so small
(< 127/FLT_MAX) that inv would overflow, gives scale 0 and q 0.
"""
from __future__ import annotations

import numpy as np

QMAX = np.float32(127.0)
AMAX_MIN = QMAX / np.finfo(np.float32).max


def quant_params(w, amax):
    """(inv, scale) for an amax value: both 0 where amax is below AMAX_MIN."""
    live = amax >= AMAX_MIN
    inv = w.select(live, QMAX / w.max(amax, AMAX_MIN), 0.0)
    # amax * 0 rather than a literal 0: the zero scale of an all-zero group still names the elements
    # it was computed over, so the debugger can tell it from a scale computed over nothing
    scale = w.select(live, amax / QMAX, amax * np.float32(0))
    return inv, scale


def quantize(w, x, inv):
    """int8 of x * inv, rounded half to even (v_rndne_f32) and clamped to +-127."""
    return w.clamp(w.rint(x * inv), -QMAX, QMAX).to("i32").to("i8")
