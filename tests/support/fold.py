"""Comparing two launches of one kernel record by record (folded provenance against every member's,
gfxsim/machine/fold.py): ``same_runs`` (trace length, findings, matrix-instruction records, sums of
results, outputs) and ``same_buffers`` (bytes, written bits and provenance planes of a Buffer)."""
import numpy as np

from gfxsim import Buffer
from gfxsim.machine import fold as F
from gfxsim.machine.provenance import Mask, Prov


def random_fold(rng, M: int, L: int) -> F.Fold:
    """A Fold of M members and L lanes: half the time with classes (members 0 and 1 in classes 0
    and 1, the rest drawn from three), else one class."""
    classes = None
    if M > 1 and rng.random() < 0.5:
        classes = rng.integers(0, 3, M)
        classes[:2] = (0, 1)
    return F.Fold(M, L, classes)


def _same_masks(a: Mask, wa, b: Mask, wb, what):
    assert a.base.shape == b.base.shape, what
    narrow = (a.wide == 0) & (b.wide == 0)
    assert np.array_equal(a.base[narrow], b.base[narrow]) and np.array_equal(a.bits[narrow], b.bits[narrow]), what
    for i in zip(*np.nonzero(~narrow)):           # a set wider than a window: its values (ids may differ)
        assert a.values_at(i, wa) == b.values_at(i, wb), (what, i)


def _same_prov(pa: Prov, wa, pb: Prov, wb, what):
    assert (pa is None) == (pb is None), what
    if pa is None:
        return
    assert pa.g == pb.g and sorted(pa.ids) == sorted(pb.ids) and sorted(pa.fp) == sorted(pb.fp), what
    for f in pa.ids:
        assert np.array_equal(pa.ids[f], pb.ids[f]), (what, f)
    for f in pa.fp:
        _same_masks(pa.fp[f], wa, pb.fp[f], wb, (what, f))
    assert (pa.flags is None) == (pb.flags is None) and (pa.flags is None or np.array_equal(pa.flags, pb.flags)), what


def same_runs(ra, rb):
    """Every record, sum, finding and stored plane of two launches of one kernel agree."""
    ma, mb = ra.machine, rb.machine
    wa, wb = ma.wide, mb.wide
    assert ma.trace.n_events == mb.trace.n_events
    assert [f.to_dict() for f in ra.findings] == [f.to_dict() for f in rb.findings]
    la, lb = ma.mma_log, mb.mma_log
    assert len(la.records) == len(lb.records)
    for x, y in zip(la.records, lb.records):
        what = f"record #{x.first} {x.op}"
        assert (x.first, x.op, x.wave, x.workgroups, x.live, x.source, x.label) == \
            (y.first, y.op, y.wave, y.workgroups, y.live, y.source, y.label), what
        assert np.array_equal(x.exec_mask, y.exec_mask), what
        for sa, sb in ((x.a, y.a), (x.b, y.b)):
            assert (sa is None) == (sb is None), what
            if sa is None:
                continue
            assert sorted(sa) == sorted(sb), what
            for f in sa:
                assert sa[f][0] == sb[f][0] and np.array_equal(sa[f][1], sb[f][1]), (what, f)
        for ka, kb in ((x.ks_a, y.ks_a), (x.ks_b, y.ks_b)):
            assert sorted(ka) == sorted(kb), what
            for f in ka:
                _same_masks(ka[f], wa, kb[f], wb, (what, "K set", f))
        assert (x.c_mma is None) == (y.c_mma is None), what
        if x.c_mma is not None:
            assert np.array_equal(x.c_mma, y.c_mma) and np.array_equal(x.c_mn, y.c_mn), what
    assert len(la.pairs) == len(lb.pairs)
    for k, (x, y) in enumerate(zip(la.pairs, lb.pairs)):
        what = f"sum {k}"
        for sa, sb in ((x.left, y.left), (x.right, y.right)):
            assert all(np.array_equal(u, v) for u, v in zip(sa, sb)), what
        assert np.array_equal(x.cell, y.cell) and np.array_equal(x.member_base, y.member_base), what
        assert x.site == y.site, what
        assert sorted(x.fp) == sorted(y.fp), what
        for f in x.fp:
            for u, v in zip(x.fp[f], y.fp[f]):
                assert (u is None) == (v is None), (what, f)
                if u is not None:
                    _same_masks(u.mask(), wa, v.mask(), wb, (what, f))
    assert [b.name for b, _ in ma.outputs] == [b.name for b, _ in mb.outputs]


def same_buffers(ba: Buffer, bb: Buffer, wa, wb):
    assert np.array_equal(ba.raw, bb.raw), ba.name
    assert (ba.written is None) == (bb.written is None)
    assert ba.written is None or np.array_equal(ba.written, bb.written), ba.name
    assert (ba.prov is None) == (bb.prov is None), ba.name
    if ba.prov is not None:
        _same_prov(ba.prov._planes(), wa, bb.prov._planes(), wb, ba.name)


