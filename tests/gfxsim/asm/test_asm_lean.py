"""Without provenance, register moves, v_perm_b32 and the VALU table's rows write the register
file directly (WaveState.lean, translate.LEAN) instead of through back-end values: the same words,
written bits, fresh marks and findings as the value path, under a partial EXEC, from sources never
written, and for whole compiled twins."""
from __future__ import annotations

import numpy as np
import pytest
from support import need_toolchain
from support.twins import same_either_way
from support.asm_sandbox import Sandbox, run_snippet

from gfxsim.asm import translate

LINES = ["v_mov_b32_e32 v3, v1", "v_mov_b32_e32 v3, v9", "v_mov_b32_e32 v3, s4", "v_mov_b32_e32 v3, 0x1234",
         "v_mov_b64 v[3:4], v[1:2]", "v_mov_b64 v[2:3], v[1:2]", "v_mov_b64 v[3:4], v[9:10]",
         "v_accvgpr_write_b32 a2, v1", "v_accvgpr_read_b32 v3, a1", "v_accvgpr_mov_b32 a2, a1",
         "v_accvgpr_read_b32 v3, a5",
         "v_perm_b32 v3, v1, v2, s4", "v_perm_b32 v3, v1, v2, 0x5040100", "v_perm_b32 v3, v9, v2, 0x5040100",
         "v_perm_b32 v1, v1, v2, v2",
         "v_add_u32_e32 v3, v1, v2", "v_add_u32_e32 v3, v9, v2", "v_mul_f32_e32 v3, 0x40490fdb, v1",
         "v_fma_f32 v3, -v1, |v2|, 0.5", "v_cvt_f32_i32_e32 v3, v1", "v_cvt_f32_i32_e32 v3, a1",
         "v_add_u32_e64 v3, v1, v2 clamp", "v_xor_b32_e32 a3, 7, v2",
         "v_fmac_f32_e32 v3, v1, v2", "v_fmac_f32_e64 v3, -v1, |s4|", "v_fmac_f32_e32 v3, 0.5, v2",
         "v_mac_f32_e32 v3, v1, v2", "v_fmac_f32_e32 v9, v1, v2",
         # packed fp32: both halves at once
         "v_pk_add_f32 v[4:5], v[1:2], v[2:3]", "v_pk_mul_f32 v[4:5], v[1:2], s[4:5] op_sel_hi:[1,0]",
         "v_pk_fma_f32 v[4:5], v[1:2], v[2:3], v[4:5] neg_lo:[1,0,0] neg_hi:[0,1,1]",
         "v_pk_add_f32 v[4:5], v[1:2], 0 op_sel:[1,0] op_sel_hi:[0,1]", "v_pk_mul_f32 v[4:5], v[2:3], 1.0 op_sel_hi:[1,0]",
         "v_pk_mul_f32 a[2:3], v[1:2], v[1:2] op_sel:[1,1]", "v_pk_add_f32 v[4:5], v[1:2], v[9:10]",
         # 64-bit shifts and adds with a constant shift
         "v_lshl_add_u64 v[4:5], v[1:2], 2, s[4:5]", "v_lshl_add_u64 v[4:5], v[1:2], 0, v[2:3]",
         "v_lshl_add_u64 v[4:5], s[4:5], 4, 16", "v_lshl_add_u64 v[1:2], v[1:2], 3, v[2:3]",
         "v_lshl_add_u64 v[4:5], v[2:3], 1, v[9:10]", "v_lshlrev_b64 v[4:5], 3, v[1:2]",
         "v_lshrrev_b64 v[4:5], 33, v[2:3]", "v_ashrrev_i64 v[4:5], 7, v[1:2]", "v_ashrrev_i64 v[2:3], 63, v[2:3]",
         # selects by VCC or an SGPR pair
         "v_cndmask_b32_e32 v3, v1, v2, vcc", "v_cndmask_b32_e64 v3, v1, -v2, s[4:5]",
         "v_cndmask_b32_e64 v3, 0, 1.0, s[4:5]", "v_cndmask_b32_e64 a3, |v1|, s4, s[4:5]",
         "v_cndmask_b32_e32 v3, v9, v2, vcc", "v_cndmask_b32_e64 v1, v1, v2, exec",
         # the division helpers (and test_a_division_helpers_error_is_the_same_either_way)
         "v_div_scale_f32 v3, vcc, v1, v2, v1", "v_div_scale_f32 v3, s[10:11], v2, v2, 1.0",
         "v_div_fixup_f32 v3, v1, 2.0, 1.0"]


