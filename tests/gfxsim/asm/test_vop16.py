"""16-bit VALU of the asm front end against numpy float16 and hand-computed bits: binary16
arithmetic (one rounding, ties to even, overflow to inf, denormals, NaN, -0), 16-bit integer
wrap-around and 4-bit shift amounts, half selects (op_sel on sources and destination, SDWA
WORD_0/WORD_1 and dst_unused), packed VOP3P halves, packs, conversions (RNE, RTZ, saturating),
the mixed-precision fma, fp8/bf8 selects, and each result byte's provenance."""
from __future__ import annotations

import numpy as np
import pytest
from support.asm_sandbox import Sandbox

from gfxsim import Buffer
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.asm.state import AsmError
from gfxsim.isa import fp

U16, U32, F16 = np.uint16, np.uint32, np.float16
# binary16 bit patterns: zeros, denormals, normals around 1, the largest, infinities, NaNs
SPECIAL = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x3C01, 0x3800, 0x3E00, 0x7BFF, 0xFBFF,
           0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x1000, 0x4000, 0x5BFF, 0x0200, 0x8001, 0x3555, 0xC500, 0x2E66]
H = np.concatenate([np.array(SPECIAL, U16),
                    np.random.default_rng(4).integers(0, 0x10000, 64 - len(SPECIAL)).astype(U16)])


def _h(x):
    return np.asarray(x, F16).view(U16)


def _words(lo, hi=0):
    return np.asarray(lo, U16).astype(U32) | (np.asarray(hi, U16).astype(U32) << U32(16))


def _lo(w):
    return (w & U32(0xFFFF)).astype(U16)


def _hi(w):
    return (w >> U32(16)).astype(U16)


def _same16(got, want):
    """Equal binary16 bits, any NaN equal to any NaN."""
    g, w = np.asarray(got, U16).view(F16), np.asarray(want).astype(F16)
    both_nan = np.isnan(g) & np.isnan(w)
    np.testing.assert_array_equal(np.where(both_nan, 0, g.view(U16)), np.where(both_nan, 0, w.view(U16)))


def _sb(a, b=None, c=None):
    sb = Sandbox()
    sb.v[1] = _words(a, np.roll(a, 11))
    sb.v[2] = _words(np.roll(a, 5) if b is None else b, np.roll(a, 17))
    sb.v[3] = _words(np.roll(a, 23) if c is None else c, np.roll(a, 29))
    sb.v[9] = 0xDEADBEEF
    return sb


@pytest.mark.parametrize("ins,fn", [
    ("v_add_f16_e32", np.add), ("v_sub_f16_e32", np.subtract), ("v_mul_f16_e32", np.multiply),
    ("v_subrev_f16_e32", lambda a, b: b - a)])
def test_binary16_arithmetic_is_numpys_one_rounding_and_zeroes_the_high_half(ins, fn):
    sb = _sb(H)
    sb.run(f"{ins} v9, v1, v2")
    a, b = H.view(F16), np.roll(H, 5).view(F16)
    with np.errstate(all="ignore"):
        _same16(_lo(sb.v[9]), fn(a, b))
    assert (_hi(sb.v[9]) == 0).all()                 # gfx9: these opcodes zero the high half


def test_rounding_ties_overflow_and_denormals_by_hand():
    sb = Sandbox()
    cases = [  # (a, b, op, want)
        (0x3C00, 0x1000, "add", 0x3C00),   # 1 + 2^-11: a tie, to even (1.0)
        (0x3C01, 0x1000, "add", 0x3C02),   # 1+2^-10 + 2^-11: a tie, to even (1+2^-9)
        (0x7BFF, 0x5000, "add", 0x7C00),   # 65504 + 32: rounds up to inf
        (0x7BFF, 0x4C00, "add", 0x7C00),   # 65504 + 16: a tie, to the even neighbour 65536: inf
        (0x7BFE, 0x4C00, "add", 0x7BFE),   # 65472 + 16: a tie, stays (even)
        (0x0001, 0x3800, "mul", 0x0000),   # min denormal * 0.5: a tie, to zero
        (0x0003, 0x3800, "mul", 0x0002),   # 3 * 2^-25: a tie, to even (2 * 2^-24)
        (0x8000, 0x0000, "add", 0x0000),   # -0 + +0 = +0
        (0x8000, 0x8000, "add", 0x8000),   # -0 + -0 = -0
    ]
    a, b = (np.resize(np.array([c[k] for c in cases], U16), 64) for k in (0, 1))
    sb.v[1], sb.v[2] = a, b
    sb.run("v_add_f16_e32 v3, v1, v2", "v_mul_f16_e32 v4, v1, v2")
    got = np.where(np.resize(np.array([c[2] == "add" for c in cases]), 64), _lo(sb.v[3]), _lo(sb.v[4]))
    np.testing.assert_array_equal(got, np.resize(np.array([c[3] for c in cases], U16), 64))


