"""Workgroups side by side on the asm front end (run.execute's min-pc scheduling): a batch whose
members take different paths — loop trip counts, an early s_endpgm, a branch around a matrix
instruction and a bank-conflicting LDS write, scalar loads at per-member addresses, waves meeting
at s_barrier — gives exactly what batch=1 gives: outputs, findings, each workgroup's events and
matrix-instruction records."""
from __future__ import annotations

import numpy as np
import pytest
from support import need_toolchain

from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.machine.memory import Buffer

G = 5                                  # workgroups
TRIPS = np.array([3, 1, 4, 2, 5], np.uint32)

# s2 = workgroup id x; v0 = work-item id (2 waves of 64)
BODY = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[6:7], s[0:1], 0x8
  s_load_dwordx2 s[14:15], s[0:1], 0x10
  s_waitcnt lgkmcnt(0)
  s_lshl_b32 s8, s2, 2
  s_load_dword s9, s[6:7], s8
  s_waitcnt lgkmcnt(0)
  s_cmp_eq_u32 s2, 3
  s_cbranch_scc1 .Lend
  v_mov_b32_e32 v1, 0
  s_mov_b32 s10, 0
.Lloop:
  v_add_u32_e32 v1, v1, v0
  v_lshlrev_b32_e32 v1, s10, v1
  s_add_u32 s10, s10, 1
  s_cmp_lt_u32 s10, s9
  s_cbranch_scc1 .Lloop
  v_cmp_gt_u32_e32 vcc, s2, v0
  s_and_saveexec_b64 s[12:13], vcc
  s_cbranch_execz .Lskip
  v_add_u32_e32 v1, 0x64, v1
.Lskip:
  s_or_b64 exec, exec, s[12:13]
  s_bitcmp1_b32 s2, 0
  s_cbranch_scc0 .Lnomma
  v_and_b32_e32 v5, 63, v0
  v_lshlrev_b32_e32 v5, 3, v5
  s_lshl_b32 s16, s2, 9
  v_add_u32_e32 v5, s16, v5
  global_load_dwordx2 v[10:11], v5, s[14:15]
  s_waitcnt vmcnt(0)
  v_mfma_i32_16x16x32_i8 a[0:3], v[10:11], v[10:11], 0
  v_lshlrev_b32_e32 v6, 7, v0
  v_and_b32_e32 v6, 0x1fff, v6
  ds_write_b32 v6, v1 offset:1024
.Lnomma:
  v_lshlrev_b32_e32 v2, 2, v0
  ds_write_b32 v2, v1
  s_barrier
  v_xor_b32_e32 v3, 64, v0
  v_lshlrev_b32_e32 v3, 2, v3
  ds_read_b32 v4, v3
  s_waitcnt lgkmcnt(0)
  v_add_u32_e32 v4, v4, v1
  s_lshl_b32 s11, s2, 7
  v_add_u32_e32 v7, s11, v0
  v_lshlrev_b32_e32 v7, 2, v7
  global_store_dword v7, v4, s[4:5]
