"""The fp32 lane functions (gfxsim/asm/lanef32.py), compiled by numba and run by Python, give the
words the ISA entry gives on contiguous arrays of the same sources: on random bit patterns (NaNs
and signalling NaNs with payloads of both signs, denormals, signed zeros, infinities, exponents
at both ends), words near each other (so equal values and ties meet), and for the fused ones sums
that land on a binary32 midpoint in binary64 with a rounding error (fp.fma's single rounding)."""
from __future__ import annotations

import sys
from dataclasses import replace
from functools import partial
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from gfxsim import isa
from gfxsim.asm import lanef16, lanef32
from gfxsim.asm.lanef16 import LANE_F16
from gfxsim.asm.lanef32 import LANE_F32
from gfxsim.asm.semantics import cvt8, vop, vop16

U32, I32, F32 = np.uint32, np.int32, np.float32
ABS = 0x7FFFFFFF
# lanes a multiple of 64, as a wave's (or a batch's) registers: numpy's loops give the first operand's
# NaN where two meet except in the tail past their last full vector, which a wave's width never has
N = 94 * 64
PY_N = 24 * 64                    # the Python runs: fewer lanes, the same kinds of words

SPECIAL = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001,
                    0x7FBFFFFF, 0x7FC12345, 0xFFA00F00, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF,
                    0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000, 0x3F000000,
                    0x4B000000, 0xCB000000, 0x4B7FFFFF, 0x4F000000, 0xCF000000, 0x4F800000, 0x4F7FFFFF,
                    0xCF000001, 0x3EFFFFFF, 0xBEFFFFFF, 0x3FC00000, 0xBFC00000, 0x40200000, 0x0DA24260],
                   np.uint32)


def words(rng, n: int) -> np.ndarray:
    """n words: a quarter special values, a quarter any bits, half floats of every exponent (a
    tenth of them denormal, a tenth NaN with a payload), each sign."""
    kind = rng.integers(0, 4, n)
    out = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(U32)           # any bits
    out[kind == 0] = rng.choice(SPECIAL, int((kind == 0).sum()))
    many = kind >= 2
    exp = rng.integers(0, 256, n).astype(U32)
    exp[rng.random(n) < 0.1] = 0
    exp[rng.random(n) < 0.1] = 255
    mid = rng.random(n) < 0.5                                                  # mid-range exponents, so values meet
    exp[mid] = rng.integers(110, 150, n).astype(U32)[mid]
    mant = rng.integers(0, 1 << 23, n).astype(U32)
    short = rng.random(n) < 0.3                                                # few mantissa bits: exact results, ties
    mant[short] &= U32(0x7F0000)
    sign = rng.integers(0, 2, n).astype(U32) << U32(31)
    out[many] = (sign | (exp << U32(23)) | mant)[many]
    return out


