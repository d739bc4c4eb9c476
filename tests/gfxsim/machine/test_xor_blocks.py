"""A shuffle by l ^ m (m a power of two) swaps adjacent blocks of m lanes by strided copies
(routing.xor_blocks, routing.XOR_BLOCKS); held to the take by lane index it replaces: every bit
(NaN payloads, every dtype size), every mask, several members and rows, launches: test_shuffle_pattern.py."""
import numpy as np
import pytest

from gfxsim.machine import routing


def _taken(v, pattern):
    rows, lanes = v.shape[0], len(pattern)
    return np.take(v.reshape(rows, -1, lanes), pattern, axis=2).reshape(rows, -1)


@pytest.mark.parametrize("dt", [np.int8, np.float16, np.float32, np.int32, np.float64, np.uint64])
@pytest.mark.parametrize("lanes", [32, 64])
def test_every_mask_is_the_take_bit_for_bit(dt, lanes):
    rng = np.random.default_rng(3)
    swapped = 0
    for members in (1, 3):
        for rows in (1, 2, 3):
            # random bits: NaNs with payloads, signalling NaNs, infinities, denormals all copied as bits
            v = rng.integers(0, 256, (rows, members * lanes * np.dtype(dt).itemsize), dtype=np.uint8).view(dt)
            for m in range(lanes):
                pattern = np.arange(lanes) ^ m
                got = routing.xor_blocks(v, pattern)
                if got is None:
                    continue
                swapped += 1
                assert m and not m & (m - 1)
                assert got.dtype == v.dtype and got.shape == v.shape
                assert np.array_equal(got.view(np.uint8), _taken(v, pattern).view(np.uint8)), (members, rows, m)
                assert not np.shares_memory(got, v)
    assert swapped


def test_other_patterns_and_layouts_are_declined():
    v = np.arange(2 * 128, dtype=np.float32).reshape(2, 128)
    assert routing.xor_blocks(v, np.arange(64) ^ 3) is None            # not a power of two
    assert routing.xor_blocks(v, (np.arange(64) + 1) % 64) is None     # a rotation
    assert routing.xor_blocks(v, np.arange(64) ^ 4) is None            # 16-byte blocks: the take pays
    assert routing.xor_blocks(v[:, ::2].copy(order="F"), np.arange(32) ^ 1) is None   # rows not contiguous
    assert routing.xor_blocks(v, np.arange(64) ^ 1) is not None
