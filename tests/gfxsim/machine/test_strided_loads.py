"""A dword load whose members read rows of consecutive dwords (or one dword in every lane) a stride
apart is copied from a strided view of the buffer (dtypes.load_strided, vmem.STRIDED_LOADS): it
gives load_values' values exactly where the addresses are so and declines every other pattern, and a
launch leaves what the gather leaves (values, findings, events, planes), with provenance and without."""
import numpy as np
import pytest

from gfxsim.machine import dtypes as D, vmem
from kernels_py.host import twins as H
from kernels_py.int8_kv_cache import int8_kv_cache
from support.fold import same_buffers, same_runs
from support.twins import kv_setup, wrong_block_size

LANES, MEMBERS = 8, 6


def _addresses(rng, kind: str, size: int) -> np.ndarray:
    stride = 4 * int(rng.integers(LANES, 3 * LANES))
    step = 0 if kind == "uniform" else 4
    if kind == "touching":                       # member m's row right after member m - 1's
        stride = 4 * LANES
    elif kind == "same":                         # every member the same row
        stride = 0
    a0 = 4 * int(rng.integers(0, (size - stride * MEMBERS - 4 * LANES) // 4))
    a = (a0 + stride * np.arange(MEMBERS)[:, None] + step * np.arange(LANES)[None, :]).reshape(-1)
    if kind == "moved":                          # one lane elsewhere
        a[int(rng.integers(LANES, a.size))] += 4
    elif kind == "reversed":                     # a lane order that is not rising
        a[:LANES] = a[:LANES][::-1]
    elif kind == "down":                         # members a stride apart, downwards
        a = a.reshape(MEMBERS, LANES)[::-1].reshape(-1).copy()
    elif kind == "step8":                        # every other dword
        a = (a0 + stride * np.arange(MEMBERS)[:, None] + 8 * np.arange(LANES)[None, :]).reshape(-1)
    return a.astype(np.int64)


@pytest.mark.parametrize("kind", ["rows", "uniform", "touching", "same", "moved", "reversed", "down", "step8"])
@pytest.mark.parametrize("name", ["f32", "i32", "u32"])
@pytest.mark.parametrize("seed", range(3))
def test_load_strided_is_the_gather_or_declines(monkeypatch, kind, name, seed):
    monkeypatch.setattr(D, "STRIDED_MIN", 8)
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, 4096, dtype=np.uint8)
    a = _addresses(rng, kind, raw.size)
    got, want = D.load_strided(raw, a, 4, name, LANES), D.load_values(raw, a, 4, name)
    assert (got is not None) == (kind in ("rows", "uniform", "touching", "same"))
    if got is not None:
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got.view(np.uint32),
                                                                                      want.view(np.uint32))
        raw[:] = 0                               # a copy: the value keeps what was read
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
        got[:] = 0                               # and writing it leaves the buffer alone
        assert not raw.any()
    assert D.load_strided(raw, a, 8, name, LANES) is None                 # two dwords a lane
    assert D.load_strided(raw, a, 4, "f16", LANES) is None                # not dword elements
    assert D.load_strided(raw, a[:LANES], 4, name, LANES) is None          # one member
    monkeypatch.setattr(D, "STRIDED_MIN", 1 << 14)
    assert D.load_strided(raw, a, 4, name, LANES) is None                 # too small to pay


def kv_one_head():
    """40 tokens of one kv head, none padding: full EXEC, each member's K and V rows a token's
    stride after the member before's (copied from rows)."""
    rng = np.random.default_rng(5)
    key, value = (rng.standard_normal((40, 1, 128)).astype(np.float32) for _ in range(2))
    slots = rng.permutation(64)[:40].astype(np.int32)
    return H.kv_cache_buffers(key, value, slots, num_blocks=4, block_size=16)


def kv_two_heads():
    """40 tokens of two kv heads: a batch's members go back to token 0 at kv head 1 (gathered)."""
    rng = np.random.default_rng(6)
    key, value = (rng.standard_normal((40, 2, 128)).astype(np.float32) for _ in range(2))
    slots = rng.permutation(64)[:40].astype(np.int32)
    return H.kv_cache_buffers(key, value, slots, num_blocks=4, block_size=16)


def _runs(monkeypatch, make, kernel, on: bool, provenance: bool):
    monkeypatch.setattr(vmem, "STRIDED_LOADS", on)
    monkeypatch.setattr(D, "STRIDED_MIN", 8)                     # the small batches' loads too
    taken = []
    load_strided = vmem.load_strided
    monkeypatch.setattr(vmem, "load_strided", lambda *a: taken.append(load_strided(*a)) or taken[-1])
    setup = make()
    runs = [setup.launch(kernel, trace=True, provenance=provenance) for _ in range(2)]
    return setup, runs, taken


@pytest.mark.parametrize("make, kernel, finds", [(kv_one_head, int8_kv_cache, False),
                                                 (kv_one_head, wrong_block_size, True),
                                                 (kv_two_heads, int8_kv_cache, False), (kv_setup, int8_kv_cache, False)])
@pytest.mark.parametrize("provenance", [True, False])
def test_strided_loads_leave_what_the_gather_leaves(monkeypatch, make, kernel, finds, provenance):
    (a, ra, _), (b, rb, taken) = (_runs(monkeypatch, make, kernel, on, provenance) for on in (False, True))
    assert any(v is not None for v in taken) == (make is kv_one_head)     # some load copied from rows
    for x, y in zip(ra, rb):
        assert bool(y.findings) == (finds and provenance)      # a store into the wrong slot: a provenance finding
        same_runs(x, y)
    for name in a.outputs:
        same_buffers(a.buffers[name], b.buffers[name], ra[-1].machine.wide, rb[-1].machine.wide)
