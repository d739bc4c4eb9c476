"""Workgroups: 1-16 waves sharing LDS, scheduled deterministically between barriers.

Each wave of a multi-wave workgroup runs its kernel function in its own thread, but only one runs
at a time: by default wave 0 runs until its next s_barrier (or its end), then wave 1, ... (the
launch's schedule, schedule.py, may order them otherwise). Once every live wave has arrived, the
barrier epoch advances and the round starts again. The order is a function of the epoch, so a run
is reproducible, and LDS races are found by epoch, independently of the order. A front end may
instead run one workgroup's waves side by side as the members of one wave (``waves_as_members``,
wavemembers.py), where that gives what this order gives.
"""
from __future__ import annotations

import threading

import numpy as np

from ..errors import ArgumentError
from .memory import LDS
from .wavemembers import MemberAccesses, WavesPart

# the first events, where more than half ran for at most half the members, make a run serial (member_event)
APART_CHECK = 128


class _Abort(BaseException):
    """Unwinds the other waves when one wave raised."""


class Workgroup:
    def __init__(self, machine, wg_ids, num_waves: int, fold=None, waves_as_members: bool = False):
        """``wg_ids``: one workgroup id, or a list of them run side by side as a batch (each wave then
        holds the same wave of every member, member m in columns m*wave_size ...). ``fold``: the
        batch's folded provenance (fold.Fold; None: every member's provenance is kept).
        ``waves_as_members``: one workgroup whose ``num_waves`` waves run side by side as the
        members of one wave (member m = wave m, one LDS; wavemembers.py)."""
        arch = machine.arch
        self.machine = machine
        self.ids = [tuple(wg_ids)] if isinstance(wg_ids[0], (int, np.integer)) else [tuple(i) for i in wg_ids]
        self.id = self.ids[0]
        self.num_waves = num_waves
        self.fold = fold
        self.waves_as_members = waves_as_members
        self.member_waves = None         # each member's wave id, where the members are waves
        self.accesses = None             # wavemembers.MemberAccesses, where the members are waves
        if waves_as_members:
            if len(self.ids) != 1 or fold is not None:
                raise ArgumentError(f"waves run as members of one workgroup, unfolded: got {len(self.ids)} "
                                    f"workgroups{' folded' if fold is not None else ''}")
            self.ids = self.ids * num_waves
            self.member_waves = list(range(num_waves))
            self.accesses = MemberAccesses(num_waves)
            self.lanes = arch.wave_size
            self.member_events = None            # each member's events so far (the wave's)
            self.epoch_starts = [[0] * num_waves]        # ... at each epoch's start
            self.member_records = []             # (record, epoch, counts before it, executing members)
            self.apart = 0                       # events of at most half the members (member_event)
        self.lds_watch = None                    # the LDS race watch of waves as members (lds_races.EpochWatch)
        self.members = len(self.ids)
        self.lds = LDS(machine.lds_bytes, arch.lds_banks, arch.lds_bank_bytes,
                       members=1 if waves_as_members else self.members,
                       prov_members=fold.classes if fold is not None else None)
        self.epoch = 0
        self._go = None

    def run(self, fn, make_wave):
        if self.waves_as_members:
            w = make_wave(self, 0)
            self.member_events = w.member_events
            fn(w)
            return
        if self.num_waves == 1:
            fn(make_wave(self, 0))
            return
        n = self.num_waves
        go = [threading.Semaphore(0) for _ in range(n)]
        yielded = threading.Semaphore(0)
        state = ["running"] * n           # running | barrier | done | error
        errors = [None] * n
        abort = threading.Event()
        self._go, self._yielded, self._abort = go, yielded, abort

        def body(i):
            go[i].acquire()
            try:
                if abort.is_set():
                    raise _Abort()
                fn(make_wave(self, i))
                state[i] = "done"
            except _Abort:
                state[i] = "done"
            except BaseException as e:           # noqa: BLE001 - re-raised by the scheduler
                errors[i] = e
                state[i] = "error"
            finally:
                yielded.release()

        self._state = state
        threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        try:
            while True:
                live = [i for i in range(n) if state[i] != "done"]
                if not live:
                    break
                for i in self.machine.schedule.order(self.epoch, live):
                    state[i] = "running"
                    go[i].release()
                    yielded.acquire()
                    if state[i] == "error":
                        raise errors[i]
                if all(s == "done" for s in state):
                    break
                self.epoch += 1
        finally:
            if any(s not in ("done",) for s in state) or any(errors):
                abort.set()
                for i in range(n):
                    if state[i] != "done":
                        go[i].release()
            for t in threads:
                t.join(timeout=5)

    def member_event(self, wave, n: int = 1):
        """Waves as members: one event (``n``: the last n, ``wave.steps`` counting them) of the
        members executing (``wave.live``; None: all). Where
        more than half of the first APART_CHECK instructions ran for at most half the members
        (waves whose paths part at once: one works while the others wait at the end), the
        side-by-side run costs more than the serial one (one wave's instructions at the whole
        width, masked): the workgroup runs serially, having lost little. Paths that part later
        (a tail chunk) run on side by side, each group of members straight on (run.execute)."""
        live, counts = wave.live, wave.member_events
        for m in range(self.num_waves) if live is None else live:
            counts[m] += n
        if wave.steps - n >= APART_CHECK:
            return
        for step in range(wave.steps - n + 1, min(wave.steps, APART_CHECK) + 1):     # each event's step number
            if live is not None and 2 * len(live) <= self.num_waves:
                self.apart += 1
            if step == APART_CHECK and 2 * self.apart > APART_CHECK:
                raise WavesPart(f"{self.apart} of the first {APART_CHECK} instructions ran for at most half the waves")

    def barrier(self, wave):
        if self.waves_as_members:        # every member (wave) is at a barrier or has ended
            self.epoch += 1
            self.epoch_starts.append(list(wave.member_events))
            return
        if self.num_waves == 1:
            self.epoch += 1
            return
        i = wave.wave_id
        self._state[i] = "barrier"
        self._yielded.release()
        self._go[i].acquire()
        if self._abort.is_set():
            raise _Abort()
