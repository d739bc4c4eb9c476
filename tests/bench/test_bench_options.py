"""`python -m bench` refuses a bad --repeat or -o before it runs anything, with one line."""
import subprocess
import sys

import pytest

from support import ROOT


def bench(*argv):
    return subprocess.run([sys.executable, "-m", "bench", *argv], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)


@pytest.mark.parametrize("argv, words", [
    (["--repeat", "0"], ["--repeat must be at least 1, got 0"]),
    (["--repeat", "-2"], ["--repeat must be at least 1, got -2"]),
    (["-o", "/nonexistent/x.json"], ["-o /nonexistent/x.json: directory /nonexistent does not exist"]),
    (["-o", "/proc/x.json"], ["-o /proc/x.json: cannot write"]),
])
def test_bad_options_are_refused_before_running(argv, words):
    p = bench(*argv, "--only", "layout")
    assert p.returncode == 2
    assert "gfxsim bench on" not in p.stdout           # nothing ran
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m bench: error: ")
    for w in words:
        assert w in last
    assert "Traceback" not in p.stderr
