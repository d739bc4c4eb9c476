"""`gfxsim hip run` and `gfxsim hip check` on your own HIP source, from a plain folder."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import ROOT, need_toolchain

from gfxsim.cli import main
from gfxsim.cli.hip_cmd import arg_value

SOURCES = ROOT / "tests" / "gfxsim" / "hip" / "sources"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    need_toolchain("gfx942")
    monkeypatch.setenv("GFXSIM_CACHE_DIR", str(tmp_path / "cache"))
    d = tmp_path / "work"
    d.mkdir()
    for f in SOURCES.glob("*.hip"):
        shutil.copy(f, d)
    monkeypatch.chdir(d)
    return d


def test_run_writes_the_outputs_and_the_report(folder):
    x = np.arange(300, dtype=np.float32)
    np.save("x.npy", x)
    np.save("out.npy", np.zeros(300, np.float32))
    # the console script, as a user types it (its own process, the folder as working directory)
    r = subprocess.run([sys.executable, "-m", "gfxsim", "hip", "run", "scale.hip", "--kernel", "scale", "--grid", "2",
                        "--block", "64", "--arg", "out=out.npy", "--arg", "x=x.npy", "--arg", "s=0.5",
                        "--arg", "count=300", "-o", "result"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert "scale (_Z5scalePfPKffi) from scale.hip on gfx942" in r.stdout and "findings: none" in r.stdout
    assert np.array_equal(np.load("result/out.npy"), x * 0.5)
    assert not np.load("out.npy").any()                      # the input file is not written
    rep = json.loads(Path("result/report.json").read_text())
    assert rep["kernel"] == "_Z5scalePfPKffi" and rep["grid"] == [2, 1, 1] and rep["findings"] == []
    assert rep["outputs"]["out"] == {"shape": [300], "dtype": "float32"} and rep["lane_instructions"] > 0


def _pv_files():
    rng = np.random.default_rng(0)
    np.save("p.npy", rng.integers(-20, 20, (16, 64), dtype=np.int8))
    np.save("v.npy", rng.integers(-20, 20, (16, 64), dtype=np.int8))
    np.save("s.npy", rng.uniform(0.5, 2, 64).astype(np.float32))
    np.save("o.npy", np.zeros(256, np.float32))
    return ["pv_scaled.hip", "--kernel", "pv_scaled", "--grid", "1", "--block", "64", "--arg", "p=p.npy",
            "--arg", "v=v.npy", "--arg", "s_tok=s.npy", "--arg", "out=o.npy", "--tag", "p:1=token",
            "--tag", "v:1=token", "--tag", "s_tok:0=token", "--report", "json"]


@pytest.mark.parametrize("arch", ["gfx942", "gfx936"])
def test_tags_give_token_findings_in_the_report(folder, capsys, arch):
    args = ["hip", "run", *_pv_files(), "--arch", arch]
    assert main([*args, "-D", "CONTIGUOUS"]) == 0
    bad = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    good = json.loads(capsys.readouterr().out)
    assert {f["kind"] for f in bad["findings"]} == {"scale-group-mismatch"} and good["findings"] == []
    op = "v_mmac_i32_16x16x32_i8" if arch == "gfx936" else "v_mfma_i32_16x16x32_i8"
    for rep in (bad, good):
        assert [m["instruction"] for m in rep["mmacs"]] == [op, op]
        assert sorted(sorted(set(m["b_tokens"])) for m in rep["mmacs"]) == [
            [t for t in range(64) if (t % 16) // 8 == j] for j in (0, 1)]


def test_the_text_report_names_the_first_tagged_instructions(folder, capsys):
    """The text report makes only the events it shows: its lines are those of every event made
    and filtered (the two tagged PV instructions, their token sets), and none without provenance."""
    args = ["hip", "run", *[a for a in _pv_files() if a not in ("--report", "json")], "--arch", "gfx942"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "  2 matrix instructions" in text
    lines = [l for l in text.splitlines() if l.startswith("    #")]
    assert len(lines) == 2 and all("v_mfma_i32_16x16x32_i8" in l and "B tokens {" in l for l in lines)
    assert main([*args, "--no-provenance"]) == 0
    off = capsys.readouterr().out
    assert "  2 matrix instructions" in off and not [l for l in off.splitlines() if l.startswith("    #")]


def test_check_lists_the_problems_and_exits_1(folder, capsys):
    assert main(["hip", "check", "scale.hip"]) == 0
    assert "can run on the asm front end for gfx942" in capsys.readouterr().out
    from gfxsim.hip.source import compile_source
    text = compile_source("scale.hip").asm.read_text()
    Path("bad.s").write_text(text.replace("\ts_endpgm", "\tv_qsad_pk_u16_u8 v[0:1], v[2:3], v4, v[6:7]\n"
                                          "\tv_mfma_f32_32x32x8_f16 v[0:15], v[0:1], v[2:3], 0\n\ts_endpgm", 1)
                             .replace(".amdhsa_system_sgpr_workgroup_info 0", ".amdhsa_system_sgpr_workgroup_info 1"))
    assert main(["hip", "check", "bad.s", "--arch", "gfx936"]) == 1
    out = capsys.readouterr().out
    assert "_Z5scalePfPKffi: 3 problem(s) for gfx936" in out
    assert "instruction line" in out and "v_qsad_pk_u16_u8 (no semantics)" in out
    assert "v_mfma_f32_32x32x8_f16 has no record on gfx936" in out and "workgroup info" in out


def test_inspect_takes_your_own_source(folder, capsys):
    assert main(["hip", "inspect", "pv_scaled.hip", "--arch", "gfx936"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("pv_scaled.hip for gfx936: ") and "gfx936 stand-in" in out
    assert "-D__gfx936__=1" in out and "matrix: 2 v_mfma_i32_16x16x32_i8" in out


def test_usage_errors_are_one_line(folder, capsys):
    assert main(["hip", "run", "scale.hip", "--kernel", "scale", "--grid", "0", "--block", "64"]) == 2
    assert "--grid '0': expected 1 to 3 positive integers" in capsys.readouterr().err
    assert main(["hip", "run", "scale.hip", "--kernel", "nope", "--grid", "1", "--block", "64"]) == 2
    assert "has no kernel 'nope'; its kernels: scale (_Z5scalePfPKffi)" in capsys.readouterr().err
    assert main(["hip", "run", "scale.hip", "--kernel", "scale", "--grid", "1", "--block", "64",
                 "--tag", "out=token"]) == 2
    assert "expected NAME:AXIS=FIELD" in capsys.readouterr().err
    Path("fp8.hip").write_text("#include <hip/hip_runtime.h>\n#include <hip/hip_fp8.h>\n"
                               "__global__ void k(float* o) {}\n")
    assert main(["hip", "check", "fp8.hip"]) == 2
    assert "fp8.hip includes <hip/hip_fp8.h>" in capsys.readouterr().err


def test_arg_values():
    assert arg_value("a", "null") is None
    assert arg_value("a", "7") == 7 and isinstance(arg_value("a", "0x10"), int)
    assert arg_value("a", "1.5") == 1.5 and isinstance(arg_value("a", "1e-3"), float)


def _readme_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Your own HIP kernel")
    return text[start:text.index("\n## ", start + 1)]


def test_the_readme_section_is_true(folder, capsys):
    """The README's kernel is the tested one, and its command and Python run as shown."""
    import re
    import shlex
    sec = _readme_section()
    assert "#include <hip/hip_runtime.h>" in sec
    (kernel,) = re.findall(r"```cpp\n(.*?)```", sec, re.S)
    assert kernel == (SOURCES / "pv_scaled.hip").read_text()
    _pv_files()
    Path("out.npy").write_bytes(Path("o.npy").read_bytes())
    (cmd,) = re.findall(r"```bash\n(gfxsim hip run .*?)\n```", sec, re.S)
    assert main(shlex.split(cmd)[1:]) == 0
    out = capsys.readouterr().out
    for line in re.findall(r"```\n(pv_scaled \(.*?)```", sec, re.S)[0].splitlines():
        head = line.split("(...)")[0].split(", ...")[0].strip()
        assert head in out, head
    (py,) = re.findall(r"```python\n(.*?)```", sec, re.S)
    exec(compile(py, "README.md", "exec"), {})
    assert "['scale-group-mismatch', 'scale-group-mismatch']" in capsys.readouterr().out
    assert Path("scales.png").stat().st_size > 0
