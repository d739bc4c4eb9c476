"""The fused footprint merge (one numba pass, exact fallback where windows differ or a wide set
takes part) gives the same sets as the piecewise Mask algebra it replaced, element by element."""
import numpy as np
import pytest

from gfxsim.machine.provenance import Mask, WideSets, WINDOW, _merged_footprint, _side


def random_mask(rng, shape, wide):
    """Sets of 0-3 values per element from a few windows (some elements wide: values in two)."""
    m = Mask.empty(shape)
    for _ in range(3):
        v = rng.integers(0, 3 * WINDOW, shape)
        v[rng.random(shape) < 0.4] = -1
        if rng.random() < 0.5:                   # mostly one window per element
            v = np.where(v >= 0, v % WINDOW + (rng.integers(0, 2) * WINDOW), -1)
        m = m.union(Mask.of_values(v), wide)
    return m


def sets(m: Mask, wide):
    return [[m.values_at((r, c), wide) for c in range(m.shape[1])] for r in range(m.shape[0])]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("kind", ["steps", "one-sided", "overridden"])
def test_fused_footprint_equals_the_mask_algebra(seed, kind):
    """"one-sided": one operand's footprint, no step, and the other operand's values a subset of
    this one's where present or not (the shared-footprint shortcut, and the window pass when the
    other side is more specific somewhere). "overridden": the other side names a value wherever
    this one's set is nonempty and it has none (S - m): the footprint goes, known without a pass."""
    rng = np.random.default_rng(seed)
    shape = (3, 40)
    wide = WideSets()
    fa = random_mask(rng, shape, wide) if seed % 3 else None
    fb = random_mask(rng, shape, wide) if seed % 4 else None
    ia = np.where(rng.random(shape) < 0.6, rng.integers(0, 3 * WINDOW, shape), -1).astype(np.int32)
    ib = np.where(rng.random(shape) < 0.6, rng.integers(0, 3 * WINDOW, shape), -1).astype(np.int32)
    if seed % 2:                                  # values near each other: mostly one window
        ib = np.where(ib >= 0, ia.clip(0) + rng.integers(0, 8, shape), -1).astype(np.int32)
    step = rng.random(shape) < 0.5
    if kind == "one-sided":
        fa, fb = (fa if fa is not None else random_mask(rng, shape, wide)), None
        step[:] = False
        if seed % 2:                              # b never more specific: a's footprint is shared
            ib = np.where(ia >= 0, ib, -1).astype(np.int32)
    if kind == "overridden":
        fa, fb = (fa if fa is not None else random_mask(rng, shape, wide)), None
        step[:] = False
        ne = fa.nonempty()
        ia = np.where(ne, -1, ia).astype(np.int32)
        ib = np.where(ne, rng.integers(0, 3 * WINDOW, shape), ib).astype(np.int32)
    pa, pb = ia >= 0, ib >= 0
    want = _side(fa, ia, ~(pb & ~pa) | step, step & pa, wide, shape).union(
        _side(fb, ib, ~(pa & ~pb) | step, step & pb, wide, shape), wide)
    got = _merged_footprint(fa, fb, ia, ib, step, wide, shape)
    assert (got is None) == (kind == "overridden")
    got = Mask.empty(shape) if got is None else got
    assert sets(got, wide) == sets(want, wide)
    assert np.array_equal(got.nonempty(), want.nonempty())


@pytest.mark.parametrize("seed", range(6))
def test_operand_field_summary_equals_numpy(seed):
    """summaries.Field: one pass gives what the numpy reductions give (absent values are -1)."""
    from gfxsim.machine.summaries import Field
    rng = np.random.default_rng(seed)
    v = rng.integers(-1, 6, (5, 4, 8)).astype(np.int32)
    if seed % 3 == 0:
        v[:] = v[:, :, :1]                       # constant along K
    if seed % 3 == 1:
        v[:] = v[:, :1, :]                       # constant along the rows
    for view in (v, np.swapaxes(v, 1, 2)):
        x = Field(view)
        big = np.iinfo(np.int32).max
        np.testing.assert_array_equal(x.lo_r, np.where(view >= 0, view, big).min(axis=1))
        np.testing.assert_array_equal(x.hi_r, view.max(axis=1))
        np.testing.assert_array_equal(x.lo_k, np.where(view >= 0, view, big).min(axis=2))
        np.testing.assert_array_equal(x.hi_k, view.max(axis=2))
        assert x.eq_k == bool((view == view[:, :, :1]).all()) and x.eq_r == bool((view == view[:, :1, :]).all())
        one = np.where((x.hi_k >= 0) & (x.lo_k == x.hi_k), x.hi_k, -1)
        np.testing.assert_array_equal(x.one_along_k(), one)
    # gathered from a register plane through an operand plan, in the same pass (B: its [nb, N, K] view)
    plane = rng.integers(-1, 6, (3, 64)).astype(np.int32)
    plan = rng.permutation(plane.size)[:v.size].reshape(v.shape)
    for operand in "AB":
        g = Field.gathered(plane, plan, operand)
        want = Field(plane.reshape(-1)[plan] if operand == "A" else np.swapaxes(plane.reshape(-1)[plan], 1, 2))
        np.testing.assert_array_equal(g.v, want.v)
        for attr in ("lo_r", "hi_r", "lo_k", "hi_k", "eq_r", "eq_k"):
            np.testing.assert_array_equal(getattr(g, attr), getattr(want, attr))


