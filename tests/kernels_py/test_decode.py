"""paged_attention_decode on the simulator: zero findings and reference agreement for the fragment
kernel, a finding per affected instruction for the contiguous bug, the accuracy figures,
partition invariance, the wrong-arch formula caught, bad parameters named."""
import numpy as np
import pytest

from kernels_py.reference import attention as R
from kernels_py.workloads.data import make_attention_inputs
from kernels_py.host.buffers import make_cache, run_decode
from kernels_py.host.runs import run_kernel
from support import DEFECTIVE

# native vs reference-INT8: the integer parts are exact and every fp32 operation is the same, but
# the kernel sums exp() per lane, then across lanes and waves, and the waves' PV partials in wave
# order, while numpy sums pairwise: a few ulp of fp32 on values of magnitude <= max|V| ~ 2.
NATIVE_VS_REF_ATOL = 2e-6


def small(ctx=300, heads=8, kv_heads=1, head_dim=128, seed=0, block_size=16):
    d = make_attention_inputs(seed=seed, num_seqs=1, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                              context_lens=[ctx])
    return d, make_cache(d["k"], d["v"], d["context_lens"], block_size=block_size, smooth_k=True, seed=seed)


@pytest.mark.parametrize("arch", ["gfx936", "gfx942"])
@pytest.mark.parametrize("ctx,heads,kv_heads,head_dim,block_size", [
    (300, 8, 1, 128, 16),      # partial last partition and chunk
    (77, 16, 1, 64, 32),       # one partial chunk, GQA 16, head_dim 64
    (513, 2, 2, 64, 16),       # two kv heads, GQA 1, three partitions
])
def test_fragment_decode_has_no_findings_and_matches_reference_int8(arch, ctx, heads, kv_heads, head_dim, block_size):
    d, cache = small(ctx, heads, kv_heads, head_dim, block_size=block_size)
    res = run_decode(d["q"], cache, arch=arch, trace=False)
    assert [f for r in res.runs for f in r.findings] == []
    ref = R.attention_int8(d["q"], cache, grouping="fragment")
    np.testing.assert_allclose(res.out, ref, rtol=0, atol=NATIVE_VS_REF_ATOL)
    pv = [m for m in res.run.mmacs() if m.token_set("A")]
    assert pv and all(m.token_set("A") == m.token_set("B") for m in pv)


def _contiguous_expectation(m, ctx):
    """Independent of the debugger: the tokens MMAC m consumed and the contiguous group (t//32 of
    its 64-token chunk) whose scale it was given."""
    k = sorted(t for t in m.token_set("B") if t < ctx)
    chunk = k[0] // 64 * 64
    j = (k[0] % 16) // 8
    group = set(range(chunk + 32 * j, min(chunk + 32 * j + 32, ctx)))
    return set(k), group


@pytest.mark.parametrize("arch", ["gfx936", "gfx942"])
def test_contiguous_grouping_names_the_mixed_tokens_for_every_affected_instruction(arch):
    ctx = 300
    d, cache = small(ctx)
    res = run_decode(d["q"], cache, arch=arch, grouping="contiguous", trace=False)
    found = {f.instruction: f for f in res.run.findings_of("scale-group-mismatch")}
    pv = [m for m in res.run.mmacs() if m.token_set("A")]
    affected = {}
    for m in pv:
        consumed, group = _contiguous_expectation(m, ctx)
        if consumed != group:
            affected[m.index] = sorted(consumed - group)
    assert affected and set(found) == set(affected)
    for idx, foreign in affected.items():
        assert found[idx].details["foreign"] == foreign
        assert found[idx].details["k_set"] == sorted(m for m in found[idx].details["k_set"])
    assert not res.run.findings_of("ab-kslot-mismatch") and not res.run.findings_of("token-coverage")


