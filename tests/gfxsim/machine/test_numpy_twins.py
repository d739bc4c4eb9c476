"""While numba starts on prewarm's thread (jit.starting), the fold check and the provenance merges
run numpy twins of their compiled functions instead of waiting: each twin gives its compiled
function's results on the same arrays (random and special values, several classes, reductions,
one side's footprint only, wide sets, steps), and a launch run on the twins leaves what it leaves
on the compiled functions."""
import numpy as np
import pytest

from gfxsim.machine import fold, jit, provenance as P
from kernels_py.int8_kv_cache import int8_kv_cache
from kernels_py.prefix_prefill import prefix_prefill
from support.fold import same_buffers, same_runs
from support.twins import kv_setup as _kv_setup, prefill_setup as _prefill_setup, wrong_block_size as _wrong_block_size


def _planes(rng, R, M, L, classes, consistent):
    """[R, M*L] int32: each member its representative's plane plus a shift (-1s kept), or not."""
    cls = rng.integers(0, classes, M)
    cls[:classes] = np.arange(classes)
    reps = np.array([np.flatnonzero(cls == c)[0] for c in range(classes)])
    base = rng.integers(-1, 50, (R, classes, L)).astype(np.int32)
    shift = rng.integers(-5, 6, M)
    a = np.where(base[:, cls] >= 0, base[:, cls] + shift[None, :, None], -1).astype(np.int32)
    if not consistent:
        r, m, lane = rng.integers(0, R), rng.integers(0, M), rng.integers(0, L)
        a[r, m, lane] += rng.choice([1, 7]) if a[r, m, lane] >= 0 else 3
    rep_cols = (reps[:, None] * L + np.arange(L)).ravel() if classes > 1 else fold._NO_COLS
    return np.ascontiguousarray(a.reshape(R, M * L)), rep_cols, cls.astype(np.int64)


@pytest.mark.parametrize("seed", range(80))
def test_fold_check_twin(seed):
    rng = np.random.default_rng(seed)
    R, M, L = int(rng.integers(1, 4)), int(rng.integers(1, 7)), int(rng.choice([4, 64]))
    classes = int(rng.integers(1, M + 1))
    a, rep_cols, cls = _planes(rng, R, M, L, classes, consistent=seed % 3 != 0)
    if seed % 5 == 0:
        a[:] = -1                                   # no member holds a value
    got = [np.zeros(M, np.int64), np.zeros(M, np.bool_)]
    if seed % 2:                                    # shifts an earlier load set: right, or not
        right = [np.zeros(M, np.int64), np.zeros(M, np.bool_)]
        fold._fold_check(a, rep_cols, cls, L, *right)
        got[1][:] = rng.random(M) < 0.5
        got[0][:] = right[0] if seed % 4 == 1 else rng.integers(-5, 6, M)
    want = [got[0].copy(), got[1].copy()]
    ok = fold._fold_check_numpy(a, rep_cols, cls, L, *got)
    assert ok == fold._fold_check(a, rep_cols, cls, L, *want)
    if ok:
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("seed", range(30))
def test_fold_check_twin_at_the_ends_of_int32(seed):
    """Identities near int32's ends, shifts that carry a member's values past them (its plane then
    wraps) or not, one class and several: the twin answers as the int64 compiled check."""
    rng = np.random.default_rng(seed)
    R, M, L = int(rng.integers(1, 3)), int(rng.integers(2, 6)), 4
    rep = rng.choice(np.array([-1, 0, 5, 2 ** 31 - 3, 2 ** 31 - 1, 2 ** 30], np.int64), (R, 1, L))
    shift = rng.choice(np.array([0, 1, 2, -7, 2 ** 31, -(2 ** 31), 2 ** 32 + 1], np.int64), (1, M, 1))
    shift[0, 0, 0] = 0
    a = np.where(rep >= 0, rep + shift, rep).astype(np.int32).reshape(R, M * L)     # wrapped to int32
    for classes in (1, 2):
        cls = np.arange(M) % classes
        rep_cols = fold._NO_COLS if classes == 1 else np.arange(2 * L)
        if classes == 2:
            a[:, L:2 * L] = a[:, :L]
        got = [np.zeros(M, np.int64), np.zeros(M, np.bool_)]
        want = [np.zeros(M, np.int64), np.zeros(M, np.bool_)]
        ok = fold._fold_check_numpy(np.ascontiguousarray(a), rep_cols, cls, L, *got)
        assert ok == fold._fold_check(np.ascontiguousarray(a), rep_cols, cls, L, *want)
        if ok:
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def _ids(rng, shape, lo=-1, hi=6):
    return rng.integers(lo, hi, shape).astype(np.int32)


