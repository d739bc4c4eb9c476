"""identity-mismatch (gfxsim/machine/identity.py): an elementwise add, sub, product or fma whose
operands name different values of a field it does not reduce over. Sums over the axes (token, dim,
the fields outputs declare) and extrema stay silent; only lanes under EXEC count; the compiled
kernel of tests/defective/kv_scale_index.hip is caught through the HIP door (the Python one,
reduce_stats_stride.py, in tests/kernels_py/test_defective_kernels.py)."""
import json

import numpy as np
from gfxsim import Buffer, launch
from gfxsim.cli import main
from support import DEFECTIVE, need_toolchain

HEADS = np.arange(4)[:, None]          # lane l: head l // 16, token l % 16
TOKENS = np.arange(16)[None, :]


def _x(**tags):
    return Buffer("x", np.arange(64, dtype=np.float32).reshape(4, 16), tags)


def _kinds(run):
    return [f.kind for f in run.findings]


def test_a_sum_over_tokens_is_silent_and_over_heads_is_named():
    x = _x(head=HEADS, token=TOKENS)

    def k(w, width):
        w.reduce(w.global_load(x, w.lane_id * 4, 4, "f32"), "sum", width)
    assert _kinds(launch(k, arch="gfx942", kwargs={"width": 16})) == []
    run = launch(k, arch="gfx942", kwargs={"width": 32})
    (f,) = run.findings
    assert f.kind == "identity-mismatch" and f.details["field"] == "head"
    assert f.details["values"] == [0, 1] and f.details["lanes"] == list(range(64))
    assert f.details["operation"] == "v_add_f32" and f.source.startswith("test_identity.py:")
    assert "combines head 0's value with head 1's" in f.message


def test_a_field_an_output_declares_is_an_axis():
    """A sum over a field named by no convention (``k``) is a reduction once an output declares it."""
    x = Buffer("x", np.ones((4, 16), np.float32), {"k": TOKENS + 0 * HEADS})

    def k(w, out):
        s = w.reduce(w.global_load(x, w.lane_id * 4, 4, "f32"), "sum", 16)
        w.global_store(out, w.lane_id * 4, s)
    plain = Buffer.empty("out", (64,), np.float32)
    assert {f.details["field"] for f in launch(k, arch="gfx942", args=(plain,)).findings} == {"k"}
    declared = Buffer.empty("out", (64,), np.float32).expect("k", 0, 16, exact=False)
    assert "identity-mismatch" not in _kinds(launch(k, arch="gfx942", args=(declared,)))


def test_a_product_checks_the_output_fields_and_an_extremum_none():
    """x[t] * x[t'] of one head is the term of a correlation over tokens (an axis): silent; a value
    times another head's is a finding; a max over heads is a block amax: silent."""
    x = _x(head=HEADS, token=TOKENS)

    def k(w, op, step):
        a = w.global_load(x, w.lane_id * 4, 4, "f32")
        b = w.global_load(x, (w.lane_id ^ step) * 4, 4, "f32")
        a * b if op == "mul" else w.max(a, b)
    assert _kinds(launch(k, arch="gfx942", kwargs={"op": "mul", "step": 1})) == []          # the neighbouring token
    (f,) = launch(k, arch="gfx942", kwargs={"op": "mul", "step": 16}).findings               # the neighbouring head
    assert f.details["field"] == "head" and f.details["values"] == [0, 1]
    assert "multiplies head 0's value by head 1's" in f.message
    assert _kinds(launch(k, arch="gfx942", kwargs={"op": "max", "step": 16})) == []       # a block amax spans them


def test_fma_checks_its_product_and_its_sum():
    x = _x(head=HEADS)

    def k(w, which):
        a = w.global_load(x, w.lane_id * 4, 4, "f32")
        other = w.global_load(x, ((w.lane_id + 16) % 64) * 4, 4, "f32")
        w.fma(a, other, a) if which == "product" else w.fma(a, a, other)
    for which in ("product", "sum"):
        (f,) = launch(k, arch="gfx942", kwargs={"which": which}).findings
        assert f.details["field"] == "head" and f.details["operation"] == "v_fma_f32", which


def test_only_lanes_under_exec_count():
    x = _x(head=HEADS)

    def k(w, lanes):
        a = w.global_load(x, w.lane_id * 4, 4, "f32")
        b = w.global_load(x, ((w.lane_id + 16) % 64) * 4, 4, "f32")
        with w.if_(w.lane_id < lanes):
            a[0] = a * b
    assert _kinds(launch(k, arch="gfx942", kwargs={"lanes": 0})) == []
    (f,) = launch(k, arch="gfx942", kwargs={"lanes": 3}).findings
    assert f.details["lanes"] == [0, 1, 2]


