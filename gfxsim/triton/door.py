"""A ``@triton.jit`` kernel on the asm front end, called as ``kernel[grid](*args, **kwargs)``.

    from gfxsim import triton as gt
    out, run = gt.run(add_kernel, (4,), x, y, np.zeros_like(x), n, BLOCK=256)
    out["out_ptr"]      # every tensor argument as the kernel left it, by parameter name
    run.findings        # the Run: findings, mmacs() token sets, trace, replay

What a GPU launch does, done for the simulator: the kernel is specialised on the arguments and
compiled for gfx942 (compile.py, cached); the compiled kernel's arguments — which Triton's metadata
leaves unnamed — are named after the JIT function's parameters that are not constants; the
pointers Triton appends after them (``global_scratch``, and from 3.6 ``profile_scratch``: one per
scratch size the metadata reports) get a zeroed buffer of size x programs bytes, or null when the
size is 0; a workgroup is num_warps x 64 work-items; the LDS the kernel's descriptor leaves at 0 is
sized at launch from ``metadata.shared``. Tensors are numpy arrays (copied, the caller's are not
written) or gfxsim Buffers (tags; ``tags={"k_cache": {1: "token"}}`` as for HIP kernels).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ArgumentError
from .compile import Compiled, bind_params, compile_kernel, jit_function, specialise

if TYPE_CHECKING:
    from ..asm.parse import Kernel
    from ..hip.door import Launched

# the pointers Triton's AMD launcher passes after the kernel's own arguments, in order, with the
# metadata keys of their per-program byte size: global_scratch (triton 3.3 on), profile_scratch
# (3.6 on). Which a kernel takes is read from its argument count (3.6's metadata has no
# global_scratch_size, yet its kernels take both); a size the metadata lacks is 0.
HIDDEN_POINTERS = (("global_scratch", "global_scratch_size"), ("profile_scratch", "profile_scratch_size"))


def hidden_pointers(kernel: Kernel, compiled: Compiled) -> tuple[str, ...]:
    """The names of the pointers Triton appended to ``kernel``'s arguments (every argument after
    the JIT function's runtime parameters); more than Triton appends, or one not a pointer, is an
    error naming the arguments."""
    args = list(kernel.metadata.get(".args", []))
    extra = args[len(compiled.runtime):]
    names = tuple(name for name, _ in HIDDEN_POINTERS[:len(extra)])
    if len(args) < len(compiled.runtime) or len(extra) > len(HIDDEN_POINTERS) or \
            any(a.get(".value_kind") != "global_buffer" for a in extra):
        raise ArgumentError(f"{compiled.name}: the compiled kernel takes {len(args)} arguments; the JIT signature "
                            f"without constants gives {len(compiled.runtime)} ({', '.join(compiled.runtime)}), and "
                            f"triton appends at most the pointers {', '.join(n for n, _ in HIDDEN_POINTERS)}")
    return names


def named_kernel(kernel: Kernel, compiled: Compiled) -> Kernel:
    """``kernel`` with its metadata's arguments named: the runtime parameters, then the hidden
    pointers."""
    names = [*compiled.runtime, *hidden_pointers(kernel, compiled)]
    named = [{**a, ".name": n} for a, n in zip(kernel.metadata.get(".args", []), names)]
    return dataclasses.replace(kernel, metadata={**kernel.metadata, ".args": named})


_kernels: dict = {}          # compiled .s path -> named Kernel (decoded once)


def load(compiled: Compiled) -> Kernel:
    """The compiled kernel parsed, its arguments named."""
    from ..asm.cache import parse_cached
    k = _kernels.get(compiled.asm)
    if k is None:
        f = parse_cached(compiled.asm)
        k = _kernels[compiled.asm] = named_kernel(f.kernel(compiled.name), compiled)
    return k


def grid_of(grid, params: dict, meta: dict) -> tuple[int, ...]:
    """``grid`` as Triton takes it: an int, a tuple, or a callable of the bound arguments (and
    constants) returning one."""
    if callable(grid):
        grid = grid({**params})
    if isinstance(grid, (int, np.integer)):
        grid = (int(grid),)
    try:
        dims = tuple(int(g) for g in grid)
    except (TypeError, ValueError):
        raise ArgumentError(f"{meta['name']}: grid {grid!r}: expected 1 to 3 program counts") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ArgumentError(f"{meta['name']}: grid {dims}: expected 1 to 3 positive program counts")
    return dims


# Triton's scalar parameter types and the numpy type of their kernel argument bytes
_SCALARS = {"i1": np.uint8, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u1": np.uint8,
            "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "fp16": np.float16,
            "bf16": np.uint16, "fp32": np.float32, "fp64": np.float64}


def scalar(v, ty: str, name: str):
    """A by-value argument as the bytes of its Triton type (a Python float is fp32 to Triton);
    anything else (a tensor, None) as given."""
    if ty.startswith("*") or v is None or isinstance(v, np.ndarray) and v.ndim > 0:
        return v
    t = _SCALARS.get(ty)
    if t is None:
        raise ArgumentError(f"parameter {name}: Triton type {ty} is not a scalar gfxsim passes")
    if ty == "bf16":
        import ml_dtypes
        return np.asarray(v, ml_dtypes.bfloat16).view(np.uint16)[()]
    return np.asarray(v).astype(t)[()]


def _opaque(v) -> bool:
    """An array of a type device memory does not hold as numbers (ml_dtypes' bf16, fp8)."""
    return isinstance(v, np.ndarray) and v.ndim > 0 and v.dtype.kind == "V"


def _bits(name: str, v: np.ndarray):
    """An ml_dtypes array as the unsigned integers of its bits (the kernel reads bytes), in a Buffer
    declaring the encoding its dtype names (float8_e4m3fnuz: e4m3fnuz; encoding.of_dtype)."""
    from ..machine.encoding import of_dtype
    from ..machine.memory import Buffer
    bits = v.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[v.dtype.itemsize])
    enc = of_dtype(v.dtype)
    return bits if enc is None else Buffer(name, bits, encoding=enc)


