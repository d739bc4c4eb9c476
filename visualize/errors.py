"""Error heatmaps of a kernel run: |kernel output - reference| per query row and head element,
one panel per reference (fp32, bf16), on one shared colour scale so the panels compare. Where
the query heads of a run share kv heads (GQA with several kv heads), lines separate the kv groups,
the row labels name each row's kv head and each panel's title gives the largest error per group:
a kernel that reads the wrong kv head shows as one bright band.

The colour map is cividis: lightness rises monotonically with the error (greyscale keeps the
order) and it was designed to read the same for the common colour-vision deficiencies. The
largest error of each panel is marked.

>>> from visualize import plot_errors
>>> fig = plot_errors(run_kernel("paged_attention_decode", context=300, grouping="contiguous"))
"""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from . import style
from .runs import name_of
from gfxsim.errors import ArgumentError

REFERENCES = ("fp32", "bf16")
# The output's axes, leading ones flattened into rows: (row axes, column axis) of each kernel's output.
AXES = {"paged_attention_decode": (("seq", "query head"), "head element (dim)"),
        "prefix_prefill": (("seq", "query", "head"), "head element (dim)"),
        "pv_int8": (("query row",), "head element (dim)"), "qk_int8": (("query row",), "token"),
        "int8_kv_cache": (("K/V", "token", "kv head"), "head element (dim)")}
MAX_ROW_LABELS = 32
CMAP, LEVELS = "cividis", 16      # discrete levels: a PNG's 128-colour palette (style.save) keeps them exact


def error_rows(run, ref: str):
    """(|out - ref| as [rows, last axis], row labels): the output's leading axes flattened into rows."""
    refs = getattr(run, "refs", None)
    if refs is None:
        raise ArgumentError("error heatmaps need a kernel run with references (kernels_py run_kernel), "
                         f"got a {type(run).__name__}")
    if ref not in refs:
        raise ArgumentError(f"no reference {ref!r}; this run has {', '.join(refs)}")
    out, want = np.asarray(run.out, np.float64), np.asarray(refs[ref], np.float64)
    if out.shape != want.shape:
        raise ArgumentError(f"output {out.shape} and reference {ref} {want.shape} differ in shape")
    err = np.abs(out - want).reshape(-1, out.shape[-1])
    names = axes_of(run)[0]
    lead = [size for size in out.shape[:-1] if size > 1] or [1]       # axes of length 1 are left out
    labels = [" ".join(f"{n} {i}" for n, i in zip(names, idx)) for idx in np.ndindex(*lead)]
    return err, labels


# kernels whose output rows (leading axes flattened) end in the query-head axis
HEAD_LAST = {"paged_attention_decode", "prefix_prefill"}


def kv_groups(run):
    """[rows] kv head of every output row (query head // GQA ratio), or None when the output has
    no query-head axis or the run one kv head."""
    if getattr(run, "kernel", None) not in HEAD_LAST:
        return None
    params = getattr(run, "params", {}) or {}
    shape = np.shape(run.out)
    heads, kv = shape[-2], int(params.get("kv_heads", 1))
    if kv <= 1 or heads % kv:
        return None
    rows = int(np.prod(shape[:-1]))
    return (np.arange(rows) % heads) // (heads // kv)


def _group_starts(groups) -> list:
    """Rows where a new kv group begins (not row 0)."""
    return [r for r in range(1, len(groups)) if groups[r] != groups[r - 1]]


def axes_of(run):
    """(names of the leading axes longer than 1, name of the last axis) of the run's output."""
    shape = np.shape(run.out)
    names = AXES.get(getattr(run, "kernel", None))
    if names is None or len(names[0]) != len(shape) - 1:
        names = tuple(f"axis {i}" for i in range(len(shape) - 1)), "last axis of the output"
    return tuple(n for n, size in zip(names[0], shape) if size > 1) or names[0][-1:], names[1]


