"""Quantization scales and matrix results keep their provenance wherever the data goes,
and the scale rule holds exactly.

The kernels are small INT8 tiles on gfx936 (``v_mmac_i32_16x16x32_i8``) whose scales are computed
IN the kernel by reductions (a max over the lane's own tagged W values, then across the lanes that
hold the same row with ``shfl_xor``), marked with ``w.group_scale`` and applied to the matrix
result. Every rule comes as a defective kernel and its fixed twin; every route (cat, select,
bitcast, LDS, bpermute/shuffle) is value-preserving, so the outputs of all routes are compared to
the plain kernel's and only the provenance can make the difference between a finding and silence.

gfx936 layouts used below (``gfxsim layout gfx936 v_mmac_i32_16x16x32_i8``): A (16 x 32) lane l
holds row l%16, K slots 8*(l//16)+b (b = 0..7); B (32 x 16) lane l holds column l%16, the same K
slots; D[m][n] sits at lane m + 16*(n%4), register n//4 — a lane's 4 D registers are all row l%16.
"""
import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.arch import get_instruction

MMAC = "v_mmac_i32_16x16x32_i8"
LANES = 64
LANE = np.arange(LANES)
TOK = np.broadcast_to(np.arange(64), (16, 64))          # [row or dim][token]
ROW = np.broadcast_to(np.arange(16)[:, None], (16, 64))


def k_tokens(j):
    """The tokens instruction j of the 64-token tile consumes: {16r + 8j + b}."""
    return sorted(16 * r + 8 * j + b for r in range(4) for b in range(8))


def contiguous_group(j):
    return list(range(32 * j, 32 * j + 32))


