"""The installed triton: imported on first use, with an error that says how to install it.

triton is an optional dependency of gfxsim (the ``triton`` extra); nothing else in gfxsim imports
it. Triton's AMD backend compiles for gfx942 in-process (LLVM and ld.lld are inside the wheel), so
no GPU, ROCm or clang is needed.
"""
from __future__ import annotations

from ..errors import GfxSimError

INSTALL = "pip install 'gfxsim[triton]' (or pip install triton)"
TRIED = ("3.6", "3.9")          # triton releases the Triton tests have been run with (docs/triton.md)


class TritonMissing(GfxSimError, ImportError):
    """triton is not installed (or cannot be imported); the message says how to install it."""


def triton_module():
    """The ``triton`` package, or TritonMissing naming the install command."""
    try:
        import triton
    except ImportError as e:
        raise TritonMissing(f"gfxsim.triton compiles @triton.jit kernels with the triton package, which cannot be "
                            f"imported ({e}); install it with {INSTALL}") from e
    return triton


def version() -> tuple[int, int]:
    """(major, minor) of the installed triton."""
    t = triton_module()
    parts = t.__version__.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise TritonMissing(f"triton reports version {t.__version__!r}, which gfxsim cannot read") from None


__all__ = ["triton_module", "version", "TritonMissing", "INSTALL", "TRIED"]