def test_fma_f16_rounds_once_and_op_sel_picks_halves():
    sb = Sandbox()
    # (1+2^-10)^2 + 2^-11 = 1 + 2^-9 + 2^-11 + 2^-20: above the midpoint -> 0x3C03 (a mad: 0x3C02)
    sb.v[1] = _words(0x3C01, 0x1000)
    sb.v[9] = 0xDEADBEEF
    sb.run("v_fma_f16 v2, v1, v1, v1 op_sel:[0,0,1,0]",
           "v_fma_f16 v9, v1, v1, v1 op_sel:[0,0,1,1]")        # the high half, the low kept
    assert (sb.v[2] == 0x3C03).all()
    assert (sb.v[9] == 0x3C03BEEF).all()


def test_sdwa_halves_and_dst_unused():
    sb = _sb(H)
    a_hi, b_lo = np.roll(H, 11).view(F16), np.roll(H, 5).view(F16)
    sb.v[4] = 0xDEADBEEF
    sb.v[5] = 0xDEADBEEF
    sb.run("v_max_f16_sdwa v3, v1, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:WORD_0",
           "v_add_f16_sdwa v4, v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:WORD_1 src1_sel:WORD_0",
           "v_add_u16_sdwa v5, v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_SEXT src0_sel:WORD_0 src1_sel:WORD_0",
           "v_add_u16_sdwa v6, v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:WORD_0 src1_sel:WORD_0")
    with np.errstate(all="ignore"):
        _same16(_lo(sb.v[3]), fp.fmax(a_hi, b_lo))      # IEEE mode: a quiet NaN yields the other
        _same16(_hi(sb.v[4]), a_hi + b_lo)
    assert (_hi(sb.v[3]) == 0).all() and (_lo(sb.v[4]) == 0xBEEF).all()
    s = (H.astype(np.uint32) + np.roll(H, 5)) & 0xFFFF
    np.testing.assert_array_equal(sb.v[6], s << 16)
    np.testing.assert_array_equal(sb.v[5], s << 16)          # SEXT fills above the field: WORD_1 has nothing above


def test_16_bit_integers_wrap_and_shift_by_four_bits():
    rng = np.random.default_rng(9)
    a = rng.integers(0, 0x10000, 64).astype(U16)
    b = rng.integers(0, 0x10000, 64).astype(U16)
    a[:4], b[:4] = [0xFFFF, 0x8000, 0x7FFF, 3], [1, 0x8000, 0x11, 0x13]
    sb = _sb(a, b)
    sb.run("v_add_u16_e32 v4, v1, v2", "v_sub_u16_e32 v5, v1, v2", "v_mul_lo_u16_e32 v6, v1, v2",
           "v_lshlrev_b16_e32 v7, v2, v1", "v_lshrrev_b16_e32 v8, v2, v1", "v_ashrrev_i16_e32 v10, v2, v1",
           "v_max_i16_e32 v11, v1, v2", "v_max_u16_e32 v12, v1, v2", "v_mad_u16 v13, v1, v2, v1",
           "v_mad_i16 v14, v1, v2, v2 op_sel:[0,0,0,1]")
    A, B = a.astype(np.int64), b.astype(np.int64)
    sh = B & 15
    want = {4: A + B, 5: A - B, 6: A * B, 7: A << sh, 8: A >> sh,
            10: a.view(np.int16).astype(np.int64) >> sh, 11: np.maximum(a.view(np.int16), b.view(np.int16)),
            12: np.maximum(a, b), 13: A * B + A}
    for r, w in want.items():
        np.testing.assert_array_equal(sb.v[r], np.asarray(w).astype(np.int64) & 0xFFFF, err_msg=f"v{r}")
    mad = (a.view(np.int16).astype(np.int64) * b.view(np.int16) + b.view(np.int16)) & 0xFFFF
    np.testing.assert_array_equal(_hi(sb.v[14]), mad)


def test_compares_of_halves():
    a = H.copy()
    b = np.roll(H, 3)
    sb = _sb(a, b)
    sb.run("v_cmp_lt_f16_e32 vcc, v1, v2", "v_cmp_neq_f16_e64 s[4:5], v1, v2",
           "v_cmp_gt_u16_e64 s[6:7], v1, v2", "v_cmp_gt_i16_e64 s[8:9], v1, v2",
           "v_cmp_eq_f16_sdwa s[10:11], v1, v1 src0_sel:WORD_1 src1_sel:WORD_1")
    fa, fb = a.view(F16), b.view(F16)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(sb.vcc(), fa < fb)
        np.testing.assert_array_equal(sb.st.mask_of(4), ~(fa == fb))        # NaN: not equal -> true
        hi = np.roll(H, 11).view(F16)
        np.testing.assert_array_equal(sb.st.mask_of(10), hi == hi)          # NaN != NaN
    np.testing.assert_array_equal(sb.st.mask_of(6), a > b)
    np.testing.assert_array_equal(sb.st.mask_of(8), a.view(np.int16) > b.view(np.int16))


