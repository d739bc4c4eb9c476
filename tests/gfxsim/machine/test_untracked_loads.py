"""A load from a buffer that carries no provenance (no tags, no encoding, nothing stored with
provenance: a slot mapping) makes no byte addresses for it (Buffer.untracked, vmem.UNTRACKED_LOADS):
untracked is exactly where load_prov has nothing to give, and launches leave the same values,
findings, events and planes either way."""
import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.machine import vmem
from support.fold import same_buffers, same_runs
from support.twins import kv_setup, wrong_block_size
from kernels_py.int8_kv_cache import int8_kv_cache

BA = np.arange(16)[:, None] + np.zeros((1, 3), np.int64)          # [bytes, lanes]: elements 0..3 of each lane


def _buffers():
    plain = Buffer("slots", np.arange(8, dtype=np.int32))
    tagged = Buffer("k", np.zeros((2, 4), np.float32), {"token": np.arange(2)[:, None]})
    coded = Buffer("q", np.zeros(16, np.int8))                     # int8 names its encoding
    fp8 = Buffer("f", np.zeros(16, np.uint8), encoding="e4m3fn")
    raw = Buffer("u", np.zeros(16, np.uint8))
    return [plain, tagged, coded, fp8, raw]


@pytest.mark.parametrize("i", range(5))
def test_untracked_is_where_load_prov_has_nothing(i):
    buf = _buffers()[i]
    assert buf.untracked == (buf.load_prov(BA, 4 if buf.itemsize == 4 else 1) is None)


def _runs(monkeypatch, make, kernel, on: bool):
    monkeypatch.setattr(vmem, "UNTRACKED_LOADS", on)
    skipped = []
    untracked = type(make().buffers["slot_mapping"]).untracked
    monkeypatch.setattr(type(make().buffers["slot_mapping"]), "untracked",
                        property(lambda b: skipped.append(untracked.fget(b)) or skipped[-1]))
    setup = make()
    runs = [setup.launch(kernel, trace=True) for _ in range(2)]
    return setup, runs, skipped


@pytest.mark.parametrize("kernel, finds", [(int8_kv_cache, False), (wrong_block_size, True)])
def test_untracked_loads_leave_what_the_byte_path_leaves(monkeypatch, kernel, finds):
    (a, ra, _), (b, rb, skipped) = (_runs(monkeypatch, kv_setup, kernel, on) for on in (False, True))
    assert any(skipped)                                        # the slot mapping's loads took it
    for x, y in zip(ra, rb):
        assert bool(y.findings) == finds
        same_runs(x, y)
    for name in a.outputs:
        same_buffers(a.buffers[name], b.buffers[name], ra[-1].machine.wide, rb[-1].machine.wide)
