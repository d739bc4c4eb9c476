"""Matrix instructions: operands gathered through the instruction record, D computed exactly,
and one compact record per issued instruction (``MmaLog``).

Provenance of a matrix instruction, per (batched workgroup, block):
* the K-slot check: on every identity field both A and B carry, K slot k must hold one value;
* the record keeps, per field, the values feeding the K slots (compact: ``[K]`` when a field is
  the same along M (A) / N (B), ``[M]``/``[N]`` when it is the same along K, else the full grid);
* the K set of D[m][n], per field that varies along K: A row m's values ∪ B column n's values,
  as bitmask windows (``Mask``); through C it chains to the instruction that produced C;
* D[m][n]'s identity: the fields constant along K of A's row m and B's column n, plus ``@mma``
  (this instruction's index) and ``@mn`` — the mark that lets a scale check or a finding name
  the instruction wherever the result travels (moves, LDS, bpermute, conversions).
"""
from __future__ import annotations

from .jit import njit
import numpy as np

from .dtypes import itemsize, np_dtype
from .errors import GfxSimError
from .mma import compute, gather_plan
from .provenance import RESERVED, Mask, Prov, WideSets
from .trace import BatchEvent, MmaEvent
from .vgpr import VGPRs

_BIG = np.iinfo(np.int32).max


class _Field:
    """One operand field gathered as ``[nb, R, K]`` (A: R = M; B: its N x K view), summarised in
    one pass (``_field_summary``): per K slot the smallest present value and the largest over the
    rows (lo_r, hi_r [nb, K]), per row the same along K (lo_k, hi_k [nb, R]), and whether the
    field is the same along K (eq_k) or along the rows (eq_r), absent values (-1) included."""
    __slots__ = ("v", "lo_r", "hi_r", "lo_k", "hi_k", "eq_r", "eq_k")

    def __init__(self, v, summary=None):
        self.v = v
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

    def compact(self, operand):
        """(kind, array) for the record: "mn" [nb, R] (not a K field), "k" [nb, K], or "full"
        (in the operand's own [nb, M, K] / [nb, K, N] order)."""
        if self.eq_k:                      # copies: a view would keep the whole gather alive
            return ("mn", self.v[:, :, 0].copy())
        if self.eq_r:
            return ("k", self.v[:, 0, :].copy())
        return ("full", self.v if operand == "A" else np.swapaxes(self.v, 1, 2))

    def varies(self) -> bool:
        """Whether some row holds two different present values along K."""
        return bool((self.lo_k < self.hi_k).any())

    def one_along_k(self):
        """Per row: the one value held along K where present, -1 where none or several (slots
        past the data carry nothing, and must not hide the row's identity)."""
        return np.where((self.hi_k >= 0) & (self.lo_k == self.hi_k), self.hi_k, -1)


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
def _d_plane(ra, cb, vc, flat_d, out):
    """D's identity plane of one field (``out`` [regs*width] flat, prefilled -1): D[m][n] is A row
    m's value ``ra`` [nb, M] and B column n's ``cb`` [nb, N] where they agree or one is absent (-1),
    then C's element ``vc`` [nb, M, N] likewise (an empty [0, 0, 0] array: no C). Returns whether
    any element got a value."""
    nb, M, N = flat_d.shape
    has_a, has_b, has_c = ra.shape[0] > 0, cb.shape[0] > 0, vc.shape[0] > 0
    any_v = False
    for b in range(nb):
        for m in range(M):
            x = ra[b, m] if has_a else -1
            for n in range(N):
                y = cb[b, n] if has_b else -1
                d = y if x < 0 else (x if (y < 0 or x == y) else -1)
                if has_c:
                    z = vc[b, m, n]
                    d = z if d < 0 else (d if (z < 0 or z == d) else -1)
                out[flat_d[b, m, n]] = d
                if d >= 0:
                    any_v = True
    return any_v


def _d_identity(f, sa, sb, rec):
    """A's row values and B's column values of field ``f`` that name D[m][n] (None: no name).
    A field on one side only (a query row, a V dim) names the row or column wherever it is one
    value along K; a field on both sides is summed over (a token) or shared (a sequence), and
    names D only where it is constant along K on both."""
    if f in sa and f in sb:
        return (rec.a[f][1] if rec.a[f][0] == "mn" else None), (rec.b[f][1] if rec.b[f][0] == "mn" else None)
    return (sa[f].one_along_k() if f in sa else None), (sb[f].one_along_k() if f in sb else None)


def _expand(kind, a, op, M, N, K):
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


