"""The compiled lane executor (gfxsim/asm/lanevm.py) runs a block's runs of lane rows: on random
operands (with special bit patterns), from every source kind, with float modifiers, a destination
that is a source, fresh matrix marks, under a full and a partial EXEC and for several members of a
batch, it leaves exactly the words, written bits, fresh marks, SGPRs, EXEC, lane count and events
the block's numpy lines leave, and those the semantics functions leave one at a time."""
from __future__ import annotations

import re

import numpy as np
import pytest
from support.asm_sandbox import Sandbox
from support.twins import same_either_way
from test_asm_inline import SCALAR, _by_block, _compare, _one_at_a_time, _sandbox, _state

from gfxsim import isa
from gfxsim.asm import blocks, lanevm
from gfxsim.asm.run import Program, kernel_from_text
from gfxsim.asm.semantics import vop

_FORMS = {"u32": ["v2", "a1", "s4", "7", "0xfffffff0", "v1", "-16", "s106"],
          "i32": ["v1", "s5", "-4", "0x12345", "a1", "v4"],
          "f32": ["v1", "-v2", "|a1|", "s4", "0.5", "-|v4|"]}


def _lines(name, types) -> list[str]:
    base = ["v1", "v2", "v3"][:len(types)]
    out = [f"{name} v3, {', '.join(base)}", f"{name} v1, {', '.join(base)}", f"{name} a3, {', '.join(base)}"]
    for n in range(len(_FORMS["u32"])):
        k = n % len(types)
        forms = _FORMS[types[k]]
        out.append(f"{name} v3, {', '.join(forms[n % len(forms)] if j == k else b for j, b in enumerate(base))}")
    return out


INT_ROWS = [line for n in lanevm.LANE_OPS for line in _lines(n, vop.VALU[n][0])]
F32_ROWS = [line for n in lanevm.F32_OPS if n in vop.VALU for line in _lines(n, vop.VALU[n][0])]
F32_ROWS += ["v_fmac_f32 v3, v1, v2", "v_fmac_f32 v3, -v1, |s4|", "v_fmac_f32 v3, 0.5, v2", "v_mac_f32 v3, v1, v2",
             "v_fmac_f32 v9, v1, v2", "v_fmac_f32 a3, a1, v2", "v_mac_f32 v1, -|v4|, v1", "v_fmac_f32 v4, v4, v4"]
OTHERS = ["v_mov_b32 v3, s4", "v_mov_b32 v3, 0x1234", "v_mov_b32 a3, -1", "v_mov_b32 v3, 0.5", "v_mov_b32 v3, vcc_lo",
          "v_mov_b32 v3, v1", "v_mov_b32 v1, v1", "v_mov_b32 v3, v9", "v_mov_b32 a3, a1",
          "v_accvgpr_read_b32 v3, a1", "v_accvgpr_write_b32 a3, v1", "v_accvgpr_write_b32 a3, s4",
          "v_accvgpr_mov_b32 a2, a1", "v_accvgpr_write_b32 a2, 7",
          "v_cndmask_b32 v3, v1, v2, vcc", "v_cndmask_b32 v3, v1, -v2, s[4:5]", "v_cndmask_b32 v3, 0, 1.0, s[4:5]",
          "v_cndmask_b32 a3, |v1|, s4, s[4:5]", "v_cndmask_b32 v3, v9, s5, vcc", "v_cndmask_b32 v1, v1, v2, s[12:13]",
          "v_lshl_add_u64 v[4:5], v[1:2], 2, s[4:5]", "v_lshl_add_u64 v[4:5], v[1:2], 0, v[2:3]",
          "v_lshl_add_u64 v[4:5], s[4:5], 4, 16", "v_lshl_add_u64 v[1:2], v[1:2], 3, v[2:3]",
          "v_lshl_add_u64 v[4:5], v[2:3], 1, v[9:10]", "v_lshl_add_u64 v[2:3], vcc, 4, v[1:2]",
          "v_lshl_add_u64 v[4:5], v[1:2], 2, -1", "v_lshl_add_u64 v[4:5], -16, 1, v[2:3]",
          # packed fp32: each half from the halves op_sel/op_sel_hi pick, signs from neg_lo/neg_hi
          "v_pk_add_f32 v[3:4], v[1:2], v[2:3]", "v_pk_mul_f32 v[3:4], v[1:2], s[4:5] op_sel_hi:[1,0]",
          "v_pk_fma_f32 v[3:4], v[1:2], v[2:3], v[3:4] neg_lo:[1,0,0] neg_hi:[0,1,1]",
          "v_pk_add_f32 v[3:4], v[1:2], 0 op_sel:[1,0] op_sel_hi:[0,1]", "v_pk_mul_f32 v[3:4], v[2:3], 1.0 op_sel_hi:[1,0]",
          "v_pk_mul_f32 a[2:3], v[1:2], v[1:2] op_sel:[1,1]", "v_pk_add_f32 v[3:4], v[1:2], v[9:10]",
          "v_pk_fma_f32 v[1:2], v[2:3], a[1:2], v[1:2] op_sel:[0,1,1] op_sel_hi:[1,0,1]",
          "v_pk_add_f32 v[3:4], vcc, -2.0 op_sel_hi:[1,0]", "v_pk_add_f32 v[3:4], s[12:13], v[1:2] neg_lo:[0,1]"]
