"""A global access's address without provenance, compiled: each lane's 64-bit address (a VGPR
pair, or an SGPR pair plus a VGPR offset) plus the instruction's offset, and where every active
lane is in one buffer's span, the byte offsets into it, in one pass (semantics/mem.py's
``global_address`` and ``AddressSpace.one_buffer`` in numpy: a dozen calls)."""
from __future__ import annotations

import numpy as np

from ..machine.jit import njit


@njit
def buffer_offsets(lo, hi, pair, s, sfirst, lanes, off, ex, base, span, nbuf, offs):
    """The buffer k every active lane's address falls in (-1: none, several, or no active lane),
    the offsets ``offs`` [width] into it (int64, wrapping as numpy's cast does; 0 in inactive
    lanes). An address is lo | hi << 32 (``pair``) or the member's SGPR pair s[m, sfirst:sfirst+2]
    plus lo, then plus ``off`` (uint64: every sum wraps modulo 2^64)."""
    width = lo.shape[0]
    b0, sp, add = np.uint64(base), np.uint64(span), np.uint64(off)
    addr = np.empty(width, np.uint64)
    amin, amax = np.uint64(0xFFFFFFFFFFFFFFFF), np.uint64(0)
    seen = False
    for c in range(width):
        if pair:
            a = np.uint64(lo[c]) | (np.uint64(hi[c]) << np.uint64(32))
        else:
            m = c // lanes
            a = (np.uint64(s[m, sfirst]) | (np.uint64(s[m, sfirst + 1]) << np.uint64(32))) + np.uint64(lo[c])
        a = a + add
        addr[c] = a
        if ex[c]:
            seen = True
            if a < amin:
                amin = a
            if a > amax:
                amax = a
    if not seen or amin < b0:
        return -1
    k = (amin - b0) // sp
    if k != (amax - b0) // sp or k >= np.uint64(nbuf):
        return -1
    b = b0 + k * sp
    for c in range(width):
        offs[c] = np.int64(addr[c] - b) if ex[c] else 0
    return np.int64(k)
