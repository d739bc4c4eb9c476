"""mmagrid: a batch that pairs each of a few A operands with each of a few B operands, as one
matrix through the accumulator model, gives each instruction's D bit for bit as the batch does:
the "fused" and "after" records, zeros of both signs, subnormal inputs, C of every sign and size,
the issues in any order, and a NaN or infinite term (the general path for all); a batch that is
not such a grid is refused."""
import numpy as np
import pytest

from gfxsim.machine import mmagrid
from gfxsim.machine.accum import mma_f32


def test_only_a_full_grid_of_distinct_pairs_is_one():
    a, b = [np.zeros(1) for _ in range(2)], [np.zeros(1) for _ in range(3)]
    pairs = [(i, j) for j in range(3) for i in range(2)]
    got = mmagrid.grid_of([a[i] for i, _ in pairs], [b[j] for _, j in pairs])
    assert got is not None and got[2].tolist() == [list(p) for p in pairs]
    assert mmagrid.grid_of([a[i] for i, _ in pairs[:-1]], [b[j] for _, j in pairs[:-1]]) is None    # one missing
    twice = pairs + pairs[:1]
    assert mmagrid.grid_of([a[i] for i, _ in twice], [b[j] for _, j in twice]) is None             # one twice
    same = [np.zeros(1), np.zeros(1)]                     # equal arrays, other objects: two A's, not one
    assert len(mmagrid.grid_of(same, [b[0], b[0]])[0]) == 2
    assert mmagrid.grid_of([a[0], a[0]], [b[0], b[0]]) is None                                     # (0, 0) twice


@pytest.mark.parametrize("name,t", [("SM90_MMA_E4M3", "fp8_e4m3"), ("FP22_ADA", "fp8_e4m3"), ("SM90_HMMA", "f16"),
                                    ("ADA_HMMA", "f16")])
@pytest.mark.parametrize("special", [None, "nan", "inf"])
def test_one_matrix_is_the_batch_bit_for_bit(name, t, special):
    import gfxsim.arch.nvidia as nv
    acc = getattr(nv, name)
    rng = np.random.default_rng(7)
    n_a, n_b, m, n, k = 2, 5, 16, 8, 32
    a = (rng.normal(size=(n_a, m, k)) * 2.0 ** rng.integers(-8, 8, (n_a, m, k))).astype(np.float16).astype(np.float32)
    b = (rng.normal(size=(n_b, k, n)) * 2.0 ** rng.integers(-8, 8, (n_b, 1, n))).astype(np.float16).astype(np.float32)
    a[rng.random(a.shape) < 0.2] = 0.0
    a[rng.random(a.shape) < 0.1] = -0.0
    a[0, 3] = 2.0 ** -20                                          # subnormal in f16
    b[1] = -b[1]
    if special == "nan":
        b[2, 5, 3] = np.nan
    elif special == "inf":
        a[1, 2, 7] = np.inf
    pairs = [(i, j) for i in range(n_a) for j in range(n_b)]
    rng.shuffle(pairs)                                            # issued in any order
    c = (rng.normal(size=(len(pairs), m, n)) * 2.0 ** rng.integers(-30, 30, (len(pairs), m, n))).astype(np.float32)
    c[0] = 0.0
    c[1] = -0.0
    batched = mma_f32(acc, np.stack([a[i] for i, _ in pairs]), np.stack([b[j] for _, j in pairs]), c, t, t)
    at = np.array(pairs)
    ga, gb, gc = mmagrid.stacked(a, b, c, at)
    one = mmagrid.unstacked(mma_f32(acc, ga, gb, gc, t, t), at, n_a, n_b)
    assert one.dtype == batched.dtype and one.shape == batched.shape
    np.testing.assert_array_equal(one.view(np.uint32), batched.view(np.uint32))
    assert (~np.isfinite(batched)).any() == (special is not None)          # the general path was taken
