"""The log of a launch's matrix instructions: one compact record per issued instruction
(``MmaRecord``), the sums of two results (``PairRecord``), the logs of earlier launches whose
results this launch read, and the K sets of any result element through all of them (``MmaLog``).
"""
from __future__ import annotations

import bisect
from collections import OrderedDict

import numpy as np

from .provenance import WORDS, Mask, WideSets
from . import summaries          # compiled functions by the module: jit.njit rebinds their names
from .summaries import expand
from .trace import MmaEvent
from ..errors import ArgumentError


class MmaRecord:
    """One issued matrix instruction (one statement; member m of a batch is instruction first+m).

    ``first`` its index, ``insn`` its instruction record (``op`` the mnemonic), ``kernel``,
    ``wave``, ``workgroups`` of the batch and the ``live`` members that issued it, ``source`` line,
    ``exec_mask``, ``label`` (the kernel's name for it); per identity field, the values feeding the
    K slots of A and B (``a``, ``b``: field -> compact form, summaries.Field.compact; None
    untagged) and the K sets of their rows (``ks_a``, ``ks_b``: field -> Mask); ``c_mma``/``c_mn``
    the names of what C held (None: nothing named); ``operands`` the traced (inputs, outputs);
    ``quant`` the direction each A row / B column was quantized in ("A"/"B" -> int8 [rows, M|N]:
    +1 x*amax, -1 x/amax, 0 neither; qdir.py), None where no operand byte carried a mark."""
    __slots__ = ("first", "insn", "op", "kernel", "wave", "workgroups", "live", "source", "exec_mask",
                 "a", "b", "ks_a", "ks_b", "c_mma", "c_mn", "operands", "label", "quant")

    def __init__(self, *, first: int, insn, kernel: str, wave: int, workgroups, live: list,
                 source: str | None, exec_mask: np.ndarray, label: str | None = None,
                 a: dict | None = None, b: dict | None = None, ks_a: dict | None = None,
                 ks_b: dict | None = None, c_mma: np.ndarray | None = None, c_mn: np.ndarray | None = None,
                 operands: tuple | None = None, quant: dict | None = None):
        self.set_site(first, insn, kernel, wave, workgroups, live, source, exec_mask, label, operands)
        self.a, self.b = a, b
        self.ks_a = {} if ks_a is None else ks_a
        self.ks_b = {} if ks_b is None else ks_b
        self.c_mma, self.c_mn = c_mma, c_mn
        self.quant = quant

    def set_site(self, first, insn, kernel, wave, workgroups, live, source, exec_mask, label, operands) -> None:
        """The fields every record has: where and what it ran (the class docstring)."""
        self.first, self.insn, self.op = first, insn, insn.mnemonic
        self.kernel, self.wave, self.workgroups, self.live = kernel, wave, workgroups, live
        self.source, self.exec_mask, self.label = source, exec_mask, label
        self.operands = operands

    held_per_class = False                # a folded batch's record (foldrec.FoldedRecord): placed where read

    def chained(self) -> bool:
        """Whether C held named results (``c_mma`` is not None)."""
        return self.c_mma is not None

    def fields_for(self, rows: np.ndarray) -> tuple[dict, np.ndarray]:
        """(fields, at): the record's ``ks_a``, ``ks_b``, ``c_mma``, ``c_mn``, ``quant`` and where its
        rows ``rows`` (member*blocks + block) lie in them: their values at ``at`` are the record's at
        ``rows``."""
        return {"ks_a": self.ks_a, "ks_b": self.ks_b, "c_mma": self.c_mma, "c_mn": self.c_mn, "quant": self.quant}, rows

    def tagged(self) -> bool:
        """Whether the operands carried provenance (A's K-slot values are recorded)."""
        return self.a is not None

    def k_set_fields(self) -> set:
        """The fields A's and B's K sets are kept of."""
        return self.ks_a.keys() | self.ks_b.keys()

    def member_rows(self, member):
        bl = self.insn.blocks
        return slice(member * bl, (member + 1) * bl)

    def rows_of(self, members) -> np.ndarray:
        """The record's rows (member*blocks + block) of the given members, in order."""
        bl = self.insn.blocks
        return (np.asarray(members)[:, None] * bl + np.arange(bl)).ravel()

    def k_slots(self, operand: str, field: str = "token"):
        """``field`` in each K slot of A's row 0 / B's column 0 (block 0), per workgroup of the
        batch: int64 ``[members, K]`` (-1 where a slot carries none), or None untagged."""
        return self.slot_row(operand, self.a if operand.upper() == "A" else self.b, field,
                             lambda arr: arr[::self.insn.blocks])

    def slot_row(self, operand: str, side, field: str, block0):
        """k_slots of ``side`` (an operand's fields), whose ``field`` array gives each workgroup's
        block-0 rows through ``block0(array)``."""
        if side is None:
            return None
        insn = self.insn
        if field not in side:
            return np.full((len(self.workgroups), insn.K), -1, np.int64)
        kind, arr = side[field]
        op = operand.upper()
        full = expand(kind, block0(arr), op, insn.M, insn.N, insn.K)
        return np.asarray(full[:, 0, :] if op == "A" else full[:, :, 0], np.int64)



