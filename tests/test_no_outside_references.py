"""No file of the repository points at places outside it.

Code, docs and tests say what a thing is, not where it came from: no paths into the workspace
around the checkout (``shared/``, ``research/``, ``seeds/``), no source documents by number, no
issue trackers' numbers or items, no work sessions ("stop 3", "this stop"). A reader of the
checkout alone can follow every sentence.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import NamedTuple
from collections.abc import Iterable

import pytest

from support import ROOT

PATTERNS = {
    "a path outside the repository": re.compile(r"(?<![\w.-])(?:shared|research|seeds)/", re.I),
    "a source document by number": re.compile(r"\bseeds? 0\d\d\b|\bseed's\b", re.I),
    "an issue or its item": re.compile(r"\bissues? #?\d+|\bthe issue's\b|\bitems? \d+\b", re.I),
    "a work session": re.compile(r"\bstops? \d+\b|\b(?:this|last|earlier|previous) stops?\b", re.I),
}
SKIP_SUFFIXES = {".png", ".npz", ".parquet", ".co", ".o"}


class Reference(NamedTuple):
    path: str
    line: int
    what: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}: {self.text.strip()[:120]}"


def references(root: Path, paths: Iterable[str]) -> list[Reference]:
    """Every line of ``paths`` (relative to ``root``) that names a place outside the repository."""
    found = []
    for rel in paths:
        p = root / rel
        if p.suffix in SKIP_SUFFIXES or not p.is_file():
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue                                    # a binary file
        for n, line in enumerate(text.splitlines(), 1):
            for what, pattern in PATTERNS.items():
                if pattern.search(line):
                    found.append(Reference(rel, n, what, line))
    return found


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout: {out.stderr.strip()}")
    own = Path(__file__).resolve().relative_to(ROOT).as_posix()
    return [f for f in out.stdout.split("\0") if f and f != own]


def test_no_tracked_file_refers_outside_the_repository():
    bad = references(ROOT, tracked_files())
    assert not bad, f"{len(bad)} reference(s) to places outside the repository:\n" + "\n".join(map(str, bad))


def test_the_checker_finds_each_kind(tmp_path):
    files = {
        "a.py": '"""Facts: see shared/research/kernels.md."""\nx = 1  # from research/notes\n',
        "b.md": "The story of seed 000.\nThe seed's bug.\nA random seed 0 and a point's seeds are fine.\n",
        "c.py": "# issue 12 item 3: the parser\n# -- item 9: pictures\ny = 2  # measured this stop\n",
        "d.md": "What stop 4 changed. Shared memory, w.shared(...), tests/support/ and my_research/ are fine.\n",
        "e.png": "issue 1",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    got = [(r.path, r.line, r.what) for r in references(tmp_path, sorted(files))]
    assert got == [("a.py", 1, "a path outside the repository"), ("a.py", 2, "a path outside the repository"),
                   ("b.md", 1, "a source document by number"), ("b.md", 2, "a source document by number"),
                   ("c.py", 1, "an issue or its item"), ("c.py", 2, "an issue or its item"),
                   ("c.py", 3, "a work session"), ("d.md", 1, "a work session")]
    assert str(references(tmp_path, ["c.py"])[0]) == "c.py:1: an issue or its item: # issue 12 item 3: the parser"