SDWA = ["v_cvt_f32_i32_sdwa v3, sext(v1) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_0",
        "v_cvt_f32_i32_sdwa v3, sext(v2) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_3",
        "v_cvt_f32_i32_sdwa v1, v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1",
        "v_cvt_i32_f32_sdwa v3, v1 dst_sel:BYTE_1 dst_unused:UNUSED_PAD src0_sel:DWORD",
        "v_cvt_i32_f32_sdwa v3, -v2 dst_sel:WORD_1 dst_unused:UNUSED_SEXT src0_sel:DWORD",
        "v_cvt_i32_f32_sdwa v3, v1 dst_sel:BYTE_2 dst_unused:UNUSED_PRESERVE src0_sel:DWORD",
        "v_or_b32_sdwa v3, v1, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_0 src1_sel:WORD_1",
        "v_or_b32_sdwa v3, sext(v1), v2 dst_sel:WORD_0 dst_unused:UNUSED_SEXT src0_sel:BYTE_1 src1_sel:DWORD",
        "v_or_b32_sdwa v3, v1, sext(v2) dst_sel:BYTE_3 dst_unused:UNUSED_PRESERVE src0_sel:DWORD src1_sel:BYTE_2",
        "v_add_u32_sdwa v3, v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:WORD_0 src1_sel:BYTE_3",
        "v_mul_f32_sdwa v3, v1, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD",
        "v_ashrrev_i32_sdwa v1, v2, sext(v1) dst_sel:WORD_0 dst_unused:UNUSED_SEXT src0_sel:BYTE_0 src1_sel:WORD_1",
        "v_cvt_f32_i32_sdwa v3, s4 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD"]
COMPARES = [f"v_cmp_{r}_{t} {d}, {x}" for t, rels in (("f32", isa.compare.FLOAT), ("i32", isa.compare.INTEGER),
                                                     ("u32", isa.compare.INTEGER))
            for r in rels
            for d, x in (("vcc", "v1, v2"), ("s[20:21]", "s4, v2" if t != "f32" else "-|v1|, s4"),
                         ("vcc", "0.5, v1" if t == "f32" else "-4, a1"))]


def _lanes_of(lines) -> int:
    """How many of the lines a block gives the executor."""
    p = Program(kernel_from_text("\n".join(lines)))
    inline = {pc: x for pc in range(len(p.decoded)) if (x := blocks._inline_of(p, pc)) is not None}
    return sum(last - pc for pc, (_, last) in blocks._lane_runs(p, 0, len(p.decoded), inline).items())


