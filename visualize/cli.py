"""`gfxsim plot`: pictures from the command line.

gfxsim finds this module through the ``gfxsim.commands`` entry point (pyproject.toml) and calls
``add_parser``; gfxsim itself never imports visualize. matplotlib is imported only when a
picture is drawn, so other gfxsim commands start as fast as before.
"""
from __future__ import annotations

import argparse

OPERANDS = ("A", "B", "C", "D")
VIEWS = ("matrix", "register")


def add_parser(sub):
    p = sub.add_parser("plot", help="draw pictures (PNG or SVG, by the file extension)",
                       description="Draw gfxsim pictures. The output format follows the extension of -o: "
                                   ".png or .svg.")
    kinds = p.add_subparsers(dest="plot_kind", metavar="KIND")
    _add_layout(kinds)
    # Pictures of kernel runs belong here, as a sibling of `layout`, once the simulator records
    # runs: `gfxsim plot run KERNEL ... --what tokens|scales|errors|banks -o FILE`, drawn by a
    # visualize/runs.py beside fragments.py and reusing grid.py and style.py.
    p.set_defaults(func=lambda args: _no_kind(p))
    return p


def _add_layout(kinds):
    q = kinds.add_parser("layout", help="fragment ownership of a matrix-instruction operand",
                         description="Which lane and VGPR hold each element of one operand of a matrix "
                                     "instruction (matrix view), or which element each lane's VGPRs hold "
                                     "(register view); with --compare, two instructions side by side with "
                                     "the cells they place differently outlined.",
                         epilog="example: gfxsim plot layout gfx936 v_mmac_i32_16x16x32_i8 --operand D "
                                "--compare gfx942 v_mfma_i32_16x16x32_i8 -o d_compare.png")
    q.add_argument("arch", help="target, e.g. gfx936, gfx928, gfx942, gfx940, gfx90a")
    q.add_argument("instruction", help="ISA mnemonic, e.g. v_mmac_i32_16x16x32_i8")
    q.add_argument("--operand", choices=OPERANDS, type=str.upper, default="D",
                   help="operand to draw (default D, the result, where gfx936 and CDNA differ)")
    q.add_argument("--view", choices=VIEWS, default="matrix",
                   help="matrix: cells are matrix elements, labelled with lane and VGPR; "
                        "register: lanes x VGPRs, labelled with matrix coordinates (default matrix)")
    q.add_argument("--compare", nargs=2, metavar=("ARCH2", "INSTR2"),
                   help="draw this second instruction beside the first and outline the cells that differ")
    q.add_argument("-o", "--output", required=True, metavar="FILE", help="picture to write: FILE.png or FILE.svg")
    q.set_defaults(func=run_layout)
    return q


def _no_kind(parser) -> int:
    parser.print_help()
    return 2


def run_layout(args) -> int:
    from .style import picture_format, save
    picture_format(args.output)              # a bad extension fails before any drawing
    if args.compare:
        from .compare import plot_compare
        fig = plot_compare(args.arch, args.instruction, *args.compare, operand=args.operand, view=args.view)
    else:
        from .fragments import plot_layout
        fig = plot_layout(args.arch, args.instruction, operand=args.operand, view=args.view)
    path = save(fig, args.output)
    print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
    return 0
