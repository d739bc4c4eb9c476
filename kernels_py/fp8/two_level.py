"""Two-level accumulation: what a reduced FP8 mma accumulator costs along the sequence, and how a
per-block fp32 accumulator bounds it (SageAttention2's ``compute_fp8_sv_inst_buf``; DeepSeek-V3's
promotion; Triton's ``max_num_imprecise_acc``).

PV of one tile, O[m][n] = sum_t P[m][t] V[t][n], with P (e4m3, SageAttention2's static 448 scale)
and V (e4m3, per-channel scale) run k32 instruction after k32 instruction under a record's
accumulator model (``gfxsim.machine.accum``):
  one-level  the instruction's C is the running O all along (each instruction aligns the new
             products to O, whose exponent keeps growing with the sequence);
  two-level  a buffer starts from 0 for every ``block`` tokens (64 = CTA_K), is accumulated by the
             instructions of that block, and is then added into O by an fp32 add.

    python3 -m kernels_py.fp8.two_level            # the docs/nvidia.md table (markdown)
"""
from __future__ import annotations

import argparse

import numpy as np

from gfxsim.arch import nvidia
from gfxsim.machine.accum import accumulate, product_terms
from gfxsim.errors import ArgumentError

K_INSN = 32          # K of one FP8 instruction (mma.sync m16n8k32 / wgmma k32)


def e4m3(x):
    import ml_dtypes
    return np.asarray(x, np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


def pv_inputs(length: int, m: int = 16, n: int = 16, seed: int = 0):
    """P [m, L] (448 * exp(s - max) cast to e4m3) and V [L, n] (per-channel e4m3) as float64."""
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(m, length)) * 2.0
    p = e4m3(448.0 * np.exp(s - s.max(axis=1, keepdims=True)))
    v = rng.normal(size=(length, n))
    v = e4m3(v * (448.0 / np.abs(v).max(axis=0, keepdims=True)))
    return p, v


def pv(acc, p, v, block: int | None = None) -> np.ndarray:
    """O = P.V through k32 instructions under ``acc``; ``block`` tokens per fp32 buffer (None: one level)."""
    m, length = p.shape
    if length % K_INSN or (block and block % K_INSN):
        raise ArgumentError(f"sequence length {length} and block {block} must be multiples of {K_INSN}")
    o = np.zeros((1, m, v.shape[1]), np.float32)
    buf = o
    for k0 in range(0, length, K_INSN):
        if block and k0 % block == 0:
            buf = np.zeros_like(o)
        prod, pexp = product_terms(p[None, :, k0:k0 + K_INSN], v[None, k0:k0 + K_INSN])
        buf = accumulate(acc, prod, pexp, buf.astype(np.float64))
        if block and (k0 + K_INSN) % block == 0:
            o = (o + buf).astype(np.float32)
    return (o if block else buf)[0]


def rel_l1(o, ref) -> float:
    return float(np.abs(o - ref).sum() / np.abs(ref).sum())


ACCS = (("sm_90 wgmma e4m3 (13 bits)", nvidia.SM90_WGMMA_E4M3),
        ("sm_89 FP22 (13 bits, two halves of K)", nvidia.FP22_ADA),
        ("sm_90 HMMA, f16 PV (25 bits)", nvidia.SM90_HMMA),
        ("exact fp32", nvidia.F32_EXACT))


def table(lengths=(256, 1024, 4096, 16384), block: int = 64, seed: int = 0) -> list:
    """Rows (accumulator, level, rel-L1 at each length) against the float64 PV."""
    data = {L: pv_inputs(L, seed=seed) for L in lengths}
    rows = []
    for name, acc in ACCS:
        for level, blk in (("one-level", None), (f"two-level ({block})", block)):
            errs = [rel_l1(pv(acc, *data[L], block=blk), data[L][0] @ data[L][1]) for L in lengths]
            rows.append((name, level, errs))
    return rows


def markdown(rows, lengths) -> str:
    head = "| accumulator | accumulation | " + " | ".join(f"rel-L1 L={L}" for L in lengths) + " |"
    sep = "|" + "---|" * (2 + len(lengths))
    return "\n".join([head, sep] + [f"| {a} | {lvl} | " + " | ".join(f"{e:.2e}" for e in errs) + " |"
                                    for a, lvl, errs in rows])


def main(argv=None):
    ap = argparse.ArgumentParser(description="PV error of reduced FP8 accumulators, one- vs two-level")
    ap.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    print(markdown(table(a.lengths, a.block, a.seed), a.lengths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