def test_packed_halves_op_sel_neg_and_integer_forms():
    a, b = H, np.roll(H, 7)
    sb = Sandbox()
    sb.v[1], sb.v[2] = _words(a, b), _words(b, a)
    sb.run("v_pk_add_f16 v3, v1, v2", "v_pk_mul_f16 v4, v1, v2 op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[0,1]",
           "v_pk_fma_f16 v5, v1, v2, v1 neg_hi:[1,0,0]", "v_pk_max_f16 v6, v1, v2",
           "v_pk_add_f16 v7, v1, 1.0 op_sel_hi:[1,0]",
           "v_pk_lshlrev_b16 v8, 3, v1 op_sel_hi:[0,1]", "v_pk_ashrrev_i16 v10, 17, v1 op_sel_hi:[0,1]",
           "v_pk_mul_lo_u16 v11, v1, v2", "v_pk_min_i16 v12, v1, v2", "v_pk_sub_u16 v13, v1, v2")
    fa, fb = a.view(F16), b.view(F16)
    with np.errstate(all="ignore"):
        _same16(_lo(sb.v[3]), fa + fb)
        _same16(_hi(sb.v[3]), fb + fa)
        _same16(_lo(sb.v[4]), fb * -fb)                  # lo: S0.hi * -(S1.lo)
        _same16(_hi(sb.v[4]), fa * fa)                   # hi: S0.lo * S1.hi
        _same16(_hi(sb.v[5]), (-fb.astype(np.float64) * fa + fb).astype(F16))
        _same16(_lo(sb.v[7]), fa + F16(1))
        _same16(_hi(sb.v[7]), fb + F16(1))
    np.testing.assert_array_equal(_lo(sb.v[8]), (a.astype(np.int64) << 3) & 0xFFFF)
    np.testing.assert_array_equal(_hi(sb.v[8]), (b.astype(np.int64) << 3) & 0xFFFF)
    np.testing.assert_array_equal(_hi(sb.v[10]).view(np.int16), b.view(np.int16) >> 1)   # 17 & 15
    np.testing.assert_array_equal(_lo(sb.v[11]), (a.astype(np.int64) * b) & 0xFFFF)
    np.testing.assert_array_equal(_hi(sb.v[12]).view(np.int16), np.minimum(b.view(np.int16), a.view(np.int16)))
    np.testing.assert_array_equal(_lo(sb.v[13]), (a.astype(np.int64) - b) & 0xFFFF)


def test_the_high_half_of_a_packed_constant_is_refused():
    with pytest.raises(AsmError, match="high half of the constant 1.0"):
        Sandbox().run("v_pk_add_f16 v3, v1, 1.0")


def test_conversions_round_saturate_and_pack():
    f = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 65519.0, 65520.0, 1e6, -1e6, np.inf, np.nan, -0.0, 2.0 ** -25,
                  2.0 ** -24 * 1.5, 1e-30, -2.5, 3.999, 70000.0, -40000.0] * 4, np.float32)
    sb = Sandbox()
    sb.v[1] = f.view(U32)
    sb.v[9] = 0xDEADBEEF
    sb.run("v_cvt_f16_f32_e32 v2, v1", "v_cvt_pkrtz_f16_f32 v3, v1, v1",
           "v_cvt_f16_f32_sdwa v9, v1 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:DWORD",
           "v_cvt_f32_f16_e32 v4, v2", "v_cvt_u16_f16_e32 v5, v2", "v_cvt_i16_f16_e32 v6, v2",
           "v_cvt_f16_u16_e32 v7, v5", "v_cvt_f16_i16_e32 v8, v6")
    with np.errstate(all="ignore"):
        rne = f.astype(F16)
    _same16(_lo(sb.v[2]), rne)
    assert (_hi(sb.v[2]) == 0).all()
    np.testing.assert_array_equal(_hi(sb.v[9]), _lo(sb.v[2]))
    assert (_lo(sb.v[9]) == 0xBEEF).all()
    assert _lo(sb.v[2])[0] == 0x3C00 and _lo(sb.v[2])[1] == 0x3C02          # ties to even
    assert _lo(sb.v[2])[2] == 0x7BFF and _lo(sb.v[2])[3] == 0x7C00          # 65520 overflows to inf
    rtz = _lo(sb.v[3])
    assert rtz[0] == 0x3C00 and rtz[1] == 0x3C01 and rtz[3] == 0x7BFF        # toward zero: no overflow to inf
    assert rtz[4] == 0x7BFF and rtz[5] == 0xFBFF and rtz[6] == 0x7C00 and np.isnan(rtz.view(F16)[7])
    np.testing.assert_array_equal(rtz, _hi(sb.v[3]))
    np.testing.assert_array_equal(sb.v.f32(4)[~np.isnan(rne)], rne[~np.isnan(rne)].astype(np.float32))
    h = rne.astype(np.float64)
    with np.errstate(invalid="ignore"):
        u16 = np.where(np.isnan(h), 0, np.clip(np.trunc(h), 0, 65535)).astype(np.int64)
        i16 = np.where(np.isnan(h), 0, np.clip(np.trunc(h), -32768, 32767)).astype(np.int64)
    np.testing.assert_array_equal(_lo(sb.v[5]), u16)
    np.testing.assert_array_equal(_lo(sb.v[6]).view(np.int16), i16)
    with np.errstate(over="ignore"):
        _same16(_lo(sb.v[7]), u16.astype(np.float64).astype(F16))
    _same16(_lo(sb.v[8]), i16.astype(F16))


