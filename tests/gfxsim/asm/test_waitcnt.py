"""The wait counters (gfxsim/asm/waitcnt.py): a register read before the s_waitcnt that covers its
load reads poison and reports missing-wait; the wait that covers it does not. Hand-written
snippets, each a defective kernel and its fixed twin."""
import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.errors import GfxSimError
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.asm.waitcnt import decode_packed

ARGS = [("x", "global_buffer", 8), ("y", "global_buffer", 8)]
# x in s[4:5], y in s[6:7], v1 = 4 * lane
PROLOG = """
s_load_dwordx4 s[4:7], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
v_lshlrev_b32_e32 v1, 2, v0
"""


def run(body: str, lds: int = 0, x=None, batch: int = 1, grid: int = 1):
    """y (float32 [64 * grid]) as the kernel left it, and the Run."""
    x = Buffer("x", np.arange(64 * grid, dtype=np.float32)) if x is None else x
    y = Buffer("y", np.zeros(64 * grid, np.float32))
    k = kernel_from_text(PROLOG + body, "test_waitcnt", args=ARGS, lds=lds)
    r = run_asm(k, grid, 64, args=dict(x=x, y=y), batch=batch)
    return y.array, r


def waits(r):
    return r.findings_of("missing-wait")


LOAD_ADD = """
global_load_dword v2, v1, s[4:5]
{wait}
v_add_f32_e32 v3, 1.0, v2
global_store_dword v1, v3, s[6:7]
"""


def test_a_read_before_vmcnt_reads_poison_and_names_load_read_and_wait():
    y, r = run(LOAD_ADD.format(wait=""))
    assert np.isnan(y).all()                                   # the numbers show it
    (f,) = r.findings
    assert f.kind == "missing-wait" and f.details["register"] == "v2" and f.details["access"] == "read"
    assert f.details["needed"] == "s_waitcnt vmcnt(0)" and f.details["counter"] == "vmcnt"
    assert f.details["load_line"].endswith("(global_load_dword v2)") and f.details["lanes"] == list(range(64))
    assert f.source.endswith("(v_add_f32_e32)") and f.details["load"] == f.instruction - 1
    y, r = run(LOAD_ADD.format(wait="s_waitcnt vmcnt(0)"))
    assert np.array_equal(y, np.arange(64) + 1.0) and not r.findings


@pytest.mark.parametrize("imm", ["0", "0x3f70"])          # the packed form: vmcnt 0, the others left out
def test_the_packed_immediate_waits_as_the_named_fields(imm):
    y, r = run(LOAD_ADD.format(wait=f"s_waitcnt {imm}"))
    assert np.array_equal(y, np.arange(64) + 1.0) and not r.findings


def test_packed_fields():
    assert decode_packed(0) == {"vmcnt": 0, "expcnt": 0, "lgkmcnt": 0}
    assert decode_packed(0xC07F) == {"vmcnt": 63, "expcnt": 7, "lgkmcnt": 0}
    assert decode_packed(0x0F72) == {"vmcnt": 2, "expcnt": 7, "lgkmcnt": 15}


def test_a_wait_on_another_counter_covers_nothing():
    _, r = run(LOAD_ADD.format(wait="s_waitcnt lgkmcnt(0) expcnt(0)"))
    assert [f.details["register"] for f in waits(r)] == ["v2"]


THREE_LOADS = """
global_load_dword v2, v1, s[4:5]
global_load_dword v3, v1, s[4:5] offset:256
global_load_dword v4, v1, s[4:5] offset:512
s_waitcnt vmcnt({n})
v_add_f32_e32 v5, v{reg}, v{reg}
global_store_dword v1, v5, s[6:7]
"""


@pytest.mark.parametrize("n,reg,needed", [(2, 2, None), (2, 3, 1), (1, 3, None), (1, 4, 0), (0, 4, None)])
def test_vmcnt_n_covers_the_accesses_with_n_younger_ones(n, reg, needed):
    x = Buffer("x", np.arange(256, dtype=np.float32))
    y, r = run(THREE_LOADS.format(n=n, reg=reg), x=x)
    if needed is None:
        assert not r.findings and np.array_equal(y, 2 * (np.arange(64) + 64 * (reg - 2)))
    else:
        (f,) = waits(r)
        assert f.details["register"] == f"v{reg}" and f.details["needed"] == f"s_waitcnt vmcnt({needed})"
        assert np.isnan(y).all()


