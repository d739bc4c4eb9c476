"""Quantization-direction marks (gfxsim/machine/qdir.py) on the Python front end: an amax is
amax^1, 224/amax amax^-1; data times either is marked quantized that way, through the conversion
to fp8 and into the matrix record; a dequant by the same power is a dequant-direction, by the
inverse power silent; other arithmetic drops the marks. And a q_max reduced with shuffle-down
steps (lane l: the max of lanes l..63) meets the scale-group rule."""
import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.machine import qdir

MFMA = "v_mfma_f32_16x16x32_fp8_fp8"
DIMS = np.broadcast_to(np.arange(32), (16, 32))
ROWS = np.broadcast_to(np.arange(16)[:, None], (16, 32))


def buffers(seed=0):
    rng = np.random.default_rng(seed)
    q = Buffer("q", rng.standard_normal((16, 32)).astype(np.float32), {"head": ROWS, "dim": DIMS})
    k = Buffer("k", rng.standard_normal((16, 32)).astype(np.float32), {"token": ROWS, "dim": DIMS})
    return q, k


def load(w, buf):
    g, c = w.lane_id // 16, w.lane_id % 16           # row c, dims 8g..8g+7
    return w.cat(*[w.global_load(buf, c * 128 + g * 32 + h, 16, "f32") for h in (0, 16)])


def amax_of(w, x, reduce=True):
    a = abs(x[0])
    for e in range(1, x.n):
        a = w.max(a, abs(x[e]))
    return w.reduce(a, "max") if reduce else a


def marks(v):
    shape = v.prov.shape
    return qdir.power(v.prov, shape), qdir.quantized(v.prov, shape)


def test_powers_and_quantized_data():
    q, _ = buffers()
    got = {}

    def k(w):
        x = load(w, q)
        a = amax_of(w, x)
        s = 224.0 / a
        got.update(a=marks(a), s=marks(s), rcp=marks(w.rcp(s)), half=marks(s * 0.5), mul=marks(x * s),
                   div=marks(x / s), fp8=marks((x / s).to("fp8")), sum_=a + a, both=a * s, twice=marks(x * s * s))
    launch(k, arch="gfx942")
    assert (got["a"][0] == 1).all() and (got["s"][0] == -1).all() and (got["rcp"][0] == 1).all()
    assert (got["half"][0] == -1).all()                      # a constant factor keeps the power
    assert (got["mul"][1] == -1).all() and (got["mul"][0] == 0).all()
    assert (got["div"][1] == 1).all() and (got["fp8"][1] == 1).all()
    assert (got["twice"][1] == 0).all()                      # quantized twice: not followed
    for v in (got["sum_"], got["both"]):                     # a sum, a product of two powers: no marks
        assert v.prov.flags is None or not (v.prov.flags & qdir.MARKS).any()


def qk(fixed, *, divide_result=False, reduce="xor"):
    q, kb = buffers()

    def k(w):
        x = load(w, q)
        a = amax_of(w, x, reduce=reduce == "xor")
        if reduce == "down":                             # __shfl_down: a source past lane 63 is the lane's own
            for off in (32, 16, 8, 4, 2, 1):
                src = w.lane_id + off
                a = w.max(a, w.bpermute(a, w.select(src < 64, src, w.lane_id)))
        s = 224.0 / a
        acc = w.mma(MFMA, load(w, kb).to("fp8"), (x * s if fixed else x / s).to("fp8"))
        if divide_result:                                # acc / (s / 0.5): the same rescale as acc * (0.5 / s)
            acc / w.group_scale(s * 2.0)
        else:
            w.dequant(acc, w.group_scale(0.5 / s))
    return launch(k, arch="gfx942")


@pytest.mark.parametrize("divide_result", [False, True])
def test_the_rescale_must_undo_the_quantization(divide_result):
    bad = qk(False, divide_result=divide_result)
    assert [f.kind for f in bad.findings] == ["dequant-direction"], bad.findings
    assert bad.findings[0].details["operand"] == "B" and bad.records[0].quant["B"].tolist() == [[1] * 16]
    assert qk(True, divide_result=divide_result).findings == []


def test_a_shuffle_down_amax_is_a_scale_group_mismatch():
    r = qk(True, reduce="down")
    assert {f.kind for f in r.findings} == {"scale-group-mismatch"}, r.findings
    f = r.findings[0].details
    assert f["field"] == "dim" and min(f["lanes"]) == 16
    assert {tuple(m["foreign"]) for m in f["mismatches"]} <= {tuple(range(8)), tuple(range(16)), tuple(range(24))}


