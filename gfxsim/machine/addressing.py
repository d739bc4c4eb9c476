"""Per-lane byte addresses of a memory access, shared by the VMEM and DS units: made from an
offset (a per-lane value or a number), checked in the active lanes (bounds, alignment: a
MemoryFault naming lane and address), and the addresses a load reads (inactive lanes read byte 0).
Every function takes the wave ``w`` whose lanes access memory.
"""
from __future__ import annotations

import numpy as np

from . import ops
from .dtypes import any_bits
from .errors import MemoryFault
from .vgpr import VGPRs


# a partial EXEC's addresses checked on its active lanes first (tests compare both ways)
PARTIAL_FIRST = True


def addresses(w, offset, nbytes: int, limit: int, what: str, align: int, one_member: bool = False) -> np.ndarray:
    """The per-column byte addresses of an access (int64 ``[width]``), checked in the active
    lanes: in bounds of ``limit`` and ``align``-aligned. ``one_member``: the first batched
    member's lanes alone (``[lanes]``), for an access ``member_uniform`` found the same in
    every member (checked once: the other members' are the same)."""
    if nbytes not in ops.VMEM_LOAD:
        raise w.error(ValueError, f"{what}: {nbytes}-byte accesses do not exist (use 1, 2, 4, 8, 12 or 16)")
    n = w.lanes if one_member else w.width
    if isinstance(offset, VGPRs):
        w.check_read(offset)
        if offset.dtype not in ("i32", "u32", "i64", "u64") or offset.n != 1:
            raise w.error(TypeError, f"{what}: address must be one i32/u32/i64 per lane, got "
                             f"{offset.n} x {offset.dtype}")
        raw = offset.val[0][:n]
        addr = raw.astype(np.int64)
        # the common case in one pass each: as unsigned, a negative address is out of bounds too
        u = raw.view(np.uint32 if raw.dtype.itemsize == 4 else np.uint64)
        hi = limit - nbytes
        if w.exec_full and hi >= 0 and in_bounds_aligned(u, hi, align):
            return addr
        # a partial EXEC (a scale's lane 0): the same check on the active lanes' addresses alone,
        # where a negative address is out of bounds as unsigned too (so not above int's range)
        if PARTIAL_FIRST and not w.exec_full and 0 <= hi < 2 ** (8 * raw.dtype.itemsize - 1):
            if in_bounds_aligned(np.take(u, np.flatnonzero(w.exec[:n])), hi, align):
                return addr
    else:
        addr = np.full(n, integer(w, offset, f"{what}: the address"), np.int64)
    act = w.exec[:n]
    bad = (addr < 0) | (addr + nbytes > limit)
    if not w.exec_full:
        bad &= act
    if bad.any():
        l = int(np.argmax(bad))
        raise w.error(MemoryFault, f"{what}: lane {l % w.lanes} accesses bytes [{addr[l]}, "
                         f"{addr[l] + nbytes}) outside [0, {limit})", lane=l, address=int(addr[l]))
    mis = (addr % align) != 0
    if not w.exec_full:
        mis &= act
    if mis.any():
        l = int(np.argmax(mis))
        raise w.error(MemoryFault, f"{what}: lane {l % w.lanes} address {addr[l]} is not {align}-byte "
                         f"aligned for a {nbytes}-byte access", lane=l, address=int(addr[l]))
    return addr


def in_bounds_aligned(u: np.ndarray, hi: int, align: int) -> bool:
    """Whether no unsigned address of ``u`` is above ``hi`` and none has a bit below ``align``
    (a power of two) set: ``not (u > hi).any() and not (u & (align - 1)).any()``, as two
    reductions without the bool temporaries (a 32,768-column load: ~8 us instead of ~26)."""
    if u.size == 0:
        return True
    return int(u.max()) <= hi and not (align > 1 and any_bits(u, align - 1))


def integer(w, x, what: str) -> int:
    """``x`` as an int: a Python or numpy integer (a float would be truncated, an array is not one
    number), else an error at the statement naming ``what``."""
    if isinstance(x, (bool, np.bool_)) or not (isinstance(x, (int, np.integer)) or
                                               (isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iu")):
        shown = f"an array of shape {x.shape}" if isinstance(x, np.ndarray) and x.ndim else f"{type(x).__name__} {x!r}"
        raise w.error(TypeError, f"{what} must be an integer or a per-lane i32/u32/i64 value (w.from_lanes), "
                                 f"got {shown}")
    return int(x)


def member_uniform(w, offset) -> bool:
    """Whether every batched member accesses the same offsets under the same EXEC. A lane outside
    EXEC accesses nothing: what its offset register holds (another tile's address in compiled
    code) does not count."""
    if w.members == 1:
        return True
    a2 = w.exec.reshape(w.members, w.lanes)
    if not (w.exec_full or (a2 == a2[0]).all()):
        return False
    if not isinstance(offset, VGPRs):
        return True
    r2 = offset.val[0].reshape(w.members, w.lanes)
    same = r2 == r2[0]
    return bool(same.all() if w.exec_full else (same | ~a2).all())


def read_addr(w, addr: np.ndarray) -> np.ndarray:
    """A load's per-lane byte addresses: inactive lanes read byte 0 (their result is poison)."""
    return addr if w.exec_full else np.where(w.exec, addr, 0)


def byte_addr(w, addr: np.ndarray, nbytes: int) -> np.ndarray:
    """[nbytes, width] byte addresses of a load (``read_addr``)."""
    return read_addr(w, addr)[None, :] + np.arange(nbytes)[:, None]
