"""LDS bank conflicts under the gfx9 model: 32 banks of 4 bytes.

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

from functools import lru_cache

import numba
import numpy as np

_B128_PAIR = (0, 1, 2, 3, 1, 0, 3, 2)     # 4-lane group q (0..7 in a half) -> its phase in that half


@lru_cache(maxsize=None)
def phases(nbytes: int, lanes: int = 64) -> np.ndarray:
    """Phase (conflict set) of every lane of a wave for an access of ``nbytes`` per lane."""
    l = np.arange(lanes)
    if nbytes <= 4:
        ph = l // 32
    elif nbytes <= 8:
        ph = l // 16
    else:
        ph = (l // 32) * 4 + np.array(_B128_PAIR)[(l % 32) // 4]
    ph = ph.astype(np.int64)
    ph.setflags(write=False)
    return ph


@numba.njit(cache=True)
def _conflicts(addr, active, phase, n_phase, nbytes, banks, bank_bytes):
    dwords = max(1, nbytes // bank_bytes)
    worst = 0
    cycles = 0
    used = 0
    seen = np.empty(addr.shape[0] * dwords, np.int64)
    for p in range(n_phase):
        n = 0
        for l in range(addr.shape[0]):
            if active[l] and phase[l] == p:
                base = addr[l] // bank_bytes
                for d in range(dwords):
                    dw = base + d
                    dup = False
                    for s in range(n):
                        if seen[s] == dw:
                            dup = True
                            break
                    if not dup:
                        seen[n] = dw
                        n += 1
        if n == 0:
            continue
        used += 1
        degree = 0
        for b in range(banks):
            c = 0
            for s in range(n):
                if seen[s] % banks == b:
                    c += 1
            if c > degree:
                degree = c
        cycles += degree
        if degree > worst:
            worst = degree
    return worst, cycles, used


def bank_conflicts(addr: np.ndarray, active: np.ndarray, nbytes: int, banks: int = 32, bank_bytes: int = 4):
    """(conflict degree, cycles, phases used) of one DS access by the lanes of one wave."""
    addr = np.asarray(addr, np.int64)
    ph = phases(int(nbytes), addr.shape[0])
    return _conflicts(addr, np.asarray(active, np.bool_), ph, int(ph.max()) + 1, int(nbytes), int(banks),
                      int(bank_bytes))
