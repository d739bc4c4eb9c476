"""Compiled summaries of a matrix instruction's gathered operand fields: one pass over an operand
field gives, per K slot and per row, its smallest and largest present value (``Field``), D's
identity plane is filled in one pass (``d_plane``), and the values of each row become a bitmask
set (``row_sets``). ``Field.compact`` is the record's compact form; ``expand`` reads it back.
"""
from __future__ import annotations

import numpy as np

from .jit import njit
from .provenance import WINDOW, WORDS, Mask, WideSets

_BIG = np.iinfo(np.int32).max


class Field:
    """One operand field gathered as ``[nb, R, K]`` (A: R = M; B: its N x K view), summarised in
    one pass (``_field_summary``): per K slot the smallest present value and the largest over the
    rows (lo_r, hi_r [nb, K]), per row the same along K (lo_k, hi_k [nb, R]), and whether the
    field is the same along K (eq_k) or along the rows (eq_r), absent values (-1) included."""
    __slots__ = ("v", "lo_r", "hi_r", "lo_k", "hi_k", "eq_r", "eq_k", "_one_k")

    def __init__(self, v, summary=None):
        self.v = v
        self._one_k = None
        self.lo_r, self.hi_r, self.lo_k, self.hi_k, self.eq_r, self.eq_k = \
            _field_summary(v, _BIG) if summary is None else summary

    @classmethod
    def gathered(cls, plane, plan, operand):
        """The field of ``plane`` [regs, width] gathered through the operand's flat plan
        ``[nb, M, K]`` (A) or ``[nb, K, N]`` (B), gathered and summarised in one pass; B's field is
        held as its [nb, N, K] view."""
        v = np.empty(plan.shape, np.int32)
        summary = _gather_summary(np.ascontiguousarray(plane, np.int32).reshape(-1), plan, operand == "B", _BIG, v)
        return cls(v if operand == "A" else np.swapaxes(v, 1, 2), summary)

    @classmethod
    def gathered_many(cls, planes, plan, operand):
        """(``[Field.gathered(x, plan, operand) for x in planes]``, their values stacked [n, nb, R,
        K]) for planes of one size, gathered and summarised in one compiled call over the planes
        stacked (a K step's distinct operands of one side, mma_many): each operand's pass is
        _gather_summary itself. A field that varies along both axes keeps a copy of its own
        gather (its record holds it: not the stack's)."""
        flats = np.stack([np.ascontiguousarray(x, np.int32).reshape(-1) for x in planes])
        n, (nb, P, Q) = len(planes), plan.shape
        K, R = (P, Q) if operand == "B" else (Q, P)
        v = np.empty((n,) + plan.shape, np.int32)
        lo_r, hi_r = np.empty((n, nb, K), np.int32), np.empty((n, nb, K), np.int32)
        lo_k, hi_k = np.empty((n, nb, R), np.int32), np.empty((n, nb, R), np.int32)
        eq = np.empty((n, 2), np.bool_)
        _gather_summaries(flats, plan, operand == "B", _BIG, v, lo_r, hi_r, lo_k, hi_k, eq)
        out = []
        for i in range(n):
            eq_r, eq_k = bool(eq[i, 0]), bool(eq[i, 1])
            vi = v[i] if eq_r or eq_k else v[i].copy()
            out.append(cls(vi if operand == "A" else np.swapaxes(vi, 1, 2), (lo_r[i], hi_r[i], lo_k[i], hi_k[i], eq_r, eq_k)))
        return out, (v if operand == "A" else np.swapaxes(v, 2, 3))

    def compact(self, operand):
        """(kind, array) for the record: "mn" [nb, R] (not a K field), "k" [nb, K], or "full"
        (in the operand's own [nb, M, K] / [nb, K, N] order)."""
        if self.eq_k:                      # copies: a view would keep the whole gather alive
            return ("mn", self.v[:, :, 0].copy())
        if self.eq_r:
            return ("k", self.v[:, 0, :].copy())
        return ("full", self.v if operand == "A" else np.swapaxes(self.v, 1, 2))

    def varies(self, live=None) -> bool:
        """Whether some row holds two different present values along K; ``live`` [nb] (optional):
        only the rows of these blocks count (a member sitting out the instruction keeps stale
        bytes in its registers, which it does not consume)."""
        differ = self.lo_k < self.hi_k
        return bool((differ if live is None else differ[live]).any())

    def one_along_k(self):
        """Per row: the one value held along K where present, -1 where none or several (slots
        past the data carry nothing, and must not hide the row's identity). Made once (a
        remembered operand's field names D's rows or columns for every instruction it feeds): its
        callers only read it."""
        if self._one_k is None:
            self._one_k = np.where((self.hi_k >= 0) & (self.lo_k == self.hi_k), self.hi_k, -1)
        return self._one_k


