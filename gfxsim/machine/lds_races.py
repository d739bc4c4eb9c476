"""LDS race detection for the members of a batched launch at once.

Every member (a workgroup of a batched launch) has its own LDS of ``size`` bytes; the state is one row
per member, indexed by the member-relative byte address:
  w_wave  int32  [members, size]: the wave that last wrote the byte (-1: never written);
  w_epoch int64  [members, size]: the barrier epoch of that write (-1: never);
  r_mask  uint64 [members, size]: bit w set when wave w read the byte in epoch r_epoch;
  r_epoch int64  [members, size]: the barrier epoch of those reads (-1: never read).
A race is an access by a wave to a byte that another wave accessed in the same barrier epoch, at
least one of the two accesses writing: a read or write after another wave's write, or a write after
another wave's read. A write that stores the very bytes another wave wrote there in the same epoch
(``same``: the lanes whose store leaves their bytes unchanged) is no write-write race: compilers
keep data replicated across waves and let every copy store it (Triton's cross-wave reductions of a
tensor smaller than the workgroup), and the result is the same in either order. Such a write is
still checked against other waves' reads and recorded (a later read by another wave in the epoch
races with it). An access never races with itself: its hits are found against the state before it.
Waves are numbered 0..63 within a workgroup (the reader mask is 64 bits).
The semantics are those of ``lds_track`` in memory.py (one wave, one member), member by member.
"""
from __future__ import annotations

from .jit import njit
import numpy as np
from ..errors import ArgumentError, OutOfRangeError

MAX_WAVES = 64


@njit
def track(addr, active, nbytes, wave, epoch, is_write, w_wave, w_epoch, r_mask, r_epoch, same):
    """Record one DS access of ``nbytes`` per lane by ``wave`` in ``epoch`` for every member.

    ``addr`` int64 and ``active`` bool are [members, lanes], addresses member-relative; the state
    arrays are [members, size] and are updated in place; ``same`` bool [members, lanes]: the lanes
    of a write that store the bytes already there. Returns int64 arrays [members]: the lane,
    byte address (member-relative) and other wave of each member's first race (in lane, then byte
    order), or -1 where the member has none. Raises IndexError, before recording anything, when an
    active lane's bytes fall outside [0, size).
    """
    members, lanes = addr.shape
    size = w_wave.shape[1]
    for m in range(members):
        for l in range(lanes):
            if active[m, l] and (addr[m, l] < 0 or addr[m, l] + nbytes > size):
                raise OutOfRangeError("LDS access outside the member's LDS")
    hit_lane = np.full(members, -1, np.int64)
    hit_addr = np.full(members, -1, np.int64)
    hit_wave = np.full(members, -1, np.int64)
    bit = np.uint64(1) << np.uint64(wave)
    others = ~bit
    for m in range(members):
        hl, ha, hw = -1, -1, -1
        for l in range(lanes):               # the hits, against the state before the access
            if not active[m, l]:
                continue
            for b in range(nbytes):
                a = addr[m, l] + b
                if hl < 0 and w_epoch[m, a] == epoch and w_wave[m, a] != wave and not (is_write and same[m, l]):
                    hl, ha, hw = l, a, w_wave[m, a]
                if is_write and hl < 0 and r_epoch[m, a] == epoch and (r_mask[m, a] & others) != 0:
                    o = 0
                    k = r_mask[m, a] & others
                    while (k & np.uint64(1)) == 0:
                        k = k >> np.uint64(1)
                        o += 1
                    hl, ha, hw = l, a, o
        for l in range(lanes):               # then the access recorded
            if not active[m, l]:
                continue
            for b in range(nbytes):
                a = addr[m, l] + b
                if is_write:
                    w_wave[m, a] = wave
                    w_epoch[m, a] = epoch
                elif r_epoch[m, a] != epoch:
                    r_epoch[m, a] = epoch
                    r_mask[m, a] = bit
                else:
                    r_mask[m, a] |= bit
        hit_lane[m], hit_addr[m], hit_wave[m] = hl, ha, hw
    return hit_lane, hit_addr, hit_wave


