"""`gfxsim sweep`: the spec checked before anything runs, points run as tasks on a Dask
LocalCluster, the Parquet results written as points finish and resumed, a killed worker or a killed
sweep losing no finished point, and the same metrics and findings on 1 and on 2 workers.

Points are tiny decodes (256 tokens, the default shape) with provenance on, so the contiguous
grouping's findings appear. No test asserts a timing.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time
import tomllib

import pytest

from kernels_py.sweep import cli
from kernels_py.sweep.results import ResultStore, read_rows
from kernels_py.sweep.spec import SpecError, load_spec
from support import ROOT


DECODE = """
[sweep]
name = "tiny"
[[kernel]]
name = "paged_attention_decode"
grouping = ["fragment", "contiguous"]
context = 256
seed = [0, 1]
"""

# the columns a point's result must not depend on the worker for
def result_columns(row):
    return {k: v for k, v in row.items()
            if k.startswith(("vs_", "reference_", "findings", "correctness_findings", "first_finding",
                             "checks_not_run")) or k in ("status", "error")}


def write(tmp_path, text, name="spec.toml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def run_cli(*argv):
    return cli.main([str(a) for a in argv])


@pytest.fixture
def no_cluster(monkeypatch):
    """Fail if anything tries to start a cluster (a spec error must stop the sweep before)."""
    import kernels_py.sweep.cluster as cluster

    def refuse(*a, **k):
        raise AssertionError("a cluster was started")
    monkeypatch.setattr(cluster, "open_client", refuse)


# ---- the spec ------------------------------------------------------------------------------------

def test_spec_expands_the_grid_in_order_with_stable_ids(tmp_path):
    sw = load_spec(write(tmp_path, DECODE))
    assert sw.name == "tiny" and len(sw.points) == 4
    assert [(p.param("grouping"), p.param("seed")) for p in sw.points] == [
        ("fragment", 0), ("fragment", 1), ("contiguous", 0), ("contiguous", 1)]
    p = sw.points[0]
    assert p.param("heads") == 8 and p.param("arch") == "gfx936" and p.param("provenance") is True   # defaults
    again = load_spec(write(tmp_path, DECODE, "copy.toml"))
    assert [q.point_id for q in again.points] == [q.point_id for q in sw.points]
    other = load_spec(write(tmp_path, DECODE.replace("context = 256", "context = 320"), "other.toml"))
    assert not {q.point_id for q in other.points} & {q.point_id for q in sw.points}
    assert sw.varied() == ["grouping", "seed"]


BAD_SPECS = {
    "unknown kernel": ('name = "paged_attention_decod"', "unknown kernel 'paged_attention_decod'"),
    "unknown parameter": ("contxt = 256", "unknown parameter 'contxt'; known:"),
    "bad value": ("head_dim = [64, 96]", "--head-dim must be 64 or 128, got 96 (at head_dim=96)"),
    "bad GQA": ("kv_heads = 3", "the GQA ratio must be an integer 1..16"),
    "bad arch": ('arch = ["gfx936", "gfx999"]', "unknown arch 'gfx999'"),
    "wrong type": ('context = "256"', "context: expected an integer or a list of them, got '256'"),
    "empty axis": ("seed = []", "seed = []: an empty list gives no points"),
    "bad frontend": ('frontend = "cuda"', "frontend 'cuda': must be one of python, asm"),
    "missing kernel_fn file": ('kernel_fn = "nowhere.py:fn"', "nowhere.py: no such file"),
    "missing kernel_fn function": ('kernel_fn = "k.py:nope"', "has no function 'nope'; it defines decode"),
    "missing inputs": ('inputs = "none.npz"', "inputs 'none.npz':"),
    "inputs with a shape": ('inputs = "in.npz"\ncontext = 256', "context cannot be given with inputs"),
    "a kernel's own rule": ('name = "sage_attention"\narch = ["sm_90", "gfx942"]\ncontext = 128',
                            "sage_attention runs on the NVIDIA warp32 profiles sm_89, sm_90, not gfx942 (at arch='gfx942')"),
}


@pytest.mark.parametrize("case", list(BAD_SPECS))
def test_a_bad_spec_is_an_error_naming_the_entry_before_anything_runs(case, tmp_path, capsys, no_cluster):
    line, expected = BAD_SPECS[case]
    (tmp_path / "k.py").write_text("def decode(w, *a, **k):\n    pass\n")
    import numpy as np
    from kernels_py.workloads.data import make_attention_inputs
    np.savez(tmp_path / "in.npz", **{k: v for k, v in make_attention_inputs(
        seed=0, num_seqs=1, num_heads=8, num_kv_heads=1, head_dim=128, context_lens=[64]).items()
        if k in ("q", "k", "v", "context_lens")})
    good = '[[kernel]]\nname = "paged_attention_decode"\ncontext = 256\n'
    if line.startswith("name ="):
        bad = f"[[kernel]]\n{line}\n"
    else:
        bad = f'[[kernel]]\nname = "paged_attention_decode"\n{line}\n'
        if "context" not in line and "inputs" not in line:
            bad += "context = 256\n"
    spec = write(tmp_path, good + bad)
    with pytest.raises(SpecError) as e:
        load_spec(spec)
    kernel = line.split('"')[1] if line.startswith("name =") else "paged_attention_decode"
    assert f"{spec}: [[kernel]] #2 ({kernel}): " in str(e.value) and expected in str(e.value), str(e.value)
    out = tmp_path / "out.parquet"
    assert run_cli(spec, "-o", out) == 2
    err = capsys.readouterr().err
    assert err.startswith("gfxsim sweep: error: ") and expected in err
    assert not out.exists()


def test_spec_structure_errors(tmp_path):
    with pytest.raises(SpecError, match="no \\[\\[kernel\\]\\] entry"):
        load_spec(write(tmp_path, "[sweep]\nname = 'x'\n"))
    with pytest.raises(SpecError, match="unknown table\\(s\\) kernels"):
        load_spec(write(tmp_path, "[[kernels]]\nname = 'qk_int8'\n"))
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(write(tmp_path, "[[kernel]\n"))
    with pytest.raises(SpecError, match="is also a point of \\[\\[kernel\\]\\] #1"):
        load_spec(write(tmp_path, "[[kernel]]\nname = 'qk_int8'\n[[kernel]]\nname = 'qk_int8'\ncontext = 4096\n"))
    with pytest.raises(SpecError, match="reduce_fn: pv_int8 has no second kernel"):
        (tmp_path / "r.py").write_text("def r(w, *a, **k):\n    pass\n")
        load_spec(write(tmp_path, "[[kernel]]\nname = 'pv_int8'\nreduce_fn = 'r.py:r'\n"))


def test_pyproject_declares_the_command_and_gfxsim_runs_it(tmp_path, monkeypatch, capsys, no_cluster):
    """`gfxsim sweep` once installed: the entry point pyproject.toml declares, loaded by gfxsim.cli."""
    import gfxsim.cli as gcli
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    eps = meta["entry-points"]["gfxsim.commands"]
    assert eps["sweep"] == "kernels_py.sweep.cli"
    assert any(d.startswith("dask[distributed]") for d in meta["dependencies"])
    assert any(d.startswith("pyarrow") for d in meta["dependencies"])
    monkeypatch.setattr(gcli, "plugin_commands", lambda: [gcli.Command(n, m) for n, m in sorted(eps.items())])
    assert gcli.help_line(gcli.Command("sweep", eps["sweep"])).startswith("run a matrix of kernel runs")
    spec = write(tmp_path, DECODE)
    assert gcli.main(["sweep", str(spec), "-o", str(tmp_path / "r.parquet"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"sweep tiny ({spec}): 4 points, 0 already done, 4 to run")
    assert out.count(" todo ") == 4 and "grouping=contiguous seed=1" in out


# ---- running on a LocalCluster ---------------------------------------------------------------------

def test_a_small_sweep_on_a_local_cluster_prints_the_summary_and_resumes(tmp_path, capsys, monkeypatch):
    spec = write(tmp_path, DECODE)
    out = tmp_path / "res" / "out.parquet"
    out.parent.mkdir()                                   # a missing directory is refused, not made
    assert run_cli(spec, "-o", out, "--workers", "2", "--csv", "--quiet") == 0
    text = capsys.readouterr().out
    rows = {r["point_id"]: r for r in read_rows(out)}
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows.values())
    for r in rows.values():
        contiguous = r["grouping"] == "contiguous"
        assert (r["findings.scale-group-mismatch"] > 0) == contiguous
        assert r["findings"] == r["findings.scale-group-mismatch"]
        assert (r["first_finding"] or "").startswith("[scale-group-mismatch]") == contiguous
        assert r["vs_bf16.max_abs"] > (0.05 if contiguous else 0) and r["vs_bf16.max_abs"] < (1 if contiguous else 0.01)
        assert r["wall_s"] > 0 and r["peak_rss_bytes"] > 50 << 20 and r["peak_rss_scope"] == "task"
        assert r["gfxsim_version"] and r["host"] and r["worker"].startswith("tcp://") and r["context"] == 256
    # the summary: the points with findings first, the error table, the slowest points
    lines = text.splitlines()
    assert lines[0] == "sweep tiny: 4 points (4 run now, 0 already in the results); 4 ok, 0 failed; 2 with findings"
    i = lines.index("points with findings (2, correctness first):")
    assert all("contiguous" in ln and "scale-group-mismatch" in ln for ln in lines[i + 2:i + 4])
    j = next(k for k, ln in enumerate(lines) if ln.startswith("error against context and shape (vs_bf16.max_abs"))
    assert lines[j + 2].startswith("    grouping=fragment") and lines[j + 3].startswith("  * grouping=contiguous")
    assert any(ln.startswith("slowest points (4 of 4):") for ln in lines)
    assert (tmp_path / "res" / "out.png").stat().st_size > 10_000
    csv = (tmp_path / "res" / "out.csv").read_text().splitlines()
    assert len(csv) == 5 and '"point_id"' in csv[0] and '"findings.scale-group-mismatch"' in csv[0]
    # a rerun finds every point done: no cluster, the same table, the summary again
    import kernels_py.sweep.cluster as cluster
    monkeypatch.setattr(cluster, "open_client", lambda *a, **k: pytest.fail("a cluster was started"))
    assert run_cli(spec, "-o", out, "--no-plot", "--quiet") == 0
    assert capsys.readouterr().out.startswith("sweep tiny: 4 points (0 run now, 4 already in the results)")
    assert {r["point_id"]: r for r in read_rows(out)} == rows


def test_the_same_spec_gives_the_same_results_on_one_and_two_workers(tmp_path):
    spec = write(tmp_path, DECODE)
    results = {}
    for n in (1, 2):
        out = tmp_path / f"w{n}.parquet"
        assert run_cli(spec, "-o", out, "--workers", n, "--no-plot", "--quiet") == 0
        results[n] = {r["point_id"]: result_columns(r) for r in read_rows(out)}
    assert len(results[1]) == 4 and results[1] == results[2]
    assert sum(r["findings"] > 0 for r in results[1].values()) == 2


KILLER = """
import os
from kernels_py.paged_attention_decode import paged_attention_decode

