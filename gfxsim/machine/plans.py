"""Operand plans of a matrix instruction over a batch: where each operand element of each member and
block lies in a ``[regs, members*lanes]`` register array.

A plan depends on the instruction, the operand, the member count and the wave size only, so it is
made once and kept in the machine's ``plan_cache`` (the arrays are shared: read-only), which later
launches on the same arch profile share (``launch_cache``).
The matrix unit gathers its operands through them; the scale check reads D's plan to find a
result still in its instruction's own layout.
"""
from __future__ import annotations

import numpy as np

from .mma import gather_plan
from .strided import Form, strided_form


# A launch's plans outlive it: a process that launches again (a harness timing warm launches,
# run_on_sim, a sweep's points) makes them once (~0.2 ms a matrix mnemonic a launch, the first
# instruction's). Kept per arch profile; the plans are keyed by mnemonic, so the records they were
# made of are kept beside them (RECORDS), and a launch whose profile does not give each of those
# records for its mnemonic starts afresh; so does one that finds more than KEEP_BYTES of arrays
# (a wide batch's plans are not kept beyond the next launch).
KEEP_BYTES = 32 << 20
RECORDS = "records"                   # a cache's {mnemonic: the record its plans were made of}
_SHARED: dict = {}                    # arch name -> (the profile, its plan cache)


def launch_cache(arch) -> dict:
    """The plan cache of a launch on ``arch`` (an ArchProfile): the last launch's on the same
    profile where each of its plans is still this profile's record's and they are under
    KEEP_BYTES, else a new one."""
    kept = _SHARED.get(arch.name)
    if kept is not None and kept[0] is arch and _holds(arch, kept[1]):
        return kept[1]
    if len(_SHARED) >= 8:                 # bounded: a process on many profiles keeps the latest
        _SHARED.clear()
    cache = {RECORDS: {}}
    _SHARED[arch.name] = (arch, cache)
    return cache


def _holds(arch, cache: dict) -> bool:
    """Whether ``cache``'s plans are all of ``arch``'s records and under KEEP_BYTES."""
    if any(arch.instructions.get(m) is not insn for m, insn in cache[RECORDS].items()):
        return False
    size = 0
    for v in cache.values():
        for a in (v if isinstance(v, tuple) else (v,)):
            size += a.nbytes if isinstance(a, np.ndarray) else 0
    return size <= KEEP_BYTES


def batched_plan(cache: dict, insn, op: str, members: int, lanes: int) -> tuple:
    """(element, column) index arrays ``[members*blocks, rows, cols]`` of an operand."""
    key = (insn.mnemonic, op, members, lanes)
    got = cache.get(key)
    if got is None:
        # every other plan is made from these: the record they are of (launch_cache)
        cache.setdefault(RECORDS, {})[insn.mnemonic] = insn
        e, l = gather_plan(insn, op)
        base = (np.arange(members) * lanes)[:, None, None, None]
        got = cache[key] = (np.broadcast_to(e, (members,) + e.shape).reshape((-1,) + e.shape[1:]),
                            (l[None] + base).reshape((-1,) + l.shape[1:]))
    return got


def flat_plan(cache: dict, insn, op: str, members: int, lanes: int) -> np.ndarray:
    """The operand plan as flat indices into a ``[regs, members*lanes]`` array: ``take`` is faster
    than indexing with two arrays."""
    key = (insn.mnemonic, op, members, lanes, "flat")
    got = cache.get(key)
    if got is None:
        e, l = batched_plan(cache, insn, op, members, lanes)
        got = cache[key] = np.ascontiguousarray(e * (members * lanes) + l)
    return got


def flat_form(cache: dict, insn, op: str, members: int, lanes: int) -> Form | None:
    """flat_plan's strided form (strided.strided_form), or None: its operand gathered as a view."""
    key = (insn.mnemonic, op, members, lanes, "form")
    if key not in cache:
        cache[key] = strided_form(flat_plan(cache, insn, op, members, lanes))
    return cache[key]


def word_plan(cache: dict, insn, op: str, members: int, lanes: int, k: int) -> np.ndarray:
    """The operand plan as flat indices into its registers' words ``[regs, members*lanes]`` viewed
    as ``k`` elements a word (``words.view(dtype).reshape(-1)``): element e of lane l lies in word
    e // k, at position e % k (little-endian, as a register read regroups bytes)."""
    key = (insn.mnemonic, op, members, lanes, "words", k)
    got = cache.get(key)
    if got is None:
        e, l = batched_plan(cache, insn, op, members, lanes)
        got = cache[key] = np.ascontiguousarray((e // k) * (members * lanes * k) + l * k + e % k)
    return got


def d_inverse(cache: dict, insn, members: int, lanes: int) -> np.ndarray | None:
    """Where D's flat plan names every element of ``[regs, members*lanes]`` once and C's plan is
    D's (a matrix instruction's accumulator layout): for each element, its index into the sums
    (matrix._mma_i8's ``inv``); else None."""
    key = (insn.mnemonic, "D^-1", members, lanes)
    if key not in cache:
        td, tc = flat_plan(cache, insn, "D", members, lanes), flat_plan(cache, insn, "C", members, lanes)
        inv = None
        if td.size == insn.elems("D") * members * lanes and np.array_equal(td, tc):
            inv = np.full(td.size, -1, np.int64)
            inv[td.reshape(-1)] = np.arange(td.size)
            if (inv < 0).any():
                inv = None
        cache[key] = inv
    return cache[key]


def inverse_form(cache: dict, insn, members: int, lanes: int) -> Form | None:
    """d_inverse's strided form, or None (None too where there is no inverse): D written as one
    strided copy of the sums."""
    key = (insn.mnemonic, "D^-1 form", members, lanes)
    if key not in cache:
        inv = d_inverse(cache, insn, members, lanes)
        cache[key] = None if inv is None else strided_form(inv)
    return cache[key]


def name_planes(cache: dict, insn, shape: tuple, ids: np.ndarray, lanes: int) -> tuple:
    """(member, @mn) planes of D in its registers, ``shape`` ``[regs, len(ids)*lanes]``, for the
    members ``ids`` whose columns these are (-1 where D has no element; a folded batch's columns
    name their representatives): the same for every instruction of this shape and batch, so made
    once per launch (read-only)."""
    key = (insn.mnemonic, "names", lanes, ids.tobytes())
    got = cache.get(key)
    if got is None:
        ed, ld = batched_plan(cache, insn, "D", len(ids), lanes)
        nb, M, N = ed.shape
        bl = insn.blocks
        member = np.full(shape, -1, np.int32)
        member[ed, ld] = np.broadcast_to(np.repeat(ids, bl)[:, None, None], (nb, M, N))
        mn = np.full(shape, -1, np.int32)
        blk = np.tile(np.arange(bl), len(ids))
        mn[ed, ld] = ((blk[:, None, None] * M + np.arange(M)[None, :, None]) * N + np.arange(N)[None, None, :])
        for p in (member, mn):
            p.setflags(write=False)
        got = cache[key] = (member, mn)
    return got


def name_absent(cache: dict, insn, shape: tuple, ids: np.ndarray, lanes: int):
    """Where ``name_planes``' member plane holds no element (-1), as a bool plane; None where
    D fills every register slot (the common case: an instruction's @mma plane is then one add)."""
    key = (insn.mnemonic, "names absent", lanes, ids.tobytes())
    if key not in cache:
        member = name_planes(cache, insn, shape, ids, lanes)[0]
        absent = member < 0
        cache[key] = absent if absent.any() else None
    return cache[key]
