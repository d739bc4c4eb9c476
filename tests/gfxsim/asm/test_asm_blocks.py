"""Blocks (gfxsim/asm/blocks.py): a straight run of ALU and branch instructions executed by one
generated function gives what run._execute gives one instruction at a time — the same buffers,
registers, findings, events, lane count and step-bound error — and is left to _execute where it
could not be exact (a register of the block pending on a load, a trace, the step bound)."""
from __future__ import annotations

import numpy as np
import pytest
from support import need_toolchain
from support.twins import same_either_way

from gfxsim import Buffer
from gfxsim.asm import blocks
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.errors import GfxSimError
from gfxsim.machine.options import LaunchOptions

ARGS = [("x", "global_buffer", 8), ("y", "global_buffer", 8)]
# x in s[4:5], y in s[6:7], v1 = 4 * lane; a loop of VALU/SALU rows, a branch that parts lanes'
# EXEC, then a load read before its wait (a missing-wait) unless WAIT is filled in
LOOP = """
s_load_dwordx4 s[4:7], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
v_lshlrev_b32_e32 v1, 2, v0
global_load_dword v2, v1, s[4:5]
v_cvt_f32_u32_e32 v3, v0
s_mov_b32 s8, 0
.LBB0_1:
v_mul_f32_e32 v3, 0x3f800001, v3
v_add_f32_e32 v3, 0.5, v3
s_add_u32 s8, s8, 1
s_cmp_lt_u32 s8, {trips}
s_cbranch_scc1 .LBB0_1
v_cmp_gt_u32_e32 vcc, 20, v0
s_and_saveexec_b64 s[10:11], vcc
s_cbranch_execz .LBB0_3
v_max_f32_e32 v3, 2.0, v3
.LBB0_3:
s_or_b64 exec, exec, s[10:11]
{wait}
v_add_f32_e32 v3, v2, v3
global_store_dword v1, v3, s[6:7]
"""


def _run(body: str, enabled: bool, **kw):
    blocks.ENABLED = enabled
    try:
        x = Buffer("x", np.arange(64 * kw.get("grid", 1), dtype=np.float32) * 0.25)
        y = Buffer("y", np.zeros(64 * kw.get("grid", 1), np.float32))
        k = kernel_from_text(body, "test_blocks", args=ARGS)
        if "options" not in kw:
            kw.setdefault("trace", False)
        r = run_asm(k, kw.pop("grid", 1), 64, args=dict(x=x, y=y), **kw)
        return y.array.copy(), r
    finally:
        blocks.ENABLED = True


def _same(a, b):
    (ya, ra), (yb, rb) = a, b
    np.testing.assert_array_equal(ya.view(np.uint32), yb.view(np.uint32))
    assert [(f.kind, f.message, f.lane, f.instruction) for f in ra.findings] == \
        [(f.kind, f.message, f.lane, f.instruction) for f in rb.findings]
    assert ra.lane_instructions == rb.lane_instructions and ra.trace.n_events == rb.trace.n_events


@pytest.mark.parametrize("wait", ["", "s_waitcnt vmcnt(0)", "s_waitcnt lgkmcnt(0)"])
@pytest.mark.parametrize("kw", [dict(provenance=False), dict(provenance=True), dict(provenance=False, grid=3, batch=3),
                                dict(provenance=False, trace=True)])
def test_a_block_gives_what_one_instruction_at_a_time_gives(wait, kw):
    body = LOOP.format(trips=5, wait=wait)
    got, want = _run(body, True, **dict(kw)), _run(body, False, **dict(kw))
    _same(got, want)
    assert bool(got[1].findings_of("missing-wait")) == (wait != "s_waitcnt vmcnt(0)")


def _readiness(k) -> list:
    """Run kernel ``k`` (one wave, no provenance) and return every block's (start, ready?) answer,
    in the order the waves asked."""
    seen = []
    real = blocks.Block.ready

    def ready(self, st, w, tr):
        ok = real(self, st, w, tr)
        seen.append((self.start, ok))
        return ok
    blocks.Block.ready = ready
    try:
        run_asm(k, 1, 64, args=dict(x=Buffer("x", np.zeros(64, np.float32)), y=Buffer("y", np.zeros(64, np.float32))),
                provenance=False, trace=False)
    finally:
        blocks.Block.ready = real
    return seen


