"""`gfxsim hip run` and `gfxsim triton` say on stderr when their first run compiles the simulator's
numba functions, as `gfxsim run` does (tests/bench/test_numba_cache.py), and keep stdout the report."""
import json
import os
import subprocess
import sys

import numpy as np

from support import ROOT, need_toolchain

SOURCES = ROOT / "tests" / "gfxsim" / "hip" / "sources"

RUN = ("import json, sys; from gfxsim.cli import main; from gfxsim.machine import jit; "
       "rc = main(sys.argv[1:]); print(json.dumps(dict(rc=rc, compiles=jit.compiles())), file=sys.stderr)")


def test_hip_run_says_it_compiles_once(tmp_path):
    need_toolchain("gfx942")
    rng = np.random.default_rng(0)
    for name, a in (("p", rng.integers(-9, 9, (16, 64), dtype=np.int8)), ("v", rng.integers(-9, 9, (16, 64), dtype=np.int8)),
                    ("s", rng.random(64, dtype=np.float32)), ("out", np.zeros((16, 16), np.float32))):
        np.save(tmp_path / f"{name}.npy", a)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "numba"), GFXSIM_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""))
    argv = ["hip", "run", str(SOURCES / "pv_scaled.hip"), "--kernel", "pv_scaled", "--grid", "1", "--block", "64",
            "--arg", "p=p.npy", "--arg", "v=v.npy", "--arg", "s_tok=s.npy", "--arg", "out=out.npy",
            "--tag", "p:1=token", "--tag", "v:1=token", "--tag", "s_tok:0=token", "--report", "json"]
    notes = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", RUN, *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        got = json.loads(r.stderr.strip().splitlines()[-1])
        json.loads(r.stdout)                                     # the note stays out of the report
        notes.append((bool(got["compiles"]),
                      [ln for ln in r.stderr.splitlines() if "compiling the simulator's numba functions" in ln]))
    (compiled, said), (again, said_again) = notes
    assert compiled and len(said) == 1 and str(tmp_path / "numba") in said[0]
    assert not again and said_again == []
