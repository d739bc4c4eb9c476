"""The compiled HIP twins on the asm front end against their Python twins:
same inputs through the same harness, outputs compared exactly
where both round the same operations in the same order, matrix-instruction token sets compared
instruction for instruction, findings compared."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from support import need_toolchain

from gfxsim.cli import main
from kernels_py.host.twins import run_int8_kv_cache, run_pv, run_qk_int8, softmax_rows
from kernels_py.host.hip_twins import asm_kernel_fn
from support.twins import standalone

ARCHS = ["gfx942", "gfx936"]


def b_sets(run):
    return sorted(tuple(sorted(m.token_set("B"))) for m in run.mmacs() if m.token_set("B"))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ctx,head_dim,block_size", [(200, 128, 16), (77, 64, 32)])
def test_qk_int8_asm_is_the_python_twin_bit_for_bit(arch, ctx, head_dim, block_size):
    need_toolchain(arch)
    _, cache, rows = standalone(ctx, head_dim, block_size)
    s_py, run_py = run_qk_int8(rows, cache, arch=arch, trace=False)
    s_asm, run = run_qk_int8(rows, cache, arch=arch, trace=False, kernel=asm_kernel_fn("qk_int8"))
    # exact: both quantize Q by the IEEE quotient 127/amax (clang's div_scale/rcp/fma/div_fmas/
    # div_fixup sequence is correctly rounded), then the same integer products and fp32 multiplies
    np.testing.assert_array_equal(s_asm, s_py)
    # every token fed head_dim/32 instructions, and the instructions' token sets are the Python
    # twin's (the compiled tail skips tiles wholly past the context, which consume no token)
    uses = Counter(t for m in run.mmacs() for t in m.token_set("B"))
    assert uses == {t: head_dim // 32 for t in range(ctx)}
    assert b_sets(run) == b_sets(run_py)
    # the twins share the padded q_lds layout: no finding on either, the declared
    # coverage of s_out (every dim once) included, through clang's SDWA byte packing of Q
    assert not run_py.findings and not run.findings, [f.message for f in run.findings]


@pytest.mark.parametrize("arch", ARCHS)
def test_int8_kv_cache_asm_writes_the_python_twins_bytes(arch):
    need_toolchain(arch)
    rng = np.random.default_rng(3)
    n, kvh, hd, bs, nb = 6, 2, 128, 16, 4
    key = rng.standard_normal((n, kvh, hd)).astype(np.float32)
    value = (rng.standard_normal((n, kvh, hd)) * 5).astype(np.float32)
    key[2, 1] = 0                                       # an all-zero head: scale 0, bytes 0
    slots = np.array([3, 17, -1, 40, 0, 63], np.int32)
    outs_py, run_py = run_int8_kv_cache(key, value, slots, num_blocks=nb, block_size=bs, arch=arch, trace=False)
    outs, run = run_int8_kv_cache(key, value, slots, num_blocks=nb, block_size=bs, arch=arch, trace=False,
                                  kernel=asm_kernel_fn("int8_kv_cache"))
    for a, b in zip(outs, outs_py):
        assert a.tobytes() == b.tobytes()                # quantized bytes, scales and untouched poison alike
    assert not run.findings and not run_py.findings


def scale_findings(runs):
    """(K set, scale footprint, foreign tokens) of every scale-group finding."""
    return sorted((tuple(f.details["k_set"]), tuple(f.details["scale_over"]), tuple(f.details["foreign"]))
                  for r in (runs if isinstance(runs, list) else [runs]) for f in r.findings
                  if f.kind == "scale-group-mismatch")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("grouping", ["fragment", "contiguous"])
def test_pv_int8_asm_token_sets_outputs_and_scale_findings(arch, grouping):
    need_toolchain(arch)
    _, cache, rows = standalone(300, 128, 16)
    P = softmax_rows(rows, cache)
    o_py, run_py = run_pv("pv_int8", P, cache, arch=arch, grouping=grouping, trace=False)
    o, run = run_pv(asm_kernel_fn("pv_int8"), P, cache, arch=arch, grouping=grouping, trace=False)
    # the compiled code has no scale marks: the dequant is recognised (semantics/dequant.py), so
    # the contiguous bug gives the Python twin's findings instruction for instruction, the fix none
    assert scale_findings(run) == scale_findings(run_py)
    assert bool(scale_findings(run)) == (grouping == "contiguous")
    # the tail chunk's lanes load their tokens byte by byte (global_load_ubyte, shifts, ors):
    # the bytes' tokens are routed through them, so every instruction's K set is the Python twin's
    assert b_sets(run) == b_sets(run_py)
    # clang contracts o += acc*sW into one fma (rounded once) where the Python twin rounds the
    # product and the sum: a few fp32 ulps of the output
    assert np.abs(o - o_py).max() <= 4 * np.finfo(np.float32).eps * np.abs(o_py).max()


def test_gfxsim_run_frontend_asm_report(capsys):
    need_toolchain("gfx942")
    assert main(["run", "qk_int8", "--frontend", "asm", "--context", "100", "--arch", "gfx942", "--quiet",
                 "--report", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    rep = rep[0] if isinstance(rep, list) else rep
    assert rep["params"]["frontend"] == "asm"
    assert rep["metrics"]["vs_reference_int8"]["max_abs"] == 0.0
    assert {m["source"].split(" ")[0].split(":")[0] for m in rep["mmacs"]} == {"qk_int8.s"}
    # clang's line tables (-gline-tables-only): each instruction also names its HIP source line
    hip = {m["source"].split(" <- ")[1].split(":")[0] for m in rep["mmacs"]}
    assert hip and hip <= {"qk_int8.hip", "int8_attention.h", "gfxsim_hip.h"}
    assert main(["run", "qk_int8", "--context", "100", "--arch", "gfx942", "--quiet", "--report", "json"]) == 0
    py = json.loads(capsys.readouterr().out)
    py = py[0] if isinstance(py, list) else py
    assert "frontend" not in py["params"]
    assert rep["checks"]["not_run"] == [] and py["checks"]["not_run"] == []
    def ksets(r):
        return sorted(s for s in (tuple(sorted(set(m["b_tokens"]) - {-1})) for m in r["mmacs"]) if s)
    assert ksets(rep) == ksets(py)


def test_frontend_asm_errors_are_named():
    with pytest.raises(ValueError, match="--frontend asm runs .*nope is not wired"):
        asm_kernel_fn("nope")
    from kernels_py.host.runs import run_kernel
    with pytest.raises(ValueError, match="does not take --kernel-fn"):
        run_kernel("qk_int8", frontend="asm", kernel_fn=lambda w: None, context=64)
    with pytest.raises(ValueError, match="--frontend must be python or asm"):
        run_kernel("qk_int8", frontend="rtl", context=64)


def kernel_ksets(kr, op):
    return sorted(s for run in kr.runs for s in (tuple(sorted(m.token_set(op))) for m in run.mmacs()) if s)


@pytest.mark.parametrize("arch", ARCHS)
def test_pv_bf16_asm_is_the_python_twin_bit_for_bit(arch):
    need_toolchain(arch)
    _, cache, rows = standalone(130, 128, 16)
    P = softmax_rows(rows, cache)
    o_py, run_py = run_pv("pv_bf16", P, cache, arch=arch, trace=False)
    o, run = run_pv(asm_kernel_fn("pv_bf16"), P, cache, arch=arch, trace=False)
    np.testing.assert_array_equal(o, o_py)
    # V's bytes reach the bf16 B operand through v_bfe_i32, an SDWA sext select, v_cvt_f32_i32 and
    # v_perm_b32: each step keeps the token, so the K sets are the Python twin's
    assert b_sets(run) == b_sets(run_py)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("grouping", ["fragment", "contiguous"])
def test_paged_attention_decode_asm_is_the_python_twins(arch, grouping):
    """At a small context, both launches of the compiled decode (decode,
    then reduce) through the same harness give the same token sets and scale-group findings."""
    need_toolchain(arch)
    from kernels_py.host.runs import run_kernel
    py = run_kernel("paged_attention_decode", context=300, arch=arch, grouping=grouping)
    asm = run_kernel("paged_attention_decode", context=300, arch=arch, grouping=grouping, frontend="asm")
    assert scale_findings(asm.runs) == scale_findings(py.runs)
    assert bool(scale_findings(asm.runs)) == (grouping == "contiguous")
    for op in "AB":                    # A = Q (QK) and Wq (PV), B = the K and V caches
        assert kernel_ksets(asm, op) == kernel_ksets(py, op)
    # exp is clang's range-reduced expansion around v_exp_f32 and clang contracts into fma: a
    # few fp32 ulps of the output
    assert np.abs(asm.out - py.out).max() <= 4 * np.finfo(np.float32).eps * np.abs(py.out).max()
    assert {f.kind for f in py.findings} <= {"scale-group-mismatch"}
    assert {f.kind for f in asm.findings} <= {"lds-bank-conflict", "scale-group-mismatch"}
    # the --report json of both: every matrix instruction's K-slot tokens per workgroup and wave,
    # and the findings' kinds, counts and token details (gfxsim.asm.parity)
    # (coverage and double counts included: through clang's expf and division expansions)
    from gfxsim.asm.parity import differences
    assert differences(py.report(), asm.report()) == []
    assert asm.checks() == {"not_run": [], "reason": None, "kslots_of_unknown_origin": 0}


def test_dequant_recognition_switch(monkeypatch):
    need_toolchain("gfx942")
    from gfxsim.asm.semantics import dequant
    from kernels_py.host.runs import run_kernel
    monkeypatch.setattr(dequant, "ENABLED", False)
    kr = run_kernel("pv_int8", context=130, arch="gfx942", grouping="contiguous", frontend="asm")
    assert not scale_findings(kr.runs)
    assert kr.checks() == {"not_run": ["dequant-direction", "scale-group-mismatch"],
                           "reason": "asm front end: compiled code has no scale marks (dequant recognition off)",
                           "kslots_of_unknown_origin": 0}


@pytest.mark.parametrize("arch, ctx", [("gfx936", 256), ("gfx942", 256), ("gfx936", 300), ("gfx942", 130)])
def test_prefix_prefill_asm_is_the_python_twin(arch, ctx):
    """The compiled prefill, 64 causal query rows over the cache (chunks that end inside the
    context, rows that see none of a chunk's tokens): the same K-slot tokens and no finding. Its
    HIP writes a literal -inf for a masked score and a literal 0.f scale for an all-zero group,
    where the Python twin keeps names (s - inf, amax * 0); both are zero weights, not mistakes."""
    need_toolchain(arch)
    from gfxsim.asm.parity import differences
    from kernels_py.host.runs import run_kernel
    py = run_kernel("prefix_prefill", context=ctx, heads=1, arch=arch)
    asm = run_kernel("prefix_prefill", context=ctx, heads=1, arch=arch, frontend="asm")
    assert py.findings == [] and [f for f in asm.findings if f.kind != "lds-bank-conflict"] == [], \
        [f.message for f in asm.findings]
    assert differences(py.report(), asm.report()) == []
    assert asm.checks() == {"not_run": [], "reason": None, "kslots_of_unknown_origin": 0}
    assert np.abs(asm.out - py.out).max() <= 4 * np.finfo(np.float32).eps * np.abs(py.out).max()


def test_decode_asm_members_sitting_out_a_tile_leave_no_scale_finding():
    """Two sequences of 90 and 140 tokens, 4 heads on 2 kv heads: in one batch the shorter
    sequence's waves skip the tile at 96 while the longer's run it, their registers still holding
    an earlier tile's bytes. The matrix instruction's K sets must come from the members that issue
    it: stale tokens of the members sitting out made token look varying along K, and the per-row
    Q scale was then reported as a scale-group-mismatch on this correct kernel."""
    need_toolchain("gfx936")
    from kernels_py.host.runs import run_kernel
    from kernels_py.workloads.inputs import validate_inputs
    r = np.random.default_rng(0)
    inputs = validate_inputs({"q": r.standard_normal((2, 4, 128)).astype(np.float32),
                              "k": r.standard_normal((2, 140, 2, 128)).astype(np.float32),
                              "v": r.standard_normal((2, 140, 2, 128)).astype(np.float32),
                              "context_lens": np.array([90, 140], np.int32)}, block_size=16)
    asm = run_kernel("paged_attention_decode", inputs=inputs, arch="gfx936", frontend="asm")
    py = run_kernel("paged_attention_decode", inputs=inputs, arch="gfx936")
    assert [f.kind for f in asm.findings if f.kind != "lds-bank-conflict"] == []
    assert [f.kind for f in py.findings] == []
    assert kernel_ksets(asm, "B") == kernel_ksets(py, "B")
