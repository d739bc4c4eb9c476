"""The one drawing primitive: a labelled grid of cells, laid out as small multiples.

A `Panel` is plain data (labels, lane groups, ticks); `draw` turns a list of them into axes.
Row 0 is at the top, as in a matrix or a register table.
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence

import matplotlib
import numpy as np
from matplotlib.collections import PatchCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from . import style


@dataclass(frozen=True)
class Panel:
    """One grid: ``labels[r][c]`` is drawn in cell (r, c), filled with lane group ``groups[r][c]``.
    ``outline`` marks cells to draw with a heavy border (e.g. placed differently by two layouts)."""
    labels: np.ndarray
    groups: np.ndarray
    title: str
    gid: str                          # stable id: read back by tests, becomes the SVG group id
    xticks: Sequence[str]
    yticks: Sequence[str]
    xlabel: str
    ylabel: str
    outline: np.ndarray | None = None
    xtick_rotation: float = 0.0

    @property
    def shape(self):
        return self.labels.shape


@dataclass(frozen=True)
class Sizing:
    cell: style.CellSize
    rows: int                         # panel grid
    cols: int
    panel_w: float
    panel_h: float

    @property
    def width(self) -> float:
        # 0.55 in per panel for y ticks and gaps, 0.6 in for the figure's y label
        return self.cols * (self.panel_w + 0.55) + 0.6

    @property
    def height(self) -> float:
        return self.rows * (self.panel_h + 0.75)


def sizing(panels: Sequence[Panel], aspect: float = 1.6, also=()) -> Sizing:
    """Cell and panel-grid size for ``panels``; ``also`` are panels drawn elsewhere in the same
    figure at the same cell size (the other side of a comparison)."""
    labels = [lab for p in (*panels, *also) for lab in p.labels.ravel()]
    cell = style.cell_size(labels)
    r, c = panels[0].shape
    pw, ph = c * cell.width, r * cell.height
    rows, cols = style.panel_grid(len(panels), pw + 0.55, ph + 0.75, aspect)
    return Sizing(cell, rows, cols, pw, ph)


def draw(fig, panels: Sequence[Panel], size: Sizing):
    """Draw ``panels`` into ``fig`` (a Figure or SubFigure) on a rows x cols grid; returns the axes."""
    axes = fig.subplots(size.rows, size.cols, squeeze=False)
    for k, (ax, panel) in enumerate(zip(axes.ravel(), panels)):
        with matplotlib.rc_context({"hatch.linewidth": style.HATCH_LINEWIDTH}):
            _draw_panel(ax, panel, single=len(panels) == 1, first_row=k < size.cols, first_col=k % size.cols == 0)
    return list(axes.ravel())


def _draw_panel(ax, panel: Panel, single: bool, first_row: bool, first_col: bool):
    rows, cols = panel.shape
    ax.set_gid(panel.gid)
    # One collection per lane group: a hatch belongs to a whole collection, and one collection
    # draws far faster than a patch per cell.
    for g in np.unique(panel.groups):
        face, hatch, hcolor = style.group_style(int(g))
        cells = [Rectangle((c - 0.5, r - 0.5), 1, 1) for r, c in np.argwhere(panel.groups == g)]
        ax.add_collection(PatchCollection(cells, facecolor=face, edgecolor="white", linewidth=0.8))
        if hatch:
            # A separate edge-less layer, so the hatch takes its own colour (hatches follow
            # the edge colour before matplotlib 3.11) while cell borders stay white.
            ax.add_collection(PatchCollection([Rectangle(p.get_xy(), 1, 1) for p in cells], facecolor="none",
                                              edgecolor=hcolor, linewidth=0, hatch=hatch))
    for r in range(rows):
        for c in range(cols):
            # The text sits on a patch of its cell's fill, so hatching never crosses the glyphs.
            face = style.group_style(int(panel.groups[r, c]))[0]
            ax.text(c, r, panel.labels[r, c], ha="center", va="center", fontsize=style.FONT_SIZE,
                    linespacing=1.05, color="black",
                    bbox=dict(boxstyle="square,pad=0.15", facecolor=face, edgecolor="none"),
                    in_layout=False)   # inside the axes: the layout engine need not measure it
    if panel.outline is not None:
        for r, c in np.argwhere(panel.outline):
            ax.add_patch(Rectangle((c - 0.5 + 0.07, r - 0.5 + 0.07), 0.86, 0.86, fill=False,
                                   edgecolor=style.DIFF_EDGE, linewidth=style.DIFF_LINEWIDTH,
                                   gid=f"{panel.gid}/differs/{r}/{c}"))
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xticks(range(cols), panel.xticks, fontsize=style.TICK_SIZE, rotation=panel.xtick_rotation)
    ax.set_yticks(range(rows), panel.yticks, fontsize=style.TICK_SIZE)
    ax.tick_params(length=0, pad=2)
    for s in ax.spines.values():
        s.set_visible(False)
    if panel.title:
        ax.set_title(panel.title, fontsize=style.LABEL_SIZE, loc="left", pad=4)
    # Small multiples: axis words on the outer panels only.
    if single or first_row:
        ax.set_xlabel(panel.xlabel, fontsize=style.LABEL_SIZE)
    if single or first_col:
        ax.set_ylabel(panel.ylabel, fontsize=style.LABEL_SIZE)


def text_inches(text: str, points: float) -> float:
    """Approximate width of the longest line of ``text`` in inches (0.55 em per character)."""
    return max(len(line) for line in str(text).split("\n")) * points * 0.55 / 72


def legend_handles(groups, extra=()):
    """One swatch per lane group present (colour + hatch), then ``extra`` handles."""
    handles = []
    for g in sorted(set(int(x) for x in groups)):
        face, hatch, hcolor = style.group_style(g)
        handles.append(Patch(facecolor=face, hatch=hatch or None, edgecolor=hcolor,
                             linewidth=0.6, label=style.group_label(g)))
    return handles + list(extra)


def legend_inches(handles) -> float:
    return sum(text_inches(h.get_label(), style.LABEL_SIZE) + 0.55 for h in handles)


def figure(panel_width: float, panel_height: float, title: str, handles, note: str):
    """A constrained-layout Figure wide enough for its title and one-line legend."""
    width = max(panel_width, text_inches(title, style.TITLE_SIZE) + 0.4,
                legend_inches(handles) + 0.3, text_inches(note, style.LABEL_SIZE) + 0.3)
    fig = Figure(figsize=(width, panel_height + 1.5), layout="constrained", dpi=style.DPI)
    fig.suptitle(title, fontsize=style.TITLE_SIZE)
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=style.LABEL_SIZE,
               frameon=False, title=note or None, title_fontsize=style.LABEL_SIZE,
               handlelength=2.4, handleheight=1.5, columnspacing=1.6)
    return fig
