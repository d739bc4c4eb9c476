"""gfxsim: a wave64 simulator of GPU matrix instructions and LDS, and a fragment-mapping debugger.

``launch``, ``Buffer``, ``GfxSimError`` and ``MemoryFault`` come from ``gfxsim.machine``, which is
imported on first use of one of them (it loads numba), so ``import gfxsim`` and the commands that
do not run the machine (``gfxsim layout``, ``gfxsim --help``) start fast.
"""
from typing import TYPE_CHECKING

__version__ = "0.1.0"

__all__ = ["launch", "Buffer", "GfxSimError", "MemoryFault"]

if TYPE_CHECKING:
    from .machine import Buffer, GfxSimError, MemoryFault, launch  # noqa: F401


def __getattr__(name):
    if name in __all__:
        from . import machine
        return getattr(machine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
