"""The gfxsim command run in-process, as tests read it."""
from gfxsim.cli import main


def cli(capsys, *argv):
    """(exit status, stdout, stderr) of ``gfxsim ARGV...``; argparse's usage errors included."""
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:          # argparse's own usage errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def no_seconds(x):
    """A JSON report with every key naming seconds left out, at any depth (what two runs that must
    report the same thing may still differ in)."""
    if isinstance(x, dict):
        return {k: no_seconds(v) for k, v in x.items() if "second" not in k}
    if isinstance(x, list):
        return [no_seconds(v) for v in x]
    return x
