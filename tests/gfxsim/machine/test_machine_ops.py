"""Lane-level unit tests of every wave operation, against numpy written out per lane."""
import ml_dtypes
import numpy as np
import pytest

from gfxsim import Buffer, GfxSimError, MemoryFault, launch
from gfxsim.arch import get_instruction
from gfxsim.machine.accum import mma_f32


def run1(kernel, *args, arch="gfx936", **kw):
    out = {}
    run = launch(lambda w, *a: out.setdefault("r", kernel(w, *a)), grid=1, arch=arch, args=args, **kw)
    return out.get("r"), run


def test_lane_ids_and_uniform_values():
    r, _ = run1(lambda w: (w.lane_id.numpy(), w.const(7, "f32").numpy(), w.thread_id.numpy()))
    assert np.array_equal(r[0][0], np.arange(64)) and np.all(r[1] == 7) and np.array_equal(r[2][0], np.arange(64))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max", "min"])
def test_f32_binary_ops_match_numpy(op):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=64).astype(np.float32), rng.normal(size=64).astype(np.float32)
    fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y, "max": lambda x, y: x.w.max(x, y) if hasattr(x, "w") else np.maximum(x, y),
          "min": lambda x, y: x.w.min(x, y) if hasattr(x, "w") else np.minimum(x, y)}[op]
    r, _ = run1(lambda w: fn(w.from_lanes(a, "f32"), w.from_lanes(b, "f32")).numpy()[0])
    assert np.array_equal(r, fn(a, b).astype(np.float32))


