"""A ``@triton.jit`` kernel compiled for gfx942 as a launch from tensors would compile it.

``kernel[grid](x, y, out, n, BLOCK=256)`` specialises on its arguments before compiling: a pointer
whose address is 16-byte aligned gets ``tt.divisibility=16``, an integer divisible by 16 the same,
an integer equal to 1 becomes a constant, and on AMD a tensor whose storage spans under 2 GiB gets
``tt.pointer_range=32``, which turns its loads and stores into MUBUF ``buffer_load``/``buffer_store``
on a raw buffer descriptor. ``specialise`` asks the installed triton's own JIT binder for that
specialisation, handing it each numpy array as a tensor stand-in (its Triton element type, an
aligned address — every buffer of the asm launch is at a 1 TiB boundary — and its byte size as
the pointer range), so the code that runs is the code a GPU launch of those arrays runs.
``plain=True`` compiles without the alignment and range attributes (global_load/global_store, the
form a kernel gets from tensors triton cannot vouch for).

``compile_kernel`` compiles with triton.compile for GPUTarget("hip", "gfx942", 64) and keeps the
AMDGCN text and the metadata: in memory, and on disk under CACHE/triton/KEY/ (CACHE as for HIP
sources: $GFXSIM_CACHE_DIR, else ~/.cache/gfxsim), KEY hashing the kernel's source with that of the
functions it calls (the JIT's cache_key), the specialisation, the options and the triton version.
"""
from __future__ import annotations

import hashlib
import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError, GfxSimError
from .toolchain import triton_module

ARCH = "gfx942"
# Triton's element type of each numpy dtype (ml_dtypes' for bf16 and the fp8 formats)
_TRITON_TYPE = {"float32": "float32", "float16": "float16", "float64": "float64", "bfloat16": "bfloat16",
                "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
                "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "int1",
                "float8_e4m3fnuz": "float8e4b8", "float8_e5m2fnuz": "float8e5b16", "float8_e4m3fn": "float8e4nv",
                "float8_e5m2": "float8e5"}
_OPTIONS = ("num_warps", "num_stages", "waves_per_eu", "matrix_instr_nonkdim", "kpack", "enable_fp_fusion")


class TritonCompileError(GfxSimError, RuntimeError):
    """triton.compile failed on a kernel; the message names it and gives triton's own error."""


class _Tensor:
    """What Triton's binder reads of a tensor: dtype, data_ptr() and (AMD) ptr_range()."""

    def __init__(self, dtype, nbytes: int):
        self.dtype, self._nbytes = dtype, nbytes

    def data_ptr(self) -> int:
        return 1 << 44                 # gfxsim.asm.launch.BASE: every buffer is 1 TiB-aligned

    def ptr_range(self) -> int:
        return self._nbytes


def triton_dtype(array: np.ndarray, where: str):
    """The triton.language dtype of a numpy array's elements."""
    import triton.language as tl
    name = _TRITON_TYPE.get(np.dtype(array.dtype).name)
    if name is None:
        raise ArgumentTypeError(f"{where}: a {array.dtype} array has no Triton element type (known: "
                                f"{', '.join(sorted(_TRITON_TYPE))})")
    return getattr(tl, name)


@dataclass(frozen=True)
class Specialisation:
    signature: dict          # parameter -> Triton type ("*fp32", "i32", "constexpr")
    constexprs: dict         # (index,) -> value
    attrs: dict              # (index,) -> [["tt.divisibility", 16], ...]
    runtime: tuple           # the parameters the compiled kernel takes, in order (constexprs left out)
    options: dict            # num_warps, ... as given

    def key(self, fn) -> str:
        t = triton_module()
        text = json.dumps([fn.cache_key, t.__version__, ARCH, self.signature,
                           sorted((list(k), repr(v)) for k, v in self.constexprs.items()),
                           sorted((list(k), v) for k, v in self.attrs.items()), sorted(self.options.items())],
                          default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:32]


def jit_function(kernel, where: str = "gfxsim.triton"):
    """``kernel`` if it is a @triton.jit function (an autotuned or heuristics wrapper: its .fn)."""
    from triton.runtime.jit import JITFunction
    fn = kernel
    while not isinstance(fn, JITFunction) and hasattr(fn, "fn"):
        fn = fn.fn
    if not isinstance(fn, JITFunction):
        raise ArgumentTypeError(f"{where}: {kernel!r} is not a @triton.jit function")
    return fn


def bind_params(fn, args: tuple, kwargs: dict) -> dict:
    """Parameter name -> value, as ``fn[grid](*args, **kwargs)`` binds them (defaults applied)."""
    names = [p.name for p in fn.params]
    unknown = set(kwargs) - set(names)
    if unknown:
        raise ArgumentError(f"{fn.__name__} has no parameter {', '.join(sorted(unknown))}; it takes "
                            f"{', '.join(names)}")
    if len(args) > len(names):
        raise ArgumentError(f"{fn.__name__} takes {len(names)} parameters ({', '.join(names)}), got {len(args)} "
                            "positional arguments")
    values = dict(zip(names, args))
    twice = set(values) & set(kwargs)
    if twice:
        raise ArgumentError(f"{fn.__name__}: {', '.join(sorted(twice))} given by position and by name")
    values.update(kwargs)
    for p in fn.params:
        if p.name not in values:
            if not p.has_default:
                raise ArgumentError(f"{fn.__name__}: parameter {p.name} not given; it takes {', '.join(names)}")
            values[p.name] = p.default
    return {n: values[n] for n in names}


