"""Run a @triton.jit kernel on the asm front end, compiled for gfx942 the way a launch from
tensors specialises it (pointers 16-byte aligned and under 2 GiB, so loads and stores are MUBUF on
raw buffer descriptors). Test-only: the kernels_triton tests use it to drive their kernels."""
from __future__ import annotations

import functools
import os

import ml_dtypes
import numpy as np
import pytest

from gfxsim import Buffer

# fusion on, triton 3.9's default, said explicitly (it warns while the default is implicit)
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
triton = pytest.importorskip("triton", reason="triton is not installed (pip install triton)")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from gfxsim.asm.parse import parse  # noqa: E402
from gfxsim.asm.run import run_asm  # noqa: E402

DTYPES = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16", np.dtype(np.int8): "i8",
          np.dtype(np.int32): "i32", np.dtype(np.uint8): "u8", np.dtype(np.int64): "i64",
          np.dtype(np.int16): "i16", np.dtype(np.uint16): "u16", np.dtype(np.float64): "fp64",
          np.dtype(ml_dtypes.float8_e4m3fnuz): "fp8e4b8", np.dtype(ml_dtypes.float8_e5m2fnuz): "fp8e5b16"}

FP8 = (np.dtype(ml_dtypes.float8_e4m3fnuz), np.dtype(ml_dtypes.float8_e5m2fnuz))


def _arg_names(fn) -> list[str]:
    return list(fn.arg_names)


def _compile(fn, signature: tuple, constexprs: tuple, num_warps: int, specialise: bool, fp8: tuple, options: tuple):
    sig = dict(signature)
    const = dict(constexprs)
    for name in const:
        sig[name] = "constexpr"
    attrs = {}
    if specialise:
        for i, name in enumerate(_arg_names(fn)):
            if sig[name].startswith("*"):
                attrs[(i,)] = [["tt.divisibility", 16], ["tt.pointer_range", 32]]
    src = ASTSource(fn, sig, constexprs={k: v for k, v in const.items()}, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("hip", "gfx942", 64), options=dict(options, num_warps=num_warps))
    text = k.asm["amdgcn"]
    return parse(text).kernel(k.metadata.name), k.metadata, text


_compiled = functools.lru_cache(maxsize=None)(_compile)


def compiled(fn, *args, num_warps: int = 4, specialise: bool = True, fp8: dict | None = None,
             options: dict | None = None, **constexprs):
    """(parsed Kernel, triton metadata, .s text) for ``fn`` launched with ``args`` (numpy arrays or
    Buffers for tensors, Python/numpy numbers for scalars). ``fp8``: {arg name: triton fp8 type}
    for uint8 arrays that hold fp8 bytes. ``options``: further HIP compile options (kpack=2, ...)."""
    names = [n for n in _arg_names(fn) if n not in constexprs]
    if len(names) != len(args):
        raise TypeError(f"{fn.__name__} takes {names}, got {len(args)} arguments")
    fp8 = fp8 or {}
    sig = []
    for name, a in zip(names, args):
        arr = a.array if isinstance(a, Buffer) else a
        if isinstance(arr, np.ndarray):
            sig.append((name, "*" + fp8.get(name, DTYPES[arr.dtype])))
        elif isinstance(a, (float, np.floating)):
            sig.append((name, "fp32"))
        else:
            sig.append((name, "i32"))
    return _compiled(fn, tuple(sig), tuple(sorted(constexprs.items())), num_warps, specialise,
                     tuple(sorted(fp8.items())), tuple(sorted((options or {}).items())))


def run(fn, grid, *args, num_warps: int = 4, specialise: bool = True, fp8: dict | None = None,
        options: dict | None = None, **constexprs):
    """Launch like ``fn[grid](*args, num_warps=..., **constexprs)``: (outputs, Run), outputs a dict
    of every tensor argument's array as the kernel left it."""
    kernel, md, _ = compiled(fn, *args, num_warps=num_warps, specialise=specialise, fp8=fp8, options=options,
                             **constexprs)
    names = [n for n in _arg_names(fn) if n not in constexprs]
    bufs = {}
    launch = []
    for name, a in zip(names, args):
        if isinstance(a, Buffer):
            bufs[name] = a
            launch.append(a)
        elif isinstance(a, np.ndarray):
            # device memory holds plain numbers: fp8 tensors travel as their bytes
            b = Buffer(name, a.view(np.uint8).copy() if a.dtype in FP8 else a.copy())
            bufs[name] = b
            launch.append(b)
        elif isinstance(a, (float, np.floating)):
            launch.append(np.float32(a))
        else:
            launch.append(np.int32(a))
    # the hidden scratch pointers Triton appends (global_scratch; profile_scratch from 3.6): null,
    # the kernels here use neither
    launch += [None] * (len(kernel.metadata[".args"]) - len(launch))
    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    r = run_asm(kernel, grid, md.num_warps * 64, args=launch, dynamic_lds=md.shared)
    return {n: b.array.view(a.dtype) if isinstance(a, np.ndarray) else b.array
            for (n, b), a in zip(bufs.items(), [a for a in args if isinstance(a, (np.ndarray, Buffer))])}, r
