"""LDS bank conflicts under the gfx9 model (and NVIDIA shared memory, rule "nvidia"): 32 banks of 4 bytes.

A wave64 DS access is served in phases; only lanes of the same phase can conflict. The phases
(AMD's LDS conflict sets, as dh_comms/omniprobe document them for gfx9):
  1-4 byte accesses: {0..31}, {32..63};
  ds_*_b64:          {0..15}, {16..31}, {32..47}, {48..63};
  ds_*_b128:         {0..3, 20..23}, {4..7, 16..19}, {8..11, 28..31}, {12..15, 24..27} and the same
                     +32: two groups of 4 lanes that are not adjacent.
Within a phase every bank serves one dword per cycle; lanes reading the same dword share it
(broadcast). The conflict degree of a phase is the largest number of distinct dwords one bank must
serve; an access costs the sum of its phases' degrees in cycles (conflict-free: one per phase).
"""
from __future__ import annotations

from functools import cache

from .jit import njit
import numpy as np
from ..errors import ArgumentError

_B128_PAIR = (0, 1, 2, 3, 1, 0, 3, 2)     # 4-lane group q (0..7 in a half) -> its phase in that half


RULES = ("gfx9", "nvidia")


@cache
def phases(nbytes: int, lanes: int = 64, rule: str = "gfx9") -> np.ndarray:
    """Phase (conflict set) of every lane of a wave for an access of ``nbytes`` per lane.
    rule "nvidia" (a warp's shared-memory request): up to 4 bytes the whole warp is one phase,
    8 bytes two half-warps, 16 bytes four quarter-warps of consecutive threads (CUDA C++
    Programming Guide, "Shared Memory" of compute capability 5.x and later)."""
    l = np.arange(lanes)
    if rule not in RULES:
        raise ArgumentError(f"unknown bank-conflict rule {rule!r}; known: {', '.join(RULES)}")
    if rule == "nvidia":
        ph = (l * max(1, nbytes // 4)) // 32
    elif nbytes <= 4:
        ph = l // 32
    elif nbytes <= 8:
        ph = l // 16
    else:
        ph = (l // 32) * 4 + np.array(_B128_PAIR)[(l % 32) // 4]
    ph = ph.astype(np.int64)
    ph.setflags(write=False)
    return ph


def bank_conflicts(addr: np.ndarray, active: np.ndarray, nbytes: int, banks: int = 32, bank_bytes: int = 4,
                   rule: str = "gfx9"):
    """(conflict degree, cycles, phases used) of one DS access by the lanes of one wave."""
    addr = np.asarray(addr, np.int64)
    return _row_np(addr, np.asarray(active, np.bool_), int(nbytes), int(banks), int(bank_bytes), rule)


def bank_conflicts_rows(addr: np.ndarray, active: np.ndarray, nbytes: int, banks: int = 32, bank_bytes: int = 4,
                       rule: str = "gfx9"):
    """(degree, cycles, passes), each int64 [rows], of one DS access by each row's lanes
    (``addr`` int64 and ``active`` bool, [rows, lanes]): ``bank_conflicts`` per row, remembered
    per pattern of all rows together (every row shifted by the same whole dwords: the same
    result, "Shift invariance" below)."""
    flat = active.reshape(-1)
    f = int(np.argmax(flat))
    if not flat[f]:
        z = np.zeros(addr.shape[0], np.int64)
        return z, z.copy(), z.copy()
    rel = addr - (int(addr.reshape(-1)[f]) // bank_bytes) * bank_bytes
    key = (nbytes, banks, bank_bytes, rule, addr.shape, rel.tobytes(), active.tobytes())
    got = _ROWS_CACHE.get(key)
    if got is None:
        if len(_ROWS_CACHE) >= 4096:
            _ROWS_CACHE.clear()
        out = np.zeros((3, addr.shape[0]), np.int64)
        for m in range(addr.shape[0]):
            out[:, m] = _row_np(rel[m], active[m], int(nbytes), int(banks), int(bank_bytes), rule)
        out.setflags(write=False)
        got = _ROWS_CACHE[key] = out
    return got[0], got[1], got[2]


_ROWS_CACHE: dict = {}         # bank_conflicts_rows' patterns
_ROW_CACHE: dict = {}          # a kernel repeats its few access patterns thousands of times


def _row_np(addr, active, nbytes, banks, bank_bytes, rule):
    """``_row_np_uncached``, remembered per pattern (addresses shifted so that the first active lane
    is in dword 0: a shift by whole dwords changes no result, see "Shift invariance" below)."""
    on = np.flatnonzero(active)
    if on.size == 0:
        return 0, 0, 0
    rel = addr - (addr[on[0]] // bank_bytes) * bank_bytes
    key = (nbytes, banks, bank_bytes, rule, rel.tobytes(), active.tobytes())
    got = _ROW_CACHE.get(key)
    if got is None:
        if len(_ROW_CACHE) >= 4096:
            _ROW_CACHE.clear()
        got = _ROW_CACHE[key] = _row_np_uncached(rel, active, nbytes, banks, bank_bytes, rule)
    return got


def _row_np_uncached(addr, active, nbytes, banks, bank_bytes, rule):
    """``_conflicts`` in numpy, for one row: the distinct dwords of each phase, counted per bank.
    (numpy here, so that a launch whose workgroups share one pattern needs no numba at all.)"""
    ph = phases(nbytes, addr.shape[0], rule)
    dwords = max(1, nbytes // bank_bytes)
    dw = ((addr[active] // bank_bytes)[:, None] + np.arange(dwords)).ravel()
    if dw.size == 0:
        return 0, 0, 0
    p = np.repeat(ph[active], dwords)
    n_phase = int(ph.max()) + 1
    # distinct (phase, dword): sorted by phase then dword, each first of its run (np.unique would
    # say the same, but imports numpy.ma on its first call: ~10 ms of CPU, once a process)
    order = np.lexsort((dw, p))
    p, dw = p[order], dw[order]
    first = np.ones(p.size, bool)
    first[1:] = (p[1:] != p[:-1]) | (dw[1:] != dw[:-1])
    per_bank = np.bincount(p[first] * banks + dw[first] % banks, minlength=n_phase * banks)
    degree = per_bank.reshape(n_phase, banks).max(axis=1)
    return int(degree.max()), int(degree.sum()), int((degree > 0).sum())


# ------------------------------------------------------------------------------------------------
# Batched: one DS access by the same wave of N workgroups side by side (a batched launch gives every
# workgroup, a "member", its own LDS). Bank conflicts depend on the address pattern only, and the
# batched members of a launch nearly always share it, so it is computed once per distinct pattern.
#
# Shift invariance: adding k * bank_bytes to every address of a row adds k to every dword. That keeps
# which dwords are equal and maps banks one to one (b -> (b + k) mod banks), so the number of distinct
# dwords per bank of every phase is only permuted: degree, cycles and passes stay. (A shift by
# k * banks * bank_bytes even keeps every bank.) A shift that is not a multiple of bank_bytes can
# change the result (bytes 0 and 3 share a dword; bytes 1 and 4 do not).
# A member whose active lanes equal an already computed member's and whose addresses differ from its
# by one multiple of bank_bytes copies that member's result (compared against the first member with
# an active lane and the last member computed with another pattern); any other member is computed on
# its own, so the result is exact whatever the patterns are.


@cache
def _phase_lanes(nbytes: int, lanes: int, rule: str = "gfx9"):
    """Lanes of a wave ordered by phase and where each phase starts: (order, starts[n_phase + 1])."""
    ph = phases(nbytes, lanes, rule)
    order = np.argsort(ph, kind="stable").astype(np.int64)
    starts = np.searchsorted(ph[order], np.arange(int(ph.max()) + 2)).astype(np.int64)
    order.setflags(write=False)
    starts.setflags(write=False)
    return order, starts


@njit
def _same_pattern(addr, active, m, r, first, span):
    """Row m is row r shifted by one multiple of ``span`` (bank_bytes) bytes on the same active lanes."""
    if not active[r, first]:
        return False
    d = addr[m, first] - addr[r, first]
    if d % span != 0:
        return False
    for l in range(addr.shape[1]):
        if active[m, l] != active[r, l]:
            return False
        if active[m, l] and addr[m, l] - addr[r, l] != d:
            return False
    return True


@njit
def _row_conflicts(addr, active, m, order, starts, dwords, banks, bank_bytes, bucket, cnt):
    """bank_conflicts for row m, with the distinct dwords of a phase kept per bank (same result)."""
    worst = 0
    cycles = 0
    used = 0
    for p in range(starts.shape[0] - 1):
        cnt[:] = 0
        n = 0
        for i in range(starts[p], starts[p + 1]):
            l = order[i]
            if not active[m, l]:
                continue
            base = addr[m, l] // bank_bytes
            for d in range(dwords):
                dw = base + d
                b = dw % banks
                k = cnt[b]
                dup = False
                for s in range(k):
                    if bucket[b, s] == dw:
                        dup = True
                        break
                if not dup:
                    bucket[b, k] = dw
                    cnt[b] = k + 1
                    n += 1
        if n == 0:
            continue
        used += 1
        degree = 0
        for b in range(banks):
            if cnt[b] > degree:
                degree = cnt[b]
        cycles += degree
        if degree > worst:
            worst = degree
    return worst, cycles, used


@njit
def _conflicts_batched(addr, active, order, starts, dwords, banks, bank_bytes):
    members, lanes = addr.shape
    degree = np.zeros(members, np.int64)
    cycles = np.zeros(members, np.int64)
    passes = np.zeros(members, np.int64)
    span = bank_bytes
    bucket = np.empty((banks, max(1, lanes * dwords)), np.int64)
    cnt = np.zeros(banks, np.int64)
    ref = -1            # the first member with an active lane
    other = -1          # the last member computed with a pattern other than ref's
    for m in range(members):
        first = -1
        for l in range(lanes):
            if active[m, l]:
                first = l
                break
        if first < 0:
            continue                                    # no active lane: 0, 0, 0
        src = -1
        if ref >= 0 and _same_pattern(addr, active, m, ref, first, span):
            src = ref
        elif other >= 0 and _same_pattern(addr, active, m, other, first, span):
            src = other
        if src >= 0:
            degree[m], cycles[m], passes[m] = degree[src], cycles[src], passes[src]
            continue
        degree[m], cycles[m], passes[m] = _row_conflicts(addr, active, m, order, starts, dwords, banks,
                                                         bank_bytes, bucket, cnt)
        if ref < 0:
            ref = m
        else:
            other = m
    return degree, cycles, passes


def bank_conflicts_batched(addr: np.ndarray, active: np.ndarray, nbytes: int, banks: int = 32,
                           bank_bytes: int = 4, lanes: int = 64, rule: str = "gfx9"):
    """(degree, cycles, passes), each int64 [members], of one DS access by one wave of every member.

    ``addr`` (int) and ``active`` (bool) are [members, lanes], or flat [members * lanes]; addresses
    are bytes relative to each member's own LDS. Member m's result equals
    ``bank_conflicts(addr[m], active[m], nbytes, banks, bank_bytes)``; a member with no active lane
    gets (0, 0, 0). The pattern of the first live member is computed once (numpy) for every member
    that shares it up to a shift of all addresses by one multiple of bank_bytes (which changes no
    result); the other members are computed exactly in one numba call.
    """
    addr = np.asarray(addr)
    active = np.asarray(active, np.bool_)
    if addr.ndim == 1:
        addr = addr.reshape(-1, lanes)
    if active.ndim == 1:
        active = active.reshape(-1, lanes)
    if addr.ndim != 2 or addr.shape != active.shape or addr.shape[1] != lanes:
        raise ArgumentError(f"addr {addr.shape} and active {active.shape} must both be [members, {lanes}]")
    addr = np.asarray(addr, np.int64)
    members = addr.shape[0]
    out = np.zeros((3, members), np.int64)
    live = active.any(axis=1)
    if not live.any():
        return out[0], out[1], out[2]
    # the members sharing the first live member's pattern (numpy); any others exactly (numba)
    ref = int(np.argmax(live))
    first = int(np.argmax(active[ref]))
    shift = addr[:, first] - addr[ref, first]
    same = live & (shift % bank_bytes == 0) & (active == active[ref]).all(axis=1) & \
        ((addr - shift[:, None] == addr[ref]) | ~active).all(axis=1)
    out[:, same] = np.array(_row_np(addr[ref], active[ref], int(nbytes), int(banks), int(bank_bytes), rule))[:, None]
    rest = np.nonzero(live & ~same)[0]
    if rest.size:
        order, starts = _phase_lanes(int(nbytes), int(lanes), rule)
        got = _conflicts_batched(np.ascontiguousarray(addr[rest]), np.ascontiguousarray(active[rest]), order,
                                 starts, max(1, int(nbytes) // int(bank_bytes)), int(banks), int(bank_bytes))
        out[:, rest] = np.stack(got)
    return out[0], out[1], out[2]
