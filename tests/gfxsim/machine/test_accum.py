"""The accumulator datapaths' pieces: record validation, steps, the serial fma and flush-to-zero
tree (the MMA-Sim golden replay checks the whole records)."""
from fractions import Fraction

import numpy as np
import pytest

from gfxsim.arch import AccumulatorPrecision as Acc
from gfxsim.errors import GfxSimError
from gfxsim.machine.accum import mma_f32, steps_of
from gfxsim.machine.accum_serial import fma_f32, fma_f64


@pytest.mark.parametrize("kw", [dict(c_entry="two_stage", mantissa_bits=24), dict(c_entry="fused"),
                                dict(c_entry="ftz_tree", step=3), dict(step=6, interleave=4, mantissa_bits=24,
                                                                       c_entry="fused"),
                                dict(final_rounding="up")])
def test_an_impossible_datapath_is_refused(kw):
    with pytest.raises(GfxSimError):
        Acc(**kw)


def test_steps_split_k_in_order():
    assert steps_of(Acc(24, c_entry="fused", step=8), 20) == [list(range(8)), list(range(8, 16)), [16, 17, 18, 19]]
    assert steps_of(Acc(24, c_entry="fused"), 4) == [[0, 1, 2, 3]]


def test_fma_rounds_once():
    rng = np.random.default_rng(3)
    a, b, c = (rng.normal(size=2000).astype(np.float32) * np.float32(2.0) ** rng.integers(-30, 30, 2000)
               for _ in range(3))
    for g, x, y, z in zip(fma_f32(a, b, c), a, b, c):
        e = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        for nb in (np.nextafter(g, np.float32(np.inf)), np.nextafter(g, np.float32(-np.inf))):
            assert abs(Fraction(float(g)) - e) <= abs(Fraction(float(nb)) - e)      # g is a nearest fp32
    assert fma_f64(np.array([2.0 ** 600]), np.array([2.0 ** 600]), np.array([-np.inf]))[0] == -np.inf
    tiny = fma_f64(np.array([1e-300]), np.array([-1e-300]), np.array([0.0]))[0]
    assert tiny == 0.0 and np.signbit(tiny)                   # rounded away: the exact value's sign


def test_the_ftz_tree_flushes_denormal_inputs_and_sums():
    acc = Acc(None, c_entry="ftz_tree", step=4)
    a = np.array([[[2.0 ** -20, 1.0, 0.0, 0.0]]])           # f16: 2^-20 is denormal, flushed
    b = np.array([[[1.0], [2.0 ** -130], [0.0], [0.0]]])      # below f16's normal range: flushed
    d = mma_f32(acc, a, b, np.array([[[2.0 ** -127]]], np.float32), "f16", "f16")     # C denormal: flushed
    assert d[0, 0, 0] == 0.0
    assert mma_f32(acc, a, b, np.array([[[1.0]]], np.float32), "bf16", "bf16")[0, 0, 0] == np.float32(1 + 2.0 ** -20)


@pytest.mark.parametrize("name", ["CDNA3_F16", "CDNA3_XF32", "CDNA3_FP8", "FP22_ADA", "ADA_HMMA", "SM90_HMMA",
                                  "SM90_WGMMA_E4M3"])
def test_an_instruction_without_special_terms_equals_the_special_path(name):
    """Finite products skip the per-step search for NaN and infinite terms: each row equals the same
    row computed beside a row with an infinite product (which takes the special path), overflow to
    infinity during the steps included."""
    import gfxsim.arch.accumulators as amd
    import gfxsim.arch.nvidia as nv
    acc = getattr(amd, name, None) or getattr(nv, name)
    rng = np.random.default_rng(7)
    k = 32
    a = (rng.normal(size=(6, 16, k)) * 2.0 ** rng.integers(-20, 20, (6, 16, 1))).astype(np.float32)
    b = (rng.normal(size=(6, k, 16)) * 2.0 ** rng.integers(-20, 20, (6, 1, 16))).astype(np.float32)
    a[1, 0, :] = 3e38                                      # row 1, 0 overflows to inf in the steps
    c = (rng.normal(size=(6, 16, 16)) * 100).astype(np.float32)
    c[2] = 0
    fast = mma_f32(acc, a, b, c)
    special = a.copy()
    special[5, 3, 0] = np.inf                              # one infinite product: the special path for all
    slow = mma_f32(acc, special, b, c)
    np.testing.assert_array_equal(fast[:5].view(np.uint32), slow[:5].view(np.uint32))
    assert np.isinf(slow[5, 3]).all() or np.isnan(slow[5, 3]).any()