@pytest.mark.parametrize("wrong,arch", [("gfx936", "gfx942"), ("gfx942", "gfx936")])
def test_running_one_archs_formula_on_the_other_is_caught(wrong, arch):
    d, cache = small(300)
    res = run_decode(d["q"], cache, arch=arch, formula=wrong, trace=False)
    assert res.run.findings_of("scale-group-mismatch")
    assert R.metrics(res.out, R.attention_bf16(d["q"], d["k"], d["v"], d["context_lens"]))["max_abs"] > 0.1
    right = run_decode(d["q"], cache, arch=arch, formula=arch, trace=False)
    assert not right.run.findings


def test_several_partitions_match_one_partition():
    d, cache = small(1000, heads=4, head_dim=64, seed=1)
    many = run_decode(d["q"], cache, trace=False, provenance=False)
    one = run_decode(d["q"], cache, trace=False, provenance=False, partition_size=1024)
    assert many.tmp_out.shape[2] == 4 and one.tmp_out.shape[2] == 1
    np.testing.assert_allclose(many.out, one.out, rtol=0, atol=1e-6)


@pytest.mark.parametrize("context", [4096, 8192, 16384])
def test_fragment_accuracy_figures(context):
    """Fragment decode within 2.5% relative L1 and 3e-3 max_abs of BF16 (max_abs moves
    with the seed and V's magnitude), smooth-K on since the
    default data has outlier K channels; the report also carries the no-smooth-K reference."""
    kr = run_kernel("paged_attention_decode", context=context, provenance=False)
    m = kr.metrics()
    assert m["vs_bf16"]["rel_l1"] <= 0.025 and m["vs_bf16"]["max_abs"] <= 3e-3
    assert m["vs_reference_int8"]["max_abs"] <= NATIVE_VS_REF_ATOL
    assert m["reference_int8_without_smooth_k_vs_bf16"]["max_abs"] > m["vs_bf16"]["max_abs"]


@pytest.mark.parametrize("arch", ["gfx936", "gfx942"])
def test_contiguous_error_is_at_least_10x_fragment(arch):
    frag = run_kernel("paged_attention_decode", arch=arch, context=4096, provenance=False).metrics()
    cont = run_kernel("paged_attention_decode", arch=arch, context=4096, grouping="contiguous",
                      provenance=False).metrics()
    assert cont["vs_bf16"]["max_abs"] >= 10 * frag["vs_bf16"]["max_abs"]
    assert frag["vs_bf16"]["max_abs"] <= 3e-3


def test_report_json_schema():
    kr = run_kernel("paged_attention_decode", context=130, grouping="contiguous")
    rep = kr.report()
    assert set(rep) >= {"metrics", "mmacs", "findings"}
    assert set(rep["metrics"]) >= {"vs_fp32", "vs_bf16", "vs_reference_int8"}
    assert set(rep["metrics"]["vs_bf16"]) == {"max_abs", "rms", "cos_sim", "rel_l1"}
    e = rep["mmacs"][-1]
    assert set(e) >= {"index", "instruction", "workgroup", "wave", "a_tokens", "b_tokens"}
    assert len(e["a_tokens"]) == len(e["b_tokens"]) == 32
    f = [x for x in rep["findings"] if x["kind"] == "scale-group-mismatch"]
    assert f and {"workgroup", "wave", "lane", "instruction", "source", "details"} <= set(f[0])


@pytest.mark.parametrize("bad,msg", [(dict(head_dim=96), "head-dim must be 64 or 128"),
                                     (dict(heads=8, kv_heads=3), "GQA ratio"),
                                     (dict(heads=32, kv_heads=1), "GQA ratio"),
                                     (dict(block_size=8), "block-size"),
                                     (dict(grouping="rows"), "grouping"),
                                     (dict(partition_size=300), "partition-size"),
                                     (dict(arch="gfx1100"), "unknown arch")])
def test_bad_parameters_are_named(bad, msg):
    with pytest.raises((ValueError, KeyError), match=msg):
        run_kernel("paged_attention_decode", context=64, **bad)


