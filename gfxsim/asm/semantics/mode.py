"""The MODE hardware register (CDNA3 ISA, "MODE"): s_setreg_b32 / s_setreg_imm32_b32 /
s_getreg_b32 on ``hwreg(HW_REG_MODE, offset, size)``.

A wave starts with the MODE its kernel descriptor gives (FP_ROUND [3:0] from
.amdhsa_float_round_mode_*, FP_DENORM [7:4] from .amdhsa_float_denorm_mode_*, DX10_CLAMP [8],
IEEE [9], FP16_OVFL [23] from .amdhsa_fp16_overflow). The front end models the descriptor's
rounding, denormal, clamp and IEEE settings only (launch.py refuses others), so a write may change
FP16_OVFL alone; one that changes another field is an error naming it.

FP16_OVFL (bit 23) is what Triton sets before its fp8 downcasts: on gfx942, with it set, an
fp8/bf8 conversion of a finite value beyond the type's range gives the largest finite value of
its sign instead of NaN (cvt8.py; Inf and NaN still give NaN, the fnuz types having no infinity),
and a binary16 result that overflows is ±65504, a true infinity kept (vop16.ovfl16: the
conversions, the 16-bit, packed and mixed-precision VALU).
Per member of a batch; other hardware registers are refused.
"""
from __future__ import annotations

import numpy as np

from . import op
from .sop import s32

U64 = np.uint64
FP16_OVFL = 23
# field -> (offset, size) of the MODE bits the descriptor sets and the front end models as given
_FIELDS = {"FP_ROUND": (0, 4), "FP_DENORM": (4, 4), "DX10_CLAMP": (8, 1), "IEEE": (9, 1), "LOD_CLAMPED": (10, 1),
           "DEBUG_EN": (11, 1), "EXCP_EN": (12, 9), "FP16_OVFL": (23, 1)}
# register -> id of the gfx9 hwreg operand (LLVM AMDGPUAsmUtils), for the messages
HW_REGS = ("HW_REG_MODE", "HW_REG_STATUS", "HW_REG_TRAPSTS", "HW_REG_HW_ID", "HW_REG_GPR_ALLOC",
           "HW_REG_LDS_ALLOC", "HW_REG_IB_STS")


def initial(descriptor) -> int:
    """MODE at a wave's start, from the kernel descriptor's fields (LLVM's defaults where absent)."""
    d = descriptor

    def f(key, default):
        v = d.get(key, default)
        return int(v) if isinstance(v, (int, np.integer)) else default
    return (f(".amdhsa_float_round_mode_32", 0) | f(".amdhsa_float_round_mode_16_64", 0) << 2
            | f(".amdhsa_float_denorm_mode_32", 3) << 4 | f(".amdhsa_float_denorm_mode_16_64", 3) << 6
            | f(".amdhsa_dx10_clamp", 1) << 8 | f(".amdhsa_ieee_mode", 1) << 9
            | f(".amdhsa_fp16_overflow", 0) << FP16_OVFL)


def fp16_ovfl(st) -> np.ndarray:
    """bool [members]: MODE.FP16_OVFL of each member."""
    return ((st.mode >> U64(FP16_OVFL)) & U64(1)).astype(bool)


def _field(st, d, o):
    if o.kind != "hwreg":
        raise st.error(f"{d.mnemonic}: {o.text} is not a hwreg(...) operand")
    reg, off, size = o.value
    if reg != "HW_REG_MODE":
        raise st.error(f"{d.mnemonic}: {reg} is not modelled (only HW_REG_MODE is)")
    return off, ((1 << size) - 1) << off


def _set(st, d, value):
    off, mask = _field(st, d, d.ops[0])
    new = (st.mode & ~U64(mask)) | ((value << U64(off)) & U64(mask))
    changed = int(np.bitwise_or.reduce((new ^ st.mode0) & ~U64(1 << FP16_OVFL))) if new.size else 0
    if changed:
        names = [n for n, (o, s) in _FIELDS.items() if changed & (((1 << s) - 1) << o)] or [f"bits 0x{changed:x}"]
        raise st.error(f"{d.mnemonic} {d.ops.text}: changes MODE {', '.join(names)} from what the kernel "
                       "descriptor set; the asm front end models only FP16_OVFL changing")
    st.set_mode(new)


@op("s_setreg_imm32_b32")
def setreg_imm32(st, d):
    o = d.ops[1]
    if o.kind != "int":
        raise st.error(f"{d.mnemonic}: {o.text} is not an immediate")
    _set(st, d, U64(o.value & 0xFFFFFFFF))


@op("s_setreg_b32")
def setreg(st, d):
    # the ISA writes MODE from the SGPR's low bits: hwreg first, the SGPR second
    _set(st, d, s32(st, d.ops[1]))


@op("s_getreg_b32")
def getreg(st, d):
    off, mask = _field(st, d, d.ops[1])
    dst = d.ops[0]
    if dst.kind != "reg" or dst.file != "s" or dst.count != 1:
        raise st.error(f"{d.mnemonic}: destination {dst.text} must be one SGPR")
    st.swrite(dst.first, (st.mode & U64(mask)) >> U64(off))


__all__ = ["initial", "fp16_ovfl", "FP16_OVFL", "HW_REGS"]
