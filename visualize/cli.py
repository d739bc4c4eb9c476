"""`gfxsim plot`: pictures from the command line.

gfxsim finds this module through the ``gfxsim.commands`` entry point (pyproject.toml) and calls
``add_parser``; gfxsim itself never imports visualize. matplotlib is imported only when a
picture is drawn, so other gfxsim commands start as fast as before.
"""
from __future__ import annotations


from gfxsim.errors import UsageError

OPERANDS = ("A", "B", "C", "D")
VIEWS = ("matrix", "register")
# `plot run --what`: picture -> whether the run must keep its full trace (coverage, LDS accesses)
RUN_PICTURES = {"tokens": True, "scales": False, "errors": False, "banks": True}


def add_parser(sub):
    p = sub.add_parser("plot", help="draw pictures (PNG or SVG, by the file extension)",
                       description="Draw gfxsim pictures. The output format follows the extension of -o: "
                                   ".png or .svg.")
    kinds = p.add_subparsers(dest="plot_kind", metavar="KIND")
    _add_layout(kinds)
    _add_run(kinds)
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


def _add_run(kinds):
    from kernels_py.cli import add_run_options, complete_help
    q = kinds.add_parser("run", help="pictures of a kernel run: token map, scale groups, errors, LDS banks",
                         description="Run a kernel as `gfxsim run` does (same options) and draw one picture of "
                                     "it: tokens (the token in every K slot of each matrix instruction that sums "
                                     "over tokens, and the tokens consumed per output tile), scales (each slot's "
                                     "scale group, misaligned slots outlined), errors (|output - reference| per "
                                     "query row and head element, against fp32 and bf16), banks (LDS accesses by "
                                     "bank-conflict degree, and one access lane by lane).",
                         epilog="example: gfxsim plot run --context 300 --grouping contiguous --what scales "
                                "--instructions 4 -o pv_scales.png")
    add_run_options(q)
    complete_help(q)
    q.add_argument("--what", choices=tuple(RUN_PICTURES), required=True, help="the picture to draw")
    q.add_argument("-o", "--output", required=True, metavar="FILE", help="picture to write: FILE.png or FILE.svg")
    q.add_argument("--workgroup", default="0,0,0", metavar="X,Y,Z",
                   help="tokens/scales: the workgroup whose wave is drawn (default 0,0,0)")
    q.add_argument("--wave", type=int, default=0, help="tokens/scales: the wave drawn (default 0)")
    q.add_argument("--all-waves", action="store_true", help="tokens/scales: draw every wave's instructions")
    q.add_argument("--instructions", type=int, metavar="N",
                   help="tokens/scales: draw the first N instructions (default: tokens 4, scales all of the wave)")
    q.add_argument("--event", type=int, metavar="INDEX",
                   help="banks: the trace index of the LDS access drawn lane by lane (default: the worst)")
    q.set_defaults(func=run_run)
    return q


def _no_kind(parser) -> int:
    parser.print_help()
    return 2


def check_output(path, flag: str = "-o") -> None:
    """``flag PATH`` before any work: a file we can create or overwrite in an existing directory (a
    missing directory is refused, not made: a typo in it would otherwise go unnoticed)."""
    import os
    from pathlib import Path
    p = Path(path)
    if p.is_dir():
        example = p / ("picture.png" if flag == "-o" else "out" + Path(path).suffix)
        raise UsageError(f"{flag} {path}: is a directory; give a file, e.g. {example}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise UsageError(f"{flag} {path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: {parent} is not a directory")
    existed = p.exists()
    try:
        with open(p, "ab"):
            pass
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot write: {e.strerror or e}") from e
    if not existed:
        try:
            os.unlink(p)
        except OSError:
            pass


def run_layout(args) -> int:
    from .style import picture_format, save
    picture_format(args.output)              # a bad extension fails before any drawing
    check_output(args.output)
    if args.compare:
        from .compare import plot_compare
        fig = plot_compare(args.arch, args.instruction, *args.compare, operand=args.operand, view=args.view)
    else:
        from .fragments import plot_layout
        fig = plot_layout(args.arch, args.instruction, operand=args.operand, view=args.view)
    path = save(fig, args.output)
    print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
    return 0


def _workgroup(text: str) -> tuple:
    try:
        wg = tuple(int(x) for x in text.split(","))
    except ValueError:
        wg = ()
    if not 1 <= len(wg) <= 3 or min(wg) < 0:
        raise UsageError(f"--workgroup {text!r}: give X, X,Y or X,Y,Z with non-negative integers, e.g. 0,1,0")
    return wg


def run_run(args) -> int:
    from kernels_py.cli import check_memory, check_run_args, input_params, load_run_inputs, progress_for
    from kernels_py.host.runs import run_kernel

    from .style import picture_format, save
    picture_format(args.output)              # bad input fails before the kernel runs
    check_output(args.output)
    args.trace = RUN_PICTURES[args.what]     # the picture decides whether the full trace is kept
    configs = check_run_args(args)
    if len(configs) != 1:
        raise UsageError(f"--context: a picture is of one run; give one history length, got {args.context}")
    if args.instructions is not None and args.instructions < 1:
        raise UsageError(f"--instructions must be >= 1, got {args.instructions}")
    if args.what in ("tokens", "scales") and not args.provenance:
        raise UsageError(f"--what {args.what} draws the tokens that reached the K slots; drop --no-provenance")
    wg = _workgroup(args.workgroup)
    inputs = load_run_inputs(args)
    check_memory(args, inputs, trace=args.trace)
    with progress_for(args, configs[0].context if inputs is None else None) as progress:
        kr = run_kernel(args.kernel, config=configs[0], inputs=inputs, progress=progress)
    if inputs is not None:
        kr.params.update(input_params(inputs, args.inputs))
    fig = draw_run(kr, args.what, workgroup=None if args.all_waves else wg, wave=None if args.all_waves else args.wave,
                   limit=args.instructions, event=args.event)
    path = save(fig, args.output)
    print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
    return 0


def draw_run(kr, what: str, *, workgroup=(0, 0, 0), wave=0, limit=None, event=None):
    """The figure ``gfxsim plot run --what`` draws."""
    if what == "tokens":
        from .tokens import plot_tokens
        return plot_tokens(kr, workgroup, wave, limit=4 if limit is None else limit)
    if what == "scales":
        from .scales import plot_scales
        return plot_scales(kr, workgroup, wave, limit)
    if what == "errors":
        from .errors import plot_errors
        return plot_errors(kr)
    from .lds import plot_banks
    return plot_banks(kr, event)