def test_pack_b32_f16_op_sel_and_neg():
    sb = Sandbox()
    sb.v[1], sb.v[2] = _words(0x3C00, 0x4000), _words(0x4400, 0xC500)
    sb.run("v_pack_b32_f16 v3, v1, v2", "v_pack_b32_f16 v4, v1, -v2 op_sel:[1,1]")
    assert (sb.v[3] == 0x44003C00).all()
    assert (sb.v[4] == 0x45004000).all()


def test_transcendentals_and_ldexp():
    x = np.array([1.0, 2.0, -3.0, 0.5, 10.0, 0.0, -0.0, np.inf, 1e-5, 0.1, 15.0, 65504.0, -1.0, 3.0, 7.0, 100.0] * 4, F16)
    e = np.array([3, -2, 40, -30, 0, 1, 5, -1] * 8, np.int16)
    sb = Sandbox()
    sb.v[1], sb.v[2] = _h(x), e.view(U16)
    sb.run("v_exp_f16_e32 v3, v1", "v_rcp_f16_e32 v4, v1", "v_sqrt_f16_e32 v5, v1", "v_rsq_f16_e32 v6, v1",
           "v_ldexp_f16_e32 v7, v1, v2", "v_log_f16_e32 v8, v1")
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        for r, w in ((3, np.exp2(x64)), (4, 1 / x64), (5, np.sqrt(x64)), (6, 1 / np.sqrt(x64)),
                     (7, np.ldexp(x64, e.astype(np.int64))), (8, np.log2(x64))):
            _same16(_lo(sb.v[r]), w.astype(F16))
    assert _lo(sb.v[3])[0] == 0x4000 and _lo(sb.v[7])[2] == 0xFC00          # 2^1 exact; -3 * 2^40: -inf
    assert _lo(sb.v[4])[5] == 0x7C00 and _lo(sb.v[4])[6] == 0xFC00          # 1/+-0 = +-inf


def test_fma_mix_reads_halves_or_words_and_rounds_once():
    sb = Sandbox()
    sb.v[1] = _words(0x3C01, 0x4000)                            # (1+2^-10, 2.0)
    sb.v[2] = np.full(64, np.float32(2.0 ** -11).view(U32))
    sb.v[3] = np.full(64, 0xDEADBEEF, U32)
    sb.v[4] = np.full(64, 0xDEADBEEF, U32)
    sb.run("v_fma_mix_f32 v5, v1, v1, v2 op_sel:[1,0,0] op_sel_hi:[1,1,0]",          # 2 * (1+2^-10) + 2^-11
           "v_fma_mixlo_f16 v3, v1, v1, v2 op_sel_hi:[1,1,0]",
           "v_fma_mixhi_f16 v4, v1, v1, v2 op_sel_hi:[1,1,0]")
    assert (sb.v.f32(5) == np.float32(2 * (1 + 2.0 ** -10) + 2.0 ** -11)).all()
    assert (sb.v[3] == 0xDEAD3C03).all()                        # one rounding (a mad would give 0x3C02)
    assert (sb.v[4] == 0x3C03BEEF).all()


def test_cndmask_sdwa_selects_halves():
    sb = Sandbox()
    sb.v[1], sb.v[2] = _words(0x1111, 0x2222), _words(0x3333, 0x4444)
    sb.v[3] = 0xDEADBEEF
    sb.set_sgpr(106, 0x55555555, 0x55555555)
    sb.run("v_cndmask_b32_sdwa v3, v1, v2, vcc dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:WORD_1 "
           "src1_sel:WORD_0")
    even = np.arange(64) % 2 == 0
    np.testing.assert_array_equal(sb.v[3], np.where(even, 0x3333BEEF, 0x2222BEEF))


def test_fp8_byte_and_word_selects():
    import ml_dtypes
    sb = Sandbox()
    f = np.array([240.0, 1e6, -0.0, 0.0078125, 3.0, -448.0, 20.0, np.nan] * 8, np.float32)
    sb.v[1], sb.v[2] = f.view(U32), np.roll(f, 1).view(U32)
    sb.v[3] = 0xDEADBEEF
    sb.run("v_cvt_pk_fp8_f32 v3, v1, v2 op_sel:[0,0,1]", "v_cvt_f32_fp8_sdwa v4, v3 src0_sel:BYTE_2",
           "v_cvt_pk_f32_fp8_sdwa v[5:6], v3 src0_sel:WORD_1", "v_cvt_pk_bf8_f32 v7, v1, v2",
           "v_cvt_f32_bf8_e32 v8, v7")
    e4 = lambda x: x.astype(ml_dtypes.float8_e4m3fnuz).view(np.uint8).astype(np.uint32)       # noqa: E731
    e5 = lambda x: x.astype(ml_dtypes.float8_e5m2fnuz).view(np.uint8).astype(np.uint32)       # noqa: E731
    np.testing.assert_array_equal(sb.v[3], 0xBEEF | (e4(f) << 16) | (e4(np.roll(f, 1)) << 24))
    assert (sb.v[3][:2] >> 16 & 0xFF == [0x7F, 0x80]).all()      # 240: the largest; 1e6: NaN (no clamp)
    dec = (sb.v[3] >> 16 & 0xFF).astype(np.uint8).view(ml_dtypes.float8_e4m3fnuz).astype(np.float32)
    np.testing.assert_array_equal(sb.v.f32(4)[~np.isnan(dec)], dec[~np.isnan(dec)])
    np.testing.assert_array_equal(sb.v.f32(5)[~np.isnan(dec)], dec[~np.isnan(dec)])
    np.testing.assert_array_equal(sb.v[7] & 0xFFFF, e5(f) | (e5(np.roll(f, 1)) << 8))
    dec5 = (sb.v[7] & 0xFF).astype(np.uint8).view(ml_dtypes.float8_e5m2fnuz).astype(np.float32)
    np.testing.assert_array_equal(sb.v.f32(8)[~np.isnan(dec5)], dec5[~np.isnan(dec5)])


