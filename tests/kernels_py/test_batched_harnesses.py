"""The producer (int8_kv_cache) and the prefill (prefix_prefill) run their workgroups side by side
(kernels_py/host/twins.py sets the batch; the kernels branch on per-lane conditions). A batched run
must produce what the same launch one workgroup at a time produces: outputs, findings, what the
stores left (bytes, written bits, identities, footprints), and the matrix-instruction records;
folded, every record and sum as with every workgroup's provenance (support.fold)."""
import json
import re

import numpy as np
import pytest

from kernels_py.int8_kv_cache import int8_kv_cache
from kernels_py.prefix_prefill import prefix_prefill
from gfxsim.machine.foldrec import FoldedPair, FoldedRecord
from gfxsim.machine.mmalog import MmaRecord
from gfxsim.machine.provenance import RESERVED
from support.fold import _same_prov, same_buffers, same_runs
from support.twins import kv_setup as _kv_setup, prefill_setup as _prefill_setup, wrong_block_size as _wrong_block_size


def _short_context(w, *args, context_len, **kw):
    """The prefill told a context one token shorter: every query row misses its last token."""
    return prefix_prefill(w, *args, context_len=context_len - 1, **kw)


def _findings(run):
    """Every finding but the register and trace position it names: side by side, the workgroup ids
    (and what they derive) are per-lane values, which take registers and statements a lone
    workgroup's Python ints do not."""
    out = []
    for f in run.findings:
        d = f.to_dict()
        d.pop("instruction")
        d["details"].pop("register", None)
        d["message"] = re.sub(r"\bv\d+\b", "v#", d["message"])
        out.append(json.dumps(d, sort_keys=True, default=str))
    return sorted(out)


def _records(run):
    """The matrix-instruction records per (workgroup, wave, label): every tagged field of A's and B's elements."""
    return sorted((tuple(r.workgroup), r.wave, str(r.label), r.op,
                   [(op, f, r.slot_tags(op, f).tolist()) for op in "AB" for f in r.fields(op)])
                  for r in run.mmacs())


def _launch(make, kernel, batch):
    setup = make()
    if batch is not None:
        setup.batch = batch
    return setup, setup.launch(kernel, trace=False)


@pytest.mark.parametrize("make, kernel, finds", [(_kv_setup, int8_kv_cache, False),
                                                 (_kv_setup, _wrong_block_size, True),
                                                 (_prefill_setup, prefix_prefill, False),
                                                 (_prefill_setup, _short_context, True)])
def test_a_batched_run_equals_the_run_one_workgroup_at_a_time(make, kernel, finds):
    (one, r1), (side, rb) = _launch(make, kernel, 1), _launch(make, kernel, None)
    assert side.batch > 1 and all(n["members"] == 1 for n in r1.folds)
    assert any(n["members"] > 1 for n in rb.folds)
    assert bool(rb.findings) == finds
    assert _findings(r1) == _findings(rb)
    assert _records(r1) == _records(rb)
    for name in one.outputs:
        _same_stores(one.buffers[name], side.buffers[name], r1.machine.wide, rb.machine.wide)


@pytest.mark.parametrize("kernel", [prefix_prefill, _short_context])
def test_without_provenance_a_prefill_batch_spans_query_blocks_and_equals_the_lone_runs(kernel):
    """The heads of several query blocks run side by side; with provenance each block is a class of
    its own from the start (fold_apart), so the batch folds at its first attempt."""
    runs = []
    for batch in (1, None):
        setup = _prefill_setup()
        if batch is not None:
            setup.batch = batch
        runs.append((setup, setup.launch(kernel, trace=False, provenance=False)))
    (one, r1), (side, rb) = runs
    assert [n["members"] for n in rb.folds] == [8]             # 2 query blocks x 4 heads
    assert [(n["members"], n["classes"], n["attempts"]) for n in _launch(_prefill_setup, kernel, None)[1].folds] \
        == [(8, 2, 1)]
    assert _findings(r1) == _findings(rb) and _records(r1) == _records(rb)
    for name in one.outputs:
        a, b = one.buffers[name], side.buffers[name]
        assert np.array_equal(a.raw, b.raw) and np.array_equal(a.written, b.written)


def _same_stores(a, b, wa, wb):
    """Bytes, written bits, identities, footprints and marks of a buffer, but the names of matrix
    results (@mma/@mn: record numbers, which a batch numbers its own way)."""
    assert np.array_equal(a.raw, b.raw) and np.array_equal(a.written, b.written), a.name
    pa, pb = (x.prov._planes().map(lambda v: v) for x in (a, b))
    for p in (pa, pb):
        for f in RESERVED:
            p.ids.pop(f, None)
    _same_prov(pa, wa, pb, wb, a.name)


@pytest.mark.parametrize("make, kernel", [(_kv_setup, int8_kv_cache), (_prefill_setup, prefix_prefill)])
def test_a_batch_folds_and_keeps_every_record(monkeypatch, make, kernel):
    def whole():           # the batch unfolded as one (the prefill's unfolded_batch splits it in blocks)
        setup = make()
        setup.unfolded_batch = None
        return setup
    monkeypatch.setenv("GFXSIM_FOLD", "0")
    every, ra = _launch(whole, kernel, None)
    monkeypatch.setenv("GFXSIM_FOLD", "1")
    folded, rb = _launch(whole, kernel, None)
    same_runs(ra, rb)
    for name in every.outputs:
        same_buffers(every.buffers[name], folded.buffers[name], ra.machine.wide, rb.machine.wide)
    assert all(n["attempts"] == 0 for n in ra.folds)
    assert all(n["unfolded"] is None and n["classes"] <= 2 for n in rb.folds), rb.folds          # padding: a class
    if kernel is prefix_prefill:     # its records and sums held once per class (compared above, placed for every member)
        pairs = rb.machine.mma_log.pairs
        assert pairs and all(isinstance(p, FoldedPair) for p in pairs)
        assert not any(isinstance(p, FoldedPair) for p in ra.machine.mma_log.pairs)
        assert all(isinstance(r, FoldedRecord) for r in rb.machine.mma_log.records)
        assert not any(isinstance(r, FoldedRecord) for r in ra.machine.mma_log.records)
        for x, y in zip(ra.machine.mma_log.records, rb.machine.mma_log.records):   # read without placing
            assert y.k_set_fields() == x.k_set_fields() == x.ks_a.keys() | x.ks_b.keys() and x.k_set_fields()
            for op in "AB":
                for f in ("token", "head", "dim"):
                    assert np.array_equal(x.k_slots(op, f), y.k_slots(op, f)), (x.first, op, f)
                    assert np.array_equal(MmaRecord.k_slots(y, op, f), y.k_slots(op, f)), (x.first, op, f)
