"""Semantics of the asm front end's opcodes against numpy and Python integers:
integer wrap-around, VCC and SCC carry chains, EXEC partly off, compares, fp32 exactly per IEEE
(fma rounded once, IEEE-mode max/min/med3, clang's division sequence), v_perm_b32, SDWA and
packed fp32 selects, lane counts, cross-lane and scalar control."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from support.asm_sandbox import Sandbox, run_snippet
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gfxsim.isa import fp
from gfxsim.asm.state import AsmError

U32 = np.uint32
words = arrays(np.uint32, 64, elements=st.integers(0, 2**32 - 1))
f32s = arrays(np.float32, 64, elements=st.floats(width=32, allow_nan=False, allow_infinity=False))
SETTINGS = settings(max_examples=40, deadline=None)


def _bits(x):
    return np.asarray(x, np.float32).view(U32)


# ---- integer VALU ------------------------------------------------------------------------------

INT_CASES = {
    "v_add_u32_e32 v3, v1, v2": lambda a, b: a + b,
    "v_sub_u32_e32 v3, v1, v2": lambda a, b: a - b,
    "v_lshlrev_b32_e32 v3, v1, v2": lambda a, b: b << (a & U32(31)),
    "v_lshrrev_b32_e32 v3, v1, v2": lambda a, b: b >> (a & U32(31)),
    "v_ashrrev_i32_e32 v3, v1, v2": lambda a, b: (b.view(np.int32) >> (a & U32(31)).astype(np.int32)).view(U32),
    "v_mul_lo_u32 v3, v1, v2": lambda a, b: (a.astype(np.uint64) * b).astype(U32),
    "v_mul_hi_u32 v3, v1, v2": lambda a, b: ((a.astype(np.uint64) * b) >> np.uint64(32)).astype(U32),
    "v_xor_b32_e32 v3, v1, v2": lambda a, b: a ^ b,
    "v_max_i32_e32 v3, v1, v2": lambda a, b: np.maximum(a.view(np.int32), b.view(np.int32)).view(U32),
    "v_lshl_or_b32 v3, v1, 5, v2": lambda a, b: (a << U32(5)) | b,
    "v_and_or_b32 v3, v1, 0xff0000, v2": lambda a, b: (a & U32(0xFF0000)) | b,
    "v_or3_b32 v3, v1, v2, 7": lambda a, b: a | b | U32(7),
    "v_bfe_u32 v3, v1, 4, 2": lambda a, b: (a >> U32(4)) & U32(3),
    "v_bfe_i32 v3, v1, 8, 8": lambda a, b: ((a >> U32(8)) & U32(0xFF)).astype(np.uint8).view(np.int8).astype(np.int32)
    .view(U32),
    "v_lshl_add_u32 v3, v1, 3, v2": lambda a, b: (a << U32(3)) + b,
    "v_med3_i32 v3, v1, -127, 127": lambda a, b: np.clip(a.view(np.int32), -127, 127).view(U32),
    # 24-bit multiply-adds (clang's index arithmetic): the low 24 bits of each factor, sign-extended
    # for the i24 form, the 32-bit sum wrapping
    "v_mad_u32_u24 v3, v1, v2, v1": lambda a, b: ((a & U32(0xFFFFFF)).astype(np.uint64) * (b & U32(0xFFFFFF))
                                                  + a).astype(U32),
    "v_mad_i32_i24 v3, v1, v2, v2": lambda a, b: ((((a << U32(8)).view(np.int32) >> 8).astype(np.int64)
                                                   * ((b << U32(8)).view(np.int32) >> 8) + b.astype(np.int64))
                                                  & 0xFFFFFFFF).astype(U32),
}


@pytest.mark.parametrize("text", INT_CASES)
@SETTINGS
@given(a=words, b=words)
def test_integer_ops_wrap_like_numpy_uint32(text, a, b):
    sb = Sandbox()
    sb.v[1], sb.v[2] = a, b
    sb.run(text)
    with np.errstate(over="ignore"):
        want = INT_CASES[text](a.copy(), b.copy())
    np.testing.assert_array_equal(sb.v[3], want.astype(U32))


def test_exec_partly_off_keeps_inactive_lanes():
    sb = Sandbox()
    sb.v[1], sb.v[2], sb.v[3] = np.arange(64), 100, 0xDEAD
    mask = np.arange(64) % 3 == 0
    sb.set_exec(mask)
    sb.run("v_add_u32_e32 v3, v1, v2", "v_cmp_gt_u32_e32 vcc, 30, v1")
    np.testing.assert_array_equal(sb.v[3], np.where(mask, np.arange(64) + 100, 0xDEAD))
    # VOPC writes 0 for inactive lanes
    np.testing.assert_array_equal(sb.vcc(), mask & (np.arange(64) < 30))


@SETTINGS
@given(x=arrays(np.uint64, 64, elements=st.integers(0, 2**64 - 1)),
       y=arrays(np.uint64, 64, elements=st.integers(0, 2**64 - 1)))
def test_vcc_carry_chains_are_64_bit_add_and_sub(x, y):
    sb = Sandbox()
    lo, hi = (x & np.uint64(0xFFFFFFFF)).astype(U32), (x >> np.uint64(32)).astype(U32)
    ylo, yhi = (y & np.uint64(0xFFFFFFFF)).astype(U32), (y >> np.uint64(32)).astype(U32)
    sb.v[0], sb.v[1], sb.v[2], sb.v[3] = lo, hi, ylo, yhi
    sb.run("v_add_co_u32_e32 v4, vcc, v0, v2", "v_addc_co_u32_e32 v5, vcc, v1, v3, vcc",
           "v_sub_co_u32_e64 v6, s[2:3], v0, v2", "v_subb_co_u32_e64 v7, s[2:3], v1, v3, s[2:3]")
    xs, ys = [int(v) for v in x], [int(v) for v in y]
    got_add = [(int(h) << 32) | int(l) for l, h in zip(sb.v[4], sb.v[5])]
    got_sub = [(int(h) << 32) | int(l) for l, h in zip(sb.v[6], sb.v[7])]
    assert got_add == [(a + b) % 2**64 for a, b in zip(xs, ys)]
    assert got_sub == [(a - b) % 2**64 for a, b in zip(xs, ys)]
    np.testing.assert_array_equal(sb.vcc(), [a + b >= 2**64 for a, b in zip(xs, ys)])      # carry out
    np.testing.assert_array_equal(sb.st.mask_of(2), [b > a for a, b in zip(xs, ys)])        # borrow out


def test_carry_out_of_inactive_lanes_is_zero_and_carry_in_is_read_per_lane():
    sb = Sandbox()
    sb.v[0], sb.v[1] = 0xFFFFFFFF, 1
    sb.set_exec(np.arange(64) < 10)
    sb.run("v_add_co_u32_e32 v2, vcc, v0, v1")
    np.testing.assert_array_equal(sb.vcc(), np.arange(64) < 10)
    sb.set_exec(np.ones(64, bool))
    sb.v[3] = 5
    sb.run("v_addc_co_u32_e32 v4, vcc, v3, 0, vcc")
    np.testing.assert_array_equal(sb.v[4], np.where(np.arange(64) < 10, 6, 5))


@SETTINGS
@given(a=words, b=words, c=arrays(np.uint64, 64, elements=st.integers(0, 2**64 - 1)))
def test_v_mad_u64_u32_and_lshl_add_u64(a, b, c):
    sb = Sandbox()
    sb.v[1], sb.v[2] = a, b
    sb.v[4], sb.v[5] = (c & np.uint64(0xFFFFFFFF)).astype(U32), (c >> np.uint64(32)).astype(U32)
    sb.run("v_mad_u64_u32 v[6:7], s[0:1], v1, v2, v[4:5]", "v_lshl_add_u64 v[8:9], v[4:5], 2, v[6:7]")
    tot = [int(x) * int(y) + int(z) for x, y, z in zip(a, b, c)]
    got = [(int(h) << 32) | int(l) for l, h in zip(sb.v[6], sb.v[7])]
    assert got == [t % 2**64 for t in tot]
    np.testing.assert_array_equal(sb.st.mask_of(0), [t >= 2**64 for t in tot])
    got2 = [(int(h) << 32) | int(l) for l, h in zip(sb.v[8], sb.v[9])]
    assert got2 == [((int(z) << 2) + g) % 2**64 for z, g in zip(c, got)]


def test_mbcnt_is_the_lane_id_and_readfirstlane_takes_the_first_active_lane():
    sb = Sandbox()
    sb.v[5] = np.arange(64) * 3
    sb.run("v_mbcnt_lo_u32_b32 v1, -1, 0", "v_mbcnt_hi_u32_b32 v1, -1, v1")
    np.testing.assert_array_equal(sb.v[1], np.arange(64))
    sb.set_exec(np.arange(64) >= 37)
    sb.run("v_readfirstlane_b32 s7, v5")
    assert sb.sgpr(7) == [37 * 3]


def test_v_perm_b32_selects_bytes_signs_and_constants():
    sb = Sandbox()
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(U32), rng.integers(0, 2**32, 64, dtype=np.uint64).astype(U32)
    sel = np.array([0x0c0c0500, 0x07060504, 0x0b0a0908, 0x0d0e0c03] * 16, U32)
    sb.v[1], sb.v[2], sb.v[3] = a, b, sel
    sb.run("v_perm_b32 v4, v1, v2, v3")
    src = np.concatenate([b[None].view(np.uint8).reshape(64, 4), a[None].view(np.uint8).reshape(64, 4)], axis=1)
    want = np.zeros((64, 4), np.uint8)
    for lane in range(64):
        for i in range(4):
            s = (int(sel[lane]) >> (8 * i)) & 0xFF
            if s < 8:
                want[lane, i] = src[lane, s]
            elif s < 12:
                want[lane, i] = 0xFF if src[lane, 2 * (s - 8) + 1] & 0x80 else 0
            elif s == 12:
                want[lane, i] = 0
            else:
                want[lane, i] = 0xFF
    np.testing.assert_array_equal(sb.v[4], want.view(U32)[:, 0])


# ---- scalar ALU and control ----------------------------------------------------------------------

@SETTINGS
@given(x=st.integers(0, 2**64 - 1), y=st.integers(0, 2**64 - 1), k=st.integers(0, 63))
def test_scalar_carry_chain_shift_and_compare(x, y, k):
    sb = Sandbox()
    sb.set_sgpr(0, x & 0xFFFFFFFF, x >> 32, y & 0xFFFFFFFF, y >> 32, k)
    sb.run("s_add_u32 s6, s0, s2", "s_addc_u32 s7, s1, s3")
    assert sb.sgpr(6, 2) == [((x + y) % 2**64) & 0xFFFFFFFF, ((x + y) % 2**64) >> 32]
    assert sb.st.scc == int(x + y >= 2**64)
    sb.run("s_lshl_b64 s[8:9], s[0:1], s4")
    r = (x << k) % 2**64
    assert sb.sgpr(8, 2) == [r & 0xFFFFFFFF, r >> 32] and sb.st.scc == int(r != 0)
    sb.run("s_cmp_gt_i32 s0, s2")
    sx = lambda v: v - 2**32 if v >= 2**31 else v
    assert sb.st.scc == int(sx(x & 0xFFFFFFFF) > sx(y & 0xFFFFFFFF))


def test_s_add_i32_overflow_and_addk_sign_extends():
    sb = Sandbox()
    sb.set_sgpr(0, 0x7FFFFFFF, 1)
    sb.run("s_add_i32 s2, s0, s1")
    assert sb.sgpr(2) == [0x80000000] and sb.st.scc == 1
    sb.run("s_movk_i32 s3, 0x8000", "s_addk_i32 s1, 0xffff")
    assert sb.sgpr(3) == [0xFFFF8000] and sb.sgpr(1) == [0] and sb.st.scc == 0


def test_saveexec_and_exec_writes():
    sb = Sandbox()
    sb.v[1] = np.arange(64)
    sb.run("v_cmp_gt_u32_e32 vcc, 20, v1", "s_and_saveexec_b64 s[4:5], vcc")
    np.testing.assert_array_equal(sb.st.exec, np.arange(64) < 20)
    assert sb.sgpr(4, 2) == [0xFFFFFFFF, 0xFFFFFFFF] and sb.st.scc == 1
    sb.run("s_or_b64 exec, exec, s[4:5]")
    assert sb.st.exec.all()


def test_scalar_branches_loop_and_exec_skips():
    body = """
        s_load_dwordx2 s[4:5], s[0:1], 0x0
        s_mov_b32 s6, 0
        v_mov_b32_e32 v1, 0
    .LBB0_1:
        v_add_u32_e32 v1, 3, v1
        s_add_i32 s6, s6, 1
        s_cmp_lt_i32 s6, 5
        s_cbranch_scc1 .LBB0_1
        v_cmp_gt_u32_e32 vcc, 8, v0
        s_and_saveexec_b64 s[8:9], vcc
        s_cbranch_execz .LBB0_3
        v_add_u32_e32 v1, 1000, v1
    .LBB0_3:
        s_or_b64 exec, exec, s[8:9]
        v_lshlrev_b32_e32 v2, 2, v0
        s_waitcnt lgkmcnt(0)
        global_store_dword v2, v1, s[4:5]
    """
    _, out = run_snippet(body, args=[("out", "global_buffer", 8)], arrays={"out": np.zeros(64, U32)})
    np.testing.assert_array_equal(out["out"], np.where(np.arange(64) < 8, 1015, 15))


# ---- fp32 ----------------------------------------------------------------------------------------

def _exact_fma(a, b, c):
    """a*b+c rounded once to binary32, from exact rationals (finite inputs)."""
    out = []
    for x, y, z in zip(a, b, c):
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        with np.errstate(over="ignore"):
            r = np.float32(float(exact))                    # nearest binary64, then nearest binary32 ...
        # ... may double-round: choose between r's neighbours by the exact distance
        with np.errstate(over="ignore"):                    # the neighbour of the largest float is inf
            cands = [np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))]
        best = min(cands, key=lambda c_: (abs(Fraction(float(c_)) - exact) if np.isfinite(c_) else Fraction(10**400),
                                          int(_bits(c_)) & 1))
        if exact == 0:
            best = np.float32(float(x) * float(y) + float(z))     # the sign rule of an exact zero
        out.append(best)
    return np.array(out, np.float32)


@settings(max_examples=60, deadline=None)
@given(a=f32s, b=f32s, c=f32s)
def test_v_fma_f32_is_rounded_once(a, b, c):
    sb = Sandbox()
    sb.v[1], sb.v[2], sb.v[3] = _bits(a), _bits(b), _bits(c)
    sb.run("v_fma_f32 v4, v1, v2, v3", "v_fmac_f32_e32 v3, v1, v2")
    prod = a.astype(np.float64) * b
    fin = np.isfinite(prod + c) & (np.abs(prod + c) < 3.4e38)
    want = _exact_fma(a, b, c)
    np.testing.assert_array_equal(sb.v[4][fin], _bits(want)[fin])
    np.testing.assert_array_equal(sb.v[3][fin], _bits(want)[fin])


def test_fma_double_rounding_case_is_rounded_once():
    # a*b + c lands (in binary64) exactly on a binary32 midpoint; the exact value is just above it
    a, b = np.float32(1 + 2**-12), np.float32(1 + 2**-12)        # a*b = 1 + 2^-11 + 2^-24
    c = np.float32(2**-60)
    assert fp.fma([a], [b], [c])[0] == np.float32(1 + 2**-11 + 2**-23)
    assert fp.fma([a], [b], [np.float32(0)])[0] == np.float32(1 + 2**-11)   # a tie, to even


@SETTINGS
@given(a=f32s, b=f32s)
def test_fp32_mul_add_like_numpy(a, b):
    sb = Sandbox()
    sb.v[1], sb.v[2] = _bits(a), _bits(b)
    sb.run("v_mul_f32_e32 v3, v1, v2", "v_add_f32_e32 v4, v1, v2", "v_sub_f32_e64 v5, -v1, |v2|")
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(sb.v[3], _bits(a * b))
        np.testing.assert_array_equal(sb.v[4], _bits(a + b))
        np.testing.assert_array_equal(sb.v[5], _bits(-a - np.abs(b)))


def test_ieee_mode_max_min_med3_nan_and_signed_zero():
    qnan, snan = np.uint32(0x7FC00001), np.uint32(0x7F800001)
    sb = Sandbox()
    sb.v[1] = np.array([qnan, snan, _bits(-0.0), _bits(1.0)] * 16, U32)
    sb.v[2] = np.array([_bits(2.0), _bits(2.0), _bits(0.0), qnan] * 16, U32)
    sb.run("v_max_f32_e32 v3, v1, v2", "v_min_f32_e32 v4, v1, v2", "v_max_f32_e32 v5, v1, v1")
    assert list(sb.v[3][:4]) == [_bits(2.0), 0x7FC00001, _bits(0.0), _bits(1.0)]   # qNaN -> other; sNaN quieted
    assert list(sb.v[4][:4]) == [_bits(2.0), 0x7FC00001, _bits(-0.0), _bits(1.0)]
    assert sb.v[5][1] == 0x7FC00001                                                # the canonicalize idiom
    sb.v[6] = _bits(np.array([-300.0, 5.5, 200.0, -0.25] * 16, np.float32))
    sb.run("s_mov_b32 s5, 0xc2fe0000", "v_mov_b32_e32 v7, 0x42fe0000", "v_med3_f32 v8, v6, s5, v7")
    np.testing.assert_array_equal(sb.v.f32(8)[:4], [-127.0, 5.5, 127.0, -0.25])


def test_rndne_cvt_saturation_and_nan():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3e9, -3e9, np.nan, 7.9, -7.9] + [0.0] * 54, np.float32)
    sb = Sandbox()
    sb.v[1] = _bits(x)
    sb.run("v_rndne_f32_e32 v2, v1", "v_cvt_i32_f32_e32 v3, v1", "v_cvt_f32_i32_e32 v4, v3")
    np.testing.assert_array_equal(sb.v.f32(2)[:5], [0.0, 2.0, 2.0, -0.0, -2.0])
    np.testing.assert_array_equal(sb.v[3][:10].view(np.int32), [0, 1, 2, 0, -2, 2**31 - 1, -2**31, 0, 7, -7])
    assert sb.v.f32(4)[5] == np.float32(2**31)


DIVISION = ["v_div_scale_f32 v3, s[2:3], v2, v2, v1", "v_rcp_f32_e32 v4, v3",
            "v_div_scale_f32 v5, vcc, v1, v2, v1", "v_fma_f32 v9, -v3, v4, 1.0", "v_fmac_f32_e32 v4, v9, v4",
            "v_mul_f32_e32 v9, v5, v4", "v_fma_f32 v19, -v3, v9, v5", "v_fmac_f32_e32 v9, v19, v4",
            "v_fma_f32 v3, -v3, v9, v5", "v_div_fmas_f32 v3, v3, v4, v9", "v_div_fixup_f32 v3, v3, v2, v1"]


@settings(max_examples=60, deadline=None)
@given(n=arrays(np.float32, 64, elements=st.floats(2.0**-45, 2.0**45, width=32)),
       d=arrays(np.float32, 64, elements=st.floats(2.0**-45, 2.0**45, width=32)))
def test_clangs_division_sequence_is_ieee_division(n, d):
    """The sequence clang writes for 127.0f / amax (qk_int8's line 62 on): correctly rounded
    wherever div_scale leaves VCC clear (exponents less than 96 apart, normal quotients)."""
    sb = Sandbox()
    sb.v[1], sb.v[2] = _bits(n), _bits(-d)
    sb.run(*DIVISION)
    np.testing.assert_array_equal(sb.v[3], _bits(n / -d))


def test_division_special_cases():
    sb = Sandbox()
    n = np.array([127.0, 0.0, np.inf, 1.0] + [1.0] * 60, np.float32)
    d = np.array([0.0, 0.0, 2.0, np.inf] + [3.0] * 60, np.float32)
    sb.v[1], sb.v[2] = _bits(n), _bits(d)
    sb.run(*DIVISION)
    got = sb.v.f32(3)
    assert got[0] == np.inf and np.isnan(got[1]) and got[2] == np.inf and got[3] == 0.0
    assert got[4] == np.float32(1.0) / np.float32(3.0)


def test_div_fmas_with_vcc_set_is_refused_naming_the_lane():
    sb = Sandbox()
    sb.v[1], sb.v[2] = _bits(np.float32(2.0**100)), _bits(np.float32(1.0))
    with pytest.raises(AsmError, match=r"v_div_fmas_f32 with VCC set.*lane 0"):
        sb.run(*DIVISION)


def test_cmp_nle_with_nan_and_cndmask():
    sb = Sandbox()
    x = np.array([1e-38, 1.0, np.nan, 0.0] * 16, np.float32)
    sb.v[2] = _bits(x)
    sb.v[3] = 77
    sb.run("s_mov_b32 s4, 0x2fe0001", "v_cmp_nle_f32_e64 s[2:3], s4, v2", "v_cndmask_b32_e64 v4, v3, 0, s[2:3]")
    amax_min = np.uint32(0x2fe0001).view(np.float32)
    want = ~(amax_min <= x)
    np.testing.assert_array_equal(sb.st.mask_of(2), want)
    np.testing.assert_array_equal(sb.v[4], np.where(want, 0, 77))


# ---- SDWA and packed fp32 --------------------------------------------------------------------------

def test_sdwa_selects():
    sb = Sandbox()
    sb.v[1] = _bits(np.full(64, -5.7, np.float32))
    sb.v[2] = 0xAAAA5555
    sb.v[3] = np.full(64, 0x1234FF80, U32)
    sb.run("v_cvt_i32_f32_sdwa v2, v1 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:DWORD",
           "v_mov_b32_sdwa v4, v3 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_0",
           "v_cvt_f32_i32_sdwa v5, sext(v3) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_0")
    assert sb.v[2][0] == 0xFFFB0000              # -5 in the high word, the low word padded with 0
    assert sb.v[4][0] == 0x80
    assert sb.v.f32(5)[0] == np.float32(np.int16(np.uint16(0xFF80).view(np.int16)))
    sb.v[6] = 0xAAAA5555
    sb.run("v_cvt_i32_f32_sdwa v6, v1 dst_sel:WORD_0 dst_unused:UNUSED_PRESERVE src0_sel:DWORD")
    assert sb.v[6][0] == 0xAAAAFFFB


@SETTINGS
@given(a=arrays(np.float32, 128, elements=st.floats(-1e6, 1e6, width=32)),
       b=arrays(np.float32, 128, elements=st.floats(-1e6, 1e6, width=32)))
def test_packed_fp32_op_sel_and_neg(a, b):
    sb = Sandbox()
    sb.v[4], sb.v[5], sb.v[6], sb.v[7] = _bits(a[:64]), _bits(a[64:]), _bits(b[:64]), _bits(b[64:])
    sb.run("v_pk_mul_f32 v[8:9], v[4:5], v[6:7] op_sel_hi:[0,1]",
           "v_pk_add_f32 v[10:11], v[4:5], v[6:7] op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[0,1] neg_hi:[1,0]")
    np.testing.assert_array_equal(sb.v.f32(8), a[:64] * b[:64])          # hi half: a.lo (op_sel_hi 0) * b.hi
    np.testing.assert_array_equal(sb.v.f32(9), a[:64] * b[64:])
    np.testing.assert_array_equal(sb.v.f32(10), a[64:] + -b[:64])
    np.testing.assert_array_equal(sb.v.f32(11), -a[:64] + b[64:])


def test_ds_bpermute_reads_zero_from_inactive_source_lanes():
    sb = Sandbox(lds=256)
    sb.v[1] = ((np.arange(64) + 1) % 64) * 4          # read the next lane
    sb.v[2] = np.arange(64) + 100
    sb.v[3] = 0xEEEE
    sb.set_exec(np.arange(64) != 5)
    sb.run("ds_bpermute_b32 v3, v1, v2")
    want = np.where(np.arange(64) == 4, 0, (np.arange(64) + 1) % 64 + 100)
    want[5] = 0xEEEE
    np.testing.assert_array_equal(sb.v[3], want)


def test_lds_read2_write2_and_b128_through_the_back_end():
    sb = Sandbox(lds=4096)
    sb.v[0] = np.arange(64) * 16
    sb.v[1], sb.v[2], sb.v[3], sb.v[4] = np.arange(64), np.arange(64) + 1000, 7, 9
    sb.run("ds_write2_b32 v0, v1, v2 offset1:1", "ds_write_b64 v0, v[3:4] offset:8",
           "ds_read_b128 v[8:11], v0", "ds_read2st64_b32 v[12:13], v0 offset1:1")
    np.testing.assert_array_equal(sb.v[8], np.arange(64))
    np.testing.assert_array_equal(sb.v[9], np.arange(64) + 1000)
    assert (sb.v[10] == 7).all() and (sb.v[11] == 9).all()
    np.testing.assert_array_equal(sb.v[12], np.arange(64))
    np.testing.assert_array_equal(sb.v[13][:48], np.arange(16, 64))      # + 64 dwords: lane l+16's word


def test_unsupported_modifier_and_operand_are_named():
    sb = Sandbox()
    sb.v[1] = 1
    with pytest.raises(AsmError, match=r"line \d+: v_add_f32_e64 v2, v1, v1 clamp: unsupported modifier clamp"):
        sb.run("v_add_f32_e64 v2, v1, v1 clamp")
    with pytest.raises(AsmError, match=r"modifier on -v1: an integer source of v_add_u32"):
        sb.run("v_add_u32_e64 v2, -v1, v1")


def _nearest_f32(exact, approx):
    """The binary32 nearest to Decimal ``exact`` (ties to even), searched around ``approx``."""
    from decimal import Decimal
    c = [np.float32(approx)]
    for _ in range(2):
        c = sorted({*c, *(np.nextafter(v, np.float32(np.inf)) for v in c), *(np.nextafter(v, np.float32(-np.inf))
                                                                           for v in c)}, key=float)
    return min(c, key=lambda v: (abs(Decimal(float(v)) - exact), int(_bits(v)) & 1))


@settings(max_examples=30, deadline=None)
@given(x=arrays(np.float32, 64, elements=st.floats(-140, 120, width=32)),
       y=arrays(np.float32, 64, elements=st.floats(2.0 ** -100, 2.0 ** 100, width=32)))
def test_v_exp_f32_and_v_log_f32_are_correctly_rounded(x, y):
    """Correctly rounded stand-ins (the hardware is documented to 1 ulp); v_exp_f32 flushes a
    result below 2^-126 to +0 (fp.flush_denormals gives the sources)."""
    from decimal import Decimal, localcontext
    sb = Sandbox()
    sb.v[1], sb.v[2] = _bits(x), _bits(y)
    sb.run("v_exp_f32_e32 v3, v1", "v_log_f32_e32 v4, v2")
    with localcontext() as ctx:
        ctx.prec = 50
        ln2 = Decimal(2).ln()
        want_e = [_nearest_f32((Decimal(float(v)) * ln2).exp(), np.exp2(np.float64(v))) for v in x]
        want_e = [w if abs(w) >= 2.0 ** -126 else np.float32(0) for w in want_e]
        want_l = [_nearest_f32(Decimal(float(v)).ln() / ln2, np.log2(np.float64(v))) for v in y]
    want_e = np.array(want_e, np.float32)
    want_e[want_e < np.float32(2.0 ** -126)] = 0                  # no denormal results (isa/fp.py exp2)
    np.testing.assert_array_equal(sb.v[3], _bits(want_e))
    np.testing.assert_array_equal(sb.v[4], _bits(np.array(want_l, np.float32)))


def test_exp_log_special_values_and_s_abs_i32():
    """v_exp_f32 and v_log_f32 flush denormal results and inputs (2^-149 -> 0, log2(2^-140) =
    log2(0) = -inf), and log2 of a negative number is AMD's canonical NaN 0x7fc00000."""
    sb = Sandbox()
    sb.v[1] = _bits(np.array([-150, -149, 0, 128, np.inf, -np.inf, np.nan, 7] * 8, np.float32))
    sb.v[2] = _bits(np.array([0, -1, 1, 2 ** -140, np.inf, 8, 0.5, 3] * 8, np.float32))
    sb.run("v_exp_f32_e32 v3, v1", "v_log_f32_e32 v4, v2")
    e, lg = sb.v.f32(3)[:8], sb.v.f32(4)[:8]
    assert list(e[:6]) == [0.0, 0.0, 1.0, np.inf, np.inf, 0.0] and np.isnan(e[6]) and e[7] == 128   # 2^-149: flushed
    assert lg[0] == -np.inf and np.isnan(lg[1]) and list(lg[2:6]) == [0.0, -np.inf, np.inf, 3.0] and lg[6] == -1.0
    sb.set_sgpr(0, 0xFFFFFFF9, 0x80000000, 0)
    sb.run("s_abs_i32 s3, s0")
    assert sb.sgpr(3) == [7] and sb.st.scc == 1
    sb.run("s_abs_i32 s4, s1", "s_abs_i32 s5, s2")
    assert sb.sgpr(4, 2) == [0x80000000, 0] and sb.st.scc == 0
