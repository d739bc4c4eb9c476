"""Wave schedules: the order the waves of a workgroup run in between two barriers.

Waves of one workgroup run one at a time, each until its next s_barrier or its end (workgroup.py).
On hardware they interleave in any order, so a kernel whose result depends on the order (a missing
barrier, LDS read before another wave wrote it) is wrong even when the default order happens to
give the right numbers. ``in-order`` (wave 0 first) is the default and reproduces what the race
finding alone reports; ``reverse`` and ``random:SEED`` run the same kernel in other legal orders,
so a race shows in the numbers too. The order depends on the barrier epoch only, never on the
workgroup, so a batch of workgroups run side by side is ordered as each would be alone.
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError

NAMES = ("in-order", "reverse", "random:SEED")


@dataclass(frozen=True)
class Schedule:
    """One wave order: ``kind`` in-order, reverse or random (with ``seed``)."""
    kind: str = "in-order"
    seed: int | None = None

    def order(self, epoch: int, waves: list) -> list:
        """``waves`` (the live wave ids, ascending) in the order they run in barrier epoch ``epoch``."""
        if self.kind == "in-order" or len(waves) < 2:
            return list(waves)
        if self.kind == "reverse":
            return list(reversed(waves))
        rng = np.random.default_rng((self.seed, epoch))
        return [waves[i] for i in rng.permutation(len(waves))]

    def __str__(self) -> str:
        return f"random:{self.seed}" if self.kind == "random" else self.kind


IN_ORDER = Schedule()
_SCOPE: ContextVar = ContextVar("gfxsim_schedule", default=None)


@contextmanager
def scheduled(schedule: str | Schedule | None):
    """Launches inside the ``with`` that leave their schedule unset use ``schedule`` (how a command
    such as `gfxsim run --schedule` reaches every launch of its harness); None changes nothing."""
    token = _SCOPE.set(parse_schedule(schedule) if schedule is not None else _SCOPE.get())
    try:
        yield
    finally:
        _SCOPE.reset(token)


def parse_schedule(text: str | Schedule | None) -> Schedule:
    """``in-order``, ``reverse`` or ``random:SEED`` (SEED a non-negative integer) as a Schedule;
    None: the enclosing ``scheduled`` scope's, else the environment's GFXSIM_SCHEDULE, else in-order."""
    if isinstance(text, Schedule):
        return text
    if text is None:
        if _SCOPE.get() is not None:
            return _SCOPE.get()
        text = os.environ.get("GFXSIM_SCHEDULE") or "in-order"
    if not isinstance(text, str):
        raise ArgumentError(f"schedule must be one of {', '.join(NAMES)}, got {text!r}")
    t = text.strip().lower()
    if t in ("in-order", "reverse"):
        return Schedule(t)
    m = re.fullmatch(r"random:(\d+)", t)
    if m:
        return Schedule("random", int(m.group(1)))
    raise ArgumentError(f"schedule must be one of {', '.join(NAMES)} (SEED a number >= 0), got {text!r}")