def test_fmamk_fmaak_fused_and_madmk_not():
    sb = Sandbox()
    x = np.float32(1 + 2.0 ** -12)
    sb.v[1] = np.full(64, x.view(U32))
    sb.v[2] = np.full(64, np.float32(-1.0).view(U32))
    k = np.float32(1 + 2.0 ** -12).view(U32)
    sb.run(f"v_fmamk_f32 v3, v1, {k:#x}, v2", f"v_fmaak_f32 v4, v1, v1, {np.float32(-1).view(U32):#x}",
           f"v_madmk_f32 v5, v1, {k:#x}, v2", "v_nop")
    exact = np.float32(2.0 ** -11 + 2.0 ** -24)                 # (1+2^-12)^2 - 1, exact in binary32
    assert (sb.v.f32(3) == exact).all() and (sb.v.f32(4) == exact).all()
    assert (sb.v.f32(5) == np.float32(2.0 ** -11)).all()        # the product rounded first


# -- provenance: halves are two bytes, each result byte carries its source bytes' tokens ----------
# each lane loads a word of two f16 halves with tokens 2l (low) and 2l+1 (high); byte i of the
# stored word must carry the token of half LO/HI, or none (-)
PROV = {
    "v_pack_b32_f16 op_sel": ("v_pack_b32_f16 v3, v2, v2 op_sel:[1,0]", "HHLL"),
    "v_add_f16_e32 zeroes the high half": ("v_add_f16_e32 v3, v2, v2", "LL--"),
    "v_add_f16_sdwa WORD_1 preserve": ("v_mov_b32_e32 v3, v2\n  v_add_f16_sdwa v3, v2, v2 dst_sel:WORD_1 "
                                       "dst_unused:UNUSED_PRESERVE src0_sel:WORD_1 src1_sel:WORD_1", "LLHH"),
    "v_fma_f16 op_sel dst": ("v_mov_b32_e32 v3, v2\n  v_fma_f16 v3, v2, v2, v2 op_sel:[1,1,1,1]", "LLHH"),
    "v_pk_mul_f16 swapped": ("v_pk_mul_f16 v3, v2, v2 op_sel:[1,1] op_sel_hi:[0,0]", "HHLL"),
    "v_cvt_f32_f16 then back": ("v_cvt_f32_f16_sdwa v4, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1\n"
                                "  v_cvt_f16_f32_e32 v3, v4", "HH--"),
    "v_cvt_pkrtz_f16_f32": ("v_cvt_f32_f16_sdwa v4, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1\n"
                            "  v_cvt_f32_f16_e32 v5, v2\n  v_cvt_pkrtz_f16_f32 v3, v4, v5", "HHLL"),
    "v_lshlrev_b16 by 8": ("v_lshlrev_b16_e32 v3, 8, v2", "-L--"),
    "v_cndmask_b32_sdwa": ("v_cndmask_b32_sdwa v3, v2, v2, vcc dst_sel:WORD_0 dst_unused:UNUSED_PAD "
                           "src0_sel:WORD_1 src1_sel:WORD_1", "HH--"),
    "v_fma_mixlo_f16": ("v_mov_b32_e32 v3, v2\n  v_fma_mixlo_f16 v3, v2, v2, v2 op_sel:[1,1,1] op_sel_hi:[1,1,1]",
                        "HHHH"),
    "v_fma_mixhi_f16": ("v_mov_b32_e32 v3, v2\n  v_fma_mixhi_f16 v3, v2, v2, v2 op_sel_hi:[1,1,1]", "LLLL"),
    "v_cvt_pk_fp8_f32 word 0": ("v_cvt_f32_f16_sdwa v4, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1\n"
                                "  v_cvt_f32_f16_e32 v5, v2\n  v_mov_b32_e32 v3, v2\n  v_cvt_pk_fp8_f32 v3, v4, v5",
                                "HLHH"),
}


