"""A folded load of what stores left, its footprints compared by table row and made for the
representatives alone (vmem.STORED_LOADS_FOLDED: Fold.fold_stored), against every member's planes
and sets gathered, translated and folded (MemProv.gather, memory._import, Fold.fold_prov): the same
folded planes, footprints, shifts, names, interned sets and Unfolded over random planes, classes,
earlier shifts and foreign names, and whole launches (the decode's reduce, its defective twins)
that leave the same records, sums, findings, buffers and report either way."""
import copy
import json

import numpy as np
import pytest

from gfxsim.cli import main
from gfxsim.machine import fold as F, memory, vmem
from gfxsim.machine.mmalog import FOREIGN_BASE, PAIR_BASE, MmaLog
from gfxsim.machine.fpplane import FpPlane
from gfxsim.machine.provenance import Mask, Prov, WideSets
from kernels_py.host.buffers import decode_buffers, make_cache
from kernels_py.paged_attention_decode import paged_attention_decode, paged_attention_reduce
from kernels_py.workloads.data import make_attention_inputs
from support import DEFECTIVE
from support.cli import no_seconds
from support.fold import random_fold, same_buffers, same_runs


class _Launch:
    """What memory._import reads of a launch: its log and wide sets."""

    def __init__(self):
        self.wide = WideSets()
        self.mma_log = MmaLog(self.wide)


def _state(fd):
    return ({f: (fd.shift[f].tolist(), fd.known[f].tolist()) for f in fd.shift},
            {i: s.tolist() for i, s in fd.name_shift.items()})


def _outcome(fn):
    try:
        return fn(), None
    except F.Unfolded as e:
        return None, (e.what, None if e.keys is None else e.keys.tolist())


def _planes(rng, units, M, L, R, idx, seed):
    """Stored planes [units] whose entries at ``idx`` fold (each member its representative's plus a
    shift), or, on some seeds, do not (a member's entry moved, names of another result)."""
    planes = {}
    for f in ("token", "head")[:int(rng.integers(0, 3))]:
        p = np.full(units, -1, np.int32)
        held = rng.random(units) < (0.0 if seed % 7 == 3 else 0.8)
        p[held] = rng.integers(0, 1000, int(held.sum()))
        planes[f] = p
    if seed % 3:
        mma = np.full(units, -1, np.int32)
        mn = np.full(units, -1, np.int32)
        ids = PAIR_BASE + rng.integers(0, 4, units)
        held = rng.random(units) < 0.7
        mma[held] = ids[held]
        mn[held] = rng.integers(0, 5000, int(held.sum()))
        if seed % 11 == 5:                   # @mn without @mma: what a gather keeps and fold_prov drops
            mma[:] = -1
        planes["@mma"], planes["@mn"] = mma, mn
    return planes


