"""The SageAttention2 accuracy table takes minutes: it prints a line per configuration done on
stderr (nothing on stdout until the table), and --quiet silences it."""
import io

from kernels_py.fp8 import sage_accuracy


def test_a_progress_line_per_configuration():
    d = sage_accuracy.default_inputs(context=64, queries=4, heads=1)
    stream = io.StringIO()
    rows = sage_accuracy.table(d, qks=("int8",), smoothing=("none", "K"), granularities=("block",),
                               progress=stream)
    lines = stream.getvalue().splitlines()
    assert len(rows) == 2 and len(lines) == 2
    assert lines[0].startswith("sage_accuracy: 1/2 done (int8 QK, smoothing none, block)")
    assert lines[1].startswith("sage_accuracy: 2/2 done (int8 QK, smoothing K, block)")
    assert "s left" in lines[1]


def test_main_prints_progress_on_stderr_and_the_table_on_stdout(capsys, monkeypatch):
    small = dict(qks=("int8",), granularities=("block",))
    table = sage_accuracy.table
    monkeypatch.setattr(sage_accuracy, "table", lambda d, **kw: table(d, **{**kw, **small}))
    assert sage_accuracy.main(["--context", "64", "--queries", "4", "--heads", "1"]) == 0
    out, err = capsys.readouterr()
    assert err.count("sage_accuracy: ") == 3 and "sage_accuracy" not in out
    assert out.splitlines()[1].startswith("| QK |")
    assert sage_accuracy.main(["--context", "64", "--queries", "4", "--heads", "1", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
