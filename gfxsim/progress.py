"""Progress of long simulator work on stderr (`gfxsim run`, `gfxsim plot run`).

One ``Progress`` per run of a kernel: the host code names each launch as it starts
(``start_launch``) and hands ``progress.update`` to ``launch(..., progress=...)``, which calls it as
``update(done, total)`` with the workgroups of that launch done so far ((0, total) first).

- stream a terminal: one line redrawn in place with ``\\r`` (at most every ``min_interval``
  seconds, 0.1 by default), e.g.
  ``[#####...........] 1/2 launches 24/64 workgroups 0:12 elapsed ETA 0:18  paged_attention_decode (context 4096)``,
  ended with a newline by ``finish()``;
- otherwise: a plain line every ``interval`` seconds (5 by default), the first one ``interval``
  seconds after the start, so work that finishes sooner prints nothing at all, e.g.
  ``gfxsim: paged_attention_decode (context 4096): 1/2 launches, 24/64 workgroups, 0:12 elapsed, ETA 0:18``;
- ``quiet=True``: nothing.

The ETA is that of the current launch, from its workgroups done so far (launches differ too much
in cost per workgroup to extrapolate across them); without workgroup counts there is no ETA.
Nothing is ever written to stdout.
"""
from __future__ import annotations

import shutil
import sys
import threading
import time
from typing import TextIO
from collections.abc import Callable

BAR_WIDTH = 16


def _monotonic() -> float:
    return time.monotonic()