def test_a_store_counts_in_vmcnt_in_order():
    """gfx9 has no store counter: a store issued after a load is one of vmcnt's younger accesses."""
    body = """
global_load_dword v2, v1, s[4:5]
global_store_dword v1, v1, s[6:7]
s_waitcnt vmcnt(1)
global_store_dword v1, v2, s[6:7]
"""
    y, r = run(body)
    assert not r.findings and np.array_equal(y, np.arange(64, dtype=np.float32))


LDS_READ = """
v_mov_b32_e32 v2, 1.0
ds_write_b32 v1, v2
ds_read_b32 v3, v1
{wait}
v_add_f32_e32 v3, v3, v3
global_store_dword v1, v3, s[6:7]
"""


def test_an_lds_read_needs_lgkmcnt():
    y, r = run(LDS_READ.format(wait=""), lds=256)
    (f,) = r.findings
    assert f.details["counter"] == "lgkmcnt" and f.details["needed"] == "s_waitcnt lgkmcnt(0)"
    assert f.details["register"] == "v3" and f.details["access"] == "read" and np.isnan(y).all()
    y, r = run(LDS_READ.format(wait="s_waitcnt lgkmcnt(0)"), lds=256)
    assert not r.findings and (y == 2).all()


SMEM_TWO = """
s_load_dword s8, s[0:1], 0x4
s_load_dword s9, s[0:1], 0x8
s_waitcnt lgkmcnt({n})
v_mov_b32_e32 v2, s8
global_store_dword v1, v2, s[6:7]
"""


def test_scalar_loads_return_out_of_order_so_only_lgkmcnt0_covers_them():
    _, r = run(SMEM_TWO.format(n=1))
    (f,) = r.findings
    assert f.details["register"] == "s8" and f.details["needed"] == "s_waitcnt lgkmcnt(0)"
    assert f.details["lanes"] == list(range(64))               # an SGPR is read by every lane
    y, r = run(SMEM_TWO.format(n=0))
    assert not r.findings and (y.view(np.uint32) != 0).all()


@pytest.mark.parametrize("second,covered", [("ds_read_b32 v4, v1 offset:4", True),
                                            ("s_load_dword s9, s[0:1], 0x8", False)])
def test_lds_reads_return_in_order_but_not_behind_a_scalar_load(second, covered):
    body = f"""
v_mov_b32_e32 v2, 1.0
ds_write_b32 v1, v2
s_waitcnt lgkmcnt(0)
ds_read_b32 v3, v1
{second}
s_waitcnt lgkmcnt(1)
global_store_dword v1, v3, s[6:7]
"""
    _, r = run(body, lds=512)
    assert bool(waits(r)) != covered
    if not covered:
        assert waits(r)[0].details["needed"] == "s_waitcnt lgkmcnt(0)"


def test_overwriting_a_pending_destination_is_reported():
    body = """
global_load_dword v2, v1, s[4:5]
v_mov_b32_e32 v2, 0
s_waitcnt vmcnt(0)
global_store_dword v1, v2, s[6:7]
"""
    _, r = run(body)
    (f,) = r.findings
    assert f.details["access"] == "overwrite" and f.details["register"] == "v2"


def test_a_second_load_into_a_pending_register_lands_in_order():
    body = """
global_load_dword v2, v1, s[4:5]
global_load_dword v2, v1, s[4:5] offset:4
s_waitcnt vmcnt(0)
global_store_dword v1, v2, s[6:7]
"""
    y, r = run(body, x=Buffer("x", np.arange(65, dtype=np.float32)))
    assert not r.findings and np.array_equal(y, np.arange(1, 65, dtype=np.float32))


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("lanes", ["", "v_cmp_gt_u32_e32 vcc, 32, v0\ns_and_saveexec_b64 s[10:11], vcc"])
def test_the_older_of_two_loads_into_a_register_retires_alone(batch, lanes):
    """vmcnt(1) retires the first load; the second, into the same register (in every lane or in
    lanes 0..31), is still pending there: the read after it is a missing-wait in its lanes only."""
    body = f"""
global_load_dword v2, v1, s[4:5]
{lanes}
global_load_dword v2, v1, s[4:5] offset:4
s_waitcnt vmcnt(1)
s_mov_b64 exec, -1
v_mov_b32_e32 v3, v2
s_waitcnt vmcnt(0)
global_store_dword v1, v3, s[6:7]
"""
    _, r = run(body, grid=2, batch=batch, x=Buffer("x", np.arange(129, dtype=np.float32)))
    assert sorted(f.workgroup for f in waits(r)) == [(0, 0, 0), (1, 0, 0)]
    assert {tuple(f.details["lanes"]) for f in waits(r)} == {tuple(range(32 if lanes else 64))}


