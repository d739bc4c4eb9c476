"""What a matrix instruction's C carries into its D (D = A.B + C).

C is a partial sum of one output element. It must be the same element's — the row and column
identities A's row m and B's column n give D[m][n] (a query row, a token, a V dim) — and it must not
have consumed already what A.B sums again (a K value summed twice into one element):

* ``accumulator-carried``: C holds another element's identity than D (an accumulator zeroed once
  per chunk instead of once per output tile carries one tile's sums into the next);
* ``double-count``: C's element is D's (or names none), and C's K set meets A row m's or B column
  n's (a k-step issued twice into one chain).
"""
from __future__ import annotations

import numpy as np

from ..arch.kslots import format_token_set
from .consumed import describe, intersect
from .provenance import Mask


def element_name(insn, blk: int, m: int, n: int) -> str:
    """``D[m][n]`` (with its block where the instruction has several)."""
    return f"D[{m}][{n}]" + (f" block {blk}" if insn.blocks > 1 else "")


def report_carried(wave, insn, idx: int, label: str | None, clashes: list, c_mma, c_mn, lanes, live_rows) -> np.ndarray:
    """One ``accumulator-carried`` finding per field whose C disagrees with D's identity.
    ``clashes``: [(field, clash [nb, M, N] D's value where C's differs else -1, C's value [nb, M, N])];
    ``lanes``: D's batch column of each element [nb, M, N]. Returns where any field clashed."""
    log = wave.machine.mma_log
    where = np.zeros(clashes[0][1].shape, bool)
    for f, clash, vc in clashes:
        bad = (clash >= 0) & live_rows[:, None, None]
        where |= bad
        if not bad.any():
            continue
        b, m, n = (int(x) for x in np.argwhere(bad)[0])
        d_val, c_val = int(clash[b, m, n]), int(vc[b, m, n])
        if c_mma is not None and c_mma[b, m, n] >= 0:
            c_from, c_idx = describe(log, int(c_mma[b, m, n]), int(c_mn[b, m, n]))
        else:
            c_from, c_idx = "a value loaded or computed outside a matrix instruction", -1
        elem = element_name(insn, b % insn.blocks, m, n)
        wave.finding("accumulator-carried",
                     f"{insn.mnemonic} {log.describe(idx, label)}: C of {elem} holds {f} {c_val} ({c_from}), "
                     f"but A's row and B's column make {elem} {f} {d_val}: an accumulator carried into another "
                     f"output element ({int(bad.sum())} elements)", lane=int(lanes[b, m, n]), instruction=idx,
                     field=f, element=[m, n], c_value=c_val, d_value=d_val, c_from=c_from, c_instruction=c_idx,
                     elements=int(bad.sum()))
    return where


def _squeezed(m: Mask) -> Mask:
    """``m`` [nb, R] as [nb, 1] where every row of a (workgroup, block) holds one set (every row of A
    and column of B consume the same K values: the common case, one set op per row, not per element)."""
    if (m.base == m.base[:, :1]).all() and (m.wide == m.wide[:, :1]).all() and (m.bits == m.bits[:, :1]).all():
        return m.map(lambda x: x[:, :1])
    return m


def _cells(ks_a: dict, ks_b: dict, f: str, wide) -> Mask | None:
    """A row m's ∪ B column n's K set of field f, as [nb, M or 1, N or 1] (None: neither side has
    it; a side whose rows all hold one set is one row)."""
    parts = []
    if f in ks_a:
        parts.append(_squeezed(ks_a[f]).map(lambda x: x[:, :, None]))
    if f in ks_b:
        parts.append(_squeezed(ks_b[f]).map(lambda x: x[:, None, :]))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else parts[0].union(parts[1], wide)


def _full(m: Mask, shape) -> Mask:
    """``m`` broadcast to leading ``shape`` (contiguous: the set algebra writes and compares whole arrays)."""
    return m.map(lambda x: np.ascontiguousarray(np.broadcast_to(x, tuple(shape) + x.shape[3:])))


def _several(m: Mask) -> np.ndarray:
    """Whether each set holds two values or more (a wide set spans windows: always)."""
    words = m.bits
    nonzero = (words != 0).sum(axis=-1)
    one_word_several = ((words & (words - np.uint64(1))) != 0).any(axis=-1)
    return (m.wide != 0) | (nonzero > 1) | one_word_several


def c_sets(log, prev, rows, c_mma, c_mn, wide) -> dict:
    """{field: [(where, Mask)]}: the K sets C's elements consumed, as parts whose union is the set
    of each element (_parts: A rows', B columns', or "mn" per element [nb, M, N]). ``prev``: the record whose D
    is exactly C (its ``rows``: the record's rows of these members, None all), or None: C's names
    followed through the log."""
    shape = c_mma.shape
    if prev is not None and not prev.chained():
        if rows is None:
            return _parts(prev.ks_a, prev.ks_b)
        fields, at = prev.fields_for(rows)
        pick = lambda x: x[at]
        return _parts({f: m.map(pick) for f, m in fields["ks_a"].items()},
                      {f: m.map(pick) for f, m in fields["ks_b"].items()})
    keep = c_mma.reshape(-1) >= 0
    if not keep.any():
        return {}
    got = log.ksets(c_mma.reshape(-1)[keep], c_mn.reshape(-1)[keep], wide)
    out = {}
    for f, m in got.items():
        full = Mask.empty((c_mma.size,))
        full.assign(np.nonzero(keep)[0], m)
        out[f] = [("mn", full.map(lambda x: x.reshape(shape + x.shape[1:])))]
    return out