def test_int8_quantization_through_i32_carries_the_direction():
    """s = 127/amax; x * s or x / s rounded, converted to i32 then i8: the marks survive the
    conversions into v_mfma_i32_16x16x32_i8's B. The rescale by 1/s undoes x * s; after x / s
    it applies amax twice."""
    q, kb = buffers()

    def k(w, fixed):
        x = load(w, q)
        s = 127.0 / amax_of(w, x)
        q8 = w.rint(x * s if fixed else x / s).to("i32").to("i8")
        k8 = w.rint(load(w, kb) * 16.0).to("i32").to("i8")
        acc = w.mma("v_mfma_i32_16x16x32_i8", k8, q8).to("f32")
        w.dequant(acc, w.group_scale((1 / 16) / s))
    assert [f.kind for f in launch(k, arch="gfx942", kwargs=dict(fixed=False)).findings] == ["dequant-direction"]
    assert launch(k, arch="gfx942", kwargs=dict(fixed=True)).findings == []


@pytest.mark.parametrize("fixed", [False, True])
def test_a_dequantization_scale_divides_and_multiplies_back(fixed):
    """The other consistent form: s = amax/224 (a dequantization scale), x / s quantizes and the
    result is multiplied by s; defective, it is divided by s again."""
    q, kb = buffers()

    def k(w):
        x = load(w, q)
        s = amax_of(w, x) * (1 / 224)
        acc = w.mma(MFMA, load(w, kb).to("fp8"), (x / s).to("fp8"))
        w.dequant(acc, w.group_scale(s * 0.5 if fixed else 0.5 / s))
    got = [f.kind for f in launch(k, arch="gfx942").findings]
    assert got == ([] if fixed else ["dequant-direction"])


