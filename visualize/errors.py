"""Error heatmaps of a kernel run: |kernel output - reference| per query row and head element,
one panel per reference (fp32, bf16), on one shared colour scale so the panels compare.

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

REFERENCES = ("fp32", "bf16")
CMAP, LEVELS = "cividis", 16      # discrete levels: a PNG's 128-colour palette (style.save) keeps them exact


def error_rows(run, ref: str):
    """(|out - ref| as [query rows, head_dim], row labels); rows are (sequence, head)."""
    refs = getattr(run, "refs", None)
    if refs is None:
        raise ValueError("error heatmaps need a kernel run with references (kernels_py run_kernel), "
                         f"got a {type(run).__name__}")
    if ref not in refs:
        raise ValueError(f"no reference {ref!r}; this run has {', '.join(refs)}")
    out, want = np.asarray(run.out, np.float64), np.asarray(refs[ref], np.float64)
    if out.shape != want.shape:
        raise ValueError(f"output {out.shape} and reference {ref} {want.shape} differ in shape")
    err = np.abs(out - want).reshape(-1, out.shape[-1])
    seqs, heads = (out.shape[0], out.shape[1]) if out.ndim == 3 else (1, err.shape[0])
    labels = [f"seq {s} head {h}" if seqs > 1 else f"head {h}" for s in range(seqs) for h in range(heads)]
    return err, labels


def plot_errors(run, refs=REFERENCES, vmax=None) -> Figure:
    """|kernel output - reference| heatmaps, query row x head element, one panel per reference;
    ``vmax`` fixes the top of the colour scale (to compare two runs' figures)."""
    if not refs:
        raise ValueError("name at least one reference")
    errs = [error_rows(run, r) for r in refs]
    rows, cols = errs[0][0].shape
    vmax = vmax or max(float(e.max()) for e, _ in errs) or 1.0
    panel_h = max(1.2, 0.16 * rows + 0.5)
    fig = Figure(figsize=(max(7.5, 0.07 * cols + 2.5), len(refs) * (panel_h + 0.45) + 1.3), layout="constrained",
                 dpi=style.DPI)
    fig.suptitle(f"{name_of(run)}: |kernel output − reference| per query row and head element",
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
        ax.set_title(f"against the {ref} reference: max abs {err.max():.3g} (head element {c}, {labels[r]}), "
                     f"rms {rms:.3g}", fontsize=style.LABEL_SIZE, loc="left")
        ax.set_yticks(range(rows), labels, fontsize=style.TICK_SIZE)
        ax.tick_params(axis="x", labelsize=style.TICK_SIZE)
        ax.set_ylabel("query row", fontsize=style.LABEL_SIZE)
        ax.set_xlabel("head element (dim)", fontsize=style.LABEL_SIZE)
    bar = fig.colorbar(im, ax=list(axes), shrink=0.9, pad=0.01)
    bar.set_label("|output − reference|", fontsize=style.LABEL_SIZE)
    bar.ax.tick_params(labelsize=style.TICK_SIZE)
    marker = Line2D([], [], marker="x", color="black", markersize=6, markeredgewidth=1.2, linestyle="none",
                    label="the largest error of the panel")
    fig.legend(handles=[marker], loc="outside lower center", fontsize=style.LABEL_SIZE, frameon=False)
    return fig


__all__ = ["plot_errors", "error_rows", "REFERENCES"]
