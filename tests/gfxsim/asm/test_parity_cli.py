"""`python -m gfxsim.asm.parity` on a file it cannot compare: one line naming it, exit 2."""
import json

import pytest

from gfxsim.asm.parity import main

REPORT = {"mmacs": [], "findings": [], "checks": {}}


@pytest.mark.parametrize("second, words", [
    ("missing.json", ["missing.json: cannot read: No such file or directory"]),
    ("garbage.json", ["garbage.json: not one JSON report"]),
    ("other.json", ["other.json: not a `gfxsim run --report json` report: no mmacs"]),
])
def test_a_file_that_cannot_be_compared_is_one_line(tmp_path, capsys, second, words):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(REPORT))
    (tmp_path / "garbage.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"findings": []}))
    assert main([str(a), str(tmp_path / second)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("python -m gfxsim.asm.parity: error: ")
    for w in words:
        assert w in err[0]
