"""Errors that stop a simulation, each naming where it happened (GfxSimError: gfxsim.errors)."""
from __future__ import annotations

from ..errors import GfxSimError, located

__all__ = ["GfxSimError", "MemoryFault", "located"]


class MemoryFault(GfxSimError):
    """An out-of-bounds or misaligned global/LDS access: an error, never a wrap."""