def _parts(ks_a: dict, ks_b: dict) -> dict:
    """{field: [(where, Mask)]} of a record's K sets: "m" A rows' [nb, M], "n" B columns' [nb, N]."""
    out: dict = {}
    for f, m in ks_a.items():
        out.setdefault(f, []).append(("m", m))
    for f, m in ks_b.items():
        out.setdefault(f, []).append(("n", m))
    return out


def _placed(where: str, m: Mask) -> Mask:
    """A part as [nb, M, 1], [nb, 1, N] or [nb, M, N] (where "mn")."""
    if where == "m":
        return m.map(lambda x: x[:, :, None])
    return m.map(lambda x: x[:, None, :]) if where == "n" else m


def _one(parts: list, wide):
    """The union of ``parts`` where each holds one set everywhere (the common case: every row of A
    and column of B consume the same K values), as ("n", base, bits) for one window or ("v",
    frozenset); None where some part's sets differ."""
    got = None
    for _, p in parts:
        t = p.one_set()
        if t is None:
            return None
        base, bits, wid = t
        if wid == 0 and (got is None or got[0] == "n" and (got[1] < 0 or base < 0 or got[1] == base)):
            got = ("n", base, bits) if got is None or base >= 0 and got[1] < 0 else \
                ("n", got[1], got[2] | bits) if base < 0 or got[1] == base else ("n", base, bits)
            continue
        vals = _values(("n", base, bits) if wid == 0 else ("w", wid), wide)
        got = ("v", vals if got is None else _values(got, wide) | vals)
    return got


def _values(t, wide) -> frozenset:
    if t[0] == "v":
        return t[1]
    if t[0] == "w":
        return wide.values(t[1])
    if t[1] < 0:
        return frozenset()
    return Mask(np.array([t[1]], np.int64), t[2][None], np.zeros(1, np.uint32)).values_at((0,), wide)


def _disjoint(a, b, wide) -> bool:
    if a[0] == "n" and b[0] == "n":
        return a[1] < 0 or b[1] < 0 or a[1] != b[1] or not (a[2] & b[2]).any()
    return _values(a, wide).isdisjoint(_values(b, wide))


def _union_parts(parts: list, wide) -> Mask:
    out = _placed(*parts[0])
    for p in parts[1:]:
        out = out.union(_placed(*p), wide)
    return out


def report_summed_again(wave, insn, idx: int, label: str | None, ks_a: dict, ks_b: dict, theirs: dict, c_mma, c_mn,
                        lanes, live_rows, skip) -> None:
    """``double-count`` where A row m ∪ B column n (``ks_a``, ``ks_b``: this instruction's own K
    sets) meets what C already consumed (``theirs``, c_sets), on elements C names (c_mma >= 0) and
    whose identities agree (not ``skip``)."""
    if "double-count" in wave.machine.not_checked:       # a front end that cannot follow it (listed)
        return
    log, wide = wave.machine.mma_log, wave.machine.wide
    shape = c_mma.shape
    mine = _parts(ks_a, ks_b)
    for f in sorted(theirs.keys() & mine.keys()):
        one_own, one_c = _one(mine[f], wide), _one(theirs[f], wide)
        if one_own is not None and one_c is not None and _disjoint(one_own, one_c, wide):
            continue                       # one set on each side, and no value in both
        own, c = _cells(ks_a, ks_b, f, wide), _union_parts(theirs[f], wide)
        common = np.broadcast_shapes(own.shape, c.shape)
        own = _full(own, common)
        over = intersect(own, _full(c, common), wide)
        # a field that holds one value along this element's K slots names the element (a
        # query row's head), it is not summed over: only a K range is consumed once
        hit = np.broadcast_to(over.nonempty() & _several(own), shape) & (c_mma >= 0) & live_rows[:, None, None] & ~skip
        if not hit.any():
            continue
        over = over.map(lambda x: np.broadcast_to(x, shape + x.shape[3:]))
        b, m, n = (int(x) for x in np.argwhere(hit)[0])
        vals = sorted(over.values_at((b, m, n), wide))
        left, l_idx = describe(log, int(c_mma[b, m, n]), int(c_mn[b, m, n]))
        right = f"A.B of {insn.mnemonic} {log.describe(idx, label)} {element_name(insn, b % insn.blocks, m, n)}"
        wave.finding("double-count", f"C already consumed {f}s {format_token_set(vals)} that A.B sums again: "
                     f"{left} + {right} ({int(hit.sum())} elements overlap)", lane=int(lanes[b, m, n]),
                     instruction=idx, field=f, values=vals, left=left, right=right, left_instruction=l_idx,
                     right_instruction=idx, elements=int(hit.sum()))
