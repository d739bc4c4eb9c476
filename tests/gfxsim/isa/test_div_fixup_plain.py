"""fp.div_fixup answers a binary32 call none of whose lanes meets a V_DIV_FIXUP case (_fixup_plain:
D = S0 with the division's sign, no underflow) without the case analysis: each lane alone (most of
them plain) gives what it gives in a batch with special lanes (zeros, denormals, inf, NaN, huge
exponent gaps), which takes the case analysis; the bounds of _fixup_plain are checked at each edge."""
from __future__ import annotations

import numpy as np

from gfxsim.isa import fp
from support.f32 import division_operands, f32 as _f


def _lanes(rng):
    s1, s2 = division_operands(rng, -200)
    s0 = np.float32(rng.standard_normal(64))
    s0[rng.random(64) < 0.05] = np.nan
    return s0, s1, s2


def test_each_lane_alone_is_the_lane_in_a_batch_with_special_lanes():
    rng = np.random.default_rng(0)
    plain = 0
    for _ in range(20):
        s0, s1, s2 = _lanes(rng)
        d, under = fp.div_fixup(s0, s1, s2)
        for i in range(64):
            di, ui = fp.div_fixup(s0[i:i + 1], s1[i:i + 1], s2[i:i + 1])
            assert di.view(np.uint32)[0] == d[i:i + 1].view(np.uint32)[0] and ui[0] == under[i], (s0[i], s1[i], s2[i])
            plain += fp._fixup_plain(s1[i:i + 1], s2[i:i + 1])
    assert 500 < plain < 1280                      # both paths taken many times


def test_the_bounds_of_a_plain_call():
    one = np.float32([1.0])
    assert fp._fixup_plain(one, one)
    for s1, s2, plain in [(_f(1, 1), _f(1, 1), True), (_f(1, 254), _f(1, 254), True),
                          (_f(1, 160), _f(1, 10), True), (_f(1, 161), _f(1, 10), False),
                          (np.float32(1e-40), one[0], False), (one[0], np.float32(0), False),
                          (np.float32(np.inf), one[0], False), (one[0], np.float32(np.nan), False)]:
        assert fp._fixup_plain(np.float32([s1]), np.float32([s2])) == plain, (s1, s2)
        d, under = fp.div_fixup(one, np.float32([s1]), np.float32([s2]))
        if plain:
            assert not under.any() and abs(d[0]) == 1.0
