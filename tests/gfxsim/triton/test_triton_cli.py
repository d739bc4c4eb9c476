"""`gfxsim triton FILE.py:KERNEL`: the same launch as gfxsim.triton.run from the command line."""
import json
import sys

import numpy as np

from support.cli import cli
from support.triton_small import need_triton

need_triton()

from support import triton_small as ks  # noqa: E402

SPEC = f"{ks.__file__}:row_sum_unmasked"


def test_runs_a_kernel_with_made_and_saved_arrays_and_reports_the_overrun(capsys, tmp_path):
    x = np.arange(4 * 48, dtype=np.float32).reshape(4, 48)
    np.save(tmp_path / "x.npy", x)
    rc, out, err = cli(capsys, "triton", SPEC, "--grid", "4", "--arg", f"x_ptr={tmp_path / 'x.npy'}",
                       "--arg", "out_ptr=zeros:4:float32", "--arg", "cols=48", "--arg", "BLOCK=64",
                       "-o", tmp_path / "o", "--report", "json")
    assert rc == 0, err
    rep = json.loads(out)
    kinds = {f["kind"] for f in rep["findings"]}
    assert kinds == {"buffer-out-of-range"}
    assert all("triton_small.py:" in f["source"] for f in rep["findings"])
    assert rep["block"] == [256, 1, 1] and set(rep["outputs"]) == {"x_ptr", "out_ptr"}
    got = np.load(tmp_path / "o" / "out_ptr.npy")
    assert got.shape == (4,)


def test_the_masked_twin_is_silent_and_right(capsys, tmp_path):
    rc, out, err = cli(capsys, "triton", f"{ks.__file__}:row_sum", "--grid", "4", "--num-warps", "1",
                       "--arg", "x_ptr=arange:4x48:float32", "--arg", "out_ptr=zeros:4:float32", "--arg", "cols=48",
                       "--arg", "BLOCK=64", "-o", tmp_path)
    assert rc == 0, err
    assert "findings: none" in out and "block (64, 1, 1)" in out
    np.testing.assert_allclose(np.load(tmp_path / "out_ptr.npy"), np.arange(4 * 48).reshape(4, 48).sum(1))


def test_bad_specs_are_one_line(capsys, tmp_path):
    rc, _, err = cli(capsys, "triton", f"{ks.__file__}:nope", "--grid", "1")
    assert rc == 2 and "has no function 'nope'" in err and "row_sum" in err
    rc, _, err = cli(capsys, "triton", f"{ks.__file__}", "--grid", "1")
    assert rc == 2 and "expected FILE.py:KERNEL" in err
    rc, _, err = cli(capsys, "triton", SPEC, "--grid", "1", "--arg", "x_ptr=zeros:4y4:float32")
    assert rc == 2 and "shape" in err
    bad = tmp_path / "bad.py"
    bad.write_text("import triton\nraise RuntimeError('boom')\n")
    rc, _, err = cli(capsys, "triton", f"{bad}:k", "--grid", "1")
    assert rc == 2 and "failed to import: RuntimeError: boom" in err and "bad.py:2" in err


def test_without_triton_the_command_says_how_to_install_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)
    rc, _, err = cli(capsys, "triton", SPEC, "--grid", "1")
    assert rc == 2 and "pip install 'gfxsim[triton]'" in err and len(err.strip().splitlines()) == 1
