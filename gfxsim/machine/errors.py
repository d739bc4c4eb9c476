"""Errors that stop a simulation, each naming where it happened (GfxSimError: gfxsim.errors)."""
from __future__ import annotations

from ..errors import GfxSimError, located

__all__ = ["GfxSimError", "MemoryFault", "StepLimit", "located"]


class MemoryFault(GfxSimError):
    """An out-of-bounds or misaligned global/LDS access: an error, never a wrap."""


class StepLimit(GfxSimError):
    """A launch past one of its bounds (LaunchOptions.max_steps instructions a wave, max_trace_bytes
    of trace): stopped, with the bound named, before it runs forever or takes the machine's memory."""
