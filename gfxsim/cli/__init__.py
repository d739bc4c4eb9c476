"""The `gfxsim` command: one sub-command per module, each registering its own parser.

Packages that depend on gfxsim (``visualize``) add sub-commands through the entry-point group
``gfxsim.commands`` (a module with ``add_parser(subparsers)``), so gfxsim never imports them.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from importlib.metadata import entry_points

from . import hip_cmd, layout_cmd

COMMANDS = [layout_cmd, hip_cmd]


def _plugin_commands():
    for ep in sorted(entry_points(group="gfxsim.commands"), key=lambda e: e.name):
        yield importlib.import_module(ep.value)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gfxsim", description="wave64 matrix-instruction simulator and "
                                "fragment-mapping debugger (Hygon gfx936 MMAC, AMD CDNA MFMA)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for mod in [*COMMANDS, *_plugin_commands()]:
        mod.add_parser(sub)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except BrokenPipeError:          # `gfxsim layout ... | head`
        return 0
    except (KeyError, ValueError, IndexError, FileNotFoundError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        print(f"gfxsim {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
