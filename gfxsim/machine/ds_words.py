"""The word LDS accesses of a workgroup's waves run side by side (wavemembers.py), compiled.

``DsOps.lds_load_words`` / ``lds_store_words`` of members that share one LDS ask, in numpy, a
dozen questions of 256 columns (bounds and alignment, written bytes, the race watch, each
member's bank-conflict pattern) at ~1 µs a call. Here each access is one compiled pass over the
active lanes that decides the same things in the same order and does the same writes:

- the fit: no active lane, one out of the region or unaligned: nothing done (``NOT_HERE``; the
  value path names the fault); a read of a byte never written: the same;
- the race watch of ``lds_races.EpochWatch``, its reads marked as they come (the eager check
  ``EpochWatch`` is held to): a race leaves the state as it was (``RACE``: the caller ends the
  side-by-side run);
- whether a member's access bank-conflicts (two distinct dwords of one phase in one bank:
  ``banks._row_np_uncached``'s degree above 1); a conflicted access, with the race watch done,
  leaves the degrees, their findings and the rest to numpy (``CONFLICT``);
- the words gathered, or the bytes and their written bits stored (lanes in order: of two lanes of a
  member at one byte the last one lands, as numpy's assignment does).
"""
from __future__ import annotations

import numpy as np

from .jit import njit

DONE, NOT_HERE, RACE, CONFLICT = 0, 1, 2, 3


@njit
def _fits(off, ex, nbytes, align, size):
    """Every active lane in [0, size) and aligned, and at least one active."""
    any_on = False
    for c in range(off.shape[0]):
        if ex[c]:
            a = off[c]
            if a < 0 or a + nbytes > size or (a & (align - 1)) != 0:
                return False
            any_on = True
    return any_on


