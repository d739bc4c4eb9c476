"""CDNA3 (MI300: gfx940/gfx941/gfx942): every dense v_mfma_* shape.

Layouts, cycle counts and modifier support: AMD Matrix Instruction Calculator
(ROCm/amd_matrix_instruction_calculator 2ef9189, `-a CDNA3 -d/-M`), replayed for every lane,
register and element by tests/gfxsim/arch/test_calculator_golden.py; cross-checked against the
CDNA3 ISA reference guide, section 7. The sparse v_smfmac_* (4:2 structured A, compressed, with a
compression index in Src2) too.
"""
from .cdna import BROADCAST as BC, SWIZZLE as SW, mfma, smfmac
from .profile import ArchProfile

SRC = "AMD Matrix Instruction Calculator 2ef9189, -a CDNA3; AMD Instinct MI300 ISA guide s.7"
XF32 = ("xf32: A and B are fp32 registers the unit reads as XF32 (1 sign, 8 exponent, 10 mantissa bits), "
        "modelled as cutting the 13 low mantissa bits (toward zero, as Tensile's XFloat32 host reference "
        "that ROCm's xf32 GEMMs are validated against does)")

# mnemonic, M, N, K, blocks, A, B, C/D type, cycles, modifiers, compiler builtin (__builtin_amdgcn_*)
ROWS = (
    ("v_mfma_f32_32x32x1_2b_f32", 32, 32, 1, 2, "f32", "f32", "f32", 64, BC, "mfma_f32_32x32x1f32"),
    ("v_mfma_f32_16x16x1_4b_f32", 16, 16, 1, 4, "f32", "f32", "f32", 32, BC, "mfma_f32_16x16x1f32"),
    ("v_mfma_f32_4x4x1_16b_f32", 4, 4, 1, 16, "f32", "f32", "f32", 8, BC, "mfma_f32_4x4x1f32"),
    ("v_mfma_f32_32x32x2_f32", 32, 32, 2, 1, "f32", "f32", "f32", 64, SW, "mfma_f32_32x32x2f32"),
    ("v_mfma_f32_16x16x4_f32", 16, 16, 4, 1, "f32", "f32", "f32", 32, SW, "mfma_f32_16x16x4f32"),
    ("v_mfma_f32_32x32x4_xf32", 32, 32, 4, 1, "xf32", "xf32", "f32", 32, (), "mfma_f32_32x32x4_xf32"),
    ("v_mfma_f32_16x16x8_xf32", 16, 16, 8, 1, "xf32", "xf32", "f32", 16, (), "mfma_f32_16x16x8_xf32"),
    ("v_mfma_f32_32x32x4_2b_f16", 32, 32, 4, 2, "f16", "f16", "f32", 64, BC, "mfma_f32_32x32x4f16"),
    ("v_mfma_f32_16x16x4_4b_f16", 16, 16, 4, 4, "f16", "f16", "f32", 32, BC, "mfma_f32_16x16x4f16"),
    ("v_mfma_f32_4x4x4_16b_f16", 4, 4, 4, 16, "f16", "f16", "f32", 8, BC, "mfma_f32_4x4x4f16"),
    ("v_mfma_f32_32x32x8_f16", 32, 32, 8, 1, "f16", "f16", "f32", 32, (), "mfma_f32_32x32x8f16"),
    ("v_mfma_f32_16x16x16_f16", 16, 16, 16, 1, "f16", "f16", "f32", 16, (), "mfma_f32_16x16x16f16"),
    ("v_mfma_f32_32x32x4_2b_bf16", 32, 32, 4, 2, "bf16", "bf16", "f32", 64, BC, "mfma_f32_32x32x4bf16_1k"),
    ("v_mfma_f32_16x16x4_4b_bf16", 16, 16, 4, 4, "bf16", "bf16", "f32", 32, BC, "mfma_f32_16x16x4bf16_1k"),
    ("v_mfma_f32_4x4x4_16b_bf16", 4, 4, 4, 16, "bf16", "bf16", "f32", 8, BC, "mfma_f32_4x4x4bf16_1k"),
    ("v_mfma_f32_32x32x8_bf16", 32, 32, 8, 1, "bf16", "bf16", "f32", 32, (), "mfma_f32_32x32x8bf16_1k"),
    ("v_mfma_f32_16x16x16_bf16", 16, 16, 16, 1, "bf16", "bf16", "f32", 16, (), "mfma_f32_16x16x16bf16_1k"),
    ("v_mfma_i32_32x32x4_2b_i8", 32, 32, 4, 2, "i8", "i8", "i32", 64, BC, "mfma_i32_32x32x4i8"),
    ("v_mfma_i32_16x16x4_4b_i8", 16, 16, 4, 4, "i8", "i8", "i32", 32, BC, "mfma_i32_16x16x4i8"),
    ("v_mfma_i32_4x4x4_16b_i8", 4, 4, 4, 16, "i8", "i8", "i32", 8, BC, "mfma_i32_4x4x4i8"),
    ("v_mfma_i32_32x32x16_i8", 32, 32, 16, 1, "i8", "i8", "i32", 32, (), "mfma_i32_32x32x16_i8"),
    ("v_mfma_i32_16x16x32_i8", 16, 16, 32, 1, "i8", "i8", "i32", 16, (), "mfma_i32_16x16x32_i8"),
    ("v_mfma_f64_16x16x4_f64", 16, 16, 4, 1, "f64", "f64", "f64", 32, SW, "mfma_f64_16x16x4f64"),
    ("v_mfma_f64_4x4x4_4b_f64", 4, 4, 4, 4, "f64", "f64", "f64", 16, SW, "mfma_f64_4x4x4f64"),
    *((f"v_mfma_f32_{m}x{m}x{k}_{a}_{b}", m, m, k, 1, a, b, "f32", cyc, (), f"mfma_f32_{m}x{m}x{k}_{a}_{b}")
      for m, k, cyc in ((16, 32, 16), (32, 16, 32)) for a in ("fp8", "bf8") for b in ("fp8", "bf8")),
)


