"""A block's lean function (blocks.py) writes the work of VALU rows, fmac, cndmask and moves from
constants or SGPRs into its own source (semantics.Inline) instead of calling their steps: on
random operands — NaNs, infinities, denormals, signed zeros —, from VGPRs, AGPRs, SGPRs, SCC,
literals and inline constants, with float modifiers, a destination that is a source, fresh
matrix marks, under a full and a partial EXEC, it leaves the words, written bits, fresh marks,
SGPRs, EXEC, lane count and events the semantics functions leave one instruction at a time."""
from __future__ import annotations

import numpy as np
import pytest
from support.asm_sandbox import Sandbox
from support.twins import same_either_way

from gfxsim import isa
from gfxsim.asm import blocks, waitcnt
from gfxsim.asm.run import Program, kernel_from_text
from gfxsim.asm.semantics import sop, vop

SPECIAL = np.array([0x7FC00000, 0x7F800001, 0xFFC00001, 0x7F800000, 0xFF800000, 0x00000001, 0x807FFFFF, 0x80000000,
                    0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x3F800000, 0x00FFFFFF, 0xFF000000], np.uint32)
_FORMS = {"f32": ["v1", "-v2", "|a1|", "s4", "0.5", "0x3f800001", "v9"], "i32": ["v1", "s5", "-4", "0x12345", "a1"],
          "u32": ["v2", "a1", "s4", "7", "0xfffffff0", "v1"]}


def _lines(name: str, types) -> list[str]:
    """The row with each source in each form in turn (the others VGPRs), and its destination a source."""
    base = ["v1", "v2", "v3"][:len(types)]
    out = [f"{name} v3, {', '.join(base)}", f"{name} v1, {', '.join(base)}", f"{name} a3, {', '.join(base)}"]
    for n, form in enumerate(_FORMS[types[0]]):        # each form once, in each source position in turn
        k = n % len(types)
        form = form if types[k] == types[0] else _FORMS[types[k]][n % len(_FORMS[types[k]])]
        out.append(f"{name} v3, {', '.join(form if j == k else b for j, b in enumerate(base))}")
    return out


ROWS = [line for n, (t, _) in sorted(vop.VALU.items()) for line in _lines(n, t)]
OTHERS = ["v_fmac_f32 v3, v1, v2", "v_fmac_f32 v3, -v1, |s4|", "v_fmac_f32 v3, 0.5, v2", "v_mac_f32 v3, v1, v2",
          "v_fmac_f32 v9, v1, v2", "v_fmac_f32 a3, a1, v2",
          "v_cndmask_b32 v3, v1, v2, vcc", "v_cndmask_b32 v3, v1, -v2, s[4:5]", "v_cndmask_b32 v3, 0, 1.0, s[4:5]",
          "v_cndmask_b32 a3, |v1|, s4, s[4:5]", "v_cndmask_b32 v1, v1, v2, exec", "v_cndmask_b32 v3, v9, s5, vcc",
          "v_mov_b32 v3, s4", "v_mov_b32 v3, 0x1234", "v_mov_b32 a3, -1", "v_mov_b32 v3, 0.5", "v_mov_b32 v1, scc",
          "v_mov_b32 v3, vcc_lo", "v_mov_b32 v3, exec_hi",
          # register copies (their written bits and fresh marks with them)
          "v_mov_b32 v3, v1", "v_mov_b32 v1, v1", "v_mov_b32 v3, v9", "v_mov_b32 a3, a1",
          "v_accvgpr_read_b32 v3, a1", "v_accvgpr_write_b32 a3, v1", "v_accvgpr_write_b32 a3, s4",
          "v_accvgpr_mov_b32 a2, a1", "v_accvgpr_write_b32 a2, 7",
          # 64-bit: a constant shift and an add
          "v_lshl_add_u64 v[4:5], v[1:2], 2, s[4:5]", "v_lshl_add_u64 v[4:5], v[1:2], 0, v[2:3]",
          "v_lshl_add_u64 v[4:5], s[4:5], 4, 16", "v_lshl_add_u64 v[1:2], v[1:2], 3, v[2:3]",
          "v_lshl_add_u64 v[4:5], v[2:3], 1, v[9:10]", "v_lshl_add_u64 v[2:3], vcc, 4, v[1:2]",
          "v_lshl_add_u64 v[4:5], v[1:2], 1, exec",
          # packed fp32: both halves at once
          "v_pk_add_f32 v[3:4], v[1:2], v[2:3]", "v_pk_mul_f32 v[3:4], v[1:2], s[4:5] op_sel_hi:[1,0]",
          "v_pk_fma_f32 v[3:4], v[1:2], v[2:3], v[3:4] neg_lo:[1,0,0] neg_hi:[0,1,1]",
          "v_pk_add_f32 v[3:4], v[1:2], 0 op_sel:[1,0] op_sel_hi:[0,1]", "v_pk_mul_f32 v[3:4], v[2:3], 1.0 op_sel_hi:[1,0]",
          "v_pk_mul_f32 a[2:3], v[1:2], v[1:2] op_sel:[1,1]", "v_pk_add_f32 v[3:4], v[1:2], v[9:10]",
          "v_pk_fma_f32 v[1:2], v[2:3], a[1:2], v[1:2] op_sel:[0,1,1] op_sel_hi:[1,0,1]",
          "v_pk_mul_f32 v[3:4], exec, v[1:2]", "v_pk_add_f32 v[3:4], vcc, -2.0 op_sel_hi:[1,0]"]


