"""Coverage without scopes: what every matrix result, and every sum of them, consumed.

A value named by ``@mma``/``@mn`` — a matrix result, a sum of two (a PairRecord), or a result of
an earlier launch — consumed, per K field (``token``, ``dim``), a set ``U`` (the values in its K
slots, through C chains, adds, LDS and launches) and a set ``D`` of those it consumed more than
once. Footprints of sums are computed at the add and kept on the pair record, so resolving a
stored value is a lookup, not a walk.

* A value is a partial sum of one D element (``cell``: its @mn, however it travelled). An add of
  two partials of one element — same cell, identities that agree — whose ``U`` overlap is a
  ``double-count`` finding at that add, naming where both operands came from.
* An add of values of different elements (``S[t1] + S[t2]``: the cells or the identities
  differ) is a reduction across elements: its K footprint has no per-element meaning (cell -1,
  "void"). A product of a value and such a reduction (``o / l``, a partition's weight) keeps the
  value's name.
* An add of two partials of one D element whose identities differ on a field no sum reduces over
  (identity.axes: one head's partial added to another head's) is no reduction but a mix (cell
  ``MIXED``): what it consumed is counted per identity, so an output element holding it consumed
  another head's tokens and none of its own there (a ``token-coverage`` finding; the add itself is
  an ``identity-mismatch``). A sum with a mixed side is mixed.
* What is never checked: a sum over an axis that carries no tag and stays in one D element
  (tiles of one untagged column added): tag the summed axis (the harnesses tag tokens).
* ``Buffer.expect`` declares what each element must consume; at the end of a launch every declared
  buffer it stored into is checked (``check_outputs``): ``token-coverage`` findings naming the
  elements, the values never consumed, consumed more than once, and consumed but not expected.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from .mmalog import FOREIGN_BASE, PAIR_BASE, import_wide
from .provenance import RESERVED, WINDOW, WORDS, Mask
from . import identity
from . import summaries          # compiled functions by the module: jit.njit rebinds their names
from .summaries import expand, row_sets
from .jit import starting

_FIRST = 16                      # element indices a finding lists
MIXED = -2                       # a cell: partials of different outputs (heads, rows) added


# -- set algebra on Masks -----------------------------------------------------------------------
def intersect(a: Mask, b: Mask, wide) -> Mask:
    """Elementwise a ∩ b (an empty result has base -1)."""
    out = Mask.empty(a.shape)
    narrow = (a.wide == 0) & (b.wide == 0)
    bits = a.bits & b.bits
    hit = narrow & (a.base >= 0) & (a.base == b.base) & bits.any(axis=-1)
    out.base[hit] = a.base[hit]
    out.bits[hit] = bits[hit]
    odd = ~narrow & a.nonempty() & b.nonempty()
    if odd.any():                   # a set wider than a window: exactly, per distinct pair
        ia, ib = a.wide_ids(odd, wide), b.wide_ids(odd, wide)
        if ia.min() == ia.max() and ib.min() == ib.max():      # one pair of sets (a chain's sums): no sort
            out.wide[odd] = wide.intersection(int(ia[0]), int(ib[0]))
            return out
        pairs, inv = np.unique((ia.astype(np.int64) << 32) | ib, return_inverse=True)
        res = np.array([wide.intersection(int(k >> 32), int(k & 0xFFFFFFFF)) for k in pairs.tolist()], np.uint32)
        out.wide[odd] = res[inv.ravel()]
    return out


class Fp:
    """A set per element, stored as a table of sets and an index: element i's set is
    ``table[index[i]]`` (``index`` None: one table row per element). A matrix result's K sets are
    one row per (workgroup, block) when every row of A and column of B hold the same set — the
    common case —, so a sum of two results aligned element for element is one op per row."""
    __slots__ = ("table", "index")

    def __init__(self, table: Mask, index=None):
        self.table, self.index = table, index

    def mask(self) -> Mask:
        if self.index is None:
            return self.table
        idx = self.index
        return self.table.map(lambda x: np.take(x, idx, axis=0))

    def at(self, e) -> Fp:
        return Fp(self.table, e if self.index is None else self.index[e])

    def nonempty(self) -> np.ndarray:
        ne = self.table.nonempty()
        return ne if self.index is None else ne[self.index]

    def values_at(self, i: int, wide) -> frozenset:
        return self.table.values_at((int(i if self.index is None else self.index[i]),), wide)


def _combine(a: Fp | None, b: Fp | None, fn) -> Fp | None:
    """fn elementwise on two footprints of the same elements (None: an empty side, for unions)."""
    if a is None or b is None:
        return a if b is None else b
    ia, ib = a.index, b.index
    if ia is None and ib is None:
        return Fp(fn(a.table, b.table))
    if ia is not None and ib is not None:
        if len(a.table.base) == len(b.table.base) and len(a.table.base) <= 2 * len(ia) and \
                (ia is ib or np.array_equal(ia, ib)):
            return Fp(fn(a.table, b.table), ia)          # aligned: one op per table row
        if a.table.wide.any() or b.table.wide.any() or \
                len(a.table.base) + len(b.table.base) <= len(ia) // 4:   # few sets: per distinct pair
            nb = len(b.table.base)
            pairs, inv = np.unique(ia.astype(np.int64) * nb + ib, return_inverse=True)
            return Fp(fn(a.table.map(lambda x: x[pairs // nb]), b.table.map(lambda x: x[pairs % nb])), inv.ravel())
    return Fp(fn(a.mask(), b.mask()))


def _union_fp(a, b, wide):
    return _combine(a, b, lambda x, y: x.union(y, wide))


def _union(a: Mask | None, b: Mask | None, wide) -> Mask | None:
    if a is None:
        return b
    if b is None:
        return a
    return a.union(b, wide)


def _take(m: Mask | None, idx) -> Mask | None:
    return None if m is None else m.map(lambda x: x[idx])


def distinct(a: np.ndarray) -> np.ndarray:
    """np.unique(a) of integers (sorted, a's dtype), counted rather than sorted where the values
    lie within a few times a's length of each other: the names a read or a sum holds (a few
    results or sums among thousands of elements)."""
    a = np.asarray(a)
    if not a.size:
        return np.unique(a)
    return _counted(a, int(a.min()), int(a.max()))


def _counted(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``distinct(a)`` of a non-empty ``a`` whose least and greatest values are lo and hi."""
    if lo == hi:
        return np.full(1, lo, a.dtype)
    if hi - lo < 4 * a.size:
        return (np.flatnonzero(np.bincount((a - lo).ravel())) + lo).astype(a.dtype)
    return np.unique(a)


