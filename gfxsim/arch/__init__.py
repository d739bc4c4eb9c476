"""Architecture profiles as data: look up an arch and its matrix instructions.

>>> from gfxsim.arch import get_arch, get_instruction
>>> insn = get_instruction("gfx942", "v_mfma_i32_16x16x32_i8")
>>> insn.operand("B").to_register(13, 2)      # B[13][2] -> (lane, reg, elem)
"""
from __future__ import annotations

from . import gfx90a, gfx936, gfx942, nvidia
from .dtypes import ELEM_TYPES, ElemType, elem_type
from .layout import Digit, OperandLayout
from .matrix_insn import OPERANDS, AccumulatorPrecision, MatrixInstruction
from .profile import ArchProfile
from ..errors import NotFoundError

ARCHS = {p.name: p for p in (gfx942.PROFILE, gfx90a.PROFILE, gfx936.PROFILE, *nvidia.PROFILES)}
_ALIASES = {a: p.name for p in ARCHS.values() for a in p.aliases}


def arch_names():
    return list(ARCHS)


def get_arch(name) -> ArchProfile:
    """Profile by target name or alias (gfx940/gfx941 -> gfx942, gfx928 -> gfx936, h200 -> sm_90)."""
    if isinstance(name, ArchProfile):
        return name
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in ARCHS:
        raise NotFoundError(f"unknown arch {name!r}; known: {', '.join(ARCHS)} "
                       f"(aliases: {', '.join(sorted(_ALIASES))})")
    return ARCHS[key]


def get_instruction(arch, mnemonic: str) -> MatrixInstruction:
    return get_arch(arch).instruction(mnemonic)


def register_arch(profile: ArchProfile) -> None:
    """Add a profile (e.g. an NVIDIA warp32 profile) at run time."""
    ARCHS[profile.name] = profile
    _ALIASES.update({a: profile.name for a in profile.aliases})


__all__ = ["ARCHS", "ArchProfile", "MatrixInstruction", "OperandLayout", "Digit", "AccumulatorPrecision",
           "ElemType", "ELEM_TYPES", "elem_type", "OPERANDS", "get_arch", "get_instruction", "arch_names",
           "register_arch"]
