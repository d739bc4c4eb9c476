"""Your own HIP kernel on the asm front end: a .hip source (compiled by source.py) or any clang
AMDGPU .s, one entry point, a grid and a block, the arguments by name.

    from gfxsim import hip
    out, run = hip.run("scale.hip", "scale", grid=4, block=64, out=np.zeros(256, np.float32), x=x, s=2.0)
    out["out"]          # every buffer argument as the kernel left it
    run.findings        # the Run: findings, mmacs() token sets, trace, replay, as for the twins

Arguments: a numpy array for a pointer (copied: the caller's array is not written), a gfxsim
Buffer to give it tags (or ``tags={"k_cache": {1: "token"}}``: the element's index along axis 1
is its token), a number for a by-value argument, None for a null pointer. ``lds=BYTES``: dynamic
LDS (``extern __shared__``) given at launch. Before anything runs, ``check`` (gfxsim.asm.inspect)
lists every instruction, matrix record and ABI feature the front end lacks, all at once.
"""
from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..errors import ArgumentError, NotFoundError

if TYPE_CHECKING:
    from ..asm.parse import AsmFile, Kernel
    from ..machine.launch import Run

HIP_SUFFIXES = (".hip", ".cpp", ".cc", ".cu")
_SOURCE_ARGS = {"source", "kernel", "grid", "block"}


class Launched(NamedTuple):
    outputs: dict          # buffer argument -> numpy array as the kernel left it
    run: Run               # findings, records, trace, replay
    kernel: Kernel         # the entry point that ran (its .s, instructions, ABI)


def load(source, arch: str | None = None, *, defines=(), include=(), flags=(), cache=None) -> tuple[AsmFile, str]:
    """The parsed assembly of ``source`` (a HIP source, compiled first, or a .s) and the arch to run
    it on (a .s: its own processor unless ``arch`` is given)."""
    from ..asm.cache import parse_cached
    from .source import compile_source
    path = Path(source)
    if path.suffix == ".s":
        if defines or include or flags:
            raise ArgumentError(f"{source}: defines, include folders and clang flags apply to HIP sources, not to a .s")
        f = parse_cached(path)
        return f, (arch or f.processor or "gfx942")
    if path.suffix not in HIP_SUFFIXES:
        raise ArgumentError(f"{source}: expected a HIP source ({', '.join(HIP_SUFFIXES)}) or clang assembly (.s)")
    arch = arch or "gfx942"
    b = compile_source(path, arch, defines=defines, include=include, flags=flags, cache=cache)
    return parse_cached(b.asm), b.arch


def demangled(symbol: str) -> str:
    """The function name of an Itanium-mangled symbol (_Z5scalePfPKffi -> scale, _ZN2ns4stepEv ->
    ns::step); the symbol itself when it is not mangled (extern "C")."""
    m = re.match(r"_Z(N?)", symbol)
    if not m:
        return symbol
    rest, parts = symbol[m.end():], []
    while True:
        n = re.match(r"(\d+)", rest)
        if not n:
            break
        size = int(n.group(1))
        parts.append(rest[n.end():n.end() + size])
        rest = rest[n.end() + size:]
        if not m.group(1):
            break
    return "::".join(parts) or symbol


def find(f: AsmFile, name: str) -> Kernel:
    """The entry point ``name`` of ``f``: its symbol, or the function name it mangles."""
    if name in f.kernels:
        return f.kernels[name]
    hits = [k for s, k in f.kernels.items() if demangled(s) == name]
    if len(hits) == 1:
        return hits[0]
    shown = ", ".join(f"{demangled(s)} ({s})" if demangled(s) != s else s for s in f.kernels) or "none"
    if hits:
        raise NotFoundError(f"{f.path}: {name!r} names {len(hits)} overloads; pass the symbol: {shown}")
    raise NotFoundError(f"{f.path} has no kernel {name!r}; its kernels: {shown}")


