"""fp.fma returns binary64's one rounding of p + c where that sum is exact in every lane, and
otherwise decides double-rounding ties by the TwoSum error (_round_once): both give the same bits.
Each lane computed alone (where most lanes take the exact-sum return) equals the lane in a batch
whose other lanes are not exact (the general rounding for all)."""
from __future__ import annotations

import numpy as np
import pytest

from gfxsim.isa import fp


def _lanes(rng, n):
    a = np.float32(rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n))
    b = np.float32(rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n))
    c = np.float32(rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n))
    small = rng.random(n) < 0.5                              # sums exact in binary64
    a[small], b[small] = np.float32(rng.integers(-64, 64, small.sum())), np.float32(rng.integers(-64, 64, small.sum()))
    c[small] = np.float32(rng.integers(-4096, 4096, small.sum()))
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38, 1.1754944e-38], np.float32)
    for x in (a, b, c):
        hit = rng.random(n) < 0.05
        x[hit] = rng.choice(special, hit.sum())
    return a, b, c


@pytest.mark.parametrize("t", [np.float32, np.float16])
def test_a_lane_alone_is_the_lane_in_a_batch(t):
    rng = np.random.default_rng(1)
    exact_alone = 0
    for _ in range(20):
        a, b, c = _lanes(rng, 64)
        if t is np.float16:                                  # binary16 inputs (large ones become inf)
            with np.errstate(over="ignore"):
                a, b, c = (np.float32(x.astype(np.float16)) for x in (a, b, c))
        batch = fp.fma(a, b, c, t)
        for i in range(64):
            one = fp.fma(a[i:i + 1], b[i:i + 1], c[i:i + 1], t)
            assert one.dtype == batch.dtype
            assert one.view(np.uint16 if t is np.float16 else np.uint32)[0] == \
                batch[i:i + 1].view(np.uint16 if t is np.float16 else np.uint32)[0], (a[i], b[i], c[i])
            with np.errstate(all="ignore"):
                p = np.float64(a[i]) * np.float64(b[i])
                s = p + np.float64(c[i])
                bp = s - np.float64(c[i])
                exact_alone += bool((p - bp) + (np.float64(c[i]) - (s - bp)) == 0)
    assert exact_alone > 400                                 # the exact-sum return was taken, many times


def test_the_exact_sum_return_is_the_general_rounding():
    rng = np.random.default_rng(2)
    a, b = np.float32(rng.integers(-1000, 1000, 64)), np.float32(rng.integers(-1000, 1000, 64))
    c = np.float32(rng.integers(-10**6, 10**6, 64))
    s = np.float64(a) * np.float64(b) + np.float64(c)
    e = np.zeros(64)
    np.testing.assert_array_equal(fp.fma(a, b, c).view(np.uint32), fp._round_once(s, e, np.float32).view(np.uint32))


def test_a_double_rounding_tie_is_rounded_as_the_exact_value():
    """(1 + 2^-12)^2 + 2^-77 = 1 + 2^-11 + 2^-24 + 2^-77: binary64 rounds it onto the binary32
    midpoint 1 + 2^-11 + 2^-24, whose even neighbour is below; the exact value is above it."""
    a = np.float32([1 + 2.0 ** -12, 1 + 2.0 ** -12, 3.0])
    c = np.float32([2.0 ** -77, -(2.0 ** -77), 1.0])
    want = np.float32([1 + 2.0 ** -11 + 2.0 ** -23, 1 + 2.0 ** -11, 10.0])
    np.testing.assert_array_equal(fp.fma(a, a, c), want)
    np.testing.assert_array_equal(fp.fma(a[:1], a[:1], c[:1]), want[:1])