def _numpy_lines(sb, lines):
    blocks.LANES = False
    try:
        return _by_block(sb, lines)[0]
    finally:
        blocks.LANES = True


@pytest.mark.parametrize("line", INT_ROWS + F32_ROWS + OTHERS + COMPARES + SDWA + SCALAR)
def test_a_lane_row_leaves_what_the_numpy_lines_and_the_semantics_function_leave(line):
    assert _lanes_of([line]) == 1, f"{line} did not go to the executor"
    for seed in range(6):
        full = seed % 3 == 0
        got = _by_block(_sandbox(seed, full), [line])[0]
        _compare(got, _numpy_lines(_sandbox(seed, full), [line]), f"{line}, seed {seed}")
        _compare(got, _one_at_a_time(_sandbox(seed, full), [line]), f"{line}, seed {seed}")


EXEC_WRITES = [f"{name} {dst}, {src}" for name in lanevm.SAVEEXEC_OPS
               for dst, src in (("s[20:21]", "vcc"), ("s[4:5]", "s[4:5]"), ("s[12:13]", "exec"), ("s[20:21]", "-1"))]
EXEC_WRITES += ["s_or_b64 exec, exec, s[12:13]", "s_andn2_b64 exec, exec, vcc", "s_and_b64 exec, s[4:5], -1",
                "s_xor_b64 exec, exec, s[6:7]", "s_nor_b64 exec, vcc, 5", "s_cselect_b64 exec, s[12:13], exec"]


@pytest.mark.parametrize("line", EXEC_WRITES)
def test_a_row_writing_exec_leaves_what_its_step_leaves_and_the_rows_after_it_run_on_the_new_exec(line):
    """A saveexec or a SOP2 row into EXEC (no template: the block's fallback is its step) inside a
    run: EXEC, the saved pair, SCC and the lanes of the rows after it as the steps leave them."""
    lines = ["v_add_u32 v3, v1, v2", line, "v_add_u32 v4, v3, v1", "s_add_u32 s6, s6, exec_lo", "v_mov_b32 v1, s6"]
    assert _lanes_of(lines) == len(lines)
    for seed in range(6):
        full = seed % 3 == 0
        got = _by_block(_sandbox(seed, full), lines)[0]
        _compare(got, _numpy_lines(_sandbox(seed, full), lines), f"{line}, seed {seed}")
        _compare(got, _one_at_a_time(_sandbox(seed, full), lines), f"{line}, seed {seed}")


def test_every_lane_op_is_an_isa_row_of_the_vector_alu():
    """The executor's opcodes name rows of the one semantics table, in the types it reads; its fp32
    rows are lanef32's functions."""
    from gfxsim.asm.lanef32 import LANE_F32
    for name in lanevm.LANE_OPS:
        types = vop.VALU[name][0]
        assert all(t in ("u32", "i32") for t in types), name
    for name in lanevm.F32_OPS:
        assert name in LANE_F32 and (name in vop.VALU or LANE_F32[name].order == ("S0", "S1", "D")), name


