"""The dequant's freshness (semantics/dequant.py): a multiply that applies a scale to a fresh
matrix result takes the freshness off its source in exactly the lanes it applied it in."""
import numpy as np
import pytest


@pytest.mark.parametrize("partial", [False, True])
def test_a_dequant_takes_freshness_off_its_source_in_the_lanes_it_applied_the_scale(partial):
    """v_mul_f32 of a register fresh in some lanes by a scale of some origin in some lanes (EXEC
    full or partial): afterwards the source is fresh only where it was and the scale was not
    applied (not fresh, outside EXEC, or a factor of no origin), and the product is fresh where
    the source was (in EXEC)."""
    from gfxsim.machine.provenance import Prov
    from gfxsim.machine.vgpr import VGPRs
    from support.asm_sandbox import Sandbox
    sb = Sandbox(provenance=True)
    lanes = np.arange(64)
    sb.v[1] = np.float32(2.0).view(np.uint32)
    token = np.where(lanes % 5 == 0, -1, lanes).astype(np.int32)[None, :]     # lanes of no origin
    sb.st.vwrite_value("v", 2, VGPRs(sb.w, np.full((1, 64), np.float32(0.5).view(np.uint32), np.uint32), "u32",
                                     Prov(4, {"token": token}), regs=(2, 1)))
    fresh = lanes % 3 != 0
    sb.st.fresh["v"][1] = fresh
    ex = lanes < 40 if partial else np.ones(64, bool)
    sb.set_exec(ex)
    sb.run("v_mul_f32_e32 v3, v1, v2")
    applied = fresh & ex & (token[0] >= 0)
    assert applied.any() and (fresh & ~applied).any()
    assert (sb.st.fresh["v"][1] == (fresh & ~applied)).all()
    assert (sb.st.fresh["v"][3][ex] == fresh[ex]).all()