@pytest.mark.parametrize("seed", range(6))
def test_operand_fields_gathered_together_are_each_gathered_alone(seed):
    """summaries.Field.gathered_many (mma_many's distinct operands of a side, stacked): each Field is
    Field.gathered of its plane alone (gather, summary, eq flags per operand: planes constant along
    K, along the rows, all absent, mixed), and row_sets_many of the stack is row_sets of each
    operand's field, or None where some row leaves one window."""
    from gfxsim.machine.summaries import Field, row_sets, row_sets_many
    rng = np.random.default_rng(seed)
    nb, P, Q, n = 2, 4, 8, 5
    plan = rng.permutation(3 * 64)[:nb * P * Q].reshape(nb, P, Q)
    planes = [rng.integers(-1, 6 + 20 * i, (3, 64)).astype(np.int32) for i in range(n)]
    flat = [x.reshape(-1) for x in planes]
    planes[1].reshape(-1)[plan] = flat[1][plan][:, :, :1]         # constant along the plan's last axis
    planes[2].reshape(-1)[plan] = flat[2][plan][:, :1, :]         # along its middle axis
    planes[3][:] = -1                                             # nothing present
    if seed % 2:
        planes[4].reshape(-1)[plan] = 7                           # one value everywhere
    wide = WideSets()
    for operand in "AB":
        got, stacked = Field.gathered_many(planes, plan, operand)
        assert len(got) == n
        for i, (g, x) in enumerate(zip(got, planes)):
            want = Field.gathered(x, plan, operand)
            np.testing.assert_array_equal(g.v, want.v)
            np.testing.assert_array_equal(stacked[i], want.v)
            for attr in ("lo_r", "hi_r", "lo_k", "hi_k", "eq_r", "eq_k"):
                assert np.array_equal(getattr(g, attr), getattr(want, attr)), (operand, i, attr)
            assert g.compact(operand)[0] == want.compact(operand)[0]
            np.testing.assert_array_equal(g.compact(operand)[1], want.compact(operand)[1])
        for i, m in enumerate(row_sets_many(stacked)):
            want = row_sets(got[i].v, wide)
            for attr in ("base", "bits", "wide"):
                np.testing.assert_array_equal(getattr(m, attr), getattr(want, attr))
    wide_plane = planes[0].copy()
    wide_plane.reshape(-1)[plan[0, 0, :2]] = (1, 5 * WINDOW)      # a row across two windows
    assert row_sets_many(Field.gathered_many([planes[1], wide_plane], plan, "A")[1]) is None


@pytest.mark.parametrize("seed", range(8))
def test_subset_equals_set_inclusion(seed):
    """Mask.subset_of (one compiled pass over broadcast views, exact where a wide set takes part)
    is set inclusion, element by element, also when one side is a broadcast row (the scale check
    holds an A row's K set against the scale footprint of every element of the row)."""
    rng = np.random.default_rng(seed)
    wide = WideSets()
    shape = (3, 4, 5)
    a = random_mask(rng, (3, 20), wide).map(lambda x: x.reshape(shape + x.shape[2:]))
    b = random_mask(rng, (3, 20), wide).map(lambda x: x.reshape(shape + x.shape[2:]))
    half = rng.random(shape) < 0.5                 # supersets of a on about half the elements
    b = Mask.where(half, b.union(a, wide), b)
    row = a.map(lambda x: np.broadcast_to(x[:, :, :1], x.shape))        # a constant along the last axis
    for x in (a, row):
        got = x.subset_of(b, wide)
        want = np.array([x.values_at(i, wide) <= b.values_at(i, wide) for i in np.ndindex(shape)]).reshape(shape)
        assert (got == want).all()
        assert got.any() and not got.all()
    flat = a.map(lambda x: x.reshape((60,) + x.shape[3:]))             # 1-D, and 4-D (the numpy path)
    assert (flat.subset_of(b.map(lambda x: x.reshape((60,) + x.shape[3:])), wide) == a.subset_of(b, wide).ravel()).all()
    four = a.map(lambda x: x.reshape((1,) + x.shape))
    assert (four.subset_of(b.map(lambda x: x.reshape((1,) + x.shape)), wide)[0] == a.subset_of(b, wide)).all()


