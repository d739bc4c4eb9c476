"""A value's provenance as the units combine it: per element (``elem_prov``), merged from two
operands (``merged``: the identity fields they agree on, a product's or extremum's names, and a sum
of two matrix results named by a pair record, ``sum_of_results``).

Every function takes the wave ``w`` whose columns the provenance is on (its provenance columns:
``w.pw``; a folded batch's representatives, fold.py) and its machine's mma log.
"""
from __future__ import annotations

import numpy as np

from .consumed import extremum_names, pair_elements, product_names, sum_made
from .dtypes import itemsize
from .encoding import numeric
from .mmalog import PAIR_BASE
from . import identity, qdir
from .provenance import SCALE, Prov, broadcast_rows, merge
from .scaleparts import scale_product
from .vgpr import VGPRs


def elem_prov(w, v: VGPRs, n: int) -> Prov | None:
    """v's provenance per element, broadcast to n elements (None without provenance). A value
    read again and again (a scale applied to every tile, an operand of several statements) keeps
    its last answer while its provenance is the same object (a write gives it a new one; planes
    are not written in place once made): the broadcast and per-element copies are made once."""
    p = v.prov
    if p is None or not w.machine.provenance:
        return None
    got = v.elem_memo
    if got is not None and got[0] is p and got[1] == v.dtype and got[2] == n:
        return got[3]
    out = broadcast_rows(p.per_element(itemsize(v.dtype), w.machine.wide), n)
    if out is not p:
        v.elem_memo = (p, v.dtype, n, out)
    return out


def merged(w, a: VGPRs, b: VGPRs | None, n: int, reducing=False, summing=None, product=False, extremum=False,
           one_element=False, op: str | None = None) -> Prov | None:
    """``summing``: "add"/"sub" (a sum of two named results becomes a pair); ``product``: a mul
    or div (consumed.product_names of two results; of two other values, the cover of their parts,
    scaleparts.scale_product, and the scale mark where both are scales); ``extremum``: max/min
    (consumed.extremum_names); ``one_element``: see sum_of_results; ``op``: the operation's name, for
    its findings."""
    if not w.machine.provenance or (a.prov is None and (b is None or b.prov is None)):
        return None
    pa = numeric(elem_prov(w, a, n))           # arithmetic writes a number of its own type
    if b is None:
        return pa
    pb = numeric(elem_prov(w, b, n))
    what = "product" if product else ("reduction" if (reducing or summing) and not extremum else None)
    out = combine(w, pa, pb, reducing, what, op, (a, b))
    if extremum and out is not None and "@mma" in out.ids:
        out = extremum_names(pa, pb, out)
    if pa is not None and pb is not None and "@mma" in pa.ids and "@mma" in pb.ids:
        if summing:
            out = sum_of_results(w, pa, pb, out, summing, one_element)
        elif product:
            out = product_names(w.machine.mma_log, pa, pb, out)
    elif product:
        out = scale_product(pa, pb, out, w.machine.wide)
        fa, fb = (None if p is None else p.scale_flag() for p in (pa, pb))
        if out is not None and fa is not None and fb is not None and (fa & fb).any():
            # two marked scales multiplied: their product is the scale applied (checked as its parts)
            flags = np.where(fa & fb, SCALE, np.uint8(0)).astype(np.uint8)
            out = Prov(out.g, out.ids, out.fp, flags if out.flags is None else out.flags | flags)
    return out


def combine(w, pa: Prov | None, pb: Prov | None, reducing: bool, what: str | None = None, op: str | None = None,
            values=()) -> Prov | None:
    """merge(pa, pb) of an elementwise operation's operands, checked by identity.py: ``what`` is
    "product" or "reduction" (an add, sub or extremum; None: not checked); ``values``: the
    operands as values, to name their registers."""
    if what is None or pa is None or pb is None:
        return merge(pa, pb, reducing, w.machine.wide)
    conflicts: dict = {}
    out = merge(pa, pb, reducing, w.machine.wide, conflicts)
    if conflicts:
        identity.check(w, conflicts, pa, pb, what, op, [_reg_name(v) for v in values if _reg_name(v)])
    return out


def _reg_name(v) -> str | None:
    return v.reg_name() if isinstance(v, VGPRs) and v.regs is not None else None


def _marked(v) -> bool:
    return v is not None and v.prov is not None and v.prov.flags is not None and bool((v.prov.flags & qdir.MARKS).any())


