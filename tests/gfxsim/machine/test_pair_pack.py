"""A pair record (the sum of two matrix results) holds its sides packed: every form unpacks to the
exact int32 array it was given, and the common forms take (almost) no memory."""
import numpy as np
import pytest

from gfxsim.machine.mmalog import PairRecord, pack, unpack, unpack_at


@pytest.mark.parametrize("x, kind", [
    (np.full(1000, 7 + (1 << 28), np.int32), "c"),                    # one pair id over a run
    (np.arange(5, 5005, dtype=np.int32), "r"),                        # the elements of one result, in order
    (np.repeat(np.arange(512, dtype=np.int32) + 433, 64), "n"),       # one instruction per workgroup (uint16)
    (np.tile(np.arange(256, dtype=np.int32), 8), "n"),                # element indices (uint8)
    (np.array([-1, 3, -1, 0], np.int32), "n"),                        # cells with reductions (-1)
    (np.array([0, 3 << 29, 5], np.int32), "n"),                       # a span too wide to narrow: int32
    (np.zeros(0, np.int32), "n"),
    (np.array([4, 5, 7], np.int32), "n"),                             # a near-ramp is not a ramp
])
def test_pack_round_trip(x, kind):
    p = pack(x)
    assert p[0] == kind
    y = unpack(p)
    assert y.dtype == np.int32 and np.array_equal(y, x)
    rng = np.random.default_rng(len(x))
    for e in (rng.integers(0, max(len(x), 1), 9 if len(x) else 0), np.arange(len(x)), -1 - np.arange(min(len(x), 3)),
              np.zeros(0, np.int64)):
        z = unpack_at(p, e)                         # a few elements unpacked: those of the whole
        assert z.dtype == np.int32 and np.array_equal(z, x[e])


def test_pair_record_sides_and_cell():
    ids = np.repeat(np.arange(4, dtype=np.int32) + 10, 64)
    mn = np.tile(np.arange(64, dtype=np.int32), 4)
    rec = PairRecord((ids, mn), (np.full(256, 1 << 28, np.int32), np.arange(256, dtype=np.int32)))
    (li, lm), (ri, rm) = rec.left, rec.right
    assert np.array_equal(li, ids) and np.array_equal(lm, mn) and (ri == 1 << 28).all() and np.array_equal(rm, np.arange(256))
    assert rec._left[0][2].dtype == np.uint8 and rec._right[0][0] == "c" and rec._right[1][0] == "r"
    assert rec.cell is None
    rec.set_footprints(np.where(mn < 32, mn, -1), {})
    assert np.array_equal(rec.cell, np.where(mn < 32, mn, -1))
