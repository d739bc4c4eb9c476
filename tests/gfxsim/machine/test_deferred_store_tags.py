"""A folded store's tags, equal to the values it places (vmem._store_folded), are handed to the
destination as makers (MemProv.scatter's ``tags``) and made only where a plane is made
(vmem.DEFERRED_STORE_TAGS): a launch leaves what it leaves with them made at every store
(findings, bytes, written bits, planes, footprints), with lazy tag planes and eager ones (where
every store makes them), the tags looked up per member or per element, through stores into the
wrong slots, attempts taken back and a second launch; and where the tag planes stay lazy (the
correct producer), no tag is made at all."""
import numpy as np
import pytest

from kernels_py.host import twins as H
from kernels_py.int8_kv_cache import int8_kv_cache
from kernels_py.prefix_prefill import prefix_prefill
from gfxsim.machine import memory, vmem
from support.fold import same_buffers, same_runs
from support.twins import kv_setup, prefill_setup, wrong_block_size


def kv_full():
    """40 tokens of two kv heads, none padding: every member's lanes store (full EXEC), one class."""
    rng = np.random.default_rng(5)
    key, value = (rng.standard_normal((40, 2, 64)).astype(np.float32) for _ in range(2))
    slots = rng.permutation(64)[:40].astype(np.int32)
    return H.kv_cache_buffers(key, value, slots, num_blocks=4, block_size=16)


def _runs(monkeypatch, make, kernel, deferred: bool, lazy: bool, separable: bool, launches: int):
    monkeypatch.setattr(vmem, "DEFERRED_STORE_TAGS", deferred)
    monkeypatch.setattr(memory, "LAZY_TAG_PLANES", lazy)
    monkeypatch.setattr(vmem, "SEPARABLE_STORE_TAGS", separable)
    made = []
    as_dtype = vmem._as_dtype
    monkeypatch.setattr(vmem, "_as_dtype", lambda *a: made.append(1) or as_dtype(*a))
    setup = make()
    runs = [setup.launch(kernel, trace=False) for _ in range(launches)]
    return setup, runs, made


@pytest.mark.parametrize("make, kernel, finds", [(kv_full, int8_kv_cache, False), (kv_full, wrong_block_size, True),
                                                 (kv_setup, int8_kv_cache, False),
                                                 (prefill_setup, prefix_prefill, False)])
@pytest.mark.parametrize("lazy, separable, launches", [(True, True, 1), (True, False, 1), (False, True, 1),
                                                       (True, True, 2)])
def test_deferred_tags_leave_what_tags_made_at_every_store_leave(monkeypatch, make, kernel, finds, lazy, separable,
                                                                 launches):
    (a, ra, made_a), (b, rb, made_b) = (_runs(monkeypatch, make, kernel, on, lazy, separable, launches)
                                        for on in (False, True))
    if make is kv_full and not finds:           # the folded store's path was taken
        assert made_a
    if make is kv_full and kernel is int8_kv_cache and lazy and launches == 1:
        assert not made_b                                     # the caches' tag planes stayed lazy: none made
    for x, y in zip(ra, rb):
        assert bool(y.findings) == finds
        same_runs(x, y)
    for name in a.outputs:
        same_buffers(a.buffers[name], b.buffers[name], ra[-1].machine.wide, rb[-1].machine.wide)
