"""gfxsim.jitrecord and jit's loading ahead: a command kind's recorded numba signatures are loaded by
the next process's prewarm thread before the launch; a corrupt, foreign or stale record is ignored
without an error; the report is the same whether they were loaded ahead or not. No timing here."""
import json
import os
import subprocess
import sys

import pytest

from gfxsim import jitrecord
from gfxsim.machine import jit
from support import ROOT

ARGV = ["run", "qk_int8", "--context", "256", "--quiet", "--report", "json"]

# one process: the kind as the CLI takes it, prewarm (which loads the record) waited for, then the
# command itself; what the dispatchers held before the command, what the command loaded, its report
CHILD = ("import contextlib, io, json, sys\n"
         "from gfxsim import jitrecord; from gfxsim.cli import _parser_for, command_kind, main\n"
         "from gfxsim.machine import jit\n"
         "argv = sys.argv[2:]; jit.PRELOAD = sys.argv[1] == 'preload'\n"
         "jitrecord.expect(command_kind(_parser_for(argv).parse_args(argv), 'run'))\n"
         "jit.prewarm(); jit.join_start()\n"
         "held = sorted([m, n, [str(t) for t in s]] for m, n, d in jit._MADE for s in d.overloads)\n"
         "before = len(jit._LOADS)\n"
         "out = io.StringIO()\n"
         "with contextlib.redirect_stdout(out): rc = main(argv)\n"
         "rep = json.loads(out.getvalue()); rep.pop('seconds')\n"
         "print(json.dumps(dict(rc=rc, held=held, loaded_by_run=jit._LOADS[before:], report=rep, "
         "record=jitrecord.expected(), compiles=jit.compiles())))")


def child(mode, env):
    r = subprocess.run([sys.executable, "-c", CHILD, mode, *ARGV], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_next_process_loads_the_recorded_signatures_before_the_launch(tmp_path):
    env = dict(os.environ, GFXSIM_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(ROOT) + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
    first = child("preload", env)                   # no record yet: the run loads what it needs, then writes it
    assert first["rc"] == 0 and first["held"] == [] and first["loaded_by_run"] and first["record"]
    recorded = sorted([m, n, list(t)] for m, n, t in first["record"])
    assert sorted([m, n, list(t)] for m, n, t in first["loaded_by_run"]) == recorded
    second = child("preload", env)                  # the record read: prewarm's thread loaded all of it
    assert second["held"] == recorded and second["loaded_by_run"] == [] and second["compiles"] == []
    assert second["record"] == first["record"]
    off = child("off", env)                         # loading ahead switched off: as without a record
    assert off["held"] == [] and off["loaded_by_run"]
    assert first["report"] == second["report"] == off["report"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GFXSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(jitrecord, "_STATE", {"kind": None, "read": None})
    return tmp_path


def test_a_record_is_read_back_for_its_kind_only(cache):
    entries = [("gfxsim.machine.mma", "_mma_int", ("int64",)), ("gfxsim.machine.fold", "f", ())]
    jitrecord._write("kind A", entries)
    jitrecord.expect("kind A")
    assert jitrecord.expected() == entries
    jitrecord.expect("kind B")
    assert jitrecord.expected() == []
    jitrecord.expect(None)
    assert jitrecord.expected() == []


@pytest.mark.parametrize("text", ["", "{not json", "[1, 2]", json.dumps({"key": 3, "entries": []}),
                                  json.dumps({"entries": [["m", "f", ["int64"]]]}),
                                  "KEY:" + json.dumps([["m", "f", "int64"]]),
                                  "KEY:" + json.dumps([["m", 3, ["int64"]]]), "KEY:" + json.dumps([["m", "f"]]),
                                  "KEY:" + json.dumps("entries")])
def test_a_corrupt_record_is_ignored(cache, text):
    jitrecord._write("kind A", [("m", "f", ("int64",))])
    path = jitrecord._path(f"kind A\n{jitrecord._place()}")
    if text.startswith("KEY:"):
        text = json.dumps({"key": f"kind A\n{jitrecord._place()}", "entries": json.loads(text[4:])})
    path.write_text(text)
    jitrecord.expect("kind A")
    assert jitrecord.expected() == []


def test_a_foreign_record_under_the_same_name_is_ignored(cache):
    jitrecord._write("kind A", [("m", "f", ("int64",))])
    path = jitrecord._path(f"kind A\n{jitrecord._place()}")
    got = json.loads(path.read_text())
    got["key"] = "kind A\n/elsewhere/gfxsim"          # another checkout's (a checksum collision, a copied folder)
    path.write_text(json.dumps(got))
    jitrecord.expect("kind A")
    assert jitrecord.expected() == []


def test_the_folder_keeps_the_most_recent_records(cache, monkeypatch):
    monkeypatch.setattr(jitrecord, "KEEP", 3)
    for i in range(5):
        jitrecord._write(f"kind {i}", [])
        os.utime(jitrecord._path(f"kind {i}\n{jitrecord._place()}"), ns=(i * 10**9, i * 10**9))
    jitrecord._write("kind 5", [])
    left = sorted(p.name for p in (cache / "jit").iterdir())
    assert len(left) == 3 and jitrecord._path(f"kind 5\n{jitrecord._place()}").name in left


def test_stale_entries_are_skipped_never_compiled_and_dropped(cache, monkeypatch):
    """A recorded function that is gone, a signature numba's cache does not hold, a module not
    imported: nothing compiled; the first two dropped from the next record, the third kept."""
    import numpy as np

    from gfxsim.machine import mma
    a = np.ones((1, 2, 2), np.int8)
    mma._mma_int(a, a, np.zeros((1, 2, 2), np.int64), 1, 2, 2, 2)       # numba up, _mma_int's dispatcher made
    real = [("gfxsim.machine.mma", "_mma_int", tuple(str(t) for t in s)) for s in mma._mma_int.overloads]
    gone = ("gfxsim.machine.mma", "_no_such_function", ("int64",))
    uncached = ("gfxsim.machine.mma", "_mma_int", ("float32",))
    elsewhere = ("gfxsim.machine.not_imported_module", "f", ("int64",))
    monkeypatch.setattr(jit, "_ABSENT", set())
    jitrecord.expect("kind A")
    jitrecord._STATE["read"] = [gone, uncached, elsewhere, *real]
    compiled = jit.compiles()
    jit._load_recorded()
    assert jit.compiles() == compiled
    assert jit._ABSENT == {gone, uncached}
    kept = jit.signatures_to_keep(jitrecord.expected())
    assert kept[:1 + len(real)] == [elsewhere, *real] and gone not in kept and uncached not in kept


def test_a_commands_kind_leaves_its_numbers_out():
    from gfxsim.cli import _parser_for, command_kind

    def kind(*argv):
        return command_kind(_parser_for(list(argv)).parse_args(list(argv)), argv[0])
    base = kind("run", "qk_int8", "--context", "256")
    assert kind("run", "qk_int8", "--context", "4096", "--heads", "64", "--seed", "3") == base
    assert kind("run", "qk_int8", "--context", "256", "--no-provenance") != base
    assert kind("run", "sage_attention", "--context", "256") != base
    assert kind("run", "qk_int8", "--frontend", "asm") != base
