"""Compile a project's HIP kernels (project.sources/*.hip, see project.py) to assembly and a linked
code object per target.

Output: <project.build>/<arch>/<kernel>.s and .co, and build.json beside them recording the
compiler path and --version, every command line, and a hash of the sources; a kernel is recompiled
only when one of those changed or an output is missing. The .co is assembled from the very .s that
`gfxsim hip inspect` reads, so the two always agree.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from ..asm.cache import parse_cached
from ..asm.parse import AsmFile
from .project import Project
from ..errors import GfxSimError
from .toolchain import Target, Toolchain, find_toolchain, get_target

# -nogpuinc -nogpulib: gfxsim_hip.h replaces hip_runtime.h, so no hidden kernel arguments and no
# device-library calls. -fhip-kernel-arg-name puts the argument names in the metadata, so the
# hardware harness and the asm front end bind arguments by name.
# -gline-tables-only: clang's .loc line tables (no other debug info; the code is the same), so the asm
# front end's events and findings name the HIP source line beside the assembly line
CFLAGS = ("-x", "hip", "-std=c++17", "-O3", "-Wall", "-nogpuinc", "-nogpulib", "--cuda-device-only",
          "-fhip-kernel-arg-name", "-gline-tables-only")
RECORD = "build.json"
_DEFINE = re.compile(r"^[A-Za-z_]\w*(=\S*)?$")


class BuildError(GfxSimError, ValueError):
    """A build that cannot be made: a bad define, a compiler that failed (its command and output),
    an entry point no kernel file defines."""


@dataclass(frozen=True)
class KernelBuild:
    kernel: str             # file stem, e.g. "pv_int8"
    arch: str               # target asked for, e.g. "gfx936"
    source: Path
    asm: Path
    code_object: Path
    rebuilt: bool           # False: the outputs were up to date
    seconds: float


def arch_dir(arch: str, project: Project) -> Path:
    return project.build / get_target(arch).arch


def compile_flags(target: Target, defines=()) -> list[str]:
    for d in defines:
        if not _DEFINE.match(d):
            raise BuildError(f"bad define {d!r}; use NAME or NAME=VALUE")
    return [*CFLAGS, f"--offload-arch={target.offload_arch}", *(f"-D{d}" for d in (*target.defines, *defines))]


def inputs_hash(source: Path, project: Project) -> str:
    """The source and every header of the project's sources (the twins include only those)."""
    h = hashlib.sha256()
    for p in [source, *project.headers]:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _commands(tc: Toolchain, target: Target, flags, src: Path, out: Path) -> list[list[str]]:
    s, o, co = out.with_suffix(".s"), out.with_suffix(".o"), out.with_suffix(".co")
    return [
        [str(tc.clang), *flags, "-S", str(src), "-o", str(s)],
        [str(tc.clang), "--target=amdgcn-amd-amdhsa", f"-mcpu={target.offload_arch}", "-c", str(s), "-o", str(o)],
        [str(tc.ld_lld), "-shared", str(o), "-o", str(co)],
    ]


def _run(cmds, kernel: str, arch: str):
    for cmd in cmds:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise BuildError(f"{Path(cmd[0]).name} failed for {kernel}.hip --arch {arch} "
                             f"(exit {r.returncode}):\n{' '.join(cmd)}\n{r.stderr.strip()}")