def specialise(fn, values: dict, *, options: dict, plain: bool = False) -> Specialisation:
    """The specialisation a launch of ``fn`` with ``values`` (parameter -> numpy array, gfxsim
    Buffer, number, None) gets from Triton's binder for gfx942."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature
    from ..machine.memory import Buffer
    backend = make_backend(GPUTarget("hip", ARCH, 64))
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    shown = {}
    for n, v in values.items():
        if isinstance(v, Buffer):
            v = v.array
        if isinstance(v, np.ndarray) and v.ndim > 0:
            shown[n] = _Tensor(triton_dtype(v, f"{fn.__name__}: argument {n}"), v.nbytes)
        elif isinstance(v, np.generic):
            shown[n] = v.item()
        else:
            shown[n] = v
    with _ranges_answered(type(backend)):
        _, spec, _ = binder(**shown)
    names = [p.name for p in fn.params]
    signature = {n: s[0] for n, s in zip(names, spec)}
    constexprs = {(i,): values[n] for i, n in enumerate(names) if signature[n] == "constexpr"}
    attrs = {} if plain else {(i,): backend.parse_attr(s[1]) for i, s in enumerate(spec)
                              if s[0] != "constexpr" and isinstance(s[1], str)}
    runtime = tuple(n for n in names if signature[n] != "constexpr")
    return Specialisation(signature, constexprs, attrs, runtime, dict(options))


_patch_lock = threading.Lock()


@contextmanager
def _ranges_answered(backend_cls):
    """The AMD backend's pointer-range check answers a tensor stand-in from its ptr_range():
    triton 3.6's HIPBackend.is_within_2gb imports torch before it looks at ptr_range (3.9 does not),
    so without torch every specialisation would fail there."""
    orig = backend_cls.__dict__.get("is_within_2gb")
    if orig is None:
        yield
        return
    real = orig.__func__ if isinstance(orig, staticmethod) else orig

    def within(arg):
        return arg.ptr_range() <= 2 ** 31 - 1 if isinstance(arg, _Tensor) else real(arg)
    with _patch_lock:
        backend_cls.is_within_2gb = staticmethod(within)
        try:
            yield
        finally:
            backend_cls.is_within_2gb = orig


@dataclass(frozen=True)
class Compiled:
    name: str                # the kernel's symbol
    asm: Path                # the AMDGCN .s
    metadata: dict           # triton's metadata (shared, num_warps, global_scratch_size, ...), JSON-able
    runtime: tuple           # the kernel's parameters in order, constexprs left out
    signature: dict = None   # parameter -> Triton type


_memory: dict = {}
_lock = threading.Lock()


def cache_dir() -> Path:
    from ..hip.source import cache_root
    return cache_root() / "triton"


def compile_kernel(fn, spec: Specialisation) -> Compiled:
    """``fn`` compiled for gfx942 under ``spec`` (from the cache when compiled before)."""
    key = spec.key(fn)
    with _lock:
        hit = _memory.get(key)
    if hit is not None:
        return hit
    folder = cache_dir() / key
    meta_path, asm_path = folder / "metadata.json", folder / f"{fn.__name__}.s"
    if meta_path.is_file() and asm_path.is_file():
        meta = json.loads(meta_path.read_text())
    else:
        meta = _compile(fn, spec, folder, asm_path, meta_path)
    out = Compiled(meta["name"], asm_path, meta, spec.runtime, dict(spec.signature))
    with _lock:
        _memory[key] = out
    return out


def _compile(fn, spec, folder: Path, asm_path: Path, meta_path: Path) -> dict:
    triton = triton_module()
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    target = GPUTarget("hip", ARCH, 64)
    options = make_backend(target).parse_options(dict(spec.options))
    src = ASTSource(fn, spec.signature, spec.constexprs, spec.attrs)
    try:
        compiled = triton.compile(src, target=target, options=options.__dict__)
    except Exception as e:            # triton's own (CompilationError, MLIR pass failures): kept as the cause
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        why = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else type(e).__name__)
        raise TritonCompileError(f"triton cannot compile {fn.__name__} for {ARCH} with {spec.signature}: "
                                 f"{why.strip()}") from e
    # the metadata as triton wrote it (its JSON file beside the IRs), scalars kept
    path = next(Path(p) for k, p in compiled.metadata_group.items() if k.endswith(".json"))
    meta = {k: v for k, v in json.loads(path.read_text()).items() if isinstance(v, (int, float, str, bool, type(None)))}
    folder.mkdir(parents=True, exist_ok=True)
    tmp = asm_path.with_suffix(".s.tmp")
    tmp.write_text(compiled.asm["amdgcn"])
    tmp.replace(asm_path)
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def clear() -> None:
    """Forget the kernels compiled in this process (the disk cache stays)."""
    with _lock:
        _memory.clear()


__all__ = ["specialise", "compile_kernel", "bind_params", "jit_function", "triton_dtype", "Specialisation",
           "Compiled", "TritonCompileError", "clear", "cache_dir", "ARCH"]
