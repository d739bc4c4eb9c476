"""Errors that stop a simulation, each naming where it happened."""
from __future__ import annotations


class GfxSimError(Exception):
    """Bad input or an impossible operation, with the coordinates of the offending instruction."""

    def __init__(self, message: str, *, kernel=None, workgroup=None, wave=None, lane=None,
                 instruction=None, source=None, address=None):
        self.coords = dict(kernel=kernel, workgroup=workgroup, wave=wave, lane=lane,
                           instruction=instruction, source=source, address=address)
        where = ", ".join(f"{k} {v}" for k, v in self.coords.items()
                          if v is not None and k not in ("source", "kernel"))
        parts = [message]
        if where:
            parts.append(f"({where})")
        if kernel:
            parts.append(f"in {kernel}")
        if source:
            parts.append(f"at {source}")
        super().__init__(" ".join(parts))


class MemoryFault(GfxSimError):
    """An out-of-bounds or misaligned global/LDS access: an error, never a wrap."""


_COMBINED: dict = {}


def located(cls, message, **coords) -> GfxSimError:
    """An error of ``cls`` (e.g. ValueError) that is also a GfxSimError carrying coordinates."""
    if isinstance(cls, type) and issubclass(cls, GfxSimError):
        return cls(message, **coords)
    sub = _COMBINED.get(cls)
    if sub is None:
        sub = _COMBINED[cls] = type(cls.__name__, (GfxSimError, cls), {"__module__": cls.__module__})
    return sub(message, **coords)