def _clock_text(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """Progress display of ``total_launches`` launches (None: not known yet; ``start_launch`` may
    say it). Use as a context manager, or call ``finish()`` at the end.

    stream: default sys.stderr (at construction). tty: draw the bar; default stream.isatty().
    min_interval: seconds between redraws of the bar. interval: seconds between plain lines.
    clock: seconds, default time.monotonic. label: what runs, e.g. "context 4096".
    width: columns of the terminal, default its size. ticker: a daemon thread that redraws while
    no callback comes (elapsed time keeps moving); default on with the real clock, off with an
    injected one."""

    def __init__(self, total_launches: int | None = None, stream: TextIO | None = None, quiet: bool = False,
                 min_interval: float = 0.1, interval: float = 5.0, clock: Callable[[], float] | None = None,
                 label: str = "", tty: bool | None = None, width: int | None = None, ticker: bool | None = None):
        self.stream = sys.stderr if stream is None else stream
        self.quiet = quiet
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            try:
                tty = bool(isatty and isatty())
            except ValueError:                        # a closed stream
                tty = False
        self.tty = tty
        self.min_interval = min_interval
        self.interval = interval
        self.clock = _monotonic if clock is None else clock
        self.label = label                            # e.g. "context 4096", shown before the launch
        self.width = width
        self.total_launches = total_launches
        self.launch = 0                               # 1-based index of the current launch, 0 before the first
        self.name = ""
        self.done = 0                                 # workgroups of the current launch done
        self.total = None                             # workgroups of the current launch, None if not told
        self.workgroups_done = 0                      # over the finished launches
        self.t0 = self.clock()
        self.launch_t0 = self.t0
        self._last_draw = None                        # clock of the last redraw (tty) or line (otherwise)
        self._drawn = 0                               # length of the bar on screen (tty)
        self._lines = 0                               # plain lines written (not a tty)
        self._finished = False
        self._lock = threading.RLock()
        self._stop = None
        # a launch may run all its workgroups in one batch (one callback at its end), and data
        # generation and references call nothing: a ticker thread keeps elapsed time moving.
        # Off with an injected clock (tests) unless asked for.
        if (clock is None if ticker is None else ticker) and not quiet:
            self._stop = threading.Event()
            period = max(min_interval, 0.25) if self.tty else min(interval, 0.5)
            threading.Thread(target=self._tick, args=(period,), name="gfxsim-progress", daemon=True).start()

    # ---- what the host code calls ------------------------------------------------------------

    def start_launch(self, name: str, launches: int | None = None) -> None:
        """Launch ``name`` starts (the previous one, if any, is done); ``launches``: how many this
        run makes in all, when the caller knows it."""
        with self._lock:
            self._start_launch(name, launches)

    def _start_launch(self, name, launches):
        if launches is not None:
            self.total_launches = launches
        if self.launch and self.total is not None:
            self.workgroups_done += self.total
        self.launch += 1
        if self.total_launches is not None and self.launch > self.total_launches:
            self.total_launches = self.launch
        self.name, self.done, self.total = name, 0, None
        self.launch_t0 = self.clock()
        self._maybe_draw()

    def update(self, done: int, total: int) -> None:
        """The launch callback: ``done`` of the ``total`` workgroups of the current launch are done."""
        with self._lock:
            self.done, self.total = int(done), int(total)
            self._maybe_draw(force=self.tty and done == 0)

    __call__ = update

    def finish(self, ok: bool = True) -> None:
        """The work is over: end the bar with a newline (terminal; drawn full when ``ok``), or
        write a last line when a periodic line was written (otherwise; not when not ``ok``: the
        error says the rest). Idempotent."""
        if self._stop is not None:
            self._stop.set()
        with self._lock:
            self._finish(ok)

    def _finish(self, ok):
        if self._finished or self.quiet:
            self._finished = True
            return
        self._finished = True
        if self.tty:
            if self._drawn:
                if ok:
                    self._draw_bar(final=True)
                self._write("\n")
        elif self._lines and ok:
            self._write(f"gfxsim: {self.text(final=True)}\n")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.finish(ok=exc_type is None)

    # ---- the text ----------------------------------------------------------------------------

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def eta(self) -> float | None:
        """Seconds left in the current launch, from its rate so far; None when not known."""
        if not self.total or not self.done:
            return None
        spent = self.clock() - self.launch_t0
        return spent * (self.total - self.done) / self.done

    def fraction(self) -> float | None:
        """The bar: the workgroups done of the current launch (as the ETA; the text counts the
        launches), else the launches done; None when neither is known."""
        if self.total:
            return min(1.0, self.done / self.total)
        if self.total_launches and self.launch:
            return (self.launch - 1) / self.total_launches
        return None

    def text(self, final: bool = False) -> str:
        """The figures: launch i/n, workgroups done, elapsed, ETA ("done" when final), and what runs.
        On a terminal the name comes last, so a narrow one cuts it rather than the figures."""
        what = " ".join(x for x in (self.name, f"({self.label})" if self.label and self.name else self.label) if x)
        parts = []
        if self.launch:
            parts.append(f"{self.launch}/{self.total_launches} launches" if self.total_launches
                         else f"launch {self.launch}")
        if self.total is not None:
            parts.append(f"{self.done}/{self.total} workgroups")
        parts.append(f"{_clock_text(self.elapsed())} elapsed")
        if final:
            parts.append("done")
        else:
            eta = self.eta()
            if eta is not None:
                parts.append(f"ETA {_clock_text(eta)}")
        if self.tty:
            return " ".join(parts) + (f"  {what}" if what else "")
        return (f"{what}: " if what else "") + ", ".join(parts)

    # ---- drawing -----------------------------------------------------------------------------

    def _maybe_draw(self, force: bool = False) -> None:
        if self.quiet or self._finished:
            return
        now = self.clock()
        if self.tty:
            if force or self._last_draw is None or now - self._last_draw >= self.min_interval:
                self._last_draw = now
                self._draw_bar()
        else:
            since = self.t0 if self._last_draw is None else self._last_draw
            if now - since >= self.interval:
                self._last_draw = now
                self._lines += 1
                self._write(f"gfxsim: {self.text()}\n")

    def _tick(self, period: float) -> None:
        while not self._stop.wait(period):
            with self._lock:
                self._maybe_draw()

    def _draw_bar(self, final: bool = False) -> None:
        frac = 1.0 if final else self.fraction()
        if frac is None:
            bar = "[" + "?" * BAR_WIDTH + "]"
        else:
            n = int(round(frac * BAR_WIDTH))
            bar = "[" + "#" * n + "." * (BAR_WIDTH - n) + "]"
        line = f"{bar} {self.text(final=final)}"
        width = self.width or shutil.get_terminal_size((80, 24)).columns
        line = line[:max(10, width - 1)]              # never wrap: \r only returns to the start of a line
        pad = " " * max(0, self._drawn - len(line))
        self._write("\r" + line + pad)
        self._drawn = len(line)

    def _write(self, s: str) -> None:
        try:
            self.stream.write(s)
            self.stream.flush()
        except (OSError, ValueError):                 # stderr closed or a broken pipe: progress is optional
            self.quiet = True


def launch_kwargs(progress: Progress | None, launch_fn: Callable, name: str, launches: int | None = None) -> dict:
    """Keywords for ``launch_fn(..., **launch_kwargs(...))``: starts launch ``name`` on ``progress``
    and passes its callback as ``progress=`` when ``launch_fn`` takes that keyword (older back ends
    do not: then only the launches are counted). ``{}`` when ``progress`` is None."""
    if progress is None:
        return {}
    progress.start_launch(name, launches)
    return {"progress": progress.update} if _takes_progress(launch_fn) else {}


def _takes_progress(fn: Callable) -> bool:
    import inspect
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "progress" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
