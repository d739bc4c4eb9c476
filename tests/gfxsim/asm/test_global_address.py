"""globaladdr.buffer_offsets (a global access's address and buffer in one compiled pass) gives
what semantics/mem.global_address and AddressSpace.one_buffer give in numpy: the buffer (or none)
and the byte offsets, for VGPR-pair and SGPR-pair addresses, offsets of either sign, partial EXEC,
several members, lanes across two buffers, below the first, past the last and wrapping 2^64."""
import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm import globaladdr
from gfxsim.asm.launch import BASE, SPAN, AddressSpace

U64 = np.uint64


def _numpy(space, lo, hi, pair, s, sfirst, lanes, off, ex):
    if pair:
        addr = lo.astype(U64) | (hi.astype(U64) << U64(32))
    else:
        sbase = s[:, sfirst].astype(U64) | (s[:, sfirst + 1].astype(U64) << U64(32))
        addr = np.repeat(sbase, lanes) + lo.astype(U64)
    addr = addr + U64(off % (1 << 64))
    got = space.one_buffer(addr, ex, bool(ex.all()))
    return None if got is None else (got[0].name, got[1].tolist())


def _compiled(space, lo, hi, pair, s, sfirst, lanes, off, ex):
    offs = np.empty(lo.shape[0], np.int64)
    k = globaladdr.buffer_offsets(lo, hi, pair, s, sfirst, lanes, U64(off % (1 << 64)), ex, BASE, SPAN,
                                  len(space.buffers), offs)
    return None if k < 0 else (space.buffers[k].name, offs.tolist())


@pytest.mark.parametrize("seed", range(40))
def test_compiled_address_is_the_numpy_one(seed):
    rng = np.random.default_rng(seed)
    space = AddressSpace([Buffer(f"b{k}", np.zeros(64 + 16 * k, np.uint32)) for k in range(3)])
    members, lanes = int(rng.integers(1, 4)), 64
    width = members * lanes
    pair = bool(rng.integers(2))
    k = int(rng.integers(0, 4))                       # 3: past the last buffer
    start = BASE + k * SPAN + int(rng.integers(-8, 300))
    kind = rng.integers(5)
    if kind == 0:                                     # spread over two buffers
        start = BASE + SPAN - 128
    elif kind == 1:                                   # near 2^64: the sum wraps
        start = (1 << 64) - 64
    step = int(rng.choice([0, 4, 8, 16]))
    addr = (start + step * np.arange(width, dtype=np.int64).astype(object)) % (1 << 64)
    addr = np.array([int(a) for a in addr], U64)
    s = rng.integers(0, 1 << 32, (members, 128), dtype=np.uint64).astype(np.uint32)
    sfirst = int(rng.integers(0, 100))
    if pair:
        lo, hi = (addr & U64(0xFFFFFFFF)).astype(np.uint32), (addr >> U64(32)).astype(np.uint32)
    else:                                             # each member's SGPR pair plus a 32-bit offset
        base = np.array([start - 4096 * m for m in range(members)], dtype=object) % (1 << 64)
        s[:, sfirst] = np.array([int(b) & 0xFFFFFFFF for b in base], np.uint32)
        s[:, sfirst + 1] = np.array([int(b) >> 32 for b in base], np.uint32)
        lo = (np.arange(width) % lanes * step + 4096 * (np.arange(width) // lanes)).astype(np.uint32)
        hi = lo
    ex = rng.random(width) < rng.choice([1.0, 0.5, 0.05, 0.0])
    off = int(rng.integers(-4096, 4096))
    want = _numpy(space, lo, hi, pair, s, sfirst, lanes, off, ex)
    got = _compiled(space, lo, hi, pair, s, sfirst, lanes, off, ex)
    assert got == want


def test_an_access_of_one_buffer_is_found():
    space = AddressSpace([Buffer("a", np.zeros(64, np.uint32)), Buffer("b", np.zeros(64, np.uint32))])
    addr = BASE + SPAN + 4 * np.arange(64, dtype=np.uint64)
    lo, hi = (addr & U64(0xFFFFFFFF)).astype(np.uint32), (addr >> U64(32)).astype(np.uint32)
    ex = np.ones(64, bool)
    got = _compiled(space, lo, hi, True, np.zeros((1, 128), np.uint32), 0, 64, 4, ex)
    assert got == _numpy(space, lo, hi, True, np.zeros((1, 128), np.uint32), 0, 64, 4, ex)
    assert got[0] == "b" and got[1][:2] == [4, 8]
