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


class TagTable:
    def __init__(self):
        self.fields: list[str] = []
        self._field_idx: dict[str, int] = {}
        self.identities: list[tuple] = [()]          # id -> ((field_idx, value), ...)
        self._ident_id: dict[tuple, int] = {(): 0}
        self.sets: list[frozenset] = [frozenset()]    # set id -> frozenset of identity ids
        self._set_id: dict[frozenset, int] = {frozenset(): 0}
        self._merge_cache: dict[tuple, tuple] = {}
        self._union_cache: dict[tuple, int] = {}

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
        ids = np.array([self.identity(zip(fidx, map(int, row))) for row in uniq], np.int32)
        return ids[inv.ravel()].reshape(np.shape(field_values[names[0]]))

    # -- reading back ----------------------------------------------------------------------------
    def fields_of(self, ident: int) -> dict:
        return {self.fields[f]: v for f, v in self.identities[int(ident)]}

    def field_values(self, ids: np.ndarray, name: str, missing: int = -1) -> np.ndarray:
        """Project identity ids onto one field (``missing`` where the identity lacks it)."""
        ids = np.asarray(ids)
        if name not in self._field_idx:
            return np.full(ids.shape, missing, np.int64)
        f = self._field_idx[name]
        lut = np.array([dict(t).get(f, missing) for t in self.identities], np.int64)
        return lut[ids]

    def set_members(self, sid: int) -> frozenset:
        return self.sets[int(sid)]

    def set_field_values(self, sid: int, name: str) -> set:
        f = self._field_idx.get(name)
        if f is None:
            return set()
        return {dict(self.identities[i]).get(f) for i in self.sets[int(sid)]} - {None}

    # -- merging ---------------------------------------------------------------------------------
    def _merge_pair(self, a: int, b: int):
        """(identity, conflict) of an elementwise op on elements a and b."""
        key = (a, b)
        got = self._merge_cache.get(key)
        if got is None:
            da, db = dict(self.identities[a]), dict(self.identities[b])
            out, conflict = {}, False
            for f in da.keys() | db.keys():
                if f in da and f in db and da[f] != db[f]:
                    conflict = True
                else:
                    out[f] = da.get(f, db.get(f))
            # specificity: which side's footprint survives a non-reducing op
            sub_a, sub_b = da.items() <= db.items(), db.items() <= da.items()
            got = self._merge_cache[key] = (self.identity(out.items()), conflict, sub_a, sub_b)
        return got

    def union(self, a: int, b: int) -> int:
        if a == b or b == 0:
            return a
        if a == 0:
            return b
        key = (a, b) if a < b else (b, a)
        got = self._union_cache.get(key)
        if got is None:
            got = self._union_cache[key] = self.set_id(self.sets[a] | self.sets[b])
        return got

    def combine(self, ia, fa, ib, fb, reducing: bool = False):
        """Elementwise merge of two operands' (identity, footprint) arrays of equal shape.

        Footprint rule: a conflict (two different elements meet) is a reduction step, so the result's
        footprint is the union of both sides' footprints-or-selves. So is an accumulating op
        (``reducing``: max, min, add) of an aggregate with an element (``amax = max(amax, |w_t|)``).
        Otherwise the more specific operand's footprint survives (``S - m`` keeps S's), and equal
        identities unite footprints."""
        cols = np.stack([ia.ravel(), ib.ravel(), fa.ravel(), fb.ravel()], axis=1)
        uniq, inv = np.unique(cols, axis=0, return_inverse=True)
        ia_u, ib_u, fa_u, fb_u = uniq.T
        out_i = np.empty(len(uniq), np.int32)
        inv = inv.ravel()
        out_f = np.empty(len(uniq), np.int32)
        for n, (a, b, f1, f2) in enumerate(zip(ia_u.tolist(), ib_u.tolist(), fa_u.tolist(), fb_u.tolist())):
            ident, conflict, sub_a, sub_b = self._merge_pair(a, b)
            if reducing and not conflict and (sub_a != sub_b) and (f1 if sub_a else f2):
                conflict = True          # aggregate (less specific, has a footprint) absorbs an element
            if conflict:
                s1 = f1 if f1 else (self.set_id([a]) if a else 0)
                s2 = f2 if f2 else (self.set_id([b]) if b else 0)
                fp = self.union(s1, s2)
            elif sub_a and sub_b:
                fp = self.union(f1, f2)
            elif sub_b:          # a is more specific
                fp = f1
            elif sub_a:
                fp = f2
            else:
                fp = self.union(f1, f2)
            out_i[n], out_f[n] = ident, fp
        shape = ia.shape
        return out_i[inv].reshape(shape), out_f[inv].reshape(shape)

    def sets_of_rows(self, ids: np.ndarray) -> np.ndarray:
        """Intern the set of identities along the last axis: ``[..., K] -> [...]`` set ids."""
        flat = ids.reshape(-1, ids.shape[-1])
        uniq, inv = np.unique(np.sort(flat, axis=1), axis=0, return_inverse=True)
        sids = np.array([self.set_id(row) for row in uniq], np.int32)
        return sids[inv.ravel()].reshape(ids.shape[:-1])
