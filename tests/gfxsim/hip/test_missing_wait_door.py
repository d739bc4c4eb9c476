"""tests/defective/missing_wait.hip through the HIP front door (`gfxsim hip run`): a load written in
inline asm, which clang cannot see and so does not wait for, read by the next multiply ->
missing-wait naming the load, the read and the wait, and NaN outputs; its fixed twin (-D FIXED)
waits and reports nothing."""
import json

import numpy as np

from gfxsim.cli import main
from support import DEFECTIVE, need_toolchain

SOURCE = DEFECTIVE / "missing_wait.hip"


def hip_run(capsys, *defines):
    x = np.arange(128, dtype=np.float32)
    np.save("x.npy", x)
    np.save("y.npy", np.zeros(128, np.float32))
    argv = ["hip", "run", str(SOURCE), "--kernel", "scale_asm_load", "--grid", "2", "--block", "64",
            "--arg", "x=x.npy", "--arg", "y=y.npy", "--arg", "s=2.0", "--report", "json", "-o", "out", *defines]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out), np.load("out/y.npy"), x


def test_a_load_in_inline_asm_read_before_its_wait(tmp_path, monkeypatch, capsys):
    need_toolchain("gfx942")
    monkeypatch.setenv("GFXSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    line = next(i + 1 for i, s in enumerate(SOURCE.read_text().splitlines()) if "y[i] = v * s" in s)
    bad, y, x = hip_run(capsys)
    assert np.isnan(y).all()                                   # the numbers show it
    found = bad["findings"]
    assert {f["kind"] for f in found} == {"missing-wait"}
    assert sorted(tuple(f["workgroup"]) for f in found) == [(0, 0, 0), (1, 0, 0)]
    for f in found:
        d = f["details"]
        assert d["needed"] == "s_waitcnt vmcnt(0)" and d["access"] == "read" and d["lanes"] == list(range(64))
        assert "(global_load_dword " in d["load_line"] and d["load"] < f["instruction"]
        assert f["source"].endswith(f"<- missing_wait.hip:{line}") and "v_mul_f32" in f["source"]
        assert d["register"] in f["message"] and d["load_line"] in f["message"]
    good, y, x = hip_run(capsys, "-D", "FIXED")
    assert good["findings"] == [] and np.array_equal(y, 2 * x)