def _scalar_lines(name: str, width: int, wb: int) -> list[str]:
    r = {32: ["s4", "s5", "7", "-3", "0x87654321", "scc", "vcc_hi", "exec_lo", "s13"],
         64: ["s[4:5]", "s[6:7]", "-1", "5", "vcc", "exec", "s[12:13]"]}
    d = "s20" if width == 32 else "s[20:21]"          # never written before: its written bit is the write's
    a, b = r[width][:2] if width == wb else (r[width][0], r[wb][0])
    out = [f"{name} {d}, {a}, {b}", f"{name} {r[width][0]}, {a}, {b}"]          # the destination a source
    out += [f"{name} {d}, {x}, {b}" for x in r[width][1::2]] + [f"{name} {d}, {a}, {x}" for x in r[wb][2::2]]
    return out


def _cmp_lines(e) -> list[str]:
    t = e.srcs[0]
    if t in ("u64", "i64"):
        srcs = ["v[1:2], v[3:4]", "s[4:5], v[2:3]", "-1, v[1:2]", "v[1:2], vcc"]
    elif t in ("f32", "i32", "u32"):
        srcs = ["v1, v2", "s4, v2", "0.5, v1" if t == "f32" else "-4, v1", "v2, a1"]
    else:
        return []
    return [f"{e.mnemonic} {d}, {x}" for d, x in zip(["vcc", "s[20:21]", "vcc", "s[12:13]"], srcs)]


COMPARES = [line for e in isa.asm_entries("cmp") for line in _cmp_lines(e)]
SCALAR = [line for n, (w, _) in sorted(sop.SOP2.items())
          for line in _scalar_lines(n, w, 32 if n in ("s_lshl_b64", "s_lshr_b64", "s_ashr_i64") else w)]


def _sandbox(seed: int, full: bool) -> Sandbox:
    rng = np.random.default_rng(seed)
    sb = Sandbox()

    def words():
        w = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
        pick = rng.random(64) < 0.3
        w[pick] = rng.choice(SPECIAL, int(pick.sum()))
        return w
    for r in (1, 2, 3, 4):
        sb.v[r] = words()
    sb.st.vwrite("a", 1, words()[None, :])
    sb.set_sgpr(4, *(int(x) for x in rng.choice(SPECIAL, 2)))
    sb.set_sgpr(6, *(int(x) for x in rng.integers(0, 2**32, 2)))
    sb.set_sgpr(12, *(int(x) for x in rng.integers(0, 2**32, 2)))
    sb.set_sgpr(106, *(int(x) for x in rng.integers(0, 2**32, 2)))         # VCC
    sb.st.scc[:] = seed % 2
    sb.st.fresh["v"][1] = rng.random(64) < 0.5          # held matrix results (dequant.py), in some lanes
    sb.st.fresh["a"][1] = rng.random(64) < 0.5
    sb.set_exec(np.ones(64, bool) if full else rng.random(64) < 0.7)
    sb.st.lean = True
    return sb


def _state(sb: Sandbox, counted: int) -> dict:
    st = sb.st
    return dict(v=st.v.words.copy(), vw=st.v.written.copy(), a=st.a.words.copy(), aw=st.a.written.copy(),
                fv=st.fresh["v"].copy(), fa=st.fresh["a"].copy(), s=st.s.copy(), sw=st.s_written.copy(), scc=st.scc.copy(),
                exec=st.exec.copy(), counted=counted, events=sb.m.trace.n_events, steps=sb.w.steps,
                findings=[(f.kind, f.message, f.lane) for f in sb.m.findings])


