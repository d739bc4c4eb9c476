"""V_EXP_F32 gives no denormal results: 2^x below 2^-126 is +0 (what Triton's ftz exp2, the bare
instruction, computes), on both front ends through the one ISA entry."""
import numpy as np

from gfxsim import Buffer
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.isa import fp


def test_results_below_the_smallest_normal_flush_to_zero():
    x = np.array([-126.0, -126.0001, -126.5, -127.0, -140.0, -149.0, -150.0, -np.inf], np.float32)
    got = fp.exp2(x)
    assert got[0] == np.float32(2.0 ** -126)
    assert (got[1:] == 0).all() and not np.signbit(got[1:]).any()
    # neighbours stay exact or correctly rounded; NaN stays NaN, a denormal input gives 1
    y = fp.exp2(np.array([-125.0, 0.0, np.nan, 1e-40, 3.0], np.float32))
    assert y[0] == np.float32(2.0 ** -125) and y[1] == 1 and np.isnan(y[2]) and y[3] == 1 and y[4] == 8


def test_the_asm_instruction_flushes():
    k = kernel_from_text("""
        s_load_dwordx2 s[4:5], s[0:1], 0x0
        v_lshlrev_b32_e32 v1, 2, v0
        s_waitcnt lgkmcnt(0)
        global_load_dword v2, v1, s[4:5]
        s_waitcnt vmcnt(0)
        v_exp_f32_e32 v2, v2
        global_store_dword v1, v2, s[4:5]
    """, args=[("x", "global_buffer", 8)])
    x = np.linspace(-135, -120, 64).astype(np.float32)
    b = Buffer("x", x.copy())
    run_asm(k, 1, 64, args={"x": b})
    want = np.where(x < -126, 0, np.exp2(x.astype(np.float64))).astype(np.float32)
    assert (b.array[x < -126] == 0).all()
    np.testing.assert_allclose(b.array, want, rtol=1e-7)