def decode(w, *args, **kwargs):
    if os.path.exists({marker!r}):
        os._exit(17)                        # the worker process dies, as if killed
    return paged_attention_decode(w, *args, **kwargs)
"""


def test_a_worker_killed_mid_sweep_loses_no_finished_point_and_a_rerun_completes(tmp_path, capsys):
    marker = tmp_path / "kill"
    marker.write_text("")
    (tmp_path / "killer.py").write_text(KILLER.format(marker=str(marker)))
    spec = write(tmp_path, DECODE + '[[kernel]]\nname = "paged_attention_decode"\nkernel_fn = "killer.py:decode"\n'
                                    'context = 256\n')
    out = tmp_path / "out.parquet"
    assert run_cli(spec, "-o", out, "--workers", "2", "--no-plot", "--quiet") == 1      # a point failed
    text = capsys.readouterr().out
    rows = {r["point_id"]: r for r in read_rows(out)}
    assert len(rows) == 5
    dead = [r for r in rows.values() if r["status"] != "ok"]
    assert len(dead) == 1 and dead[0]["kernel_fn"] == "killer.py:decode"
    assert dead[0]["error"].startswith("KilledWorker: its worker died")
    assert "failed points (1):" in text and "KilledWorker" in text
    finished = {k: r for k, r in rows.items() if r["status"] == "ok"}
    assert len(finished) == 4
    marker.unlink()
    assert run_cli(spec, "-o", out, "--workers", "2", "--no-plot", "--quiet") == 0
    assert capsys.readouterr().out.startswith("sweep tiny: 5 points (1 run now, 4 already in the results); 5 ok")
    again = {r["point_id"]: r for r in read_rows(out)}
    assert {k: again[k] for k in finished} == finished                # untouched, not run again
    fixed = again[dead[0]["point_id"]]
    assert fixed["status"] == "ok" and fixed["error"] is None
    # the swap-in is the project's kernel: the same numbers as the built-in point
    builtin = next(r for r in finished.values() if r["grouping"] == "fragment" and r["seed"] == 0)
    assert fixed["vs_bf16.max_abs"] == builtin["vs_bf16.max_abs"] and fixed["findings"] == 0


HANG = """
import os, time
from kernels_py.paged_attention_decode import paged_attention_decode

