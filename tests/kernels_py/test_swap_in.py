"""Swap-in kernels: a user's copy of a kernel, run by every harness in place of
the project's: `gfxsim run KERNEL --kernel-fn FILE:FN`, run_pv(kernel=...), run_decode(kernel=...),
and the public host helpers that build each harness's buffers."""
import json
import re

import numpy as np
import pytest

from gfxsim.cli import main
from gfxsim.testing import assert_findings, assert_no_findings
from kernels_py.workloads.data import make_attention_inputs
from kernels_py.host.buffers import DecodeSetup, HostSetup, decode_buffers, make_cache, run_decode
from kernels_py.host.twins import pv_buffers, query_rows, run_pv, softmax_rows
from kernels_py.pv_int8 import pv_int8
from kernels_py.host.runs import load_kernel_fn

from support.copies import KP, copy_of  # noqa: F401


# the contiguous bug in a user's copy: the scale groups hard-coded to tokens 0-31 | 32-63
CONTIGUOUS = ("quantize_w(w, sw, W, w_lds, rowid, lane16id, grouping=grouping,",
              'quantize_w(w, sw, W, w_lds, rowid, lane16id, grouping="contiguous",')


@pytest.fixture(scope="module")
def user_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("user_kernels")
    files = {"good_pv": copy_of("pv_int8", "pv_int8", "my_pv_int8"),
             "bad_pv": copy_of("pv_int8", "pv_int8", "my_pv_int8", CONTIGUOUS),
             "good_decode": copy_of("paged_attention_decode", "paged_attention_decode", "my_decode"),
             "bad_decode": copy_of("paged_attention_decode", "paged_attention_decode", "my_decode",
                                   ("w_lds[warpid], rowid, lane16id, grouping=grouping,",
                                    'w_lds[warpid], rowid, lane16id, grouping="contiguous",'))}
    paths = {}
    for name, text in files.items():
        paths[name] = d / f"{name}.py"
        paths[name].write_text(text)
    return paths