def test_blocks_are_made_and_run_where_they_are_exact():
    k = kernel_from_text(LOOP.format(trips=5, wait=""), "test_blocks", args=ARGS)
    ran = _readiness(k)
    loop = k.labels[".LBB0_1"]
    assert (loop, True) in ran                       # the loop body: one function, run
    b = k.program.blocks[loop]
    assert b.end - b.start == 5 and k.program.decoded[b.end - 1].mnemonic == "s_cbranch_scc1"
    # the block after the load reads v2 (pending: no wait) and goes one instruction at a time
    assert any(not ok for _, ok in ran)


def test_a_block_past_a_wait_that_leaves_its_registers_pending_stops_there():
    """s_waitcnt lgkmcnt(0) inside a block does not cover the global load v_add reads: the block
    ends at the wait, and the read is reported as one instruction at a time reports it."""
    k = kernel_from_text(LOOP.format(trips=5, wait="s_waitcnt lgkmcnt(0)"), "test_blocks", args=ARGS)
    p = k.program
    run_asm(k, 1, 64, args=dict(x=Buffer("x", np.zeros(64, np.float32)), y=Buffer("y", np.zeros(64, np.float32))),
            provenance=False, trace=False)
    wait = next(i for i, d in enumerate(p.decoded) if d.mnemonic == "s_waitcnt" and i > k.labels[".LBB0_3"])
    b = next(b for b in p.blocks.values() if b is not None and b.start < wait < b.end)
    assert b.end > wait + 1                          # the block spans the wait
    assert wait + 1 in p.blocks                       # and was left there: the rest looked up on its own


def test_the_step_bound_raises_at_the_same_instruction():
    body = LOOP.format(trips=1000, wait="s_waitcnt vmcnt(0)")
    msgs = []
    for enabled in (True, False):
        with pytest.raises(GfxSimError, match="max_steps") as e:
            _run(body, enabled, options=LaunchOptions(provenance=False, trace=False, max_steps=137))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("twin", ["qk_int8", "pv_bf16", "prefix_prefill"])
def test_a_compiled_twin_gives_the_same_outputs_findings_and_events_either_way(twin):
    need_toolchain("gfx942")
    same_either_way(twin, blocks, "ENABLED")


