"""`gfxsim triton FILE.py:KERNEL`: a @triton.jit kernel of your own compiled for gfx942 by the
installed triton and run on the asm front end (gfxsim.triton.run), printed as `gfxsim hip run`
prints a launch: outputs, the tokens every matrix instruction consumed, findings."""
from __future__ import annotations


from ..errors import UsageError
from .hip_cmd import parse_dims
from .launched import add_launch_options

EXAMPLE = ("gfxsim triton add.py:add_kernel --grid 4 --arg x_ptr=x.npy --arg y_ptr=randn:1000:float32 "
           "--arg out_ptr=zeros:1000:float32 --arg n=1000 --arg BLOCK=256")
_DTYPES = ("float32", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "float8_e4m3fnuz",
           "float8_e5m2fnuz")


def add_parser(sub):
    p = sub.add_parser("triton", help="run a @triton.jit kernel (compiled for gfx942 by triton) on the asm front end",
                       description="Import FILE.py, compile its @triton.jit KERNEL for gfx942 with the installed "
                                   "triton as a launch from tensors would (cached), and run it on the asm front "
                                   "end: findings with the Triton source line, the tokens every matrix instruction "
                                   "consumed, the tensors as the kernel left them.",
                       epilog=f"example: {EXAMPLE}")
    p.add_argument("kernel", metavar="FILE.py:KERNEL", help="the Python file and its @triton.jit function")
    p.add_argument("--grid", required=True, metavar="X[,Y,Z]", help="programs per dimension")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="a parameter, constants included: FILE.npy, KIND:SHAPE:DTYPE with KIND one of zeros, "
                        "ones, arange, randn, randint (-8..7), SHAPE like 64x128 (seed 0), a number, true/false "
                        "or null; repeat for each (one with a default in the signature may be left out)")
    p.add_argument("--tag", action="append", default=[], metavar="NAME:AXIS=FIELD",
                   help="tag tensor NAME's elements with their index along AXIS as FIELD (e.g. k_ptr:0=token); "
                        "none by default")
    p.add_argument("--num-warps", type=int, default=4, help="waves per program (block = num_warps x 64)")
    p.add_argument("--num-stages", type=int, help="software pipelining stages (triton's default when not given)")
    p.add_argument("--plain", action="store_true",
                   help="compile without the launch's alignment and pointer-range specialisation "
                        "(global_load/store instead of buffer ops)")
    add_launch_options(p, "programs", "tensor")
    p.set_defaults(func=run_triton)
    return p


def made_array(name: str, text: str):
    """KIND:SHAPE:DTYPE -> the array, or None when ``text`` is not of that form."""
    import numpy as np
    parts = text.split(":")
    kinds = ("zeros", "ones", "arange", "randn", "randint")
    if len(parts) != 3 or parts[0] not in kinds:
        return None
    kind, shape_text, dtype = parts
    try:
        shape = tuple(int(s) for s in shape_text.split("x"))
    except ValueError:
        shape = ()
    if not shape or any(s < 1 for s in shape):
        raise UsageError(f"--arg {name}={text}: shape {shape_text!r}: expected positive sizes like 1000 or 64x128")
    if dtype not in _DTYPES:
        raise UsageError(f"--arg {name}={text}: dtype {dtype!r}: one of {', '.join(_DTYPES)}")
    if dtype.startswith(("bfloat", "float8")):
        import ml_dtypes
        dt = np.dtype(getattr(ml_dtypes, dtype))
    else:
        dt = np.dtype(dtype)
    rng = np.random.default_rng(0)
    n = int(np.prod(shape))
    made = {"zeros": lambda: np.zeros(n), "ones": lambda: np.ones(n), "arange": lambda: np.arange(n),
            "randn": lambda: rng.standard_normal(n), "randint": lambda: rng.integers(-8, 8, n)}[kind]()
    return made.astype(dt).reshape(shape)


def parse_values(args) -> tuple[dict, dict]:
    from .hip_cmd import parse_args_and_tags
    plain, made = [], {}
    for a in args.arg:
        name, sep, text = a.partition("=")
        arr = made_array(name, text) if sep and name else None
        if arr is not None:
            if name in made:
                raise UsageError(f"--arg {name} given twice")
            made[name] = arr
        elif sep and text.lower() in ("true", "false"):
            made[name] = text.lower() == "true"
        else:
            plain.append(a)
    args.arg = plain
    values, tags = parse_args_and_tags(args)
    twice = set(values) & set(made)
    if twice:
        raise UsageError(f"--arg {', '.join(sorted(twice))} given twice")
    return {**values, **made}, tags


def load_kernel(spec: str):
    """The @triton.jit function KERNEL of FILE.py (imported as a module of its own, by path)."""
    import os

    from ..userfile import import_user_file
    if ":" not in spec or spec.endswith(":") or spec.startswith(":"):
        raise UsageError(f"{spec!r}: expected FILE.py:KERNEL, e.g. add.py:add_kernel")
    path, name = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        raise UsageError(f"{path}: {'is a directory' if os.path.isdir(path) else 'no such file'}")
    module = import_user_file(path, "gfxsim_triton_", neighbours=True)     # its own imports of its neighbours
    from ..triton.compile import jit_function
    if not hasattr(module, name):
        from triton.runtime.jit import JITFunction
        jits = sorted(n for n, v in vars(module).items() if isinstance(v, JITFunction))
        raise UsageError(f"{path} has no function {name!r}" + (f"; its @triton.jit functions: {', '.join(jits)}"
                                                                 if jits else "; it defines no @triton.jit function"))
    return jit_function(getattr(module, name), spec)


def run_triton(args) -> int:
    from ..triton import run
    from ..triton.toolchain import triton_module
    from ..machine import jit
    from ..machine.schedule import scheduled
    from .launched import emit, output_dir
    triton_module()
    values, tags = parse_values(args)
    kernel = load_kernel(args.kernel)
    grid = parse_dims(args.grid, "--grid")
    out_dir = output_dir(args.output)
    with scheduled(args.schedule), jit.announce_compiles():     # a first run compiles: say so (stderr)
        launched = run(kernel, grid, num_warps=args.num_warps, num_stages=args.num_stages, plain=args.plain, tags=tags,
                       trace=args.trace, provenance=args.provenance, batch=args.batch, **values)
    return emit(launched, out_dir, args.report == "json", source=args.kernel, grid=grid,
                block=(args.num_warps * 64, 1, 1))
