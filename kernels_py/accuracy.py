"""What each record's accumulator costs in accuracy at attention sizes: O = P.V of one 16-row tile
run instruction after instruction under the record's silicon model, against float64.

P is attention-like (exp(s - max), scaled to the type's largest finite value for fp8), V has a
scale per column; both are cast to the record's A/B type, so the float64 reference sees the same
inputs and only the accumulation differs.
  one-level  the instruction's C is the running O all along;
  two-level  a buffer starts from 0 every ``block`` K and is then added into O by an fp32 add.
Errors: rel-L1 = sum|O - ref| / sum|ref|, max = max|O - ref| / max|ref|.

    python3 -m kernels_py.accuracy                 # the README's table (markdown)
"""
from __future__ import annotations

import argparse

import numpy as np

from gfxsim.arch import get_instruction
from gfxsim.arch.dtypes import elem_type
from gfxsim.machine.accum import mma_f32
from gfxsim.machine.mma import XF32_BITS, truncate_mantissa

RECORDS = (
    ("gfx942", "v_mfma_f32_16x16x16_f16"), ("gfx942", "v_mfma_f32_16x16x16_bf16"),
    ("gfx942", "v_mfma_f32_16x16x32_fp8_fp8"), ("gfx942", "v_mfma_f32_16x16x8_xf32"),
    ("gfx942", "v_mfma_f32_16x16x4_f32"),
    ("gfx90a", "v_mfma_f32_16x16x16f16"), ("gfx90a", "v_mfma_f32_16x16x16bf16_1k"),
    ("sm_89", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    ("sm_89", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"),
    ("sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    ("sm_90", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"),
)
LENGTHS = (32, 256, 2048, 16384)


def cast(x, t: str) -> np.ndarray:
    """``x`` rounded to the ISA type ``t`` (xf32: fp32 cut to its 10 mantissa bits), as float64."""
    if t == "xf32":
        return truncate_mantissa(np.asarray(x, np.float32), XF32_BITS).astype(np.float64)
    return np.asarray(x, np.float32).astype(elem_type(t).numpy).astype(np.float64)


def pv_inputs(insn, length: int, seed: int = 0):
    """P [M, L] and V [L, N] in the record's A and B types."""
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(insn.M, length)) * 2.0
    p = np.exp(s - s.max(axis=1, keepdims=True))
    v = rng.normal(size=(length, insn.N)) * 10.0 ** rng.uniform(-1, 1, size=(1, insn.N))
    if insn.a_type in ("fp8", "bf8", "fp8_e4m3"):
        top = float(np.finfo(elem_type(insn.a_type).numpy).max)
        p = p * top
        v = v * (top / np.abs(v).max(axis=0, keepdims=True))
    return cast(p, insn.a_type), cast(v, insn.b_type)


def pv(insn, p, v, block: int | None = None) -> np.ndarray:
    """O = P.V through the record's instructions (K each); ``block`` K per fp32 buffer (None: one level)."""
    k = insn.K
    o = np.zeros((1, insn.M, insn.N), np.float32)
    buf = o
    for k0 in range(0, p.shape[1], k):
        if block and k0 % block == 0:
            buf = np.zeros_like(o)
        buf = mma_f32(insn.accumulator, p[None, :, k0:k0 + k], v[None, k0:k0 + k], buf, insn.a_type, insn.b_type)
        if block and (k0 + k) % block == 0:
            o = (o + buf).astype(np.float32)
    return (o if block else buf)[0].astype(np.float64)


def errors(o, ref) -> tuple[float, float]:
    """(rel-L1, max error relative to max |ref|)."""
    return float(np.abs(o - ref).sum() / np.abs(ref).sum()), float(np.abs(o - ref).max() / np.abs(ref).max())


def table(records=RECORDS, lengths=LENGTHS, block: int = 256, seed: int = 0) -> list:
    """Rows (arch, mnemonic, accumulation, [(rel-L1, max) per length])."""
    rows = []
    for arch, mn in records:
        insn = get_instruction(arch, mn)
        data = {L: pv_inputs(insn, L, seed) for L in lengths}
        for level, blk in (("one-level", None), (f"two-level ({block})", block)):
            errs = [errors(pv(insn, *data[L], block=blk if blk and blk < L else None), data[L][0] @ data[L][1])
                    for L in lengths]
            rows.append((arch, mn, level, errs))
    return rows


def markdown(rows, lengths=LENGTHS) -> str:
    head = ("| arch | instruction | accumulation | " + " | ".join(f"K={L}" for L in lengths) + " |")
    sep = "|" + "---|" * (3 + len(lengths))
    body = [f"| {a} | `{mn}` | {lvl} | " + " | ".join(f"{r:.1e} / {m:.1e}" for r, m in errs) + " |"
            for a, mn, lvl, errs in rows]
    return "\n".join([head, sep] + body)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="PV error (rel-L1 / max) of each record's accumulator against float64")
    ap.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    print(markdown(table(lengths=tuple(a.lengths), block=a.block, seed=a.seed), a.lengths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
