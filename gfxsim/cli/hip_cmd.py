"""`gfxsim hip`: build a project's HIP kernels with clang and inspect what the compiler made of them
(the project is --sources, default the checkout's kernels_hip/, and --build-dir, default the
checkout's build/hip/, or ./build/hip with --sources); run your own HIP source or .s on the asm
front end (`run`) and list what would stop it before it runs (`check`)."""
from __future__ import annotations

from pathlib import Path

from ..errors import UsageError, located
from ..hip.toolchain import TARGETS
from ..tables import render
from .launched import add_launch_options

# A source checkout: gfxsim/ beside kernels_hip/. A non-editable install has no kernels_hip/ here.
CHECKOUT = Path(__file__).resolve().parents[2]


def add_parser(sub):
    p = sub.add_parser("hip", help="compile and inspect HIP kernels; run your own HIP source or .s",
                       description="Compile a folder of .hip files (default: kernels_hip/) with clang to assembly "
                                   "and code objects, and inspect the assembly: encoding families, matrix "
                                   "instructions per loop iteration, LDS, registers, scratch, occupancy.")
    hs = p.add_subparsers(dest="hip_command", metavar="{build,inspect,run,check}", required=True)

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
                   help="a file stem of the sources (pv_int8), an entry point (pv_int8_fragment), a .s path or "
                        "the path of your own HIP source")
    i.add_argument("--arch", default="gfx942", help=f"one of {', '.join(TARGETS)} (default gfx942)")
    i.add_argument("--format", "-f", choices=("text", "json"), default="text", help="output format")
    _common(i)
    i.set_defaults(func=run_inspect)
    _add_run(hs)
    _add_check(hs)
    return p


USER_ARCHS = ("gfx942", "gfx941", "gfx940", "gfx90a", "gfx936")


def _source_options(p):
    p.add_argument("source", metavar="SOURCE", help="a HIP source (.hip, including <hip/hip_runtime.h> or not) or "
                                                    "clang AMDGPU assembly (.s)")
    p.add_argument("--arch", choices=USER_ARCHS, help="target (default: gfx942 for a HIP source, a .s's own); "
                   "gfx936: gfx942 code with __gfx936__ defined and the MMAC builtins as MFMA, run with gfx936's "
                   "D layout")
    p.add_argument("-D", "--define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="preprocessor define; none by default")
    p.add_argument("-I", "--include", action="append", default=[], metavar="DIR", help="a folder of headers; none by default")
    p.add_argument("--clang-flag", action="append", default=[], metavar="FLAG",
                   help="one more clang flag for a HIP source, e.g. --clang-flag=-std=c++20; "
                        "none by default")


def _add_run(hs):
    r = hs.add_parser("run", help="run your own HIP source or .s on the asm front end",
                      description="Compile SOURCE (a .hip file; a .s runs as it is) with clang and run one entry "
                                  "point on the asm front end: findings, the tokens every matrix instruction "
                                  "consumed, the buffers as the kernel left them.",
                      epilog="example: gfxsim hip run scale.hip --kernel scale --grid 4 --block 64 "
                             "--arg out=out.npy --arg x=x.npy --arg s=2.0 --arg count=256 -o result")
    _source_options(r)
    r.add_argument("--kernel", required=True, metavar="NAME", help="the entry point (its name or mangled symbol)")
    r.add_argument("--grid", required=True, metavar="X[,Y,Z]", help="workgroups per dimension")
    r.add_argument("--block", required=True, metavar="X[,Y,Z]", help="work-items per workgroup per dimension")
    r.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="an argument: FILE.npy (a buffer), a number (1.5 and 1e-3 are floats, 7 and 0x7 integers) "
                        "or null (a null pointer); repeat for each argument (no default: each is given)")
    r.add_argument("--tag", action="append", default=[], metavar="NAME:AXIS=FIELD",
                   help="tag buffer NAME's elements with their index along AXIS as FIELD (e.g. k_cache:1=token): "
                        "token-level findings and token sets; none by default")
    r.add_argument("--encoding", action="append", default=[], metavar="NAME=ENCODING",
                   help="how buffer NAME's bytes encode numbers (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, bf16, f16, i8, u8, "
                        "i4): an instruction that reads them in another is a format-mismatch")
    r.add_argument("--dynamic-lds", type=int, metavar="BYTES", help="dynamic LDS (extern __shared__) at launch")
    add_launch_options(r, "workgroups", "buffer argument")
    r.set_defaults(func=run_user)