def _row_sets(vals: np.ndarray, wide: WideSets) -> Mask:
    """The set of non-negative values along the last axis, per leading index, as a Mask (a 3-D
    view, e.g. B's [nb, N, K], is read in place)."""
    from .provenance import WINDOW, WORDS
    lead = vals.shape[:-1]
    v3 = vals if vals.ndim == 3 else vals.reshape((1, -1, vals.shape[-1]))
    base = np.empty(v3.shape[:2], np.int64)
    bits = np.zeros(v3.shape[:2] + (WORDS,), np.uint64)
    _row_bits(v3, WINDOW, base, bits)
    out = Mask(base, bits, np.zeros(v3.shape[:2], np.uint32))
    for x, r in zip(*np.nonzero(base == -2)):       # a K slot set wider than a window: exact
        row = v3[x, r]
        out.wide[x, r] = wide.intern(set(row[row >= 0].tolist()))
        out.base[x, r] = -1
    return out.map(lambda a: a.reshape(lead + a.shape[2:]))


_SAMPLE_COLUMNS = 64      # a sample of the columns, not a wave size: any count is exact


def _same_planes(x: np.ndarray, y: np.ndarray) -> bool:
    """x == y everywhere; a miss (another operand) is usually told by the first columns, so those
    are compared first and the whole arrays only where they agree."""
    return np.array_equal(x[..., :_SAMPLE_COLUMNS], y[..., :_SAMPLE_COLUMNS]) and np.array_equal(x, y)


def _i8_float_type(K, a_dtype, b_dtype):
    """The float type whose GEMM sums K products of these 8-bit types exactly: float32 while every
    partial sum is an integer below 2^24, else float64 (below 2^53)."""
    bound = K * (255 if a_dtype == np.uint8 else 128) * (255 if b_dtype == np.uint8 else 128)
    return np.float32 if bound < 2 ** 24 else np.float64


def _mma_i8(fa, fb, c, tc, td, d, inv=None):
    """D = A.B + C for 8-bit A/B (``fa``, ``fb``: the operands gathered as floats, ``[members*blocks,
    rows, cols]``, _i8_float_type) and int32 C/D read and written through the flat operand plans
    (indices into ``[regs, width]``). The products are summed as one batched float GEMM, which is
    exact (_i8_float_type). C is added in int64 and the sum wrapped to int32; returns where it
    overflowed (None: it cannot: a float32 sum, below 2^24, without C or with every C element
    2^24 inside the int32 range, is added in int32). ``inv``: where D's plan puts every element of
    ``d`` exactly once and C's plan is D's, each element of ``d``'s index into the sums (a take then
    writes D, and C is added where it lies, with no gather)."""
    s = np.matmul(fa, fb)
    if s.dtype == np.float32:                    # every sum below 2^24, far inside int32
        si = s.astype(np.int32)
        if c is None:
            _write_d(si, td, d, inv)
            return None
        cc = c if inv is not None else np.take(c, tc)     # C where it lies (where D goes), or gathered
        if int(cc.min()) > -2 ** 31 + 2 ** 24 and int(cc.max()) < 2 ** 31 - 2 ** 24:
            if inv is None:
                si += cc
            _write_d(si, td, d, inv)
            if inv is not None:
                d += c
            return None
    s = s.astype(np.int64)
    if c is not None:
        s += np.take(c, tc)
    over = (s < -2 ** 31) | (s > 2 ** 31 - 1)
    d.reshape(-1)[td] = s.astype(np.int32)          # C-style cast: wraps modulo 2^32
    return over


def _write_d(si, td, d, inv):
    """d's elements from the sums ``si``: by D's plan, or (``inv``) as a take of every element."""
    if inv is None:
        d.reshape(-1)[td] = si
    else:
        np.take(si.reshape(-1), inv, out=d.reshape(-1), mode="clip")      # indices in range: no buffer


class MmaRecord:
    """One issued matrix instruction (one statement; member m of a batch is instruction first+m)."""
    __slots__ = ("first", "insn", "op", "kernel", "wave", "workgroups", "live", "source", "exec_mask",
                 "a", "b", "ks_a", "ks_b", "c_mma", "c_mn", "operands", "label")

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
        side = self.a if operand.upper() == "A" else self.b
        if side is None:
            return None
        insn = self.insn
        if field not in side:
            return np.full((len(self.workgroups), insn.K), -1, np.int64)
        kind, arr = side[field]
        full = _expand(kind, arr[::insn.blocks], operand.upper(), insn.M, insn.N, insn.K)
        return np.asarray(full[:, 0, :] if operand.upper() == "A" else full[:, :, 0], np.int64)


PAIR_BASE = 1 << 28          # ids of sums of two matrix results (PairRecords)
FOREIGN_BASE = 1 << 29       # ids of results made by an earlier launch: (k + 1) * FOREIGN_BASE + its id


