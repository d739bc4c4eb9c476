"""Progress of a sweep on stderr, told of each point as it finishes (gfxsim run's display, for points).

On a terminal one line redrawn in place (and every second while no point finishes), e.g.
``[######..........] 6/16 points (1 failed) 0:42 elapsed ETA 1:10  decode``;
otherwise a plain line every ``interval`` seconds (none for a sweep that finishes sooner) and one
at the end. The ETA extrapolates the points done so far over those left. Nothing goes to stdout.
"""
from __future__ import annotations

import sys
import threading
import time

from gfxsim.progress import BAR_WIDTH, _clock_text


class SweepProgress:
    def __init__(self, total: int, label: str = "", stream=None, quiet: bool = False, tty: bool | None = None,
                 interval: float = 5.0):
        self.stream = sys.stderr if stream is None else stream
        self.total, self.label, self.quiet, self.interval = total, label, quiet, interval
        if tty is None:
            try:
                tty = bool(self.stream.isatty())
            except (AttributeError, ValueError):
                tty = False
        self.tty = tty
        self.done = self.failed = 0
        self._finished = False
        self._shown = None                    # (done, failed) of the last plain line
        self.t0 = self._last = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        if tty and not quiet and total:
            threading.Thread(target=self._tick, name="gfxsim-sweep-progress", daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finish()

    def point_done(self, ok: bool) -> None:
        with self._lock:
            self.done += 1
            self.failed += not ok
            now = time.monotonic()
            if self.tty or now - self._last >= self.interval:
                self._draw(now)

    def text(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        elapsed = now - self.t0
        eta = ""
        if 0 < self.done < self.total:
            eta = f" ETA {_clock_text(elapsed / self.done * (self.total - self.done))}"
        failed = f" ({self.failed} failed)" if self.failed else ""
        return (f"{self.done}/{self.total} points{failed} {_clock_text(elapsed)} elapsed{eta}"
                f"{'  ' + self.label if self.label else ''}")

    def _draw(self, now):
        if self.quiet:
            return
        self._last = now
        if self.tty:
            full = BAR_WIDTH * self.done // max(self.total, 1)
            self.stream.write(f"\r[{'#' * full}{'.' * (BAR_WIDTH - full)}] {self.text(now)}\x1b[K")
        else:
            self._shown = (self.done, self.failed)
            self.stream.write(f"gfxsim sweep: {self.text(now)}\n")
        self.stream.flush()

    def _tick(self):
        while not self._stop.wait(1.0):
            with self._lock:
                self._draw(time.monotonic())

    def finish(self) -> None:
        self._stop.set()
        with self._lock:
            if self.quiet or not self.total or self._finished:
                return
            self._finished = True
            if self._shown != (self.done, self.failed):      # the last plain line said it already
                self._draw(time.monotonic())
            if self.tty:
                self.stream.write("\n")
                self.stream.flush()