def test_block_code_is_compiled_once_per_content(tmp_path, monkeypatch):
    """A block's code object comes back from memory, then from the disk in a process that has not
    compiled it (here: the memory cleared), and an unreadable disk entry is compiled again."""
    monkeypatch.setenv("GFXSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(blocks, "_codes", {})
    src = "def run(x):\n    return x + 1\n"
    code = blocks.compiled(src, "<block test>")
    assert blocks.compiled(src, "<block test>") is code
    (entry,) = list(tmp_path.rglob("*.code"))
    monkeypatch.setattr(blocks, "_codes", {})
    again = blocks.compiled(src, "<block test>")
    assert again is not code and again == code              # read back from the disk
    entry.write_bytes(b"not marshal")
    monkeypatch.setattr(blocks, "_codes", {})
    env = {}
    exec(blocks.compiled(src, "<block test>"), env)
    assert env["run"](2) == 3
    assert blocks.compiled(src.replace("1", "2"), "<block test>") != code       # another content, another code


PARTED = """
s_load_dwordx4 s[4:7], s[0:1], 0x0
v_lshlrev_b32_e32 v1, 2, v0
v_cvt_f32_u32_e32 v3, v0
s_cmp_eq_u32 s2, 1
s_cbranch_scc1 .LBB0_2
v_mul_f32_e32 v3, 0x3fc00000, v3
v_add_u32_e32 v4, s2, v0
v_cvt_f32_u32_e32 v4, v4
v_add_f32_e32 v3, v4, v3
s_add_u32 s8, s2, 5
v_mov_b32_e32 v5, s8
v_cvt_f32_u32_e32 v5, v5
v_fmac_f32_e32 v3, v5, v4
.LBB0_2:
v_add_f32_e32 v3, 1.0, v3
s_mul_i32 s9, s2, 0x100
v_add_u32_e32 v1, s9, v1
s_waitcnt lgkmcnt(0)
global_store_dword v1, v3, s[6:7]
"""


def test_members_that_part_run_their_blocks_as_one_at_a_time_does():
    """Workgroup 1 of a batch of three branches past the others' block: the two others run it as a
    block while it waits (st.act set), with the same results, events and lane count either way."""
    seen = []
    real = blocks.Block.ready

    def ready(self, st, w, tr):
        ok = real(self, st, w, tr)
        seen.append((ok, st.act is not None))
        return ok
    blocks.Block.ready = ready
    try:
        got = _run(PARTED, True, provenance=False, grid=3, batch=3)
    finally:
        blocks.Block.ready = real
    want = _run(PARTED, False, provenance=False, grid=3, batch=3)
    _same(got, want)
    assert (True, True) in seen
    y = got[0].view(np.uint32).reshape(3, 64)
    assert not (y[0] == y[1]).all() and not (y[0] == y[2]).all()


def _plain(on: bool, fn):
    blocks.PLAIN = on
    try:
        return fn()
    finally:
        blocks.PLAIN = True


@pytest.mark.parametrize("body", [LOOP.format(trips=5, wait=""), PARTED])
def test_blocks_made_for_provenance_without_the_lean_function_give_the_same_run(body):
    """With provenance a wave never takes a block's lean function, so its blocks are made without it
    (blocks.PLAIN), kept apart from the blocks of lean waves: the same outputs, findings, events and
    lane count as blocks made with it; and the plain blocks hold no lean function."""
    got = _plain(True, lambda: _run(body, True, provenance=True, grid=3, batch=3))
    want = _plain(False, lambda: _run(body, True, provenance=True, grid=3, batch=3))
    _same(got, want)
    k = kernel_from_text(body, "test_blocks", args=ARGS)
    run_asm(k, 1, 64, args=dict(x=Buffer("x", np.zeros(64, np.float32)), y=Buffer("y", np.zeros(64, np.float32))),
            provenance=True, trace=False)
    p = k.program
    made = [b for b in blocks.blocks_of(p, False).values() if b is not None]
    assert made and all("run_lean" not in b.run.__globals__ for b in made)


def test_a_compiled_decode_with_provenance_gives_the_same_report_either_way():
    """The compiled decode (both launches, a folded batch, with provenance) through blocks made with
    and without the lean function: the same output bits, findings and --report json (every matrix
    instruction's K-slot token sets per workgroup and wave, the findings' details)."""
    need_toolchain("gfx942")
    from kernels_py.host.runs import run_kernel

    def run():
        kr = run_kernel("paged_attention_decode", context=300, arch="gfx942", grouping="contiguous", frontend="asm")
        rep = kr.report()
        rep.pop("seconds", None)
        return kr, rep
    (a, ra), (b, rb) = _plain(True, run), _plain(False, run)
    np.testing.assert_array_equal(np.asarray(a.out).view(np.uint32), np.asarray(b.out).view(np.uint32))
    assert [(f.kind, f.message, f.lane) for f in a.findings] == [(f.kind, f.message, f.lane) for f in b.findings]
    assert a.findings                              # the contiguous grouping's scale-group findings
    assert ra == rb


def test_block_code_folder_follows_the_cache_variables(tmp_path, monkeypatch):
    """blocks._disk_dir, resolved once per value of the variables cache_root reads, is the folder
    cache_root names now: a changed $GFXSIM_CACHE_DIR, $XDG_CACHE_HOME or $HOME is seen."""
    from gfxsim.cachedir import cache_root
    monkeypatch.delenv("GFXSIM_CACHE_DIR", raising=False)
    for var, value in (("HOME", tmp_path / "h"), ("XDG_CACHE_HOME", tmp_path / "x"),
                       ("GFXSIM_CACHE_DIR", tmp_path / "a"), ("GFXSIM_CACHE_DIR", tmp_path / "b"),
                       ("XDG_CACHE_HOME", tmp_path / "y")):
        monkeypatch.setenv(var, str(value))
        for _ in range(2):                                         # resolved, then remembered
            got = blocks._disk_dir()
            assert got.parent == cache_root() / "asm" / "blocks" and str(got).startswith(str(tmp_path))
    monkeypatch.delenv("GFXSIM_CACHE_DIR")
    assert blocks._disk_dir().parent == tmp_path / "y" / "gfxsim" / "asm" / "blocks"


# one basic block of loads, LDS-free ALU rows and stores: a load's register read before its wait (a
# missing-wait), overwritten before it lands (another), a second load over a pending register (in
# order: fine), a wait that covers only some, and the rest after it
STRAIGHT = """
s_load_dwordx4 s[4:7], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
v_lshlrev_b32_e32 v1, 2, v0
v_xor_b32_e32 v6, 4, v1
v_xor_b32_e32 v7, 8, v1
global_load_dword v2, v1, s[4:5]
v_cvt_f32_u32_e32 v3, v0
global_load_dword v4, v6, s[4:5]
v_add_f32_e32 v3, 1.0, v3
{hazard}
global_load_dword v4, v7, s[4:5]
s_waitcnt vmcnt(1)
v_add_f32_e32 v3, v2, v3
s_waitcnt vmcnt(0)
v_add_f32_e32 v3, v4, v3
global_store_dword v1, v3, s[6:7]
v_mul_f32_e32 v3, 2.0, v3
global_store_dword v6, v3, s[6:7]
"""


def _run_memory(body: str, memory: bool, **kw):
    blocks.MEMORY = memory
    try:
        return _run(body, True, **kw)
    finally:
        blocks.MEMORY = True


@pytest.mark.parametrize("hazard", ["", "v_add_f32_e32 v5, v2, v3", "v_mov_b32_e32 v2, 0", "v_mov_b32_e32 v4, v3",
                                    "global_store_dword v1, v2, s[6:7]", "s_load_dword s4, s[0:1], 0x0"])
@pytest.mark.parametrize("kw", [dict(provenance=False), dict(provenance=True), dict(provenance=False, grid=3, batch=3)])
def test_a_block_runs_its_memory_instructions_as_one_at_a_time_does(hazard, kw):
    """blocks.MEMORY: loads and stores inside a block, through _execute, with the block stopping
    where a register it names becomes pending: the same as blocks ending at each access and as no
    blocks at all (outputs, findings, events, lane count). The hazards: an ALU row reading or
    overwriting a load's register before its wait, a store reading one, a scalar load overwriting
    the SGPRs a global access's address is read from (a later load reads them)."""
    body = STRAIGHT.replace("{hazard}", hazard)
    if hazard.startswith("s_load"):          # the next load's address read as poison: its fault, noted
        msgs = []
        for run in (lambda: _run_memory(body, True, **dict(kw)), lambda: _run_memory(body, False, **dict(kw)),
                    lambda: _run(body, False, **dict(kw))):
            with pytest.raises(GfxSimError, match="after a missing-wait") as e:
                run()
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1] == msgs[2]
        return
    got = _run_memory(body, True, **dict(kw))
    _same(got, _run_memory(body, False, **dict(kw)))
    _same(got, _run(body, False, **dict(kw)))
    assert bool(got[1].findings_of("missing-wait")) == (hazard != "")


