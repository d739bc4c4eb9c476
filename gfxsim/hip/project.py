"""Where a set of HIP kernels lives and where its builds go: the one thing gfxsim.hip needs to know
about a source tree.

    project = Project(sources="kernels_hip", build="build/hip")
    build(None, "gfx942", project=project)          # every sources/*.hip -> build/gfx942/*.{s,co}

The kernels are the folder's *.hip files (by stem), compiled with the folder's headers; the
hardware harness's host program is sources/harness/run_kernel.cpp. The library never looks for a
repository: `gfxsim hip` (the CLI) supplies the checkout's kernels_hip/ and build/hip/ by default.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import located


@dataclass(frozen=True)
class Project:
    sources: Path           # the .hip files and the headers they include
    build: Path             # <build>/<arch>/<kernel>.{s,co} and build.json

    def __post_init__(self):
        src = Path(self.sources).expanduser().resolve()
        if not src.is_dir():
            raise located(FileNotFoundError, f"HIP sources {self.sources}: no such folder")
        if not any(src.glob("*.hip")):
            raise located(FileNotFoundError, f"HIP sources {src}: no .hip files in it")
        object.__setattr__(self, "sources", src)
        object.__setattr__(self, "build", Path(self.build).expanduser().resolve())

    @property
    def kernels(self) -> tuple[str, ...]:
        """The kernel files, by stem (pv_int8 for pv_int8.hip), in name order."""
        return tuple(sorted(p.stem for p in self.sources.glob("*.hip")))

    @property
    def headers(self) -> tuple[Path, ...]:
        return tuple(sorted(self.sources.glob("*.h")))

    @property
    def harness_source(self) -> Path:
        return self.sources / "harness" / "run_kernel.cpp"

    def source(self, kernel: str) -> Path:
        if kernel not in self.kernels:
            raise located(ValueError, f"unknown HIP kernel {kernel!r}; {self.sources} has: {', '.join(self.kernels)}")
        return self.sources / f"{kernel}.hip"

    def with_build(self, build) -> Project:
        """The same sources, built into another folder (None: this one)."""
        return self if build is None else Project(self.sources, build)