def test_a_run_of_rows_between_exec_writes_reads_exec_as_the_step_before_it_left_it():
    """Rows go to the executor in runs cut by compares, scalar rows and EXEC writes; the run after an
    EXEC write runs on the lanes it left."""
    lines = ["v_add_u32 v3, v1, v2", "v_bfe_u32 v4, v3, 3, 9", "v_cmpx_lt_u32 vcc, v3, v1", "v_mov_b32 v2, v3",
             "v_lshl_or_b32 v1, v2, 4, s5", "s_and_saveexec_b64 s[10:11], vcc", "v_cvt_f32_i32 v2, v1",
             "s_add_u32 s4, s4, 3", "v_add_u32 v3, s4, v3", "s_or_b64 exec, exec, s[10:11]",
             "v_cndmask_b32 v1, v1, v2, vcc", "v_accvgpr_write_b32 a3, v1", "v_mad_u32_u24 v4, v1, s4, v3",
             "v_cmp_gt_u32 vcc, v4, v2", "v_cndmask_b32 v2, v4, v1, vcc", "v_pk_add_f32 v[5:6], v[1:2], v[3:4]",
             "s_add_u32 s6, s4, exec_lo", "s_addc_u32 s7, s5, 0", "v_add_u32 v3, s6, v3", "s_and_b64 s[12:13], vcc, exec"]
    assert _lanes_of(lines) == 19
    for seed in range(4):
        got = _by_block(_sandbox(seed, seed % 2 == 0), lines)[0]
        _compare(got, _numpy_lines(_sandbox(seed, seed % 2 == 0), lines), f"seed {seed}")
        _compare(got, _one_at_a_time(_sandbox(seed, seed % 2 == 0), lines), f"seed {seed}")


def test_members_of_a_batch_read_their_own_sgprs_in_the_executor():
    """Three workgroups side by side, each its own workgroup id in s2: vector rows read each
    member's SGPRs over its lanes, scalar rows and compares write each member's."""
    from support.asm_sandbox import run_snippet
    from test_asm_inline import BATCH
    more = ["s_lshl_b32 s3, s2, 4", "s_add_u32 s3, s3, 5", "s_mul_i32 s6, s3, s2", "v_cmp_gt_u32 vcc, s3, v0",
            "v_cndmask_b32 v7, v3, v4, vcc", "v_add_u32 v4, s6, v7", "s_cselect_b32 s7, s3, s6", "v_add_u32 v4, s7, v4"]
    lines = BATCH.strip().splitlines()
    assert _lanes_of(more) == len(more)
    snippet = "\n".join(lines[:-2] + more + lines[-2:]) + "\n"
    out = {}
    for on in (True, False):
        blocks.LANES = on
        try:
            run, arrays = run_snippet(snippet, args=[("out", "global_buffer", 8)], grid=3, batch=3,
                                      arrays={"out": np.zeros(64 * 3 * 256, np.uint32)}, provenance=False, trace=False)
        finally:
            blocks.LANES = True
        out[on] = (arrays["out"].copy(), run.lane_instructions, run.trace.n_events,
                   [(f.kind, f.message) for f in run.findings])
    np.testing.assert_array_equal(out[True][0], out[False][0])
    assert out[True][1:] == out[False][1:]
    assert out[True][0].any()


@pytest.mark.parametrize("twin", ["qk_int8", "pv_int8", "pv_bf16", "prefix_prefill", "paged_attention_decode"])
def test_a_compiled_twin_gives_the_same_outputs_findings_and_events_with_or_without_the_executor(twin):
    from support import need_toolchain
    need_toolchain("gfx942")
    same_either_way(twin, blocks, "LANES")


def test_a_second_asm_process_compiles_nothing_and_the_first_says_it_compiles(tmp_path):
    """The executor and lanef32 are numba functions cached on disk as the others are: the first
    provenance-off asm run of an install compiles them (and says so), a second process loads them."""
    import json
    import os
    import subprocess
    import sys

    from support import ROOT
    from support import need_toolchain
    need_toolchain("gfx942")
    code = ("import json, sys; from gfxsim.cli import main; from gfxsim.machine import jit; "
            "rc = main(sys.argv[1:]); print(json.dumps(dict(rc=rc, compiles=jit.compiles())), file=sys.stderr)")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    argv = ["run", "qk_int8", "--frontend", "asm", "--no-provenance", "--context", "256", "--report", "json"]
    got = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        got.append((json.loads(r.stderr.strip().splitlines()[-1]), r.stderr))
    (first, err1), (second, err2) = got
    assert "gfxsim.asm.lanevm.run_rows" in first["compiles"] and "compiling the simulator's numba functions" in err1
    assert second == {"rc": 0, "compiles": []} and "compiling" not in err2