def test_the_lanes_a_load_did_not_write_are_not_pending():
    body = """
v_cmp_gt_u32_e32 vcc, 32, v0
s_and_saveexec_b64 s[10:11], vcc
global_load_dword v2, v1, s[4:5]
s_xor_b64 exec, exec, s[10:11]
v_mov_b32_e32 v3, v2
s_waitcnt vmcnt(0)
"""
    _, r = run(body)
    assert not r.findings                  # lanes 32..63 read v2, which the load wrote in 0..31 only


def test_each_member_of_a_batch_has_its_own_counters():
    for batch in (1, 2):
        _, r = run(LOAD_ADD.format(wait=""), grid=2, batch=batch)
        assert sorted(f.workgroup for f in waits(r)) == [(0, 0, 0), (1, 0, 0)]
        _, r = run(LOAD_ADD.format(wait="s_waitcnt vmcnt(0)"), grid=2, batch=batch)
        assert not r.findings


def test_an_error_from_a_poisoned_read_names_the_missing_wait():
    body = """
s_load_dwordx2 s[8:9], s[0:1], 0x0
v_lshlrev_b32_e32 v1, 2, v0
global_load_dword v2, v1, s[8:9]
"""
    k = kernel_from_text(body, "test_waitcnt", args=ARGS)
    with pytest.raises(GfxSimError, match=r"0x7fbadbad.*after a missing-wait: it read s8 as poison before "
                                          r"`s_waitcnt lgkmcnt\(0\)` covered test_waitcnt.s:\d+ \(s_load_dwordx2 s\[8:9\]\)"):
        run_asm(k, 1, 64, args=dict(x=Buffer("x", np.zeros(64, np.float32)), y=Buffer("y", np.zeros(64, np.float32))))


def test_a_wait_of_another_form_is_named():
    from gfxsim.asm.operands import AsmSyntaxError
    with pytest.raises(AsmSyntaxError, match=r"line \d+: s_waitcnt foo: a wait is"):
        run("s_waitcnt foo")


FLAT = """
s_mov_b64 s[10:11], src_shared_base
v_mov_b32_e32 v2, 1.0
ds_write_b32 v1, v2
s_waitcnt lgkmcnt(0)
v_mov_b32_e32 v4, {lo}
v_mov_b32_e32 v5, {hi}
v_add_co_u32_e32 v4, vcc, v4, v1
v_addc_co_u32_e32 v5, vcc, 0, v5, vcc
flat_load_dword v3, v[4:5]
global_load_dword v6, v1, s[4:5]
s_waitcnt vmcnt(1)
global_store_dword v1, v3, s[6:7]
s_waitcnt vmcnt(0)
"""


@pytest.mark.parametrize("where", ["global", "lds"])
def test_a_flat_access_of_global_memory_completes_in_order_one_of_the_lds_does_not(where):
    lo, hi = ("s4", "s5") if where == "global" else ("0", "s11")
    y, r = run(FLAT.format(lo=lo, hi=hi), lds=256)
    if where == "global":
        assert not r.findings and np.array_equal(y, np.arange(64, dtype=np.float32))
    else:
        (f,) = r.findings
        assert f.details["register"] == "v3" and f.details["needed"] == "s_waitcnt vmcnt(0) lgkmcnt(0)"
        assert np.isnan(y).all()


DMA = """
s_load_dwordx4 s[8:11], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
s_and_b32 s9, s9, 0xffff
s_mov_b32 s10, 0x100
s_mov_b32 s11, 0x20000
s_mov_b32 m0, 0
buffer_load_dword v1, s[8:11], 0 offen lds
{wait}
ds_read_b32 v2, v1 offset:{off}
s_waitcnt lgkmcnt(0)
global_store_dword v1, v2, s[6:7]
"""


