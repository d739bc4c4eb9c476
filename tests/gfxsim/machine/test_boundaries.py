"""The package's walls, checked on its source with ast.

* No module reaches into another's ``_private`` names. A name with one leading underscore belongs
  to the file that defines it; a file that reads or writes ``x._name`` where ``_name`` is defined
  by no function, class, assignment, argument, import, slot or ``self`` attribute of that same
  file reaches across a wall, and so does ``from m import _name`` of another gfxsim module. A
  pair of files that work as one unit is declared a friend below, with its reason; private names
  of the standard library that are its only way to do a thing are listed apart.
* gfxsim/machine writes no object's ``__dict__`` (state is written by the object that owns it).
* A function compiled with jit.njit is called through its module, never imported by name.
* gfxsim/machine's modules import one another (at module level or in a function) without a circle.
Each checker is also run on a planted violation.
"""
from __future__ import annotations

import ast

from support import ROOT

PACKAGE = ROOT / "gfxsim"

# (file that reaches, file whose private names it may use): why the two are one unit
FRIENDS: dict[tuple[str, str], str] = {
    ("gfxsim/machine/vgpr.py", "gfxsim/machine/valu.py"):
        "the value handle's operators (a + b, a < b, -a, x[i] = y, .to()) are the VALU's own "
        "instructions: VGPRs calls its unit's entry points (_binary, _compare, _unary, _convert, "
        "_write_into), which kernels reach only through the operators",
}

