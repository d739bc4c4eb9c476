"""V_MAX_F32 / V_MIN_F32 against a bound broadcast over the lanes (a clamp): a bound with no zero
returns numpy's answer without looking for +0 meeting -0 (fp._minmax), and that answer is the
ISA's element by element, signed zeros of the other operand included."""
import numpy as np
import pytest

from gfxsim.isa.fp import fmax, fmin


def _isa(x: float, y: float, is_max: bool) -> float:
    """One element by the ISA's rule (no NaN here): +0 is greater than -0."""
    if x == y == 0:
        return (0.0 if (not np.signbit(x) or not np.signbit(y)) else -0.0) if is_max else \
            (-0.0 if (np.signbit(x) or np.signbit(y)) else 0.0)
    return max(x, y) if is_max else min(x, y)


@pytest.mark.parametrize("bound", [-127.0, 127.0, 0.0, -0.0])
@pytest.mark.parametrize("is_max", [True, False])
def test_a_broadcast_bound_gives_the_isa_answer(bound, is_max):
    rng = np.random.default_rng(4)
    a = np.rint(rng.normal(size=(3, 64)) * 2).astype(np.float32)        # rint makes +0 and -0
    a[0, :8] = -0.0
    a[1, :8] = 0.0
    b = np.full((1, 64), bound, np.float32)
    got = (fmax if is_max else fmin)(a, b)
    want = np.array([[_isa(float(x), bound, is_max) for x in row] for row in a], np.float32)
    assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
    assert (a == 0).any() and (np.signbit(a) & (a == 0)).any()                  # zeros of both signs met
    full = (fmax if is_max else fmin)(a, np.broadcast_to(b, a.shape).copy())    # no broadcast: the mend path
    assert np.array_equal(got.view(np.uint32), full.view(np.uint32))
