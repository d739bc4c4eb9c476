"""A per-lane predicate: what a compare writes (VCC, an SGPR pair) and ``w.if_`` narrows EXEC by."""
from __future__ import annotations

import numpy as np
from ..errors import ArgumentTypeError


class Cond:
    """A per-lane predicate (VCC / an SGPR pair): bool ``[width]`` or ``[n, width]``."""
    __slots__ = ("mask",)

    def __init__(self, mask):
        self.mask = np.asarray(mask, bool)

    def __and__(self, o): return Cond(self.mask & mask_of(o))
    def __or__(self, o): return Cond(self.mask | mask_of(o))
    def __invert__(self): return Cond(~self.mask)
    def __bool__(self):
        raise ArgumentTypeError("a per-lane condition has no single truth value: use w.if_(c), w.any(c) or w.all(c)")


def mask_of(c) -> np.ndarray:
    """A condition's mask: a Cond's, or anything numpy reads as bools."""
    return c.mask if isinstance(c, Cond) else np.asarray(c, bool)
