"""The matrix-instruction log: a record is built in one call, the log owns its declared fields and
the caches derived from its records, and a truncated log forgets what it derived of the dropped
records."""
import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.machine.launch import Machine
from gfxsim.machine.mmalog import MmaLog, MmaRecord

MMAC = "v_mmac_i32_16x16x32_i8"
TOK = np.broadcast_to(np.arange(64), (16, 64))


def _two_mmacs():
    a = Buffer("a", np.ones((16, 64), np.int8), {"token": TOK})
    b = Buffer("b", np.ones((16, 64), np.int8), {"token": TOK})

    def k(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        for j in range(2):
            w.mma(MMAC, w.global_load(a, c * 64 + r * 8 + 32 * j, 8, "i8"),
                  w.global_load(b, c * 64 + r * 8 + 32 * j, 8, "i8"), label=f"j {j}")
    return launch(k, arch="gfx936")


def test_a_record_is_built_in_one_call():
    log = _two_mmacs().machine.mma_log
    rec = log.records[1]
    again = MmaRecord(**{f: getattr(rec, f) for f in MmaRecord.__slots__ if f != "op"})
    assert all(getattr(again, f) is getattr(rec, f) for f in MmaRecord.__slots__ if f != "op")
    assert again.op == rec.insn.mnemonic == MMAC and rec.label == "j 1"
    assert log.starts.tolist() == [r.first for r in log.records]
    with pytest.raises(TypeError):
        MmaRecord(rec.first, rec.insn)          # keyword-only: no field is filled by position


def test_the_starts_follow_records_added_past_the_first_allocation_and_truncated():
    rec = _two_mmacs().machine.mma_log.records[0]
    log = MmaLog()
    firsts = list(range(0, 3 * 200, 3))
    for f in firsts:
        log.add(MmaRecord(first=f, insn=rec.insn, kernel=rec.kernel, wave=0, workgroups=[(0, 0, 0)], live=[0],
                          source=rec.source, exec_mask=rec.exec_mask, label=None))
    assert log.starts.tolist() == firsts and log.starts.dtype == np.int64
    log.truncate(150, 0, 0)
    log.add(MmaRecord(first=1000, insn=rec.insn, kernel=rec.kernel, wave=0, workgroups=[(0, 0, 0)], live=[0],
                      source=rec.source, exec_mask=rec.exec_mask, label=None))
    assert log.starts.tolist() == firsts[:150] + [1000] == [r.first for r in log.records]


def test_the_log_owns_declared_fields_and_its_caches():
    log = MmaLog(declared={"dim"}, kernel="k")
    assert log.declared == frozenset({"dim"}) and log.kernel == "k" and log.k_fields() == {"dim"}
    m = Machine("gfx936", "k", declared={"dim"})
    assert m.mma_log.declared == {"dim"} and m.mma_log.kernel == "k"
    run = _two_mmacs()
    log = run.machine.mma_log
    assert log.k_fields() == {"token"}
    log.k_sets.update({0: "kept", 1: "dropped"})
    log.k_tables.update({0: None, 1: None})
    log.truncate(1, 0, 0)
    assert len(log.records) == len(log.starts) == 1
    assert log.k_sets == {0: "kept"} and list(log.k_tables) == [0]


def _carrying_the_long_way(runs, operand):
    return [(e.index, e.workgroup, e.wave) for r in runs for e in r.mmacs() if e.tagged and e.token_set(operand)]


@pytest.mark.parametrize("kw", [dict(kernel="paged_attention_decode", context=300, heads=4, kv_heads=2),
                                dict(kernel="paged_attention_decode", context=200, heads=2, kv_heads=1,
                                     provenance=False),
                                dict(kernel="pv_int8", context=100, frontend="asm")])
def test_the_events_carrying_an_operand_are_those_with_a_token_set(kw):
    """The text report's lazy walk (mmacs_carrying, from each record's compact form) finds the
    events whose token_set is not empty, in order, and mmac_count counts every event."""
    from kernels_py.host.runs import run_kernel
    kr = run_kernel(**kw)
    assert kr.mmac_count() == len(kr.mmacs()) > 0
    for operand in ("A", "B"):
        got = [(e.index, e.workgroup, e.wave) for e in kr.mmacs_carrying(operand)]
        assert got == _carrying_the_long_way(kr.runs, operand)
        assert bool(got) == kw.get("provenance", True)
    tagged = [(e.index, e.workgroup, e.wave) for r in kr.runs for e in r.tagged_mmacs()]
    assert tagged == [(e.index, e.workgroup, e.wave) for e in kr.mmacs() if e.tagged]
    assert bool(tagged) == kw.get("provenance", True)


def test_record_of_names_the_record_holding_an_instruction_and_none_between():
    log = _two_mmacs().machine.mma_log
    first, second = log.records
    assert second.first > first.first + 1              # instructions between the two records
    assert log.record_of(first.first) is first and log.record_of(second.first) is second
    assert log.record_of(first.first + 1) is None and log.record_of(second.first - 1) is None
    assert log.record_of(first.first - 1) is None if first.first else True
    assert log.record_of(np.int64(second.first)) is second


def test_records_alike_in_live_members_and_exec_share_one_list_and_mask():
    """Records that name the same live members keep one list, and a wave's records under equal
    EXEC one mask (read, never changed in place): each record's as it was issued."""
    rec = _two_mmacs().machine.mma_log.records[0]
    log = MmaLog()
    given = [[0, 1], [0, 1], [1], [1], [0, 1], []]
    masks = [np.arange(8) < k for k in (8, 8, 4, 4, 4, 8)]
    masks[1] = masks[0]                          # a wave hands in the same array again
    for f, (live, m, wave) in enumerate(zip(given, masks, (0, 0, 0, 1, 0, 1))):
        log.add(MmaRecord(first=f, insn=rec.insn, kernel=rec.kernel, wave=wave, workgroups=[(0, 0, 0), (1, 0, 0)],
                          live=list(live), source=rec.source, exec_mask=m if f == 1 else m.copy(), label=None))
    got = [r.live for r in log.records]
    assert got == given
    assert got[1] is got[0] and got[3] is got[2] and got[2] is not got[0] and got[4] is not got[0]
    ex = [r.exec_mask for r in log.records]
    assert all(np.array_equal(a, b) for a, b in zip(ex, masks))
    assert ex[1] is ex[0] and ex[4] is ex[2] is not ex[0] and ex[3] is not ex[2] and ex[5] is not ex[3]


def test_a_batched_launch_records_the_live_members_and_exec_it_would_record_unshared(monkeypatch):
    """A prefill batch of two query blocks (the second a tail: its waves stop early), without
    provenance: the same members and EXEC each record, shared among alike records."""
    from support.twins import prefill_setup
    from kernels_py.prefix_prefill import prefix_prefill

    def unshared(self, rec):                     # the log as before: each record keeps its own list and mask
        ex = rec.exec_mask
        shared(self, rec)
        self.records[-1].live, self.records[-1].exec_mask = list(rec.live), ex
    shared = MmaLog.add
    runs = []
    for add in (shared, unshared):
        monkeypatch.setattr(MmaLog, "add", add)
        runs.append(prefill_setup().launch(prefix_prefill, trace=False, provenance=False))
    lives = [[r.live for r in run.machine.mma_log.records] for run in runs]
    assert lives[0] == lives[1] and len({tuple(x) for x in lives[0]}) > 1
    assert len({id(x) for x in lives[0]}) < len(lives[0]) == len({id(x) for x in lives[1]})
    masks = [[r.exec_mask for r in run.machine.mma_log.records] for run in runs]
    assert all(np.array_equal(a, b) for a, b in zip(*masks)) and len({x.tobytes() for x in masks[0]}) > 1
    assert len({id(x) for x in masks[0]}) < len({id(x) for x in masks[1]})
    assert [(e.index, e.workgroup, e.wave) for e in runs[0].mmacs()] == \
        [(e.index, e.workgroup, e.wave) for e in runs[1].mmacs()]