@pytest.mark.parametrize("case", ["equal", "last", "random"])
def test_identity_merge_equals_numpy(case):
    """merge's identity planes: equal or one-sided values survive, conflicts are -1; equal planes
    (most merges) are shared, and a plane that differs only in its last element is still merged."""
    from gfxsim.machine.provenance import Prov, merge
    rng = np.random.default_rng(1)
    a = rng.integers(-1, 5, (4, 96)).astype(np.int32)
    b = a.copy() if case != "random" else rng.integers(-1, 5, (4, 96)).astype(np.int32)
    if case == "last":
        b[-1, -1] = 7 if a[-1, -1] >= 0 else 3
    out = merge(Prov(4, {"token": a}), Prov(4, {"token": b}), False, WideSets())
    want = np.where((a >= 0) & (b >= 0) & (a != b), -1, np.where(a >= 0, a, b))
    np.testing.assert_array_equal(out.ids["token"], want)
    assert (out.ids["token"] is a) == (case == "equal")
    stepped = "token" in out.fp
    assert stepped == bool(((a >= 0) & (b >= 0) & (a != b)).any())


def test_row_sets_are_the_rows_values():
    """summaries.row_sets: each row's present values as a set, read in place from a strided view (B's
    [nb, N, K]), exactly (a WideSets set) where a row's values leave one window."""
    from gfxsim.machine.summaries import row_sets
    rng = np.random.default_rng(0)
    wide = WideSets()
    v = rng.integers(-1, 3 * WINDOW, (3, 5, 8)).astype(np.int32)
    v[0] = rng.integers(0, 100, (5, 8))                 # one window
    for arr in (v, np.swapaxes(v, 1, 2), v[0]):
        m = row_sets(arr, wide)
        assert m.shape == arr.shape[:-1]
        for i in np.ndindex(arr.shape[:-1]):
            assert m.values_at(i, wide) == frozenset(int(x) for x in arr[i] if x >= 0)
    assert (row_sets(v, wide).wide != 0).any() and (row_sets(v, wide).wide == 0).any()


def _one_set_mask(rng, shape, wide, kind):
    """A mask holding one set everywhere: empty, one window, or wide (values in two windows)."""
    if kind == "empty":
        return Mask.empty(shape)
    base = int(rng.integers(0, 3)) * WINDOW
    v = np.full(shape, base + int(rng.integers(0, WINDOW)))
    m = Mask.empty(shape)._union(Mask.of_values(v), wide, shape)               # the element-wise pass
    if kind == "wide":
        m = m._union(Mask.of_values(np.full(shape, (base + WINDOW + int(rng.integers(0, WINDOW))))), wide, shape)
    return m


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kinds", [("empty", "empty"), ("window", "empty"), ("empty", "window"), ("window", "window"),
                                   ("wide", "empty"), ("empty", "wide"), ("wide", "window"), ("window", "wide"),
                                   ("wide", "wide")])
