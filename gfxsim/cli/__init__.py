"""The `gfxsim` command: one sub-command per module, each registering its own parser.

Start-up is lazy. ``BUILTIN`` names each built-in sub-command's module and its one-line help, so
``gfxsim --help`` imports no sub-command module and ``gfxsim CMD ...`` imports CMD's module only
(``gfxsim layout`` loads neither numba nor ml_dtypes nor matplotlib).

Packages that depend on gfxsim (``visualize``, ``kernels_py``) add sub-commands through the
entry-point group ``gfxsim.commands``: the entry point's name is the command, its value a module
with ``add_parser(subparsers)`` that registers a sub-parser of that name. gfxsim imports such a
module only when its command is named; for the list in ``gfxsim --help`` it reads the help line
from the module's source without importing it (the literal ``help=`` of its
``add_parser("NAME", help=...)`` call, else a module-level string ``HELP``). A built-in name wins
over an entry point of the same name.

Every sub-command ends the same way when something raises (gfxsim.cli.failures): a gfxsim error or
bad usage is one line and exit status 2, an exception from the user's own code keeps its type, file,
line and the user's frames (exit 1); ``--traceback``, before or after the command, shows the whole
stack.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import NamedTuple

from .failures import EXIT_HELP, EXIT_INTERRUPTED
from ..errors import NotFoundError

PLUGIN_GROUP = "gfxsim.commands"
DESCRIPTION = ("wave64 matrix-instruction simulator and fragment-mapping debugger (Hygon gfx936 MMAC, "
               "AMD CDNA MFMA)")


class Command(NamedTuple):
    name: str
    module: str                  # imported only when the command is named
    help: str | None = None   # the line in `gfxsim --help`; None: read from the module's source


BUILTIN = (
    Command("layout", "gfxsim.cli.layout_cmd", "matrix-instruction register layouts (calculator)"),
    Command("hip", "gfxsim.cli.hip_cmd", "compile and inspect HIP kernels; run your own HIP source or .s"),
    Command("triton", "gfxsim.cli.triton_cmd", "run a @triton.jit kernel (compiled for gfx942 by triton) on the asm "
            "front end"),
)


def plugin_commands() -> list[Command]:
    """Entry points of group ``gfxsim.commands``, by name (first of duplicates), built-ins left out."""
    from .entrypoints import group_entries
    builtin = {c.name for c in BUILTIN}
    out = {}
    for name, value in sorted(group_entries(PLUGIN_GROUP), key=lambda e: e[0]):
        if name not in builtin and name not in out:
            out[name] = Command(name, value)
    return list(out.values())


def commands(plugins: bool = True) -> list[Command]:
    """Every sub-command, in `gfxsim --help` order: the built-ins, then the plugins by name."""
    return [*BUILTIN, *(plugin_commands() if plugins else ())]


def help_line(cmd: Command) -> str:
    """``cmd.help``, or the help line read from its module's source without importing it."""
    if cmd.help is not None:
        return cmd.help
    text = _source_help(cmd.module, cmd.name)
    return text if text is not None else f"(from {cmd.module}; see gfxsim {cmd.name} --help)"


def _module_file(modname: str) -> str | None:
    """Path of a module's source, found without executing it or any parent package."""
    from importlib.machinery import PathFinder
    from importlib.util import find_spec
    parts = modname.split(".")
    try:
        spec = find_spec(parts[0])
        for i in range(1, len(parts)):
            if spec is None or not spec.submodule_search_locations:
                return None
            spec = PathFinder.find_spec(".".join(parts[:i + 1]), list(spec.submodule_search_locations))
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.has_location else None


def _source_help(modname: str, name: str) -> str | None:
    import ast
    path = _module_file(modname)
    if not path or not path.endswith(".py"):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_parser"
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == name):
            for kw in node.keywords:
                if kw.arg == "help" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    return kw.value.value
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "HELP" for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    return None


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help shows its default: " (default: X)" is added unless the help already says
    "default", the default is None, or the option is a flag (store_true/store_false/count)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("default" in text or default is None or default is argparse.SUPPRESS or default is False
                or isinstance(action, (argparse._StoreConstAction, argparse._CountAction,
                                       argparse._HelpAction, argparse._VersionAction))):
            return text
        if not action.option_strings and action.nargs not in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else default
        return f"{text} (default: {shown})".strip() if text else f"(default: {shown})"


