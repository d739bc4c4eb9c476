"""gfxsim: a wave64 simulator of GPU matrix instructions and LDS, and a fragment-mapping debugger."""
__version__ = "0.1.0"

from .machine import Buffer, GfxSimError, MemoryFault, launch  # noqa: E402

__all__ = ["launch", "Buffer", "GfxSimError", "MemoryFault"]
