"""integer.bfe_i with one offset and width for every lane (a field shifted to the top and back)
gives the per-lane path's bits for every offset and width."""
from __future__ import annotations

import numpy as np

from gfxsim.isa import integer


def test_a_uniform_field_is_the_per_lane_field():
    rng = np.random.default_rng(7)
    a = rng.integers(0, 2**32, 65, dtype=np.uint64).astype(np.uint32)
    a[:4] = [0, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF]
    for o in range(40):
        for w in range(40):
            off, width = np.full(65, o, np.uint32), np.full(65, w, np.uint32)
            off[-1] ^= 1                                  # not uniform: the per-lane path for the others
            want = integer.bfe_i(a, off, width)[:-1]
            got = integer.bfe_i(a[:-1], off[:-1], width[:-1])
            assert got.dtype == want.dtype == np.uint32
            np.testing.assert_array_equal(got, want, err_msg=f"offset {o} width {w}")
            np.testing.assert_array_equal(integer.bfe_i(a[:-1], np.uint32(o), np.uint32(w)), want)


def test_a_field_broadcast_over_more_lanes_keeps_the_broadcast_shape():
    out = integer.bfe_i(np.uint32(0xF0), np.full(8, 4, np.uint32), np.full(8, 4, np.uint32))
    assert out.shape == (8,) and (out == 0xFFFFFFFF).all()
