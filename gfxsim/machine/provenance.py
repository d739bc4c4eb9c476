"""Provenance as arrays: identities per byte, footprints as bitmask windows, flags that travel.

State (every array is ``[rows, width]``: rows are bytes, or elements when ``g`` > 1, width is the
register columns — lanes x batched workgroups):

* **identity** — one int32 plane per tag field (``token``, ``head``, ``dim``, ...), -1 where the
  byte has no value in that field. Loads from a tagged buffer fill them; byte moves route them
  exactly; arithmetic keeps, per element, the fields both operands agree on. Reserved fields start
  with ``@``: ``@mma`` (global index of the matrix instruction whose result this is) and ``@mn``
  (the element of that result, ``(block*M + m)*N + n``); ``@enc`` and ``@encat`` (the numeric
  encoding a byte was written in, and where: encoding.py).
* **footprint** — per element and field, the set of values a reduction consumed (``amax`` over
  tokens, a row sum over dims): a ``Mask`` of ``WORDS`` uint64 words over a window of ``WINDOW``
  values aligned to ``WINDOW``; a set that leaves its window is kept exactly in ``WideSets``.
* **flags** — uint8 per element: ``SCALE`` marks a quantization scale (``w.group_scale``);
  ``UNKNOWN`` marks bytes of unknown origin: derived from tagged bytes along a path whose routing
  gfxsim does not know (the bytes of one element holding different tokens went through arithmetic;
  an SGPR loaded from tagged memory fed a vector instruction). It travels with the bytes, survives
  every merge, and a matrix instruction whose K slots hold such bytes reports it
  (``kslot-unknown-origin``) instead of counting them as slots without a token.

``g`` is the bytes per row: 1 (per byte) or the element size, used while all bytes of every
element agree (the common case: an fp32 value costs one row per element, not four). Storage that
is byte-addressed (LDS, global memory) always holds ``g == 1`` planes.
"""
from __future__ import annotations

import math

from .jit import njit, running, starting
import numpy as np
from ..errors import ArgumentError

WORDS = 4                         # uint64 words per window
WINDOW = 64 * WORDS               # values per window (tokens of a 256-token partition, 128 dims, ...)
SCALE = np.uint8(1)               # flag: a quantization scale
UNKNOWN = np.uint8(2)             # flag: of unknown origin (the module docstring)
# identity-only fields (never a footprint): a matrix result's name, and the byte's encoding and
# where it was written (encoding.py)
RESERVED = ("@mma", "@mn", "@enc", "@encat")
COVER = "&"                       # prefix of a product of scales' cover fields (scaleparts.py)


class WideSets:
    """Exact sets for the rare footprint that leaves one window: id -> a set held as a bitset (a
    Python int, bit v for value v >= 0), or a lazy union node (a, b) whose bitset is made only when
    someone reads it (reductions build thousands of partial sets and only a few are ever compared).
    A bitset makes a union or intersection a few word operations per 64 values, so a sum that
    grows by one part per step (a reduce over a context's partitions) costs linear time and
    memory in its parts, where materialised sets of values would cost their square."""

    def __init__(self):
        self.nodes: list = [0]           # id 0: the empty set
        self._ids: dict = {0: 0}         # bitset -> id
        self._unions: dict = {}
        self._windows: dict = {}
        self._bits: dict = {}            # union id -> its bitset, once read
        self._sets: dict = {}            # id -> frozenset of values, once asked for

    @staticmethod
    def none() -> WideSets:
        """A table that refuses: for callers that have no machine (their sets never need one)."""
        return _NoWideSets()

    def intern(self, values) -> int:
        return self._intern_bits(_to_bitset(values))

    def _intern_bits(self, bits: int) -> int:
        got = self._ids.get(bits)
        if got is None:
            got = self._ids[bits] = len(self.nodes)
            self.nodes.append(bits)
        return got

    def intern_window(self, base: int, bits: np.ndarray) -> int:
        """``intern`` of one window's values, remembered by (base, bits): a reduction meets the
        same windows step after step."""
        raw = np.ascontiguousarray(bits, "<u8").tobytes()
        key = (base, raw)
        got = self._windows.get(key)
        if got is None:
            got = self._windows[key] = self._intern_bits(int.from_bytes(raw, "little") << base)
        return got

    def union(self, a: int, b: int) -> int:
        if a == b or b == 0:
            return a
        if a == 0:
            return b
        key = (a, b) if a < b else (b, a)
        got = self._unions.get(key)
        if got is None:
            self.nodes.append(key)
            got = self._unions[key] = len(self.nodes) - 1
        return got

    def intersection(self, a: int, b: int) -> int:
        """The id of set a ∩ set b."""
        if a == 0 or b == 0:
            return 0
        return a if a == b else self._intern_bits(self.bitset(a) & self.bitset(b))

    def truncate(self, n: int):
        """Forget every set from id ``n`` on (a folded attempt taken back)."""
        del self.nodes[n:]
        for d in (self._ids, self._unions, self._windows):
            for k in [k for k, v in d.items() if v >= n]:
                del d[k]
        for d in (self._bits, self._sets):
            for k in [k for k in d if k >= n]:
                del d[k]

    def bitset(self, sid: int) -> int:
        """The set ``sid`` as a bitset (a union's made once, then kept)."""
        sid = int(sid)
        node = self.nodes[sid]
        if isinstance(node, int):
            return node
        got = self._bits.get(sid)
        if got is not None:
            return got
        nodes, made = self.nodes, self._bits
        stack = [sid]
        while stack:                      # post-order, iterative: chains can be thousands deep
            s = stack[-1]
            if s in made:
                stack.pop()
                continue
            pending = [c for c in nodes[s] if not isinstance(nodes[c], int) and c not in made]
            if pending:
                stack.extend(pending)
                continue
            a, b = (nodes[c] if isinstance(nodes[c], int) else made[c] for c in nodes[s])
            made[s] = a | b
            stack.pop()
        return made[sid]

    def values(self, sid: int) -> frozenset:
        sid = int(sid)
        got = self._sets.get(sid)
        if got is None:
            got = self._sets[sid] = frozenset(_bitset_values(self.bitset(sid)))
        return got


