"""The CLI and the input paths fail with one clear line naming the option or file.

Each error case calls gfxsim.cli.main in-process (stderr captured) and checks the exit code, that
stderr is one line, and that it names the option or the file. Runs use small contexts.
"""
import argparse
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from gfxsim.cli import build_parser, walk_parsers
from support import ROOT
from support.cli import cli


def one_line_error(capsys, *argv, rc=2, names=()):
    code, out, err = cli(capsys, *argv)
    assert code == rc, (code, out, err)
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in names:
        assert str(n) in lines[0], (n, lines[0])
    return lines[0]


def strict_json(text):
    def refuse(c):
        raise ValueError(f"non-standard JSON constant {c}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def small_npz(tmp_path):
    from kernels_py.workloads.data import make_attention_inputs
    d = make_attention_inputs(seed=1, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=70)
    path = tmp_path / "in.npz"
    np.savez(path, q=d["q"], k=d["k"], v=d["v"])
    return path, d


# -- --context 1, memory --------------------------------------------------------------------

def test_context_1_runs(capsys):
    rc, out, err = cli(capsys, "run", "--context", "1", "--quiet", "--report", "json")
    assert rc == 0, err
    rep = strict_json(out)
    assert rep["context"] == 1
    assert rep["metrics"]["vs_fp32"]["max_abs"] < 0.01
    assert rep["findings"] == []


def test_context_1_and_2_generate_finite_data():
    from kernels_py.workloads.data import make_attention_inputs
    for ctx in (1, 2):
        for nq in (None, 1):
            d = make_attention_inputs(context_lens=ctx, num_queries=nq)
            assert np.isfinite(d["q"]).all() and np.isfinite(d["k"]).all()


def test_context_too_large_for_memory_is_refused_with_the_estimate(capsys):
    t = time.time()
    line = one_line_error(capsys, "run", "--context", 10 ** 9, "--quiet", names=("--context 1000000000", "needs about",
                                                                                  "MemAvailable"))
    assert "TiB" in line
    assert time.time() - t < 5            # refused up front, nothing generated
    one_line_error(capsys, "plot", "run", "--what", "errors", "--context", 10 ** 9, "-o", "x.png", "--quiet",
                   names=("--context 1000000000", "needs about"))


def test_memory_estimate_against_a_given_budget():
    from kernels_py.cli import check_memory, memory_estimate
    args = argparse.Namespace(context=[4096], kv_heads=1, head_dim=128, provenance=True, inputs=None)
    check_memory(args, available=memory_estimate(4096, 1, 128))            # fits exactly
    with pytest.raises(ValueError, match="--context 4096: the run needs about"):
        check_memory(args, available=memory_estimate(4096, 1, 128) - 1)


# -- --inputs --------------------------------------------------------------------------------

def test_inputs_npy_non_zip_directory_missing(capsys, tmp_path):
    npy = tmp_path / "a.npy"
    np.save(npy, np.zeros(3))
    txt = tmp_path / "a.npz"
    txt.write_text("hello")
    d = tmp_path / "dir.npz"
    d.mkdir()
    for path, what in ((npy, ".npy"), (txt, "not a zip"), (d, "directory"), (tmp_path / "no.npz", "no such file")):
        line = one_line_error(capsys, "run", "--inputs", path, "--quiet", names=(str(path), what))
        assert line.startswith("gfxsim run: error:")


def test_inputs_refuse_the_shape_flags_they_would_ignore(capsys, small_npz):
    path, _ = small_npz
    for flag, value in (("--heads", 8), ("--kv-heads", 1), ("--head-dim", 128), ("--context", 4096),
                        ("--heads", 4)):                   # even a value equal to the file's
        one_line_error(capsys, "run", "--inputs", path, flag, value, "--quiet", names=(flag, str(path)))


def test_inputs_record_the_files_shapes(capsys, small_npz):
    path, d = small_npz
    rc, out, err = cli(capsys, "run", "--inputs", path, "--quiet", "--report", "json")
    assert rc == 0, err
    rep = strict_json(out)
    p = rep["params"]
    assert (p["heads"], p["kv_heads"], p["head_dim"], p["num_seqs"], p["context_lens"]) == (4, 2, 64, 1, [70])
    assert p["inputs"] == str(path)
    assert rep["context"] == 70


def test_all_zero_v_gives_strict_json(capsys, tmp_path, small_npz):
    _, d = small_npz
    path = tmp_path / "zero_v.npz"
    np.savez(path, q=d["q"], k=d["k"], v=np.zeros_like(d["v"]))
    rc, out, err = cli(capsys, "run", "--inputs", path, "--quiet", "--report", "json")
    assert rc == 0, err
    assert "NaN" not in out and "Infinity" not in out
    rep = strict_json(out)
    for m in rep["metrics"].values():
        for v in m.values():
            assert v is None or np.isfinite(v)
    assert "RuntimeWarning" not in err


def test_block_table_errors_name_sequence_and_entry(tmp_path):
    from kernels_py.workloads.inputs import InputError, load_inputs
    q = np.zeros((2, 4, 64), np.float32)
    k = np.zeros((2, 40, 1, 64), np.float32)
    cases = {"negative": ([[0, 1, 2], [3, -1, 5]], ("sequence 1 entry 1", "-1")),
             "reused": ([[0, 1, 2], [3, 1, 5]], ("sequence 1 entry 1", "block 1", "sequence 0 entry 1")),
             "too few": ([[0, 1], [2, 3]], ("sequence 0", "needs 3", "block_size 16"))}
    for name, (bt, needles) in cases.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, q=q, k=k, v=k, block_tables=np.array(bt))
        with pytest.raises(InputError) as e:
            load_inputs(path, block_size=16)
        for n in needles:
            assert n in str(e.value), (name, str(e.value))
    # at block size 32 the first table reads entries 0..1 only, which are valid
    np.savez(tmp_path / "ok32.npz", q=q, k=k, v=k, block_tables=np.array([[0, 1, -1], [3, 4, -1]]))
    load_inputs(tmp_path / "ok32.npz", block_size=32)


