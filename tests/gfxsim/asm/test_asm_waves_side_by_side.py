"""A workgroup's waves run side by side as the members of one wave (gfxsim.machine.wavemembers:
provenance and trace off, one workgroup at a time) give exactly what they give one after another:
the buffers, the findings, the launch's event count and the matrix-instruction records (numbered
and ordered per wave as the serial run numbers them); where the order of the waves could show (a
race between waves in LDS or global memory, a finding, an error) the workgroup runs serially."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from support import need_toolchain

from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.machine.memory import Buffer
from gfxsim.machine.options import LaunchOptions

LAUNCH = importlib.import_module("gfxsim.machine.launch")     # gfxsim.machine.launch is also a function


def _records(run):
    return [(r.first, r.op, r.wave, [tuple(g) for g in r.workgroups], list(r.live), r.source,
             r.exec_mask.tolist(), r.label) for r in run.records]


def _findings(run):
    return [(f.kind, f.message, f.workgroup, f.wave, f.lane, f.instruction, f.address) for f in run.findings]


def _both(monkeypatch, go):
    """``go()`` -> (run, {name: Buffer}) side by side (where it can be) and serially."""
    got = {}
    for side in (True, False):
        monkeypatch.setattr(LAUNCH, "WAVES_AS_MEMBERS", side)
        got[side] = go()
    return got[True], got[False]


def _same(a, b):
    (ra, ba), (rb, bb) = a, b
    for name in ba:
        np.testing.assert_array_equal(ba[name].raw, bb[name].raw, err_msg=name)
        wa, wb = ba[name].written, bb[name].written
        assert (wa is None) == (wb is None) and (wa is None or (wa == wb).all()), name
    assert _findings(ra) == _findings(rb)
    assert ra.trace.n_events == rb.trace.n_events
    assert ra.lane_instructions == rb.lane_instructions
    assert _records(ra) == _records(rb)
    assert all("waves" not in f for f in rb.folds)                # the serial run is serial
    return [f.get("waves") for f in ra.folds]


def _twin(name, context):
    """The compiled twin's harness at a unit-test shape (gfx942), provenance off."""
    from kernels_py.host.buffers import make_cache
    from kernels_py.host.hip_twins import asm_kernel_fn
    from kernels_py.host.twins import query_rows, run_pv, run_qk_int8, run_prefill, softmax_rows
    from kernels_py.host.buffers import run_decode
    from kernels_py.workloads.data import make_attention_inputs
    kw = dict(arch="gfx942", trace=False, provenance=False)
    d = make_attention_inputs(seed=0, num_heads=1, head_dim=128, context_lens=[context],
                              num_queries=None if name == "paged_attention_decode" else 16)
    cache = make_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True, seed=0)
    fn = asm_kernel_fn(name)
    if name == "qk_int8":
        out, run = run_qk_int8(query_rows(d["q"], 1), cache, kernel=fn, **kw)
    elif name in ("pv_int8", "pv_bf16"):
        out, run = run_pv(fn, softmax_rows(query_rows(d["q"], 1), cache), cache, **kw)
    elif name == "prefix_prefill":
        out, runs = run_prefill(d["q"], cache, kernel=fn, **kw)
        run = runs[0]
    else:
        res = run_decode(d["q"], cache, kernel=fn, **kw)
        out, run = res.out, res.runs[0]
    return run, {"out": Buffer("out", np.ascontiguousarray(out))}


@pytest.mark.parametrize("context", [256, 200])
@pytest.mark.parametrize("name", ["qk_int8", "pv_int8", "pv_bf16", "prefix_prefill", "paged_attention_decode"])
def test_the_compiled_twins_side_by_side_are_their_serial_runs(monkeypatch, name, context):
    """The twins' waves run side by side but the prefill's, whose waves part at once (its one query
    tile is one wave's work); at 200 tokens the waves part later, at the tail chunk, and run on."""
    need_toolchain("gfx942")
    ways = _same(*_both(monkeypatch, lambda: _twin(name, context)))
    apart = name == "prefix_prefill"
    assert len(ways) == 1 and ("at most half the waves" in ways[0] if apart else ways[0] == "side by side"), ways


