"""A store's bytes in aligned runs of 8 are written, logged for an attempt's take-back and marked in
the one-byte provenance planes a uint64 word at a time (gfxsim/machine/byteruns.py,
vmem.BYTE_WORDS): words_of finds exactly the runs, put/take/put_back do what byte indexing does
(duplicates, partial runs, wider planes), and a launch leaves what it leaves byte by byte
(findings, bytes, written bits, planes, footprints), through stores into the wrong slots, attempts
taken back and a second launch."""
import numpy as np
import pytest

from kernels_py.host import twins as H
from kernels_py.int8_kv_cache import int8_kv_cache
from gfxsim.machine import byteruns, fold as F, vmem
from support.fold import same_buffers, same_runs
from support.twins import kv_setup, wrong_block_size


def _runs_by_definition(a: np.ndarray, size: int):
    a = a.reshape(-1)
    if a.size % 8 or size % 8:
        return None
    for j in range(0, a.size, 8):
        if a[j] % 8 or list(a[j:j + 8]) != list(range(a[j], a[j] + 8)):
            return None
    return a[::8] // 8


def _addresses(rng, kind: str, runs: int = 40, size: int = 4096) -> np.ndarray:
    words = rng.integers(0, size // 8, runs)
    a = (words[:, None] * 8 + np.arange(8)).reshape(-1)
    if kind == "shuffled":                       # one run's bytes out of order
        j = 8 * int(rng.integers(runs))
        a[j:j + 8] = a[j:j + 8][::-1]
    elif kind == "misaligned":
        a = a + 1
    elif kind == "moved":                        # one byte elsewhere
        a[int(rng.integers(a.size))] += 8
    elif kind == "strided":                      # a V cache's column: a byte every 16
        a = np.arange(a.size) * 16 % size
    return a.astype(np.int64)


@pytest.mark.parametrize("kind", ["runs", "shuffled", "misaligned", "moved", "strided"])
@pytest.mark.parametrize("seed", range(4))
def test_words_of_finds_exactly_the_aligned_runs(monkeypatch, kind, seed):
    monkeypatch.setattr(byteruns, "MIN_BYTES", 8)
    a = _addresses(np.random.default_rng(seed), kind)
    got, want = byteruns.words_of(a[None, :], 4096), _runs_by_definition(a, 4096)
    assert (got is None) == (want is None) and (kind == "runs") == (got is not None)
    if got is not None:
        assert np.array_equal(got, want)
    assert byteruns.words_of(a[None, :], 4100) is None                 # a memory not of whole words
    monkeypatch.setattr(byteruns, "MIN_BYTES", 1 << 14)
    assert byteruns.words_of(a[None, :], 4096) is None                 # too few bytes to pay


@pytest.mark.parametrize("dtype", [np.uint8, np.bool_, np.int32])
@pytest.mark.parametrize("seed", range(3))
def test_put_take_put_back_are_byte_indexing(monkeypatch, dtype, seed):
    """Runs that land on one word twice (the later wins), a scalar and values of the plane's type."""
    monkeypatch.setattr(byteruns, "MIN_BYTES", 8)
    rng = np.random.default_rng(seed)
    a = _addresses(rng, "runs")
    a = np.concatenate([a, a[:16]])             # two runs written again
    words = byteruns.words_of(a, 4096)
    assert words is not None
    _put_take_put_back_as_bytes(rng, a, words, dtype)


def _interleaved_by_definition(a: np.ndarray, size: int, lanes: int):
    """Word (g, l) of member group g's lane l where byte j of it is member 8g + j's lane l, else None."""
    a = a.reshape(-1)
    if a.size % (8 * lanes) or size % 8:
        return None
    cols = a.reshape(-1, 8, lanes)
    out = []
    for g in range(cols.shape[0]):
        for lane in range(lanes):
            run = [int(x) for x in cols[g, :, lane]]
            if run[0] % 8 or run != list(range(run[0], run[0] + 8)):
                return None
            out.append(run[0] // 8)
    return np.array(out)


def _member_addresses(rng, kind: str, lanes: int = 4, groups: int = 6, size: int = 4096) -> np.ndarray:
    """A V cache column's bytes: member 8g + j's lane l at word (g, l)'s byte j."""
    words = rng.integers(0, size // 8, (groups, lanes))
    if kind == "again":                          # two groups on the same words: the later wins
        words[-1] = words[0]
    a = words[:, None, :] * 8 + np.arange(8)[None, :, None]
    if kind == "shuffled":                       # two members of a group swapped
        g = int(rng.integers(groups))
        a[g, [2, 5]] = a[g, [5, 2]]
    elif kind == "misaligned":
        a = a + 1
    elif kind == "moved":
        a.reshape(-1)[int(rng.integers(a.size))] += 8
    return a.reshape(1, -1).astype(np.int32 if kind == "narrow" else np.int64)


@pytest.mark.parametrize("kind", ["runs", "again", "narrow", "shuffled", "misaligned", "moved"])
@pytest.mark.parametrize("seed", range(4))
def test_words_of_finds_exactly_the_runs_across_members(monkeypatch, kind, seed):
    monkeypatch.setattr(byteruns, "MIN_BYTES", 8)
    a = _member_addresses(np.random.default_rng(seed), kind)
    got, want = byteruns.words_of(a, 4096, 4), _interleaved_by_definition(a, 4096, 4)
    assert (got is None) == (want is None) and (kind in ("runs", "again", "narrow")) == (got is not None)
    if got is not None:
        assert isinstance(got, byteruns.Interleaved) and np.array_equal(got.index, want)
    assert byteruns.words_of(a, 4096) is None                          # no lanes given: runs in order only
    assert byteruns.words_of(np.concatenate([a, a + 1]), 4096, 4) is None      # two bytes a lane
    monkeypatch.setattr(byteruns, "INTERLEAVED", False)
    assert byteruns.words_of(a, 4096, 4) is None


@pytest.mark.parametrize("dtype", [np.uint8, np.bool_, np.int32])
@pytest.mark.parametrize("kind", ["runs", "again"])
@pytest.mark.parametrize("seed", range(3))
def test_put_take_put_back_across_members_are_byte_indexing(monkeypatch, dtype, kind, seed):
    """Groups that land on the words of another (the later column wins), a scalar and values."""
    monkeypatch.setattr(byteruns, "MIN_BYTES", 8)
    rng = np.random.default_rng(seed)
    a = _member_addresses(rng, kind)
    words = byteruns.words_of(a, 4096, 4)
    assert isinstance(words, byteruns.Interleaved)
    _put_take_put_back_as_bytes(rng, a, words, dtype)


def kv_in_order():
    """48 tokens of two kv heads in the slots of a shuffled block table, in order: each 8 tokens'
    V cache bytes of a head element side by side (words across members)."""
    rng = np.random.default_rng(7)
    key, value = (rng.standard_normal((48, 2, 128)).astype(np.float32) for _ in range(2))
    blocks = rng.permutation(4)
    slots = (blocks[np.arange(48) // 16] * 16 + np.arange(48) % 16).astype(np.int32)
    return H.kv_cache_buffers(key, value, slots, num_blocks=4, block_size=16)


def kv_full():
    """40 tokens of two kv heads, none padding, head_dim 128: full EXEC, K cache rows of 16 bytes."""
    rng = np.random.default_rng(5)
    key, value = (rng.standard_normal((40, 2, 128)).astype(np.float32) for _ in range(2))
    slots = rng.permutation(64)[:40].astype(np.int32)
    return H.kv_cache_buffers(key, value, slots, num_blocks=4, block_size=16)


def parted_after_stores(w, key, value, slot_mapping, k_cache, *caches, num_kv_heads, head_dim, block_size):
    """The K cache bytes a member's lanes will store read first (never written), then the
    producer, then a load whose tags part the batch's members: the attempt is taken back with its
    stores, and the members run again read those bytes as they were before it (poison), and store
    what they read."""
    slot = w.scalar_load(slot_mapping, w.workgroup_id[0] * 4, "i32")
    blk, off, d = slot // block_size, slot % block_size, w.lane_id
    head = (blk * num_kv_heads + w.workgroup_id[1]) * head_dim * block_size
    seen = w.global_load(k_cache, (d // 16) * (block_size * 16) + d % 16 + (head + off * 16), 1, "i8")
    int8_kv_cache(w, key, value, slot_mapping, k_cache, *caches, num_kv_heads=num_kv_heads, head_dim=head_dim,
                  block_size=block_size)
    w.global_load(k_cache, d * 0 + slot * 16, 1, "i8")          # every member's lanes one byte: parts them
    w.global_store(k_cache, (d // 16) * (block_size * 16) + d % 16 + (head + off * 16), seen)


def _runs(monkeypatch, make, kernel, on: bool, launches: int, narrow: bool = True):
    monkeypatch.setattr(vmem, "BYTE_WORDS", on)
    monkeypatch.setattr(vmem, "NARROW_STORE_INDEX", narrow)
    monkeypatch.setattr(byteruns, "MIN_BYTES", 8)                # the small batches' stores too
    found, undone = [], []
    words_of = byteruns.words_of
    monkeypatch.setattr(byteruns, "words_of", lambda *a: found.append(words_of(*a)) or found[-1])
    take_back = F.Attempt.take_back
    monkeypatch.setattr(F.Attempt, "take_back", lambda self: undone.extend(self.overwrites) or take_back(self))
    setup = make()
    runs = [setup.launch(kernel, trace=False) for _ in range(launches)]
    return setup, runs, found, undone


@pytest.mark.parametrize("make, kernel, finds", [(kv_full, int8_kv_cache, False), (kv_full, wrong_block_size, True),
                                                 (kv_full, parted_after_stores, False),
                                                 (kv_setup, int8_kv_cache, False), (kv_setup, wrong_block_size, True),
                                                 (kv_in_order, int8_kv_cache, False),
                                                 (kv_in_order, parted_after_stores, False)])
@pytest.mark.parametrize("launches", [1, 2])
def test_words_leave_what_bytes_leave(monkeypatch, make, kernel, finds, launches):
    """Bytes one at a time with the store's index in int64 against words (and across members) with it in int32."""
    (a, ra, _, _), (b, rb, found, undone) = (_runs(monkeypatch, make, kernel, on, launches, narrow=on)
                                             for on in (False, True))
    assert any(w is not None for w in found)              # some store went by words
    if make is kv_in_order:                               # the V cache's across members
        assert any(isinstance(w, byteruns.Interleaved) for w in found)
    if kernel is parted_after_stores:                     # stores by words taken back
        assert any(before[1] is not None for _, before in undone)
    for x, y in zip(ra, rb):
        assert bool(y.findings) == finds
        same_runs(x, y)
    for name in a.outputs:
        same_buffers(a.buffers[name], b.buffers[name], ra[-1].machine.wide, rb[-1].machine.wide)


def _put_take_put_back_as_bytes(rng, a, words, dtype):
    """put, take and put_back through ``words`` leave what byte indexing by ``a`` leaves, for an
    array of values and for one value."""
    x = rng.integers(0, 2, 4096).astype(dtype)
    for v in (rng.integers(0, 200, a.shape).astype(dtype), dtype(1)):
        plain, fast = x.copy(), x.copy()
        saved_plain, saved_fast = byteruns.take(plain, a, None), byteruns.take(fast, a, words)
        plain[a] = v
        byteruns.put(fast, a, words, v)
        assert np.array_equal(plain, fast)
        byteruns.put_back(plain, a, None, saved_plain)
        byteruns.put_back(fast, a, words, saved_fast)
        assert np.array_equal(plain, x) and np.array_equal(fast, x)
