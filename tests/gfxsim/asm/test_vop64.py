"""Binary64 VALU of the asm front end against numpy float64 and exact rationals: IEEE add/mul,
the fma rounded once, IEEE-mode min/max, rounding to integers, frexp, ldexp, conversions (RNE,
saturating, NaN -> 0), compares and the class test, clang's division sequence, operand forms
(inline constants as binary64, a literal as the high word, -/|| on bit 63), f64 buffers and
each result's provenance."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from support.asm_sandbox import Sandbox

from gfxsim import Buffer
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.asm.state import AsmError

U32, U64, F64 = np.uint32, np.uint64, np.float64
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 3.0, 0.1, 1 / 3, 1e308, -1e308, 5e-324, -5e-324,
           2.2250738585072014e-308, np.inf, -np.inf, np.nan, 2.0 ** 53 + 2, 2.0 ** 31, -(2.0 ** 31) - 1,
           4294967295.5, 1e-300, 7.0, -0.75, 123456.789, 2.0 ** -1074 * 3]
X = np.concatenate([np.array(SPECIAL), np.random.default_rng(6).standard_normal(64 - len(SPECIAL))
                    * 10.0 ** np.random.default_rng(7).integers(-5, 6, 64 - len(SPECIAL))])


def setd(sb, r, x):
    b = np.asarray(x, F64).view(U64)
    sb.v[r], sb.v[r + 1] = (b & U64(0xFFFFFFFF)).astype(U32), (b >> U64(32)).astype(U32)


def getd(sb, r):
    return (sb.v[r].astype(U64) | (sb.v[r + 1].astype(U64) << U64(32))).view(F64)


def same(got, want):
    g, w = np.asarray(got, F64), np.asarray(want, F64)
    nan = np.isnan(g) & np.isnan(w)
    np.testing.assert_array_equal(np.where(nan, 0, g).view(U64), np.where(nan, 0, w).view(U64))


def _sb():
    sb = Sandbox()
    setd(sb, 2, X)
    setd(sb, 4, np.roll(X, 5))
    setd(sb, 6, np.roll(X, 13))
    return sb


def test_add_mul_min_max_and_operand_forms():
    sb = _sb()
    sb.run("v_add_f64 v[8:9], v[2:3], v[4:5]", "v_mul_f64 v[10:11], v[2:3], -v[4:5]",
           "v_max_f64 v[12:13], v[2:3], v[4:5]", "v_min_f64 v[14:15], |v[2:3]|, v[4:5]",
           "v_mul_f64 v[16:17], v[2:3], 0.5", "v_add_f64 v[18:19], v[2:3], 1",
           "v_add_f64 v[20:21], v[2:3], 0.15915494")
    a, b = X, np.roll(X, 5)
    with np.errstate(all="ignore"):
        same(getd(sb, 8), a + b)
        same(getd(sb, 10), a * -b)
        same(getd(sb, 16), a * 0.5)
        same(getd(sb, 18), a + 5e-324)                   # an inline integer is its 64-bit pattern
        same(getd(sb, 20), a + 0.15915494309189532)
        same(getd(sb, 12), np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.maximum(a, b))))
        same(getd(sb, 14), np.where(np.isnan(a), b, np.where(np.isnan(b), np.abs(a), np.minimum(np.abs(a), b))))
    sb.v[22], sb.v[23] = 0, 0
    sb.run("v_fract_f64_e32 v[22:23], 0x40080000")       # a literal is the high word: 3.0
    same(getd(sb, 22), np.zeros(64))


def test_fma_rounds_once():
    sb = _sb()
    sb.run("v_fma_f64 v[8:9], v[2:3], v[4:5], v[6:7]", "v_fmac_f64_e32 v[6:7], v[2:3], v[4:5]")
    a, b, c = X, np.roll(X, 5), np.roll(X, 13)
    want = []
    for x, y, z in zip(a, b, c):
        if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
            with np.errstate(all="ignore"):
                want.append(x * y + z)
            continue
        e = Fraction(x) * Fraction(y) + Fraction(z)
        try:
            want.append(float(e) if e != 0 else (x * y + z if x * y == 0 else 0.0))
        except OverflowError:
            want.append(np.inf if e > 0 else -np.inf)
    same(getd(sb, 8), want)
    same(getd(sb, 6), want)
    sb = Sandbox()
    setd(sb, 2, np.full(64, 1 + 2.0 ** -30))
    setd(sb, 4, np.full(64, -(1 + 2.0 ** -29)))
    sb.run("v_fma_f64 v[6:7], v[2:3], v[2:3], v[4:5]")    # (1+2^-30)^2 - (1+2^-29) = 2^-60 exactly
    same(getd(sb, 6), np.full(64, 2.0 ** -60))


def test_rounding_frexp_ldexp_and_reciprocals():
    sb = _sb()
    sb.v[20] = np.resize(np.array([0, 1, -1, 1023, -1074, 2000, -2000, 52], np.int32), 64).view(U32)
    sb.run("v_trunc_f64_e32 v[8:9], v[2:3]", "v_floor_f64_e32 v[10:11], v[2:3]", "v_ceil_f64_e32 v[12:13], v[2:3]",
           "v_rndne_f64_e32 v[14:15], v[2:3]", "v_fract_f64_e32 v[16:17], v[2:3]",
           "v_frexp_mant_f64_e32 v[18:19], v[2:3]", "v_frexp_exp_i32_f64_e32 v21, v[2:3]",
           "v_ldexp_f64 v[22:23], v[2:3], v20", "v_sqrt_f64_e32 v[24:25], v[2:3]", "v_rcp_f64_e32 v[26:27], v[2:3]",
           "v_rsq_f64_e32 v[28:29], v[2:3]")
    a = X
    with np.errstate(all="ignore"):
        same(getd(sb, 8), np.trunc(a))
        same(getd(sb, 10), np.floor(a))
        same(getd(sb, 12), np.ceil(a))
        same(getd(sb, 14), np.rint(a))                   # ties to even: 2.5 -> 2
        fr = np.where(np.isinf(a), np.nan, np.minimum(a - np.floor(a), np.nextafter(1.0, 0)))
        same(getd(sb, 16), fr)
        m, e = np.frexp(a)
        same(getd(sb, 18), m)
        np.testing.assert_array_equal(sb.v[21].view(np.int32), np.where(np.isfinite(a), e, 0))
        same(getd(sb, 22), np.ldexp(a, sb.v[20].view(np.int32)))
        same(getd(sb, 24), np.sqrt(a))
        same(getd(sb, 26), 1 / a)
        same(getd(sb, 28), 1 / np.sqrt(a))
    assert getd(sb, 16)[X == -0.75][0] == 0.25 and getd(sb, 14)[X == 2.5][0] == 2.0


def test_conversions_saturate_and_round():
    sb = _sb()
    sb.v[20] = np.arange(64, dtype=np.int32) * -70000000
    sb.run("v_cvt_i32_f64_e32 v8, v[2:3]", "v_cvt_u32_f64_e32 v9, v[2:3]", "v_cvt_f32_f64_e32 v10, v[2:3]",
           "v_cvt_f64_f32_e32 v[12:13], v10", "v_cvt_f64_i32_e32 v[14:15], v20", "v_cvt_f64_u32_e32 v[16:17], v20")
    a = X
    with np.errstate(all="ignore"):
        t = np.trunc(a)
        np.testing.assert_array_equal(sb.v[8].view(np.int32), np.where(np.isnan(a), 0, np.clip(t, -2.0 ** 31,
                                                                                                 2.0 ** 31 - 1)))
        np.testing.assert_array_equal(sb.v[9], np.where(np.isnan(a), 0, np.clip(t, 0, 2.0 ** 32 - 1)))
        f = a.astype(np.float32)
    np.testing.assert_array_equal(sb.v.f32(10)[~np.isnan(f)], f[~np.isnan(f)])
    same(getd(sb, 12), f.astype(F64))
    same(getd(sb, 14), sb.v[20].view(np.int32).astype(F64))
    same(getd(sb, 16), sb.v[20].astype(F64))


def test_compares_and_class():
    sb = _sb()
    sb.run("v_cmp_lt_f64_e64 s[0:1], v[2:3], v[4:5]", "v_cmp_neq_f64_e64 s[2:3], |v[2:3]|, v[4:5]",
           "v_cmp_u_f64_e32 vcc, v[2:3], v[4:5]", "v_cmp_class_f64_e64 s[4:5], v[2:3], 0x3c",
           "v_cmp_class_f64_e64 s[6:7], v[2:3], 3")
    a, b = X, np.roll(X, 5)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(sb.st.mask_of(0), a < b)
        np.testing.assert_array_equal(sb.st.mask_of(2), ~(np.abs(a) == b))
    np.testing.assert_array_equal(sb.vcc(), np.isnan(a) | np.isnan(b))
    neg = np.signbit(a) & ~np.isnan(a)                          # 0x3c: -inf, -normal, -denormal, -0
    np.testing.assert_array_equal(sb.st.mask_of(4), neg)
    np.testing.assert_array_equal(sb.st.mask_of(6), np.isnan(a))


def test_division_sequence_and_its_refusal():
    """clang's double division: div_scale, rcp, fma refinements, div_fmas, div_fixup."""
    rng = np.random.default_rng(8)
    n = rng.standard_normal(64) * 1e3
    d = rng.standard_normal(64) * 1e-3
    n[:6], d[:6] = [1.0, 0.0, np.inf, 1.0, -0.0, 3.0], [3.0, 0.0, np.inf, 0.0, 5.0, np.inf]
    sb = Sandbox()
    setd(sb, 2, n)
    setd(sb, 4, d)
    sb.run("v_div_scale_f64 v[6:7], s[0:1], v[4:5], v[4:5], v[2:3]",
           "v_rcp_f64_e32 v[8:9], v[6:7]",
           "v_fma_f64 v[10:11], -v[6:7], v[8:9], 1.0",
           "v_fma_f64 v[8:9], v[8:9], v[10:11], v[8:9]",
           "v_fma_f64 v[10:11], -v[6:7], v[8:9], 1.0",
           "v_fma_f64 v[8:9], v[8:9], v[10:11], v[8:9]",
           "v_div_scale_f64 v[10:11], vcc, v[2:3], v[4:5], v[2:3]",
           "v_mul_f64 v[12:13], v[10:11], v[8:9]",
           "v_fma_f64 v[14:15], -v[6:7], v[12:13], v[10:11]",
           "v_div_fmas_f64 v[12:13], v[14:15], v[8:9], v[12:13]",
           "v_div_fixup_f64 v[16:17], v[12:13], v[4:5], v[2:3]")
    with np.errstate(all="ignore"):
        same(getd(sb, 16), n / d)
    sb = Sandbox()
    setd(sb, 2, np.full(64, 1e300))
    setd(sb, 4, np.full(64, 1e-100))
    sb.run("v_div_scale_f64 v[10:11], vcc, v[2:3], v[4:5], v[2:3]")
    assert sb.vcc().all()                                       # 2^768 apart: the numerator side scaled
    with pytest.raises(AsmError, match="v_div_fmas_f64 with VCC set .* lane 0"):
        sb.run("v_div_fmas_f64 v[12:13], v[4:5], v[4:5], v[4:5]")


