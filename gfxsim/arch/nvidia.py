"""NVIDIA warp32 profiles: Ada (sm_89) and Hopper (sm_90), warp-level ``mma.sync`` records.

Layouts are the PTX ISA fragment tables ("Matrix Fragments for mma.m16n8k16 / mma.m16n8k32 /
mma.m16n8k64", PTX ISA 8.x s.9.7.14.5). With groupID = lane >> 2 and threadID_in_group = lane % 4,
for elements of ``bits`` bits, epr = 32 / bits per .b32 register:

    A (16 x 8*epr, .row): a_i, reg r = i // epr, e = i % epr
        row = groupID + 8*(r % 2)                col = epr*threadID_in_group + e + 4*epr*(r // 2)
    B (8*epr x 8, .col):  b_i, reg r = i // epr
        row = epr*threadID_in_group + e + 4*epr*r  col = groupID
    C/D (16 x 8, f32/s32): c_i
        row = groupID + 8*(i // 2)               col = 2*threadID_in_group + i % 2

which is m16n8k16 for 16-bit types, m16n8k32 for 8-bit (s8, e4m3) and m16n8k64 for s4. The H200
probe (hw_probes/nvidia) runs every record with its inputs placed by these layouts and checks the
result element by element; the accumulator records follow its golden file.
"""
from __future__ import annotations

from .matrix_insn import AccumulatorPrecision as Acc, MatrixInstruction as MI
from .layout import OperandLayout
from .profile import ArchProfile

WARP = 32
SRC = ("NVIDIA PTX ISA 8.x s.9.7.14.5 'Matrix Fragments for mma.m16n8k16/m16n8k32/m16n8k64' "
       "(groupID = laneid >> 2, threadID_in_group = laneid % 4); checked on an H200 by hw_probes/nvidia")


def ptx_m16n8(op: str, bits: int) -> OperandLayout:
    """One operand of mma.sync.m16n8k(8*epr).row.col, as mixed-radix digits of the PTX table."""
    epr = 32 // bits if op in "AB" else 1
    k = 8 * epr
    if op == "A":      # a0: (g, chunk t), a1: (g+8, t), a2: (g, t+4), a3: (g+8, t+4)
        return OperandLayout("A", 16, k, 1, bits, lane=[(4, "col", epr), (8, "row", 1)],
                             reg=[(2, "row", 8), (2, "col", 4 * epr)], elem=[(epr, "col", 1)], wave_size=WARP)
    if op == "B":      # b0: (chunk t, g), b1: (t+4, g)
        return OperandLayout("B", k, 8, 1, bits, lane=[(4, "row", epr), (8, "col", 1)],
                             reg=[(2, "row", 4 * epr)], elem=[(epr, "row", 1)], wave_size=WARP)
    return OperandLayout(op, 16, 8, 1, 32, lane=[(4, "col", 2), (8, "row", 1)],       # C/D: c0,c1 row g; c2,c3 row g+8
                         reg=[(2, "col", 1), (2, "row", 8)], elem=[], wave_size=WARP)


# -- accumulator records (see hw_probes/nvidia/README.md for the measurements behind them) ----------
INT_EXACT = Acc(None, "exact int32; wraps on overflow (no .satfinite)")
_MMASIM_ADA = ("MMA-Sim 2.1.1's Ada model (arXiv 2511.10909; its authors checked it on an RTX 4090); replayed bit "
               "for bit from hw_probes/mmasim")
FP22_ADA = Acc(13, "FP22 (1+8+13) for FP8 mma on Ada: each half of K (16 products) is one fused step: C and the "
               "products aligned to the largest exponent, 13 fraction bits kept (cut toward zero), the result cut "
               "to 13 mantissa bits, then C of the second half", rounding="truncate",
               c_entry="fused", result_bits=13, step=16, zero_exponent=-132, nan=0x7FFFFFFF,
               source="SageAttention2 (arXiv 2411.10958) for the width; MMA-Sim 2.1.1 for the halves",
               measured=_MMASIM_ADA)
ADA_HMMA = Acc(24, "HMMA.16816.F32 on Ada: two fused steps of 8 products each: C and the products aligned to the "
               "largest exponent, 24 fraction bits kept (cut toward zero), exact sum, fp32 result truncated",
               rounding="truncate", c_entry="fused", step=8, zero_exponent=-132, nan=0x7FFFFFFF,
               source="MMA-Sim 2.1.1 (arXiv 2511.10909)", measured=_MMASIM_ADA)


F32_EXACT = Acc(None, "exact fp32 (one rounding of the K-sum plus C)")
_GOLDEN = "hw_probes/nvidia/golden_h200.json (H200, driver 580.159.04, CUDA 13.0)"
# Measured on the H200 (hw_probes/nvidia): every structured and random experiment reproduced bit for bit.
SM90_HMMA = Acc(25, "HMMA.16816.F32: C and the 16 products aligned to the largest exponent, 25 fraction "
                "bits kept (cut toward zero), exact sum, fp32 result truncated", rounding="truncate",
                c_entry="fused", step=16, zero_exponent=-133, nan=0x7FFFFFFF, source=_GOLDEN,
                measured="the H200 probe (hw_probes/nvidia) and MMA-Sim 2.1.1's Hopper model")
