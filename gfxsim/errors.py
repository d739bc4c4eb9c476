"""gfxsim's errors: every error gfxsim raises is a GfxSimError naming where it happened.

This module imports nothing, so any floor (the CLI, the asm front end, the HIP build, kernels_py)
can raise or catch a GfxSimError without loading the machine. An error that code or tests catch
as a builtin class (ValueError, KeyError, FileNotFoundError, ...) is also of that class: a class
``(GfxSimError, ValueError)``, or ``located(ValueError, ...)`` for a one-off.
"""
from __future__ import annotations

class GfxSimError(Exception):
    """Bad input or an impossible operation, with the coordinates of the offending instruction.

    ``coords``: kernel, workgroup, wave, lane, instruction (its index in the wave's stream), source
    (the kernel's file:line, a .s line included) and address, each None where unknown. ``str(e)``
    is the message followed by the known coordinates."""

    def __init__(self, message: str = "", *, kernel=None, workgroup=None, wave=None, lane=None,
                 instruction=None, source=None, address=None):
        self.message = message
        self.coords = dict(kernel=kernel, workgroup=workgroup, wave=wave, lane=lane,
                           instruction=instruction, source=source, address=address)
        super().__init__(" ".join([message, *self.where()]) if self.where() else message)

    def where(self) -> list[str]:
        """The coordinates as text: "(workgroup .., wave .., ...)", "in KERNEL", "at FILE:LINE"."""
        c = self.coords
        inside = ", ".join(f"{k} {v}" for k, v in c.items() if v is not None and k not in ("source", "kernel"))
        return ([f"({inside})"] if inside else []) + ([f"in {c['kernel']}"] if c["kernel"] else []) + \
            ([f"at {c['source']}"] if c["source"] else [])

    def __reduce__(self):            # pickled (a sweep's worker) with its coordinates
        cls = type(self)
        return (_rebuild, (cls.__dict__.get("_located", cls), self.message, self.coords))

    def __str__(self) -> str:
        if isinstance(self, KeyError):          # KeyError's str() would quote the message
            return Exception.__str__(self)
        return super().__str__()


def _rebuild(cls, message, coords):
    return located(cls, message, **coords)


class UsageError(GfxSimError, ValueError):
    """A command-line option or argument that cannot be used; the message names it."""


# What a caller passed that gfxsim cannot use, each also the builtin class code catches it as.
class ArgumentError(GfxSimError, ValueError):
    """A value that cannot be used (a shape, a count, an option's value); the message names it."""


class ArgumentTypeError(GfxSimError, TypeError):
    """A value of a type that cannot be used; the message names it and the type wanted."""


class NotFoundError(GfxSimError, KeyError):
    """A name gfxsim does not know (an arch, an instruction, a kernel); the message lists the known."""


class OutOfRangeError(GfxSimError, IndexError):
    """An index outside what it indexes (a lane, a register, a layout coordinate)."""


_COMBINED: dict = {}


def located(cls, message, **coords) -> GfxSimError:
    """An error of ``cls`` (e.g. ValueError) that is also a GfxSimError carrying coordinates."""
    if isinstance(cls, type) and issubclass(cls, GfxSimError):
        return cls(message, **coords)
    sub = _COMBINED.get(cls)
    if sub is None:
        # "_located": the builtin class, which pickling rebuilds the error from
        sub = _COMBINED[cls] = type(cls.__name__, (GfxSimError, cls), {"__module__": cls.__module__, "_located": cls})
    return sub(message, **coords)
