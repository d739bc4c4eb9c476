"""A buffer's tag planes (and an int8 buffer's encoding plane, one value everywhere, cleared where
stores of numbers land: MemProv.cleared) are made only when read or when a store writes identities
other than the tags there (memory.MemProv.lazy): a launch must leave what it left with every plane
made at the first store (LAZY_TAG_PLANES off): findings, bytes, written bits, every plane,
footprint and mark, through folded attempts taken back (put_back), stores into the wrong slots
(store-mismatch) and a second launch into the same buffers."""
import numpy as np
import pytest

from kernels_py.host import twins as H
from kernels_py.int8_kv_cache import int8_kv_cache
from gfxsim.machine import memory
from support.fold import same_buffers, same_runs


def _setup():
    """40 tokens of two kv heads, two of them padding (slot -1: a folded batch parts), into a
    shuffled paged cache."""
    rng = np.random.default_rng(3)
    key, value = (rng.standard_normal((40, 2, 64)).astype(np.float32) for _ in range(2))
    slots = rng.permutation(64)[:40].astype(np.int32)
    slots[[5, 17]] = -1
    return H.kv_cache_buffers(key, value, slots, num_blocks=4, block_size=16)


def _wrong_block_size(w, *args, block_size, **kw):
    """The producer told another block size than the cache's: its stores land in other slots."""
    return int8_kv_cache(w, *args, block_size=block_size // 2, **kw)


def _runs(monkeypatch, kernel, lazy: bool, launches: int = 1):
    monkeypatch.setattr(memory, "LAZY_TAG_PLANES", lazy)
    setup = _setup()
    runs = [setup.launch(kernel, trace=False) for _ in range(launches)]
    return setup, runs


@pytest.mark.parametrize("kernel, finds", [(int8_kv_cache, False), (_wrong_block_size, True)])
@pytest.mark.parametrize("launches", [1, 2])
def test_lazy_tag_planes_leave_what_eager_planes_leave(monkeypatch, kernel, finds, launches):
    (eager, ra), (lazy, rb) = _runs(monkeypatch, kernel, False, launches), _runs(monkeypatch, kernel, True, launches)
    assert any(n["attempts"] > 1 for n in rb[0].folds), rb[0].folds       # an attempt was taken back
    for x, y in zip(ra, rb):
        assert bool(y.findings) == finds
        same_runs(x, y)
    for name in eager.outputs:
        a, b = eager.buffers[name], lazy.buffers[name]
        if launches == 1 and not finds:       # the correct producer wrote only the tags: none made yet
            # nor the int8 caches' encoding plane (one value, cleared where the numbers were stored)
            assert b.prov.lazy.keys() == set(b.tag_fields) | ({"@enc"} if b.encoding else set()), name
            if b.encoding:
                assert b.prov.cleared["@enc"].any() and not b.prov._ids
        same_buffers(a, b, ra[-1].machine.wide, rb[-1].machine.wide)      # reading them makes them
        assert not b.prov.lazy


def test_a_store_of_other_identities_makes_the_plane_and_a_take_back_unmakes_it():
    """scatter makes a lazy plane where a store writes other identities; put_back of that store
    leaves it lazy again, and the planes read afterwards are the tags."""
    buf = _setup().buffers["k_scale"]
    tags = {f: np.broadcast_to(t, buf.array.shape).ravel().astype(np.int32) for f, t in buf.tag_arrays.items()}
    elem = np.array([3, 0, 9, 4])
    addr = elem[None, :] * 4 + np.arange(4)[:, None]                 # the bytes of 4 f32 scales
    agree = memory.Prov(4, {f: np.take(t, elem)[None, :] for f, t in tags.items()})
    buf.store_prov(addr, agree, agree=set(tags))
    assert buf.prov.lazy.keys() == set(tags)
    before = buf.overwritten(addr)
    other = memory.Prov(4, {"token": np.full((1, 4), 7, np.int32), "kv_head": agree.ids["kv_head"]})
    buf.store_prov(addr, other, agree={"kv_head"})
    assert set(buf.prov.lazy) == {"kv_head"} and buf.prov._ids["token"][elem].tolist() == [7] * 4
    buf.put_back(before)
    assert buf.prov.lazy.keys() == set(tags)
    for f, t in tags.items():
        assert np.array_equal(buf.prov.ids[f], t), f


def test_cleared_entries_of_a_lazy_plane_are_taken_back_and_written_again():
    """MemProv.cleared: a store of a value without a field marks its bytes -1 on the lazy plane (an
    int8 cache's @enc, or a tag the value lacks); put_back unmarks what that store marked; a later
    store of the tags there makes them the tags again; the planes read afterwards say so."""
    buf = _setup().buffers["k_cache"]
    tags = {f: np.broadcast_to(t, buf.array.shape).ravel().astype(np.int32) for f, t in buf.tag_arrays.items()}
    code = int(memory.enc.buffer_planes("k_cache", "i8", np.zeros(1, np.int32), False)[memory.enc.ENC][0])

    def value(elem, fields):
        return memory.Prov(1, {f: np.take(tags[f], elem)[None, :] for f in fields})
    first, second, third = np.array([0, 5, 17]), np.array([100, 101]), np.array([200, 300])
    buf.store_prov(first[None, :], value(first, tags), agree=set(tags))
    buf.store_prov(third[None, :], value(third, ["dim"]), agree={"dim"})           # no token, no kv_head
    buf.store_prov(third[None, :], value(third, tags), agree=set(tags))           # the tags again
    before = buf.overwritten(second[None, :])
    buf.store_prov(second[None, :], value(second, ["kv_head"]), agree={"kv_head"})
    assert set(buf.prov.lazy) == set(tags) | {"@enc"} and not buf.prov._ids
    assert buf.prov.cleared["token"][second].all()
    buf.put_back(before)
    planes = buf.prov.ids
    enc = np.full(buf.nbytes, code, np.int32)
    enc[np.concatenate([first, third])] = -1
    assert np.array_equal(planes["@enc"], enc)
    for f, t in tags.items():
        assert np.array_equal(planes[f], t), f