SM90_MMA_E4M3 = Acc(25, "sm_90 has no FP8 mma.sync unit: ptxas emits two f16 HMMA.16816 (K slots "
                    "k%4<2, then k%4>=2, chained, 25 bits, truncated) and adds C with an fp32 FADD "
                    "(nearest even)", rounding="truncate", c_entry="after",
                    k_steps=(tuple(k for k in range(32) if k % 4 < 2), tuple(k for k in range(32) if k % 4 >= 2)),
                    source=_GOLDEN, measured="the H200 probe (hw_probes/nvidia)")
# wgmma.mma_async m64nNk32 e4m3 -> f32 (QGMMA, a warpgroup instruction: no warp-level record here).
# Every experiment of the golden file, random ones included, reproduces bit for bit.
SM90_WGMMA_E4M3 = Acc(13, "QGMMA.64xNx32.F32.E4M3: C and the 32 products aligned to the largest exponent, "
                      "13 fraction bits kept (cut toward zero), the result cut to 13 mantissa bits (FP22; "
                      "DeepSeek-V3's '~14 bits')", rounding="truncate",
                      c_entry="fused", result_bits=13, step=32, zero_exponent=-133,
                      nan=0x7FFFFFFF, source=_GOLDEN,
                      measured="the H200 probe (hw_probes/nvidia) and MMA-Sim 2.1.1's Hopper wgmma model")


def _mma(ptx_type: str, t: str, cd: str, bits: int, acc: Acc) -> MI:
    k = 8 * (32 // bits)
    mn = f"mma.sync.aligned.m16n8k{k}.row.col.{cd}.{ptx_type}.{ptx_type}.{cd}"
    cd_type = "i32" if cd == "s32" else cd
    return MI(mn, 16, 8, k, 1, t, t, cd_type,
              {op: ptx_m16n8(op, bits if op in "AB" else 32) for op in "ABCD"},
              source=SRC, cycles=None, builtin="asm volatile(\"" + mn + " ...\") (inline PTX)", accumulator=acc)


def instructions(f32_acc: dict) -> dict:
    """The five mma.sync records; ``f32_acc`` maps an input type to its f32 accumulator record."""
    recs = (_mma("s8", "i8", "s32", 8, INT_EXACT), _mma("s4", "i4", "s32", 4, INT_EXACT),
            _mma("e4m3", "fp8_e4m3", "f32", 8, f32_acc["fp8_e4m3"]),
            _mma("f16", "f16", "f32", 16, f32_acc["f16"]), _mma("bf16", "bf16", "f32", 16, f32_acc["bf16"]))
    return {i.mnemonic: i for i in recs}


def profile(name, family, aliases, smem_bytes, f32_acc, source) -> ArchProfile:
    # sgprs: NVIDIA has no scalar register file; 63 uniform registers (UR0..UR62, sm_75+) stand in.
    return ArchProfile(name=name, family=family, aliases=aliases, wave_size=WARP, lds_bytes=smem_bytes,
                       lds_banks=32, lds_bank_bytes=4, vgprs=255, agprs=0, sgprs=63,
                       instructions=instructions(f32_acc), c_layout="ptx", source=source, lds_rule="nvidia")


SM89 = profile("sm_89", "NVIDIA Ada", ("sm89", "ada", "rtx4090", "l40s"), 99 * 1024,
               {"fp8_e4m3": FP22_ADA, "f16": ADA_HMMA, "bf16": ADA_HMMA},
               "CUDA C++ Programming Guide, compute capability 8.9: warp 32, 255 registers per thread, "
               "99 KiB shared memory per block (opt-in), 32 banks of 4 bytes")
SM90 = profile("sm_90", "NVIDIA Hopper", ("sm90", "sm_90a", "hopper", "h100", "h200", "h800"), 227 * 1024,
               {"fp8_e4m3": SM90_MMA_E4M3, "f16": SM90_HMMA, "bf16": SM90_HMMA},
               "CUDA C++ Programming Guide, compute capability 9.0: warp 32, 255 registers per thread, "
               "227 KiB shared memory per block (opt-in), 32 banks of 4 bytes")
PROFILES = (SM89, SM90)
# the accumulator records a user can select (ArchProfile.with_accumulator)
ACCUMULATORS = {"exact": F32_EXACT, "fp22_ada": FP22_ADA, "ada_hmma": ADA_HMMA, "sm90_hmma": SM90_HMMA,
                "sm90_mma_e4m3": SM90_MMA_E4M3, "sm90_wgmma_e4m3": SM90_WGMMA_E4M3}
