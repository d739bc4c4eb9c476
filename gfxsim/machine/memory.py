"""Global memory (named, optionally tagged buffers) and LDS (bytes, banks, barrier epochs)."""
from __future__ import annotations

import numba
import numpy as np

from .dtypes import POISON_BYTES


class Buffer:
    """A named global-memory buffer over a numpy array, addressed in bytes from its start.

    ``tags`` maps provenance fields to integer arrays of the buffer's shape (or broadcastable to it),
    e.g. ``{"token": tok, "dim": d}`` for a V cache: every byte loaded from element e carries the
    identity (token=tok[e], dim=d[e]); a negative value means "no tag" (e.g. an unused cache slot). ``Buffer.empty`` makes an output whose unwritten bytes are
    poison and detectable.
    """

    def __init__(self, name: str, array: np.ndarray, tags: dict | None = None, *, written: bool = True):
        if not isinstance(array, np.ndarray):
            raise TypeError(f"buffer {name!r}: expected a numpy array, got {type(array).__name__}")
        self.name = name
        self.array = np.ascontiguousarray(array)
        self.raw = self.array.reshape(-1).view(np.uint8)
        self.tags = {}
        for field, t in (tags or {}).items():
            t = np.asarray(t)
            try:
                self.tags[field] = np.broadcast_to(t, self.array.shape).reshape(-1)
            except ValueError:
                raise ValueError(f"buffer {name!r}: tag {field!r} has shape {t.shape}, "
                                 f"buffer has {self.array.shape}") from None
        self.written = None if written else np.zeros(self.raw.size, bool)
        self.ids = None           # per-byte identity of stored values (allocated on first store)
        self.fp = None
        self.tag_table = None     # the TagTable those ids belong to (the launch that stored them)

    @classmethod
    def empty(cls, name, shape, dtype, tags=None):
        arr = np.empty(shape, dtype)
        raw = arr.reshape(-1).view(np.uint8)
        raw[:] = np.resize(POISON_BYTES, raw.size)
        return cls(name, arr, tags, written=False)

    @property
    def nbytes(self) -> int:
        return self.raw.size

    @property
    def itemsize(self) -> int:
        return self.array.itemsize

    def element_identities(self, table, byte_addr: np.ndarray) -> np.ndarray:
        """Identity ids of the elements that contain the given byte addresses."""
        if not self.tags:
            return np.zeros(byte_addr.shape, np.int32)
        elem = byte_addr // self.itemsize
        return table.identities_for({f: t[elem] for f, t in self.tags.items()})

    def __repr__(self):
        return f"Buffer({self.name!r}, {self.array.shape}, {self.array.dtype})"


class LdsRegion:
    """A named, statically allocated piece of LDS (like a ``__shared__`` array)."""

    def __init__(self, name, offset, shape, dtype):
        self.name, self.offset, self.shape, self.dtype = name, offset, tuple(shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize

    def __repr__(self):
        return f"LdsRegion({self.name!r}, bytes [{self.offset}, {self.offset + self.nbytes}), {self.shape} {self.dtype})"


class LDS:
    """Workgroup-shared memory: bytes, a written bit, provenance and per-byte access epochs."""

    def __init__(self, size: int, banks: int, bank_bytes: int, members: int = 1):
        self.size, self.banks, self.bank_bytes = size, banks, bank_bytes
        self.member_bytes = size                    # a batched launch keeps one LDS per workgroup
        total = size * members
        self.raw = np.resize(POISON_BYTES, total).astype(np.uint8)
        self.written = np.zeros(total, bool)
        self.ids = np.zeros(total, np.int32)
        self.fp = np.zeros(total, np.int32)
        # race detection: last writer (wave, epoch) and readers (bitmask of waves, epoch)
        self.w_wave = np.full(total, -1, np.int32)
        self.w_epoch = np.full(total, -1, np.int64)
        self.r_mask = np.zeros(total, np.uint64)
        self.r_epoch = np.full(total, -1, np.int64)
        self.regions: dict[str, LdsRegion] = {}
        self.allocated = 0

    def region(self, name, shape, dtype) -> LdsRegion:
        got = self.regions.get(name)
        if got is not None:
            if got.shape != tuple(shape) or got.dtype != np.dtype(dtype):
                raise ValueError(f"LDS region {name!r} declared again with a different shape or type "
                                 f"({got.shape} {got.dtype} vs {tuple(shape)} {np.dtype(dtype)})")
            return got
        align = 16
        off = -(-self.allocated // align) * align
        reg = LdsRegion(name, off, shape, dtype)
        if off + reg.nbytes > self.size:
            raise MemoryError(f"LDS region {name!r} ({reg.nbytes} B) does not fit: {off} B already "
                              f"allocated of {self.size} B")
        self.regions[name] = reg
        self.allocated = off + reg.nbytes
        return reg


@numba.njit(cache=True)
def lds_track(addr, active, nbytes, wave, epoch, is_write, w_wave, w_epoch, r_mask, r_epoch):
    """Record one DS access per byte; return (lane, byte address, other wave) of the first race
    with another wave in the same barrier epoch, or (-1, -1, -1)."""
    bit = np.uint64(1) << np.uint64(wave)
    hit_l, hit_a, hit_w = -1, -1, -1
    for l in range(addr.shape[0]):
        if not active[l]:
            continue
        for b in range(nbytes):
            a = addr[l] + b
            if w_epoch[a] == epoch and w_wave[a] != wave and hit_l < 0:
                hit_l, hit_a, hit_w = l, a, w_wave[a]
            if is_write:
                if r_epoch[a] == epoch and (r_mask[a] & ~bit) != 0 and hit_l < 0:
                    other = 0
                    m = r_mask[a] & ~bit
                    while (m & np.uint64(1)) == 0:
                        m = m >> np.uint64(1)
                        other += 1
                    hit_l, hit_a, hit_w = l, a, other
                w_wave[a] = wave
                w_epoch[a] = epoch
            else:
                if r_epoch[a] != epoch:
                    r_epoch[a] = epoch
                    r_mask[a] = bit
                else:
                    r_mask[a] |= bit
    return hit_l, hit_a, hit_w
