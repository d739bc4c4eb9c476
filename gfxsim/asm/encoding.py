"""Encoding families from the machine code itself: `llvm-mc --show-encoding` re-assembles a .s and
prints every instruction's bytes; the first dword's fixed bits name the family (CDNA3 ISA,
"Microcode formats"). The ground truth that parse.encoding_family's mnemonic rules are tested against.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .parse import AsmFileError

_ENC = re.compile(r"^\s*([a-z_][\w.]*)\b(.*?);\s*encoding:\s*\[([^\]]*)\]")


def family_from_encoding(words: bytes, mnemonic: str = "") -> str:
    """Family of one encoded instruction (little-endian bytes, first dword decides)."""
    w = int.from_bytes(words[:4], "little")
    top = lambda n: w >> (32 - n)                   # the n most significant bits
    if top(1) == 0:                                 # VOP1 0111111, VOPC 0111110, else VOP2
        vop = {0b0111111: "VOP1", 0b0111110: "VOPC"}.get(top(7), "VOP2")
        return {0xF9: "SDWA", 0xFA: "DPP"}.get(w & 0x1FF, vop)    # src0 = 0xF9/0xFA: an SDWA/DPP word follows
    if top(9) == 0b101111101:
        return "SOP1"
    if top(9) == 0b101111110:
        return "SOPC"
    if top(9) == 0b101111111:
        return "SOPP"
    if top(4) == 0b1011:
        return "SOPK"
    if top(2) == 0b10:
        return "SOP2"
    six = top(6)
    if six == 0b110000:
        return "SMEM"
    if six == 0b110100:
        if top(9) == 0b110100111:                   # VOP3P; MAI opcodes have op[6] (bit 22) set
            return "MFMA" if (w >> 22) & 1 else "VOP3P"
        return "VOP3"
    if six == 0b110110:
        return "DS"
    if six == 0b110111:
        return {0: "FLAT", 1: "SCRATCH", 2: "GLOBAL"}[(w >> 14) & 3]
    if six == 0b111000:
        return "MUBUF"
    if six == 0b111010:
        return "MTBUF"
    if six == 0b111100:
        return "MIMG"
    if six == 0b110001:
        return "EXP"
    raise AsmFileError(f"{mnemonic or 'instruction'}: first dword {w:#010x} matches no encoding family")


def dpp_word(words: bytes) -> dict:
    """The DPP dword that follows a VOP1/VOP2 word whose src0 is 0xFA (Vega / CDNA3 ISA, "DPP"):
    src0 VGPR [7:0], DPP_CTRL [16:8], BOUND_CTRL [19], src0 neg/abs [20]/[21], src1 neg/abs
    [22]/[23], BANK_MASK [27:24], ROW_MASK [31:28]."""
    if len(words) < 8 or int.from_bytes(words[:4], "little") & 0x1FF != 0xFA:
        raise AsmFileError("not a DPP instruction: its first dword's src0 is not 0xFA")
    w = int.from_bytes(words[4:8], "little")
    return {"src0": w & 0xFF, "dpp_ctrl": (w >> 8) & 0x1FF, "bound_ctrl": (w >> 19) & 1,
            "src0_neg": (w >> 20) & 1, "src0_abs": (w >> 21) & 1, "src1_neg": (w >> 22) & 1,
            "src1_abs": (w >> 23) & 1, "bank_mask": (w >> 24) & 0xF, "row_mask": (w >> 28) & 0xF}


def llvm_mc_encodings(asm: Path, mcpu: str, llvm_mc: Path) -> list[tuple[str, str, bytes]]:
    """(mnemonic, operand text, encoded bytes) of every instruction of `asm`, in order, as llvm-mc encodes it."""
    r = subprocess.run([str(llvm_mc), "-triple=amdgcn-amd-amdhsa", f"-mcpu={mcpu}", "--show-encoding", str(asm)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise AsmFileError(f"llvm-mc failed on {asm}:\n{r.stderr.strip()[:2000]}")
    out = []
    for line in r.stdout.splitlines():
        m = _ENC.match(line)
        if m:
            out.append((m.group(1), m.group(2).strip(), bytes(int(b, 16) for b in m.group(3).split(","))))
    return out


def llvm_mc_families(asm: Path, mcpu: str, llvm_mc: Path) -> list[tuple[str, str]]:
    """(mnemonic, family) of every instruction of `asm`, in order, as llvm-mc encodes it."""
    return [(mn, family_from_encoding(data, mn)) for mn, _, data in llvm_mc_encodings(asm, mcpu, llvm_mc)]
