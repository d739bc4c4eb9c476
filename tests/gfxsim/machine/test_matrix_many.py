"""``w.mma_many`` (independent instructions of one record, their D from one pass of the
accumulator model) is ``w.mma`` issued one by one: SageAttention's PV instructions, with and
without provenance and trace, a twin with findings on every PV instruction, V with an
infinite element (the model's general path for the whole batch), and one-level PV (every C a
rescaled earlier D) give the same output bits, records, findings, events and output provenance."""
import numpy as np
import pytest

from kernels_py.fp8.sage_attention import run_sage_attention
from kernels_py.fp8.sage_reference import SageConfig
from support.fold import same_buffers
from support.records import field_key




def _launch(provenance, trace, v_type, inf_v, two_level=True):
    import kernels_py.fp8.sage_attention as S
    rng = np.random.default_rng(5)
    q = rng.normal(size=(32, 64)).astype(np.float32)
    k = rng.normal(size=(128, 64)).astype(np.float32)
    v = rng.normal(size=(128, 64)).astype(np.float32)
    if inf_v:
        v[70, 3] = np.inf
    held = []

    def kernel(w, *a, **kw):
        held.append(a[-1])                           # the output buffer, for its provenance
        return S.sage_attention(w, *a, **dict(kw, v_type=v_type))
    out, run = run_sage_attention(q, k, v, SageConfig(arch="sm_90", q_block=32, two_level=two_level), provenance=provenance,
                                  trace=trace, kernel=kernel)
    log = run.machine.mma_log
    recs = [field_key((r.first, r.op, r.label, r.source, r.a, r.b, r.ks_a, r.ks_b, r.c_mma, r.c_mn, r.quant, r.live))
            for r in log.records]
    events = [(e.index, e.op, e.source) for e in run.events] if trace else None
    # with each finding's details: its count of the instructions that found it, deduplicated
    return out, run, recs, [(f.kind, f.lane, f.instruction, f.message, repr(f.details)) for f in run.findings], events, \
        held[0]


@pytest.mark.parametrize("switch", ["GATHER_TOGETHER", "GRID_TOGETHER", "OPERANDS_TOGETHER", "SIDES_TOGETHER"])
@pytest.mark.parametrize("provenance,trace,v_type,inf_v,two_level", [(False, False, "fp8_e4m3", False, True),
                                                                     (True, True, "fp8", False, True),
                                                                     (False, False, "fp8_e4m3", True, True),
                                                                     (True, False, "fp8_e4m3", False, False)],
                         ids=["off", "trace-fnuz-findings", "infinite-v", "one-level-c-chains"])
def test_a_k_step_together_is_the_instructions_one_by_one(monkeypatch, switch, provenance, trace, v_type, inf_v,
                                                           two_level):
    """mma_many's fast paths against their switch off: GATHER_TOGETHER, a K step's operands in one
    take over the distinct registers stacked (P~'s A fed to 16 instructions, each V's B to 2, every
    C its own) against a gather an operand; GRID_TOGETHER, a PV K step (each P~ row tile against
    each V head-dim tile) through the accumulator model as one matrix (mmagrid) against the batch;
    SIDES_TOGETHER, a call's records sharing what each reads of one operand (its fields, their
    planes, K-field set and D identities) and of EXEC against each record making its own."""
    import gfxsim.machine.matrix as MX
    fast = _launch(provenance, trace, v_type, inf_v, two_level)
    monkeypatch.setattr(MX, switch, False)
    slow = _launch(provenance, trace, v_type, inf_v, two_level)
    assert fast[0].tobytes() == slow[0].tobytes()
    assert fast[2] == slow[2] and len(slow[2]) > 0
    assert fast[3] == slow[3] and bool(slow[3]) == (v_type == "fp8")
    assert fast[4] == slow[4]
    same_buffers(fast[5], slow[5], fast[1].machine.wide, slow[1].machine.wide)


def _i8_launch(provenance):
    """Six independent 8-bit integer instructions through mma_many: C of the fourth close to
    INT32_MAX (an overflow), C of two omitted, the first two A operands the same registers,
    A and B tagged so that each D carries provenance (their K slots' tags disagree: an
    ab-kslot-mismatch finding on each, alike both ways; ``t`` gives each operand's rows their own
    K sets, so one operand's fields made with the others', matrix.OPERANDS_TOGETHER, must stay its own)."""
    from gfxsim import Buffer, launch
    rng = np.random.default_rng(3)
    mma = "v_mmac_i32_16x16x32_i8"
    x = Buffer("x", rng.integers(-128, 128, (6, 2, 8, 64)).astype(np.int8),
               tags={"i": np.arange(6)[:, None, None, None], "reg": np.arange(8)[None, None, :, None],
                     "t": np.arange(6)[:, None, None, None] * 16 + np.arange(8)[None, None, :, None]})
    d_out = Buffer.empty("d", (6, 4, 64), np.int32)

    def kernel(w, x, d_out):
        def operand(i, side):
            return w.cat(*[w.global_load(x, (((i * 2 + side) * 8 + r) * 64 + w.lane_id), 1, "i8") for r in range(8)])
        a0 = operand(0, 0)
        issues = []
        for i in range(6):
            c = None if i in (1, 5) else w.from_lanes(rng.integers(-1000, 1000, (4, 64)) +
                                                      (2 ** 31 - 1000 if i == 3 else 0), "i32")
            issues.append((a0 if i < 2 else operand(i, 0), operand(i, 1), c, f"i{i}"))
        for i, d in enumerate(w.mma_many(mma, issues)):
            for r in range(4):
                w.global_store(d_out, ((i * 4 + r) * 64 + w.lane_id) * 4, d[r])
    run = launch(kernel, arch="gfx936", args=(x, d_out), provenance=provenance)
    recs = [field_key((r.first, r.op, r.label, r.source, r.a, r.b, r.ks_a, r.ks_b, r.c_mma, r.c_mn, r.live))
            for r in run.machine.mma_log.records]
    return d_out, run, recs