@pytest.mark.parametrize("form", sorted(PROV))
def test_half_provenance(form):
    body, want = PROV[form]
    k = kernel_from_text("""
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[6:7], s[0:1], 0x8
  s_mov_b64 vcc, -1
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v1, 2, v0
  global_load_dword v2, v1, s[4:5]
  s_waitcnt vmcnt(0)
  """ + body + """
  global_store_dword v1, v3, s[6:7]""", "prov16", args=[("h", "global_buffer", 8), ("out", "global_buffer", 8)])
    h = np.array([0x3C00, 0x4200] * 64, U16).reshape(64, 2)
    out = Buffer.empty("out", (64, 4), np.uint8)
    run_asm(k, args={"h": Buffer("h", h, {"token": np.arange(128).reshape(64, 2)}), "out": out})
    mp = out.prov
    ids = mp.ids["token"]
    got = (np.repeat(ids, mp.unit) if mp.unit > 1 else ids.reshape(-1))[:256].reshape(64, 4)
    lane = np.arange(64)[:, None]
    expect = np.stack([{"L": 2 * lane[:, 0], "H": 2 * lane[:, 0] + 1, "-": np.full(64, -1)}[c] for c in want], 1)
    assert (got == expect).all(), f"{form}: lane 1 {got[1].tolist()}, expected {expect[1].tolist()}"


def test_stochastic_fp8_rounding_adds_the_random_bits_below_the_kept_ones():
    sb = Sandbox()
    x = np.float32(1 + 2.0 ** -4)                    # halfway between fp8 1.0 (0x40) and 1.125 (0x41)
    sb.v[1] = np.full(64, x.view(U32))
    # the 20 dropped bits of the significand are 0x80000: a random word below 0x80000 in its low
    # 20 bits keeps 1.0, from 0x80000 up it carries into 1.125 (the bits above 20 are not used)
    sb.v[2] = np.resize(np.array([0, 0x7FFFF, 0x80000, 0xFFFFF, 0xFFF00000, 0xFFF7FFFF], U32), 64)
    sb.v[3] = 0xDEADBEEF
    sb.v[4] = 0xDEADBEEF
    sb.run("v_cvt_sr_fp8_f32 v3, v1, v2 op_sel:[0,0,0,1]",      # byte 2
           "v_cvt_sr_bf8_f32 v4, v1, v2")                        # byte 0
    want = np.resize(np.array([0x40, 0x40, 0x41, 0x41, 0x40, 0x40], U32), 64)
    np.testing.assert_array_equal(sb.v[3], (0xDEADBEEF & ~0xFF0000) | (want << 16))
    # bf8 (bias 16): 1.0 is 0x40; the dropped 21 bits hold 0x80000, and no low-21-bit random value
    # here reaches 0x180000, so every lane keeps 1.0
    np.testing.assert_array_equal(sb.v[4], (0xDEADBEEF & ~0xFF) | 0x40)
    sb.v[1] = np.full(64, np.float32(2.0 ** -9).view(U32))         # an fp8 denormal result
    with pytest.raises(AsmError, match="fp8 denormal range"):
        sb.run("v_cvt_sr_fp8_f32 v3, v1, v2")


def test_three_operand_16_bit_min_max_med3_fract_and_frexp():
    a = H.view(F16)
    b, c = np.roll(H, 9).view(F16), np.roll(H, 21).view(F16)
    sb = Sandbox()
    sb.v[1], sb.v[2], sb.v[3] = _h(a), _h(b), _h(c)
    sb.run("v_med3_f16 v4, v1, v2, v3", "v_max3_f16 v5, v1, v2, v3", "v_min3_i16 v6, v1, v2, v3",
           "v_med3_u16 v7, v1, v2, v3", "v_fract_f16_e32 v8, v1", "v_frexp_mant_f16_e32 v9, v1",
           "v_frexp_exp_i16_f16_e32 v10, v1")
    with np.errstate(all="ignore"):
        _same16(_lo(sb.v[4]), fp.med3(a, b, c))
        _same16(_lo(sb.v[5]), fp.fmax(fp.fmax(a, b), c))
        ia, ib, ic = (x.view(np.int16) for x in (a, b, c))
        np.testing.assert_array_equal(_lo(sb.v[6]).view(np.int16), np.minimum(np.minimum(ia, ib), ic))
        ua, ub, uc = (x.view(U16) for x in (a, b, c))
        np.testing.assert_array_equal(_lo(sb.v[7]), np.maximum(np.minimum(ua, ub), np.minimum(np.maximum(ua, ub), uc)))
        fr = np.where(np.isinf(a), np.nan, np.minimum(a.astype(np.float64) - np.floor(a), 1 - 2.0 ** -11)).astype(F16)
        _same16(_lo(sb.v[8]), fr)
        m, e = np.frexp(a)
        _same16(_lo(sb.v[9]), m)
        np.testing.assert_array_equal(_lo(sb.v[10]).view(np.int16), np.where(np.isfinite(a), e, 0))


def test_cmp_class_f16():
    sb = Sandbox()
    sb.v[1] = _words(H, np.roll(H, 1))
    sb.run("v_cmp_class_f16_e64 s[0:1], v1, 0x204", "v_cmp_class_f16_e32 vcc, v1, 0x3",
           "v_cmp_class_f16_sdwa s[2:3], v1, v1 src0_sel:WORD_1 src1_sel:WORD_0")
    x = H.view(F16)
    np.testing.assert_array_equal(sb.st.mask_of(0), np.isinf(x))
    np.testing.assert_array_equal(sb.vcc(), np.isnan(x))
    # the mask from the low half of v1 itself: its class bits against the high half's value
    from gfxsim.isa.double import float_class
    np.testing.assert_array_equal(sb.st.mask_of(2), (float_class(np.roll(H, 1).view(F16)) & H) != 0)


