"""The matrix unit's operand plans outlive a launch (plans.launch_cache): a later launch on the same
arch profile finds them, unless a mnemonic's record is no longer the profile's or they hold more
than KEEP_BYTES; and a launch that finds them gives the bits, records, findings and events of one
that makes them afresh."""
import dataclasses

import numpy as np
import pytest

import gfxsim.machine.plans as plans
from gfxsim.arch import get_arch
from gfxsim.machine.launch import Machine


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(plans, "_SHARED", {})


def test_a_later_launch_on_the_profile_finds_the_plans(fresh):
    arch = get_arch("gfx942")
    insn = arch.instruction("v_mfma_i32_16x16x32_i8")
    m = Machine(arch, "k", trace=False, provenance=False)
    e, l = plans.batched_plan(m.plan_cache, insn, "A", 4, 64)
    again = Machine(arch, "k", trace=False, provenance=False).plan_cache
    assert again is m.plan_cache and plans.batched_plan(again, insn, "A", 4, 64)[0] is e
    assert Machine(get_arch("gfx936"), "k", trace=False, provenance=False).plan_cache is not again


def test_a_profile_giving_another_record_starts_afresh(fresh, monkeypatch):
    arch = get_arch("gfx942")
    name = "v_mfma_i32_16x16x32_i8"
    insn = arch.instruction(name)
    first = Machine(arch, "k", trace=False, provenance=False).plan_cache
    plans.batched_plan(first, insn, "A", 4, 64)
    monkeypatch.setitem(arch.instructions, name, dataclasses.replace(insn))     # equal, but another record
    assert Machine(arch, "k", trace=False, provenance=False).plan_cache is not first


def test_plans_over_keep_bytes_are_not_kept(fresh, monkeypatch):
    arch = get_arch("gfx942")
    first = Machine(arch, "k", trace=False, provenance=False).plan_cache
    plans.batched_plan(first, arch.instruction("v_mfma_i32_16x16x32_i8"), "A", 4, 64)
    monkeypatch.setattr(plans, "KEEP_BYTES", 1)
    assert Machine(arch, "k", trace=False, provenance=False).plan_cache is not first


def _launch(twin):
    """The twin's first launch at a unit-test shape (bench.tinygrad_side's), returning (output, Run)."""
    from kernels_py.host.buffers import make_cache
    from kernels_py.host.hip_twins import asm_kernel_fn
    from kernels_py.host.twins import query_rows, run_pv, run_qk_int8, softmax_rows
    from kernels_py.workloads.data import make_attention_inputs
    d = make_attention_inputs(seed=0, num_heads=1, head_dim=128, context_lens=[256], num_queries=16)
    cache = make_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True, seed=0)
    fn, kw = asm_kernel_fn(twin), dict(arch="gfx942", trace=False, provenance=False)
    rows = query_rows(d["q"], 1)
    if twin == "qk_int8":
        return lambda: run_qk_int8(rows, cache, kernel=fn, **kw)
    p = softmax_rows(rows, cache)
    return lambda: run_pv(fn, p, cache, **kw)


@pytest.mark.parametrize("twin", ["qk_int8", "pv_bf16"])
def test_a_launch_that_finds_the_plans_gives_what_fresh_plans_give(fresh, monkeypatch, twin):
    from support import need_toolchain
    need_toolchain("gfx942")
    run = _launch(twin)

    def everything():
        out, r = run()
        recs = [(x.first, x.op, x.label, x.wave, x.live, x.source, x.exec_mask.tobytes())
                for x in r.machine.mma_log.records]
        return np.asarray(out).tobytes(), recs, [(f.kind, f.lane, f.message) for f in r.findings], \
            r.trace.n_events, r.lane_instructions

    made = everything()
    kept = everything()                                   # the first launch's plans
    monkeypatch.setattr(plans, "KEEP_BYTES", -1)          # every launch makes its own
    again = everything()
    assert made == kept == again and made[1]
