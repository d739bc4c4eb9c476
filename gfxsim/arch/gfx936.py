"""Hygon DCU gfx936 (BW1000/BW500SM; gfx928 K100 shares the MMAC layouts).

A and B are laid out as on CDNA3 (kAMLane=kBNLane=16, kABKLane=4, kABKPerLane=8). C and D use
the "jump" layout D[m][n] at lane m + 16*(n%4), reg n//4 (kCMLane=16, kCNLane=4, kCN0PerLane=4).
Source: HYGON-AI/composable_kernel-das include/ck_tile/ops/gemm/warp/warp_gemm_attribute_mmac{,_impl}.hpp
(678d1df, 037f7a0), cross-checked by three independent public gfx928/gfx936 kernels
(vLLM-style paged attention ports for gfx928/gfx936). No public cycle counts.
"""
from dataclasses import replace

from .accumulators import CDNA3_F16, HYGON_NOTE
from .matrix_insn import MatrixInstruction as MI, ab_kgroups, cd_jump
from .profile import ArchProfile

SRC = ("HYGON-AI/composable_kernel-das warp_gemm_attribute_mmac_impl.hpp 678d1df "
       "(WarpGemmAttributeMmacImpl*: kCMLane=16, kCNLane=4, kCN0PerLane=4 'jump layout')")


def _mmac(mn, k, t, cdt, builtin):
    bits = {"i8": 8, "f16": 16, "bf16": 16}[t]
    acc = {} if t == "i8" else {"accumulator": replace(CDNA3_F16, note=HYGON_NOTE, measured="")}
    return MI(mn, 16, 16, k, 1, t, t, cdt,
              {"A": ab_kgroups("A", 16, k, bits), "B": ab_kgroups("B", 16, k, bits),
               "C": cd_jump("C"), "D": cd_jump("D")},
              source=SRC, cycles=None, builtin=builtin, **acc)


INSTRUCTIONS = {i.mnemonic: i for i in (
    _mmac("v_mmac_i32_16x16x32_i8", 32, "i8", "i32", "__builtin_amdgcn_mmac_i32_16x16x32i8"),
    _mmac("v_mmac_f32_16x16x16_f16", 16, "f16", "f32", "__builtin_amdgcn_mmac_f32_16x16x16f16"),
    _mmac("v_mmac_f32_16x16x16_bf16", 16, "bf16", "f32", "__builtin_amdgcn_mmac_f32_16x16x16bf16"),
)}

PROFILE = ArchProfile(
    name="gfx936", family="Hygon DCU", aliases=("gfx928", "bw1000", "bw500sm", "k100"),
    wave_size=64, lds_bytes=64 * 1024, lds_banks=32, lds_bank_bytes=4,
    vgprs=512, agprs=0, sgprs=102, instructions=INSTRUCTIONS, c_layout="jump",
    source="gfx936 LDS 64KB/CU and wave64 (public gfx936 kernels); "
           "512 VGPRs as built for gfx928 (gfx936 builds may enable 768 with -support-768-vgprs)",
)
