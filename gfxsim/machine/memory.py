"""Byte-addressed memories: global buffers (named, optionally tagged) and the LDS of a workgroup.

Both keep, beside their bytes, a written bit per byte (poison is detectable) and — when a launch
with provenance stores into them — per-byte provenance (``MemProv``), so identities, footprints
and scale marks survive a store and a load, within one launch and across launches.
"""
from __future__ import annotations

import functools

import numpy as np

from . import byteruns, encoding as enc
from .dtypes import POISON_BYTES, div_const, dtype_name, mod_const
from ..arch.dtypes import ELEM_TYPES
from .fpplane import DensePlane, FpPlane
from .mmalog import import_wide
from .provenance import WORDS, Prov
from ..errors import ArgumentError, ArgumentTypeError, located


# bits of one element of each encoding (i4: two per byte)
# a buffer's tag planes made only where a store writes other identities, or when read (MemProv.lazy);
# tests compare both ways
LAZY_TAG_PLANES = True
# a buffer's footprint planes as a table of distinct sets and an index (fpplane.FpPlane), else dense;
# tests compare both ways
TABLED_FOOTPRINTS = True
ELEM_BITS = {t.encoding: t.bits for t in ELEM_TYPES.values() if t.encoding is not None}


def poison(n: int) -> np.ndarray:
    """n bytes of the poison pattern (a quiet-NaN word repeated)."""
    return np.tile(POISON_BYTES, -(-n // 4))[:n].copy()


class MemProv:
    """Provenance of a byte-addressed memory of ``size`` bytes: 1-D planes, one entry per ``unit``
    bytes (4 while every access has been whole dwords whose bytes agree — fp32 LDS arrays —, else
    1), allocated per field on the first store that carries the field.

    ``lazy``: fields whose plane is still the buffer's tags everywhere (every store so far wrote
    there the identities the destination's tags name: ``scatter``'s ``agree``), made only when
    read (``ids``) or when a store writes anything else; a cache's token, head and dim planes
    are then never made (one int32 per cache byte each). ``cleared``: per lazy field, the entries
    that stores of values without the field cleared (-1; a bool per entry): an int8 cache's
    encoding plane (@enc, the same everywhere) stays lazy while the producer's numbers (which
    carry no encoding) are stored into it, a quarter of the plane's bytes.

    ``tabled``: footprint planes as a table of distinct sets and an index (fpplane.FpPlane: a
    buffer's output holds a few sets per row), else dense (the LDS, rewritten chunk by chunk)."""

    def __init__(self, size: int, ids: dict | None = None, unit: int = 1, lazy: dict | None = None,
                 tabled: bool = False):
        self.size, self.unit = size, unit
        self._ids: dict[str, np.ndarray] = ids or {}       # field -> int32 [size / unit]
        self.lazy: dict = lazy or {}                        # field -> a function making its plane
        self.cleared: dict[str, np.ndarray] = {}            # lazy field -> bool [size / unit]: -1 there
        self.fp: dict = {}                                  # field -> FpPlane or DensePlane [size / unit]
        self.plane = FpPlane if tabled else DensePlane
        self.flags: np.ndarray | None = None               # uint8 [size / unit]

    @property
    def ids(self) -> dict[str, np.ndarray]:
        """field -> plane, every field's plane made."""
        if self.lazy:                     # the tags' planes first, as a buffer's first store made them
            made = {f: self._make(f) for f in list(self.lazy)}
            self._ids, self.lazy = {**made, **self._ids}, {}
        return self._ids

    def has(self, f: str) -> bool:
        """Whether field ``f`` has a plane here (made or lazy)."""
        return f in self._ids or f in self.lazy

    def field_plane(self, f: str) -> np.ndarray:
        """Field ``f``'s plane; a field that is not lazy is read without making the lazy ones (the
        output check reads @mma and @mn: the tags' planes of a prefill's 1K-prompt output were
        134 MiB made for nothing)."""
        return self._ids[f] if f in self._ids else self.ids[f]

    @ids.setter
    def ids(self, ids: dict):
        self._ids, self.lazy, self.cleared = ids, {}, {}

    def _make(self, f: str) -> np.ndarray:
        """Lazy field ``f``'s plane, made (and no longer lazy): -1 where stores cleared it."""
        plane = self.lazy.pop(f)()
        cleared = self.cleared.pop(f, None)
        if cleared is not None:
            plane[cleared] = -1
        return plane

    def empty(self) -> bool:
        return not self._ids and not self.lazy and not self.fp and self.flags is None

    def _planes(self):
        """Every plane made, footprints dense."""
        return Prov(self.unit, self.ids, {f: m.mask() for f, m in self.fp.items()}, self.flags)

    def _per_byte(self):
        """Give up the dword unit (an access that is not whole dwords)."""
        if self.unit == 1:
            return
        u = self.unit
        rep = lambda a: np.repeat(a, u, axis=0)
        self.ids, self.fp = {f: rep(a) for f, a in self.ids.items()}, {f: m.repeat(u) for f, m in self.fp.items()}
        self.flags, self.unit = None if self.flags is None else rep(self.flags), 1

    def units_of(self, addr: np.ndarray) -> np.ndarray:
        """The plane entries holding bytes ``addr`` ``[nbytes, ...]`` (flat; an entry once per dword
        of a dword-aligned access of whole dwords)."""
        if self.unit == 1:
            return addr.ravel()
        words = self._words(addr, 4)
        return (addr // self.unit).ravel() if words is None else words.ravel()

    def _words(self, addr, g) -> np.ndarray | None:
        """Dword indices of a dword-aligned access of whole dwords by a value with g == 4, else None."""
        if self.unit != 4 or g != 4 or addr.shape[0] % 4 or (addr[0] & 3).any():
            return None
        return addr[::4] >> 2

    def word_index(self, addr: np.ndarray, size: int) -> np.ndarray | None:
        """The plane entries ``gather`` takes by for a load of ``size``-byte elements at bytes
        ``addr`` where they are whole dwords (``[nbytes / 4, width]``), else None."""
        return self._words(addr, size if size == 4 else 0)

    def gather_ids(self, idx: np.ndarray) -> dict:
        """The identity planes at entries ``idx``, less the fields none of those entries holds."""
        ids = {}
        for f, a in self.ids.items():
            a = a.take(idx, axis=0)                                  # faster than x[idx]
            if (a >= 0).any():
                ids[f] = a
        return ids

    def gather(self, addr: np.ndarray, size: int) -> Prov | None:
        """Provenance of a load of ``size``-byte elements at bytes ``addr`` ``[nbytes, width]``."""
        if self.empty():
            return None
        words = self._words(addr, size if size == 4 else 0)
        if words is not None:
            idx, g = words, 4
        else:
            idx, g = (addr // self.unit) if self.unit > 1 else addr, 1
        p = Prov(g, self.gather_ids(idx), {f: m.take(idx) for f, m in self.fp.items()},
                 None if self.flags is None else self.flags.take(idx, axis=0))
        return p.compact(size) if g == 1 and size > 1 else p

    def scatter(self, addr: np.ndarray, p: Prov | None, agree=(), tags: dict | None = None, words=None):
        """Bytes ``addr`` ``[nbytes, ...]`` take ``p``'s planes (rows of ``p.g`` bytes); fields the
        value does not carry are cleared there. ``agree``: fields whose identities in ``p`` are,
        byte for byte, the tags of the elements at ``addr`` (a lazy plane stays the tags).
        ``tags``: field -> a function making the identities of an ``agree`` field that ``p``
        leaves out (rows of ``p.g`` bytes, as ``p`` would hold them): called only where that
        field's plane is made, so a lazy plane's store never makes them. ``words``: ``addr``'s
        8-byte words where they are aligned runs (byteruns.words_of), for the one-byte planes."""
        tags = tags or {}
        idx = self._words(addr, 4 if p is None else p.g)
        if idx is None:
            self._per_byte()
            idx = addr
            if p is not None:
                if tags and p.g != 1:            # made before the rows are cut into bytes
                    p = Prov(p.g, {**p.ids, **{f: make() for f, make in tags.items()}}, p.fp, p.flags)
                    tags = {}
                p = p.per_byte()
        else:
            words = None                          # dwords: the planes' entries are not bytes
        n = self.size // self.unit
        for f in set(self._ids) | set(self.lazy) | (set(p.ids) | set(tags) if p is not None else set()):
            held = p is not None and (f in p.ids or f in tags)
            if f in self.lazy:
                if f in agree and held:
                    if f in self.cleared:            # the tags again there
                        byteruns.put(self.cleared[f], idx, words, False)
                    continue
                if not held:                         # cleared: marked, the plane still not made
                    c = self.cleared.get(f)
                    if c is None:
                        c = self.cleared[f] = np.zeros(n, bool)
                    byteruns.put(c, idx, words, True)
                    continue
                self._ids[f] = self._make(f)
            plane = self._ids.get(f)
            if plane is None:
                plane = self._ids[f] = np.full(n, -1, np.int32)
            plane[idx] = (p.ids[f] if f in p.ids else tags[f]()) if held else -1
        for f in set(self.fp) | (set(p.fp) if p is not None else set()):
            m = self.fp.get(f)
            if m is None:
                m = self.fp[f] = self.plane(n)
            if p is not None and f in p.fp:
                m.assign(idx, p.fp[f])
            else:
                m.clear(idx)
        if self.flags is not None or (p is not None and p.flags is not None):
            if self.flags is None:
                self.flags = np.zeros(n, np.uint8)
            byteruns.put(self.flags, idx, words, 0 if p is None or p.flags is None else p.flags)


class Buffer:
    """A named global-memory buffer over a numpy array, addressed in bytes from its start.

    ``tags`` maps provenance fields to integer arrays of the buffer's shape (or broadcastable to it),
    e.g. ``{"token": tok, "seq": s}`` for a V cache: every byte loaded from element e carries the
    identity (token=tok[e], seq=s[e]); a negative value means "no tag" (e.g. an unused cache slot).
    ``Buffer.empty`` makes an output whose unwritten bytes are poison and detectable.
    ``encoding`` declares how its bytes encode numbers (``gfxsim.arch.dtypes.ENCODINGS``: numpy has
    no fp8 dtypes, so e4m3fn bytes live in a uint8 array); int8 and float16 arrays name theirs.
    With provenance, a matrix instruction or conversion that reads them in another encoding
    reports ``format-mismatch``.
    """

    def __init__(self, name: str, array: np.ndarray, tags: dict | None = None, *, written: bool = True,
                 encoding: str | None = None):
        if not isinstance(array, np.ndarray):
            raise ArgumentTypeError(f"buffer {name!r}: expected a numpy array, got {type(array).__name__}")
        if not isinstance(name, str) or not name:
            raise ArgumentTypeError(f"a buffer's name must be a non-empty str, got {name!r}")
        if array.dtype.kind not in "biufc" or array.dtype.hasobject:
            raise ArgumentTypeError(f"buffer {name!r}: device memory holds numbers, got an array of dtype {array.dtype}")
        self.name = name
        self.array = np.ascontiguousarray(array)
        self.raw = self.array.reshape(-1).view(np.uint8)
        self._tags = {}
        for field, t in (tags or {}).items():
            t = np.asarray(t)
            if t.dtype.kind not in "iu":      # a tag is an identity (a token, a head): 2.5 is none
                raise ArgumentTypeError(f"buffer {name!r}: tag {field!r} must hold integers, got {t.dtype}")
            try:
                np.broadcast_shapes(t.shape, self.array.shape)
            except ValueError:
                raise ArgumentError(f"buffer {name!r}: tag {field!r} has shape {t.shape}, "
                                 f"buffer has {self.array.shape}") from None
            self._tags[field] = t
        self._flat_tags = None
        self._tag_plans: dict = {}
        self.written = None if written else np.zeros(self.raw.size, bool)
        self.prov: MemProv | None = None       # what stores with provenance left here
        self.origin = None                     # the launch (Machine) whose ids those planes use
        self.expects: dict = {}                # field -> (lo, hi, exact): see expect()
        self.declared_encoding = None if encoding is None else self._check_encoding(encoding)
        # how the bytes encode numbers: declared, or named by the dtype (int8, float16); None: unchecked
        self.encoding = self.declared_encoding or enc.of_dtype(self.array.dtype)

    def _check_encoding(self, encoding: str) -> str:
        enc.check_name(encoding, f"buffer {self.name!r}")
        bits = ELEM_BITS[encoding]
        if self.array.itemsize * 8 != max(bits, 8):
            raise ArgumentError(f"buffer {self.name!r}: {encoding} is {bits}-bit, but the array holds "
                                f"{self.array.dtype} ({self.array.itemsize * 8}-bit) elements: store its bytes as "
                                f"{'uint8' if bits <= 8 else 'uint16'}")
        return encoding

    @classmethod
    def empty(cls, name: str, shape: int | tuple[int, ...], dtype: str | np.dtype, tags: dict | None = None, *,
              encoding: str | None = None) -> Buffer:
        from .dtypes import np_dtype
        arr = np.empty(shape, np_dtype(dtype_name(dtype)))
        arr.reshape(-1).view(np.uint8)[:] = poison(arr.nbytes)
        return cls(name, arr, tags, written=False, encoding=encoding)

    def expect(self, field: str, lo: int | np.ndarray, hi: int | np.ndarray, *, exact: bool = True) -> Buffer:
        """Declare what each element must have consumed: every value ``lo[e] <= v < hi[e]`` of
        ``field`` (a K identity: ``token``, ``dim``) exactly once, through the matrix instructions,
        sums, LDS and launches that made the value stored there; ``exact`` also forbids values
        outside the range (off: a causal mask may feed later tokens with weight 0). ``lo``/``hi``
        broadcast to the buffer's shape (kept so); an element with ``lo >= hi`` is not
        checked. Checked at the end of every launch that stores into the buffer (``token-coverage``
        findings)."""
        try:           # kept as given: flat, a prefill's were 16 B an element, provenance or not
            lo, hi = (np.array(x, np.int64) for x in (lo, hi))
            np.broadcast_to(lo, self.array.shape), np.broadcast_to(hi, self.array.shape)
        except ValueError:
            raise ArgumentError(f"buffer {self.name!r}: expect({field!r}) bounds of shapes {np.shape(lo)}, "
                             f"{np.shape(hi)} do not broadcast to {self.array.shape}") from None
        if field.startswith("@"):
            raise ArgumentError(f"buffer {self.name!r}: {field!r} is a reserved field")
        self.expects[field] = (lo, hi, bool(exact))
        return self

    @property
    def tags(self) -> dict:
        """field -> int32 tag of every element (flat), built on first use. Loads and stores use
        ``tags_at`` instead, which never materialises a broadcast tag (a cache's token tag would
        be one int32 per cache byte)."""
        if self._flat_tags is None:
            self._flat_tags = {f: np.ascontiguousarray(np.broadcast_to(t, self.array.shape), np.int32).reshape(-1)
                               for f, t in self._tags.items()}
        return self._flat_tags

    @property
    def tag_arrays(self) -> dict:
        """field -> its tag array as given (broadcastable to the buffer's shape): what a copy of the
        buffer is tagged with."""
        return self._tags

    @property
    def tag_fields(self):
        return self._tags.keys()

    def tags_at(self, elem: np.ndarray, fields=None, views: bool = False, runs: bool | None = None) -> dict:
        """field -> the int32 tag of the flat elements ``elem`` (each in the buffer): each tag is
        looked up, as given, at the element's coordinates on the axes where it varies; the index is
        computed once per set of axes (a cache's seq and token tags share theirs), in int32 when
        the buffer allows. ``views``: a tag the same in every row comes back as a read-only
        broadcast of its first row (a caller that only reads it; fold.py checks one row).
        ``runs``: True where the caller made each column's elements one after another (row r is
        row 0 plus r), which is then not compared element by element; None: compared."""
        fields = self._tags.keys() if fields is None else fields
        shape = self.array.shape
        e = np.asarray(elem)
        if self.array.size < 2 ** 31 and e.dtype != np.int32:
            e = e.astype(np.int32)
        R = e.shape[0] if e.ndim == 2 else 0
        # each lane's elements one after another (a load's bytes or words): the first row's
        # coordinates give every row's where a lane's run stays inside one run of the tag's axes
        runs = R > 1 and (np.array_equal(e, e[:1] + np.arange(R, dtype=e.dtype)[:, None]) if runs is None else runs)
        out, index, given = {}, {}, set()
        for f in fields:
            flat, axes, tshape, ident = self._tag_plan(f)
            if axes is None:
                out[f] = np.take(flat, e)
                continue
            if not axes:
                out[f] = _rows(np.broadcast_to(flat[0], e.shape), views)
                continue
            key = (tuple(axes), tshape)
            got = index.get(key)
            if got is None:
                inner = int(np.prod(shape[axes[-1] + 1:], dtype=np.int64))
                span = None          # "same": every row at the first row's coordinates; "next": one on
                if runs:             # along the last varying axis per row (inner 1); None: computed
                    run = inner if inner > 1 else shape[axes[-1]]
                    if bool((mod_const(e[0], run) <= run - R).all()):
                        span = "same" if inner > 1 else "next"
                rest = e[:1] if span else e
                if inner > 1:                # (inner: a division still to make, merged with the next)
                    rest, inner = div_const(rest, inner), 1
                # every byte of each lane's access in one run of the axes inside the tag's (a lane's
                # 8 bytes of one token's dims): the coordinates of the first row serve every row
                one_row = span == "same" or (span is None and R > 1 and bool((rest == rest[:1]).all()))
                if one_row:
                    rest = rest[:1]
                idx, mult = None, 1
                for d in range(axes[-1], axes[0] - 1, -1):      # coordinates from the last varying axis up
                    if tshape[d] > 1:        # the outermost axis needs no mod: elem is in the buffer
                        if inner > 1:        # the axes between two varying ones: one division
                            rest, inner = div_const(rest, inner), 1
                        c = rest if d == 0 else mod_const(rest, shape[d])
                        idx = c if idx is None else idx + c * mult
                        mult *= shape[d]
                    if d > axes[0]:
                        inner *= shape[d]
                if span == "next":
                    idx = idx + np.arange(R, dtype=idx.dtype)[:, None]
                got = index[key] = (idx, one_row)
            idx, one_row = got
            if ident and idx.dtype == flat.dtype:   # the tag is its own index (a dim, heads numbered 0, 1, ...)
                v = idx.copy() if key in given or np.may_share_memory(idx, e) else idx
                given.add(key)
            else:
                v = np.take(flat, idx)
            out[f] = _rows(np.broadcast_to(v, e.shape), views) if one_row else v
        return out

    def member_tags(self, elem: np.ndarray, lanes: int, fields, both: bool = False, runs: bool = False) -> dict | None:
        """_moved_tags (its docstring); with ``both``, where a member's lanes are not one moved copy,
        lanes in groups of ``lanes / G`` each moved by its own offset (a V cache's lanes over
        several blocks) as members of their own, their answer given back per member as ``both``."""
        got = self._moved_tags(elem, lanes, fields, both, runs)
        if got is not None or not both:
            return got
        e = np.asarray(elem)
        if not _lanes_by_members(e, lanes):
            return None
        R, M = e.shape[0], e.shape[1] // lanes
        d = e[0].reshape(M, lanes).astype(np.int64) - e[0, :lanes].astype(np.int64)     # row 0's moves
        G = 2
        while lanes % G == 0:
            sub = lanes // G
            if (d.reshape(M, G, sub) == d.reshape(M, G, sub)[:, :, :1]).all():
                break
            G *= 2
        else:
            return None
        got = self._moved_tags(e, sub, fields, True, runs)
        if got is None:
            return None
        g = np.arange(G)
        out = {}
        for f, (kind, x) in got.items():
            if kind == "member":             # group (m, g)'s tag in each of its lanes
                out[f] = ("both", (x.reshape(M, G), np.broadcast_to(np.repeat(g, sub)[None, :], (R, lanes))))
            elif kind == "lane":             # every group holds group 0's
                out[f] = ("lane", np.tile(x, (1, G)))
            else:
                u, j = x
                J = u.shape[1]
                out[f] = ("both", (u.reshape(M, G * J), (g[None, :, None] * J + j[:, None, :]).reshape(R, lanes)))
        return out

    def _moved_tags(self, elem: np.ndarray, lanes: int, fields, both: bool = False, runs: bool = False) -> dict | None:
        """``tags_at(elem, fields)`` for a batch's access ``elem`` ``[rows, members*lanes]`` in which
        every member's elements are member 0's moved by one offset per member, looked up on member 0's
        elements and each member's first only: field -> ("member", int32 [members]) where each
        member's elements all hold one tag (a cache's token and kv head: the lanes' elements share
        the tag's coordinates), or ("lane", int32 [rows, lanes]) where every member's elements hold
        member 0's (a head element: the members' offsets leave the tag's coordinates alone). None
        where the elements are not so moved, a move could carry from one axis into the next, or a
        tag varies both ways (tags_at then). ``both``: a tag varying with the members and the lanes
        (a paged cache's token: block and offset) comes back as ("both", (u int32 [members, J], j
        [rows, lanes])): member m's element (r, l) holds u[m, j[r, l]], J the distinct moves of
        member 0's elements from its first on the tag's axes (the tag's index is the member's
        first's plus that move: no coordinate carries).
        ``runs``: row r of ``elem`` is row 0 plus r (a load's elements in order, tags_at's), so
        every row is moved as row 0 is: only row 0 is compared."""
        e = np.asarray(elem)
        shape = self.array.shape
        if not _lanes_by_members(e, lanes):
            return None
        R, M = e.shape[0], e.shape[1] // lanes
        e3 = e.reshape(R, M, lanes)
        first = e3[0, :, 0].astype(np.int64)                 # each member's first element
        base = e3[:, 0, :].astype(np.int64)                  # member 0's [rows, lanes]
        if int(first.min()) < 0 or int(first.max()) >= self.array.size or int(base.min()) < 0 \
                or int(base.max()) >= self.array.size:
            return None
        # in int32 where no wrapped difference can pass for a member's offset (|offset| < size <= 2**30)
        dt = np.int32 if e.dtype == np.int32 and self.array.size <= 2 ** 30 else np.int64
        e3r, br = (e3[:1], base[:1]) if runs else (e3, base)
        if not (np.subtract(e3r, br[:, None, :].astype(dt), dtype=dt) == (first - first[0]).astype(dt)[None, :, None]).all():
            return None
        cb = np.array(np.unravel_index(base.ravel(), shape)).reshape(len(shape), -1)   # member 0's coordinates
        cm = np.array(np.unravel_index(first, shape)).reshape(len(shape), -1)          # each member's first's
        off = cb - cb[:, :1]
        # member m's element (r, l) sits at cb(r, l) - cb(0, 0) + cm(m) wherever that is inside every
        # axis (its flat index is the element's): else a move may carry, not decided here
        cm_lo, cm_hi = cm.min(axis=1), cm.max(axis=1)
        if (off.min(axis=1) + cm_lo < 0).any() or (off.max(axis=1) + cm_hi >= np.array(shape)).any():
            return None
        by_lane, by_member = off.any(axis=1).tolist(), (cm_lo != cm_hi).tolist()
        out = {}
        for f in fields:
            flat, _, tshape, _ = self._tag_plan(f)
            axes = [d for d in range(len(shape)) if tshape[d] > 1]
            stride = np.cumprod((tshape[1:] + (1,))[::-1])[::-1]          # the tag's element strides
            if not any(by_lane[d] for d in axes):
                idx = _tag_index(cm, axes, stride, M)
                out[f] = ("member", np.take(flat, idx))
            elif not any(by_member[d] for d in axes):
                idx = _tag_index(cb, axes, stride, R * lanes)
                out[f] = ("lane", np.take(flat, idx).reshape(R, lanes))
            elif both:                       # coordinates cm + off, none carrying: the tag's index sums
                idx = _tag_index(off, axes, stride, R * lanes)
                at, j = np.unique(idx, return_inverse=True)
                mi = _tag_index(cm, axes, stride, M)
                out[f] = ("both", (np.take(flat, mi[:, None] + at[None, :]), j.reshape(R, lanes)))
            else:
                return None
        return out

    def _tag_plan(self, field):
        plan = self._tag_plans.get(field)
        if plan is None:
            shape = self.array.shape
            t = self._tags[field]
            t = np.ascontiguousarray(t.reshape((1,) * (len(shape) - t.ndim) + t.shape), np.int32)
            axes = None if t.shape == shape else [d for d in range(len(shape)) if t.shape[d] > 1]
            flat = t.reshape(-1)
            ident = bool(np.array_equal(flat, np.arange(flat.size, dtype=np.int32)))
            plan = self._tag_plans[field] = (flat, axes, t.shape, ident)
        return plan

    @property
    def tagged(self) -> bool:
        return bool(self._tags)

    @property
    def nbytes(self) -> int:
        return self.raw.size

    @property
    def itemsize(self) -> int:
        return self.array.itemsize

    @property
    def dtype(self) -> str:
        return dtype_name(self.array.dtype)

    def load_prov(self, byte_addr: np.ndarray, size: int, machine=None) -> Prov | None:
        """Provenance of a load of elements of ``size`` bytes at ``byte_addr`` ``[nbytes, width]``;
        what an earlier launch stored is translated into ``machine``'s namespaces."""
        if self.prov is not None:
            p = self.prov.gather(byte_addr, size)
            return None if p is None else self.import_prov(p, machine)
        if not self._tags and self.encoding is None:
            return None
        if self.itemsize % size == 0:          # every loaded element lies in one buffer element
            return self.element_prov(byte_addr[::size], size)
        elem = byte_addr // self.itemsize
        p = Prov(1, self._ids_at(elem))
        return p.compact(size) if size > 1 else p

    def import_prov(self, p: Prov, machine=None) -> Prov:
        """``p``, provenance read from what stores left here, as launch ``machine`` reads it (an
        earlier launch's: _import)."""
        if machine is not None and self.origin is not None and self.origin is not machine:
            return _import(p, self.origin, machine)
        return p

    def stored_words(self, byte_addr: np.ndarray, size: int) -> np.ndarray | None:
        """Where a load of ``size``-byte elements at ``byte_addr`` reads provenance stores left here
        as whole dwords: the dwords of the stored planes (MemProv.word_index), else None (nothing
        stored, or not whole dwords: ``load_prov`` gathers)."""
        if self.prov is None or self.prov.empty():
            return None
        return self.prov.word_index(byte_addr, size)

    @property
    def untracked(self) -> bool:
        """Whether a load from here carries no provenance (``load_prov`` None): no tags, no encoding,
        nothing stored with provenance."""
        return self.prov is None and not self._tags and self.encoding is None

    def whole_elements(self, size: int) -> bool:
        """Whether a load of ``size``-byte elements takes its provenance from ``element_prov``:
        nothing stored here with provenance, and each loaded element inside one buffer element."""
        return self.prov is None and self.itemsize % size == 0 and (bool(self._tags) or self.encoding is not None)

    def element_prov(self, starts: np.ndarray, size: int, views: bool = False, runs: bool = False) -> Prov:
        """``load_prov`` where ``whole_elements(size)``, from the first byte of each loaded element
        ``starts`` ``[nbytes / size, width]`` (the per-byte addresses never made); ``views``: as
        ``tags_at``'s. ``runs``: row r of ``starts`` is row 0 plus r * size (a load's elements in
        order), so where ``size`` is the buffer's element size each column's elements follow one
        another (tags_at's ``runs``)."""
        return Prov(size, self._ids_at(starts if self.itemsize == 1 else div_const(starts, self.itemsize), views,
                                       True if runs and size == self.itemsize else None))

    def _ids_at(self, elem: np.ndarray, views: bool = False, runs: bool | None = None) -> dict:
        """The identities of bytes of flat elements ``elem``: the tags, and the encoding planes."""
        ids = self.tags_at(elem, views=views, runs=runs)
        if self.encoding is not None:
            ids.update(enc.buffer_planes(self.name, self.encoding, elem, self.declared_encoding is not None))
        return ids

    def store_prov(self, byte_addr: np.ndarray, p: Prov | None, machine=None, agree=(), tags: dict | None = None,
                   words=None):
        """Bytes ``byte_addr`` take ``p``; ``agree``, ``tags``, ``words``: MemProv.scatter's (fields
        of ``p`` that are, byte for byte, the tags there: checked by the caller; the makers of
        those ``p`` leaves out; the bytes' words where they are aligned runs)."""
        if machine is not None and self.origin is not machine and self.prov is not None and self.origin is not None:
            # a second launch writes: bring what the first left here into its namespaces
            whole = self.prov.gather(np.arange(self.nbytes)[:, None], 1)
            self.prov = MemProv(self.nbytes, tabled=TABLED_FOOTPRINTS)
            if whole is not None:
                self.prov.scatter(np.arange(self.nbytes)[:, None], _import(whole, self.origin, machine))
        self.origin = machine
        if self.prov is None:
            if p is None:
                return
            unit = 4 if self.itemsize % 4 == 0 else 1
            per = self.itemsize // unit
            ids = {}
            declared = self.declared_encoding is not None
            if self.encoding is not None and (declared or not LAZY_TAG_PLANES):
                # the element indices are read only where declared; otherwise only their shape
                elem = np.arange(self.array.size) if declared else np.broadcast_to(np.int32(0), (self.array.size,))
                ids.update(enc.buffer_planes(self.name, self.encoding, elem, declared))
            ids = {f: t if per == 1 else np.repeat(t, per) for f, t in ids.items()}
            # the tags' planes, each made (in place: its own array) when first read or written otherwise
            lazy = {f: functools.partial(self._tag_plane, f, per) for f in self._tags} if LAZY_TAG_PLANES else {}
            if not LAZY_TAG_PLANES:
                ids.update({f: self._tag_plane(f, per) for f in self._tags})
            elif self.encoding is not None and not declared:     # one value everywhere: made when read
                lazy[enc.ENC] = functools.partial(self._enc_plane, self.array.size * per)
            self.prov = MemProv(self.nbytes, ids, unit, lazy, tabled=TABLED_FOOTPRINTS)
        self.prov.scatter(byte_addr, p, agree, tags, words)

    def _enc_plane(self, n: int) -> np.ndarray:
        """The encoding plane of a buffer whose dtype names its encoding: ``n`` entries, one value."""
        return enc.buffer_planes(self.name, self.encoding, np.broadcast_to(np.int32(0), (n,)), False)[enc.ENC]

    def _tag_plane(self, field: str, per: int) -> np.ndarray:
        """Field ``field``'s tag of every element as a plane of ``per`` entries an element."""
        t = np.array(np.broadcast_to(self._tags[field], self.array.shape), np.int32, order="C").reshape(-1)
        return t if per == 1 else np.repeat(t, per)

    def overwritten(self, byte_addr: np.ndarray, words=None) -> tuple:
        """What a store to bytes ``byte_addr`` may change here: those bytes, their written bits and
        provenance, and which provenance planes (and origin) the buffer has. ``put_back`` of each
        store's, latest first, gives the buffer as before the first (a folded attempt taken back,
        fold.Attempt) at the cost of the bytes stored, not of a copy of the whole buffer.
        ``words``: the bytes' 8-byte words where they are aligned runs (byteruns.words_of): the
        one-byte arrays are read as words."""
        at = byte_addr.ravel()
        p = self.prov
        planes = None
        if p is not None:
            idx = p.units_of(byte_addr)
            pw = words if p.unit == 1 else None
            take = lambda x: byteruns.take(x, idx, pw)
            planes = (p.unit, dict(p._ids), dict(p.fp), p.flags, idx, pw, {f: take(a) for f, a in p._ids.items()},
                      {f: m.take(idx) for f, m in p.fp.items()}, None if p.flags is None else take(p.flags),
                      dict(p.lazy), dict(p.cleared), {f: take(c) for f, c in p.cleared.items()})
        return (at, words, byteruns.take(self.raw, at, words),
                None if self.written is None else byteruns.take(self.written, at, words), p, self.origin, planes)

    def put_back(self, before: tuple):
        """Undo the store ``before`` (``overwritten``) was taken for; stores made after it must
        have been put back first. A store that replaced a plane or the whole provenance (a new
        field, bytes no longer in dwords, a second launch's first store) left the old one as it
        was: it is taken back as it is, with its bytes at the store's addresses restored."""
        at, words, raw, written, prov, origin, planes = before
        byteruns.put_back(self.raw, at, words, raw)
        if written is not None:
            byteruns.put_back(self.written, at, words, written)
        self.prov, self.origin = prov, origin
        if planes is None:
            return
        unit, ids, fp, flags, idx, pw, id_vals, fp_vals, flag_vals, lazy, cleared, cleared_vals = planes
        prov.unit, prov.ids, prov.fp, prov.flags = unit, ids, fp, flags
        prov.lazy = lazy                  # a plane made since is the tags there: lazy again
        prov.cleared = cleared
        for f, v in cleared_vals.items():
            byteruns.put_back(cleared[f], idx, pw, v)
        for f, v in id_vals.items():
            byteruns.put_back(ids[f], idx, pw, v)
        for f, v in fp_vals.items():
            fp[f].assign(idx, v)
        if flags is not None:
            byteruns.put_back(flags, idx, pw, flag_vals)

    def __repr__(self):
        return f"Buffer({self.name!r}, {self.array.shape}, {self.array.dtype})"


def _import(p: Prov, origin, machine) -> Prov:
    """Provenance stored by launch ``origin`` as launch ``machine`` reads it: footprints wider than
    a window re-interned, matrix-result names (@mma) moved under an id offset of the earlier log."""
    fp = {f: import_wide(m, origin.wide, machine.wide) for f, m in p.fp.items()}
    ids = dict(p.ids)
    if "@mma" in ids:
        base = machine.mma_log.foreign_base(origin.mma_log, origin.wide)
        a = ids["@mma"]
        ids["@mma"] = np.where(a >= 0, a.astype(np.int64) + base, -1).astype(np.int32)   # < 2**31
    return Prov(p.g, ids, fp, p.flags)


class LdsRegion:
    """A named, statically allocated piece of LDS (like a ``__shared__`` array)."""

    def __init__(self, name, offset, shape, dtype):
        self.name, self.offset, self.shape, self.dtype = name, offset, tuple(shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
        self.stride = -(-self.nbytes // 16) * 16      # bytes per batched workgroup in the region's own arrays

    def describe(self, rel: int) -> str:
        """``name+offset`` of a byte of the region (what a finding names)."""
        return f"{self.name}+{int(rel)}"

    def __repr__(self):
        return f"LdsRegion({self.name!r}, bytes [{self.offset}, {self.offset + self.nbytes}), {self.shape} {self.dtype})"


class LDS:
    """Workgroup-shared memory sized to the regions the kernel declares (up to ``limit`` bytes per
    workgroup). Each region keeps its own bytes, written bits and provenance, one copy per batched
    workgroup (``[members * region.stride]``): declaring a region allocates just that region, and an
    access, always within one region, indexes it directly. Addresses as the hardware sees them
    (races, bank conflicts, findings) stay workgroup-relative: ``region.offset`` + the offset in it."""

    def __init__(self, limit: int, banks: int, bank_bytes: int, members: int = 1, prov_members=None):
        self.limit, self.banks, self.bank_bytes = limit, banks, bank_bytes
        self.members = members
        # provenance is kept for this many members: all, or a folded batch's representatives
        self.prov_members = members if prov_members is None else prov_members
        self.member_bytes = 0                   # the workgroup-relative LDS allocated so far (16-aligned)
        self.raw: dict[str, np.ndarray] = {}    # region -> uint8 [members * stride], poison until written
        # region -> written bits: while every member has written the same bytes (accesses the same
        # for every member: a kernel's LDS layout), one member's bool [stride] in ``written_one``;
        # from the first access that differs, every member's bool [members * stride] in ``written``
        self.written_one: dict[str, np.ndarray] = {}
        self.written: dict[str, np.ndarray] = {}
        self.prov: dict[str, MemProv] = {}      # region -> its provenance, [prov_members * stride]
        self.regions: dict[str, LdsRegion] = {}
        self.allocated = 0
        self.races = None                  # lds_races.RaceTracker, made by the first access that checks races

    def region(self, name, shape, dtype) -> LdsRegion:
        dtype = np.dtype(dtype)
        got = self.regions.get(name)
        if got is not None:
            if got.shape != tuple(shape) or got.dtype != dtype:
                raise ArgumentError(f"LDS region {name!r} declared again with a different shape or type "
                                 f"({got.shape} {got.dtype} vs {tuple(shape)} {dtype})")
            return got
        off = -(-self.allocated // 16) * 16
        reg = LdsRegion(name, off, shape, dtype)
        if off + reg.nbytes > self.limit:
            raise located(MemoryError, f"LDS region {name!r} ({reg.nbytes} B) does not fit: {off} B already "
                              f"allocated of {self.limit} B")
        self.regions[name] = reg
        self.raw[name] = np.tile(poison(reg.stride), self.members)
        self.written_one[name] = np.zeros(reg.stride, bool)
        self.prov[name] = MemProv(self.prov_members * reg.stride, unit=4 if dtype.itemsize >= 4 else 1)
        self.allocated = off + reg.nbytes
        new = -(-self.allocated // 16) * 16
        if self.races is not None:
            self.races.grow(self.member_bytes, new)
        self.member_bytes = new
        return reg

    def race_tracker(self):
        """The race state of this batch's LDS (lds_races.RaceTracker), made on first use."""
        if self.races is None:
            from .lds_races import RaceTracker
            self.races = RaceTracker(self.members, self.member_bytes)
        return self.races

    def rows(self, name: str) -> np.ndarray:
        """The region's bytes as uint8 ``[members, stride]`` (a view: member m's copy is row m)."""
        return self.raw[name].reshape(self.members, -1)

    def member_written(self, name: str) -> np.ndarray:
        """Every member's written bits, bool ``[members * stride]`` (made from the shared ones the
        first time an access differs between members; kept per member from then on)."""
        got = self.written.get(name)
        if got is None:
            got = self.written[name] = np.tile(self.written_one.pop(name), self.members)
        return got

    def region_at(self, addr: int):
        """(region, offset in it) of a member-relative LDS byte address."""
        for r in self.regions.values():
            if r.offset <= addr < r.offset + r.nbytes:
                return r, addr - r.offset
        return None, addr


__all__ = ["Buffer", "LdsRegion", "LDS", "MemProv", "poison", "WORDS"]


def _lanes_by_members(e: np.ndarray, lanes: int) -> bool:
    """Whether ``e`` can be a batch's access as member_tags reads it: integer ``[rows,
    members*lanes]``, not empty."""
    return e.ndim == 2 and e.size > 0 and e.shape[1] % lanes == 0 and e.dtype.kind in "iu"


def _tag_index(coords: np.ndarray, axes, stride, n: int) -> np.ndarray:
    """The flat index (int64 ``[n]``) into a tag of element strides ``stride`` of the coordinates
    ``coords`` ``[axis, n]`` on the tag's varying ``axes``."""
    return sum((coords[d] * int(stride[d]) for d in axes), np.zeros(n, np.int64))


def _rows(b: np.ndarray, views: bool) -> np.ndarray:
    """A tag broadcast over a load's rows: as it is (``views``), or an array of the caller's own."""
    return b if views else b.copy()
