"""Fragment ownership of one matrix-instruction operand, drawn from gfxsim's instruction record.

Two views of the same map (lane, reg, elem) <-> (row, col, block):
- matrix view: the operand's matrix, each cell labelled with the lane and VGPR slice holding it;
- register view: lanes x VGPR slices, each cell labelled with the matrix element held there.
Cells are filled by lane group (rowid = lane // 16) in both views, so the two read together.

>>> from visualize import plot_layout
>>> fig = plot_layout("gfx936", "v_mmac_i32_16x16x32_i8", "D", view="matrix")
"""
from __future__ import annotations


import numpy as np
from matplotlib.figure import Figure

from gfxsim.arch import get_arch
from gfxsim.arch.matrix_insn import OPERAND_FIELDS

from . import grid, style
from gfxsim.errors import ArgumentError

VIEWS = ("matrix", "register")
_ROLE = {"A": "M×K", "B": "K×N", "C": "accumulator in, M×N", "D": "result, M×N"}
_AXIS_WORDS = {"i": "row i (M)", "j": "column j (N)", "k": "k (K, the summed dimension)"}
_AXIS_SHORT = {"i": "row i", "j": "column j", "k": "k"}


def resolve(arch, instruction):
    """(ArchProfile, MatrixInstruction) from names; errors name what is unknown."""
    profile = get_arch(arch)
    return profile, profile.instruction(instruction)


# Sub-dword slices take the SDWA select names: BYTE_0..3 -> .b0...b3, WORD_0..1 -> .w0, .w1.
_SLICE = {4: "n", 8: "b", 16: "w"}          # nibble, byte, word (half) of a VGPR


def vgpr_slice(reg: int, elem: int, bits: int) -> str:
    """A VGPR slice relative to the operand's first VGPR: ``v1`` (32-bit), ``v1.b2`` (byte 2), ``v1.n5`` (nibble 5),
    ``v[3:2]`` (a 64-bit element: ``reg`` counts register pairs)."""
    if bits == 64:
        return f"v[{2 * reg + 1}:{2 * reg}]"
    if bits == 32:
        return f"v{reg}"
    return f"v{reg}.{_SLICE[bits]}{elem}"


def slice_bits(elem: int, bits: int) -> str:
    lo = elem * bits
    return f"[{lo + bits - 1}:{lo}]"


def matrix_label(lane: int, reg: int, elem: int, bits: int) -> str:
    return f"L{lane}\n{vgpr_slice(reg, elem, bits)}"


def register_label(row: int, col: int, block: int, blocks: int) -> str:
    return f"{row},{col}" + (f"\nblk{block}" if blocks > 1 else "")


def block_lanes(lay, block: int) -> str:
    t = lay.table()
    lanes = np.unique(t["lane"][t["block"] == block])
    return f"lanes {lanes.min()}-{lanes.max()}" if lanes.size == lanes.max() - lanes.min() + 1 else \
        f"{lanes.size} lanes"


def matrix_panels(profile, insn, op: str, outline: np.ndarray | None = None) -> list[grid.Panel]:
    """One panel per block; ``outline[block, row, col]`` marks cells for a heavy border."""
    lay = insn.operand(op)
    slot = lay.slot_of()                                   # [3, blocks, rows, cols]
    rname, cname = lay.axis_names()
    panels = []
    for b in range(lay.blocks):
        lane, reg, elem = slot[:, b]
        labels = np.vectorize(lambda l, r, e: matrix_label(l, r, e, lay.elem_bits), otypes=[object])(lane, reg, elem)
        title = f"block {b} · {block_lanes(lay, b)}" if lay.blocks > 1 else ""
        panels.append(grid.Panel(
            labels=labels, groups=lane // style.LANES_PER_GROUP, title=title,
            gid=f"{profile.name}:{insn.mnemonic}:{op}:matrix:block={b}",
            xticks=[str(c) for c in range(lay.cols)], yticks=[str(r) for r in range(lay.rows)],
            xlabel=(_AXIS_WORDS if lay.blocks == 1 else _AXIS_SHORT)[cname],
            ylabel=(_AXIS_WORDS if lay.blocks == 1 else _AXIS_SHORT)[rname],
            outline=None if outline is None else outline[b]))
    return panels