def test_sdwa_compares_of_bytes_and_words():
    sb = Sandbox()
    w = np.random.default_rng(12).integers(0, 2 ** 32, 64, dtype=np.uint64).astype(U32)
    sb.v[1], sb.v[2] = w, 0x7F
    sb.run("v_cmp_eq_u32_sdwa vcc, v1, v1 src0_sel:BYTE_1 src1_sel:BYTE_2",
           "v_cmp_gt_i32_sdwa s[0:1], sext(v1), v2 src0_sel:BYTE_0 src1_sel:DWORD",
           "v_cmp_lt_u32_sdwa s[2:3], v1, v2 src0_sel:WORD_1 src1_sel:DWORD")
    b = w.view(np.uint8).reshape(64, 4)
    np.testing.assert_array_equal(sb.vcc(), b[:, 1] == b[:, 2])
    np.testing.assert_array_equal(sb.st.mask_of(0), b[:, 0].view(np.int8) > 0x7F)        # never: sign-extended
    np.testing.assert_array_equal(sb.st.mask_of(2), (w >> 16) < 0x7F)


# -- every remaining 16-bit row once, against numpy on the halves --------------------------------
def _f(fn):
    """A binary16 reference evaluated in binary64 and rounded once."""
    def run(*xs):
        with np.errstate(all="ignore"):
            return np.asarray(fn(*(x.view(F16).astype(np.float64) for x in xs))).astype(F16).view(U16)
    return run


def _i16(fn):
    def run(*xs):
        return (np.asarray(fn(*(x.view(np.int16).astype(np.int64) for x in xs))) & 0xFFFF).astype(U16)
    return run


def _u16(fn):
    def run(*xs):
        return (np.asarray(fn(*(x.astype(np.int64) for x in xs))) & 0xFFFF).astype(U16)
    return run


ROWS = {
    "v_ceil_f16_e32 v4, v1": _f(np.ceil), "v_floor_f16_e32 v4, v1": _f(np.floor),
    "v_rndne_f16_e32 v4, v1": _f(np.rint), "v_trunc_f16_e32 v4, v1": _f(np.trunc),
    "v_min_f16_e32 v4, v1, v2": lambda a, b: fp.fmin(a.view(F16), b.view(F16)).view(U16),
    "v_min_i16_e32 v4, v1, v2": _i16(np.minimum), "v_min_u16_e32 v4, v1, v2": _u16(np.minimum),
    "v_subrev_u16_e32 v4, v1, v2": _u16(lambda a, b: b - a),
    "v_max3_i16 v4, v1, v2, v3": _i16(lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_max3_u16 v4, v1, v2, v3": _u16(lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_u16 v4, v1, v2, v3": _u16(lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_min3_f16 v4, v1, v2, v3": lambda a, b, c: fp.fmin(fp.fmin(a.view(F16), b.view(F16)), c.view(F16)).view(U16),
    "v_med3_i16 v4, v1, v2, v3": _i16(lambda a, b, c: np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))),
}
PK_ROWS = {   # packed: the same function on the low halves and on the high halves
    "v_pk_add_u16 v4, v1, v2": _u16(np.add), "v_pk_add_i16 v4, v1, v2": _i16(np.add),
    "v_pk_sub_i16 v4, v1, v2": _i16(np.subtract), "v_pk_lshrrev_b16 v4, v1, v2": _u16(lambda a, b: b >> (a & 15)),
    "v_pk_max_i16 v4, v1, v2": _i16(np.maximum), "v_pk_max_u16 v4, v1, v2": _u16(np.maximum),
    "v_pk_min_u16 v4, v1, v2": _u16(np.minimum),
    "v_pk_min_f16 v4, v1, v2": lambda a, b: fp.fmin(a.view(F16), b.view(F16)).view(U16),
    "v_pk_mad_u16 v4, v1, v2, v3": _u16(lambda a, b, c: a * b + c),
    "v_pk_mad_i16 v4, v1, v2, v3": _i16(lambda a, b, c: a * b + c),
}


def _abc():
    return H, np.roll(H, 9), np.roll(H, 21)


@pytest.mark.parametrize("line", sorted(ROWS))
def test_each_16_bit_row(line):
    a, b, c = _abc()
    sb = Sandbox()
    sb.v[1], sb.v[2], sb.v[3] = a, b, c
    sb.run(line)
    n = line.count(", v")
    want = ROWS[line](*(a, b, c)[:n])
    if "_f16" in line:
        _same16(_lo(sb.v[4]), want.view(F16))
    else:
        np.testing.assert_array_equal(_lo(sb.v[4]), want)
    assert (_hi(sb.v[4]) == 0).all()


