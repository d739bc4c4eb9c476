"""Lazy numba: `@njit` functions that import and start numba on their first call.

numba costs ~0.2 s to import and ~0.5 s more on the first call of any compiled function (its CPU
target loads its registries, and with them scipy). A run that never needs a compiled kernel (the
provenance-off path, a layout query) should not pay that. ``@njit`` marks a function; the first call
of any marked function of a module compiles every marked function of that module (numba resolves
calls between them through the module's globals, so they must all be dispatchers by then).
"""
from __future__ import annotations

import functools
import sys

_LAZY: dict[str, list] = {}          # module name -> its lazy functions


def njit(fn):
    """``numba.njit(cache=True)(fn)``, created on first use (see the module docstring)."""
    mod = fn.__module__

    @functools.wraps(fn)
    def first_call(*args):
        _compile_module(mod)
        return sys.modules[mod].__dict__[fn.__name__](*args)

    first_call.py_func = fn
    _LAZY.setdefault(mod, []).append(first_call)
    return first_call


def _compile_module(mod: str) -> None:
    import numba
    g = sys.modules[mod].__dict__
    for lazy in _LAZY.pop(mod, ()):
        name = lazy.py_func.__name__
        if g.get(name) is lazy:
            g[name] = numba.njit(cache=True)(lazy.py_func)


def loaded() -> bool:
    """Whether numba has been imported in this process (tests check the off path stays free of it)."""
    return "numba" in sys.modules
