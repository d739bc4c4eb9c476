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