@pytest.mark.parametrize("name", ["FP22_ADA", "ADA_HMMA", "SM90_HMMA", "SM90_MMA_E4M3", "SM90_WGMMA_E4M3"])
def test_the_finite_fast_path_equals_the_step_by_step_adder(name):
    """A "fused"/"after" instruction with no special term cuts each step's products at once
    (accum._finite_steps): bit for bit the step-by-step loop's D, zeros of both signs, subnormal
    inputs, C of every sign and size and steps far apart in exponent included; a step that
    overflows leaves it to the loop."""
    import gfxsim.arch.nvidia as nv
    from gfxsim.machine.accum import EMIN, _finite_operands, _finite_steps, _stepwise, accumulate, product_terms
    acc = getattr(nv, name)
    rng = np.random.default_rng(11)
    k = 32
    a = rng.normal(size=(40, 16, k)) * 2.0 ** rng.integers(-12, 12, (40, 16, k))
    b = rng.normal(size=(40, k, 8)) * 2.0 ** rng.integers(-12, 12, (40, 1, 8))
    a[rng.random(a.shape) < 0.2] = 0.0
    a[rng.random(a.shape) < 0.1] = -0.0
    b[:4] = -b[:4]
    a[5] = 2.0 ** -130                                             # subnormal in fp32 and bf16, zero in f16
    a[6, :, :k // 2] = 0.0                                         # a step of zeros only
    c = rng.normal(size=(40, 16, 8)) * 2.0 ** rng.integers(-30, 30, (40, 16, 8))
    c[7] = 0.0
    c[8] = -0.0
    c[9] = 1e30
    a[10], b[10], c[10] = -0.0, np.abs(b[10]), -0.0                # every term -0
    t = "f16" if "HMMA" in name else "f32"
    a, b, c = a.astype(np.float32), b.astype(np.float32), c.astype(np.float32)
    prod, pexp = product_terms(a, b, EMIN[t], EMIN[t])
    fast = _finite_steps(acc, prod, pexp, c.astype(np.float64))
    assert fast is not None
    slow = _stepwise(acc, prod, pexp, c.astype(np.float64))
    np.testing.assert_array_equal(fast.view(np.uint32), slow.view(np.uint32))
    assert np.array_equal(accumulate(acc, prod, pexp, c).view(np.uint32), slow.view(np.uint32))
    # from the operands: A and B put in the steps' K order before the products are formed
    assert np.array_equal(mma_f32(acc, a, b, c, t, t).view(np.uint32), slow.view(np.uint32))
    assert (slow[10] == 0).all() and (slow[6] != 0).any()
    big = a.copy()
    big[0, 0, :] = 3e38                                            # the first step overflows
    prod, pexp = product_terms(big, b, EMIN[t], EMIN[t])
    assert _finite_steps(acc, prod, pexp, c.astype(np.float64)) is None
    assert _finite_operands(acc, big, b, c, EMIN[t], EMIN[t]) is None
    np.testing.assert_array_equal(mma_f32(acc, big, b, c, t, t).view(np.uint32),
                                  _stepwise(acc, prod, pexp, c.astype(np.float64)).view(np.uint32))


_TWO_STAGE = {"nearest": dict(rounding="nearest", c_entry="two_stage", c_bits=26, step=4),
              "k_steps": dict(rounding="truncate", final_rounding="truncate", c_entry="two_stage", c_bits=31,
                              k_steps=tuple(tuple(range(i + 7, i - 1, -1)) for i in range(0, 32, 8))),
              "interleave4": dict(rounding="truncate", final_rounding="nearest", c_entry="two_stage", c_bits=28,
                                  step=8, interleave=4, c_far_drops=True),
              "steps_of_12": dict(rounding="truncate", final_rounding="nearest", c_entry="two_stage", c_bits=31,
                                  step=12, interleave=3)}


@pytest.mark.parametrize("name", ["CDNA3_F16", "CDNA3_XF32", "CDNA3_FP8", *_TWO_STAGE])
@pytest.mark.parametrize("t", ["bf16", "f16", "fp8"])
def test_the_two_stage_fast_path_equals_the_step_by_step_adder(name, t):
    """A "two_stage" instruction with no special term forms every step's products at once and
    carries C through the second adders (accum._finite_two_stage): bit for bit the step-by-step
    loop's D, zeros of both signs, subnormal inputs, C of every sign and size (far below the
    products, where CDNA3 FP8 drops it, and far above), steps of zeros only, reordered steps,
    interleaved groups and steps whose length does not halve to one included; a product of 2^128
    or more, a NaN or infinite term, or a step that overflows leaves it to the loop. The compiled
    path (numba running) gives the same bits."""
    import gfxsim.arch.accumulators as amd
    from gfxsim.machine.accum import EMIN, _finite_two_stage, _stepwise, accumulate, product_terms
    acc = getattr(amd, name) if name.isupper() else Acc(22, **_TWO_STAGE[name])
    rng = np.random.default_rng(13)
    k = 36 if acc.step == 12 else 32
    a = rng.normal(size=(48, 16, k)) * 2.0 ** rng.integers(-12, 12, (48, 16, k))
    b = rng.normal(size=(48, k, 8)) * 2.0 ** rng.integers(-12, 12, (48, 1, 8))
    a[rng.random(a.shape) < 0.2] = 0.0
    a[rng.random(a.shape) < 0.1] = -0.0
    b[:4] = -b[:4]
    a[5] = 2.0 ** -130                                             # subnormal in fp32 and bf16, zero in f16
    a[6, :, :k // 2] = 0.0                                         # steps of zeros only
    a[11, :, 0] = 2.0 ** 40                                        # one product far above its step's others
    c = rng.normal(size=(48, 16, 8)) * 2.0 ** rng.integers(-30, 30, (48, 16, 8))
    c[7] = 0.0
    c[8] = -0.0
    c[9] = 1e30
    c[12] = 2.0 ** -60                                             # far below the products: dropped or cut
    c[13] = -(2.0 ** -60)
    a[10], b[10], c[10] = -0.0, np.abs(b[10]), -0.0                # every term -0
    a, b, c = a.astype(np.float32), b.astype(np.float32), c.astype(np.float32)
    prod, pexp = product_terms(a, b, EMIN[t], EMIN[t])
    c64 = c.astype(np.float64)
    fast = _finite_two_stage(acc, prod, pexp, c64)
    assert fast is not None
    slow = _stepwise(acc, prod, pexp, c64)
    np.testing.assert_array_equal(fast.view(np.uint32), slow.view(np.uint32))
    if (acc.final_rounding or acc.rounding) == "nearest":          # the compiled path (numba running)
        compiled = _two_stage_compiled(acc, prod, pexp, c64)
        assert compiled is not None
        np.testing.assert_array_equal(compiled.view(np.uint32), slow.view(np.uint32))
        whole = _two_stage_compiled(acc, a, b, c, t)                   # products formed in the kernel too
        np.testing.assert_array_equal(whole.view(np.uint32), slow.view(np.uint32))
    assert np.array_equal(accumulate(acc, prod, pexp, c).view(np.uint32), slow.view(np.uint32))
    assert (slow[10] == 0).all() and (slow[6] != 0).any()
    from gfxsim.machine.accum import _two_stage_operands          # from the operands, in few numpy calls
    ops = _two_stage_operands(acc, a, b, c, EMIN[t], EMIN[t])
    assert (ops is None) == (acc.interleave != 1)
    if ops is not None:
        np.testing.assert_array_equal(ops.view(np.uint32), slow.view(np.uint32))
    inf_c = c64.copy()
    inf_c[9] = np.inf
    for big, cc in ((3e38, c64), (1e36, c64), (1.0, inf_c)):
        worse = a.copy()
        worse[0, 0, :] = big                       # 3e38: the first step overflows; 1e36: products past 2^128
        prod, pexp = product_terms(worse, b, EMIN[t], EMIN[t])
        assert _finite_two_stage(acc, prod, pexp, cc) is None
        assert _two_stage_operands(acc, worse, b, cc, EMIN[t], EMIN[t]) is None
        if big == 3e38 and (acc.final_rounding or acc.rounding) == "nearest":
            assert _two_stage_compiled(acc, prod, pexp, cc) is None
            got = _two_stage_compiled(acc, worse, b, cc.astype(np.float32), t)     # left to the loop
            np.testing.assert_array_equal(got.view(np.uint32), _stepwise(acc, prod, pexp, cc).view(np.uint32))
    nan = a.copy()
    nan[3, 2, 1] = np.nan
    prod, pexp = product_terms(nan, b, EMIN[t], EMIN[t])
    assert _finite_two_stage(acc, prod, pexp, c64) is None


def _operand_cases():
    """(name, a, b, c, a_emin, b_emin, taken): operands at the bounds of accum._two_stage_operands,
    ``taken`` whether it computes them (else it leaves them to the product path)."""
    rng = np.random.default_rng(23)
    base_a = rng.normal(size=(3, 16, 32)) * 2.0 ** rng.integers(-6, 6, (3, 16, 32))
    base_b = rng.normal(size=(3, 32, 16))
    c = rng.normal(size=(3, 16, 16)).astype(np.float32).astype(np.float64)
    out = []

    def case(name, taken, a=None, b=None, cc=None, emins=(None, None)):
        out.append((name, *(np.array(base if x is None else x) for base, x in ((base_a, a), (base_b, b), (c, cc))),
                    *emins, taken))

    def with_a(value, at=(0, 3, 5)):
        a = base_a.copy()
        a[at] = value
        return a

    b_big = base_b.copy()
    b_big[0, 5, :] = 2.0 ** 390                  # meets a[0, 3, 5] of the lowest exponent alone
    a = with_a(2.0 ** -400)
    a[0, np.arange(16) != 3, 5] = 0.0
    case("2^-400 taken", True, a, b_big)
    case("below 2^-400", False, with_a(np.nextafter(2.0 ** -400, 0)))
    case("a subnormal double", False, with_a(5e-324))
    b_small = base_b.copy()
    b_small[0, 5, :] = 2.0 ** -380                # products near 2^20: only the range refuses 2^400
    case("2^400", False, with_a(2.0 ** 400), b_small)
    case("just below 2^400", True, with_a(np.nextafter(2.0 ** 400, 0)), b_small)
    case("NaN", False, with_a(np.nan))
    case("-inf", False, with_a(-np.inf))
    case("-0 and +0", True, with_a(-0.0, (1, slice(None), slice(None, 8))))
    for e in (63.5, 63.99):                      # one product of 2^127 .. 2^128 in its step: taken
        a, b = np.zeros((1, 16, 32)), np.zeros((1, 32, 16))
        a[0, 2, 9], b[0, 9, 4] = 2.0 ** e, -(2.0 ** e)
        case(f"a product of 2^{2 * e}", True, a, b, np.zeros((1, 16, 16)))
    a, b = np.zeros((1, 16, 32)), np.zeros((1, 32, 16))
    a[0, 2, 9], b[0, 9, 4] = 2.0 ** 64, 1.0
    case("a product of 2^64", True, a, b, np.zeros((1, 16, 16)))
    b[0, 9, 4] = 2.0 ** 64
    case("a product of 2^128", False, a, b, np.zeros((1, 16, 16)))
    a[0, 2, 9], b[0, 9, 4] = 1.5 * 2.0 ** 63, 1.5 * 2.0 ** 64
    a[0, 2, 10], b[0, 10, 4] = -a[0, 2, 9], b[0, 9, 4]           # cancelled: only the product check sees it
    case("products of +-2^128.17 aligned at 2^127", False, a, b, np.zeros((1, 16, 16)))
    for step in (0, 3):                          # the D of the first or of the last step overflows
        a = base_a.copy()
        a[0, 0, 8 * step:8 * step + 8] = 3e38
        b = np.abs(base_b) + 1
        case(f"step {step} overflows", False, a, b)
    for bad in (np.inf, np.nan):
        cc = c.copy()
        cc[2, 1, 1] = bad
        case(f"C {bad}", False, cc=cc)
    a = base_a.copy()
    a[1] = 2.0 ** -20                            # an f16 subnormal (clamped at 2^-14), not a bf16 one
    case("A and B types apart", True, a, emins=(-14, -126))
    return out


@pytest.mark.parametrize("name", ["CDNA3_F16", "CDNA3_XF32", "nearest", "k_steps"])
def test_the_operand_path_at_its_bounds(name):
    """accum._two_stage_operands (a process without numba) reads the inputs' range from their
    exponent bits (2^-400 .. 2^400, or zero), checks products against 2^128 only in steps aligned at
    2^127 or above (below, every product is less than 2^128), and looks once, at the end, for a
    step whose D is not finite: at each bound it gives the step loop's bits or leaves the operands
    to the product path, whose D then is the loop's too."""
    import gfxsim.arch.accumulators as amd
    from gfxsim.machine.accum import _stepwise, _two_stage_operands, product_terms
    acc = getattr(amd, name) if name.isupper() else Acc(22, **_TWO_STAGE[name])
    for case, a, b, c, a_emin, b_emin, taken in _operand_cases():
        prod, pexp = product_terms(a, b, a_emin, b_emin)
        slow = _stepwise(acc, prod, pexp, c)
        got = _two_stage_operands(acc, a, b, c, a_emin, b_emin)
        assert (got is not None) == taken, case
        if got is not None:
            np.testing.assert_array_equal(got.view(np.uint32), slow.view(np.uint32), err_msg=case)
        whole = mma_f32(acc, a, b, c, *(t for t in ("f16", "bf16") if (a_emin, b_emin) == (-14, -126))) \
            if (a_emin, b_emin) != (None, None) else mma_f32(acc, a, b, c)
        np.testing.assert_array_equal(whole.view(np.uint32), slow.view(np.uint32), err_msg=case)


def _two_stage_compiled(acc, x, y, c, t=None):
    """As a process running numba computes it (accum_jit): accum._finite_two_stage of products ``x``
    (exponents ``y``), or with ``t`` (the operands' type) mma_f32 of A ``x`` and B ``y``."""
    from gfxsim.machine import accum
    before = accum.running
    accum.running = lambda: True
    try:
        return accum._finite_two_stage(acc, x, y, c) if t is None else accum.mma_f32(acc, x, y, c, t, t)
    finally:
        accum.running = before


def test_the_compiled_two_stage_path_with_quanta_below_the_normal_range():
    """Inputs with no type (no exponent clamp) whose products lie near 2^-1010: a step's quantum is
    no normal double, so the compiled path counts that instruction element by element (with the
    loop's own cut); bit for bit the step loop, beside ordinary rows."""
    import gfxsim.arch.accumulators as amd
    from gfxsim.machine.accum import _stepwise, product_terms
    acc = amd.CDNA3_F16
    rng = np.random.default_rng(5)
    a = rng.normal(size=(2, 16, 16))
    b = rng.normal(size=(2, 16, 16))
    a[0, 3] *= 2.0 ** -500
    b[0, :, 5] *= 2.0 ** -510
    c = rng.normal(size=(2, 16, 16)).astype(np.float32).astype(np.float64)
    c[0, 3, 5] = 0.0
    prod, pexp = product_terms(a, b)
    slow = _stepwise(acc, prod, pexp, c)
    from gfxsim.machine import accum
    before = accum.running
    accum.running = lambda: True
    try:
        got = accum.mma_f32(acc, a, b, c)
    finally:
        accum.running = before
    np.testing.assert_array_equal(got.view(np.uint32), slow.view(np.uint32))
    assert pexp[0, 3, 5].max() < -998            # the case it says


@pytest.mark.parametrize("name", ["CDNA3_F16", "CDNA3_XF32", "CDNA3_FP8"])
def test_two_stage_paths_below_fp32s_normal_range(name):
    """C of fp32 subnormals and zeros, products below 2^-126 (f32 inputs near 2^-70): the numpy
    operand path and the compiled one (numba running) clamp C's and the sum's exponent at -126 as
    the step loop does, bit for bit."""
    import gfxsim.arch.accumulators as amd
    from gfxsim.machine import accum
    from gfxsim.machine.accum import _stepwise, _two_stage_operands, product_terms
    acc = getattr(amd, name)
    rng = np.random.default_rng(17)
    a = (rng.normal(size=(4, 16, 32)) * 2.0 ** -70).astype(np.float32)
    b = (rng.normal(size=(4, 32, 16)) * 2.0 ** -70).astype(np.float32)
    c = (rng.normal(size=(4, 16, 16)) * 2.0 ** -140).astype(np.float32)      # fp32 subnormals
    c[1] = 0.0
    c[2, ::2] = -0.0
    prod, pexp = product_terms(a, b, -126, -126)
    slow = _stepwise(acc, prod, pexp, c.astype(np.float64))
    assert (np.abs(slow) < 2.0 ** -126).any()
    ops = _two_stage_operands(acc, a, b, c, -126, -126)
    assert (ops is None) == (acc.interleave != 1)
    if ops is not None:
        np.testing.assert_array_equal(ops.view(np.uint32), slow.view(np.uint32))
    before = accum.running
    accum.running = lambda: True
    try:
        got = accum.mma_f32(acc, a, b, c, "f32", "f32")
    finally:
        accum.running = before
    np.testing.assert_array_equal(got.view(np.uint32), slow.view(np.uint32))
