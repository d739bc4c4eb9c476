"""The translated steps (gfxsim/asm/translate.py) against the semantics functions they come from:
the same bits for every source form a step reads itself (VGPR, AGPR, SGPR and SGPR pairs, SCC,
inline and literal constants, the float modifiers), and an instruction whose operand checks fail gets no step, so the
error is the generic one, raised when a wave reaches it."""
from __future__ import annotations

import numpy as np
import pytest
from support.asm_sandbox import Sandbox

from gfxsim.asm.run import Program, kernel_from_text
from gfxsim.asm.state import AsmError

LINES = ["v_add_u32_e32 v3, v1, v2", "v_sub_u32_e64 v3, v1, s4", "v_mul_f32_e32 v3, 0x40490fdb, v1",
         "v_fma_f32 v3, -v1, |v2|, 0.5", "v_max_f32_e64 v3, -|v1|, s4", "v_xor_b32_e32 v3, 7, v2",
         "v_lshl_add_u32 v3, v1, 3, v2", "v_cvt_f32_i32_e32 v3, v1", "v_add_f32_e32 v3, a1, v2",
         "v_ashrrev_i32_e32 v3, s4, v1", "v_add_u32_e64 v3, v1, v2 clamp", "v_med3_f32 v3, v1, -1.0, 1.0",
         # scalar ALU: SGPRs, SCC, 64-bit pairs, a literal
         "s_add_u32 s5, s4, 17", "s_add_i32 s5, s4, 0x7fff0000", "s_lshl_b64 s[6:7], s[4:5], 3",
         "s_cselect_b32 s5, s4, 1", "s_and_b64 s[6:7], s[4:5], -1", "s_lshr_b64 s[6:7], s[4:5], s8",
         "s_and_saveexec_b64 s[6:7], s[4:5]", "s_andn2_saveexec_b64 s[4:5], s[4:5]", "s_or_saveexec_b64 s[6:7], -1"]


def _sandbox(seed):
    rng = np.random.default_rng(seed)
    sb = Sandbox()
    sb.v[1] = rng.integers(0, 2**32, 64)
    sb.v[2] = np.float32(rng.standard_normal(64) * 100).view(np.uint32)
    sb.v[3] = 0xDEADBEEF
    sb.st.vwrite("a", 1, np.float32(rng.standard_normal(64)).view(np.uint32)[None, :].copy())
    sb.set_sgpr(4, *(int(x) for x in rng.integers(0, 2**32, 2)))
    sb.set_sgpr(8, 35)
    sb.st.set_scc(int(rng.integers(0, 2)))
    sb.set_exec(rng.random(64) < 0.8)               # some lanes keep their old value
    return sb


@pytest.mark.parametrize("line", LINES)
def test_a_translated_step_gives_the_semantics_functions_bits(line):
    assert Program(kernel_from_text(line)).steps[0] is not None      # the forms a step reads itself
    for seed in range(3):
        a, b = _sandbox(seed), _sandbox(seed)
        a.run(line, translated=True)
        b.run(line, translated=False)
        np.testing.assert_array_equal(a.v[3], b.v[3])
        assert a.sgpr(4, 4) == b.sgpr(4, 4) and (a.st.scc == b.st.scc).all()
        np.testing.assert_array_equal(a.st.exec, b.st.exec)


@pytest.mark.parametrize("line, message", [("v_add_u32_e32 v3, -v1, v2", "modifier on -v1"),
                                           ("v_add_f32_e64 v3, v1, v2 op_sel:[1,0,0]", "unsupported modifier")])
def test_an_instruction_whose_checks_fail_has_no_step_and_errors_when_reached(line, message):
    assert Program(kernel_from_text(line)).steps[0] is None
    with pytest.raises(AsmError, match=message):
        _sandbox(0).run(line)


@pytest.mark.parametrize("line", ["v_cmp_gt_f32_e32 vcc, v1, v2", "v_cmp_le_f32_e64 s[10:11], -|v2|, 0.5",
                                  "v_cmp_lt_i32_e32 vcc, 5, v1", "v_cmp_ne_u32_e64 s[10:11], v1, s4",
                                  "v_cmp_eq_u32_e32 vcc, v1, v1", "v_cmp_gt_u64_e64 s[10:11], v[1:2], s[4:5]",
                                  "v_cmp_lt_i64_e32 vcc, 3, v[1:2]", "v_cmpx_gt_f32_e32 vcc, v2, v1",
                                  "v_cmpx_ne_u32_e64 s[10:11], 0, v1", "v_cmp_u_f32_e32 vcc, v2, v2"])
def test_a_compares_step_writes_the_functions_mask_and_exec(line):
    assert Program(kernel_from_text(line)).steps[0] is not None
    for seed in range(3):
        a, b = _sandbox(seed), _sandbox(seed)
        a.v[2] = np.where(np.arange(64) % 5 == 0, 0x7FC00000, a.v[2])       # NaNs for the unordered compares
        b.v[2] = a.v[2]
        a.run(line, translated=True)
        b.run(line, translated=False)
        np.testing.assert_array_equal(a.st.s, b.st.s)
        np.testing.assert_array_equal(a.st.exec, b.st.exec)