# rows with no template: the executor runs them from their step's or function's operands
# (lanevm.encode_step); their reference is the function one at a time and the step in the block
DIVISION = ["v_div_scale_f32 v3, vcc, v1, v2, v1", "v_div_scale_f32 v3, s[20:21], v2, v2, v1",
            "v_div_scale_f32 a3, vcc, -v1, |s4|, 0.5", "v_div_scale_f32 v1, s[12:13], v1, a1, -|v4|",
            "v_div_fmas_f32 v3, v1, v2, v3", "v_div_fmas_f32 v3, -v1, s4, |v2|", "v_div_fmas_f32 a3, 0.5, v4, a1",
            "v_div_fixup_f32 v3, v1, v2, v4", "v_div_fixup_f32 v1, 0.5, -v2, s4", "v_div_fixup_f32 v3, |a1|, v3, v1"]
PERMUTES = ["v_perm_b32 v3, v1, v2, s4", "v_perm_b32 v3, v1, v2, 0x5040100", "v_perm_b32 v3, v2, v1, 0xb0a0908",
            "v_perm_b32 v3, v1, v2, 0xc0d0c0d", "v_perm_b32 v3, v1, v2, v4", "v_perm_b32 a3, a1, s5, 0x7060302",
            "v_perm_b32 v1, v1, v1, s6", "v_perm_b32 v3, v9, v1, s4", "v_perm_b32 v3, v2, v9, 0x3020504",
            "v_perm_b32 v3, 7, v2, s12"]
MOVES64 = ["v_mov_b64 v[4:5], v[1:2]", "v_mov_b64 v[2:3], v[1:2]", "v_mov_b64 v[1:2], v[2:3]",
           "v_mov_b64 a[2:3], v[1:2]", "v_mov_b64 v[4:5], s[4:5]", "v_mov_b64 v[4:5], 0", "v_mov_b64 v[4:5], -1",
           "v_mov_b64 v[4:5], 0x1234", "v_mov_b64 v[4:5], vcc", "v_mov_b64 v[4:5], v[9:10]",
           "v_mov_b64 v[2:3], v[2:3]"]
CARRIES = [f"{m} {d}, {c}, {a}, {b}" for m in ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32")
           for d, c, a, b in (("v3", "vcc", "v1", "v2"), ("v1", "s[20:21]", "s4", "v1"), ("a3", "vcc", "-1", "a1"),
                              ("v3", "s[12:13]", "v2", "0x80000000"))]
CARRIES += [f"{m} {d}, {c}, {a}, {b}, {i}" for m in ("v_addc_co_u32", "v_subb_co_u32", "v_subbrev_co_u32")
            for d, c, a, b, i in (("v3", "vcc", "v1", "v2", "vcc"), ("v1", "s[20:21]", "s4", "v1", "s[12:13]"),
                                  ("v3", "vcc", "v2", "0", "s[4:5]"), ("a3", "s[12:13]", "-1", "a1", "vcc"))]
CARRIES += ["v_sub_co_u32_e32 v3, vcc, v1, v2", "v_subb_co_u32_e32 v4, vcc, v2, v3, vcc",
            "v_add_co_u32_e64 v3, s[20:21], v1, v2", "v_addc_co_u32_e64 v4, s[20:21], v2, v3, s[20:21]"]
