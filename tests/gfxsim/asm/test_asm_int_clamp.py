"""VOP3 clamp on the unsigned add and subtracts: saturation to [0, 2^32 - 1] (Triton's usub.sat)."""
import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.run import kernel_from_text, run_asm


@pytest.mark.parametrize("mn, want", [("v_sub_u32_e64", lambda a, b: np.maximum(a - b, 0)),
                                      ("v_subrev_u32_e64", lambda a, b: np.maximum(b - a, 0)),
                                      ("v_add_u32_e64", lambda a, b: np.minimum(a + b, 0xFFFFFFFF))])
def test_clamp_saturates_the_unsigned_add_and_sub(mn, want):
    k = kernel_from_text(f"""
        s_load_dwordx2 s[4:5], s[0:1], 0x0
        v_lshlrev_b32_e32 v1, 2, v0
        s_waitcnt lgkmcnt(0)
        global_load_dword v2, v1, s[4:5]
        s_waitcnt vmcnt(0)
        {mn} v3, v2, 7 clamp
        {mn} v4, v2, 7
        global_store_dword v1, v3, s[4:5]
        global_store_dword v1, v4, s[4:5] offset:256
    """, args=[("x", "global_buffer", 8)])
    a = np.array([0, 1, 6, 7, 8, 0xFFFFFFF9, 0xFFFFFFFA, 0xFFFFFFFF] * 8, np.int64)
    b = Buffer("x", np.concatenate([a, np.zeros(64)]).astype(np.uint32))
    run_asm(k, 1, 64, args={"x": b})
    np.testing.assert_array_equal(b.array[:64], want(a, 7))
    wrap = {"v_sub_u32_e64": a - 7, "v_subrev_u32_e64": 7 - a, "v_add_u32_e64": a + 7}[mn] % (1 << 32)
    np.testing.assert_array_equal(b.array[64:], wrap)
