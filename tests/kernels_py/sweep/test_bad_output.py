"""Every file `gfxsim sweep` writes is checked before anything runs, --dry-run included: a missing
directory is refused with one line (as `gfxsim plot` refuses it), never made; a bad --plot too."""
import pytest

from kernels_py.sweep import cli
from kernels_py.sweep.results import ResultsError, ResultStore
from support import ROOT

SPEC = str(ROOT / "examples" / "sweep_decode.toml")


def one_line(capsys, *argv):
    assert cli.main([SPEC, *argv, "--dry-run", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gfxsim sweep: error: ")
    return err[0]


def test_results_in_a_missing_directory_are_refused_not_made(tmp_path, capsys):
    out = tmp_path / "missing" / "x.parquet"
    assert one_line(capsys, "-o", str(out)) == f"gfxsim sweep: error: -o {out}: directory {out.parent} does not exist"
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("extra, words", [
    (["--plot", "x.txt"], ["x.txt", ".png or .svg"]),
    (["--plot", "{tmp}/missing/x.png"], ["--plot", "does not exist"]),
    (["--csv", "{tmp}/missing/x.csv"], ["--csv", "does not exist"]),
])
def test_plot_and_csv_are_checked_in_a_dry_run(tmp_path, capsys, extra, words):
    extra = [e.format(tmp=tmp_path) for e in extra]
    line = one_line(capsys, "-o", str(tmp_path / "x.parquet"), *extra)
    for w in words:
        assert w in line


def test_unwritable_results_are_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert "is not a directory" in one_line(capsys, "-o", str(tmp_path / "file" / "x.parquet"))
    assert "cannot write" in one_line(capsys, "-o", "/proc/x.parquet")


def test_the_store_refuses_a_missing_directory(tmp_path):
    store = ResultStore(tmp_path / "missing" / "x.parquet", "s")
    with pytest.raises(ResultsError, match="does not exist"):
        store.add({"point_id": "p", "status": "ok"})
    assert not (tmp_path / "missing").exists()
