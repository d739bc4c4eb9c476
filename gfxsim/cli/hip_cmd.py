"""`gfxsim hip`: build a project's HIP kernels with clang and inspect what the compiler made of them.
The project is --sources (default: the checkout's kernels_hip/) and --build-dir (default: the
checkout's build/hip/, or ./build/hip with --sources)."""
from __future__ import annotations

from pathlib import Path

from ..errors import UsageError, located
from ..hip.toolchain import TARGETS
from ..tables import render

# A source checkout: gfxsim/ beside kernels_hip/. A non-editable install has no kernels_hip/ here.
CHECKOUT = Path(__file__).resolve().parents[2]


def add_parser(sub):
    p = sub.add_parser("hip", help="compile the HIP twins (kernels_hip/) and inspect their ISA",
                       description="Compile a folder of .hip files (default: kernels_hip/) with clang to assembly "
                                   "and code objects, and inspect the assembly: encoding families, matrix "
                                   "instructions per loop iteration, LDS, registers, scratch, occupancy.")
    hs = p.add_subparsers(dest="hip_command", metavar="{build,inspect}", required=True)

    b = hs.add_parser("build", help="compile kernels to .s and .co (up-to-date outputs are kept)")
    b.add_argument("kernels", nargs="*", metavar="KERNEL", help="file stems of the sources (default: every .hip)")
    b.add_argument("--arch", action="append", metavar="ARCH",
                   help=f"one of {', '.join(TARGETS)} or 'all'; repeatable (default gfx942). "
                        "gfx936 is the stand-in build: gfx942 code with gfx936's index formulas")
    _common(b)
    b.add_argument("--force", action="store_true", help="recompile even if up to date")
    b.set_defaults(func=run_build)

    i = hs.add_parser("inspect", help="ISA figures of one kernel (builds it first if needed)")
    i.add_argument("kernel", metavar="KERNEL",
                   help="a file stem of the sources (pv_int8), an entry point (pv_int8_fragment) or a .s path")
    i.add_argument("--arch", default="gfx942", help=f"one of {', '.join(TARGETS)} (default gfx942)")
    i.add_argument("--format", "-f", choices=("text", "json"), default="text", help="output format")
    _common(i)
    i.set_defaults(func=run_inspect)
    return p


def _common(p):
    p.add_argument("--sources", metavar="DIR", help="the folder of .hip files and their headers "
                                                    "(default: kernels_hip/ of the source checkout)")
    p.add_argument("--build-dir", metavar="DIR", help="output root (default: build/hip/ of the checkout; "
                                                      "./build/hip with --sources)")
    p.add_argument("-D", "--define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="preprocessor define, e.g. -D GFXSIM_HEAD_DIM=64 -D GFXSIM_BLOCK_SIZE=32")


def project_of(args):
    """The project the command line names: --sources/--build-dir, else the source checkout's."""
    from ..hip.project import Project
    if args.sources:
        return Project(args.sources, args.build_dir or Path.cwd() / "build" / "hip")
    if not (CHECKOUT / "kernels_hip").is_dir():
        raise located(FileNotFoundError, f"no kernels_hip/ beside the gfxsim package ({CHECKOUT}): an installed "
                                         "gfxsim needs the HIP sources, --sources DIR")
    return Project(CHECKOUT / "kernels_hip", args.build_dir or CHECKOUT / "build" / "hip")


def run_build(args) -> int:
    from ..asm.inspect import shown_path
    from ..hip import build as hipbuild
    project = project_of(args)
    try:                                 # the option named in the error, not only the errno's text
        project.build.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--build-dir {args.build_dir or project.build}: cannot create it: "
                         f"{e.strerror or e}") from e
    archs = args.arch or ["gfx942"]
    if "all" in archs:
        archs = list(TARGETS)
    rows = []
    for arch in archs:
        for r in hipbuild.build(args.kernels or None, arch, project=project, defines=args.define, force=args.force):
            rows.append([r.kernel, r.arch, "compiled" if r.rebuilt else "up to date", f"{r.seconds:.2f}",
                         shown_path(r.asm), r.code_object.name])
    print(render(["kernel", "arch", "status", "seconds", "assembly", "code object"], rows, "text"))
    for arch in archs:
        print(f"{arch}: compiler, flags and commands in "
              f"{shown_path(hipbuild.arch_dir(arch, project) / hipbuild.RECORD)}")
    return 0


def run_inspect(args) -> int:
    from ..asm.inspect import format_json, format_text
    from ..hip.inspect import inspect
    project = None if args.kernel.endswith(".s") else project_of(args)
    res = inspect(args.kernel, args.arch, project=project, defines=args.define)
    print(format_json(res) if args.format == "json" else format_text(res))
    return 0