def test_a_batch_names_each_workgroup():
    """Folded or not, the finding names the workgroup whose lanes disagree."""
    x = Buffer("x", np.ones((4, 64), np.float32), {"head": np.arange(4)[:, None]})

    def k(w):
        g = w.workgroup_id[0]
        a = w.global_load(x, (g * 64 + w.lane_id) * 4, 4, "f32")
        other = g + g * (g - 1) * (3 - g) // 2            # workgroup 2 reads head 3, the others their own
        b = w.global_load(x, (other * 64 + w.lane_id) * 4, 4, "f32")
        a * b
    run = launch(k, grid=4, arch="gfx942", batch=4)
    assert [(f.workgroup, f.details["values"]) for f in run.findings] == [((2, 0, 0), [2, 3])]


def test_the_compiled_kernel_through_the_hip_door(capsys, tmp_path, monkeypatch):
    """kv_scale_index.hip: the per-(seq, head) scale read at a head-major index is named on both
    fields; the fixed kernel computes the reference and reports nothing."""
    need_toolchain("gfx942")
    monkeypatch.chdir(tmp_path)
    S, H, D = 2, 4, 64
    rng = np.random.default_rng(0)
    k = rng.integers(-100, 100, (S, H, D), dtype=np.int8)
    ks = rng.uniform(0.5, 2, (S, H)).astype(np.float32)
    np.save("k.npy", k)
    np.save("ks.npy", ks)
    np.save("out.npy", np.zeros(S * H * D, np.float32))

    def hip_run(kernel):
        assert main(["hip", "run", str(DEFECTIVE / "kv_scale_index.hip"), "--kernel", kernel, "--grid", str(S * H),
                     "--block", str(D), "--arg", "k=k.npy", "--arg", "k_scale=ks.npy", "--arg", "out=out.npy",
                     "--arg", f"num_seqs={S}", "--arg", f"num_heads={H}", "--arg", f"head_dim={D}",
                     "--tag", "k:0=seq", "--tag", "k:1=head", "--tag", "k_scale:0=seq", "--tag", "k_scale:1=head",
                     "--report", "json", "-o", kernel]) == 0
        return np.load(f"{kernel}/out.npy"), json.loads(capsys.readouterr().out)["findings"]

    want = (k * ks[:, :, None]).reshape(-1)
    out, found = hip_run("kv_scale_index")
    assert not np.allclose(out, want)
    assert {f["kind"] for f in found} == {"identity-mismatch"}
    assert {f["details"]["field"] for f in found} == {"seq", "head"}
    # (seq, head) of workgroup g reads the scale at flat head * S + seq; the first and last are right
    wrong = {g for g in range(S * H) if (g % H) * S + g // H != g}
    assert {f["workgroup"][0] for f in found} == wrong
    for f in found:
        g = f["workgroup"][0]
        flat = (g % H) * S + g // H
        mine, read = (g // H, g % H), (flat // H, flat % H)
        i = 0 if f["details"]["field"] == "seq" else 1
        assert sorted(f["details"]["values"]) == sorted([mine[i], read[i]]) and mine[i] != read[i]
        assert f["source"].endswith("kv_scale_index.hip:17") and f["details"]["operation"] == "v_mul_f32"
    out, found = hip_run("kv_scale_index_fixed")
    np.testing.assert_array_equal(out, want)
    assert found == []


def _two_heads_pv(fixed):
    """out = P·Vᵀ in two k-steps of 32 tokens, the 16 rows of P two heads of 8 query rows; the
    defect loads the second k-step's P rows 8 rows on, from the other head."""
    rows, toks = np.arange(16)[:, None], np.arange(64)[None, :]
    p = Buffer("p", np.ones((16, 64), np.int8), {"head": rows // 8 + 0 * toks, "token": toks + 0 * rows})
    v = Buffer("v", np.ones((16, 64), np.int8), {"token": toks + 0 * rows})
    out = Buffer.empty("out", (64, 4), np.float32).expect("token", 0, 64)

    def two_heads_pv(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        o = w.zeros("f32", 4)
        for j in range(2):
            row = c if fixed or j == 0 else (c + 8) % 16
            a = w.global_load(p, row * 64 + r * 16 + 8 * j, 8, "i8")
            o += w.mma("v_mmac_i32_16x16x32_i8", a, w.global_load(v, c * 64 + r * 16 + 8 * j, 8, "i8")).to("f32")
        w.global_store(out, w.lane_id * 16, o)
    return launch(two_heads_pv, arch="gfx936")


def test_another_heads_partial_is_a_coverage_finding_too():
    """Counted by token alone, the element consumed tokens 0-63 once; counted per head, half of
    them were another head's."""
    run = _two_heads_pv(False)
    assert sorted({f.kind for f in run.findings}) == ["identity-mismatch", "token-coverage"]
    (mix,) = run.findings_of("identity-mismatch")
    assert mix.details["field"] == "head" and mix.details["operation"] == "v_add_f32"
    cov = run.findings_of("token-coverage")
    assert cov and all(f.details["buffer"] == "out" and not f.details["never"] for f in cov)
    assert "a partial sum of another output" in cov[0].message
    assert sum(f.details["element_count"] for f in cov) == 256
    assert _two_heads_pv(True).findings == []