@njit
def _field_summary(v, big):
    nb, R, K = v.shape
    lo_r = np.full((nb, K), big, np.int32)
    hi_r = np.full((nb, K), -1, np.int32)
    lo_k = np.full((nb, R), big, np.int32)
    hi_k = np.full((nb, R), -1, np.int32)
    eq_r = True
    eq_k = True
    for b in range(nb):
        for r in range(R):
            first = v[b, r, 0]
            for k in range(K):
                x = v[b, r, k]
                if x != first:
                    eq_k = False
                if x != v[b, 0, k]:
                    eq_r = False
                if x > hi_r[b, k]:
                    hi_r[b, k] = x
                if x > hi_k[b, r]:
                    hi_k[b, r] = x
                if x >= 0:
                    if x < lo_r[b, k]:
                        lo_r[b, k] = x
                    if x < lo_k[b, r]:
                        lo_k[b, r] = x
    return lo_r, hi_r, lo_k, hi_k, eq_r, eq_k


@njit
def _gather_summary(flat, plan, transposed, big, v):
    """``v = flat[plan]`` and ``_field_summary`` of v (of its [nb, N, K] view when ``transposed``:
    B's plan is [nb, K, N]) in one pass over v's memory order, branch-free."""
    nb, P, Q = plan.shape
    lo_q = np.full((nb, Q), big, np.int32)          # over p, per q
    hi_q = np.full((nb, Q), -1, np.int32)
    lo_p = np.full((nb, P), big, np.int32)          # over q, per p
    hi_p = np.full((nb, P), -1, np.int32)
    same_q = True                                   # v[b, p, q] == v[b, p, 0]
    same_p = True                                   # v[b, p, q] == v[b, 0, q]
    for b in range(nb):
        for p in range(P):
            lo, hi = big, np.int32(-1)
            for q in range(Q):
                x = flat[plan[b, p, q]]
                v[b, p, q] = x
                xl = x if x >= 0 else big
                lo = min(lo, xl)
                hi = max(hi, x)
                lo_q[b, q] = min(lo_q[b, q], xl)
                hi_q[b, q] = max(hi_q[b, q], x)
                same_q &= x == v[b, p, 0]
                same_p &= x == v[b, 0, q]
            lo_p[b, p] = lo
            hi_p[b, p] = hi
    if transposed:                  # rows are q (N), K slots p: per slot over rows = per p
        return lo_p, hi_p, lo_q, hi_q, same_q, same_p
    return lo_q, hi_q, lo_p, hi_p, same_p, same_q


@njit
def _gather_summaries(flats, plan, transposed, big, v, lo_r, hi_r, lo_k, hi_k, eq):
    """_gather_summary of each row of ``flats`` [n, size] into v[i] and the summaries' rows i
    (Field.gathered_many): eq[i] = (eq_r, eq_k)."""
    for i in range(flats.shape[0]):
        a, b, c, d, e, f = _gather_summary(flats[i], plan, transposed, big, v[i])
        lo_r[i] = a
        hi_r[i] = b
        lo_k[i] = c
        hi_k[i] = d
        eq[i, 0] = e
        eq[i, 1] = f


@njit
def d_plane(ra, cb, vc, flat_d, out, clash):
    """D's identity plane of one field (``out`` [regs*width] flat, prefilled -1): D[m][n] is A row
    m's value ``ra`` [nb, M] and B column n's ``cb`` [nb, N] where they agree or one is absent (-1),
    then C's element ``vc`` [nb, M, N] likewise (an empty [0, 0, 0] array: no C). Where C holds
    another value than the row's and column's, ``clash`` [nb, M, N] (prefilled -1) takes the row's
    and column's: C was summed for another element; where only one of the two holds a value, -2
    (not shown to be one element). Returns (whether any element got a value, whether any clashed)."""
    nb, M, N = flat_d.shape
    has_a, has_b, has_c = ra.shape[0] > 0, cb.shape[0] > 0, vc.shape[0] > 0
    any_v = False
    any_clash = False
    for b in range(nb):
        for m in range(M):
            x = ra[b, m] if has_a else -1
            for n in range(N):
                y = cb[b, n] if has_b else -1
                d = y if x < 0 else (x if (y < 0 or x == y) else -1)
                if has_c:
                    z = vc[b, m, n]
                    if d >= 0 and z >= 0 and z != d:
                        clash[b, m, n] = d
                        any_clash = True
                    elif (d >= 0) != (z >= 0):
                        clash[b, m, n] = -2
                    d = z if d < 0 else (d if (z < 0 or z == d) else -1)
                out[flat_d[b, m, n]] = d
                if d >= 0:
                    any_v = True
    return any_v, any_clash