def _distinct(a) -> list:
    """np.unique(a).tolist() of integers (``distinct``), without an array when a holds one value
    (the common case)."""
    if not len(a):
        return []
    lo, hi = int(a.min()), int(a.max())
    return [lo] if lo == hi else _counted(a, lo, hi).tolist()


def _is_all(idx, n) -> bool:
    """Whether index array idx is 0..n-1 in order (a gather by it is the identity)."""
    return len(idx) == n and (n == 0 or (idx[0] == 0 and idx[-1] == n - 1 and summaries.counts_up(idx)))


def _place(dst: dict, f: str, pos, n: int, u: Fp, d: Fp | None):
    """dst[f] at positions pos (the groups of one footprints() call are disjoint) takes (u, d)."""
    dst.setdefault(f, []).append((pos, u, d))


def _assemble(groups, n: int):
    """(U, D) Fps of n elements from disjoint groups (pos, u, d): the groups' tables side by side
    and one index (a last empty row for positions no group covers), so nothing is expanded."""
    if len(groups) == 1 and len(groups[0][0]) == n:
        return groups[0][1], groups[0][2]
    return _stack([(pos, u) for pos, u, _ in groups], n), \
        (_stack([(pos, d) for pos, _, d in groups if d is not None], n) if any(g[2] is not None for g in groups)
         else None)


def _stack(parts, n: int) -> Fp:
    tables, index, off = [], np.full(n, -1, np.int64), 0
    for pos, fp in parts:
        idx = fp.index
        t = fp.table
        if idx is not None and len(t.base) > 4 * len(idx):       # a few rows of a big table: take them
            t, idx = fp.mask(), None
        index[pos] = off + (np.arange(len(t.base)) if idx is None else idx)
        tables.append(t)
        off += len(t.base)
    uncovered = index < 0
    if uncovered.any() or not tables:    # an empty last row for them (none where the groups cover all)
        tables.append(Mask.empty((1,)))
        index[uncovered] = off
    return Fp(Mask.concat(tables), index)