WIDE = ["v_mad_u64_u32 v[4:5], vcc, v1, v2, v[3:4]", "v_mad_u64_u32 v[4:5], s[20:21], s4, v2, 0",
        "v_mad_u64_u32 v[2:3], vcc, v1, v2, v[2:3]", "v_mad_u64_u32 v[4:5], s[12:13], -1, v2, s[4:5]",
        "v_mad_i64_i32 v[4:5], vcc, v1, v2, v[3:4]", "v_mad_i64_i32 v[4:5], s[20:21], s4, -5, -1",
        "v_mad_i64_i32 v[1:2], vcc, v1, v2, v[1:2]", "v_mad_i64_i32 a[2:3], vcc, v3, a1, s[6:7]",
        "v_lshlrev_b64 v[4:5], 2, v[1:2]", "v_lshlrev_b64 v[1:2], 33, v[1:2]", "v_lshrrev_b64 v[4:5], 7, v[2:3]",
        "v_lshrrev_b64 v[4:5], 63, s[4:5]", "v_ashrrev_i64 v[4:5], 3, v[1:2]", "v_ashrrev_i64 v[2:3], 40, v[2:3]",
        "v_lshlrev_b64 a[2:3], 0, v[3:4]", "v_ashrrev_i64 v[4:5], 1, -1",
        "v_readfirstlane_b32 s20, v1", "v_readfirstlane_b32 s4, v4", "v_readfirstlane_b32 s20, a1",
        "v_readfirstlane_b32 s20, s6", "v_readfirstlane_b32 vcc_lo, v2", "v_readfirstlane_b32 s20, 0x1234",
        "v_mbcnt_lo_u32_b32 v3, -1, 0", "v_mbcnt_hi_u32_b32 v3, -1, v3", "v_mbcnt_lo_u32_b32 v3, v1, v2",
        "v_mbcnt_hi_u32_b32 v1, s4, v1", "v_mbcnt_lo_u32_b32 a3, s12, 7", "v_mbcnt_hi_u32_b32 v3, v2, s5"]
SCALAR_STEPS = ["s_nop 0", "s_nop 7", "s_mov_b32 s20, s4", "s_mov_b32 s20, 0x87654321", "s_mov_b32 s20, exec_lo",
                "s_mov_b32 s20, exec_hi", "s_mov_b32 s20, scc", "s_mov_b32 s5, -3", "s_mov_b32 vcc_lo, s6",
                "s_mov_b32 s4, s4", "s_mov_b64 s[20:21], s[4:5]", "s_mov_b64 s[20:21], exec", "s_mov_b64 exec, s[12:13]",
                "s_mov_b64 vcc, -1", "s_mov_b64 s[4:5], s[6:7]", "s_mov_b64 exec, 0",
                "s_movk_i32 s20, 0x8000", "s_movk_i32 s20, 0x1234", "s_movk_i32 s20, -5",
                "s_addk_i32 s4, 0x7fff", "s_addk_i32 s6, -32768", "s_addk_i32 s20, 1", "s_addk_i32 s12, 0xffff"]
SCALAR_STEPS += ["s_abs_i32 s20, s4", "s_abs_i32 s20, 0x80000000", "s_abs_i32 s6, s6", "s_abs_i32 s20, -7",
                 "s_abs_i32 s20, 0", "s_abs_i32 s20, exec_hi"]
SCALAR_STEPS += [f"s_cmp_{r}_{t} {a}, {b}" for r in ("eq", "lg", "gt", "ge", "lt", "le") for t in ("i32", "u32")
                 for a, b in (("s4", "s5"), ("s6", "0x80000000"), ("exec_lo", "s12"), ("-1", "s7"))]
SCALAR_STEPS += [f"s_cmpk_{r}_{t} {a}, {b}" for r in ("eq", "lg", "gt", "ge", "lt", "le") for t in ("i32", "u32")
                 for a, b in (("s4", "0x8001"), ("s6", "5"), ("s13", "-2"))]


def _quiet_division(sb: Sandbox, seed: int) -> Sandbox:
    """Operands a division meets (normal numbers, VCC clear), so no lane is one the steps refuse."""
    rng = np.random.default_rng(100 + seed)
    for r in (1, 2, 3, 4):
        sb.v[r] = rng.uniform(-1e3, 1e3, 64).astype(np.float32).view(np.uint32)
    sb.set_sgpr(106, 0, 0)
    return sb


