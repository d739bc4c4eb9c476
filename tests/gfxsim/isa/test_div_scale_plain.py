"""fp.div_scale answers a binary32 call none of whose lanes meets a V_DIV_SCALE case (_div_plain:
D = S0, VCC = 0) without the case analysis: each lane alone (most of them plain) gives what it gives
in a batch with special lanes (zeros, denormals, huge and tiny operands, exponent gaps, NaN, inf),
which takes the case analysis; the exponent bounds of _div_plain are checked at and past each edge."""
from __future__ import annotations

import numpy as np

from gfxsim.isa import fp
from support.f32 import division_operands, f32 as _f


def _lanes(rng):
    s1, s2 = division_operands(rng, -130)
    pick = rng.integers(0, 3, 64)
    s0 = np.where(pick == 0, s1, np.where(pick == 1, s2, np.float32(rng.standard_normal(64))))
    return s0, s1, s2


def _check_alone_equals_batch(s0, s1, s2):
    d, vcc = fp.div_scale(s0, s1, s2)
    plain = 0
    for i in range(len(s0)):
        di, vi = fp.div_scale(s0[i:i + 1], s1[i:i + 1], s2[i:i + 1])
        assert di.view(np.uint32)[0] == d[i:i + 1].view(np.uint32)[0] and vi[0] == vcc[i], (s0[i], s1[i], s2[i])
        plain += fp._div_plain(s1[i:i + 1], s2[i:i + 1])
    return plain


def test_a_lane_alone_is_the_lane_in_a_batch():
    rng = np.random.default_rng(0)
    plain = sum(_check_alone_equals_batch(*_lanes(rng)) for _ in range(10))
    assert plain > 300                                   # the plain return was taken, many times


def test_the_plain_bounds_at_and_past_each_edge():
    s1, s2 = [], []
    for e1 in (1, 2, 251, 252, 253, 254):                # 1/S1 denormal from 253
        s1.append(_f(1.5, e1))
        s2.append(_f(1.25, min(max(e1, 24), 254)))
    for e2 in (22, 23, 24, 25, 254):                     # the numerator tiny up to 23
        s1.append(_f(1.5, min(max(e2, 1), 252)))
        s2.append(_f(1.25, e2))
    for gap in (-126, -125, -124, -123, 94, 95, 96, 97):   # a tiny quotient, an exponent gap
        e1 = 130 if gap < 0 else 30
        s1.append(_f(1.75, e1))
        s2.append(_f(1.0 if gap < 0 else 1.9, e1 + gap))
    s1, s2 = np.float32(s1), np.float32(s2)
    for s0 in (s1, s2, np.float32(np.ones_like(s1) * 3)):
        _check_alone_equals_batch(np.float32(s0), s1, s2)
    d, vcc = fp.div_scale(s1, s1, s2)
    assert vcc.any() and not (d == s1).all()             # the batch met cases: the analysis ran
