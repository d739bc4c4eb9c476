"""The matrix unit's remembered operands (matrix.OPERAND_MEMO: gathers, summaries, quantization
directions and whether a field varies, found as the same provenance object or by content) and its
one-take gather are shortcuts only: with the memory off and the gather by two index arrays,
SageAttention (both matrix instructions' paths: int8 QK, e4m3 PV; a silent twin and one with
findings) gives the same output bits, records, findings and event count."""
import pytest

from support.records import field_key
from support.sage_small import small_sage_run


def _everything(wrong_layout: bool):
    out, run = small_sage_run(3, wrong_layout)
    log = run.machine.mma_log
    recs = [field_key((r.first, r.op, r.label, r.a, r.b, r.ks_a, r.ks_b, r.c_mma, r.c_mn, r.quant, r.live))
            for r in log.records]
    pairs = [field_key((p.left, p.right)) for p in log.pairs]
    findings = [(f.kind, f.lane, f.message) for f in run.findings]
    return out.tobytes(), recs, pairs, findings, run.trace.n_events


@pytest.mark.parametrize("wrong_layout", [False, True])
def test_remembered_operands_and_one_take_gather_change_nothing(monkeypatch, wrong_layout):
    import gfxsim.machine.matrix as MX
    fast = _everything(wrong_layout)
    monkeypatch.setattr(MX, "OPERAND_MEMO", 0)
    monkeypatch.setattr(MX.MatrixOps, "_gathered", lambda self, insn, op, val, plan: val[plan])
    exact = _everything(wrong_layout)
    assert fast[0] == exact[0]
    assert fast[1] == exact[1] and len(fast[1]) > 0
    assert fast[2] == exact[2]
    assert fast[3] == exact[3] and bool(fast[3]) == wrong_layout
    assert fast[4] == exact[4]


@pytest.mark.parametrize("wrong_layout", [False, True])
def test_kept_chain_unions_change_nothing(monkeypatch, wrong_layout):
    """The K-set unions a matrix chain keeps by the objects united (matrix.CHAIN_UNIONS: QK's Q
    tile and PV's P~ unite the same sets for every instruction of a K step) against a union
    each time: the same records (K sets included), findings and output."""
    import gfxsim.machine.matrix as MX
    kept = _everything(wrong_layout)
    monkeypatch.setattr(MX, "CHAIN_UNIONS", 0)
    each = _everything(wrong_layout)
    assert kept == each and len(kept[1]) > 0


def test_a_kept_union_is_found_only_by_both_sets_and_shapes():
    """matrix.MatrixOps._chain_union keeps one-window unions by the objects and by the two sets'
    triples and shapes: fresh objects with the same sets find the kept union, and every answer,
    over a stream where one side's set repeats with another's changing (and shapes differ), is
    the union made afresh (a key missing a side's bits or shape fails here)."""
    import types

    import numpy as np

    import gfxsim.machine.matrix as MX
    from gfxsim.machine.provenance import WINDOW, Mask, WideSets, known_one

    def one(values, shape):
        m = Mask.of_values(np.full(shape, values[0]))
        for v in values[1:]:
            m = m.union(Mask.of_values(np.full(shape, v)), WideSets())
        return known_one(m)
    rng = np.random.default_rng(2)
    pool = [(1, 2), (1, 3), (5,), (2, 70), (WINDOW + 4,)]
    wave, wide = types.SimpleNamespace(mma_memos={}), WideSets()
    for _ in range(200):
        a_vals, b_vals = pool[rng.integers(0, 3)], pool[rng.integers(0, len(pool))]
        a_shape, b_shape = [(2, 4), (2, 1)][rng.integers(0, 2)], [(2, 4), (1, 4), (2, 1)][rng.integers(0, 3)]
        mine, theirs = one(a_vals, a_shape), one(b_vals, b_shape)
        got = MX.MatrixOps._chain_union(wave, mine, theirs, wide)
        want = mine.union(theirs, wide)
        assert got.base.shape == want.base.shape
        for x, y in ((got.base, want.base), (got.bits, want.bits), (got.wide, want.wide)):
            np.testing.assert_array_equal(x, y)
    assert any(len(v) for k, v in wave.mma_memos.items() if k == "chain unions by sets")
