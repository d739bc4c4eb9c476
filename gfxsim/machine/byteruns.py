"""A byte store's addresses as 8-byte words, where every 8 of them are one aligned run.

A batch's one-byte store writes a byte per column; where the columns' bytes come in aligned runs
of 8 in order (an int8 K cache row: a lane's 16 head elements side by side), the memory, its
written bits and the one-byte provenance planes (flags, cleared marks) are read and written a
uint64 word per run: an eighth of the indices, each memory access one word (131,072 scattered
bytes: ~0.2 ms a pass, ~0.02 ms as words). Wider planes (int32 identities, footprints) keep the
byte index. The bytes and their order are those of the byte index: a run covers its word whole,
so where two runs land on one word the later wins every byte, as the later lane would.

A one-byte store whose runs come across members instead (a V cache column: 8 consecutive members,
one token each of a block, write lane l's byte at 8 consecutive offsets) is taken in that order:
member groups of 8, each lane's 8 bytes one word (``Interleaved``). Two runs on one word are then
ordered as their columns are (by member group, then lane), so the later still wins every byte.
"""
from __future__ import annotations

import numpy as np

WORD = 8
# stores of fewer bytes check no runs: the check costs more than the words save
MIN_BYTES = 1 << 14


class Interleaved:
    """A one-byte store's words where member group g's 8 members write lane l's bytes side by side:
    ``index`` the word of each (g, l) (int64, that order), ``lanes`` the lanes of a member."""
    __slots__ = ("index", "lanes")

    def __init__(self, index: np.ndarray, lanes: int):
        self.index, self.lanes = index, lanes

    def arranged(self, v: np.ndarray) -> np.ndarray:
        """``v`` (one byte a column, columns member-major) as the words' uint64 values."""
        g = v.size // (WORD * self.lanes)
        return np.ascontiguousarray(v.reshape(g, WORD, self.lanes).transpose(0, 2, 1)).reshape(-1).view(np.uint64)


def words_of(addr: np.ndarray, size: int, lanes: int | None = None):
    """The word indices (int64 ``[n / 8]``) of the byte addresses ``addr`` (flat, C order) into a
    memory of ``size`` bytes, where they are aligned runs of 8 consecutive bytes each in order;
    else, given a member's ``lanes`` and one byte a column (``addr`` ``[1, members*lanes]``), an
    ``Interleaved`` where every 8 members' bytes of each lane are such a run; None where neither
    (or too few to pay, or the memory is not whole words)."""
    a = addr.reshape(-1)
    if a.size < MIN_BYTES or a.size % WORD or size % WORD or a.dtype.kind != "i":
        return None
    first = a[::WORD]
    if not (first & (WORD - 1)).any():
        x = a.reshape(-1, WORD)
        if (x[:, WORD - 1] - first == WORD - 1).all() and _rising_in_runs(a):
            return first >> 3
    if INTERLEAVED and lanes and addr.ndim == 2 and addr.shape[0] == 1:
        return _interleaved(a, lanes)
    return None


def _interleaved(a: np.ndarray, lanes: int) -> Interleaved | None:
    """``words_of``'s answer across members: byte j of member group g's lane l at word start + j."""
    if a.size % (WORD * lanes):
        return None
    x = a.reshape(-1, WORD, lanes)
    steps = np.arange(WORD, dtype=a.dtype)       # of the addresses' type: no wider temporaries
    if int(x[0, 0, 0]) & (WORD - 1) or not np.array_equal(x[0, :, 0], x[0, 0, 0] + steps):    # a cheap no first
        return None
    first = x[:, 0, :]
    if (first & (WORD - 1)).any() or not (x - first[:, None, :] == steps[None, :, None]).all():
        return None
    return Interleaved(first.reshape(-1) >> 3, lanes)


def _rising_in_runs(a: np.ndarray) -> bool:
    """Whether each run of 8 rises strictly (with its span 7: consecutive)."""
    d = np.diff(a)
    d[WORD - 1::WORD] = 1                  # from one run to the next: anything
    return bool((d > 0).all())


def take(x: np.ndarray, idx: np.ndarray, words: np.ndarray | None) -> np.ndarray:
    """``x[idx]`` as ``put_back`` restores it: the words where ``words`` and ``x`` holds a byte an
    entry, else the entries."""
    if words is not None and x.itemsize == 1:
        return np.take(x.view(np.uint64), _index(words))
    return np.take(x, idx)


def put_back(x: np.ndarray, idx: np.ndarray, words: np.ndarray | None, saved: np.ndarray) -> None:
    """Undo of ``take``: ``x`` at ``idx`` as it was."""
    if words is not None and x.itemsize == 1:
        x.view(np.uint64)[_index(words)] = saved
    else:
        x[idx] = saved


def put(x: np.ndarray, idx: np.ndarray, words: np.ndarray | None, v) -> None:
    """``x[idx] = v`` (``v`` a scalar or shaped as ``idx``), as words where ``words``, ``x`` holds a
    byte an entry and ``v`` is of its type."""
    if words is not None and x.itemsize == 1:
        at = _index(words)
        if np.ndim(v) == 0:
            x.view(np.uint64)[at] = np.full(WORD, v, x.dtype).view(np.uint64)[0]
            return
        if v.dtype == x.dtype and v.shape == idx.shape:
            x.view(np.uint64)[at] = words.arranged(v) if isinstance(words, Interleaved) else \
                np.ascontiguousarray(v).reshape(-1).view(np.uint64)
            return
    x[idx] = v


def _index(words) -> np.ndarray:
    """The word indices of ``words_of``'s answer."""
    return words.index if isinstance(words, Interleaved) else words


# runs across members (Interleaved) taken as words too; tests compare both ways
INTERLEAVED = True
