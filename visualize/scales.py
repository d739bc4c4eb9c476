"""Scale groups of a kernel run: for each matrix instruction that sums over tokens, the token in
each K slot, the scale group it belongs to, and, outlined, every slot whose scale was computed
over a group that does not hold its token (the PV scale-group bug).

Rows are instructions, columns K slots. The groups of a wave are the token sets its scales were
computed over, as the run's scale-group-mismatch findings name them, and, for an instruction with
no finding, its own K set. The fill is the group holding the slot's token; the row names the group
of the instruction. A slot is outlined exactly when the instruction's finding does not list its
token among the tokens the scale was computed over.

>>> from visualize import plot_scales
>>> fig = plot_scales(run_kernel("paged_attention_decode", context=300, grouping="contiguous"))
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from . import grid, style
from .runs import describe_group, instruction_name, name_of, runs_of, scale_groups, select, waves

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
        how = f"scaled by group {applied}" if s.scale_over is not None else f"K set = group {applied}, no mismatch"
        yticks.append(f"{where}{instruction_name(s.event)}: {how}")
    k = labels.shape[1]
    p = grid.Panel(labels=labels, groups=fills, title="", gid=gid, xticks=[str(c) for c in range(k)],
                   yticks=yticks, xlabel="K slot k (the summed dimension); cell: the token fed to that slot",
                   ylabel="instruction # (label)", outline=np.array([s.misaligned for s in slots]))
    return p, per_wave


def legend(per_wave, scaled, marked: bool) -> list:
    """Fills of the groups (``scaled``: the token sets findings name as scale footprints), and the mark."""
    many = len(per_wave) > 1
    n = max(len(g) for g in per_wave.values())
    handles = []
    for i in range(n):
        face, hatch, hcolor = style.group_style(i % len(style.LANE_GROUP_STYLE))
        (wg, w), groups = next((k, g) for k, g in per_wave.items() if len(g) > i)
        what = "scale" if groups[i] in scaled else "K set"
        if many:
            label = f"group {i} of its wave (wg{wg} w{w}: {describe_group(groups[i])}, {what})"
        else:
            label = f"group {i}: tokens {describe_group(groups[i])} ({what})"
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
    applied = group_scales_applied(run)
    if applied == 0:
        return f"{head}\nno scale-group-mismatch: the run applies no group scale at all"
    return f"{head}\nno scale-group-mismatch: every group scale applied covers exactly its instruction's tokens"


def group_scales_applied(run):
    """How many group scales (Wave.group_scale) the run made; None when it was not traced."""
    runs = runs_of(run)
    if not all(r.trace.enabled for r in runs):
        return None
    return sum(1 for r in runs for e in r.events if e.details.get("scale"))


def plot_scales(run, workgroup=(0, 0, 0), wave=0, limit=None) -> Figure:
    """Token per K slot, its scale group, misaligned slots outlined; ``wave=None`` draws every wave."""
    slots = select(run, workgroup, wave, limit)
    p, per_wave = panel(slots)
    size = grid.sizing([p])
    note = ("group (scale): tokens a scale was computed over, from the run's findings; (K set): an instruction's "
            "tokens, where no finding;  · = no token tag")
    scaled = {s.scale_over for s in slots if s.scale_over is not None}
    fig = grid.figure(size.width, size.height, title(run, slots), legend(per_wave, scaled, bool(p.outline.any())),
                      note)
    grid.draw(fig, [p], size)
    return fig


__all__ = ["plot_scales", "panel"]
