"""Swap-in kernels through every harness: run_qk_int8, run_prefill and
run_int8_kv_cache take kernel=; `gfxsim run KERNEL --kernel-fn` for each kernel; the decode's reduce
kernel from the CLI (--reduce-fn); `gfxsim plot run ... --kernel-fn`. Each swap-in is a user's copy
of the project's kernel with one mistake, reported by the harness's tags, and the faithful copy
computes the same numbers with no findings."""
import json
import re

import numpy as np
import pytest

from gfxsim.cli import main
from gfxsim.testing import assert_no_findings
from kernels_py.workloads.data import make_attention_inputs
from kernels_py.host.buffers import make_cache
from kernels_py.host.twins import query_rows, run_int8_kv_cache, run_prefill, run_qk_int8
from kernels_py.host.runs import load_kernel_fn

from support.copies import copy_of

# (module, function, the user's name, the mistake): each stores into another element's place
MISTAKES = {
    "qk_int8": ("qk_int8", "qk_int8", "my_qk",
                ("(s_out + qrow[i] * context_len + t[i])", "(s_out + (qrow[i] + 1) % 16 * context_len + t[i])")),
    "prefix_prefill": ("prefix_prefill", "prefix_prefill", "my_prefill",
                       ("(out + (qi[i] * num_heads + h) * head_dim",
                        "(out + (qi[i] * num_heads + (h + 1) % num_heads) * head_dim")),
    "int8_kv_cache": ("int8_kv_cache", "int8_kv_cache", "my_kv_cache",
                      ("v_addr = d * block_size + (head + off)", "v_addr = ((d + 1) % head_dim) * block_size + (head + off)")),
    "paged_attention_reduce": ("paged_attention_decode", "paged_attention_reduce", "my_reduce",
                               ("(out + seq_head * head_dim + d).store(acc / w_sum)",
                                "(out + (seq * num_heads + (head + 1) % num_heads) * head_dim + d).store(acc / w_sum)")),
}
# the field each mistake gets wrong, and the buffer
WRONG = {"qk_int8": ("s_out", "row"), "prefix_prefill": ("out", "head"), "int8_kv_cache": ("v_cache", "dim"),
         "paged_attention_reduce": ("out", "head")}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("user_harness_kernels")
    out = {}
    for name, (module, fn, new, mistake) in MISTAKES.items():
        for kind, m in (("good", None), ("bad", mistake)):
            path = d / f"{kind}_{name}.py"
            path.write_text(copy_of(module, fn, new, m))
            out[kind, name] = f"{path}:{new}"
    marker = d / "called.txt"
    (d / "marked.py").write_text(
        "from kernels_py.pv_int8 import pv_int8\n"
        f"MARKER = {str(marker)!r}\n"
        "def marked(w, *args, **kw):\n"
        "    with open(MARKER, 'a') as f:\n"
        "        f.write('x')\n"
        "    return pv_int8(w, *args, **kw)\n")
    out["marked"], out["marker"] = f"{d / 'marked.py'}:marked", marker
    return out


def _store_mismatch_on(found, buffer, field):
    assert found and {f.kind if hasattr(f, "kind") else f["kind"] for f in found} == {"store-mismatch"}
    details = [f.details if hasattr(f, "details") else f["details"] for f in found]
    assert {d["buffer"] for d in details} == {buffer} and field in {d["field"] for d in details}


@pytest.fixture(scope="module")
def small():
    d = make_attention_inputs(seed=0, num_seqs=1, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[100],
                              num_queries=8)
    return d, make_cache(d["k"], d["v"], d["context_lens"])


def test_run_qk_int8_takes_a_kernel(files, small):
    d, cache = small
    rows = query_rows(d["q"], cache.num_kv_heads)
    ours, _ = run_qk_int8(rows, cache, trace=False)
    good, run = run_qk_int8(rows, cache, trace=False, kernel=load_kernel_fn(files["good", "qk_int8"]))
    assert np.array_equal(good, ours) and run.kernel == "my_qk"
    assert_no_findings(run)
    _, bad = run_qk_int8(rows, cache, trace=False, kernel=load_kernel_fn(files["bad", "qk_int8"]))
    _store_mismatch_on(bad.findings, *WRONG["qk_int8"])


def test_run_prefill_takes_a_kernel(files, small):
    d, cache = small
    ours, _ = run_prefill(d["q"], cache, trace=False)
    good, runs = run_prefill(d["q"], cache, trace=False, kernel=load_kernel_fn(files["good", "prefix_prefill"]))
    assert np.array_equal(good, ours) and [r.kernel for r in runs] == ["my_prefill"]
    assert_no_findings(runs)
    _, bad = run_prefill(d["q"], cache, trace=False, kernel=load_kernel_fn(files["bad", "prefix_prefill"]))
    _store_mismatch_on(bad[0].findings, *WRONG["prefix_prefill"])