class RaceState:
    """The race-detection state of ``members`` LDS of ``size`` bytes each (see the module docstring)."""

    def __init__(self, members: int, size: int):
        self.members, self.size = int(members), int(size)
        shape = (self.members, self.size)
        self.w_wave = np.full(shape, -1, np.int32)
        self.w_epoch = np.full(shape, -1, np.int64)
        self.r_mask = np.zeros(shape, np.uint64)
        self.r_epoch = np.full(shape, -1, np.int64)

    def repeated(self, members: int) -> RaceState:
        """A state of ``members`` LDS, each a copy of this one-member state (a batch whose
        workgroups' accesses stop agreeing)."""
        out = RaceState(0, 0)
        out.members, out.size = int(members), self.size
        out.w_wave, out.w_epoch, out.r_mask, out.r_epoch = (np.repeat(a, members, axis=0) for a in
                                                            (self.w_wave, self.w_epoch, self.r_mask, self.r_epoch))
        return out

    def grow(self, old: int, new: int):
        """Each LDS grown from ``old`` to ``new`` bytes (dynamic LDS), the new bytes never accessed."""
        for name, fill in (("w_wave", -1), ("w_epoch", -1), ("r_mask", 0), ("r_epoch", -1)):
            a = getattr(self, name)
            b = np.full((a.shape[0], new), fill, a.dtype)
            b[:, :old] = a
            setattr(self, name, b)
        self.size = new

    def track(self, addr, active, nbytes: int, wave: int, epoch: int, is_write: bool, lanes: int | None = None,
              same=None):
        """``track`` on this state; ``addr``/``active`` (and ``same``, default none) [members, lanes]
        or flat [members * lanes]."""
        addr = np.asarray(addr)
        active = np.asarray(active, np.bool_)
        if addr.ndim == 1:
            addr = addr.reshape(self.members, -1 if lanes is None else lanes)
        if active.ndim == 1:
            active = active.reshape(addr.shape)
        if addr.shape != active.shape or addr.shape[0] != self.members:
            raise ArgumentError(f"addr {addr.shape} and active {active.shape} must be [{self.members}, lanes]")
        _check_wave(wave)
        same = np.zeros(addr.shape, np.bool_) if same is None else np.asarray(same, np.bool_).reshape(addr.shape)
        args = (np.ascontiguousarray(addr, np.int64), np.ascontiguousarray(active), int(nbytes), int(wave),
                int(epoch), bool(is_write), self.w_wave, self.w_epoch, self.r_mask, self.r_epoch,
                np.ascontiguousarray(same))
        # one member (the shared state of a batch whose workgroups agree): numpy, no numba start
        return (track_np if self.members == 1 else track)(*args)


    def track_row(self, addr, active, nbytes: int, wave: int, epoch: int, is_write: bool, same=None):
        """``track`` of one member's access (``addr``/``active`` ``[lanes]``) on this one-member state,
        without the batch's shape handling: what a batch whose workgroups agree runs per access."""
        _check_wave(wave)
        addr = np.asarray(addr, np.int64)
        same = np.zeros(addr.shape, np.bool_) if same is None else np.asarray(same, np.bool_)
        return track_one(addr, np.asarray(active, np.bool_), int(nbytes), int(wave), int(epoch),
                         bool(is_write), self.w_wave[0], self.w_epoch[0], self.r_mask[0], self.r_epoch[0], same)


def _check_wave(wave):
    if not 0 <= int(wave) < MAX_WAVES:
        raise ArgumentError(f"wave {wave} outside 0..{MAX_WAVES - 1}")


