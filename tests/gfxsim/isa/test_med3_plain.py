"""fp.med3 answers a call with no NaN and no zero in any lane by numpy's min/max: each lane alone
(plain, unless it holds a NaN or a zero) gives what it gives in a batch with special lanes (NaNs,
signed zeros, infinities, denormals, ties), which takes the IEEE-mode rules."""
from __future__ import annotations

import numpy as np
import pytest

from gfxsim.isa import fp

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 3.4e38, 1.0, -1.0]


@pytest.mark.parametrize("t", [np.float32, np.float16])
def test_each_lane_alone_is_the_lane_in_a_batch_with_special_lanes(t):
    rng = np.random.default_rng(1)
    plain = 0
    for _ in range(20):
        a, b, c = (t(rng.standard_normal(64) * 10.0 ** rng.integers(-3, 3, 64)) for _ in range(3))
        for x in (a, b, c):
            hit = rng.random(64) < 0.1
            with np.errstate(over="ignore"):              # 3.4e38 is inf in binary16
                x[hit] = t(rng.choice(SPECIAL, hit.sum()))
        b[:4] = a[:4]                                    # ties
        c[4:8] = -a[4:8]
        u = np.uint32 if t is np.float32 else np.uint16
        with np.errstate(all="ignore"):
            r = fp.med3(a, b, c)
            for i in range(64):
                ri = fp.med3(a[i:i + 1], b[i:i + 1], c[i:i + 1])
                assert ri.dtype == r.dtype and ri.view(u)[0] == r[i:i + 1].view(u)[0], (a[i], b[i], c[i])
                plain += not (np.isnan([a[i], b[i], c[i]]).any() or 0 in (a[i], b[i], c[i]))
    assert plain > 400


def test_a_nan_or_a_zero_takes_the_ieee_rules():
    one, two, three = (np.float32([x]) for x in (1.0, 2.0, 3.0))
    assert fp.med3(one, two, three)[0] == 2.0
    assert fp.med3(np.float32([-0.0]), np.float32([0.0]), np.float32([0.0])).view(np.uint32)[0] == 0
    assert fp.med3(np.float32([np.nan]), two, three)[0] == 2.0          # with a NaN: the min3 of the others


@pytest.mark.parametrize("t", [np.float32, np.float16])
def test_a_clamp_of_zeros_by_numpy_is_the_ieee_rules(t):
    """Lanes with at most one zero operand (a clamp of rounded values between non-zero bounds) take
    numpy's min/max, lanes with two the IEEE-mode rules: either way the bits of those lanes in a
    call with a NaN lane, which takes the IEEE-mode rules for all."""
    rng = np.random.default_rng(2)
    u = np.uint32 if t is np.float32 else np.uint16
    for _ in range(20):
        a = t(np.rint(rng.standard_normal(64) * 2))                   # many +0 and -0
        a[rng.random(64) < 0.3] = t(-0.0)
        b = t(rng.choice([-127.0, -1.0, 0.5, np.inf, -np.inf, 1e-40, 0.0, -0.0], 64))
        c = t(rng.choice([127.0, 1.0, -0.5, 3.0], 64))
        with np.errstate(all="ignore"):
            fast = fp.med3(a, b, c)
            ieee = fp.med3(*(np.append(x, t(np.nan)) for x in (a, b, c)))[:64]
        np.testing.assert_array_equal(fast.view(u), ieee.view(u))
    assert (a == 0).any()