def _to_bitset(values) -> int:
    """A set of values >= 0 as a Python int with bit v set for each value v."""
    v = np.fromiter((int(x) for x in values), np.int64)
    if not len(v):
        return 0
    if v.min() < 0:
        raise ArgumentError(f"a footprint holds values >= 0, got {int(v.min())}")
    flags = np.zeros(int(v.max()) + 1, np.bool_)
    flags[v] = True
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def _bitset_values(bits: int) -> list:
    """The values of a bitset, ascending."""
    if not bits:
        return []
    raw = np.frombuffer(bits.to_bytes((bits.bit_length() + 7) // 8, "little"), np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little")).tolist()


class _NoWideSets(WideSets):
    """Refuses to make a set; a union that needs none (one side empty, or both the same set, as
    when the equal bytes of one element are merged) is answered."""

    def intern(self, values):
        raise ArgumentError("bytes of one element hold sets in different windows: pass the machine's WideSets")

    def union(self, a: int, b: int) -> int:
        if a == b or b == 0:
            return a
        if a == 0:
            return b
        raise ArgumentError("bytes of one element hold sets in different windows: pass the machine's WideSets")


def _bits_values(base: int, bits: np.ndarray) -> list:
    """The values of one window: base + the set bit positions (word w's bit b is 64w + b)."""
    flat = np.unpackbits(np.ascontiguousarray(bits, "<u8").view(np.uint8), bitorder="little")
    return (np.flatnonzero(flat) + base).tolist()


def row_hashes(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of a uint64 [n, k] array (equal rows, equal hashes)."""
    h = np.zeros(len(rows), np.uint64)
    for k in range(rows.shape[1]):
        h = (h ^ rows[:, k]) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(k + 1)
    return h


def unique_rows(rows: np.ndarray):
    """(index of each distinct row's first occurrence, row -> distinct index) of a uint64 [n, k]
    array: a 64-bit hash, verified (an exact row-wise unique where two rows share a hash)."""
    h = row_hashes(rows)
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if not (rows == rows[first][inv]).all():
        _, first, inv = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        inv = inv.ravel()
    return first, inv


def _shaped(x: np.ndarray, shape) -> np.ndarray:
    """np.broadcast_to(x, shape): a read-only view, made directly where ``x`` has that shape
    already (np.broadcast_to costs ~10 µs a call; the same strides and read-only flag, so the
    compiled passes see the same array type)."""
    if x.shape != tuple(shape):
        return np.broadcast_to(x, shape)
    v = x.view()
    v.flags.writeable = False
    return v


def _frozen(x: np.ndarray) -> np.ndarray:
    """``x`` as a read-only C-contiguous array (a view, or a copy where it is strided: small
    planes): the one kind of input the compiled passes are given, so numba loads one signature
    each, not one per mix of writable flags and layouts (~4 ms of CPU a signature, in the launch)."""
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    if x.flags.writeable:
        x = x.view()
        x.flags.writeable = False
    return x


@njit
def _union_windows(ab, abits, aw, bb, bbits, bw, ob, obits, ow, need):
    """Mask.union where the windows agree (one pass): base, bits OR-ed, wide id; ``need`` marks the
    elements where two different windows, or a wide set, meet (the caller unions those exactly)."""
    any_need = False
    for i in range(ab.shape[0]):
        x, y, xw, yw = ab[i], bb[i], aw[i], bw[i]
        ob[i] = x if x >= 0 else y
        ow[i] = xw if xw != 0 else yw
        for k in range(abits.shape[1]):
            obits[i, k] = abits[i, k] | bbits[i, k]
        nd = x >= 0 and y >= 0 and x != y
        if (xw != 0 or yw != 0) and (xw != 0 or x >= 0) and (yw != 0 or y >= 0):
            nd = True
        need[i] = nd
        any_need = any_need or nd
    return any_need


class Mask:
    """A set of values per element: ``base`` int64 ``[R, L]`` (-1 = empty), ``bits`` uint64
    ``[R, L, WORDS]`` (value ``base + 64*w + b`` is bit b of word w) and ``wide`` int32 ``[R, L]``
    (a WideSets id; 0 = the window is the whole set)."""
    __slots__ = ("base", "bits", "wide")

    def __init__(self, base, bits, wide):
        self.base, self.bits, self.wide = base, bits, wide

    @classmethod
    def empty(cls, shape) -> Mask:
        return cls(np.full(shape, -1, np.int64), np.zeros(tuple(shape) + (WORDS,), np.uint64),
                   np.zeros(shape, np.uint32))

    @classmethod
    def of_values(cls, v: np.ndarray) -> Mask:
        """The one-value set {v} per element (empty where v < 0)."""
        v = np.asarray(v, np.int64)
        present = v >= 0
        base = np.where(present, (v // WINDOW) * WINDOW, -1)
        off = np.where(present, v - base, 0)
        word, bit = off // 64, (off % 64).astype(np.uint64)
        one = np.where(present, np.left_shift(np.uint64(1), bit), np.uint64(0)).astype(np.uint64)
        bits = np.zeros(v.shape + (WORDS,), np.uint64)
        for w in range(WORDS):
            bits[..., w] = np.where(word == w, one, np.uint64(0))
        return cls(base, bits, np.zeros(v.shape, np.uint32))

    # -- structure: every array indexed alike on its leading [R, L] axes ----------------------
    def map(self, fn) -> Mask:
        return Mask(fn(self.base), fn(self.bits), fn(self.wide))

    @staticmethod
    def concat(masks, axis=0) -> Mask:
        return Mask(np.concatenate([m.base for m in masks], axis), np.concatenate([m.bits for m in masks], axis),
                    np.concatenate([m.wide for m in masks], axis))

    @staticmethod
    def where(cond, a: Mask, b: Mask) -> Mask:
        return Mask(np.where(cond, a.base, b.base), np.where(cond[..., None], a.bits, b.bits),
                    np.where(cond, a.wide, b.wide))

    def assign(self, sel, other: Mask):
        """self[sel] = other (``sel`` an index tuple over the leading axes)."""
        self.base[sel] = other.base
        self.bits[sel] = other.bits
        self.wide[sel] = other.wide

    @property
    def shape(self):
        return self.base.shape

    def nonempty(self) -> np.ndarray:
        return (self.base >= 0) | (self.wide != 0)

    # -- set algebra ---------------------------------------------------------------------------
    def union(self, other: Mask, wide: WideSets) -> Mask:
        shape = np.broadcast_shapes(self.base.shape, other.base.shape)
        a = self.one_set()
        b = other.one_set() if a is not None else None
        if b is not None:        # one set everywhere on both sides (the reduce's
            return _union_of_one_sets(a, b, wide, shape)     # context-wide sums): one union, filled
        return self._union(other, wide, shape)

    def one_set(self):
        """(base, bits, wide) when every element holds the same triple (so the same set), else None."""
        base, w = self.base, self.wide
        if base.size == 0:
            return None
        if running() and base.dtype == np.int64 and w.dtype == np.uint32 and self.bits.dtype == np.uint64 \
                and self.bits.shape[-1] == WORDS:     # numba runs already: one compiled pass, not six numpy calls
            bits = self.bits.reshape(-1, WORDS)
            if not _one_triple(_frozen(base.reshape(-1)), _frozen(bits), _frozen(w.reshape(-1))):
                return None
            return int(base.flat[0]), bits[0].copy(), int(w.flat[0])
        first = (0,) * base.ndim
        b0, w0 = base[first], w[first]
        if base.flat[-1] != b0 or w.flat[-1] != w0 or not ((base == b0).all() and (w == w0).all()):
            return None
        bits0 = self.bits[first]
        if not (self.bits == bits0).all():
            return None
        return int(b0), bits0.copy(), int(w0)

    def _union(self, other: Mask, wide: WideSets, shape) -> Mask:
        # an empty set has no bits, so OR-ing is right wherever the windows agree or one is empty
        flat = [_frozen(_shaped(x, s)).reshape((-1,) + s[len(shape):]) for x, s in
                ((self.base, shape), (self.bits, shape + (WORDS,)), (self.wide, shape),
                 (other.base, shape), (other.bits, shape + (WORDS,)), (other.wide, shape))]
        n = flat[0].shape[0]
        ob, obits, ow = np.empty(n, np.int64), np.empty((n, WORDS), np.uint64), np.empty(n, np.uint32)
        need = np.empty(n, np.bool_)
        union_windows = _union_windows_numpy if starting(__name__) else _union_windows   # numba's start: not awaited
        any_need = union_windows(*flat, ob, obits, ow, need)
        out = Mask(ob.reshape(shape), obits.reshape(shape + (WORDS,)), ow.reshape(shape))
        need = need.reshape(shape)
        if any_need:                # two windows meet: the exact fallback, per distinct pair
            # every element (a reduction over a whole context): whole-array writes, no selection
            sel = slice(None) if need.all() else need
            ia = self._broadcast(shape).wide_ids(sel, wide)
            ib = other._broadcast(shape).wide_ids(sel, wide)
            key = (ia.astype(np.int64) << 32) | ib
            if (key == key[0]).all():          # one pair everywhere (a reduction's step): no sort
                out.wide[sel] = wide.union(int(ia[0]), int(ib[0]))
            else:
                pairs, inv = np.unique(key, return_inverse=True)
                res = np.array([wide.union(int(k >> 32), int(k & 0xFFFFFFFF)) for k in pairs.tolist()], np.uint32)
                out.wide[sel] = res[inv.ravel()].reshape(out.wide[sel].shape)
            out.base[sel] = -1
            out.bits[sel] = 0
        return out

    def _broadcast(self, shape) -> Mask:
        """This mask broadcast (read-only views) to leading ``shape``."""
        if self.base.shape == tuple(shape):
            return self
        return Mask(np.broadcast_to(self.base, shape), np.broadcast_to(self.bits, tuple(shape) + (WORDS,)),
                    np.broadcast_to(self.wide, shape))

    def wide_ids(self, sel, wide: WideSets) -> np.ndarray:
        """WideSets ids of the selected elements (narrow windows interned)."""
        w = np.array(self.wide[sel], np.uint32).reshape(-1)
        narrow = w == 0
        if narrow.any():
            base, bits = self.base[sel].reshape(-1), self.bits[sel].reshape(-1, WORDS)
            if not narrow.all():
                base, bits = base[narrow], bits[narrow]
            if (base == base[0]).all() and (bits == bits[0]).all():    # one set everywhere: no sort
                first, inv = np.zeros(1, np.int64), np.zeros(len(base), np.int64)
            else:
                first, inv = unique_rows(np.concatenate([base[:, None].view(np.uint64), bits], 1))
            ids = np.array([0 if int(base[i]) < 0 else wide.intern_window(int(base[i]), bits[i])
                            for i in first.tolist()], np.uint32)
            w[narrow] = ids[inv]
        return w

    def subset_of(self, other: Mask, wide: WideSets) -> np.ndarray:
        """Elementwise: self ⊆ other (the empty set is a subset of everything). One compiled pass
        over the (possibly broadcast) arrays where both sets lie in windows; the elements where a
        wide set takes part are compared exactly."""
        shape = np.broadcast_shapes(self.base.shape, other.base.shape)
        if len(shape) <= 3:
            lift = lambda x, s: _shaped(x, s).reshape((1,) * (3 - len(shape)) + s)
            ok = np.empty(shape, np.bool_)
            odd = np.empty(shape, np.bool_)
            subset_windows = _subset_windows_numpy if starting(__name__) else _subset_windows   # numba's start
            any_odd = subset_windows(lift(self.base, shape), lift(self.bits, shape + (WORDS,)),
                                     lift(self.wide, shape), lift(other.base, shape),
                                     lift(other.bits, shape + (WORDS,)), lift(other.wide, shape),
                                     ok.reshape((1,) * (3 - len(shape)) + shape),
                                     odd.reshape((1,) * (3 - len(shape)) + shape))
            if not any_odd:
                return ok
        else:
            e1 = ~self.nonempty()
            narrow = (self.wide == 0) & (other.wide == 0)
            ok = e1 | (narrow & (self.base == other.base) &
                       ((self.bits & ~other.bits) == 0).all(axis=-1))
            odd = ~e1 & ~narrow
        return _odd_subsets(self._broadcast(shape), other._broadcast(shape), ok, odd, wide)

    def values_at(self, i, wide: WideSets) -> frozenset:
        if self.wide[i]:
            return wide.values(self.wide[i])
        if self.base[i] < 0:
            return frozenset()
        return frozenset(_bits_values(int(self.base[i]), self.bits[i]))


class OneSet(Mask):
    """A Mask known to hold one set everywhere, its triple kept (``one``: what ``Mask.one_set``
    would find): the K sets a matrix chain unites instruction after instruction, and the rows of
    an operand whose rows all consumed one set, are asked ``one_set`` again by every later link
    (chain.py, ``Mask.union``), and answer without a pass. Made only from arrays nothing else
    holds; ``assign`` writes elements, so it forgets the triple."""
    __slots__ = ("one",)

    def __init__(self, base, bits, wide, one):
        super().__init__(base, bits, wide)
        self.one = one

    def one_set(self):
        if self.one is None:
            return super().one_set()
        base, bits, wid = self.one
        return base, bits.copy(), wid

    def assign(self, sel, other: Mask):
        self.one = None
        super().assign(sel, other)


def known_one(m: Mask) -> Mask:
    """``m``, as a OneSet where it holds one set everywhere (one pass, asked once), else as is."""
    t = m.one_set()
    return m if t is None else OneSet(m.base, m.bits, m.wide, (t[0], t[1].copy(), t[2]))


def _union_of_one_sets(a, b, wide: WideSets, shape) -> Mask:
    """``Mask.union`` of two masks that each hold one set everywhere, computed once: the same
    triple the element-wise pass and its exact fallback give (windows interned in the same order,
    a's then b's, so the WideSets ids agree too)."""
    (ab, abits, aw), (bb, bbits, bw) = a, b
    if aw == 0 and bw == 0 and (ab < 0 or bb < 0 or ab == bb):       # one window holds both
        base, bits, wid = (ab if ab >= 0 else bb), abits | bbits, 0
    elif aw == 0 and ab < 0:                                          # empty with a wide set
        base, bits, wid = -1, np.zeros(WORDS, np.uint64), bw
    elif bw == 0 and bb < 0:
        base, bits, wid = -1, np.zeros(WORDS, np.uint64), aw
    else:                                                             # two windows, or a wide set
        ia = aw if aw else wide.intern_window(ab, abits)
        ib = bw if bw else wide.intern_window(bb, bbits)
        base, bits, wid = -1, np.zeros(WORDS, np.uint64), wide.union(ia, ib)
    out_bits = np.empty(tuple(shape) + (WORDS,), np.uint64)
    out_bits[...] = bits
    base, wid = int(base), int(wid)
    one = (base, np.array(bits, np.uint64), wid) if out_bits.size else None     # what one_set finds
    return OneSet(np.full(shape, base, np.int64), out_bits, np.full(shape, wid, np.uint32), one)


@njit
def _one_triple(base, bits, wide):
    """Whether every element of flat ``base``/``bits``/``wide`` holds the first element's triple."""
    b0, w0 = base[0], wide[0]
    for i in range(base.shape[0]):
        if base[i] != b0 or wide[i] != w0:
            return False
        for k in range(bits.shape[1]):
            if bits[i, k] != bits[0, k]:
                return False
    return True


def _odd_subsets(a: Mask, b: Mask, ok, odd, wide: WideSets):
    """``Mask.subset_of`` exactly (as value sets) where a wide set takes part: once per distinct
    pair of (base, bits, wide) triples (a context-wide check holds a few, on thousands of elements)."""
    if not odd.any():
        return ok
    sel = np.nonzero(odd)
    if len(sel[0]) <= _ODD_ONE_BY_ONE:
        for i in zip(*sel):
            ok[i] = a.values_at(i, wide) <= b.values_at(i, wide)
        return ok
    key = np.concatenate([np.asarray(m.base[sel], np.int64)[:, None].view(np.uint64) if k == 0 else
                          np.asarray(m.bits[sel], np.uint64) if k == 1 else np.asarray(m.wide[sel], np.uint64)[:, None]
                          for m in (a, b) for k in range(3)], axis=1)
    first, inv = unique_rows(key)
    got = np.array([a.values_at(i, wide) <= b.values_at(i, wide)
                    for i in zip(*(x[first] for x in sel))], np.bool_)
    ok[sel] = got[inv]
    return ok


_ODD_ONE_BY_ONE = 8        # odd elements compared one by one; more are grouped by their sets first


@njit
def _subset_windows(ab, abits, aw, bb, bbits, bw, ok, odd):
    """``Mask.subset_of`` on [X, Y, Z] arrays (strided or broadcast): ok where a's set is empty, or
    both lie in one window and a's bits are b's; odd where a wide set takes part (done exactly)."""
    any_odd = False
    for x in range(ok.shape[0]):
        for y in range(ok.shape[1]):
            for z in range(ok.shape[2]):
                base, w = ab[x, y, z], aw[x, y, z]
                o = False
                r = False
                if base < 0 and w == 0:
                    r = True
                elif w != 0 or bw[x, y, z] != 0:
                    o = True
                elif base == bb[x, y, z]:
                    r = True
                    for k in range(abits.shape[3]):
                        if abits[x, y, z, k] & ~bbits[x, y, z, k]:
                            r = False
                ok[x, y, z] = r
                odd[x, y, z] = o
                any_odd = any_odd or o
    return any_odd


class Prov:
    """The provenance of a block of rows x columns (see the module docstring)."""
    __slots__ = ("g", "ids", "fp", "flags")

    def __init__(self, g: int, ids: dict, fp: dict | None = None, flags: np.ndarray | None = None):
        self.g = g
        self.ids = ids                  # field -> int32 [R, L]
        self.fp = fp or {}              # field -> Mask
        self.flags = flags              # uint8 [R, L] or None

    def arrays(self):
        return list(self.ids.values()) + [m.base for m in self.fp.values()] + \
            ([self.flags] if self.flags is not None else [])

    @property
    def shape(self):
        for a in self.ids.values():          # arrays()'s first, without making the list
            return a.shape
        for m in self.fp.values():
            return m.base.shape
        return None if self.flags is None else self.flags.shape

    def empty_like(self) -> bool:
        return not self.ids and not self.fp and self.flags is None

    def origin_columns(self) -> np.ndarray | None:
        """Per column: whether some row holds an identity (reserved names aside) or a footprint
        in some field — what makes a value more than a number (None: no plane, no column)."""
        if self.shape is None:
            return None
        some = np.zeros(self.shape[1], bool)
        for f, a in self.ids.items():
            if f not in RESERVED:
                some |= (a >= 0).any(axis=0)
        for m in self.fp.values():
            some |= m.nonempty().any(axis=0)
        return some

    def map(self, fn) -> Prov:
        """Apply the same row/column indexing to every plane."""
        return Prov(self.g, {f: fn(a) for f, a in self.ids.items()}, {f: m.map(fn) for f, m in self.fp.items()},
                    None if self.flags is None else fn(self.flags))

    def field(self, name, shape) -> np.ndarray:
        """The identity plane of ``name``, or -1 everywhere (a read-only broadcast) where it has none."""
        got = self.ids.get(name)
        return got if got is not None else _minus_ones(shape)

    def scale_flag(self) -> np.ndarray | None:
        return None if self.flags is None else (self.flags & SCALE) != 0

    # -- granularity ----------------------------------------------------------------------------
    def per_byte(self) -> Prov:
        if self.g == 1:
            return self
        g = self.g
        p = self.map(lambda a: np.repeat(a, g, axis=0))
        p.g = 1
        return p

    def compact(self, size: int) -> Prov:
        """Per element when that loses nothing (every byte of every element agrees in every plane),
        else per byte: loads stay exact for four token bytes read as one u32."""
        if self.g != 1 or size == 1:
            return self
        planes = list(self.ids.values()) + [m.base for m in self.fp.values()] + [m.wide for m in self.fp.values()] + \
            [m.bits for m in self.fp.values()] + ([self.flags] if self.flags is not None else [])
        for a in planes:
            r = a.reshape((-1, size) + a.shape[1:])
            if not (r == r[:, :1]).all():
                return self
        return self.per_element(size)

    def per_element(self, size: int, wide: WideSets | None = None) -> Prov:
        """Rows of ``size`` bytes: a field survives where all bytes of the element agree (the
        bytes of a u32 holding four tokens have no single token); footprints unite; flags OR."""
        if self.g == size:
            return self
        if self.g != 1:
            return self.per_byte().per_element(size, wide)
        ids = {}
        lost = None                       # elements whose bytes held different values of a field
        for f, a in self.ids.items():
            r = a.reshape(-1, size, a.shape[1])
            hi = r.max(axis=1)            # a byte with no value (zero padding) does not conflict
            lo = np.where(r < 0, _I32_MAX, r).min(axis=1)
            ids[f] = np.where(lo == hi, hi, -1).astype(np.int32, copy=False)
            if f not in RESERVED:
                c = (hi >= 0) & (lo < hi)
                lost = c if lost is None else lost | c
        fp = {}
        for f, m in self.fp.items():          # the element's set: the union of its bytes' sets
            u = m.map(lambda x: x[::size])
            for b in range(1, size):
                u = u.union(m.map(lambda x, b=b: x[b::size]), wide if wide is not None else WideSets.none())
            fp[f] = u
        flags = None if self.flags is None else np.bitwise_or.reduce(
            self.flags.reshape(-1, size, self.flags.shape[1]), axis=1)
        if lost is not None and lost.any():         # the element stands for several tokens: their bytes' routes are gone
            flags = np.where(lost, UNKNOWN, np.uint8(0)).astype(np.uint8) | (0 if flags is None else flags)
        return Prov(size, ids, fp, flags)

    # -- combining -------------------------------------------------------------------------------
    @staticmethod
    def concat(provs, rows_each, width) -> Prov | None:
        """Row-wise concatenation; parts without provenance contribute empty rows."""
        if all(p is None for p in provs):
            return None
        g = min(p.g for p in provs if p is not None)
        provs = [None if p is None else (p if p.g == g else p.per_byte()) for p in provs]
        fields = sorted({f for p in provs if p is not None for f in p.ids})
        fpf = sorted({f for p in provs if p is not None for f in p.fp})
        ids = {f: np.concatenate([p.field(f, (n, width)) if p is not None else np.broadcast_to(np.int32(-1), (n, width))
                                  for p, n in zip(provs, rows_each)]) for f in fields}
        fp = {f: Mask.concat([p.fp[f] if p is not None and f in p.fp else _empty_view((n, width))
                              for p, n in zip(provs, rows_each)]) for f in fpf}
        flags = None
        if any(p is not None and p.flags is not None for p in provs):
            flags = np.concatenate([p.flags if p is not None and p.flags is not None else np.zeros((n, width), np.uint8)
                                    for p, n in zip(provs, rows_each)])
        return Prov(g, ids, fp, flags)

    @staticmethod
    def select(cond, a: Prov | None, b: Prov | None, shape) -> Prov | None:
        """Per row and column: a where cond else b (cond broadcast to ``shape``)."""
        if a is None and b is None:
            return None
        g = min(p.g for p in (a, b) if p is not None)
        a = _empty(g) if a is None else (a if a.g == g else a.per_byte())
        b = _empty(g) if b is None else (b if b.g == g else b.per_byte())
        cond = np.broadcast_to(cond, shape)
        ids = {}
        for f in sorted(a.ids.keys() | b.ids.keys()):
            x, y = a.ids.get(f), b.ids.get(f)
            ids[f] = x if x is y else np.where(cond, a.field(f, shape), b.field(f, shape)).astype(np.int32, copy=False)
        nothing = _empty_view(shape)          # a side without a footprint: read-only broadcasts, no arrays
        fp = {f: Mask.where(cond, a.fp.get(f) or nothing, b.fp.get(f) or nothing)
              for f in sorted(a.fp.keys() | b.fp.keys())}
        flags = None
        if a.flags is not None or b.flags is not None:
            z = np.zeros(shape, np.uint8)
            flags = np.where(cond, z if a.flags is None else a.flags, z if b.flags is None else b.flags)
        return Prov(g, ids, fp, flags)


def _empty(g):
    return Prov(g, {})


_MINUS_ONES: dict = {}


def _minus_ones(shape) -> np.ndarray:
    """An int32 plane of -1 (no identity) as a read-only broadcast view, one per shape: merges ask
    for one per one-sided field, and np.broadcast_to costs ~10 µs a call."""
    got = _MINUS_ONES.get(shape)
    if got is None:
        if len(_MINUS_ONES) > 256:
            _MINUS_ONES.clear()
        got = _MINUS_ONES[shape] = np.broadcast_to(np.int32(-1), shape)
    return got


_EMPTY_VIEWS: dict = {}


def _empty_view(shape) -> Mask:
    """The empty set everywhere as read-only broadcast views (operands of np.where and the like),
    the views made once per shape."""
    shape = tuple(shape)
    got = _EMPTY_VIEWS.get(shape)
    if got is None:
        if len(_EMPTY_VIEWS) > 256:
            _EMPTY_VIEWS.clear()
        got = _EMPTY_VIEWS[shape] = (np.broadcast_to(np.int64(-1), shape),
                                     np.broadcast_to(np.uint64(0), shape + (WORDS,)),
                                     np.broadcast_to(np.uint32(0), shape))
    return Mask(*got)


def fill_value(a: np.ndarray):
    """What a plane holds where there is nothing: -1 for identities and window bases, 0 else."""
    return -1 if a.dtype in (np.int32, np.int64) else 0


def merge(a: Prov | None, b: Prov | None, reducing: bool, wide: WideSets, conflicts: dict | None = None) -> Prov | None:
    """Elementwise merge of two operands' provenance (equal shapes, equal g).

    Per field: equal values survive, a one-sided value survives, conflicting values are dropped —
    ``max(S[t1], S[t2])`` has no single token. A conflict is a reduction step, so the result's
    footprint is the union of both sides' footprints and values; so is an accumulating op
    (``reducing``: max, min, add) of an aggregate with an element (``amax = max(amax, |w_t|)``),
    which stays the aggregate. Otherwise the more specific operand's footprint survives
    (``S - m`` keeps S's: none). An operand without provenance changes nothing, so a scale
    multiplied by a constant stays a scale; a mark never survives arithmetic between two tagged
    values (the dequantized product is not a scale). Covers (scaleparts.py) are dropped.

    ``conflicts``: a dict, filled with field -> bool [rows, columns] where both operands name a
    value of the field and the values differ (identity fields only; what identity.py checks)."""
    if a is None or (not a.ids and not a.fp and a.flags is None):        # (empty_like, inlined: a call a merge)
        return b
    if b is None or (not b.ids and not b.fp and b.flags is None):
        return a
    shape = a.shape or b.shape
    ids, fp = {}, {}
    numpy_twins = starting(__name__)           # numba's start: its numpy twins meanwhile
    for f, has_ia, has_ib, has_fa, has_fb, reserved in merge_plan(a, b):
        ia = a.ids[f] if has_ia else None
        ib = b.ids[f] if has_ib else None
        fa = a.fp[f] if has_fa else None
        fb = b.fp[f] if has_fb else None
        if ia is ib and fa is None and fb is None:
            if ia is not None:
                ids[f] = ia
            continue
        if ia is None and ib is None and (fa is None or fb is None):
            m = fa if fb is None else fb                       # a footprint, no identities: it stays
            if m.nonempty().any():
                fp[f] = m
            continue
        red = reducing and not reserved and (fa is not None or fb is not None)
        if not red and (ia is None) != (ib is None):        # one side only: its values, no step
            out = np.array(ia if ia is not None else ib, np.int32)
            present, stepped, step = bool((out >= 0).any()), False, np.zeros(shape, np.bool_)
            ia = ia if ia is not None else _minus_ones(shape)
            ib = ib if ib is not None else _minus_ones(shape)
        else:
            ia = ia if ia is not None else _minus_ones(shape)
            ib = ib if ib is not None else _minus_ones(shape)
            out = np.empty(shape, np.int32)
            step = np.empty(shape, np.bool_)
            if red:
                na = fa.nonempty() if fa is not None else _NO
                nb = fb.nonempty() if fb is not None else _NO
                merge_field = _merge_field_numpy if numpy_twins else _merge_field
                present, stepped = merge_field(_frozen(ia), _frozen(ib), _frozen(_shaped(na, shape)),
                                               _frozen(_shaped(nb, shape)), True, out, step)
                if conflicts is not None and stepped and not reserved:
                    both = step & (ia >= 0) & (ib >= 0)       # an aggregate absorbing an element is no conflict
                    if both.any():
                        conflicts[f] = both
            else:
                merge_ids = _merge_ids_numpy if numpy_twins else _merge_ids
                # (reshape(-1) is ascontiguousarray's flat view, or its copy where the plane is strided)
                equal, present, stepped = merge_ids(_frozen(ia.reshape(-1)), _frozen(ib.reshape(-1)), out.reshape(-1),
                                                    step.reshape(-1))
                if equal:                  # both carry the same plane (most merges): share it, no step
                    out = ia                   # (planes are never written in place once made)
                    step[...] = False
                elif conflicts is not None and stepped and not reserved:
                    conflicts[f] = step
        if present:
            ids[f] = out
        if reserved or (fa is None and fb is None and not stepped):
            continue
        u = _merged_footprint(fa, fb, ia, ib, step, wide, shape)
        if u is not None and u.nonempty().any():
            fp[f] = u
    if "@mma" in ids or "@mn" in ids:          # a result's name is the pair, or nothing
        mma, mn = ids.pop("@mma", None), ids.pop("@mn", None)
        if mma is not None and mn is not None:
            keep = (mma >= 0) & (mn >= 0)
            if keep.all():
                ids["@mma"], ids["@mn"] = mma, mn
            elif keep.any():
                ids["@mma"] = np.where(keep, mma, -1).astype(np.int32, copy=False)
                ids["@mn"] = np.where(keep, mn, -1).astype(np.int32, copy=False)
    return Prov(a.g, ids, fp, unknown_of(a, b))


_PLANS: dict = {}
PLAN_CACHE = True                 # off: every merge plans afresh (tests compare the two)


def merge_plan(a: Prov, b: Prov) -> tuple:
    """The fields ``merge`` visits, in order, each as (field, in a's identities, in b's, in a's
    footprints, in b's, reserved): what depends only on which fields each operand names, not on
    their values, so it is planned once per such key and reused by every execution of the same
    instruction. Covers are left out (a product's: any other merge drops them)."""
    key = (tuple(a.ids), tuple(b.ids), tuple(a.fp), tuple(b.fp))
    got = _PLANS.get(key) if PLAN_CACHE else None
    if got is None:
        got = tuple((f, f in a.ids, f in b.ids, f in a.fp, f in b.fp, f in RESERVED)
                    for f in sorted(a.ids.keys() | b.ids.keys() | a.fp.keys() | b.fp.keys()) if f[0] != COVER)
        if PLAN_CACHE:
            if len(_PLANS) > 1024:            # bounded: field sets are few, but never unbounded
                _PLANS.clear()
            _PLANS[key] = got
    return got


def unknown_of(*provs) -> np.ndarray | None:
    """The UNKNOWN marks of equally shaped provenances, united (None where none has one): a
    result of bytes of unknown origin is of unknown origin, whatever else it combines."""
    out = None
    for p in provs:
        if p is not None and p.flags is not None:
            u = p.flags & UNKNOWN
            if u.any():
                out = u if out is None else out | u
    return out


_NO = np.zeros((), np.bool_)
_I32_MAX = np.iinfo(np.int32).max          # np.iinfo costs microseconds a call


@njit
def _merge_ids(ia, ib, out, step):
    """``_merge_field`` without reduction, on flat arrays: equal or one-sided values survive, a
    conflict is -1 and a step. Returns (equal, any value, any step); ``equal``: the planes are the
    same, and out/step were left unwritten (the caller shares ia). Most merges are of equal
    planes (a sequence, a head), so the first pass only reads, until the first difference."""
    n = ia.shape[0]
    present = False
    first = n
    for i in range(n):
        if ia[i] != ib[i]:
            first = i
            break
        present |= ia[i] >= 0
    if first == n:
        return True, present, False
    stepped = False
    for i in range(first):
        out[i] = ia[i]
        step[i] = False
    for i in range(first, n):
        x, y = ia[i], ib[i]
        s = (x >= 0) & (y >= 0) & (x != y)
        o = np.int32(-1) if s else (x if x >= 0 else y)
        out[i] = o
        step[i] = s
        present |= o >= 0
        stepped |= s
    return False, present, stepped


@njit
def _merge_field(ia, ib, na, nb, reducing, out, step):
    """One field of ``merge`` in one pass: out = the merged value (-1: none), step = a reduction
    step (a conflict, or an aggregate absorbing an element). Returns (any value, any step)."""
    present = False
    stepped = False
    for r in range(ia.shape[0]):
        for l in range(ia.shape[1]):
            x, y = ia[r, l], ib[r, l]
            s = False
            if x >= 0 and y >= 0:
                o = x
                if x != y:
                    s = True
            elif x >= 0:
                o = x
                s = reducing and nb[r, l]
            elif y >= 0:
                o = y
                s = reducing and na[r, l]
            else:
                o = -1
            if s:
                o = -1
                stepped = True
            out[r, l] = o
            step[r, l] = s
            if o >= 0:
                present = True
    return present, stepped


def _merged_footprint(fa, fb, ia, ib, step, wide, shape) -> Mask:
    """footprint = (a's set, unless b is more specific) ∪ (b's, unless a is) ∪ the values met at a
    step (None: empty, known without a pass). One numba pass where everything lies in one window;
    the elements where windows differ or a wide set takes part are done exactly (``_side`` and
    ``Mask.union``)."""
    if (fa is None) != (fb is None) and not step.any():
        # one side's footprint, no step: it survives whole unless the other side is more specific
        # somewhere (it holds a value where this side has none)
        pa, pb = ia >= 0, ib >= 0
        m = fa if fa is not None else fb
        over = pa & ~pb if fb is not None else pb & ~pa
        if not over.any():
            return m
        # ... and none of it where the other side is more specific wherever the set is nonempty
        # (S - m: every element of S names its token, m's footprint goes): no pass, no footprint
        if (over | ~m.nonempty()).all():
            return None
    n = math.prod(shape)                # (np.prod of a tuple costs microseconds a merge)
    wide_a = 0 if fa is None else int(np.count_nonzero(fa.wide))
    wide_b = 0 if fb is None else int(np.count_nonzero(fb.wide))
    if 2 * max(wide_a * n // max(fa.wide.size, 1) if fa is not None else 0,
               wide_b * n // max(fb.wide.size, 1) if fb is not None else 0) > n:
        return _exact_footprint(fa, fb, ia, ib, step, wide, shape)     # mostly wide already: no window pass
    flat = lambda x: _frozen(_shaped(x, shape + x.shape[len(shape):])).reshape((n,) + x.shape[len(shape):])
    none = tuple(_frozen(x) for x in (np.zeros(1, np.int64), np.zeros((1, WORDS), np.uint64), np.zeros(1, np.uint32)))
    ma = (flat(fa.base), flat(fa.bits), flat(fa.wide)) if fa is not None else none
    mb = (flat(fb.base), flat(fb.bits), flat(fb.wide)) if fb is not None else none
    ob, obits, ow = np.empty(n, np.int64), np.empty((n, WORDS), np.uint64), np.zeros(n, np.uint32)
    need = np.empty(n, np.bool_)
    merge_fp = _merge_fp_numpy if starting(__name__) else _merge_fp       # numba's start: not awaited
    any_need = merge_fp(*ma, fa is not None, *mb, fb is not None, flat(ia), flat(ib), flat(step), WINDOW,
                         ob, obits, need)
    out = Mask(ob.reshape(shape), obits.reshape(shape + (WORDS,)), ow.reshape(shape))
    if any_need and 2 * int(need.sum()) > n:       # mostly wide (a reduction over a whole context):
        return _exact_footprint(fa, fb, ia, ib, step, wide, shape)     # everything, no selection
    if any_need:
        sel = np.nonzero(need.reshape(shape))
        pick = lambda m: m.map(lambda x: x[sel]) if m is not None else None
        out.assign(sel, _exact_footprint(pick(fa), pick(fb), ia[sel], ib[sel], step[sel], wide, ia[sel].shape))
    return out


def _exact_footprint(fa, fb, ia, ib, step, wide, shape) -> Mask:
    """``_merged_footprint`` by the Mask algebra (any windows, wide sets)."""
    pa, pb = ia >= 0, ib >= 0
    return _side(fa, ia, ~(pb & ~pa) | step, step & pa, wide, shape).union(
        _side(fb, ib, ~(pa & ~pb) | step, step & pb, wide, shape), wide)


@njit
def _merge_fp(a_base, a_bits, a_wide, a_has, b_base, b_bits, b_wide, b_has, ia, ib, step, window, ob, obits, need):
    """``_merged_footprint`` per element where one window holds the whole set: the pieces are a's
    window (kept unless b is more specific, or at a step), b's likewise, and the values of a step.
    need[i]: two windows differ or a wide set takes part (the caller does those exactly)."""
    words = obits.shape[1]
    any_need = False
    for i in range(ia.shape[0]):
        x, y, st = ia[i], ib[i], step[i]
        pa, pb = x >= 0, y >= 0
        keep_a = a_has and ((not (pb and not pa)) or st)
        keep_b = b_has and ((not (pa and not pb)) or st)
        use_a = keep_a and a_wide[i] == 0 and a_base[i] >= 0
        use_b = keep_b and b_wide[i] == 0 and b_base[i] >= 0
        bad = (keep_a and a_wide[i] != 0) or (keep_b and b_wide[i] != 0)
        base = np.int64(-1)
        if use_a:
            base = a_base[i]
        if use_b:
            if base >= 0 and base != b_base[i]:
                bad = True
            base = b_base[i]
        ox, oy = np.int64(-1), np.int64(-1)
        if st and pa:
            vb = (np.int64(x) // window) * window
            if base >= 0 and base != vb:
                bad = True
            base, ox = vb, np.int64(x) - vb
        if st and pb:
            vb = (np.int64(y) // window) * window
            if base >= 0 and base != vb:
                bad = True
            base, oy = vb, np.int64(y) - vb
        need[i] = bad
        if bad:
            any_need = True
            ob[i] = -1
            for w in range(words):
                obits[i, w] = 0
            continue
        ob[i] = base
        for w in range(words):
            v = np.uint64(0)
            if use_a:
                v |= a_bits[i, w]
            if use_b:
                v |= b_bits[i, w]
            obits[i, w] = v
        if ox >= 0:
            obits[i, ox // 64] |= np.uint64(1) << np.uint64(ox % 64)
        if oy >= 0:
            obits[i, oy // 64] |= np.uint64(1) << np.uint64(oy % 64)
    return any_need


# -- the numpy twins of the compiled merges, run while numba starts on prewarm's thread (jit.starting);
# tests/gfxsim/machine/test_numpy_twins.py holds each to its compiled function

def _union_windows_numpy(ab, abits, aw, bb, bbits, bw, ob, obits, ow, need):
    """_union_windows in numpy passes: the same ob, obits, ow, need and answer."""
    pa, pb, wa, wb = ab >= 0, bb >= 0, aw != 0, bw != 0
    ob[:] = np.where(pa, ab, bb)
    ow[:] = np.where(wa, aw, bw)
    np.bitwise_or(abits, bbits, out=obits)
    nd = (pa & pb & (ab != bb)) | ((wa | wb) & (wa | pa) & (wb | pb))
    need[:] = nd
    return bool(nd.any())


def _subset_windows_numpy(ab, abits, aw, bb, bbits, bw, ok, odd):
    """_subset_windows in numpy passes: the same ok, odd and answer."""
    empty = (ab < 0) & (aw == 0)
    o = ~empty & ((aw != 0) | (bw != 0))
    ok[...] = empty | (~o & (ab == bb) & ((abits & ~bbits) == 0).all(axis=-1))
    odd[...] = o
    return bool(o.any())


def _merge_ids_numpy(ia, ib, out, step):
    """_merge_ids in numpy passes: the same results (out/step unwritten where the planes are equal)."""
    differ = ia != ib
    if not differ.any():
        return True, bool((ia >= 0).any()), False
    s = differ & (ia >= 0) & (ib >= 0)
    out[:] = np.where(s, np.int32(-1), np.where(ia >= 0, ia, ib))
    step[:] = s
    return False, bool((out >= 0).any()), bool(s.any())


def _merge_field_numpy(ia, ib, na, nb, reducing, out, step):
    """_merge_field in numpy passes: the same out, step and (any value, any step)."""
    pa, pb = ia >= 0, ib >= 0
    s = pa & pb & (ia != ib)
    if reducing:
        s |= (pa & ~pb & nb) | (~pa & pb & na)
    out[...] = np.where(s, np.int32(-1), np.where(pa, ia, np.where(pb, ib, np.int32(-1))))
    step[...] = s
    return bool((out >= 0).any()), bool(s.any())


def _merge_fp_numpy(a_base, a_bits, a_wide, a_has, b_base, b_bits, b_wide, b_has, ia, ib, step, window, ob, obits,
                    need):
    """_merge_fp in numpy passes: the same ob, obits, need and answer."""
    n, words = ia.shape[0], obits.shape[1]
    x, y, st = ia.astype(np.int64), ib.astype(np.int64), np.asarray(step, np.bool_)
    pa, pb = x >= 0, y >= 0
    off = np.zeros(n, np.bool_)
    keep_a = ((~(pb & ~pa)) | st) if a_has else off
    keep_b = ((~(pa & ~pb)) | st) if b_has else off
    use_a = keep_a & (a_wide == 0) & (a_base >= 0) if a_has else off
    use_b = keep_b & (b_wide == 0) & (b_base >= 0) if b_has else off
    bad = (keep_a & (a_wide != 0) if a_has else off) | (keep_b & (b_wide != 0) if b_has else off)
    base = np.where(use_a, a_base, -1) if a_has else np.full(n, -1, np.int64)
    if b_has:
        bad = bad | (use_b & (base >= 0) & (base != b_base))
        base = np.where(use_b, b_base, base)
    offs = []
    for v, p in ((x, pa), (y, pb)):                 # a step's values: a's, then b's
        at = st & p
        vb = (v // window) * window
        bad = bad | (at & (base >= 0) & (base != vb))
        base = np.where(at, vb, base)
        offs.append(np.where(at, v - vb, -1))
    need[:] = bad
    ob[:] = np.where(bad, -1, base)
    bits = np.zeros((n, words), np.uint64)
    if a_has:
        bits |= np.where(use_a[:, None], a_bits, np.uint64(0))
    if b_has:
        bits |= np.where(use_b[:, None], b_bits, np.uint64(0))
    for o in offs:
        i = np.flatnonzero(o >= 0)
        bits[i, o[i] // 64] |= np.left_shift(np.uint64(1), (o[i] % 64).astype(np.uint64))
    bits[bad] = 0
    obits[:] = bits
    return bool(bad.any())


def _side(m: Mask | None, ident, keep, with_self, wide, shape) -> Mask:
    base = m if m is not None else Mask.empty(shape)
    if m is not None and not keep.all():
        base = Mask.where(keep, m, Mask.empty(shape))
    if with_self.any():
        base = base.union(Mask.of_values(np.where(with_self, ident, -1)), wide)
    return base


def broadcast_rows(p: Prov | None, rows: int) -> Prov | None:
    """A one-element value used against an n-element one."""
    if p is None:
        return None
    r = p.shape[0] if p.shape is not None else rows
    if r == rows:
        return p
    if r == 1:
        return p.map(lambda a: np.repeat(a, rows, axis=0))
    if rows % r == 0:
        return p.map(lambda a: np.tile(a, (rows // r,) + (1,) * (a.ndim - 1)))
    raise ArgumentError(f"cannot broadcast {r} rows to {rows}")