# -- -o checked before the simulation --------------------------------------------------------

def test_output_checked_before_the_run(capsys, tmp_path):
    missing = tmp_path / "nowhere" / "x.png"
    t = time.time()
    one_line_error(capsys, "plot", "run", "--what", "errors", "--context", "4096", "-o", missing, "--quiet",
                   names=("-o", str(missing), "does not exist"))
    one_line_error(capsys, "plot", "layout", "gfx936", "v_mmac_i32_16x16x32_i8", "-o", missing,
                   names=("-o", "does not exist"))
    d = tmp_path / "d.png"
    d.mkdir()
    one_line_error(capsys, "plot", "layout", "gfx936", "v_mmac_i32_16x16x32_i8", "-o", d, names=("is a directory",))
    one_line_error(capsys, "plot", "run", "--what", "errors", "-o", "/proc/gfxsim_test.png", "--quiet",
                   names=("-o /proc/gfxsim_test.png", "cannot write"))
    assert time.time() - t < 10                  # no 4K-token simulation ran
    assert not list(tmp_path.glob("*.png")) or d.is_dir()


# -- hip inspect of bad .s files ---------------------------------------------------------------

@pytest.mark.parametrize("name,content,what", [
    ("empty.s", b"", "empty"),
    ("garbage.s", b"hello world\nthis is not assembly\n", "no kernel entry point"),
    ("binary.s", bytes(range(256)) * 4, "not UTF-8"),
    ("latin1.s", "; caf\xe9\n".encode("latin-1"), "not UTF-8"),
    ("truncated.s", b"\t.amdgcn_target \"amdgcn-amd-amdhsa--gfx942\"\n\t.amdgpu_metadata\n---\namdhsa.kernels:\n",
     "truncated"),
    ("truncated_desc.s", b"\t.amdhsa_kernel k\n\t\t.amdhsa_next_free_vgpr 8\n", "truncated"),
    ("bad_yaml.s", b"\t.amdgpu_metadata\n: : [\n\t.end_amdgpu_metadata\n", "YAML"),
])
def test_hip_inspect_bad_assembly(capsys, tmp_path, name, content, what):
    path = tmp_path / name
    path.write_bytes(content)
    one_line_error(capsys, "hip", "inspect", path, names=(str(path), what))


