"""ds_bpermute_b32 without provenance, compiled: each lane's source lane from its address, the
source word (0 from an inactive source lane) and its freshness gathered, then written under EXEC
with the written bits, in one pass (semantics/ds.py ``_bpermute_words`` in numpy: a dozen calls)."""
from __future__ import annotations

import numpy as np

from ..machine.jit import njit


@njit
def permute_words(addr, offset, lanes, ex, data, data_fresh, dst, dst_written, dst_fresh):
    """D[l] = data[((addr[l] + offset) >> 2) mod lanes] within each member, 0 where that source lane
    is inactive; written (words, the 4 written-byte rows, freshness) in the active lanes. Every
    source is read before any destination is written (dst may be addr or data)."""
    width = addr.shape[0]
    words = np.empty(width, np.uint32)
    fresh = np.empty(width, np.bool_)
    for c in range(width):
        a = (np.int64(addr[c]) + offset) & 0xFFFFFFFF
        s = (c // lanes) * lanes + (a >> 2) % lanes
        on = ex[s]
        words[c] = data[s] if on else np.uint32(0)
        fresh[c] = data_fresh[s] and on
    for c in range(width):
        if ex[c]:
            dst[c] = words[c]
            dst_fresh[c] = fresh[c]
            for k in range(4):
                dst_written[k, c] = True