PAIR_BASE = 1 << 28          # ids of sums of two matrix results (PairRecords)
_NAMED = 4                   # instructions a sum's name lists
_WALK = 4096                 # sums of sums a name follows
FOREIGN_BASE = 1 << 29       # ids of results made by an earlier launch: (k + 1) * FOREIGN_BASE + its id
KSETS_TOGETHER = True        # ksets unites a field's K sets of every record asked at once (False: record by record)


def pack(x) -> tuple:
    """An int array of a pair record in the fewest bytes that hold it exactly: ("c", v, n) n copies
    of v, ("r", v, n) v, v+1, ..., or ("n", base, narrow) base + a uint8/uint16/int32 array. A sum's
    sides are mostly one pair id over a run of elements, or one instruction per workgroup (a span
    of a few hundred): a launch's pairs live as long as its log, 16 bytes an element unpacked."""
    x = np.asarray(x)
    n = x.size
    if n == 0:
        return ("n", 0, x.astype(np.int32))
    lo, hi = int(x.min()), int(x.max())
    if lo == hi:
        return ("c", lo, n)
    if hi - lo == n - 1 and int(x[0]) == lo and summaries.counts_up(x):
        return ("r", lo, n)
    span = hi - lo
    dt = np.uint8 if span < 1 << 8 else np.uint16 if span < 1 << 16 else None
    return ("n", lo, (x - lo).astype(dt)) if dt is not None else ("n", 0, x.astype(np.int32))


def unpack(p) -> np.ndarray:
    kind, a, b = p
    if kind == "c":
        return np.full(b, a, np.int32)
    if kind == "r":
        return np.arange(a, a + b, dtype=np.int32)
    out = b.astype(np.int32)
    if a:
        out += np.int32(a)
    return out


def unpack_at(p, e) -> np.ndarray:
    """``unpack(p)[e]`` (int32), unpacking only the elements ``e``: a few elements of a big sum."""
    kind, a, b = p
    if kind == "c":
        return np.full(len(e), a, np.int32)
    if kind == "r":                  # a negative index counts from the end, as a gather's does
        e = np.asarray(e)
        return (np.where(e < 0, e + b, e) + a).astype(np.int32)
    out = np.take(b, e).astype(np.int32)
    if a:
        out += np.int32(a)
    return out


