"""The waves of one workgroup run side by side as the members of one back-end wave.

A front end may run a workgroup's waves as the columns of one wave (member m = wave m, one shared
LDS, the members meeting at s_barrier together) instead of one after another between barriers
(workgroup.py). That is exact only where the order of the waves within a barrier epoch cannot
show: no two waves touch the same LDS or global bytes in one epoch with one of them storing
(a race, which the serial order resolves: wave 0's accesses first), no finding (the serial run
numbers and orders them), no error. ``MemberAccesses`` watches the global accesses for that; the
LDS's race state watches LDS (ds.py); a run that meets any of them, or whose waves part at once
(Workgroup.member_event: slower side by side), raises ``WavesPart`` and the launch runs the
workgroup again, serially (launch.run_batch). What a side-by-side run leaves is
then the serial run's: the buffers, and with ``serial_order`` its events' count and the matrix
instructions' records, renumbered and split per wave in the serial order.
"""
from __future__ import annotations

import itertools

import numpy as np

from . import member_words
from ..errors import ArgumentError, GfxSimError
from .mmalog import MmaRecord

_EMPTY_LO, _EMPTY_HI = np.iinfo(np.int64).max, np.iinfo(np.int64).min
_OWNER_WINDOW = 1 << 24                  # bytes: the widest window of store owners kept per buffer
_NO_OWNERS = np.zeros(0, np.int16)       # the compiled passes' stand-ins for what is not there
_NO_WRITTEN = np.zeros(4, bool)
_NO_SPANS = np.zeros((2, 0), np.int64)


class WavesPart(GfxSimError):
    """The waves run side by side met what only the serial order decides (see the module docstring);
    launch.run_batch catches it and runs the workgroup serially."""


