"""The console script ends without the interpreter's teardown (gfxsim.cli.script): its exit status,
its output and the atexit handlers are what main() and a normal exit would give."""
import json
import subprocess
import sys

SCRIPT = ("import atexit, sys; atexit.register(lambda: print('atexit ran', file=sys.stderr)); "
          "sys.argv = ['gfxsim'] + sys.argv[1:]; from gfxsim.cli import script; script()")


def _script(*args):
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=300)


def test_a_run_writes_its_whole_report_and_runs_the_atexit_handlers():
    r = _script("run", "paged_attention_decode", "--context", "100", "--heads", "4", "--head-dim", "64",
                "--no-provenance", "--report", "json", "--quiet")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kernel"] == "paged_attention_decode"
    assert "atexit ran" in r.stderr


def test_exit_status_of_errors_help_and_python_m():
    assert _script("layout", "gfx942", "--list").returncode == 0
    bad = _script("nosuch")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr and "atexit ran" in bad.stderr
    assert _script("run", "--help").returncode == 0
    r = subprocess.run([sys.executable, "-m", "gfxsim", "layout", "gfx942", "v_mfma_i32_16x16x32_i8", "--operand",
                        "B", "--get-register", "13", "2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "B[13][2] = v1{18}.[15:8]"


def test_a_closed_pipe_is_not_an_error():
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, "layout", "gfx942", "v_mfma_i32_16x16x32_i8", "--detail"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and "Traceback" not in err
