"""A buffer's footprint plane as a table of distinct sets and an index (fpplane.FpPlane) holds, entry
for entry, the triples a dense Mask plane (DensePlane) holds: through stores of few and of many
distinct sets, wide ids, clears, per-byte repeats, loads of any shape and compactions; and a launch
with tabled planes leaves what one with dense planes leaves (memory.TABLED_FOOTPRINTS), through
folded attempts taken back (put_back) and findings."""
import numpy as np
import pytest

from gfxsim.machine import fpplane, memory
from gfxsim.machine.fpplane import DensePlane, FpPlane
from gfxsim.machine.provenance import WORDS, Mask
from kernels_py.prefix_prefill import prefix_prefill
from support.fold import same_buffers, same_runs
from support.twins import kv_setup, prefill_setup, wrong_block_size


def _same(a: Mask, b: Mask):
    assert a.base.shape == b.base.shape and a.bits.shape == b.bits.shape
    assert a.base.dtype == b.base.dtype and a.bits.dtype == b.bits.dtype and a.wide.dtype == b.wide.dtype
    assert np.array_equal(a.base, b.base) and np.array_equal(a.bits, b.bits) and np.array_equal(a.wide, b.wide)


def _masks(rng, shape, distinct):
    """Sets drawn from ``distinct`` triples (some empty, some wide, one with bits but no base)."""
    k = distinct
    base = rng.choice([-1, 0, 256, 512, 4096], k).astype(np.int64)
    bits = rng.integers(0, 2 ** 63, (k, WORDS), dtype=np.uint64) & rng.choice(
        np.array([0, 1, 0xFF, 2 ** 64 - 1], np.uint64), (k, WORDS))
    wide = np.where(rng.random(k) < 0.2, rng.integers(1, 9, k), 0).astype(np.uint32)
    pick = rng.integers(0, k, shape)
    return Mask(base[pick], bits[pick], wide[pick])


@pytest.mark.parametrize("compact_rows", [4096, 3])
def test_tabled_plane_holds_what_a_dense_plane_holds(monkeypatch, compact_rows):
    monkeypatch.setattr(FpPlane, "COMPACT_ROWS", compact_rows)
    rng = np.random.default_rng(11)
    n = 512
    t, d = FpPlane(n), DensePlane(n)
    for step in range(60):
        shape = (int(rng.integers(1, 5)), int(rng.integers(1, 40)))
        idx = rng.choice(n, shape[0] * shape[1], replace=False).reshape(shape)
        if step % 7 == 3:
            t.clear(idx), d.clear(idx)
        else:
            m = _masks(rng, shape, int(rng.choice([1, 3, 200])))
            t.assign(idx, m), d.assign(idx, m)
        look = rng.integers(0, n, (int(rng.integers(1, 6)), int(rng.integers(1, 50))))
        _same(t.take(look), d.take(look))
        _same(t.mask(), d.mask())
    assert t.table.base.shape[0] <= max(compact_rows, 2 * n) + 200        # compacted: bounded
    _same(t.repeat(4).mask(), d.repeat(4).mask())
    r = t.repeat(2)                                  # a repeat's table is its own
    m = _masks(rng, (1, 8), 8)
    r.assign(np.arange(8)[None, :], m)
    _same(t.mask(), d.mask())
    _same(r.take(np.arange(8)[None, :]), m)


def test_a_plane_breaks_when_its_index_is_wrong():
    """The comparison can fail: an entry pointing at another row is seen."""
    rng = np.random.default_rng(2)
    t, d = FpPlane(64), DensePlane(64)
    m = _masks(rng, (1, 64), 5)
    t.assign(np.arange(64)[None, :], m), d.assign(np.arange(64)[None, :], m)
    t.index[7] = (t.index[7] + 1) % t.table.base.shape[0]
    with pytest.raises(AssertionError):
        _same(t.mask(), d.mask())


def _launches(monkeypatch, setup, kernel, tabled, launches=1):
    monkeypatch.setattr(memory, "TABLED_FOOTPRINTS", tabled)
    s = setup()
    return s, [s.launch(kernel, trace=False) for _ in range(launches)]


