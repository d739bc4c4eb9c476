"""Matrix instructions (VOP3P-MAI): ``v_mfma_* D, A, B, C`` executed by the back end's record of
the instruction for the launch's arch (Wave.mma: operand layouts, exact integer products with
overflow detection, the K-slot provenance every token map and scale check is built on).

A and B are read in the record's element type, C and D in its accumulator type; C may be the
inline constant 0. On a gfx936 (Hygon) launch the gfx942 stand-in's ``v_mfma_*`` executes as the
same-shape ``v_mmac_*`` record, so its D takes the jump layout.

The broadcast controls (CDNA2/CDNA3 ISA, "MFMA broadcast") permute the lanes the operands are read
from, before the layouts apply: with CBSZ > 0, lane l reads A from lane (l mod S) + S * ABID, where
S = 64 >> CBSZ (one block of S lanes feeds all; 1 << CBSZ may not exceed the instruction's blocks,
ABID < 1 << CBSZ); BLGP reads B from lane l (0), l mod 32 (1), l mod 32 + 32 (2), (l + 16) mod 64
(3), l mod 16 + 16 * (BLGP - 4) (4..7). The values move with their provenance (the back end's
bpermute, within each member of a batch), so the matrix record is the plain instruction's on the
permuted registers. f64 instructions use BLGP as negation bits and ignore CBSZ/ABID: refused
unless 0 here, as is any control on gfx936's v_mmac, which defines none. gfx942's fp8/bf8 forms
are separate mnemonics (fp8_fp8, fp8_bf8, ...); their CBSZ/ABID/BLGP keep this meaning (only
gfx950's f8f6f4 forms take CBSZ/BLGP as the operands' formats).
"""
from __future__ import annotations

import contextlib

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


def a_lanes(cbsz: int, abid: int, lanes: int = 64) -> np.ndarray:
    """The lane each lane reads A from under CBSZ/ABID."""
    s = lanes >> cbsz
    return np.arange(lanes) % s + s * abid


def b_lanes(blgp: int, lanes: int = 64) -> np.ndarray:
    """The lane each lane reads B from under BLGP."""
    l = np.arange(lanes)
    if blgp == 0:
        return l
    if blgp in (1, 2):
        return l % 32 + 32 * (blgp - 1)
    if blgp == 3:
        return (l + 16) % lanes
    return l % 16 + 16 * (blgp - 4)


def _broadcast(st, d, insn, name):
    """(A's source lanes, B's source lanes) of the instruction's CBSZ/ABID/BLGP (None: its own)."""
    cbsz, abid, blgp = (int(d.ops.mods.get(k, 0)) for k in ("cbsz", "abid", "blgp"))
    if not (cbsz or abid or blgp):
        return None, None
    if name.startswith("v_mmac") or "f64" in (insn.a_type, insn.b_type):
        raise st.error(f"{d.mnemonic}: cbsz/abid/blgp on {name} (f64 uses BLGP as negation; v_mmac has no "
                       "broadcast) is not modelled")
    if not 0 <= cbsz <= 4 or (1 << cbsz) > insn.blocks:
        raise st.error(f"{d.mnemonic}: cbsz:{cbsz} broadcasts to {1 << cbsz} blocks; the instruction has {insn.blocks}")
    if not 0 <= abid < (1 << cbsz):
        raise st.error(f"{d.mnemonic}: abid:{abid} names no block of lanes under cbsz:{cbsz} (0..{(1 << cbsz) - 1})")
    if not 0 <= blgp <= 7:
        raise st.error(f"{d.mnemonic}: blgp:{blgp} is 0..7")
    lanes = st.lanes
    return (a_lanes(cbsz, abid, lanes) if cbsz else None), (b_lanes(blgp, lanes) if blgp else None)


def _permute(st, v, src):
    """``v`` read from lane src[l] of each member: values, provenance and written bits moved, no event
    of its own (the matrix instruction's is the event) and no finding (the operand check is the mma's)."""
    w = st.w
    written, v.valid = v.valid, None
    w.machine.trace.muted += 1
    try:
        out = w.bpermute(v, src)
    finally:
        w.machine.trace.muted -= 1
    if written is not None:
        out.valid = written[:, w.member_starts + np.tile(src, st.members)]
    return out


