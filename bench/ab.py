"""Side by side: a numpy yardstick (bench/yardstick.py, its own process, one BLAS thread) and a
gfxsim command, alternated A B A B ..., so each pair sees the same load of the moment.

Each pair gives a ratio (command seconds / yardstick seconds); a figure reports their min, median
and max beside the median seconds, the command's peak RSS and the machine's load average
(os.getloadavg) before and after. A command that runs past the per-figure timeout is killed and
reported as "over N s"; its mode is not tried at the kernel's larger shapes.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from bench.common import ROOT, child_env, failure_text, median, run_child

# the yardstick runs single-threaded, as the simulator's arithmetic does
ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                               "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")}


def load() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


class Yardstick:
    """`python -m bench.yardstick ARGS` kept running: ``run()`` times one call of its numpy implementation."""

    def __init__(self, args: list[str], timeout: float):
        self.timeout = timeout
        self.p = subprocess.Popen([sys.executable, "-m", "bench.yardstick", *args], cwd=ROOT,
                                  env=child_env(ONE_THREAD), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.ready = self._line()
        self.runs: list[float] = []

    def _line(self) -> dict:
        box = {}
        th = threading.Thread(target=lambda: box.setdefault("line", self.p.stdout.readline()), daemon=True)
        th.start()
        th.join(self.timeout)
        line = box.get("line", "")
        if not line:
            self.p.kill()
            err = self.p.stderr.read().strip().splitlines() if not th.is_alive() else []
            raise RuntimeError(f"the numpy yardstick {'timed out' if th.is_alive() else 'failed'}"
                               + (f": {err[-1][:160]}" if err else ""))
        return json.loads(line)

    def run(self) -> float:
        self.p.stdin.write("run\n")
        self.p.stdin.flush()
        s = self._line()["seconds"]
        self.runs.append(s)
        return s

    def close(self) -> int | None:
        """End it; its peak RSS over the timed calls."""
        try:
            self.p.stdin.close()
            rss = self._line().get("peak_rss_bytes")
        except (RuntimeError, ValueError, OSError):
            rss = None
        self.p.wait(timeout=60)
        return rss


def pairs(yard: Yardstick | None, cmd: list[str], repeat: int, timeout: float, mem_limit: int) -> dict:
    """``repeat`` pairs (yardstick call, then the command): seconds, RSS, ratios, load, error."""
    runs, rss, ratios, err, timed_out, last = [], [], [], None, False, None
    before = load()
    for _ in range(repeat):
        a = yard.run() if yard is not None else None
        r = run_child(cmd, timeout=timeout, mem_limit_bytes=mem_limit)
        last = r
        if r["rc"] != 0 or r["timed_out"]:
            timed_out = r["timed_out"]
            err = f"over {timeout:.0f} s (killed)" if timed_out else failure_text(r, timeout)
            break
        runs.append(r["seconds"])
        rss.append(r["rss_bytes"])
        if a:
            ratios.append(r["seconds"] / a)
    return dict(runs=runs, rss=max(rss) if rss else None, ratios=ratios, error=err, timed_out=timed_out,
                load_before=before, load_after=load(), stdout=last["stdout"] if last else "")


def ratio_fields(ratios: list[float]) -> dict:
    if not ratios:
        return dict(ratio=None, ratio_min=None, ratio_max=None, ratio_text="")
    lo, mid, hi = min(ratios), median(ratios), max(ratios)
    text = f"{mid:.3g}x numpy" + (f" ({lo:.3g}-{hi:.3g})" if len(ratios) > 1 else "")
    return dict(ratio=mid, ratio_min=lo, ratio_max=hi, ratio_text=text, ratios=ratios)