def plot_errors(run, refs=None, vmax=None) -> Figure:
    """|kernel output - reference| heatmaps, output rows x last axis (query row x head element for
    attention), one panel per reference (default: those of fp32 and bf16 the run has); ``vmax``
    fixes the top of the colour scale (to compare two runs' figures)."""
    if refs is None:
        refs = [r for r in REFERENCES if r in (getattr(run, "refs", None) or {})] or list(REFERENCES)
    if not refs:
        raise ArgumentError("name at least one reference")
    errs = [error_rows(run, r) for r in refs]
    rows, cols = errs[0][0].shape
    groups = kv_groups(run)
    if groups is not None:
        errs = [(e, [f"{lab} (kv {g})" for lab, g in zip(labels, groups)]) for e, labels in errs]
    row_words, col_words = axes_of(run)
    vmax = vmax or max(float(e.max()) for e, _ in errs) or 1.0
    panel_h = min(4.0, max(1.2, 0.16 * rows + 0.5))
    fig = Figure(figsize=(max(7.5, 0.07 * cols + 2.5), len(refs) * (panel_h + 0.45) + 1.3), layout="constrained",
                 dpi=style.DPI)
    fig.suptitle(f"{name_of(run)}: |kernel output − reference| per {', '.join(row_words)} and {col_words}",
                 fontsize=style.TITLE_SIZE)
    axes = fig.subplots(len(refs), 1, squeeze=False)[:, 0]
    for ax, ref, (err, labels) in zip(axes, refs, errs):
        ax.set_gid(f"errors:{ref}")
        im = ax.imshow(err, cmap=matplotlib.colormaps[CMAP].resampled(LEVELS), vmin=0.0, vmax=vmax, aspect="auto",
                       interpolation="nearest")
        r, c = np.unravel_index(int(np.argmax(err)), err.shape)
        ax.plot([c], [r], marker="x", markersize=7, markeredgewidth=1.8, color="white", linestyle="none")
        ax.plot([c], [r], marker="x", markersize=5, markeredgewidth=0.9, color="black", linestyle="none")
        rms = float(np.sqrt(np.mean(err ** 2)))
        head = (f"against the {ref} reference: max abs {err.max():.3g} ({col_words.split(' (')[0]} {c}, "
                f"{labels[r]}), rms {rms:.3g}")
        if groups is not None:
            for r0 in _group_starts(groups):         # the kv groups, apart
                ax.axhline(r0 - 0.5, color="white", linewidth=2.2, gid="kv-group")
                ax.axhline(r0 - 0.5, color="black", linewidth=0.9, gid="kv-group")
            per = [f"kv {g} {float(err[groups == g].max()):.3g}" for g in np.unique(groups)]
            head += "\nmax abs per kv group (lines separate them): " + ", ".join(per)
        ax.set_title(head, fontsize=style.LABEL_SIZE, loc="left")
        if rows <= MAX_ROW_LABELS:
            ax.set_yticks(range(rows), labels, fontsize=style.TICK_SIZE)
        ax.tick_params(labelsize=style.TICK_SIZE)
        ax.set_ylabel(", ".join(row_words) if rows <= MAX_ROW_LABELS else
                      f"row = ({', '.join(row_words)}) flattened", fontsize=style.LABEL_SIZE)
        ax.set_xlabel(col_words, fontsize=style.LABEL_SIZE)
    bar = fig.colorbar(im, ax=list(axes), shrink=0.9, pad=0.01)
    bar.set_label("|output − reference|", fontsize=style.LABEL_SIZE)
    bar.ax.tick_params(labelsize=style.TICK_SIZE)
    marker = Line2D([], [], marker="x", color="black", markersize=6, markeredgewidth=1.2, linestyle="none",
                    label="the largest error of the panel")
    fig.legend(handles=[marker], loc="outside lower center", fontsize=style.LABEL_SIZE, frameon=False)
    return fig


__all__ = ["plot_errors", "error_rows", "REFERENCES", "AXES"]
