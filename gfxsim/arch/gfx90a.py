"""CDNA2 (MI200: gfx90a). Layouts: AMD Matrix Instruction Calculator 2ef9189, -a CDNA2."""
from .matrix_insn import MatrixInstruction as MI, ab_kgroups, cd_cdna
from .profile import ArchProfile

SRC = "AMD Matrix Instruction Calculator 2ef9189, -a CDNA2; AMD Instinct MI200 ISA guide s.7"


def _single(mn, m, n, k, at, cdt, cycles, builtin):
    bits = {"i8": 8, "f16": 16, "bf16": 16}[at]
    return MI(mn, m, n, k, 1, at, at, cdt,
              {"A": ab_kgroups("A", m, k, bits), "B": ab_kgroups("B", n, k, bits),
               "C": cd_cdna("C", m, n), "D": cd_cdna("D", m, n)},
              source=SRC, cycles=cycles, builtin=builtin)


INSTRUCTIONS = {i.mnemonic: i for i in (
    _single("v_mfma_i32_16x16x16i8", 16, 16, 16, "i8", "i32", 32, "__builtin_amdgcn_mfma_i32_16x16x16i8"),
    _single("v_mfma_i32_32x32x8i8", 32, 32, 8, "i8", "i32", 64, "__builtin_amdgcn_mfma_i32_32x32x8i8"),
    _single("v_mfma_f32_16x16x16f16", 16, 16, 16, "f16", "f32", 32, "__builtin_amdgcn_mfma_f32_16x16x16f16"),
    _single("v_mfma_f32_16x16x16bf16_1k", 16, 16, 16, "bf16", "f32", 32,
            "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k"),
)}

PROFILE = ArchProfile(
    name="gfx90a", family="CDNA2", aliases=("mi200", "mi250", "mi250x", "mi210", "cdna2"),
    wave_size=64, lds_bytes=64 * 1024, lds_banks=32, lds_bank_bytes=4,
    vgprs=512, agprs=256, sgprs=102, instructions=INSTRUCTIONS, c_layout="cdna",
    source="MI200 ISA guide s.3",
)
