"""A folded batch's sums of results and matrix-instruction records held once per class (fold.py):
the representatives' elements or rows and what places them for every member, expanded where read.

A sum of two results (``PairRecord``) holds every member's elements, member by member. In a folded
batch a member's elements are its representative's, their names shifted (its copy of each
instruction, its elements of each earlier sum) and their footprints moved by its shift of each
field. Held for every member, the sums of a long launch (a prefill's o, summed once per chunk and
head-dim tile) outgrow the machine; held per class they cost 1/members. ``FoldedPair`` keeps the
representatives' sides and cells, ``Spread`` where each member's elements come from, and the
names' shifts as they stood when the sum was made; ``left``, ``right``, ``cell`` and each
footprint's ``index`` are made on every read, exactly what the record held for every member.
A matrix-instruction record (``FoldedRecord``) likewise keeps its representatives' rows and a copy
of the batch's shifts (a few ints per member and field), unless placing it would intern new wide
sets (a footprint moved by part of a window), which is done when it is made.
"""
from __future__ import annotations


import numpy as np

from .consumed import Fp
from .jit import njit
from .mmalog import PAIR_BASE, MmaRecord, PairRecord, pack, unpack_at


class Spread:
    """Where a folded pair record's elements come from: member by member (batch order), its class's
    elements in order. ``cls`` [members] each member's class, ``n_k`` [classes] elements per class;
    ``arrays()`` (src: the representatives' element of each, member: the member of each), made
    once and kept (pairs of one batch with the same counts share one Spread)."""
    __slots__ = ("cls", "n_k", "start_k", "_arrays")

    def __init__(self, cls: np.ndarray, n_k: np.ndarray):
        self.cls, self.n_k = cls, n_k
        self.start_k = np.concatenate([[0], np.cumsum(n_k)])
        self._arrays = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:
            n_m = self.n_k[self.cls]
            if len(self.n_k) == 1:
                src = np.tile(np.arange(self.n_k[0]), len(self.cls))
            else:
                src = np.concatenate([np.arange(self.start_k[k], self.start_k[k] + self.n_k[k])
                                      for k in self.cls.tolist()])
            self._arrays = (src, np.repeat(np.arange(len(self.cls)), n_m))
        return self._arrays


class SpreadFp(Fp):
    """A footprint of a folded pair record's elements: the table (one copy per distinct shift of its
    field, moved) and the representatives' index, placed for every member on each read of
    ``index`` (element i: its representative element's row, in its member's shift's copy)."""
    __slots__ = ("_rep", "_which", "_t", "_spread")

    def __init__(self, table, rep_index: np.ndarray, which: np.ndarray | None, t: int, spread: Spread):
        self.table = table
        self._rep, self._which, self._t, self._spread = rep_index, which, t, spread

    @property
    def index(self) -> np.ndarray:
        src, member = self._spread.arrays()
        idx = np.take(self._rep, src)
        if self._which is None:
            return idx.astype(np.int32)
        return (idx + self._which[member] * self._t).astype(np.int32)

    def at(self, e) -> Fp:
        # index[e] from e's own sources and members: a few elements of a big sum, not all of them
        src, member = self._spread.arrays()
        idx = np.take(self._rep, np.take(src, e))
        if self._which is not None:
            idx = idx + np.take(self._which, np.take(member, e)) * self._t
        return Fp(self.table, idx.astype(np.int32))


class FoldedPair(PairRecord):
    """A pair record of a folded batch (module docstring). ``left``/``right`` are the
    representatives' (ids, mn), each read placed for every member: its copy of each instruction
    (``rep_of``), its elements of each sum or read result in ``keys`` (``shifts`` [keys, members]).
    ``cell``: the representatives' cells placed the same way, or every member's where they had to
    be looked up member by member (``set_cells``)."""
    __slots__ = ("spread", "_rep_of", "_keys", "_shifts", "_rep_cell")

    def __init__(self, left, right, site, member_base, fold_shift, spread: Spread, rep_of: np.ndarray,
                 keys: np.ndarray, shifts: np.ndarray):
        super().__init__(left, right, site, member_base, fold_shift)
        self.spread, self._rep_of, self._keys, self._shifts = spread, rep_of, keys, shifts
        self._rep_cell = None

    def _placed(self, packed) -> tuple:
        src, member = self.spread.arrays()
        ids, mn = (unpack_at(p, src) for p in packed)
        shift_names(ids, mn, member, self._rep_of, self._keys, self._shifts, PAIR_BASE)
        return ids, mn

    @property
    def left(self):
        return self._placed(self.packed_sides()[0])

    @property
    def right(self):
        return self._placed(self.packed_sides()[1])

    @property
    def cell(self):
        if self._rep_cell is not None:
            return unpack_at(self._rep_cell, self.spread.arrays()[0])
        return PairRecord.cell.fget(self)

    def size(self) -> int:
        """How many elements the record holds (every member's)."""
        return len(self.spread.arrays()[0])

    def cell_at(self, e) -> np.ndarray:
        """``cell[e]``, placing only the elements ``e``."""
        if self._rep_cell is not None:
            return unpack_at(self._rep_cell, np.take(self.spread.arrays()[0], e))
        return unpack_at(self.packed_cell(), e)

    @property
    def has_footprints(self) -> bool:
        return self._rep_cell is not None or PairRecord.has_footprints.fget(self)

    def set_rep_footprints(self, rep_cell: np.ndarray, fp: dict):
        """The representatives' cells (each member's elements sum its representative's cells) and
        the footprints for every member (SpreadFp)."""
        self._rep_cell = pack(rep_cell)
        self.fp = fp