@pytest.mark.parametrize("switch", ["ISSUE_TOGETHER", "SIDES_TOGETHER"])
@pytest.mark.parametrize("provenance", [False, True], ids=["off", "provenance"])
def test_mma_many_i8_is_mma_one_by_one(monkeypatch, provenance, switch):
    """(SIDES_TOGETHER: the first two share A, each with its own B and K sets: an operand's side
    answers found for the second must be the first's, the others' their own.)"""
    import gfxsim.machine.matrix as MX
    many_d, many, many_recs = _i8_launch(provenance)
    monkeypatch.setattr(MX, switch, False)
    one_d, one, one_recs = _i8_launch(provenance)
    assert many_d.array.tobytes() == one_d.array.tobytes()
    assert many_recs == one_recs and len(one_recs) == 6
    found = [(f.kind, f.lane, f.instruction, f.message, repr(f.details)) for f in many.findings]
    assert found == [(f.kind, f.lane, f.instruction, f.message, repr(f.details)) for f in one.findings]
    over = [f for f in found if f[0] == "int32-overflow"]
    assert len(over) == 1 and "(i3)" in over[0][3]
    assert many.trace.n_events == one.trace.n_events
    same_buffers(many_d, one_d, many.machine.wide, one.machine.wide)


@pytest.mark.parametrize("provenance", [False, True], ids=["off", "provenance"])
def test_i8_d_of_all_at_once_is_one_by_one(monkeypatch, provenance):
    """An 8-bit mma_many's D of every instruction in one take and add (SageAttention's QK: C
    omitted at the first K step, chained after) against each instruction's own; and the six
    instructions of _i8_launch (C omitted by some, one near INT32_MAX), which take the one by
    one path either way."""
    import gfxsim.machine.matrix as MX
    many = _launch(provenance, False, "fp8_e4m3", False)
    many_d, many_i8, many_recs = _i8_launch(provenance)
    monkeypatch.setattr(MX, "SUM_TOGETHER", False)
    one = _launch(provenance, False, "fp8_e4m3", False)
    one_d, one_i8, one_recs = _i8_launch(provenance)
    assert many[0].tobytes() == one[0].tobytes()
    assert many[2] == one[2] and len(one[2]) > 0
    assert many[3] == one[3]
    same_buffers(many[5], one[5], many[1].machine.wide, one[1].machine.wide)
    assert many_d.array.tobytes() == one_d.array.tobytes() and many_recs == one_recs
    assert [(f.kind, f.message) for f in many_i8.findings] == [(f.kind, f.message) for f in one_i8.findings]


def _refused_later(together, monkeypatch, bad):
    """mma_many of four 8-bit instructions whose third is refused (``bad``): the first two issue,
    then the third's error, as one by one."""
    import gfxsim.machine.matrix as MX
    from gfxsim import Buffer, launch
    monkeypatch.setattr(MX, "ISSUE_TOGETHER", together)
    rng = np.random.default_rng(4)
    x = Buffer("x", rng.integers(-128, 128, (4, 2, 8, 64)).astype(np.int8))
    d_out = Buffer.empty("d", (4, 4, 64), np.int32)
    got = {}

    def kernel(w, x, d_out):
        def operand(i, side):
            return w.cat(*[w.global_load(x, (((i * 2 + side) * 8 + r) * 64 + w.lane_id), 1, "i8") for r in range(8)])
        issues = [[operand(i, 0), operand(i, 1), None, f"i{i}"] for i in range(4)]
        if bad == "label":
            issues[2][3] = 7
        elif bad == "type":
            issues[2][1] = issues[2][1].bitcast("u8").to("i32")[:2]
        elif bad == "count":
            issues[2][0] = issues[2][0][:4]
        elif bad == "c_type":
            issues[2][2] = w.from_lanes(np.zeros((4, 64)), "f32")
        try:
            got["d"] = [d.val.tobytes() for d in w.mma_many("v_mmac_i32_16x16x32_i8", issues)]
        except Exception as e:              # noqa: BLE001 - compared below
            got["d"] = (type(e).__name__, str(e).split(" in ")[0])
    run = launch(kernel, arch="gfx936", args=(x, d_out), provenance=False)
    return got["d"], run.trace.n_events, len(run.machine.mma_log.records)