class Parser(argparse.ArgumentParser):
    """gfxsim's parsers (sub-parsers inherit the class): help texts show the defaults."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def walk_parsers(parser):
    """The parser and every sub-parser below it, depth first, each once."""
    seen, stack = [], [parser]
    while stack:
        p = stack.pop(0)
        if any(p is q for q in seen):
            continue
        seen.append(p)
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                stack.extend(a.choices.values())
    return seen


def given_options(parser, argv) -> set:
    """The dests the command line set explicitly (an option given with its default value included):
    ``argv`` parsed again with every default suppressed."""
    parsers = walk_parsers(parser)
    saved = [(a, a.default) for p in parsers for a in p._actions]
    saved_defaults = [(p, p._defaults) for p in parsers]
    try:
        for a, _ in saved:
            a.default = argparse.SUPPRESS
        for p in parsers:
            p._defaults = {}
        ns, _ = parser.parse_known_args(argv)
        return set(vars(ns))
    except SystemExit:
        return set()
    finally:
        for a, d in saved:
            a.default = d
        for p, d in saved_defaults:
            p._defaults = d


def _version() -> str:
    from .. import __version__
    return __version__


def _parser(real, listed) -> argparse.ArgumentParser:
    """Top-level parser: the commands in ``real`` get their sub-parsers (their modules are imported),
    those in ``listed`` an entry with their help line only; in `gfxsim --help` order."""
    p = Parser(prog="gfxsim", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    rank = {c.name: i for i, c in enumerate(BUILTIN)}
    chosen = {c.name: (c, False) for c in listed}
    chosen.update({c.name: (c, True) for c in real})
    for c, build in sorted(chosen.values(), key=lambda cb: (cb[0].name not in rank, rank.get(cb[0].name, 0),
                                                              cb[0].name)):
        if build:
            importlib.import_module(c.module).add_parser(sub)
        else:
            sub.add_parser(c.name, help=help_line(c))
    return add_error_options(p)


def add_error_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--traceback`` on the top-level parser and after every command (a sub-parser leaves its
    default to the top-level one), and the exit statuses in every parser's help."""
    for i, p in enumerate(walk_parsers(parser)):
        if not any("--traceback" in a.option_strings for a in p._actions):
            p.add_argument("--traceback", action="store_true", default=False if i == 0 else argparse.SUPPRESS,
                           help="on an error, print the whole stack instead of one line"
                                + (" (also accepted after the command)" if i == 0 else ""))
        if p.epilog is None:
            p.epilog = EXIT_HELP
    return parser


def build_parser(names=None) -> argparse.ArgumentParser:
    """The full parser: every sub-command's module imported and its sub-parser built (``names``:
    only those commands). ``main`` builds only the sub-parser of the command it is given."""
    cmds = commands()
    if names is not None:
        unknown = set(names) - {c.name for c in cmds}
        if unknown:
            raise NotFoundError(f"unknown gfxsim command(s): {', '.join(sorted(unknown))}")
        cmds = [c for c in cmds if c.name in names]
    return _parser(cmds, [])


def _parser_for(argv) -> argparse.ArgumentParser:
    """The parser ``main`` needs for ``argv``: with a command first, that command's sub-parser alone
    (a built-in one needs no entry-point scan); otherwise (--help, --version, nothing, an unknown
    name, a command after an option) every command listed, and a command named later built."""
    first = next((a for a in argv if not a.startswith("-")), None)
    cmd = next((c for c in BUILTIN if c.name == first), None)
    if cmd is not None and argv[0] == first:
        return _parser([cmd], [])
    cmds = commands()
    cmd = next((c for c in cmds if c.name == first), None)
    if cmd is not None and argv[0] == first:
        return _parser([cmd], [])
    return _parser([cmd] if cmd else [], [c for c in cmds if c is not cmd])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return _main(argv)
    except KeyboardInterrupt:        # Ctrl-C: one line, no traceback (the shell's 128 + SIGINT)
        name = next((a for a in argv if not a.startswith("-")), None)
        print(f"gfxsim{' ' + name if name else ''}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def script():
    """The console script and ``python -m gfxsim``: ``main()``, then the process ends without the
    interpreter's teardown. A run's report holds millions of arrays and objects, which teardown frees
    one by one although the process is ending (0.5 s after a 16K decode with provenance, 0.1 s
    without). stdout and stderr are flushed and the atexit handlers run first (logging, weakref
    finalizers such as temporary directories, dask's), so nothing but that freeing is skipped.
    Memory the run frees is kept for its next arrays (procmem.keep_freed_pages), numpy's arrays
    are mapped in small pages (procmem.small_pages), and the cyclic garbage collector runs less
    often (procmem.collect_less)."""
    import atexit
    import os

    from gfxsim.procmem import collect_less, keep_freed_pages, small_pages
    keep_freed_pages()
    small_pages()
    collect_less()
    try:
        rc = main()
    except SystemExit as e:
        rc = e.code
    if rc is None:
        rc = 0
    elif not isinstance(rc, int):
        print(rc, file=sys.stderr)
        rc = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):    # a closed pipe (`gfxsim ... | head`) or a closed stream
            pass
    os._exit(rc)


def _main(argv) -> int:
    parser = _parser_for(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    args.given_options = given_options(parser, argv)
    return run_command(args, args.command)


def run_command(args: argparse.Namespace, command: str) -> int:
    """``args.func(args)``, ended as gfxsim.cli.failures says when it raises. Around it, the numba
    signatures of this kind of command are remembered (gfxsim.jitrecord: loaded ahead at the next
    start by prewarm's thread, written after a command that ran numba)."""
    from .. import jitrecord
    jitrecord.expect(command_kind(args, command))
    try:
        rc = args.func(args) or 0
    except BrokenPipeError:          # `gfxsim layout ... | head`
        return 0
    except Exception as e:           # noqa: BLE001 -- failures.report decides whose error it is
        from .failures import report
        return report(e, command, full=getattr(args, "traceback", False))
    jitrecord.remember()
    return rc


def command_kind(args: argparse.Namespace, command: str) -> str:
    """What decides which compiled signatures a command uses: the command and each of its settings
    that is a word, a switch or unset (kernel, front end, arch, provenance...). Numbers (sizes,
    seeds) are left out: a kind's record keeps what each of its commands used, so a size that takes
    another path (a wide batch, a narrow wave) adds its signatures rather than a record of its own."""
    settings = sorted((k, v) for k, v in vars(args).items()
                      if k not in ("func", "given_options") and (v is None or isinstance(v, (str, bool))))
    return repr([command, settings])


if __name__ == "__main__":
    script()