@njit
def _conflicts(rel, ex, lanes, nbytes, ph, n_phase, banks, bank_bytes):
    """Whether some member's access bank-conflicts (``banks._row_np_uncached``'s degree above 1):
    two distinct dwords of one phase in one bank."""
    members = rel.shape[0] // lanes
    dwords = max(1, nbytes // bank_bytes)
    first = np.empty((n_phase, banks), np.int64)
    pow2 = (banks & (banks - 1)) == 0 and (bank_bytes & (bank_bytes - 1)) == 0   # shifts, not divisions
    shift = 0
    while (1 << shift) < bank_bytes:
        shift += 1
    for m in range(members):
        first[:, :] = -1
        for l in range(lanes):
            c = m * lanes + l
            if not ex[c]:
                continue
            p = ph[l]
            base = rel[c] >> shift if pow2 else rel[c] // bank_bytes
            for k in range(dwords):
                dw = base + k
                b = dw & (banks - 1) if pow2 else dw % banks
                if first[p, b] < 0:
                    first[p, b] = dw
                elif first[p, b] != dw:
                    return True
    return False


@njit
def _read_race(rel, ex, lanes, nbytes, w_wave, w_epoch, r_mask, r_epoch, epoch, wrote):
    """EpochWatch.race of a read: a byte another member wrote in this epoch is a race (nothing
    marked); else the read's bytes are marked, bit m for member m."""
    members = rel.shape[0] // lanes
    if wrote:
        for m in range(members):
            for c in range(m * lanes, (m + 1) * lanes):
                if ex[c]:
                    for a in range(rel[c], rel[c] + nbytes):
                        if w_epoch[a] == epoch and w_wave[a] != m:
                            return True
    for m in range(members):
        bit = np.uint64(1 << m)
        for c in range(m * lanes, (m + 1) * lanes):
            if ex[c]:
                for a in range(rel[c], rel[c] + nbytes):
                    if r_epoch[a] != epoch:
                        r_mask[a] = np.uint64(0)
                        r_epoch[a] = epoch
                    r_mask[a] |= bit
    return False


@njit
def _same_lane(raw, off, words, c, nbytes):
    """Whether lane c's bytes equal what the region holds at its offset (a store of what is there)."""
    for b in range(nbytes):
        if raw[off[c] + b] != np.uint8((words[b // 4, c] >> np.uint32(8 * (b % 4))) & np.uint32(0xFF)):
            return False
    return True


@njit
def _write_race(rel, off, ex, lanes, nbytes, words, raw, w_wave, w_epoch, r_mask, r_epoch, marks, epoch,
                wrote, marked):
    """EpochWatch.race of a write: a byte another member wrote in this epoch (unless the lane
    stores what is there), read in this epoch, or written by two members in this access is a race
    (nothing recorded); else the bytes are recorded as their members' writes."""
    members = rel.shape[0] // lanes
    if wrote:
        for m in range(members):
            for c in range(m * lanes, (m + 1) * lanes):
                if ex[c]:
                    for a in range(rel[c], rel[c] + nbytes):
                        if w_epoch[a] == epoch and w_wave[a] != m and not _same_lane(raw, off, words, c, nbytes):
                            return True
    if marked:
        for m in range(members):
            others = ~np.uint64(1 << m)
            for c in range(m * lanes, (m + 1) * lanes):
                if ex[c]:
                    for a in range(rel[c], rel[c] + nbytes):
                        if r_epoch[a] == epoch and (r_mask[a] & others) != 0:
                            return True
    for m in range(members):
        for c in range(m * lanes, (m + 1) * lanes):
            if ex[c]:
                for a in range(rel[c], rel[c] + nbytes):
                    marks[a] = m
    for m in range(members):
        for c in range(m * lanes, (m + 1) * lanes):
            if ex[c]:
                for a in range(rel[c], rel[c] + nbytes):
                    if marks[a] != m:
                        return True
    for m in range(members):
        for c in range(m * lanes, (m + 1) * lanes):
            if ex[c]:
                for a in range(rel[c], rel[c] + nbytes):
                    w_wave[a] = m
                    w_epoch[a] = epoch
    return False


@njit
def read_words(raw32, written32, off, ex, lanes, nbytes, base, size, w_wave, w_epoch, r_mask, r_epoch, epoch,
               wrote, ph, n_phase, banks, bank_bytes, out):
    """A read of ``nbytes`` (whole dwords) per lane at region offset ``off`` (int64 [width]) by the
    active lanes ``ex`` of members of ``lanes`` lanes, the region at LDS byte ``base``: DONE with
    its words in ``out`` (uint32 [nbytes/4, width]; inactive lanes the region's first words),
    NOT_HERE, RACE or CONFLICT (see the module docstring)."""
    width = off.shape[0]
    nw = nbytes // 4
    if not _fits(off, ex, nbytes, 16 if nbytes == 12 else nbytes, size):
        return NOT_HERE
    for c in range(width):
        if ex[c]:
            for k in range(nw):
                if written32[(off[c] >> 2) + k] != np.uint32(0x01010101):
                    return NOT_HERE
    rel = off + base
    if _read_race(rel, ex, lanes, nbytes, w_wave, w_epoch, r_mask, r_epoch, epoch, wrote):
        return RACE
    if _conflicts(rel, ex, lanes, nbytes, ph, n_phase, banks, bank_bytes):
        return CONFLICT
    for k in range(nw):
        for c in range(width):
            out[k, c] = raw32[((off[c] >> 2) if ex[c] else 0) + k]
    return DONE


@njit
def store_words(raw, written, off, ex, lanes, nbytes, words, base, size, w_wave, w_epoch, r_mask, r_epoch, marks,
                epoch, wrote, marked, ph, n_phase, banks, bank_bytes):
    """A write of the first ``nbytes`` bytes of each active lane's ``words`` (uint32 [n, width]) at
    region offset ``off``: DONE with the bytes and their written bits stored, NOT_HERE, RACE or
    CONFLICT (see the module docstring)."""
    width = off.shape[0]
    if not _fits(off, ex, nbytes, 16 if nbytes == 12 else nbytes, size):
        return NOT_HERE
    rel = off + base
    if _write_race(rel, off, ex, lanes, nbytes, words, raw, w_wave, w_epoch, r_mask, r_epoch, marks, epoch,
                   wrote, marked):
        return RACE
    if _conflicts(rel, ex, lanes, nbytes, ph, n_phase, banks, bank_bytes):
        return CONFLICT
    for b in range(nbytes):
        for c in range(width):
            if ex[c]:
                raw[off[c] + b] = np.uint8((words[b // 4, c] >> np.uint32(8 * (b % 4))) & np.uint32(0xFF))
                written[off[c] + b] = 1
    return DONE


@njit
def _track_one(rel, off, ex, nbytes, wave, epoch, is_write, words, raw, w_wave, w_epoch, r_mask, r_epoch, hit):
    """``lds_races.track_one`` of one wave's access: the first (lane, byte) that meets another
    wave's write in this epoch (a write: unless the lane stores what is there) or, for a write,
    another wave's read, in ``hit`` (lane, address, other wave; -1 where none), then the access
    recorded."""
    lanes = rel.shape[0]
    bit = np.uint64(1 << wave)
    hit[0], hit[1], hit[2] = -1, -1, -1
    for l in range(lanes):
        if not ex[l]:
            continue
        known, same = False, False
        for a in range(rel[l], rel[l] + nbytes):
            c1 = w_epoch[a] == epoch and w_wave[a] != wave
            if c1 and is_write:
                if not known:
                    same, known = _same_lane(raw, off, words, l, nbytes), True
                c1 = not same
            rm = np.uint64(0)
            if is_write and r_epoch[a] == epoch:
                rm = r_mask[a] & ~bit
            if c1 or rm != 0:
                hit[0], hit[1] = l, a
                if c1:
                    hit[2] = w_wave[a]
                else:
                    o = 0
                    while (rm >> np.uint64(o)) & np.uint64(1) == 0:
                        o += 1
                    hit[2] = o
                break
        if hit[0] >= 0:
            break
    for l in range(lanes):
        if ex[l]:
            for a in range(rel[l], rel[l] + nbytes):
                if is_write:
                    w_wave[a] = wave
                    w_epoch[a] = epoch
                elif r_epoch[a] != epoch:
                    r_epoch[a] = epoch
                    r_mask[a] = bit
                else:
                    r_mask[a] |= bit


@njit
def one_wave(raw, written, off, ex, nbytes, words, is_write, base, size, races, wave, epoch, w_wave, w_epoch, r_mask,
             r_epoch, ph, n_phase, banks, bank_bytes, out, hit):
    """A read (into ``out``) or a write (of ``words``' first ``nbytes`` bytes) of one wave run
    alone (serially): the fit, for a read the written bytes, with ``races`` the race check of waves
    run one after another (``_track_one``; a race is ``hit``, for the caller's finding), whether it
    bank-conflicts, the words. DONE, NOT_HERE (nothing done) or CONFLICT (the race check done: the
    caller makes the degrees, their findings and the rest)."""
    lanes = off.shape[0]
    nw = nbytes // 4
    if not _fits(off, ex, nbytes, 16 if nbytes == 12 else nbytes, size):
        return NOT_HERE
    w32 = written.view(np.uint32)
    if not is_write:
        for c in range(lanes):
            if ex[c]:
                for k in range(nw):
                    if w32[(off[c] >> 2) + k] != np.uint32(0x01010101):
                        return NOT_HERE
    rel = off + base
    hit[0] = -1
    if races:
        _track_one(rel, off, ex, nbytes, wave, epoch, is_write, words, raw, w_wave, w_epoch, r_mask, r_epoch, hit)
    if _conflicts(rel, ex, lanes, nbytes, ph, n_phase, banks, bank_bytes):
        return CONFLICT
    if not is_write:
        raw32 = raw.view(np.uint32)
        for k in range(nw):
            for c in range(lanes):
                out[k, c] = raw32[((off[c] >> 2) if ex[c] else 0) + k]
        return DONE
    for b in range(nbytes):
        for c in range(lanes):
            if ex[c]:
                raw[off[c] + b] = np.uint8((words[b // 4, c] >> np.uint32(8 * (b % 4))) & np.uint32(0xFF))
                written[off[c] + b] = 1
    return DONE
