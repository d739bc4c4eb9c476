"""CDNA3 (MI300: gfx940/gfx941/gfx942).

Layouts and cycle counts: AMD Matrix Instruction Calculator (ROCm/amd_matrix_instruction_calculator
2ef9189, `-a CDNA3 -d/-R/-M`), cross-checked against the CDNA3 ISA reference guide, section 7.
"""
from .matrix_insn import MatrixInstruction as MI, ab_kgroups, blocks_4x4, cd_cdna
from .profile import ArchProfile

SRC = "AMD Matrix Instruction Calculator 2ef9189, -a CDNA3; AMD Instinct MI300 ISA guide s.7"


def _single(mn, m, n, k, at, bt, cdt, cycles, builtin):
    bits = {"i8": 8, "fp8": 8, "bf8": 8, "f16": 16, "bf16": 16}[at]
    return MI(mn, m, n, k, 1, at, bt, cdt,
              {"A": ab_kgroups("A", m, k, bits), "B": ab_kgroups("B", n, k, bits),
               "C": cd_cdna("C", m, n), "D": cd_cdna("D", m, n)},
              source=SRC, cycles=cycles, builtin=builtin)


INSTRUCTIONS = {i.mnemonic: i for i in (
    _single("v_mfma_i32_16x16x32_i8", 16, 16, 32, "i8", "i8", "i32", 16, "__builtin_amdgcn_mfma_i32_16x16x32_i8"),
    _single("v_mfma_i32_32x32x16_i8", 32, 32, 16, "i8", "i8", "i32", 32, "__builtin_amdgcn_mfma_i32_32x32x16_i8"),
    _single("v_mfma_f32_16x16x16_f16", 16, 16, 16, "f16", "f16", "f32", 16, "__builtin_amdgcn_mfma_f32_16x16x16f16"),
    _single("v_mfma_f32_16x16x16_bf16", 16, 16, 16, "bf16", "bf16", "f32", 16,
            "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k"),
    _single("v_mfma_f32_32x32x8_f16", 32, 32, 8, "f16", "f16", "f32", 32, "__builtin_amdgcn_mfma_f32_32x32x8f16"),
    _single("v_mfma_f32_16x16x32_fp8_fp8", 16, 16, 32, "fp8", "fp8", "f32", 16,
            "__builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8"),
    MI("v_mfma_f32_4x4x4_16b_f16", 4, 4, 4, 16, "f16", "f16", "f32",
       {op: blocks_4x4(op, 4, 16 if op in "AB" else 32) for op in "ABCD"},
       source=SRC, cycles=8, builtin="__builtin_amdgcn_mfma_f32_4x4x4f16",
       notes="16 blocks of 4x4; CBSZ/ABID broadcast of A and BLGP swizzle of B are not modelled"),
)}

PROFILE = ArchProfile(
    name="gfx942", family="CDNA3", aliases=("gfx940", "gfx941", "mi300", "mi300x", "cdna3"),
    wave_size=64, lds_bytes=64 * 1024, lds_banks=32, lds_bank_bytes=4,
    vgprs=512, agprs=256, sgprs=102, instructions=INSTRUCTIONS, c_layout="cdna",
    source="MI300 ISA guide s.3 (512 unified VGPRs, 102 SGPRs per wave, 64 KiB LDS in 32 banks)",
)
