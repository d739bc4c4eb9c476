"""The AMDHSA launch of the asm front end: descriptor and argument metadata,
kernarg segment, initial SGPRs/VGPRs, several waves meeting at s_barrier, faults and errors."""
from __future__ import annotations

import numpy as np
import pytest
from support.asm_sandbox import run_snippet
from support import need_toolchain, repo_project

from gfxsim import Buffer
from gfxsim.asm.launch import KernelABI, LaunchError
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.machine.errors import MemoryFault

U32 = np.uint32
OUT = [("out", "global_buffer", 8)]


def test_abi_of_the_compiled_qk_int8():
    need_toolchain("gfx942")
    from gfxsim.hip.build import find_kernel
    abi = KernelABI.of(find_kernel("qk_int8", "gfx942", project=repo_project()))
    # q_lds (padded) + sq_lds
    assert abi.lds_bytes == 16 * (128 + 8) + 16 * 4 and abi.kernarg_size == 48
    assert abi.workgroup_id == (1, 0, 0) and abi.workitem_id == 0 and abi.n_agpr == 16
    assert [(a.name, a.offset, a.kind) for a in abi.args] == [
        ("q", 0, "global_buffer"), ("k_cache", 8, "global_buffer"), ("k_scale", 16, "global_buffer"),
        ("block_table", 24, "global_buffer"), ("context_len", 32, "by_value"), ("s_out", 40, "global_buffer")]


def test_initial_state_kernarg_workgroup_ids_and_partial_last_wave():
    # out[wg][item] = v0 | s2 << 16 | s3 << 24, plus the by-value argument
    body = """
        s_load_dwordx2 s[4:5], s[0:1], 0x0
        s_load_dword s6, s[0:1], 0x8
        s_mul_i32 s7, s3, 3
        s_add_i32 s7, s7, s2
        s_mul_i32 s7, s7, 0x200
        v_lshlrev_b32_e32 v1, 2, v0
        v_add_u32_e32 v1, s7, v1
        s_lshl_b32 s8, s2, 16
        s_lshl_b32 s9, s3, 24
        s_or_b32 s8, s8, s9
        s_waitcnt lgkmcnt(0)
        s_add_i32 s8, s8, s6
        v_or_b32_e32 v2, s8, v0
        global_store_dword v1, v2, s[4:5]
    """
    out = np.full(6 * 128, 0xFFFFFFFF, U32)
    run, arr = run_snippet(body, args=OUT + [("extra", "by_value", 4)], grid=(3, 2), block=96,
                           workgroup_ids="xy", arrays={"out": out, "extra": 0x1000})
    got = arr["out"].reshape(6, 128)
    for y in range(2):
        for x in range(3):
            row = got[y * 3 + x]
            np.testing.assert_array_equal(row[:96], np.arange(96) | (x << 16) | (y << 24) | 0x1000)
            assert (row[96:] == 0xFFFFFFFF).all()                  # lanes past the block: EXEC off
    assert run.waves_per_group == 2 and run.grid == (3, 2, 1)


def test_waves_meet_at_s_barrier_and_a_missing_barrier_is_an_lds_race():
    # wave 1 writes LDS, every wave reads wave 1's words after the barrier
    body = """
        s_load_dwordx2 s[4:5], s[0:1], 0x0
        v_lshrrev_b32_e32 v3, 6, v0
        v_readfirstlane_b32 s6, v3
        v_and_b32_e32 v4, 63, v0
        v_lshlrev_b32_e32 v5, 2, v4
        s_cmp_eq_u32 s6, 1
        s_cbranch_scc0 .LBB0_1
        v_add_u32_e32 v6, 500, v4
        ds_write_b32 v5, v6
    .LBB0_1:
        BARRIER
        ds_read_b32 v7, v5
        v_lshlrev_b32_e32 v8, 2, v0
        s_waitcnt lgkmcnt(0)
        global_store_dword v8, v7, s[4:5]
    """
    run, arr = run_snippet(body.replace("BARRIER", "s_barrier"), args=OUT, block=128, lds=256,
                           arrays={"out": np.zeros(128, U32)})
    np.testing.assert_array_equal(arr["out"], np.tile(np.arange(64) + 500, 2))
    assert not run.findings_of("lds-race")
    run, _ = run_snippet(body.replace("BARRIER", "s_nop 0"), args=OUT, block=128, lds=256,
                         arrays={"out": np.zeros(128, U32)})
    races = run.findings_of("lds-race")
    assert races and "snippet.s:" in races[0].source and "ds_" in races[0].source


