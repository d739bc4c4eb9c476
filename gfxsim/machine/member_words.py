"""The global word loads and stores of a workgroup's waves run side by side, compiled.

``VmemOps.global_load_words`` / ``global_store_words`` with ``wavemembers.MemberAccesses``
watching them ask a dozen numpy questions of 256 columns each (bounds and alignment, written
bytes, each member's span of loads, each byte's owner, the bytes a store overwrites). Here one
compiled pass over the active lanes decides the same things in the same order and makes the same
writes (``MemberAccesses._load`` / ``_store``, ``store_values``):

- the fit: no active lane, one out of the buffer or not dword aligned: nothing done
  (``NOT_HERE``; the value path names the fault); a load of a byte never written: the same;
- a load of a byte another member stored in this epoch: ``STORED``; else each member's span of
  loads grown over its lanes' bytes;
- a store of a byte inside another member's span of loads (``LOADED``); the window of owners not
  holding the stored bytes: ``WINDOW`` with their span in ``span`` (the caller grows it and asks
  again); a byte another member owns, or two members' in this access: ``TWICE``;
- the bytes a store overwrites logged (``undo_*``, member by member, lane by lane, byte by
  byte), then the words and their written bits stored (of two lanes at one word the last lands).
"""
from __future__ import annotations

import numpy as np

from .jit import njit

DONE, NOT_HERE, STORED, LOADED, WINDOW, TWICE = 0, 1, 2, 3, 4, 5
_ALL = np.uint32(0x01010101)


@njit
def _fits(addr, ex, nbytes, size):
    any_on = False
    for c in range(addr.shape[0]):
        if ex[c]:
            a = addr[c]
            if a < 0 or a + nbytes > size or (a & 3) != 0:
                return False
            any_on = True
    return any_on


@njit
def _all_written(written32, addr, ex, nw):
    """Whether every byte of the ``nw`` dwords each active lane loads at byte ``addr`` is written."""
    for c in range(addr.shape[0]):
        if ex[c]:
            for k in range(nw):
                if written32[(addr[c] >> 2) + k] != _ALL:
                    return False
    return True


@njit
def load_watched(raw32, written32, has_written, addr, ex, lanes, nbytes, size, base, own, has_own, spans, out):
    """A load of ``nbytes`` (whole dwords) per lane at byte ``addr`` (int64 [width]): DONE with
    its words in ``out`` (uint32 [nbytes/4, width]; inactive lanes the buffer's first words) and
    ``spans`` (int64 [2, members]: each member's least and end byte loaded) grown, or NOT_HERE or
    STORED, having changed nothing."""
    width = addr.shape[0]
    nw = nbytes // 4
    if not _fits(addr, ex, nbytes, size):
        return NOT_HERE
    if has_written and not _all_written(written32, addr, ex, nw):
        return NOT_HERE
    if has_own:
        for c in range(width):
            if ex[c]:
                who = c // lanes + 1
                for b in range(nbytes):
                    i = addr[c] + b - base
                    if 0 <= i < own.shape[0] and own[i] != 0 and own[i] != who:
                        return STORED
    for c in range(width):
        if ex[c]:
            m = c // lanes
            if addr[c] < spans[0, m]:
                spans[0, m] = addr[c]
            if addr[c] + nbytes > spans[1, m]:
                spans[1, m] = addr[c] + nbytes
    for k in range(nw):
        for c in range(width):
            out[k, c] = raw32[((addr[c] >> 2) if ex[c] else 0) + k]
    return DONE


@njit
def store_watched(raw, written, has_written, addr, ex, lanes, nbytes, size, words, spans, has_spans, base, own, has_own,
          span, undo_at, undo_raw, undo_written):
    """A store of the first ``nbytes`` (whole dwords) of each active lane's ``words`` (uint32
    [n, width]) at byte ``addr``: DONE (the undo log's length in ``span[0]``), NOT_HERE, LOADED,
    WINDOW or TWICE (see the module docstring)."""
    width = addr.shape[0]
    members = width // lanes
    if not _fits(addr, ex, nbytes, size):
        return NOT_HERE
    if has_spans:
        for c in range(width):
            if ex[c]:
                m = c // lanes
                for b in range(nbytes):
                    a = addr[c] + b
                    for o in range(members):
                        if o != m and spans[0, o] <= a < spans[1, o]:
                            return LOADED
    lo, hi = np.int64(1) << 62, np.int64(-1)
    for c in range(width):
        if ex[c]:
            lo = min(lo, addr[c])
            hi = max(hi, addr[c] + nbytes)
    if not has_own or lo < base or hi > base + own.shape[0]:
        span[0], span[1] = lo, hi
        return WINDOW
    for c in range(width):
        if ex[c]:
            who = c // lanes + 1
            for b in range(nbytes):
                o = own[addr[c] + b - base]
                if o != 0 and o != who:
                    return TWICE
    for c in range(width):
        if ex[c]:
            for b in range(nbytes):
                own[addr[c] + b - base] = c // lanes + 1
    for c in range(width):
        if ex[c]:
            for b in range(nbytes):
                if own[addr[c] + b - base] != c // lanes + 1:
                    return TWICE
    n = 0
    for c in range(width):
        if ex[c]:
            for b in range(nbytes):
                a = addr[c] + b
                undo_at[n] = a
                undo_raw[n] = raw[a]
                if has_written:
                    undo_written[n] = written[a]
                n += 1
    raw32 = raw.view(np.uint32)
    for k in range(nbytes // 4):
        for c in range(width):
            if ex[c]:
                raw32[(addr[c] >> 2) + k] = words[k, c]
    if has_written:
        w32 = written.view(np.uint32)
        for k in range(nbytes // 4):
            for c in range(width):
                if ex[c]:
                    w32[(addr[c] >> 2) + k] = _ALL
    span[0] = n
    return DONE


@njit
def load_alone(raw32, written32, has_written, addr, ex, nbytes, size, out):
    """``load_watched`` without a watch (the members are not waves of one workgroup run side by side):
    DONE with the words in ``out``, or NOT_HERE having done nothing."""
    width = addr.shape[0]
    nw = nbytes // 4
    if not _fits(addr, ex, nbytes, size):
        return NOT_HERE
    if has_written and not _all_written(written32, addr, ex, nw):
        return NOT_HERE
    for k in range(nw):
        for c in range(width):
            out[k, c] = raw32[((addr[c] >> 2) if ex[c] else 0) + k]
    return DONE


@njit
def store_alone(raw32, written32, has_written, addr, ex, nbytes, size, words):
    """``store_watched`` without a watch or an undo log: DONE with the words and their written bits
    stored, or NOT_HERE having done nothing."""
    width = addr.shape[0]
    if not _fits(addr, ex, nbytes, size):
        return NOT_HERE
    for k in range(nbytes // 4):
        for c in range(width):
            if ex[c]:
                raw32[(addr[c] >> 2) + k] = words[k, c]
                if has_written:
                    written32[(addr[c] >> 2) + k] = _ALL
    return DONE