def register_panels(profile, insn, op: str, outline: np.ndarray | None = None) -> list[grid.Panel]:
    """One panel per lane group: 16 lanes x (VGPR, slice); ``outline[reg, elem, lane]`` marks cells."""
    lay = insn.operand(op)
    where = lay.matrix_of()                                # [3, regs, elems, lanes]
    slots = [(r, e) for r in range(lay.reg_slots) for e in range(lay.n_elems)]
    xticks = [vgpr_slice(r, e, lay.elem_bits) for r, e in slots]
    panels = []
    for g in range(lay.wave_size // style.LANES_PER_GROUP):
        lanes = np.arange(g * style.LANES_PER_GROUP, (g + 1) * style.LANES_PER_GROUP)
        labels = np.empty((lanes.size, len(slots)), object)
        mark = np.zeros(labels.shape, bool)
        for j, (r, e) in enumerate(slots):
            for i, lane in enumerate(lanes):
                labels[i, j] = register_label(*where[:, r, e, lane], lay.blocks)
                mark[i, j] = outline is not None and outline[r, e, lane]
        panels.append(grid.Panel(
            labels=labels, groups=np.full(labels.shape, g), title=style.group_label(g),
            gid=f"{profile.name}:{insn.mnemonic}:{op}:register:lanes={lanes[0]}-{lanes[-1]}",
            xticks=xticks, yticks=[str(l) for l in lanes], ylabel="lane",
            xlabel=f"VGPR slice of operand {op}",
            outline=None if outline is None else mark,
            xtick_rotation=90 if lay.elem_bits < 32 and len(slots) > 8 else 0))
    return panels


def panels_for(profile, insn, op: str, view: str, outline=None) -> list[grid.Panel]:
    if view not in VIEWS:
        raise ArgumentError(f"unknown view {view!r}; views are {', '.join(VIEWS)}")
    return (matrix_panels if view == "matrix" else register_panels)(profile, insn, op, outline)


def cell_note(insn, op: str, view: str) -> str:
    """What the text in a cell means, for the legend."""
    lay = insn.operand(op)
    rname, cname = lay.axis_names()
    bits = lay.elem_bits
    if bits < 32:
        unit = {4: "nibble", 8: "byte", 16: "16-bit word"}[bits]
        ex = vgpr_slice(1, 1, bits)
        slice_words = f"\"{ex}\" = {unit} 1 (bits {slice_bits(1, bits)}) of the operand's 2nd VGPR (v0 = its first)"
    elif bits == 64:
        slice_words = "\"v[3:2]\" = the operand's 2nd register pair, one 64-bit element (v[1:0] = its first)"
    else:
        slice_words = "\"v1\" = the operand's 2nd VGPR (v0 = its first)"
    if view == "matrix":
        return f"cell = lane \"L18\" and VGPR slice holding {op}[{rname}][{cname}];  {slice_words}"
    blk = " of block \"blk b\"" if lay.blocks > 1 else ""
    return f"cell \"{rname},{cname}\" = that lane's VGPR slice holds {op}[{rname}][{cname}]{blk};  {slice_words}"


def title(profile, insn, op: str, view: str) -> str:
    lay = insn.operand(op)
    t = insn.elem_type_of(op).name
    shape = f"{lay.rows}×{lay.cols}" + (f" × {lay.blocks} blocks" if lay.blocks > 1 else "")
    what = ("which lane and VGPR hold each element" if view == "matrix"
            else "which element each lane's VGPRs hold")
    return (f"{profile.name} {insn.mnemonic}, operand {op}: {what}\n"
            f"{op} = {OPERAND_FIELDS[op]}, {_ROLE[op]}; {shape} {t}; {lay.n_regs} VGPR{'s' if lay.n_regs > 1 else ''} per lane")


def plot_layout(arch, instruction, operand: str = "D", view: str = "matrix") -> Figure:
    """Fragment ownership picture of one operand: ``view`` is "matrix" or "register"."""
    profile, insn = resolve(arch, instruction)
    op = insn.operand(operand).operand
    panels = panels_for(profile, insn, op, view)
    size = grid.sizing(panels)
    handles = grid.legend_handles(np.concatenate([p.groups.ravel() for p in panels]))
    fig = grid.figure(size.width, size.height, title(profile, insn, op, view), handles, cell_note(insn, op, view))
    grid.draw(fig, panels, size)
    return fig


__all__ = ["plot_layout", "matrix_panels", "register_panels", "panels_for", "vgpr_slice", "VIEWS"]