def run_json(capsys, *argv):
    assert main(["run", *argv, "--report", "json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def test_gfxsim_run_pv_int8_with_a_defective_copy_reports_the_finding(user_files, capsys):
    small = ["--context", "256"]
    bad = run_json(capsys, "pv_int8", *small, "--kernel-fn", f"{user_files['bad_pv']}:my_pv_int8")
    kinds = {f["kind"] for f in bad["findings"]}
    assert kinds == {"scale-group-mismatch"}
    f = bad["findings"][0]
    assert f["kernel"] == "my_pv_int8" and "bad_pv.py:" in f["source"]
    assert "computed over tokens {0-31}" in f["message"] or "{0-31}" in f["message"], f["message"]
    assert bad["params"]["kernel_fn"].endswith("bad_pv.py:my_pv_int8")
    assert bad["metrics"]["vs_reference_int8"]["max_abs"] > 1e-2          # and the numbers show it
    good = run_json(capsys, "pv_int8", *small, "--kernel-fn", f"{user_files['good_pv']}:my_pv_int8")
    assert good["findings"] == []
    ours = run_json(capsys, "pv_int8", *small)
    assert good["metrics"] == ours["metrics"]                              # the faithful copy computes the same
    assert [m["b_tokens"] for m in good["mmacs"]] == [m["b_tokens"] for m in ours["mmacs"]]


def test_gfxsim_run_decode_with_a_swap_in_kernel(user_files, capsys):
    small = ["--context", "300", "--heads", "4"]
    bad = run_json(capsys, "paged_attention_decode", *small, "--kernel-fn", f"{user_files['bad_decode']}:my_decode")
    assert {f["kind"] for f in bad["findings"]} == {"scale-group-mismatch"}
    assert {f["kernel"] for f in bad["findings"]} == {"my_decode"}
    good = run_json(capsys, "paged_attention_decode", *small, "--kernel-fn", f"{user_files['good_decode']}:my_decode")
    assert good["findings"] == []
    assert good["metrics"] == run_json(capsys, "paged_attention_decode", *small)["metrics"]


@pytest.mark.parametrize("spec, message", [
    ("{d}/missing.py:f", r"--kernel-fn: .*missing.py: no such file"),
    ("{d}:f", r"--kernel-fn: .*: is a directory"),
    ("{good}", r"--kernel-fn '.*good_pv.py': expected FILE.py:FUNCTION"),
    ("{good}:nope", r"--kernel-fn: .*good_pv.py has no function 'nope'; it defines .*my_pv_int8"),
    ("{good}:W_STRIDE", r"--kernel-fn: .*good_pv.py:W_STRIDE is a int, not a function"),
    ("{broken}:f", r"--kernel-fn: .*broken.py failed to import: ModuleNotFoundError: No module named 'no_such_mod'"),
    ("{syntax}:f", r"--kernel-fn: .*syntax.py failed to import: SyntaxError"),
])
def test_kernel_fn_errors_are_one_line_naming_the_file_or_function(user_files, tmp_path, capsys, spec, message):
    (tmp_path / "broken.py").write_text("import no_such_mod\n")
    (tmp_path / "syntax.py").write_text("def f(w:\n")
    spec = spec.format(d=tmp_path, good=user_files["good_pv"], broken=tmp_path / "broken.py",
                       syntax=tmp_path / "syntax.py")
    with pytest.raises(ValueError, match=message):
        load_kernel_fn(spec)
    assert main(["run", "pv_int8", "--context", "64", "--quiet", "--kernel-fn", spec]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re.search(message, err), err


@pytest.fixture(scope="module")
def small_pv():
    d = make_attention_inputs(seed=0, num_seqs=1, num_heads=1, num_kv_heads=1, head_dim=64, context_lens=[100],
                              num_queries=16)
    cache = make_cache(d["k"], d["v"], d["context_lens"])
    return softmax_rows(query_rows(d["q"], 1), cache), cache


def test_run_pv_takes_a_kernel_function(user_files, small_pv):
    P, cache = small_pv
    ours, _ = run_pv("pv_int8", P, cache, trace=False)
    good, run = run_pv(load_kernel_fn(f"{user_files['good_pv']}:my_pv_int8"), P, cache, trace=False)
    assert np.array_equal(good, ours) and run.kernel == "my_pv_int8"
    assert_no_findings(run)
    _, bad = run_pv(load_kernel_fn(f"{user_files['bad_pv']}:my_pv_int8"), P, cache, trace=False)
    assert_findings(bad, {"scale-group-mismatch": None})
    # grouping reaches a swap-in that takes it; one that does not may not be given another grouping
    _, run = run_pv(load_kernel_fn(f"{user_files['good_pv']}:my_pv_int8"), P, cache, grouping="contiguous",
                    trace=False)
    assert_findings(run, {"scale-group-mismatch": None})
    def no_grouping(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, num_kv_heads=1,
                    formula="derived"):
        pv_int8(w, p, v_cache, v_scale, block_table, out, context_len=context_len, head_dim=head_dim,
                block_size=block_size, num_kv_heads=num_kv_heads, formula=formula)
    with pytest.raises(ValueError, match="takes no 'grouping' keyword: grouping='contiguous' does not apply"):
        run_pv(no_grouping, P, cache, grouping="contiguous")
    with pytest.raises(TypeError, match="kernel must be a kernel function"):
        run_decode(np.zeros((1, 1, 64)), cache, kernel="paged_attention_decode")


def test_pv_buffers_is_the_host_side_in_a_few_lines(small_pv):
    from gfxsim import launch
    P, cache = small_pv
    setup = pv_buffers(P, cache)
    assert isinstance(setup, HostSetup) and setup.grid == (1,) and setup.waves_per_group == 4
    assert [b.name for b in setup.args] == ["p", "v_cache", "v_scale", "block_tables", "out"]
    assert setup.kwargs == dict(context_len=100, head_dim=64, block_size=16, num_kv_heads=1)
    run = launch(pv_int8, grid=setup.grid, waves_per_group=setup.waves_per_group, args=setup.args,
                 kwargs=setup.kwargs, trace=False)
    ours, _ = run_pv("pv_int8", P, cache, trace=False)
    assert np.array_equal(setup.output(), ours) and np.array_equal(setup.buffers["out"].array, ours)
    assert_no_findings(run)
    with pytest.raises(ValueError, match=r"P must be \[16, context_len 100\]"):
        pv_buffers(P[:, :50], cache)


def test_decode_buffers_and_run_decode_with_kernel(user_files):
    d = make_attention_inputs(seed=1, num_seqs=2, num_heads=2, num_kv_heads=1, head_dim=64, context_lens=[300, 70])
    cache = make_cache(d["k"], d["v"], d["context_lens"])
    setup = decode_buffers(d["q"], cache, partition_size=256)
    assert isinstance(setup, DecodeSetup)
    assert setup.decode.grid == (2, 2, 1) and setup.decode.waves_per_group == 4 and setup.decode.batch == 4
    assert setup.reduce.grid == (2, 2) and setup.reduce.waves_per_group == 1
    assert setup.decode.kwargs["max_partitions"] == 2 and setup.buffers["tmp_out"].array.shape == (2, 2, 2, 64)
    assert [b.name for b in setup.reduce.args] == ["tmp_out", "exp_sums", "max_logits", "context_lens", "out"]
    ours = run_decode(d["q"], cache, trace=False)
    my_decode = load_kernel_fn(f"{user_files['good_decode']}:my_decode")
    calls = []

    def my_reduce(w, *args, **kw):
        from kernels_py.paged_attention_decode import paged_attention_reduce
        calls.append(w.wave_id)
        return paged_attention_reduce(w, *args, **kw)
    mine = run_decode(d["q"], cache, trace=False, kernel=my_decode, reduce_kernel=my_reduce)
    assert np.array_equal(mine.out, ours.out) and calls
    assert [r.kernel for r in mine.runs] == ["my_decode", "my_reduce"]
    assert_no_findings(mine)
    bad = run_decode(d["q"], cache, trace=False, kernel=load_kernel_fn(f"{user_files['bad_decode']}:my_decode"))
    assert_findings(bad, {"scale-group-mismatch": None})