.Lend:
"""


def _kernel():
    return kernel_from_text(BODY, "divergent", args=[("out", "global_buffer", 8), ("trips", "global_buffer", 8),
                                                     ("k", "global_buffer", 8)], lds=16384, agprs=4)


def _run(batch):
    k = np.arange(G * 64 * 8, dtype=np.int64).astype(np.int8).reshape(G, 64, 8)
    bufs = {"out": Buffer.empty("out", (G * 128,), np.uint32), "trips": Buffer("trips", TRIPS.copy()),
            "k": Buffer("k", k, {"token": (np.arange(G * 64 * 8) // 8).reshape(G, 64, 8)})}
    run = run_asm(_kernel(), grid=(G,), block=128, args=bufs, batch=batch)
    return run, bufs["out"]


def _events(run, wg, wave):
    out = []
    for e in run.trace.of_wave((wg, 0, 0), wave):
        det = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in e.details.items()}
        # a matrix instruction's D (AGPRs here) is numbered virtually by the back end
        mma = e.op.startswith(("v_mfma", "v_mmac"))
        out.append((e.op, e.source, e.exec_mask.tolist(), det,
                    [(o.regs, o.dtype, o.values.tolist()) for o in e.inputs],
                    [(None if mma else o.regs, o.dtype, o.values.tolist()) for o in e.outputs]))
    return out


def _findings(run):
    return sorted((f.kind, f.workgroup, f.wave, f.lane, f.source, f.message) for f in run.findings)


def _mmas(run):
    return sorted((m.workgroup, m.wave, m.source, m.exec_mask.tolist(), sorted(m.token_set("A")),
                   sorted(m.token_set("B")), [o.values.tolist() for o in m.outputs]) for m in run.mmacs())


@pytest.mark.parametrize("batch", [G, 2])
def test_a_divergent_batch_is_exactly_batch_1(batch):
    one, out1 = _run(1)
    many, out = _run(batch)
    np.testing.assert_array_equal(out.array, out1.array)
    assert out.written is not None and (out.written == out1.written).all()
    assert _findings(many) == _findings(one)
    kinds = {f[0] for f in _findings(one)}
    assert "lds-bank-conflict" in kinds            # the odd members' strided write, theirs only
    assert {f[1][0] for f in _findings(one) if f[0] == "lds-bank-conflict"} == {1}
    assert _mmas(many) == _mmas(one)
    assert {m[0][0] for m in _mmas(one)} == {1}    # only the odd workgroups issue the matrix instruction
    for wg in range(G):
        for wave in range(2):
            ev = _events(many, wg, wave)
            assert ev == _events(one, wg, wave), (wg, wave)
            assert len(ev) > 0
    # workgroup 3 ended at its start: its events stop at s_endpgm, no store, no barrier
    assert [e[0] for e in _events(one, 3, 0)][-1] == "s_endpgm"
    assert not out1.written[3 * 128 * 4:4 * 128 * 4].any()


def test_the_compiled_decode_batched_is_the_decode_one_workgroup_at_a_time():
    """The compiled decode at 300 tokens: its last partition (44 tokens) takes other paths than
    the first; all workgroups side by side (the harness's batch) give what batch=1 gives."""
    need_toolchain("gfx942")
    import dataclasses

    from kernels_py.host.hip_twins import asm_kernel_fn
    from kernels_py.host.runs import run_kernel

    def one_at_a_time(name):                           # HostSetup.launch then runs batch=1
        return dataclasses.replace(asm_kernel_fn(name), provenance_batch=1)
    kw = dict(context=300, arch="gfx942")
    many = run_kernel("paged_attention_decode", frontend="asm", **kw)
    one = run_kernel("paged_attention_decode", kernel_fn=one_at_a_time("paged_attention_decode"),
                     reduce_fn=one_at_a_time("paged_attention_reduce"), **kw)
    np.testing.assert_array_equal(many.out, one.out)
    for rm, r1 in zip(many.runs, one.runs):
        assert _findings(rm) == _findings(r1)
        assert _mmas(rm) == _mmas(r1)


def test_a_kernels_batch_bound_bounds_the_harness_batch():
    """HostSetup.launch runs at most a BatchBounded kernel's ``provenance_batch`` workgroups side by
    side with provenance (the compiled twins: hip_twins.PROVENANCE_BATCH), and every workgroup still
    runs; without provenance the bound does not apply."""
    from gfxsim.machine.options import BatchBounded
    from kernels_py.host.hip_twins import PROVENANCE_BATCH, asm_kernel_fn
    from kernels_py.host.runs import run_kernel
    from kernels_py.paged_attention_decode import paged_attention_decode
    fn = asm_kernel_fn("paged_attention_decode")
    assert isinstance(fn, BatchBounded) and fn.provenance_batch == PROVENANCE_BATCH
    assert not isinstance(paged_attention_decode, BatchBounded)
    seen = []

    class Decode:                                      # a kernel that declares its bound
        provenance_batch = 3
        __signature__ = __import__("inspect").signature(paged_attention_decode)

        def __call__(self, w, *a, **k):
            seen.append((w.members, w.wg.id))
            return paged_attention_decode(w, *a, **k)
    decode = Decode()
    kr = run_kernel("paged_attention_decode", kernel_fn=decode, context=1024, heads=8, kv_heads=2)
    grid = kr.runs[0].grid
    assert max(m for m, _ in seen) == 3 and len({g for _, g in seen}) == -(-grid[0] * grid[1] * grid[2] // 3)
    seen.clear()
    run_kernel("paged_attention_decode", kernel_fn=decode, context=1024, heads=8, kv_heads=2, provenance=False)
    assert max(m for m, _ in seen) == grid[0] * grid[1] * grid[2]


# -- folding (gfxsim/machine/fold.py) through the one launch loop ----------------------------------
# The asm front end's register files keep the wave's provenance columns, so a batch folds as a
# Python kernel's does: one representative member per class; where members part (divergent
# control flow, a finding made on a representative), the attempt is taken back and the batch runs
# again with finer classes or unfolded, leaving nothing of the attempt behind.
def _run_folding(fold):
    k = np.arange(G * 64 * 8, dtype=np.int64).astype(np.int8).reshape(G, 64, 8)
    bufs = {"out": Buffer.empty("out", (G * 128,), np.uint32), "trips": Buffer("trips", TRIPS.copy()),
            "k": Buffer("k", k, {"token": (np.arange(G * 64 * 8) // 8).reshape(G, 64, 8)})}
    return run_asm(_kernel(), grid=(G,), block=128, args=bufs, batch=G, fold=fold), bufs


def test_a_divergent_asm_batch_that_cannot_fold_gives_the_batch_run_unfolded():
    from support.fold import same_buffers, same_runs
    (a, ba), (b, bb) = _run_folding(False), _run_folding(True)
    same_runs(a, b)
    for name in ba:
        same_buffers(ba[name], bb[name], a.machine.wide, b.machine.wide)
    assert _events(a, 1, 0) == _events(b, 1, 0) and _mmas(a) == _mmas(b)
    assert a.lane_instructions == b.lane_instructions > 0         # the taken-back attempts are not counted
    assert a.folds == [{"first": (0, 0, 0), "members": G, "classes": None, "attempts": 0, "unfolded": None}]
    note = b.folds[0]
    assert note["attempts"] >= 1 and note["classes"] is None and note["unfolded"]


def _decode_both_ways(monkeypatch, **kw):
    from kernels_py.host.runs import run_kernel
    runs = {}
    for fold in ("0", "1"):
        monkeypatch.setenv("GFXSIM_FOLD", fold)
        runs[fold] = run_kernel("paged_attention_decode", frontend="asm", arch="gfx942", **kw)
    return runs["0"], runs["1"]


def _same_kernel_runs(a, b):
    from support.fold import same_buffers, same_runs
    np.testing.assert_array_equal(a.out, b.out)
    for ra, rb in zip(a.runs, b.runs):
        same_runs(ra, rb)
        for (x, _), (y, _) in zip(ra.machine.outputs, rb.machine.outputs):
            same_buffers(x, y, ra.machine.wide, rb.machine.wide)
        assert ra.lane_instructions == rb.lane_instructions
        assert all(n["attempts"] == 0 and n["unfolded"] is None for n in ra.folds)
    assert a.report()["mmacs"] == b.report()["mmacs"] and a.report()["findings"] == b.report()["findings"]


def test_the_compiled_decode_twin_folds(monkeypatch):
    """The batched compiled decode of whole partitions (1024 tokens, 2 kv heads: 8 workgroups) folds
    into one class, its reduce into four; folded or not, the outputs and every record, finding and
    stored plane are the same."""
    need_toolchain("gfx942")
    a, b = _decode_both_ways(monkeypatch, context=1024, heads=8, kv_heads=2)
    _same_kernel_runs(a, b)
    assert b.runs[0].folds == [{"first": (0, 0, 0), "members": 8, "classes": 1, "attempts": 1, "unfolded": None}]
    assert b.runs[1].folds[0]["classes"] is not None and b.runs[1].folds[0]["unfolded"] is None


def test_the_compiled_decode_twin_with_a_tail_partition_falls_back(monkeypatch):
    """300 tokens: the tail partition's members part from the first's (their token tags); the
    batch runs unfolded and gives what the unfolded launch gives."""
    need_toolchain("gfx942")
    a, b = _decode_both_ways(monkeypatch, context=300, heads=8, kv_heads=1)
    _same_kernel_runs(a, b)
    note = b.runs[0].folds[0]
    assert note["classes"] is None and note["attempts"] >= 1 and "'token' tags" in note["unfolded"]


def test_a_traced_folded_compiled_decode_records_the_same_events(monkeypatch):
    """With the full trace, a folded batch's events (operands' values, registers and tags, EXEC,
    source lines) are the unfolded batch's, event for event."""
    need_toolchain("gfx942")
    a, b = _decode_both_ways(monkeypatch, context=512, heads=8, kv_heads=1, trace=True)
    _same_kernel_runs(a, b)
    assert b.runs[0].folds[0]["classes"] == 1

    def events(r):
        return [(e.op, e.source, e.workgroup, e.wave, e.exec_mask.tolist(),
                 [(o.regs, o.dtype, o.values.tolist()) for o in (*e.inputs, *e.outputs)]) for e in r.trace.events]
    for ra, rb in zip(a.runs, b.runs):
        ea = events(ra)
        assert ea and ea == events(rb)


def test_a_dequant_scales_origin_is_found_on_the_folded_columns(monkeypatch):
    """dequant.folded_origin (a scale's columns of some origin, read from the representatives'
    planes) equals unfolding the scale for every member and asking there, at every dequant of the
    folded compiled decode; it answers most of them."""
    need_toolchain("gfx942")
    from gfxsim.asm.semantics import dequant
    calls = {"fast": 0, "unfolded": 0}
    fast = dequant.folded_origin

    def both(fold, p):
        got = fast(fold, p)
        whole = fold.unfold(p, None, "test").origin_columns()
        if got is None:
            calls["unfolded"] += 1
        else:
            calls["fast"] += 1
            assert np.array_equal(got, whole)
        return got
    monkeypatch.setattr(dequant, "folded_origin", both)
    monkeypatch.setenv("GFXSIM_FOLD", "1")
    from kernels_py.host.runs import run_kernel
    run = run_kernel("paged_attention_decode", frontend="asm", arch="gfx942", context=1024, heads=8, kv_heads=2)
    assert run.runs[0].folds[0]["classes"] == 1
    assert calls["fast"] > calls["unfolded"]


def test_a_folded_records_fields_at_representatives_rows_are_those_placed(monkeypatch):
    """FoldedRecord.fields_for (no placing where every row is a representative's) against the
    fields placed for every member, on the folded compiled decode and its reduce (several
    classes); a row of another member places them."""
    need_toolchain("gfx936")
    from gfxsim.machine.foldrec import FoldedRecord
    from kernels_py.host.runs import run_kernel
    monkeypatch.setenv("GFXSIM_FOLD", "1")
    run = run_kernel("paged_attention_decode", frontend="asm", arch="gfx936", context=1024, heads=8, kv_heads=2)
    rng = np.random.default_rng(0)
    seen = 0
    for r in run.runs:
        for rec in r.machine.mma_log.records:
            if not isinstance(rec, FoldedRecord):
                continue
            fz, bl = rec._folded.frozen, rec.insn.blocks
            rows = (fz.reps[rng.integers(0, len(fz.reps), 9)] * bl + rng.integers(0, bl, 9)).astype(np.int64)
            rec._placed_fields = None
            got, at = rec.fields_for(rows)
            assert rec._placed_fields is None                       # nothing placed
            assert rec.chained() == (rec.c_mma is not None)
            placed = rec._fields()
            for key in ("ks_a", "ks_b"):
                assert got[key].keys() == placed[key].keys()
                for f, m in placed[key].items():
                    for name in ("base", "bits", "wide"):
                        assert np.array_equal(getattr(got[key][f], name)[at], getattr(m, name)[rows])
            quant, placed_quant = got.get("quant") or {}, placed.get("quant") or {}
            assert quant.keys() == placed_quant.keys()
            for op, q in placed_quant.items():
                assert np.array_equal(quant[op][at], q[rows])
            for key in ("c_mma", "c_mn"):
                assert (got[key] is None) == (placed[key] is None)
                if placed[key] is not None:
                    assert np.array_equal(got[key][at], placed[key][rows])
            others = np.setdiff1d(np.arange(len(rec.workgroups)), fz.reps)
            if len(others):
                rec._placed_fields = None
                got, at = rec.fields_for(others[:1] * bl)
                assert got is rec._placed_fields and np.array_equal(at, others[:1] * bl)
            seen += 1
    assert seen