def test_run_int8_kv_cache_takes_a_kernel(files, small):
    d, _ = small
    kv = np.ascontiguousarray(d["k"][0])                     # [tokens, kv heads, head_dim]
    slots = np.arange(len(kv))[::-1].copy()
    kw = dict(num_blocks=8, block_size=16, trace=False)
    ours, _ = run_int8_kv_cache(kv, kv, slots, **kw)
    good, run = run_int8_kv_cache(kv, kv, slots, kernel=load_kernel_fn(files["good", "int8_kv_cache"]), **kw)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(good, ours)) and run.kernel == "my_kv_cache"
    assert_no_findings(run)
    _, bad = run_int8_kv_cache(kv, kv, slots, kernel=load_kernel_fn(files["bad", "int8_kv_cache"]), **kw)
    _store_mismatch_on(bad.findings, *WRONG["int8_kv_cache"])
    with pytest.raises(TypeError, match="kernel must be a kernel function"):
        run_int8_kv_cache(kv, kv, slots, kernel="int8_kv_cache", **kw)


def run_json(capsys, *argv):
    assert main(["run", *argv, "--report", "json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


SMALL = {"qk_int8": ["--context", "100"], "prefix_prefill": ["--context", "100", "--heads", "2"],
         "int8_kv_cache": ["--context", "40", "--heads", "2", "--kv-heads", "2"]}


@pytest.mark.parametrize("kernel", sorted(SMALL))
def test_gfxsim_run_kernel_fn_for_each_kernel(files, capsys, kernel):
    small = SMALL[kernel]
    bad = run_json(capsys, kernel, *small, "--kernel-fn", files["bad", kernel])
    _store_mismatch_on(bad["findings"], *WRONG[kernel])
    assert bad["params"]["kernel_fn"] == files["bad", kernel]
    good = run_json(capsys, kernel, *small, "--kernel-fn", files["good", kernel])
    assert good["findings"] == []
    assert good["metrics"] == run_json(capsys, kernel, *small)["metrics"]


def test_gfxsim_run_reduce_fn_swaps_the_decodes_second_kernel(files, capsys):
    small = ["--context", "300", "--heads", "4"]
    bad = run_json(capsys, "paged_attention_decode", *small, "--reduce-fn", files["bad", "paged_attention_reduce"])
    _store_mismatch_on(bad["findings"], *WRONG["paged_attention_reduce"])
    assert {f["kernel"] for f in bad["findings"]} == {"my_reduce"}
    assert bad["params"]["reduce_fn"] == files["bad", "paged_attention_reduce"]
    good = run_json(capsys, "paged_attention_decode", *small, "--reduce-fn", files["good", "paged_attention_reduce"])
    assert good["findings"] == []
    assert good["metrics"] == run_json(capsys, "paged_attention_decode", *small)["metrics"]


@pytest.mark.parametrize("argv, message", [
    (["pv_int8", "--reduce-fn", "{good}"], r"--reduce-fn: pv_int8 has no second kernel to swap \(only "
                                           r"paged_attention_decode \(paged_attention_reduce\)\)"),
    (["paged_attention_decode", "--reduce-fn", "{missing}"], r"--reduce-fn: .*missing.py: no such file"),
    (["paged_attention_decode", "--reduce-fn", "nocolon.py"], r"--reduce-fn 'nocolon.py': expected FILE.py:FUNCTION"),
])
def test_reduce_fn_errors_are_one_line(files, tmp_path, capsys, argv, message):
    argv = [a.format(good=files["good", "paged_attention_reduce"], missing=tmp_path / "missing.py:f") for a in argv]
    assert main(["run", *argv, "--context", "64", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re.search(message, err), err


def test_plot_run_takes_kernel_fn_and_reduce_fn(files, tmp_path, capsys):
    marker = files["marker"]
    out = tmp_path / "tokens.png"
    assert main(["plot", "run", "pv_int8", "--context", "100", "--what", "tokens", "--quiet",
                 "--kernel-fn", files["marked"], "-o", str(out)]) == 0
    assert out.stat().st_size > 0 and marker.read_text() == "xxxx"     # the user's kernel ran, once per wave
    out = tmp_path / "errors.png"
    assert main(["plot", "run", "paged_attention_decode", "--context", "300", "--heads", "4", "--what", "errors",
                 "--quiet", "--reduce-fn", files["bad", "paged_attention_reduce"], "-o", str(out)]) == 0
    assert out.stat().st_size > 0
    capsys.readouterr()
    assert main(["plot", "run", "pv_int8", "--context", "64", "--what", "errors", "--quiet",
                 "--reduce-fn", files["good", "paged_attention_reduce"], "-o", str(tmp_path / "x.png")]) == 2
    assert "--reduce-fn: pv_int8 has no second kernel" in capsys.readouterr().err
