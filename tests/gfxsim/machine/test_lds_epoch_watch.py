"""The LDS race watch of a workgroup's waves run side by side (lds_races.EpochWatch: reads kept
and marked only when a write of their epoch is checked, each check made only where the epoch can
hold a hit) finds the first race where checking and marking every access at once finds it."""
import numpy as np
import pytest

from gfxsim.machine.lds_races import EpochWatch, RaceState

MEMBERS, LANES, SIZE = 4, 8, 64


def _eager(accesses):
    """The index of the first access that races (None: none), every access checked against every
    byte's writer and readers of its epoch and recorded at once."""
    w_who, w_ep = np.full(SIZE, -1), np.full(SIZE, -1)
    r_ep, readers = np.full(SIZE, -1), [set() for _ in range(SIZE)]
    for i, (rel, act, nbytes, is_write, epoch, same) in enumerate(accesses):
        touched = [(m, l, int(rel[m, l]) + b) for m in range(MEMBERS) for l in range(LANES)
                   if act is None or act[m, l] for b in range(nbytes)]
        for m, l, b in touched:
            if w_ep[b] == epoch and w_who[b] != m and not (is_write and same is not None and same[m, l]):
                return i
            if is_write and r_ep[b] == epoch and readers[b] - {m}:
                return i
        if is_write and any(len({m for m, _, c in touched if c == b}) > 1 for b in {b for _, _, b in touched}):
            return i
        for m, _, b in touched:
            if is_write:
                w_who[b], w_ep[b] = m, epoch
            else:
                if r_ep[b] != epoch:
                    r_ep[b], readers[b] = epoch, set()
                readers[b].add(m)
    return None


def _accesses(rng, n):
    out, epoch = [], 0
    for _ in range(n):
        epoch += int(rng.random() < 0.15)
        nbytes = int(rng.choice([1, 2, 4, 8]))
        # most accesses keep each member to its own quarter (no race); some stray into another's
        own = np.arange(MEMBERS)[:, None] * (SIZE // MEMBERS)
        slot = rng.integers(0, SIZE // MEMBERS // nbytes, (MEMBERS, LANES)) * nbytes
        rel = np.where(rng.random((MEMBERS, LANES)) < 0.004, rng.integers(0, SIZE // nbytes, (MEMBERS, LANES)) * nbytes,
                       own + slot).astype(np.int64)
        act = None if rng.random() < 0.5 else rng.random((MEMBERS, LANES)) < 0.7
        is_write = bool(rng.random() < 0.4)
        same = rng.random((MEMBERS, LANES)) < 0.5 if is_write and rng.random() < 0.3 else None
        out.append((rel, act, nbytes, is_write, epoch, same))
    return out


@pytest.mark.parametrize("seed", range(60))
def test_the_watch_finds_the_first_race_of_the_eager_check(seed):
    accesses = _accesses(np.random.default_rng(seed), 40)
    watch, st = EpochWatch(), RaceState(1, SIZE)
    got = None
    for i, (rel, act, nbytes, is_write, epoch, same) in enumerate(accesses):
        if watch.race(st, rel, act, nbytes, is_write, epoch, None if same is None else (lambda s=same: s)):
            got = i
            break
    assert got == _eager(accesses)


def test_a_write_meets_a_read_kept_from_earlier_in_its_epoch_only():
    """Member 1 reads bytes that member 0 writes later: a race in the same epoch, none across a barrier."""
    rel = np.zeros((MEMBERS, LANES), np.int64) + np.arange(LANES) * 4
    act = np.zeros((MEMBERS, LANES), bool)
    reader, writer = act.copy(), act.copy()
    reader[1], writer[0] = True, True
    for epochs, races in (((0, 0), True), ((0, 1), False)):
        watch, st = EpochWatch(), RaceState(1, SIZE)
        assert not watch.race(st, rel, reader, 4, False, epochs[0])
        assert watch.race(st, rel, writer, 4, True, epochs[1]) == races