@njit
def d_planes(ra, cb, vc, flat_d, out, clash, got, clashed):
    """``d_plane`` of n instructions' field at once: instruction i's ``ra[i]``, ``cb[i]``, ``vc[i]``
    (ra [n, 0, 0], cb [n, 0, 0], vc [n, 0, 0, 0]: none for any), its plane ``out[i]`` and
    ``clash[i]``; ``got[i]``, ``clashed[i]`` its answers."""
    for i in range(out.shape[0]):
        got[i], clashed[i] = d_plane(ra[i], cb[i], vc[i], flat_d, out[i], clash[i])



def expand(kind: str, a: np.ndarray, op: str, M: int, N: int, K: int) -> np.ndarray:
    """A compact record form (Field.compact: "mn", "k" or "full") as the full [rows, M, K] (A) or
    [rows, K, N] (B) grid: a broadcast view ("full": ``a`` itself)."""
    if kind == "full":
        return a
    if op == "A":
        return np.broadcast_to(a[:, None, :], a.shape[:1] + (M, K)) if kind == "k" else \
            np.broadcast_to(a[:, :, None], a.shape[:1] + (M, K))
    return np.broadcast_to(a[:, :, None], a.shape[:1] + (K, N)) if kind == "k" else \
        np.broadcast_to(a[:, None, :], a.shape[:1] + (K, N))


@njit
def _row_bits(vals, window, base, bits):
    """Per row of vals [X, R, K] (any strides, any integer type): the window base of its present
    values and their bits; base -2 when the values span more than one window (the caller keeps
    those exactly)."""
    for x in range(vals.shape[0]):
        for r in range(vals.shape[1]):
            lo, hi = 2 ** 31 - 1, -1
            for k in range(vals.shape[2]):
                v = vals[x, r, k]
                if v >= 0:
                    lo = min(lo, v)
                    hi = max(hi, v)
            if hi < 0:
                base[x, r] = -1
                continue
            b = (lo // window) * window
            if hi >= b + window:
                base[x, r] = -2
                continue
            base[x, r] = b
            for k in range(vals.shape[2]):
                v = vals[x, r, k]
                if v >= 0:
                    o = v - b
                    bits[x, r, o // 64] |= np.uint64(1) << np.uint64(o % 64)


def row_sets(vals: np.ndarray, wide: WideSets) -> Mask:
    """The set of non-negative values along the last axis, per leading index, as a Mask."""
    lead = vals.shape[:-1]
    v3 = vals if vals.ndim == 3 else vals.reshape((1, -1, vals.shape[-1]))
    # C order, as row_sets_many's stack: one compiled signature (a transposed view is small)
    v3 = np.ascontiguousarray(v3)
    base = np.empty(v3.shape[:2], np.int64)
    bits = np.zeros(v3.shape[:2] + (WORDS,), np.uint64)
    _row_bits(v3, WINDOW, base, bits)
    out = Mask(base, bits, np.zeros(v3.shape[:2], np.uint32))
    for x, r in zip(*np.nonzero(base == -2)):       # a K slot set wider than a window: exact
        row = v3[x, r]
        out.wide[x, r] = wide.intern(set(row[row >= 0].tolist()))
        out.base[x, r] = -1
    return out.map(lambda a: a.reshape(lead + a.shape[2:]))



def row_sets_many(vals: np.ndarray) -> list | None:
    """``[row_sets(x, wide) for x in vals]`` of vals [n, nb, R, K] (Field.gathered_many's stack) in
    one compiled pass, as views of one mask; None where some row's values span more than one
    window (row_sets interns those sets: made one by one, in the order they are asked)."""
    n, nb = vals.shape[:2]
    v3 = vals.reshape((n * nb,) + vals.shape[2:])
    base = np.empty(v3.shape[:2], np.int64)
    bits = np.zeros(v3.shape[:2] + (WORDS,), np.uint64)
    _row_bits(v3, WINDOW, base, bits)
    if (base == -2).any():
        return None
    wide = np.zeros(v3.shape[:2], np.uint32)
    return [Mask(base[i * nb:(i + 1) * nb], bits[i * nb:(i + 1) * nb], wide[i * nb:(i + 1) * nb]) for i in range(n)]


@njit
def counts_up(idx):
    """idx[i] == idx[0] + i for every i: one pass that stops at the first miss, no temporary."""
    first = idx[0]
    for i in range(idx.shape[0]):
        if idx[i] != first + i:
            return False
    return True


@njit
def rows_uniform(base, bits, wide):
    """Whether every row of a K-set Mask (``base``/``wide`` [rows, L], ``bits`` [rows, L, WORDS])
    holds its first element's triple in every element: consumed._uniform's numpy twin in one pass
    that stops at the first miss (a record's K sets are a row or two: six numpy calls were ~8 us)."""
    for r in range(base.shape[0]):
        for j in range(1, base.shape[1]):
            if base[r, j] != base[r, 0] or wide[r, j] != wide[r, 0]:
                return False
            for k in range(bits.shape[2]):
                if bits[r, j, k] != bits[r, 0, k]:
                    return False
    return True