def test_union_of_one_set_masks_equals_the_elementwise_union(seed, kinds):
    """Mask.union of two masks that each hold one set everywhere is computed once and filled: the
    same triples (base, bits, wide) as the element-wise pass with its exact fallback, and the same
    WideSets afterwards (the same windows interned in the same order). Shapes broadcast."""
    rng = np.random.default_rng(seed)
    wa, wb = WideSets(), WideSets()
    a1 = _one_set_mask(np.random.default_rng(seed), (3, 40), wa, kinds[0])
    a2 = _one_set_mask(np.random.default_rng(seed), (3, 40), wb, kinds[0])
    b1 = _one_set_mask(np.random.default_rng(seed + 100), (1, 40), wa, kinds[1])
    b2 = _one_set_mask(np.random.default_rng(seed + 100), (1, 40), wb, kinds[1])
    assert a1.one_set() is not None and b1.one_set() is not None
    fast = a1.union(b1, wa)
    slow = a2._union(b2, wb, (3, 40))
    for x, y in ((fast.base, slow.base), (fast.bits, slow.bits), (fast.wide, slow.wide)):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert wa.nodes == wb.nodes
    assert sets(fast, wa) == sets(slow, wb)
    fast.base[0, 0] = fast.base[0, 0]                 # writable, like the pass's output
    mixed = a1.union(random_mask(rng, (3, 40), wa), wa)          # not one set: the pass
    assert mixed.base.shape == (3, 40)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("sides", ["both", "a", "b"])
def test_a_select_of_whole_words_is_the_select_of_their_bytes(seed, sides):
    """Prov.select of two per-element (4-byte) provenances, placed per byte, is the select of their
    bytes (v_cndmask_b32's word move selects the words' provenance): identities, footprints, flags."""
    from gfxsim.machine.provenance import Prov
    rng = np.random.default_rng(seed)
    wide, W = WideSets(), 16

    def prov():
        ids = {f: np.where(rng.random((1, W)) < 0.3, -1, rng.integers(0, 50, (1, W))).astype(np.int32)
               for f in ("token", "head")[:int(rng.integers(1, 3))]}
        fp = {"token": random_mask(rng, (1, W), wide)} if rng.random() < 0.7 else {}
        flags = rng.integers(0, 4, (1, W)).astype(np.uint8) if rng.random() < 0.5 else None
        return Prov(4, ids, fp, flags)
    a = prov() if sides in ("both", "a") else None
    b = prov() if sides in ("both", "b") else None
    cond = rng.random((1, W)) < 0.5
    words = Prov.select(cond, a, b, (1, W)).per_byte()
    nbytes = Prov.select(cond, None if a is None else a.per_byte(), None if b is None else b.per_byte(), (4, W))
    assert words.g == nbytes.g == 1 and words.ids.keys() == nbytes.ids.keys() and words.fp.keys() == nbytes.fp.keys()
    for f in words.ids:
        assert np.array_equal(words.ids[f], nbytes.ids[f])
    for f in words.fp:
        assert sets(words.fp[f], wide) == sets(nbytes.fp[f], wide)
        for name in ("base", "bits", "wide"):
            assert np.array_equal(getattr(words.fp[f], name), getattr(nbytes.fp[f], name))
    assert (words.flags is None) == (nbytes.flags is None)
    if words.flags is not None:
        assert np.array_equal(words.flags, nbytes.flags)


_ID_FIELDS = [(), ("token",), ("token", "@mma"), ("@mma", "token"), ("token", "&cover")]
_FP_FIELDS = [(), ("token",), ("kset", "token")]        # few field sets: keys recur, plans are reused


def _random_prov(rng, shape, wide, shared):
    """A Prov naming one of a few field sets (identities, footprints, a cover, a pair name; dict
    orders differ), some planes the very objects of ``shared`` (an operand read twice), some flagged."""
    from gfxsim.machine.provenance import Prov
    ids = {}
    for f in _ID_FIELDS[rng.integers(len(_ID_FIELDS))]:
        if rng.random() < 0.3 and f in shared:
            ids[f] = shared[f]
        else:
            ids[f] = np.where(rng.random(shape) < 0.6, rng.integers(0, 3 * WINDOW, shape), -1).astype(np.int32)
    fp = {f: random_mask(rng, shape, wide) for f in _FP_FIELDS[rng.integers(len(_FP_FIELDS))]}
    flags = rng.integers(0, 8, shape).astype(np.uint8) if rng.random() < 0.3 else None
    return Prov(4, ids, fp, flags)


def _same_planes(x, y, wide):
    """Two merges' answers hold the same fields in the same order, identity planes and footprint sets."""
    assert list(x.ids) == list(y.ids) and list(x.fp) == list(y.fp)
    for f in x.ids:
        np.testing.assert_array_equal(x.ids[f], y.ids[f])
    for f in x.fp:
        assert sets(x.fp[f], wide) == sets(y.fp[f], wide)


