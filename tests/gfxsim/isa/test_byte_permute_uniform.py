"""byte_permute with one selector for every lane (moves._permute_uniform, a gather) gives the
words and the byte routes of the general per-lane path for every selector byte value."""
from __future__ import annotations

import numpy as np

from gfxsim.isa import moves


def _general(a, b, sel):
    """The per-lane path: the same selector in every lane but one, which is then set back."""
    s = np.full(a.shape, sel, np.uint32)
    s[-1] ^= 1                                   # not uniform: the general path
    words, route = moves.byte_permute(a, b, s)
    return words[:-1], route[:, :-1]


def test_a_uniform_selector_gives_the_general_paths_words_and_routes():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**32, 65, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, 65, dtype=np.uint64).astype(np.uint32)
    a[:8] = [0, 0x80808080, 0x7F7F7F7F, 0xFFFFFFFF, 0x00800080, 0x80000000, 0x8000, 0x80]
    sels = [k * 0x01010101 for k in range(256)] + [int(x) for x in rng.integers(0, 2**32, 400)] + \
        [0x0C0D0804, 0x0B0A0908, 0x01050307, 0x03020100, 0x07060504]
    for sel in sels:
        got_w, got_r = moves.byte_permute(a[:-1], b[:-1], np.full(64, sel, np.uint32))
        want_w, want_r = _general(a, b, sel)
        np.testing.assert_array_equal(got_w, want_w, err_msg=hex(sel))
        np.testing.assert_array_equal(got_r, want_r, err_msg=hex(sel))
        w0, r0 = moves.byte_permute(a[:-1], b[:-1], np.uint32(sel))          # a scalar selector too
        np.testing.assert_array_equal(w0, want_w)
        np.testing.assert_array_equal(r0, want_r)
