"""A store whose provenance has a row per element (a scale's f32 under a partial EXEC) checks its
tag fields one row an element (vmem.COMPACT_STORE_CHECK) instead of byte by byte: a launch leaves
what the byte check leaves (findings, bytes, written bits, planes, footprints), with padding tokens
(lane 0 of some members only), stores into the wrong slots (store-mismatch: one field agrees, one
does not, the byte check then says where) and a second launch."""
import numpy as np
import pytest

from kernels_py.int8_kv_cache import int8_kv_cache
from kernels_py.prefix_prefill import prefix_prefill
from gfxsim.machine import vmem
from support.fold import same_buffers, same_runs
from support.twins import kv_setup, prefill_setup, wrong_block_size


def _runs(monkeypatch, make, kernel, on: bool, launches: int):
    monkeypatch.setattr(vmem, "COMPACT_STORE_CHECK", on)
    monkeypatch.setattr(vmem, "FOLDED_STORE_CHECK", False)       # every store through _check_store
    taken = []
    rows = vmem._element_rows
    monkeypatch.setattr(vmem, "_element_rows", lambda *a: taken.append(rows(*a)) or taken[-1])
    setup = make()
    return setup, [setup.launch(kernel, trace=False) for _ in range(launches)], taken


@pytest.mark.parametrize("make, kernel, finds", [(kv_setup, int8_kv_cache, False), (kv_setup, wrong_block_size, True),
                                                 (prefill_setup, prefix_prefill, False)])
@pytest.mark.parametrize("launches", [1, 2])
def test_the_compact_check_leaves_what_the_byte_check_leaves(monkeypatch, make, kernel, finds, launches):
    (a, ra, _), (b, rb, taken) = (_runs(monkeypatch, make, kernel, on, launches) for on in (False, True))
    assert True in taken                                  # it ran (the scales', the prefill's f32 rows)
    if make is kv_setup:
        assert False in taken                             # the int8 caches' bytes keep the byte check
    for x, y in zip(ra, rb):
        assert bool(y.findings) == finds
        same_runs(x, y)
    for name in a.outputs:
        same_buffers(a.buffers[name], b.buffers[name], ra[-1].machine.wide, rb[-1].machine.wide)


class _P:
    def __init__(self, g, rows):
        self.g, self.ids = g, {"token": np.zeros((rows, 3), np.int32)}


class _B:
    def __init__(self, itemsize):
        self.itemsize = itemsize


@pytest.mark.parametrize("g, itemsize, nbytes, start, want", [
    (4, 4, 4, 8, True), (4, 4, 8, 16, True),               # a dword, two dwords of an f32 buffer
    (1, 1, 1, 3, False), (4, 4, 4, 6, False),             # bytes; an address off its element
    (4, 2, 4, 8, False), (2, 4, 4, 8, False)])            # rows that are not the elements
def test_element_rows(g, itemsize, nbytes, start, want):
    sel = (np.array([start, start + 4 * g, start + 8 * g])[None, :] + np.arange(nbytes)[:, None])
    assert vmem._element_rows(_P(g, nbytes // g), _B(itemsize), sel) == want
