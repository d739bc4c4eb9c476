"""jit.worth_starting without provenance: a narrow wave's compiled paths take their numpy paths
until the process has done START_WORK of that work, then numba starts beside the run (prewarm's
thread) and they take the compiled paths once it is up (START_BESIDE); the results are the same
bits whichever path ran, and a short command never starts numba."""
import json
import os
import subprocess
import sys

import pytest

from gfxsim.machine import jit
from support import ROOT


@pytest.fixture
def not_up(monkeypatch):
    """worth_starting's state as in a process where numba has not started; prewarm recorded."""
    calls = []
    monkeypatch.setattr(jit, "_TARGET_STARTED", False)
    monkeypatch.setattr(jit, "_STARTING", False)
    monkeypatch.setattr(jit, "_PREWARMED", False)
    monkeypatch.setattr(jit, "_WORK", 0)
    monkeypatch.setattr(jit, "START_BESIDE", True)
    monkeypatch.setattr(jit, "START_WORK", 10)
    monkeypatch.setattr(jit, "prewarm", lambda: calls.append(1))
    return calls


def test_a_narrow_wave_counts_its_work_and_starts_numba_beside_once_it_is_worth_it(not_up):
    assert not jit.worth_starting(64, 4) and jit._WORK == 4 and not not_up
    assert not jit.worth_starting(jit.START_WIDTH + 1, 100) and jit._WORK == 4     # a wide batch keeps numpy
    assert not jit.worth_starting(256, 6) and not_up == [1]                        # 10: started beside
    jit._PREWARMED = True
    jit._TARGET_STARTED = jit._STARTING = True
    assert not jit.worth_starting(256) and not_up == [1]                           # starting: numpy meanwhile
    jit._STARTING = False
    assert jit.worth_starting(256) and jit.worth_starting(jit.START_WIDTH + 1)     # up: every width


def test_without_start_beside_a_narrow_wave_starts_numba_itself(not_up):
    jit.START_BESIDE = False
    assert jit.worth_starting(64) and not jit.worth_starting(jit.START_WIDTH + 1) and not not_up


CHILD = ("import json, sys; from gfxsim.machine import jit; mode = sys.argv[1]\n"
         "if mode == 'wait': jit.START_BESIDE = False\n"
         "if mode == 'soon': jit.START_WORK = 1\n"
         "if mode == 'numba': jit.prewarm(); jit.join_start()\n"
         "import contextlib, io; out = io.StringIO()\n"
         "from gfxsim.cli import main\n"
         "with contextlib.redirect_stdout(out): rc = main(sys.argv[2:])\n"
         "rep = json.loads(out.getvalue()); rep.pop('seconds')\n"
         "jit.join_start()\n"
         "print(json.dumps(dict(rc=rc, report=rep, loaded=jit.loaded(), up=jit.worth_starting(1 << 20))))")


def test_the_batched_asm_decode_gives_the_same_report_whenever_numba_starts(tmp_path):
    """The asm decode without provenance (its waves narrow, each alone: the paths worth_starting
    decides) in three processes: numba started by the first narrow wave and waited for (every
    compiled path from the first call), never started (a short command: the numpy paths), and
    started beside the run at once (numpy paths until it is up, compiled paths after)."""
    from support import need_toolchain
    need_toolchain("gfx936")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + (os.pathsep + os.environ["PYTHONPATH"]
                                                    if os.environ.get("PYTHONPATH") else ""))
    argv = ["run", "paged_attention_decode", "--frontend", "asm", "--no-provenance", "--context", "1024",
            "--report", "json", "--quiet"]
    got = {}
    for mode in ("wait", "default", "soon"):
        r = subprocess.run([sys.executable, "-c", CHILD, mode, *argv], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        got[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["wait"]["loaded"] and got["wait"]["up"]
    assert not got["default"]["loaded"] and not got["default"]["up"]
    assert got["soon"]["up"]
    assert got["wait"]["rc"] == got["default"]["rc"] == got["soon"]["rc"] == 0
    assert got["wait"]["report"] == got["default"]["report"] == got["soon"]["report"]


def test_twins_first_runs_the_numpy_twins_until_numba_runs(not_up, monkeypatch):
    """jit.twins_first: a function with a numpy twin (``starting``'s callers) runs the twin while
    numba is not up, without starting it; once numba runs, the compiled one."""
    monkeypatch.setattr(jit, "_TWINS_FIRST", False)
    monkeypatch.setitem(jit._LAZY, "a.module", [])
    assert not jit.starting("a.module")
    jit.twins_first()
    assert jit.starting("a.module") and not jit.starting("a.module.compiled") and not not_up
    jit._TARGET_STARTED = True
    assert not jit.starting("a.module")


def test_the_cache_producer_with_provenance_runs_without_numba_and_reports_the_same():
    """int8_kv_cache with provenance (runners.NUMPY_TWINS): numba never loads, and the report is the
    one of a process where numba ran first (the compiled fold checks and merges)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + (os.pathsep + os.environ["PYTHONPATH"]
                                                    if os.environ.get("PYTHONPATH") else ""))
    argv = ["run", "int8_kv_cache", "--context", "96", "--heads", "8", "--kv-heads", "2", "--report", "json",
            "--quiet"]
    got = {}
    for mode in ("default", "numba"):
        r = subprocess.run([sys.executable, "-c", CHILD, mode, *argv], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        got[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    assert not got["default"]["loaded"] and got["numba"]["loaded"]
    assert got["default"]["rc"] == got["numba"]["rc"] == 0
    assert got["default"]["report"]["checks"]["not_run"] == []           # provenance ran
    assert got["default"]["report"] == got["numba"]["report"]