def test_f64_buffers_and_provenance():
    """An f64 buffer loads as VGPR pairs; a result is named by its operands' element (one 8-byte
    element per pair), through arithmetic and conversions."""
    k = kernel_from_text("""
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[6:7], s[0:1], 0x8
  s_load_dwordx2 s[8:9], s[0:1], 0x10
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v1, 3, v0
  v_lshlrev_b32_e32 v10, 2, v0
  global_load_dwordx2 v[2:3], v1, s[4:5]
  s_waitcnt vmcnt(0)
  v_mul_f64 v[4:5], v[2:3], v[2:3]
  v_fma_f64 v[4:5], v[4:5], 0.5, v[2:3]
  v_cvt_f32_f64_e32 v6, v[4:5]
  global_store_dwordx2 v1, v[4:5], s[6:7]
  global_store_dword v10, v6, s[8:9]""", "f64prov", args=[("x", "global_buffer", 8), ("y", "global_buffer", 8),
                                                          ("z", "global_buffer", 8)])
    x = np.linspace(-3, 3, 64)
    y = Buffer.empty("y", (64,), np.float64)
    z = Buffer.empty("z", (64,), np.float32)
    run_asm(k, args={"x": Buffer("x", x, {"token": np.arange(64)}), "y": y, "z": z})
    want = x * x * 0.5 + x
    np.testing.assert_array_equal(y.array, want)
    np.testing.assert_array_equal(z.array, want.astype(np.float32))
    for buf, n in ((y, 8), (z, 4)):
        mp = buf.prov
        ids = np.repeat(mp.ids["token"], mp.unit)[: 64 * n].reshape(64, n) if mp.unit > 1 else \
            mp.ids["token"].reshape(64, n)
        assert (ids == np.arange(64)[:, None]).all(), buf.name