def with_marks(w, op: str, a: VGPRs, b: VGPRs | None, out: Prov | None, n: int) -> Prov | None:
    """``out``, the provenance of ``op`` ("mul", "div", "rcp", "extremum", "clamp") of a and b, with its
    quantization-direction marks (qdir.py); untouched where no operand carries one and no
    extremum reduced anything."""
    if out is None or not w.machine.provenance:
        return out
    if not (_marked(a) or _marked(b) or (op == "extremum" and out.fp)):
        return out
    pa = elem_prov(w, a, n) if isinstance(a, VGPRs) else None
    pb = elem_prov(w, b, n) if isinstance(b, VGPRs) else None
    if op == "rcp":
        return qdir.reciprocal(pa, out)
    if op == "clamp":
        return qdir.clamped(pa, out)
    if op == "extremum":
        return qdir.extremum(pa, pb, out)
    return qdir.product(pa, pb, out, divide=op == "div")


def sum_of_results(w, pa: Prov, pb: Prov, out: Prov, op: str = "add", one_element=False) -> Prov:
    """Two matrix results added: the sum's elements are named by a pair record, so a scale
    applied to the sum is checked against both instructions' K sets, and what the sum consumed
    is known (consumed.sum_made; x + x of one element is a pair too: a double count).
    ``one_element``: two operands named by one element of one instruction's result make a
    function of that element, not a sum (compiled code: clang's expf computes x*c_hi + x*c_lo);
    or, an array: where two operands named by the same value differ as numbers they are two
    functions of it (expf's x*c_hi + x*c_lo, a division's Newton step q + e*q), not two
    partial sums; equal, they are that value added to itself (the asm front end's rule); or a
    function giving one of those, called only here (where two results meet)."""
    ia, ib, ma, mb = pa.ids["@mma"], pb.ids["@mma"], pa.ids["@mn"], pb.ids["@mn"]
    both = (ia >= 0) & (ib >= 0)
    same = (ia == ib) & (ma == mb)
    if op == "add" and callable(one_element):
        one_element = one_element()
    if op != "add":
        both &= ~same
    elif isinstance(one_element, np.ndarray):    # per element: the operands differ as numbers
        both &= ~(same & w.pcols(one_element, "an add's operands as numbers"))
    elif one_element:                    # a sum of sums added to itself still is a double count
        both &= ~(same & (ia < PAIR_BASE))
    if not both.any():
        return out
    r, c = pair_elements(both, w.lanes)          # member by member (a folded batch: class by class)
    left, right = (ia[r, c], ma[r, c]), (ib[r, c], mb[r, c])       # int32
    log = w.machine.mma_log
    site = (w.machine.trace.n_events, w.source(), w.wave_id, w.wg.ids, w.lanes)     # where the add ran
    if w.fold is None:
        pid = log.add_pair(left, right, site, _member_base(c // w.lanes, w.members))
        names, folded = np.arange(len(r), dtype=np.int32), None
    else:                                          # every member's elements, their names shifted
        pid, names, src, member = w.fold.pair(log, left, right, c // w.lanes, site)
        folded = (left, right, src, member)
    sum_made(w, pid, pa, pb, (r, c), op, folded)
    ids = dict(out.ids)
    mma = ids.get("@mma")
    mma = np.full(both.shape, -1, np.int32) if mma is None else mma.copy()
    mn = ids.get("@mn")
    mn = np.full(both.shape, -1, np.int32) if mn is None else mn.copy()
    mma[r, c] = pid
    mn[r, c] = names
    ids["@mma"], ids["@mn"] = mma, mn
    return Prov(out.g, ids, out.fp, out.flags)


def _member_base(member_of_elem, members) -> np.ndarray:
    """Where each member's elements start in a pair record held member by member ([members + 1])."""
    if members == 1 and not member_of_elem.any():          # one member: all of them, no count
        return np.array([0, len(member_of_elem)], np.int64)
    return np.concatenate([[0], np.cumsum(np.bincount(member_of_elem, minlength=members))]).astype(np.int64)


def stored_prov(p: Prov | None, nbytes: int, act: np.ndarray, full: bool) -> Prov | None:
    """Of provenance ``p`` (a value's), the first ``nbytes`` in the active columns ``act`` (rows of its own g)."""
    if p is None:
        return None
    if nbytes % p.g:
        p = p.per_byte()
    rows = nbytes // p.g
    if full:
        return p.map(lambda a: a[:rows])
    cols = np.flatnonzero(act)                   # take by column index: faster than a boolean mask
    return p.map(lambda a: np.take(a[:rows], cols, axis=1))