def test_int_ops_and_shifts():
    r, _ = run1(lambda w: [(w.lane_id // 16).numpy()[0], (w.lane_id % 16).numpy()[0],
                           (w.lane_id << 2).numpy()[0], (w.lane_id >> 1).numpy()[0],
                           (w.lane_id ^ 5).numpy()[0], (w.lane_id & 3).numpy()[0]])
    l = np.arange(64)
    for got, want in zip(r, [l // 16, l % 16, l << 2, l >> 1, l ^ 5, l & 3]):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", ["i32", "u32"])
@pytest.mark.parametrize("c", [1, 2, 16, 3, 7, 64])
def test_division_by_a_literal_floors_like_a_per_lane_divisor(dtype, c):
    """x // c and x % c by a positive literal (a power of two: a shift and a mask) equal the same
    ops by c held per lane, negative and extreme x included."""
    info = np.iinfo(np.dtype(np.int32 if dtype == "i32" else np.uint32))
    x = np.array([info.min, info.min + 1, info.max, info.max - 1] + list(range(-30, 30)), np.int64)
    x = x[(x >= info.min) & (x <= info.max)]
    x = np.resize(x, 64)

    def kernel(w):
        v, per_lane = w.from_lanes(x, dtype), w.const(c, dtype)     # const: a register, not a literal
        return [(v // c).numpy()[0], (v % c).numpy()[0], (v // per_lane).numpy()[0], (v % per_lane).numpy()[0]]

    r, _ = run1(kernel)
    want = x.astype(np.int32 if dtype == "i32" else np.uint32)
    assert np.array_equal(r[0], want // want.dtype.type(c)) and np.array_equal(r[1], want % want.dtype.type(c))
    assert np.array_equal(r[0], r[2]) and np.array_equal(r[1], r[3])


def test_conversions_follow_the_isa():
    vals = np.array([1.5, -1.5, 2.5, np.nan, 3e9, -3e9, 0.49999997, -0.0] * 8, np.float32)
    r, _ = run1(lambda w: (w.from_lanes(vals, "f32").to("i32").numpy()[0], w.rint(w.from_lanes(vals, "f32")).numpy()[0],
                           w.from_lanes(vals, "f32").to("bf16").numpy()[0]))
    cvt, rnd, bf = r
    assert list(cvt[:8]) == [1, -1, 2, 0, 2 ** 31 - 1, -2 ** 31, 0, 0]          # trunc, NaN->0, saturate
    assert list(rnd[:3]) == [2.0, -2.0, 2.0]                                      # ties to even
    assert np.array_equal(bf.astype(np.float32), vals.astype(ml_dtypes.bfloat16).astype(np.float32), equal_nan=True)


def test_narrowing_that_would_wrap_is_an_error():
    with pytest.raises(OverflowError, match="300 does not fit i8") as e:
        run1(lambda w: (w.lane_id + 300).to("i8"))
    assert isinstance(e.value, GfxSimError) and "lane 0" in str(e.value)


def test_exec_masking_new_values_and_in_place_updates():
    def k(w):
        acc = w.zeros("i32")
        with w.if_(w.lane_id < 10):
            acc += 5
            fresh = w.lane_id * 2
        return acc.numpy()[0], fresh.valid[0], w.any(w.lane_id > 62), w.all(w.lane_id >= 0)
    (acc, valid, any_, all_), _ = run1(k)
    assert np.array_equal(acc, np.where(np.arange(64) < 10, 5, 0))
    assert np.array_equal(valid, np.arange(64) < 10) and any_ and all_


def test_select_and_compare():
    r, _ = run1(lambda w: w.select(w.lane_id >= 32, w.lane_id, w.lane_id * 0 - 1).numpy()[0])
    assert np.array_equal(r, np.where(np.arange(64) >= 32, np.arange(64), -1))


def test_cross_lane_ops():
    def k(w):
        v = w.lane_id * 10
        return (w.shfl_xor(v, 16).numpy()[0], w.bpermute(v, 63 - w.lane_id).numpy()[0],
                w.swizzle(v, and_mask=0x1C).numpy()[0], w.reduce(v, "max", 16).numpy()[0],
                w.reduce(v, "sum").numpy()[0], w.readlane(v, 5))
    x, p, s, m, t, rl = run1(k)[0]
    l = np.arange(64)
    assert np.array_equal(x, (l ^ 16) * 10) and np.array_equal(p, (63 - l) * 10)
    assert np.array_equal(s, ((l & ~31) | (l & 0x1C)) * 10)
    assert np.array_equal(m, (l // 16 * 16 + 15) * 10) and np.all(t == l.sum() * 10) and rl == 50


@pytest.mark.parametrize("nbytes", [1, 2, 4, 8, 16])
def test_global_load_store_widths(nbytes):
    data = np.arange(64 * 16, dtype=np.uint8)
    src = Buffer("src", data)
    dst = Buffer.empty("dst", data.shape, np.uint8)

    def k(w):
        off = w.lane_id * nbytes
        v = w.global_load(src, off, nbytes, "u8")
        w.global_store(dst, off, v)
        return v.numpy()
    r, run = run1(k)
    want = data[: 64 * nbytes].reshape(64, nbytes).T
    assert np.array_equal(r, want) and np.array_equal(dst.array[: 64 * nbytes], data[: 64 * nbytes])
    assert run.trace[1].op.startswith("global_load_")


@pytest.mark.parametrize("nbytes", [1, 2, 4, 8, 16])
def test_lds_load_store_widths(nbytes):
    def k(w):
        reg = w.shared("buf", (64 * 16,), np.uint8)
        v = w.from_lanes(np.arange(64 * nbytes).reshape(64, nbytes).T % 256, "u8")
        w.lds_store(reg, (63 - w.lane_id) * nbytes, v)
        return w.lds_load(reg, (63 - w.lane_id) * nbytes, nbytes, "u8").numpy(), v.numpy()
    (got, want), _ = run1(k)
    assert np.array_equal(got, want)


def test_bytes_slicing_and_cat_keep_values_and_tags():
    data = np.arange(64 * 16, dtype=np.int8).reshape(64, 16) % 100
    tok = np.broadcast_to(np.arange(16), (64, 16))
    buf = Buffer("v", data.astype(np.int8), tags={"token": tok})

    def k(w):
        v = w.global_load(buf, w.lane_id * 16, 16, "i8")
        hi = v.bytes(8, 8)
        return hi.numpy(), hi.tags("token"), w.cat(v.bytes(0, 8), hi).numpy()
    (hi, tags, both), _ = run1(k)
    assert np.array_equal(hi, data[:, 8:].T) and np.all(tags == np.arange(8, 16)[:, None])
    assert np.array_equal(both, data.T)


def _lanes_from_matrix(lay, mat, epr):
    """Independent packing: put matrix elements into [elements, lanes] by the table."""
    t = lay.table()
    out = np.zeros((lay.n_regs * epr, lay.wave_size), mat.dtype)
    out[t["reg"] * epr + t["elem"], t["lane"]] = mat[t["block"], t["row"], t["col"]]
    return out


MMA_CASES = [("gfx936", m) for m in get_instruction("gfx936", "v_mmac_i32_16x16x32_i8") and
             ["v_mmac_i32_16x16x32_i8", "v_mmac_f32_16x16x16_f16", "v_mmac_f32_16x16x16_bf16"]] + \
            [("gfx942", m) for m in ["v_mfma_i32_16x16x32_i8", "v_mfma_i32_32x32x16_i8", "v_mfma_f32_16x16x16_f16",
                                     "v_mfma_f32_16x16x16_bf16", "v_mfma_f32_32x32x8_f16",
                                     "v_mfma_f32_16x16x32_fp8_fp8", "v_mfma_f32_4x4x4_16b_f16"]] + \
            [("gfx90a", m) for m in ["v_mfma_i32_16x16x16i8", "v_mfma_i32_32x32x8i8", "v_mfma_f32_16x16x16f16",
                                     "v_mfma_f32_16x16x16bf16_1k"]]


@pytest.mark.parametrize("arch,mn", MMA_CASES)
def test_every_matrix_instruction_against_numpy(arch, mn):
    insn = get_instruction(arch, mn)
    rng = np.random.default_rng(hash(mn) % 2 ** 32)
    ta, tc = insn.a.numpy, insn.cd.numpy
    if insn.a_type == "i8":
        A = rng.integers(-128, 128, (insn.blocks, insn.M, insn.K)).astype(ta)
        B = rng.integers(-128, 128, (insn.blocks, insn.K, insn.N)).astype(ta)
        C = rng.integers(-1000, 1000, (insn.blocks, insn.M, insn.N)).astype(tc)
    else:
        A = rng.normal(size=(insn.blocks, insn.M, insn.K)).astype(ta)
        B = rng.normal(size=(insn.blocks, insn.K, insn.N)).astype(ta)
        C = rng.normal(size=(insn.blocks, insn.M, insn.N)).astype(tc)
    want = (A.astype(np.float64) @ B.astype(np.float64) + C).astype(tc)
    if insn.a_type != "i8":              # the record's accumulator datapath, in matrix space
        want = mma_f32(insn.accumulator, A.astype(np.float64), B.astype(np.float64), C, insn.a_type, insn.b_type)
    ea, eb = 32 // insn.a.bits, 32 // insn.b.bits

    def k(w):
        a = w.from_lanes(_lanes_from_matrix(insn.operand("A"), A, ea), insn.a_type)
        b = w.from_lanes(_lanes_from_matrix(insn.operand("B"), B, eb), insn.b_type)
        c = w.from_lanes(_lanes_from_matrix(insn.operand("C"), C, 1), insn.cd_type)
        d = w.mma(mn, a, b, c)
        t = insn.operand("D").table()
        got = np.zeros_like(C)
        got[t["block"], t["row"], t["col"]] = d.numpy()[t["reg"], t["lane"]]
        return got
    got, run = run1(k, arch=arch)
    assert np.array_equal(got, want), mn
    assert not run.errors


def test_an_operand_changed_in_place_is_gathered_again():
    """The matrix unit remembers the last operands it gathered (QK's A feeds four tiles): an
    operand written in place between two instructions, in every lane or only under EXEC, must
    give the new product, not the remembered one."""
    insn = get_instruction("gfx936", "v_mmac_i32_16x16x32_i8")
    rng = np.random.default_rng(3)
    A0, A1, B = (rng.integers(-128, 128, s).astype(np.int8) for s in ((1, 16, 32), (1, 16, 32), (1, 32, 16)))
    t = insn.operand("D").table()

    def k(w):
        a = w.from_lanes(_lanes_from_matrix(insn.operand("A"), A0, 4), "i8")
        b = w.from_lanes(_lanes_from_matrix(insn.operand("B"), B, 4), "i8")
        out = []
        for step in range(3):
            d = w.mma(insn.mnemonic, a, b).numpy()
            got = np.zeros((1, 16, 16), np.int64)
            got[t["block"], t["row"], t["col"]] = d[t["reg"], t["lane"]]
            out.append(got)
            new = w.from_lanes(_lanes_from_matrix(insn.operand("A"), A1, 4), "i8")
            if step == 0:
                a[:] = new                          # every lane, in place
            else:
                with w.if_(w.lane_id < 16):         # lanes 0-15 hold K slots 0-7 of A's rows
                    a[:] = w.from_lanes(_lanes_from_matrix(insn.operand("A"), A0, 4), "i8")
        return out
    got, _ = run1(k)
    mixed = A1.copy()
    mixed[..., :8] = A0[..., :8]
    for g, A in zip(got, (A0, A1, mixed)):
        assert np.array_equal(g, A.astype(np.int64) @ B.astype(np.int64))


def test_int32_overflow_is_found_and_silent_when_it_fits():
    insn = get_instruction("gfx936", "v_mmac_i32_16x16x32_i8")

    def k(w, base):
        a = w.const(127, "i8", 8)
        c = w.const(base, "i32", 4)
        return w.mma(insn.mnemonic, a, a, c).numpy()
    d, run = run1(k, 2 ** 31 - 1000)
    assert run.findings_of("int32-overflow") and d[0, 0] < 0            # wrapped as the hardware does
    _, run = run1(k, 0)
    assert not run.findings_of("int32-overflow")


@pytest.mark.parametrize("base", [2 ** 31 - 2 ** 24 - 1, 2 ** 31 - 2 ** 24 + 5, -2 ** 31 + 2 ** 24 + 1,
                                  -2 ** 31 + 2 ** 24 - 7])
@pytest.mark.parametrize("sign", [1, -1])
def test_an_accumulator_near_the_int32_limits_adds_exactly(base, sign):
    """C is added in int32 while every C is 2^24 inside the limits (the float32 sums are below 2^24),
    else in int64: both sides of that bound give the exact sum, and no overflow where there is none."""
    insn = get_instruction("gfx936", "v_mmac_i32_16x16x32_i8")

    def k(w, base):
        a, b = w.const(127, "i8", 8), w.const(127 * sign, "i8", 8)
        return w.mma(insn.mnemonic, a, b, w.const(base, "i32", 4)).numpy()
    d, run = run1(k, base)
    want = base + sign * insn.K * 127 * 127
    assert -2 ** 31 <= want < 2 ** 31
    assert (d == want).all() and not run.findings_of("int32-overflow")


def test_reduced_precision_accumulator_is_expressible():
    from dataclasses import replace
    from gfxsim.arch import AccumulatorPrecision
    from gfxsim.machine.mma import compute, round_mantissa
    insn = get_instruction("gfx942", "v_mfma_f32_16x16x32_fp8_fp8")
    fp22 = replace(insn, accumulator=AccumulatorPrecision(13, "FP22: 13 mantissa bits"))
    A = np.full((1, 16, 32), 1.0, np.float32)
    B = np.full((1, 32, 16), 1.0, np.float32)
    C = np.full((1, 16, 16), 1 + 2 ** -20, np.float32)
    exact, _ = compute(insn, A, B, C)
    reduced, _ = compute(fp22, A, B, C)
    assert exact[0, 0, 0] == np.float32(33 + 2 ** -20) and reduced[0, 0, 0] == 33.0
    assert round_mantissa(np.float32(1 + 2 ** -13 + 2 ** -14), 13) == np.float32(1 + 2 ** -12)


def test_wave32_profile_runs_on_the_same_back_end():
    """Nothing in the machine assumes wave64: an NVIDIA-style warp32 mma record runs unchanged."""
    from gfxsim.arch import ArchProfile, MatrixInstruction, OperandLayout, register_arch
    L = lambda op, r, c, bits, lane, reg, elem: OperandLayout(op, r, c, 1, bits, lane=lane, reg=reg, elem=elem,
                                                            wave_size=32)
    # mma.m16n8k16 f16 (PTX ISA fragment layout): g = lane/4, t = lane%4
    mma = MatrixInstruction(
        "mma_m16n8k16_f32_f16", 16, 8, 16, 1, "f16", "f16", "f32",
        {"A": L("A", 16, 16, 16, [(4, "col", 2), (8, "row", 1)], [(2, "row", 8), (2, "col", 8)], [(2, "col", 1)]),
         "B": L("B", 16, 8, 16, [(4, "row", 2), (8, "col", 1)], [(2, "row", 8)], [(2, "row", 1)]),
         "C": L("C", 16, 8, 32, [(4, "col", 2), (8, "row", 1)], [(2, "col", 1), (2, "row", 8)], []),
         "D": L("D", 16, 8, 32, [(4, "col", 2), (8, "row", 1)], [(2, "col", 1), (2, "row", 8)], [])},
        source="PTX ISA 'Matrix Fragments for mma.m16n8k16' (test profile)")
    register_arch(ArchProfile("test_warp32", "NVIDIA-like", ("testw32",), 32, 48 * 1024, 32, 4, 255, 0, 0,
                              {mma.mnemonic: mma}, "cdna", "test"))
    rng = np.random.default_rng(0)
    A = rng.normal(size=(1, 16, 16)).astype(np.float16)
    B = rng.normal(size=(1, 16, 8)).astype(np.float16)

    def k(w):
        a = w.from_lanes(_lanes_from_matrix(mma.operand("A"), A, 2), "f16")
        b = w.from_lanes(_lanes_from_matrix(mma.operand("B"), B, 2), "f16")
        d = w.mma(mma.mnemonic, a, b)
        t = mma.operand("D").table()
        got = np.zeros((1, 16, 8), np.float32)
        got[t["block"], t["row"], t["col"]] = d.numpy()[t["reg"], t["lane"]]
        return got, w.lanes
    (got, lanes), _ = run1(k, arch="test_warp32")
    assert lanes == 32 and np.array_equal(got, (A.astype(np.float64) @ B).astype(np.float32))


# -- bad input -----------------------------------------------------------------------------------

def test_bad_mma_operands_are_named():
    with pytest.raises(TypeError, match="operand A must be i8, got f32"):
        run1(lambda w: w.mma("v_mmac_i32_16x16x32_i8", w.zeros("f32", 8), w.zeros("i8", 8)))
    with pytest.raises(ValueError, match=r"operand B needs 8 x i8 per lane \(2 VGPRs\), got 16"):
        run1(lambda w: w.mma("v_mmac_i32_16x16x32_i8", w.zeros("i8", 8), w.zeros("i8", 16)))
    with pytest.raises(KeyError, match="v_mfma_i32_16x16x32_i8"):
        run1(lambda w: w.mma("v_mfma_i32_16x16x32_i8", w.zeros("i8", 8), w.zeros("i8", 8)))   # gfx936 has mmac
    with pytest.raises(GfxSimError, match="EXEC"):
        def k(w):
            a = w.zeros("i8", 8)
            with w.if_(w.lane_id < 5):
                w.mma("v_mmac_i32_16x16x32_i8", a, a)
        run1(k)


def test_misaligned_and_out_of_bounds_accesses_name_lane_and_address():
    buf = Buffer("kv", np.zeros(1024, np.int8))
    with pytest.raises(MemoryFault, match=r"lane 1 address 5 is not 4-byte aligned") as e:
        run1(lambda w: w.global_load(buf, w.lane_id * 4 + w.lane_id % 2, 16, "i8"))
    assert "wave 0" in str(e.value) and "test_machine_ops.py" in str(e.value)
    with pytest.raises(MemoryFault, match=r"lane 63 accesses bytes \[1024, 1040\) outside \[0, 1024\)"):
        run1(lambda w: w.global_load(buf, w.lane_id * 16 + 16, 16, "i8"))
    with pytest.raises(MemoryFault, match=r"ds_read of 'x'.*outside \[0, 256\)"):
        run1(lambda w: w.lds_load(w.shared("x", (64,), np.float32), w.lane_id * 8, 4, "f32"))
    with pytest.raises(ValueError, match="3-byte accesses do not exist"):
        run1(lambda w: w.global_load(buf, 0, 3, "i8"))
    with pytest.raises(TypeError, match="not bare numpy arrays"):
        launch(lambda w, a: None, args=(np.zeros(4),))
    with pytest.raises(TypeError, match=r"operand types differ \(f32 vs i32\)"):
        run1(lambda w: w.zeros("f32") + w.lane_id)
