"""Every error gfxsim's packages raise is a GfxSimError (gfxsim/errors.py), so that the CLI prints
it as one line with its coordinates: no ``raise ValueError(...)`` of a builtin class. A builtin
class stays only where a protocol asks for it, each listed here with why."""
import ast
import builtins
from pathlib import Path

from support import ROOT

PACKAGES = ("gfxsim", "kernels_py", "visualize")
BUILTIN_ERRORS = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
ALLOWED = {
    "AttributeError": "a module's __getattr__ must raise it (the import system's protocol)",
    "AssertionError": "gfxsim.testing's assertions are pytest failures",
    "ImportError": "caught where it is raised: a module not imported yet, a file that is not Python",
    "NotImplementedError": "an abstract method",
    "StopIteration": "the iterator protocol",
    "SystemExit": "the exit of a command",
}


def builtin_raises(path: Path):
    """(line, class) of every ``raise Builtin(...)`` / ``raise Builtin`` in one file."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id in BUILTIN_ERRORS:
                yield node.lineno, exc.id


def test_no_builtin_errors_raised():
    bad = [f"{p.relative_to(ROOT)}:{line}: raise {cls}" for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
           for line, cls in builtin_raises(p) if cls not in ALLOWED]
    assert not bad, "raise a GfxSimError (gfxsim.errors: ArgumentError, ArgumentTypeError, NotFoundError, " \
        "OutOfRangeError, UsageError, or located(cls, ...)) instead of:\n" + "\n".join(bad)


def test_the_checker_finds_a_planted_raise(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("def f(x):\n    if x:\n        raise ValueError('bad')\n    raise KeyError\n")
    assert sorted(builtin_raises(p)) == [(3, "ValueError"), (4, "KeyError")]


def test_the_replacements_are_still_the_builtin_classes():
    from gfxsim.errors import (ArgumentError, ArgumentTypeError, GfxSimError, NotFoundError, OutOfRangeError,
                               located)
    for cls, base in ((ArgumentError, ValueError), (ArgumentTypeError, TypeError), (NotFoundError, KeyError),
                      (OutOfRangeError, IndexError)):
        assert issubclass(cls, GfxSimError) and issubclass(cls, base)
    assert str(NotFoundError("unknown arch 'x'")) == "unknown arch 'x'"      # no KeyError quotes
    e = located(MemoryError, "LDS region 'w' does not fit", kernel="k")
    assert isinstance(e, MemoryError) and isinstance(e, GfxSimError) and "in k" in str(e)
