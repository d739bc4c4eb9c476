"""A folded batch's store checks its value's tag fields on the folded values (vmem.FOLDED_STORE_CHECK,
fold.Fold.agrees) instead of placing them for every member: a launch leaves what it leaves with
every field placed and compared (findings, bytes, written bits, planes, footprints), for the
producer's int8 stores (a row a byte) and the prefill's f32 output (a row per 4 bytes), through
stores into the wrong slots (store-mismatch, the fields placed then) and attempts taken back."""
import numpy as np
import pytest

from kernels_py.host import twins as H
from kernels_py.int8_kv_cache import int8_kv_cache
from kernels_py.prefix_prefill import prefix_prefill
from gfxsim.machine import fold as F, vmem
from support.fold import same_buffers, same_runs
from support.twins import kv_setup, prefill_setup, wrong_block_size


def kv_full():
    """kv_setup without padding tokens: every member's lanes store (full EXEC), one class."""
    rng = np.random.default_rng(5)
    key, value = (rng.standard_normal((40, 2, 64)).astype(np.float32) for _ in range(2))
    slots = rng.permutation(64)[:40].astype(np.int32)
    return H.kv_cache_buffers(key, value, slots, num_blocks=4, block_size=16)


def _runs(monkeypatch, make, kernel, on: bool, launches: int = 1):
    monkeypatch.setattr(vmem, "FOLDED_STORE_CHECK", on)
    monkeypatch.setattr(vmem, "SEPARABLE_STORE_TAGS", False)    # Fold.agrees itself (test_member_tags: the other)
    calls = []
    agrees = F.Fold.agrees
    monkeypatch.setattr(F.Fold, "agrees", lambda self, *a: calls.append(agrees(self, *a)) or calls[-1])
    setup = make()
    runs = [setup.launch(kernel, trace=False) for _ in range(launches)]
    return setup, runs, calls


@pytest.mark.parametrize("make, kernel, finds", [(kv_full, int8_kv_cache, False), (kv_full, wrong_block_size, True),
                                                 (kv_setup, int8_kv_cache, False), (kv_setup, wrong_block_size, True),
                                                 (prefill_setup, prefix_prefill, False)])
@pytest.mark.parametrize("launches", [1, 2])
def test_the_folded_check_leaves_what_placing_every_member_leaves(monkeypatch, make, kernel, finds, launches):
    (a, ra, _), (b, rb, calls) = (_runs(monkeypatch, make, kernel, on, launches) for on in (False, True))
    if make is kv_full:
        assert (False if finds else True) in calls         # it ran: passed, or found what it could not tell
    for x, y in zip(ra, rb):
        assert bool(y.findings) == finds
        same_runs(x, y)
    for name in a.outputs:
        same_buffers(a.buffers[name], b.buffers[name], ra[-1].machine.wide, rb[-1].machine.wide)


def _fold(members, lanes, f, shift, classes=None):
    fd = F.Fold(members, lanes, classes)
    fd.shift[f], fd.known[f] = np.asarray(shift, np.int64), np.ones(members, bool)
    return fd


@pytest.mark.parametrize("seed", range(40))
def test_agrees_is_placing_and_comparing(seed):
    """Fold.agrees against shifted(expand_cols) and array_equal: random planes with -1s, shifts that
    wrap int32, a want that differs in one element or not, unknown members, a field no load set."""
    rng = np.random.default_rng(seed)
    R, M, L = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.choice([4, 64]))
    a = rng.choice(np.array([-1, 0, 3, 2 ** 31 - 2, 77], np.int64), (R, L)).astype(np.int32)
    shift = rng.choice(np.array([0, 1, -3, 2 ** 31, 2 ** 32 + 5], np.int64), M)
    classes = None
    if seed % 2 == 0 and M > 1:                     # several classes, each representative its own values
        classes = rng.integers(0, 3, M)
        classes[:2] = (0, 1)
    fd = _fold(M, L, "token", shift, classes)
    if classes is not None:
        a = np.concatenate([a, rng.choice(np.array([-1, 4, 9, 2 ** 31 - 1], np.int32), (R, (fd.classes - 1) * L))],
                           axis=1)
    if seed % 4 == 1:
        fd.known["token"][rng.integers(0, M)] = False
    if seed % 7 == 3:
        del fd.shift["token"], fd.known["token"]
    member = fd.col_member[None, :]
    try:
        placed = fd.shifted("token", fd.expand_cols(a), member)
    except Exception:
        placed = None
    want = placed.copy() if placed is not None else np.tile(a, (1, M))
    if seed % 3 == 0:
        r, c = rng.integers(0, R), rng.integers(0, M * L)
        want[r, c] += int(rng.choice([1, -1]))
    got = fd.agrees("token", a, want)
    assert got == (placed is not None and np.array_equal(placed, want))