def decode(w, *args, **kwargs):
    t0 = time.monotonic()
    while os.path.exists({marker!r}) and time.monotonic() - t0 < 120:
        time.sleep(0.05)                    # held until the test lets it go
    return paged_attention_decode(w, *args, **kwargs)
"""


def test_a_killed_sweep_loses_no_finished_point_and_a_rerun_runs_the_rest(tmp_path):
    marker = tmp_path / "hold"
    marker.write_text("")
    (tmp_path / "hang.py").write_text(HANG.format(marker=str(marker)))
    spec = write(tmp_path, DECODE + '[[kernel]]\nname = "paged_attention_decode"\nkernel_fn = "hang.py:decode"\n'
                                    'context = 256\n')
    out = tmp_path / "out.parquet"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "kernels_py.sweep", str(spec), "-o", str(out), "--workers", "2",
                             "--no-plot", "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and len(read_rows(out)) == 4:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        os.kill(proc.pid, signal.SIGKILL)              # the sweep itself, mid-point
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        marker.unlink(missing_ok=True)
    rows = {r["point_id"]: r for r in read_rows(out)}
    assert len(rows) == 4 and all(r["status"] == "ok" and r["kernel_fn"] is None for r in rows.values())
    sw = load_spec(spec)
    store = ResultStore(out)
    assert [p.kernel_fn for p in sw.points if not store.done(p)] == ["hang.py:decode"]
    assert run_cli(spec, "-o", out, "--workers", "1", "--no-plot", "--quiet") == 0
    again = {r["point_id"]: r for r in read_rows(out)}
    assert len(again) == 5 and all(r["status"] == "ok" for r in again.values())
    assert {k: again[k] for k in rows} == rows
    # the killed sweep's workers went with it
    for pid in {r["pid"] for r in rows.values()}:
        for _ in range(100):
            if not _alive(pid):
                break
            time.sleep(0.1)
        assert not _alive(pid), f"worker {pid} outlived its killed sweep"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:                                  # a zombie is dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_failing_point_records_its_error_and_the_sweep_goes_on(tmp_path, capsys):
    (tmp_path / "bad.py").write_text("def decode(w, *a, **k):\n    raise RuntimeError('my kernel is broken')\n")
    spec = write(tmp_path, """
        [[kernel]]
        name = "paged_attention_decode"
        context = 256
        provenance = false
        [[kernel]]
        name = "paged_attention_decode"
        kernel_fn = "bad.py:decode"
        context = 256
        """)
    out = tmp_path / "out.parquet"
    assert run_cli(spec, "-o", out, "--workers", "1", "--no-plot", "--quiet") == 1
    text = capsys.readouterr().out
    rows = sorted(read_rows(out), key=lambda r: r["entry"])
    assert [r["status"] for r in rows] == ["ok", "error"]
    assert rows[1]["error"] == "RuntimeError: my kernel is broken" and "bad.py" in rows[1]["traceback"]
    assert rows[0]["checks_not_run"] and rows[0]["findings"] == 0       # provenance off: said, not "no findings"
    assert "ran with checks not run (provenance off)" in text and "RuntimeError: my kernel is broken" in text
    # a spec that names fewer points: the others' rows are kept and said to be there
    fewer = write(tmp_path, "[[kernel]]\nname = 'paged_attention_decode'\ncontext = 256\nprovenance = false\n",
                  "fewer.toml")
    assert run_cli(fewer, "-o", out, "--no-plot", "--quiet") == 0               # its one point is done
    assert "(1 more row(s) of the results are points this spec does not name" in capsys.readouterr().out
    assert len(read_rows(out)) == 2


def test_a_changed_kernel_fn_file_reruns_its_points_only(tmp_path, capsys):
    k = tmp_path / "mine.py"
    k.write_text("from kernels_py.paged_attention_decode import paged_attention_decode as decode\n")
    spec = write(tmp_path, """
        [[kernel]]
        name = "paged_attention_decode"
        context = 256
        provenance = false
        [[kernel]]
        name = "paged_attention_decode"
        kernel_fn = "mine.py:decode"
        context = 256
        provenance = false
        """)
    out = tmp_path / "out.parquet"
    assert run_cli(spec, "-o", out, "--workers", "1", "--no-plot", "--quiet") == 0
    first = {r["entry"]: r for r in read_rows(out)}
    k.write_text(k.read_text() + "# edited\n")
    assert run_cli(spec, "-o", out, "--workers", "1", "--no-plot", "--quiet") == 0
    assert "(1 run now, 1 already in the results)" in capsys.readouterr().out
    second = {r["entry"]: r for r in read_rows(out)}
    assert second[1] == first[1] and second[2]["fingerprint"] != first[2]["fingerprint"]
    assert second[2]["vs_bf16.max_abs"] == first[2]["vs_bf16.max_abs"] == first[1]["vs_bf16.max_abs"]


def test_progress_draws_a_bar_on_a_terminal_and_lines_elsewhere():
    import io
    from kernels_py.sweep.progress import SweepProgress
    tty = io.StringIO()
    with SweepProgress(4, "tiny", stream=tty, tty=True) as p:
        p.point_done(True)
        p.point_done(False)
    assert "\r[########........] 2/4 points (1 failed) 0:00 elapsed ETA 0:00  tiny" in tty.getvalue()
    assert tty.getvalue().endswith("\n") and tty.getvalue().count("\n") == 1
    log = io.StringIO()
    with SweepProgress(2, stream=log, tty=False, interval=3600) as p:
        p.point_done(True)
        p.point_done(True)
    assert log.getvalue() == "gfxsim sweep: 2/2 points 0:00 elapsed\n"        # quiet until the end
    quiet = io.StringIO()
    with SweepProgress(2, stream=quiet, tty=True, quiet=True) as p:
        p.point_done(True)
    assert quiet.getvalue() == ""


def test_a_running_cluster_by_its_scheduler_address_with_an_inputs_file(tmp_path, capsys):
    import numpy as np
    from distributed import LocalCluster
    from kernels_py.workloads.data import make_attention_inputs
    d = make_attention_inputs(seed=3, num_seqs=2, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[100, 70])
    np.savez(tmp_path / "captured.npz", q=d["q"], k=d["k"], v=d["v"], context_lens=d["context_lens"])
    spec = write(tmp_path, """
        [[kernel]]
        name = "paged_attention_decode"
        inputs = ["captured.npz"]
        grouping = ["fragment", "contiguous"]
        """)
    out = tmp_path / "out.parquet"
    with pytest.raises(SpecError, match="heads cannot be given with inputs"):
        load_spec(write(tmp_path, "[[kernel]]\nname = 'pv_int8'\nheads = 4\ninputs = 'captured.npz'\n", "x.toml"))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        assert run_cli(spec, "-o", out, "--scheduler", cluster.scheduler_address, "--workers", "2", "--quiet") == 2
        assert "--workers sizes the LocalCluster" in capsys.readouterr().err
        assert run_cli(spec, "-o", out, "--scheduler", cluster.scheduler_address, "--no-plot", "--quiet") == 0
        worker = next(iter(cluster.scheduler_info["workers"]))
    rows = sorted(read_rows(out), key=lambda r: r["grouping"])
    assert [r["grouping"] for r in rows] == ["contiguous", "fragment"]
    for r in rows:
        assert r["status"] == "ok" and r["worker"] == worker and r["inputs"] == "captured.npz"
        assert (r["num_seqs"], r["heads"], r["kv_heads"], r["head_dim"], r["context"]) == (2, 4, 2, 64, 100)
    assert rows[0]["findings.scale-group-mismatch"] > 0 and rows[1]["findings"] == 0


def test_one_sweep_at_a_time_per_results_table(tmp_path):
    from kernels_py.sweep.results import ResultsError
    store = ResultStore(tmp_path / "out.parquet")
    with store.lock():
        with pytest.raises(ResultsError, match=f"another sweep is writing it \\(pid {os.getpid()}"):
            with ResultStore(tmp_path / "out.parquet").lock():
                pass
    assert not (tmp_path / "out.parquet.lock").exists()
    with store.lock():                              # released: taken again
        pass


def test_a_results_file_of_something_else_is_refused(tmp_path, no_cluster):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from kernels_py.sweep.results import ResultsError
    pq.write_table(pa.table({"x": [1]}), tmp_path / "other.parquet")
    with pytest.raises(ResultsError, match="not the results of a gfxsim sweep"):
        ResultStore(tmp_path / "other.parquet")
    (tmp_path / "junk.parquet").write_text("junk")
    with pytest.raises(ResultsError, match="not a readable Parquet file"):
        ResultStore(tmp_path / "junk.parquet")


@pytest.mark.parametrize("spec", sorted((ROOT / "examples").glob("*.toml")), ids=lambda p: p.name)
def test_the_example_specs_are_valid(spec):
    sw = load_spec(spec)
    assert sw.points and len({p.point_id for p in sw.points}) == len(sw.points)
    if spec.name == "sweep_decode.toml":        # the README's command: both groupings, 32 small points
        assert len(sw.points) == 32 and {p.param("grouping") for p in sw.points} == {"fragment", "contiguous"}
        assert max(p.param("context") for p in sw.points) <= 1024
