"""The scale rule on M/N for group scales: a scale reduced over a group of rows
(tokens), with no row of its own, applied to a result element must have been reduced over that
element's row. Shown on gfx936 (``v_mmac_i32_16x16x32_i8``: A lane l holds row l % 16, D lane l
holds row l % 16 in all four registers): the group {r, r^1} on row r is silent, {r^1, r^2} is a
finding naming the row and the group."""
import numpy as np

from gfxsim import Buffer, launch

MMAC = "v_mmac_i32_16x16x32_i8"


def buffers():
    rows = np.broadcast_to(np.arange(16)[:, None], (16, 32))
    dims = np.broadcast_to(np.arange(32), (16, 32))
    qf = np.random.default_rng(0).normal(size=(16, 32)).astype(np.float32)
    a = Buffer("q", np.ones((16, 32), np.int8), tags={"row": rows, "dim": dims})
    b = Buffer("k", np.ones((16, 32), np.int8), tags={"token": rows, "dim": dims})
    return a, b, Buffer("q_f32", qf, tags={"row": rows, "dim": dims})


def kernel(w, a, b, qf, *, flips):
    r, part = w.lane_id % 16, w.lane_id // 16
    acc = w.mma(MMAC, w.global_load(a, r * 32 + 8 * part, 8, "i8"), w.global_load(b, r * 32 + 8 * part, 8, "i8"))
    base = (r * 32 + 8 * part) * 4
    v = abs(w.cat(w.global_load(qf, base, 16, "f32"), w.global_load(qf, base + 16, 16, "f32")))
    am = v[0]
    for e in range(1, 8):
        am = w.max(am, v[e])
    am = w.max(am, w.shfl_xor(am, 16))
    am = w.max(am, w.shfl_xor(am, 32))                 # row r's amax over its 32 dims
    s = w.bpermute(am, r ^ flips[0])
    for f in flips[1:]:
        s = w.max(s, w.bpermute(am, r ^ f))             # a scale over a group of rows
    w.dequant(acc, w.group_scale(s * (1 / 127)))


def test_group_holding_the_row_is_silent():
    assert launch(kernel, arch="gfx936", args=buffers(), kwargs=dict(flips=(0, 1))).findings == []


def test_group_without_the_row_is_a_scale_group_mismatch():
    run = launch(kernel, arch="gfx936", args=buffers(), kwargs=dict(flips=(1, 2)))
    f = run.findings_of("scale-group-mismatch")
    assert len(f) == len(run.findings) == 1
    d = f[0].details
    assert d["field"] == "row" and d["axis"] == "M/N group"
    pairs = sorted((m["k_set"], m["scale_over"]) for m in d["mismatches"])
    assert pairs == sorted(([r], sorted({r ^ 1, r ^ 2})) for r in range(16))


def test_a_scale_of_its_own_row_is_still_checked_by_value():
    """flips (1,): one row, not reduced (an identity, no footprint): the M/N value rule, not the group rule."""
    run = launch(kernel, arch="gfx936", args=buffers(), kwargs=dict(flips=(1,)))
    f = run.findings_of("scale-group-mismatch")
    assert len(f) == 1 and f[0].details["axis"] == "M/N"
