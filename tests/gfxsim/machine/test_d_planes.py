"""``summaries.d_planes`` (D's identity plane of one field for n instructions in one compiled call)
is ``summaries.d_plane`` per instruction: random row, column and C names with absent values (-1),
agreeing and clashing, with and without C, the row's or the column's names absent for all."""
import numpy as np
import pytest

from gfxsim.machine import summaries


@pytest.mark.parametrize("has_a,has_b,has_c", [(True, True, True), (True, True, False), (False, True, True),
                                               (True, False, True), (False, False, True)])
def test_d_planes_is_d_plane_per_instruction(has_a, has_b, has_c):
    rng = np.random.default_rng(7)
    n, nb, M, N = 5, 2, 4, 3
    pick = lambda *shape: rng.choice(np.array([-1, 0, 1, 2], np.int32), shape)   # few values: agree and clash
    ra = pick(n, nb, M) if has_a else np.empty((n, 0, 0), np.int32)
    cb = pick(n, nb, N) if has_b else np.empty((n, 0, 0), np.int32)
    vc = pick(n, nb, M, N) if has_c else np.empty((n, 0, 0, 0), np.int32)
    flat_d = rng.permutation(nb * M * N + 3)[:nb * M * N].reshape(nb, M, N).astype(np.int64)
    out = np.full((n, nb * M * N + 3), -1, np.int32)
    clash = np.full((n, nb, M, N), -1, np.int32) if has_c else np.empty((n, 0, 0, 0), np.int32)
    got, clashed = np.zeros(n, np.bool_), np.zeros(n, np.bool_)
    summaries.d_planes(ra, cb, vc, flat_d, out, clash, got, clashed)
    for i in range(n):
        one = np.full(nb * M * N + 3, -1, np.int32)
        one_clash = np.full((nb, M, N), -1, np.int32) if has_c else np.empty((0, 0, 0), np.int32)
        g, c = summaries.d_plane(ra[i], cb[i], vc[i], flat_d, one, one_clash)
        assert (g, c) == (bool(got[i]), bool(clashed[i]))
        assert np.array_equal(one, out[i]) and np.array_equal(one_clash, clash[i])
    assert got.any() and (clashed.any() or not has_c or not (has_a or has_b))