@pytest.mark.parametrize("line", sorted(PK_ROWS))
def test_each_packed_row(line):
    a, b, c = _abc()
    sb = Sandbox()
    sb.v[1], sb.v[2], sb.v[3] = _words(a, c), _words(b, a), _words(c, b)
    sb.run(line)
    n = line.count(", v")
    fn = PK_ROWS[line]
    lo, hi = fn(*(a, b, c)[:n]), fn(*(c, a, b)[:n])
    if "_f16" in line:
        _same16(_lo(sb.v[4]), lo.view(F16))
        _same16(_hi(sb.v[4]), hi.view(F16))
    else:
        np.testing.assert_array_equal(sb.v[4], _words(lo, hi))


REL = {"f": lambda a, b: np.zeros(a.shape, bool), "lt": np.less, "eq": np.equal, "le": np.less_equal,
       "gt": np.greater, "lg": lambda a, b: (a < b) | (a > b), "ne": np.not_equal, "ge": np.greater_equal,
       "o": lambda a, b: ~np.isnan(a) & ~np.isnan(b), "u": lambda a, b: np.isnan(a) | np.isnan(b),
       "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)), "ngt": lambda a, b: ~(a > b),
       "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
       "tru": lambda a, b: np.ones(a.shape, bool), "t": lambda a, b: np.ones(a.shape, bool)}
CMP16 = [(x, rel, t) for t in ("f16", "i16", "u16") for x in ("", "x")
         for rel in (("f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "tru")
                     if t == "f16" else ("f", "lt", "eq", "le", "gt", "ne", "ge", "t"))]


@pytest.mark.parametrize("x,rel,t", CMP16, ids=[f"v_cmp{x}_{r}_{t}" for x, r, t in CMP16])
def test_each_16_bit_compare_and_its_exec_form(x, rel, t):
    a, b = H, np.roll(H, 3)
    sb = Sandbox()
    sb.v[1], sb.v[2] = _words(np.roll(H, 40), a), b
    on = np.arange(64) % 5 != 0
    sb.set_exec(on)
    sb.run(f"v_cmp{x}_{rel}_{t}_sdwa vcc, v1, v2 src0_sel:WORD_1 src1_sel:WORD_0")
    va, vb = a.view({"f16": F16, "i16": np.int16, "u16": U16}[t]), b.view({"f16": F16, "i16": np.int16, "u16": U16}[t])
    with np.errstate(invalid="ignore"):
        want = REL[rel](va, vb) & on
    np.testing.assert_array_equal(sb.vcc(), want)
    if x:
        np.testing.assert_array_equal(sb.st.exec, want)


def test_div_fixup_f16_specials_and_the_bf8_pair_and_f32_class():
    sb = Sandbox()
    n = np.resize(np.array([1.0, 0.0, np.inf, 1.0, -6.0, np.nan], F16), 64)
    d = np.resize(np.array([3.0, 0.0, np.inf, 0.0, 2.0, 1.0], F16), 64)
    q = np.resize(np.array([0.3333, 7.0, 7.0, 7.0, 3.0, 7.0], F16), 64)
    sb.v[1], sb.v[2], sb.v[3] = _h(q), _h(d), _h(n)
    sb.v[5] = 0x3C42_BC40                                  # bf8 bytes 0x40, 0xBC, 0x42, 0x3C
    sb.v[6] = np.resize(np.array([0, 1, 2, 3], U32), 64)
    sb.run("v_div_fixup_f16 v4, v1, v2, v3", "v_cvt_pk_f32_bf8_e32 v[8:9], v5", "v_cvt_pk_f32_bf8_sdwa v[10:11], v5 "
           "src0_sel:WORD_1", "v_cmp_class_f32_e64 s[0:1], v6, 0x80", "v_cmpx_class_f32_e64 s[2:3], v6, 0x40")
    got = _lo(sb.v[4]).view(F16)
    assert got[0] == F16(0.3333) and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == np.inf
    assert got[4] == F16(-3.0) and np.isnan(got[5])                  # the sign of the division
    import ml_dtypes
    dec = np.array([0x40, 0xBC, 0x42, 0x3C], np.uint8).view(ml_dtypes.float8_e5m2fnuz).astype(np.float32)
    assert (sb.v.f32(8) == dec[0]).all() and (sb.v.f32(9) == dec[1]).all()
    assert (sb.v.f32(10) == dec[2]).all() and (sb.v.f32(11) == dec[3]).all()
    np.testing.assert_array_equal(sb.st.mask_of(0), sb.v[6] != 0)        # +denormal (bit 7): words 1..3
    np.testing.assert_array_equal(sb.st.exec, sb.v[6] == 0)             # +0 (bit 6)


def test_madak_is_not_fused_and_s_brev_reverses_bits():
    sb = Sandbox()
    x = np.float32(1 + 2.0 ** -12)
    sb.v[1] = np.full(64, x.view(U32))
    sb.run(f"v_madak_f32 v2, v1, v1, {np.float32(-1).view(U32):#x}", "s_brev_b32 s4, 0x80000003", "s_brev_b32 s5, 8")
    assert (sb.v.f32(2) == np.float32(2.0 ** -11)).all()                # (1+2^-12)^2 rounded first, then -1
    assert int(sb.sgpr(4)[0]) == 0xC0000001 and int(sb.sgpr(5)[0]) == 0x10000000