@pytest.mark.parametrize("wait,off,found", [("", 0, True), ("s_waitcnt vmcnt(0)", 0, False), ("", 256, False)])
def test_lds_bytes_an_lds_dma_has_yet_to_write(wait, off, found):
    _, r = run(DMA.format(wait=wait, off=off), lds=1024)
    assert bool(waits(r)) == found          # (past the DMA's bytes the read is of never-written LDS)
    if found:
        (f,) = waits(r)
        assert f.details["register"] == "LDS[0:256]" and f.details["needed"] == "s_waitcnt vmcnt(0)"
        assert f.details["load_line"].endswith("(buffer_load_dword lds)") and f.details["lanes"] == list(range(64))


def test_members_that_part_keep_their_own_counters():
    """Workgroup 0 waits on its own branch, workgroup 1 does not: batched or not, only 1 reports."""
    body = """
global_load_dword v2, v1, s[4:5]
s_cmp_eq_u32 s2, 0
s_cbranch_scc0 .Lskip
s_waitcnt vmcnt(0)
.Lskip:
v_add_f32_e32 v3, 1.0, v2
s_waitcnt vmcnt(0)
global_store_dword v1, v3, s[6:7]
"""
    for batch in (1, 2):
        _, r = run(body, grid=2, batch=batch)
        assert [f.workgroup for f in r.findings] == [(1, 0, 0)], (batch, r.findings)


RETIRE = ["global_load_dword v2, v1, s[4:5]\nglobal_load_dword v3, v1, s[4:5] offset:4\ns_load_dword s9, s[4:5], 0x0\n"
          "{wait}\nv_add_f32_e32 v3, v2, v3\nv_add_f32_e32 v3, s9, v3\nglobal_store_dword v1, v3, s[6:7]\n",
          "global_load_dword v2, v1, s[4:5]\ns_cmp_eq_u32 s2, 0\ns_cbranch_scc0 .Lskip\ns_waitcnt vmcnt(0)\n"
          ".Lskip:\n{wait}\nv_add_f32_e32 v3, 1.0, v2\nglobal_load_dword v2, v1, s[4:5] offset:8\n"
          "s_waitcnt vmcnt(0)\nglobal_store_dword v1, v3, s[6:7]\nds_write_b32 v1, v2\n{wait}\ns_barrier\n"]


@pytest.mark.parametrize("body", range(len(RETIRE)))
@pytest.mark.parametrize("wait", ["", "s_waitcnt vmcnt(1)", "s_waitcnt vmcnt(0)", "s_waitcnt lgkmcnt(0)"])
def test_members_together_retire_as_the_general_path(body, wait, monkeypatch):
    """Members that issue and wait together (a batch) count and retire on member 0's numbers
    (Counters.SCALAR) until one sits an access or a wait out: the same numbers, poison and
    findings as the per-member arrays' path."""
    from gfxsim.asm.waitcnt import Counters
    text = RETIRE[body].format(wait=wait)
    x = np.arange(2 * 64 + 3, dtype=np.float32)
    got = run(text, x=Buffer("x", x.copy()), grid=2, batch=2, lds=1024)
    monkeypatch.setattr(Counters, "SCALAR", False)
    want = run(text, x=Buffer("x", x.copy()), grid=2, batch=2, lds=1024)
    np.testing.assert_array_equal(got[0].view(np.uint32), want[0].view(np.uint32))
    assert [(f.kind, f.message, f.workgroup) for f in got[1].findings] == \
        [(f.kind, f.message, f.workgroup) for f in want[1].findings]
    assert got[1].trace.n_events == want[1].trace.n_events


@pytest.mark.parametrize("wait", ["", "s_waitcnt vmcnt(1)", "s_waitcnt vmcnt(0)", "s_waitcnt lgkmcnt(0)"])
def test_a_lone_members_retiring_is_the_general_one(wait, monkeypatch):
    """A wave of one member counts and retires its accesses on Python numbers (Counters.SCALAR):
    the same numbers, poison and findings as the per-member arrays' path."""
    from gfxsim.asm.waitcnt import Counters
    body = """
global_load_dword v2, v1, s[4:5]
global_load_dword v3, v1, s[4:5] offset:4
s_load_dword s9, s[4:5], 0x0
{wait}
v_add_f32_e32 v3, v2, v3
v_add_f32_e32 v3, s9, v3
global_store_dword v1, v3, s[6:7]
"""
    x = np.arange(65, dtype=np.float32)
    got = run(body.format(wait=wait), x=Buffer("x", x.copy()))
    monkeypatch.setattr(Counters, "SCALAR", False)
    want = run(body.format(wait=wait), x=Buffer("x", x.copy()))
    np.testing.assert_array_equal(got[0].view(np.uint32), want[0].view(np.uint32))
    assert [(f.kind, f.message) for f in got[1].findings] == [(f.kind, f.message) for f in want[1].findings]