class MemberAccesses:
    """Per barrier epoch, per buffer, the bytes each member stored (exact: an owner per byte over
    the window of bytes stored, one array lookup per access instead of a set search) and each member's
    span of bytes loaded ([lo, hi), the least and most over its loads: wider than the bytes, so
    a store outside it certainly meets no load of that member, and one inside may meet none,
    which costs a serial run, never a wrong answer)."""

    def __init__(self, members: int):
        self.members = members
        self.epoch = -1
        self.loads: dict = {}            # buffer name -> int64 [2, members]: each member's load lo, hi
        self.stored: dict = {}           # buffer name -> (first byte, owner + 1 per byte from there)
        self.undo: list | None = None    # where each store's old bytes are logged (launch._WavesAttempt)
        self._ids: dict = {}             # bytes per member -> owner + 1 of each byte (_owner_ids)

    def note(self, w, buf, addr: np.ndarray, nbytes: int, store: bool):
        """An access of ``nbytes`` per lane at byte ``addr`` [width] of ``buf`` by the active lanes."""
        act = w.exec.reshape(self.members, -1)
        a = addr.reshape(self.members, -1)
        if store:
            self._store(w, buf, a, act, nbytes)
            return
        if w.exec_full:
            lo, hi = a.min(axis=1), a.max(axis=1) + nbytes
        else:
            lo = np.where(act, a, _EMPTY_LO).min(axis=1)
            hi = np.where(act, a + nbytes, _EMPTY_HI).max(axis=1)
        self._load(w, buf, lo, hi, (a, act, nbytes))

    def note_span(self, w, buf, lo: int, hi: int, store: bool):
        """A load of bytes [lo, hi) of ``buf`` by every executing member (a scalar load)."""
        if store:
            raise ArgumentError("a scalar store is not watched (gfxsim.asm.run.waves_side_by_side)")
        self._epoch(w)
        on = list(range(self.members)) if w.live is None else list(w.live)
        stored = self.stored.get(buf.name)
        if stored is not None and on:    # a byte another member stored in this epoch
            base, own = stored
            o = own[min(max(lo - base, 0), own.size):min(max(hi - base, 0), own.size)]
            owners = set(np.unique(o).tolist()) - {0} if o.any() else set()
            if owners and (len(owners) > 1 or any(m + 1 not in owners for m in on)):
                raise WavesPart(f"a wave loads bytes of {buf.name!r} another stored in one barrier epoch")
        s = self.loads.get(buf.name)
        if s is None:
            s = self.loads[buf.name] = np.array([[_EMPTY_LO], [_EMPTY_HI]], np.int64).repeat(self.members, 1)
        if w.live is None:               # every member: in place, no gather and scatter
            np.minimum(s[0], lo, out=s[0])
            np.maximum(s[1], hi, out=s[1])
        else:
            s[0, on] = np.minimum(s[0, on], lo)
            s[1, on] = np.maximum(s[1, on], hi)

    def _epoch(self, w):
        if w.wg.epoch != self.epoch:
            self.epoch, self.loads, self.stored = w.wg.epoch, {}, {}

    def _owners(self, name: str, lo: int, hi: int) -> tuple:
        """The window of this epoch's store owners of buffer ``name`` grown to hold bytes [lo, hi):
        (its first byte, owner + 1 per byte, 0 where no member stored)."""
        had = self.stored.get(name)
        if had is not None:
            base, own = had
            if base <= lo and hi <= base + own.size:
                return had
            lo, hi = min(lo, base), max(hi, base + own.size)
        if hi - lo > _OWNER_WINDOW:      # a window this wide costs more than the serial run
            raise WavesPart(f"the waves store bytes of {name!r} over {hi - lo} bytes in one barrier epoch")
        grown = np.zeros(hi - lo, np.int16)
        if had is not None:
            grown[had[0] - lo:had[0] - lo + had[1].size] = had[1]
        self.stored[name] = (lo, grown)
        return self.stored[name]

    def _load(self, w, buf, lo, hi, where):
        self._epoch(w)
        stored = self.stored.get(buf.name)
        if stored is not None:           # a byte another member stored in this epoch
            a, act, nbytes = where
            base, own = stored
            for m in np.nonzero(act.any(axis=1))[0].tolist():
                mine = (a[m][act[m]][:, None] + np.arange(nbytes)).ravel() - base
                o = own[mine[(mine >= 0) & (mine < own.size)]]
                if ((o != 0) & (o != m + 1)).any():
                    raise WavesPart(f"a wave loads bytes of {buf.name!r} another stored in one barrier epoch")
        s = self.loads.get(buf.name)
        if s is None:
            s = self.loads[buf.name] = np.array([[_EMPTY_LO], [_EMPTY_HI]], np.int64).repeat(self.members, 1)
        s[0], s[1] = np.minimum(s[0], lo), np.maximum(s[1], hi)

    def _store(self, w, buf, a, act, nbytes):
        self._epoch(w)
        if act.all():                    # every lane: the bytes member by member, no mask to apply
            at = (a[:, :, None] + np.arange(nbytes)).reshape(-1)
            who = self._owner_ids(a.shape[1] * nbytes)
            lo, hi = a.min(axis=1), a.max(axis=1) + nbytes
        else:
            mi, li = np.nonzero(act)
            at = (a[mi, li][:, None] + np.arange(nbytes)).reshape(-1)
            who = np.repeat(mi + 1, nbytes).astype(np.int16)
            lo = np.where(act, a, _EMPTY_LO).min(axis=1)
            hi = np.where(act, a + nbytes, _EMPTY_HI).max(axis=1)
        s = self.loads.get(buf.name)
        if s is not None:                # a byte in another member's loads: spans first, then bytes
            near = (lo[None, :] < s[1][:, None]) & (s[0][:, None] < hi[None, :]) & \
                ~np.eye(self.members, dtype=bool)                          # [loader, storer]
            for loader in np.nonzero(near.any(axis=1))[0].tolist():
                mine = near[loader][who - 1]                               # bytes of the storers near it
                if (mine & (at >= s[0][loader]) & (at < s[1][loader])).any():
                    raise WavesPart(f"a wave stores bytes of {buf.name!r} another loaded in one barrier epoch")
        if at.size:                      # a byte another member stored, in this access or before
            base, own = self._owners(buf.name, int(at.min()), int(at.max()) + 1)
            i = at - base
            o = own[i]
            if ((o != 0) & (o != who)).any():
                raise WavesPart(f"two waves store bytes of {buf.name!r} in one barrier epoch")
            own[i] = who
            if (own[i] != who).any():    # two members' lanes wrote one owner here
                raise WavesPart(f"two waves store bytes of {buf.name!r} in one barrier epoch")
        if self.undo is not None:        # the bytes the store is about to overwrite (gathers: copies)
            self.undo.append((buf, at, buf.raw[at], None if buf.written is None else buf.written[at]))

    def load_words(self, w, buf, addr: np.ndarray, nbytes: int):
        """``VmemOps.global_load_words`` of the members with this watch, one compiled pass
        (member_words.load_watched): uint32 words [nbytes/4, width], or None having done nothing."""
        self._epoch(w)
        stored = self.stored.get(buf.name)
        base, own = stored if stored is not None else (0, _NO_OWNERS)
        s = self.loads.get(buf.name)
        spans = s if s is not None else np.array([[_EMPTY_LO], [_EMPTY_HI]], np.int64).repeat(self.members, 1)
        written = buf.written if buf.written is not None else _NO_WRITTEN
        out = np.empty((nbytes // 4, addr.shape[0]), np.uint32)
        code = member_words.load_watched(buf.raw.view(np.uint32), written.view(np.uint32), buf.written is not None, addr,
                                 w.exec, w.lanes, nbytes, buf.nbytes, base, own, stored is not None, spans, out)
        if code == member_words.STORED:
            raise WavesPart(f"a wave loads bytes of {buf.name!r} another stored in one barrier epoch")
        if code != member_words.DONE:
            return None
        if s is None:
            self.loads[buf.name] = spans
        return out

    def store_words(self, w, buf, addr: np.ndarray, words: np.ndarray, nbytes: int) -> bool:
        """``VmemOps.global_store_words`` of the members with this watch, one compiled pass
        (member_words.store_watched), its overwritten bytes logged in ``undo``: True, or False having done
        nothing."""
        self._epoch(w)
        s = self.loads.get(buf.name)
        written = buf.written if buf.written is not None else _NO_WRITTEN
        n = addr.shape[0] * nbytes
        undo_at, undo_raw = np.empty(n, np.int64), np.empty(n, np.uint8)
        undo_written = np.empty(n if buf.written is not None else 0, bool)
        span = np.zeros(2, np.int64)
        words = np.ascontiguousarray(words, np.uint32)
        while True:
            stored = self.stored.get(buf.name)
            base, own = stored if stored is not None else (0, _NO_OWNERS)
            code = member_words.store_watched(buf.raw, written.view(np.uint8), buf.written is not None, addr, w.exec, w.lanes,
                                      nbytes, buf.nbytes, words, _NO_SPANS if s is None else s, s is not None, base,
                                      own, stored is not None, span, undo_at, undo_raw, undo_written.view(np.uint8))
            if code != member_words.WINDOW:
                break
            self._owners(buf.name, int(span[0]), int(span[1]))
        if code == member_words.NOT_HERE:
            return False
        if code == member_words.LOADED:
            raise WavesPart(f"a wave stores bytes of {buf.name!r} another loaded in one barrier epoch")
        if code == member_words.TWICE:
            raise WavesPart(f"two waves store bytes of {buf.name!r} in one barrier epoch")
        k = int(span[0])
        self.undo.append((buf, undo_at[:k], undo_raw[:k], None if buf.written is None else undo_written[:k]))
        return True

    def _owner_ids(self, per: int) -> np.ndarray:
        """owner + 1 of each byte of an access of ``per`` bytes per member by every lane (read-only, kept)."""
        got = self._ids.get(per)
        if got is None:
            got = self._ids[per] = np.repeat(np.arange(1, self.members + 1, dtype=np.int16), per)
            got.setflags(write=False)
        return got


def serial_order(machine, first_event: int, first_record: int, wg) -> None:
    """Make what a side-by-side run of ``wg`` logged what the serial run logs: the launch's event
    count, and each matrix-instruction record split into one per wave that issued it, numbered
    and ordered as the waves one after another per barrier epoch number them (in-order schedule)."""
    starts = wg.epoch_starts + [wg.member_events]     # each member's events (ints), per epoch
    sums = [sum(s) for s in starts]
    # the events of the members before m in an epoch: a running sum of each member's epoch count
    before = [[0, *itertools.accumulate(b - a for a, b in zip(here, nxt))] for here, nxt in zip(starts, starts[1:])]
    log = machine.mma_log
    split = []
    for rec, epoch, counts, executing in wg.member_records:
        here, ahead = starts[epoch], before[epoch]
        for m in executing:
            idx = first_event + sums[epoch] + ahead[m] + counts[m] - here[m]
            lanes = slice(m * wg.lanes, (m + 1) * wg.lanes)
            split.append(MmaRecord(first=idx, insn=rec.insn, kernel=rec.kernel, wave=m, workgroups=[wg.ids[m]],
                                   live=[0] if m in rec.live else [], source=rec.source,
                                   exec_mask=rec.exec_mask[lanes].copy(), label=rec.label))
    log.truncate(first_record, len(log.pairs), len(log.foreign))
    for rec in sorted(split, key=lambda r: r.first):
        log.add(rec)
    machine.trace.n_events = first_event + sums[-1]