# -- layout options --------------------------------------------------------------------------

MN = ("gfx942", "v_mfma_i32_16x16x32_i8")


@pytest.mark.parametrize("n", [0, 1000, 3, -4])
def test_token_sets_out_of_range(capsys, n):
    one_line_error(capsys, "layout", "gfx936", "v_mmac_i32_16x16x32_i8", "--token-sets", n,
                   names=("--token-sets", str(n)))


def test_layout_list_needs_an_arch(capsys):
    one_line_error(capsys, "layout", "--list", names=("--list", "ARCH"))
    one_line_error(capsys, "layout", "--get-register", 1, 1, "--operand", "A", names=("--get-register",))
    one_line_error(capsys, "layout", "gfx936", "--token-sets", 16, names=("--token-sets", "INSTRUCTION"))
    one_line_error(capsys, "layout", "gfx942", "--detail", names=("--detail", "INSTRUCTION"))


def test_get_register_needs_operand(capsys):
    one_line_error(capsys, "layout", *MN, "--get-register", 1, 1, names=("--get-register", "--operand"))


def test_seed_negative(capsys):
    one_line_error(capsys, "run", "--seed", -1, "--quiet", names=("--seed", "-1"))
    one_line_error(capsys, "plot", "run", "--what", "errors", "--seed", -1, "-o", "x.png", "--quiet",
                   names=("--seed",))


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv", "json"])
def test_get_register_and_element_honour_format(capsys, fmt):
    rc, out, _ = cli(capsys, "layout", *MN, "--operand", "B", "--get-register", 13, 2, "--format", fmt)
    assert rc == 0
    rc2, out2, _ = cli(capsys, "layout", *MN, "--operand", "B", "--get-element", 18, 1, "--format", fmt)
    assert rc2 == 0
    if fmt == "json":
        assert strict_json(out)["register"] == "v1{18}.[15:8]"
        assert [e["row"] for e in strict_json(out2)["elements"]] == [12, 13, 14, 15]
    elif fmt == "csv":
        assert out.splitlines()[0] == "element,lane,reg,elem,register"
        assert "B[13][2],18,1,1,v1{18}.[15:8]" in out
        assert out2.splitlines()[0] == "register,element,row,col,block" and len(out2.splitlines()) == 5
    elif fmt == "markdown":
        assert out.startswith("| element |") and "|---|" in out
        assert out2.startswith("| register |") and "B[13][2]" in out2
    else:
        assert out.strip() == "B[13][2] = v1{18}.[15:8]"
        assert "v1{18}.[15:8] = B[13][2]" in out2


def test_list_json_gives_shapes_types_cycles(capsys):
    rc, out, _ = cli(capsys, "layout", "gfx942", "--list", "--format", "json")
    assert rc == 0
    ins = {i["instruction"]: i for i in strict_json(out)["instructions"]}
    i = ins["v_mfma_i32_16x16x32_i8"]
    assert (i["M"], i["N"], i["K"], i["blocks"], i["a_type"], i["b_type"], i["cd_type"]) == (16, 16, 32, 1, "i8",
                                                                                              "i8", "i32")
    assert "cycles" in i and all({"M", "N", "K", "cycles", "cd_type"} <= set(e) for e in ins.values())


# -- events print, Ctrl-C, --version, help -------------------------------------------------------