def _by_block(sb: Sandbox, lines) -> tuple[dict, int]:
    """The lines run as one block of the lean function; returns the state and how many of them were
    written into it."""
    k = kernel_from_text("\n".join(lines))
    p = Program(k)
    st = sb.st
    st.kernel, st.pc, st.counters = k, 0, waitcnt.Counters(st, p.waits)
    b = blocks.block_at(p, 0)
    assert b is not None and b.end == len(p.decoded)            # the lines and s_endpgm
    inlined = sum(blocks._inline_of(p, pc) is not None for pc in range(b.start, b.end))
    counted = [0]
    assert b.ready(st, sb.w, sb.m.trace)
    b.run(st, sb.w, sb.m.trace, counted)
    return _state(sb, counted[0]), inlined


def _one_at_a_time(sb: Sandbox, lines) -> dict:
    """The semantics functions (no prepared step, no block) on the value path, as the exact reference;
    the lane count and events as run._execute makes them."""
    sb.st.lean = False
    counted = 0
    for line in [*lines, "s_endpgm"]:
        counted += int(sb.st.exec.sum())
        sb.run(line, translated=False)
        sb.w.event(line.split()[0])
    return _state(sb, counted)


def _compare(got, want, what):
    for key in want:
        if isinstance(want[key], np.ndarray):
            np.testing.assert_array_equal(got[key], want[key], err_msg=f"{what}: {key}")
        else:
            assert got[key] == want[key], f"{what}: {key}"


@pytest.mark.parametrize("line", ROWS + OTHERS + SCALAR + COMPARES)
def test_a_lean_template_leaves_what_its_semantics_function_leaves(line):
    for seed, full in ((0, True), (1, False)):          # EXEC all ones, then partial
        got, inlined = _by_block(_sandbox(seed, full), [line])
        assert inlined == 1, f"{line} was not written into the block"
        _compare(got, _one_at_a_time(_sandbox(seed, full), [line]), line)


def test_a_block_of_many_templates_and_steps_is_the_instructions_in_turn():
    """Templates between steps that write EXEC, SGPRs and SCC: each template reads EXEC as the step
    before it left it."""
    lines = ["v_mul_f32 v3, v1, v2", "v_cmpx_lt_f32 vcc, v3, v1", "v_cmp_gt_u32 vcc, v2, v1", "s_and_saveexec_b64 s[10:11], vcc",
             "v_add_f32 v1, v3, -v2", "v_cvt_f32_i32 v2, v1", "s_add_u32 s4, s4, 3", "v_add_u32 v3, s4, v3",
             "s_or_b64 exec, exec, s[10:11]", "v_cndmask_b32 v1, v1, v2, vcc", "v_mov_b32 a3, s4",
             "s_cmp_lt_u32 s4, 5", "v_mov_b32 v2, scc", "v_fmac_f32 v3, v1, v2"]
    for seed in range(4):
        got, inlined = _by_block(_sandbox(seed, seed % 2 == 0), lines)
        assert inlined == 11
        _compare(got, _one_at_a_time(_sandbox(seed, seed % 2 == 0), lines), f"seed {seed}")


BATCH = """
s_load_dwordx2 s[4:5], s[0:1], 0x0
v_lshlrev_b32_e32 v1, 2, v0
v_cvt_f32_u32_e32 v3, v0
v_add_u32_e32 v4, s2, v0
v_mul_f32_e32 v3, s2, v3
v_mov_b32_e32 v5, s2
v_cmp_gt_u32_e32 vcc, 20, v0
v_cndmask_b32_e64 v3, v3, v5, vcc
v_mad_u32_u24 v4, v4, s2, v3
s_waitcnt lgkmcnt(0)
v_mul_u32_u24_e32 v6, 0x100, v4
v_add_u32_e32 v1, v6, v1
global_store_dword v1, v3, s[4:5]
"""


def test_members_of_a_batch_read_their_own_sgprs_in_a_lean_block():
    """Three workgroups side by side, each an SGPR of its own (the workgroup id): the lean block
    gives each member's lanes what the steps give."""
    from support.asm_sandbox import run_snippet
    out = {}
    for on in (True, False):
        blocks.INLINE = on
        try:
            run, arrays = run_snippet(BATCH, args=[("out", "global_buffer", 8)], grid=3, batch=3,
                                      arrays={"out": np.zeros(64 * 3 * 256, np.uint32)}, provenance=False, trace=False)
        finally:
            blocks.INLINE = True
        out[on] = (arrays["out"].copy(), run.lane_instructions, run.trace.n_events,
                   [(f.kind, f.message) for f in run.findings])
    np.testing.assert_array_equal(out[True][0], out[False][0])
    assert out[True][1:] == out[False][1:]
    assert out[True][0].any()


@pytest.mark.parametrize("twin", ["qk_int8", "paged_attention_decode"])
def test_a_compiled_twin_gives_the_same_outputs_findings_and_events_with_templates_or_steps(twin):
    from support import need_toolchain
    need_toolchain("gfx942")
    same_either_way(twin, blocks, "INLINE")
