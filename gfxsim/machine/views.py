"""Views: a global Buffer or an LDS region addressed the way HIP code addresses it.

    q_lds = w.view(q_lds_region)                 # int8_t q_lds[16][Q_STRIDE]
    qa = q_lds[lane16id][32 * kstep + 8 * rowid].load(8)      # *(const int64_t*)&q_lds[..][..]
    row = q_lds[row]                             # int8_t* q_lds_row = q_lds[row]
    row.at(lane16id * QE).store(packed)          # ((uint32_t*)(q_lds_row + lane16id*QE))[..] = ..
    k_cache.at(off).load(8, "i8")                # *(const int64_t*)(k_cache + off)

Indexing a view by its leading dimension gives the sub-view (a row); indexing the last one, or
``.at(offset)`` / ``+ offset`` (in elements), gives a place: a byte address in the memory and
the element type, which ``load`` and ``store`` turn into ``w.lds_load``/``w.global_load`` and
the matching stores. Indices are Python ints or per-lane i32 values, as in the HIP source; a
view holds no data and issues nothing until a load or store.
"""
from __future__ import annotations

import numpy as np

from .dtypes import dtype_name, itemsize
from .memory import Buffer, LdsRegion
from ..errors import ArgumentError, ArgumentTypeError, OutOfRangeError


class View:
    """``shape`` elements of ``dtype`` from byte ``base`` of a Buffer or LDS region (row-major)."""

    def __init__(self, w, mem, shape=None, dtype=None, base=0):
        if not isinstance(mem, (Buffer, LdsRegion)):
            raise ArgumentTypeError(f"a view needs a Buffer or an LDS region from w.shared(), got {type(mem).__name__}")
        self.w, self.mem = w, mem
        self.dtype = dtype_name(dtype if dtype is not None else (mem.dtype if isinstance(mem, Buffer)
                                                                 else mem.dtype))
        self.itemsize = itemsize(self.dtype)
        if shape is None:
            shape = mem.array.shape if isinstance(mem, Buffer) else mem.shape
            scale = np.dtype(mem.array.dtype if isinstance(mem, Buffer) else mem.dtype).itemsize
            if scale != self.itemsize:          # the same bytes as another element type
                shape = (*shape[:-1], shape[-1] * scale // self.itemsize)
        self.shape = tuple(int(s) for s in shape)
        if not self.shape:
            raise ArgumentError(f"a view of {self.name!r} needs at least one dimension")
        self.base = base
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.itemsize

    @property
    def name(self) -> str:
        return self.mem.name

    def __getitem__(self, i):
        _check_index(self, i)
        if len(self.shape) == 1:
            return Place(self, self.base + i * self.itemsize)
        return View(self.w, self.mem, self.shape[1:], self.dtype, self.base + i * self.row_bytes)

    def at(self, offset) -> Place:
        """The element ``offset`` elements past the view's start (pointer arithmetic over the flat view)."""
        return Place(self, self.base + offset * self.itemsize)

    def __add__(self, offset) -> Place:
        return self.at(offset)

    def as_type(self, dtype) -> View:
        """The same bytes as elements of another type (a reinterpreting pointer cast)."""
        size = itemsize(dtype_name(dtype))
        flat = int(np.prod(self.shape)) * self.itemsize
        if flat % size:
            raise ArgumentError(f"view of {self.name!r}: {flat} bytes are not whole {dtype_name(dtype)} elements")
        return View(self.w, self.mem, (flat // size,), dtype, self.base)

    def __repr__(self):
        return f"View({self.name!r}, {self.dtype}{list(self.shape)}, base {_show(self.base)})"


class Place:
    """One element of a view: what ``&view[i][j]`` points at."""

    def __init__(self, view: View, addr):
        self.view, self.addr = view, addr

    def __add__(self, offset) -> Place:
        return Place(self.view, self.addr + offset * self.view.itemsize)

    def at(self, offset) -> Place:
        return self + offset

    def load(self, nbytes: int | None = None, dtype=None):
        """``nbytes`` (default one element) read from here, as ``dtype`` (default the view's)."""
        v = self.view
        nbytes = nbytes or v.itemsize
        dtype = dtype or v.dtype
        if isinstance(v.mem, LdsRegion):
            return v.w.lds_load(v.mem, self.addr, nbytes, dtype)
        return v.w.global_load(v.mem, self.addr, nbytes, dtype)

    def store(self, value, nbytes: int | None = None):
        """The value's bytes (or its first ``nbytes``) written here."""
        v = self.view
        if isinstance(v.mem, LdsRegion):
            return v.w.lds_store(v.mem, self.addr, value, nbytes)
        return v.w.global_store(v.mem, self.addr, value, nbytes)

    def __repr__(self):
        return f"Place({self.view.name!r}, byte {_show(self.addr)})"


def view(w, mem, shape=None, dtype=None) -> View:
    """A view of a Buffer or LDS region; ``shape``/``dtype`` default to the memory's own."""
    return View(w, mem, shape, dtype)


def _check_index(v: View, i):
    if isinstance(i, (int, np.integer)) and not 0 <= int(i) < v.shape[0]:
        raise OutOfRangeError(f"index {int(i)} out of range for dimension of size {v.shape[0]} of {v!r}")
    if isinstance(i, (slice, tuple)):
        raise ArgumentTypeError(f"{v!r}: index one dimension at a time (view[i][j]), with an int or a per-lane value")


def _show(x):
    return x if isinstance(x, (int, np.integer)) else "per lane"