def test_every_trace_and_replay_event_prints():
    from kernels_py.host.runs import run_kernel
    kr = run_kernel("paged_attention_decode", context=70, trace=True, heads=4, kv_heads=1, head_dim=64)
    n = 0
    for r in kr.runs:
        for e in r.events:
            assert str(e) and repr(e)
            n += 1
        st = r.replay()
        while st.current is not None:
            assert str(st.current) and repr(st.current)
            st.step()
        for m in r.mmacs():
            assert str(m) and repr(m)
        for f in r.findings:
            assert str(f) and repr(f)
    assert n > 1000


def test_keyboard_interrupt_is_one_line(capsys, monkeypatch):
    import gfxsim.cli.layout_cmd as layout_cmd

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(layout_cmd, "run", interrupted)
    line = one_line_error(capsys, "layout", rc=130)
    assert line == "gfxsim layout: interrupted"


def test_sigint_during_a_run_is_one_line():
    # the users' shape at 64K with provenance (~10 s on the 2-core VM), so the interrupt lands mid-run;
    # SIGINT as a terminal's Ctrl-C finds it: a shell's background job (CI started with `&`) hands its
    # children SIGINT ignored, and Python then installs no KeyboardInterrupt handler at all
    p = subprocess.Popen([sys.executable, "-m", "gfxsim", "run", "--context", "65536", "--heads", "64", "--kv-heads", "8",
                          "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(2)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, err)
    assert err.strip() == "gfxsim run: interrupted"


def test_version(capsys):
    from gfxsim import __version__
    rc, out, _ = cli(capsys, "--version")
    assert rc == 0 and out.strip() == f"gfxsim {__version__}"


def _flag(a):
    return isinstance(a, (argparse._StoreConstAction, argparse._CountAction))


def test_every_option_has_help_showing_its_default():
    parser = build_parser()
    checked = 0
    for p in walk_parsers(parser):
        fmt = p._get_formatter()
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction)):
                continue
            where = f"{p.prog} {'/'.join(a.option_strings) or a.dest}"
            assert a.help and a.help.strip(), f"{where}: no help text"
            shown = fmt._expand_help(a)
            if a.default is not None and not _flag(a) and a.default is not argparse.SUPPRESS:
                d = a.default
                want = " ".join(map(str, d)) if isinstance(d, (list, tuple)) else str(d)
                assert want in shown and "default" in shown, f"{where}: help {shown!r} does not show default {d!r}"
            checked += 1
    assert checked > 40
    text = subprocess.run([sys.executable, "-m", "gfxsim", "run", "--help"], capture_output=True, text=True).stdout
    text = " ".join(text.split())
    assert "(default: 4096)" in text and "(default: gfx936)" in text


# -- docs/img regenerated by the README's own commands --------------------------------------------

def _make_images_module():
    import importlib.util
    path = ROOT / "docs" / "make_images.py"
    spec = importlib.util.spec_from_file_location("make_images", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_make_images_uses_the_readme_commands():
    mi = _make_images_module()
    cmds = mi.readme_commands()
    assert cmds["gfx936_vs_gfx942_D.png"] == ("gfxsim plot layout gfx936 v_mmac_i32_16x16x32_i8 --operand D "
                                              "--compare gfx942 v_mfma_i32_16x16x32_i8 -o docs/img/gfx936_vs_gfx942_D.png")
    assert cmds["pv_scale_groups_contiguous.png"] == ("gfxsim plot run --context 300 --grouping contiguous --what "
                                                      "scales --instructions 4 -o docs/img/pv_scale_groups_contiguous.png")
    from pathlib import Path
    committed = {p.name for p in (Path(mi.ROOT) / "docs" / "img").glob("*.png")}
    assert committed <= set(cmds), f"pictures in docs/img without a README command: {committed - set(cmds)}"
    with pytest.raises(SystemExit, match="embedded without"):
        mi.readme_commands("![x](docs/img/orphan.png)\n")


def test_make_images_into_a_temp_dir(tmp_path):
    script = _make_images_module().__file__
    r = subprocess.run([sys.executable, script, "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["gfx936_vs_gfx942_D.png", "pv_scale_groups_contiguous.png"]
    for p in tmp_path.iterdir():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
