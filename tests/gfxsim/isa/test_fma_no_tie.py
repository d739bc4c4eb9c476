"""fp._round_once rounds a binary64 sum once where no lane is a binary32 midpoint (every lane zero or
in binary32's normal range): the same bits as the neighbour comparison (_round_ties) for random
sums, exact midpoints with errors of either sign, values at the range's edges, subnormal, huge,
infinite and NaN sums; and fp.fma's results are unchanged lane by lane."""
from __future__ import annotations

import numpy as np

from gfxsim.isa import fp


def _cases(rng):
    f = np.float32(rng.standard_normal(256) * 10.0 ** rng.integers(-30, 30, 256))
    g = np.float32(rng.standard_normal(256))
    mid = (f.astype(np.float64) + np.nextafter(f, np.float32(np.inf)).astype(np.float64)) / 2   # binary32 midpoints
    edge = np.array([2.0 ** -126, -(2.0 ** -126), 2.0 ** -127, 3.4028234663852886e38, 2.0 ** 128 - 2.0 ** 103,
                     2.0 ** 128, 1e-45, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, 1e300])
    return [f.astype(np.float64) + g.astype(np.float64), mid, edge, np.concatenate([mid[:3], edge])]


def test_rounding_once_is_the_neighbour_comparison():
    rng = np.random.default_rng(3)
    for _ in range(10):
        for s in _cases(rng):
            for e in (np.zeros_like(s), np.full_like(s, 1e-300), np.full_like(s, -1e-300),
                      rng.standard_normal(s.shape) * 1e-300):
                with np.errstate(all="ignore"):
                    got = fp._round_once(s, e, np.float32)
                    want = fp._round_ties(s, e, np.float32)
                np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_a_midpoint_takes_the_neighbour_comparison():
    for lo in (np.float32(1.0), np.float32(1.5 * 2.0 ** -127), np.float32(3.0 * 2.0 ** -140)):   # normal, subnormal
        hi = np.nextafter(lo, np.float32(2))
        mid = (np.float64(lo) + np.float64(hi)) / 2
        up = fp._round_once(np.array([mid, 1.0]), np.array([1e-300, 0.0]), np.float32)
        down = fp._round_once(np.array([mid, 1.0]), np.array([-1e-300, 0.0]), np.float32)
        assert up[0] == hi and down[0] == lo, lo


def test_fma_lane_alone_is_the_lane_in_a_batch():
    rng = np.random.default_rng(4)
    a, b, c = (np.float32(rng.standard_normal(200) * 10.0 ** rng.integers(-20, 20, 200)) for _ in range(3))
    c[:50] = np.float32(-(a[:50].astype(np.float64) * b[:50]))               # cancellations
    r = fp.fma(a, b, c)
    for i in range(200):
        assert fp.fma(a[i:i + 1], b[i:i + 1], c[i:i + 1]).view(np.uint32)[0] == r[i:i + 1].view(np.uint32)[0]
