"""kernels_py's configuration records: RunConfig and the harnesses' geometry
records are frozen and keyword-only, validated once on creation, and the `gfxsim run` registry is
built in one place (host.runners) without the harnesses importing it back."""
import dataclasses
import subprocess
import sys

import pytest

from kernels_py.host.config import (DecodeGeometry, KVCacheGeometry, PrefillGeometry, RunConfig,
                                    StandaloneGeometry)


def test_defaults_are_the_cli_defaults_and_records_are_frozen_keyword_only():
    cfg = RunConfig()
    assert (cfg.arch, cfg.context, cfg.grouping, cfg.head_dim, cfg.partition_size) == ("gfx936", 4096, "fragment",
                                                                                        128, 256)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.context = 1
    with pytest.raises(TypeError):
        RunConfig("gfx942")                                 # keyword-only
    assert cfg.replace(context=300).context == 300 and cfg.context == 4096
    assert "kernel_fn" not in cfg.params() and "arch" not in cfg.params() and cfg.params()["formula"] == "derived"


@pytest.mark.parametrize("bad, message", [
    (dict(grouping="rows"), "--grouping must be fragment or contiguous"),
    (dict(formula="gfx90a"), "--formula must be one of"),
    (dict(head_dim=96), "--head-dim must be 64 or 128, got 96"),
    (dict(block_size=8), "--block-size must be 16 or 32, got 8"),
    (dict(partition_size=300), "--partition-size must be a multiple of 256"),
    (dict(context=0), "--context must be >= 1, got 0"),
    (dict(seed=-1), "--seed must be >= 0, got -1"),
    (dict(heads=8, kv_heads=3), r"--heads 8 / --kv-heads 3: the GQA ratio"),
    (dict(heads=32, kv_heads=1), "GQA ratio must be an integer 1..16"),
])
def test_run_config_names_the_bad_option(bad, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**bad)
    with pytest.raises(ValueError, match=message):
        RunConfig().replace(**bad)                          # a copy is validated again


def test_geometry_records_validate_and_give_the_kernel_keywords():
    geo = DecodeGeometry(num_heads=8, num_kv_heads=1, head_dim=128, block_size=16, max_blocks=4,
                         max_partitions=1, partition_size=256)
    assert geo.reduce().kwargs() == dict(num_heads=8, head_dim=128, max_partitions=1, partition_size=256)
    qk = StandaloneGeometry(context_len=70, head_dim=64, block_size=16, num_kv_heads=1, harness="qk_int8")
    assert qk.kwargs() == dict(context_len=70, head_dim=64, block_size=16, num_kv_heads=1)   # no harness name
    with pytest.raises(ValueError, match="qk_int8: head_dim 96 not in"):
        StandaloneGeometry(context_len=70, head_dim=96, block_size=16, num_kv_heads=1, harness="qk_int8")
    with pytest.raises(ValueError, match="int8_kv_cache: block_size 8 not in"):
        KVCacheGeometry(num_kv_heads=1, head_dim=64, block_size=8)
    with pytest.raises(ValueError, match="num_queries 9 must be 1..context_len 8"):
        PrefillGeometry(context_len=8, query_len=9, num_heads=1, num_kv_heads=1, head_dim=64, block_size=16)
    with pytest.raises(ValueError, match="GQA ratio"):
        dataclasses.replace(geo, num_heads=7, num_kv_heads=2)


def test_registry_is_built_in_one_place_without_a_cycle():
    from kernels_py.host.runners import KERNELS
    assert sorted(KERNELS) == ["int8_kv_cache", "paged_attention_decode", "prefix_prefill", "pv_bf16", "pv_int8",
                               "qk_int8", "sage_attention"]
    # the harnesses import neither the runners nor run_kernel
    code = ("import sys, kernels_py.host.twins, kernels_py.host.buffers; "
            "print(sorted(m for m in sys.modules if m in ('kernels_py.host.runners', 'kernels_py.host.runs')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_choices_are_literal_types_the_cli_offers():
    import typing

    from kernels_py.cli import add_run_options
    from kernels_py.host.config import FRONTENDS
    hints = typing.get_type_hints(RunConfig)
    assert typing.get_args(hints["grouping"]) == ("fragment", "contiguous")
    assert typing.get_args(hints["formula"]) == ("derived", "gfx936", "gfx942")
    assert typing.get_args(hints["frontend"]) == FRONTENDS == ("python", "asm")
    import argparse
    p = add_run_options(argparse.ArgumentParser())
    choices = {a.dest: a.choices for a in p._actions if a.choices}
    assert choices["grouping"] == ("fragment", "contiguous") and choices["frontend"] == FRONTENDS
    cfg = RunConfig(frontend="asm", trace=True)
    assert cfg.params() == RunConfig().params()          # how it runs: not a report param
    with pytest.raises(ValueError, match="--frontend must be python or asm, got 'rtl'"):
        RunConfig(frontend="rtl")
    with pytest.raises(ValueError, match="--frontend asm runs the compiled twin: it does not take --reduce-fn"):
        RunConfig(frontend="asm", reduce_fn="mine.py:reduce")
    with pytest.raises(ValueError, match="kernel_fn must be a function or 'FILE.py:FN', got int"):
        RunConfig(kernel_fn=3)


def test_gfxsim_run_builds_one_run_config_per_context_and_runners_return_a_record(monkeypatch, capsys):
    """The CLI's options become one RunConfig per context, which run_kernel hands to the runner as
    it is (trace and frontend inside it); the runner answers with a Ran record."""
    from gfxsim.cli import main
    from kernels_py.host import runners
    built, given = [], []
    post_init = RunConfig.__post_init__
    monkeypatch.setattr(RunConfig, "__post_init__", lambda self: (built.append(self), post_init(self))[1])
    qk = runners.KERNELS["qk_int8"]

    def spy(cfg, inputs, swap):
        given.append(cfg)
        ran = qk(cfg, inputs, swap)
        assert isinstance(ran, runners.Ran) and dataclasses.is_dataclass(ran)
        return ran
    monkeypatch.setitem(runners.KERNELS, "qk_int8", spy)
    assert main(["run", "qk_int8", "--context", "64", "100", "--quiet", "--trace", "--report", "json"]) == 0
    assert [c.context for c in built] == [64, 100]        # built once each, no second build
    assert given == built and all(g is b for g, b in zip(given, built))
    assert all(c.trace and c.frontend == "python" for c in given)
    with pytest.raises(dataclasses.FrozenInstanceError):
        runners.Ran(None, {}, [], 1).context = 2


@pytest.mark.parametrize("contexts", [["64"], ["64", "100"]])
def test_the_json_report_written_as_made_is_the_whole_reports_text(capsys, monkeypatch, contexts):
    """--report json writes each report's mmacs part by part (cli.write_json_report): the same text
    as the whole report (KernelRun.report(json_rows=True)) written at once."""
    import json

    from kernels_py import cli
    from gfxsim.cli import main
    made = []
    run_kernel = cli.run_kernel
    monkeypatch.setattr(cli, "run_kernel", lambda *a, **k: made.append(run_kernel(*a, **k)) or made[-1])
    assert main(["run", "qk_int8", "--context", *contexts, "--quiet", "--report", "json"]) == 0
    got = capsys.readouterr().out
    whole = [kr.report(json_rows=True) for kr in made]
    want = cli.report_json(whole[0] if len(whole) == 1 else whole) + "\n"
    assert got == want and len(made) == len(contexts)
    assert all(len(r["mmacs"]) for r in (json.loads(got) if len(contexts) > 1 else [json.loads(got)]))
