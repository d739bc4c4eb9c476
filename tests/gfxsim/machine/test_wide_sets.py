"""WideSets (gfxsim/machine/provenance.py): exact sets wider than a window, held as bitsets. A
reduce adds one partition's footprint per step to a sum that holds all earlier ones, and checks
each step's two sides for overlap (consumed.intersect): those must answer from bitsets, without
making a set of values per step (which cost the square of the partitions)."""
import numpy as np
import pytest

from gfxsim.errors import GfxSimError
from gfxsim.machine.consumed import intersect
from gfxsim.machine.provenance import WINDOW, Mask, WideSets


def _window(wide, lo, hi) -> int:
    """The id of values lo..hi-1 of one window."""
    base = lo // WINDOW * WINDOW
    bits = np.zeros(WINDOW, bool)
    bits[lo - base:hi - base] = True
    return wide.intern_window(base, np.packbits(bits, bitorder="little").view("<u8"))


def test_a_growing_sum_is_exact_and_its_overlap_checks_make_no_sets_of_values():
    wide = WideSets()
    acc = 0
    for p in range(64):                       # a reduce over 64 partitions of 256 tokens
        part = _window(wide, 256 * p, 256 * p + 256)
        assert wide.intersection(acc, part) == 0                  # disjoint: no overlap
        acc = wide.union(acc, part)
    again = _window(wide, 256 * 7 + 10, 256 * 7 + 20)
    assert wide.values(wide.intersection(acc, again)) == frozenset(range(256 * 7 + 10, 256 * 7 + 20))
    assert wide._sets.keys() == {wide.intersection(acc, again)}     # only the set asked for
    assert wide.values(acc) == frozenset(range(256 * 64))


def test_intersect_of_masks_uses_the_bitsets():
    wide = WideSets()
    a = Mask.empty((2,))
    a.wide[:] = wide.union(_window(wide, 0, 256), _window(wide, 256, 300))
    b = Mask.of_values(np.array([299, 300]))
    got = intersect(a, b, wide)
    assert got.values_at((0,), wide) == {299} and got.values_at((1,), wide) == frozenset()


def test_intersect_of_one_pair_of_wide_sets_everywhere_is_each_elements_intersection():
    """consumed.intersect where every element wider than a window holds one pair of sets (a
    chain's sums: one set per side) answers that pair once; elements of other pairs, or narrow,
    still each their own: every element's values are its two sets' common ones."""
    wide = WideSets()
    acc = wide.union(_window(wide, 0, 256), _window(wide, 256, 300))
    other = wide.union(_window(wide, 0, 10), _window(wide, 512, 520))
    for left_ids in ([acc] * 4, [acc, other, acc, acc]):
        a = Mask.empty((4,))
        a.wide[:] = left_ids
        b = Mask.empty((4,))
        b.wide[:] = wide.union(wide.union(_window(wide, 250, 256), _window(wide, 256, 260)), _window(wide, 512, 515))
        b.base[3], b.wide[3] = -1, 0                        # one element empty on the right
        got = intersect(a, b, wide)
        for i in range(4):
            want = a.values_at((i,), wide) & b.values_at((i,), wide)
            assert got.values_at((i,), wide) == want
        assert got.values_at((0,), wide) == frozenset(range(250, 260)) and got.values_at((3,), wide) == frozenset()


def test_truncate_forgets_the_sets_an_attempt_made():
    wide = WideSets()
    x = wide.intern([1, 5, 700])
    n = len(wide.nodes)
    y = wide.union(x, wide.intern([2, 900]))
    assert wide.values(y) == {1, 2, 5, 700, 900}
    wide.truncate(n)
    assert len(wide.nodes) == n and wide.values(x) == {1, 5, 700}
    assert wide.union(x, wide.intern([3])) == n + 1 and wide.values(n + 1) == {1, 3, 5, 700}


def test_a_negative_value_is_refused():
    with pytest.raises(GfxSimError, match="values >= 0"):
        WideSets().intern([3, -1])


def _one_set_masks():
    """Masks that hold one set everywhere, and ones that differ in one element's base, wide id or
    one bit word; contiguous, strided and broadcast; empty and one element."""
    rng = np.random.default_rng(3)
    out = []
    for shape in [(1,), (1, 16), (2, 16, 8), (3, 5)]:
        one = Mask.of_values(np.full(shape, 70))
        out.append(one)
        out.append(one.map(lambda x: np.broadcast_to(x[:, None], (x.shape[0], 4) + x.shape[1:])))
        out.append(one.map(lambda x: x[..., ::1][::-1]))
        vals = rng.integers(-1, 3 * WINDOW, shape)
        out.append(Mask.of_values(vals))
        for field, at in (("base", -1), ("wide", 0), ("bits", 0)):
            m = one.map(lambda x: x.copy())
            arr = getattr(m, field)
            idx = (0,) * len(shape) if at == 0 else tuple(s - 1 for s in shape)
            if field == "base":
                arr[idx] = -1
            elif field == "wide":
                arr[idx] = 7
            else:
                arr[idx + (3,)] ^= np.uint64(1 << 63)
            out.append(m)
    out.append(Mask.empty((0,)))
    return out


def test_one_set_compiled_is_the_numpy_check(monkeypatch):
    """Mask.one_set's compiled pass (numba running) gives the numpy pass's answer, bits included."""
    from gfxsim.machine import jit, provenance
    jit.prewarm()
    jit.join_start()                         # running(): prewarm's thread has made every module
    provenance._one_triple(np.zeros(1, np.int64), np.zeros((1, 4), np.uint64), np.zeros(1, np.uint32))
    masks = _one_set_masks()
    compiled = [m.one_set() for m in masks]
    monkeypatch.setattr(provenance, "running", lambda: False)
    exact = [m.one_set() for m in masks]
    assert sum(x is not None for x in exact) >= 8 and sum(x is None for x in exact) >= 8
    for c, e in zip(compiled, exact):
        assert (c is None) == (e is None)
        if e is not None:
            assert c[0] == e[0] and c[2] == e[2] and c[1].dtype == e[1].dtype and (c[1] == e[1]).all()


def test_subset_of_many_wide_elements_is_the_one_by_one_answer():
    """Mask.subset_of where wide sets take part on many elements (grouped by their sets) answers
    as the element-by-element comparison of value sets: wide against wide, window and empty."""
    rng = np.random.default_rng(5)
    wide = WideSets()
    ids = [wide.intern(set(rng.integers(0, 2000, n).tolist()) | {1}) for n in (3, 300, 900)]
    ids.append(wide.union(ids[0], ids[2]))
    n = 400

    def mask(kind):
        m = Mask.of_values(np.where(kind == 0, -1, rng.integers(0, 3, n) * 5 + 1))
        w = kind >= 2
        m.wide[w] = np.array(ids, np.uint32)[rng.integers(0, len(ids), n)][w]
        m.base[w], m.bits[w] = -1, 0
        return m
    a, b = mask(rng.integers(0, 4, n)), mask(rng.integers(0, 4, n))
    got = a.subset_of(b, wide)
    want = np.array([a.values_at((i,), wide) <= b.values_at((i,), wide) for i in range(n)])
    assert (got == want).all() and want.any() and not want.all()
    assert ((a.wide != 0) | (b.wide != 0)).sum() > 100          # the grouped path, not the one-by-one
