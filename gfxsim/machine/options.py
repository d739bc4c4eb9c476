"""LaunchOptions: how a launch runs, whichever front end made its kernel.

``launch()`` builds one from its keywords (or takes ``options=``); ``gfxsim.asm.run.run_asm``
takes the same record. Frozen and keyword-only; every field is validated on construction, a
rejected value is a ValueError of one sentence naming the field.
"""
from __future__ import annotations

import dataclasses
import numbers
import os
from dataclasses import dataclass
from typing import Protocol, runtime_checkable
from collections.abc import Callable
from ..errors import ArgumentError
from .schedule import Schedule, parse_schedule

MAX_STEPS = 50_000_000
MAX_TRACE_BYTES = 8 << 30       # a third of a 24 GiB machine: a 16K decode's full trace is ~2.7 GiB


def fold_default() -> bool:
    """Whether launches fold a batch's provenance (fold.py) unless told: on, unless the environment
    says GFXSIM_FOLD=0 (every member's provenance kept, for comparison)."""
    return os.environ.get("GFXSIM_FOLD", "1") != "0"


@dataclass(frozen=True, kw_only=True)
class LaunchOptions:
    """How one launch runs (not what it runs: kernel, grid, arguments and arch are launch's own)."""

    trace: bool = True
    """Keep the full per-lane trace (every statement's operands); off, instructions are only counted.

    Default: True."""

    provenance: bool = True
    """Carry the identity of every byte (tokens, dims, matrix results) through the kernel; off, the
    provenance-based findings do not run and the Run says so (``Run.checks_not_run``).

    Default: True."""

    check_races: bool = True
    """Report LDS accesses of different waves between the same barriers that conflict.

    Default: True."""

    lds_bytes: int | None = None
    """Bytes of LDS each workgroup gets (at most the arch's); an asm kernel's comes from its descriptor.

    Default: None (the arch's LDS size)."""

    batch: int = 1
    """Workgroups run side by side: every wave statement then acts on ``batch`` waves at once.

    Default: 1."""

    batch_order: tuple = (0, 1, 2)
    """The grid axes in the order batches take workgroups, fastest first (0, 1, 2: x, y, z): a
    kernel whose control flow follows blockIdx.x batches best along y, (1, 0, 2).

    Default: (0, 1, 2) (x fastest, the order of workgroups run one at a time)."""

    provenance_batch: int | None = None
    """With provenance, at most this many workgroups side by side (bounds ``batch``: the memory a
    batch whose provenance cannot fold takes).

    Default: None (no bound)."""

    fold_apart: tuple = ()
    """With provenance, the grid axes along which a batch's workgroups start in classes of their own
    (fold.py): a kernel whose control flow follows an axis (the prefill's query block, whose causal
    tail falls in another chunk) would otherwise fold them into one class until they part, and run
    the batch again from its start.

    Default: () (every batch starts as one class)."""

    unfolded_batch: int | None = None
    """With provenance, at most this many workgroups side by side in a batch that keeps every
    member's provenance (folding off, or a folded attempt whose members parted): such a batch runs
    again in batches of this many, each tried folded first. A batch that folds keeps one member's
    provenance per class, so it may be larger (``batch``, bounded by ``provenance_batch``).

    Default: None (no bound)."""

    fold: bool | None = None
    """With provenance, keep one representative member's provenance per class of a batch and a
    shift per member (fold.py); a batch whose members part runs again with finer classes or
    unfolded, with the same results either way.

    Default: None (``fold_default()``: on unless GFXSIM_FOLD=0)."""

    progress: Callable[[int, int], object] | None = None
    """Called ``progress(done, total)`` with the workgroups done: at the start and after every batch.

    Default: None (silent)."""

    max_steps: int = MAX_STEPS
    """Instructions one wave may execute (Python statements or asm instructions) before the launch
    stops as an endless loop (a StepLimit error naming the bound).

    Default: 50,000,000."""

    max_trace_bytes: int | None = MAX_TRACE_BYTES
    """Bytes the full trace may hold (the values it records) before the launch stops (a StepLimit
    error naming the bound and what to do), so that no kernel takes the machine's memory.

    Default: 8 GiB; None: no bound."""

    schedule: str | None = None
    """The order the waves of a workgroup run in between barriers: ``in-order``, ``reverse`` or
    ``random:SEED`` (schedule.py); another order than in-order makes a race show in the numbers.

    Default: None (the enclosing ``schedule.scheduled`` scope's, else GFXSIM_SCHEDULE, else in-order)."""

    def __post_init__(self):
        for name in ("trace", "provenance", "check_races"):
            if not isinstance(getattr(self, name), bool):
                raise ArgumentError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.fold is not None and not isinstance(self.fold, bool):
            raise ArgumentError(f"fold must be True, False or None (the environment's GFXSIM_FOLD), got {self.fold!r}")
        if self.lds_bytes is not None and (not _is_int(self.lds_bytes) or self.lds_bytes < 1):
            raise ArgumentError(f"lds_bytes must be a positive number of bytes or None, got {self.lds_bytes!r}")
        if not _is_int(self.batch) or self.batch < 1:
            raise ArgumentError(f"batch must be >= 1, got {self.batch}")
        if not isinstance(self.batch_order, tuple) or sorted(self.batch_order) != [0, 1, 2]:
            raise ArgumentError(f"batch_order must be a tuple ordering the grid axes (0, 1, 2), got {self.batch_order!r}")
        if not isinstance(self.fold_apart, tuple) or any(a not in (0, 1, 2) for a in self.fold_apart):
            raise ArgumentError(f"fold_apart must be a tuple of grid axes (0, 1, 2), got {self.fold_apart!r}")
        if self.provenance_batch is not None and (not _is_int(self.provenance_batch) or self.provenance_batch < 1):
            raise ArgumentError(f"provenance_batch must be >= 1 or None, got {self.provenance_batch!r}")
        if self.unfolded_batch is not None and (not _is_int(self.unfolded_batch) or self.unfolded_batch < 1):
            raise ArgumentError(f"unfolded_batch must be >= 1 or None, got {self.unfolded_batch!r}")
        if self.progress is not None and not callable(self.progress):
            raise ArgumentError(f"progress must be a function progress(done, total) or None, got "
                             f"{type(self.progress).__name__}")
        if self.schedule is not None:
            parse_schedule(self.schedule)
        if not _is_int(self.max_steps) or self.max_steps < 1:
            raise ArgumentError(f"max_steps must be >= 1, got {self.max_steps!r}")
        if self.max_trace_bytes is not None and (not _is_int(self.max_trace_bytes) or self.max_trace_bytes < 1):
            raise ArgumentError(f"max_trace_bytes must be a positive number of bytes or None, got {self.max_trace_bytes!r}")

    @property
    def folding(self) -> bool:
        """Whether batches fold: provenance on and ``fold`` (or its default) on."""
        return self.provenance and (fold_default() if self.fold is None else self.fold)

    @property
    def wave_order(self) -> Schedule:
        """The schedule the launch runs (``schedule`` or its default)."""
        return parse_schedule(self.schedule)

    @property
    def side_by_side(self) -> int:
        """Workgroups per batch: ``batch``, bounded by ``provenance_batch`` with provenance, and by
        ``unfolded_batch`` where provenance is kept unfolded."""
        n = self.batch
        if self.provenance and self.provenance_batch is not None:
            n = min(n, self.provenance_batch)
        if self.provenance and not self.folding and self.unfolded_batch is not None:
            n = min(n, self.unfolded_batch)
        return n

    def replace(self, **changes) -> LaunchOptions:
        """A copy with ``changes``, validated again."""
        return dataclasses.replace(self, **changes)


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


FIELDS = tuple(f.name for f in dataclasses.fields(LaunchOptions))


@runtime_checkable
class BatchBounded(Protocol):
    """A kernel function that bounds how many workgroups may run side by side with provenance,
    folded or not; a harness passes the bound on as ``LaunchOptions.provenance_batch``."""
    provenance_batch: int


@runtime_checkable
class UnfoldedBounded(Protocol):
    """A kernel function that bounds how many workgroups may run side by side where a batch keeps
    every member's provenance (a compiled twin: its register files then hold every VGPR byte's
    provenance of every member); a harness passes the bound on as ``LaunchOptions.unfolded_batch``."""
    unfolded_batch: int