def track_np(addr, active, nbytes, wave, epoch, is_write, w_wave, w_epoch, r_mask, r_epoch, same):
    """``track`` in numpy, vectorised over the (member, lane, byte) accesses in that order. The
    result equals the loop's: an access never races with itself (its bytes are all this wave's
    reads or all its writes), so each byte's race condition can be read from the state before the
    access, and the first (lane, byte) meeting it is the loop's first race; the updates it makes
    are idempotent per byte."""
    members, lanes = addr.shape
    if members == 1:
        return track_one(addr[0], active[0], nbytes, wave, epoch, is_write, w_wave[0], w_epoch[0], r_mask[0],
                          r_epoch[0], same[0])
    size = w_wave.shape[1]
    bad = active & ((addr < 0) | (addr + nbytes > size))
    if bad.any():
        raise OutOfRangeError("LDS access outside the member's LDS")
    out = np.full((3, members), -1, np.int64)
    m, l = np.nonzero(active)                                # member-major, then lane order
    if m.size == 0:
        return out[0], out[1], out[2]
    a = (addr[m, l][:, None] + np.arange(nbytes)).ravel()
    m = np.repeat(m, nbytes)
    l = np.repeat(l, nbytes)
    bit = np.uint64(1) << np.uint64(wave)
    ww = w_wave[m, a]
    c1 = (w_epoch[m, a] == epoch) & (ww != wave)
    if is_write:
        c1 &= ~same[m, l]
        rm = np.where(r_epoch[m, a] == epoch, r_mask[m, a] & ~bit, np.uint64(0))
        hit = c1 | (rm != 0)
    else:
        hit = c1
    if hit.any():
        idx = np.nonzero(hit)[0]
        mem, at = np.unique(m[idx], return_index=True)       # each member's first hit
        h = idx[at]
        other = np.where(c1[h], ww[h], 0).astype(np.int64)
        if is_write:
            low = rm[h] & (~rm[h] + np.uint64(1))            # lowest set bit of the other readers
            other = np.where(c1[h], other, np.log2(np.maximum(low, 1).astype(np.float64)).astype(np.int64))
        out[0, mem], out[1, mem], out[2, mem] = l[h], a[h], other
    if is_write:
        w_wave[m, a] = wave
        w_epoch[m, a] = epoch
    else:
        r_mask[m, a] = np.where(r_epoch[m, a] == epoch, r_mask[m, a] | bit, bit)
        r_epoch[m, a] = epoch
    return out[0], out[1], out[2]