def test_merge_plan_cache_gives_the_planned_afresh_merge():
    """merge_plan: a merge planned once per set of fields and reused (by operands of other values,
    the same fields) gives every plane, footprint, flag and conflict that planning afresh gives."""
    from gfxsim.machine import provenance
    from gfxsim.machine.provenance import COVER, RESERVED, merge, merge_plan
    rng = np.random.default_rng(5)
    shape = (2, 12)
    wide = WideSets()
    shared = {f: np.where(rng.random(shape) < 0.6, rng.integers(0, 3 * WINDOW, shape), -1).astype(np.int32)
              for f in ("token", "@mma")}
    provenance._PLANS.clear()
    try:
        for _ in range(600):
            a, b = _random_prov(rng, shape, wide, shared), _random_prov(rng, shape, wide, shared)
            reducing = bool(rng.random() < 0.5)
            fields = sorted(a.ids.keys() | b.ids.keys() | a.fp.keys() | b.fp.keys())
            assert merge_plan(a, b) == tuple((f, f in a.ids, f in b.ids, f in a.fp, f in b.fp, f in RESERVED)
                                             for f in fields if not f.startswith(COVER))
            got = []
            for cached in (True, False):
                provenance.PLAN_CACHE = cached
                conflicts: dict = {}
                got.append((merge(a, b, reducing, wide, conflicts), conflicts))
            (x, cx), (y, cy) = got
            if x is None or y is None:
                assert x is y
                continue
            _same_planes(x, y, wide)
            assert (x.flags is None) == (y.flags is None)
            if x.flags is not None:
                np.testing.assert_array_equal(x.flags, y.flags)
            assert list(cx) == list(cy)
            for f in cx:
                np.testing.assert_array_equal(cx[f], cy[f])
        # plans were reused across operands of other values
        assert 1 < len(provenance._PLANS) <= len(_ID_FIELDS) ** 2 * len(_FP_FIELDS) ** 2
    finally:
        provenance.PLAN_CACHE = True


def _of_kind(x: np.ndarray, kind: str) -> np.ndarray:
    """The same values as an array of another kind: writable, read-only, strided or Fortran-ordered."""
    if kind == "readonly":
        x = x.copy()
        x.flags.writeable = False
        return x
    if kind == "strided":
        z = np.empty(x.shape + (2,), x.dtype)
        z[..., 0] = x
        return z[..., 0]
    return np.asfortranarray(x) if kind == "fortran" else x.copy()


def test_compiled_merges_see_one_array_type_whatever_the_planes_kinds(monkeypatch):
    """merge hands its compiled passes read-only C-contiguous inputs (provenance._frozen), so numba
    loads one signature of each, not one per mix of writable flags and layouts; the results are
    those of the same merge of plain writable planes."""
    from gfxsim.machine import provenance
    from gfxsim.machine.provenance import Mask, Prov, merge
    rng = np.random.default_rng(11)
    shape = (2, 12)
    wide = WideSets()
    shared = {"token": np.where(rng.random(shape) < 0.6, rng.integers(0, 3 * WINDOW, shape), -1).astype(np.int32)}
    merge(_random_prov(rng, shape, wide, shared), _random_prov(rng, shape, wide, shared), True, wide)   # compiled
    seen: dict = {}
    names = ("_merge_ids", "_merge_field", "_merge_fp", "_union_windows", "_one_triple")

    def recorder(name, fn):
        def call(*args):
            import numba
            seen.setdefault(name, set()).add(tuple(numba.typeof(x) for x in args))
            return fn(*args)
        return call
    for name in names:
        monkeypatch.setattr(provenance, name, recorder(name, getattr(provenance, name)))
    kinds = ("writable", "readonly", "strided", "fortran")
    for _ in range(300):
        a, b = _random_prov(rng, shape, wide, shared), _random_prov(rng, shape, wide, shared)
        reducing = bool(rng.random() < 0.5)
        want = merge(a, b, reducing, wide)
        for kind in kinds:
            p = [Prov(x.g, {f: _of_kind(v, kind) for f, v in x.ids.items()},
                      {f: m.map(lambda v: _of_kind(v, kind)) for f, m in x.fp.items()}, x.flags) for x in (a, b)]
            got = merge(p[0], p[1], reducing, wide)
            if want is None or got is None:
                assert want is got
                continue
            _same_planes(got, want, wide)
            assert all(isinstance(m, Mask) for m in got.fp.values())
    assert {"_merge_ids", "_merge_field", "_merge_fp"} <= seen.keys()
    for name, types in seen.items():
        assert len(types) == 1, (name, types)