_PLACED: list = []                       # the records holding their placed fields, least recent first
_KEEP = 4                                # records whose placed fields are kept: events walk one at a time


class FoldedRecord(MmaRecord):
    """A matrix-instruction record of a folded batch: its provenance fields (a, b, ks_a, ks_b, c_mma,
    c_mn, quant) made on the representatives' rows and placed for every member where read, by the
    batch's shifts as they stood when the instruction ran (``folded``: fold.Fold.unfold_record's
    snapshot). The last few records read keep their placed fields."""
    __slots__ = ("_folded", "_placed_fields")
    held_per_class = True

    def __init__(self, *, first: int, insn, kernel: str, wave: int, workgroups, live: list, source: str | None,
                 exec_mask: np.ndarray, folded, label: str | None = None, operands: tuple | None = None):
        self.set_site(first, insn, kernel, wave, workgroups, live, source, exec_mask, label, operands)
        self._folded = folded
        self._placed_fields = None

    def _fields(self) -> dict:
        fields = self._placed_fields
        if fields is not None:
            if _PLACED[-1] is not self:            # by identity: records compare by their fields
                del _PLACED[next(i for i, r in enumerate(_PLACED) if r is self)]
                _PLACED.append(self)
            return fields
        fields = self._placed_fields = self._folded.place()
        _PLACED.append(self)
        while len(_PLACED) > _KEEP:
            _PLACED.pop(0)._placed_fields = None
        return fields

    def tagged(self) -> bool:
        return self._folded.fields["a"] is not None

    def chained(self) -> bool:
        return self._folded.fields["c_mma"] is not None          # placing keeps None as None

    def fields_for(self, rows: np.ndarray) -> tuple[dict, np.ndarray]:
        """MmaRecord.fields_for without placing where every row is a representative's: a
        representative's shifts are 0, so its placed rows are its class's rows as they are."""
        if self._placed_fields is None:
            fz, bl = self._folded.frozen, self.insn.blocks
            member = rows // bl
            if (fz.rep_of[member] == member).all():
                return self._folded.fields, fz.cls[member] * bl + rows % bl
        return self._fields(), rows

    def k_set_fields(self) -> set:
        """The representatives' K-set fields, which placing keeps: known without placing."""
        f = self._folded.fields
        return f["ks_a"].keys() | f["ks_b"].keys()

    def k_slots(self, operand: str, field: str = "token"):
        """MmaRecord.k_slots from the representatives' rows: each member's block-0 row, shifted by
        its shift of ``field`` as placing would, without placing the record."""
        folded = self._folded
        fz = folded.frozen

        def block0(arr):
            a = np.take(arr, fz.cls * self.insn.blocks, axis=0)
            return fz.shifted(field, a, np.arange(fz.members).reshape((-1,) + (1,) * (a.ndim - 1)))
        return self.slot_row(operand, folded.fields["a" if operand.upper() == "A" else "b"], field, block0)

    a = property(lambda self: self._fields()["a"])
    b = property(lambda self: self._fields()["b"])
    ks_a = property(lambda self: self._fields()["ks_a"])
    ks_b = property(lambda self: self._fields()["ks_b"])
    c_mma = property(lambda self: self._fields()["c_mma"])
    c_mn = property(lambda self: self._fields()["c_mn"])
    quant = property(lambda self: self._fields()["quant"])


class FoldedFields:
    """A record's provenance fields on the representatives' rows and what places them for every
    member: ``frozen`` a copy of the batch's Fold with its shifts as they stood (fold.Fold.frozen),
    ``insn``, ``log`` (the sums the names shift by were made before the record and stay)."""
    __slots__ = ("frozen", "insn", "fields", "log")

    def __init__(self, frozen, insn, fields: dict, log):
        self.frozen, self.insn, self.fields, self.log = frozen, insn, fields, log

    def place(self) -> dict:
        return self.frozen.place_record(self.insn, self.fields, self.log)


@njit
def shift_names(mma, mn, member, rep_of, ids, shifts, pair_base):
    """fold.Fold._names (and FoldedPair's sides) in one pass, in place: the @mn of a name in ``ids`` (sorted: a sum of this
    batch, a result a load read) moves by its per-member shift (row k of ``shifts`` for ids[k]);
    another result of this launch's instructions moves its @mma by its member's distance from its
    representative; anything else is every member's as it is."""
    n = ids.shape[0]
    for i in range(mma.shape[0]):
        x = mma[i]
        if x < 0:
            continue
        m = member[i]
        k = np.searchsorted(ids, x)
        if k < n and ids[k] == x:
            mn[i] = mn[i] + shifts[k, m]
        elif x < pair_base:
            mma[i] = x + (m - rep_of[m])