def _outcome(run, sb, lines):
    """``run``'s state after the lines, or where it raised, the state it left and the error."""
    try:
        got = run(sb, lines)
        return (got[0] if isinstance(got, tuple) else got), None
    except Exception as e:                         # noqa: BLE001  the error compared
        return _state(sb, -1), (type(e).__name__, str(e), getattr(e, "lane", None))


def _same_outcomes(lines, make, what):
    got = _outcome(_by_block, make(), lines)
    for k, ref in enumerate((_outcome(lambda s, ln: _numpy_lines(s, ln), make(), lines),
                             _outcome(_one_at_a_time, make(), lines))):
        if k == 1 and got[1] is not None and ref[1] is not None:
            # one at a time, each line is a kernel of its own: its line and instruction numbers differ
            strip = [(e[0], re.sub(r"line \d+: |, instruction \d+", "", e[1]), e[2]) for e in (got[1], ref[1])]
            assert strip[0] == strip[1], f"{what}: {got[1]} != {ref[1]}"
        else:
            assert got[1] == ref[1], f"{what}: {got[1]} != {ref[1]}"
        want = dict(ref[0])
        if k == 1 and any(ln.startswith("v_perm") for ln in lines):
            # one at a time unmuted, v_perm_b32's value path (lean off) adds the back end's event: the
            # events are the block's steps' (the first reference)
            del want["events"], want["steps"]
        if got[1] is not None:                     # raised: the lane counts are not compared
            got[0]["counted"] = want["counted"] = -1
        _compare(got[0], want, what)
    return got[1]


@pytest.mark.parametrize("line", DIVISION + PERMUTES + MOVES64 + CARRIES + WIDE + SCALAR_STEPS)
def test_a_row_without_a_template_leaves_what_its_step_and_its_semantics_function_leave(line):
    """The division helpers (special operands, VCC set, where the steps refuse a lane and where they
    do not), v_perm_b32 (uniform and per-lane selectors, a source never written: the back end's
    path and its finding), v_mov_b64 (overlapping pairs, SGPR pairs, constants), the carries (in
    and out, VCC and SGPR pairs), v_mad_u64_u32/v_mad_i64_i32, the 64-bit shifts,
    v_readfirstlane_b32, v_mbcnt, s_nop and the SOP1/SOPK/SOPC moves and compares, under a full
    and a partial EXEC."""
    assert _lanes_of([line]) == 1, f"{line} did not go to the executor"
    from gfxsim.asm.lanevm import refuses
    p = Program(kernel_from_text(line))
    errors = []
    for seed in range(8):
        full = seed % 3 == 0
        quiet = seed % 2 == 1 and line.startswith("v_div")
        errors.append(_same_outcomes([line], lambda: _quiet_division(_sandbox(seed, full), seed) if quiet else
                                     _sandbox(seed, full), f"{line}, seed {seed}"))
    row = blocks._lane_runs(p, 0, 1, {})[0][0][0]
    if refuses(row) and line.startswith("v_div"):
        assert any(errors) and not all(errors), f"{line}: {errors}"


DIVIDE = ["v_div_scale_f32 v5, s[20:21], v2, v2, v1", "v_div_scale_f32 v6, vcc, v1, v2, v1", "v_rcp_f32 v7, v5",
          "s_nop 1", "v_fma_f32 v8, -v5, v7, 1.0", "v_fmac_f32 v7, v8, v7", "v_mul_f32 v8, v6, v7",
          "v_fma_f32 v9, -v5, v8, v6", "v_fmac_f32 v8, v9, v7", "v_fma_f32 v5, -v5, v8, v6",
          "v_div_fmas_f32 v5, v5, v7, v8", "s_mov_b32 s5, 0x3f800000", "v_div_fixup_f32 v1, v5, v2, v1",
          "v_perm_b32 v2, v1, v9, s4", "s_cmp_lt_u32 s4, s5", "v_mov_b64 v[3:4], v[1:2]", "s_cselect_b32 s6, s4, s5"]


