"""Float instructions on NaN and infinite operands (a signalling NaN, inf * 0) give NaNs as the
hardware does, without a numpy RuntimeWarning leaking to the user, with provenance on or off."""
import warnings

import numpy as np
import pytest

from gfxsim.asm.semantics.vop import VALU
from support.asm_sandbox import Sandbox

SNAN, INF = 0x7F800001, 0x7F800000

FLOAT_VALU = sorted(n for n, (types, _) in VALU.items() if types and all(t == "f32" for t in types))


@pytest.mark.parametrize("provenance", [False, True])
@pytest.mark.parametrize("text", [
    "v_pk_mul_f32 v[8:9], v[4:5], v[6:7]",
    "v_pk_add_f32 v[8:9], v[4:5], v[6:7]",
    "v_pk_fma_f32 v[8:9], v[4:5], v[6:7], v[2:3]",
])
def test_packed_f32_on_a_signalling_nan_and_inf_times_zero(provenance, text):
    sb = Sandbox(provenance=provenance)
    sb.v[4], sb.v[5], sb.v[6], sb.v[7], sb.v[2], sb.v[3] = SNAN, INF, SNAN, 0, 0, 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        sb.run(text)
    assert np.isnan(sb.v.f32(8)).all()                      # sNaN op sNaN
    hi = sb.v.f32(9)                                          # inf * 0 (+ 0): NaN; inf + 0: inf
    assert (np.isinf(hi) if "add" in text else np.isnan(hi)).all()


@pytest.mark.parametrize("provenance", [False, True])
def test_every_f32_valu_instruction_on_nan_and_inf_warns_nothing(provenance):
    assert FLOAT_VALU
    for name in FLOAT_VALU:
        n = len(VALU[name][0])
        sb = Sandbox(provenance=provenance)
        sb.v[4], sb.v[5], sb.v[6] = SNAN, INF, 0
        srcs = ", ".join(f"v{4 + k}" for k in range(n))
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            sb.run(f"{name} v8, {srcs}")