@njit
def _counts_up(idx):
    """idx[i] == idx[0] + i for every i: one pass that stops at the first miss, no temporary."""
    first = idx[0]
    for i in range(idx.shape[0]):
        if idx[i] != first + i:
            return False
    return True


def _pack(x) -> tuple:
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
    if hi - lo == n - 1 and int(x[0]) == lo and _counts_up(x):
        return ("r", lo, n)
    span = hi - lo
    dt = np.uint8 if span < 1 << 8 else np.uint16 if span < 1 << 16 else None
    return ("n", lo, (x - lo).astype(dt)) if dt is not None else ("n", 0, x.astype(np.int32))


def _unpack(p) -> np.ndarray:
    kind, a, b = p
    if kind == "c":
        return np.full(b, a, np.int32)
    if kind == "r":
        return np.arange(a, a + b, dtype=np.int32)
    out = b.astype(np.int32)
    if a:
        out += np.int32(a)
    return out


class PairRecord:
    """The sum of two matrix results, element for element: what each side was (@mma, @mn).
    ``left``, ``right`` ((ids, mn) int32 [n] each) and ``cell`` are held packed (_pack) and
    unpacked on each read."""
    __slots__ = ("_left", "_right", "site", "_cell", "fp", "member_base", "fold_shift")

    def __init__(self, left, right):
        self._left = tuple(_pack(x) for x in left)
        self._right = tuple(_pack(x) for x in right)
        self.site = None                             # where the add ran: instruction, source, wave, ... (consumed.py)
        self._cell = None                            # int32 [n]: the D element summed, -1: a reduction (consumed.py)
        self.fp = None                               # field -> (consumed, consumed twice) as consumed.Fp
        # the elements are held member by member: where each member's start ([members + 1])
        self.member_base = None
        self.fold_shift = None                       # a folded batch's: @mn shift of each member (fold.py)

    @property
    def left(self):
        return tuple(_unpack(p) for p in self._left)

    @property
    def right(self):
        return tuple(_unpack(p) for p in self._right)

    @property
    def cell(self):
        return None if self._cell is None else _unpack(self._cell)

    @cell.setter
    def cell(self, value):
        self._cell = None if value is None else _pack(value)