def _sandbox(seed: int, lean: bool) -> Sandbox:
    rng = np.random.default_rng(seed)
    sb = Sandbox()
    sb.v[1] = rng.integers(0, 2**32, 64)
    sb.v[2] = rng.integers(0, 2**32, 64)
    sb.v[3] = 0xDEADBEEF
    sb.st.vwrite("a", 1, rng.integers(0, 2**32, 64).astype(np.uint32)[None, :])
    sb.set_sgpr(4, *(int(x) for x in rng.integers(0, 2**32, 2)))
    sb.set_sgpr(106, *(int(x) for x in rng.integers(0, 2**32, 2)))         # VCC
    sb.st.fresh["v"][1] = rng.random(64) < 0.5          # held matrix results (dequant.py), in some lanes
    sb.st.fresh["a"][1] = rng.random(64) < 0.5
    sb.set_exec(rng.random(64) < 0.7)                   # the others keep their old words and bits
    sb.st.lean = lean
    return sb


def _state(sb: Sandbox) -> dict:
    st = sb.st
    return dict(v=st.v.words.copy(), vw=st.v.written.copy(), a=st.a.words.copy(), aw=st.a.written.copy(),
                fv=st.fresh["v"].copy(), fa=st.fresh["a"].copy(),
                findings=[(f.kind, f.message, f.lane) for f in sb.m.findings])


@pytest.mark.parametrize("line", LINES)
def test_the_lean_write_leaves_what_the_value_path_leaves(line):
    for seed in range(3):
        got, want = (_state(_sandbox(seed, lean).run(line)) for lean in (True, False))
        for k in want:
            if k == "findings":
                assert got[k] == want[k]
            else:
                np.testing.assert_array_equal(got[k], want[k], err_msg=f"{line}: {k}")


def test_a_never_written_source_still_reports_where_its_bytes_are_consumed():
    """A move copies the written bits, so a store of the copy is an uninitialized read either way."""
    body = ("s_load_dwordx2 s[4:5], s[0:1], 0x0\nv_lshlrev_b32_e32 v1, 2, v0\nv_mov_b32_e32 v2, v9\n"
            "v_perm_b32 v3, v2, v2, 0x5040100\ns_waitcnt lgkmcnt(0)\nglobal_store_dword v1, v3, s[4:5]")
    found = {}
    for lean in (True, False):
        translate.LEAN = lean
        try:
            run, _ = run_snippet(body, args=[("out", "global_buffer", 8)], arrays={"out": np.zeros(64, np.uint32)},
                                 provenance=False)
        finally:
            translate.LEAN = True
        found[lean] = [(f.kind, f.message) for f in run.findings]
    assert found[True] == found[False] and any(k == "uninitialized-read" for k, _ in found[True])


@pytest.mark.parametrize("twin", ["pv_bf16", "qk_int8"])
def test_a_compiled_twin_gives_the_same_outputs_and_findings_either_way(twin):
    need_toolchain("gfx942")
    same_either_way(twin, translate, "LEAN")


def test_split_of_lanes_on_one_buffer_is_the_general_split():
    """AddressSpace.split answers lanes that all address one buffer without its general pass:
    the same buffer, offsets and lanes; a fault, or lanes over two buffers, take the general path."""
    from gfxsim import Buffer
    from gfxsim.asm.launch import BASE, SPAN, AddressSpace, MemoryFault
    space = AddressSpace([Buffer(n, np.zeros(256, np.uint8)) for n in ("a", "b", "c")])
    sb = Sandbox()
    rng = np.random.default_rng(0)

    def general(addr, active):                      # split with its one-buffer answer switched off
        space._one_buffer = lambda *a: None
        try:
            return space.split(sb.st, addr, active, 4)
        finally:
            del space._one_buffer

    cases = []
    for k in range(3):
        for ks in ([1], [0, 2], [2]):
            addr = np.uint64(BASE + ks[0] * SPAN) + rng.integers(0, 252, 64).astype(np.uint64)
            if len(ks) > 1:
                addr[::3] = np.uint64(BASE + ks[1] * SPAN) + rng.integers(0, 252, 22).astype(np.uint64)
            cases.append((addr, rng.random(64) < 0.7))
    cases.append((cases[0][0], np.zeros(64, bool)))
    fast_hits = 0
    for addr, active in cases:
        got, want = space.split(sb.st, addr, active, 4), general(addr, active)
        fast_hits += space._one_buffer(addr, active) is not None
        assert [b.name for b, _, _ in got] == [b.name for b, _, _ in want]
        for (_, o1, l1), (_, o2, l2) in zip(got, want):
            np.testing.assert_array_equal(o1, o2)
            np.testing.assert_array_equal(l1, l2)
    assert fast_hits == 6
    bad = np.full(64, BASE + 3 * SPAN, np.uint64)          # past the last buffer: the general path's fault
    for addr in (bad, np.full(64, 8, np.uint64)):
        with pytest.raises(MemoryFault):
            space.split(sb.st, addr, np.ones(64, bool), 4)