def compile_for(kernel, args: tuple = (), kwargs: Mapping | None = None, *, num_warps: int = 4,
                num_stages: int | None = None, plain: bool = False, options: Mapping | None = None):
    """(JIT function, bound parameters, Compiled) for a launch of ``kernel`` with these arguments."""
    fn = jit_function(kernel)
    opts = {"num_warps": int(num_warps), **({"num_stages": int(num_stages)} if num_stages is not None else {}),
            **dict(options or {})}
    params = bind_params(fn, tuple(args), dict(kwargs or {}))
    spec = specialise(fn, params, options=opts, plain=plain)
    return fn, params, compile_kernel(fn, spec)


def run(kernel, grid, *args, num_warps: int = 4, num_stages: int | None = None, plain: bool = False,
        tags: Mapping | None = None, trace: bool | None = None, provenance: bool | None = None,
        batch: int | None = None, launch_options=None, compile_options: Mapping | None = None,
        **kwargs) -> Launched:
    """Run ``kernel[grid](*args, **kwargs)`` on the asm front end. ``num_warps``/``num_stages``
    (and ``compile_options``: other triton options) as Triton takes them; ``plain``: compile
    without the launch's alignment and pointer-range specialisation. ``trace``, ``provenance``,
    ``batch`` (or ``launch_options=``, a LaunchOptions) as run_asm takes them. Returns (outputs by
    parameter name, Run, Kernel)."""
    from ..asm.inspect import check_kernel
    from ..asm.run import AsmError, run_asm
    from ..hip.door import Launched, bind
    from ..machine.memory import Buffer
    fn, params, compiled = compile_for(kernel, args, kwargs, num_warps=num_warps, num_stages=num_stages,
                                       plain=plain, options=compile_options)
    k = load(compiled)
    meta = compiled.metadata
    problems = check_kernel(k, "gfx942")
    if problems:                      # all at once, before anything runs (as the HIP door does)
        raise AsmError(f"{k.name} ({compiled.asm}) cannot run on the asm front end: " + "; ".join(
            f"{p.kind}{' line ' + str(p.line) if p.line else ''}: {p.text}" for p in problems))
    dims = grid_of(grid, params, meta)
    values = {n: scalar(params[n], compiled.signature[n], n) for n in compiled.runtime}
    programs = int(np.prod(dims))
    sizes = dict(HIDDEN_POINTERS)
    for a in k.program.abi.args[len(compiled.runtime):]:
        nbytes = int(meta.get(sizes[a.name]) or 0) * programs
        values[a.name] = np.zeros(nbytes, np.uint8) if nbytes else None
    views = {n: v.dtype for n, v in values.items() if _opaque(v)}
    bound = bind(k, {n: _bits(n, v) if n in views else v for n, v in values.items()}, tags)
    extra = {n: v for n, v in (("trace", trace), ("provenance", provenance), ("batch", batch)) if v is not None}
    r = run_asm(k, dims, int(meta["num_warps"]) * 64, args=bound, arch="gfx942", options=launch_options,
                dynamic_lds=int(meta.get("shared") or 0), **extra)
    outs = {n: b.array.view(views[n]) if n in views else b.array for n, b in bound.items()
            if isinstance(b, Buffer) and n in compiled.runtime}
    return Launched(outs, r, k)


__all__ = ["run", "compile_for", "load", "named_kernel", "hidden_pointers", "grid_of", "HIDDEN_POINTERS"]
