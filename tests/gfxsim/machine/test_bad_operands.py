"""A wave's operations refuse an operand they cannot take with an error at the statement (kernel,
workgroup, wave, source line), never truncating it, wrapping it round or failing inside numpy."""
import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.errors import GfxSimError


def fails(body):
    def kernel(w, b):
        r = body(w, b)
        if hasattr(r, "__enter__"):
            with r:
                pass
    with pytest.raises(GfxSimError) as e:
        launch(kernel, grid=(1,), waves_per_group=1, args=(Buffer("b", np.zeros(256, np.float32)),))
    c = e.value.coords
    assert c["kernel"] == "kernel" and c["workgroup"] == (0, 0, 0) and c["wave"] == 0
    assert c["source"].startswith("test_bad_operands.py:")
    return str(e.value)


@pytest.mark.parametrize("body, cls, words", [
    (lambda w, b: w.global_load(b, 1.5), TypeError, ["global_load from 'b'", "float 1.5"]),
    (lambda w, b: w.global_load(b, np.zeros(3, np.int64)), TypeError, ["array of shape (3,)"]),
    (lambda w, b: w.global_load(b, 0, "f32"), TypeError, ["nbytes must be an integer"]),
    (lambda w, b: w.scalar_load(b, 2.0), TypeError, ["s_load from 'b'", "float 2.0"]),
    (lambda w, b: w.shfl_xor(w.zeros("f32"), 64), ValueError, ["shfl_xor mask", "[0, 64)", "64"]),
    (lambda w, b: w.shfl_xor(w.zeros("f32"), -1), ValueError, ["shfl_xor mask", "-1"]),
    (lambda w, b: w.bpermute(w.zeros("f32"), np.zeros(3, np.int64)), ValueError, ["shape (3,)"]),
    (lambda w, b: w.readlane(w.zeros("f32"), 99), IndexError, ["lane 99", "0-63"]),
    (lambda w, b: w.if_(1.5), TypeError, ["w.if_ needs a condition", "float 1.5"]),
    (lambda w, b: w.if_(np.ones(3, bool)), ValueError, ["shape (3,)"]),
    (lambda w, b: w.zeros("f32", -1), ValueError, ["w.zeros('f32', -1)", ">= 1"]),
    (lambda w, b: w.zeros("f32", 10 ** 7), ValueError, ["w.zeros('f32', 10000000)", "512 VGPRs"]),
    (lambda w, b: w.undef("f32", 2.5), ValueError, ["w.undef('f32', 2.5)"]),
])
def test_bad_operand_is_an_error_at_the_statement(body, cls, words):
    text = fails(body)
    for word in words:
        assert word in text


def test_good_operands_still_run():
    def kernel(w, b):
        v = w.global_load(b, np.int64(4))
        w.shfl_xor(v, 63)
        assert w.readlane(v, np.int64(63)) == 0.0
        with w.if_(np.ones(64, bool)):
            w.zeros("i8", 16)
    launch(kernel, grid=(1,), waves_per_group=1, args=(Buffer("b", np.zeros(256, np.float32)),))