# workgroup 0 alone stores (the members part, their vmcnt counts differ), then both load and wait
REJOIN = ("s_cmp_eq_u32 s2, 0\ns_cbranch_scc0 .Lskip\nglobal_store_dword v1, v1, s[6:7]\n{first}\n.Lskip:\n"
          "s_waitcnt vmcnt(0) lgkmcnt(0)\nglobal_load_dword v2, v1, s[4:5]\nds_write_b32 v1, v2\n"
          "global_load_dword v3, v1, s[4:5] offset:4\n{wait}\nv_add_f32_e32 v3, v2, v3\n"
          "global_store_dword v1, v3, s[6:7]\n{wait}\ns_barrier\n"
          "ds_read_b32 v4, v1\n{wait}\nglobal_store_dword v1, v4, s[6:7] offset:4\n")


@pytest.mark.parametrize("first", ["", "ds_write_b32 v1, v1"])
@pytest.mark.parametrize("wait", ["", "s_waitcnt vmcnt(1)", "s_waitcnt vmcnt(0)", "s_waitcnt lgkmcnt(0)",
                                  "s_waitcnt vmcnt(0) lgkmcnt(0)"])
def test_members_that_part_and_meet_again_retire_as_the_general_path(first, wait, monkeypatch):
    """Members that parted (one issued accesses the others did not) count together again once a
    wait of them all leaves nothing outstanding where their counts differ (Counters._rejoined):
    the same numbers, poison and findings as the per-member arrays' path; and they do rejoin."""
    from gfxsim.asm.waitcnt import Counters
    text = REJOIN.format(first=first, wait=wait)
    x = np.arange(2 * 64 + 3, dtype=np.float32)
    seen = []
    rejoined = Counters._rejoined
    monkeypatch.setattr(Counters, "_rejoined", lambda self: seen.append(rejoined(self)) or seen[-1])
    got = run(text, x=Buffer("x", x.copy()), grid=2, batch=2, lds=1024)
    assert any(seen)
    monkeypatch.setattr(Counters, "SCALAR", False)
    want = run(text, x=Buffer("x", x.copy()), grid=2, batch=2, lds=1024)
    np.testing.assert_array_equal(got[0].view(np.uint32), want[0].view(np.uint32))
    assert [(f.kind, f.message, f.workgroup) for f in got[1].findings] == \
        [(f.kind, f.message, f.workgroup) for f in want[1].findings]
    assert got[1].trace.n_events == want[1].trace.n_events


BARRIER = """
v_lshlrev_b32_e32 v1, 2, v0
ds_write_b32 v1, v1
global_load_dword v2, v1, s[4:5]
ds_write_b32 v1, v1 offset:512
{wait}
s_barrier
ds_read_b32 v3, v1 offset:4
v_add_u32_e32 v2, v2, v3
global_store_dword v1, v2, s[6:7]
"""


@pytest.mark.parametrize("wait", ["", "s_waitcnt lgkmcnt(1)", "s_waitcnt lgkmcnt(0)", "s_waitcnt vmcnt(0)"])
@pytest.mark.parametrize("grid,batch", [(1, 1), (2, 2)])
def test_counts_on_python_numbers_are_the_arrays_counts(wait, grid, batch, monkeypatch):
    """Two waves a workgroup: the counts kept as Python numbers (Counters.fast) give the findings
    (an LDS write outstanding at s_barrier, its younger accesses; a read of a pending load) and
    results the per-member arrays give."""
    from gfxsim.asm.waitcnt import Counters

    def go():
        x = Buffer("x", np.arange(128 * grid + 1, dtype=np.float32))
        y = Buffer("y", np.zeros(128 * grid, np.float32))
        k = kernel_from_text(PROLOG + BARRIER.format(wait=wait), "test_waitcnt", args=ARGS, lds=1024)
        r = run_asm(k, grid, 128, args=dict(x=x, y=y), batch=batch)
        return y.array.view(np.uint32).tolist(), [(f.kind, f.message, f.workgroup) for f in r.findings], r.trace.n_events
    got = go()
    monkeypatch.setattr(Counters, "SCALAR", False)
    assert got == go()
    if wait != "s_waitcnt lgkmcnt(0)":
        assert got[1]