# private names of the standard library (and numba) that are its documented or only way to do a thing
OUTSIDE: dict[str, str] = {
    "_getframe": "sys._getframe: the caller's frame gives a statement's source line",
    "_exit": "os._exit: the CLI leaves without waiting for numba's and threads' exit handlers",
    "_run_exitfuncs": "atexit._run_exitfuncs: the CLI runs the exit handlers itself before os._exit",
    "_actions": "argparse: a parser's actions (no public accessor) to walk sub-parsers and defaults",
    "_defaults": "argparse: a parser's set_defaults values (no public accessor), suppressed to see "
                 "which options a command line gave",
    "_SubParsersAction": "argparse: the class of a sub-parsers action, to walk sub-parsers",
    "_StoreConstAction": "argparse: action classes whose help shows no default",
    "_CountAction": "argparse: action classes whose help shows no default",
    "_HelpAction": "argparse: action classes whose help shows no default",
    "_VersionAction": "argparse: action classes whose help shows no default",
    "_cache": "numba: a dispatcher's on-disk cache, whose index stamp jit._depends extends",
    "_cache_file": "numba: the cache's index file, holding the stamp it checks before loading",
    "_source_stamp": "numba: the stamp an index must match; numba has no public way to key an entry "
                     "by the files of the compiled functions it inlined from other modules",
    "_load_index": "numba: the cache index's entries, read to find a recorded signature's types (by "
                   "their names) and whether the cache holds it, before asking the dispatcher to load it",
    "_index_key": "numba: the key an index entry must equal for this source and machine (numba's own "
                  "check before it loads one); a signature the cache lacks is never compiled ahead",
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def defined_names(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, classes, assigned names, arguments, import
    aliases, ``__slots__`` entries and attributes set on ``self``/``cls``."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[0])
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            out.add(node.attr)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                  for t in node.targets):
            out.update(c.value for c in ast.walk(node.value)
                       if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return {n for n in out if _is_private(n)}


def _module_of(rel: str) -> str:
    parts = rel[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_module(rel: str, node: ast.ImportFrom) -> str:
    """The absolute name of the module ``from ... import`` reads in file ``rel``."""
    if not node.level:
        return node.module or ""
    pkg = _module_of(rel).split(".")
    if not rel.endswith("__init__.py"):
        pkg = pkg[:-1]
    pkg = pkg[:len(pkg) - node.level + 1]
    return ".".join(pkg + ([node.module] if node.module else []))


def private_reaches(sources: dict[str, str],
                    friends: dict[tuple[str, str], str] = FRIENDS) -> list[str]:
    """``file:line name`` for every reach into another file's private name; ``sources`` maps a path
    relative to the checkout (``gfxsim/machine/wave.py``) to its text."""
    trees = {rel: ast.parse(src, rel) for rel, src in sources.items()}
    defined = {rel: defined_names(t) for rel, t in trees.items()}
    out = []
    for rel, tree in trees.items():
        own = set(defined[rel])
        for (reader, owner), _why in friends.items():
            if reader == rel:
                own |= defined.get(owner, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _is_private(node.attr):
                if node.attr not in own and node.attr not in OUTSIDE:
                    out.append(f"{rel}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.ImportFrom):
                mod = _imported_module(rel, node)
                if not (mod == "gfxsim" or mod.startswith("gfxsim.")):
                    continue
                for a in node.names:
                    if not _is_private(a.name):
                        continue
                    owner = mod.replace(".", "/")
                    owners = {owner + ".py", owner + "/__init__.py"}
                    if not any((rel, o) in friends for o in owners):
                        out.append(f"{rel}:{node.lineno} from {mod} import {a.name}")
    return sorted(out)


def _package_sources() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def test_no_reach_into_another_files_private_names():
    reaches = private_reaches(_package_sources())
    assert not reaches, "reaches into another file's private names:\n" + "\n".join(reaches)


def test_friends_are_files_of_the_package():
    for reader, owner in FRIENDS:
        assert (ROOT / reader).is_file() and (ROOT / owner).is_file(), (reader, owner)


def test_checker_finds_a_planted_reach():
    a = ("class A:\n"
         "    __slots__ = ('_s',)\n"
         "    def __init__(self):\n"
         "        self._x = 1\n"
         "    def _m(self):\n"
         "        return self._x + self._s\n")
    b = ("from gfxsim.pkg.a import _m\n"
         "from .a import A\n"
         "def f(a):\n"
         "    a.__init__()\n"
         "    return a._x, a._own\n"
         "def g(b):\n"
         "    b._own = 2\n"
         "    b._y = 3\n"
         "_own = 0\n")
    src = {"gfxsim/pkg/a.py": a, "gfxsim/pkg/b.py": b}
    assert private_reaches(src, {}) == [
        "gfxsim/pkg/b.py:1 from gfxsim.pkg.a import _m",
        "gfxsim/pkg/b.py:5 ._x",
        "gfxsim/pkg/b.py:8 ._y",
    ]
    # a declared friend may use the other file's names, and no name defined nowhere
    assert private_reaches(src, {("gfxsim/pkg/b.py", "gfxsim/pkg/a.py"): "one unit"}) == [
        "gfxsim/pkg/b.py:8 ._y"]
    # a relative import is resolved to its module
    c = "from .a import _m\n"
    assert private_reaches({"gfxsim/pkg/a.py": a, "gfxsim/pkg/c.py": c}, {}) == [
        "gfxsim/pkg/c.py:1 from gfxsim.pkg.a import _m"]


# -- no state written from outside: no object's __dict__ reached into -------------------------
DICT_USERS = {
    "gfxsim/machine/jit.py": "a lazily compiled function replaces its own module's global by name",
}


def test_no_dict_reach_in_the_machine():
    found = []
    for p in sorted((PACKAGE / "machine").glob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        found += [f"{rel}:{n.lineno}" for n in ast.walk(ast.parse(p.read_text()))
                  if isinstance(n, ast.Attribute) and n.attr == "__dict__" and rel not in DICT_USERS]
    assert not found, "__dict__ reached into (state written from outside its object):\n" + "\n".join(found)


# -- a compiled function is called through its module ------------------------------------------
def jit_imports_by_name(sources: dict[str, str]) -> list[str]:
    """``file:line name`` for every ``from m import f`` of a function m compiles with jit.njit:
    njit rebinds the module's name once compiled, so a name imported before that stays the lazy
    wrapper, and every call through it pays the wrapper (call it as ``m.f``)."""
    trees = {rel: ast.parse(src, rel) for rel, src in sources.items()}
    compiled = {n.name for t in trees.values() for n in t.body if isinstance(n, ast.FunctionDef)
                and any(ast.unparse(d) in ("njit", "jit.njit") for d in n.decorator_list)}
    return sorted(f"{rel}:{n.lineno} {a.name}" for rel, t in trees.items() for n in ast.walk(t)
                  if isinstance(n, ast.ImportFrom) for a in n.names if a.name in compiled)


def test_compiled_functions_are_called_through_their_module():
    found = jit_imports_by_name(_package_sources())
    assert not found, "compiled functions imported by name:\n" + "\n".join(found)


def test_jit_import_check_finds_a_planted_import():
    src = {"gfxsim/pkg/s.py": "from .jit import njit\n@njit\ndef f(x):\n    return x\n",
           "gfxsim/pkg/u.py": "from . import s\nfrom .s import f\n"}
    assert jit_imports_by_name(src) == ["gfxsim/pkg/u.py:2 f"]


# -- no import circles inside gfxsim/machine ---------------------------------------------------
def import_graph(sources: dict[str, str], package: str = "gfxsim.machine") -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports, at module level or inside a function;
    ``sources`` maps a module's name within the package (``wave``) to its text."""
    graph = {}
    for name, src in sources.items():
        out = set()
        for node in ast.walk(ast.parse(src, name)):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    mods = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
                elif node.level == 0 and node.module and node.module.startswith(package + "."):
                    mods = [node.module[len(package) + 1:].split(".")[0]]
                elif node.level == 0 and node.module == package:
                    mods = [a.name for a in node.names]
                else:
                    mods = []
                out.update(mods)
            elif isinstance(node, ast.Import):
                out.update(a.name[len(package) + 1:].split(".")[0] for a in node.names
                           if a.name.startswith(package + "."))
        graph[name] = {m for m in out if m in sources and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each a circle of imports)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_machine_imports_have_no_circle():
    src = {p.stem: p.read_text() for p in sorted((PACKAGE / "machine").glob("*.py")) if p.stem != "__init__"}
    graph = import_graph(src)
    found = cycles(graph)
    assert not found, "import circles in gfxsim/machine:\n" + "\n".join(
        " <-> ".join(c) + ": " + "; ".join(f"{m} imports {sorted(graph[m] & set(c))}" for m in c) for c in found)


def test_cycle_check_finds_a_planted_circle():
    src = {"a": "from . import b\n",
           "b": "def f():\n    from .c import x\n",
           "c": "import gfxsim.machine.a\n",
           "d": "from .a import y\nfrom ..arch import z\n"}
    assert import_graph(src) == {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(import_graph(src)) == [["a", "b", "c"]]
    assert cycles(import_graph({k: v for k, v in src.items() if k != "c"})) == []


if __name__ == "__main__":
    print("\n".join(private_reaches(_package_sources())))