# mnemonic, M, N, K, A, B, C/D type, cycles (builtin: __builtin_amdgcn_ + name)
SPARSE_ROWS = (
    ("v_smfmac_f32_16x16x32_f16", 16, 16, 32, "f16", "f16", "f32", 16),
    ("v_smfmac_f32_32x32x16_f16", 32, 32, 16, "f16", "f16", "f32", 32),
    ("v_smfmac_f32_16x16x32_bf16", 16, 16, 32, "bf16", "bf16", "f32", 16),
    ("v_smfmac_f32_32x32x16_bf16", 32, 32, 16, "bf16", "bf16", "f32", 32),
    ("v_smfmac_i32_16x16x64_i8", 16, 16, 64, "i8", "i8", "i32", 16),
    ("v_smfmac_i32_32x32x32_i8", 32, 32, 32, "i8", "i8", "i32", 32),
    *((f"v_smfmac_f32_{m}x{m}x{k}_{a}_{b}", m, m, k, a, b, "f32", cyc)
      for m, k, cyc in ((16, 64, 16), (32, 32, 32)) for a in ("fp8", "bf8") for b in ("fp8", "bf8")),
)


def _record(row):
    mn, m, n, k, blocks, at, bt, cdt, cycles, mods, builtin = row
    return mfma(mn, m, n, k, blocks, at, bt, cdt, cycles, mods, f"__builtin_amdgcn_{builtin}", SRC, "CDNA3",
                notes=XF32 if at == "xf32" else "")


INSTRUCTIONS = {i.mnemonic: i for i in (*map(_record, ROWS),
                                         *(smfmac(*r, f"__builtin_amdgcn_{r[0][2:]}", SRC) for r in SPARSE_ROWS))}
# The assembler also takes the CDNA2 spellings, which the builtins keep (v_mfma_f32_32x32x1f32).
ALIASES = {"v_" + i.builtin.removeprefix("__builtin_amdgcn_"): m for m, i in INSTRUCTIONS.items()
           if i.builtin != "__builtin_amdgcn_" + m[2:]}

PROFILE = ArchProfile(
    name="gfx942", family="CDNA3", aliases=("gfx940", "gfx941", "mi300", "mi300x", "cdna3"),
    wave_size=64, lds_bytes=64 * 1024, lds_banks=32, lds_bank_bytes=4,
    vgprs=512, agprs=256, sgprs=102, instructions=INSTRUCTIONS, c_layout="cdna", insn_aliases=ALIASES,
    cvt8_encodings={"fp8": "e4m3fnuz", "bf8": "e5m2fnuz"},      # CDNA3: the NaN-only-zero encodings
    source="MI300 ISA guide s.3 (512 unified VGPRs, 102 SGPRs per wave, 64 KiB LDS in 32 banks)",
)