def fma_midpoints(rng, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, c) with a*b = ±h(1 - 2^-46), h half an ulp of c: the binary64 sum is c ± h, a binary32
    midpoint, and the exact value lies just inside it (fp.fma decides by the error's sign)."""
    c = words(rng, n)
    c = np.where((c & U32(0x7F800000)) == U32(0x7F800000), U32(0x3F800000), c)       # finite
    e = ((c >> U32(23)) & U32(0xFF)).astype(np.int64)
    half = np.maximum(e, 1) - 127 - 24                       # log2 of half an ulp of c
    k1 = half // 2
    k2 = half - k1
    a = np.ldexp(np.float64(1 + 2.0 ** -23), k1).astype(F32).view(U32)
    b = np.ldexp(np.float64(1 - 2.0 ** -23), k2).astype(F32).view(U32)
    a ^= (rng.integers(0, 2, n).astype(U32) << U32(31))
    b ^= (rng.integers(0, 2, n).astype(U32) << U32(31))
    return a, b, c


# inputs whose binary64 2^x or log2(x) lies within lanef32._NEAR_ULPS of a binary32 midpoint: the lane
# function asks the entry (found by a scan of a few binades)
CLOSE = {"v_exp_f32": [0x3DC9ABE2, 0x3DEB2F8E, 0xBE1F29DE],
         "v_log_f32": [0x40207AB9, 0x00914A90, 0x00EB8090, 0x7E914A90, 0x7EEB8090]}


SPECIAL16 = np.array([0, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7DFF, 0x7E55, 0x0001, 0x8001,
                      0x03FF, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00, 0x3800, 0x0200], np.uint32)


def halves(rng, n: int) -> np.ndarray:
    out = rng.integers(0, 1 << 16, n).astype(U32)
    some = rng.random(n) < 0.25
    out[some] = rng.choice(SPECIAL16, int(some.sum()))
    return out


def f16_range(rng, n: int) -> np.ndarray:
    """binary32 words around binary16's range: its denormals, its largest values, ties."""
    e = rng.integers(96, 145, n).astype(U32)
    mant = rng.integers(0, 1 << 23, n).astype(U32)
    tie = rng.random(n) < 0.3
    mant[tie] = (mant[tie] & ~U32(0x1FFF)) | U32(0x1000)
    return (rng.integers(0, 2, n).astype(U32) << U32(31)) | (e << U32(23)) | mant


def modes(rng, n: int) -> np.ndarray:
    """MODE words of members: the launch's fields, FP16_OVFL set in about half."""
    base = 3 << 4 | 3 << 6 | 1 << 8 | 1 << 9
    return (base | rng.integers(0, 2, n).astype(np.int64) << lanef16.FP16_OVFL).astype(U32)


def sources(rng, lane, n: int) -> list[np.ndarray]:
    out = [halves(rng, n) if t == "f16" else rng.integers(0, 256, n).astype(U32) if t in ("fp8", "bf8")
           else words(rng, n) for t in lane.srcs]
    if "fp8_f32" in lane.mnemonic or "bf8_f32" in lane.mnemonic:     # binary32 sources around the fp8 ranges
        top = 140 if "fp8" in lane.mnemonic else 145
        for x in out:
            some = rng.random(n) < 0.7
            e = rng.integers(100, top, n).astype(U32)
            mant = rng.integers(0, 1 << 23, n).astype(U32)
            tie = rng.random(n) < 0.3
            mant[tie] &= ~U32((1 << 20) - 1)
            near = (rng.integers(0, 2, n).astype(U32) << U32(31)) | (e << U32(23)) | mant
            x[some] = near[some]
    if lane.srcs[0] == "f32" and lane.result in ("f16", "u32") and "f16" in lane.mnemonic:
        for x in out:                                # binary32 sources around binary16's range
            some = rng.random(n) < 0.5
            x[some] = f16_range(rng, n)[some]
    if lane.mnemonic in CLOSE:                      # their domain: 2^x for x in [-128, 128), log2 of positives
        x = rng.uniform(-130, 130, n).astype(F32).view(U32) if lane.mnemonic == "v_exp_f32" else out[0] & U32(ABS)
        some = rng.random(n) < 0.6
        out[0][some] = x[some]
        out[0][:len(CLOSE[lane.mnemonic])] = CLOSE[lane.mnemonic]
    near = rng.random(n) < 0.2                       # a neighbour of the first source: equal values, ±0
    top = U32(15 if lane.srcs[0] == "f16" else 31)
    for x in out[1:]:
        x[near] = out[0][near] ^ (rng.integers(0, 2, n).astype(U32)[near] << (U32(rng.integers(0, 2)) * top))
    if len(out) == 3 and lane.name in ("v_fma_f32", "v_mac_f32"):
        m = rng.random(n) < 0.3
        a, b, c = fma_midpoints(rng, n)
        for x, y in zip(out, (a, b, c)):
            x[m] = y[m]
    if lane.mnemonic.startswith("v_div_"):
        s0, s1, s2 = division(rng, n)
        some = rng.random(n) < 0.7
        for x, y in zip(out, (s0, s1, s2)):
            x[some] = y[some]
    if lane.reads_vcc:
        out.append(rng.integers(0, 2, n).astype(U32))
    if lane.reads_mode:
        out.append(np.repeat(modes(rng, n // 64), 64))          # one MODE per member of 64 lanes
    return out


def division(rng, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(S0, S1, S2) of the division helpers: exponents of S1 and S2 anywhere (denormals, gaps of
    96 and more, quotients and reciprocals at the denormal border), S0 often S1, S2 or a quotient."""
    def make(e):
        return (rng.integers(0, 2, n).astype(U32) << U32(31)) | (e.astype(U32) << U32(23)) | \
            rng.integers(0, 1 << 23, n).astype(U32)
    e1 = rng.integers(0, 255, n)
    e2 = np.clip(e1 + rng.integers(-160, 160, n), 0, 254)
    s1, s2 = make(e1), make(e2)
    with np.errstate(all="ignore"):
        q = (s2.view(F32) / s1.view(F32)).view(U32)
    s0 = np.where(rng.random(n) < 0.3, s1, np.where(rng.random(n) < 0.4, s2, q)).astype(U32)
    return s0, s1, s2


def entry_words(lane, srcs: list[np.ndarray]) -> np.ndarray:
    """The ISA entry's words for the lanes' sources, read as the asm front end's reads give them."""
    vals = [w.astype(np.uint16).view(np.float16) if t == "f16" else
            w.astype(np.uint8).view(getattr(ml_dtypes, cvt8.ML[t])) if t in ("fp8", "bf8") else
            np.ascontiguousarray(w).view(F32 if t == "f32" else I32 if t == "i32" else U32)
            for w, t in zip(srcs, lane.srcs)]
    with np.errstate(all="ignore"):
        if lane.mnemonic in ("v_fmac_f32", "v_mac_f32"):
            x, y, acc = vals
            r = np.asarray(vop._mac_math(lane.mnemonic)(acc, x, y))
        elif lane.mnemonic in ("v_madmk_f32", "v_madak_f32"):        # as vop.v_fma_k_f32
            x, y, z = vals
            r = np.asarray((x * y + z).astype(F32))
        elif lane.mnemonic in ("v_fmamk_f32", "v_fmaak_f32"):
            r = np.asarray(isa.entry("v_fma_f32").fn(*vals))
        elif lane.mnemonic in ("v_cvt_pk_fp8_f32", "v_cvt_pk_bf8_f32"):   # as cvt8._pk_to8: {S1, S0}
            kind = lane.mnemonic[9:12]
            st = SimpleNamespace(mode=srcs[2][::64].astype(np.uint64), lanes=64)
            fn = isa.entry(lane.mnemonic).fn
            lo, hi = (cvt8.saturated(st, x, np.asarray(fn(x)).view(np.uint8), kind).astype(U32) for x in vals)
            return lo | (hi << U32(8))
        elif lane.halves == 2:                       # both halves at once, as the packed step: [2, width]
            r = np.asarray(vop.PK[lane.mnemonic][1](*(v.reshape(2, -1) for v in vals))).reshape(-1)
        else:
            r = isa.entry(lane.mnemonic.replace("v_cmpx_", "v_cmp_")).fn(*vals)
        if lane.flag:                                # (D, VCC) or (D, the lanes the step refuses)
            r, flag = r if isinstance(r, tuple) else (r, None)
            if lane.mnemonic == "v_div_fmas_f32":    # as the step: VCC set and a finite non-zero result
                flag = srcs[3].astype(bool) & np.isfinite(r) & (r != 0)
            return np.asarray(r).view(U32).astype(np.uint64) | (np.asarray(flag, np.uint64) << np.uint64(32))
        r = np.asarray(r)
        if lane.result == "f16" and lane.mnemonic not in vop16._OWN:   # the 16-bit rows' MODE (vop16.ovfl16)
            # a function that reads no MODE is held to the entry with FP16_OVFL set: it must not matter
            mode = srcs[len(lane.srcs)] if lane.reads_mode else np.full(srcs[0].size, 1 << lanef16.FP16_OVFL, U32)
            st = SimpleNamespace(mode=mode[::64].astype(np.uint64), lanes=64)
            r = np.asarray(vop16.ovfl16(st, r, vals))
    if r.dtype == bool:
        return r.astype(U32)
    if r.dtype == np.float16:
        return r.view(np.uint16).astype(U32)
    return r.view(U32) if r.dtype.itemsize == 4 else r.astype(U32)


# each v_cmpx_* is its v_cmp_*'s function (test_the_registry_describes_each_function), and its entry
# the same relation (isa/compare.py defines both from one)
LANES = {**LANE_F32, **LANE_F16}
TESTED = sorted(m for m in LANES if not m.startswith("v_cmpx_"))
_APPLY = {}


def compiled_words(lane, srcs: list[np.ndarray]) -> np.ndarray:
    """The compiled lane function over the lanes, through one compiled loop per argument count."""
    import numba
    out = np.zeros(srcs[0].size, np.uint64 if lane.flag else U32)
    if lane.code >= 0:                              # a compare: its relation first
        srcs = [np.full(srcs[0].size, lane.code, np.int64), *srcs]
    k = len(srcs)
    if k not in _APPLY:
        args = ", ".join(f"s{i}" for i in range(k))
        items = ", ".join(f"s{i}[j]" for i in range(k))
        src = f"def apply(fn, out, {args}):\n    for j in range(out.size):\n        out[j] = fn({items})\n"
        ns: dict = {"__name__": __name__}
        exec(src, ns)
        _APPLY[k] = numba.njit(ns["apply"])
    _APPLY[k](lane.fn, out, *srcs)
    return out


def python_words(lane, srcs: list[np.ndarray]) -> np.ndarray:
    fn = lane.py
    if lane.code >= 0:
        fn = partial(fn, lane.code)
    with np.errstate(all="ignore"):
        return np.array([fn(*(U32(s[j]) for s in srcs)) for j in range(srcs[0].size)],
                        np.uint64 if lane.flag else U32)


def _mismatch(lane, srcs, got, want) -> str:
    bad = np.nonzero(got != want)[0]
    if not bad.size:
        return ""
    j = bad[0]
    ops = ", ".join(f"{int(s[j]):#010x}" for s in srcs)
    if lane.flag:
        return (f"{lane.mnemonic}: {bad.size} of {got.size} lanes differ; first: ({ops}) -> {int(got[j]):#x}, "
                f"the entry {int(want[j]):#x} (bit 32: {lane.flag})")
    return (f"{lane.mnemonic}: {bad.size} of {got.size} lanes differ; first: ({ops}) -> {int(got[j]):#010x}, "
            f"the entry {int(want[j]):#010x}")


@pytest.mark.parametrize("mnemonic", TESTED)
def test_compiled_lane_function_is_the_entry(mnemonic):
    lane = LANES[mnemonic]
    rng = np.random.default_rng(sum(map(ord, mnemonic)))
    srcs = sources(rng, lane, N)
    got, want = compiled_words(lane, srcs), entry_words(lane, srcs)
    assert not _mismatch(lane, srcs, got, want), _mismatch(lane, srcs, got, want)


@pytest.mark.parametrize("mnemonic", TESTED)
def test_python_lane_function_is_the_entry(mnemonic):
    lane = LANES[mnemonic]
    rng = np.random.default_rng(1 + sum(map(ord, mnemonic)))
    srcs = sources(rng, lane, PY_N)
    got, want = python_words(lane, srcs), entry_words(lane, srcs)
    assert not _mismatch(lane, srcs, got, want), _mismatch(lane, srcs, got, want)


@pytest.mark.parametrize("mnemonic", TESTED)
def test_every_combination_of_special_words(mnemonic):
    """Every pair (or triple) of the special words, compiled: the NaN, zero and infinity rules meet."""
    lane = LANES[mnemonic]
    grid = np.meshgrid(*(SPECIAL16 if t == "f16" else np.arange(256, dtype=U32) if t in ("fp8", "bf8") else SPECIAL
                         for t in lane.srcs), indexing="ij")
    n = -(-grid[0].size // 64) * 64
    srcs = [np.resize(g.reshape(-1), n) for g in grid]
    if lane.reads_vcc:
        srcs.append(np.resize(np.array([0, 1], U32), n))
    for ovfl in (0, 1) if lane.reads_mode else (None,):
        run = srcs + ([np.full(n, ovfl << lanef16.FP16_OVFL, U32)] if lane.reads_mode else [])
        got, want = compiled_words(lane, run), entry_words(lane, run)
        assert not _mismatch(lane, run, got, want), _mismatch(lane, run, got, want)


def test_every_binary16_widens_as_the_entry():
    lane = LANE_F16["v_cvt_f32_f16"]
    srcs = [np.arange(1 << 16, dtype=U32)]
    assert (compiled_words(lane, srcs) == entry_words(lane, srcs)).all()


def test_the_midpoint_cases_reach_the_tie_rule():
    """The fused operands of fma_midpoints land on a binary32 midpoint in binary64 with an error,
    and the single rounding then differs from rounding the binary64 sum in some of them (the data
    exercises the rule it is meant to)."""
    rng = np.random.default_rng(5)
    a, b, c = fma_midpoints(rng, 2000)
    x, y, z = (v.view(F32).astype(np.float64) for v in (a, b, c))
    with np.errstate(all="ignore"):
        naive = (x * y + z).astype(F32).view(U32)
    once = entry_words(LANE_F32["v_fma_f32"], [a, b, c])
    assert (naive != once).sum() > 100


@pytest.mark.parametrize("mnemonic", sorted(CLOSE))
def test_the_close_lanes_take_the_exact_path(mnemonic):
    """The stand-ins' inputs near a midpoint are recomputed in double-double: they are close, and
    compiled and Python give the entry's words (its 60-digit decision)."""
    lane = LANE_F32[mnemonic]
    near = lanef32._python("_near_midpoint")
    w = np.array(CLOSE[mnemonic], U32)
    x = w.view(F32).astype(np.float64)
    y = np.exp2(x) if mnemonic == "v_exp_f32" else np.abs(np.log2(x))
    assert all(near(v) for v in y)
    srcs = [np.resize(w, 64)]
    want = entry_words(lane, srcs)
    assert (compiled_words(lane, srcs) == want).all()
    assert (python_words(lane, srcs) == want).all()


@pytest.mark.parametrize("mnemonic", sorted(CLOSE))
def test_the_exact_paths_round_every_input_as_the_entry(mnemonic):
    """The double-double paths, taken on every input (not only the close ones), give the entry's
    correctly rounded words: 2^x for non-integer x in (-127, 128), |log2 x| for positive normal x."""
    rng = np.random.default_rng(11)
    lane = LANE_F32[mnemonic]
    if mnemonic == "v_exp_f32":
        x = rng.uniform(-127, 128, 4000).astype(F32)
        x = x[x != np.floor(x)]
        name = "_exp2_exact"
    else:
        x = (rng.integers(0x00800001, 0x7F800000, 4000).astype(U32) | U32(1)).view(F32)
        x = np.concatenate([x, (np.float32(1) + rng.integers(1, 1 << 12, 500).astype(F32) * F32(2.0 ** -23))])
        name = "_log2_exact"
    x = np.resize(x, x.size // 64 * 64)
    want = entry_words(lane, [x.view(U32)]) & U32(ABS)
    if mnemonic == "v_exp_f32":
        want = np.where(want < U32(0x00800000), U32(0), want)
    fn = lanef32._dispatcher(name)
    got = np.array([fn(v) for v in x.astype(np.float64)], U32)
    if mnemonic == "v_exp_f32":
        got = np.where(got < U32(0x00800000), U32(0), got)
    assert (got == want).all(), (x[got != want][:3], got[got != want][:3], want[got != want][:3])
    py = lanef32._python(name)
    assert all(py(v) == g for v, g in zip(x[:300].astype(np.float64), got[:300]))


@pytest.mark.parametrize("name", ["_exp2_dd", "_log2_dd"])
def test_the_double_doubles_hold_about_100_bits(name):
    """hi + lo of the double-double paths lies within 2^-95 (relative) of the 60-digit value."""
    from decimal import Decimal, localcontext
    rng = np.random.default_rng(12)
    if name == "_exp2_dd":
        xs = rng.uniform(-127, 128, 200).astype(F32).astype(np.float64)
    else:
        xs = np.concatenate([(rng.integers(0x00800001, 0x7F800000, 150).astype(U32) | U32(1)).view(F32),
                             np.float32(1) + rng.integers(1, 1 << 12, 50).astype(F32) * F32(2.0 ** -23)]).astype(np.float64)
    fn = lanef32._dispatcher(name)
    with localcontext() as ctx:
        ctx.prec = 60
        for x in xs:
            hi, lo = fn(x)
            d = Decimal(float(x))
            exact = (d * Decimal(2).ln()).exp() if name == "_exp2_dd" else d.ln() / Decimal(2).ln()
            assert abs((Decimal(hi) + Decimal(lo)) - exact) <= abs(exact) * Decimal(2) ** -95, x


def test_the_double_double_rounding_decides_by_the_low_part():
    """_dd_round of a binary32 midpoint: up or down by lo's sign, to even when lo is zero."""
    rnd = lanef32._dispatcher("_dd_round")
    for w in (0x3F800000, 0x3F800001, 0x00000004, 0x7E000123):
        r = float(np.uint32(w).view(F32))
        o = float(np.uint32(w + 1).view(F32))
        mid = (r + o) / 2
        tiny = np.spacing(mid) / 8
        assert rnd(mid, tiny) == w + 1 and rnd(mid, -tiny) == w
        assert rnd(mid, 0.0) == (w if w % 2 == 0 else w + 1)
        assert rnd(r, tiny) == w and rnd(o, -tiny) == w + 1


def test_the_registry_describes_each_function():
    for m, lane in LANES.items():
        assert callable(getattr(sys.modules[lane.module], lane.name)), m
        assert (lane.module == lanef16.__name__) == (m in LANE_F16), m
        assert lane.srcs and set(lane.srcs) <= {"f32", "i32", "u32", "f16", "fp8", "bf8"}, m
        assert lane.approximated == (m in isa.fp.APPROXIMATED), m
        assert lane.reads_mode == (m in ("v_cvt_f16_f32", "v_cvt_pk_fp8_f32", "v_cvt_pk_bf8_f32") or
                                   m.startswith(("v_add_f16", "v_sub", "v_mul_f16", "v_fma_f16")) and m.endswith("_f16")), m
        if lane.order:
            assert len(lane.order) == len(lane.srcs), m
        if lane.halves == 2:
            assert vop.PK[m][0] == len(lane.srcs), m
        assert (lane.code >= 0) == (lane.name == "cmp_f32"), m
        if lane.code >= 0:
            assert m.endswith(f"_{lanef32.RELATIONS[lane.code]}_f32"), m
        if m.startswith("v_cmpx_"):
            assert replace(lane, mnemonic=m.replace("v_cmpx_", "v_cmp_")) == LANE_F32[m.replace("v_cmpx_", "v_cmp_")]
