"""MmaLog.ksets unites a field's K sets of every record it is asked about at once
(mmalog.KSETS_TOGETHER); record by record is the reference: the same sets, element for element,
for elements of many records asked in a shuffled order with repeats, and the same SageAttention
run (records, findings, output) with either."""
import numpy as np
import pytest

import gfxsim.machine.mmalog as ML
from gfxsim.machine.provenance import WINDOW, Mask
from support.records import field_key
from support.sage_small import small_sage_run


def _run(wrong_layout: bool):
    return small_sage_run(5, wrong_layout)


def _everything(wrong_layout: bool):
    out, run = _run(wrong_layout)
    log = run.machine.mma_log
    recs = [field_key((r.first, r.op, r.ks_a, r.ks_b, r.c_mma, r.c_mn)) for r in log.records]
    return out.tobytes(), recs, [(f.kind, f.lane, f.message) for f in run.findings]


def _sets(log, wide, ids, mn):
    got = log.ksets(ids, mn, wide)
    return {f: [m.values_at(i, wide) for i in range(len(ids))] for f, m in got.items()}


@pytest.mark.parametrize("wrong_layout", [False, True])
def test_ksets_of_many_records_at_once_are_record_by_record(monkeypatch, wrong_layout):
    _, run = _run(wrong_layout)
    log, wide = run.machine.mma_log, run.machine.wide
    # the run's A and B sets agree; make records whose B sets differ (several windows: wide
    # sets), records with B's alone, and records with A's alone
    rng = np.random.default_rng(1)
    for i, r in enumerate(log.records):
        if i % 4 == 0:
            r.ks_b = {f: Mask.of_values(rng.integers(-1, 3 * WINDOW, m.base.shape)) for f, m in r.ks_b.items()}
        elif i % 4 == 1:
            r.ks_a = {}
        elif i % 4 == 2:
            r.ks_b = {}
    ids, mn = [], []
    for r in log.records:
        per = r.insn.blocks * r.insn.M * r.insn.N
        for m in r.live:
            ids += [r.first + m] * per
            mn += list(range(per))
    pick = rng.permutation(len(ids))[:4000]
    pick = np.concatenate([pick, pick[:500]])          # some elements asked twice
    ids, mn = np.asarray(ids)[pick], np.asarray(mn)[pick]
    together = _sets(log, wide, ids, mn)
    monkeypatch.setattr(ML, "KSETS_TOGETHER", False)
    each = _sets(log, wide, ids, mn)
    assert together == each
    assert together and any(len(s) > 1 for sets in together.values() for s in sets)


@pytest.mark.parametrize("wrong_layout", [False, True])
def test_ksets_together_changes_no_run(monkeypatch, wrong_layout):
    together = _everything(wrong_layout)
    monkeypatch.setattr(ML, "KSETS_TOGETHER", False)
    each = _everything(wrong_layout)
    assert together == each and len(together[1]) > 0
    assert bool(together[2]) == wrong_layout
