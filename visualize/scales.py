"""Scale groups of a kernel run: for each matrix instruction that sums over tokens, the token in
each K slot, the scale group it belongs to, and, outlined, every slot whose scale was computed
over a group that does not hold its token (the seed's PV bug).

Rows are instructions, columns K slots. The fill is the wave's scale group that holds the slot's
token; the row names the group whose scale multiplied the instruction's result. A slot is
outlined exactly when the run's scale-group-mismatch finding for that instruction does not list
its token among the tokens the scale was computed over.

>>> from visualize import plot_scales
>>> fig = plot_scales(run_kernel("paged_attention_decode", context=300, grouping="contiguous"))
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from . import grid, style
from .runs import describe_group, name_of, scale_groups, select, waves

def _token_label(t) -> str:
    return str(int(t)) if t >= 0 else "·"


def panel(slots, gid: str = "scales") -> tuple:
    """(grid.Panel, the scale groups of each wave drawn) for a list of SlotScales."""
    per_wave = {w: scale_groups([s for s in slots if (s.event.workgroup, s.event.wave) == w])
                for w in waves(s.event for s in slots)}
    many = len(per_wave) > 1
    labels = np.array([[_token_label(t) for t in s.tokens] for s in slots], dtype=object)
    fills = np.zeros(labels.shape, int)
    yticks = []
    for r, s in enumerate(slots):
        groups = per_wave[(s.event.workgroup, s.event.wave)]
        applied = groups.index(s.group) if s.group in groups else 0
        for k, t in enumerate(s.tokens):
            home = next((i for i, g in enumerate(groups) if int(t) in g), applied)
            fills[r, k] = home % len(style.LANE_GROUP_STYLE)
        where = f"wg{s.event.workgroup} w{s.event.wave} " if many else ""
        yticks.append(f"{where}#{s.event.index}: scale of group {applied}")
    k = labels.shape[1]
    p = grid.Panel(labels=labels, groups=fills, title="", gid=gid, xticks=[str(c) for c in range(k)],
                   yticks=yticks, xlabel="K slot k (the summed dimension); cell: the token fed to that slot",
                   ylabel="matrix instruction (trace index)", outline=np.array([s.misaligned for s in slots]))
    return p, per_wave


def legend(per_wave, marked: bool) -> list:
    many = len(per_wave) > 1
    n = max(len(g) for g in per_wave.values())
    handles = []
    for i in range(n):
        face, hatch, hcolor = style.group_style(i % len(style.LANE_GROUP_STYLE))
        if many:
            (wg, w), groups = next((k, g) for k, g in per_wave.items() if len(g) > i)
            label = f"scale group {i} of the wave (wg{wg} w{w}: tokens {describe_group(groups[i])})"
        else:
            label = f"scale group {i}: tokens {describe_group(next(iter(per_wave.values()))[i])}"
        handles.append(Patch(facecolor=face, hatch=hatch or None, edgecolor=hcolor, linewidth=0.6, label=label))
    if marked:
        handles.append(Patch(facecolor="white", edgecolor=style.DIFF_EDGE, linewidth=style.DIFF_LINEWIDTH,
                             label="outlined: scaled by a group without its token"))
    return handles


def title(run, slots) -> str:
    e = slots[0].event
    marked = int(sum(s.misaligned.sum() for s in slots))
    total = int(sum((s.tokens >= 0).sum() for s in slots))
    ws = waves(s.event for s in slots)
    where = f"workgroup {ws[0][0]} wave {ws[0][1]}" if len(ws) == 1 else f"{len(ws)} waves"
    head = f"{name_of(run)}: scale groups of {len(slots)} × {e.op} ({where})"
    if marked:
        bad = sum(bool(s.misaligned.any()) for s in slots)
        return (f"{head}\n{marked} of {total} K slots took their scale from a group that does not hold their token "
                f"(outlined), in {bad} of {len(slots)} instructions")
    return f"{head}\nno scale-group-mismatch: every scale applied was computed over exactly its instruction's tokens"


def plot_scales(run, workgroup=(0, 0, 0), wave=0, limit=None) -> Figure:
    """Token per K slot, its scale group, misaligned slots outlined; ``wave=None`` draws every wave."""
    slots = select(run, workgroup, wave, limit)
    p, per_wave = panel(slots)
    size = grid.sizing([p])
    note = ("row: the scale group that multiplied the instruction's result (from the run's findings, or its own "
            "K set when none);  · = no token tag (e.g. past the context)")
    fig = grid.figure(size.width, size.height, title(run, slots), legend(per_wave, bool(p.outline.any())), note)
    grid.draw(fig, [p], size)
    return fig


__all__ = ["plot_scales", "panel"]
