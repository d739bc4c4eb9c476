import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


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


def repo_project():
    """The checkout's HIP project: kernels_hip/ built into build/hip/ (what `gfxsim hip` defaults to)."""
    from pathlib import Path
    from gfxsim.hip.project import Project
    root = Path(__file__).resolve().parents[1]
    return Project(root / "kernels_hip", root / "build" / "hip")
