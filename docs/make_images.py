"""Regenerate the pictures in docs/img with the exact commands README.md shows.

    python docs/make_images.py            # rewrites docs/img/*.png
    python docs/make_images.py --out DIR  # the same commands, pictures written to DIR instead

The commands are read from README.md, not copied here: every line of a README code block of the
form ``gfxsim plot ... -o docs/img/NAME`` is one picture, run as written (through
gfxsim.cli.main) with only the directory of -o changed when --out is given. Every picture the
README embeds (``![...](docs/img/NAME)``) must have such a command; the script fails otherwise.
"""
from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
IMG = "docs/img/"

_COMMAND = re.compile(r"^\s*(gfxsim plot .*?-o\s+" + re.escape(IMG) + r"(\S+))\s*$", re.M)
_EMBED = re.compile(r"!\[[^\]]*\]\(" + re.escape(IMG) + r"([^)\s]+)\)")


def readme_commands(text: str | None = None) -> dict[str, str]:
    """picture name -> the README's command line that draws it."""
    text = README.read_text(encoding="utf-8") if text is None else text
    commands = {}
    for m in _COMMAND.finditer(text):
        commands.setdefault(m.group(2), m.group(1))
    missing = sorted(set(_EMBED.findall(text)) - set(commands))
    if missing:
        raise SystemExit(f"{README}: picture(s) {', '.join(missing)} embedded without a "
                         f"`gfxsim plot ... -o {IMG}NAME` command that draws them")
    return commands


def make_images(out: Path | str | None = None, *, names=None) -> list[Path]:
    """Run each README command (``names``: only those pictures); return the files written."""
    from gfxsim.cli import main
    out = Path(out) if out is not None else ROOT / IMG
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, command in readme_commands().items():
        if names is not None and name not in names:
            continue
        argv = shlex.split(command)[1:]
        i = argv.index("-o")
        argv[i + 1] = str(out / name)
        print(f"$ {command}" + (f"   (-o {argv[i + 1]})" if out != ROOT / IMG else ""), flush=True)
        rc = main(argv)
        if rc:
            raise SystemExit(f"`{command}` failed with exit code {rc}")
        written.append(out / name)
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", metavar="DIR", help=f"write the pictures here (default: {IMG} of the repository)")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these pictures (default: all)")
    args = p.parse_args(argv)
    make_images(args.out, names=set(args.names) or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