@pytest.mark.parametrize("seed", range(30))
def test_merge_ids_and_merge_field_twins(seed):
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 5)), int(rng.integers(1, 130)))
    ia = _ids(rng, shape)
    ib = ia.copy() if seed % 3 == 0 else np.where(rng.random(shape) < 0.7, ia, _ids(rng, shape)).astype(np.int32)
    outs = [(np.full(ia.size, 99, np.int32), np.ones(ia.size, np.bool_)) for _ in range(2)]
    got = P._merge_ids_numpy(ia.reshape(-1), ib.reshape(-1), *outs[0])
    assert got == P._merge_ids(ia.reshape(-1), ib.reshape(-1), *outs[1])
    if not got[0]:                                  # equal planes: out/step left as they were
        assert all(np.array_equal(x, y) for x, y in zip(*outs))
    for reducing in (True, False):
        na = rng.random(shape) < 0.5
        nb = P._shaped(np.bool_(seed % 2 == 0), shape) if seed % 4 == 1 else rng.random(shape) < 0.5
        outs = [(np.full(shape, 99, np.int32), np.ones(shape, np.bool_)) for _ in range(2)]
        got = P._merge_field_numpy(ia, ib, na, nb, reducing, *outs[0])
        assert got == P._merge_field(ia, ib, na, nb, reducing, *outs[1])
        assert all(np.array_equal(x, y) for x, y in zip(*outs))


def _mask(rng, n, has):
    if not has:
        return np.zeros(1, np.int64), np.zeros((1, P.WORDS), np.uint64), np.zeros(1, np.uint32)
    base = rng.choice([-1, 0, P.WINDOW, 2 * P.WINDOW], n).astype(np.int64)
    bits = rng.integers(0, 2 ** 63, (n, P.WORDS), dtype=np.uint64) * np.uint64(rng.integers(1, 3))
    wide = np.where(rng.random(n) < 0.1, rng.integers(1, 5, n), 0).astype(np.uint32)
    return base, bits, wide


