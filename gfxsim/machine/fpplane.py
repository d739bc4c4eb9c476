"""A memory's footprint planes: dense (a ``Mask`` per entry: the LDS, rewritten chunk after chunk)
or a table of distinct sets and an int32 index per entry (global buffers).

A stored footprint is one of a few sets per row of an output (the tokens a query row consumed),
so a dense ``Mask`` per entry (44 bytes: base, four words, wide id) holds the same triple over and
over: a prefill's output held 0.54 GiB of them at a 1K prompt. Here each entry is 4 bytes, an index
into the table of the triples stored so far (row 0 the empty set); what a load reads is the table's
triples placed by that index, the same bits as the dense plane held.
"""
from __future__ import annotations

import numpy as np

from .provenance import WORDS, Mask, row_hashes, unique_rows

# rows_of where every entry holds one set looks that set up once, not a hash per entry; tests
# compare both ways
ONE_SET = True


def _one_set(base: np.ndarray, wide: np.ndarray, bits: np.ndarray) -> bool:
    """Whether every entry of the flat planes is entry 0's set (base first: most planes part there)."""
    return bool((base == base[0]).all() and (wide == wide[0]).all() and (bits == bits[0]).all())


class DensePlane:
    """Footprints of ``n`` entries as one Mask ``[n]``: FpPlane's methods."""
    __slots__ = ("m",)

    def __init__(self, n: int, m: Mask | None = None):
        self.m = Mask.empty((n,)) if m is None else m

    def take(self, idx) -> Mask:
        return self.m.map(lambda x: np.take(x, idx, axis=0))

    def mask(self) -> Mask:
        return self.m

    def assign(self, idx, m: Mask):
        self.m.assign(idx, m)

    def clear(self, idx):
        self.m.base[idx] = -1
        self.m.wide[idx] = 0

    def repeat(self, u: int) -> DensePlane:
        return DensePlane(0, self.m.map(lambda a: np.repeat(a, u, axis=0)))


