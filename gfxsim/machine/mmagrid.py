"""A batch of matrix instructions that pairs each of a few A operands with each of a few B operands
(SageAttention's PV K step: P~ of 2 row tiles against V of 16 head-dim tiles) as one matrix: the
A's stacked along M, the B's along N, each instruction's C in its block. An accumulator model
works element by element (D[m][n] reads A's row m, B's column n and C[m][n]; a term that sends
the model to its general path sends the whole batch there, as a batch of the same elements
does), so each instruction's D is its block of the big D, bit for bit, from one pass over rows
16 times longer and each operand converted once."""
from __future__ import annotations

import numpy as np


def grid_of(a_vals, b_vals):
    """(distinct A arrays, distinct B arrays, each issue's (i, j)) where the issues pair every
    distinct A with every distinct B exactly once (found as the same objects); None otherwise."""
    a_seen, b_seen, at = [], [], []
    for a, b in zip(a_vals, b_vals):
        i = next((k for k, x in enumerate(a_seen) if x is a), None)
        if i is None:
            i = len(a_seen)
            a_seen.append(a)
        j = next((k for k, x in enumerate(b_seen) if x is b), None)
        if j is None:
            j = len(b_seen)
            b_seen.append(b)
        at.append((i, j))
    if len(set(at)) != len(at) or len(at) != len(a_seen) * len(b_seen):
        return None
    return a_seen, b_seen, np.array(at, np.int64).reshape(-1, 2)


def stacked(ga, gb, gc, at):
    """The one matrix: A [1, nA*M, K] from the distinct A's ``ga`` [nA, M, K], B [1, K, nB*N]
    from ``gb`` [nB, K, N], C [1, nA*M, nB*N] with issue k's ``gc[k]`` [M, N] at block ``at[k]``."""
    n_a, m, k = ga.shape
    n_b, _, n = gb.shape
    order = np.empty(n_a * n_b, np.int64)
    order[at[:, 0] * n_b + at[:, 1]] = np.arange(len(at))      # the issue at each block, row-major
    c = gc[order].reshape(n_a, n_b, m, n).transpose(0, 2, 1, 3).reshape(1, n_a * m, n_b * n)
    return ga.reshape(1, n_a * m, k), gb.transpose(1, 0, 2).reshape(1, k, n_b * n), c


def unstacked(d, at, n_a, n_b):
    """Each issue's D [issues, M, N]: block ``at[k]`` of the one matrix's D [1, nA*M, nB*N]."""
    m, n = d.shape[1] // n_a, d.shape[2] // n_b
    return d.reshape(n_a, m, n_b, n).transpose(0, 2, 1, 3)[at[:, 0], at[:, 1]]
