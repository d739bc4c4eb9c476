"""Architecture profiles: wave size, LDS geometry, register files, the matrix instructions."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Mapping

from .matrix_insn import MatrixInstruction
from ..errors import ArgumentError, NotFoundError


@dataclass(frozen=True)
class ArchProfile:
    name: str                      # canonical target name, e.g. "gfx942"
    family: str                    # "CDNA3", "CDNA2", "Hygon DCU"
    aliases: tuple[str, ...]       # other target names served by this profile
    wave_size: int                 # lanes per wave (64 on gfx9; 32 for NVIDIA warp profiles)
    lds_bytes: int                 # LDS per workgroup
    lds_banks: int
    lds_bank_bytes: int
    vgprs: int                     # VGPRs per lane addressable by one wave (arch + acc where unified)
    agprs: int                     # AccVGPRs per lane (0 where there are none)
    sgprs: int                     # SGPRs addressable by one wave
    instructions: Mapping[str, MatrixInstruction]
    c_layout: str                  # "cdna", "jump" or "ptx": which accumulator layout family the arch uses
    source: str
    lds_rule: str = "gfx9"         # bank-conflict phases: "gfx9" (AMD) or "nvidia" (banks.phases)
    insn_aliases: Mapping[str, str] = field(default_factory=dict)   # other spellings the assembler takes
    # the byte encoding the arch's 8-bit float conversions (v_cvt_*_fp8, v_cvt_*_bf8) read and write
    cvt8_encodings: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        for m, insn in self.instructions.items():
            if m != insn.mnemonic:
                raise ArgumentError(f"{self.name}: instruction key {m!r} != mnemonic {insn.mnemonic!r}")
            if insn.wave_size != self.wave_size:
                raise ArgumentError(f"{self.name}: {m} is laid out for wave{insn.wave_size}, arch is wave{self.wave_size}")
        for alias, m in self.insn_aliases.items():
            if m not in self.instructions or alias in self.instructions:
                raise ArgumentError(f"{self.name}: instruction alias {alias!r} -> {m!r} names no record or hides one")

    def with_accumulator(self, mnemonic: str, accumulator, name: str | None = None) -> ArchProfile:
        """This profile with one instruction's accumulator record replaced (e.g. sm_89's FP8 mma
        with the FP22 record, or exact fp32 to see what the reduced accumulator costs)."""
        insn = self.instruction(mnemonic)
        table = dict(self.instructions)
        table[insn.mnemonic] = replace(insn, accumulator=accumulator)
        return replace(self, name=name or self.name, instructions=table, aliases=() if name else self.aliases)

    def instruction(self, mnemonic: str) -> MatrixInstruction:
        key = mnemonic.strip().lower()
        key = self.insn_aliases.get(key, key)
        if key in self.instructions:
            return self.instructions[key]
        raise NotFoundError(f"{self.name} has no matrix instruction {mnemonic!r}; "
                       f"it has: {', '.join(self.instructions)}")

    def __repr__(self):
        return f"ArchProfile({self.name}, {self.family}, wave{self.wave_size}, {len(self.instructions)} matrix insns)"
