"""A byte store's addresses as 8-byte words, where every 8 of them are one aligned run.

A batch's one-byte store writes a byte per column; where the columns' bytes come in aligned runs
of 8 in order (an int8 K cache row: a lane's 16 head elements side by side), the memory, its
written bits and the one-byte provenance planes (flags, cleared marks) are read and written a
uint64 word per run: an eighth of the indices, each memory access one word (131,072 scattered
bytes: ~0.2 ms a pass, ~0.02 ms as words). Wider planes (int32 identities, footprints) keep the
byte index. The bytes and their order are those of the byte index: a run covers its word whole,
so where two runs land on one word the later wins every byte, as the later lane would.
"""
from __future__ import annotations

import numpy as np

WORD = 8
# stores of fewer bytes check no runs: the check costs more than the words save
MIN_BYTES = 1 << 14


def words_of(addr: np.ndarray, size: int) -> np.ndarray | None:
    """The word indices (int64 ``[n / 8]``) of the byte addresses ``addr`` (flat, C order) into a
    memory of ``size`` bytes, where they are aligned runs of 8 consecutive bytes each in order;
    None where they are not (or too few to pay, or the memory is not whole words)."""
    a = addr.reshape(-1)
    if a.size < MIN_BYTES or a.size % WORD or size % WORD or a.dtype.kind != "i":
        return None
    first = a[::WORD]
    if (first & (WORD - 1)).any():
        return None
    x = a.reshape(-1, WORD)
    if not ((x[:, WORD - 1] - first == WORD - 1).all() and _rising_in_runs(a)):
        return None
    return first >> 3


def _rising_in_runs(a: np.ndarray) -> bool:
    """Whether each run of 8 rises strictly (with its span 7: consecutive)."""
    d = np.diff(a)
    d[WORD - 1::WORD] = 1                  # from one run to the next: anything
    return bool((d > 0).all())


def take(x: np.ndarray, idx: np.ndarray, words: np.ndarray | None) -> np.ndarray:
    """``x[idx]`` as ``put_back`` restores it: the words where ``words`` and ``x`` holds a byte an
    entry, else the entries."""
    if words is not None and x.itemsize == 1:
        return np.take(x.view(np.uint64), words)
    return np.take(x, idx)


def put_back(x: np.ndarray, idx: np.ndarray, words: np.ndarray | None, saved: np.ndarray) -> None:
    """Undo of ``take``: ``x`` at ``idx`` as it was."""
    if words is not None and x.itemsize == 1:
        x.view(np.uint64)[words] = saved
    else:
        x[idx] = saved


def put(x: np.ndarray, idx: np.ndarray, words: np.ndarray | None, v) -> None:
    """``x[idx] = v`` (``v`` a scalar or shaped as ``idx``), as words where ``words``, ``x`` holds a
    byte an entry and ``v`` is of its type."""
    if words is not None and x.itemsize == 1:
        if np.ndim(v) == 0:
            x.view(np.uint64)[words] = np.full(WORD, v, x.dtype).view(np.uint64)[0]
            return
        if v.dtype == x.dtype and v.shape == idx.shape:
            x.view(np.uint64)[words] = np.ascontiguousarray(v).reshape(-1).view(np.uint64)
            return
    x[idx] = v
