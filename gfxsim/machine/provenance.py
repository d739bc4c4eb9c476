"""Provenance: identity tags on every byte, and the footprints of reduced values.

* An **identity** says which element a byte is: an interned tuple of (field, value) pairs such as
  (("row", 3), ("token", 17)). Loads from a tagged buffer give the element's fields; arithmetic
  merges them field by field (equal or one-sided fields survive, conflicting fields are dropped —
  ``max(S[t1], S[t2])`` has no single token).
* A **footprint** is the set of identities a value was reduced over. It grows only when an
  operation merges two different elements (a conflict): so ``amax = max_t |W[q][t]|`` carries the
  tokens it saw, while ``P = exp(S - m)`` stays the element ``(q, t)``. A quantization scale's
  footprint is compared with a matrix instruction's K set when the scale is applied.
* A **K set** is attached to matrix-instruction results: per output element, the identities of
  the A row and the B column that fed its K slots (accumulated over a chain through C).

Identity 0 and set 0 mean "none". Everything is interned per machine so arrays hold int32 ids.
"""
from __future__ import annotations

import numpy as np


class _SetStore:
    """Set ids -> frozensets of identity ids. A union is stored as a node (a, b) and materialised
    only when someone looks at it: reductions build thousands of partial footprints (every step of
    a softmax max), and only the few that reach a scale check are ever compared."""

    def __init__(self):
        self.nodes: list = [frozenset()]

    def __len__(self):
        return len(self.nodes)

    def append(self, fs: frozenset):
        self.nodes.append(fs)

    def union_node(self, a: int, b: int) -> int:
        self.nodes.append((a, b))
        return len(self.nodes) - 1

    def __getitem__(self, sid) -> frozenset:
        sid = int(sid)
        if isinstance(self.nodes[sid], frozenset):
            return self.nodes[sid]
        stack = [sid]
        while stack:                          # post-order, iterative: chains can be thousands deep
            s = stack[-1]
            node = self.nodes[s]
            if isinstance(node, frozenset):
                stack.pop()
                continue
            a, b = node
            pa, pb = self.nodes[a], self.nodes[b]
            if not isinstance(pa, frozenset):
                stack.append(a)
            elif not isinstance(pb, frozenset):
                stack.append(b)
            else:
                self.nodes[s] = pa | pb
                stack.pop()
        return self.nodes[sid]


