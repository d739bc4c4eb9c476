"""Folded provenance: the workgroups of a batch whose provenance differs only by a shift per field.

A batched launch runs ``members`` workgroups side by side, every register array holding each
member's lanes. Their numbers differ; their provenance mostly differs only by where they are:
member m's tokens are its representative's plus a partition's first token, its query heads plus
a kv head's first head, its matrix results the same instructions' copies m. A folded batch keeps
provenance for one representative per class of members (``Fold.reps``; member 0 represents class
0) on ``classes x lanes`` columns, and per field and member the shift that gives the member's
values from its representative's. Identities, footprints, K sets, scale checks and the names of
results cost 1/members of the work; they are expanded to every member only where they leave the
wave — global stores, the matrix-instruction and pair records, and what a user asks of a value.

Exact, never assumed: wherever a member's provenance could part from its representative's — the
tags a load reads, EXEC under which provenance is written, a select's condition, a lane or byte
route, an LDS address, an add of two results — the member's columns are compared with its
representative's, and the first difference raises ``Unfolded`` naming it. The launch then drops
the attempt (its stores, records, findings) and runs the batch again with the members split by
what differed (a tail partition becomes a class of its own), or unfolded. A scale-group mismatch
found on a representative is reported for every member of its class (``Fold.for_members``); the
other provenance findings unfold the batch, so each names its own member.

Shifts (``Fold.shift[field]``, int64 ``[members]``; a representative's is 0):
* a tag field (token, head, dim, seq, ...): from the first load that reads the field, checked by
  every later load;
* ``@mma`` of a matrix result: the member's index minus its representative's (member m's copy of
  batched instruction i is i + m); its ``@mn`` is unshifted;
* ``@mma`` of a sum of results is the pair record's one id; its ``@mn`` indexes the record's
  elements, held member by member, and shifts by where the member's elements start minus where its
  representative's do (``PairRecord.fold_shift``);
* a result a load reads back (what an earlier launch's workgroups stored: a reduce's partials) is
  the same id in every member, its ``@mn`` one shift per member from the representative's, set by
  the first load that reads it and checked by every later one (``Fold.name_shift``);
* a footprint's window base moves with its field (by whole windows; else the batch unfolds).
"""
from __future__ import annotations

import copy

import numpy as np

from .consumed import distinct, pair_cells
from . import foldrec           # compiled functions by the module: jit.njit rebinds their names
from .foldrec import FoldedFields, FoldedPair, Spread, SpreadFp
from .errors import GfxSimError
from .jit import njit, starting
from .fpplane import FpPlane
from .mmalog import PAIR_BASE, PairRecord
from .encoding import AT, ENC, PLANES as ENC_PLANES
from .provenance import COVER, RESERVED, WINDOW, Mask, Prov
from .summaries import row_sets

RETRIES = 3              # attempts with finer classes before a batch runs unfolded
MAX_CLASSES = 16         # more classes than this: folding no longer pays, the batch runs unfolded
# provenance findings made on a representative's columns: they would name it, not each member
# (unless reported for every member: scale-group-mismatch, fold.Fold.for_members)
RESTART_KINDS = frozenset({"ab-kslot-mismatch", "kslot-unknown-origin", "scale-group-mismatch", "double-count",
                           "format-mismatch",
                           "identity-mismatch",
                           "accumulator-carried"})


class Unfolded(BaseException):
    """A member's provenance parts from its representative's (``what``); ``keys`` (int [members],
    or None) groups the members by what they held there, for finer classes. A BaseException: a
    kernel's ``except Exception`` must not swallow it."""

    def __init__(self, what: str, keys=None):
        super().__init__(what)
        self.what = what
        self.keys = keys


# one class: a load's footprint planes checked member against member 0 where they lie
# (Fold._rep_mask; False: Fold.rep on moved copies, the A/B tests/gfxsim/machine/test_fold.py compares)
ONE_CLASS_MASKS = True
PAIR_PLANS = 64                  # pair plans a Fold keeps (one per distinct classes of a sum's elements)


