"""The silicon accumulator records of the AMD matrix units (CDNA2, CDNA3, and Hygon's MMAC taken
as CDNA3), stated as ``AccumulatorPrecision`` datapaths.

The CDNA models are MMA-Sim's (arXiv 2511.10909, whose authors compared them bit for bit with
MI250X and MI300X): hw_probes/mmasim/golden_mmasim.npz holds what MMA-Sim computes for every
record here over random, attention-like, adversarial and chained inputs, and
tests/gfxsim/arch/test_mmasim_golden.py replays it. Nothing here was run on AMD silicon by gfxsim.
"""
from __future__ import annotations

from dataclasses import replace

from .matrix_insn import AccumulatorPrecision as Acc

MMASIM = "MMA-Sim 2.1.1 (arXiv 2511.10909)"
_REPLAY = "MMA-Sim's model, which its authors checked on {}; replayed bit for bit from hw_probes/mmasim"
NAN = 0x7FFFFFFF            # the NaN every fused MMA-Sim datapath writes
AMD_NAN = 0x7FC00000        # the quiet NaN AMD's fp32 adders return for an invalid operation

CDNA3_F16 = Acc(24, "CDNA3 f16/bf16: products of each step of 8 K fused (aligned to the largest, 24 fraction bits, "
                "cut toward zero), then joined with C in a 31-bit adder (cut toward -inf), rounded to fp32 "
                "nearest even", rounding="truncate", final_rounding="nearest", c_entry="two_stage", c_bits=31,
                step=8, nan=NAN, source=MMASIM, measured=_REPLAY.format("MI300X"))
CDNA3_XF32 = Acc(24, "CDNA3 xf32: as f16/bf16 (24-bit fused products, 31-bit C adder) in steps of 4 K",
                 rounding="truncate", final_rounding="nearest", c_entry="two_stage", c_bits=31, step=4, nan=NAN,
                 source=MMASIM, measured=_REPLAY.format("MI300X"))
CDNA3_FP8 = Acc(24, "CDNA3 fp8/bf8: each step of 16 K fused as two interleaved groups (even and odd K, 24 fraction "
                "bits each, cut toward zero), their sums aligned and cut toward -inf, joined with C in a 31-bit "
                "adder, rounded to fp32 nearest even", rounding="truncate", final_rounding="nearest",
                c_entry="two_stage", c_bits=31, step=16, interleave=2, c_far_drops=True, nan=NAN, source=MMASIM,
                measured=_REPLAY.format("MI300X"))
FMA = Acc(None, "one fused multiply-add per K index in the C/D type, in K order", c_entry="fma",
          source=MMASIM, measured=_REPLAY.format("MI250X and MI300X"))
CDNA2_F16 = Acc(None, "CDNA2 f16/bf16_1k: fp32 products of inputs with denormals flushed, added pairwise in steps of 4 "
                "((p0+p1)+(p2+p3)), each step's sum added to C; every fp32 add to nearest even, denormals flushed",
                c_entry="ftz_tree", step=4, nan=AMD_NAN, source=MMASIM, measured=_REPLAY.format("MI250X"))
CDNA2_BF16 = Acc(None, "CDNA2 bf16 (two per register): fp32 products with denormals flushed, each pair's sum added to "
                 "C; every fp32 add to nearest even, denormals flushed", c_entry="ftz_tree", step=2, nan=AMD_NAN, source=MMASIM,
                 measured=_REPLAY.format("MI250X"))
HYGON_NOTE = ("Hygon publishes nothing on the MMAC accumulator: modelled as CDNA3's (the MMAC layouts are CDNA3's); "
              "not measured on Hygon hardware")


def cdna(family: str, mnemonic: str, a_type: str, cd_type: str) -> Acc | None:
    """The accumulator record of a CDNA v_mfma_* (None: integer, exact)."""
    if cd_type == "i32":
        return None
    if a_type in ("f32", "f64"):
        return FMA
    if family == "CDNA3":
        return {"xf32": CDNA3_XF32, "fp8": CDNA3_FP8, "bf8": CDNA3_FP8}.get(a_type, CDNA3_F16)
    if a_type == "bf16" and not mnemonic.endswith("_1k"):
        return CDNA2_BF16
    return CDNA2_F16


def sparse(a_type: str, cd_type: str) -> Acc | None:
    """A CDNA3 v_smfmac_*'s accumulator: its dense form's datapath, not validated (MMA-Sim has no
    sparse model; how the unit groups the stored products is not published)."""
    if cd_type == "i32":
        return None
    dense = cdna("CDNA3", "", a_type, cd_type)
    return replace(dense, note=dense.note + "; taken for the sparse instruction's dense form, not measured or "
                   "validated", measured="")