def test_f32_rsq_and_frexp():
    x = np.array([4.0, 0.25, 2.0, 0.0, -0.0, np.inf, -1.0, np.nan, 1e-40, 3e38, 7.5, 1.0] * 6, np.float32)[:64]
    x = np.resize(x, 64)
    sb = Sandbox()
    sb.v[1] = x.view(U32)
    sb.run("v_rsq_f32_e32 v2, v1", "v_frexp_mant_f32_e32 v3, v1", "v_frexp_exp_i32_f32_e32 v4, v1")
    with np.errstate(all="ignore"):
        # v_rsq_f32 flushes a denormal input to zero of its sign (isa/fp.py): 1e-40 gives inf
        flushed = np.where(np.abs(x) < np.float32(2.0 ** -126), np.copysign(np.float32(0), x), x)
        r = (1 / np.sqrt(flushed.astype(F64))).astype(np.float32)
        m, e = np.frexp(x)
    ok = ~np.isnan(r)
    np.testing.assert_array_equal(sb.v.f32(2)[ok], r[ok])
    assert np.isnan(sb.v.f32(2)[~ok]).all()
    assert sb.v.f32(2)[0] == 0.5 and sb.v.f32(2)[3] == np.inf and sb.v.f32(2)[4] == -np.inf
    np.testing.assert_array_equal(sb.v.f32(3)[~np.isnan(m)], m[~np.isnan(m)])
    np.testing.assert_array_equal(sb.v[4].view(np.int32), np.where(np.isfinite(x), e, 0))
