"""Without provenance or a trace, LDS and global loads and stores move whole-dword data as dwords
(semantics.moved_as) instead of bytes, and global loads and stores of whole dwords move words
straight between registers and memory (translate.LEAN: Wave.global_load_words/global_store_words):
the same registers, written bits, memory, findings and faults, under a partial EXEC, from registers
never written, and for whole compiled twins."""
from __future__ import annotations

import numpy as np
import pytest
from support import need_toolchain
from support.asm_sandbox import Sandbox, run_snippet
from support.twins import same_either_way

from gfxsim import Buffer
from gfxsim.asm import semantics, translate

LDS_LINES = ["ds_read_b32 v3, v1", "ds_read_b64 v[3:4], v2 offset:8", "ds_read_b128 v[3:6], v2",
             "ds_read2_b32 v[3:4], v1 offset0:1 offset1:9", "ds_read2_b64 v[3:6], v2 offset1:3",
             "ds_read2st64_b32 v[3:4], v1 offset1:1", "ds_read_b32 v1, v1",
             "ds_write_b32 v1, v7", "ds_write_b64 v2, v[7:8] offset:16", "ds_write_b128 v2, v[7:10]",
             "ds_write2_b32 v1, v7, v8 offset0:2 offset1:5", "ds_write2_b64 v2, v[7:8], v[9:10] offset1:2",
             "ds_write_b32 v1, v12", "ds_write_b8 v1, v7", "ds_write_b16 v1, v8 offset:2", "ds_write_b16_d16_hi v1, v7",
             "ds_write_b8_d16_hi v1, v8 offset:3", "ds_write_b16_d16_hi v1, v12",
             "ds_write_b32 v1, v7\n  ds_read_b64 v[3:4], v2", "ds_write_b8 v1, v7\n  ds_read_b32 v3, v1",
             "ds_bpermute_b32 v3, v1, v2", "ds_bpermute_b32 v3, v1, v2 offset:4", "ds_bpermute_b32 v3, v1, v12",
             "ds_bpermute_b32 v1, v1, v2 offset:8", "ds_bpermute_b32 v2, v1, v2"]


def _sandbox(seed: int) -> Sandbox:
    rng = np.random.default_rng(seed)
    sb = Sandbox(lds=4096)
    sb.v[1] = (rng.integers(0, 64, 64) * 4).astype(np.uint32)           # dword addresses, some shared
    sb.v[2] = (rng.permutation(64) * 16).astype(np.uint32)               # 16-byte aligned
    for r in (3, 4, 5, 6, 7, 8, 9, 10):
        sb.v[r] = rng.integers(0, 2**32, 64)
    lds = sb.wg.lds
    half = rng.random(lds.raw["lds"].size) < (1.0 if seed == 0 else 0.5)     # LDS bytes written before
    lds.raw["lds"][half] = rng.integers(0, 256, int(half.sum())).astype(np.uint8)
    lds.written_one["lds"][half] = True
    sb.st.fresh["v"][2] = rng.random(64) < 0.5           # held matrix results move with a bpermute
    sb.set_exec(rng.random(64) < 0.7)
    return sb


def _state(sb: Sandbox) -> dict:
    st, lds = sb.st, sb.wg.lds
    written = lds.written_one.get("lds")
    return dict(v=st.v.words.copy(), vw=st.v.written.copy(), fv=st.fresh["v"].copy(), lds=lds.raw["lds"].copy(),
                lw=(written if written is not None else lds.member_written("lds")).copy(),
                findings=[(f.kind, f.message, f.lane) for f in sb.m.findings])


@pytest.mark.parametrize("line", LDS_LINES)
@pytest.mark.parametrize("lean", [False, True], ids=["dwords", "lean"])
def test_an_lds_access_leaves_what_the_byte_moves_leave(line, lean):
    """dwords: data moved as dwords or as bytes; lean: an LDS access's (or a bpermute's) words
    straight between the registers and the LDS (Wave.lds_load_words, lds_store_words) or through
    the back end's values."""
    for seed in range(3):
        got = {}
        for on in (True, False):
            sb = _sandbox(seed)
            sb.st.lean = on if lean else False
            semantics.DWORD_MOVES = on or lean
            try:
                got[on] = _state(sb.run(*line.split("\n  ")))
            finally:
                semantics.DWORD_MOVES = True
        for k in got[False]:
            if k == "findings":
                assert got[True][k] == got[False][k], line
            else:
                np.testing.assert_array_equal(got[True][k], got[False][k], err_msg=f"{line}: {k}")


@pytest.mark.parametrize("line", [x for x in LDS_LINES if x.startswith("ds_bpermute")])
def test_a_bpermute_step_leaves_what_its_function_leaves(line):
    """ds_bpermute_b32's prepared step (its operand forms checked once, translate.py) against its
    semantics function, lean and not, under a partial EXEC and from a register never written."""
    for seed in range(3):
        for lean in (True, False):
            got = {}
            for translated in (True, False):
                sb = _sandbox(seed)
                sb.st.lean = lean
                got[translated] = _state(sb.run(line, translated=translated))
            assert got[True]["findings"] == got[False]["findings"], line
            for k in ("v", "vw", "fv"):
                np.testing.assert_array_equal(got[True][k], got[False][k], err_msg=f"{line}: {k}")
    assert semantics.OPS["ds_bpermute_b32"].prepare(_decoded(line)) is not None


def _decoded(line: str):
    from gfxsim.asm.run import Program, kernel_from_text
    return Program(kernel_from_text(line)).decoded[0]


