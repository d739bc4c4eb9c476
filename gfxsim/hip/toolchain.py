"""Which clang (and ld.lld, llvm-mc) compiles the HIP twins for each target, found on this machine.

Upstream LLVM knows gfx940/gfx941/gfx942 (clang-19; clang-22 dropped gfx940/gfx941; clang-15 has
gfx940 only) and no Hygon target. gfx936 is built as a stand-in: compiled for gfx942 with
-DGFXSIM_JUMP_LAYOUT=1, so the code keeps gfx936's D-layout index formulas and the A/B operand
layouts, identical on both, make v_mfma_i32_16x16x32_i8 a faithful carrier of v_mmac_i32_16x16x32_i8
for gfxsim's asm front end (see kernels_hip/gfxsim_hip.h and docs/hip.md).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..errors import GfxSimError, located

APT_HINT = "apt-get install -y --no-install-recommends clang-19 lld-19 llvm-19"


@dataclass(frozen=True)
class Target:
    arch: str                      # what `gfxsim hip build --arch` names
    offload_arch: str              # what clang compiles for
    defines: tuple[str, ...]       # -D flags the target implies
    clang_majors: tuple[int, ...]  # clang versions that know offload_arch, preferred first
    note: str = ""
    twins: bool = True             # kernels_hip/ builds for it (`gfxsim hip build --arch all`)

    @property
    def stand_in(self) -> bool:
        return self.arch != self.offload_arch


TARGETS = {t.arch: t for t in (
    Target("gfx942", "gfx942", (), (19, 22)),
    Target("gfx940", "gfx940", (), (19, 15)),
    Target("gfx941", "gfx941", (), (19,)),
    Target("gfx90a", "gfx90a", (), (19, 22, 15), twins=False),
    Target("gfx936", "gfx942", ("GFXSIM_JUMP_LAYOUT=1",), (19, 22),
           "stand-in: gfx942 code with gfx936's D-layout index formulas (jump layout); "
           "no upstream clang knows gfx936. Wrong results on real gfx942 hardware."),
)}


def get_target(arch: str) -> Target:
    key = arch.strip().lower()
    if key not in TARGETS:
        raise located(ValueError, f"unknown HIP target {arch!r}; gfxsim hip builds for: {', '.join(TARGETS)}")
    return TARGETS[key]


@dataclass(frozen=True)
class Toolchain:
    clang: Path
    version: str                   # `clang --version`, first line
    major: int
    ld_lld: Path
    llvm_mc: Path | None           # from the llvm-N package; optional (encoding checks)
    llvm_objdump: Path | None

    def describe(self) -> dict:
        return {"clang": str(self.clang), "version": self.version, "ld.lld": str(self.ld_lld)}


class ToolchainError(GfxSimError, FileNotFoundError):
    """No suitable compiler; the message says which Debian packages to install."""


def _which(name: str, major: int | None) -> Path | None:
    """`name-N` on PATH, then /usr/lib/llvm-N/bin/name."""
    if major is not None:
        found = shutil.which(f"{name}-{major}")
        if found:
            return Path(found)
        p = Path(f"/usr/lib/llvm-{major}/bin/{name}")
        return p if p.is_file() and os.access(p, os.X_OK) else None
    found = shutil.which(name)
    return Path(found) if found else None


@cache
def clang_version(clang: Path) -> tuple[str, int]:
    try:
        out = subprocess.run([str(clang), "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise ToolchainError(f"{clang}: cannot run --version ({e})") from e
    first = out.splitlines()[0] if out else ""
    m = re.search(r"clang version (\d+)\.", first)
    if not m:
        raise ToolchainError(f"{clang}: not a clang ({first!r})")
    return first, int(m.group(1))


def _toolchain(clang: Path, major: int, version: str) -> Toolchain | None:
    lld = _which("ld.lld", major) or (clang.parent / "ld.lld" if (clang.parent / "ld.lld").exists() else None)
    if lld is None:
        return None
    return Toolchain(clang, version, major, lld, _which("llvm-mc", major), _which("llvm-objdump", major))


def find_toolchain(arch: str) -> Toolchain:
    """The preferred installed clang for `arch`; GFXSIM_CLANG=/path/to/clang overrides the search.

    Raises ToolchainError naming the packages to install when none fits."""
    target = get_target(arch)
    override = os.environ.get("GFXSIM_CLANG")
    if override:
        clang = Path(override)
        version, major = clang_version(clang)
        if major not in target.clang_majors:
            raise ToolchainError(f"GFXSIM_CLANG={override} is clang {major}; {target.offload_arch} needs clang "
                                 f"{' or '.join(map(str, target.clang_majors))}")
        tc = _toolchain(clang, major, version)
        if tc is None:
            raise ToolchainError(f"GFXSIM_CLANG={override}: no ld.lld-{major} next to it; install lld-{major}")
        return tc
    candidates = [(major, _which("clang", major)) for major in target.clang_majors]
    plain = _which("clang", None)
    if plain is not None:
        candidates.append((None, plain))
    missing_lld = []
    for _, clang in candidates:
        if clang is None:
            continue
        version, major = clang_version(clang)
        if major not in target.clang_majors:
            continue
        tc = _toolchain(clang, major, version)
        if tc is not None:
            return tc
        missing_lld.append(f"lld-{major}")
    need = " or ".join(f"clang-{m}" for m in target.clang_majors)
    if missing_lld:
        raise ToolchainError(f"{need} found, but not its linker ld.lld (needed for the code object); "
                             f"install it: apt-get install -y --no-install-recommends {' '.join(missing_lld)}")
    raise ToolchainError(f"no clang that compiles HIP for {target.offload_arch} (target {target.arch}) is "
                         f"installed: it needs {need}. Install the Debian packages: {APT_HINT}")
