"""An int8 QK^T tile dequantized by a chain of three group scales, the Python twin of
tests/gfxsim/hip/sources/qk_chain.hip: sQ[m] (the max over row m's 32 dims), sK[n] (over token n's
32 dims) and sKc (the max of the channel factors of the dims the instruction sums; ``wrong_group``:
of dims 0..15 only). ``order`` says where the channel scale sits: "last" (acc*sQ*sK*sKc), "first"
(acc*sKc*sQ*sK), "combined" (acc*(sQ*sK*sKc), the scales multiplied first) or "literal" (a softmax
scale, a constant, before them all)."""
import numpy as np

from gfxsim.testing import run_small

MMA = "v_mfma_i32_16x16x32_i8"            # gfx942, K = 32 i8 per instruction
SM_SCALE = np.float32(0.17677669)
ORDERS = ("last", "first", "combined", "literal")
ROWS = np.broadcast_to(np.arange(16)[:, None], (16, 32))
DIMS = np.broadcast_to(np.arange(32), (16, 32))


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    q8, k8 = rng.integers(-20, 20, (2, 16, 32), dtype=np.int8)
    sq, sk = rng.uniform(0.5, 2, (2, 16, 32)).astype(np.float32)
    kc = rng.uniform(0.5, 2, 32).astype(np.float32)
    return q8, k8, sq, sk, kc


def reference(q8, k8, sq, sk, kc, wrong_group=False, half=False):
    """S [16, 16]; ``half``: the result rounded to f16 before the chain."""
    acc = q8.astype(np.int64) @ k8.astype(np.int64).T
    if half:
        acc = acc.astype(np.float16).astype(np.float64)
    skc = kc[:16 if wrong_group else 32].max()
    return acc * sq.max(axis=1)[:, None] * sk.max(axis=1)[None, :] * skc


def _row_max(w, buf, row, n):
    """The max of buf[row][0..n-1] (f32, row a per-lane value), four dims per load."""
    parts = [w.global_load(buf, row * 128 + 16 * j, 16, "f32") for j in range(n // 4)]
    m = parts[0][0]
    for p in parts:
        for e in range(4):
            m = w.max(m, p[e])
    return m


def qk_chain(w, q8, k8, sq_d, sk_d, kc, out, *, order="last", wrong_group=False):
    row, g = w.lane_id % 16, w.lane_id // 16
    a = w.global_load(q8, row * 32 + 8 * g, 8, "i8")
    b = w.global_load(k8, row * 32 + 8 * g, 8, "i8")
    acc = w.mma(MMA, a, b)
    kcs = [w.global_load(kc, 16 * j + row * 0, 16, "f32") for j in range(4 if wrong_group else 8)]
    skc = kcs[0][0]
    for p in kcs:
        for e in range(4):
            skc = w.max(skc, p[e])
    skc = w.group_scale(skc)
    sk = w.group_scale(_row_max(w, sk_d, row, 32))
    sq = w.group_scale(w.cat(*[_row_max(w, sq_d, 4 * g + i, 32) for i in range(4)]))
    if order == "last":
        s = w.dequant(acc, sq) * sk * skc
    elif order == "first":
        s = w.dequant(acc, skc) * sq * sk
    elif order == "combined":
        s = w.dequant(acc, sq * sk * skc)
    else:
        s = acc.to("f32") * SM_SCALE * sq * sk * skc
    for i in range(4):
        w.global_store(out, ((4 * g + i) * 16 + row) * 4, s[i])


def run_chain(order="last", wrong_group=False, seed=0):
    """(run, out [16, 16]) of the Python kernel."""
    q8, k8, sq, sk, kc = inputs(seed)
    run, res = run_small(qk_chain, arch="gfx942", inputs={
        "q8": (q8, {"row": ROWS, "dim": DIMS}), "k8": (k8, {"token": ROWS, "dim": DIMS}),
        "sq_d": (sq, {"row": ROWS, "dim": DIMS}), "sk_d": (sk, {"token": ROWS, "dim": DIMS}),
        "kc": (kc, {"dim": np.arange(32)})}, outputs={"out": ((16, 16), "f32")},
        kwargs=dict(order=order, wrong_group=wrong_group), trace=False)
    return run, res["out"]


def check_findings(run, wrong_group: bool):
    """Either front end's findings on the chain: none for the correct kernel; for the wrong group
    one scale-group-mismatch naming the dims (0-15 taken, 16-31 foreign) along K. Returns that
    finding (None for the correct kernel) for a front end's own further checks."""
    messages = [f.message for f in run.findings]
    if not wrong_group:
        assert run.findings == [], messages
        return None
    assert [f.kind for f in run.findings] == ["scale-group-mismatch"], messages
    d = run.findings[0].details
    assert (d["field"], d["axis"], d["scale_over"], d["foreign"]) == ("dim", "K", list(range(16)), list(range(16, 32)))
    return run.findings[0]
