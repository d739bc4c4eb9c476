"""`gfxsim sweep SPEC -o RESULTS`: run every point of a sweep spec as a Dask task, resumably.

gfxsim finds this module through the ``gfxsim.commands`` entry point ``sweep`` (pyproject.toml)
and calls ``add_parser``; ``main`` runs the same command as ``python -m kernels_py.sweep``.
Nothing heavy is imported until the command runs.
"""
from __future__ import annotations

import sys
from pathlib import Path


def add_parser(sub):
    p = sub.add_parser("sweep", help="run a matrix of kernel runs as Dask tasks (Parquet results)",
                       description="Run every point of a sweep spec (TOML: kernels, front ends, archs, parameter "
                                   "grids, seeds, inputs files) as an independent task on Dask distributed: a "
                                   "LocalCluster on this machine's cores, or the cluster of --scheduler. Results go "
                                   "to one Parquet table as points finish; points already in it are skipped, "
                                   "failed ones run again. Prints a summary and draws it beside the results. "
                                   "Exit status 1 when a point failed.",
                       epilog="example: gfxsim sweep examples/sweep_decode.toml -o out.parquet")
    p.add_argument("spec", metavar="SPEC", help="the sweep spec, a .toml file (see docs/sweep.md)")
    p.add_argument("-o", "--output", required=True, metavar="RESULTS",
                   help="the results table (Parquet), created or resumed")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on the Dask cluster of this scheduler, e.g. tcp://10.0.0.5:8786 (default: a "
                        "LocalCluster on this machine)")
    p.add_argument("--workers", type=int, metavar="N", default=None,
                   help="worker processes of the LocalCluster, one thread each (default: the cores this process "
                        "may use)")
    p.add_argument("--csv", nargs="?", const="", default=None, metavar="PATH",
                   help="also export the table as CSV (default path: RESULTS with .csv)")
    p.add_argument("--plot", metavar="PATH", default=None,
                   help="the summary picture, .png or .svg (default: RESULTS with .png)")
    p.add_argument("--no-plot", action="store_true", help="draw no picture")
    p.add_argument("--dry-run", action="store_true",
                   help="check the spec and list its points (and which are done), run nothing")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)
    return p


def _beside(results: str, suffix: str) -> str:
    return str(Path(results).with_suffix(suffix))


def run(args) -> int:
    from kernels_py.sweep.cluster import run_sweep
    from kernels_py.sweep.results import ResultStore
    from kernels_py.sweep.spec import load_spec
    from visualize.cli import check_output
    sweep = load_spec(args.spec)
    picture = None if args.no_plot else (args.plot or _beside(args.output, ".png"))
    csv = None if args.csv is None else (args.csv or _beside(args.output, ".csv"))
    # every file the sweep will write, checked before anything runs (--dry-run included)
    check_output(args.output)
    if picture is not None:
        from visualize.style import picture_format
        picture_format(picture)
        check_output(picture, "--plot")
    if csv is not None:
        check_output(csv, "--csv")
    store = ResultStore(args.output, sweep.name)
    if args.dry_run:
        return _dry_run(sweep, store)
    ran, skipped = run_sweep(sweep, store, scheduler=args.scheduler, workers=args.workers, quiet=args.quiet)
    return report(sweep, store, ran=ran, skipped=skipped, results=args.output, picture=picture, csv=csv)


def report(sweep, store, *, ran, skipped, results, picture=None, csv=None) -> int:
    """Print the summary, draw its picture and export the CSV; 1 when a point of the sweep failed."""
    from kernels_py.sweep.summary import picture_data, summarize, text
    s = summarize(sweep, store.rows, ran=ran, skipped=skipped)
    if picture is not None:
        from visualize.style import save
        from visualize.sweep import plot_sweep
        save(plot_sweep(picture_data(s)), picture)
    if csv is not None:
        store.export_csv(csv)
    print(text(s, results=results + (f", {csv}" if csv else ""), picture=picture))
    return 1 if s.failed else 0


def _dry_run(sweep, store) -> int:
    from kernels_py.sweep.summary import SweepSummary
    varied = sweep.varied()
    s = SweepSummary(sweep.name, varied, [])
    done = sum(store.done(p) for p in sweep.points)
    print(f"sweep {sweep.name} ({sweep.path}): {len(sweep.points)} points, {done} already done, "
          f"{len(sweep.points) - done} to run")
    for p in sweep.points:
        print(f"  {p.point_id}  {'done' if store.done(p) else 'todo'}  {s.label(p.columns())}")
    return 0


def main(argv=None) -> int:
    """The command without gfxsim's plugin lookup (``python -m kernels_py.sweep``), with gfxsim's
    parser and its handling of errors."""
    from gfxsim.cli import Parser, add_error_options, run_command
    from gfxsim.cli.failures import EXIT_INTERRUPTED
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = Parser(prog="gfxsim")
    add_parser(parser.add_subparsers(dest="command"))
    args = add_error_options(parser).parse_args(["sweep", *argv])
    try:
        return run_command(args, "sweep")
    except KeyboardInterrupt:
        print("gfxsim sweep: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