def test_out_of_buffer_access_is_a_fault_naming_lane_and_address():
    body = """
        s_load_dwordx2 s[4:5], s[0:1], 0x0
        v_lshlrev_b32_e32 v1, 2, v0
        v_add_u32_e32 v1, 200, v1
        s_waitcnt lgkmcnt(0)
        global_load_dword v2, v1, s[4:5]
    """
    with pytest.raises(MemoryFault, match=r"lane 14 accesses bytes \[256, 260\) outside \[0, 256\)"):
        run_snippet(body, args=OUT, arrays={"out": np.zeros(64, U32)})
    with pytest.raises(MemoryFault, match=r"address 0x0, which is a null pointer \(\+0\), though no pointer"):
        run_snippet("v_mov_b32_e32 v2, 0\nv_mov_b32_e32 v3, 0\nglobal_load_dword v4, v[2:3], off",
                    args=OUT, arrays={"out": np.zeros(64, U32)})
    with pytest.raises(MemoryFault, match=r"address 0x123400000000, which is in no buffer \(kernarg at"):
        run_snippet("v_mov_b32_e32 v2, 0\nv_mov_b32_e32 v3, 0x1234\nglobal_load_dword v4, v[2:3], off",
                    args=OUT, arrays={"out": np.zeros(64, U32)})


def test_launch_errors_are_named():
    k = kernel_from_text("s_nop 0", args=OUT)
    with pytest.raises(LaunchError, match=r"argument\(s\) out not given"):
        run_asm(k, args={})
    with pytest.raises(LaunchError, match="out is a pointer: pass a gfxsim Buffer"):
        run_asm(k, args={"out": np.zeros(4)})
    with pytest.raises(LaunchError, match="has no argument nope"):
        run_asm(k, args={"out": Buffer("out", np.zeros(4)), "nope": 1})
    with pytest.raises(LaunchError, match="1025 work-items"):
        run_asm(k, block=1025, args={"out": Buffer("out", np.zeros(4))})
    bad = kernel_from_text("s_nop 0", extra_descriptor={".amdhsa_system_sgpr_workgroup_info": 1})
    with pytest.raises(LaunchError, match=r"snippet: .amdhsa_system_sgpr_workgroup_info 1 \(workgroup info SGPR\)"):
        run_asm(bad, args={})
    bad = kernel_from_text("s_nop 0", extra_descriptor={".amdhsa_user_sgpr_dispatch_ptr": 1})
    with pytest.raises(LaunchError, match=r"snippet: .amdhsa_user_sgpr_count 2 != the enabled user SGPRs "
                                          r"\(dispatch_ptr \(2\), kernarg_segment_ptr \(2\)\) \+ preload \(0\)"):
        run_asm(bad, args={})
    flush = kernel_from_text("s_nop 0", extra_descriptor={".amdhsa_float_denorm_mode_32": 0})
    with pytest.raises(LaunchError, match="denorm_mode_32 0"):
        run_asm(flush, args={})


def test_running_off_the_end_and_unknown_labels_are_named():
    from gfxsim.asm.state import AsmError
    with pytest.raises(AsmError, match=r"branch target .LBB9_9 is not a label of snippet"):
        run_snippet("s_branch .LBB9_9")


