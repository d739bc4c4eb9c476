"""Dead vector registers: whether a value an instruction writes is overwritten before anything
reads it.

A packed fp32 instruction (``v_pk_add_f32`` & co.) always computes both halves; clang uses one and
lets the other die, e.g. ``v_pk_add_f32 v[68:69], v[50:51], v[68:69] op_sel_hi:[1,0]`` followed by
``v_mov_b32 v69, v60``. The dead half adds whatever its op_sel picks — often one value to itself —
and no output ever sees it, so the back end must not take it for a sum the kernel made.

The scan is static and conservative: from the instruction after ``index``, along straight-line
code, the register is dead at the first instruction that writes it whole without reading it; it
is live at the first instruction that names it any other way, and at any branch, EXEC change or
the end of the code (another path, or lanes the overwrite skips, may read it).
"""
from __future__ import annotations

_ENDS = ("s_branch", "s_cbranch", "s_setpc", "s_swappc", "s_endpgm", "s_trap")
# Instructions whose first operand is not a register they write whole: they read it (compares
# write SGPRs, stores read their data, SDWA and DPP may keep bytes of the old value)
_NOT_PLAIN_WRITES = ("v_cmp", "v_cmpx", "v_readlane", "v_readfirstlane", "v_writelane", "global_store",
                     "buffer_store", "flat_store", "scratch_store", "ds_write", "ds_add", "ds_max", "ds_min",
                     # accumulators read their destination; these write part of it and keep the rest
                     "v_fmac", "v_mac", "v_fma_mixlo", "v_fma_mixhi", "v_cvt_pk_fp8", "v_cvt_pk_bf8", "v_cvt_sr_")


def _keeps_low_half(d) -> bool:
    """A VOP3 16-bit result written to the high half by op_sel's destination bit (the last of one
    bit per operand), the low half kept."""
    sel = d.ops.mods.get("op_sel", ())
    return len(sel) == len(d.ops.positional) and bool(sel[-1])


def _regs(o) -> set:
    if o.kind != "reg" or o.file not in "va":
        return set()
    return {(o.file, o.first + k) for k in range(o.count)}


def _uses(kernel, i: int):
    """(written whole, read) vector registers of instruction ``i`` (its operands as the kernel's
    Program decoded them); None for a branch or an end."""
    d = kernel.program.decoded[i]
    mn = d.ins.mnemonic
    if mn.startswith(_ENDS) or "exec" in mn or "exec" in d.ins.operands:
        return None                  # past an EXEC change the overwrite may not cover our lanes
    pos = d.ops.positional
    if not pos:
        return set(), set()
    writes_first = mn.startswith(("v_", "global_load", "buffer_load", "flat_load", "scratch_load", "ds_read")) \
        and not mn.startswith(_NOT_PLAIN_WRITES) and d.enc not in ("sdwa", "dpp") and "d16" not in mn \
        and not _keeps_low_half(d)
    if not writes_first:
        return set(), set().union(*(_regs(o) for o in pos))
    return _regs(pos[0]), set().union(set(), *(_regs(o) for o in pos[1:]))


class Liveness:
    """The dead-register answers of one kernel, each worked out once (``Kernel.liveness``)."""

    def __init__(self, kernel):
        self.kernel = kernel
        self._memo: dict = {}

    def dead_after(self, index: int, file: str, reg: int) -> bool:
        """Whether register ``file``/``reg`` written by instruction ``index`` is overwritten before
        any read on the straight-line code that follows (conservative: False when unsure)."""
        key = (index, file, reg)
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = _scan(self.kernel, index, (file, reg))
        return got


def _scan(kernel, index, r) -> bool:
    for i in range(index + 1, len(kernel.instructions)):
        uses = _uses(kernel, i)
        if uses is None:
            return False
        written, read = uses
        if r in read:
            return False
        if r in written:
            return True
    return False


__all__ = ["Liveness"]
