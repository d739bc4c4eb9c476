"""CDNA2 (MI200: gfx90a): every v_mfma_* shape, the _1k bf16 forms and the older bf16 forms
(two bf16 per register, K halved) included.

Layouts, cycle counts and modifier support: AMD Matrix Instruction Calculator 2ef9189, -a CDNA2
(replayed by tests/gfxsim/arch/test_calculator_golden.py); MI200 ISA guide s.7.
"""
from .cdna import BROADCAST as BC, SWIZZLE as SW, mfma
from .profile import ArchProfile

SRC = "AMD Matrix Instruction Calculator 2ef9189, -a CDNA2; AMD Instinct MI200 ISA guide s.7"

# mnemonic, M, N, K, blocks, A/B type, C/D type, cycles, modifiers (builtin: __builtin_amdgcn_ + name)
ROWS = (
    ("v_mfma_f32_32x32x1f32", 32, 32, 1, 2, "f32", "f32", 64, BC),
    ("v_mfma_f32_16x16x1f32", 16, 16, 1, 4, "f32", "f32", 32, BC),
    ("v_mfma_f32_4x4x1f32", 4, 4, 1, 16, "f32", "f32", 8, BC),
    ("v_mfma_f32_32x32x2f32", 32, 32, 2, 1, "f32", "f32", 64, SW),
    ("v_mfma_f32_16x16x4f32", 16, 16, 4, 1, "f32", "f32", 32, SW),
    ("v_mfma_f32_32x32x4f16", 32, 32, 4, 2, "f16", "f32", 64, BC),
    ("v_mfma_f32_16x16x4f16", 16, 16, 4, 4, "f16", "f32", 32, BC),
    ("v_mfma_f32_4x4x4f16", 4, 4, 4, 16, "f16", "f32", 8, BC),
    ("v_mfma_f32_32x32x8f16", 32, 32, 8, 1, "f16", "f32", 64, SW),
    ("v_mfma_f32_16x16x16f16", 16, 16, 16, 1, "f16", "f32", 32, SW),
    ("v_mfma_i32_32x32x4i8", 32, 32, 4, 2, "i8", "i32", 64, BC),
    ("v_mfma_i32_16x16x4i8", 16, 16, 4, 4, "i8", "i32", 32, BC),
    ("v_mfma_i32_4x4x4i8", 4, 4, 4, 16, "i8", "i32", 8, BC),
    ("v_mfma_i32_32x32x8i8", 32, 32, 8, 1, "i8", "i32", 64, SW),
    ("v_mfma_i32_16x16x16i8", 16, 16, 16, 1, "i8", "i32", 32, SW),
    ("v_mfma_f32_32x32x4bf16_1k", 32, 32, 4, 2, "bf16", "f32", 64, BC),
    ("v_mfma_f32_16x16x4bf16_1k", 16, 16, 4, 4, "bf16", "f32", 32, BC),
    ("v_mfma_f32_4x4x4bf16_1k", 4, 4, 4, 16, "bf16", "f32", 8, BC),
    ("v_mfma_f32_32x32x8bf16_1k", 32, 32, 8, 1, "bf16", "f32", 64, SW),
    ("v_mfma_f32_16x16x16bf16_1k", 16, 16, 16, 1, "bf16", "f32", 32, SW),
    ("v_mfma_f32_32x32x2bf16", 32, 32, 2, 2, "bf16", "f32", 64, BC),
    ("v_mfma_f32_16x16x2bf16", 16, 16, 2, 4, "bf16", "f32", 32, BC),
    ("v_mfma_f32_4x4x2bf16", 4, 4, 2, 16, "bf16", "f32", 8, BC),
    ("v_mfma_f32_32x32x4bf16", 32, 32, 4, 1, "bf16", "f32", 64, SW),
    ("v_mfma_f32_16x16x8bf16", 16, 16, 8, 1, "bf16", "f32", 32, SW),
    ("v_mfma_f64_16x16x4f64", 16, 16, 4, 1, "f64", "f64", 32, ()),
    ("v_mfma_f64_4x4x4f64", 4, 4, 4, 4, "f64", "f64", 16, ()),
)


def _record(row):
    mn, m, n, k, blocks, t, cdt, cycles, mods = row
    return mfma(mn, m, n, k, blocks, t, t, cdt, cycles, mods, f"__builtin_amdgcn_{mn[2:]}", SRC, "CDNA2")


INSTRUCTIONS = {i.mnemonic: i for i in map(_record, ROWS)}

PROFILE = ArchProfile(
    name="gfx90a", family="CDNA2", aliases=("mi200", "mi250", "mi250x", "mi210", "cdna2"),
    wave_size=64, lds_bytes=64 * 1024, lds_banks=32, lds_bank_bytes=4,
    vgprs=512, agprs=256, sgprs=102, instructions=INSTRUCTIONS, c_layout="cdna",
    source="MI200 ISA guide s.3",
)
