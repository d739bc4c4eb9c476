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
