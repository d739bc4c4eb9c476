"""Compile one HIP source you bring (any folder) to clang AMDGPU assembly: what `gfxsim hip run`
and gfxsim.hip.run execute.

Unlike the twins (build.py: -nogpuinc -nogpulib and gfxsim_hip.h), a source here is real HIP: it
includes <hip/hip_runtime.h> from Debian's HIP headers and links the ROCm device libraries
(devicelibs.py, gfx942's missing ISA-version library built on first use). The .s goes to a cache
folder keyed by the source, its own headers (clang's -MMD list), the flags and the compiler, so an
unchanged source is not compiled again.

gfx936 (no upstream clang knows it) is the twins' stand-in: gfx942 code, with ``__gfx936__``
defined instead of ``__gfx942__`` so the kernel's gfx936 branches are the ones compiled, and each
Hygon MMAC builtin of gfx936's records defined as the gfx942 MFMA builtin of the same shape and
A/B layout; the asm front end then runs those v_mfma as gfx936's v_mmac, D in the jump layout.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..cachedir import cache_root
from .build import BuildError, compile_flags
from .devicelibs import device_lib_dir, hip_include, hip_version
from .toolchain import Target, find_toolchain, get_target

FLAGS = ("-x", "hip", "-std=c++17", "-O3", "--cuda-device-only", "-fhip-kernel-arg-name", "-gline-tables-only")
# headers of later ROCm releases that Debian's HIP 5.2 does not ship
NEWER_HIP_HEADERS = ("hip_bf16.h", "hip_fp8.h", "amd_hip_bf16.h", "amd_hip_fp8.h", "hip_fp16_gcc.h")
_NOT_FOUND = re.compile(r"^(.*?):(\d+):\d+: fatal error: '([^']+)' file not found", re.M)
# the MFMA operand type each MMAC input type is passed as (the gfx942 builtins' signatures)
_OPERAND_TYPE = {"i8": "long", "f16": "_Float16 __attribute__((ext_vector_type(4)))",
                 "bf16": "short __attribute__((ext_vector_type(4)))"}


def mmac_defines() -> tuple[str, ...]:
    """-D flags that make each gfx936 MMAC builtin the gfx942 MFMA builtin of the same mnemonic
    shape (v_mmac_X -> v_mfma_X, whose A and B layouts are the same), broadcast controls 0."""
    from ..arch import get_arch
    cdna = get_arch("gfx942").instructions
    out = []
    for mn, insn in get_arch("gfx936").instructions.items():
        twin = cdna.get(mn.replace("v_mmac_", "v_mfma_", 1))
        if twin is None or not insn.builtin or not twin.builtin:
            continue
        t = _OPERAND_TYPE[insn.a_type]
        out.append(f"{insn.builtin}(a,b,c)={twin.builtin}(__builtin_bit_cast({t},(a)),"
                   f"__builtin_bit_cast({t},(b)),(c),0,0,0)")
    return tuple(out)


def source_flags(target: Target, defines=(), include=()) -> list[str]:
    inc = hip_include()
    flags = [*FLAGS, f"--offload-arch={target.offload_arch}", f"--rocm-path={inc.parent}",
             f"--hip-version={hip_version(inc)}", *(f"-I{Path(d).resolve()}" for d in include)]
    if target.stand_in:
        flags += [f"-U__{target.offload_arch}__", f"-D__{target.arch}__=1", *(f"-D{d}" for d in mmac_defines())]
    compile_flags(target, defines)                 # checks each define's form
    return flags + [f"-D{d}" for d in defines]


@dataclass(frozen=True)
class SourceBuild:
    source: Path
    arch: str
    asm: Path
    rebuilt: bool           # False: the cached .s was up to date
    command: tuple[str, ...]


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


def _own_headers(depfile: Path, target: Path) -> list[str]:
    """The headers clang's -MMD file lists for ``target`` (system headers are not listed)."""
    text = depfile.read_text().replace("\\\n", " ")
    _, _, deps = text.partition(": ")
    return [d for d in deps.split() if d and Path(d).resolve() != target.resolve()]


def _headers_digest(headers) -> str | None:
    try:
        return _digest(*(Path(h).read_bytes() for h in headers), *headers)
    except OSError:
        return None


def compile_source(source, arch: str = "gfx942", *, defines=(), include=(), flags=(), cache: Path | None = None,
                   force: bool = False) -> SourceBuild:
    """``source`` (a .hip file) compiled for ``arch`` to assembly in the cache (kept while the
    source, its headers, the flags and the compiler are unchanged). ``flags``: more clang flags,
    after gfxsim's (-std=c++20, -ffast-math, ...)."""
    src = Path(source).expanduser().resolve()
    if not src.is_file():
        raise BuildError(f"{source}: no such HIP source")
    target = get_target(arch)
    tc = find_toolchain(target.arch)
    cache = Path(cache) if cache is not None else cache_root()
    extra = tuple(flags)
    flags = [*source_flags(target, defines, include),
             f"--rocm-device-lib-path={device_lib_dir(tc, target.offload_arch, cache)}", *extra]
    key = _digest(src.read_bytes(), src, tc.version, *flags)
    out = cache / "hip-src" / target.arch / key[:24]
    asm, record = out / f"{src.stem}.s", out / "headers.json"
    cmd = [str(tc.clang), *flags, "-MMD", "-MF", str(out / "deps.d"), "-S", str(src), "-o", str(asm)]
    if not force and asm.is_file() and record.is_file():
        rec = json.loads(record.read_text())
        if rec.get("digest") == _headers_digest(rec.get("headers", [])):
            return SourceBuild(src, target.arch, asm, False, tuple(cmd))
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{src.stem}.{os.getpid()}.s"
    run_cmd = [*cmd[:-1], str(tmp)]
    r = subprocess.run(run_cmd, capture_output=True, text=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise _compile_error(src, target, run_cmd, r)
    headers = _own_headers(out / "deps.d", src)
    os.replace(tmp, asm)
    record.write_text(json.dumps({"source": str(src), "headers": headers, "digest": _headers_digest(headers),
                                  "command": cmd}, indent=1) + "\n")
    return SourceBuild(src, target.arch, asm, True, tuple(cmd))


def _compile_error(src: Path, target: Target, cmd, r) -> BuildError:
    """The compiler's failure; a header that is not there is named (with why, for HIP's own)."""
    m = _NOT_FOUND.search(r.stderr)
    if m:
        where, line, header = Path(m.group(1)).name, m.group(2), m.group(3)
        name = Path(header).name
        if header.startswith("hip/") or name in NEWER_HIP_HEADERS:
            inc = hip_include()
            why = (f"the installed HIP {hip_version(inc)} headers ({inc}/hip, Debian's libamdhip64-dev) do not have "
                   f"it{' (it came with a later ROCm)' if name in NEWER_HIP_HEADERS else ''}; gfxsim compiles with "
                   "those headers, so the source must do without it (e.g. declare the types it needs itself)")
        else:
            why = "add the folder that holds it with --include DIR (gfxsim.hip.run(..., include=[DIR]))"
        return BuildError(f"{src.name} includes <{header}>, which is not found: {why}",
                          source=f"{where}:{line}")
    return BuildError(f"clang failed for {src.name} --arch {target.arch} (exit {r.returncode}):\n"
                      f"{' '.join(cmd)}\n{r.stderr.strip()}")
