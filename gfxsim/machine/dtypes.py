"""Register element types: numpy views of 32-bit VGPR words (bf16/fp8 via ml_dtypes, loaded on first use)."""
from __future__ import annotations

import numpy as np

from . import byteruns

from ..arch.dtypes import ELEM_TYPES
from ..isa.pseudo import div_const, mod_const      # the numbers of x // d and x % d by a literal
from ..errors import ArgumentError, NotFoundError

_NATIVE = {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16, "i32": np.int32, "u32": np.uint32,
           "f16": np.float16, "f32": np.float32, "f64": np.float64, "i64": np.int64, "u64": np.uint64}


class _Types(dict):
    """Type name -> numpy dtype; bf16 and the fp8 types come from ml_dtypes, whose import costs
    about a second, so they are resolved when first asked for."""

    def __missing__(self, name):
        if name in ELEM_TYPES:
            got = self[name] = np.dtype(ELEM_TYPES[name].numpy)
            return got
        raise NotFoundError(name)

    def resolve_all(self):
        for name in ELEM_TYPES:
            self[name]
        return self


# 64-bit register types: VGPR pairs (addresses, f64 buffers and arithmetic), no matrix element type
_PAIRS = tuple(n for n in ("i64", "u64", "f64") if n not in ELEM_TYPES)
NP = _Types({n: np.dtype(t) for n, t in _NATIVE.items() if n in ELEM_TYPES or n in _PAIRS})
NAMES = tuple(ELEM_TYPES) + _PAIRS
FLOAT = {n for n, t in ELEM_TYPES.items() if t.is_float} | {"f64"}
INT = set(NAMES) - FLOAT
SIGNED = {"i8", "i16", "i32", "i64"}

# Poison: what a never-written register or LDS byte reads as (a quiet NaN pattern in every
# 32-bit word) so a kernel that uses it produces visible garbage, never a plausible zero.
POISON_WORD = 0x7FBADBAD
POISON_BYTES = np.frombuffer(np.uint32(POISON_WORD).tobytes(), np.uint8)


def np_dtype(name: str) -> np.dtype:
    try:
        return NP[name]
    except KeyError:
        raise ArgumentError(f"unknown register element type {name!r}; known: {', '.join(NAMES)}") from None


def dtype_name(dt) -> str:
    """The register type name of ``dt``: an ISA-style string ("i8", "f32", "bf16") or anything
    numpy accepts as a dtype (np.int8, "int8", np.dtype("float32"))."""
    if isinstance(dt, str) and dt in NAMES:
        return dt
    try:
        d = np.dtype(dt)
    except TypeError:
        raise ArgumentError(f"unknown register element type {dt!r}; known: {', '.join(NAMES)}") from None
    hit = _NAME_OF.get(d)
    if hit is None:
        hit = _NAME_OF[d] = _name_of(d)
    return hit


_NAME_OF: dict = {}          # numpy dtype -> its register type name (asked once per statement on hot paths)


def _name_of(d: np.dtype) -> str:
    table = NP if d.kind in "biuf" and d.name in {np.dtype(t).name for t in _NATIVE.values()} else NP.resolve_all()
    for k, v in list(table.items()):
        if v == d:
            return k
    raise ArgumentError(f"no register type for numpy dtype {d}; known: {', '.join(NAMES)}")


def itemsize(name: str) -> int:
    return np_dtype(name).itemsize


def to_bytes(val: np.ndarray) -> np.ndarray:
    """[n, lanes] typed -> [n*itemsize, lanes] uint8, little-endian per lane."""
    n, lanes = val.shape
    return np.ascontiguousarray(val.T).view(np.uint8).reshape(lanes, -1).T.copy()


def from_bytes(raw: np.ndarray, name: str) -> np.ndarray:
    """[nbytes, lanes] uint8 -> [nbytes/itemsize, lanes] typed."""
    dt = np_dtype(name)
    nb, lanes = raw.shape
    if nb % dt.itemsize:
        raise ArgumentError(f"{nb} bytes do not hold a whole number of {name} elements")
    return np.ascontiguousarray(raw.T).view(dt).reshape(lanes, -1).T.copy()