class FpPlane:
    """Footprints of ``n`` entries: entry i's set is table row ``index[i]`` (base int64, bits
    uint64 [WORDS], wide uint32, as ``Mask``; row 0 the empty set). Rows no entry names any more
    (a buffer written again, a store taken back) are dropped when the table has doubled since it
    was last compacted, so it stays within twice the distinct sets its entries hold."""
    __slots__ = ("index", "_base", "_bits", "_wide", "_rows", "_hash", "_by_hash", "_live")

    COMPACT_ROWS = 4096                    # no compaction below this many rows

    def __init__(self, n: int):
        self.index = np.zeros(n, np.int32)
        self._base = np.full(8, -1, np.int64)
        self._bits = np.zeros((8, WORDS), np.uint64)
        self._wide = np.zeros(8, np.uint32)
        self._rows = 1                                 # row 0: the empty set
        self._live = 1                                 # rows after the last compaction
        self._hash = np.zeros(0, np.uint64)            # the rows' hashes, sorted
        self._by_hash = np.zeros(0, np.int32)          # the row of each sorted hash
        self._index_hashes()

    @property
    def size(self) -> int:
        return len(self.index)

    @property
    def table(self) -> Mask:
        k = self._rows
        return Mask(self._base[:k], self._bits[:k], self._wide[:k])

    def take(self, idx) -> Mask:
        """The sets of entries ``idx`` (any shape) as a Mask of that shape."""
        return self.sets(self.rows_at(idx))

    def rows_at(self, idx) -> np.ndarray:
        """The table rows of entries ``idx`` (int32, idx's shape): equal rows hold equal sets."""
        return np.take(self.index, idx, axis=0)

    def sets(self, rows) -> Mask:
        """The sets of table rows ``rows`` (``rows_at``'s) as a Mask of their shape."""
        return Mask(np.take(self._base, rows), np.take(self._bits, rows, axis=0), np.take(self._wide, rows))

    def mask(self) -> Mask:
        """Every entry's set, dense."""
        return self.take(np.arange(self.size))

    def assign(self, idx, m: Mask):
        """Entries ``idx`` take the sets of ``m`` (of idx's shape)."""
        self.index[idx] = self.rows_of(m)

    def clear(self, idx):
        """Entries ``idx`` hold no set: base -1 and wide 0, their words kept (as a dense plane's)."""
        m = self.take(idx)
        m.base[...] = -1
        m.wide[...] = 0
        self.assign(idx, m)

    def repeat(self, u: int) -> FpPlane:
        """Each entry ``u`` times (a dword plane made per byte)."""
        out = FpPlane.__new__(FpPlane)
        for s in FpPlane.__slots__:          # its own table: the two may add rows apart
            v = getattr(self, s)
            setattr(out, s, v.copy() if isinstance(v, np.ndarray) else v)
        out.index = np.repeat(self.index, u)
        return out

    # -- the table ------------------------------------------------------------------------------
    def rows_of(self, m: Mask) -> np.ndarray:
        """The table row of each set of ``m`` (added where new), int32 of m's shape. A row whose
        hash another row already has (a 64-bit collision) is added again: found never, exact still."""
        shape = m.base.shape
        if self._rows > max(self.COMPACT_ROWS, 2 * self._live):
            self._compact()
        base = np.ascontiguousarray(m.base, np.int64).reshape(-1)
        wide = np.ascontiguousarray(m.wide, np.uint32).reshape(-1)
        bits = np.ascontiguousarray(m.bits, np.uint64).reshape(-1, WORDS)
        if not len(base):
            return np.zeros(shape, np.int32)
        if ONE_SET and len(base) > 1 and _one_set(base, wide, bits):
            # every entry the same set (a scale stored under lane 0 in each member): its row, once
            return np.full(shape, self.rows_of(Mask(base[:1], bits[:1], wide[:1]))[0], np.int32)
        cols = np.concatenate([base.view(np.uint64)[:, None], wide.astype(np.uint64)[:, None], bits], axis=1)
        h = row_hashes(cols)
        pos = np.minimum(np.searchsorted(self._hash, h), len(self._hash) - 1)
        row = self._by_hash[pos]
        found = (self._hash[pos] == h) & (self._base[row] == base) & (self._wide[row] == wide) & \
            (self._bits[row] == bits).all(axis=1)
        if not found.all():                  # sets not in the table yet: each distinct one added once
            miss = np.flatnonzero(~found)
            first, inv = unique_rows(cols[miss])
            new = self._add(base[miss[first]], bits[miss[first]], wide[miss[first]])
            row[miss] = new[inv]
        return row.reshape(shape)

    def _add(self, base, bits, wide) -> np.ndarray:
        k, n = self._rows, len(base)
        if k + n > len(self._base):
            cap = max(2 * len(self._base), k + n)
            self._base = np.concatenate([self._base[:k], np.full(cap - k, -1, np.int64)])
            self._bits = np.concatenate([self._bits[:k], np.zeros((cap - k, WORDS), np.uint64)])
            self._wide = np.concatenate([self._wide[:k], np.zeros(cap - k, np.uint32)])
        self._base[k:k + n], self._bits[k:k + n], self._wide[k:k + n] = base, bits, wide
        self._rows = k + n
        self._index_hashes()
        return np.arange(k, k + n, dtype=np.int32)

    def _index_hashes(self):
        k = self._rows
        cols = np.concatenate([self._base[:k].view(np.uint64)[:, None], self._wide[:k].astype(np.uint64)[:, None],
                               self._bits[:k]], axis=1)
        h = row_hashes(cols)
        order = np.argsort(h, kind="stable")
        self._hash, self._by_hash = h[order], order.astype(np.int32)

    def _compact(self):
        """Keep only the rows some entry names (row 0 stays the empty set), renumbered in order."""
        used = np.zeros(self._rows, bool)
        used[self.index] = True
        used[0] = True
        keep = np.flatnonzero(used)
        new = np.cumsum(used, dtype=np.int32) - 1
        self.index = new[self.index]
        n = len(keep)
        self._base[:n], self._bits[:n], self._wide[:n] = self._base[keep], self._bits[keep], self._wide[keep]
        self._rows = self._live = n
        self._index_hashes()