def _add_check(hs):
    c = hs.add_parser("check", help="list what would stop your HIP source or .s from running, before it runs",
                      description="Every instruction the asm front end has no semantics for, every matrix "
                                  "instruction with no record on the arch and every ABI feature the launch does "
                                  "not set up, for each entry point of SOURCE (compiled first if a .hip).",
                      epilog="exit status: 0 every entry point can run; 1 problems were listed; 2 a gfxsim error "
                             "or bad usage (one line); 3 a gfxsim bug")
    _source_options(c)
    c.add_argument("--kernel", metavar="NAME", help="one entry point (default: all)")
    c.set_defaults(func=run_check)


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
        archs = [a for a, t in TARGETS.items() if t.twins]
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
    from ..hip.door import HIP_SUFFIXES
    project = None if args.kernel.endswith((".s", *HIP_SUFFIXES)) else project_of(args)
    res = inspect(args.kernel, args.arch, project=project, defines=args.define)
    print(format_json(res) if args.format == "json" else format_text(res))
    return 0


def parse_dims(text: str, option: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(x) for x in text.split(","))
    except ValueError:
        dims = ()
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise UsageError(f"{option} {text!r}: expected 1 to 3 positive integers, e.g. 4 or 4,2")
    return dims


def arg_value(name: str, text: str):
    """--arg NAME=TEXT's value: a .npy file's array, None for null, an int or a float."""
    import numpy as np
    if text == "null":
        return None
    if text.endswith(".npy"):
        try:
            return np.load(text, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UsageError(f"--arg {name}={text}: cannot read it as .npy: {e}") from e
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"--arg {name}={text!r}: expected FILE.npy, a number or null") from None


def parse_args_and_tags(args) -> tuple[dict, dict]:
    values, tags = {}, {}
    for a in args.arg:
        name, sep, text = a.partition("=")
        if not sep or not name:
            raise UsageError(f"--arg {a!r}: expected NAME=FILE.npy|NUMBER|null")
        if name in values:
            raise UsageError(f"--arg {name} given twice")
        values[name] = arg_value(name, text)
    for t in args.tag:
        name, sep1, rest = t.partition(":")
        axis, sep2, field = rest.partition("=")
        try:
            axis = int(axis)
        except ValueError:
            sep2 = ""
        if not (sep1 and sep2 and name and field):
            raise UsageError(f"--tag {t!r}: expected NAME:AXIS=FIELD, e.g. k_cache:1=token")
        tags.setdefault(name, {})[axis] = field
    return values, tags


def declare_encodings(specs, values: dict) -> None:
    """--encoding NAME=ENCODING: buffer argument NAME as a Buffer declaring how its bytes encode numbers."""
    import numpy as np
    from ..machine.memory import Buffer
    for spec in specs:
        name, sep, enc = spec.partition("=")
        if not sep or not name or not enc:
            raise UsageError(f"--encoding {spec!r}: expected NAME=ENCODING, e.g. k8=e4m3fn")
        if not isinstance(values.get(name), np.ndarray):
            raise UsageError(f"--encoding {spec}: {name} is not a buffer argument (--arg {name}=FILE.npy)")
        values[name] = Buffer(name, values[name], encoding=enc)


def run_user(args) -> int:
    from ..hip.door import run
    from ..machine import jit
    from ..machine.schedule import scheduled
    from .launched import emit, output_dir
    values, tags = parse_args_and_tags(args)
    declare_encodings(args.encoding, values)
    grid, block = parse_dims(args.grid, "--grid"), parse_dims(args.block, "--block")
    out_dir = output_dir(args.output)
    with scheduled(args.schedule), jit.announce_compiles():     # a first run compiles: say so (stderr)
        launched = run(args.source, args.kernel, grid, block, arch=args.arch, tags=tags, args=values,
                       defines=args.define, include=args.include, flags=args.clang_flag, lds=args.dynamic_lds, trace=args.trace,
                       provenance=args.provenance, batch=args.batch)
    return emit(launched, out_dir, args.report == "json", source=args.source, grid=grid, block=block)


def run_check(args) -> int:
    from ..asm.inspect import check_kernel
    from ..hip.door import find, load
    f, arch = load(args.source, args.arch, defines=args.define, include=args.include, flags=args.clang_flag)
    kernels = [find(f, args.kernel)] if args.kernel else list(f.kernels.values())
    bad = 0
    for k in kernels:
        problems = check_kernel(k, arch)
        if not problems:
            print(f"{k.name}: can run on the asm front end for {arch} ({len(k.instructions)} instructions)")
            continue
        bad += 1
        print(f"{k.name}: {len(problems)} problem(s) for {arch}:")
        for p in problems:
            print(f"  {p.kind}{' line ' + str(p.line) if p.line else ''}: {p.text}")
    return 1 if bad else 0
