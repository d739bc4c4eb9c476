"""fp._minmax's numpy answer, asked once for a NaN and its least value by one reduction (an
absmax, all above zero, needs no zero check), against the ISA's element-by-element rule
(fp._minmax_exact), bit for bit; fp.has_nan against np.isnan(x).any()."""
import numpy as np
import pytest

from gfxsim.isa import fp

F32_SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38, 127.0, -127.0],
                       np.float32)
SNAN = np.uint32(0x7F800001)


def _operands(rng, dtype, n, kind):
    if kind == "positive":           # an absmax: every element above zero
        return np.abs(rng.normal(size=n)).astype(dtype) + dtype(1e-3)
    if kind == "zeros":              # rounded values: +0 and -0 everywhere
        return np.rint(rng.normal(size=n) * 0.7).astype(dtype) * rng.choice(np.array([1, -1], dtype), n)
    x = rng.choice(F32_SPECIAL, n).astype(dtype)
    if dtype == np.float32 and kind == "snan":
        x.view(np.uint32)[rng.integers(0, n, 3)] = SNAN
    return x


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    assert np.array_equal(got.view(u), want.view(u))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("kind", ["positive", "zeros", "special", "snan"])
@pytest.mark.parametrize("is_max", [True, False])
def test_minmax_is_the_isa_rule(dtype, kind, is_max):
    rng = np.random.default_rng(11)
    for n in (1, 7, 64, 1000):
        a, b = _operands(rng, dtype, n, kind), _operands(rng, dtype, n, kind)
        for x, y in ((a, b), (b, a), (a, a[:1]), (a[:1], b), (a, dtype(127)), (a, dtype(-0.0)), (a, dtype(0.0))):
            for ieee in (True, False):
                _same(fp._minmax(x, y, is_max, ieee), fp._minmax_exact(x, y, is_max, ieee))
    _same(fp._minmax(np.zeros(0, dtype), np.zeros(0, dtype), is_max), np.zeros(0, dtype))


def test_an_absmax_takes_the_one_pass_answer():
    """Every element above zero: numpy's maximum itself, no mended copy."""
    a = np.abs(np.random.default_rng(2).normal(size=(2, 256))).astype(np.float32) + np.float32(1)
    b = a[:, ::-1].copy()
    assert fp.fmax(a, b).base is None and np.array_equal(fp.fmax(a, b), np.maximum(a, b))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_has_nan_is_isnan_any(dtype):
    rng = np.random.default_rng(5)
    for n in (0, 1, 2, 15, 16, 17, 127, 128, 129, 4097):
        x = rng.normal(size=n).astype(dtype)
        assert fp.has_nan(x) is False
        for i in {0, n // 2, n - 1} if n else ():
            y = x.copy()
            y[(i + 1) % n] = -np.inf
            y[i] = np.nan
            assert fp.has_nan(y) is bool(np.isnan(y).any()) is True
            assert fp.has_nan(y[::-1]) is True and fp.has_nan(y.reshape(1, -1)) is True
    assert fp.has_nan(np.float32(np.nan)) and not fp.has_nan(np.float32(-np.inf))
    s = np.ones(9, np.float32)
    s.view(np.uint32)[4] = SNAN
    assert fp.has_nan(s)