# two waves (v0 = 0..127); s2 = workgroup id. Each wave writes its lanes' words to LDS, meets the
# other at s_barrier and reads the other wave's words back; wave 1 of workgroup 1 runs a loop of
# its own first; workgroup 2 stores with a stride that bank-conflicts (a finding: run serially)
EXCHANGE = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  v_lshlrev_b32_e32 v2, 2, v0
  v_add_u32_e32 v1, 7, v0
  v_cmp_gt_u32_e32 vcc, 64, v0
  s_cmp_eq_u32 s2, 1
  s_cbranch_scc0 .Lwrite
  s_and_saveexec_b64 s[12:13], vcc
  s_xor_b64 s[12:13], exec, s[12:13]
  s_mov_b64 exec, s[12:13]
  s_mov_b32 s10, 0
.Lloop:
  v_add_u32_e32 v1, v1, v0
  s_add_u32 s10, s10, 1
  s_cmp_lt_u32 s10, 3
  s_cbranch_scc1 .Lloop
  s_mov_b64 exec, -1
.Lwrite:
  s_cmp_eq_u32 s2, 2
  s_cbranch_scc0 .Lplain
  v_lshlrev_b32_e32 v2, 7, v0
  v_and_b32_e32 v2, 0x3fff, v2
.Lplain:
  ds_write_b32 v2, v1
  s_waitcnt lgkmcnt(0)
  s_barrier
  v_xor_b32_e32 v3, 64, v0
  v_lshlrev_b32_e32 v3, 2, v3
  s_cmp_eq_u32 s2, 2
  s_cbranch_scc0 .Lread
  v_lshlrev_b32_e32 v3, 7, v0
  v_and_b32_e32 v3, 0x3fff, v3
.Lread:
  ds_read_b32 v4, v3
  s_waitcnt lgkmcnt(0)
  s_lshl_b32 s11, s2, 7
  v_add_u32_e32 v7, s11, v0
  v_lshlrev_b32_e32 v7, 2, v7
  global_store_dword v7, v4, s[4:5]
"""


def _exchange(body=EXCHANGE, groups=3, **kw):
    kernel = kernel_from_text(body, "exchange", args=[("out", "global_buffer", 8)], lds=16384)

    options = LaunchOptions(trace=False, provenance=False, **kw)

    def go():
        bufs = {"out": Buffer.empty("out", (groups * 128,), np.uint32)}
        return run_asm(kernel, grid=(groups,), block=128, args=bufs, options=options), bufs
    return go


def test_waves_exchanging_through_lds_at_a_barrier(monkeypatch):
    ways = _same(*_both(monkeypatch, _exchange()))
    assert ways[:2] == ["side by side"] * 2 and ways[2].startswith("serially: ") and "finding" in ways[2]


# the waves' accesses that only the serial order decides: each runs serially, with its results
RACES = {
    "an LDS read of another wave's write, no barrier": ("ds_write_b32 v2, v1", "v_xor_b32_e32 v3, 64, v0\n"
                                                        "  v_lshlrev_b32_e32 v3, 2, v3\n  ds_read_b32 v4, v3"),
    "an LDS write over another wave's read": (
        "ds_write_b32 v2, v1\n  s_waitcnt lgkmcnt(0)\n  s_barrier\n  ds_read_b32 v4, v2",
        "v_xor_b32_e32 v3, 64, v0\n  v_lshlrev_b32_e32 v3, 2, v3\n  ds_write_b32 v3, v1"),
    "an LDS word both waves write": ("", "v_and_b32_e32 v3, 63, v0\n  v_lshlrev_b32_e32 v3, 2, v3\n"
                                         "  ds_write_b32 v3, v0"),
    "one global word stored by both waves": ("", "v_and_b32_e32 v7, 63, v0\n  v_lshlrev_b32_e32 v7, 2, v7\n"
                                                 "  global_store_dword v7, v0, s[4:5]"),
    "a global word both waves store, in two accesses": (
        "global_store_dword v7, v0, s[4:5]", "v_xor_b32_e32 v3, 64, v0\n  v_lshlrev_b32_e32 v3, 2, v3\n"
                                              "  global_store_dword v3, v1, s[4:5]"),
    "a global word one wave stores and the other loads as a scalar": (
        "v_cmp_gt_u32_e32 vcc, 64, v0\n  s_and_saveexec_b64 s[12:13], vcc\n  global_store_dword v7, v0, s[4:5]\n"
        "  s_mov_b64 exec, -1", "s_load_dword s20, s[4:5], 0x10"),
    "a global word one wave loads and the other stores": (
        "global_load_dword v4, v7, s[4:5]", "v_xor_b32_e32 v3, 64, v0\n  v_lshlrev_b32_e32 v3, 2, v3\n"
                                             "  global_store_dword v3, v1, s[4:5]"),
    "a global word one wave stores and the other loads": (
        "v_and_b32_e32 v7, 63, v0\n  v_lshlrev_b32_e32 v7, 2, v7\n  v_cmp_gt_u32_e32 vcc, 64, v0\n"
        "  s_and_saveexec_b64 s[12:13], vcc\n  global_store_dword v7, v0, s[4:5]\n  s_mov_b64 exec, -1",
        "v_cmp_le_u32_e32 vcc, 64, v0\n  s_and_saveexec_b64 s[12:13], vcc\n  global_load_dword v4, v7, s[4:5]\n"
        "  s_waitcnt vmcnt(0)\n  global_store_dword v7, v4, s[4:5] offset:256\n  s_mov_b64 exec, -1"),
}


@pytest.mark.parametrize("case", sorted(RACES))
@pytest.mark.parametrize("check_races", [True, False])
def test_an_order_the_waves_decide_runs_serially(monkeypatch, case, check_races):
    first, then = RACES[case]
    body = f"""
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v2, 2, v0
  v_add_u32_e32 v1, 7, v0
  v_lshlrev_b32_e32 v7, 2, v0
  {first}
  s_waitcnt vmcnt(0) lgkmcnt(0)
  {then}
  s_waitcnt vmcnt(0) lgkmcnt(0)
