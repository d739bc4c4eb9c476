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