def test_cli_lists_kernels_and_runs_json(capsys):
    import json
    from gfxsim.cli import main
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "paged_attention_decode" in capsys.readouterr().out
    assert main(["run", "paged_attention_decode", "--context", "70", "100", "--report", "json", "--head-dim",
                 "64", "--heads", "4"]) == 0
    reps = json.loads(capsys.readouterr().out)
    assert [r["context"] for r in reps] == [70, 100] and all(r["findings"] == [] for r in reps)
    assert main(["run", "nonexistent"]) == 2
    assert "unknown kernel 'nonexistent'" in capsys.readouterr().err


@pytest.mark.parametrize("kernel", ["paged_attention_decode", "int8_kv_cache", "qk_int8"])
def test_cli_begins_the_first_runs_normals_before_the_runner_and_the_runner_takes_them(monkeypatch, capsys, kernel):
    """`gfxsim run` begins its first context's K/V normals (start_normals) as soon as its arguments
    are checked, with the key the runner's inputs then ask for: the runner takes that block (a wrong
    seed or shape would drop it), and the report is the one made without it (seconds aside)."""
    import json
    from gfxsim.cli import main
    from kernels_py.workloads import data
    taken, take = [], data._take_early
    monkeypatch.setattr(data, "_take_early", lambda key: taken.append(take(key)) or taken[-1])
    argv = ["run", kernel, "--context", "96", "64", "--heads", "4", "--kv-heads", "2", "--seed", "5",
            "--no-provenance", "--report", "json", "--quiet"]
    assert main(argv) == 0
    early = json.loads(capsys.readouterr().out)
    assert len(taken) == 2 and taken[0] is not None and taken[1] is None       # the first context's only
    monkeypatch.setattr(data, "start_normals", lambda *a, **k: None)
    assert main(argv) == 0
    drawn = json.loads(capsys.readouterr().out)
    for r in (*early, *drawn):
        r.pop("seconds")
    assert early == drawn