GLOBAL = ("s_load_dwordx2 s[4:5], s[0:1], 0x0\n  v_lshlrev_b32_e32 v1, 4, v0\n  s_waitcnt lgkmcnt(0)\n"
          "  v_cmp_gt_u32_e32 vcc, 50, v0\n  s_and_saveexec_b64 s[12:13], vcc\n"
          "  global_load_dwordx4 v[2:5], v1, s[4:5]\n  global_load_dword v6, v1, s[4:5] offset:1024\n"
          "  global_load_dwordx2 v[8:9], v1, s[4:5] offset:2048\n  s_waitcnt vmcnt(0)\n"
          "  global_store_dwordx4 v1, v[2:5], s[4:5] offset:3072\n  global_store_dword v1, v6, s[4:5] offset:2064\n"
          "  global_store_dwordx2 v1, v[8:9], s[4:5] offset:1040\n  global_store_dword v1, v11, s[4:5] offset:3080\n"
          "  global_store_short v1, v6, s[4:5] offset:3088\n  s_mov_b64 exec, s[12:13]")


def _global(body, data, switch, on):
    module, name = switch
    setattr(module, name, on)
    out = Buffer("out", data.copy(), written=False)         # the first 3 KiB written, but one word
    out.written[:3072] = True
    out.written[1024 + 16 * 7:1024 + 16 * 7 + 4] = False          # lane 7's global_load_dword
    try:
        run, arrays = run_snippet(body, args=[("out", "global_buffer", 8)], arrays={"out": out},
                                  provenance=False, trace=False, vgprs=16)
    except Exception as e:                      # noqa: BLE001 - compared below
        return type(e).__name__, str(e)
    finally:
        setattr(module, name, True)
    return (arrays["out"].copy().tolist(), out.written.tolist(), [(f.kind, f.message) for f in run.findings],
            run.trace.n_events)


FAULT = GLOBAL.replace("offset:2048", "offset:4000")        # lanes past the buffer's end


@pytest.mark.parametrize("switch", [(semantics, "DWORD_MOVES"), (translate, "LEAN")], ids=["dwords", "lean"])
@pytest.mark.parametrize("body", [GLOBAL, FAULT], ids=["global", "fault"])
def test_global_accesses_leave_what_the_byte_moves_leave(switch, body):
    """Loads of partly written bytes, stores of a never-written register, a partial EXEC, a fault;
    without the switch (translate.LEAN: words straight between registers and memory) as with it."""
    data = np.random.default_rng(0).integers(0, 2**32, 1024).astype(np.uint32)
    got = _global(body, data, switch, True)
    assert got == _global(body, data, switch, False)
    if body is GLOBAL:                 # a load of the unwritten word, a store of a register never written
        found = [m for k, m in got[2] if k == "uninitialized-read"]
        assert found[0] == "global_load from 'out' reads never-written bytes" and any("v11" in m for m in found)
    else:
        assert got[0] == "MemoryFault"


@pytest.mark.parametrize("twin", ["pv_int8", "paged_attention_decode", "prefix_prefill"])
@pytest.mark.parametrize("switch", [(semantics, "DWORD_MOVES"), (translate, "LEAN")], ids=["dwords", "lean"])
def test_a_compiled_twin_gives_the_same_outputs_and_findings_either_way(twin, switch):
    need_toolchain("gfx942")
    same_either_way(twin, *switch)


def _compiled_switch(name):
    import importlib
    return importlib.import_module(name), "COMPILED_BPERMUTE" if name.endswith("semantics.ds") else "COMPILED_WORDS"


@pytest.mark.parametrize("twin", ["int8_kv_cache", "prefix_prefill", "qk_int8"])
@pytest.mark.parametrize("switch", ["gfxsim.machine.vmem", "gfxsim.machine.ds", "gfxsim.asm.semantics.ds"])
def test_a_compiled_twin_gives_the_same_with_the_compiled_memory_passes(twin, switch):
    """member_words/ds_words/bpermute's compiled passes against their numpy paths: a batch of
    one-wave workgroups, one wave alone (the prefill's waves part at once), waves side by side."""
    need_toolchain("gfx942")
    same_either_way(twin, *_compiled_switch(switch))


RACING = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v2, 2, v0
  v_add_u32_e32 v1, 7, v0
  {write}
  s_waitcnt lgkmcnt(0)
  v_xor_b32_e32 v3, 64, v0
  v_lshlrev_b32_e32 v3, 2, v3
  ds_read_b32 v4, v3
  s_waitcnt lgkmcnt(0)
  global_store_dword v2, v4, s[4:5]
"""


@pytest.mark.parametrize("write", ["ds_write_b32 v2, v1", "ds_write_b8 v2, v1", "ds_write2_b32 v2, v1, v1 offset1:1"])
def test_waves_one_after_another_find_the_same_races_either_way(monkeypatch, write):
    """Two waves run serially with the race check: each reads the words the other writes (no
    barrier), so the words path meets the LDS race state's hits and never-written bytes as the
    value path does."""
    import importlib

    from gfxsim.asm.run import kernel_from_text, run_asm
    from gfxsim.machine.options import LaunchOptions
    monkeypatch.setattr(importlib.import_module("gfxsim.machine.launch"), "WAVES_AS_MEMBERS", False)
    kernel = kernel_from_text(RACING.format(write=write), "racing", args=[("out", "global_buffer", 8)], lds=4096)
    got = {}
    for lean in (True, False):
        monkeypatch.setattr(translate, "LEAN", lean)
        out = Buffer.empty("out", (128,), np.uint32)
        run = run_asm(kernel, grid=(1,), block=128, args={"out": out},
                      options=LaunchOptions(trace=False, provenance=False, check_races=True))
        got[lean] = (out.raw.tolist(), [(f.kind, f.message, f.wave, f.lane) for f in run.findings], run.trace.n_events)
    assert got[True] == got[False]
    assert {"lds-race", "uninitialized-read"} <= {k for k, *_ in got[True][1]}
