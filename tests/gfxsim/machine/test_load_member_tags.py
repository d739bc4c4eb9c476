"""A folded load's tags looked up and folded on member 0's elements and the members' offsets
(vmem.SEPARABLE_LOAD_TAGS: Buffer.member_tags, Fold.fold_member_tags) against every element looked
up and folded (Buffer.tags_at, Fold.fold_prov): the same folded planes, shifts and Unfolded over
random layouts, classes and earlier shifts, and whole launches (int8_kv_cache, the decode) that
leave the same records, findings, buffers and report either way."""
import copy
import json

import numpy as np
import pytest

from gfxsim.cli import main
from gfxsim.machine import fold as F, vmem
from gfxsim.machine.memory import Buffer
from gfxsim.machine.provenance import Prov
from kernels_py.int8_kv_cache import int8_kv_cache
from support.cli import no_seconds
from support.fold import random_fold, same_buffers, same_runs
from support.twins import kv_setup, wrong_block_size
from test_folded_store_check import kv_full
from test_member_tags import _buffer, _moved


def _state(fd):
    return {f: (fd.shift[f].tolist(), fd.known[f].tolist()) for f in fd.shift}


def _outcome(fn):
    try:
        return fn(), None
    except F.Unfolded as e:
        return None, (e.what, None if e.keys is None else e.keys.tolist())


@pytest.mark.parametrize("seed", range(300))
def test_fold_member_tags_is_fold_prov(seed):
    """Where member_tags answers, fold_member_tags gives fold_prov's planes (values, dtype, order,
    contiguous) and leaves the same shifts, or raises the same Unfolded; where it answers None,
    fold_prov raises (a member that does not fold) and the shifts are as before."""
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(1, 5))
    shape = tuple(int(rng.integers(1, 7)) for _ in range(nd))
    buf = _buffer(rng, shape)
    if seed % 5 == 2:                        # a field no element holds (no member's shift set)
        tags = dict(buf.tag_arrays)
        tags["f1"] = np.full_like(tags["f1"], -1)
        buf = Buffer("b", buf.array, tags)
    M, L, R = int(rng.integers(1, 6)), int(rng.choice([1, 4, 8])), int(rng.integers(1, 4))
    elem = _moved(rng, shape, M, L, R)
    if seed % 4 == 3 and L > 1:              # lanes in groups, each moved by its own offset
        G = int(rng.choice([2, L]))
        elem = _moved(rng, shape, M * G, L // G, R)
    if seed % 4 == 1 and M > 1:             # a member's elements elsewhere: may not fold
        elem[:, L * int(rng.integers(1, M)):][:, :L] = _moved(rng, shape, 1, L, R)
    runs = seed % 6 == 5                     # a load's elements in order: row r is row 0 plus r
    if runs:
        elem = elem[:1] + np.arange(R)[:, None]
        if elem.max() >= buf.array.size:
            return
    if seed % 2:                             # a load's indices: int32
        elem = elem.astype(np.int32)
    sep = buf.member_tags(elem, L, buf.tag_fields, both=True, runs=runs)
    if sep is None:
        return
    tags = buf.tags_at(elem)
    for f, (kind, x) in sep.items():        # what each kind stands for: every element's tag
        if kind == "both":
            u, j = x
            assert u.dtype == np.int32 and u.shape[0] == M and j.shape == (R, L), seed
            placed = np.take(u, j, axis=1).transpose(1, 0, 2).reshape(R, M * L)
            assert np.array_equal(placed, tags[f]), (seed, f)
    a = random_fold(rng, M, L)
    if seed % 3 == 0:                        # an earlier load's shifts (sometimes other ones)
        other = _moved(rng, shape, M, L, R) if seed % 2 else elem
        _outcome(lambda: a.fold_prov(Prov(4, buf.tags_at(other)), "earlier"))
    b = copy.deepcopy(a)
    before = _state(b)
    want, werr = _outcome(lambda: a.fold_prov(Prov(4, buf.tags_at(elem)), "global_load from 'b'"))
    got, gerr = _outcome(lambda: b.fold_member_tags(sep, R))
    if got is None and gerr is None:
        assert werr is not None and _state(b) == before, seed
        return
    assert gerr == werr, seed
    assert _state(a) == _state(b), seed
    if werr is None:
        assert list(got) == list(want.ids), seed
        for f in got:
            assert got[f].dtype == want.ids[f].dtype and got[f].flags.c_contiguous, (seed, f)
            assert np.array_equal(got[f], want.ids[f]), (seed, f)


_LOAD_FOLDED = vmem.VmemOps._load_folded


def _runs(monkeypatch, make, kernel, on: bool, launches: int = 1):
    monkeypatch.setattr(vmem, "SEPARABLE_LOAD_TAGS", on)
    monkeypatch.setattr(vmem, "SEPARABLE_LOAD_MIN", 0)       # small shapes: every folded load
    answered = []
    lf = _LOAD_FOLDED
    monkeypatch.setattr(vmem.VmemOps, "_load_folded", lambda self, *a: answered.append(lf(self, *a)) or answered[-1])
    setup = make()
    runs = [setup.launch(kernel, trace=False) for _ in range(launches)]
    return setup, runs, [x is not None for x in answered]


@pytest.mark.parametrize("make, kernel, finds", [(kv_full, int8_kv_cache, False), (kv_full, wrong_block_size, True),
                                                 (kv_setup, int8_kv_cache, False), (kv_setup, wrong_block_size, True)])
@pytest.mark.parametrize("launches", [1, 2])
def test_the_separable_load_leaves_what_every_element_leaves(monkeypatch, make, kernel, finds, launches):
    """int8_kv_cache's folded loads (answered on member 0's elements) and the launches' findings,
    records and buffers are the same either way."""
    (a, ra, off), (b, rb, answered) = (_runs(monkeypatch, make, kernel, on, launches) for on in (False, True))
    assert not any(off)
    if make is kv_full:
        assert any(answered)                          # the key and value loads (full EXEC)
    for x, y in zip(ra, rb):
        assert bool(y.findings) == finds
        same_runs(x, y)
    for name in a.outputs:
        same_buffers(a.buffers[name], b.buffers[name], ra[-1].machine.wide, rb[-1].machine.wide)


def _report(capsys, monkeypatch, on, argv):
    monkeypatch.setattr(vmem, "SEPARABLE_LOAD_TAGS", on)
    monkeypatch.setattr(vmem, "SEPARABLE_LOAD_MIN", 0)
    answered, lf = [], _LOAD_FOLDED
    monkeypatch.setattr(vmem.VmemOps, "_load_folded", lambda self, *a: answered.append(lf(self, *a)) or answered[-1])
    assert main(["run", *argv, "--report", "json", "--quiet"]) == 0
    assert any(x is not None for x in answered) == on       # the cache's loads (and the decode's scales)
    return no_seconds(json.loads(capsys.readouterr().out))


@pytest.mark.parametrize("argv", [["int8_kv_cache", "--heads", "8", "--kv-heads", "2", "--context", "512"],
                                  ["paged_attention_decode", "--heads", "8", "--kv-heads", "2", "--context", "1024"]])
def test_the_report_is_the_same_either_way(capsys, monkeypatch, argv):
    """The whole command's JSON report, seconds aside, with the separable load on and off."""
    assert _report(capsys, monkeypatch, True, argv) == _report(capsys, monkeypatch, False, argv)
