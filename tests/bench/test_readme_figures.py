"""The README's speed figures are the committed bench results, written by `python -m bench.readme`
from bench/results.json (which `python -m bench --repeat 3` writes): none is typed by hand."""
from support import ROOT

from bench.readme import tables


def test_the_readme_quotes_the_committed_bench_results():
    readme = (ROOT / "README.md").read_text()
    at = [readme.find(t) for t in tables().split("\n\n")]       # each table, in order (text may sit between)
    assert -1 not in at and at == sorted(at), "README's speed tables differ from `python -m bench.readme`:\n" + tables()
    assert "python -m bench --repeat 3" in readme and "python -m bench.readme" in readme


def test_the_tables_follow_the_results(tmp_path):
    import json
    res = json.loads((ROOT / "bench" / "results.json").read_text())
    for f in res["figures"]:
        if f.get("mode") == "off" and f.get("context") == 16384:
            f["seconds"] = 98.765
    p = tmp_path / "r.json"
    p.write_text(json.dumps(res))
    assert "98.77 s" in tables(p) and "98.77 s" not in tables()
