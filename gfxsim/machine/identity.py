"""Identity checks of elementwise arithmetic: operands that name different values of a field the
operation does not reduce over (``identity-mismatch``).

An add of two values that differ in one field is a step of a sum over that field (over tokens,
over dims); the fields a launch sums over are its axes: the K identities ``token`` and ``dim``
(what a score sums over, what softmax and PV sum over) and every field an output Buffer declares
it consumes (``Buffer.expect``). Any other field (a head, a sequence, a query row) names which
output a value belongs to: two of its values met in one add is one head's value mixed into
another's. A product of two values of different axis values is the term of a sum over that axis
(a correlation or a convolution: x[t] * x[39 - t]), so the axes are free there too; every other
field counts (another head's scale, a weight of another row); a scale of another token or dim is
the scale checks' business (scales.py). A max or min is not checked: an amax over a whole block (a per-tensor
quantization scale over every head and row) is as correct as a row max, and a softmax shifted by a
larger maximum computes the same numbers. The merged result still keeps neither value
(provenance.merge); the finding says which operands met.

Only lanes under EXEC count: an inactive lane computes from whatever its registers hold and its
result is never written.
"""
from __future__ import annotations

import numpy as np

from .provenance import Prov

AXES = frozenset({"token", "dim"})       # K identities every launch may reduce over


def axes(machine) -> frozenset:
    """The fields a reduction of this launch may combine: AXES and the outputs' declared fields."""
    return AXES | machine.mma_log.declared


def check(w, conflicts: dict, pa: Prov, pb: Prov, what: str, op: str | None, registers=()) -> None:
    """Report ``conflicts`` (field -> bool [rows, columns], provenance.merge's) of one operation:
    ``what`` "product" or "reduction" (an add or sub): the fields outside ``axes`` count."""
    skip = axes(w.machine)
    fields = [f for f in sorted(conflicts) if f not in skip]
    if not fields:
        return
    active = None if w.exec_full else w.pexec("the lanes of an elementwise operation")
    for f in fields:
        cols = conflicts[f].any(axis=0)
        if active is not None:
            cols = cols & active
        if not cols.any():
            continue
        _report(w, f, conflicts[f], cols, pa.ids[f], pb.ids[f], what, op, registers)


def _report(w, field: str, conflict: np.ndarray, cols: np.ndarray, ia, ib, what, op, registers):
    """One finding per workgroup of the batch whose lanes hold the conflict."""
    ia, ib = np.broadcast_to(ia, conflict.shape), np.broadcast_to(ib, conflict.shape)
    lanes = w.lanes
    for member in np.unique(np.flatnonzero(cols) // lanes).tolist():
        mine = np.flatnonzero(cols[member * lanes:(member + 1) * lanes])
        col = member * lanes + int(mine[0])
        row = int(np.argmax(conflict[:, col]))
        x, y = int(ia[row, col]), int(ib[row, col])
        name = op or ("a product" if what == "product" else "an add")
        regs = f" ({' and '.join(registers)})" if registers else ""
        verb, by = ("multiplies", "by") if what == "product" else ("combines", "with")
        more = f" (and {len(mine) - 1} other lanes)" if len(mine) > 1 else ""
        w.finding("identity-mismatch",
                  f"{name} {verb} {field} {x}'s value {by} {field} {y}'s{regs} in lane {int(mine[0])}{more}: "
                  f"it does not reduce over {field}, so the result belongs to neither",
                  lane=col, field=field, values=[x, y], lanes=[int(l) for l in mine], operation=name,
                  operands=list(registers))


def mixed(machine, pa: Prov, pb: Prov, elems) -> np.ndarray:
    """Per element ``elems`` (rows, columns) of an add of two named values: whether the operands'
    identities differ on a field outside ``axes`` (partials of two outputs added; consumed.py)."""
    r, c = elems
    skip = axes(machine)
    out = np.zeros(len(r), bool)
    for f in sorted((pa.ids.keys() & pb.ids.keys()) - skip):
        if f.startswith("@"):
            continue
        x, y = pa.ids[f][r, c], pb.ids[f][r, c]
        out |= (x >= 0) & (y >= 0) & (x != y)
    return out