def test_a_division_runs_as_one_run_and_a_lane_it_refuses_raises_as_the_step_raises():
    """clang's division sequence: one run of rows; where VCC leaves a lane div_fmas refuses (the
    scale of a wide quotient), the executor stops before that row, the step raises there, and the
    state, events and error are the steps'."""
    assert _lanes_of(DIVIDE) == len(DIVIDE)
    errors = []
    for seed in range(8):
        full = seed % 2 == 0
        quiet = seed % 4 < 2
        errors.append(_same_outcomes(DIVIDE, lambda: _quiet_division(_sandbox(seed, full), seed) if quiet else
                                     _sandbox(seed, full), f"seed {seed}"))
    assert any(errors) and not all(errors), errors


def test_members_of_a_batch_run_the_rows_without_a_template_on_their_own_sgprs():
    """Three workgroups side by side: division, permute, scalar moves and compares of each member's
    SGPRs give what the steps give."""
    from support.asm_sandbox import run_snippet
    from test_asm_inline import BATCH
    more = ["s_lshl_b32 s3, s2, 4", "s_movk_i32 s6, 0x7", "s_addk_i32 s3, 0x5", "s_mov_b32 s7, s3",
            "s_cmp_gt_u32 s3, 20", "s_cselect_b32 s6, s3, s6", "v_cvt_f32_u32 v7, v0", "v_cvt_f32_u32 v8, s3",
            "v_div_scale_f32 v9, s[8:9], v8, v8, v7", "v_div_scale_f32 v10, vcc, v7, v8, v7", "v_rcp_f32 v11, v9",
            "v_fma_f32 v12, -v9, v11, 1.0", "v_fmac_f32 v11, v12, v11", "v_mul_f32 v12, v10, v11",
            "v_fma_f32 v13, -v9, v12, v10", "v_fmac_f32 v12, v13, v11", "v_fma_f32 v9, -v9, v12, v10",
            "v_div_fmas_f32 v9, v9, v11, v12", "v_div_fixup_f32 v3, v9, v8, v7", "v_perm_b32 v4, v4, v3, s6",
            "s_mov_b64 s[10:11], exec", "v_mov_b64 v[14:15], v[3:4]", "v_add_u32 v4, v14, v15",
            "v_mbcnt_lo_u32_b32 v16, -1, 0", "v_mbcnt_hi_u32_b32 v16, -1, v16", "v_readfirstlane_b32 s12, v4",
            "v_mad_u64_u32 v[17:18], s[14:15], v16, s12, v[14:15]", "v_sub_co_u32 v19, vcc, v17, s3",
            "v_subb_co_u32 v20, vcc, v18, 0, vcc", "v_lshrrev_b64 v[17:18], 3, v[17:18]", "s_abs_i32 s13, s12",
            "v_xor_b32 v4, v19, v4", "v_add3_u32 v4, v4, v20, v17"]
    lines = BATCH.strip().splitlines()
    assert _lanes_of(more) == len(more)
    snippet = "\n".join(lines[:-2] + more + lines[-2:]) + "\n"
    out = {}
    for on in (True, False):
        blocks.LANES = on
        try:
            run, arrays = run_snippet(snippet, args=[("out", "global_buffer", 8)], grid=3, batch=3, vgprs=32,
                                      arrays={"out": np.zeros(64 * 3 * 256, np.uint32)}, provenance=False, trace=False)
        finally:
            blocks.LANES = True
        out[on] = (arrays["out"].copy(), run.lane_instructions, run.trace.n_events,
                   [(f.kind, f.message) for f in run.findings])
    np.testing.assert_array_equal(out[True][0], out[False][0])
    assert out[True][1:] == out[False][1:]
    assert out[True][0].any()
