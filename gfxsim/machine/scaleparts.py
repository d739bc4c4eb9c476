"""A product of scales checked as its parts: ``acc * (sQ * sK)`` is right only where each factor
covers what the instruction summed.

A footprint is what a value's reductions consumed, so the product of two reductions carries the
union of their footprints (``merge``). A scale check needs the other set: the K set must lie in
*each* factor's group, so in their intersection. A product of two values that both hold a set in
field ``f`` (a footprint or an identity) keeps that intersection as the footprint of the cover
field ``&f`` where it is smaller than the union; the scale check (scales.py) compares the K set
with the cover where one is held. The cover travels with moves, selects, conversions and further
products (each one intersected again) and is dropped by every other merge (a sum of two products
is no product of scales), so it is never smaller than what a chain of pure products covers.

Limit: an intersection that is empty is not held (the union stands for it).
"""
from __future__ import annotations

import numpy as np

from .provenance import COVER, RESERVED, WINDOW, Mask, Prov, WideSets


def cover_field(f: str) -> str:
    """The cover field of identity field ``f``."""
    return COVER + f


def base_field(f: str) -> str:
    """The identity field a (cover) footprint field is about."""
    return f[len(COVER):] if f.startswith(COVER) else f


def side(p: Prov, f: str, wide: WideSets, pick=None) -> Mask:
    """What scale ``p`` covers in field ``f`` per element: its cover where it holds one, else its
    footprint and identity (``pick``: an indexing applied to every plane first)."""
    pick = pick or (lambda x: x)
    own = p.fp[f].map(pick) if f in p.fp else None
    if f in p.ids:
        ident = Mask.of_values(pick(p.ids[f]))
        own = ident if own is None else own.union(ident, wide)
    if own is None:
        own = Mask.empty(pick(next(iter(p.arrays()))).shape)
    c = p.fp.get(cover_field(f))
    if c is None:
        return own
    c = c.map(pick)
    return Mask.where(c.nonempty(), c, own)


def scale_product(pa: Prov | None, pb: Prov | None, out: Prov | None, wide: WideSets) -> Prov | None:
    """``out`` (the merged provenance of a product of a and b) with the cover of every field in
    which both factors hold a footprint (or a cover): their intersection, where smaller than the
    union. A matrix result on either side is a dequant, not a product of scales: ``out`` as is."""
    if out is None or pa is None or pb is None or "@mma" in pa.ids or "@mma" in pb.ids:
        return out
    fields = {base_field(f) for f in pa.fp} & {base_field(f) for f in pb.fp}
    fields -= set(RESERVED)
    if not fields:
        return out
    fp = dict(out.fp)
    for f in sorted(fields):
        a, b = side(pa, f, wide), side(pb, f, wide)
        both = a.nonempty() & b.nonempty()
        if not both.any():
            continue
        meet = intersection(a, b, wide)
        union = a.union(b, wide)
        smaller = both & meet.nonempty() & ~union.subset_of(meet, wide)
        if smaller.any():
            fp[cover_field(f)] = Mask.where(smaller, meet, Mask.empty(smaller.shape))
    return Prov(out.g, out.ids, fp, out.flags)


def intersection(a: Mask, b: Mask, wide: WideSets) -> Mask:
    """Elementwise a ∩ b: bitwise where both lie in one window, exactly (by value) where a wide
    set takes part."""
    shape = np.broadcast_shapes(a.base.shape, b.base.shape)
    a, b = _spread(a, shape), _spread(b, shape)
    narrow = (a.wide == 0) & (b.wide == 0)
    same = narrow & (a.base >= 0) & (a.base == b.base)
    bits = np.where(same[..., None], a.bits & b.bits, np.uint64(0)).astype(np.uint64)
    base = np.where(same & bits.any(axis=-1), a.base, -1).astype(np.int64)
    out = Mask(base, bits, np.zeros(shape, np.uint32))
    odd = ~narrow & a.nonempty() & b.nonempty()
    for i in zip(*np.nonzero(odd)):
        vals = sorted(a.values_at(i, wide) & b.values_at(i, wide))
        if not vals:
            continue
        lo = (vals[0] // WINDOW) * WINDOW
        if vals[-1] < lo + WINDOW:
            out.base[i] = lo
            for v in vals:
                out.bits[i][(v - lo) // 64] |= np.uint64(1) << np.uint64((v - lo) % 64)
        else:
            out.wide[i] = wide.intern(vals)
    return out


def _spread(m: Mask, shape) -> Mask:
    """``m`` broadcast (read-only views) to leading ``shape``."""
    return Mask(np.broadcast_to(m.base, shape), np.broadcast_to(m.bits, tuple(shape) + m.bits.shape[-1:]),
                np.broadcast_to(m.wide, shape))


__all__ = ["base_field", "cover_field", "intersection", "scale_product", "side"]
