"""Matrix instructions (VOP3P-MAI): ``v_mfma_* D, A, B, C`` executed by the back end's record of
the instruction for the launch's arch (Wave.mma: operand layouts, exact integer products with
overflow detection, the K-slot provenance every token map and scale check is built on).

A and B are read in the record's element type, C and D in its accumulator type; C may be the
inline constant 0. cbsz/abid/blgp (broadcast controls) are refused unless 0. On a gfx936
(Hygon) launch the gfx942 stand-in's ``v_mfma_*`` executes as the same-shape ``v_mmac_*``
record, so its D takes the jump layout.
"""
from __future__ import annotations

import numpy as np

from . import no_mods
from .smfmac import smfmac


def _record_name(st, mnemonic: str) -> str:
    arch = st.w.arch
    names = set(arch.instructions)
    if mnemonic in names:
        return mnemonic
    if mnemonic in arch.insn_aliases:           # gfx942's CDNA2 spellings (v_mfma_f32_32x32x1f32)
        return arch.insn_aliases[mnemonic]
    alt = mnemonic.replace("v_mfma_", "v_mmac_", 1)
    if alt in names:
        return alt
    raise st.error(f"{mnemonic} has no record on {arch.name}")


def mfma(st, d):
    if d.mnemonic.startswith("v_smfmac_"):          # sparse: a compression index in Src2 (smfmac.py)
        return smfmac(st, d)
    for k in ("cbsz", "abid", "blgp"):
        if d.ops.mods.get(k, 0):
            raise st.error(f"{d.mnemonic} with {k}:{d.ops.mods[k]} (operand broadcast) is not modelled")
    no_mods(st, d, ("cbsz", "abid", "blgp"))
    if len(d.ops) != 4:
        raise st.error(f"{d.mnemonic} takes 4 operands, got {len(d.ops)}")
    dst, a, b, c = d.ops.positional
    name = _record_name(st, d.mnemonic)
    insn = st.w.insn(name)
    for o, what in ((a, "A"), (b, "B")):
        if o.kind != "reg" or o.file not in "va" or o.count != insn.regs(what):
            raise st.error(f"operand {what} {o.text}: {insn.regs(what)} VGPRs expected")
    if dst.kind != "reg" or dst.file not in "va" or dst.count != insn.regs("D"):
        raise st.error(f"destination {dst.text}: {insn.regs('D')} registers expected")
    va = st.vread(a.file, a.first, a.count, insn.a_type)
    vb = st.vread(b.file, b.first, b.count, insn.b_type)
    if c.kind == "int" and c.value == 0:
        vc = None
    elif c.kind == "reg" and c.file in "va" and c.count == insn.regs("C"):
        vc = st.vread(c.file, c.first, c.count, insn.cd_type)
    else:
        raise st.error(f"operand C {c.text}: {insn.regs('C')} registers or the inline constant 0 expected")
    label = f"line {d.ins.line}"
    out = st.w.mma(name, va, vb, vc, label=label)
    st.vwrite_value(dst.file, dst.first, out)
    st.set_fresh(dst.file, dst.first, np.ones((dst.count, st.w.width), bool))      # semantics/dequant.py