def tag_buffer(name: str, array: np.ndarray, tags: Mapping) -> object:
    """A Buffer of ``array`` whose tag ``field`` is each element's index along ``axis``, for each
    axis -> field of ``tags`` (the CLI's --tag NAME:AXIS=FIELD)."""
    from ..machine.memory import Buffer
    arrays = {}
    for axis, field in tags.items():
        ax = int(axis)
        if not -array.ndim <= ax < array.ndim:
            raise ArgumentError(f"tag {name}:{axis}={field}: {name} has {array.ndim} axes (shape {array.shape})")
        shape = [1] * array.ndim
        shape[ax] = array.shape[ax]
        arrays[field] = np.arange(array.shape[ax], dtype=np.int64).reshape(shape)
    return Buffer(name, np.array(array, copy=True), arrays)


def bind(kernel: Kernel, values: Mapping, tags: Mapping | None = None) -> dict:
    """The launch's arguments: arrays and Buffers copied into Buffers (tagged as ``tags`` says; a
    Buffer's own tags, encoding, ``expect`` declarations and unwritten bytes kept), numbers and None (a null
    pointer) as given."""
    from ..machine.memory import Buffer
    tags = dict(tags or {})
    unknown = set(tags) - set(values)
    if unknown:
        raise ArgumentError(f"{kernel.name}: tags for {', '.join(sorted(unknown))}, which no argument given names")
    bound = {}
    for n, v in values.items():
        if isinstance(v, Buffer):             # a copy keeps its tags, expected coverage and unwritten bytes
            arrays = dict(v.tag_arrays)
            if n in tags:
                arrays.update(tag_buffer(n, v.array, tags[n]).tag_arrays)
            b = Buffer(n, v.array.copy(), arrays, encoding=v.declared_encoding)
            b.expects = dict(v.expects)
            b.written = None if v.written is None else v.written.copy()
            bound[n] = b
        elif isinstance(v, np.ndarray) and v.ndim > 0:
            bound[n] = tag_buffer(n, v, tags.get(n, {}))
        elif n in tags:
            raise ArgumentError(f"{kernel.name}: argument {n} is tagged but is not an array")
        else:
            bound[n] = v.item() if isinstance(v, np.ndarray) else v
    return bound


def run(source, kernel: str, grid, block, *, arch: str | None = None, tags: Mapping | None = None,
        args: Mapping | None = None, defines=(), include=(), flags=(), lds: int | None = None, trace: bool | None = None,
        provenance: bool | None = None, batch: int | None = None, options=None, cache=None,
        **kwargs) -> Launched:
    """Run entry point ``kernel`` of ``source`` (.hip compiled with clang, or a .s) over ``grid``
    workgroups of ``block`` work-items on ``arch`` (gfx942, gfx940, gfx90a, gfx936; a .s: its
    own). ``defines``, ``include`` (folders), ``flags`` (more clang flags) compile a HIP source.
    Arguments by name in ``args`` or as keywords. ``trace``, ``provenance``, ``batch`` (or
    ``options=``, a LaunchOptions) as run_asm takes them, its defaults where not given. Returns
    (outputs, run, kernel)."""
    from ..asm.inspect import check_kernel
    from ..asm.run import AsmError, run_asm
    from ..machine.memory import Buffer
    values = {**(args or {}), **kwargs}
    f, arch = load(source, arch, defines=defines, include=include, flags=flags, cache=cache)
    k = find(f, kernel)
    problems = check_kernel(k, arch)
    if problems:
        raise AsmError(f"{k.name} ({f.path}) cannot run on the asm front end for {arch}: "
                       + "; ".join(f"{p.kind}{' line ' + str(p.line) if p.line else ''}: {p.text}" for p in problems))
    bound = bind(k, values, tags)
    extra = {k: v for k, v in (("trace", trace), ("provenance", provenance), ("batch", batch)) if v is not None}
    if lds is not None:
        if "dynamic_lds" not in inspect.signature(run_asm).parameters:
            raise ArgumentError(f"{k.name}: lds={lds}: this asm front end sizes LDS from the kernel descriptor only "
                                "(no dynamic LDS)")
        extra["dynamic_lds"] = int(lds)
    r = run_asm(k, grid, block, args=bound, arch=arch, options=options, **extra)
    return Launched({n: b.array for n, b in bound.items() if isinstance(b, Buffer)}, r, k)


__all__ = ["run", "load", "find", "bind", "tag_buffer", "demangled", "Launched"]
