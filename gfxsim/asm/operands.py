"""Operands of clang's gfx940/gfx942 assembly, as LLVM's AMDGPU printer writes them
(AMDGPUOperandSyntax / AMDGPUModifierSyntax): one ``Operand`` per positional operand and a
mapping of the trailing modifiers, e.g.

    v_max3_f32 v10, |v2|, 0, |v3|               -> v10, abs(v2), int 0, abs(v3)
    v_pk_mul_f32 v[6:7], v[4:5], v[6:7] op_sel_hi:[0,1]
    v_cvt_i32_f32_sdwa v10, v10 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:DWORD
    ds_read2_b64 v[4:7], v0 offset0:8 offset1:12
    global_load_dwordx2 v[44:45], v[34:35], off offset:512
    s_waitcnt vmcnt(0) lgkmcnt(0)

Integer constants -16..64 and the float constants 0.5, 1.0, 2.0, 4.0 (either sign) and 1/(2*pi)
are inline; any other number is a 32-bit literal. Anything the parser does not know is an
``AsmSyntaxError`` naming the kernel, the line and the form.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from collections.abc import Mapping

from ..errors import GfxSimError

# SGPR numbers of the named scalar registers on gfx9 (CDNA3 ISA, "SGPR" operand encoding)
# gfx9 encodings; FLAT_SCRATCH is s[102:103] (the private segment's base, launch.py)
SPECIAL_SGPR = {"vcc_lo": 106, "vcc_hi": 107, "m0": 124, "exec_lo": 126, "exec_hi": 127,
                "flat_scratch_lo": 102, "flat_scratch_hi": 103}
PAIRS = {"vcc": 106, "exec": 126, "flat_scratch": 102}     # 64-bit names: the pair starting there
# the flat apertures' 64-bit base addresses (read-only constants; held where the trap temporaries
# ttmp0..3 are, which a kernel never names): the launch sets them (launch.initial_state)
APERTURE_REGS = {"src_shared_base": 108, "src_private_base": 110}
INLINE_FLOATS = (0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0)
INV_2PI = "0.15915494"                             # how LLVM prints the 1/(2*pi) inline constant
SDWA_SELS = ("BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD")
SDWA_UNUSED = ("UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE")

_REG = re.compile(r"^([vsa])(?:(\d+)|\[(\d+):(\d+)\])$")
_INT = re.compile(r"^-?(?:0x[0-9a-fA-F]+|\d+)$")
_FLOAT = re.compile(r"^-?\d+\.\d*(?:[eE][-+]?\d+)?$")
_MOD_COLON = re.compile(r"^([a-z_]\w*):(.+)$")
# a hardware register field of s_getreg/s_setreg: hwreg(HW_REG_MODE[, offset, size])
_HWREG = re.compile(r"^hwreg\(\s*(HW_REG_\w+)\s*(?:,\s*(\d+)\s*,\s*(\d+)\s*)?\)$")
_MOD_PAREN = re.compile(r"^(vmcnt|expcnt|lgkmcnt|vscnt)\((\d+)\)$")
# a symbol's address as an operand: clang's calls take sym@rel32@lo+4 / sym@rel32@hi+12 (PC-relative)
_RELOC = re.compile(r"^([.A-Za-z_$][\w.$]*)@([\w@]+?)([+-]\d+)?$")
RELOCS = ("rel32@lo", "rel32@hi", "abs32@lo", "abs32@hi")
_FLAGS = ("glc", "slc", "nt", "sc0", "sc1", "clamp", "lds", "offen", "idxen", "addr64", "tfe", "dlc",
          "row_mirror", "row_half_mirror")
_INT_MODS = ("offset", "offset0", "offset1", "cbsz", "abid", "blgp", "mul", "div", "row_mask", "bank_mask",
             "row_shl", "row_shr", "row_ror", "wave_shl", "wave_shr", "wave_rol", "wave_ror", "row_bcast",
             "row_newbcast", "bound_ctrl")
_LIST_MODS = ("op_sel", "op_sel_hi", "neg_lo", "neg_hi")
_SEL_MODS = ("dst_sel", "src0_sel", "src1_sel")


class AsmSyntaxError(GfxSimError, ValueError):
    """An operand or modifier the asm front end does not understand, with where it was."""


@dataclass(frozen=True)
class Operand:
    kind: str                  # "reg" | "int" | "float" | "label" | "off" | "scc" | "reloc" | "hwreg"
    file: str = ""             # reg: "v" VGPR, "s" SGPR (vcc/exec/m0 are SGPR numbers), "a" AGPR
    first: int = 0             # reg: first register number
    count: int = 1             # reg: how many 32-bit registers
    value: object = None       # int / float constants (the number as written); label name;
                               # reloc: (symbol, relocation, addend); hwreg: (register, offset, size)
    text: str = ""             # as written
    neg: bool = False          # -src (float negate)
    abs: bool = False          # |src|
    sext: bool = False         # SDWA sext(src)
    dpp: bool = False          # src0 of a DPP instruction: read across lanes (semantics/dpp.py)

    @property
    def inline(self) -> bool:
        """An inline constant (no literal dword)."""
        if self.kind == "int":
            return -16 <= self.value <= 64
        return self.kind == "float"

    @property
    def is_literal(self) -> bool:
        return self.kind == "int" and not self.inline

    def __str__(self):
        return self.text


@dataclass(frozen=True)
class Operands:
    """The parsed operand text of one instruction."""
    positional: tuple
    mods: Mapping[str, object] = field(default_factory=dict)
    mod_tokens: tuple = ()         # the modifiers as written, in order

    @property
    def text(self) -> str:
        """The operand text rebuilt from what was parsed (clang's spacing): nothing was dropped."""
        return " ".join(filter(None, (", ".join(o.text for o in self.positional), *self.mod_tokens)))

    def __len__(self):
        return len(self.positional)

    def __getitem__(self, i) -> Operand:
        return self.positional[i]


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets and parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return [p for p in parts if p] if any(parts) else []


def _int(s: str) -> int:
    return int(s, 0) if not s.startswith("-") else -int(s[1:], 0)


def parse_operand(text: str) -> Operand:
    """One positional operand; raises AsmSyntaxError (without coordinates) if unknown."""
    t = text.strip()
    if _INT.match(t):
        v = _int(t)
        if not -(1 << 31) <= v < (1 << 32):
            raise AsmSyntaxError(f"constant {t} does not fit 32 bits")
        return Operand("int", value=v, text=t)
    if _FLOAT.match(t):
        if float(t) not in INLINE_FLOATS and t.lstrip("-") != INV_2PI:
            raise AsmSyntaxError(f"float constant {t} is not an inline constant")
        return Operand("float", value=float(t), text=t)
    neg = abs_ = sext = False
    body = t
    if body.startswith("-") and len(body) > 1:
        neg, body = True, body[1:]
    if body.startswith("|") and body.endswith("|") and len(body) > 2:
        abs_, body = True, body[1:-1]
    elif body.startswith("abs(") and body.endswith(")"):
        abs_, body = True, body[4:-1]
    elif body.startswith("neg(") and body.endswith(")"):
        neg, body = not neg, body[4:-1]
    if body.startswith("sext(") and body.endswith(")"):
        sext, body = True, body[5:-1]
    mods = dict(neg=neg, abs=abs_, sext=sext)
    if (neg or abs_ or sext) and (_INT.match(body) or _FLOAT.match(body)):
        base = parse_operand(body)
        return Operand(base.kind, value=base.value, text=t, **mods)
    m = _REG.match(body)
    if m:
        f = m.group(1)
        if m.group(2) is not None:
            first, count = int(m.group(2)), 1
        else:
            first, last = int(m.group(3)), int(m.group(4))
            if last < first:
                raise AsmSyntaxError(f"register range {body} runs backwards")
            count = last - first + 1
        return Operand("reg", f, first, count, text=t, **mods)
    if body in SPECIAL_SGPR:
        return Operand("reg", "s", SPECIAL_SGPR[body], 1, text=t, **mods)
    if body in PAIRS:
        return Operand("reg", "s", PAIRS[body], 2, text=t, **mods)
    if body in APERTURE_REGS:
        return Operand("reg", "s", APERTURE_REGS[body], 2, text=t, **mods)
    if body == "scc" and not (neg or abs_ or sext):
        return Operand("scc", text=t)
    if body == "off" and not (neg or abs_ or sext):
        return Operand("off", text=t)
    m = _RELOC.match(body)
    if m and not (neg or abs_ or sext):
        if m.group(2) not in RELOCS:
            raise AsmSyntaxError(f"operand {t} (relocation @{m.group(2)}: the asm front end resolves "
                                 f"{', '.join('@' + r for r in RELOCS)})")
        return Operand("reloc", value=(m.group(1), m.group(2), _int(m.group(3) or "0")), text=t)
    if re.match(r"^[.A-Za-z_$][\w.$]*$", body) and not (neg or abs_ or sext):
        if body.startswith(("ttmp", "src_", "flat_scratch", "xnack_mask", "lds_direct", "tba", "tma")):
            raise AsmSyntaxError(f"operand {t} (a special register the asm front end does not model)")
        return Operand("label", value=body, text=t)
    raise AsmSyntaxError(f"operand {t!r}")


def swizzle_offset(text: str) -> int:
    """The 16-bit offset of a ds_swizzle_b32 macro as LLVM prints it: swizzle(QUAD_PERM,a,b,c,d)
    (bit 15 set, lane selects in 2-bit fields), or a bit-mask mode (and_mask | or_mask << 5 |
    xor_mask << 10 over each 32 lanes) from swizzle(BITMASK_PERM,"01pi0") (bit 4 first: 0/1 force,
    p keep, i invert), swizzle(BROADCAST,size,lane), swizzle(SWAP,size), swizzle(REVERSE,size)."""
    m = re.match(r'^swizzle\((\w+)((?:,\s*(?:"[01pi]{5}"|\d+))*)\)$', text)
    if not m:
        raise AsmSyntaxError(f"swizzle macro {text!r}")
    kind, args = m.group(1), [a.strip() for a in m.group(2).split(",")[1:]]
    nums = [int(a) for a in args if a.isdigit()]
    if kind == "QUAD_PERM" and len(nums) == 4 and all(n < 4 for n in nums):
        return 0x8000 | sum(n << (2 * k) for k, n in enumerate(nums))
    if kind == "BITMASK_PERM" and len(args) == 1 and args[0].startswith('"'):
        and_m = or_m = xor_m = 0
        for k, c in enumerate(args[0][1:-1]):
            bit = 1 << (4 - k)
            and_m |= bit if c in "pi" else 0
            or_m |= bit if c == "1" else 0
            xor_m |= bit if c == "i" else 0
        return and_m | or_m << 5 | xor_m << 10
    size = nums[0] if nums else 0
    if size and size & (size - 1) == 0 and size <= 32:
        if kind == "SWAP" and len(nums) == 1 and size <= 16:
            return 0x1F | size << 10
        if kind == "REVERSE" and len(nums) == 1 and size >= 2:
            return 0x1F | (size - 1) << 10
        if kind == "BROADCAST" and len(nums) == 2 and size >= 2 and nums[1] < size:
            return (0x1F & ~(size - 1)) | nums[1] << 5
    raise AsmSyntaxError(f"swizzle macro {text!r}")


def _mod(token: str, mods: dict):
    m = _MOD_PAREN.match(token)
    if m:
        mods[m.group(1)] = int(m.group(2))
        return
    if token in _FLAGS:
        mods[token] = True
        return
    m = _MOD_COLON.match(token)
    if not m:
        raise AsmSyntaxError(f"modifier {token!r}")
    name, val = m.groups()
    if name == "offset" and val.startswith("swizzle("):
        mods[name] = swizzle_offset(val)
    elif name in _INT_MODS:
        if not _INT.match(val):
            raise AsmSyntaxError(f"modifier {token!r}: {name} takes an integer")
        mods[name] = _int(val)
    elif name in _LIST_MODS:
        if not re.match(r"^\[[01](,[01])*\]$", val):
            raise AsmSyntaxError(f"modifier {token!r}: {name} takes a list of 0/1")
        mods[name] = tuple(int(x) for x in val[1:-1].split(","))
    elif name == "quad_perm":
        if not re.match(r"^\[[0-3](,[0-3]){3}\]$", val):
            raise AsmSyntaxError(f"modifier {token!r}: quad_perm takes four lane numbers 0..3")
        mods[name] = tuple(int(x) for x in val[1:-1].split(","))
    elif name in _SEL_MODS:
        if val not in SDWA_SELS:
            raise AsmSyntaxError(f"modifier {token!r}: {name} must be one of {', '.join(SDWA_SELS)}")
        mods[name] = val
    elif name == "dst_unused":
        if val not in SDWA_UNUSED:
            raise AsmSyntaxError(f"modifier {token!r}: dst_unused must be one of {', '.join(SDWA_UNUSED)}")
        mods[name] = val
    else:
        raise AsmSyntaxError(f"modifier {token!r}")


def parse_operands(text: str) -> Operands:
    """The positional operands and trailing modifiers of an instruction's operand text."""
    pieces = _split_top(text)
    positional, mods, tokens = [], {}, []
    if pieces:
        hw = re.match(r"^(hwreg\([^)]*\))(.*)$", pieces[-1])
        last = [hw.group(1).replace(" ", ""), *hw.group(2).split()] if hw else pieces[-1].split()
        pieces = pieces[:-1]
        head = []
        for tok in last:            # the last piece: its operand (if any), then space-separated modifiers
            is_mod = bool(_MOD_PAREN.match(tok) or tok in _FLAGS or _MOD_COLON.match(tok))
            if is_mod or head:
                _mod(tok, mods)
                tokens.append(tok)
            else:
                head.append(tok)
        pieces += head
    for p in pieces:
        m = _HWREG.match(p)
        if m:
            off, size = int(m.group(2) or 0), int(m.group(3) or 32)
            if not (0 <= off < 32 and 1 <= size <= 32 - off):
                raise AsmSyntaxError(f"operand {p!r}: bits [{off}, {off + size}) are not in a 32-bit register")
            positional.append(Operand("hwreg", value=(m.group(1), off, size), text=p))
            continue
        if " " in p:
            raise AsmSyntaxError(f"operand {p!r} (modifiers may only follow the last operand)")
        positional.append(parse_operand(p))
    return Operands(tuple(positional), MappingProxyType(mods), tuple(tokens))


def parse_instruction_operands(ins, kernel: str = "") -> Operands:
    """``parse_operands`` of a gfxsim.asm Instruction; errors name kernel, line and form."""
    try:
        return parse_operands(ins.operands)
    except AsmSyntaxError as e:
        raise AsmSyntaxError(f"{kernel}: line {ins.line}: {ins.mnemonic} {ins.operands}: "
                             f"unsupported {e}") from None