def test_cli_runs_on_user_inputs_and_names_bad_files(tmp_path, capsys):
    import json
    from gfxsim.cli import main
    d = make_attention_inputs(seed=3, num_seqs=2, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[90, 40])
    good = tmp_path / "good.npz"
    np.savez(good, q=d["q"], k=d["k"], v=d["v"], context_lens=d["context_lens"])
    assert main(["run", "--inputs", str(good), "--report", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["context"] == 90 and rep["findings"] == [] and rep["metrics"]["vs_bf16"]["max_abs"] < 0.05
    assert {tuple(m["workgroup"]) for m in rep["mmacs"]} >= {(0, 0, 0), (1, 0, 1)}     # both seqs, both kv heads
    bad = tmp_path / "bad.npz"
    np.savez(bad, q=d["q"], v=d["v"])
    assert main(["run", "--inputs", str(bad)]) == 2
    assert "missing array(s) 'k'" in capsys.readouterr().err


@pytest.mark.parametrize("grouping", ["fragment", "contiguous"])
def test_batched_workgroups_match_one_at_a_time(grouping):
    """trace=False runs every workgroup side by side (launch batch); same outputs, same findings."""
    d, cache = small(300, heads=4, kv_heads=2, head_dim=64)
    one = run_decode(d["q"], cache, grouping=grouping, trace=True)            # batch 1
    many = run_decode(d["q"], cache, grouping=grouping, trace=False)          # all 4 workgroups at once
    assert np.array_equal(one.out, many.out) and np.array_equal(one.tmp_out, many.tmp_out, equal_nan=True)
    key = lambda f: (f.kind, f.workgroup, f.wave, f.lane, tuple(f.details.get("foreign", ())))
    assert sorted(map(key, one.run.findings)) == sorted(map(key, many.run.findings))
    tok = lambda r: sorted((m.workgroup, m.wave, tuple(m.tokens("A")), tuple(m.tokens("B"))) for m in r.mmacs())
    assert tok(one.run) == tok(many.run)


def test_provenance_batch_bounds_the_batch_with_provenance_only(monkeypatch):
    """DECODE_PROVENANCE_BATCH (memory) splits a provenance launch into batches of that many
    workgroups, with the outputs, findings and K sets of one batch; without provenance every
    workgroup still runs side by side."""
    import kernels_py.host.buffers as B
    d, cache = small(300, heads=4, kv_heads=2, head_dim=64)
    whole = run_decode(d["q"], cache, trace=False)
    monkeypatch.setattr(B, "DECODE_PROVENANCE_BATCH", 3)
    split = run_decode(d["q"], cache, trace=False)
    members = lambda r: sorted({len(rec.workgroups) for rec in r.records})
    assert members(whole.run) == [4] and members(split.run) == [1, 3]
    assert np.array_equal(whole.out, split.out) and np.array_equal(whole.tmp_out, split.tmp_out, equal_nan=True)
    key = lambda f: (f.kind, f.workgroup, f.wave, f.lane)
    assert sorted(map(key, whole.run.findings)) == sorted(map(key, split.run.findings))
    tok = lambda r: sorted((m.workgroup, m.wave, tuple(m.tokens("A")), tuple(m.tokens("B"))) for m in r.mmacs())
    assert tok(whole.run) == tok(split.run)
    off = run_decode(d["q"], cache, trace=False, provenance=False)
    assert members(off.run) == [4] and np.array_equal(off.out, whole.out)


def test_trace_batch_bounds_a_traced_launch_only(monkeypatch):
    """DECODE_TRACE_BATCH bounds a traced provenance launch (the trace keeps every batch's events)
    and leaves an untraced one whole; both give the same outputs and findings."""
    import kernels_py.host.buffers as B
    d, cache = small(300, heads=4, kv_heads=2, head_dim=64)
    monkeypatch.setattr(B, "DECODE_TRACE_BATCH", 3)
    plain = run_decode(d["q"], cache, trace=False)
    traced = run_decode(d["q"], cache, trace=True)
    members = lambda r: sorted({len(rec.workgroups) for rec in r.records})
    assert members(plain.run) == [4] and members(traced.run) == [1, 3]
    assert np.array_equal(plain.out, traced.out)
    key = lambda f: (f.kind, f.workgroup, f.wave, f.lane)
    assert sorted(map(key, plain.run.findings)) == sorted(map(key, traced.run.findings))


PROVENANCE_CHECKS = ["ab-kslot-mismatch", "accumulator-carried", "dequant-direction", "double-count",
                     "format-mismatch", "identity-mismatch", "kslot-unknown-origin", "scale-group-mismatch",
                     "store-mismatch", "token-coverage"]


def test_no_provenance_reports_which_checks_did_not_run(capsys):
    """Without provenance no provenance-based check runs, and the report says which
    did not (json: checks.not_run; text: one line, and "none" only among the checks that ran)."""
    import json
    from gfxsim.cli import main
    small_run = ["run", "paged_attention_decode", "--context", "100", "--heads", "4", "--head-dim", "64", "--quiet"]
    assert main(small_run + ["--no-provenance", "--report", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["findings"] == []
    assert rep["checks"] == {"not_run": PROVENANCE_CHECKS, "reason": "provenance off"}
    assert main(small_run + ["--report", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["findings"] == [] and rep["checks"]["not_run"] == []
    assert main(small_run + ["--no-provenance"]) == 0
    text = capsys.readouterr().out
    assert f"checks not run (provenance off): {', '.join(PROVENANCE_CHECKS)}" in text
    assert "findings: none among the checks that ran" in text
    assert main(small_run) == 0
    text = capsys.readouterr().out
    assert "checks not run" not in text and "findings: none" in text and "among the checks" not in text


def test_contiguous_decode_without_provenance_says_the_scale_check_did_not_run(capsys):
    import json
    from gfxsim.cli import main
    args = ["run", "--context", "130", "--heads", "4", "--head-dim", "64", "--grouping", "contiguous", "--quiet"]
    assert main(args + ["--no-provenance", "--report", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert not [f for f in rep["findings"] if f["kind"] == "scale-group-mismatch"]
    assert "scale-group-mismatch" in rep["checks"]["not_run"] and rep["checks"]["reason"] == "provenance off"
    assert main(args + ["--no-provenance"]) == 0
    text = capsys.readouterr().out
    assert "scale-group-mismatch" in text.split("checks not run (provenance off):")[1].splitlines()[0]
    # and with provenance the same kernel is found, with every check run
    kr = run_kernel("paged_attention_decode", context=130, heads=4, head_dim=64, grouping="contiguous")
    assert kr.report()["checks"]["not_run"] == [] and kr.run.findings_of("scale-group-mismatch")


def test_kernel_run_checks_in_python():
    off = run_kernel("paged_attention_decode", context=64, heads=2, head_dim=64, provenance=False)
    assert off.findings == [] and off.checks() == {"not_run": PROVENANCE_CHECKS, "reason": "provenance off"}
    assert all(sorted(r.checks_not_run) == PROVENANCE_CHECKS for r in off.runs)
    on = run_kernel("paged_attention_decode", context=64, heads=2, head_dim=64)
    assert on.checks() == {"not_run": [], "reason": None, "kslots_of_unknown_origin": 0}


def test_correct_decode_at_4k_without_provenance_has_no_false_coverage_findings():
    kr = run_kernel("paged_attention_decode", context=4096, provenance=False)
    assert kr.findings == [] and kr.report()["checks"]["not_run"] == PROVENANCE_CHECKS


def test_a_reduce_that_writes_each_head_into_the_next_heads_place_is_a_store_mismatch():
    """The harness tags its outputs (seq, head): a store of head h's value into head h+1's row is
    named element by element; the faithful reduce stays silent."""
    import inspect
    import kernels_py.paged_attention_decode as K
    from kernels_py.host.buffers import run_decode
    src = inspect.getsource(K.paged_attention_reduce)
    bad = src.replace("(out + seq_head * head_dim + d).store(acc / w_sum)",
                      "(out + (seq * num_heads + (head + 1) % num_heads) * head_dim + d).store(acc / w_sum)")
    assert bad != src
    ns = dict(K.__dict__)
    exec(bad.replace("def paged_attention_reduce", "def shifted_reduce"), ns)
    d = make_attention_inputs(seed=0, num_heads=4, num_kv_heads=1, head_dim=64, context_lens=[300])
    cache = make_cache(d["k"], d["v"], d["context_lens"], smooth_k=True)
    good = run_decode(d["q"], cache, trace=False)
    assert [f for r in good.runs for f in r.findings] == []
    res = run_decode(d["q"], cache, trace=False, reduce_kernel=ns["shifted_reduce"])
    found = [f for r in res.runs for f in r.findings]
    assert {f.kind for f in found} == {"store-mismatch"} and len(found) == 4
    f = min(found, key=lambda f: f.details["element"])
    assert f.details["element"] == [0, 0, 0] and (f.details["holds"], f.details["expected"]) == (3, 0)


def test_report_token_arrays_write_the_same_json():
    """The JSON writer takes the token table as numpy rows (no Python ints): the same JSON as the
    list report, whose lists stay what the Python API returns."""
    import json
    from kernels_py.cli import report_json
    kr = run_kernel("paged_attention_decode", context=300, heads=8, kv_heads=1)
    lists = kr.report()
    assert isinstance(lists["mmacs"][0]["a_tokens"], list) and lists["mmacs"][0]["b_tokens"]
    assert json.loads(report_json(kr.report(token_arrays=True))) == json.loads(report_json(lists))
    off = run_kernel("paged_attention_decode", context=300, heads=8, kv_heads=1, provenance=False)
    assert json.loads(report_json(off.report(token_arrays=True)))["mmacs"][0]["a_tokens"] == []


def test_report_json_rows_are_the_bytes_the_dicts_write():
    """gfxsim run --report json writes the token table as JSON text made record by record
    (report(json_rows=True)): byte for byte what orjson writes for the dicts, with and without
    tokens, for a batched (two kv heads) and a reduce launch."""
    from kernels_py.cli import report_json
    for prov in (True, False):
        kr = run_kernel("paged_attention_decode", context=600, heads=4, kv_heads=2, provenance=prov)
        assert report_json(kr.report(json_rows=True)) == report_json(kr.report(token_arrays=True))


def test_a_run_leaves_the_callers_inputs_whole():
    """The decode runner hands K and V to its references thread and drops them there (memory):
    it works on a copy of the inputs dict, so the caller's dict keeps every array."""
    d = make_attention_inputs(seed=1, num_seqs=1, num_heads=8, num_kv_heads=1, head_dim=64, context_lens=[200])
    keys = set(d)
    kr = run_kernel("paged_attention_decode", inputs=d, provenance=False)
    assert set(d) == keys and d["k"].shape[1] == 200
    assert kr.metrics()["vs_reference_int8"]["max_abs"] < 1e-3


@pytest.mark.parametrize("grouping", ["fragment", "contiguous"])
def test_remembered_operands_change_nothing(monkeypatch, grouping):
    """A wave remembers the gathered fields of its last matrix operands by content
    (matrix.OPERAND_MEMO): with the memory off, the same K sets, records and findings."""
    import gfxsim.machine.matrix as MX
    d, cache = small(300, heads=4, kv_heads=2, head_dim=64)
    kept = run_decode(d["q"], cache, grouping=grouping, trace=False)
    monkeypatch.setattr(MX, "OPERAND_MEMO", 0)
    fresh = run_decode(d["q"], cache, grouping=grouping, trace=False)
    key = lambda f: (f.kind, f.workgroup, f.wave, f.lane, f.message)
    assert sorted(map(key, kept.run.findings)) == sorted(map(key, fresh.run.findings))
    assert (grouping == "contiguous") == any(f.kind == "scale-group-mismatch" for f in kept.run.findings)
    tok = lambda r: [(m.workgroup, m.wave, tuple(m.tokens("A")), tuple(m.tokens("B"))) for m in r.mmacs()]
    assert tok(kept.run) == tok(fresh.run)
    for ra, rb in zip(kept.run.records, fresh.run.records):
        assert ra.a.keys() == rb.a.keys() and ra.ks_a.keys() == rb.ks_a.keys()
        assert all(ra.a[f][0] == rb.a[f][0] and np.array_equal(ra.a[f][1], rb.a[f][1]) for f in ra.a)


def test_seq_is_tagged_only_where_there_are_several_sequences_and_a_wrong_one_is_found():
    """The harness tags seq where the batch holds several sequences (buffers.seq_tag: one value
    everywhere can never disagree, and its planes cost ~9% of a 16K decode). With two sequences of
    one length, a decode that reads the other sequence's block table consumes the right tokens,
    heads and dims: only seq tells, as an ab-kslot-mismatch on seq at its QK instructions; the
    faithful kernel is silent."""
    from kernels_py.host.buffers import cache_buffers, decode_buffers
    from kernels_py.host.runs import load_kernel_fn
    from kernels_py.host.twins import prefill_buffers
    one, cache1 = small(90, heads=4, kv_heads=2, head_dim=64)
    assert "seq" not in cache_buffers(cache1)["k_cache"].tag_fields
    assert "seq" not in decode_buffers(one["q"], cache1).buffers["tmp_out"].tag_fields
    d = make_attention_inputs(seed=3, num_seqs=2, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[90, 90])
    cache = make_cache(d["k"], d["v"], d["context_lens"])
    bufs = decode_buffers(d["q"], cache).buffers
    assert all("seq" in bufs[b].tag_fields for b in ("q", "k_cache", "v_cache", "k_scale", "tmp_out", "out"))
    pre = prefill_buffers(d["q"][:, None], cache, 1).buffers
    assert "seq" in pre["q"].tag_fields and "seq" in pre["out"].tag_fields
    assert run_decode(d["q"], cache, trace=False).run.findings == []
    wrong = load_kernel_fn(f"{DEFECTIVE / 'wrong_sequence.py'}:paged_attention_decode")
    bad = run_decode(d["q"], cache, trace=False, kernel=wrong).run
    ks = bad.findings_of("ab-kslot-mismatch")
    assert ks and {f.details["field"] for f in ks} == {"seq"}
    assert {f.workgroup[0] for f in ks} == {0, 1}           # both sequences' workgroups