class TagTable:
    def __init__(self):
        self.fields: list[str] = []
        self._field_idx: dict[str, int] = {}
        self.identities: list[tuple] = [()]          # id -> ((field_idx, value), ...)
        self._ident_id: dict[tuple, int] = {(): 0}
        self.sets = _SetStore()                      # set id -> frozenset of identity ids
        self._set_id: dict[frozenset, int] = {frozenset(): 0}
        self._merge_cache: dict = {}           # (a << 32 | b) -> [identity, conflict, a<=b, b<=a]
        self._union_cache: dict[tuple, int] = {}
        self._luts: dict = {}
        self._schemes: dict = {}
        self._fm = None
        self._single_cache: dict = {}
        self._rowset_cache: dict = {}
        self._import_cache: dict = {}

    # -- interning ---------------------------------------------------------------------------
    def field(self, name: str) -> int:
        if name not in self._field_idx:
            self._field_idx[name] = len(self.fields)
            self.fields.append(name)
        return self._field_idx[name]

    def identity(self, items) -> int:
        key = tuple(sorted(items))
        got = self._ident_id.get(key)
        if got is None:
            got = self._ident_id[key] = len(self.identities)
            self.identities.append(key)
        return got

    def set_id(self, ids) -> int:
        key = frozenset(int(i) for i in ids if i)
        got = self._set_id.get(key)
        if got is None:
            got = self._set_id[key] = len(self.sets)
            self.sets.append(key)
        return got

    def identities_for(self, field_values: dict[str, np.ndarray]) -> np.ndarray:
        """Vectorised: identity ids for elements whose fields are given as equal-shape int arrays."""
        names = list(field_values)
        if not names:
            return None
        stack = np.stack([np.asarray(field_values[n], np.int64).ravel() for n in names], axis=1)
        uniq, inv = np.unique(stack, axis=0, return_inverse=True)
        fidx = [self.field(n) for n in names]
        scheme = self._schemes.setdefault(tuple(fidx), {})
        ids = np.empty(len(uniq), np.int32)
        for n, row in enumerate(map(tuple, uniq.tolist())):
            got = scheme.get(row)
            if got is None:
                # a negative tag value means "no tag" (padding, unused cache slots)
                got = scheme[row] = self.identity((f, v) for f, v in zip(fidx, row) if v >= 0)
            ids[n] = got
        return ids[inv.ravel()].reshape(np.shape(field_values[names[0]]))

    # -- carrying provenance across launches (a buffer written by one kernel, read by the next) ------
    @staticmethod
    def _map_unique(arr: np.ndarray, cache: dict, fn) -> np.ndarray:
        """Apply ``fn`` to each distinct id of ``arr`` once (memoised in ``cache``)."""
        u, inv = np.unique(arr, return_inverse=True)
        out = np.empty(len(u), np.int32)
        for n, i in enumerate(u.tolist()):
            got = cache.get(i)
            if got is None:
                got = cache[i] = fn(i)
            out[n] = got
        return out[inv.ravel()].reshape(np.shape(arr))

    def import_ids(self, other: "TagTable", ids: np.ndarray) -> np.ndarray:
        if other is self:
            return ids
        return self._map_unique(ids, self._import_cache.setdefault((id(other), "id"), {}), lambda i: self.identity(
            (self.field(other.fields[f]), v) for f, v in other.identities[i]))

    def import_sets(self, other: "TagTable", sids: np.ndarray) -> np.ndarray:
        if other is self:
            return sids
        return self._map_unique(sids, self._import_cache.setdefault((id(other), "set"), {}), lambda s_: self.set_id(
            self.import_ids(other, np.array(sorted(other.sets[s_]), np.int32))) if s_ else 0)

    # -- reading back ----------------------------------------------------------------------------
    def fields_of(self, ident: int) -> dict:
        return {self.fields[f]: v for f, v in self.identities[int(ident)]}

    def field_values(self, ids: np.ndarray, name: str, missing: int = -1) -> np.ndarray:
        """Project identity ids onto one field (``missing`` where the identity lacks it)."""
        ids = np.asarray(ids)
        if name not in self._field_idx:
            return np.full(ids.shape, missing, np.int64)
        return self._lut(name, missing)[ids]

    def _lut(self, name, missing):
        """identity id -> value of one field, grown as identities are interned."""
        key = (name, missing)
        lut = self._luts.get(key)
        n = len(self.identities)
        if lut is None or len(lut) < n:
            f = self._field_idx[name]
            start = 0 if lut is None else len(lut)
            ext = np.array([dict(t).get(f, missing) for t in self.identities[start:n]], np.int64)
            lut = ext if lut is None else np.concatenate([lut, ext])
            self._luts[key] = lut
        return lut

    def set_field_values(self, sid: int, name: str) -> set:
        f = self._field_idx.get(name)
        if f is None:
            return set()
        return {dict(self.identities[i]).get(f) for i in self.sets[int(sid)]} - {None}

    # -- merging ---------------------------------------------------------------------------------
    def union(self, a: int, b: int) -> int:
        if a == b or b == 0:
            return a
        if a == 0:
            return b
        key = (a, b) if a < b else (b, a)
        got = self._union_cache.get(key)
        if got is None:
            got = self._union_cache[key] = self.sets.union_node(a, b)
        return got

    # -- vectorised merging ----------------------------------------------------------------------
    def _fmat(self) -> np.ndarray:
        """[identities, fields] matrix of field values (-1 where absent), grown incrementally."""
        n, F = len(self.identities), len(self.fields)
        m = self._fm
        if m is None or m.shape[1] != F:
            m = np.full((n, F), -1, np.int64)
            start = 0
        elif m.shape[0] < n:
            start = m.shape[0]
            m = np.concatenate([m, np.full((n - start, F), -1, np.int64)])
        else:
            return m
        for i in range(start, n):
            for f, v in self.identities[i]:
                m[i, f] = v
        self._fm = m
        return m

    def _intern_rows(self, rows: np.ndarray) -> np.ndarray:
        """Identity ids of field-value rows ``[N, fields]`` (-1 = absent)."""
        ids = np.empty(len(rows), np.int32)
        for n, row in enumerate(rows.tolist()):
            key = tuple((f, v) for f, v in enumerate(row) if v >= 0)      # already sorted by field
            got = self._ident_id.get(key)
            if got is None:
                got = self._ident_id[key] = len(self.identities)
                self.identities.append(key)
            ids[n] = got
        return ids

    def merge_ids(self, ia: np.ndarray, ib: np.ndarray):
        """Field-wise merge of identity arrays: (identity, conflict, a_subset_of_b, b_subset_of_a)."""
        shape = np.shape(ia)
        key = (np.asarray(ia, np.int64).ravel() << 32) | np.asarray(ib, np.int64).ravel()
        uk, inv = np.unique(key, return_inverse=True)
        res = np.empty((len(uk), 4), np.int32)          # ident, conflict, a<=b, b<=a per unique pair
        cache = self._merge_cache
        known = [cache.get(k) for k in uk.tolist()]
        new = [n for n, got in enumerate(known) if got is None]
        for n, got in enumerate(known):
            if got is not None:
                res[n] = got
        if new:
            nk = uk[new]
            a_u, b_u = (nk >> 32).astype(np.int64), (nk & 0xFFFFFFFF).astype(np.int64)
            M = self._fmat()
            va, vb = M[a_u], M[b_u]
            has_a, has_b = va >= 0, vb >= 0
            same = va == vb
            conf = has_a & has_b & ~same
            out = np.where(has_a, va, vb)
            out[conf] = -1
            rows = np.stack([self._intern_rows(out), conf.any(axis=1), np.all(~has_a | same, axis=1),
                             np.all(~has_b | same, axis=1)], axis=1).astype(np.int32)
            res[new] = rows
            for k, row in zip(nk.tolist(), rows.tolist()):
                cache[k] = row
        res = res[inv.ravel()]
        r = lambda x: x.reshape(shape)
        return r(res[:, 0]), r(res[:, 1].astype(bool)), r(res[:, 2].astype(bool)), r(res[:, 3].astype(bool))

    def _self_sets(self, ids: np.ndarray) -> np.ndarray:
        """The singleton set {id} of each identity (0 for none)."""
        return self._map_unique(ids, self._single_cache, lambda i: self.set_id([i]) if i else 0)

    def unions(self, s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
        """Elementwise union of set ids."""
        out = np.where(s1 == 0, s2, np.where((s2 == 0) | (s1 == s2), s1, -1)).astype(np.int32)
        need = out < 0
        if need.any():
            key = (s1[need].astype(np.int64) << 32) | s2[need]
            uk, inv = np.unique(key, return_inverse=True)
            res = np.array([self.union(int(k >> 32), int(k & 0xFFFFFFFF)) for k in uk], np.int32)
            out[need] = res[inv.ravel()]
        return out

    def combine(self, ia, fa, ib, fb, reducing: bool = False):
        """Elementwise merge of two operands' (identity, footprint) arrays of equal shape.

        Footprint rule: a conflict (two different elements meet) is a reduction step, so the result's
        footprint is the union of both sides' footprints-or-selves. So is an accumulating op
        (``reducing``: max, min, add) of an aggregate with an element (``amax = max(amax, |w_t|)``).
        Otherwise the more specific operand's footprint survives (``S - m`` keeps S's), and equal
        identities unite footprints."""
        ident, conflict, sub_a, sub_b = self.merge_ids(ia, ib)
        if reducing:      # an aggregate (less specific, has a footprint) absorbs an element
            absorb = ~conflict & (sub_a != sub_b) & np.where(sub_a, fa != 0, fb != 0)
            if absorb.any():      # ... and stays the aggregate: max_t(..) has no single token
                ident = np.where(absorb, np.where(sub_a, ia, ib), ident).astype(np.int32)
                conflict = conflict | absorb
        fp = np.where(sub_b & ~sub_a, fa, np.where(sub_a & ~sub_b, fb, 0)).astype(np.int32)
        both = ~conflict & (sub_a == sub_b)          # equal identities, or unrelated ones
        if both.any():
            fp[both] = self.unions(fa[both], fb[both])
        if conflict.any():
            s1 = np.where(fa != 0, fa, self._self_sets(ia))
            s2 = np.where(fb != 0, fb, self._self_sets(ib))
            fp[conflict] = self.unions(s1[conflict], s2[conflict])
        return ident, fp

    def sets_of_rows(self, ids: np.ndarray) -> np.ndarray:
        """Intern the set of identities along the last axis: ``[..., K] -> [...]`` set ids."""
        flat = ids.reshape(-1, ids.shape[-1])
        uniq, inv = np.unique(np.sort(flat, axis=1), axis=0, return_inverse=True)
        sids = np.empty(len(uniq), np.int32)
        for n, row in enumerate(uniq):
            k = row.tobytes()
            got = self._rowset_cache.get(k)
            if got is None:
                got = self._rowset_cache[k] = self.set_id(row.tolist())
            sids[n] = got
        return sids[inv.ravel()].reshape(ids.shape[:-1])
