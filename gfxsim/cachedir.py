"""Where gfxsim keeps what it makes once and reads again: $GFXSIM_CACHE_DIR, else
$XDG_CACHE_HOME/gfxsim, else ~/.cache/gfxsim (compiled HIP sources, device libraries, Triton
builds, parsed assembly)."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache folder (not created here)."""
    given = os.environ.get("GFXSIM_CACHE_DIR")
    if given:
        return Path(given).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gfxsim"