"""
    ways = _same(*_both(monkeypatch, _exchange(body, groups=1, check_races=check_races)))
    assert ways[0].startswith("serially"), ways
    if not check_races:          # no race finding: the side-by-side run's own watch found it
        assert ("race in LDS" if "LDS" in case else "barrier epoch") in ways[0], ways


@pytest.mark.parametrize("what", ["fault", "steps"])
def test_an_error_is_the_serial_runs(monkeypatch, what):
    """Wave 1 faults (an address past the buffer) or loops without end (max_steps): the error
    raised is the serial run's, naming the same wave, instruction and lane."""
    bad = ("v_lshlrev_b32_e32 v7, 12, v0\n  global_store_dword v7, v0, s[4:5]" if what == "fault" else
           ".Lspin:\n  s_branch .Lspin")
    body = f"""
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v7, 2, v0
  global_store_dword v7, v0, s[4:5]
  v_readfirstlane_b32 s6, v0
  s_cmp_lt_u32 s6, 64
  s_cbranch_scc1 .Ldone
  {bad}
.Ldone:
"""
    errors = []
    for side in (True, False):
        monkeypatch.setattr(LAUNCH, "WAVES_AS_MEMBERS", side)
        with pytest.raises(Exception) as e:
            _exchange(body, groups=1, max_steps=500)()
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]


# waves whose paths part, where side by side would cost more than one after another
APART = {
    "one wave ends at its start": """
  v_readfirstlane_b32 s6, v0
  s_cmp_ge_u32 s6, 64
  s_cbranch_scc1 .Lend
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  v_lshlrev_b32_e32 v7, 2, v0
  v_mov_b32_e32 v1, 0
  s_mov_b32 s10, 0
.Lloop:
  v_add_u32_e32 v1, v1, v0
  s_add_u32 s10, s10, 1
  s_cmp_lt_u32 s10, 100
  s_cbranch_scc1 .Lloop
  s_waitcnt lgkmcnt(0)
  global_store_dword v7, v1, s[4:5]
.Lend:
""",
    "loops of different trip counts": """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  v_readfirstlane_b32 s6, v0
  s_lshr_b32 s6, s6, 6
  s_mul_i32 s6, s6, 150
  v_lshlrev_b32_e32 v7, 2, v0
  v_mov_b32_e32 v1, 0
  s_mov_b32 s10, 0
.Lloop:
  s_cmp_ge_u32 s10, s6
  s_cbranch_scc1 .Ldone
  v_add_u32_e32 v1, v1, v0
  s_add_u32 s10, s10, 1
  s_branch .Lloop
.Ldone:
  s_waitcnt lgkmcnt(0)
  global_store_dword v7, v1, s[4:5]
""",
}