def retype(val: np.ndarray, name: str) -> np.ndarray:
    """``from_bytes(to_bytes(val), name)`` in one copy: each lane's bytes regrouped into elements of
    ``name`` by views along a trailing axis (a register read of i8/bf16/f64 elements, a write of
    them as words), with no transposed byte array in between."""
    dt = np_dtype(name)
    n, lanes = val.shape
    a, b = val.dtype.itemsize, dt.itemsize
    if (n * a) % b:
        raise ArgumentError(f"{n * a} bytes do not hold a whole number of {name} elements")
    src = val
    val = np.ascontiguousarray(val)
    if a == b:
        return val.view(dt).copy()
    if a > b:                                   # each element splits into k, lowest bytes first
        k = a // b
        out = val.view(dt).reshape(n, lanes, k).transpose(0, 2, 1).reshape(n * k, lanes)
    else:                                       # k consecutive elements make one
        k = b // a
        out = np.ascontiguousarray(val.reshape(n // k, k, lanes).transpose(0, 2, 1)).view(dt).reshape(n // k, lanes)
    # one row (or one lane) reshapes without a copy: the result must never alias the registers
    return out.copy() if np.may_share_memory(out, src) else out


# -- memory as dwords: a dword-sized access at dword-aligned addresses moves whole 32-bit words,
# four times fewer elements to gather or scatter than bytes (the same bytes, little-endian); an
# 8- or 16-byte access of 8- or 16-bit elements (a cache's 16 int8 dims) at an address aligned to
# its size moves one unit per lane ------------------------------------------------------------
_ALL_WRITTEN = np.uint32(0x01010101)      # four True bytes of a written-bit array, as one word
_ALL_WRITTEN_64 = np.uint64(0x0101010101010101)
_UNITS = {8: np.dtype(np.uint64), 16: np.dtype((np.void, 16))}


def any_bits(a: np.ndarray, mask: int) -> bool:
    """Whether an element of the integer array ``a`` has a bit of ``mask`` set: ``(a & mask).any()``
    as one OR reduction, without the temporary (an alignment check of 32,768 addresses: ~6 us
    instead of ~25)."""
    return a.size > 0 and bool(int(np.bitwise_or.reduce(a, axis=None)) & mask)


def _word_index(mem: np.ndarray, addr: np.ndarray, nbytes: int):
    """[nbytes/4, lanes] dword indices into ``mem`` for a dword access at every address, or None
    (a size that is not whole dwords, a memory not viewable as words, an unaligned address)."""
    if nbytes % 4 or mem.size % 4 or any_bits(addr, 3):
        return None
    return (addr >> 2)[None, :] + np.arange(nbytes // 4)[:, None]


def _unit_index(mem: np.ndarray, addr: np.ndarray, nbytes: int, elem_size: int):
    """(unit dtype, indices) of an access: one ``nbytes`` unit per lane (``[lanes]``) for an 8- or
    16-byte access of elements smaller than a dword at addresses aligned to ``nbytes``, else
    dwords (``_word_index``); None where neither applies."""
    unit = _UNITS.get(nbytes) if elem_size < 4 else None
    if unit is not None and mem.size % nbytes == 0 and not any_bits(addr, nbytes - 1):
        return unit, addr >> (nbytes.bit_length() - 1)
    wi = _word_index(mem, addr, nbytes)
    return None if wi is None else (np.dtype(np.uint32), wi)


_NO_INDEX = object()


def load_values(raw: np.ndarray, addr: np.ndarray, nbytes: int, name: str, ui=_NO_INDEX) -> np.ndarray:
    """The [nbytes/itemsize, lanes] ``name`` values at byte address ``addr[l]`` of the flat byte
    array ``raw`` for every lane l. ``ui``: the access's ``_unit_index``, when the caller has it."""
    dt = np_dtype(name)
    if ui is _NO_INDEX:
        ui = _unit_index(raw, addr, nbytes, dt.itemsize)
    if ui is None:
        return from_bytes(raw[addr[None, :] + np.arange(nbytes)[:, None]], name)
    unit, idx = ui
    return _as_values(np.take(raw.view(unit), idx), dt)


def load_strided(raw: np.ndarray, addr: np.ndarray, nbytes: int, name: str, lanes: int) -> np.ndarray | None:
    """``load_values`` of a dword load (``addr`` ``[members*lanes]``, in bounds and aligned) whose
    members each read ``lanes`` consecutive dwords (a K row per token) or one dword in every lane
    (a token's slot), member m's from member 0's moved by m strides: the values copied out of a
    strided view of ``raw``, row by row, instead of gathered dword by dword (a cold 131,072-dword
    gather ~0.6 ms, the copy ~0.2 ms). None where the load is not so (or too small to pay): the
    caller gathers."""
    n = addr.size
    if nbytes != 4 or np_dtype(name).itemsize != 4 or n < STRIDED_MIN or n % lanes or raw.size % 4 \
            or lanes < 2 or n == lanes or addr.ndim != 1 or addr.dtype.kind != "i":
        return None
    a2 = addr.reshape(-1, lanes)
    a0, stride, step = int(a2[0, 0]), int(a2[1, 0]) - int(a2[0, 0]), int(a2[0, 1]) - int(a2[0, 0])
    if a0 % 4 or stride < 0 or stride % 4 or step not in (0, 4) or not np.array_equal(a2[0], a0 + step * np.arange(lanes)):
        return None
    rows = a2.shape[0]
    if a0 + stride * (rows - 1) + step * (lanes - 1) + 4 > raw.size:
        return None
    # every member's addresses: member 0's plus m strides (one subtraction, one comparison)
    if not (np.subtract(a2, a2[0], dtype=a2.dtype) == (stride * np.arange(rows, dtype=a2.dtype))[:, None]).all():
        return None
    words = raw.view(np.uint32)[a0 // 4:]
    got = np.lib.stride_tricks.as_strided(words, (rows, lanes), (stride, step), writeable=False)
    return got.copy().reshape(1, n).view(np_dtype(name))          # a copy even where the rows touch


# loads of fewer dwords gather (the checks cost more than the copy saves)
STRIDED_MIN = 1 << 14


def _as_values(got: np.ndarray, dt) -> np.ndarray:
    """Gathered memory as ``[n, lanes]`` values of ``dt``: ``got`` one unit per lane (``[lanes]``)
    or dwords (``[nbytes/4, lanes]``, C-contiguous rows)."""
    lanes = got.shape[-1]
    if got.ndim == 1:                                 # one unit per lane: [lanes, nbytes] bytes
        return got.view(dt).reshape(lanes, -1).T.copy()
    if dt.itemsize == 4:
        return got.view(dt)
    return np.ascontiguousarray(got.T).view(dt).reshape(lanes, -1).T.copy()


def _words(val: np.ndarray, nw: int) -> np.ndarray:
    """The first ``nw`` dwords of every lane of ``val`` ``[n, lanes]``, uint32 ``[nw, lanes]``
    (``n * itemsize`` a whole number of dwords)."""
    if val.dtype.itemsize == 4:
        return np.ascontiguousarray(val).view(np.uint32)[:nw]
    return np.ascontiguousarray(val.T).view(np.uint32).reshape(val.shape[1], -1).T[:nw]


def all_written(written: np.ndarray, addr: np.ndarray, nbytes: int, ui=_NO_INDEX, elem_size: int = 4) -> bool:
    """Whether every byte of the access is marked written (one compare per dword or unit)."""
    if ui is _NO_INDEX:
        ui = _unit_index(written, addr, nbytes, elem_size)
    if ui is None:
        return bool(written[addr[None, :] + np.arange(nbytes)[:, None]].all())
    unit, idx = ui
    got = np.take(written.view(unit), idx)
    if unit.itemsize == 4:
        return bool((got == _ALL_WRITTEN).all())
    return bool((got.view(np.uint64) == _ALL_WRITTEN_64).all())


def load_written(raw: np.ndarray, written: np.ndarray, addr: np.ndarray, nbytes: int, name: str):
    """(values, whether every byte was written) of one access to a memory and its written bits of
    the same size: the unit indices computed once for both."""
    ui = _unit_index(raw, addr, nbytes, np_dtype(name).itemsize)
    return load_values(raw, addr, nbytes, name, ui), all_written(written, addr, nbytes, ui)


def store_values(raw: np.ndarray, written, addr: np.ndarray, nbytes: int, val: np.ndarray, cols=None,
                 words=None) -> None:
    """Write the first ``nbytes`` bytes of every lane of ``val`` [n, lanes] at ``addr[l]`` of ``raw``
    (and mark them in ``written``, if given); ``cols``: bool [lanes], the lanes that write (None: all).
    ``words``: the written bytes' 8-byte words (``[nbytes, writing lanes]``, C order) where they are
    aligned runs (byteruns.words_of), written a word at a time."""
    if cols is not None:                 # the writing lanes by index: take is faster than a boolean mask
        cols = np.flatnonzero(cols)
    wi = None if (val.shape[0] * val.dtype.itemsize) % 4 else \
        _word_index(raw, addr if cols is None else addr[cols], nbytes)
    if wi is None:
        ba = addr[None, :] + np.arange(nbytes)[:, None]
        b = to_bytes(val)[:nbytes]
        sel, b = (ba, b) if cols is None else (np.take(ba, cols, axis=1), np.take(b, cols, axis=1))
        byteruns.put(raw, sel, words, b)
        if written is not None:
            byteruns.put(written, sel, words, True)
        return
    words = _words(val, nbytes // 4)
    raw.view(np.uint32)[wi] = words if cols is None else np.take(words, cols, axis=1)
    if written is not None:
        written.view(np.uint32)[wi] = _ALL_WRITTEN


# -- one access pattern for every batched member: each member m reads or writes its own row
# ``rows[m]`` (uint8 ``[members, stride]``) at the same byte offsets ``idx`` (``[lanes]``); a take or
# an assignment along the rows with the small index, not one index per column -----------------------
def load_rows(rows: np.ndarray, idx: np.ndarray, nbytes: int, name: str):
    """The ``[nbytes/itemsize, members*lanes]`` ``name`` values of such an access (member-major
    columns, as a batch holds them), or None where it is neither a unit nor a dword access (see
    ``_unit_index``): the caller then indexes every column."""
    dt = np_dtype(name)
    members, stride = rows.shape
    unit = _UNITS.get(nbytes) if dt.itemsize < 4 else None
    if unit is not None and stride % nbytes == 0 and not (idx & (nbytes - 1)).any():
        got = np.take(rows.view(unit), idx >> (nbytes.bit_length() - 1), axis=1)     # [members, lanes] units
        return _as_values(got.reshape(-1), dt)
    if nbytes % 4 or stride % 4 or (idx & 3).any():
        return None
    nw = nbytes // 4
    got = np.take(rows.view(np.uint32), (idx >> 2)[None, :] + np.arange(nw)[:, None], axis=1)   # [members, nw, lanes]
    return _as_values(np.ascontiguousarray(got.transpose(1, 0, 2)).reshape(nw, -1), dt)


def store_rows(rows: np.ndarray, written, idx: np.ndarray, nbytes: int, val: np.ndarray, lanes=None) -> bool:
    """Write the first ``nbytes`` of every lane of ``val`` ``[n, members*lanes]`` at ``idx`` of its
    member's row (and mark them in ``written``, bool rows of the same shape, if given); ``lanes``:
    the writing lanes' indices within a member (None: all). False, writing nothing, where it is not
    a dword access (the caller then indexes every column). Lanes that write the same bytes: the
    later lane's land, as with one index per column."""
    members, stride = rows.shape
    if nbytes % 4 or stride % 4 or (val.shape[0] * val.dtype.itemsize) % 4 or (idx & 3).any():
        return False
    nw = nbytes // 4
    w3 = _words(val, nw).reshape(nw, members, -1)
    if lanes is not None:
        w3, idx = w3[:, :, lanes], idx[lanes]
    wi = (idx >> 2)[None, :] + np.arange(nw)[:, None]
    rows.view(np.uint32)[:, wi] = w3.transpose(1, 0, 2)
    if written is not None:
        written.view(np.uint32)[:, wi] = _ALL_WRITTEN
    return True


__all__ = ["NP", "FLOAT", "INT", "SIGNED", "POISON_WORD", "np_dtype", "dtype_name", "itemsize", "to_bytes", "from_bytes",
           "load_values", "load_written", "store_values", "all_written", "div_const", "mod_const"]