def test_the_compiled_direction_pass_is_the_gathered_marks_direction():
    """qdir.operand_direction_at (one pass over the flags where the plan points) gives what the
    marks plane gathered through the plan gives (operand_direction), on A's and B's plans of
    several records and batches: marks of one direction, both, neither, rows that mix them."""
    from gfxsim.arch import get_instruction
    from gfxsim.machine import jit
    from gfxsim.machine.plans import flat_plan
    from gfxsim.machine.provenance import Prov
    from gfxsim.machine.summaries import Field
    jit.prewarm()
    jit.join_start()                         # running(): prewarm's thread has made every module
    rng = np.random.default_rng(4)
    marks = np.array([0, qdir.QPOS, qdir.QNEG, qdir.QPOS | qdir.QNEG, qdir.POS, qdir.QPOS | qdir.NEG], np.uint8)
    for arch, mnemonic in (("gfx942", MFMA), ("gfx942", "v_mfma_f32_32x32x8_bf16"), ("gfx942", "v_mfma_f32_4x4x4_16b_f16"),
                           ("sm_90", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")):
        insn = get_instruction(arch, mnemonic)
        lanes = insn.operand("D").wave_size
        for members in (1, 3):
            for op in "AB":
                plan = flat_plan({}, insn, op, members, lanes)
                rows = insn.elems(op)
                for trial in range(12):
                    flags = marks[rng.integers(0, len(marks), (rows, members * lanes))]
                    if trial % 3 == 0:               # whole rows (columns) of one direction
                        flags = np.broadcast_to(flags[:1], flags.shape).copy()
                    if trial % 3 == 1:
                        flags[:] = marks[1 + trial % 2]
                    p = Prov(4, {}, flags=flags)
                    want = qdir.operand_direction(Field.gathered(qdir.quantized(p, flags.shape).astype(np.int32),
                                                                 plan, op).v)
                    got = qdir.operand_direction_at(flags, plan, op)
                    assert got is not None and got.dtype == want.dtype and np.array_equal(got, want), \
                        (mnemonic, members, op, trial)


def test_directions_of_operands_together_are_each_operands_own():
    """qdir.operand_directions_at (mma_many's distinct operands of a side: the marked ones' flags
    stacked, one pass, each plan moved to its own plane) gives each operand's operand_direction_at,
    and None for one with no mark, on A's and B's plans: unmarked operands between marked ones,
    one direction, both, rows that mix them."""
    from gfxsim.arch import get_instruction
    from gfxsim.machine import jit
    from gfxsim.machine.plans import flat_plan
    jit.prewarm()
    jit.join_start()                         # running(): prewarm's thread has made every module
    rng = np.random.default_rng(6)
    marks = np.array([0, qdir.QPOS, qdir.QNEG, qdir.QPOS | qdir.QNEG, qdir.POS], np.uint8)
    for arch, mnemonic in (("gfx942", MFMA), ("sm_90", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")):
        insn = get_instruction(arch, mnemonic)
        lanes = insn.operand("D").wave_size
        for members in (1, 3):
            for op in "AB":
                plan = flat_plan({}, insn, op, members, lanes)
                shape = (insn.elems(op), members * lanes)
                flags = [marks[rng.integers(0, len(marks), shape)] for _ in range(5)]
                flags[1][:] = 0                                   # no mark
                flags[2][:] = qdir.QNEG                           # one direction everywhere
                flags[3] = np.broadcast_to(flags[3][:1], shape).copy()
                got = qdir.operand_directions_at(flags, plan, op)
                assert got is not None and len(got) == len(flags)
                for f, g in zip(flags, got):
                    want = qdir.operand_direction_at(f, plan, op) if (f & (qdir.QPOS | qdir.QNEG)).any() else None
                    assert (g is None) == (want is None)
                    assert g is None or (g.dtype == want.dtype and np.array_equal(g, want)), (mnemonic, members, op)
                assert qdir.operand_directions_at([flags[0], flags[1][:1]], plan, op) is None    # shapes differ


def _random_prov(rng, shape, kind):
    """A Prov for qdir's passes: ``kind`` "none" (None), "const" (no identity, footprint or mark),
    "noflags" (an identity, no flags) or "flags" (an identity and random flags: every mark
    combination, other bits beside them, rows without any)."""
    from gfxsim.machine.provenance import Prov
    if kind == "none":
        return None
    if kind == "const":
        return Prov(4, {})
    ids = {"token": rng.integers(-1, 5, shape).astype(np.int32)}
    if kind == "noflags":
        return Prov(4, ids)
    flags = rng.integers(0, 256, shape).astype(np.uint8)
    flags[rng.random(shape) < 0.3] = 0
    return Prov(4, ids, {}, flags)


def _same(x, y):
    if x is None or y is None:
        return x is y
    return (x.flags is None) == (y.flags is None) and (x.flags is None or (x.flags.dtype == y.flags.dtype and
                                                                          np.array_equal(x.flags, y.flags))) \
        and x.ids.keys() == y.ids.keys() and all(np.array_equal(x.ids[f], y.ids[f]) for f in x.ids) \
        and x.fp.keys() == y.fp.keys() and x.g == y.g


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_marks_passes_are_the_numpy_marks(monkeypatch, seed):
    """qdir.product and qdir.extremum in one compiled pass over the flags (MARKS_TOGETHER) give the
    numpy path's marks and flags, out itself where that path returns it: products and quotients
    of every pairing of no provenance, a number, a value without flags and one with random flags
    (all mark combinations, other bits kept), out with and without flags; extrema with and
    without a reduced footprint."""
    from gfxsim.machine import jit
    from gfxsim.machine.provenance import Mask, Prov
    rng = np.random.default_rng(seed)
    shape = (6, 64)
    qdir._product_pass(np.zeros(1, np.uint8), np.zeros(1, np.uint8), np.zeros(1, np.uint8), False, False, False,
                       np.zeros(1, np.uint8))                 # numba running: the compiled passes are taken
    assert jit.running()
    kinds = ("none", "const", "noflags", "flags")
    checked = 0
    for ka in kinds:
        for kb in kinds:
            pa, pb = _random_prov(rng, shape, ka), _random_prov(rng, shape, kb)
            for out_flags in (False, True):
                base = rng.integers(0, 256, shape).astype(np.uint8) if out_flags else None
                fp = {"token": Mask(np.where(rng.random(shape) < 0.5, 0, -1).astype(np.int64),
                                    np.ones(shape + (1,), np.uint64), np.zeros(shape, np.uint32))}
                for out in (Prov(4, {"token": np.zeros(shape, np.int32)}, {}, base),
                            Prov(4, {"token": np.zeros(shape, np.int32)}, fp, base)):
                    calls = [lambda: qdir.product(pa, pb, out), lambda: qdir.product(pa, pb, out, divide=True),
                             lambda: qdir.extremum(pa, pb, out)]
                    for call in calls:
                        monkeypatch.setattr(qdir, "MARKS_TOGETHER", True)
                        fast = call()
                        monkeypatch.setattr(qdir, "MARKS_TOGETHER", False)
                        slow = call()
                        assert _same(fast, slow) and (fast is out) == (slow is out), (ka, kb, out_flags)
                        checked += fast is not out
    assert checked > 50


@pytest.mark.parametrize("fixed", [False, True])
def test_marks_together_in_a_launch(monkeypatch, fixed):
    """A quantized operand's direction through the compiled marks passes: the same records and
    findings as the numpy path (a dequant-direction where the scale is applied twice)."""
    got = []
    for on in (True, False):
        monkeypatch.setattr(qdir, "MARKS_TOGETHER", on)
        r = qk(fixed)
        got.append(([(f.kind, f.lane, f.message) for f in r.findings],
                    [None if x.quant is None else {k: v.tolist() for k, v in x.quant.items()} for x in r.records]))
    assert got[0] == got[1] and bool(got[0][0]) == (not fixed)
