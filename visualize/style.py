"""One look for every gfxsim picture: lane-group fills, text sizes, figure sizing, saving.

Lane groups are the 16-lane rows of a wave (``rowid = lane // 16``; DPP calls them rows). Each
group gets a colour AND a hatch AND a lightness step, so the picture survives colour-blind eyes
and greyscale printing: the fills are Okabe-Ito hues (yellow, sky blue, orange, reddish purple)
moved to CIE L* 95 / 85 / 75 / 65 with their chroma reduced so black cell text stays readable.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from gfxsim.errors import ArgumentError

LANES_PER_GROUP = 16

# (fill, hatch, hatch colour); the hatch colour is the fill darkened, so it never fights the text.
LANE_GROUP_STYLE = (
    ("#FFF3A0", "", "#BFA900"),      # L* 95, Okabe-Ito yellow (no hatch: the lightest stays plain)
    ("#ADDAFB", "//", "#7FB6DE"),    # L* 85, sky blue
    ("#E3B066", "..", "#B8863C"),    # L* 75, orange
    ("#C28FAA", "\\\\", "#9C6A86"),    # L* 65, reddish purple
)
HATCH_LINEWIDTH = 0.6

FONT_SIZE = 7.0          # cell text, points
TICK_SIZE = 7.0
LABEL_SIZE = 9.0
TITLE_SIZE = 11.0
DPI = 110                # PNG resolution: 7 pt cell text is ~11 px high, legible on screen

DIFF_EDGE = "#000000"    # outline of a cell two layouts place differently (black: survives greyscale)
DIFF_LINEWIDTH = 1.4

FORMATS = ("png", "svg")


def group_style(group: int):
    """(fill, hatch, hatch colour) of a lane group."""
    if not 0 <= group < len(LANE_GROUP_STYLE):
        raise ArgumentError(f"lane group {group} has no style; wave64 has {len(LANE_GROUP_STYLE)} groups of "
                         f"{LANES_PER_GROUP} lanes")
    return LANE_GROUP_STYLE[group]


def group_label(group: int) -> str:
    lo = group * LANES_PER_GROUP
    return f"lanes {lo}-{lo + LANES_PER_GROUP - 1} (rowid {group})"


@dataclass(frozen=True)
class CellSize:
    """Size of one grid cell in inches, from the longest label it must hold."""
    width: float
    height: float


def cell_size(labels, font_size: float = FONT_SIZE) -> CellSize:
    lines = [ln for lab in labels for ln in str(lab).split("\n")]
    chars = max((len(ln) for ln in lines), default=1)
    n_lines = max((str(lab).count("\n") + 1 for lab in labels), default=1)
    # 0.6 em per character of a sans-serif digit string, 1.25 em line pitch, plus padding.
    return CellSize(width=chars * font_size * 0.6 / 72 + 0.10,
                    height=n_lines * font_size * 1.25 / 72 + 0.10)


def panel_grid(n_panels: int, panel_w: float, panel_h: float, aspect: float = 1.6):
    """(rows, cols) of small multiples whose overall width/height is closest to ``aspect``."""
    best = None
    for cols in range(1, n_panels + 1):
        if n_panels % cols:
            continue
        rows = n_panels // cols
        score = abs((cols * panel_w) / (rows * panel_h) - aspect)
        if best is None or score < best[0]:
            best = (score, rows, cols)
    return best[1], best[2]


def picture_format(path) -> str:
    """The format named by a file's extension; an error names any other extension."""
    ext = Path(path).suffix.lower().lstrip(".")
    if not ext:
        raise ArgumentError(f"cannot write {str(path)!r}: it has no extension; name it .png or .svg")
    if ext not in FORMATS:
        raise ArgumentError(f"cannot write {str(path)!r}: '.{ext}' is not a picture format gfxsim writes; "
                         f"use .png or .svg")
    return ext


def save(fig, path) -> Path:
    """Write ``fig`` as PNG or SVG, chosen by the extension of ``path``.

    PNGs are reduced to a 128-colour palette: the pictures hold a handful of flat fills and
    black text, so this keeps every glyph and cuts the file to about a third."""
    fmt = picture_format(path)
    path = Path(path)
    import matplotlib
    # svg.hashsalt makes SVG ids stable, so a regenerated picture diffs cleanly in git;
    # fonttype none keeps SVG text as searchable text.
    rc = {"svg.hashsalt": "gfxsim", "svg.fonttype": "none", "hatch.linewidth": HATCH_LINEWIDTH}
    with matplotlib.rc_context(rc):
        if fmt == "svg":
            fig.savefig(path, format="svg", metadata={"Date": None})
            return path
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI)
    from PIL import Image
    image = Image.open(buf).convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT,
                                                    dither=Image.Dither.NONE)
    image.save(path, format="PNG", optimize=True)
    return path