class Fold:
    """The classes of a batch's members and every field's per-member shift (module docstring)."""

    def __init__(self, members: int, lanes: int, classes=None, wide=None):
        cls = np.zeros(members, np.int64) if classes is None else np.asarray(classes, np.int64)
        _, first, inv = np.unique(cls, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")          # classes numbered by their first member
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        self.members, self.lanes = members, lanes
        self.cls = rank[inv.ravel()]                      # [members] class of each member
        self.reps = first[order]                          # [classes] representative of each class
        self.classes = len(self.reps)
        self.width = self.classes * lanes                 # provenance columns
        self.rep_of = self.reps[self.cls]                 # [members] each member's representative
        lane = np.arange(lanes)
        self.rep_cols = (self.reps[:, None] * lanes + lane).ravel()        # [width] their columns
        self.member_cols = (self.cls[:, None] * lanes + lane).ravel()      # [members*lanes] folded column
        self.col_member = np.repeat(np.arange(members), lanes)             # [members*lanes] member of a column
        self.wide = wide                                  # the launch's WideSets (sets wider than a window)
        self.shift: dict = {}                             # field -> int64 [members]
        self.name_shift: dict = {}                        # a result id loads read -> its @mn shift [members]
        self.known: dict = {}                             # field -> bool [members]: shift set
        self._spreads: dict = {}                          # elements per class -> foldrec.Spread of the sums
        self._pair_plans: dict = {}                       # classes of a sum's elements -> pair()'s plan
        self._frozen = None                               # a copy with the shifts as they stand (frozen())

    # -- per-column data ------------------------------------------------------------------------
    def rep(self, x, what: str) -> np.ndarray:
        """The representatives' columns of ``x`` (last axis members*lanes), after checking that
        every member's columns equal its representative's (else ``Unfolded``)."""
        x = np.asarray(x)
        if x.shape[-1] != self.members * self.lanes:
            raise GfxSimError(f"folded provenance: {what} has {x.shape[-1]} columns, the batch "
                              f"{self.members * self.lanes}")
        if self.classes == 1:
            x3 = x.reshape(x.shape[:-1] + (self.members, self.lanes))
            if not (x3 == x3[..., :1, :]).all():
                raise Unfolded(what, self._keys(x))
            return x[..., :self.lanes]
        r = np.take(x, self.rep_cols, axis=-1)
        if not np.array_equal(np.take(r, self.member_cols, axis=-1), x):
            raise Unfolded(what, self._keys(x))
        return r

    def _keys(self, x) -> np.ndarray:
        """Members grouped by their own columns of x (equal columns, equal key)."""
        x3 = np.asarray(x).reshape((-1, self.members, self.lanes))
        rows = np.ascontiguousarray(np.swapaxes(x3, 0, 1)).reshape(self.members, -1)
        _, inv = np.unique(rows, axis=0, return_inverse=True)
        return inv.ravel()

    def expand_cols(self, a: np.ndarray) -> np.ndarray:
        """A folded array's columns (last axis) for every member, unshifted."""
        if self.classes == 1:
            return np.tile(a, (1,) * (a.ndim - 1) + (self.members,))
        return np.take(a, self.member_cols, axis=-1)

    # -- sources: what a load read --------------------------------------------------------------
    def _fold_plane(self, f: str, a: np.ndarray) -> np.ndarray:
        """A tag plane a load read (``[rows, members*lanes]``), folded: the field's shifts set
        (first load) or checked (later loads). A plane broadcast over its rows (every byte of a
        lane's access in one element's tag: ``Buffer.tags_at``'s views) is checked on its first row."""
        R = a.shape[0]
        if R > 1 and a.strides[0] == 0:
            return np.ascontiguousarray(np.broadcast_to(self._fold_plane(f, a[:1]), (R, self.width)))
        a = np.ascontiguousarray(a, np.int32)
        M, L = self.members, self.lanes
        shift, has = np.zeros(M, np.int64), np.zeros(M, np.bool_)
        check = _fold_check_numpy if starting(__name__) else _fold_check     # numba's start: not awaited
        if not check(a, self.rep_cols if self.classes > 1 else _NO_COLS, self.cls, L, shift, has):
            raise Unfolded(f"a load's {f!r} tags", self._pattern_keys(a.reshape(R, M, L)))
        self._set_shift(f, shift, has, f"a load's {f!r} tags")
        return np.ascontiguousarray(a[:, :L] if self.classes == 1 else np.take(a, self.rep_cols, axis=1))

    def fold_member_tags(self, tags: dict, rows: int) -> dict | None:
        """``fold_prov``'s tag planes for a load whose planes Buffer.member_tags gives (field ->
        ("member", x [members]), ("lane", x [rows, lanes]) or ("both", (u, j)), every field, in its
        order; ``rows`` the load's): the shifts ``_fold_check`` finds in the planes they stand for,
        set or checked as ``_fold_plane`` does, without making those planes; field -> the folded
        plane [rows, width]; Unfolded where ``_set_shift`` raises it. None, having changed nothing,
        where a member does not fold otherwise (the caller folds the planes, which says where)."""
        M, L = self.members, self.lanes
        found = []
        for f, (kind, x) in tags.items():
            if kind == "member":         # member m's elements all hold x[m]; its representative's x[rep]
                x64, v = x.astype(np.int64), x[self.rep_of].astype(np.int64)
                held = v >= 0
                if not (held | (x64 == v)).all():
                    return None
                found.append((f, np.where(held, x64 - v, 0), held, np.repeat(x[self.reps], L)[None, :]))
            elif kind == "lane":         # every member holds member 0's: shift 0 wherever one is held
                found.append((f, np.zeros(M, np.int64), np.full(M, bool((x >= 0).any())),
                              x if self.classes == 1 else np.tile(x, (1, self.classes))))
            else:                        # member m's element (r, l) holds u[m, j[r, l]]: u's rows fold
                u, j = x
                u64, v = u.astype(np.int64), u[self.rep_of].astype(np.int64)
                held = v >= 0
                d = np.where(held, u64 - v, 0)
                has = held.any(axis=1)
                first = d[np.arange(M), np.argmax(held, axis=1)]        # 0 where none is held
                if not (held | (u64 == v)).all() or not (~held | (d == first[:, None])).all():
                    return None
                reps = np.take(u[self.reps], j, axis=1)                 # [classes, rows, lanes]
                found.append((f, first, has, reps.transpose(1, 0, 2).reshape(j.shape[0], self.width)))
        out = {}
        for f, shift, has, plane in found:
            self._set_shift(f, shift, has, f"a load's {f!r} tags")
            out[f] = np.ascontiguousarray(np.broadcast_to(plane, (rows, self.width)))
        return out

    def _pattern_keys(self, a3) -> np.ndarray:
        """Members grouped by their plane less its first present value (the same layout of values,
        anywhere): a tail partition's members share a pattern of their own."""
        M = self.members
        rows = a3.transpose(1, 0, 2).reshape(M, -1).astype(np.int64)
        p = rows >= 0
        first = np.where(p.any(axis=1), rows[np.arange(M), np.argmax(p, axis=1)], 0)
        norm = np.where(p, rows - first[:, None], rows)
        _, inv = np.unique(norm, axis=0, return_inverse=True)
        return inv.ravel()

    def _set_shift(self, f, s, has, what):
        cur, known = self.shift.get(f), self.known.get(f)
        if cur is None:
            self._frozen = None
            self.shift[f], self.known[f] = s.copy(), has.copy()
            return
        both = known & has
        if not np.array_equal(cur[both], s[both]):
            raise Unfolded(f"{what}: the members' {f!r} shifts differ from an earlier load's",
                           np.where(both & (cur != s), np.arange(self.members) + 1, 0))
        new = has & ~known
        if new.any():            # a load that only checks the shifts keeps the frozen copy (frozen())
            self._frozen = None
            cur[new] = s[new]
            known |= has

    def fold_prov(self, p: Prov | None, what: str) -> Prov | None:
        """Provenance a load gathered from what stores left (``[rows, members*lanes]``), folded:
        tag fields shift as a tagged load's; every member must read the names of the same results
        (instructions or sums), each member's elements of them one shift from its representative's
        (a reduce reading the partials an earlier launch's workgroups stored); footprints and marks
        must be the representative's own."""
        if p is None:
            return None
        ids = {}
        for f, a in p.ids.items():
            if f not in RESERVED:
                ids[f] = self._fold_plane(f, a)
        if ENC in p.ids:               # the encoding is every member's; the element the representative's
            ids[ENC] = self.rep(p.ids[ENC], what)
        if AT in p.ids:
            ids[AT] = p.ids[AT][:, :self.lanes] if self.classes == 1 else np.take(p.ids[AT], self.rep_cols, axis=1)
        if "@mma" in p.ids:
            ids["@mma"], ids["@mn"] = self._fold_names(p.ids["@mma"], p.ids["@mn"], what)
        fp = {f: self._rep_mask(m, what) for f, m in p.fp.items()}
        flags = None if p.flags is None else self.rep(p.flags, what)
        return Prov(p.g, {f: np.ascontiguousarray(a) for f, a in ids.items()}, fp,
                    None if flags is None else np.ascontiguousarray(flags))

    def _rep_mask(self, m: Mask, what: str) -> Mask:
        """A footprint plane a load read (sets ``[rows, members*lanes]``), its representatives'
        columns, every member's checked against its representative's (``rep``). One class: each
        member's columns compared with member 0's where they lie (the bits' column axis is the one
        before last), not on moved copies; where one differs, ``rep`` column by column names it."""
        if ONE_CLASS_MASKS and self.classes == 1 and m.base.shape[-1] == self.members * self.lanes:
            M, L = self.members, self.lanes
            b3, w3 = (x.reshape(x.shape[:-1] + (M, L)) for x in (m.base, m.wide))
            t4 = m.bits.reshape(m.bits.shape[:-2] + (M, L, m.bits.shape[-1]))
            if (b3 == b3[..., :1, :]).all() and (w3 == w3[..., :1, :]).all() and (t4 == t4[..., :1, :, :]).all():
                return Mask(np.ascontiguousarray(m.base[..., :L]), np.ascontiguousarray(m.bits[..., :L, :]),
                            np.ascontiguousarray(m.wide[..., :L]))
        return _on_columns(m, lambda x: np.ascontiguousarray(self.rep(x, what)))

    def _fold_names(self, mma, mn, what):
        """The representatives' @mma/@mn planes of names a load read: every member names the same
        results, and per result id each member's elements lie one shift from its representative's
        (learned in ``name_shift``, checked by every later load)."""
        mma = np.ascontiguousarray(mma, np.int32)
        rep_mma = np.ascontiguousarray(self.rep(mma, f"{what}: the results it names"))
        ids = distinct(rep_mma[rep_mma >= 0]).astype(np.int64)
        shifts, has = np.zeros((len(ids), self.members), np.int64), np.zeros((len(ids), self.members), np.bool_)
        mn = np.ascontiguousarray(mn, np.int32)
        if not _name_shift_check(mma, mn, self.rep_cols if self.classes > 1 else _NO_COLS, self.cls, self.lanes,
                                 ids, shifts, has):
            raise Unfolded(f"{what}: the elements of the results it names")
        for k, i in enumerate(ids.tolist()):
            cur = self.name_shift.get(i)
            if cur is None:
                self._frozen = None
                self.name_shift[i] = np.where(has[k], shifts[k], 0)
            elif not np.array_equal(cur[has[k]], shifts[k][has[k]]):
                raise Unfolded(f"{what}: the elements of result {i} lie elsewhere than an earlier load's")
        rep_mn = mn[:, :self.lanes] if self.classes == 1 else np.take(mn, self.rep_cols, axis=1)
        return rep_mma, np.ascontiguousarray(rep_mn)

    def fold_stored(self, mem, idx: np.ndarray, imported, what: str) -> Prov | None:
        """``fold_prov`` of what a load under full EXEC gathers from provenance stores left (``mem``,
        a buffer's MemProv of dword units, read at the dwords ``idx`` [rows, members*lanes]), its
        footprint planes' sets compared by their table rows (equal rows hold equal sets) and made
        for the representatives alone, not gathered for every member and then compared. The
        identities are gathered and folded as fold_prov folds them. ``imported``: None, or what
        translates provenance an earlier launch stored (Buffer.import_prov). None, having changed
        nothing, where it cannot tell (a dense plane, a member's rows not its representative's):
        the caller gathers and folds, which says where a member does not fold."""
        sets = {}
        for f, m in mem.fp.items():
            if not isinstance(m, FpPlane):
                return None
            rows = m.rows_at(idx)
            if not self._rows_fold(rows):
                return None
            sets[f] = m.sets(rows[:, :self.lanes] if self.classes == 1 else np.take(rows, self.rep_cols, axis=1))
        p = Prov(4, mem.gather_ids(idx), sets, None if mem.flags is None else mem.flags.take(idx, axis=0))
        if imported is not None:         # the sets interned in the order every member's would be: the same sets
            p = imported(p)
        folded = self.fold_prov(Prov(p.g, p.ids, {}, p.flags), what)
        return Prov(folded.g, folded.ids, p.fp, folded.flags)

    def _rows_fold(self, rows: np.ndarray) -> bool:
        """Whether every member's entries of ``rows`` [rows, members*lanes] are its representative's."""
        if rows.ndim != 2 or rows.shape[1] != self.members * self.lanes:
            return False
        if self.classes == 1:
            r3 = rows.reshape(rows.shape[0], self.members, self.lanes)
            return bool((r3 == r3[:, :1, :]).all())
        return bool((np.take(np.take(rows, self.rep_cols, axis=1), self.member_cols, axis=1) == rows).all())

    # -- sinks: provenance for every member ------------------------------------------------------
    def shifted(self, f: str, a: np.ndarray, member) -> np.ndarray:
        """Tag field ``f``'s values ``a`` (representatives' values, placed for every member), shifted by
        the shift of each element's member (``member`` broadcasts against ``a``)."""
        s = self.shift.get(f)
        if s is None:
            if (a >= 0).any():
                raise GfxSimError(f"folded provenance: field {f!r} holds values no load shifted")
            return a
        per = np.where(self.known[f], s, 0)
        if not per.any():                  # no member moves (a dim): nothing to place per column
            return a
        # in a's type: the sum wraps as the int64 sum cast back does, without int64 temporaries
        sh = per.astype(a.dtype)[member]
        if not sh.any():
            return a
        return np.where(a >= 0, a + sh, a)

    def agrees(self, f: str, a: np.ndarray, want: np.ndarray) -> bool:
        """Whether tag field ``f``'s folded values ``a`` ``[rows, width]``, placed and shifted for
        every member (``shifted(f, expand_cols(a), col_member)``, int32 as it wraps), are exactly
        ``want`` ``[rows, members*lanes]``, without making them: compared as ``want - a`` (each
        member's representative's) against each member's shift (int32 wraps the same on both
        sides). False where it cannot tell (a field no load shifted): the caller then places them."""
        M, L = self.members, self.lanes
        if a.ndim != 2 or want.shape != (a.shape[0], M * L) or a.shape[1] != self.width:
            return False
        s = self.shift.get(f)
        held = a >= 0
        if s is None:
            if held.any():               # shifted raises there: the caller's placing says so
                return False
            per = np.zeros(M, np.int32)
        else:
            per = np.where(self.known[f], s, 0).astype(a.dtype)
        v = a[:, None, :] if self.classes == 1 else a.reshape(a.shape[0], self.classes, L)[:, self.cls, :]
        d = np.subtract(want.reshape(a.shape[0], M, L), v, dtype=a.dtype)
        exp = per[None, :, None] if held.all() else np.where(v >= 0, per[None, :, None], a.dtype.type(0))
        return bool((d == exp).all())

    def agrees_by(self, f: str, a: np.ndarray, kind: str, x: np.ndarray) -> bool:
        """``agrees(f, a, want)`` for a ``want`` given as Buffer.member_tags gives it: ``x[m]`` in
        every element of member m (``kind`` "member") or ``x`` ``[rows, lanes]`` in every member
        ("lane"), decided without making it. Where every folded value is held, want - a == the
        member's shift (int32) says: "member", each class's values are one value, x - shift of
        every member of the class; "lane", x - a is one value per class, every member's shift.
        False where a value is not held or no load shifted ``f`` (the caller then makes want)."""
        C, L = self.classes, self.lanes
        s = self.shift.get(f)
        if s is None or a.ndim != 2 or a.shape[1] != self.width or a.dtype != np.int32 or x.dtype != np.int32 \
                or not (a >= 0).all():
            return False
        per = np.where(self.known[f], s, 0).astype(np.int32)
        a3 = a.reshape(a.shape[0], C, L)
        if kind == "member":
            if x.shape != (self.members,):
                return False
            alpha = a3[0, :, 0]
            return bool((a3 == alpha[None, :, None]).all() and
                        (np.subtract(x, per, dtype=np.int32) == alpha[self.cls]).all())
        if x.shape != (a.shape[0], L):
            return False
        d = np.subtract(x[:, None, :], a3, dtype=np.int32)
        delta = d[0, :, 0]
        return bool((d == delta[None, :, None]).all() and (per == delta[self.cls]).all())

    def _names(self, mma: np.ndarray, mn: np.ndarray, member, log):
        """``@mma``/``@mn`` (representatives' names, placed for every member) as each member's."""
        shape = mma.shape
        mma = np.array(mma, np.int32).reshape(-1)          # copies: the caller's stay as they are
        mn = np.array(mn, np.int32).reshape(-1)
        member = np.ascontiguousarray(np.broadcast_to(member, shape), np.int64).reshape(-1)
        keys, shifts = self._moved(log, mma)
        foldrec.shift_names(mma, mn, member, self.rep_of, keys, shifts, PAIR_BASE)
        return mma.reshape(shape), mn.reshape(shape)

    def _moved(self, log, *mmas):
        """(keys, shifts [keys, members]) of the names whose @mn moves per member among those in the
        planes ``mmas``: what loads read (name_shift), and this batch's sums (their fold_shift)."""
        moved = dict(self.name_shift)
        for mma in mmas:
            pids = _pairs_named(mma, PAIR_BASE, len(log.pairs)) if log is not None else _NO_PIDS
            for pid in pids.tolist():
                if pid not in moved:
                    sh = log.pairs[pid - PAIR_BASE].fold_shift
                    if sh is None:
                        raise GfxSimError(f"folded provenance: sum {pid} holds no per-member element starts")
                    moved[pid] = sh
        keys = np.array(sorted(moved), np.int64)
        shifts = np.stack([moved[k] for k in keys.tolist()]) if len(keys) else np.zeros((0, self.members), np.int64)
        return keys, shifts

    def _mask(self, f: str, m: Mask, member, what: str) -> Mask:
        """A footprint placed for every member, moved by the member's shift of ``f``: a window by
        whole windows in place; otherwise (part of a window, a set wider than one) each distinct
        (set, shift) once, exactly, by its values."""
        f = f.removeprefix(COVER)          # a cover (scaleparts.py) moves as its field
        s = self.shift.get(f)
        sh = np.zeros(self.members, np.int64) if s is None else np.where(self.known[f], s, 0)
        if not sh.any():
            return m
        shm = sh[np.broadcast_to(member, m.base.shape)]
        narrow = m.base >= 0
        base = np.where(narrow, m.base + shm, m.base)
        hard = (narrow & (shm % WINDOW != 0)) | ((m.wide != 0) & (shm != 0))
        if not hard.any():
            return Mask(base, m.bits, m.wide)
        if self.wide is None:
            raise Unfolded(f"{what}: a {f!r} footprint moves by part of a window")
        out = Mask(base, m.bits.copy(), m.wide.copy())
        sel = np.nonzero(hard)
        key = np.concatenate([m.base[sel][:, None], m.wide[sel][:, None].astype(np.int64),
                              m.bits[sel].view(np.int64), shm[sel][:, None]], axis=1)
        _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
        moved = [self._moved_set(m, tuple(x[first[u]] for x in sel), int(shm[sel][first[u]]))
                 for u in range(len(first))]
        pick = lambda k: np.array([t[k] for t in moved])[inv.ravel()]
        out.base[sel], out.wide[sel] = pick(0), pick(2)
        out.bits[sel] = np.stack([t[1] for t in moved])[inv.ravel()]
        return out

    def _moved_set(self, m: Mask, i, shift: int):
        """(base, bits, wide) of element i's set with every value moved by ``shift``."""
        vals = np.fromiter((v + shift for v in m.values_at(i, self.wide)), np.int32)
        got = row_sets(vals[None, :], self.wide)
        return int(got.base[0]), got.bits[0], int(got.wide[0])

    def unfold(self, p: Prov | None, log, what: str, at: np.ndarray | None = None) -> Prov | None:
        """A folded value's provenance ``[rows, width]`` for every member ``[rows, members*lanes]``;
        ``at``: only those columns of it (column by column the same: a store under a partial EXEC)."""
        if p is None:
            return None
        if at is None:
            member, cols = self.col_member[None, :], self.expand_cols
        else:
            src = self.member_cols[at]
            member, cols = self.col_member[None, at], lambda a: np.take(a, src, axis=-1)
        ids = {}
        for f, a in p.ids.items():
            if f not in RESERVED:
                ids[f] = self.shifted(f, cols(a), member)
            elif f in ENC_PLANES:
                ids[f] = cols(a)
        if "@mma" in p.ids:
            ids["@mma"], ids["@mn"] = self._names(cols(p.ids["@mma"]), cols(p.ids["@mn"]), member, log)
        fp = {f: self._mask(f, _on_columns(m, cols), member, what) for f, m in p.fp.items()}
        return Prov(p.g, ids, fp, None if p.flags is None else cols(p.flags))

    # -- findings -------------------------------------------------------------------------------
    def for_members(self, f: str, ids, km: Mask, side: Mask, cols, what: str):
        """A scale finding's elements found on the representatives (@mma ``ids`` of results,
        ``km``/``side`` the sets of field ``f``, ``cols`` provenance columns) as every member's,
        member by member in batch order: its copy of each instruction, its sets moved by its
        shift of ``f``, its own columns."""
        L = self.lanes
        cls_of = cols // L
        per_class = [np.flatnonzero(cls_of == k) for k in range(self.classes)]
        src = np.concatenate([per_class[k] for k in self.cls.tolist()]) if len(cols) else np.zeros(0, np.int64)
        member = np.repeat(np.arange(self.members), [len(per_class[k]) for k in self.cls.tolist()])
        take = lambda m: m.map(lambda x: np.take(x, src, axis=0))
        ids = np.take(ids, src) + (member - self.rep_of[member])
        return (ids, self._mask(f, take(km), member, what), self._mask(f, take(side), member, what),
                member * L + np.take(cols, src) % L)

    # -- records ----------------------------------------------------------------------------------
    def _rows(self, bl: int):
        """(folded row of each member's row, member of each row) of a record's ``[members*bl, ...]``."""
        blk = np.arange(bl)
        return (self.cls[:, None] * bl + blk).ravel(), np.repeat(np.arange(self.members), bl)

    def _member_rows(self, x, idx, bl):
        """A record array's representatives' rows for every member's rows: a read-only view that
        repeats the one representative's rows where it can (one class, one block: what is not
        shifted then costs nothing per member), else a copy."""
        if self.classes == 1 and bl == 1:
            return np.broadcast_to(x, (self.members,) + x.shape[1:])
        return np.take(x, idx, axis=0)

    def unfold_record(self, insn, fields: dict, log) -> dict:
        """A matrix-instruction record's provenance fields (mmalog.MmaRecord's a, b, ks_a, ks_b,
        c_mma, c_mn) made on the representatives' rows ``[classes*blocks, ...]``, for every member:
        ``{"folded": foldrec.FoldedFields}`` (a FoldedRecord's, placed where read, by the shifts as
        they stand now), or the fields placed now where placing interns wide sets or fails."""
        if self._places_now(fields):
            return self.place_record(insn, fields, log)
        self._moved(log, *(() if fields["c_mma"] is None else (np.ascontiguousarray(fields["c_mma"], np.int32)
                                                                .reshape(-1),)))    # a sum with no shifts fails now
        return {"folded": FoldedFields(self.frozen(), insn, fields, log)}

    def _places_now(self, fields: dict) -> bool:
        """Whether placing the record's fields could intern wide sets or raise: a tag field no load
        shifted, or a K set whose field moves by part of a window or holds a set wider than one."""
        for d in (fields["a"], fields["b"]):
            if d and any(f not in self.shift for f in d):
                return True
        for d in (fields["ks_a"], fields["ks_b"]):
            for f, m in d.items():
                s = self.shift.get(f.removeprefix(COVER))
                if s is None:
                    continue
                sh = np.where(self.known[f.removeprefix(COVER)], s, 0)
                if ((sh % WINDOW != 0).any() and (m.base >= 0).any()) or (sh.any() and (m.wide != 0).any()):
                    return True
        return False

    def frozen(self) -> Fold:
        """A copy of this Fold with its shifts as they stand (later loads add to the shifts in place),
        kept while they do not change."""
        if self._frozen is None:
            f = copy.copy(self)
            f.shift = {k: v.copy() for k, v in self.shift.items()}
            f.known = {k: v.copy() for k, v in self.known.items()}
            f.name_shift = dict(self.name_shift)
            f._frozen = None
            self._frozen = f
        return self._frozen

    def place_record(self, insn, fields: dict, log) -> dict:
        """unfold_record's fields placed for every member: K-slot values, K sets and C's names."""
        bl = insn.blocks
        idx, member = self._rows(bl)
        what = f"the record of {insn.mnemonic}"
        rows = lambda x: self._member_rows(x, idx, bl)

        def side(d):
            if d is None:
                return None
            out = {}
            for f, (kind, arr) in d.items():
                a = rows(arr)
                out[f] = (kind, self.shifted(f, a, member.reshape((-1,) + (1,) * (a.ndim - 1))))
            return out

        def ks(d):
            return {f: self._mask(f, m.map(rows), member[:, None], what) for f, m in d.items()}
        out = dict(fields, a=side(fields["a"]), b=side(fields["b"]), ks_a=ks(fields["ks_a"]), ks_b=ks(fields["ks_b"]))
        if fields.get("quant"):
            out["quant"] = {op: rows(x) for op, x in fields["quant"].items()}
        if fields["c_mma"] is not None:
            mem3 = member[:, None, None]
            out["c_mma"], out["c_mn"] = self._names(np.take(fields["c_mma"], idx, axis=0),
                                                    np.take(fields["c_mn"], idx, axis=0), mem3, log)
        return out

    def pair(self, log, left, right, cls_of_elem, site):
        """A sum of two results made on the representatives' elements (class by class, ``left`` /
        ``right`` (@mma, @mn) and each element's class ``cls_of_elem``): the pair record holding
        every member's elements, member by member. Returns (pid, @mn of the representatives'
        elements in it, the element index of each of the record's elements in the representatives')."""
        spread, base, fold_shift, rep_mn = self._pair_plan(cls_of_elem)
        # the record's elements: member by member, its class's elements in order (foldrec.Spread),
        # held as the representatives' and placed for every member where read
        src, member = spread.arrays()
        rep_sides = tuple((np.asarray(ids, np.int32), np.asarray(mn, np.int32)) for ids, mn in (left, right))
        keys, shifts = self._moved(log, rep_sides[0][0], rep_sides[1][0])
        rec = FoldedPair(rep_sides[0], rep_sides[1], site, base, fold_shift, spread, self.rep_of, keys, shifts)
        pid = log.add_pair_record(rec)
        return pid, rep_mn.copy(), src, member

    def _pair_plan(self, cls_of_elem):
        """What ``pair`` derives from its elements' classes alone — the Spread, each member's start
        (read-only: every record of the plan holds them), its @mn shift from its representative's,
        and the representatives' @mn in the record — made once per distinct classes (a chain's
        adds repeat one), at most PAIR_PLANS kept."""
        key = (cls_of_elem.dtype.str, cls_of_elem.shape, cls_of_elem.tobytes())
        plan = self._pair_plans.get(key)
        if plan is not None:
            return plan
        n_k = np.bincount(cls_of_elem, minlength=self.classes)                # elements per class
        spread = self._spreads.get(n_k.tobytes())
        if spread is None:
            spread = self._spreads[n_k.tobytes()] = Spread(self.cls, n_k)
        base = np.concatenate([[0], np.cumsum(n_k[self.cls])])               # where each member's start
        fold_shift = (base[:-1] - base[self.rep_of]).astype(np.int64)
        local = np.arange(len(cls_of_elem)) - spread.start_k[cls_of_elem]
        rep_mn = (base[self.reps[cls_of_elem]] + local).astype(np.int32)
        for a in (base, fold_shift, rep_mn):
            a.setflags(write=False)
        if len(self._pair_plans) >= PAIR_PLANS:
            self._pair_plans.clear()
        plan = self._pair_plans[key] = (spread, base, fold_shift, rep_mn)
        return plan

    def unfold_pair(self, log, rec: PairRecord, conflict, cell, fp, src, member, what):
        """The pair record's cell and footprints (made on the representatives' elements) for every
        member's elements (``src``, ``member``: fold.pair's). The footprints move with their fields;
        the cells (which D element each partial sums) are the record's own sides', looked up (a
        member's elements of a result read from another launch sit at other cells)."""
        out = {}
        for f, (u, d) in fp.items():
            out[f] = tuple(None if x is None else self._fp(f, x, rec.spread, what) for x in (u, d))
        if not self.name_shift:                # each member's cells are its representative's
            rec.set_rep_footprints(cell, out)
        else:                                  # a read result's elements sit at other cells per member
            rec.set_footprints(pair_cells(log, rec, np.take(conflict, src), bool((cell >= 0).any())), out)

    def _fp(self, f, x, spread, what):
        """A footprint of the representatives' elements (consumed.Fp) for every member's elements
        (foldrec.SpreadFp): one copy of its table per distinct shift of ``f``, indexed."""
        table, index = x.table, x.index
        t = len(table.base)
        if index is None:
            index = np.arange(t)
        sh = self.shift.get(f)
        sh = np.zeros(self.members, np.int64) if sh is None else np.where(self.known[f], sh, 0)
        if not sh.any():                       # no member moves: the table serves every member
            return SpreadFp(table, index, None, t, spread)
        shifts, first, which = np.unique(sh, return_index=True, return_inverse=True)
        S = len(shifts)
        copies = Mask(np.tile(table.base, S), np.tile(table.bits, (S, 1)), np.tile(table.wide, S))
        return SpreadFp(self._mask(f, copies, np.repeat(first, t), what), index, which.ravel(), t, spread)


_NO_COLS = np.zeros(0, np.int64)
_NO_PIDS = np.zeros(0, np.int64)


@njit
def _fold_check(a, rep_cols, cls, lanes, shift, has):
    """Whether plane ``a`` [rows, members*lanes] is, in every member, its representative's plus one
    shift per member where the representative holds a value (and the same where it holds none);
    fills ``shift`` and ``has`` (a member whose representative holds a value). ``rep_cols``: the
    representatives' columns (empty: one class, member 0). Row by row, member by member, along
    memory (a column at a time strode over every row: twice as slow); a member's shift is the same
    whichever of its values comes first, since all must agree."""
    R, W = a.shape
    one = rep_cols.shape[0] == 0
    for r in range(R):
        for m in range(W // lanes):
            base = m * lanes
            rb = 0 if one else rep_cols[cls[m] * lanes]     # the representative's first column
            hm, sm = has[m], shift[m]
            for l in range(lanes):
                x, v = a[r, base + l], a[r, rb + l]
                if v < 0:
                    if x != v:
                        return False
                elif hm:
                    if np.int64(x) != np.int64(v) + sm:
                        return False
                else:
                    sm = np.int64(x) - np.int64(v)
                    hm = True
            has[m], shift[m] = hm, sm
    return True


def _fold_check_numpy(a, rep_cols, cls, lanes, shift, has):
    """_fold_check in numpy passes (while numba starts): the same answer, and where it is True the
    same ``shift`` and ``has`` (on False the caller reads neither)."""
    R, W = a.shape
    M = W // lanes
    if rep_cols.shape[0] == 0:
        return _fold_check_one_class(a[:, :M * lanes].reshape(R, M, lanes).astype(np.int32, copy=False), shift, has)
    x = a[:, :M * lanes].reshape(R, M, lanes).astype(np.int64)
    rb = rep_cols[np.asarray(cls[:M], np.int64) * lanes]                  # each member's representative
    v = a[:, rb[:, None] + np.arange(lanes)].astype(np.int64)            # [R, M, lanes]
    held = v >= 0
    if ((~held) & (x != v)).any():
        return False
    d = np.swapaxes(x - v, 0, 1).reshape(M, -1)                         # [M, R*lanes], each member's
    h = np.swapaxes(held, 0, 1).reshape(M, -1)
    has_in = np.asarray(has[:M], np.bool_)
    got = h.any(axis=1)
    first = d[np.arange(M), np.argmax(h, axis=1)]
    s = np.where(has_in, shift[:M], first)
    if not (~h | (d == s[:, None])).all():
        return False
    shift[:M] = np.where(has_in | got, s, shift[:M])
    has[:M] = has_in | got
    return True


def _fold_check_one_class(x, shift, has):
    """_fold_check_numpy of one class (member 0 represents all; ``x`` int32 [rows, members, lanes]):
    every member's first held value is at the representative's first, so each member's shift is
    one subtraction; the plane is then compared in int32, exactly: a held value whose shifted value
    leaves int32 cannot be matched (False), and otherwise x - v == s wraps only where x == v + s."""
    R, M, L = x.shape
    v = x[:, :1, :]                                                     # [R, 1, lanes] the representative
    held = v >= 0
    if not held.any():                              # nothing held: every member the same, no shift
        return bool((x == v).all())
    r, _, l = np.unravel_index(int(np.argmax(held)), held.shape)
    has_in = np.asarray(has[:M], np.bool_)
    s = np.where(has_in, shift[:M], x[r, :, l].astype(np.int64) - np.int64(v[r, 0, l]))    # [M]
    vh = v[held]
    lo, hi = int(vh.min()), int(vh.max())
    if int(s.min()) + lo < -2 ** 31 or int(s.max()) + hi >= 2 ** 31:
        return False
    s32 = s.astype(np.int32)[None, :, None]
    want = s32 if held.all() else np.where(held, s32, np.int32(0))                 # x - v where it folds
    if not (np.subtract(x, v, dtype=np.int32) == want).all():
        return False
    shift[:M] = s
    has[:M] = True
    return True


def _pairs_named(mma: np.ndarray, pair_base: int, n_pairs: int) -> np.ndarray:
    """The ids of the sums of results (pair records) a plane of names holds, ascending: from the
    plane's names, not a pass over every pair of the launch (they grow with it)."""
    named = mma[(mma >= pair_base) & (mma < pair_base + n_pairs)]
    return distinct(named) if named.size else _NO_PIDS


@njit
def _name_shift_check(mma, mn, rep_cols, cls, lanes, ids, shifts, has):
    """Per name id (``ids``, sorted) and member, the one shift of its @mn from the representative's
    (the @mma planes already equal); False where a member's elements of a name lie otherwise."""
    R, W = mma.shape
    one = rep_cols.shape[0] == 0
    for r in range(R):                   # along memory, as _fold_check
        for c in range(W):
            m = c // lanes
            rc = c % lanes if one else rep_cols[cls[m] * lanes + c % lanes]
            x = mma[r, c]
            if x < 0:
                continue
            k = np.searchsorted(ids, x)
            d = np.int64(mn[r, c]) - np.int64(mn[r, rc])
            if has[k, m]:
                if shifts[k, m] != d:
                    return False
            else:
                shifts[k, m] = d
                has[k, m] = True
    return True


def _on_columns(m: Mask, fn) -> Mask:
    """``fn`` applied along the columns (the last axis of base and wide, the one before last of bits)."""
    return Mask(fn(m.base), np.ascontiguousarray(np.moveaxis(fn(np.moveaxis(m.bits, -2, -1)), -1, -2)), fn(m.wide))


class Attempt:
    """A batch run once folded, that can be taken back: what the launch had before it (instruction
    count, trace, records, pairs, wide sets, outputs) and, per store, what it overwrote
    (Buffer.overwritten), put back latest first. Findings are held back (``pending``) and reported
    only when the attempt stands."""

    def __init__(self, machine):
        self.machine = machine
        log, wide = machine.mma_log, machine.wide
        self.n_events, self.raw = machine.trace.n_events, len(machine.trace.raw)
        self.records, self.pairs, self.foreign = len(log.records), len(log.pairs), len(log.foreign)
        self.wide = len(wide.nodes)
        self.outputs = len(machine.outputs)
        self.overwrites: list = []           # (buffer, what a store overwrote) per store, in order
        self.pending: list = []              # (kind, message, details, coords) of the attempt

    def before_store(self, buf, byte_addr: np.ndarray, words=None):
        """A store to bytes ``byte_addr`` of ``buf`` is about to be made (``words``: Buffer.overwritten's)."""
        self.overwrites.append((buf, buf.overwritten(byte_addr, words)))

    def take_back(self):
        m = self.machine
        m.trace.truncate(self.raw, self.n_events)
        m.mma_log.truncate(self.records, self.pairs, self.foreign)
        m.wide.truncate(self.wide)
        del m.outputs[self.outputs:]
        for buf, before in reversed(self.overwrites):
            buf.put_back(before)

    def stand(self):
        """The attempt stands: its findings are reported, in order."""
        for kind, message, details, coords in self.pending:
            self.machine.log.report(kind, message, details, **coords)
