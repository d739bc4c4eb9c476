"""The one-way arrows between the packages, read from the source with ast.

Every import counts: module-level, inside functions (the lazy imports of the CLIs), relative
(``from ..hip import build``) and ``importlib.import_module("literal")``. Sub-commands from the
packages above gfxsim are registered as entry points (pyproject.toml), which is no import.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from support import ROOT


class Rule(NamedTuple):
    source: str          # a package or module: the importer
    forbidden: str       # what it must never import, nor anything below it
    unless: str = ""     # a part of source that sits above forbidden

    def __str__(self) -> str:
        return f"{self.source} never imports {self.forbidden}" + (f" (but {self.unless})" if self.unless else "")


class Violation(NamedTuple):
    path: Path
    line: int
    imported: str
    rule: Rule

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.imported} ({self.rule})"


RULES = (
    Rule("gfxsim", "kernels_py"),
    Rule("gfxsim", "visualize"),
    Rule("gfxsim", "bench"),
    Rule("gfxsim", "kernels_triton"),         # the Triton kernels are users of gfxsim.triton
    Rule("kernels_py", "kernels_triton"),
    Rule("gfxsim.arch", "gfxsim.machine"),     # the records are the ground floor
    Rule("gfxsim.arch", "gfxsim.isa"),
    Rule("gfxsim.arch", "gfxsim.asm"),
    Rule("gfxsim.arch", "gfxsim.hip"),
    Rule("gfxsim.arch", "gfxsim.cli"),
    Rule("gfxsim.machine", "gfxsim.asm"),      # the machine knows no front end
    Rule("gfxsim.machine", "gfxsim.hip"),
    Rule("gfxsim.machine", "gfxsim.cli"),
    Rule("gfxsim.asm", "gfxsim.hip"),          # assembly, whoever built it
    Rule("gfxsim.asm", "gfxsim.triton"),
    Rule("gfxsim.machine", "gfxsim.triton"),
    Rule("gfxsim.arch", "gfxsim.triton"),
    Rule("gfxsim.isa", "gfxsim.machine"),      # instruction semantics: numbers and rules, no machine
    Rule("gfxsim.isa", "gfxsim.asm"),
    Rule("kernels_py", "bench"),
    Rule("kernels_py", "visualize", unless="kernels_py.sweep"),   # kernels and hosts are drawn, never draw
    Rule("visualize", "kernels_py.sweep"),     # the sweep draws with visualize, not the reverse
    Rule("visualize", "bench"),
)
PENDING: dict = {}       # rules that do not hold yet, each with why (none now)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def imports(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in one file; ``from A import b`` gives A and A.b."""
    mod = module_name(path, root)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ast.unparse(node.func) in ("importlib.import_module", "import_module")):
            yield node.lineno, node.args[0].value


def violations(root: Path, rules: tuple[Rule, ...] | list[Rule]) -> list[Violation]:
    """Every import under ``root`` that breaks one of ``rules``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "build" in path.relative_to(root).parts:
            continue
        mod = module_name(path, root)
        for rule in rules:
            if not _within(mod, rule.source) or (rule.unless and _within(mod, rule.unless)):
                continue
            seen = set()
            for line, name in imports(path, root):
                if _within(name, rule.forbidden) and (line, name) not in seen:
                    seen.add((line, name))
                    found.append(Violation(path.relative_to(root), line, name, rule))
    return found


@pytest.mark.parametrize("rule", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=PENDING[r]))
                                  if r in PENDING else r for r in RULES], ids=str)
def test_arrow(rule):
    bad = violations(ROOT, [rule])
    assert not bad, "\n".join(map(str, bad))


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_checker_finds_every_form_of_import(tmp_path):
    root = _tree(tmp_path, {
        "gfxsim/__init__.py": "",
        "gfxsim/asm/__init__.py": "from ..hip import build\n",                       # relative, module level
        "gfxsim/asm/run.py": "def f():\n    import gfxsim.hip.sim\n",                 # inside a function
        "gfxsim/asm/ok.py": "from gfxsim.machine import wave\nfrom . import hipster\n",
        "gfxsim/hip/__init__.py": "from gfxsim.asm import run\n",                     # the allowed direction
        "gfxsim/cli.py": "import importlib\nimportlib.import_module('kernels_py.cli')\n",
        "visualize/plots.py": "from kernels_py import sweep\n",
    })
    rules = (Rule("gfxsim.asm", "gfxsim.hip"), Rule("gfxsim", "kernels_py"), Rule("visualize", "kernels_py.sweep"))
    got = sorted((str(v.path), v.line, v.imported) for v in violations(root, rules))
    assert got == [("gfxsim/asm/__init__.py", 1, "gfxsim.hip"), ("gfxsim/asm/__init__.py", 1, "gfxsim.hip.build"),
                   ("gfxsim/asm/run.py", 2, "gfxsim.hip.sim"), ("gfxsim/cli.py", 2, "kernels_py.cli"),
                   ("visualize/plots.py", 1, "kernels_py.sweep")]
    assert "gfxsim/asm/run.py:2: imports gfxsim.hip.sim (gfxsim.asm never imports gfxsim.hip)" in map(
        str, violations(root, rules))


def test_an_exempt_part_may_import_what_its_package_may_not(tmp_path):
    root = _tree(tmp_path, {"kernels_py/sweep/cli.py": "from visualize.sweep import plot_sweep\n",
                            "kernels_py/host/runs.py": "def f():\n    from visualize import style\n"})
    got = [(str(v.path), v.imported) for v in violations(root, [Rule("kernels_py", "visualize", unless="kernels_py.sweep")])]
    assert got == [("kernels_py/host/runs.py", "visualize"), ("kernels_py/host/runs.py", "visualize.style")]


def test_a_clean_tree_passes(tmp_path):
    root = _tree(tmp_path, {"gfxsim/asm/run.py": "from gfxsim.machine.launch import launch\n",
                            "kernels_py/sweep/cli.py": "from visualize.sweep import plot_sweep\n"})
    assert violations(root, RULES) == []
