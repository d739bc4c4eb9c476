"""addressing.addresses under a partial EXEC checks the active lanes' addresses alone first
(PARTIAL_FIRST): the same addresses back, or the same MemoryFault (lane, address, message), as
the check over every column, for i32/u32/i64 addresses in and out of bounds, negative and
misaligned, in active and inactive lanes."""
import numpy as np
import pytest

from gfxsim.machine import addressing
from gfxsim.machine.errors import MemoryFault
from gfxsim.machine.vgpr import VGPRs
from support.addressing import AddressWave as _Wave


def _outcome(w, off, nbytes, limit, align):
    try:
        return ("ok", addressing.addresses(w, off, nbytes, limit, "global_store to 'x'", align).tolist())
    except MemoryFault as e:
        return ("fault", str(e))


@pytest.mark.parametrize("seed", range(60))
def test_partial_exec_addresses_as_every_column_checked(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    width = 64 * int(rng.integers(1, 4))
    dtype = ["i32", "u32", "i64"][seed % 3]
    nbytes, limit = int(rng.choice([1, 4, 8])), int(rng.choice([64, 4096]))
    a = rng.integers(0, limit - nbytes + 1, width) // nbytes * nbytes
    exec_mask = rng.random(width) < rng.choice([0.05, 0.5, 0.95])
    for _ in range(int(rng.integers(0, 3))):            # a bad address, in an active lane or not
        i = rng.integers(0, width)
        a[i] = rng.choice([-4, limit, limit - nbytes + 1, 2 ** 31 - 4, a[i] + 1])
    if dtype == "u32":
        a = np.where(a < 0, 0, a)
    np_t = {"i32": np.int32, "u32": np.uint32, "i64": np.int64}[dtype]
    w = _Wave(exec_mask)
    off = VGPRs(None, a.astype(np_t)[None, :], dtype, literal=True)
    got = {}
    for first in (True, False):
        monkeypatch.setattr(addressing, "PARTIAL_FIRST", first)
        got[first] = _outcome(w, off, nbytes, limit, min(nbytes, 4))
    assert got[True] == got[False]