@pytest.mark.parametrize("setup, kernel, finds, launches", [
    (prefill_setup, prefix_prefill, False, 1),
    (kv_setup, None, False, 2),
    (kv_setup, wrong_block_size, True, 1),
])
def test_a_launch_with_tabled_planes_leaves_what_dense_planes_leave(monkeypatch, setup, kernel, finds, launches):
    if kernel is None:
        from kernels_py.int8_kv_cache import int8_kv_cache as kernel
    (dense, ra), (tabled, rb) = (_launches(monkeypatch, setup, kernel, on, launches) for on in (False, True))
    for x, y in zip(ra, rb):
        assert bool(y.findings) == finds
        same_runs(x, y)
    some = False
    for name in dense.outputs:
        a, b = dense.buffers[name], tabled.buffers[name]
        same_buffers(a, b, ra[-1].machine.wide, rb[-1].machine.wide)
        if b.prov is not None:
            for f, m in b.prov.fp.items():
                assert isinstance(m, FpPlane) and isinstance(a.prov.fp[f], DensePlane)
                _same(m.mask(), a.prov.fp[f].mask())       # bit for bit, wide ids too
                some = some or bool(m.mask().nonempty().any())
    assert some                                            # footprints were stored and compared


# ---- one set in every entry (fpplane.ONE_SET): looked up once, the rows and table of the hash path
def _table_state(t: FpPlane):
    return t.index.copy(), t.table.base.copy(), t.table.bits.copy(), t.table.wide.copy()


@pytest.mark.parametrize("compact_rows", [4096, 3])
def test_one_set_everywhere_gives_the_hash_paths_rows_and_table(monkeypatch, compact_rows):
    """Planes of one set (new, already held, empty, wide, a base with no bits) and planes that part
    only in base, wide or bits: the same rows returned and the same table and index as rows_of
    hashing every entry."""
    monkeypatch.setattr(FpPlane, "COMPACT_ROWS", compact_rows)
    states, rows = [], []
    for one in (True, False):
        monkeypatch.setattr(fpplane, "ONE_SET", one)
        rng = np.random.default_rng(7)
        n = 256
        t = FpPlane(n)
        got = []
        for step in range(50):
            shape = (int(rng.integers(1, 5)), int(rng.integers(1, 30)))
            idx = rng.choice(n, shape[0] * shape[1], replace=False).reshape(shape)
            m = _masks(rng, shape, 1 if step % 3 else 4)          # mostly one set
            if step % 5 == 4:                                      # parts in one entry, one plane only
                which = step // 5 % 3
                x = (m.base, m.wide, m.bits)[which]
                x.flat[-1] = x.flat[-1] + 1 if which != 2 else x.flat[-1] ^ np.uint64(1)
            got.append(t.rows_of(m))
            if step % 7 == 3:
                t.clear(idx)
            else:
                t.assign(idx, m)
        rows.append(got)
        states.append(_table_state(t))
    for a, b in zip(*rows):
        assert a.dtype == b.dtype == np.int32 and np.array_equal(a, b)
    for a, b in zip(*states):
        assert np.array_equal(a, b)


def test_one_set_is_seen_to_part_in_any_plane():
    """The check can fail: an entry whose base, wide id or one word differs is not entry 0's set."""
    base, wide, bits = np.zeros(8, np.int64), np.zeros(8, np.uint32), np.zeros((8, WORDS), np.uint64)
    assert fpplane._one_set(base, wide, bits)
    for x, at in ((base, 5), (wide, 7), (bits, (3, WORDS - 1))):
        x[at] = 1
        assert not fpplane._one_set(base, wide, bits)
        x[at] = 0


@pytest.mark.parametrize("kernel", [None, wrong_block_size])
def test_a_launch_with_one_set_lookups_leaves_what_hashing_leaves(monkeypatch, kernel):
    """int8_kv_cache's scales (one set in every lane 0 of a batch) with provenance, twice over one
    setup: the same runs, buffers and footprint planes bit for bit, table rows included."""
    if kernel is None:
        from kernels_py.int8_kv_cache import int8_kv_cache as kernel
    out = []
    for one in (False, True):
        monkeypatch.setattr(fpplane, "ONE_SET", one)
        s = kv_setup()
        out.append((s, [s.launch(kernel, trace=False) for _ in range(2)]))
    (a, ra), (b, rb) = out
    for x, y in zip(ra, rb):
        same_runs(x, y)
    some = False
    for name in a.outputs:
        same_buffers(a.buffers[name], b.buffers[name], ra[-1].machine.wide, rb[-1].machine.wide)
        if b.buffers[name].prov is not None:
            for f, m in b.buffers[name].prov.fp.items():
                for x, y in zip(_table_state(a.buffers[name].prov.fp[f]), _table_state(m)):
                    assert np.array_equal(x, y), (name, f)
                some = some or bool(m.mask().nonempty().any())
    assert some
