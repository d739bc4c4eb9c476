"""LDS bank conflicts under the gfx9 model: 32 banks of 4 bytes.

A wave64 DS access is split into passes that each move 128 bytes: 32 lanes for 1-4 byte
accesses, 16 lanes for ds_*_b64, 8 lanes for ds_*_b128. Within a pass every bank serves one
dword per cycle; lanes reading the same dword share it (broadcast). The conflict degree of a
pass is the largest number of distinct dwords any bank must serve; the access costs the sum of
its passes' degrees in cycles (the conflict-free cost is one cycle per pass).
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _conflicts(addr, active, nbytes, banks, bank_bytes):
    lanes = addr.shape[0]
    per_pass = max(1, (banks * bank_bytes) // max(nbytes, bank_bytes))
    dwords = max(1, nbytes // bank_bytes)
    worst = 0
    cycles = 0
    n_pass = (lanes + per_pass - 1) // per_pass
    seen = np.empty(per_pass * dwords, np.int64)
    for p in range(n_pass):
        n = 0
        for l in range(p * per_pass, min(lanes, (p + 1) * per_pass)):
            if active[l]:
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
        degree = 0
        for b in range(banks):
            c = 0
            for s in range(n):
                if seen[s] % banks == b:
                    c += 1
            if c > degree:
                degree = c
        if n > 0:
            cycles += degree
            if degree > worst:
                worst = degree
    return worst, cycles, n_pass


def bank_conflicts(addr: np.ndarray, active: np.ndarray, nbytes: int, banks: int = 32, bank_bytes: int = 4):
    """(conflict degree, cycles, passes) of one DS access by all lanes of a wave."""
    return _conflicts(np.asarray(addr, np.int64), np.asarray(active, np.bool_), int(nbytes), int(banks),
                      int(bank_bytes))
