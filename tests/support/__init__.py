"""Shared test helpers (tests/ is on sys.path: ``from support import ...``).

``ROOT`` the checkout, ``DEFECTIVE`` the defective kernels of tests/defective/, the HIP toolchain
and project of the checkout; ``support.pv_tile`` the PV tile kernel, ``support.twins`` the
standalone twins' inputs, ``support.figures`` matplotlib helpers, ``support.copies`` a user's copy
of a kernels_py kernel, ``support.asm_sandbox`` hand-written asm snippets, ``support.fold`` two
launches compared record by record.
"""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFECTIVE = ROOT / "tests" / "defective"


def need_toolchain(arch: str):
    """The clang toolchain for ``arch``: skip when missing, fail when CI said it installed it."""
    from gfxsim.hip import toolchain
    from gfxsim.hip.toolchain import ToolchainError
    try:
        return toolchain.find_toolchain(arch)
    except ToolchainError as e:
        if os.environ.get("GFXSIM_REQUIRE_TOOLCHAIN"):
            pytest.fail(str(e))
        pytest.skip(str(e))


def hip_folder(tmp_path: Path, monkeypatch, *sources: Path) -> Path:
    """A plain folder holding ``sources`` (HIP files a test compiles through the door), made the
    working directory, with gfxsim's compile cache beside it (the gfx942 toolchain required)."""
    import shutil
    need_toolchain("gfx942")
    monkeypatch.setenv("GFXSIM_CACHE_DIR", str(tmp_path / "cache"))
    for s in sources:
        shutil.copy(s, tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def repo_project():
    """The checkout's HIP project: kernels_hip/ built into build/hip/ (what `gfxsim hip` defaults to)."""
    from gfxsim.hip.project import Project
    return Project(ROOT / "kernels_hip", ROOT / "build" / "hip")
