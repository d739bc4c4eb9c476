"""Quantization scales: the mark, and the scale-group check where a scale meets a matrix result.

The rule: a scale on K (the summed dimension) must cover every element the instruction consumed
in its K slots. When a marked scale multiplies a value carrying ``@mma`` (a matrix instruction's
result, however it travelled), each element's K set — per field that varies along K, chained
through C — must be a subset of the scale's set in that field (its footprint, or its own value
when it was never reduced). An element outside is a ``scale-group-mismatch``: it took its scale
from another group. A scale covering more than the K set (a per-row Q scale over all 128 dims
applied to each 32-dim k-step) is harmless and not a finding. A scale that names an output element
and was reduced over nothing (a per-token K scale loaded from the cache) is constant along K: it is
checked on M/N only.
"""
from __future__ import annotations

import numpy as np

from . import ops, qdir, scaleparts
from .fold import Unfolded
from .mmalog import PAIR_BASE
from .plans import batched_plan, flat_plan, name_planes
from .jit import njit, running
from .provenance import RESERVED, SCALE, WINDOW, WORDS, Mask, Prov, unique_rows
from .valu import bcast
from .valueprov import elem_prov
from .vgpr import VGPRs


class ScaleOps:
    def group_scale(self, value: VGPRs) -> VGPRs:
        """Mark ``value`` as a quantization scale (a move): its footprint — what it was reduced
        over — is checked against the K set of every matrix result it is applied to."""
        prov = None
        if self.machine.provenance:
            p = elem_prov(self, value, value.n) or Prov(4, {})
            flags = np.full((value.n, self.pw), SCALE, np.uint8) if p.flags is None else p.flags | SCALE
            prov = Prov(p.g, p.ids, p.fp, flags)
        out = self.new_value(value.val.copy(), value.dtype, prov)
        self.event(ops.VALU[("mov", "any")], ins=[value], outs=[out], scale=True)
        return out

    def dequant(self, acc: VGPRs, scale: VGPRs) -> VGPRs:
        """float(acc) * scale: the explicit form of applying a group scale to a matrix result."""
        return acc.to(scale.dtype) * scale

    def check_scale_application(self, a, b, divisor=False) -> bool:
        """Check a product of a marked scale and a matrix result; True when it is one (a dequant)."""
        if not self.machine.provenance:
            return False
        hit = False
        for res, sc in ((a, b),) if divisor else ((a, b), (b, a)):       # acc / s: s is the scale
            if not isinstance(res, VGPRs) or not isinstance(sc, VGPRs) or res.prov is None or sc.prov is None:
                continue
            if "@mma" not in res.prov.ids or sc.prov.flags is None:
                continue
            n = max(res.n, sc.n)
            pr, ps = elem_prov(self, res, n), elem_prov(self, sc, n)
            fl = ps.scale_flag()
            mma = pr.ids.get("@mma")
            if fl is None or mma is None:
                continue
            act = (mma >= 0) & fl & self.pexec("EXEC of a dequant")[None, :]
            if act.any():
                act &= ~self._zero_of_nothing(res, sc, ps, act)
            if act.any():
                hit = True
                self._scale_check(pr, ps, act)
                self._direction_check(sc, pr, ps, act, divisor)
        return hit

    def _direction_check(self, sc: VGPRs, pr: Prov, ps: Prov, act, divisor: bool):
        """The rescale must undo the quantization (qdir.py): an operand made as x*amax^q, its
        result rescaled by amax^e with e == q, has had its scale applied twice."""
        e = qdir.power(ps, act.shape) * np.int8(-1 if divisor else 1)
        act = act & (e != 0)
        if not act.any():
            return
        log = self.machine.mma_log
        sel = np.nonzero(act)
        ids, mns, es = pr.ids["@mma"][sel], pr.ids["@mn"][sel], e[sel]
        for i in np.unique(ids).tolist():
            rec = log.record_of(i)
            if rec is None:
                continue
            insn = rec.insn
            on = ids == i
            x = mns[on]
            fields, row = rec.fields_for((i - rec.first) * insn.blocks + x // (insn.M * insn.N))
            quant = fields.get("quant")        # a folded record's fields may hold none
            if quant is None:
                continue
            for op, at in (("A", (x // insn.N) % insn.M), ("B", x % insn.N)):
                q = quant.get(op)
                if q is None:
                    continue
                bad = (q[row, at] != 0) & (q[row, at] == es[on])
                if bad.any():
                    if self.fold is not None:
                        raise Unfolded("a dequant-direction finding")
                    self._report_direction(sc, i, op, int(es[on][bad][0]), sel[0][on][bad], sel[1][on][bad])

    def _report_direction(self, sc: VGPRs, insn_index: int, op: str, e: int, rows, cols):
        lanes = sorted(set((cols % self.lanes).tolist()))
        v = bcast(sc.val, max(int(rows.max()) + 1, sc.n))[rows[0], cols[0]]
        value = float(v.view(np.float32) if v.dtype == np.uint32 else v)     # the asm front end's words are u32
        name = self.machine.mma_log.describe(insn_index)
        quantized, rescaled = ("x*amax", "amax") if e > 0 else ("x/amax", "1/amax")
        self.finding("dequant-direction",
                     f"operand {op} of instruction {name} was quantized as {quantized} (amax: the extremum its "
                     f"scale was made from), and the result is rescaled by {rescaled} again ({value:.6g} in lane "
                     f"{lanes[0]}) instead of by its inverse: the scale is applied twice, not undone, and every "
                     f"element is off by amax^{2 * e}", lane=int(cols[0]), operand=op,
                     instruction=(at := self.machine.mma_log.trace_index(insn_index)),
                     quantized=quantized, rescaled=rescaled, scale=value, lanes=lanes, mma_event=at)

    def _zero_of_nothing(self, res: VGPRs, sc: VGPRs, ps: Prov, act) -> np.ndarray:
        """Where (of ``act``) a zero scale computed from nothing meets a zero result: compiled code
        writes ``amax >= min ? amax / 127 : 0.f`` for a group whose values are all zero (rows a
        causal mask hides), and the instruction's products for that row are all zero too, so no
        token took another group's scale. A zero scale on a result that is not zero drops what the
        instruction consumed, and is checked as any other scale."""
        nothing = act.copy()
        for x in ps.ids.values():
            nothing &= x < 0
        for m in ps.fp.values():
            nothing &= ~m.nonempty()
        if not nothing.any():
            return nothing
        n = act.shape[0]
        both = bcast(sc.val == 0, n) & bcast(res.val == 0, n)
        return nothing & self.pcols(both, "where a scale of no origin meets a zero result")

    def _scale_check(self, pr: Prov, ps: Prov, act):
        if self._scale_check_in_place(pr, ps, act):
            return
        wide = self.machine.wide
        sel = np.nonzero(act)
        ids, mn = pr.ids["@mma"][sel], pr.ids["@mn"][sel]
        # on M and N the scale must be the result element's own: row r's scale on row r
        for f in sorted((pr.ids.keys() & ps.ids.keys()) - {"@mma", "@mn"}):
            x, y = pr.ids[f][sel], ps.ids[f][sel]
            bad = (x >= 0) & (y >= 0) & (x != y)
            if bad.any():
                self._report_scale(f, ids[bad], Mask.of_values(x[bad]), Mask.of_values(y[bad]), sel[1][bad],
                                   axis="M/N")
        ks = self.machine.mma_log.ksets(ids, mn, wide)
        for f, km in sorted(ks.items()):
            side = scaleparts.side(ps, f, wide, lambda x: x[sel])
            bad = ~km.subset_of(side, wide) & ~_constant_along(ps, f)[sel]
            if bad.any():
                self._report_scale(f, ids[bad], km.map(lambda x: x[bad]), side.map(lambda x: x[bad]),
                                   sel[1][bad])
        self._group_check(pr, ps, set(ks), lambda x: x[sel], np.ones(ids.shape, bool), ids, sel[1])

    def _group_check(self, pr: Prov, ps: Prov, k_fields, pick, on, ids, cols, act=None):
        """On M and N a scale shared by a group (reduced over rows, or tokens, with no value of
        its own) must have been reduced over the element's own row (token): a per-thread group
        taken from another layout gives an element the scale of a group it is not in. ``act``
        (the checked elements in the registers, which ``pick`` gathers: ``on``): the check is
        elementwise, so it is asked there first, and gathered only to report what it found."""
        for f in sorted((pr.ids.keys() & ps.fp.keys()) - set(k_fields) - {"@mma", "@mn"}):
            if act is not None and not self._outside_group(pr, ps, f, lambda x: x, act).any():
                continue
            bad = self._outside_group(pr, ps, f, pick, on)
            if bad.any():
                x, side = pick(pr.ids[f]), ps.fp[f].map(pick)
                self._report_scale(f, ids[bad], Mask.of_values(x[bad]), side.map(lambda v: v[bad]), cols[bad],
                                   axis="group")

    def _outside_group(self, pr: Prov, ps: Prov, f: str, pick, on) -> np.ndarray:
        """``_group_check``'s elements of field ``f`` (through ``pick``, where ``on``) whose value
        is not in the group the scale was reduced over."""
        x = pick(pr.ids[f])
        own = pick(ps.ids[f]) if f in ps.ids else np.full(x.shape, -1, np.int32)
        side = ps.fp[f].map(pick)
        bad = (x >= 0) & (own < 0) & side.nonempty() & on
        if bad.any():
            bad &= ~_holds(side, x, bad, self.machine.wide)
        return bad

    def _scale_check_in_place(self, pr: Prov, ps: Prov, act) -> bool:
        """The common case, done in the instruction's own D layout: the result still sits where its
        instruction wrote it, and its K sets are the record's (chains through C folded in)."""
        mma, mn = pr.ids["@mma"], pr.ids["@mn"]
        rec = self.machine.mma_log.record_of(int(mma[act][0]))
        if rec is None or rec.chained() or rec.insn.elems("D") != mma.shape[0] or \
                len(rec.workgroups) != self.members:
            return False
        insn = rec.insn
        pm = len(self.pmember_ids)
        cache = self.machine.plan_cache
        ed, ld = batched_plan(cache, insn, "D", pm, self.lanes)
        nb, M, N = ed.shape
        # every active element is still the instruction's own D element, in its own register
        member_plane, mn_plane = name_planes(cache, insn, mma.shape, self.pmember_ids, self.lanes)
        if not (((mma == member_plane + np.int32(rec.first)) & (mn == mn_plane) & (member_plane >= 0)) | ~act).all():
            return False
        member = np.repeat(self.pmember_ids, insn.blocks)[:, None, None]
        wide = self.machine.wide
        ids = np.broadcast_to(rec.first + member, (nb, M, N))
        flat = flat_plan(cache, insn, "D", pm, self.lanes)
        ks = rec
        rows = None if self.fold is None else rec.rows_of(self.pmember_ids)     # the record's rows of them
        if rows is not None:              # a folded record's representatives' rows are read as made,
            fields, rows = rec.fields_for(rows)      # not placed for every member first
            ks = _KSets(fields["ks_a"], fields["ks_b"])
        k_fields = ks.ks_a.keys() | ks.ks_b.keys()

        def at_d(x):                      # x [R, L] or [R, L, W] -> [nb, M, N] (+ W)
            return np.take(x.reshape((-1,) + x.shape[2:]), flat, axis=0)
        on = at_d(act)
        for f in sorted(k_fields):
            side = scaleparts.side(ps, f, wide, at_d)
            # K set of D[m][n] = A row m's ∪ B column n's: within the scale's iff both are (so the
            # union is made only to report what went wrong)
            bad = _outside_parts(ks, f, side, rows, wide, nb, M, N)
            bad &= on & ~at_d(_constant_along(ps, f))
            if bad.any():
                a_b = _d_parts(ks, f, nb, M, N, rows)
                km = a_b[0] if len(a_b) == 1 else a_b[0].union(a_b[1], wide)
                self._report_scale(f, ids[bad], km.map(lambda x: x[bad]), side.map(lambda x: x[bad]), ld[bad])
        for f in sorted((pr.ids.keys() & ps.ids.keys()) - {"@mma", "@mn"}):
            x, y = pr.ids[f], ps.ids[f]                  # in the registers; gathered only to report
            if ((x >= 0) & (y >= 0) & (x != y) & act).any():
                x, y = at_d(x), at_d(y)
                bad = (x >= 0) & (y >= 0) & (x != y) & on
                self._report_scale(f, ids[bad], Mask.of_values(x[bad]), Mask.of_values(y[bad]), ld[bad], axis="M/N")
        self._group_check(pr, ps, k_fields, at_d, on, ids, ld, act)
        return True

    def _report_scale(self, field, ids, km: Mask, side: Mask, cols, axis="K"):
        """One finding per instruction, listing each distinct (consumed, scale) pair it saw. A folded
        batch's mismatches, found on its representatives, are every member's: each member's copy
        of the instruction, its values moved by its shift of ``field`` (fold.Fold.for_members)."""
        if self.fold is not None:
            if (ids >= PAIR_BASE).any():         # a sum's elements: reported by the members themselves
                raise Unfolded("a scale-group-mismatch finding on a sum of results")
            ids, km, side, cols = self.fold.for_members(field, ids, km, side, cols, "a scale-group-mismatch")
        self._report_scale_members(field, ids, km, side, cols, axis)

    def _report_scale_members(self, field, ids, km: Mask, side: Mask, cols, axis="K"):
        """``_report_scale`` on every member's elements (``cols``: the batch's columns)."""
        from ..arch.kslots import format_token_set
        wide = self.machine.wide
        key = np.concatenate([ids[:, None].astype(np.int64), km.base[:, None], km.wide[:, None].astype(np.int64),
                              km.bits.view(np.int64), side.base[:, None], side.wide[:, None].astype(np.int64),
                              side.bits.view(np.int64)], axis=1)
        # the distinct (instruction, consumed, scale) rows, in np.unique's (sorted) order: hashed,
        # then the few distinct rows sorted (the contiguous grouping at 16K makes ~100,000 rows a check)
        first, inv = unique_rows(key.view(np.uint64))
        order = np.lexsort(key[first].T[::-1])
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        first, inv = first[order], rank[inv]
        by_insn: dict = {}
        lane_of = (np.asarray(cols) % self.lanes)[np.argsort(inv, kind="stable")]     # grouped by row u
        bounds = np.concatenate([[0], np.cumsum(np.bincount(inv, minlength=len(first)))]).tolist()
        for u, i in enumerate(first.tolist()):
            k_vals, s_vals = km.values_at((i,), wide), side.values_at((i,), wide)
            lanes = sorted(set(lane_of[bounds[u]:bounds[u + 1]].tolist()))
            by_insn.setdefault(int(ids[i]), []).append((k_vals, s_vals, lanes, int(cols[i])))
        for insn_index, mism in by_insn.items():
            k_vals, s_vals, _, col = mism[0]
            foreign, extra = sorted(k_vals - s_vals), sorted(s_vals - k_vals)
            lanes = sorted({l for m in mism for l in m[2]})
            name = self.machine.mma_log.describe(insn_index)        # "#12 (chunk 0 tile 1 j 0)"
            if axis == "K":
                msg = (f"scale applied to the result of instruction {name} was computed over "
                       + (f"{field}s {format_token_set(sorted(s_vals))}" if s_vals else f"no {field}s")
                       + f", but the instruction consumed {format_token_set(sorted(k_vals))}: {len(foreign)} "
                       f"{field}s took their scale from another group {format_token_set(foreign)}")
            elif axis == "group":
                msg = (f"scale of the {field} group {format_token_set(sorted(s_vals))} applied to the result of "
                       f"instruction {name} at {field} {format_token_set(sorted(k_vals))}, which is not in that "
                       f"group: the per-thread group does not match the fragment layout")
            else:
                msg = (f"scale of {field} {format_token_set(sorted(s_vals))} applied to the result of instruction "
                       f"{name} at {field} {format_token_set(sorted(k_vals))}: a scale on M or N must be "
                       f"the element's own")
            if len(mism) > 1:
                msg += f" ({len(mism)} distinct mismatches, see details)"
            at = self.machine.mma_log.trace_index(insn_index)     # a sum of results: the add that made it
            self.finding("scale-group-mismatch", msg, lane=col, for_members=True,
                         instruction=at - col // self.lanes if self.members > 1 else at,
                         field=field, axis={"K": "K", "M/N": "M/N", "group": "M/N group"}[axis],
                         scale_over=sorted(s_vals), k_set=sorted(k_vals), foreign=foreign, extra=extra,
                         lanes=lanes, mma_event=at,
                         mismatches=[{"scale_over": sorted(s), "k_set": sorted(k), "foreign": sorted(k - s),
                                      "lanes": ln} for k, s, ln, _ in mism])


def _holds(side: Mask, x: np.ndarray, where: np.ndarray, wide) -> np.ndarray:
    """Elementwise x ∈ side where ``where`` (x >= 0 there), True elsewhere: ``Mask.of_values(
    np.where(where, x, -1)).subset_of(side, wide)`` in one compiled pass where numba runs; where
    the side is a wide set, by value as subset_of compares it."""
    if not running() or side.bits.shape[-1] != WORDS:
        return Mask.of_values(np.where(where, x, -1)).subset_of(side, wide)
    shape = x.shape

    def flat(a, t):                    # [*shape, ...] contiguous, flattened over shape
        tail = a.shape[len(shape):] if a.ndim > len(shape) else ()
        if a.shape != shape + tail:    # (np.broadcast_to costs microseconds where there is nothing to do)
            a = np.broadcast_to(a, shape + tail)
        return np.ascontiguousarray(a, t).reshape((-1,) + tail)
    xs, ws = flat(x, np.int64), flat(side.wide, np.uint32)
    out = ~flat(where, np.bool_)
    odd = np.zeros(out.shape, np.bool_)
    if _in_windows(xs, flat(side.base, np.int64), flat(side.bits, np.uint64), ws, out, odd, WINDOW):
        for i in np.nonzero(odd)[0].tolist():
            out[i] = int(xs[i]) in wide.values(int(ws[i]))
    return out.reshape(shape)


@njit
def _in_windows(x, base, bits, wide, out, odd, window):
    """``_holds`` where ``out`` is False (to be decided): True where x lies in the element's
    window set; ``odd`` where the set is wide (decided by the caller). Returns whether any is odd."""
    any_odd = False
    for i in range(x.shape[0]):
        if out[i]:
            continue
        if wide[i] != 0:
            odd[i] = True
            any_odd = True
            continue
        b = base[i]
        if b >= 0 and b == (x[i] // window) * window:
            o = x[i] - b
            out[i] = ((bits[i, o // 64] >> np.uint64(o % 64)) & np.uint64(1)) != 0
    return any_odd


class _KSets:
    """A record's K sets (``ks_a``, ``ks_b``) as ``MmaRecord.fields_for`` gives them: what
    ``_outside_parts`` and ``_d_parts`` read of a record."""
    __slots__ = ("ks_a", "ks_b")

    def __init__(self, ks_a: dict, ks_b: dict):
        self.ks_a, self.ks_b = ks_a, ks_b


def _constant_along(ps: Prov, f: str) -> np.ndarray:
    """Per element: whether a scale says nothing of K field ``f`` because it belongs to one output
    element — it names some field (a loaded per-token K scale, a per-row Q scale: checked on M/N as
    the element's own) and was reduced over nothing, so it is constant along K and factors out of
    the sum. A scale of no origin at all names no element and is checked (a constant over no tokens)."""
    shape = ps.shape
    named = np.zeros(shape, bool)
    for g, a in ps.ids.items():
        if g not in RESERVED:
            named |= a >= 0
    for m in ps.fp.values():
        named &= ~m.nonempty()
    if f in ps.ids:
        named &= ps.ids[f] < 0
    return named


def _outside_parts(rec, f: str, side: Mask, rows, wide, nb: int, M: int, N: int) -> np.ndarray:
    """[nb, M, N]: where A row m's or B column n's K set of field ``f`` (``_d_parts``) is not
    within the scale's ``side``. Where numba runs, one compiled pass per part reads the row's or
    column's set in place (no [nb, M, N] broadcast of it); a wide set is compared by value, as
    ``Mask.subset_of`` compares it."""
    bad = np.zeros((nb, M, N), np.bool_)
    held = [(rec.ks_a[f] if rows is None else rec.ks_a[f].map(lambda x: x[rows]), True)] if f in rec.ks_a else []
    if f in rec.ks_b:
        held.append((rec.ks_b[f] if rows is None else rec.ks_b[f].map(lambda x: x[rows]), False))
    if not running() or side.shape != (nb, M, N) or side.bits.shape[-1] != WORDS or \
            any(m.shape != (nb, M if along_m else N) or m.bits.shape[-1] != WORDS for m, along_m in held):
        for part in _d_parts(rec, f, nb, M, N, rows):
            bad |= ~part.subset_of(side, wide)
        return bad
    sb, sbits, sw = (np.ascontiguousarray(x, t) for x, t in ((side.base, np.int64), (side.bits, np.uint64),
                                                           (side.wide, np.uint32)))
    for m, along_m in held:
        pb, pbits, pw = (np.ascontiguousarray(x, t) for x, t in ((m.base, np.int64), (m.bits, np.uint64),
                                                               (m.wide, np.uint32)))
        odd = np.zeros((nb, M, N), np.bool_)
        if _part_outside(pb, pbits, pw, along_m, sb, sbits, sw, bad, odd):
            for b, i, j in zip(*np.nonzero(odd)):
                bad[b, i, j] |= not m.values_at((b, i if along_m else j), wide) <= side.values_at((b, i, j), wide)
    return bad


@njit
def _part_outside(pb, pbits, pw, along_m, sb, sbits, sw, bad, odd):
    """``_outside_parts``' pass over one part (A rows [nb, M] when ``along_m``, else B columns
    [nb, N]): bad |= not (the part's set ⊆ the side's) where both lie in one window (the
    empty set is within any); ``odd`` where a wide set takes part (compared by the caller)."""
    any_odd = False
    for b in range(bad.shape[0]):
        for i in range(bad.shape[1]):
            for j in range(bad.shape[2]):
                r = i if along_m else j
                base, w = pb[b, r], pw[b, r]
                if base < 0 and w == 0:
                    continue
                if w != 0 or sw[b, i, j] != 0:
                    odd[b, i, j] = True
                    any_odd = True
                elif base != sb[b, i, j]:
                    bad[b, i, j] = True
                else:
                    for k in range(pbits.shape[2]):
                        if pbits[b, r, k] & ~sbits[b, i, j, k]:
                            bad[b, i, j] = True
    return any_odd


def _d_parts(rec, f, nb, M, N, rows=None) -> list:
    """A rows' and B columns' K sets of field f as [nb, M, N] views (the rows/columns broadcast),
    of the record's ``rows`` (None: all)."""
    pick = (lambda x: x) if rows is None else (lambda x: x[rows])
    parts = []
    if f in rec.ks_a:
        parts.append(rec.ks_a[f].map(lambda x: np.broadcast_to(pick(x)[:, :, None], (nb, M, N) + x.shape[2:])))
    if f in rec.ks_b:
        parts.append(rec.ks_b[f].map(lambda x: np.broadcast_to(pick(x)[:, None, :], (nb, M, N) + x.shape[2:])))
    return parts


__all__ = ["ScaleOps"]