# -- footprints of named values -----------------------------------------------------------------
def footprints(log, ids, mn):
    """(cell int64 [n], {field: (U, D or None)} as Fp) of result elements named (@mma, @mn) in
    ``log``; cell -1 marks a reduction across elements (void). int32 names (a buffer's planes) are
    read as they are: the output check's int64 copies were 16 B an element of its peak."""
    ids, mn = (_names(a) for a in (ids, mn))
    n = len(ids)
    wide = log.wide
    cell = np.full(n, -1, np.int64)          # the cells
    out: dict = {}
    if n and _one_kind(log, ids, mn, n, cell, out, wide):
        return cell, {f: _assemble(g, n) for f, g in out.items()}
    local = np.nonzero((ids >= 0) & (ids < PAIR_BASE))[0]
    if len(local):
        starts = log.starts
        ri = np.searchsorted(starts, ids[local], "right") - 1
        recs = _distinct(ri)
        for r_i in recs:
            sel = local if len(recs) == 1 else local[ri == r_i]
            _leaf(log, r_i, ids[sel], mn[sel], sel, n, cell, out, wide)
    pair = (ids >= PAIR_BASE) & (ids < FOREIGN_BASE)
    for pid in _distinct(ids[pair]):
        sel = np.nonzero(pair & (ids == pid))[0]
        _from_pair(log, pid, mn[sel], sel, n, cell, out)
    far = ids >= FOREIGN_BASE
    for k in _distinct(ids[far] // FOREIGN_BASE):
        sel = np.nonzero(far & (ids // FOREIGN_BASE == k))[0]
        _from_foreign(log, k, ids[sel], mn[sel], sel, n, cell, out, wide)
    return cell, {f: _assemble(g, n) for f, g in out.items()}


def _names(a) -> np.ndarray:
    """``a`` as int32 where it is (ids and elements fit: a plane holds them), else int64."""
    a = np.asarray(a)
    return a if a.dtype == np.int32 else a.astype(np.int64, copy=False)


def _one_kind(log, ids, mn, n, cell, out, wide) -> bool:
    """The common case without masks: every id is of one record, one pair or one earlier launch."""
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0:
        return False
    pos = np.arange(n)
    if hi < PAIR_BASE:
        starts = log.starts
        r_lo, r_hi = (int(np.searchsorted(starts, x, "right")) - 1 for x in (lo, hi))
        if r_lo != r_hi:
            return False
        _leaf(log, r_lo, ids, mn, pos, n, cell, out, wide)
        return True
    if lo == hi and lo < FOREIGN_BASE:
        _from_pair(log, lo, mn, pos, n, cell, out)
        return True
    if lo >= FOREIGN_BASE and lo // FOREIGN_BASE == hi // FOREIGN_BASE:
        _from_foreign(log, lo // FOREIGN_BASE, ids, mn, pos, n, cell, out, wide)
        return True
    return False


def _from_pair(log, pid, e, sel, n, cell, out):
    rec = log.pairs[pid - PAIR_BASE]
    if not rec.has_footprints:
        pair_footprint(log, rec)
    cell_at = getattr(rec, "cell_at", None)          # a folded batch's: placed where read
    if cell_at is None:
        rc = rec.cell                                # unpacked once
        whole = _is_all(e, len(rc))
        cell[sel] = rc if whole else rc[e]
    else:
        whole = _is_all(e, rec.size())
        cell[sel] = rec.cell if whole else cell_at(e)
    for f, (u, d) in rec.fp.items():
        _place(out, f, sel, n, u if whole else u.at(e), d if whole or d is None else d.at(e))


def _from_foreign(log, k, ids, mn, sel, n, cell, out, wide):
    theirs, their_wide = log.foreign[k - 1]
    v, fp = footprints(theirs, ids - k * FOREIGN_BASE, mn)
    cell[sel] = v
    for f, (u, d) in fp.items():
        _place(out, f, sel, n, Fp(import_wide(u.table, their_wide, wide), u.index),
               None if d is None else Fp(import_wide(d.table, their_wide, wide), d.index))


def _uniform(ks: Mask) -> bool:
    """Whether every row (M) of A, or column (N) of B, of each (workgroup, block) holds one set:
    one compiled pass (summaries.rows_uniform) once numba runs, else ``_uniform_numpy``."""
    if UNIFORM_COMPILED and ks.base.ndim == 2 and ks.bits.ndim == 3 and not starting(summaries.__name__):
        return bool(summaries.rows_uniform(ks.base, ks.bits, ks.wide))
    return _uniform_numpy(ks)


UNIFORM_COMPILED = True     # the switch tests/gfxsim/machine/test_consumed_uniform.py holds the two paths by


def _uniform_numpy(ks: Mask) -> bool:
    """``_uniform`` in numpy: its twin and the path while numba starts."""
    return bool((ks.base == ks.base[:, :1]).all() and (ks.wide == ks.wide[:, :1]).all() and
                (ks.bits == ks.bits[:, :1]).all())


K_RECENT = 64           # a folded batch's records whose K sets are kept (sums read the latest ones)


def _k_sets(log, r_i, rec):
    """(A's, B's) {field: Mask [rows, M] / [rows, N]}: the record's K sets, and a K field that
    holds one value in this instruction's slots (the one token left at the end of the context,
    the others empty) — a field the record keeps no K set of, as it does not vary along K. Such a
    field must be on both A and B (what K slots share); on one side it names M rows or N columns."""
    cache = log.k_sets
    got = cache.get(r_i)
    if isinstance(got, tuple):
        return got
    if got is not None:                    # a folded record's, made before: kept while recent
        recent = log.k_recent.get(r_i)
        if recent is not None:
            log.k_recent.move_to_end(r_i)
            return recent
    # the K fields as the launch knew them when first asked (a later record may add one)
    fields = frozenset(log.k_fields()) if got is None else got
    got = _with_k_fields(fields, rec.a, rec.b, rec.ks_a, rec.ks_b, rec.insn, log.wide)
    if not rec.held_per_class:
        cache[r_i] = got
    else:                              # placed for every member: its fields kept, its sets while recent
        cache[r_i] = frozenset(fields)
        log.k_recent[r_i] = got
        while len(log.k_recent) > K_RECENT:
            log.k_recent.popitem(last=False)
    return got


def _with_k_fields(fields, a, b, ks_a, ks_b, insn, wide) -> tuple:
    """(A's, B's) K sets: ``ks_a``/``ks_b``, and of each K field in ``fields`` that A and B both
    carry but neither keeps a K set of, the sets of its values in the slots (``_k_sets``)."""
    ksa, ksb = dict(ks_a), dict(ks_b)
    for f in fields:
        if not (a and b and f in a and f in b):
            continue        # on one side only it names rows or columns (a V dim), not K slots
        for side, ks, op in ((a, ksa, "A"), (b, ksb, "B")):
            if f in ks or not side or f not in side or side[f][0] == "mn":
                continue
            full = expand(*side[f], op, insn.M, insn.N, insn.K)          # [rows, M, K] / [rows, K, N]
            ks[f] = row_sets(full if op == "A" else np.swapaxes(full, 1, 2), wide)
    return ksa, ksb


def _rep_table(log, r_i, rec, rows, wide):
    """``_row_table`` of a folded record (foldrec.FoldedRecord) read at ``rows``, all of them its
    representatives' (what the sums of a folded batch read): from the fields as the batch made
    them (``fields_for``), not placed for every member. (table, where ``rows`` lie in it), or None
    (a chained record, rows of other members, a record placed already, or a K set that is not one
    per row: the caller takes ``_row_table``). The K fields are those ``_k_sets`` would take, fixed here if first."""
    if rec.chained():
        return None
    fields, at = rec.fields_for(rows)
    if at is rows:                       # placed already, or rows of other members: _row_table's
        return None
    k = log.k_sets.get(r_i)
    if k is None:                        # as _k_sets: the K fields the launch knows when first asked
        k = log.k_sets[r_i] = frozenset(log.k_fields())
    elif isinstance(k, tuple):
        return None
    ksa, ksb = _with_k_fields(k, fields["a"], fields["b"], fields["ks_a"], fields["ks_b"], rec.insn, wide)
    if not all(_uniform(m) for m in list(ksa.values()) + list(ksb.values())):
        return None
    table = {}
    for f in ksa.keys() | ksb.keys():
        x = ksa[f].map(lambda v: v[:, 0]) if f in ksa else None
        y = ksb[f].map(lambda v: v[:, 0]) if f in ksb else None
        table[f] = _union(x, y, wide)
    return table, at


def _row_table(log, r_i, rec, wide):
    """{field: Mask [rows]} of a record whose K set is one per (workgroup, block), else None."""
    cache = log.k_tables
    got = cache.get(r_i, False)
    if got is False:
        got = None
        ksa, ksb = _k_sets(log, r_i, rec)
        if rec.c_mma is None and all(_uniform(k) for k in list(ksa.values()) + list(ksb.values())):
            got = {}
            for f in ksa.keys() | ksb.keys():
                a = ksa[f].map(lambda x: x[:, 0]) if f in ksa else None
                b = ksb[f].map(lambda x: x[:, 0]) if f in ksb else None
                got[f] = _union(a, b, wide)
        cache[r_i] = got
    return got


def _leaf(log, r_i, ids, mn, pos, n, cell, out, wide):
    """Matrix results of one record: the K sets of D[m][n] (A row m ∪ B column n), and through C
    what the accumulator held (a C that consumed the same values: consumed twice)."""
    rec = log.records[r_i]
    M, N, bl = rec.insn.M, rec.insn.N, rec.insn.blocks
    blk = mn // (M * N)
    row = (ids - rec.first) * bl + blk
    cell[pos] = mn                                   # a result is a partial of its own element
    if rec.held_per_class:                           # a folded batch's sum reads its representatives'
        got = _rep_table(log, r_i, rec, row, wide)
        if got is not None:
            for f, t in got[0].items():
                _place(out, f, pos, n, Fp(t, got[1]), None)
            return
    table = _row_table(log, r_i, rec, wide)
    if table is not None:
        for f, t in table.items():
            _place(out, f, pos, n, Fp(t, row), None)
        return
    m, nn = (mn // N) % M, mn % N
    own = {}
    at_a, at_b = row * M + m, row * N + nn           # flat indices into [rows, M] / [rows, N]

    def take(ks, at):
        return ks.map(lambda x: np.take(x.reshape((-1,) + x.shape[2:]), at, axis=0))
    ksa, ksb = _k_sets(log, r_i, rec)
    for f in ksa.keys() | ksb.keys():
        a = take(ksa[f], at_a) if f in ksa else None
        b = take(ksb[f], at_b) if f in ksb else None
        own[f] = [_union(a, b, wide), None]
    if rec.c_mma is not None:
        cm = rec.c_mma[row, m, nn].astype(np.int64)
        keep = np.nonzero(cm >= 0)[0]
        if len(keep):
            cv, cfp = footprints(log, cm[keep], rec.c_mn[row, m, nn][keep])
            cell[pos[keep]] = np.where(cv < 0, -1, mn[keep])     # C a reduction: so is this
            for f, (uc, dc) in cfp.items():
                cur = own.get(f)
                if cur is None:
                    cur = own[f] = [Mask.empty((len(ids),)), None]
                mine = _take(cur[0], keep)
                ucm = uc.mask()
                d = _union(intersect(mine, ucm, wide), None if dc is None else dc.mask(), wide)
                cur[0].assign(keep, mine.union(ucm, wide))
                if cur[1] is None:
                    cur[1] = Mask.empty((len(ids),))
                cur[1].assign(keep, d)
    for f, (u, d) in own.items():
        _place(out, f, pos, n, Fp(u), None if d is None else Fp(d))


def pair_footprint(log, rec, conflict=None, op="add", active=None, mixed=None):
    """Fill ``rec.cell`` and ``rec.fp`` from its two sides; returns {field: (overlap Fp, where)} of an
    add. ``mixed``: the elements whose sides are partials of different outputs (cell MIXED)."""
    (li, lm), (ri, rm) = rec.left, rec.right
    n = len(li)
    wide = log.wide
    cell = np.full(n, -1, np.int64)
    void = np.ones(n, bool)
    overlap = {}
    fp = {}
    cl = None
    if conflict is None or not conflict.all() or mixed is not None:
        cl, fl = footprints(log, li, lm)
        if not ((cl >= 0) | (cl == MIXED)).any():         # a reduction plus anything: a reduction
            cl = None
    if cl is not None:
        cr, fr = footprints(log, ri, rm)
        same = (cl >= 0) & (cl == cr)
        mix = (cl == MIXED) | (cr == MIXED)
        if mixed is not None:
            mix |= same & mixed
        if conflict is not None:
            same &= ~conflict
        cell = np.where(mix, MIXED, np.where(same, cl, -1))
        void = ~same | mix
        for f in fl.keys() | fr.keys():
            ul, dl = fl.get(f, (None, None))
            ur, dr = fr.get(f, (None, None))
            u = _union_fp(ul, ur, wide)
            d = _union_fp(dl, dr, wide)
            if op == "add" and ul is not None and ur is not None:
                over = _combine(ul, ur, lambda x, y: intersect(x, y, wide))
                hit = over.nonempty() & ~void
                if active is not None:
                    hit &= active                    # lanes under EXEC: the others' sums are never written
                if hit.any():
                    overlap[f] = (over, hit)
                    d = _union_fp(d, over, wide)
            fp[f] = (u, d)
    rec.set_footprints(cell, fp)
    return overlap


def cells(log, ids, mn) -> np.ndarray:
    """The cell of each named value (footprints' first result) without its footprints: the D
    element of a result, a sum's cell, an earlier launch's value's cell there; -1 a reduction."""
    ids = np.asarray(ids, np.int64)
    mn = np.asarray(mn, np.int64)
    if len(ids):         # the common case: every id of one pair or one earlier launch (a chain's add)
        lo, hi = int(ids.min()), int(ids.max())
        if lo == hi and PAIR_BASE <= lo < FOREIGN_BASE:
            return _pair_cells_at(log, lo, mn)
        if lo >= FOREIGN_BASE and lo // FOREIGN_BASE == hi // FOREIGN_BASE:
            k = lo // FOREIGN_BASE
            return cells(log.foreign[k - 1][0], ids - k * FOREIGN_BASE, mn)
    return _cells_by_kind(log, ids, mn)


def _pair_cells_at(log, pid: int, e) -> np.ndarray:
    """The cells of elements ``e`` of pair ``pid`` (int64, a new array)."""
    rec = log.pairs[pid - PAIR_BASE]
    if not rec.has_footprints:
        pair_footprint(log, rec)
    cell_at = getattr(rec, "cell_at", None)
    return (rec.cell[e] if cell_at is None else cell_at(e)).astype(np.int64)


def _cells_by_kind(log, ids, mn) -> np.ndarray:
    """``cells`` kind by kind (local results, pairs, earlier launches), however mixed: what
    ``cells``' one-kind shortcuts are held to (tests/gfxsim/machine/test_fold.py)."""
    out = np.full(len(ids), -1, np.int64)
    local = (ids >= 0) & (ids < PAIR_BASE)
    out[local] = mn[local]
    pair = (ids >= PAIR_BASE) & (ids < FOREIGN_BASE)
    for pid in _distinct(ids[pair]):
        sel = pair & (ids == pid)
        rec = log.pairs[pid - PAIR_BASE]
        if not rec.has_footprints:
            pair_footprint(log, rec)
        cell_at = getattr(rec, "cell_at", None)
        out[sel] = rec.cell[mn[sel]] if cell_at is None else cell_at(mn[sel])
    far = ids >= FOREIGN_BASE
    for k in _distinct(ids[far] // FOREIGN_BASE):
        sel = far & (ids // FOREIGN_BASE == k)
        out[sel] = cells(log.foreign[k - 1][0], ids[sel] - k * FOREIGN_BASE, mn[sel])
    return out


def pair_cells(log, rec, conflict, any_cell: bool) -> np.ndarray:
    """``pair_footprint``'s cells of a pair record from its sides: where both partials sum one D
    element (and their identities agree), that cell, else -1 (``any_cell``: some left partial has a
    cell at all; pair_footprint makes the whole sum a reduction otherwise). ``conflict``: one per
    element of the record (its sides are placed only where cells are looked up)."""
    if not any_cell or conflict.all():
        return np.full(len(conflict), -1, np.int64)
    (li, lm), (ri, rm) = rec.left, rec.right
    cl, cr = cells(log, li, lm), cells(log, ri, rm)
    return np.where((cl == MIXED) | (cr == MIXED), MIXED, np.where((cl >= 0) & (cl == cr) & ~conflict, cl, -1))


# -- the hooks: an add of two named values, a product of two -------------------------------------
def pair_elements(both: np.ndarray, lanes: int):
    """(rows, columns) of the elements of a sum of results, member by member (rows, then lanes, in
    each): the order a pair record holds them in, so that each member's elements are one run."""
    R, P = both.shape
    m, r, l = np.nonzero(both.reshape(R, P // lanes, lanes).transpose(1, 0, 2))
    return r, m * lanes + l


def sum_made(wave, pid, pa, pb, elems, op, folded=None):
    """An add (or sub) of two named values became pair ``pid`` (its elements ``elems``, as
    pair_elements gives them): its footprints, and the double-count check of an add. ``folded``: a
    folded batch's (left, right, src, member) of fold.Fold.pair — the footprints are made on the
    representatives' elements and placed for every member."""
    log = wave.machine.mma_log
    rec = log.pairs[pid - PAIR_BASE]
    r, c = elems
    conflict = np.zeros(len(r), bool)
    unsure = np.zeros(len(r), bool)          # one side names the element on a field, the other does not
    for f in sorted((pa.ids.keys() | pb.ids.keys()) - set(RESERVED)):
        x = pa.ids[f][r, c] if f in pa.ids else np.full(len(r), -1, np.int32)
        y = pb.ids[f][r, c] if f in pb.ids else np.full(len(r), -1, np.int32)
        conflict |= (x >= 0) & (y >= 0) & (x != y)
        unsure |= (x >= 0) != (y >= 0)
    active = None if wave.exec_full else wave.pexec("EXEC of an add of results")[c]
    if unsure.any():     # an untagged partial (an unused cache block's tile) is not shown to be this element
        active = ~unsure if active is None else active & ~unsure
    mixed = None
    if conflict.any():                   # partials of different outputs (heads, rows) under EXEC
        mixed = identity.mixed(wave.machine, pa, pb, (r, c))
        if active is not None:
            mixed &= active
        if not mixed.any():
            mixed = None
    if folded is None:
        overlap = pair_footprint(log, rec, conflict, op, active, mixed)
        sides = rec
    else:
        left, right, src, member = folded
        sides = _RepSides(left, right)           # the representatives' elements, not in the log
        overlap = pair_footprint(log, sides, conflict, op, active)
        wave.fold.unfold_pair(log, rec, conflict, sides.cell, sides.fp, src, member, "an add of results")
    if "double-count" in wave.machine.not_checked:       # a front end that cannot follow it (listed)
        return
    for f, (over, hit) in sorted(overlap.items()):
        i = int(np.argmax(hit))
        col = int(c[i])
        vals = sorted(over.values_at(i, log.wide))
        (li, lm), (ri, rm) = sides.left, sides.right
        left, l_idx = describe(log, int(li[i]), int(lm[i]))
        right, r_idx = describe(log, int(ri[i]), int(rm[i]))
        from ..arch.kslots import format_token_set
        same = " (the same value twice)" if (li[i], lm[i]) == (ri[i], rm[i]) else ""
        wave.finding("double-count", f"add of two partial sums that both consumed {f}s {format_token_set(vals)}"
                     f"{same}: {left} + {right} ({int(hit.sum())} elements overlap)", lane=col, field=f,
                     values=vals, left=left, right=right, left_instruction=l_idx, right_instruction=r_idx,
                     elements=int(hit.sum()))


class _RepSides:
    """A folded sum's two sides on the representatives' elements, as pair_footprint reads and fills a
    PairRecord (``left``, ``right``, ``set_footprints``, ``cell``, ``fp``; int32 as a record unpacks
    them), held unpacked: it lives for one add, so packing it would be undone at once."""
    __slots__ = ("left", "right", "cell", "fp")

    def __init__(self, left, right):
        self.left, self.right = (tuple(np.asarray(x, np.int32) for x in side) for side in (left, right))
        self.cell = self.fp = None

    def set_footprints(self, cell: np.ndarray, fp: dict):
        self.cell, self.fp = np.asarray(cell).astype(np.int32), fp


def is_void(log, ids, mn) -> np.ndarray:
    """Whether each named value is a reduction across elements (a sum of cell -1)."""
    ids = np.asarray(ids, np.int64)
    return (ids >= 0) & (cells(log, ids, mn) < 0)


def _consumes(log, ids, mn, fields) -> np.ndarray:
    """Whether each named value consumed something in one of ``fields``."""
    _, fp = footprints(log, ids, mn)
    got = np.zeros(len(ids), bool)
    for f in fields & fp.keys():
        got |= fp[f][0].nonempty()
    return got


def product_names(log, pa, pb, out):
    """A product of two named values: where one side is a reduction over an identity (void: 1/l, a
    weight), the other's name survives; two element values multiplied keep neither (as merge)."""
    ia, ib, ma, mb = pa.ids["@mma"], pb.ids["@mma"], pa.ids["@mn"], pb.ids["@mn"]
    both = (ia >= 0) & (ib >= 0) & ((ia != ib) | (ma != mb))
    if not both.any():
        return out
    va = is_void(log, ia[both], ma[both])
    vb = is_void(log, ib[both], mb[both])
    take_a, take_b = vb & ~va, va & ~vb
    two = ~va & ~vb
    declared = log.declared
    if two.any() and declared:
        # two element values (a one-token row sum is that token's score): the factor that consumed
        # what the launch's outputs declare (the PV partial, not its weight) keeps its name
        sel = np.nonzero(both)
        ha = _consumes(log, ia[sel][two], ma[sel][two], declared)
        hb = _consumes(log, ib[sel][two], mb[sel][two], declared)
        take_a[two] = ha & ~hb
        take_b[two] = hb & ~ha
    if not (take_a.any() or take_b.any()):
        return out
    from .provenance import Prov
    ids = dict(out.ids)
    mma = ids.get("@mma")
    mma = np.full(both.shape, -1, np.int32) if mma is None else mma.copy()
    mnn = ids.get("@mn")
    mnn = np.full(both.shape, -1, np.int32) if mnn is None else mnn.copy()
    for take, i, m in ((take_a, ia, ma), (take_b, ib, mb)):
        sel = np.zeros(both.shape, bool)
        sel[both] = take
        mma[sel], mnn[sel] = i[sel], m[sel]
    ids["@mma"], ids["@mn"] = mma, mnn
    return Prov(out.g, ids, out.fp, out.flags)


def extremum_names(pa, pb, out):
    """max/min: a result's name survives only where both operands are that element. The max of a
    result and anything else (the row max over tokens, a clamp) is no partial sum of it: with its
    name, ``exp(-inf - m)`` past the context would pass for the element m came from."""
    from .provenance import Prov
    if pa is None or pb is None or "@mma" not in pa.ids or "@mma" not in pb.ids:
        ids = {f: a for f, a in out.ids.items() if f not in ("@mma", "@mn")}
    else:
        keep = (pa.ids["@mma"] == pb.ids["@mma"]) & (pa.ids["@mn"] == pb.ids["@mn"]) & (pa.ids["@mma"] >= 0)
        ids = dict(out.ids)
        if keep.all():
            return out
        if not keep.any():
            ids = {f: a for f, a in ids.items() if f not in ("@mma", "@mn")}
        else:
            ids["@mma"] = np.where(keep, ids["@mma"], -1).astype(np.int32, copy=False)
            ids["@mn"] = np.where(keep, ids["@mn"], -1).astype(np.int32, copy=False)
    return Prov(out.g, ids, out.fp, out.flags)


# -- where a value came from ------------------------------------------------------------------------
def describe(log, i: int, e: int, prefix: str = ""):
    """(words, instruction index) for the value named (i, e) in ``log``."""
    if i >= FOREIGN_BASE:
        k = i // FOREIGN_BASE
        theirs = log.foreign[k - 1][0]
        return describe(theirs, i - k * FOREIGN_BASE, e, f"launch {theirs.kernel or '?'}: ")
    if i >= PAIR_BASE:
        rec = log.pairs[i - PAIR_BASE]
        if rec.site is None:
            return f"{prefix}a sum", -1
        idx, src, wv, wgs, lanes = rec.site
        base = rec.member_base
        wg = wgs[int(np.searchsorted(base, e, "right")) - 1] if base is not None else wgs[0]
        return (f"{prefix}the sum of {log.summed_names(i)} made at #{idx} ({src}, workgroup {tuple(wg)}, "
                f"wave {wv})"), int(idx)
    rec = log.record_of(i)
    if rec is None:
        return f"{prefix}the result of #{i}", i
    M, N = rec.insn.M, rec.insn.N
    wg = tuple(rec.workgroups[i - rec.first])
    return (f"{prefix}the result of {log.describe(i)} {rec.op} ({rec.source}, workgroup {wg}, wave {rec.wave}) "
            f"D[{(e // N) % M}][{e % N}]"), i


def counts(log, i: int, e: int, field: str) -> Counter:
    """How often each value of ``field`` fed the element named (i, e): the exact multiset."""
    got: Counter = Counter()
    stack = [(log, i, e)]
    while stack:
        lg, i, e = stack.pop()
        if i < 0:
            continue
        if i >= FOREIGN_BASE:
            k = i // FOREIGN_BASE
            stack.append((lg.foreign[k - 1][0], i - k * FOREIGN_BASE, e))
        elif i >= PAIR_BASE:
            rec = lg.pairs[i - PAIR_BASE]
            for ids, mn in (rec.left, rec.right):
                stack.append((lg, int(ids[e]), int(mn[e])))
        else:
            r_i = int(np.searchsorted(lg.starts, i, "right")) - 1
            rec = lg.records[r_i]
            M, N, bl = rec.insn.M, rec.insn.N, rec.insn.blocks
            blk, m, n = e // (M * N), (e // N) % M, e % N
            row = (i - rec.first) * bl + blk
            vals = set()
            ksa, ksb = _k_sets(lg, r_i, rec)
            if field in ksa:
                vals |= ksa[field].values_at((row, m), lg.wide)
            if field in ksb:
                vals |= ksb[field].values_at((row, n), lg.wide)
            got.update(vals)
            if rec.c_mma is not None:
                stack.append((lg, int(rec.c_mma[row, m, n]), int(rec.c_mn[row, m, n])))
    return got


def _launches(log) -> list:
    """The launches whose results ``log``'s launch read (transitively), then itself."""
    names = []
    for theirs, _ in log.foreign:
        names += [n for n in _launches(theirs) if n not in names]
    return names + [log.kernel or "?"]


# -- output declarations ----------------------------------------------------------------------------
def _row_stats(m: Mask, wide):
    """(min, max, size) of every set of a table; min -1 and size 0 for an empty one. Word by word
    (value base + 64*w + b is bit b of word w): the lowest set bit of the first nonzero word, the
    highest of the last, and the words' bit counts (unpacking every bit cost 8 bytes a value)."""
    bits = np.ascontiguousarray(m.bits, np.uint64)
    rows = np.arange(len(bits))
    count = np.bitwise_count(bits).sum(axis=1, dtype=np.int64)
    has = count > 0
    nz = bits != 0
    w0 = nz.argmax(axis=1)                          # the first nonzero word (0 in an empty row)
    w1 = WORDS - 1 - nz[:, ::-1].argmax(axis=1)     # the last
    lo_word = bits[rows, w0]
    low = lo_word & (~lo_word + np.uint64(1))       # its lowest set bit alone
    first_bit = np.bitwise_count(low - np.uint64(1)).astype(np.int64)    # bits below it (0 -> 64: masked)
    hi_word = bits[rows, w1]
    for k in (1, 2, 4, 8, 16, 32):                  # every bit below the highest set bit set too
        hi_word = hi_word | (hi_word >> np.uint64(k))
    last_bit = np.bitwise_count(hi_word).astype(np.int64) - 1
    first = np.where(has, m.base + 64 * w0 + first_bit, -1)
    last = np.where(has, m.base + 64 * w1 + last_bit, -1)
    w = np.nonzero(m.wide != 0)[0]
    if len(w):                     # per distinct set: the rows of a context-wide sum share one
        ids, inv = np.unique(m.wide[w], return_inverse=True)
        stats = []
        for sid in ids.tolist():
            vals = wide.values(sid)
            stats.append((min(vals), max(vals), len(vals)) if vals else (-1, -1, 0))
        stats = np.array(stats, np.int64)[inv.ravel()]
        first[w], last[w], count[w] = stats[:, 0], stats[:, 1], stats[:, 2]
    count[(m.base < 0) & (m.wide == 0)] = 0
    return first, last, count


def _range_masks(lo, hi):
    """(Mask of [lo, hi) per element, fits one window)."""
    base = (lo // WINDOW) * WINDOW
    fits = (hi > lo) & ((hi - 1) // WINDOW * WINDOW == base)
    m = Mask.empty(lo.shape)
    m.base[fits] = base[fits]
    for w in range(WORDS):
        a = np.clip(lo - base - 64 * w, 0, 64)
        b = np.clip(hi - base - 64 * w, 0, 64)
        cnt = (b - a).astype(np.uint64)
        ones = np.where(cnt >= 64, np.uint64(0xFFFFFFFFFFFFFFFF),
                        (np.left_shift(np.uint64(1), np.minimum(cnt, 63)) - np.uint64(1)))
        word = np.where(cnt > 0, np.left_shift(ones, a.astype(np.uint64)), np.uint64(0))
        m.bits[..., w] = np.where(fits, word, np.uint64(0))
    return m, fits


CHECK_SLICE = 1 << 16      # output elements checked at once (each holds two masks of 48 bytes)
# an output whose every element is checked and named is read through views (no n-sized copies of the
# bounds, names and positions); tests compare both ways
LEAN_CHECK = True


def distinct_triples(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> tuple[list, np.ndarray]:
    """The distinct (x, y, z) of equal-length int64 arrays, as a list of tuples, and each position's
    row in it. Non-negative values whose product of spans fits 62 bits are one int64 key each
    (a 1-D unique sorts ~50x faster than a unique over rows); any others go row-wise."""
    x, y, z = (np.asarray(a, np.int64) for a in (x, y, z))
    if not len(x):
        return [], np.zeros(0, np.int64)
    lo = min(int(x.min()), int(y.min()), int(z.min()))
    sy, sz = int(y.max()) + 1, int(z.max()) + 1
    if lo >= 0 and (int(x.max()) + 1) * sy * sz < 1 << 62:
        keys, inv = np.unique((x * sy + y) * sz + z, return_inverse=True)
        return [(k // (sy * sz), k // sz % sy, k % sz) for k in keys.tolist()], inv.ravel()
    keys, inv = np.unique(np.stack([x, y, z], axis=1), axis=0, return_inverse=True)
    return [tuple(k) for k in keys.tolist()], inv.ravel()


def _wide_holds(u: Mask, lo, hi, exact: bool, wide) -> np.ndarray:
    """Where ``u`` holds a set that leaves one window (a WideSets id): whether it holds [lo, hi)
    (``exact``: is it), per distinct (set, range)."""
    out = np.zeros(len(lo), bool)
    w = np.nonzero(u.wide != 0)[0]
    if not len(w):
        return out
    keys, inv = distinct_triples(u.wide[w].astype(np.int64), lo[w], hi[w])
    held = np.zeros(len(keys), bool)
    for r, (sid, a, b) in enumerate(keys):
        bits, want = wide.bitset(sid), ((1 << (b - a)) - 1) << a
        held[r] = bits == want if exact else bits & want == want
    out[w] = held[inv]
    return out


def check_outputs(machine):
    """token-coverage findings for every declared buffer this launch stored into (unless the front
    end said it cannot follow what values consumed: ``Machine.not_checked``)."""
    if "token-coverage" in machine.not_checked:
        return
    for buf, source in list(machine.outputs):
        for f in sorted(buf.expects):
            _check_buffer(machine, buf, source, f, *buf.expects[f])


def check_unwritten(machine, buf) -> None:
    """token-coverage findings for ``buf``, a declared output (Buffer.expect) the launch was to write,
    when it stored nothing into it: check_outputs checks only the buffers a launch stored into (a
    buffer may be a later launch's output), so the caller that knows which launch writes it asks."""
    if not machine.provenance or "token-coverage" in machine.not_checked or not buf.expects:
        return
    if any(b is buf for b, _ in machine.outputs):
        return
    for f in sorted(buf.expects):
        _check_buffer(machine, buf, None, f, *buf.expects[f])


def _check_buffer(machine, buf, source, field, lo, hi, exact):
    """``lo``/``hi``: Buffer.expect's bounds as kept (broadcastable to the buffer's shape)."""
    from ..arch.kslots import format_token_set
    log, wide = machine.mma_log, machine.wide
    shape = buf.array.shape
    flat = lambda x: np.broadcast_to(x, shape).reshape(-1)         # noqa: E731
    # every element checked and named (a prefill's output: millions) takes views and each slice's
    # bounds, not n-sized copies
    checked = np.less(lo, hi)
    every = LEAN_CHECK and bool(checked.all())
    if every:
        el, n = None, buf.array.size

        def bounds(sel):
            at = np.unravel_index(sel, shape)
            return np.broadcast_to(lo, shape)[at], np.broadcast_to(hi, shape)[at]
    else:
        el = np.nonzero(flat(checked))[0]
        if not len(el):
            return
        lo, hi = flat(lo)[el], flat(hi)[el]
        n = len(el)
        bounds = lambda sel: (lo[sel], hi[sel])        # noqa: E731
    del checked
    size = buf.itemsize
    # bytes of each element written: fewer than all is a store narrower than the element (an i8 into f32)
    if buf.written is None:
        nwritten = np.broadcast_to(np.int16(size), (n,))
    else:
        w = buf.written.reshape(-1, size)
        nwritten = (w if every else w[el]).sum(axis=1, dtype=np.int16)
    written = nwritten == size
    ids = np.full(n, -1, np.int64)
    mn = np.zeros(n, np.int64)
    if buf.prov is not None and buf.origin is machine and buf.prov.has("@mma"):
        unit = buf.prov.unit
        idx = slice(None, None, size // unit) if every and size % unit == 0 else \
            (np.arange(n) if el is None else el) * size // unit
        # the planes' int32 (views where every element is read): footprints widens them for its
        # own use, so no n-sized int64 copies outlive it (16 B an element)
        ids = buf.prov.field_plane("@mma")[idx]
        mn = buf.prov.field_plane("@mn")[idx]
    all_named = LEAN_CHECK and bool((ids >= 0).all())
    named = np.nonzero(ids >= 0)[0] if not all_named else None
    void = np.zeros(n, bool)
    mixed = np.zeros(n, bool)
    fp = {}
    if all_named or len(named):
        v, fp = footprints(log, ids, mn) if all_named else footprints(log, ids[named], mn[named])
        at = slice(None) if all_named else named
        void[at] = v == -1
        mixed[at] = v == MIXED
        del v
    if exact and (all_named or len(named) == n) and field in fp and fp[field][0].index is not None and \
            len(fp[field][0].table.base) <= n // 4:
        # the common case, per table row: a set is [lo, hi) when its min, max and size say so
        fu, fd = fp[field]
        first, last, count = _row_stats(fu.table, wide)
        t = fu.index
        flo, fhi = (flat(lo), flat(hi)) if every else (lo, hi)
        ok = (count[t] == fhi - flo) & (first[t] == flo) & (last[t] == fhi - 1)
        if fd is not None:
            ok &= ~fd.nonempty()
        if (void | (written & ok & ~mixed)).all():
            return
    # element by element in slices (a prefill's output holds millions): what holds its range, then
    # the rest's masks
    if all_named:
        named_at = None
    else:
        named_at = np.full(n, -1, np.int64)
        named_at[named] = np.arange(len(named))

    def masks(sel):
        """(consumed, consumed twice) of the elements at ``sel``."""
        u, d = Mask.empty((len(sel),)), Mask.empty((len(sel),))
        if field in fp:
            fu, fd = fp[field]
            k = sel if named_at is None else named_at[sel]
            has = np.nonzero(k >= 0)[0]
            if len(has):
                u.assign(has, fu.at(k[has]).mask())
                if fd is not None:
                    d.assign(has, fd.at(k[has]).mask())
        return u, d

    bad = []
    for s0 in range(0, n, CHECK_SLICE):
        sel = np.arange(s0, min(n, s0 + CHECK_SLICE))
        u, d = masks(sel)
        s_lo, s_hi = bounds(sel)
        want, fits = _range_masks(s_lo, s_hi)
        narrow = u.wide == 0
        same = narrow & fits & (u.base == want.base) & ((u.bits == want.bits).all(axis=-1) if exact else
                                                        ((want.bits & ~u.bits) == 0).all(axis=-1))
        same |= _wide_holds(u, s_lo, s_hi, exact, wide)
        ok = void[sel] | (written[sel] & same & ~d.nonempty() & ~mixed[sel])
        bad.append(sel[~ok])
    bad = np.concatenate(bad)
    if not len(bad):
        return
    u, d = masks(bad)                    # row i: element bad[i]
    b_lo, b_hi = bounds(bad)
    # the rest, per distinct (consumed, consumed twice, range, written)
    key = np.concatenate([u.base[:, None], u.wide[:, None].astype(np.int64), u.bits.view(np.int64),
                          d.base[:, None], d.wide[:, None].astype(np.int64), d.bits.view(np.int64),
                          b_lo[:, None], b_hi[:, None], nwritten[bad, None].astype(np.int64), mixed[bad, None]],
                         axis=1)
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inv = inv.ravel()
    groups: dict = {}
    for g, i in enumerate(first.tolist()):
        j = bad[i]
        expected = set(range(int(b_lo[i]), int(b_hi[i])))
        got = u.values_at((i,), wide) if written[j] else frozenset()
        never = sorted(expected - got)
        twice = sorted(d.values_at((i,), wide)) if written[j] else []
        extra = sorted(got - expected) if exact else []
        mix = bool(mixed[j]) and written[j]
        if not (never or twice or extra or mix):
            continue
        groups.setdefault((tuple(never), tuple(twice), tuple(extra), int(nwritten[j]), mix), []).append(g)
    for (never, twice, extra, nw, mix), gs in groups.items():
        wr = nw == size
        members = bad[np.isin(inv, gs)]
        elems = members if el is None else el[members]
        rep = int(members[0])
        multiple = {}
        if twice:
            c = counts(log, int(ids[rep]), int(mn[rep]), field)
            multiple = {int(t): int(c[t]) for t in twice}
        where = _where(buf, elems)
        launches = _launches(log)
        parts = []
        if not wr:
            what = "never written" if not nw else (f"partly written ({nw} of each element's {size} bytes: a store "
                                                   f"narrower than its {buf.dtype} element)")
            parts.append(f"{what}: {len(never)} {field}s never consumed {format_token_set(never)}")
        elif never:
            parts.append(f"{len(never)} {field}s never consumed {format_token_set(never)}")
        if twice:
            parts.append(f"{len(twice)} consumed more than once {format_token_set(twice)}")
        if extra:
            parts.append(f"{len(extra)} consumed but not expected {format_token_set(list(extra))}")
        if mix:
            parts.append(f"a partial sum of another output (another head, sequence or row) was added in: its "
                         f"{field}s were consumed for that output, not this element's")
        chain = f" (values made by {' -> '.join(launches)})" if len(launches) > 1 else ""
        machine.report("token-coverage", f"{where}: " + "; ".join(parts) + chain, source=source,
                       details=dict(tile="", never=list(never), multiple=multiple, buffer=buf.name, field=field,
                                    where=where, elements=[[int(x) for x in np.unravel_index(e, buf.array.shape)]
                                                           for e in elems[:_FIRST].tolist()],
                                    element_count=len(elems), unexpected=list(extra), launches=launches))


def _where(buf, flat) -> str:
    """``name[0, 0-7, 1, 0-127]`` (a box of elements) or ``name[...] and N more``, with its tags."""
    from ..arch.kslots import format_token_set
    shape = buf.array.shape
    idx = np.unravel_index(flat, shape)
    axes = [np.unique(a) for a in idx]
    box = int(np.prod([len(a) for a in axes])) == len(flat)

    def fmt(a):
        s = format_token_set(a)[1:-1]
        return s
    if box:
        text = f"{buf.name}[{', '.join(fmt(a) for a in axes)}]"
    else:
        text = f"{buf.name}[{', '.join(str(int(a[0])) for a in idx)}] and {len(flat) - 1} more elements"
    tags = [f"{t} {fmt(np.unique(v[flat]))}" for t, v in sorted(buf.tags.items()) if (v[flat] >= 0).any()]
    return text + (f" ({', '.join(tags)})" if tags else "")