def test_with_memory_a_basic_block_is_one_block():
    k = kernel_from_text(STRAIGHT.replace("{hazard}", ""), "test_blocks", args=ARGS)
    run_asm(k, 1, 64, args=dict(x=Buffer("x", np.zeros(64, np.float32)), y=Buffer("y", np.zeros(64, np.float32))),
            provenance=False, trace=False)
    b = k.program.blocks[0]
    assert b is not None and b.end == len(k.program.decoded)         # every instruction, s_endpgm last


@pytest.mark.parametrize("bound", range(124, 135))
def test_the_step_bound_raises_at_the_same_instruction_with_accesses_in_the_block(bound):
    body = LOOP.format(trips=1000, wait="s_waitcnt vmcnt(0)").replace(
        "s_add_u32 s8, s8, 1", "s_add_u32 s8, s8, 1\nglobal_load_dword v6, v1, s[4:5]\n"
                               "s_load_dwordx4 s[12:15], s[0:1], 0x0\ns_waitcnt vmcnt(0) lgkmcnt(0)")
    msgs = []
    for memory in (True, False):       # a scalar load of 4 dwords is 4 events: more than a block counts
        with pytest.raises(GfxSimError, match="max_steps") as e:
            _run_memory(body, memory, options=LaunchOptions(provenance=False, trace=False, max_steps=bound))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("twin", ["qk_int8", "pv_bf16", "prefix_prefill", "paged_attention_decode"])
def test_a_compiled_twin_gives_the_same_either_way_with_accesses_in_blocks(twin):
    need_toolchain("gfx942")
    same_either_way(twin, blocks, "MEMORY")


def test_a_block_not_ready_runs_alone_only_to_its_first_access_or_wait():
    """With accesses in blocks, a block entered with a register pending (the hazard reads v2 before
    its wait) runs one at a time only past its next access or wait; from there blocks are looked up
    and run again, not the rest of the basic block one at a time."""
    k = kernel_from_text(STRAIGHT.replace("{hazard}", "v_add_f32_e32 v5, v2, v3"), "test_blocks", args=ARGS)
    seen = _readiness(k)
    refused = next(i for i, (_, ok) in enumerate(seen) if not ok)
    assert any(ok for _, ok in seen[refused + 1:])
    b = k.program.blocks[seen[refused][0]]
    assert b.alone < b.end