def _idx(rng, units, M, L, R, seed):
    """Dwords read [R, M*L]: each member reads its representative's dwords moved by an offset (or not:
    a member reading elsewhere), so tag values move with the member where the planes count up."""
    base = rng.integers(0, units // 2, (R, L))
    off = rng.integers(0, units // 4, M)
    if seed % 8 == 6:                        # every member reads the same dwords: any plane folds
        off[:] = 0
    idx = base[:, None, :] + off[None, :, None]
    if seed % 5 == 1 and M > 1:              # a member reads other dwords
        idx[:, int(rng.integers(1, M)), :] = rng.integers(0, units, (R, L))
    return np.ascontiguousarray(idx.reshape(R, M * L).astype(np.int64))


def _footprints(rng, units, wide, seed):
    """A stored footprint plane (a table of sets, as a global buffer's): one set everywhere (it
    folds wherever the members read), or random window and wide sets (it folds where they read
    the same dwords), some entries empty."""
    fp = FpPlane(units)
    kinds = rng.integers(0, 3, units) if seed % 2 else np.full(units, int(rng.integers(0, 3)))
    m = Mask.of_values(np.where(kinds == 1, rng.integers(0, 300, units) if seed % 2 else 40, -1))
    wide_ids = [wide.intern(set(range(v, v + 700))) for v in (3, 900)]
    m.wide[kinds == 2] = wide_ids[int(seed % 3 == 0)] if not seed % 2 else \
        np.array(wide_ids, np.uint32)[rng.integers(0, 2, int((kinds == 2).sum()))]
    fp.assign(np.arange(units), m)
    return fp


def _counting(planes, idx):
    """Planes that count up along the dwords read (each member's values its representative's plus
    the member's offset): the common case, where the members fold."""
    out = {}
    for f, p in planes.items():
        q = np.where(p >= 0, np.arange(len(p), dtype=np.int32) + 7, -1).astype(np.int32)
        out[f] = q if f != "@mma" else np.where(p >= 0, PAIR_BASE + 2, -1).astype(np.int32)
    return out


def _addr(idx):
    """The bytes [4 * rows, width] of the dwords ``idx`` [rows, width], as a load's byte addresses."""
    R, W = idx.shape
    return (idx[:, None, :] * 4 + np.arange(4)[None, :, None]).reshape(R * 4, W)


@pytest.mark.parametrize("seed", range(300))
def test_fold_stored_is_the_gather_then_fold_prov(seed):
    """Where fold_stored answers, fold_prov of the gathered (and translated) planes gives the same
    folded planes (values, dtype, order, contiguous) and footprints and leaves the same shifts and
    names, or raises the same Unfolded; where it answers None, it changed nothing."""
    rng = np.random.default_rng(seed)
    M, L, R = int(rng.integers(1, 6)), int(rng.choice([1, 4, 8])), int(rng.integers(1, 3))
    units = 64
    idx = _idx(rng, units, M, L, R, seed)
    planes = _planes(rng, units, M, L, R, idx, seed)
    if seed % 2:
        planes = _counting(planes, idx)
    mem = memory.MemProv(units * 4, dict(planes), unit=4, tabled=True)
    foreign = seed % 4 == 1
    origin, machine, machine_b = _Launch(), _Launch(), _Launch()
    if seed % 3 != 1:
        mem.fp["token"] = _footprints(rng, units, origin.wide if foreign else machine.wide, seed)
    if not foreign:                          # one launch's own stores: one WideSets
        machine_b = machine
    a = random_fold(rng, M, L)
    if seed % 3 == 0:                        # an earlier load's shifts (sometimes other ones)
        other = _idx(rng, units, M, L, R, seed + 1) if seed % 2 else idx
        g = mem.gather(_addr(other), 4)
        _outcome(lambda: a.fold_prov(g, "earlier"))
    b = copy.deepcopy(a)
    before = _state(b)
    addr = _addr(idx)

    def slow():
        p = mem.gather(addr, 4)
        if p is not None:
            p = Prov(p.g, p.ids, {f: Mask(*(x.copy() for x in (m.base, m.bits, m.wide))) for f, m in p.fp.items()},
                     p.flags)
        if foreign:
            p = memory._import(p, origin, machine)
        return a.fold_prov(p, "global_load from 'b'")
    want, werr = _outcome(slow)
    if mem.empty():                          # nothing stored: no provenance (Buffer.stored_words: None)
        assert want is None and werr is None
        return
    imported = (lambda p: memory._import(p, origin, machine_b)) if foreign else None
    assert np.array_equal(mem.word_index(addr, 4), idx)
    wide_before = list(machine_b.wide.nodes)
    got, gerr = _outcome(lambda: b.fold_stored(mem, idx, imported, "global_load from 'b'"))
    if got is None and gerr is None:
        assert _state(b) == before and machine_b.wide.nodes == wide_before, seed
        assert not foreign or not machine_b.mma_log.foreign, seed
        return
    assert gerr == werr, seed
    assert _state(a) == _state(b), seed
    if foreign:                              # the same sets interned, and the same earlier log known, in order
        assert machine_b.wide.nodes == machine.wide.nodes, seed
        assert [x is origin.mma_log for x, _ in machine_b.mma_log.foreign] == \
            [x is origin.mma_log for x, _ in machine.mma_log.foreign], seed
    if werr is None:
        assert got.g == want.g and list(got.ids) == list(want.ids), seed
        for f in got.ids:
            assert got.ids[f].dtype == want.ids[f].dtype and got.ids[f].flags.c_contiguous, (seed, f)
            assert np.array_equal(got.ids[f], want.ids[f]), (seed, f)
        assert list(got.fp) == list(want.fp) and got.flags is None and want.flags is None, seed
        for f in got.fp:
            for x, y in zip((got.fp[f].base, got.fp[f].bits, got.fp[f].wide),
                            (want.fp[f].base, want.fp[f].bits, want.fp[f].wide)):
                assert x.dtype == y.dtype and x.flags.c_contiguous and np.array_equal(x, y), (seed, f)
        if foreign and "@mma" in got.ids:
            assert (got.ids["@mma"][got.ids["@mma"] >= 0] >= FOREIGN_BASE).all()


def test_fold_stored_answers_where_the_rows_fold():
    """One class whose members read the same sets by other entries (the rows equal): fold_stored
    answers (not the fallback) with the representatives' sets; a member whose row differs, None."""
    M, L, units = 4, 8, 64
    idx = (np.arange(L)[None, None, :] + 8 * np.arange(M)[None, :, None]).reshape(1, M * L).astype(np.int64)
    mem = memory.MemProv(units * 4, {"token": np.arange(units, dtype=np.int32)}, unit=4, tabled=True)
    fp = mem.fp["token"] = FpPlane(units)
    fp.assign(np.arange(units), Mask.of_values(np.arange(units) % 8))      # entry e: {e % 8}
    got = F.Fold(M, L).fold_stored(mem, idx, None, "x")
    assert got is not None and got.ids["token"].tolist() == [list(range(L))]
    rep = got.fp["token"].map(lambda x: x[0])
    assert rep.base.shape == (L,) and [rep.values_at(i, None) for i in range(L)] == [{i} for i in range(L)]
    fp.assign(np.array([10]), Mask.of_values(np.array([50])))             # member 1's lane 2: {50}
    assert F.Fold(M, L).fold_stored(mem, idx, None, "x") is None


# -- whole launches: the decode and its reduce ------------------------------------------------------
_STORED = vmem.VmemOps._load_stored_folded


def _decode(monkeypatch, on: bool, reduce_kernel=paged_attention_reduce, context=1000):
    monkeypatch.setattr(vmem, "STORED_LOADS_FOLDED", on)
    answered = []
    monkeypatch.setattr(vmem.VmemOps, "_load_stored_folded",
                        lambda self, *a: answered.append(_STORED(self, *a)) or answered[-1])
    d = make_attention_inputs(seed=3, num_seqs=1, num_heads=8, num_kv_heads=2, head_dim=128, context_lens=[context])
    cache = make_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True)
    setup = decode_buffers(d["q"], cache)
    r1 = setup.decode.launch(paged_attention_decode, trace=False, launches=2)
    r2 = setup.reduce.launch(reduce_kernel, trace=False, launches=2)
    return setup, (r1, r2), [x is not None for x in answered]


def test_the_reduce_leaves_what_every_member_gathered_leaves(monkeypatch):
    """The decode and its reduce (a tail partition: partial EXEC in its last partition) leave the
    same records, sums, findings and buffers with the stored loads folded in one pass or not."""
    (a, ra, off), (b, rb, answered) = (_decode(monkeypatch, on) for on in (False, True))
    assert not any(off) and any(answered)         # the reduce's loads of tmp_out, exp_sums, max_logits
    for x, y in zip(ra, rb):
        same_runs(x, y)
    for name in ("tmp_out", "exp_sums", "max_logits", "out"):
        same_buffers(a.buffers[name], b.buffers[name], ra[-1].machine.wide, rb[-1].machine.wide)


def _report(capsys, monkeypatch, on, argv):
    monkeypatch.setattr(vmem, "STORED_LOADS_FOLDED", on)
    answered = []
    monkeypatch.setattr(vmem.VmemOps, "_load_stored_folded",
                        lambda self, *a: answered.append(_STORED(self, *a)) or answered[-1])
    assert main(["run", *argv, "--report", "json", "--quiet"]) == 0
    assert any(x is not None for x in answered) == on
    return no_seconds(json.loads(capsys.readouterr().out))


@pytest.mark.parametrize("argv", [
    ["paged_attention_decode", "--heads", "8", "--kv-heads", "2", "--context", "1024"],
    # defective: partition 1 re-reads partition 0's tokens (the reduce's double count)
    ["paged_attention_decode", "--context", "1024", "--partition-size", "512", "--kernel-fn",
     f"{DEFECTIVE / 'wrong_partition.py'}:paged_attention_decode"],
    # defective: every head but 0 weighs its partials with other heads' statistics
    ["paged_attention_decode", "--context", "1000", "--reduce-fn",
     f"{DEFECTIVE / 'reduce_stats_stride.py'}:reduce_stats_stride"]])
def test_the_report_is_the_same_either_way(capsys, monkeypatch, argv):
    """The whole command's JSON report (findings included), seconds aside, either way."""
    assert _report(capsys, monkeypatch, True, argv) == _report(capsys, monkeypatch, False, argv)
