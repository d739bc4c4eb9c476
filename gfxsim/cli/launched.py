"""What `gfxsim hip run` and `gfxsim triton` do with a finished launch: the output folder (made
before the run, so a bad -o fails first), every buffer as NAME.npy and report.json there, and the
report printed as text or JSON (gfxsim/hip/report.py makes both)."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UsageError


def add_launch_options(p, units: str, outputs: str) -> None:
    """The options `gfxsim hip run` and `gfxsim triton` share after their own: how the launch runs
    (``units`` run side by side with --batch) and what it writes (every one of ``outputs``)."""
    p.add_argument("--trace", action="store_true", help="keep the full per-lane trace")
    p.add_argument("--no-provenance", dest="provenance", action="store_false",
                   help="numbers only: no tags travel, no token-level findings (faster)")
    p.add_argument("--batch", type=int, default=1, help=f"{units} run side by side")
    add_schedule_option(p)
    p.add_argument("-o", "--output", metavar="DIR", help=f"write every {outputs} as DIR/NAME.npy and the JSON "
                                                         "report as DIR/report.json")
    p.add_argument("--report", choices=("text", "json"), default="text", help="what to print")


# gfxsim.machine.schedule.NAMES, named here so building the parser loads no machine module (`gfxsim
# run` begins its inputs as soon as its arguments are parsed, and the machine imports beside them);
# tests/gfxsim/cli/test_startup.py holds the two equal
SCHEDULE_NAMES = ("in-order", "reverse", "random:SEED")
DEFAULT_SCHEDULE = "in-order"


def add_schedule_option(p) -> None:
    """``--schedule``: the wave order between barriers (gfxsim.machine.schedule), checked as it is parsed."""
    def schedule(text: str) -> str:
        if text == DEFAULT_SCHEDULE:    # argparse passes the default through here too: it is valid as it is
            return text
        from ..machine.schedule import parse_schedule
        try:
            return str(parse_schedule(text))
        except Exception as e:          # argparse names the option and exits 2
            raise argparse.ArgumentTypeError(str(e)) from None
    p.add_argument("--schedule", type=schedule, default=DEFAULT_SCHEDULE, metavar="{" + ",".join(SCHEDULE_NAMES) + "}",
                   help="the order the waves of a workgroup run in between barriers (default in-order): another "
                        "order makes a missing barrier show in the numbers as well as in the lds-race finding")


def output_dir(output: str | None) -> Path | None:
    """``-o DIR``, created; None without it."""
    if not output:
        return None
    out = Path(output)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"-o {output}: cannot create it: {e.strerror or e}") from e
    return out


def emit(launched, out_dir: Path | None, as_json: bool, *, source: str, grid, block) -> int:
    """Write and print a launch's outputs and report; the command's exit status (0)."""
    import json

    import numpy as np

    from ..hip.report import report, text
    rep = report(launched, source=source, grid=grid, block=block)
    if out_dir is not None:
        for n, a in launched.outputs.items():
            np.save(out_dir / f"{n}.npy", a)
        (out_dir / "report.json").write_text(json.dumps(rep, default=str) + "\n")
    if as_json:
        print(json.dumps(rep, default=str))
    else:
        print(text(launched, source=source, block=block))
        if out_dir is not None:
            print(f"  written: {', '.join(f'{n}.npy' for n in launched.outputs)}, report.json in {out_dir}")
    return 0