PACK = """
    s_load_dwordx4 s[4:7], s[0:1], 0x0
    v_lshlrev_b32_e32 v1, 2, v0
    v_mov_b32_e32 v2, 0
    s_waitcnt lgkmcnt(0)
    global_load_ubyte v3, v1, s[4:5]
    global_load_ubyte v4, v1, s[4:5] offset:1
    global_load_ubyte v5, v1, s[4:5] offset:2
    global_load_ubyte v6, v1, s[4:5] offset:3
    s_waitcnt vmcnt(0)
    v_lshl_or_b32 v7, v4, 8, v3
    v_lshlrev_b32_e32 v8, 16, v5
    v_lshlrev_b32_e32 v9, 24, v6
    v_or3_b32 v7, v7, v8, v9
    v_perm_b32 v7, v7, v7, SEL
    global_store_dword v1, v7, s[6:7]
"""


def _pack_run(sel):
    from gfxsim import Buffer
    src = Buffer("tokens", np.arange(256, dtype=np.uint8), {"token": np.arange(256)})
    out = Buffer.empty("packed", (256,), np.uint8, tags={"token": np.arange(256)})
    k = kernel_from_text(PACK.replace("SEL", sel), args=[("tokens", "global_buffer", 8), ("packed", "global_buffer", 8)])
    run = run_asm(k, args={"tokens": src, "packed": out})
    return run, out.array


def test_bytes_loaded_one_by_one_keep_their_tokens_through_shifts_ors_and_perm():
    # the identity permutation: every byte lands on its own token's place -> no finding
    run, out = _pack_run("0x3020100")
    np.testing.assert_array_equal(out, np.arange(256, dtype=np.uint8))
    assert not run.findings
    # bytes 0 and 1 swapped: the store puts token 4l+1 where 4l is -> store-mismatch naming the line
    run, out = _pack_run("0x3020001")
    bad = run.findings_of("store-mismatch")
    assert bad and "snippet.s:" in bad[0].source and "token 1 where the element is token 0" in bad[0].message


def test_storing_a_never_written_register_is_an_uninitialized_read():
    run, _ = run_snippet("s_load_dwordx2 s[4:5], s[0:1], 0x0\nv_lshlrev_b32_e32 v1, 2, v0\n"
                         "s_waitcnt lgkmcnt(0)\nglobal_store_dword v1, v9, s[4:5]",
                         args=OUT, arrays={"out": np.zeros(64, U32)})
    f = run.findings_of("uninitialized-read")
    assert f and "v9" in f[0].message and "snippet.s:" in f[0].source


def test_every_instruction_is_an_event_and_numbers_do_not_depend_on_trace():
    """Arithmetic, scalar and branch instructions are trace events too (the stepper shows them with
    their vector sources and destination), and an instruction's number is the same with and
    without the trace: findings name the same instructions either way."""
    from gfxsim import Buffer
    k = kernel_from_text(PACK.replace("SEL", "0x3020101"),          # a swapped byte: one finding
                         args=[("tokens", "global_buffer", 8), ("packed", "global_buffer", 8)])
    runs = {}
    for tr in (False, True):
        src = Buffer("tokens", np.arange(256, dtype=np.uint8), {"token": np.arange(256)})
        out = Buffer.empty("packed", (256,), np.uint8, tags={"token": np.arange(256)})
        runs[tr] = run_asm(k, args={"tokens": src, "packed": out}, trace=tr)
    assert runs[False].trace.n_events == runs[True].trace.n_events
    where = [[(f.kind, f.instruction, f.lane) for f in r.findings] for r in (runs[False], runs[True])]
    assert where[0] == where[1] and where[0]
    events = runs[True].events
    names = [e.op for e in events]
    assert "v_or3_b32" in names and "v_lshlrev_b32_e32" in names and "v_perm_b32" in names
    perm = next(e for e in events if e.op == "v_perm_b32")
    assert [o.name for o in perm.outputs] and [o.name for o in perm.inputs]     # v7 written, v7 read
    assert [e.index for e in events] == list(range(len(events)))     # one event per instruction, in order