def track_one(addr, active, nbytes, wave, epoch, is_write, w_wave, w_epoch, r_mask, r_epoch, same):
    """``track_np`` for one member (1-D state rows): the active lanes' bytes in (lane, byte) order,
    the first hit found by argmax; what a batch whose workgroups agree runs for every access."""
    out = np.full((3, 1), -1, np.int64)
    on = np.flatnonzero(active)
    if on.size == 0:
        return out[0], out[1], out[2]
    base = addr[on]
    if base.min() < 0 or base.max() + nbytes > w_wave.shape[0]:
        raise OutOfRangeError("LDS access outside the member's LDS")
    a = (base[:, None] + np.arange(nbytes)).ravel()
    bit = np.uint64(1) << np.uint64(wave)
    ww = w_wave[a]
    c1 = (w_epoch[a] == epoch) & (ww != wave)
    if is_write:
        c1 &= ~np.repeat(same[on], nbytes)
        rm = r_mask[a] & ~bit
        rm[r_epoch[a] != epoch] = 0
        hit = c1 | (rm != 0)
    else:
        hit = c1
    h = int(np.argmax(hit))
    if hit[h]:
        if c1[h]:
            other = int(ww[h])
        else:
            other = (int(rm[h]) & -int(rm[h])).bit_length() - 1       # the lowest other reader
        out[:, 0] = on[h // nbytes], a[h], other
    if is_write:
        w_wave[a] = wave
        w_epoch[a] = epoch
    else:
        now = r_epoch[a] == epoch
        r_mask[a] = np.where(now, r_mask[a] | bit, bit)
        r_epoch[a] = epoch
    return out[0], out[1], out[2]


class RaceTracker:
    """LDS race state of a batch: shared while the workgroups' accesses agree, then per workgroup."""

    def __init__(self, members: int, size: int):
        self.members = members
        self.state = RaceState(1, size)
        self.split = members == 1
        # the waves that wrote in the latest epoch a write was tracked in: while no other wave has
        # written in this one, no access can meet another's write (others_wrote answers at once)
        self.write_epoch, self.writers = -1, set()

    def track(self, rel, act, nbytes, wave, epoch, is_write, uniform, same=None):
        """``uniform``: every member makes the same access (same addresses, same lanes, and the
        same ``same`` lanes: those of a write that store the bytes already there)."""
        if is_write:
            if epoch != self.write_epoch:
                self.write_epoch, self.writers = epoch, set()
            self.writers.add(int(wave))
        if self.members == 1:            # one LDS: its one row, without the batch's shape handling
            return self.state.track_row(rel[0], act[0], nbytes, wave, epoch, is_write,
                                        None if same is None else same[0])
        if not self.split:
            if uniform:                  # the shared state's one row
                hits = self.state.track_row(rel[0], act[0], nbytes, wave, epoch, is_write,
                                            None if same is None else same[0])
                return tuple(np.repeat(h, self.members) for h in hits)
            self.state, self.split = self.state.repeated(self.members), True
        return self.state.track(rel, act, nbytes, wave, epoch, is_write, same=same)

    def others_wrote(self, rel, act, nbytes: int, wave: int, epoch: int, uniform: bool = False) -> bool:
        """Whether another wave wrote any byte the active lanes access in this epoch (only then can
        a duplicate store matter): a cheap look before the bytes are compared. ``uniform``: every
        member makes the same access, so against the shared state one member's look is every one's."""
        if epoch != self.write_epoch or not self.writers - {int(wave)}:
            return False
        st = self.state
        if self.members == 1 or (uniform and not self.split):     # one row of state to look at
            on = rel[0][act[0]]
            at = np.clip(on, 0, st.size - nbytes)[:, None] + np.arange(nbytes)
            return bool(((st.w_epoch[0, at] == epoch) & (st.w_wave[0, at] != wave)).any())
        # every member's bytes: one compiled pass that stops at the first hit (numpy's gathers of
        # members x lanes x bytes were ~9% of a 4K prefill's launch where a batch's blocks part)
        return bool(others_wrote_rows(np.ascontiguousarray(rel, np.int64), np.ascontiguousarray(act, np.bool_),
                                      int(nbytes), int(wave), int(epoch), st.w_wave, st.w_epoch, self.split))

    def grow(self, old, new):
        self.state.grow(old, new)


@njit
def others_wrote_rows(rel, act, nbytes, wave, epoch, w_wave, w_epoch, per_member):
    """Whether another wave wrote, in ``epoch``, a byte an active lane of ``rel``/``act`` [members,
    lanes] accesses: against row m of the state for member m (``per_member``), else its one row;
    an address clipped into [0, size - nbytes] as others_wrote_np's."""
    members, lanes = rel.shape
    top = w_wave.shape[1] - nbytes
    for m in range(members):
        row = m if per_member else 0
        for ln in range(lanes):
            if not act[m, ln]:
                continue
            a0 = min(max(rel[m, ln], 0), top)
            for b in range(nbytes):
                if w_epoch[row, a0 + b] == epoch and w_wave[row, a0 + b] != wave:
                    return True
    return False


def others_wrote_np(rel, act, nbytes, wave, epoch, w_wave, w_epoch, per_member) -> bool:
    """others_wrote_rows in numpy: the members x lanes x bytes look at once (the test's yardstick)."""
    rows = np.arange(rel.shape[0])[:, None, None] if per_member else np.zeros((1, 1, 1), np.int64)
    at = np.clip(np.where(act, rel, 0), 0, w_wave.shape[1] - nbytes)[:, :, None] + np.arange(nbytes)
    hit = (w_epoch[rows, at] == epoch) & (w_wave[rows, at] != wave) & act[:, :, None]
    return bool(hit.any())


class EpochWatch:
    """The LDS race watch of the waves of one workgroup run side by side (the members of one wave,
    one LDS: ds.py), member m as wave m: ``race`` tells whether an access meets another member's
    in its barrier epoch, one of them writing. It asks the race state (a ``RaceState`` of one row)
    only what the epoch can hold: a read meets another's write only if some write was made in this
    epoch, and a write meets another's read only if some read was. The epoch's reads are kept as
    they came and marked in the state (``flush``) only when a write of the same epoch is checked,
    the one thing that asks for them; at the next epoch they are dropped unmarked, as no check
    there can meet them (a read mark counts only in its own epoch)."""

    def __init__(self):
        self.epoch = -1
        self.wrote = False               # a write was recorded in this epoch
        self.marked = False              # reads were marked in the state in this epoch
        self.reads: list = []            # (addresses [members, lanes], active or None: all, nbytes)
        self.marks = None                # scratch: the member writing each byte of one access
        self._full: dict = {}            # (members, bytes per member) -> (member of each byte, ~its bit)

    def race(self, st: RaceState, rel: np.ndarray, act, nbytes: int, is_write: bool, epoch: int,
             unchanged=None) -> bool:
        """Whether the access of ``nbytes`` per lane at ``rel`` (int64 [members, lanes], in the
        LDS; ``act`` bool [members, lanes] or None: every lane) by every member races, recording
        it where it does not. A byte two members write in this access counts as a race too (the
        serial order would decide which lands last), unless it is one of the lanes ``unchanged()``
        (bool [members, lanes] or None; asked only where another member wrote in this epoch)
        names as storing what is there already. ``rel``/``act`` must not change afterwards."""
        if epoch != self.epoch:
            self.epoch, self.wrote, self.marked, self.reads = epoch, False, False, []
        if not is_write:
            if self.wrote:                                       # bytes another member wrote in this epoch
                at, who = member_bytes(rel, act, nbytes)
                if ((st.w_epoch[0][at] == epoch) & (st.w_wave[0][at] != who)).any():
                    return True
            self.reads.append((rel, act, nbytes))
            return False
        w_wave, w_epoch = st.w_wave[0], st.w_epoch[0]
        if act is None:                  # every lane: each byte's member and the other members' bits, kept
            at = (rel[:, :, None] + np.arange(nbytes)).reshape(-1)
            who, others = self._every_lane(rel.shape[0], rel.shape[1] * nbytes)
        else:
            at, who = member_bytes(rel, act, nbytes)
            others = None
        if self.wrote:                                           # written in this epoch: by another?
            h = w_epoch[at] == epoch
            if h.any():
                h &= w_wave[at] != who
            if h.any() and unchanged is not None:                # a store of what is there already
                same = unchanged()
                if same is not None:
                    h &= ~np.repeat(same[act] if act is not None else same.reshape(-1), nbytes)
            if h.any():
                return True
        self.flush(st)
        if self.marked:                                          # bytes another member read in this epoch
            if others is None:
                others = ~np.left_shift(np.uint64(1), who.astype(np.uint64))
            if ((st.r_epoch[0][at] == epoch) & ((st.r_mask[0][at] & others) != 0)).any():
                return True
        if self.marks is None or self.marks.size != w_wave.size:
            self.marks = np.zeros(w_wave.size, np.int32)
        self.marks[at] = who                                     # a byte two members write keeps one
        if (self.marks[at] != who).any():
            return True
        w_wave[at] = who
        w_epoch[at] = epoch
        self.wrote = True
        return False

    def _every_lane(self, members: int, per: int):
        """(the member of each byte, the other members' bits of each) of an access by every lane of
        ``per`` bytes per member (read-only, kept)."""
        got = self._full.get((members, per))
        if got is None:
            who = np.repeat(np.arange(members), per)
            got = self._full[(members, per)] = (who, ~np.left_shift(np.uint64(1), who.astype(np.uint64)))
            for a in got:
                a.setflags(write=False)
        return got

    def flush(self, st: RaceState) -> None:
        """Mark this epoch's kept reads in ``st``'s one row: bit m of a byte that member m read."""
        if not self.reads:
            return
        r_mask, r_epoch, epoch = st.r_mask[0], st.r_epoch[0], self.epoch
        members = self.reads[0][0].shape[0]
        if all(act is None for _, act, _ in self.reads):      # every lane: each member's bytes a row
            rows = np.concatenate([(rel[:, :, None] + np.arange(nbytes)).reshape(members, -1)
                                   for rel, _, nbytes in self.reads], axis=1)
            at = rows.reshape(-1)
            mine = list(rows)
        else:
            got = [member_bytes(rel, act, nbytes) for rel, act, nbytes in self.reads]
            at = np.concatenate([a for a, _ in got])
            who = np.concatenate([w for _, w in got])
            mine = [at[who == m] for m in range(members)]
        r_mask[at[r_epoch[at] != epoch]] = 0
        r_epoch[at] = epoch
        for m, bytes_m in enumerate(mine):               # a byte twice in one member: one bit
            if bytes_m.size:
                r_mask[bytes_m] |= np.uint64(1 << m)
        self.reads, self.marked = [], True


def member_bytes(rel: np.ndarray, act, nbytes: int):
    """(every byte an access of ``nbytes`` per lane at ``rel`` [members, lanes] touches in the
    active lanes (``act``: bool [members, lanes], or None for all), the member of each), member by member."""
    members, lanes = rel.shape
    if act is None:
        at = (rel[:, :, None] + np.arange(nbytes)).reshape(-1)
        return at, np.repeat(np.arange(members), lanes * nbytes)
    mi, li = np.nonzero(act)
    return (rel[mi, li][:, None] + np.arange(nbytes)).reshape(-1), np.repeat(mi, nbytes)