class PairRecord:
    """The sum of two matrix results, element for element: what each side was (@mma, @mn).
    ``left``, ``right`` ((ids, mn) int32 [n] each) and ``cell`` are held packed (pack) and
    unpacked on each read. ``site``: where the add ran (instruction, source, wave, workgroups,
    lanes); ``member_base``: the elements are held member by member, where each member's start
    ([members + 1]); ``fold_shift``: a folded batch's @mn shift of each member (fold.py). Its
    footprints (``cell``, ``fp``) are made when first needed (consumed.pair_footprint)."""
    __slots__ = ("_left", "_right", "site", "_cell", "fp", "member_base", "fold_shift")

    def __init__(self, left, right, site: tuple | None = None, member_base: np.ndarray | None = None,
                 fold_shift: np.ndarray | None = None):
        self._left = tuple(pack(x) for x in left)
        self._right = tuple(pack(x) for x in right)
        self.site = site
        self._cell = None                            # int32 [n]: the D element summed, -1: a reduction
        self.fp = None                               # field -> (consumed, consumed twice) as consumed.Fp
        self.member_base = member_base
        self.fold_shift = fold_shift

    def packed_cell(self) -> tuple | None:
        """``cell`` as held (``pack``; None before the footprints are made)."""
        return self._cell

    def packed_sides(self) -> tuple:
        """(left, right) as held: each (ids, mn) packed (``pack``)."""
        return self._left, self._right

    @property
    def left(self):
        return tuple(unpack(p) for p in self._left)

    @property
    def right(self):
        return tuple(unpack(p) for p in self._right)

    @property
    def cell(self):
        return None if self._cell is None else unpack(self._cell)

    @property
    def has_footprints(self) -> bool:
        """Whether ``cell`` and ``fp`` are made (without unpacking the cells to look)."""
        return self._cell is not None

    def set_footprints(self, cell: np.ndarray, fp: dict):
        """The pair's cells (the D element each element sums, -1 a reduction) and its footprints
        (field -> (consumed, consumed twice) as consumed.Fp), made from its two sides."""
        self._cell = pack(cell)
        self.fp = fp