class MmaLog:
    """Every matrix instruction of a launch, in issue order, as compact records; the sums of two
    results (pairs); and the logs of earlier launches whose results this launch read."""

    def __init__(self, wide: WideSets | None = None):
        self.records: list[MmaRecord] = []
        self._starts = []
        self.pairs: list[PairRecord] = []
        self.foreign: list = []                      # [(MmaLog, its WideSets)]
        self.wide = wide

    def add(self, rec: MmaRecord):
        self.records.append(rec)
        self._starts.append(rec.first)

    def add_pair(self, left, right) -> int:
        if len(self.pairs) >= FOREIGN_BASE - PAIR_BASE:
            raise OverflowError("more sums of matrix results than the provenance ids can name")
        self.pairs.append(PairRecord(left, right))
        return PAIR_BASE + len(self.pairs) - 1

    def truncate(self, n_records: int, n_pairs: int, n_foreign: int):
        """Forget every record, pair and earlier launch from these counts on (a folded attempt
        taken back), with what consumed.py cached of the records dropped."""
        del self.records[n_records:]
        del self._starts[n_records:]
        del self.pairs[n_pairs:]
        del self.foreign[n_foreign:]
        for name in ("_k_sets", "_k_tables"):
            cache = self.__dict__.get(name)
            if cache:
                for k in [k for k in cache if k >= n_records]:
                    del cache[k]
        self.__dict__.pop("_k_field_names", None)

    def foreign_base(self, log, wide) -> int:
        """The id offset under which results of ``log`` (an earlier launch) are known here."""
        for k, (l, _) in enumerate(self.foreign):
            if l is log:
                return (k + 1) * FOREIGN_BASE
        if len(self.foreign) >= 2:
            raise OverflowError("a launch can read matrix results of at most two earlier launches")
        self.foreign.append((log, wide))
        return len(self.foreign) * FOREIGN_BASE

    def events(self) -> list:
        """One MmaEvent view per instruction and live workgroup, in index order."""
        out = []
        for r in self.records:
            for m in r.live:
                out.append(MmaEvent.from_record(r, m))
        return out

    def record_of(self, index: int):
        """The record of instruction ``index`` (None if no record holds it)."""
        if index >= PAIR_BASE:
            return None
        i = int(np.searchsorted(np.asarray(self._starts, np.int64), index, "right")) - 1
        if i < 0:
            return None
        r = self.records[i]
        return r if index < r.first + len(r.workgroups) else None

    def describe(self, index: int) -> str:
        """``#12 (chunk 0 tile 1 j 0)``: an instruction's index and the kernel's label for it."""
        rec = self.record_of(index)
        label = rec.label if rec is not None else None
        return f"#{index}" + (f" ({label})" if label else "")

    def aligned(self, c_mma, c_mn, insn, members):
        """The record whose D is exactly this C (``[nb, M, N]`` ids in the C layout of the members
        ``members``, an index array), or None."""
        prev = self.record_of(int(c_mma.flat[0])) if c_mma.size and c_mma.flat[0] >= 0 else None
        if prev is None or prev.insn is not insn:
            return None
        nb = len(members) * insn.blocks
        member = np.repeat(members, insn.blocks)[:, None, None]
        blk = np.tile(np.arange(insn.blocks), len(members))[:, None, None]
        mn = (blk * insn.M + np.arange(insn.M)[None, :, None]) * insn.N + np.arange(insn.N)[None, None, :]
        if c_mma.shape[0] != nb or not (c_mma == prev.first + member).all() or not (c_mn == mn).all():
            return None
        return prev

    def ksets(self, ids: np.ndarray, mn: np.ndarray, wide: WideSets) -> dict:
        """K sets (field -> Mask [N]) of result elements named by (@mma, @mn): through chains in C,
        sums of results and results of earlier launches."""
        n = len(ids)
        out: dict = {}
        pos = np.arange(n)
        ids = np.asarray(ids, np.int64)
        mn = np.asarray(mn, np.int64)
        starts = np.asarray(self._starts, np.int64)
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
                    _unite(out, f, pos[sel], _import_wide(m, their_wide, wide), n, wide)
            if not nxt[0]:
                break
            pos, ids, mn = (np.concatenate(x) for x in nxt)
        return out

    def _from_records(self, pos, ids, mn, starts, out, nxt, n, wide):
        ri = np.searchsorted(starts, ids, "right") - 1
        for r_i in np.unique(ri).tolist():
            sel = ri == r_i
            rec = self.records[r_i]
            M, N, bl = rec.insn.M, rec.insn.N, rec.insn.blocks
            e = mn[sel]
            blk, m, nn = e // (M * N), (e // N) % M, e % N
            row = (ids[sel] - rec.first) * bl + blk
            for f in rec.ks_a.keys() | rec.ks_b.keys():
                parts = []
                if f in rec.ks_a:
                    parts.append(rec.ks_a[f].map(lambda x: x[row, m]))
                if f in rec.ks_b:
                    parts.append(rec.ks_b[f].map(lambda x: x[row, nn]))
                s = parts[0] if len(parts) == 1 else parts[0].union(parts[1], wide)
                _unite(out, f, pos[sel], s, n, wide)
            if rec.c_mma is not None:
                cm = rec.c_mma[row, m, nn]
                keep = cm >= 0
                nxt[0].append(pos[sel][keep])
                nxt[1].append(cm[keep].astype(np.int64))
                nxt[2].append(rec.c_mn[row, m, nn][keep].astype(np.int64))


def _labelled(label) -> str:
    return f" ({label})" if label else ""


def _unite(out, f, pos, s: Mask, n, wide):
    """out[f][pos] |= s, where pos may repeat (two sides of a sum in one record)."""
    cur = out.get(f)
    if cur is None:
        cur = out[f] = Mask.empty((n,))
    idx = np.arange(len(pos))
    while len(idx):
        _, first = np.unique(pos[idx], return_index=True)
        take = idx[first]
        p = pos[take]
        cur.assign(p, cur.map(lambda x: x[p]).union(s.map(lambda x: x[take]), wide))
        idx = np.setdiff1d(idx, take, assume_unique=True)


def _import_wide(m: Mask, theirs: WideSets, ours: WideSets) -> Mask:
    """A mask whose wide ids belong to another launch's WideSets, re-interned in ours."""
    if theirs is ours or not m.wide.any():
        return m
    out = m.map(lambda x: x.copy())
    for wid in np.unique(m.wide[m.wide != 0]).tolist():
        out.wide[m.wide == wid] = ours.intern(theirs.values(wid))
    return out


def _unpack_nibbles(w, insn, op, v):
    """A 4-bit operand (mma.sync .s4) arrives as its packed 32-bit registers (i32/u32, one per
    VGPR, as PTX passes .b32): unpack it into one signed element per nibble, little-endian, each
    nibble taking the provenance and written bit of its byte. Other operands pass through."""
    lay = insn.operand(op)
    if lay.elem_bits != 4 or not isinstance(v, VGPRs):
        return v
    if v.dtype not in ("i32", "u32") or v.n != lay.n_regs:
        raise w.error(TypeError, f"{insn.mnemonic}: operand {op} ({lay.n_regs * 8} x i4) must be passed as its "
                      f"{lay.n_regs} packed 32-bit registers (i32/u32), got {v.n} x {v.dtype}")
    raw = np.ascontiguousarray(v.val).view(np.uint32)
    shifts = (np.arange(8, dtype=np.uint32) * 4)[None, :, None]
    nib = ((raw[:, None, :] >> shifts) & np.uint32(0xF)).astype(np.int8)       # [regs, 8, width]
    nib = np.where(nib > 7, nib - 16, nib).astype(np.int8).reshape(-1, raw.shape[1])
    prov = None if v.prov is None else v.prov.per_byte().map(lambda x: np.repeat(x, 2, axis=0))
    valid = None if v.valid is None else np.repeat(v.valid, 2, axis=0)
    return VGPRs(None, nib, "i4", prov, valid, regs=v.regs)


