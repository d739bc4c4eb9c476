"""fp._round_f64_to_f32 rounds by numpy where every lane is in binary32's normal range and none is
within 4 binary64 ulps of a binary32 midpoint: the same bits as the general path
(_round_near_midpoints) for the transcendentals' results, values 0-6 ulps from midpoints on both
sides, the range's edges, subnormal, huge, infinite and NaN values."""
from __future__ import annotations

from decimal import Decimal

import numpy as np

from gfxsim.isa import fp


def _near_midpoints(rng):
    f = np.float32(rng.standard_normal(64) * 10.0 ** rng.integers(-30, 30, 64))
    mid = (f.astype(np.float64) + np.nextafter(f, np.float32(np.inf)).astype(np.float64)) / 2
    k = rng.integers(-6, 7, 64)
    return np.array([m + int(j) * np.spacing(m) for m, j in zip(mid, k)])


def test_rounding_by_numpy_is_the_general_path():
    rng = np.random.default_rng(5)
    edge = np.array([2.0 ** -126, 2.0 ** -127, 3.4028234663852886e38, 2.0 ** 128 - 2.0 ** 103, 1e-45, 0.0, np.inf,
                     np.nan, 1e300])
    for _ in range(20):
        x = np.float32(rng.uniform(-30, 30, 64))
        for y in (np.exp2(x.astype(np.float64)), _near_midpoints(rng), np.concatenate([np.exp2(x[:8].astype(float)), edge]),
                  np.exp2(x.astype(np.float64)).reshape(8, 8)):
            flat = y.reshape(-1)
            exact = (lambda i, flat=flat: Decimal(float(flat[i])))
            with np.errstate(all="ignore"):
                got = fp._round_f64_to_f32(y, exact, np.zeros(y.shape, bool))
                want = fp._round_near_midpoints(y, exact, np.zeros(y.shape, bool))
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_a_lane_near_a_midpoint_is_recomputed():
    mid = (1.0 + float(np.nextafter(np.float32(1), np.float32(2)))) / 2
    for k in (-5, -4, -3, -1, 1, 2, 3, 4, 5):              # up to 4 binary64 ulps away: recomputed
        y = np.array([mid + k * np.spacing(mid), 1.5])
        asked = []
        fp._round_f64_to_f32(y, lambda i: asked.append(i) or Decimal(mid) - Decimal(1e-20), np.zeros(2, bool))
        assert asked == ([0] if abs(k) <= 4 else []), k
