"""The picture of a sweep (`gfxsim sweep`): what it found, its error against context, its slowest points.

Three panels from the plain data of kernels_py.sweep.summary.picture_data (no kernels_py import here):
- findings per point, worst first, one bar per point stacked by finding kind (failed points
  listed under them);
- the error metric against context, one line per shape (the other varied parameters), worst over
  the seeds, log-log; shapes with correctness findings drawn solid and marked in the legend,
  the others dashed;
- the slowest points' wall time, each bar labelled with its peak RSS.

>>> from visualize.sweep import plot_sweep
>>> save(plot_sweep(picture_data(summarize(sweep, rows))), "sweep.png")
"""
from __future__ import annotations

import math

from matplotlib.figure import Figure

from . import style

# Okabe-Ito: one hue per finding kind, in order (colour-blind safe); hatches add a second cue
KIND_COLOURS = ("#D55E00", "#0072B2", "#E69F00", "#CC79A7", "#009E73", "#56B4E9", "#F0E442", "#000000")
KIND_HATCHES = ("", "//", "..", "\\\\", "xx", "--", "++", "oo")
MAX_BARS = 16
MAX_LINES = 12


def plot_sweep(data: dict) -> Figure:
    fig = Figure(figsize=(13, 10), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=(1.1, 1), width_ratios=(1.1, 1))
    _findings(fig.add_subplot(grid[0, :]), data)
    _errors(fig.add_subplot(grid[1, 0]), data)
    _slowest(fig.add_subplot(grid[1, 1]), data)
    fig.suptitle(f"sweep {data['name']}: {data['points']} points, {len(data['findings'])} with findings, "
                 f"{len(data['failed'])} failed", fontsize=style.TITLE_SIZE)
    return fig


def _findings(ax, data):
    rows = data["findings"][:MAX_BARS]
    ax.set_title("findings per point (worst first)", fontsize=style.LABEL_SIZE)
    if not rows:
        ax.text(0.5, 0.5, f"no findings in {data['points']} points", ha="center", va="center",
                transform=ax.transAxes, fontsize=style.LABEL_SIZE)
        ax.set_axis_off()
        _failed_note(ax, data)
        return
    kinds = list(rows[0]["counts"])
    y = list(range(len(rows)))[::-1]
    left = [0] * len(rows)
    for i, kind in enumerate(kinds):
        width = [r["counts"][kind] for r in rows]
        ax.barh(y, width, left=left, color=KIND_COLOURS[i % len(KIND_COLOURS)],
                hatch=KIND_HATCHES[i % len(KIND_HATCHES)], edgecolor="white", label=kind)
        left = [a + b for a, b in zip(left, width)]
    ax.set_yticks(y, [r["label"] for r in rows], fontsize=style.TICK_SIZE)
    ax.set_ylim(len(rows) - max(len(rows), 8) - 0.5, len(rows) - 0.5)      # bars of one height, few or many
    ax.set_xlabel("findings", fontsize=style.LABEL_SIZE)
    ax.legend(fontsize=style.TICK_SIZE, loc="lower right")
    more = len(data["findings"]) - len(rows)
    if more > 0:
        ax.text(1, 1.01, f"(+{more} more)", ha="right", va="bottom", transform=ax.transAxes,
                fontsize=style.TICK_SIZE)
    _failed_note(ax, data)


def _failed_note(ax, data):
    if data["failed"]:
        text = "failed: " + "; ".join(f"{f['label']}: {f['error'][:60]}" for f in data["failed"][:3])
        if len(data["failed"]) > 3:
            text += f"; +{len(data['failed']) - 3} more"
        ax.text(0, -0.12, text, transform=ax.transAxes, fontsize=style.TICK_SIZE, color="#D55E00", va="top")


def _errors(ax, data):
    metric, contexts = data["metric"], data["contexts"]
    ax.set_title(f"{metric or 'error'} against context (worst over seeds)", fontsize=style.LABEL_SIZE)
    if metric is None or not contexts:
        ax.text(0.5, 0.5, "no metrics (no point finished)", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    bad = set(data["grid_findings"])
    shown = sorted(data["grid"].items(), key=lambda kv: (kv[0] not in bad, kv[0]))[:MAX_LINES]
    positive = [v for _, vals in shown for v in vals if v is not None and not math.isnan(v) and v > 0]
    for i, (label, vals) in enumerate(shown):
        pts = [(c, v) for c, v in zip(contexts, vals) if v is not None and not math.isnan(v)]
        if not pts:
            continue
        ax.plot([c for c, _ in pts], [v for _, v in pts], marker="os^vD<>ph*"[i % 10],
                linestyle="-" if label in bad else "--", label=("findings: " if label in bad else "") + label)
    if len(contexts) > 1:
        ax.set_xscale("log", base=2)
    ax.set_xticks(contexts, [str(c) for c in contexts], fontsize=style.TICK_SIZE)
    if positive and min(positive) > 0:
        ax.set_yscale("log")
    ax.set_xlabel("context (tokens)", fontsize=style.LABEL_SIZE)
    ax.set_ylabel(metric, fontsize=style.LABEL_SIZE)
    ax.legend(fontsize=style.TICK_SIZE - 1, loc="upper left", bbox_to_anchor=(0, -0.12), frameon=False)
    ax.grid(True, alpha=0.3)


def _slowest(ax, data):
    rows = data["slowest"]
    ax.set_title("slowest points (wall time, peak RSS)", fontsize=style.LABEL_SIZE)
    if not rows:
        ax.set_axis_off()
        return
    y = list(range(len(rows)))[::-1]
    ax.barh(y, [r["wall_s"] for r in rows], color="#56B4E9")
    for yi, r in zip(y, rows):
        rss = r["peak_rss_bytes"]
        ax.text(r["wall_s"], yi, f" {r['wall_s']:.1f} s" + (f", {rss / 2**20:.0f} MiB" if rss else ""),
                va="center", fontsize=style.TICK_SIZE)
    ax.set_yticks(y, [r["label"] for r in rows], fontsize=style.TICK_SIZE)
    ax.set_xlabel("seconds", fontsize=style.LABEL_SIZE)
    ax.set_ylim(len(rows) - max(len(rows), 5) - 0.5, len(rows) - 0.5)
    ax.set_xlim(0, max(r["wall_s"] for r in rows) * 1.6 or 1)