OPERAND_MEMO = 4         # operands a wave remembers per side (A, B): QK alternates four A registers
MEMO_TRIAL = 8           # operands of a side looked up before a side that never repeats is no longer remembered


class _OperandMemo:
    """The last OPERAND_MEMO operands of one side of a wave's matrix instructions, most recent
    first, found by content (the keys hold copies, so an in-place write elsewhere cannot make a
    stale match). ``trial``: after that many lookups without a hit the side is no longer remembered."""
    __slots__ = ("entries", "looked", "hits", "trial")

    def __init__(self, trial=None):
        self.entries, self.looked, self.hits, self.trial = [], 0, 0, trial

    def _off(self) -> bool:
        return self.trial is not None and self.looked >= self.trial and not self.hits

    def recall(self, matches):
        """The remembered value whose key ``matches``, moved to the front; None if none does."""
        if self._off():
            return None
        self.looked += 1
        for i, (key, value) in enumerate(self.entries):
            if matches(key):
                if i:
                    self.entries.insert(0, self.entries.pop(i))
                self.hits += 1
                return value
        return None

    def remember(self, key, value):
        if self._off():
            self.entries.clear()
            return
        self.entries.insert(0, (key, value))
        del self.entries[OPERAND_MEMO:]


class MatrixOps:
    def mma(self, mnemonic: str, a: VGPRs, b: VGPRs, c: VGPRs | None = None, label: str | None = None) -> VGPRs:
        """D = A*B + C by the arch's record of ``mnemonic`` (C = 0 when omitted). ``label``: what the
        kernel calls this instruction (e.g. "chunk 2 tile 1 j 0"), shown beside its index in the
        pictures and the findings."""
        if label is not None and not isinstance(label, str):
            raise self.error(TypeError, f"{mnemonic}: label must be a str, got {type(label).__name__}")
        insn = self.insn(mnemonic)
        regs_in = (a, b)                   # as the kernel passed them (the trace shows these)
        a, b = (_unpack_nibbles(self, insn, op, v) for op, v in (("A", a), ("B", b)))
        need = {"A": (a, insn.a_type), "B": (b, insn.b_type)}
        if c is None:
            c = VGPRs(self, np.zeros((insn.regs("C"), self.width), np_dtype(insn.cd_type)), insn.cd_type, literal=True)
        need["C"] = (c, insn.cd_type)
        for op, (v, t) in need.items():
            lay = insn.operand(op)
            n_want = lay.n_regs * (32 // lay.elem_bits)
            if not isinstance(v, VGPRs):
                raise self.error(TypeError, f"{mnemonic}: operand {op} must be a register value")
            if v.dtype != t and not (itemsize(v.dtype) == itemsize(t) and op in "AB" and
                                     {v.dtype, t} <= {"i8", "u8"}):
                raise self.error(TypeError, f"{mnemonic}: operand {op} must be {t}, got {v.dtype}")
            if v.n != n_want:
                raise self.error(ValueError, f"{mnemonic}: operand {op} needs {n_want} x {t} per lane "
                                 f"({lay.n_regs} VGPRs), got {v.n}")
        ex = self.exec.reshape(self.members, self.lanes)
        live = np.ones(self.members, bool) if self._full else ex.all(axis=1)
        if not self._full and not np.all(live | ~ex.any(axis=1)):
            m = int(np.argmax(~(live | ~ex.any(axis=1))))
            raise self.error(GfxSimError, f"{mnemonic} issued with EXEC {ex[m].sum()}/{self.lanes}: "
                             "matrix instructions need the whole wave", lane=m * self.lanes)
        for op, v in (("A", a), ("B", b), ("C", c)):
            if v.valid is not None and (~v.valid & self.exec[None, :]).any():
                lane = self._first_lanes((~v.valid & self.exec[None, :]).any(axis=0))[0]
                self.finding("uninitialized-read", f"{mnemonic}: operand {op} ({v.reg_name()}) holds never-written "
                             f"bytes", lane=lane, what=f"operand {op}", name=v.reg_name())
        plans = {op: self._batched_plan(insn, op) for op in "ABCD"}      # [members*blocks, rows, cols]
        dval = np.empty((insn.regs("D"), self.width), np_dtype(insn.cd_type))
        overflow = None
        if insn.cd_type == "i32" and a.dtype in ("i8", "u8") and b.dtype in ("i8", "u8"):
            # the hot path of the INT8 kernels: one exact batched GEMM for every member and block
            ft = _i8_float_type(insn.K, a.val.dtype, b.val.dtype)
            overflow = _mma_i8(self._float_operand(insn, "A", a.val, ft), self._float_operand(insn, "B", b.val, ft),
                               None if c.literal else c.val, self._flat_plan(insn, "C"), self._flat_plan(insn, "D"),
                               dval, self._d_inverse(insn))
        else:
            mats = {op: v.val[plans[op]] for op, v in (("A", a), ("B", b), ("C", c))}
            d_mat, overflow = compute(insn, mats["A"], mats["B"], mats["C"], batch=self.members)
            dval[plans["D"]] = d_mat
        tr = self.machine.trace
        idx = tr.n_events
        tr.n_events += self.members             # member m's instruction is idx + m
        out = self._new(dval, insn.cd_type)
        rec = MmaRecord()
        rec.first, rec.insn, rec.op, rec.kernel, rec.wave = idx, insn, insn.mnemonic, self.kernel, self.wave_id
        rec.workgroups, rec.live = self.wg.ids, np.nonzero(live)[0].tolist()
        rec.source = self.source()
        rec.label = label
        rec.exec_mask = self.exec
        rec.a = rec.b = None
        rec.ks_a, rec.ks_b, rec.c_mma, rec.c_mn = {}, {}, None, None
        rec.operands = None
        if self.machine.provenance and (a.prov is not None or b.prov is not None or c.prov is not None):
            out.prov = self._mma_provenance(insn, a, b, c, idx, rec, live)
            if self.fold is not None:           # the representatives' rows, completed for every member
                self.fold.unfold_record(rec, self.machine.mma_log)
        if overflow is not None and (overflow & np.repeat(live, insn.blocks)[:, None, None]).any():
            blk, m, n = (int(x) for x in np.argwhere(overflow & np.repeat(live, insn.blocks)[:, None, None])[0])
            lane = int(plans["D"][1][blk, m, n])
            self.finding("int32-overflow", f"{mnemonic}{_labelled(label)}: int32 accumulator overflow at D[{m}][{n}]"
                         + (f" block {blk % insn.blocks}" if insn.blocks > 1 else ""), lane=lane, instruction=idx,
                         elements=int(overflow.sum()))
        if tr.enabled:
            rec.operands = (self._operands((*regs_in, c), False), self._operands((out,), True))
            tr.raw.append(BatchEvent(idx, insn.mnemonic, self.kernel, self.wg.ids, self.wave_id, rec.source, rec.exec_mask,
                                     rec.operands[0], rec.operands[1], {}, self.lanes, record=rec))
        self.machine.mma_log.add(rec)
        for cov in self._coverage:
            cov.add(self, rec)
        return out

    def _memo(self, name, side, trial=None) -> _OperandMemo:
        return self.__dict__.setdefault(name, {}).setdefault(side, _OperandMemo(trial))

    def _float_operand(self, insn, op, val, ft):
        """An 8-bit operand's numbers gathered through its plan as ``ft`` ``[members*blocks, rows,
        cols]``, remembered by content (QK's A feeds four tiles, PV's W eight D tiles); a side whose
        first MEMO_TRIAL operands were all new (a B loaded afresh for every instruction) is not
        remembered further: its copies would be memory for nothing."""
        memo = self._memo("_float_memo", op, MEMO_TRIAL)
        got = memo.recall(lambda k: k[0] is insn and k[1] is ft and k[2].dtype == val.dtype and
                          k[2].shape == val.shape and _same_planes(k[2], val))
        if got is None:
            got = np.take(val, self._flat_plan(insn, op)).astype(ft)
            memo.remember((insn, ft, val.copy()), got)
        return got

    def _flat_plan(self, insn, op, members=None):
        """The operand plan as flat indices into a ``[regs, members*lanes]`` array (default: the
        batch's columns; a folded batch's provenance has ``pmembers``): ``take`` is faster than
        indexing with two arrays."""
        members = self.members if members is None else members
        key = (insn.mnemonic, op, members, self.lanes, "flat")
        cache = self.machine.plan_cache
        got = cache.get(key)
        if got is None:
            e, l = self._batched_plan(insn, op, members)
            got = cache[key] = np.ascontiguousarray(e * (members * self.lanes) + l)
        return got

    def _d_inverse(self, insn):
        """Where D's flat plan names every element of ``[regs, width]`` once and C's plan is D's
        (a matrix instruction's accumulator layout): for each element, its index into the sums
        (``_mma_i8``'s ``inv``); else None."""
        key = (insn.mnemonic, "D^-1", self.members, self.lanes)
        cache = self.machine.plan_cache
        if key not in cache:
            td, tc = self._flat_plan(insn, "D"), self._flat_plan(insn, "C")
            inv = None
            if td.size == insn.regs("D") * self.width and np.array_equal(td, tc):
                inv = np.full(td.size, -1, np.int64)
                inv[td.reshape(-1)] = np.arange(td.size)
                if (inv < 0).any():
                    inv = None
            cache[key] = inv
        return cache[key]

    def _batched_plan(self, insn, op, members=None):
        """(element, column) index arrays ``[members*blocks, rows, cols]`` of an operand."""
        members = self.members if members is None else members
        key = (insn.mnemonic, op, members, self.lanes)
        cache = self.machine.plan_cache
        got = cache.get(key)
        if got is None:
            e, l = gather_plan(insn, op)
            base = (np.arange(members) * self.lanes)[:, None, None, None]
            got = cache[key] = (np.broadcast_to(e, (members,) + e.shape).reshape((-1,) + e.shape[1:]),
                                (l[None] + base).reshape((-1,) + l.shape[1:]))
        return got

    def _name_planes(self, insn, shape):
        """(member, @mn) planes of D in its registers on the provenance columns (-1 where D has no
        element; a folded batch's columns name their representatives): the same for every
        instruction of this shape and batch, so made once per launch (read-only)."""
        ids = self.pmember_ids
        key = (insn.mnemonic, "names", self.lanes, ids.tobytes())
        got = self.machine.plan_cache.get(key)
        if got is None:
            ed, ld = self._batched_plan(insn, "D", len(ids))
            nb, M, N = ed.shape
            bl = insn.blocks
            member = np.full(shape, -1, np.int32)
            member[ed, ld] = np.broadcast_to(np.repeat(ids, bl)[:, None, None], (nb, M, N))
            mn = np.full(shape, -1, np.int32)
            blk = np.tile(np.arange(bl), len(ids))
            mn[ed, ld] = ((blk[:, None, None] * M + np.arange(M)[None, :, None]) * N + np.arange(N)[None, None, :])
            for p in (member, mn):
                p.setflags(write=False)
            got = self.machine.plan_cache[key] = (member, mn)
        return got

    def _operand_fields(self, insn, operand, p):
        """({field: _Field} gathered through the operand's plan, {field: compact record form},
        {field: K sets of its rows, filled on demand}) of an operand's provenance ``p``. The last
        OPERAND_MEMO operands are remembered by the content of their planes (kept as copies, so an
        in-place write elsewhere cannot make a stale match): one register feeds several instructions
        (QK's A in each of four tiles, PV's W in each of eight D tiles), and its gather, summary and
        K sets are the same each time."""
        items = tuple((f, x) for f, x in p.ids.items() if f not in RESERVED) if p is not None else ()
        memo = self._memo("_operand_memo", operand)
        out = memo.recall(lambda k: k[0] is insn and len(k[1]) == len(items) and all(
            f == g and x.shape == y.shape and _same_planes(x, y) for (f, x), (g, y) in zip(items, k[1])))
        if out is None:
            plan = self._flat_plan(insn, operand, len(self.pmember_ids))
            fields = {f: _Field.gathered(x, plan, operand) for f, x in items}
            out = (fields, {f: v.compact(operand) for f, v in fields.items()}, {})
            memo.remember((insn, tuple((f, np.array(x, copy=True)) for f, x in items)), out)
        return out

    def _mma_provenance(self, insn, a, b, c, idx, rec, live):
        """K-slot check, the record's per-field K-slot values and K sets, and D's provenance, on the
        provenance columns (a folded batch's representatives: ``pmember_ids``)."""
        bl = insn.blocks
        pm = len(self.pmember_ids)
        plans = {op: self._batched_plan(insn, op, pm) for op in "AD"}
        if not self._full:
            self._pexec(f"EXEC of {insn.mnemonic}")       # a folded batch's members all issue it, or none
        wide = self.machine.wide
        pa = self._elem_prov(a, a.n)
        pb = self._elem_prov(b, b.n)
        sa, compact_a, rows_a = self._operand_fields(insn, "A", pa)       # [nb, M, K]
        sb, compact_b, rows_b = self._operand_fields(insn, "B", pb)       # [nb, N, K]
        fa = {f: x.v for f, x in sa.items()}                              # [nb, M, K]
        fb = {f: np.swapaxes(x.v, 1, 2) for f, x in sb.items()}           # [nb, K, N]
        live_rows = np.repeat(live[self.pmember_ids], bl)
        # the K-slot check: on every field both carry, one value per K slot
        for f in sorted(fa.keys() & fb.keys()):
            va, vb = fa[f], fb[f]                                     # [nb, M, K], [nb, K, N]
            la, lb, ha, hb = sa[f].lo_r, sb[f].lo_r, sa[f].hi_r, sb[f].hi_r
            # both sides hold a value in the slot, and the values are not all one
            bad = (ha >= 0) & (hb >= 0) & (np.minimum(la, lb) != np.maximum(ha, hb)) & live_rows[:, None]
            if bad.any():
                for row in np.nonzero(bad.any(axis=1))[0].tolist():
                    k = int(np.argmax(bad[row]))
                    ka_set = sorted(set(va[row, :, k].tolist()) - {-1})
                    kb_set = sorted(set(vb[row, k, :].tolist()) - {-1})
                    lane = int(plans["A"][1][row, 0, k])
                    self.finding("ab-kslot-mismatch", f"{insn.mnemonic}{_labelled(rec.label)}: K slot {k} gets {f} "
                                 f"{ka_set} from A but "
                                 f"{kb_set} from B ({int(bad[row].sum())} K slots disagree)", lane=lane,
                                 instruction=idx, field=f, k_slot=k, a_values=ka_set, b_values=kb_set,
                                 slots=[int(x) for x in np.nonzero(bad[row])[0]])
        rec.a, rec.b = dict(compact_a), dict(compact_b)
        # K sets per field that varies along K (two present values in one A row or B column)
        k_fields = {f for f, x in sa.items() if rec.a[f][0] != "mn" and x.varies()} | \
                   {f for f, x in sb.items() if rec.b[f][0] != "mn" and x.varies()}
        for f in k_fields:
            if f in fa:
                if f not in rows_a:
                    rows_a[f] = _row_sets(fa[f], wide)                 # [nb, M]
                rec.ks_a[f] = rows_a[f]
            if f in fb:
                if f not in rows_b:
                    rows_b[f] = _row_sets(np.swapaxes(fb[f], 1, 2), wide)   # [nb, N]
                rec.ks_b[f] = rows_b[f]
        # D[m][n]: the identities of A row m and B column n (_d_identity), then @mma/@mn
        shape = (insn.regs("D"), self.pw)
        ids = {}
        pc = self._elem_prov(c, c.n)
        fc = {f: np.take(p, self._flat_plan(insn, "C", pm)) for f, p in (pc.ids.items() if pc is not None else ())
              if f not in RESERVED}
        flat_d = self._flat_plan(insn, "D", pm)
        none2, none3 = np.empty((0, 0), np.int32), np.empty((0, 0, 0), np.int32)
        as_i32 = lambda x, empty: empty if x is None else np.ascontiguousarray(x, np.int32)
        for f in sorted(fa.keys() | fb.keys() | fc.keys()):
            ra, cb = _d_identity(f, sa, sb, rec) if f in sa or f in sb else (None, None)   # [nb, M], [nb, N]
            if ra is None and cb is None and f not in fc:
                continue
            plane = np.full(shape, -1, np.int32)
            # D = A.B + C: the row's and column's identity where they agree, then C's element's
            if _d_plane(as_i32(ra, none2), as_i32(cb, none2), as_i32(fc.get(f), none3), flat_d, plane.reshape(-1)):
                ids[f] = plane
        member_plane, mn_plane = self._name_planes(insn, shape)
        ids["@mma"] = np.where(member_plane >= 0, member_plane + np.int32(idx), np.int32(-1))
        ids["@mn"] = mn_plane.copy()
        if pc is not None and "@mma" in pc.ids:
            flat_c = self._flat_plan(insn, "C", pm)
            c_mma, c_mn = np.take(pc.ids["@mma"], flat_c), np.take(pc.ids["@mn"], flat_c)
            prev = self.machine.mma_log.aligned(c_mma, c_mn, insn, self.pmember_ids)
            if prev is not None:         # C is the previous instruction's D, element for element
                rows = None if self.fold is None else prev.rows_of(self.pmember_ids)
                for side, pside in ((rec.ks_a, prev.ks_a), (rec.ks_b, prev.ks_b)):
                    for f in pside.keys() | side.keys():
                        ps = pside.get(f) if rows is None or f not in pside else pside[f].map(lambda x: x[rows])
                        if f in side and f in pside:
                            side[f] = side[f].union(ps, wide)
                        elif f in pside:
                            side[f] = ps
                rec.c_mma, rec.c_mn = prev.c_mma, prev.c_mn
            else:
                rec.c_mma, rec.c_mn = c_mma, c_mn
        return Prov(4, ids)