class MmaLog:
    """Every matrix instruction of a launch, in issue order, as compact records; the sums of two
    results (pairs); and the logs of earlier launches whose results this launch read.

    ``declared``: the fields the launch's output buffers declare they consume (Buffer.expect),
    K fields whether or not an instruction varies along them. ``k_sets`` and ``k_tables`` hold
    what consumed.py derives of a record (by record index), dropped with their records (of a folded
    record, ``k_sets`` keeps the K fields it was made with and ``k_recent`` the latest sets)."""

    def __init__(self, wide: WideSets | None = None, declared=frozenset(), kernel: str | None = None):
        self.records: list[MmaRecord] = []
        self._starts = np.zeros(64, np.int64)        # each record's first instruction index, grown by doubling
        self.pairs: list[PairRecord] = []
        self.foreign: list = []                      # [(MmaLog, its WideSets)]
        self.wide = wide
        self.declared = frozenset(declared)
        self.kernel = kernel                         # how a later launch's findings name this one
        self.k_sets: dict = {}                       # record index -> (A's, B's) {field: Mask}
        self.k_tables: dict = {}                     # record index -> {field: Mask [rows]} or None
        self.k_recent: OrderedDict = OrderedDict()   # record index -> k_sets' pair, of the latest folded ones
        self._k_field_names = None                   # (records seen, their K fields and declared)
        self._d_name_cache: dict = {}                # (record's id, members) -> (record, aligned's D names)
        self._live: list | None = None               # the latest record's live members (add shares it)
        self._exec: dict = {}                        # wave -> (its latest EXEC handed in, the one kept)

    def add(self, rec: MmaRecord):
        # a batch's records mostly name the same live members: they share one list (read, never
        # changed in place), not a copy each (2 KiB a record of 256 members: 0.4 GiB of a 4K-prompt
        # prefill's ~200K records)
        if rec.live == self._live:
            rec.live = self._live
        else:
            self._live = rec.live
        # and a wave's EXEC is mostly as at its previous chunk's: one array (never written into:
        # Wave.set_exec keeps a new one), not one of members x 64 bools a chunk (~0.1 GiB at a 4K
        # prompt); compared once per array the wave hands in
        ex = rec.exec_mask
        seen, kept = self._exec.get(rec.wave, (None, None))
        if ex is not seen:
            if not (kept is not None and kept.shape == ex.shape and np.array_equal(kept, ex)):
                kept = ex
            self._exec[rec.wave] = (ex, kept)
        rec.exec_mask = kept
        n = len(self.records)
        if n == len(self._starts):       # a sum reads the starts after most records: never rebuilt from a list
            self._starts = np.concatenate([self._starts, np.zeros(n, np.int64)])
        self._starts[n] = rec.first
        self.records.append(rec)

    @property
    def starts(self) -> np.ndarray:
        """Each record's first instruction index (int64, ascending; a view: read, do not keep)."""
        return self._starts[:len(self.records)]

    def k_fields(self) -> set:
        """The fields some matrix instruction of the launch consumed along K (token, dim), and
        those the launch's output buffers declare (``declared``)."""
        seen, names = self._k_field_names or (0, set(self.declared))
        for r in self.records[seen:]:                  # the records added since the last call
            names |= r.k_set_fields()
        self._k_field_names = (len(self.records), names)
        return names

    def add_pair(self, left, right, site: tuple | None = None, member_base: np.ndarray | None = None,
                 fold_shift: np.ndarray | None = None) -> int:
        """A new pair record (PairRecord's fields); returns its id."""
        return self.add_pair_record(PairRecord(left, right, site, member_base, fold_shift))

    def add_pair_record(self, rec: PairRecord) -> int:
        """A pair record made by the caller (a folded batch's, foldrec.FoldedPair); returns its id."""
        if len(self.pairs) >= FOREIGN_BASE - PAIR_BASE:
            raise ArgumentError("more sums of matrix results than the provenance ids can name")
        self.pairs.append(rec)
        return PAIR_BASE + len(self.pairs) - 1

    def truncate(self, n_records: int, n_pairs: int, n_foreign: int):
        """Forget every record, pair and earlier launch from these counts on (a folded attempt
        taken back), with what consumed.py cached of the records dropped."""
        del self.records[n_records:]
        del self.pairs[n_pairs:]
        del self.foreign[n_foreign:]
        for cache in (self.k_sets, self.k_tables, self.k_recent):
            for k in [k for k in cache if k >= n_records]:
                del cache[k]
        self._k_field_names = None

    def foreign_base(self, log, wide) -> int:
        """The id offset under which results of ``log`` (an earlier launch) are known here."""
        for k, (l, _) in enumerate(self.foreign):
            if l is log:
                return (k + 1) * FOREIGN_BASE
        if len(self.foreign) >= 2:
            raise ArgumentError("a launch can read matrix results of at most two earlier launches")
        self.foreign.append((log, wide))
        return len(self.foreign) * FOREIGN_BASE

    def events(self) -> list:
        """One MmaEvent view per instruction and live workgroup, in index order."""
        return list(_events_of(self.records))

    def count(self) -> int:
        """How many events ``events()`` holds, without making them."""
        return sum(len(r.live) for r in self.records)

    def tagged_events(self):
        """The events whose operands carried provenance (``MmaEvent.tagged``), in index order,
        made one by one as asked for."""
        return _events_of(r for r in self.records if r.tagged())

    def events_carrying(self, operand: str, field: str = "token"):
        """The events (in index order, made one by one as asked for) whose ``operand`` ("A" or
        "B") carries a ``field`` value in some K slot: those whose ``token_set(operand, field)`` is
        not empty, found from each record's compact form (a broadcast of its values) without
        expanding or uniquing any."""
        op = operand.upper()
        for r in self.records:
            side = r.a if op == "A" else r.b
            if not side or field not in side:
                continue
            arr = side[field][1]
            present = (np.asarray(arr) >= 0).reshape(len(r.workgroups), -1).any(axis=1)
            for m in r.live:
                if present[m]:
                    yield MmaEvent.from_record(r, m)

    def record_of(self, index: int):
        """The record of instruction ``index`` (None if no record holds it)."""
        if index >= PAIR_BASE:
            return None
        i = bisect.bisect_right(self.starts, index) - 1      # starts ascend; no array of them per call
        if i < 0:
            return None
        r = self.records[i]
        return r if index < r.first + len(r.workgroups) else None

    def describe(self, index: int, label: str | None = None) -> str:
        """``#12 (chunk 0 tile 1 j 0)``: an instruction's index and the kernel's label for it
        (``label``: an instruction not logged yet). A sum of results is named by the instructions
        it summed and the add that made it, a result of an earlier launch by that launch."""
        if index >= FOREIGN_BASE:
            k = index // FOREIGN_BASE
            theirs = self.foreign[k - 1][0]
            return f"{theirs.describe(index - k * FOREIGN_BASE)} of launch {theirs.kernel or '?'}"
        if index >= PAIR_BASE:
            site = self.pairs[index - PAIR_BASE].site
            return self.summed_names(index) + (f" (summed at #{site[0]}, {site[1]})" if site is not None else
                                               " (summed)")
        rec = self.record_of(index)
        if label is None and rec is not None:
            label = rec.label
        return f"#{index}" + (f" ({label})" if label else "")

    def summed_names(self, index: int) -> str:
        """``#12 (j 0) + #13 (j 1)``: the instructions a sum of results added (``summed``)."""
        leaves = self.summed(index)
        names = " + ".join(self.describe(i) for i in leaves[:_NAMED])
        return names + (f" and {len(leaves) - _NAMED} more" if len(leaves) > _NAMED else "")

    def trace_index(self, index: int) -> int:
        """The trace index a value's name stands for: an instruction's own, the add that made a sum
        (-1 where unknown), an earlier launch's result's index there."""
        if index >= FOREIGN_BASE:
            return index % FOREIGN_BASE
        if index >= PAIR_BASE:
            site = self.pairs[index - PAIR_BASE].site
            return int(site[0]) if site is not None else -1
        return index

    def summed(self, index: int) -> list:
        """The instructions (their indices, sorted) whose results a sum of results added, through
        sums of sums; results of earlier launches are left out."""
        seen, out, todo = set(), set(), [index]
        while todo and len(seen) < _WALK:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            for ids, _ in self.pairs[pid - PAIR_BASE].left, self.pairs[pid - PAIR_BASE].right:
                for i in np.unique(ids[ids >= 0]).tolist():
                    if i < PAIR_BASE:
                        out.add(i)
                    elif i < FOREIGN_BASE:
                        todo.append(i)
        return sorted(out)

    def aligned(self, c_mma, c_mn, insn, members):
        """The record whose D is exactly this C (``[nb, M, N]`` ids in the C layout of the members
        ``members``, an index array), or None."""
        prev = self.record_of(int(c_mma.flat[0])) if c_mma.size and c_mma.flat[0] >= 0 else None
        if prev is None or prev.insn is not insn:
            return None
        member, mn = self._d_names(insn, members)
        if c_mma.shape[0] != member.shape[0] or not (c_mma == prev.first + member).all() or not (c_mn == mn).all():
            return None
        return prev

    def aligned_many(self, c_mma, c_mn, insn, members) -> list:
        """``[self.aligned(c_mma[i], c_mn[i], insn, members) for i in range(len(c_mma))]`` for C
        names stacked ``[n, nb, M, N]`` (an mma_many call's Cs): each compared in one pass."""
        n = len(c_mma)
        out = [None] * n
        if not n or not c_mma[0].size:
            return out
        member, mn = self._d_names(insn, members)
        if c_mma.shape[1] != member.shape[0]:
            return out
        prevs = [self.record_of(x) if x >= 0 else None for x in c_mma.reshape(n, -1)[:, 0].tolist()]
        at = [i for i, r in enumerate(prevs) if r is not None and r.insn is insn]
        if not at:
            return out
        first = np.array([prevs[i].first for i in at], np.int64)[:, None, None, None]
        ok = ((c_mma[at] == first + member[None]).reshape(len(at), -1).all(axis=1) &
              (c_mn[at] == mn[None]).reshape(len(at), -1).all(axis=1))
        for i, good in zip(at, ok.tolist()):
            out[i] = prevs[i] if good else None
        return out

    def _d_names(self, insn, members):
        """([nb, 1, 1] member, [nb, M, N] @mn) of a D in its own layout, kept per (record, members):
        every chained C of a launch asks for the same few."""
        members = np.asarray(members)
        key = (insn.blocks, insn.M, insn.N, members.dtype.str, members.tobytes())    # all it reads of the record
        got = self._d_name_cache.get(key)
        if got is None:
            member = np.repeat(members, insn.blocks)[:, None, None]
            blk = np.tile(np.arange(insn.blocks), len(members))[:, None, None]
            mn = (blk * insn.M + np.arange(insn.M)[None, :, None]) * insn.N + np.arange(insn.N)[None, None, :]
            got = self._d_name_cache[key] = (member, mn)
        return got

    def ksets(self, ids: np.ndarray, mn: np.ndarray, wide: WideSets) -> dict:
        """K sets (field -> Mask [N]) of result elements named by (@mma, @mn): through chains in C,
        sums of results and results of earlier launches."""
        n = len(ids)
        out: dict = {}
        pos = np.arange(n)
        ids = np.asarray(ids, np.int64)
        mn = np.asarray(mn, np.int64)
        starts = np.asarray(self.starts, np.int64)
        while len(pos):
            nxt = ([], [], [])
            local = ids < PAIR_BASE
            if local.any():
                self._from_records(pos[local], ids[local], mn[local], starts, out, nxt, n, wide)
            pair = (ids >= PAIR_BASE) & (ids < FOREIGN_BASE)
            for pid in np.unique(ids[pair]).tolist():
                sel = pair & (ids == pid)
                p = self.pairs[pid - PAIR_BASE]
                e = mn[sel]
                for side_ids, side_mn in (p.left, p.right):
                    got = side_ids[e]
                    keep = got >= 0
                    nxt[0].append(pos[sel][keep])
                    nxt[1].append(got[keep])
                    nxt[2].append(side_mn[e][keep])
            far = ids >= FOREIGN_BASE
            for k in np.unique(ids[far] // FOREIGN_BASE).tolist():
                sel = far & (ids // FOREIGN_BASE == k)
                log, their_wide = self.foreign[k - 1]
                theirs = log.ksets(ids[sel] - k * FOREIGN_BASE, mn[sel], their_wide)
                for f, m in theirs.items():
                    _unite(out, f, pos[sel], import_wide(m, their_wide, wide), n, wide)
            if not nxt[0]:
                break
            pos, ids, mn = (np.concatenate(x) for x in nxt)
        return out

    def _from_records(self, pos, ids, mn, starts, out, nxt, n, wide):
        ri = np.searchsorted(starts, ids, "right") - 1
        if not KSETS_TOGETHER:
            for r_i in np.unique(ri).tolist():
                sel = ri == r_i
                for f, at, s in self._record_ksets(r_i, pos[sel], ids[sel], mn[sel], nxt, wide):
                    _unite(out, f, at, s, n, wide)
            return
        # each record's elements in their order (a stable sort: what ``ri == r_i`` selects), and
        # every record's K sets of a field united into ``out`` at once: a final O.sV/l asks
        # thousands of records, each a few elements
        order = np.argsort(ri, kind="stable")
        ri, pos, ids, mn = ri[order], pos[order], ids[order], mn[order]
        cut = np.flatnonzero(ri[1:] != ri[:-1]) + 1
        lo, hi = np.concatenate(([0], cut)).tolist(), np.concatenate((cut, [len(ri)])).tolist()
        recs = [self.records[r] for r in ri[lo].tolist()]
        each = lambda x: np.repeat(np.asarray(x, np.int64), np.subtract(hi, lo))
        M, N = each([r.insn.M for r in recs]), each([r.insn.N for r in recs])
        split = (mn // (M * N), (mn // N) % M, mn % N)        # every element's block, row, column at once
        parts: dict = {}                  # field -> [(positions, A side or None, B side or None)]
        for i, j in zip(lo, hi):
            for f, at, s in self._record_ksets(int(ri[i]), pos[i:j], ids[i:j], mn[i:j], nxt, wide, unite=False,
                                               split=tuple(x[i:j] for x in split)):
                parts.setdefault(f, []).append((at, *s))
        for f, got in parts.items():
            at = np.concatenate([g[0] for g in got])
            has_a, has_b = any(g[1] is not None for g in got), any(g[2] is not None for g in got)
            if not has_b:
                s = _picked([g[1] for g in got], [len(g[0]) for g in got])
            elif not has_a:
                s = _picked([g[2] for g in got], [len(g[0]) for g in got])
            else:                 # the empty set stands for a side a record has not: a union with it is that side
                s = _picked([g[1] for g in got], [len(g[0]) for g in got]).union(
                    _picked([g[2] for g in got], [len(g[0]) for g in got]), wide)
            _unite(out, f, at, s, n, wide)

    def _record_ksets(self, r_i, pos, ids, mn, nxt, wide, unite=True, split=None):
        """(field, positions, K set) of record ``r_i``'s elements (``unite=False``: a pair for A's
        rows and B's columns, each (Mask, rows, row or column) to pick, or None for a side without
        the field); their C's names to ``nxt``. ``split``: the elements' (block, row, column), made
        for many records at once."""
        rec = self.records[r_i]
        M, N, bl = rec.insn.M, rec.insn.N, rec.insn.blocks
        blk, m, nn = (mn // (M * N), (mn // N) % M, mn % N) if split is None else split
        fields, row = rec.fields_for((ids - rec.first) * bl + blk)
        ks_a, ks_b = fields["ks_a"], fields["ks_b"]
        out = []
        for f in ks_a.keys() | ks_b.keys():
            if unite:
                sa = ks_a[f].map(lambda x: x[row, m]) if f in ks_a else None
                sb = ks_b[f].map(lambda x: x[row, nn]) if f in ks_b else None
                s = sa if sb is None else sb if sa is None else sa.union(sb, wide)
            else:                 # what to pick, for _picked
                s = ((ks_a[f], row, m) if f in ks_a else None, (ks_b[f], row, nn) if f in ks_b else None)
            out.append((f, pos, s))
        if fields["c_mma"] is not None:
            cm = fields["c_mma"][row, m, nn]
            keep = cm >= 0
            nxt[0].append(pos[keep])
            nxt[1].append(cm[keep].astype(np.int64))
            nxt[2].append(fields["c_mn"][row, m, nn][keep].astype(np.int64))
        return out


def _picked(refs, counts) -> Mask:
    """``Mask.concat([m.map(lambda x: x[rows, cols]) for m, rows, cols in refs])``, the empty set
    ``counts[i]`` times where ``refs[i]`` is None: every mask's elements laid end to end and picked
    in one take of each array (thousands of records, a few elements each)."""
    bases, bits, wides, at, off = [], [], [], [], 0
    for ref, k in zip(refs, counts):
        if ref is None:
            base, bit, wid = np.full(k, -1, np.int64), np.zeros((k, WORDS), np.uint64), np.zeros(k, np.uint32)
            idx = np.arange(k)
        else:
            m, rows, cols = ref
            if m.base.ndim == 2:
                base, bit, wid = m.base.reshape(-1), m.bits.reshape(-1, m.bits.shape[-1]), m.wide.reshape(-1)
                idx = rows * m.base.shape[1] + cols
            else:
                p = m.map(lambda x: x[rows, cols])
                base, bit, wid = p.base, p.bits, p.wide
                idx = np.arange(k)
        bases.append(base)
        bits.append(bit)
        wides.append(wid)
        at.append(idx + off)
        off += len(base)
    at = np.concatenate(at)
    return Mask(np.concatenate(bases)[at], np.concatenate(bits)[at], np.concatenate(wides)[at])


def _unite(out, f, pos, s: Mask, n, wide):
    """out[f][pos] |= s, where pos may repeat (two sides of a sum in one record)."""
    cur = out.get(f)
    if cur is None:
        cur = out[f] = Mask.empty((n,))
        # distinct positions of the empty set, s narrow: the union is s as it is
        if (len(pos) < 2 or (pos[1:] > pos[:-1]).all()) and not s.wide.any():
            cur.assign(pos, s)
            return
    if len(pos) < 2 or (pos[1:] > pos[:-1]).all() or (np.diff(np.sort(pos)) != 0).all():    # no repeat: one union
        cur.assign(pos, cur.map(lambda x: x[pos]).union(s, wide))
        return
    idx = np.arange(len(pos))
    while len(idx):
        _, first = np.unique(pos[idx], return_index=True)
        take = idx[first]
        p = pos[take]
        cur.assign(p, cur.map(lambda x: x[p]).union(s.map(lambda x: x[take]), wide))
        idx = np.setdiff1d(idx, take, assume_unique=True)


def import_wide(m: Mask, theirs: WideSets, ours: WideSets) -> Mask:
    """A mask whose wide ids belong to another launch's WideSets, re-interned in ours."""
    if theirs is ours or not m.wide.any():
        return m
    out = m.map(lambda x: x.copy())
    for wid in np.unique(m.wide[m.wide != 0]).tolist():
        out.wide[m.wide == wid] = ours.intern(theirs.values(wid))
    return out


def _events_of(records):
    """The MmaEvent views of ``records``, one per live workgroup of each, made as asked for."""
    for r in records:
        for m in r.live:
            yield MmaEvent.from_record(r, m)