def expected_mn(lanes=LANE):
    """@mn = 16*m + n of every D element on gfx936: [4 regs, lanes]."""
    m = lanes % 16
    return np.stack([16 * m + lanes // 16 + 4 * i for i in range(4)])


def test_gfx936_d_layout_is_the_one_the_tests_assume():
    d = get_instruction("gfx936", MMAC).operand("D")
    for m, n in [(0, 0), (5, 7), (15, 15), (3, 12)]:
        lane, reg, _ = d.to_register(m, n)[:3]
        assert (lane, reg) == (m + 16 * (n % 4), n // 4)


# -- the PV tile -------------------------------------------------------------------------------------

def pv_buffers(seed=0):
    rng = np.random.default_rng(seed)
    W = (rng.random((16, 64)) + 0.05).astype(np.float32)                  # probabilities, rows x tokens
    V = rng.integers(-127, 128, (16, 64)).astype(np.int8)                 # V^T: dims x tokens
    wbuf = Buffer("w", W, tags={"row": ROW, "token": TOK})
    vbuf = Buffer("v_cache", V, tags={"token": TOK, "dim": ROW})
    return wbuf, vbuf, W, V


def w_values(w, wbuf, tokens_base):
    """8 f32 W values of the lane's row l%16, tokens tokens_base .. +7 (two 16-byte loads)."""
    base = (w.lane_id % 16 * 64 + tokens_base) * 4
    return w.cat(w.global_load(wbuf, base, 16, "f32"), w.global_load(wbuf, base + 16, 16, "f32"))


def group_amax(w, wbuf, j, grouping):
    """The amax of row l%16 over scale group j, reduced in the kernel: the lane's 8 values, then
    across the 4 lanes holding the row (shfl_xor 16 and 32). fragment: tokens {16r + 8j + b} (what
    instruction j consumes); contiguous: tokens 32j .. 32j + 31 (the bug)."""
    rowid = w.lane_id // 16
    first = rowid * 16 + 8 * j if grouping == "fragment" else rowid * 8 + 32 * j
    vals = w_values(w, wbuf, first)
    amax = abs(vals[0])
    for b in range(1, 8):
        amax = w.max(amax, abs(vals[b]))
    amax = w.max(amax, w.shfl_xor(amax, 16))
    return w.max(amax, w.shfl_xor(amax, 32))


def pv_step(w, wbuf, vq, j, grouping):
    """(matrix result of instruction j, its marked scale): W fragment quantized with the group's amax."""
    wv = w_values(w, wbuf, w.lane_id // 16 * 16 + 8 * j)        # the K slots of instruction j
    amax = group_amax(w, wbuf, j, grouping)
    sw = w.group_scale(amax * (1 / 127))
    wq = w.clamp(w.rint(wv * (127.0 / amax)), -127.0, 127.0).to("i32").to("i8")
    return w.mma(MMAC, wq, vq.bytes(8 * j, 8)), sw


def load_v(w, vbuf):
    """Lane l: 16 consecutive tokens 16*(l//16) .. of V column l%16; bytes 8j..8j+7 feed instruction j."""
    return w.global_load(vbuf, w.lane_id % 16 * 64 + w.lane_id // 16 * 16, 16, "i8")


def _lds_scale(w, acc, sw, j):
    reg = w.shared(f"scale{j}", (LANES,), "f32")
    w.lds_store(reg, w.lane_id * 4, sw)
    back = w.lds_load(reg, (w.lane_id ^ 16) * 4, 4, "f32")       # another lane of the same row
    return w.dequant(acc, back)


def _lds_acc(w, acc, sw, j):
    reg = w.shared(f"acc{j}", (LANES * 4,), "i32")
    w.lds_store(reg, w.lane_id * 16, acc)
    return w.dequant(w.lds_load(reg, w.lane_id * 16, 16, "i32"), sw)


def _lds_acc_moved(w, acc, sw, j):
    reg = w.shared(f"acc{j}", (LANES * 4,), "i32")
    w.lds_store(reg, w.lane_id * 16, acc)
    moved = w.lds_load(reg, (w.lane_id ^ 32) * 16, 16, "i32")    # lane l^32: same row, other columns
    o = w.dequant(moved, sw)
    w.lds_store(w.shared(f"o{j}", (LANES * 4,), "f32"), (w.lane_id ^ 32) * 16, o)
    return w.lds_load(w.shared(f"o{j}", (LANES * 4,), "f32"), w.lane_id * 16, 16, "f32")


def _bpermute_acc(w, acc, sw, j):
    src = (w.lane_id + 16) % 64                                   # same row, columns shifted
    o = w.dequant(w.bpermute(acc, src), sw)
    return w.bpermute(o, (w.lane_id + 48) % 64)                   # back where the plain kernel has it


def _shfl_scale(w, acc, sw, j):
    return w.dequant(acc, w.shfl_xor(w.shfl_xor(sw, 48), 16))    # lanes of the same row


ROUTES = {
    "plain": lambda w, acc, sw, j: w.dequant(acc, sw),
    "to_f32_times_scale": lambda w, acc, sw, j: acc.to("f32") * sw,
    "scale_times_f32": lambda w, acc, sw, j: sw * acc.to("f32"),
    # the common case: the scale broadcast to the 4 result elements by cat
    "cat_scale": lambda w, acc, sw, j: w.dequant(acc, w.cat(sw, sw, sw, sw)),
    "cat_acc": lambda w, acc, sw, j: w.dequant(w.cat(acc[0:1], acc[1:3], acc[3]), sw),
    "select_scale": lambda w, acc, sw, j: w.dequant(acc, w.select(w.lane_id < 32, sw, w.shfl_xor(sw, 32))),
    "select_acc": lambda w, acc, sw, j: w.dequant(w.select(w.lane_id >= 16, acc, w.cat(acc[0:2], acc[2:4])), sw),
    "bitcast_scale": lambda w, acc, sw, j: w.dequant(acc, sw.bitcast("u32").bitcast("f32")),
    "bitcast_acc_u32": lambda w, acc, sw, j: w.dequant(acc.bitcast("u32").bitcast("i32"), sw),
    "bitcast_acc_bytes": lambda w, acc, sw, j: w.dequant(acc.bitcast("u8").bitcast("i32"), sw),
    "lds_scale": _lds_scale,
    "lds_acc": _lds_acc,
    "lds_acc_moved": _lds_acc_moved,
    "bpermute_acc": _bpermute_acc,
    "shfl_scale": _shfl_scale,
}


def pv_kernel(w, wbuf, vbuf, obuf, *, grouping="fragment", route="plain"):
    vq = load_v(w, vbuf)
    o = w.zeros("f32", 4)
    for j in range(2):
        acc, sw = pv_step(w, wbuf, vq, j, grouping)
        o += ROUTES[route](w, acc, sw, j)
    w.global_store(obuf, w.lane_id * 16, o)


def run_pv(grouping="fragment", route="plain", provenance=True):
    wbuf, vbuf, W, V = pv_buffers()
    out = Buffer.empty("out", (LANES, 4), np.float32)
    run = launch(pv_kernel, grid=1, arch="gfx936", args=(wbuf, vbuf, out), provenance=provenance,
                 kwargs=dict(grouping=grouping, route=route))
    return run, W, V, out.array.copy()


def reference_pv(W, V, grouping):
    """The INT8 PV tile in numpy, [16 rows, 16 dims]."""
    ref = np.zeros((16, 16), np.float64)
    for j in range(2):
        k = np.array(k_tokens(j))
        g = np.array(k_tokens(j) if grouping == "fragment" else contiguous_group(j))
        amax = np.abs(W[:, g]).max(axis=1, keepdims=True).astype(np.float32)
        wq = np.clip(np.rint(W[:, k] * (np.float32(127.0) / amax)), -127, 127)
        ref += (wq @ V[:, k].T.astype(np.float64)) * (amax * np.float32(1 / 127))
    return ref


def as_matrix(out):
    got = np.zeros((16, 16))
    for i in range(4):
        got[LANE % 16, LANE // 16 + 4 * i] = out[:, i]
    return got


@pytest.mark.parametrize("grouping", ["fragment", "contiguous"])
def test_pv_kernel_computes_the_int8_pv_tile(grouping):
    run, W, V, out = run_pv(grouping)
    np.testing.assert_allclose(as_matrix(out), reference_pv(W, V, grouping), rtol=1e-5, atol=1e-3)
    pv = run.mmacs()
    assert [sorted(m.token_set("B")) for m in pv] == [k_tokens(0), k_tokens(1)]
    assert [sorted(m.token_set("A")) for m in pv] == [k_tokens(0), k_tokens(1)]


def test_fragment_grouping_has_no_finding():
    run, *_ = run_pv("fragment")
    assert run.findings == []


def test_contiguous_grouping_is_one_finding_per_instruction_naming_the_foreign_tokens():
    run, *_ = run_pv("contiguous")
    f = run.findings_of("scale-group-mismatch")
    assert len(run.findings) == len(f) == 2
    assert [x.instruction for x in f] == [m.index for m in run.mmacs()]
    assert f[0].details["k_set"] == k_tokens(0)
    assert f[0].details["scale_over"] == contiguous_group(0)
    assert f[0].details["foreign"] == list(range(32, 40)) + list(range(48, 56))
    assert f[0].details["extra"] == list(range(8, 16)) + list(range(24, 32))
    assert f[1].details["scale_over"] == contiguous_group(1)
    assert f[1].details["foreign"] == list(range(8, 16)) + list(range(24, 32))
    assert all(x.details["field"] == "token" and x.details["lanes"] == list(range(64)) for x in f)
    assert "took their scale from another group {32-39,48-55}" in f[0].message


def _expect_contiguous_findings(run):
    f = run.findings_of("scale-group-mismatch")
    assert [x.instruction for x in f] == [m.index for m in run.mmacs()], [str(x) for x in run.findings]
    assert [x.details["foreign"] for x in f] == [sorted(set(k_tokens(j)) - set(contiguous_group(j)))
                                                  for j in range(2)]
    assert [x.details["scale_over"] for x in f] == [contiguous_group(0), contiguous_group(1)]
    assert [x.details["k_set"] for x in f] == [k_tokens(0), k_tokens(1)]
    assert all(x.details["lanes"] == list(range(64)) for x in f)
    assert len(run.findings) == 2, [str(x) for x in run.findings]


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_is_value_preserving(route):
    _, _, _, plain = run_pv("contiguous", "plain", provenance=False)
    _, _, _, routed = run_pv("contiguous", route, provenance=False)
    np.testing.assert_array_equal(routed, plain)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_fragment_kernel_stays_silent_through_every_route(route):
    run, *_ = run_pv("fragment", route)
    assert run.findings == [], [str(x) for x in run.findings]


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_contiguous_kernel_is_found_through_every_route(route):
    _expect_contiguous_findings(run_pv("contiguous", route)[0])


def test_without_provenance_no_scale_check_runs_and_the_run_says_so():
    run, *_ = run_pv("contiguous", provenance=False)
    assert run.findings == []
    assert set(run.checks_not_run) == {"ab-kslot-mismatch", "kslot-unknown-origin", "scale-group-mismatch",
                                       "dequant-direction", "store-mismatch", "token-coverage", "double-count",
                                       "identity-mismatch", "accumulator-carried", "format-mismatch"}
    assert run_pv("contiguous")[0].checks_not_run == []


# -- the flags themselves, read through the VGPRs API -----------------------------------------

def test_scale_mark_and_footprint_travel_through_every_route():
    """A fragment scale (row l%16, footprint = instruction j's K set) and a contiguous one, routed
    through cat, select, bitcast, LDS and cross-lane moves: the mark, the footprint of every element
    in every lane, and the row identity arrive unchanged."""
    wbuf, vbuf, *_ = pv_buffers()
    got = {}

    def k(w):
        frag = w.group_scale(group_amax(w, wbuf, 0, "fragment") * (1 / 127))
        cont = w.group_scale(group_amax(w, wbuf, 1, "contiguous") * (1 / 127))
        plain = group_amax(w, wbuf, 0, "fragment")                   # reduced, but not marked
        reg = w.shared("s", (LANES,), "f32")
        w.lds_store(reg, w.lane_id * 4, frag)
        wide = w.shared("s4", (LANES * 4,), "f32")
        w.lds_store(wide, w.lane_id * 16, w.cat(frag, frag, cont, cont))
        routes = {
            "marked": frag,
            "cat": w.cat(frag, frag, frag, frag),
            "select": w.select(w.lane_id < 32, frag, w.shfl_xor(frag, 32)),
            "bitcast_u32": frag.bitcast("u32"),
            "bitcast_back": frag.bitcast("u32").bitcast("f32"),
            "bitcast_bytes_back": frag.bitcast("u8").bitcast("f32"),
            "lds": w.lds_load(reg, w.lane_id * 4, 4, "f32"),
            "lds_other_lane": w.lds_load(reg, (w.lane_id ^ 48) * 4, 4, "f32"),
            "bpermute": w.bpermute(frag, (w.lane_id + 16) % 64),
            "shfl_xor": w.shfl_xor(frag, 32),
            "scaled_by_constant": frag * 2.0,
        }
        got["routes"] = {name: (v.is_scale(), v.n, [[v.footprint("token", e, l) for l in (0, 5, 21, 63)]
                                                    for e in range(v.n)],
                                v.tags("row").tolist() if v.dtype == "f32" else None)
                         for name, v in routes.items()}
        mixed = w.lds_load(wide, w.lane_id * 16, 16, "f32")
        got["mixed"] = (mixed.is_scale(), [mixed.footprint("token", e, 7) for e in range(4)])
        sel = w.select(w.lane_id < 32, frag, cont)
        got["select_mixed"] = [sel.footprint("token", 0, l) for l in (0, 31, 32, 63)]
        got["unmarked"] = (plain.is_scale(), plain.footprint("token", 0, 0))
        got["lost"] = (frag + frag).is_scale(), (frag * plain).is_scale()
        got["product"] = (frag * cont).is_scale()
    launch(k, arch="gfx936", trace=False)
    frag_fp, cont_fp = set(k_tokens(0)), set(contiguous_group(1))
    rows = [(LANE % 16).tolist()]
    for name, (is_scale, n, fps, row) in got["routes"].items():
        assert is_scale, name
        assert all(fp == frag_fp for e in fps for fp in e), (name, fps)
        if name == "cat":
            assert n == 4 and row == rows * 4
        elif row is not None:
            assert row == rows, name
    assert got["mixed"] == (True, [frag_fp, frag_fp, cont_fp, cont_fp])
    assert got["select_mixed"] == [frag_fp, frag_fp, cont_fp, cont_fp]
    assert got["unmarked"] == (False, frag_fp)          # the footprint is the reduction's, the mark is group_scale's
    assert got["lost"] == (False, False)                 # a sum of scales, a scale times a tagged value: no scale
    assert got["product"] is True                        # a product of two scales is one (scaleparts.py)


def test_matrix_result_identity_travels_through_every_route():
    """"Result of matrix instruction N, element (m, n)": @mma and @mn of every element after cat,
    select, bitcast, LDS and bpermute/shfl_xor are those of where the element came from."""
    wbuf, vbuf, *_ = pv_buffers()
    got = {}

    def k(w):
        vq = load_v(w, vbuf)
        acc0, _ = pv_step(w, wbuf, vq, 0, "fragment")
        acc1, _ = pv_step(w, wbuf, vq, 1, "fragment")
        reg = w.shared("acc", (LANES * 4,), "i32")
        w.lds_store(reg, w.lane_id * 16, acc0)
        routes = {
            "acc0": acc0,
            "acc1": acc1,
            "cat_swapped": w.cat(acc0[2:4], acc0[0:2]),
            "cat_two": w.cat(acc0[3], acc1[0]),
            "select": w.select(w.lane_id < 32, acc0, acc1),
            "bitcast_u32": acc0.bitcast("u32"),
            "bitcast_back": acc0.bitcast("u8").bitcast("i32"),
            "to_f32": acc0.to("f32"),
            "lds": w.lds_load(reg, w.lane_id * 16, 16, "i32"),
            "lds_half": w.lds_load(reg, w.lane_id * 16 + 8, 8, "i32"),
            "lds_other_lane": w.lds_load(reg, (63 - w.lane_id) * 16, 16, "i32"),
            "bpermute": w.bpermute(acc0, (w.lane_id + 5) % 64),
            "shfl_xor": w.shfl_xor(acc0, 17),
        }
        got["t"] = {name: (v.tags("@mma"), v.tags("@mn")) for name, v in routes.items()}
        got["bytes"] = (acc0.bitcast("u8").tags("@mma"), acc0.bitcast("u8").tags("@mn"))
    run = launch(k, arch="gfx936", trace=True)
    i0, i1 = (m.index for m in run.mmacs())
    t = got["t"]
    mn = expected_mn()
    full = lambda x: np.full((4, LANES), x)
    want = {
        "acc0": (full(i0), mn),
        "acc1": (full(i1), mn),
        "cat_swapped": (full(i0), mn[[2, 3, 0, 1]]),
        "cat_two": (np.stack([full(i0)[0], full(i1)[0]]), mn[[3, 0]]),
        "select": (np.where(LANE < 32, i0, i1)[None].repeat(4, 0), mn),
        "bitcast_u32": (full(i0), mn),
        "bitcast_back": (full(i0), mn),
        "to_f32": (full(i0), mn),
        "lds": (full(i0), mn),
        "lds_half": (full(i0)[2:], mn[2:]),
        "lds_other_lane": (full(i0), mn[:, 63 - LANE]),
        "bpermute": (full(i0), mn[:, (LANE + 5) % 64]),
        "shfl_xor": (full(i0), mn[:, LANE ^ 17]),
    }
    for name, (mma, emn) in want.items():
        np.testing.assert_array_equal(t[name][0], mma, err_msg=f"{name} @mma")
        np.testing.assert_array_equal(t[name][1], emn, err_msg=f"{name} @mn")
    bm, bmn = got["bytes"]                                # per byte of the u8 view: 4 bytes per element
    np.testing.assert_array_equal(bm, np.full((16, LANES), i0))
    np.testing.assert_array_equal(bmn, np.repeat(mn, 4, axis=0))


# -- the scale rule on M/N: row r's scale on row r --------------------------------------------------

def pv_rows_kernel(w, wbuf, vbuf, *, src):
    vq = load_v(w, vbuf)
    for j in range(2):
        acc, sw = pv_step(w, wbuf, vq, j, "fragment")
        w.dequant(acc, w.bpermute(sw, src(w.lane_id)))


def test_scale_of_another_row_is_an_m_n_finding():
    wbuf, vbuf, *_ = pv_buffers()
    wrong = launch(pv_rows_kernel, arch="gfx936", args=(wbuf, vbuf),
                   kwargs=dict(src=lambda l: l // 16 * 16 + (l + 1) % 16))        # row r+1's scale on row r
    f = wrong.findings_of("scale-group-mismatch")
    assert len(f) == 2
    # the dequant's product of row r's result and row r+1's scale is an identity-mismatch too
    assert {(x.kind, x.details["field"]) for x in wrong.findings if x not in f} == {("identity-mismatch", "row")}
    assert [x.instruction for x in f] == [m.index for m in wrong.mmacs()]
    for x in f:
        assert x.details["field"] == "row" and "must be the element's own" in x.message
        pairs = sorted((m["k_set"], m["scale_over"], m["lanes"]) for m in x.details["mismatches"])
        assert pairs == [([r], [(r + 1) % 16], [r, r + 16, r + 32, r + 48]) for r in range(16)]
    right = launch(pv_rows_kernel, arch="gfx936", args=(wbuf, vbuf),
                   kwargs=dict(src=lambda l: (l + 16) % 64))                      # the same row, another lane
    assert right.findings == []


def test_scale_of_another_row_is_found_after_the_result_moved():
    """The result moved to other lanes (bpermute by 16: same row) and the scale came from the wrong
    row: the M/N check on the moved result."""
    wbuf, vbuf, *_ = pv_buffers()

    def k(w, shift):
        vq = load_v(w, vbuf)
        acc, sw = pv_step(w, wbuf, vq, 0, "fragment")
        moved = w.bpermute(acc, (w.lane_id + 16) % 64)
        w.dequant(moved, w.bpermute(sw, w.lane_id // 16 * 16 + (w.lane_id + shift) % 16))
    f = launch(k, arch="gfx936", args=(3,)).findings_of("scale-group-mismatch")
    assert len(f) == 1 and f[0].details["field"] == "row"
    assert sorted((m["k_set"], m["scale_over"]) for m in f[0].details["mismatches"]) == \
        [([r], [(r + 3) % 16]) for r in range(16)]
    assert launch(k, arch="gfx936", args=(0,)).findings == []


def test_select_mixing_a_right_and_a_wrong_scale_names_the_lanes_that_got_the_wrong_one():
    wbuf, vbuf, *_ = pv_buffers()

    def k(w, bad_lanes_from):
        vq = load_v(w, vbuf)
        acc, sw = pv_step(w, wbuf, vq, 0, "fragment")
        wrong = w.group_scale(group_amax(w, wbuf, 0, "contiguous") * (1 / 127))
        w.dequant(acc, w.select(w.lane_id < bad_lanes_from, sw, wrong))
    f = launch(k, arch="gfx936", args=(32,)).findings_of("scale-group-mismatch")
    assert len(f) == 1
    assert f[0].details["foreign"] == list(range(32, 40)) + list(range(48, 56))
    assert f[0].details["lanes"] == list(range(32, 64))
    assert launch(k, arch="gfx936", args=(64,)).findings == []


# -- the QK k-step rule: a scale covering MORE than the K set is not a finding ------------------------

def qk_buffers(seed=1):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((16, 128)).astype(np.float32)              # 16 query rows x 128 dims
    K = rng.integers(-127, 128, (16, 128)).astype(np.int8)              # 16 tokens x 128 dims
    dims = np.broadcast_to(np.arange(128), (16, 128))
    rows = np.broadcast_to(np.arange(16)[:, None], (16, 128))
    return (Buffer("q", Q, tags={"row": rows, "dim": dims}), Buffer("k_cache", K, tags={"token": rows, "dim": dims}),
            Q, K)


def q_values(w, qbuf, s):
    """The 8 f32 Q values lane l feeds into k-step s: row l%16, dims 32s + 8*(l//16) + b."""
    base = (w.lane_id % 16 * 128 + 32 * s + w.lane_id // 16 * 8) * 4
    return w.cat(w.global_load(qbuf, base, 16, "f32"), w.global_load(qbuf, base + 16, 16, "f32"))


def q_amax(w, qbuf, steps):
    """amax of row l%16 over the dims of ``steps`` (32 dims each), reduced across the row's 4 lanes."""
    amax = None
    for s in steps:
        v = q_values(w, qbuf, s)
        for b in range(8):
            amax = abs(v[b]) if amax is None else w.max(amax, abs(v[b]))
    amax = w.max(amax, w.shfl_xor(amax, 16))
    return w.max(amax, w.shfl_xor(amax, 32))


QK_SCALES = {                      # k-step -> the k-steps its Q scale was computed over
    "full": [range(4)] * 4,                                   # per-row scale over all 128 dims
    "halves": [range(2), range(2), range(2, 4), range(2, 4)],  # dims 0-63 for steps 0-1, 64-127 for 2-3
    "halves_bad": [range(2), range(2), range(2), range(2, 4)],  # dims 0-63 applied to dims 64-95
    "per_step": [range(s, s + 1) for s in range(4)],
}


def qk_kernel(w, qbuf, kbuf, obuf, *, scales, chain=False):
    """S = Q K^T for 16 rows x 16 tokens over 128 dims: four k-steps of 32 dims, each its own
    instruction (no C chain) dequantized with its own application of the Q scale; or (chain) one
    chain through C dequantized once."""
    s_acc = w.zeros("f32", 4)
    acc = None
    for s in range(4):
        amax = q_amax(w, qbuf, scales[s])
        sq = w.group_scale(amax * (1 / 127))
        qq = w.clamp(w.rint(q_values(w, qbuf, s) * (127.0 / amax)), -127.0, 127.0).to("i32").to("i8")
        kq = w.global_load(kbuf, w.lane_id % 16 * 128 + 32 * s + w.lane_id // 16 * 8, 8, "i8")
        if chain:
            acc = w.mma(MMAC, qq, kq, acc)
        else:
            s_acc += w.dequant(w.mma(MMAC, qq, kq), sq)
    if chain:
        s_acc = w.dequant(acc, sq)
    w.global_store(obuf, w.lane_id * 16, s_acc)


def run_qk(mode, chain=False):
    qbuf, kbuf, Q, K = qk_buffers()
    out = Buffer.empty("s", (LANES, 4), np.float32)
    run = launch(qk_kernel, arch="gfx936", args=(qbuf, kbuf, out), kwargs=dict(scales=QK_SCALES[mode], chain=chain))
    return run, Q, K, out.array.copy()


def test_qk_per_row_scale_over_all_dims_on_each_k_step_stays_silent():
    run, Q, K, out = run_qk("full")
    assert len(run.mmacs()) == 4 and run.findings == []
    # each instruction consumed 32 dims; the scale's footprint is all 128 (a superset: harmless)
    assert [sorted(m.token_set("A", "dim")) for m in run.mmacs()] == [list(range(32 * s, 32 * s + 32))
                                                                      for s in range(4)]
    assert all(m.token_set("B", "dim") == m.token_set("A", "dim") for m in run.mmacs())
    amax = np.abs(Q).max(axis=1, keepdims=True)
    qq = np.clip(np.rint(Q * (np.float32(127.0) / amax)), -127, 127)
    ref = (qq @ K.T.astype(np.float64)) * (amax * np.float32(1 / 127))
    np.testing.assert_allclose(as_matrix(out), ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("mode", ["halves", "per_step"])
def test_qk_scales_covering_their_k_steps_stay_silent(mode):
    assert run_qk(mode)[0].findings == []


def test_qk_scale_over_dims_0_63_applied_to_dims_64_95_is_found():
    run, *_ = run_qk("halves_bad")
    f = run.findings_of("scale-group-mismatch")
    assert len(run.findings) == len(f) == 1
    assert f[0].instruction == run.mmacs()[2].index
    assert f[0].details["field"] == "dim"
    assert f[0].details["k_set"] == list(range(64, 96))
    assert f[0].details["scale_over"] == list(range(64))
    assert f[0].details["foreign"] == list(range(64, 96))


def test_qk_chain_through_c_takes_the_whole_k_set():
    """Four k-steps chained through C, dequantized once: a scale over all 128 dims covers the chain;
    one over dims 64-127 (the last step's own) misses dims 0-63 of the earlier steps."""
    assert run_qk("full", chain=True)[0].findings == []
    run, *_ = run_qk("halves", chain=True)                 # the last step's scale is over dims 64-127
    f = run.findings_of("scale-group-mismatch")
    assert len(f) == 1 and f[0].instruction == run.mmacs()[3].index
    assert f[0].details["k_set"] == list(range(128)) and f[0].details["foreign"] == list(range(64))


def test_qk_chain_through_a_moved_c_still_takes_the_whole_k_set():
    """C is a moved earlier result (not the previous D element for element): the chain is followed
    through the record's C identities instead of folded. (The numbers are no QK any more; only the
    K sets matter here: the tokens are left untagged, since C moved by 16 lanes holds another
    column's sums, an accumulator-carried where the columns are tagged.)"""
    qbuf, kbuf, _, K = qk_buffers()
    kbuf = Buffer("k_cache", K, tags={"dim": np.broadcast_to(np.arange(128), K.shape)})

    def k(w, last_scale_steps):
        acc = None
        for s in range(4):
            amax = q_amax(w, qbuf, range(4))
            qq = w.clamp(w.rint(q_values(w, qbuf, s) * (127.0 / amax)), -127.0, 127.0).to("i32").to("i8")
            kq = w.global_load(kbuf, w.lane_id % 16 * 128 + 32 * s + w.lane_id // 16 * 8, 8, "i8")
            acc = w.mma(MMAC, qq, kq, None if acc is None else w.bpermute(acc, (w.lane_id + 16) % 64))
        w.dequant(acc, w.group_scale(q_amax(w, qbuf, last_scale_steps) * (1 / 127)))
    assert launch(k, arch="gfx936", args=(range(4),)).findings == []
    f = launch(k, arch="gfx936", args=(range(2, 4),)).findings_of("scale-group-mismatch")
    assert len(f) == 1 and f[0].details["foreign"] == list(range(64)) and f[0].details["k_set"] == list(range(128))


# -- a second scale on N: a per-dim V scale applied to the dequantized PV result ----------------------

def pv_vscale_kernel(w, wbuf, vbuf, vfbuf, *, v_tokens=64, dim_shift=0):
    """O = sum_j dequant(acc_j, sw_j) * sv, sv the per-dim V scale (amax of dim n over ``v_tokens``
    tokens from the f32 V, reduced across the 4 lanes holding dim n), moved into the D layout by
    bpermute (element i of lane l is dim l//16 + 4i) and concatenated. dim_shift != 0 takes the scale
    of another dim."""
    per_lane = v_tokens // 4
    vals = [w.global_load(vfbuf, (w.lane_id % 16 * 64 + w.lane_id // 16 * per_lane + 4 * q) * 4, 16, "f32")
            for q in range(per_lane // 4)]
    vals = w.cat(*vals)
    amax = abs(vals[0])
    for b in range(1, vals.n):
        amax = w.max(amax, abs(vals[b]))
    amax = w.max(w.max(amax, w.shfl_xor(amax, 16)), w.shfl_xor(w.max(amax, w.shfl_xor(amax, 16)), 32))
    sv = w.group_scale(amax * (1 / 127))                     # lane l: dim l%16
    sv4 = w.cat(*[w.bpermute(sv, (w.lane_id // 16 + 4 * i + dim_shift) % 16) for i in range(4)])
    vq = load_v(w, vbuf)
    o = w.zeros("f32", 4)
    for j in range(2):
        acc, sw = pv_step(w, wbuf, vq, j, "fragment")
        o += w.dequant(acc, sw) * sv4
    return o


def test_per_dim_v_scale_over_the_whole_tile_is_silent_and_over_half_of_it_is_found():
    wbuf, vbuf, *_ = pv_buffers()
    rng = np.random.default_rng(5)
    vfbuf = Buffer("v_f32", rng.standard_normal((16, 64)).astype(np.float32), tags={"dim": ROW, "token": TOK})
    run = lambda **kw: launch(pv_vscale_kernel, arch="gfx936", args=(wbuf, vbuf, vfbuf), kwargs=kw)
    assert run().findings == []
    half = run(v_tokens=32)                                  # the V scale covers tokens 0-31 only
    f = half.findings_of("scale-group-mismatch")
    assert len(half.findings) == len(f) == 2
    assert [x.details["scale_over"] for x in f] == [list(range(32))] * 2
    assert [x.details["foreign"] for x in f] == [list(range(32, 40)) + list(range(48, 56)),
                                                  list(range(40, 48)) + list(range(56, 64))]
    wrong_dim = run(dim_shift=1)                             # dim n+1's scale on column n
    f = wrong_dim.findings_of("scale-group-mismatch")
    assert len(f) == 2 and all(x.details["field"] == "dim" for x in f)
    assert len(wrong_dim.findings) == len(f)        # the scale check's alone: a dim is an axis, free in a product
    assert sorted((m["k_set"], m["scale_over"]) for m in f[0].details["mismatches"]) == \
        [([n], [(n + 1) % 16]) for n in range(16)]


def test_fma_applies_the_scale_like_a_multiply():
    wbuf, vbuf, *_ = pv_buffers()

    def k(w, grouping):
        vq = load_v(w, vbuf)
        o = w.zeros("f32", 4)
        for j in range(2):
            acc, sw = pv_step(w, wbuf, vq, j, grouping)
            o = w.fma(acc.to("f32"), sw, o)
    assert launch(k, arch="gfx936", args=("fragment",)).findings == []
    _expect_contiguous_findings(launch(k, arch="gfx936", args=("contiguous",)))


@pytest.mark.parametrize("grouping", ["fragment", "contiguous"])
def test_batched_workgroups_report_what_one_at_a_time_reports(grouping):
    """Four workgroups side by side (batch=4): the same findings per workgroup as one at a time, each
    naming an instruction of its own workgroup, on both the in-place and the moved-result path."""
    wbuf, vbuf, *_ = pv_buffers()
    for route in ("plain", "cat_scale", "bpermute_acc", "lds_acc_moved"):
        got = {}
        for batch in (1, 4):
            out = Buffer.empty("out", (LANES, 4), np.float32)
            run = launch(pv_kernel, grid=4, arch="gfx936", args=(wbuf, vbuf, out), trace=False, batch=batch,
                         kwargs=dict(grouping=grouping, route=route))
            idx = {(m.workgroup, m.index) for m in run.mmacs()}
            assert all((f.workgroup, f.instruction) in idx for f in run.findings), route
            got[batch] = sorted((f.kind, f.workgroup, f.lane, tuple(f.details["foreign"]), tuple(f.details["lanes"]))
                                for f in run.findings)
        assert got[1] == got[4], route
        assert len(got[4]) == (8 if grouping == "contiguous" else 0), route


# -- back-end bugs found while writing these tests, fixed since -----------------------------------

def test_scale_on_the_sum_of_two_results_is_checked_like_a_chain_through_c():
    """acc0 + acc1 (two instructions, one int32 add) is the same number as a chain through C; a scale
    covering only instruction 0's tokens must be found on both, and one covering both on neither."""
    wbuf, vbuf, *_ = pv_buffers()

    def k(w, how, groups):
        vq = load_v(w, vbuf)
        amax = group_amax(w, wbuf, 0, "fragment")
        for j in groups[1:]:
            amax = w.max(amax, group_amax(w, wbuf, j, "fragment"))
        sw = w.group_scale(amax * (1 / 127))
        accs, acc = [], None
        for j in range(2):
            wq = w.clamp(w.rint(w_values(w, wbuf, w.lane_id // 16 * 16 + 8 * j) * (127.0 / amax)),
                         -127.0, 127.0).to("i32").to("i8")
            if how == "chain":
                acc = w.mma(MMAC, wq, vq.bytes(8 * j, 8), acc)
            else:
                accs.append(w.mma(MMAC, wq, vq.bytes(8 * j, 8)))
        w.dequant(acc if how == "chain" else accs[0] + accs[1], sw)
    for how in ("chain", "add"):
        assert launch(k, arch="gfx936", args=(how, (0, 1))).findings == [], how
        f = launch(k, arch="gfx936", args=(how, (0,))).findings_of("scale-group-mismatch")
        assert len(f) == 1 and f[0].details["foreign"] == k_tokens(1), how


def test_two_f16_scales_packed_in_one_dword_keep_their_footprints_through_lds_and_global():
    wbuf, vbuf, *_ = pv_buffers()
    g = Buffer.empty("g", (LANES,), np.uint32)
    got = {}

    def k(w):
        s0 = w.group_scale(group_amax(w, wbuf, 0, "fragment") * (1 / 127))
        s1 = w.group_scale(group_amax(w, wbuf, 1, "fragment") * (1 / 127))
        pk = w.cat(s0.to("f16"), s1.to("f16")).bitcast("u32")
        reg = w.shared("pk", (LANES,), "u32")
        w.lds_store(reg, w.lane_id * 4, pk)
        w.global_store(g, w.lane_id * 4, pk)
        for name, v in (("register", pk), ("lds", w.lds_load(reg, w.lane_id * 4, 4, "u32")),
                        ("global", w.global_load(g, w.lane_id * 4, 4, "u32"))):
            h = v.bitcast("f16")
            got[name] = [h.footprint("token", e, 0) for e in range(2)]
    launch(k, arch="gfx936", trace=False)
    want = [set(k_tokens(0)), set(k_tokens(1))]
    assert got == {"register": want, "lds": want, "global": want}


def test_dword_load_of_four_token_bytes_keeps_each_bytes_token():
    tok = np.arange(LANES * 4).reshape(LANES, 4)
    buf = Buffer("v", (tok % 100).astype(np.int8), tags={"token": tok})
    got = {}

    def k(w):
        reg = w.shared("x", (LANES * 4,), "i8")
        w.lds_store(reg, w.lane_id * 4, w.global_load(buf, w.lane_id * 4, 4, "i8"))
        got["lds"] = w.lds_load(reg, w.lane_id * 4, 4, "u32").bitcast("i8").tags("token")[:, 1].tolist()
        got["global"] = w.global_load(buf, w.lane_id * 4, 4, "u32").bitcast("i8").tags("token")[:, 1].tolist()
    launch(k, trace=False)
    assert got == {"lds": [4, 5, 6, 7], "global": [4, 5, 6, 7]}


def test_wide_footprint_survives_a_launch_boundary_through_a_buffer():
    tok = np.arange(LANES * 16).reshape(LANES, 16)                     # 1024 tokens: four windows
    x = Buffer("x", np.ones((LANES, 16), np.float32), tags={"token": tok})
    mid = Buffer.empty("mid", (LANES,), np.float32)
    got = {}

    def k1(w):
        v = w.cat(*[w.global_load(x, w.lane_id * 64 + 16 * i, 16, "f32") for i in range(4)])
        m = v[0]
        for b in range(1, 16):
            m = w.max(m, v[b])
        s = w.group_scale(w.reduce(m, "max"))
        got["before"] = s.footprint("token", 0, 0)
        w.global_store(mid, w.lane_id * 4, s)

    def k2(w):
        s = w.global_load(mid, w.lane_id * 4, 4, "f32")
        got["after"] = (s.is_scale(), s.footprint("token", 0, 0))
    launch(k1, trace=False)
    launch(k2, trace=False)
    assert got["before"] == set(range(1024))
    assert got["after"] == (True, set(range(1024)))


@pytest.mark.parametrize("second_launch_mmas", [0, 1])
def test_matrix_result_dequantized_in_a_later_launch(second_launch_mmas):
    """Launch 1 stores a PV result and its scale (the decode's tmp_out pattern); launch 2 loads both and
    dequantizes: fragment silent, contiguous found — with or without matrix instructions of its own."""
    wbuf, vbuf, *_ = pv_buffers()
    verdicts = {}
    for grouping in ("fragment", "contiguous"):
        accb = Buffer.empty("acc", (LANES, 4), np.int32)
        scb = Buffer.empty("sc", (LANES,), np.float32)

        def k1(w):
            acc, sw = pv_step(w, wbuf, load_v(w, vbuf), 0, grouping)
            w.global_store(accb, w.lane_id * 16, acc)
            w.global_store(scb, w.lane_id * 4, sw)

        def k2(w):
            for _ in range(second_launch_mmas):
                pv_step(w, wbuf, load_v(w, vbuf), 1, "fragment")
            w.dequant(w.global_load(accb, w.lane_id * 16, 16, "i32"), w.global_load(scb, w.lane_id * 4, 4, "f32"))
        launch(k1, arch="gfx936", trace=False)
        verdicts[grouping] = [f.details["foreign"] for f in
                              launch(k2, arch="gfx936", trace=False).findings_of("scale-group-mismatch")]
    assert verdicts == {"fragment": [], "contiguous": [list(range(32, 40)) + list(range(48, 56))]}


def _constant_scale_tile(w, vbuf, obuf, *, scale, wq):
    """A row group whose W were all zero (``wq`` = 0: compiled code's literal zeros) or not, and a
    constant scale: the one a kernel chose for an all-zero group, or another."""
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    vq = w.global_load(vbuf, lane16id * 64 + rowid * 16, nbytes=16, dtype="i8")
    acc = w.mma("v_mmac_i32_16x16x32_i8", w.const(wq, "i8", 8), vq.bytes(0, 8))
    o = w.dequant(acc, w.group_scale(w.const(scale, "f32")))
    w.global_store(obuf, w.lane_id * 16, o)


@pytest.mark.parametrize("scale, wq, found", [(0.0, 0, False), (0.0, 3, True), (0.5, 0, True)])
def test_a_zero_scale_of_no_origin_on_a_zero_result_is_no_mismatch(scale, wq, found):
    """amax >= min ? amax / 127 : 0.f writes a zero of no origin for an all-zero group, whose
    products are all zero: no token took another group's scale. The same zero on a result that is
    not zero drops consumed tokens, and a nonzero constant is a scale computed over no tokens:
    both are reported."""
    tok = np.broadcast_to(np.arange(64), (16, 64))
    v = Buffer("v_cache", np.ones((16, 64), np.int8), {"token": tok})
    out = Buffer.empty("out", (64, 4), np.float32)
    run = launch(_constant_scale_tile, grid=1, arch="gfx936", args=(v, out), kwargs=dict(scale=scale, wq=wq))
    got = run.findings_of("scale-group-mismatch")
    assert bool(got) == found, [f.message for f in run.findings]
    assert {f.kind for f in run.findings} <= {"scale-group-mismatch"}
    if found:
        assert got[0].details["scale_over"] == [] and got[0].details["k_set"]


def test_group_membership_compiled_is_the_subset_check(monkeypatch):
    """scales._holds (is a result's row or token in the scale's group?) in its compiled pass gives
    Mask.of_values(x).subset_of(side): windows of other bases, empty sets, wide sets, broadcast
    sides, and elements not asked about."""
    from gfxsim.machine import jit, scales
    from gfxsim.machine.provenance import WINDOW, Mask, WideSets
    jit.prewarm()
    jit.join_start()                         # running(): prewarm's thread has made every module
    rng = np.random.default_rng(11)
    wide = WideSets()
    shape = (2, 16, 8)
    x = rng.integers(-1, 3 * WINDOW, shape).astype(np.int32)
    side = Mask.of_values(rng.integers(-1, 3 * WINDOW, shape))
    near = rng.random(shape) < 0.3                       # sides that hold x itself, and their neighbours
    side = Mask.where(near, Mask.of_values(np.where(near, x, -1)), side)
    side.bits[..., 0] |= np.uint64(0xF0F0)
    w = rng.random(shape) < 0.2
    side.wide[w] = wide.intern(set(x[w][:5].tolist()) | {1, 2 * WINDOW + 3})
    side.base[w], side.bits[w] = -1, 0
    where = (x >= 0) & (rng.random(shape) < 0.8)
    cases = [(side, x, where), (side.map(lambda a: np.broadcast_to(a[:1], a.shape)), x, where)]
    got = [scales._holds(s, v, m, wide) for s, v, m in cases]
    monkeypatch.setattr(scales, "running", lambda: False)
    want = [scales._holds(s, v, m, wide) for s, v, m in cases]
    for g, e, (_, _, m) in zip(got, want, cases):
        assert g.dtype == e.dtype and (g == e).all()
        assert (g & m).any() and (~g & m).any() and (g | m).all()
    assert (w & where & got[0]).any() and (w & where & ~got[0]).any()     # the wide sets decide both ways


def test_k_sets_within_the_scale_compiled_is_the_subset_check(monkeypatch):
    """scales._outside_parts (A row m's or B column n's K set outside the scale's, per D element)
    in its compiled pass gives the broadcast subset check: window sets with and without extra
    bits, other bases, empty sets, wide sets on either side, and a record's rows picked."""
    from types import SimpleNamespace
    from gfxsim.machine import jit, scales
    from gfxsim.machine.provenance import WINDOW, Mask, WideSets
    jit.prewarm()
    jit.join_start()                         # running(): prewarm's thread has made every module
    rng = np.random.default_rng(12)
    wide = WideSets()
    nb, M, N = 3, 16, 8

    def sets(shape, p_wide):
        m = Mask.of_values(rng.integers(-1, 2 * WINDOW, shape))
        m.bits[..., 1] |= np.where(rng.random(shape) < 0.5, np.uint64(0x0FF0), np.uint64(0))
        m.bits[m.base < 0] = 0
        w = rng.random(shape) < p_wide
        m.wide[w] = [wide.intern({1, 5, int(v), 2 * WINDOW + 7}) for v in rng.integers(0, 3 * WINDOW, int(w.sum()))]
        m.base[w], m.bits[w] = -1, 0
        return m
    rec = SimpleNamespace(ks_a={"token": sets((nb + 1, M), 0.1)}, ks_b={"token": sets((nb + 1, N), 0.1),
                                                                        "dim": sets((nb + 1, N), 0.0)})
    side = sets((nb, M, N), 0.1)
    side.bits[..., :] |= np.where(rng.random((nb, M, N, 1)) < 0.7, ~np.uint64(0), np.uint64(0))
    side.bits[side.base < 0] = 0
    cases = [(f, rows) for f in ("token", "dim") for rows in (np.array([3, 0, 1]), np.arange(nb))]
    got = [scales._outside_parts(rec, f, side, rows, wide, nb, M, N) for f, rows in cases]
    monkeypatch.setattr(scales, "running", lambda: False)
    want = [scales._outside_parts(rec, f, side, rows, wide, nb, M, N) for f, rows in cases]
    for g, e in zip(got, want):
        assert g.shape == e.shape and (g == e).all() and g.any() and not g.all()