@pytest.mark.parametrize("bad", ["label", "type", "count", "c_type", None])
def test_a_later_refused_issue_is_refused_as_one_by_one(monkeypatch, bad):
    """mma_many checks its first issue in full and the later ones by the first's outcome
    (_mma_operands_many): a later one that does not pass as it is gets the full check, so the
    error (and the instructions issued before it) are one by one's."""
    together = _refused_later(True, monkeypatch, bad)
    assert together == _refused_later(False, monkeypatch, bad)
    assert (together[2] == 2 and isinstance(together[0], tuple)) if bad else together[2] == 4


def _unknown_origin_many():
    """Six 8-bit instructions through mma_many, their A operands alternating between bytes of unknown
    origin (a byte-wise bias done by adds on the packed words) and the loaded bytes, two of each
    the same registers: kslot-unknown-origin on each of those three."""
    from gfxsim import Buffer, launch
    tok = np.broadcast_to(np.arange(64), (16, 64))
    a = Buffer("a", np.ones((16, 64), np.int8), {"token": tok})
    b = Buffer("b", np.ones((16, 64), np.int8), {"token": tok})

    def kernel(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        clean = w.global_load(a, c * 64 + r * 8, 8, "i8")
        mixed = ((clean.bitcast("u32") + 0x01010101) - 0x01010101).bitcast("i8")
        bs = [w.global_load(b, c * 64 + r * 8, 8, "i8") for _ in range(3)]
        w.mma_many("v_mmac_i32_16x16x32_i8", [(mixed if i % 2 else clean, bs[i // 2], None, f"i{i}") for i in range(6)])
    run = launch(kernel, arch="gfx936")
    return [(f.kind, f.lane, f.instruction, f.message, repr(f.details)) for f in run.findings]


@pytest.mark.parametrize("switch", ["OPERANDS_TOGETHER", "ISSUE_TOGETHER", "SIDES_TOGETHER"])
def test_unknown_origin_operands_together_are_found_as_one_by_one(monkeypatch, switch):
    """An mma_many call's operand found of known origin is kept as such for the call (matrix._clean),
    one of unknown origin is asked again by each instruction: the findings are the one-by-one
    issue's."""
    import gfxsim.machine.matrix as MX
    together = _unknown_origin_many()
    monkeypatch.setattr(MX, switch, False)
    alone = _unknown_origin_many()
    assert together == alone and [f[0] for f in alone] == ["kslot-unknown-origin"] * 3
    assert all("(i1)" in f[3] or "(i3)" in f[3] or "(i5)" in f[3] for f in alone)


def _chained_again(row_first):
    """Two independent chains through mma_many (two token tiles), each k-step 0 chained twice
    through C (a double-count), where one link's A carries a "row" name and the other's does not
    (``row_first``: the first): C or A.B names D's rows, the other does not, so the element is not
    shown to be one element and the double count is not reported there (_mma_provenance's
    ``unsure``, in _d_planes made for both issues at once)."""
    from gfxsim import Buffer, launch
    rng = np.random.default_rng(0)
    data = rng.integers(-5, 5, (16, 64)).astype(np.int8)
    dims = np.broadcast_to(np.arange(64), (16, 64))
    q_row = Buffer("q", data, {"row": np.broadcast_to(np.arange(16)[:, None], (16, 64)), "dim": dims})
    q_plain = Buffer("q2", data.copy(), {"dim": dims})
    k = Buffer("k", rng.integers(-5, 5, (32, 64)).astype(np.int8),
               {"token": np.broadcast_to(np.arange(32)[:, None], (32, 64)), "dim": np.broadcast_to(np.arange(64), (32, 64))})
    mma = "v_mmac_i32_16x16x32_i8"

    def kernel(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        qa = [w.global_load(q, c * 64 + 8 * r, 8, "i8") for q in ((q_row, q_plain) if row_first else (q_plain, q_row))]
        kb = [w.global_load(k, (16 * t + c) * 64 + 8 * r, 8, "i8") for t in range(2)]
        accs = [w.zeros("i32", 4)] * 2
        for link in range(2):
            accs = w.mma_many(mma, [(qa[link], kb[t], accs[t], f"tile {t} link {link}") for t in range(2)])
    run = launch(kernel, arch="gfx936")
    return [(f.kind, f.lane, f.instruction, f.message, repr(f.details)) for f in run.findings]


@pytest.mark.parametrize("row_first", [True, False], ids=["c-names-rows", "ab-names-rows"])
def test_a_chain_whose_links_name_other_fields_is_found_as_one_by_one(monkeypatch, row_first):
    import gfxsim.machine.matrix as MX
    together = _chained_again(row_first)
    monkeypatch.setattr(MX, "SIDES_TOGETHER", False)
    assert together == _chained_again(row_first)
    monkeypatch.setattr(MX, "ISSUE_TOGETHER", False)
    assert together == _chained_again(row_first)