def _shown(path: Path, project: Project) -> str:
    root = project.sources.parent
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def complete_asm(path: Path) -> bool:
    """Whether clang's assembly at ``path`` is whole: it ends with its .amdgpu_metadata block (a file
    cut short, by a full disk or an interrupted copy, lost the arguments it declares), so a cut one
    is compiled again rather than read as a kernel without arguments."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            return b".end_amdgpu_metadata" in f.read()
    except OSError:
        return False


@cache
def version_full(clang: Path) -> str:
    """`clang --version` (asked once per process: a build that finds everything up to date takes
    milliseconds, the compiler's start ~0.1 s)."""
    return subprocess.run([str(clang), "--version"], capture_output=True, text=True).stdout.strip()


def load_record(directory: Path) -> dict:
    try:
        return json.loads((directory / RECORD).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def build(kernels=None, arch: str = "gfx942", *, project: Project, defines=(), force: bool = False,
          jobs: int | None = None) -> list[KernelBuild]:
    """Compile the project's `kernels` (default: all) for `arch`; up-to-date outputs are kept."""
    target = get_target(arch)
    kernels = list(kernels or project.kernels)
    sources = {k: project.source(k) for k in kernels}
    tc = find_toolchain(target.arch)
    flags = compile_flags(target, defines)
    out_dir = arch_dir(target.arch, project)
    out_dir.mkdir(parents=True, exist_ok=True)
    old = load_record(out_dir)
    compiler = {**tc.describe(), "version_full": version_full(tc.clang)}
    same_setup = old.get("compiler") == compiler and old.get("flags") == flags
    entries = dict(old.get("kernels", {})) if same_setup else {}

    def one(kernel: str) -> KernelBuild:
        src, stem = sources[kernel], out_dir / kernel
        digest = inputs_hash(src, project)
        rec = entries.get(kernel, {})
        fresh = (not force and rec.get("inputs_sha256") == digest
                 and complete_asm(stem.with_suffix(".s")) and stem.with_suffix(".co").is_file())
        t0 = time.perf_counter()
        if not fresh:
            tmp = out_dir / f".{kernel}.{os.getpid()}"
            cmds = _commands(tc, target, flags, src, tmp)
            try:
                _run(cmds, kernel, target.arch)
                for ext in (".s", ".co"):
                    os.replace(tmp.with_suffix(ext), stem.with_suffix(ext))
            finally:
                for ext in (".s", ".o", ".co"):
                    tmp.with_suffix(ext).unlink(missing_ok=True)
            entries[kernel] = {"source": _shown(src, project), "inputs_sha256": digest,
                               "asm": f"{kernel}.s", "code_object": f"{kernel}.co",
                               "commands": [[a.replace(str(tmp), str(stem)) for a in c] for c in cmds]}
        return KernelBuild(kernel, target.arch, src, stem.with_suffix(".s"), stem.with_suffix(".co"), not fresh,
                           time.perf_counter() - t0)

    with ThreadPoolExecutor(max_workers=jobs or min(len(kernels), os.cpu_count() or 1)) as pool:
        results = list(pool.map(one, kernels))
    if any(r.rebuilt for r in results) or not same_setup:
        record = {"arch": target.arch, "offload_arch": target.offload_arch, "stand_in": target.stand_in,
                  "note": target.note, "compiler": compiler, "flags": flags, "kernels": entries}
        tmp = out_dir / f".{RECORD}.{os.getpid()}"
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        os.replace(tmp, out_dir / RECORD)
    return results


def asm_path(kernel: str, arch: str, *, project: Project) -> Path:
    """The kernel's assembly for `arch`, compiled first if missing or stale."""
    return build([kernel], arch, project=project)[0].asm


_FOUND: dict = {}       # find_entry's answers, with the folders' listing they were found under


def _listing(folder: Path) -> tuple:
    """Every file of ``folder`` with its size and times (a file added, removed or written shows)."""
    try:
        with os.scandir(folder) as it:
            return tuple(sorted((e.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                                for e in it if e.is_file() for st in (e.stat(),)))
    except FileNotFoundError:
        return ()


def find_entry(entry: str, arch: str, *, project: Project, defines=()) -> tuple[KernelBuild, AsmFile]:
    """The build and parsed assembly of the kernel file that defines entry point `entry` (each .s
    parsed once per content: gfxsim.asm.cache). Asked again with the sources, the build folder and
    the compiler's environment unchanged, the last answer (a launch asks once per run: the build's
    staleness check hashes every source)."""
    key = (entry, arch, project, tuple(defines), os.environ.get("GFXSIM_CLANG"), os.environ.get("PATH"))
    where = (_listing(project.sources), _listing(arch_dir(get_target(arch).arch, project)))
    got = _FOUND.get(key)
    if got is not None and got[0] == where:
        b, f = got[1]
        return (b if not b.rebuilt else replace(b, rebuilt=False, seconds=0.0)), f
    for b in build(None, arch, project=project, defines=defines):
        f = parse_cached(b.asm)
        if entry in f.kernels:
            _FOUND[key] = ((_listing(project.sources), _listing(arch_dir(get_target(arch).arch, project))), (b, f))
            return b, f
    raise BuildError(f"no HIP kernel {entry!r}: not a file of {project.sources} ({', '.join(project.kernels)}) "
                     f"nor one of their entry points (e.g. pv_int8_fragment, paged_attention_reduce) for {arch}")


def find_kernel(entry: str, arch: str, *, project: Project, defines=()):
    """The parsed Kernel (gfxsim.asm) of ``project``'s entry point ``entry`` built for ``arch``: what
    gfxsim.asm.run.run_asm runs."""
    _, f = find_entry(entry, arch, project=project, defines=defines)
    return f.kernel(entry)