_CHECKED: dict = {}         # (the instruction's text and line, arch name, lanes) -> (the arch, _checked's answer)


def _checked(st, d):
    """The instruction's checks, once per decoded instruction, arch and wave size (each depends on
    nothing else): (record name, record, label, A's and B's broadcast source lanes, whether its C
    form lets it take _words)."""
    arch = st.w.arch
    i = d.ins
    key = (i.mnemonic, i.operands, i.line, i.source, arch.name, st.lanes)    # what the checks read
    got = _CHECKED.get(key)
    if got is not None and got[0] is arch:
        return got[1]
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
    pa, pb = _broadcast(st, d, insn, name)
    label = f"line {d.ins.line}" + (f" <- {d.ins.source}" if d.ins.source else "")     # the .s line, then the source's
    words = pa is None and pb is None and ((c.kind == "int" and c.value == 0) or
                                           (c.kind == "reg" and c.file in "va" and c.count == insn.regs("C")))
    if len(_CHECKED) > 4096:            # a long process's many programs: keep it small
        _CHECKED.clear()
    _CHECKED[key] = (arch, (name, insn, label, pa, pb, words))
    return name, insn, label, pa, pb, words


def mfma(st, d):
    if d.mnemonic.startswith("v_smfmac_"):          # sparse: a compression index in Src2 (smfmac.py)
        return smfmac(st, d)
    name, insn, label, pa, pb, words = _checked(st, d)
    dst, a, b, c = d.ops.positional
    if words and _words(st, name, dst, a, b, c, label):
        return
    va = st.vread(a.file, a.first, a.count, insn.a_type)
    vb = st.vread(b.file, b.first, b.count, insn.b_type)
    if pa is not None:
        va = _permute(st, va, pa)
    if pb is not None:
        vb = _permute(st, vb, pb)
    if c.kind == "int" and c.value == 0:
        vc = None
    elif c.kind == "reg" and c.file in "va" and c.count == insn.regs("C"):
        vc = st.vread(c.file, c.first, c.count, insn.cd_type)
    else:
        raise st.error(f"operand C {c.text}: {insn.regs('C')} registers or the inline constant 0 expected")
    # members sitting this instruction out (st.act) hold other data, perhaps NaN bit patterns: their
    # columns are computed and dropped, and say nothing
    with np.errstate(invalid="ignore") if st.act is not None else contextlib.nullcontext():
        out = st.w.mma(name, va, vb, vc, label=label)
    if st.lean and out.valid is None and out.val.dtype.itemsize == 4:     # every byte written, no provenance
        st.vwrite(dst.file, dst.first, out.val.view(np.uint32))
    else:
        st.vwrite_value(dst.file, dst.first, out)
    st.set_fresh(dst.file, dst.first, np.ones((dst.count, st.w.width), bool))      # semantics/dequant.py


def _words(st, name, dst, a, b, c, label) -> bool:
    """The instruction from its operands' words (Wave.mma_words) where no byte carries provenance
    (``st.lean``), the whole wave executes it and every operand byte is written (else vread's
    values and their uninitialized-read finding): D's words written as vwrite writes a result,
    marked fresh. False where it does not apply (nothing done)."""
    if not st.lean or st.act is not None or st.any_unknown or st.taint_v is not None or not st.w.exec_full:
        return False
    zero = c.kind == "int"
    if not (st.vall_written(a.file, a.first, a.count) and st.vall_written(b.file, b.first, b.count)
            and (zero or st.vall_written(c.file, c.first, c.count))):
        return False
    out = st.w.mma_words(name, st.vwords(a.file, a.first, a.count), st.vwords(b.file, b.first, b.count),
                         None if zero else st.vwords(c.file, c.first, c.count), label=label)
    if out is None:
        return False
    st.vwrite(dst.file, dst.first, out)
    st.fresh[dst.file][dst.first:dst.first + dst.count] = True      # set_fresh under a full EXEC
    return True

