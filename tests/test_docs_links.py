"""The documents' links and path mentions lead somewhere: every relative markdown link of README.md,
CONTRIBUTING.md and docs/*.md names a file of the checkout."""
import re
from pathlib import Path

from support import ROOT

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def broken_links(doc: Path) -> list[str]:
    bad = []
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        for target in LINK.findall(line):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (doc.parent / target).exists():
                bad.append(f"{doc.relative_to(ROOT)}:{n}: {target}")
    return bad


def test_every_relative_link_names_a_file():
    bad = [b for doc in documents() for b in broken_links(doc)]
    assert not bad, "links to nothing:\n" + "\n".join(bad)


def test_the_checker_sees_a_broken_link(tmp_path, monkeypatch):
    doc = tmp_path / "x.md"
    doc.write_text("see [here](docs/missing.md) and [there](x.md#top) and [web](https://example.org)\n")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert broken_links(doc) == ["x.md:1: docs/missing.md"]
