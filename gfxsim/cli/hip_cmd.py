"""`gfxsim hip`: build the HIP twins with clang and inspect what the compiler made of them."""
from __future__ import annotations

from ..hip import build as hipbuild
from ..hip.inspect import shown_path
from ..hip.toolchain import TARGETS
from .tables import render


def add_parser(sub):
    p = sub.add_parser("hip", help="compile the HIP twins (kernels_hip/) and inspect their ISA",
                       description="Compile kernels_hip/*.hip with clang to assembly and code objects, and "
                                   "inspect the assembly: encoding families, matrix instructions per loop "
                                   "iteration, LDS, registers, scratch, occupancy.")
    hs = p.add_subparsers(dest="hip_command", metavar="{build,inspect}", required=True)

    b = hs.add_parser("build", help="compile kernels to .s and .co (up-to-date outputs are kept)")
    b.add_argument("kernels", nargs="*", metavar="KERNEL", help=f"default: all of {', '.join(hipbuild.KERNELS)}")
    b.add_argument("--arch", action="append", metavar="ARCH",
                   help=f"one of {', '.join(TARGETS)} or 'all'; repeatable (default gfx942). "
                        "gfx936 is the stand-in build: gfx942 code with gfx936's index formulas")
    _common(b)
    b.add_argument("--force", action="store_true", help="recompile even if up to date")
    b.set_defaults(func=run_build)

    i = hs.add_parser("inspect", help="ISA figures of one kernel (builds it first if needed)")
    i.add_argument("kernel", metavar="KERNEL",
                   help="a kernels_hip/ file stem (pv_int8), an entry point (pv_int8_fragment) or a .s path")
    i.add_argument("--arch", default="gfx942", help=f"one of {', '.join(TARGETS)} (default gfx942)")
    i.add_argument("--format", "-f", choices=("text", "json"), default="text", help="output format")
    _common(i)
    i.set_defaults(func=run_inspect)
    return p


def _common(p):
    p.add_argument("--build-dir", metavar="DIR", help="output root (default: build/hip/ in the repository)")
    p.add_argument("-D", "--define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="preprocessor define, e.g. -D GFXSIM_HEAD_DIM=64 -D GFXSIM_BLOCK_SIZE=32")


def run_build(args) -> int:
    archs = args.arch or ["gfx942"]
    if "all" in archs:
        archs = list(TARGETS)
    rows = []
    for arch in archs:
        for r in hipbuild.build(args.kernels or None, arch, build_dir=args.build_dir, defines=args.define,
                                force=args.force):
            rows.append([r.kernel, r.arch, "compiled" if r.rebuilt else "up to date", f"{r.seconds:.2f}",
                         shown_path(r.asm), r.code_object.name])
    print(render(["kernel", "arch", "status", "seconds", "assembly", "code object"], rows, "text"))
    for arch in archs:
        print(f"{arch}: compiler, flags and commands in "
              f"{shown_path(hipbuild.arch_dir(arch, args.build_dir) / hipbuild.RECORD)}")
    return 0


def run_inspect(args) -> int:
    from ..hip.inspect import format_json, format_text, inspect
    res = inspect(args.kernel, args.arch, build_dir=args.build_dir, defines=args.define)
    print(format_json(res) if args.format == "json" else format_text(res))
    return 0
