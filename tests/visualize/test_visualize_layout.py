"""The layout pictures tell the truth: what is drawn is read back and checked against the records.

Labels are read from the text artists of the figure (position -> cell, text -> slot or element)
and compared with the instruction record; outlines of a comparison are read from their patches
and compared with what `gfxsim layout --compare` reports.
"""
import json
import re

import numpy as np
import pytest

from gfxsim.arch import get_instruction
from gfxsim.cli import main
from visualize import plot_compare, plot_layout
from visualize.style import LANE_GROUP_STYLE, LANES_PER_GROUP

SLICE = re.compile(r"^L(\d+)\nv(?:(\d+)|\[\d+:(\d+)\])(?:\.[bwn](\d+))?$")   # "L18\nv1.b2", "L5\nv[3:2]" (f64)
COORD = re.compile(r"^(\d+),(\d+)(?:\nblk(\d+))?$")               # register view: "5,7" / "3,1\nblk5"

CASES = [
    ("gfx936", "v_mmac_i32_16x16x32_i8", "A"),
    ("gfx936", "v_mmac_i32_16x16x32_i8", "D"),
    ("gfx942", "v_mfma_i32_16x16x32_i8", "B"),
    ("gfx942", "v_mfma_i32_16x16x32_i8", "C"),
    ("gfx942", "v_mfma_f32_32x32x8_f16", "D"),
    ("gfx942", "v_mfma_f32_4x4x4_16b_f16", "A"),       # 16 blocks: small multiples
    ("gfx942", "v_mfma_f32_4x4x4_16b_f16", "D"),
    ("gfx90a", "v_mfma_i32_16x16x16i8", "B"),
    ("gfx942", "v_mfma_f64_16x16x4_f64", "D"),         # 64-bit elements: register pairs
    ("gfx942", "v_mfma_f64_4x4x4_4b_f64", "A"),
    ("gfx942", "v_mfma_f32_32x32x1_2b_f32", "D"),      # blocks in registers
    ("gfx936", "v_mmac_f32_16x16x16_bf16", "C"),
    ("sm_90", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "A"),      # warp32, PTX fragments
    ("sm_90", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "B"),
    ("sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "D"),
    ("sm_90", "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32", "A"),      # 4-bit elements
]


def panels(fig):
    """{gid: axes} of every drawn grid, in the figure or its sub-figures."""
    axes = list(fig.axes) + [a for sub in fig.subfigs for a in sub.axes]
    return {a.get_gid(): a for a in axes if a.get_gid()}


def parse_gid(gid):
    arch, mnemonic, op, view, where = gid.split(":")
    key, value = where.split("=")
    return arch, mnemonic, op, view, (int(value) if key == "block" else int(value.split("-")[0]))


def cell_texts(ax):
    """(row, col, text) of every cell label, the cell taken from where the text is drawn."""
    for t in ax.texts:
        x, y = t.get_position()
        assert float(x).is_integer() and float(y).is_integer(), f"label {t.get_text()!r} off the grid at {x, y}"
        yield int(y), int(x), t.get_text()


def check_matrix_panel(ax, insn, op, block):
    """Every label of a matrix-view panel names the lane/VGPR slice the record gives for that cell."""
    lay = insn.operand(op)
    seen = np.zeros((lay.rows, lay.cols), int)
    for row, col, text in cell_texts(ax):
        m = SLICE.match(text)
        assert m, f"unreadable label {text!r}"
        lane, reg, elem = int(m[1]), int(m[2]) if m[2] else int(m[3]) // 2, int(m[4] or 0)
        assert (lane, reg, elem) == tuple(int(v) for v in lay.to_register(row, col, block)), \
            f"{insn.mnemonic} {op}[{row}][{col}] block {block}: drawn {text!r}"
        assert (m[4] is None) == (lay.elem_bits >= 32) and (m[3] is None) == (lay.elem_bits != 64)
        seen[row, col] += 1
    assert (seen == 1).all(), "every element is labelled exactly once"


def check_register_panel(ax, insn, op, lane0):
    """Every label of a register-view panel names the element the record gives for that slot."""
    lay = insn.operand(op)
    n = lay.reg_slots * lay.n_elems
    seen = np.zeros((LANES_PER_GROUP, n), int)
    for y, x, text in cell_texts(ax):
        m = COORD.match(text)
        assert m, f"unreadable label {text!r}"
        lane, (reg, elem) = lane0 + y, divmod(x, lay.n_elems)
        want = tuple(int(v) for v in lay.to_matrix(lane, reg, elem))
        assert (int(m[1]), int(m[2]), int(m[3] or 0)) == want, f"{insn.mnemonic} {op} lane {lane} v{reg}.{elem}: {text!r}"
        assert (m[3] is None) == (lay.blocks == 1)
        seen[y, x] += 1
    assert (seen == 1).all()


@pytest.mark.parametrize("arch,mnemonic,op", CASES)
def test_matrix_view_labels_are_the_record(arch, mnemonic, op):
    insn = get_instruction(arch, mnemonic)
    fig = plot_layout(arch, mnemonic, op, view="matrix")
    drawn = panels(fig)
    assert len(drawn) == insn.blocks
    for gid, ax in drawn.items():
        a, m, o, view, block = parse_gid(gid)
        assert (a, m, o, view) == (arch, mnemonic, op, "matrix")
        check_matrix_panel(ax, insn, op, block)


@pytest.mark.parametrize("arch,mnemonic,op", CASES)
def test_register_view_labels_are_the_record(arch, mnemonic, op):
    insn = get_instruction(arch, mnemonic)
    fig = plot_layout(arch, mnemonic, op, view="register")
    drawn = panels(fig)
    assert sorted(parse_gid(g)[4] for g in drawn) == list(range(0, insn.wave_size, LANES_PER_GROUP))
    for gid, ax in drawn.items():
        check_register_panel(ax, insn, op, parse_gid(gid)[4])


def test_lane_group_fill_follows_the_label():
    """The fill under a cell is the lane group of the lane written in it (colour = who owns it)."""
    fig = plot_layout("gfx936", "v_mmac_i32_16x16x32_i8", "D")
    ax = next(iter(panels(fig).values()))
    fills = {}
    for coll in ax.collections:
        face = tuple(np.round(coll.get_facecolor()[0][:3], 3)) if len(coll.get_facecolor()) else None
        if face is None or coll.get_facecolor()[0][3] == 0:
            continue
        for path in coll.get_paths():
            (x0, y0) = path.vertices.min(axis=0)
            fills[(int(round(y0 + 0.5)), int(round(x0 + 0.5)))] = face
    from matplotlib.colors import to_rgb
    group_of = {tuple(np.round(to_rgb(f), 3)): g for g, (f, _, _) in enumerate(LANE_GROUP_STYLE)}
    for row, col, text in cell_texts(ax):
        lane = int(SLICE.match(text)[1])
        assert group_of[fills[(row, col)]] == lane // LANES_PER_GROUP, f"D[{row}][{col}] {text!r}"


def test_every_plot_has_title_axis_words_and_legend():
    for view in ("matrix", "register"):
        fig = plot_layout("gfx942", "v_mfma_f32_4x4x4_16b_f16", "B", view=view)
        assert "v_mfma_f32_4x4x4_16b_f16" in fig._suptitle.get_text()
        (legend,) = fig.legends
        labels = [t.get_text() for t in legend.get_texts()]
        assert labels[:4] == [f"lanes {16 * g}-{16 * g + 15} (rowid {g})" for g in range(4)]
        assert "cell" in legend.get_title().get_text()
        axes = list(panels(fig).values())
        assert any(a.get_xlabel() for a in axes) and any(a.get_ylabel() for a in axes)


def compare_cli(capsys, *args):
    assert main(["layout", "--compare", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def outlined(ax):
    """(row, col) of the cells drawn with the 'differs' outline, from the patches' geometry."""
    cells = set()
    for p in ax.patches:
        if "/differs/" in (p.get_gid() or ""):
            x, y = p.get_xy()
            cells.add((int(round(y + p.get_height() / 2)), int(round(x + p.get_width() / 2))))
    return cells


@pytest.mark.parametrize("first,second", [
    (("gfx936", "v_mmac_i32_16x16x32_i8"), ("gfx942", "v_mfma_i32_16x16x32_i8")),
    (("gfx936", "v_mmac_f32_16x16x16_f16"), ("gfx90a", "v_mfma_f32_16x16x16f16")),
    (("gfx942", "v_mfma_f32_16x16x16_f16"), ("gfx90a", "v_mfma_f32_16x16x16f16")),
])
@pytest.mark.parametrize("op", ["A", "B", "C", "D"])
def test_compare_outlines_exactly_what_the_cli_reports(capsys, first, second, op):
    report = compare_cli(capsys, *first, *second)["operands"][op]
    want = {(c["row"], c["col"]) for c in report["cells"]}
    fig = plot_compare(*first, *second, operand=op)
    drawn = panels(fig)
    assert len(drawn) == 2
    for gid, ax in drawn.items():
        assert outlined(ax) == want, gid
        arch, mnemonic, o, _, block = parse_gid(gid)
        check_matrix_panel(ax, get_instruction(arch, mnemonic), o, block)
    assert f"{report['differ']} of {report['elements']}" in fig._suptitle.get_text() or not report["differ"]


def test_gfx936_vs_gfx942_d_is_252_cells(capsys):
    fig = plot_compare("gfx936", "v_mmac_i32_16x16x32_i8", "gfx942", "v_mfma_i32_16x16x32_i8", "D")
    for ax in panels(fig).values():
        cells = outlined(ax)
        assert len(cells) == 252
        assert set((i, i) for i in range(16)) - cells == {(0, 0), (5, 5), (10, 10), (15, 15)}
    assert "252 of 256" in fig._suptitle.get_text()


def test_register_compare_outlines_slots_holding_other_elements():
    a = get_instruction("gfx936", "v_mmac_i32_16x16x32_i8").operand("D")
    b = get_instruction("gfx942", "v_mfma_i32_16x16x32_i8").operand("D")
    fig = plot_compare("gfx936", "v_mmac_i32_16x16x32_i8", "gfx942", "v_mfma_i32_16x16x32_i8", "D", view="register")
    total = 0
    for gid, ax in panels(fig).items():
        lane0 = parse_gid(gid)[4]
        for y, x in outlined(ax):
            lane, reg = lane0 + y, x                # 32-bit elements: one slot per VGPR
            assert a.to_matrix(lane, reg) != b.to_matrix(lane, reg)
        total += len(outlined(ax))
    assert total == 2 * 252


# -- the CLI -------------------------------------------------------------------------------------

@pytest.mark.parametrize("ext,magic", [("png", b"\x89PNG\r\n\x1a\n"), ("svg", b"<?xml")])
def test_cli_writes_png_and_svg(tmp_path, capsys, ext, magic):
    out = tmp_path / f"d.{ext}"
    rc = main(["plot", "layout", "gfx936", "v_mmac_i32_16x16x32_i8", "--operand", "D",
               "--compare", "gfx942", "v_mfma_i32_16x16x32_i8", "-o", str(out)])
    assert rc == 0
    data = out.read_bytes()
    assert data.startswith(magic) and len(data) > 10_000
    if ext == "svg":
        assert b"v_mfma_i32_16x16x32_i8" in data and b"252 of 256" in data
    assert str(out) in capsys.readouterr().out


def test_cli_register_view_of_one_instruction(tmp_path):
    out = tmp_path / "a.png"
    assert main(["plot", "layout", "gfx942", "v_mfma_i32_16x16x32_i8", "--operand", "a", "--view", "register",
                 "-o", str(out)]) == 0
    assert out.stat().st_size > 10_000


@pytest.mark.parametrize("args,named", [
    (["gfx936", "v_mmac_i32_16x16x32_i8", "-o", "OUT.jpg"], "'.jpg'"),
    (["gfx936", "v_mmac_i32_16x16x32_i8", "-o", "OUT"], "no extension"),
    (["gfx999", "v_mmac_i32_16x16x32_i8", "-o", "OUT.png"], "'gfx999'"),
    (["gfx936", "v_mmac_i32_16x16x32_i8", "--compare", "gfx777", "v_x", "-o", "OUT.svg"], "'gfx777'"),
    (["gfx936", "v_mfma_i32_16x16x32_i8", "-o", "OUT.png"], "'v_mfma_i32_16x16x32_i8'"),
    (["gfx936", "v_mmac_i32_16x16x32_i8", "--compare", "gfx942", "v_mfma_f32_32x32x8_f16", "-o", "OUT.png"],
     "shapes differ"),
])
def test_cli_errors_exit_2_naming_the_culprit(tmp_path, capsys, args, named):
    args = [a.replace("OUT", str(tmp_path / "x")) for a in args]
    assert main(["plot", "layout", *args]) == 2
    err = capsys.readouterr().err
    assert named in err and err.startswith("gfxsim plot: error:")
    assert not list(tmp_path.iterdir()), "nothing is written on an error"


def test_plot_without_a_kind_prints_help(capsys):
    assert main(["plot"]) == 2
    assert "layout" in capsys.readouterr().out


def test_gfxsim_does_not_import_matplotlib_for_other_commands():
    import subprocess
    import sys
    code = ("import sys; from gfxsim.cli import build_parser; build_parser(); "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# -- the style ------------------------------------------------------------------------------------

def test_lane_groups_stay_apart_in_greyscale_and_by_hatch():
    """Colour is never the only cue: CIE L* steps of >= 8 between groups, and distinct hatches."""
    def lightness(hexcolor):
        rgb = np.array([int(hexcolor[i:i + 2], 16) / 255 for i in (1, 3, 5)])
        lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
        y = lin @ np.array([0.2126, 0.7152, 0.0722])
        return 116 * np.cbrt(y) - 16
    ls = sorted(lightness(f) for f, _, _ in LANE_GROUP_STYLE)
    assert min(np.diff(ls)) >= 8
    assert ls[0] >= 55, "black cell text needs a light enough fill"
    assert len({h for _, h, _ in LANE_GROUP_STYLE}) == len(LANE_GROUP_STYLE)
