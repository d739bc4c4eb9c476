"""What a matrix instruction's C carries into its D (D = A.B + C).

C is a partial sum of one output element. It must be the same element's — the row and column
identities A's row m and B's column n give D[m][n] (a query row, a token, a V dim) — and it must not
have consumed already what A.B sums again (a K value summed twice into one element):

* ``accumulator-carried``: C holds another element's identity than D (an accumulator zeroed once
  per chunk instead of once per output tile carries one tile's sums into the next);
* ``double-count``: C's element is D's (or names none), and C's K set meets A row m's or B column
  n's (a k-step issued twice into one chain).
"""
from __future__ import annotations

import numpy as np

from ..arch.kslots import format_token_set
from .consumed import describe, intersect
from .provenance import Mask


def element_name(insn, blk: int, m: int, n: int) -> str:
    """``D[m][n]`` (with its block where the instruction has several)."""
    return f"D[{m}][{n}]" + (f" block {blk}" if insn.blocks > 1 else "")


def report_carried(wave, insn, idx: int, label: str | None, clashes: list, c_mma, c_mn, lanes, live_rows) -> np.ndarray:
    """One ``accumulator-carried`` finding per field whose C disagrees with D's identity.
    ``clashes``: [(field, clash [nb, M, N] D's value where C's differs else -1, C's value [nb, M, N])];
    ``lanes``: D's batch column of each element [nb, M, N]. Returns where any field clashed."""
    log = wave.machine.mma_log
    where = np.zeros(clashes[0][1].shape, bool)
    for f, clash, vc in clashes:
        bad = (clash >= 0) & live_rows[:, None, None]
        where |= bad
        if not bad.any():
            continue
        b, m, n = (int(x) for x in np.argwhere(bad)[0])
        d_val, c_val = int(clash[b, m, n]), int(vc[b, m, n])
        if c_mma is not None and c_mma[b, m, n] >= 0:
            c_from, c_idx = describe(log, int(c_mma[b, m, n]), int(c_mn[b, m, n]))
        else:
            c_from, c_idx = "a value loaded or computed outside a matrix instruction", -1
        elem = element_name(insn, b % insn.blocks, m, n)
        wave.finding("accumulator-carried",
                     f"{insn.mnemonic} {log.describe(idx, label)}: C of {elem} holds {f} {c_val} ({c_from}), "
                     f"but A's row and B's column make {elem} {f} {d_val}: an accumulator carried into another "
                     f"output element ({int(bad.sum())} elements)", lane=int(lanes[b, m, n]), instruction=idx,
                     field=f, element=[m, n], c_value=c_val, d_value=d_val, c_from=c_from, c_instruction=c_idx,
                     elements=int(bad.sum()))
    return where


def _cells(ks_a: dict, ks_b: dict, f: str, shape, wide) -> Mask | None:
    """A row m's ∪ B column n's K set of field f, as [nb, M, N] (None: neither side has it)."""
    nb, M, N = shape
    parts = []
    if f in ks_a:
        parts.append(ks_a[f].map(lambda x: np.broadcast_to(x[:, :, None], (nb, M, N) + x.shape[2:])))
    if f in ks_b:
        parts.append(ks_b[f].map(lambda x: np.broadcast_to(x[:, None, :], (nb, M, N) + x.shape[2:])))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else parts[0].union(parts[1], wide)


def _several(m: Mask) -> np.ndarray:
    """Whether each set holds two values or more (a wide set spans windows: always)."""
    words = m.bits
    nonzero = (words != 0).sum(axis=-1)
    one_word_several = ((words & (words - np.uint64(1))) != 0).any(axis=-1)
    return (m.wide != 0) | (nonzero > 1) | one_word_several


def c_sets(log, prev, rows, c_mma, c_mn, wide) -> dict:
    """{field: Mask [nb, M, N]}: the K sets C's elements consumed. ``prev``: the record whose D is
    exactly C (its ``rows``: the record's rows of these members, None all), or None: C's names
    followed through the log."""
    shape = c_mma.shape
    if prev is not None and prev.c_mma is None:
        pick = (lambda x: x) if rows is None else (lambda x: x[rows])
        ka = {f: m.map(pick) for f, m in prev.ks_a.items()}
        kb = {f: m.map(pick) for f, m in prev.ks_b.items()}
        return {f: got for f in ka.keys() | kb.keys() if (got := _cells(ka, kb, f, shape, wide)) is not None}
    keep = c_mma.reshape(-1) >= 0
    if not keep.any():
        return {}
    got = log.ksets(c_mma.reshape(-1)[keep], c_mn.reshape(-1)[keep], wide)
    out = {}
    for f, m in got.items():
        full = Mask.empty((c_mma.size,))
        full.assign(np.nonzero(keep)[0], m)
        out[f] = full.map(lambda x: x.reshape(shape + x.shape[1:]))
    return out


def report_summed_again(wave, insn, idx: int, label: str | None, ks_a: dict, ks_b: dict, theirs: dict, c_mma, c_mn,
                        lanes, live_rows, skip) -> None:
    """``double-count`` where A row m ∪ B column n (``ks_a``, ``ks_b``: this instruction's own K
    sets) meets what C already consumed (``theirs``, c_sets), on elements C names (c_mma >= 0) and
    whose identities agree (not ``skip``)."""
    log, wide = wave.machine.mma_log, wave.machine.wide
    shape = c_mma.shape
    for f in sorted(theirs.keys() & (ks_a.keys() | ks_b.keys())):
        own = _cells(ks_a, ks_b, f, shape, wide)
        c = theirs[f]
        over = intersect(own.map(np.ascontiguousarray), c.map(np.ascontiguousarray), wide)
        # a field that holds one value along this element's K slots names the element (a
        # query row's head), it is not summed over: only a K range is consumed once
        hit = over.nonempty() & _several(own) & (c_mma >= 0) & live_rows[:, None, None] & ~skip
        if not hit.any():
            continue
        b, m, n = (int(x) for x in np.argwhere(hit)[0])
        vals = sorted(over.values_at((b, m, n), wide))
        left, l_idx = describe(log, int(c_mma[b, m, n]), int(c_mn[b, m, n]))
        right = f"A.B of {insn.mnemonic} {log.describe(idx, label)} {element_name(insn, b % insn.blocks, m, n)}"
        wave.finding("double-count", f"C already consumed {f}s {format_token_set(vals)} that A.B sums again: "
                     f"{left} + {right} ({int(hit.sum())} elements overlap)", lane=int(lanes[b, m, n]),
                     instruction=idx, field=f, values=vals, left=left, right=right, left_instruction=l_idx,
                     right_instruction=idx, elements=int(hit.sum()))
