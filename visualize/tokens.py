"""Token map of a kernel run: the token in every K slot of A and B of each matrix instruction that
sums over tokens, and how often each token fed each output tile.

Top: two rows per instruction (A, then B), one column per K slot, each cell the token tag that
reached that slot; the fill is the lane group holding the slot (the same fills as the layout
pictures), so the 8-slot bands show which lanes' loads fed which tokens. A slot where A and B
carry different tokens is outlined. Bottom (traced runs): one row per output tile, the
accumulator the instructions' results are summed into, one column per token, coloured by how
many times that tile consumed the token.

>>> from visualize import plot_tokens
>>> fig = plot_tokens(run_kernel("paged_attention_decode", context=300, trace=True))
"""
from __future__ import annotations

import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from . import grid, style
from .runs import coverage, instruction_name, name_of, runs_of, select, token_mmacs, waves

# Times a tile consumed a token: 0, 1, 2, 3+. Lightness falls with the count (greyscale keeps the
# order) and the hues are Okabe-Ito blue and vermillion, apart for every colour-vision type.
COUNT_COLOURS = ("#FFFFFF", "#56B4E9", "#D55E00", "#3B1C00")
COUNT_LABELS = ("0: not consumed by the tile", "1: consumed once", "2: twice", "3 or more")


def _label(t) -> str:
    return str(int(t)) if t >= 0 else "·"


def holder_groups(insn, op: str) -> np.ndarray:
    """[K] lane group of the lane holding each K slot of row 0 of A / column 0 of B (block 0)."""
    k = np.arange(insn.K)
    zero = np.zeros_like(k)
    lane = insn.operand(op).to_register(zero, k)[0] if op == "A" else insn.operand(op).to_register(k, zero)[0]
    return np.asarray(lane) // style.LANES_PER_GROUP


def token_map_panel(slots, gid: str = "tokens") -> grid.Panel:
    """Rows (instruction, A/B) x K slots, labelled with the token each slot received."""
    labels, fills, marks, yticks = [], [], [], []
    many = len(waves(s.event for s in slots)) > 1
    for s in slots:
        e = s.event
        a, b = e.tokens("A"), e.tokens("B")
        differ = a != b
        where = f"wg{e.workgroup} w{e.wave} " if many else ""
        for op, t in (("A", a), ("B", b)):
            labels.append([_label(x) for x in t])
            fills.append(holder_groups(e.insn, op))
            marks.append(differ)
            yticks.append(f"{where}{instruction_name(e)} {op}")
    k = len(labels[0])
    return grid.Panel(labels=np.array(labels, dtype=object), groups=np.array(fills), title="", gid=gid,
                      xticks=[str(c) for c in range(k)], yticks=yticks,
                      xlabel="K slot k (the summed dimension); cell: the token that reached the slot",
                      ylabel="instruction # (the kernel's label), operand", outline=np.array(marks))


def coverage_matrix(tiles, n_tokens: int = 0):
    """[tiles, tokens] times each tile consumed each token (at least ``n_tokens`` columns)."""
    n_tok = max(n_tokens, 1 + max((max(t.counts) for t in tiles if t.counts), default=0))
    m = np.zeros((len(tiles), n_tok), int)
    for i, t in enumerate(tiles):
        for tok, c in t.counts.items():
            m[i, tok] = c
    return m


def draw_coverage(fig, tiles, n_tokens: int, findings: int):
    ax = fig.subplots()
    ax.set_gid("coverage")
    m = coverage_matrix(tiles, n_tokens)
    cmap = ListedColormap(COUNT_COLOURS)
    ax.imshow(np.minimum(m, 3), cmap=cmap, norm=BoundaryNorm([-0.5, 0.5, 1.5, 2.5, 3.5], cmap.N),
              aspect="auto", interpolation="nearest")
    firsts = [i for i, t in enumerate(tiles) if i == 0 or (t.workgroup, t.wave) != (tiles[i - 1].workgroup,
                                                                                     tiles[i - 1].wave)]
    ax.set_yticks(firsts, [f"wg{tiles[i].workgroup} w{tiles[i].wave}" for i in firsts], fontsize=style.TICK_SIZE)
    for i in range(1, len(tiles)):        # hairlines between tiles, darker between waves
        ax.axhline(i - 0.5, color="#444444" if i in firsts else "#DDDDDD", linewidth=0.8 if i in firsts else 0.3)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=16, integer=True))
    ax.tick_params(labelsize=style.TICK_SIZE)
    ax.set_xlabel("token (position in the context)", fontsize=style.LABEL_SIZE)
    ax.set_ylabel("output tile\n(accumulator)", fontsize=style.LABEL_SIZE)
    several = sum(any(c > 1 for c in t.counts.values()) for t in tiles)
    ax.set_title(f"tokens consumed per output tile: {_n(len(tiles), 'tile')}, {several} consuming a token more "
                 f"than once; token-coverage findings: {findings}", fontsize=style.LABEL_SIZE, loc="left")
    return ax


def _n(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def token_span(run) -> int:
    """1 + the largest token in any K slot of A or B of the run's token-summing instructions."""
    return 1 + max(int(max(e.tokens("A").max(), e.tokens("B").max())) for _, e in token_mmacs(run))


def plot_tokens(run, workgroup=(0, 0, 0), wave=0, limit=4) -> Figure:
    """Token map of a wave's first ``limit`` token-summing instructions (``wave=None``: every wave;
    ``limit=None``: all), and the coverage of tokens per output tile when the run was traced."""
    slots = select(run, workgroup, wave, limit)
    p = token_map_panel(slots)
    size = grid.sizing([p])
    traced = all(r.trace.enabled for r in runs_of(run))
    tiles = coverage(run) if traced else []
    cov_h = min(5.0, max(1.6, 0.05 * len(tiles) + 1.0)) if tiles else 0.0
    n_diff = int(p.outline.sum()) // 2
    e = slots[0].event
    ws = waves(s.event for s in slots)
    where = f"workgroup {ws[0][0]} wave {ws[0][1]}" if len(ws) == 1 else f"{len(ws)} waves"
    verdict = (f"A and B carry different tokens in {n_diff} K slots (outlined)" if n_diff
               else "A and B carry the same token in every K slot")
    title = f"{name_of(run)}: tokens in the K slots of {len(slots)} × {e.op} ({where})\n{verdict}"
    if not traced:
        title += "; coverage per output tile needs a traced run (trace=True)"
    extra = []
    if n_diff:
        extra.append(Patch(facecolor="white", edgecolor=style.DIFF_EDGE, linewidth=style.DIFF_LINEWIDTH,
                           label="outlined: A and B differ"))
    if tiles:
        extra += [Patch(facecolor=c, edgecolor="#555555", linewidth=0.6, label=lab)
                  for c, lab in zip(COUNT_COLOURS, COUNT_LABELS)]
    handles = grid.legend_handles(p.groups.ravel(), extra)
    note = ("fill: the lane group holding the K slot (row 0 of A, column 0 of B);  "
            "· = no token tag (e.g. past the context)")
    fig = grid.figure(size.width, size.height + cov_h, title, handles, note)
    if not tiles:
        grid.draw(fig, [p], size)
        return fig
    top, bottom = fig.subfigures(2, 1, height_ratios=[size.height, cov_h])
    grid.draw(top, [p], size)
    n_cov = sum(len(r.findings_of("token-coverage")) for r in runs_of(run))
    draw_coverage(bottom, tiles, token_span(run), n_cov)
    return fig


__all__ = ["plot_tokens", "token_map_panel", "coverage_matrix", "COUNT_COLOURS"]
