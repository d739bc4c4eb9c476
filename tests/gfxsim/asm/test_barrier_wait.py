"""An LDS write still outstanding at s_barrier (gfxsim/asm/waitcnt.py Counters.barrier): a wave past
the barrier may read the bytes before they land, so it is a missing-wait naming the write and the
`s_waitcnt lgkmcnt(N)` that belongs before the barrier; with the wait, nothing."""
import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.run import kernel_from_text, run_asm

ARGS = [("x", "global_buffer", 8), ("y", "global_buffer", 8)]
# two waves: each lane stores its work-item id to LDS, then reads the other wave's slot after the barrier
SWAP = """
s_load_dwordx4 s[4:7], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
v_lshlrev_b32_e32 v1, 2, v0
v_cvt_f32_u32_e32 v3, v0
ds_write_b32 v1, v3
{extra}
{wait}
s_barrier
v_xor_b32_e32 v2, 0x100, v1
ds_read_b32 v4, v2
s_waitcnt lgkmcnt(0)
global_store_dword v1, v4, s[6:7]
s_endpgm
"""


def run(wait: str, extra: str = ""):
    k = kernel_from_text(SWAP.format(wait=wait, extra=extra), "swap_halves", args=ARGS, lds=1024)
    y = Buffer("y", np.zeros(128, np.float32))
    r = run_asm(k, 1, 128, args=dict(x=Buffer("x", np.zeros(128, np.float32)), y=y))
    return y.array, r


def test_an_lds_write_outstanding_at_the_barrier_is_a_missing_wait():
    _, r = run("")
    (f,) = r.findings
    d = f.details
    assert f.kind == "missing-wait" and d["access"] == "barrier" and d["register"] == "LDS"
    assert d["load_line"].endswith("(ds_write_b32)") and d["needed"] == "s_waitcnt lgkmcnt(0)"
    assert d["counter"] == "lgkmcnt" and d["lanes"] == list(range(64)) and d["count"] == 2     # both waves
    assert "s_barrier while an LDS write is outstanding" in f.message


def test_the_wait_before_the_barrier_covers_it():
    y, r = run("s_waitcnt lgkmcnt(0)")
    assert r.findings == []
    assert np.array_equal(y, (np.arange(128) ^ 64).astype(np.float32))      # each lane got the other wave's id


def test_the_needed_count_leaves_younger_lds_accesses_outstanding():
    """Two LDS writes then lgkmcnt(1): the first is covered, the second is not; the finding names
    the second and lgkmcnt(0)."""
    _, r = run("s_waitcnt lgkmcnt(1)", extra="ds_write_b32 v1, v3 offset:512")
    (f,) = r.findings
    assert f.details["load_line"].endswith("(ds_write_b32)") and f.details["needed"] == "s_waitcnt lgkmcnt(0)"
    _, r = run("s_waitcnt lgkmcnt(0)", extra="ds_write_b32 v1, v3 offset:512")
    assert r.findings == []


@pytest.mark.parametrize("wait", ["", "s_waitcnt lgkmcnt(0)"])
def test_batched_workgroups_agree_with_one_at_a_time(wait):
    k = kernel_from_text(SWAP.format(wait=wait, extra=""), "swap_halves", args=ARGS, lds=1024)
    found = []
    for batch in (1, 2):
        y = Buffer("y", np.zeros(256, np.float32))
        r = run_asm(k, 2, 128, args=dict(x=Buffer("x", np.zeros(256, np.float32)), y=y), batch=batch)
        found.append(sorted((f.workgroup, f.details["count"]) for f in r.findings))
    assert found[0] == found[1] and bool(found[0]) == (wait == "")


def test_a_lone_wave_has_no_one_to_race():
    """One wave per workgroup: its LDS accesses are in order, the barrier has no other wave to wait for."""
    k = kernel_from_text(SWAP.format(wait="", extra="").replace("v_xor_b32_e32 v2, 0x100, v1", "v_mov_b32_e32 v2, v1"),
                         "one_wave", args=ARGS, lds=1024)
    y = Buffer("y", np.zeros(64, np.float32))
    r = run_asm(k, 1, 64, args=dict(x=Buffer("x", np.zeros(64, np.float32)), y=y))
    assert r.findings == [] and np.array_equal(y.array, np.arange(64, dtype=np.float32))


def test_the_finding_names_the_lanes_that_wrote():
    """An LDS write under a partial EXEC: the finding names the lanes that wrote (in any wave)."""
    k = kernel_from_text(SWAP.format(wait="", extra="").replace(
        "ds_write_b32 v1, v3", "v_cmp_gt_u32_e32 vcc, 0x50, v0\ns_and_saveexec_b64 s[8:9], vcc\n"
        "ds_write_b32 v1, v3 offset:512\ns_mov_b64 exec, s[8:9]"), "swap_halves", args=ARGS, lds=1024)
    r = run_asm(k, 1, 128, args=dict(x=Buffer("x", np.zeros(128, np.float32)), y=Buffer("y", np.zeros(128, np.float32))))
    (f,) = [f for f in r.findings if f.details.get("access") == "barrier"]
    assert f.details["lanes"] == list(range(64)) and f.details["count"] == 2      # wave 0 all, wave 1 16
    k = kernel_from_text(SWAP.format(wait="", extra="").replace(
        "ds_write_b32 v1, v3", "v_cmp_gt_u32_e32 vcc, 0x10, v0\ns_and_saveexec_b64 s[8:9], vcc\n"
        "ds_write_b32 v1, v3 offset:512\ns_mov_b64 exec, s[8:9]"), "swap_halves", args=ARGS, lds=1024)
    r = run_asm(k, 1, 128, args=dict(x=Buffer("x", np.zeros(128, np.float32)), y=Buffer("y", np.zeros(128, np.float32))))
    (f,) = [f for f in r.findings if f.details.get("access") == "barrier"]
    assert f.details["lanes"] == list(range(16)) and f.details["count"] == 2      # wave 1: none of its lanes
