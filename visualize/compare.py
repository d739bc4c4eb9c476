"""Two instructions' layouts of one operand side by side, the cells they place differently outlined.

The headline case is the accumulator: gfx936's "jump" C/D layout (D[m][n] at lane m + 16*(n%4),
reg n/4) against CDNA3's (lane n + 16*(m/4), reg m%4) -- 252 of 256 elements move.

>>> from visualize import plot_compare
>>> fig = plot_compare("gfx936", "v_mmac_i32_16x16x32_i8", "gfx942", "v_mfma_i32_16x16x32_i8", "D")
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from . import grid, style
from .fragments import cell_note, panels_for, resolve
from gfxsim.errors import ArgumentError


def differing(insn1, insn2, operand: str, view: str = "matrix") -> np.ndarray:
    """Boolean mask of the cells two instructions lay out differently.

    matrix view: ``[blocks, rows, cols]``, True where the element sits in another (lane, reg, elem);
    register view: ``[regs, elems, lanes]``, True where the slot holds another element."""
    if (insn1.M, insn1.N, insn1.K, insn1.blocks) != (insn2.M, insn2.N, insn2.K, insn2.blocks):
        raise ArgumentError(f"cannot compare {insn1.mnemonic} ({insn1.M}x{insn1.N}x{insn1.K}, {insn1.blocks} blocks) "
                         f"with {insn2.mnemonic} ({insn2.M}x{insn2.N}x{insn2.K}, {insn2.blocks} blocks): shapes differ")
    a, b = insn1.operand(operand), insn2.operand(operand)
    if view == "matrix":
        return np.any(a.slot_of() != b.slot_of(), axis=0)
    if (a.n_regs, a.n_elems) != (b.n_regs, b.n_elems):
        raise ArgumentError(f"operand {operand}: {insn1.mnemonic} uses {a.n_regs} VGPRs of {a.n_elems} elements, "
                         f"{insn2.mnemonic} {b.n_regs} of {b.n_elems}; compare them in the matrix view")
    return np.any(a.matrix_of() != b.matrix_of(), axis=0)


def plot_compare(arch1, instruction1, arch2, instruction2, operand: str = "D", view: str = "matrix") -> Figure:
    """Side-by-side ownership of ``operand`` under two instructions; differing cells outlined on both."""
    (p1, i1), (p2, i2) = resolve(arch1, instruction1), resolve(arch2, instruction2)
    op = i1.operand(operand).operand
    mask = differing(i1, i2, op, view)
    sides = [panels_for(p, i, op, view, outline=mask) for p, i in ((p1, i1), (p2, i2))]
    size = grid.sizing(sides[0], also=sides[1])

    n, total = int(mask.sum()), mask.size
    unit = "elements" if view == "matrix" else "register slices"
    moved = ("held in another lane or VGPR" if view == "matrix" else "holding another element")
    verdict = f"{n} of {total} {unit} {moved} (outlined)" if n else f"all {total} {unit} identical"
    title = (f"Operand {op}: {p1.name} {i1.mnemonic}  vs  {p2.name} {i2.mnemonic}\n{verdict}")
    extra = [Patch(facecolor="white", edgecolor=style.DIFF_EDGE, linewidth=style.DIFF_LINEWIDTH,
                   label="outlined: placed differently by the two (plain: same lane and VGPR)")] if n else []
    handles = grid.legend_handles(np.concatenate([q.groups.ravel() for s in sides for q in s]), extra)
    fig = grid.figure(2 * size.width + 0.3, size.height + 0.3, title, handles, cell_note(i1, op, view))
    for sub, panels, (p, i) in zip(fig.subfigures(1, 2, wspace=0.03), sides, ((p1, i1), (p2, i2))):
        sub.suptitle(f"{p.name} ({p.family})  {i.mnemonic}", fontsize=style.LABEL_SIZE + 1, fontweight="bold")
        grid.draw(sub, panels, size)
    return fig
