"""Replays hw_probes/mmasim/golden_mmasim.npz (MMA-Sim's D for gfxsim's float matrix records)
through gfxsim's accumulator models."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gfxsim.arch import get_instruction
from gfxsim.arch.dtypes import elem_type
from gfxsim.arch import nvidia
from gfxsim.machine.accum import mma_f32
from gfxsim.machine.mma import compute

GOLDEN = Path(__file__).resolve().parents[2] / "hw_probes" / "mmasim" / "golden_mmasim.npz"
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def load():
    z = np.load(GOLDEN)
    meta = json.loads(bytes(z["meta"]).decode())
    return z, meta


def values(bits, t):
    """float64 values of operand bits of ISA type ``t``."""
    et = elem_type(t)
    return np.asarray(bits).view(et.numpy).astype(np.float64)


def _one(exp, a, b, c):
    arch, insn, (at, bt, ct) = exp["arch"], exp["insn"], exp["types"]
    if insn.startswith("accumulator:"):
        acc = nvidia.ACCUMULATORS[insn.split(":", 1)[1]]
        return mma_f32(acc, a, b, c.astype(np.float32), at, bt)
    rec = get_instruction(arch, insn)
    cd = c.astype(np.float64 if ct == "f64" else np.float32)
    return compute(rec, a, b, cd)[0]


def replay(z, exp):
    """(gfxsim's D bits, MMA-Sim's D bits) of one experiment."""
    key, (at, bt, ct) = exp["key"], exp["types"]
    a, b = values(z[key + "|A"], at), values(z[key + "|B"], bt)
    c = values(z[key + "|C"], ct)
    if exp["steps"] == 1:
        d = _one(exp, a, b, c)
    else:
        d = c
        for s in range(exp["steps"]):
            d = np.asarray(_one(exp, a[:, s], b[:, s], d), np.float64)
    w = elem_type(ct).bits
    return np.asarray(d, np.float64 if ct == "f64" else np.float32).view(UINT[w]), z[key + "|D"]