@pytest.mark.parametrize("why", sorted(APART))
def test_waves_that_part_run_serially(monkeypatch, why):
    """A wave that ends at its start while another works, or waves whose loops run different
    trip counts: the workgroup runs serially, with the same results."""
    ways = _same(*_both(monkeypatch, _exchange(APART[why], groups=1)))
    assert ways[0].startswith("serially") and "at most half the waves" in ways[0], ways


def test_a_side_by_side_attempt_taken_back_leaves_no_store(monkeypatch):
    """Wave 1 stores words 0-63 first (the smaller pc), then wave 0 loads them: the attempt ends and
    its store is taken back, so the serial run's wave 0 reads never-written words (a finding and
    poison) as it did before wave 1 ran."""
    body = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_and_b32_e32 v7, 63, v0
  v_lshlrev_b32_e32 v7, 2, v7
  v_readfirstlane_b32 s6, v0
  s_cmp_lt_u32 s6, 64
  s_cbranch_scc1 .Lwave0
  global_store_dword v7, v0, s[4:5]
  s_branch .Ldone
.Lwave0:
  global_load_dword v4, v7, s[4:5]
  s_waitcnt vmcnt(0)
  global_store_dword v7, v4, s[4:5] offset:256
.Ldone:
"""
    ways = _same(*_both(monkeypatch, _exchange(body, groups=1)))
    assert ways[0].startswith("serially"), ways
    monkeypatch.setattr(LAUNCH, "WAVES_AS_MEMBERS", True)
    run, _ = _exchange(body, groups=1)()
    assert {f.kind for f in run.findings} == {"uninitialized-read"}


@pytest.mark.parametrize("live", [None, [1], [0, 2, 3]])
def test_n_member_events_at_once_are_n_in_turn(live):
    """Workgroup.member_event(wave, n) (a block's inline instructions, counted together) leaves the
    members' counts and the parting check as n calls, one per step, leave them — and raises where
    they would, at the same check."""
    from types import SimpleNamespace

    from gfxsim.machine.launch import Machine
    from gfxsim.machine.wavemembers import WavesPart
    from gfxsim.machine.workgroup import APART_CHECK, Workgroup

    def fresh():
        wg = Workgroup(Machine("gfx942", "t", trace=False, provenance=False), (0, 0, 0), 4, waves_as_members=True)
        return wg, SimpleNamespace(live=live, member_events=[0] * 4, steps=0)

    for sizes in ([5, 1, 60, 62, 3, 200], [APART_CHECK - 1, 2, 7], [1] * 140):
        (a, wa), (b, wb) = fresh(), fresh()
        outcome = {}
        for wg, w, batched in ((a, wa, True), (b, wb, False)):
            try:
                for n in sizes:
                    if batched:
                        w.steps += n
                        wg.member_event(w, n)
                    else:
                        for _ in range(n):
                            w.steps += 1
                            wg.member_event(w)
                outcome[batched] = None
            except WavesPart as e:
                outcome[batched] = str(e)
        assert outcome[True] == outcome[False]
        if outcome[True] is None:
            assert wa.member_events == wb.member_events and a.apart == b.apart
        assert (outcome[True] is not None) == (live is not None and 2 * len(live) <= 4 and sum(sizes) >= APART_CHECK)


def _compiled_and_numpy(monkeypatch, go):
    """``go()`` with the side-by-side LDS and global word accesses compiled (ds_words.py,
    member_words.py) and in numpy."""
    ds, vmem = importlib.import_module("gfxsim.machine.ds"), importlib.import_module("gfxsim.machine.vmem")
    got = {}
    for compiled in (True, False):
        monkeypatch.setattr(ds, "COMPILED_WORDS", compiled)
        monkeypatch.setattr(vmem, "COMPILED_WORDS", compiled)
        got[compiled] = go()
    return got[True], got[False]


def _identical(a, b):
    (ra, ba), (rb, bb) = a, b
    for name in ba:
        np.testing.assert_array_equal(ba[name].raw, bb[name].raw, err_msg=name)
    assert _findings(ra) == _findings(rb)
    assert ra.trace.n_events == rb.trace.n_events and ra.lane_instructions == rb.lane_instructions
    assert _records(ra) == _records(rb)
    assert ra.folds == rb.folds                        # side by side or serially, and why, the same
    return [f.get("waves") for f in ra.folds]


@pytest.mark.parametrize("context", [256, 200])
@pytest.mark.parametrize("name", ["qk_int8", "pv_int8", "paged_attention_decode", "prefix_prefill"])
def test_the_compiled_words_are_the_numpy_ones_on_the_twins(monkeypatch, name, context):
    """Side by side, and the prefill's waves one at a time (they part at once)."""
    need_toolchain("gfx942")
    ways = _identical(*_compiled_and_numpy(monkeypatch, lambda: _twin(name, context)))
    assert len(ways) == 1 and (ways[0].startswith("serially") if name == "prefix_prefill" else
                               ways == ["side by side"]), ways


# LDS accesses of two waves side by side (v0 = 0..127): a store of what the other wave stored
# (no race), a word both store, a read of the other's word, a write over the other's read (each
# a race), one in a barrier epoch of its own, a b8/b16 store, b64/b128 reads, a bank conflict, and
# a global store taken back (a wave loads it before, in the serial order, it is made)
LDS_CASES = {
    "same bytes": "v_and_b32_e32 v3, 63, v0\n  v_lshlrev_b32_e32 v3, 2, v3\n  v_cmp_gt_u32_e32 vcc, 64, v0\n"
                  "  s_and_saveexec_b64 s[12:13], vcc\n  ds_write_b32 v3, v3\n  s_mov_b64 exec, -1\n"
                  "  v_cmp_le_u32_e32 vcc, 64, v0\n  s_and_saveexec_b64 s[12:13], vcc\n  ds_write_b32 v3, v3\n"
                  "  s_waitcnt lgkmcnt(0)\n  ds_read_b32 v4, v3\n  s_mov_b64 exec, -1",
    "same bytes, one differs": "v_and_b32_e32 v3, 63, v0\n  v_lshlrev_b32_e32 v3, 2, v3\n  v_cmp_gt_u32_e32 vcc, 64, v0\n"
                               "  s_and_saveexec_b64 s[12:13], vcc\n  ds_write_b32 v3, v3\n  s_mov_b64 exec, -1\n"
                               "  v_cmp_eq_u32_e32 vcc, 0x50, v0\n  v_cndmask_b32_e32 v5, v3, v0, vcc\n"
                               "  v_cmp_le_u32_e32 vcc, 64, v0\n  s_and_saveexec_b64 s[12:13], vcc\n  ds_write_b32 v3, v5\n"
                               "  s_mov_b64 exec, -1",
    "a word both store": "v_and_b32_e32 v3, 63, v0\n  v_lshlrev_b32_e32 v3, 2, v3\n  ds_write_b32 v3, v0",
    "read of the other's": "ds_write_b32 v2, v1\n  v_xor_b32_e32 v3, 64, v0\n  v_lshlrev_b32_e32 v3, 2, v3\n"
                           "  ds_read_b32 v4, v3",
    "write over the other's read": "ds_write_b32 v2, v1\n  s_waitcnt lgkmcnt(0)\n  s_barrier\n  ds_read_b32 v4, v2\n"
                                   "  v_xor_b32_e32 v3, 64, v0\n  v_lshlrev_b32_e32 v3, 2, v3\n  ds_write_b32 v3, v1",
    "after a barrier": "ds_write_b32 v2, v1\n  s_waitcnt lgkmcnt(0)\n  s_barrier\n  v_xor_b32_e32 v3, 64, v0\n"
                       "  v_lshlrev_b32_e32 v3, 2, v3\n  ds_read_b32 v4, v3\n  s_waitcnt lgkmcnt(0)\n  s_barrier\n"
                       "  ds_write_b32 v2, v4\n  v_lshlrev_b32_e32 v3, 3, v0\n  s_waitcnt lgkmcnt(0)\n  s_barrier\n"
                       "  ds_write2_b32 v3, v1, v0 offset1:1\n  s_waitcnt lgkmcnt(0)\n  ds_read2_b32 v[4:5], v3 offset1:1\n"
                       "  ds_read_b64 v[8:9], v3",
    "bytes": "ds_write_b32 v2, v1\n  ds_write_b8 v2, v0 offset:1\n  ds_write_b16 v2, v0 offset:2\n"
             "  s_waitcnt lgkmcnt(0)\n  ds_read_b32 v4, v2",
    "wide": "v_lshlrev_b32_e32 v3, 4, v0\n  v_mov_b32_e32 v4, v1\n  v_mov_b32_e32 v5, v0\n  v_mov_b32_e32 v6, v2\n"
            "  v_mov_b32_e32 v7, 5\n"
            "  ds_write_b128 v3, v[4:7]\n  s_waitcnt lgkmcnt(0)\n  ds_read_b128 v[8:11], v3\n  ds_read_b64 v[8:9], v3 offset:8\n"
            "  v_add_u32_e32 v4, v8, v11",
    "unwritten": "ds_read_b32 v4, v2",
    "out of range": "v_lshlrev_b32_e32 v3, 10, v0\n  ds_read_b32 v4, v3",
    "partial exec": "v_cmp_gt_u32_e32 vcc, 100, v0\n  s_and_saveexec_b64 s[12:13], vcc\n  ds_write_b32 v2, v1\n"
                    "  s_waitcnt lgkmcnt(0)\n  ds_read_b32 v4, v2\n  s_mov_b64 exec, -1",
    "a store taken back": "v_cmp_le_u32_e32 vcc, 64, v0\n  s_and_saveexec_b64 s[12:13], vcc\n"
                          "  global_store_dword v7, v1, s[4:5]\n  s_mov_b64 exec, -1\n  s_waitcnt vmcnt(0)\n"
                          "  v_cmp_gt_u32_e32 vcc, 64, v0\n  s_and_saveexec_b64 s[12:13], vcc\n  v_xor_b32_e32 v3, 64, v0\n"
                          "  v_lshlrev_b32_e32 v3, 2, v3\n  global_load_dword v4, v3, s[4:5]\n  s_mov_b64 exec, -1",
    "bank conflict": "v_lshlrev_b32_e32 v3, 7, v0\n  v_and_b32_e32 v3, 0x3fff, v3\n  ds_write_b32 v3, v1\n"
                     "  s_waitcnt lgkmcnt(0)\n  ds_read_b32 v4, v3",
}


@pytest.mark.parametrize("case", sorted(LDS_CASES) + sorted(RACES))
@pytest.mark.parametrize("side,check_races", [(True, False), (False, True), (False, False)])
def test_the_compiled_words_are_the_numpy_ones(monkeypatch, case, side, check_races):
    """Side by side where the waves can run so, and each wave alone (serially: the race check of
    waves run one after another, with its findings, where the launch checks races)."""
    monkeypatch.setattr(LAUNCH, "WAVES_AS_MEMBERS", side)
    text = LDS_CASES[case] if case in LDS_CASES else "\n  s_waitcnt vmcnt(0) lgkmcnt(0)\n  ".join(RACES[case])
    body = f"""
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v2, 2, v0
  v_add_u32_e32 v1, 7, v0
  v_mov_b32_e32 v4, 3
  v_lshlrev_b32_e32 v7, 2, v0
  {text}
  s_waitcnt vmcnt(0) lgkmcnt(0)
  v_lshlrev_b32_e32 v7, 2, v0
  global_store_dword v7, v4, s[4:5]
"""
    go = _exchange(body, groups=1, check_races=check_races)

    def guarded():
        try:
            return go()
        except Exception as e:           # noqa: BLE001 - an error must be the same error
            return e
    a, b = _compiled_and_numpy(monkeypatch, guarded)
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b)
        return
    _identical(a, b)
