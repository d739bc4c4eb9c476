"""The MODE register: s_setreg/s_getreg on hwreg(HW_REG_MODE, ...), FP16_OVFL making fp8 and bf8
downcasts saturate (Triton's setting), and writes to the fields the front end does not model refused."""
import ml_dtypes
import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.asm.state import AsmError

BODY = """
    s_load_dwordx2 s[4:5], s[0:1], 0x0
    s_load_dwordx2 s[6:7], s[0:1], 0x8
    v_lshlrev_b32_e32 v1, 2, v0
    s_waitcnt lgkmcnt(0)
    global_load_dword v2, v1, s[4:5]
    s_waitcnt vmcnt(0)
    {setreg}
    v_mov_b32_e32 v3, 0
    v_cvt_pk_{kind}_f32 v3, v2, v2
    v_cvt_sr_{kind}_f32 v3, v2, v2 op_sel:[0,0,0,1]
    s_getreg_b32 s8, hwreg(HW_REG_MODE, 23, 1)
    v_mov_b32_e32 v4, s8
    v_lshlrev_b32_e32 v4, 24, v4
    v_or_b32_e32 v3, v3, v4
    global_store_dword v1, v3, s[6:7]
"""
ARGS = [("x", "global_buffer", 8), ("out", "global_buffer", 8)]
X = np.array([1.0, -3.5, 239.0, 241.0, 1000.0, -1e6, np.inf, np.nan] * 8, np.float32)


@pytest.mark.parametrize("kind", ["fp8", "bf8"])
@pytest.mark.parametrize("ovfl", [0, 1])
def test_fp16_ovfl_makes_downcasts_saturate(kind, ovfl):
    setreg = f"s_setreg_imm32_b32 hwreg(HW_REG_MODE, 23, 1), {ovfl}"
    k = kernel_from_text(BODY.format(setreg=setreg, kind=kind), args=ARGS)
    x = X * (200.0 if kind == "bf8" else 1.0)
    out = Buffer("out", np.zeros(64, np.uint32))
    run_asm(k, 1, 64, args={"x": Buffer("x", x), "out": out})
    w = out.array
    t = ml_dtypes.float8_e4m3fnuz if kind == "fp8" else ml_dtypes.float8_e5m2fnuz
    top = 240.0 if kind == "fp8" else 57344.0
    want = x.astype(t).astype(np.float32)
    if ovfl:
        want = np.where(np.isfinite(x) & np.isnan(want), np.sign(x) * top, want)
    for byte in (0, 1, 2):                      # pk's two bytes and sr's byte 2 (the values round alike here)
        got = ((w >> (8 * byte)) & 0xFF).astype(np.uint8).view(t).astype(np.float32)
        if byte == 2:                           # stochastic rounding: the clear overflows and the specials
            far = ~np.isfinite(x) | (np.abs(x) >= 2 * top)
            np.testing.assert_array_equal(got[far], want[far])
            assert (np.abs(got[np.isfinite(got)]) <= top).all()
            continue
        np.testing.assert_array_equal(got, want)
    assert ((w >> 24) == ovfl).all()            # s_getreg reads the bit back


def test_the_descriptor_sets_the_initial_fp16_ovfl():
    k = kernel_from_text(BODY.format(setreg="", kind="fp8"), args=ARGS, extra_descriptor={".amdhsa_fp16_overflow": 1})
    out = Buffer("out", np.zeros(64, np.uint32))
    run_asm(k, 1, 64, args={"x": Buffer("x", X), "out": out})
    assert ((out.array >> 24) == 1).all()
    assert ((out.array & 0xFF)[X == 1000.0] == 0x7F).all()       # +240


@pytest.mark.parametrize("line, field", [("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 0", "FP_DENORM"),
                                         ("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 2), 3", "FP_ROUND"),
                                         ("s_setreg_imm32_b32 hwreg(HW_REG_TRAPSTS, 0, 1), 1", "HW_REG_TRAPSTS")])
def test_writes_to_unmodelled_fields_are_refused(line, field):
    k = kernel_from_text(line, args=[])
    with pytest.raises(AsmError, match=field):
        run_asm(k, 1, 64, args={})


def test_a_write_leaving_the_other_fields_as_they_were_is_fine():
    # the whole register written back with FP_DENORM 3, IEEE and DX10_CLAMP 1 (the descriptor's) and FP16_OVFL 1
    k = kernel_from_text(f"s_setreg_imm32_b32 hwreg(HW_REG_MODE), {0xF0 | 1 << 8 | 1 << 9 | 1 << 23}", args=[])
    run_asm(k, 1, 64, args={})



@pytest.mark.parametrize("ovfl", [0, 1])
def test_fp16_ovfl_clamps_binary16_overflow_but_keeps_true_infinities(ovfl):
    k = kernel_from_text(f"""
        s_load_dwordx2 s[4:5], s[0:1], 0x0
        s_load_dwordx2 s[6:7], s[0:1], 0x8
        v_lshlrev_b32_e32 v1, 2, v0
        s_waitcnt lgkmcnt(0)
        global_load_dword v2, v1, s[4:5]
        s_waitcnt vmcnt(0)
        s_setreg_imm32_b32 hwreg(HW_REG_MODE, 23, 1), {ovfl}
        v_cvt_f16_f32_e32 v3, v2
        v_add_f16_e32 v4, v3, v3
        v_pk_add_f16 v5, v3, v3
        v_lshlrev_b32_e32 v4, 16, v4
        v_and_b32_e32 v3, 0xffff, v3
        v_or_b32_e32 v3, v3, v4
        global_store_dword v1, v3, s[6:7]
        global_store_dword v1, v5, s[6:7] offset:256
    """, args=ARGS)
    x = np.array([1.0, -3.0, 40000.0, -40000.0, 1e6, -1e6, np.inf, -np.inf] * 8, np.float32)
    out = Buffer("out", np.zeros(128, np.uint32))
    run_asm(k, 1, 64, args={"x": Buffer("x", x), "out": out})
    w = out.array[:64]
    cvt = (w & 0xFFFF).astype(np.uint16).view(np.float16)
    add = (w >> 16).astype(np.uint16).view(np.float16)
    pk = (out.array[64:] & 0xFFFF).astype(np.uint16).view(np.float16)
    h = x.astype(np.float16)
    big = np.float16(65504)
    fin = np.isfinite(x)
    want_cvt = np.where(fin & np.isinf(h), np.sign(x) * big, h).astype(np.float16) if ovfl else h
    with np.errstate(over="ignore"):
        s = want_cvt + want_cvt
    want_add = np.where(np.isfinite(want_cvt) & np.isinf(s), np.sign(s) * big, s).astype(np.float16) if ovfl else s
    np.testing.assert_array_equal(cvt, want_cvt)
    np.testing.assert_array_equal(add, want_add)
    np.testing.assert_array_equal(pk, want_add)
    assert np.isinf(cvt[x == np.inf]).all()        # a true infinity stays one
