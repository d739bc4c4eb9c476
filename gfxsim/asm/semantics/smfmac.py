"""Sparse matrix instructions (VOP3P-MAI): ``v_smfmac_* D, A, B, IDX`` executed by the back end's
record (Wave.smfmac): A compressed (two of every four K values), B dense, C read from D's own
registers, IDX one VGPR of compression fields. CBSZ/ABID choose the set of fields: CBSZ 0 takes set
ABID, any other CBSZ set 0 (AMD's matrix instruction calculator).
"""
from __future__ import annotations

import numpy as np

from . import no_mods


def smfmac(st, d):
    no_mods(st, d, ("cbsz", "abid"))
    if len(d.ops) != 4:
        raise st.error(f"{d.mnemonic} takes 4 operands, got {len(d.ops)}")
    dst, a, b, idx = d.ops.positional
    arch = st.w.arch
    if d.mnemonic not in arch.instructions:
        raise st.error(f"{d.mnemonic} has no record on {arch.name}")
    insn = st.w.insn(d.mnemonic)
    for o, what in ((a, "A"), (b, "B")):
        if o.kind != "reg" or o.file not in "va" or o.count != insn.regs(what):
            raise st.error(f"operand {what} {o.text}: {insn.regs(what)} VGPRs expected")
    if dst.kind != "reg" or dst.file not in "va" or dst.count != insn.regs("D"):
        raise st.error(f"destination {dst.text}: {insn.regs('D')} registers expected (C is read from them)")
    if idx.kind != "reg" or idx.file != "v" or idx.count != 1:
        raise st.error(f"compression index {idx.text}: one VGPR expected")
    cbsz, abid = d.ops.mods.get("cbsz", 0), d.ops.mods.get("abid", 0)
    if not 0 <= abid < insn.index_sets or not 0 <= cbsz <= 3:
        raise st.error(f"{d.mnemonic}: cbsz:{cbsz} abid:{abid} out of range (abid 0-{insn.index_sets - 1}, cbsz 0-3)")
    va = st.vread(a.file, a.first, a.count, insn.a_type)
    vb = st.vread(b.file, b.first, b.count, insn.b_type)
    vc = st.vread(dst.file, dst.first, dst.count, insn.cd_type)
    vi = st.vread(idx.file, idx.first, 1, "u32")
    out = st.w.smfmac(d.mnemonic, va, vb, vc, vi, 0 if cbsz else abid, label=f"line {d.ins.line}")
    st.vwrite_value(dst.file, dst.first, out)
    st.set_fresh(dst.file, dst.first, np.ones((dst.count, st.w.width), bool))      # semantics/dequant.py