@pytest.mark.parametrize("line", ["v_mfma_i32_16x16x32_i8 v[4:7], v[0:1], v[2:3], 0",
                                  "v_mfma_f32_16x16x16_bf16 a[0:3], v[0:1], v[2:3], a[4:7]"])
def test_a_matrix_result_is_written_as_the_value_path_writes_it(line):
    """(A matrix instruction needs the whole wave: EXEC is full.)"""
    for seed in range(2):
        sbs = []
        for lean in (True, False):
            rng = np.random.default_rng(seed)
            sb = Sandbox()
            half = (np.float32(rng.standard_normal((4, 2, 64))).view(np.uint32) >> 16)   # finite bf16 pairs
            for r in range(4):
                sb.v[r] = half[r, 0] | (half[r, 1] << 16)
            for r in range(4, 8):
                sb.st.vwrite("a", r, np.float32(rng.standard_normal(64)).view(np.uint32)[None, :])
            sb.st.lean = lean
            sbs.append(_state(sb.run(line)))
        for k in sbs[1]:
            if k == "findings":
                assert sbs[0][k] == sbs[1][k]
            else:
                np.testing.assert_array_equal(sbs[0][k], sbs[1][k], err_msg=f"{line}: {k}")


@pytest.mark.parametrize("other_lanes", [False, True])
def test_v_perm_of_registers_written_in_the_active_lanes_only(other_lanes):
    """A source written in the active lanes (not all) takes the lean write as the value path would:
    no read of a never-written byte; with EXEC widened to lanes where it is not written, both report it."""
    out = {}
    for lean in (True, False):
        sb = _sandbox(0, lean)
        ex = sb.st.exec.copy()
        sb.st.vwrite("v", 5, np.arange(64, dtype=np.uint32)[None, :] * 0x01010101)     # under the partial EXEC
        if other_lanes:
            sb.set_exec(np.ones(64, bool))
        assert sb.st.vall_written("v", 5) != other_lanes and not ex.all()
        out[lean] = _state(sb.run("v_perm_b32 v3, v5, v2, 0x5040100"))
    for k in out[False]:
        if k == "findings":
            assert out[True][k] == out[False][k] and bool(out[True][k]) == other_lanes
        else:
            np.testing.assert_array_equal(out[True][k], out[False][k], err_msg=k)


@pytest.mark.parametrize("line", ["v_div_fixup_f32 v3, v1, v2, v1", "v_div_fmas_f32 v3, v1, v2, v1",
                                  "v_div_fmas_f32 v3, v1, 1.0, v2", "v_div_fixup_f32 v3, v2, v1, v1"])
@pytest.mark.parametrize("vcc", [False, True])
def test_a_division_helpers_result_or_error_is_the_same_either_way(line, vcc):
    """Random words meet the cases the functions refuse (VCC set under v_div_fmas, a quotient
    underflow under v_div_fixup): the same error, or the same registers, either way."""
    from gfxsim.asm.state import AsmError
    for seed in range(4):
        out = {}
        for lean in (True, False):
            sb = _sandbox(seed, lean)
            if not vcc:
                sb.set_sgpr(106, 0, 0)
                sb.v[1] = np.float32(np.random.default_rng(seed).uniform(0.5, 4, 64)).view(np.uint32)
            try:
                out[lean] = _state(sb.run(line))
            except AsmError as e:
                out[lean] = str(e)
        if isinstance(out[False], str):
            assert out[True] == out[False]
            continue
        for k in out[False]:
            if k == "findings":
                assert out[True][k] == out[False][k]
            else:
                np.testing.assert_array_equal(out[True][k], out[False][k], err_msg=f"{line}: {k}")
