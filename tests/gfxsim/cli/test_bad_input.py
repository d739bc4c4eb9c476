"""Options a command cannot honour are refused with one line naming them, never silently ignored or
silently overridden; a loaded token set describes every token the load brings."""
import subprocess
import sys

import pytest

from gfxsim.arch import get_instruction
from gfxsim.arch.kslots import tokens_per_instruction
from gfxsim.cli import main
from support import ROOT

INSN = ["gfx942", "v_mfma_i32_16x16x32_i8"]


def error_of(capsys, *argv):
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    return err[-1]


def test_token_sets_of_a_load_longer_than_one_fragment_consume_every_token(capsys):
    # 12 B per lane into 8-byte fragments: the last 4 B feed a second, partly filled instruction
    t = tokens_per_instruction(get_instruction(*INSN), "B", 12)
    assert t.shape == (2, 32)
    assert sorted(t[t >= 0].tolist()) == list(range(48))
    assert (t[1] >= 0).sum() == 16
    assert main(["layout", *INSN, "--token-sets", "12"]) == 0
    out = capsys.readouterr().out
    assert "48-token tile" in out and "never consumed" not in out


@pytest.mark.parametrize("argv, words", [
    (["gfx942", "--list", "--operand", "B"], ["--operand", "--list"]),
    ([*INSN, "--operand", "A", "--get-register", "13", "2", "--get-element", "0", "0"],
     ["--get-register", "--get-element"]),
    ([*INSN, "--detail", "--token-sets", "16"], ["--token-sets", "--detail"]),
    ([*INSN, "--operand", "A", "--get-element", "0", "0", "--block", "1"], ["--block", "--get-element"]),
    ([*INSN, "--operand", "A", "--block", "1"], ["--block"]),
    (["gfx942", "--view", "register"], ["--view", "instruction list"]),
    (["--operand", "A"], ["--operand", "default tables"]),
])
def test_layout_refuses_an_option_it_would_ignore(capsys, argv, words):
    line = error_of(capsys, "layout", *argv)
    assert line.startswith("gfxsim layout: error:")
    for w in words:
        assert w in line


def test_layout_options_that_are_used_still_work(capsys):
    assert main(["layout", *INSN, "--operand", "A", "--get-register", "13", "2", "--block", "0"]) == 0
    assert capsys.readouterr().out.strip() == "A[13][2] = v0{13}.[23:16]"


@pytest.mark.parametrize("command", [["run"], ["plot", "run"]])
def test_smooth_k_and_no_smooth_k_together_are_refused(capsys, command):
    with pytest.raises(SystemExit) as e:
        main([*command, "pv_int8", "--smooth-k", "--no-smooth-k"])
    assert e.value.code == 2
    assert "--no-smooth-k: not allowed with argument --smooth-k" in capsys.readouterr().err


def test_stdout_on_a_full_device_is_one_line():
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "gfxsim", "layout", *INSN], stdout=full, stderr=subprocess.PIPE,
                           text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == ["gfxsim layout: error: [Errno 28] No space left on device"]


def test_hip_build_dir_that_cannot_be_made_names_the_option(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    bad = tmp_path / "file" / "build"
    line = error_of(capsys, "hip", "build", "pv_int8", "--build-dir", str(bad))
    assert line == f"gfxsim hip: error: --build-dir {bad}: cannot create it: Not a directory"
