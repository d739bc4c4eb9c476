"""The address checks as reductions (addressing.in_bounds_aligned, dtypes.any_bits) decide as the
elementwise bool arrays they replace, on random and edge addresses: at and past the bound,
negative ones (as unsigned, and as int64 for the alignment), the largest unsigned values, each
alignment, 2-D index arrays, one element or none; and a full-EXEC access faults as before."""
import numpy as np
import pytest

from gfxsim.machine import addressing
from gfxsim.machine.dtypes import any_bits
from gfxsim.machine.errors import MemoryFault
from gfxsim.machine.vgpr import VGPRs
from support.addressing import AddressWave as _Wave


@pytest.mark.parametrize("seed", range(40))
def test_in_bounds_aligned_as_the_elementwise_checks(seed):
    rng = np.random.default_rng(seed)
    ut = [np.uint32, np.uint64][seed % 2]
    n = int(rng.choice([0, 1, 64, 4096]))
    hi = int(rng.choice([0, 1, 60, 4092, 2 ** 31 - 1]))
    align = int(rng.choice([1, 2, 4, 8, 16]))
    u = (rng.integers(0, hi + 1, n) // align * align).astype(ut)
    top = int(np.iinfo(ut).max)
    for _ in range(int(rng.integers(0, 3)) if n else 0):
        i = rng.integers(0, n)
        u[i] = int(rng.choice([hi, hi + 1, int(u[i]) + 1, top, top - 3])) % (top + 1)
    want = not (u > hi).any() and not (align > 1 and (u & ut(align - 1)).any())
    assert addressing.in_bounds_aligned(u, hi, align) == want


@pytest.mark.parametrize("seed", range(40))
def test_any_bits_as_and_any(seed):
    rng = np.random.default_rng(seed)
    dt = [np.int64, np.uint32, np.uint64, np.int32][seed % 4]
    shape = [(0,), (1,), (64,), (4, 4096), (3, 0)][seed % 5]
    mask = int(rng.choice([1, 3, 7, 15]))
    a = rng.integers(0, 1 << 20, shape) * 16
    if np.issubdtype(dt, np.signedinteger) and a.size:
        a.flat[rng.integers(0, a.size)] = -16 * int(rng.integers(1, 5))     # negative, aligned
    a = a.astype(dt)
    if a.size and seed % 3:
        a.flat[rng.integers(0, a.size)] += dt(int(rng.integers(1, 16)))
    assert any_bits(a, mask) == bool((a & dt(mask)).any())


def test_full_exec_addresses_fault_as_before():
    w = _Wave(np.ones(128, bool))
    for bad, msg in ((4096, "outside"), (6, "aligned"), (-4, "outside")):
        a = np.arange(0, 512, 4)
        a[77] = bad
        off = VGPRs(None, a.astype(np.int32)[None, :], "i32", literal=True)
        with pytest.raises(MemoryFault, match=f"{msg}.*lane 77"):
            addressing.addresses(w, off, 4, 4096, "global_load from 'x'", 4)
    off = VGPRs(None, np.arange(0, 512, 4, dtype=np.int32)[None, :], "i32", literal=True)
    assert addressing.addresses(w, off, 4, 4096, "global_load from 'x'", 4).tolist() == list(range(0, 512, 4))
