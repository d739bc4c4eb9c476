"""numba's on-disk cache: a second process compiles nothing, and the first says it compiles.

Counted through gfxsim.machine.jit.compiles() (numba's compile event, fired only where the cache had
no entry), never by timing."""
import json
import os
import subprocess
import sys

import pytest

from support import ROOT

RUN = ("import json, sys; from gfxsim.cli import main; from gfxsim.machine import jit; "
       "rc = main(sys.argv[1:]); print(json.dumps(dict(rc=rc, compiles=jit.compiles())), file=sys.stderr)")

CALL = ("import json, sys, numpy as np; from numba.core import caching; from gfxsim.machine import jit, mma\n"
        "def refuse(self):\n    raise PermissionError('read-only package')\n"
        "caching.InTreeCacheLocator.ensure_cache_path = refuse\n"
        "a = np.ones((1, 2, 2), np.int8)\n"
        "mma._mma_int(a, a, np.zeros((1, 2, 2), np.int64), 1, 2, 2, 2)\n"
        "print(json.dumps(dict(compiles=jit.compiles(), path=mma._mma_int.stats.cache_path)))")


def child(code, argv, env):
    r = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def env_with(**extra):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def test_a_second_process_compiles_nothing(tmp_path):
    env = env_with(NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    argv = ["run", "--context", "256", "--report", "json"]
    first = child(RUN, argv, env)
    got = json.loads(first.stderr.strip().splitlines()[-1])
    assert got["rc"] == 0 and got["compiles"], "the first run found a cache in an empty directory"
    notes = [ln for ln in first.stderr.splitlines() if "compiling the simulator's numba functions" in ln]
    assert len(notes) == 1 and str(tmp_path / "numba") in notes[0]
    json.loads(first.stdout)                         # the note stays out of the report
    second = child(RUN, argv, env)
    got = json.loads(second.stderr.strip().splitlines()[-1])
    assert got == {"rc": 0, "compiles": []}
    assert "compiling" not in second.stderr


def test_quiet_runs_say_nothing_while_compiling(tmp_path):
    env = env_with(NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    r = child(RUN, ["run", "--context", "256", "--quiet"], env)
    got = json.loads(r.stderr.strip().splitlines()[-1])
    assert got["compiles"] and r.stderr.strip().splitlines()[:-1] == []


def test_an_unwritable_package_caches_in_the_users_cache_dir(tmp_path):
    """The package's __pycache__ cannot be written (an installed package): the user's cache dir
    takes the cache, and the next process loads it from there."""
    env = env_with(XDG_CACHE_HOME=str(tmp_path / "user"), HOME=str(tmp_path / "home"))
    first = json.loads(child(CALL, [], env).stdout)
    assert first["compiles"] == ["gfxsim.machine.mma._mma_int"]
    assert first["path"].startswith(str(tmp_path / "user"))
    second = json.loads(child(CALL, [], env).stdout)
    assert second["compiles"] == [] and second["path"] == first["path"]


def test_a_closure_is_refused():
    from gfxsim.errors import ArgumentError
    from gfxsim.machine.jit import njit

    def outer(k):
        def inner(x):
            return x + k
        return inner
    with pytest.raises(ArgumentError, match="not a module-level function"):
        njit(outer(1))


CALLEE = "from gfxsim.machine.jit import njit\n\n\n@njit\ndef answer(x):\n    return x + {k}\n"
CALLER = ("from gfxsim.machine.jit import njit\nimport depmods.callee as callee\n\n\n"
          "@njit\ndef ask(x):\n    return callee.answer(x) * 2\n")
ASK = ("import json, sys; sys.path.insert(0, sys.argv[1]); import depmods.callee as c, depmods.caller as a\n"
       "c.answer(0)\nprint(json.dumps(dict(got=int(a.ask(1)))))")


def test_an_edit_of_a_callees_module_compiles_its_callers_again(tmp_path):
    """numba keys a cache entry by its function's own file; a caller that inlined a callee of
    another module would run the old callee after that module changed (jit._depends)."""
    pkg = tmp_path / "src" / "depmods"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "caller.py").write_text(CALLER)
    env = env_with(NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    runs = []
    for k in (1, 1, 5):
        callee = pkg / "callee.py"
        if not callee.exists() or str(k) not in callee.read_text():
            callee.write_text(CALLEE.format(k=k))
            st = callee.stat()
            os.utime(callee, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9 * k))
        runs.append(json.loads(child(ASK, [str(tmp_path / "src")], env).stdout))
    assert [r["got"] for r in runs] == [4, 4, 12]