@pytest.mark.parametrize("seed", range(40))
def test_merge_fp_twin(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    a_has, b_has = [(True, True), (True, False), (False, True), (False, False)][seed % 4]
    ma, mb = _mask(rng, n, a_has), _mask(rng, n, b_has)
    ia = rng.integers(-1, 3 * P.WINDOW, n).astype(np.int32)
    ib = np.where(rng.random(n) < 0.5, ia, rng.integers(-1, 3 * P.WINDOW, n)).astype(np.int32)
    step = rng.random(n) < 0.4
    outs = [(np.full(n, 7, np.int64), np.full((n, P.WORDS), 5, np.uint64), np.zeros(n, np.bool_)) for _ in range(2)]
    got = P._merge_fp_numpy(*ma, a_has, *mb, b_has, ia, ib, step, P.WINDOW, *outs[0])
    assert got == P._merge_fp(*ma, a_has, *mb, b_has, ia, ib, step, P.WINDOW, *outs[1])
    assert all(np.array_equal(x, y) for x, y in zip(*outs))


@pytest.mark.parametrize("make, kernel", [(_kv_setup, int8_kv_cache), (_kv_setup, _wrong_block_size),
                                          (_prefill_setup, prefix_prefill)])
def test_a_launch_on_the_twins_leaves_what_it_leaves_on_the_compiled_functions(monkeypatch, make, kernel):
    runs = []
    for twins in (False, True):
        with monkeypatch.context() as m:
            if twins:                    # as while numba starts: every call of the two modules
                m.setattr(fold, "starting", lambda mod: True)
                m.setattr(P, "starting", lambda mod: True)
            setup = make()
            runs.append((setup, setup.launch(kernel, trace=False)))
    (sa, ra), (sb, rb) = runs
    assert any(n["members"] > 1 and n["classes"] for n in rb.folds)          # folded batches ran
    assert bool(rb.findings) == (kernel is _wrong_block_size)
    same_runs(ra, rb)
    for name in sa.outputs:
        same_buffers(sa.buffers[name], sb.buffers[name], ra.machine.wide, rb.machine.wide)


def test_starting_only_while_prewarm_is_at_work(monkeypatch):
    """No prewarm at work (none started, or its thread done), or a module that marks no function: the
    compiled path. A module prewarm's thread has made already is still starting: the thread holds the
    lock until it has made every module, so its compiled functions would wait for the rest."""
    monkeypatch.setattr(jit, "_STARTING", False)
    assert not jit.starting(P.__name__)

    monkeypatch.setattr(jit, "_STARTING", True)
    monkeypatch.setitem(jit._LAZY, "some.module", [])
    monkeypatch.setattr(jit, "_JIT_MODULES", jit._JIT_MODULES | {"some.module", "made.module"})
    assert jit.starting("some.module") and jit.starting("made.module") and not jit.starting("not.lazy")


def test_running_only_once_prewarm_is_done(monkeypatch):
    """running(): numba's target has started and prewarm's thread has made every module (it starts
    the target first, then makes the dispatchers under the lock: a compiled call meanwhile waits)."""
    monkeypatch.setattr(jit, "_TARGET_STARTED", True)
    monkeypatch.setattr(jit, "_STARTING", True)
    assert not jit.running()
    monkeypatch.setattr(jit, "_STARTING", False)
    assert jit.running()
    monkeypatch.setattr(jit, "_TARGET_STARTED", False)
    assert not jit.running()


def _window_sets(rng, n):
    """(base, bits, wide) of n sets: empty (-1), a few windows (often equal), wide ids, zero bits."""
    base = rng.choice([-1, 0, P.WINDOW, 2 * P.WINDOW], n).astype(np.int64)
    bits = rng.integers(0, 2 ** 63, (n, P.WORDS), dtype=np.uint64) * np.uint64(rng.integers(1, 3))
    bits[rng.random(n) < 0.2] = 0
    wide = np.where(rng.random(n) < 0.15, rng.integers(1, 5, n), 0).astype(np.uint32)
    return base, bits, wide


@pytest.mark.parametrize("seed", range(40))
def test_union_windows_twin(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    a = _window_sets(rng, n)
    b = _window_sets(rng, n)
    if seed % 3 == 0:                               # b: a's sets, some of them other bits or emptied
        b = (np.where(rng.random(n) < 0.2, -1, a[0]), a[1] ^ (rng.random((n, 1)) < 0.3), a[2].copy())
    if seed % 5 == 0:                               # no wide set on either side
        a[2][:], b[2][:] = 0, 0
    a, b = [tuple(P._frozen(np.ascontiguousarray(x)) for x in m) for m in (a, b)]
    outs = [(np.full(n, 7, np.int64), np.full((n, P.WORDS), 5, np.uint64), np.full(n, 9, np.uint32),
             np.zeros(n, np.bool_)) for _ in range(2)]
    got = P._union_windows_numpy(*a, *b, *outs[0])
    assert got == P._union_windows(*a, *b, *outs[1])
    assert all(np.array_equal(x, y) for x, y in zip(*outs))


@pytest.mark.parametrize("seed", range(40))
def test_subset_windows_twin(seed):
    """[X, Y, Z] sets, b broadcast along an axis (as subset_of passes them) or not, b often a superset."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(x) for x in rng.integers(1, 7, 3))
    a = [x.reshape(shape + x.shape[1:]) for x in _window_sets(rng, int(np.prod(shape)))]
    if seed % 2:                                    # b: a's sets with bits added, some other windows or wide
        b = [a[0].copy(), a[1] | rng.integers(0, 2 ** 63, a[1].shape, dtype=np.uint64) * np.uint64(seed % 4 == 1),
             a[2].copy()]
        b[0][rng.random(shape) < 0.1] = P.WINDOW * 3
        b[2][rng.random(shape) < 0.1] = 1
    else:
        b = [x.reshape(shape + x.shape[1:]) for x in _window_sets(rng, int(np.prod(shape)))]
    if seed % 4 == 0:                               # b one row broadcast along the first axis
        b = [np.broadcast_to(x[:1], x.shape) for x in b]
    if seed % 5 == 0:
        a[2][:] = 0
        b[2] = np.zeros_like(b[2])
    outs = [(np.ones(shape, np.bool_), np.ones(shape, np.bool_)) for _ in range(2)]
    got = P._subset_windows_numpy(*a, *b, *outs[0])
    assert got == P._subset_windows(*a, *b, *outs[1])
    assert all(np.array_equal(x, y) for x, y in zip(*outs))


def test_the_asm_decode_with_provenance_on_the_twins_reports_what_it_reports_compiled(monkeypatch, capsys):
    """The asm decode with provenance (Mask.union's and subset_of's window passes, the merges), every
    call of the provenance module on its numpy twins as while numba starts: the same report."""
    import re
    from support import need_toolchain
    from gfxsim.cli import main
    need_toolchain("gfx936")
    argv = ["run", "paged_attention_decode", "--frontend", "asm", "--context", "1024", "--report", "json", "--quiet"]
    reports, calls = [], []
    for twins in (False, True):
        with monkeypatch.context() as m:
            if twins:
                m.setattr(P, "starting", lambda mod: True)
                for name in ("_union_windows_numpy", "_subset_windows_numpy"):
                    twin = getattr(P, name)
                    m.setattr(P, name, lambda *a, _t=twin, _n=name: calls.append(_n) or _t(*a))
            assert main(argv) in (0, None)
        reports.append(re.sub(r'"seconds":\s*[0-9.]+', "", capsys.readouterr().out))
    assert {"_union_windows_numpy", "_subset_windows_numpy"} <= set(calls)
    assert reports[0] == reports[1] and '"mmacs"' in reports[0]
