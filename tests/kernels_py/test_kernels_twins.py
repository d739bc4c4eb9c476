"""The Python twins besides decode: qk_int8, pv_int8 and pv_bf16 (standalone), prefix_prefill and
the int8_kv_cache producer. Each agrees with its numpy reference, runs without findings on gfx936
and gfx942, the contiguous grouping is named instruction by instruction, and bad shapes and
parameters are named."""
import json
from collections import Counter

import numpy as np
import pytest

from gfxsim.testing import assert_findings, assert_no_findings
from kernels_py.reference import attention as R
from kernels_py.workloads.data import make_attention_inputs
from kernels_py.host.buffers import make_cache
from kernels_py.host.twins import (empty_cache, run_int8_kv_cache, run_prefill, run_pv, run_qk_int8,
                                   softmax_rows, sum_in_wave_order)
from kernels_py.reference.int8_cache import gather_int8, quantize_int8
from kernels_py.reference.int8_cache import int8_kv_cache as int8_kv_cache_ref
from kernels_py.host.runs import run_kernel
from support.twins import standalone

ARCHS = ["gfx936", "gfx942"]
# pv_bf16 and prefix_prefill vs their references, relative to the largest output: the integer and
# bf16 products are exact on both sides, but pv_bf16 rounds each instruction's 16-term sum to fp32
# (numpy: one fp32 matmul per chunk), and prefix_prefill sums p~ per lane, then across lanes (numpy:
# pairwise over the chunk), so l differs by an ulp or two. A few ulp of fp32 (2^-23 ~ 1.2e-7).
ULPS = 1e-6


def padded_w_v(P, cache):
    _, _, vq, sv = gather_int8(cache, 0)
    T = -(-len(sv) // 64) * 64
    W = np.zeros((16, T), np.float32)
    W[:, :len(sv)] = P * sv[:, 0]
    V = np.zeros((T, cache.head_dim), np.int8)
    V[:len(sv)] = vq[:, 0]
    return W, V


def pv_instructions(run):
    return [m for m in run.mmacs() if m.token_set("A")]


# ---- qk_int8 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ctx,head_dim,block_size", [(200, 128, 16), (77, 64, 32)])
def test_qk_int8_is_the_reference_bit_for_bit(arch, ctx, head_dim, block_size):
    d, cache, rows = standalone(ctx, head_dim, block_size)
    s, run = run_qk_int8(rows, cache, arch=arch, trace=False)
    assert_no_findings(run)
    # exact: integer dot products, then the same fp32 multiplies (sQ, sK, 1/sqrt(d)) in the same order
    kq, sk, _, _ = gather_int8(cache, 0)
    qq, sq = quantize_int8(rows)
    np.testing.assert_array_equal(s, R.qk_int8_scores(qq, sq, kq[:, 0], sk[:, 0]))
    # every token fed head_dim/32 instructions (one per k step), as column of its 16-token tile
    uses = Counter(t for m in run.mmacs() for t in m.token_set("B"))
    assert uses == {t: head_dim // 32 for t in range(ctx)}


# ---- pv_int8 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ctx,head_dim,block_size", [(300, 64, 16), (130, 128, 32)])
def test_fragment_pv_int8_is_the_reference_bit_for_bit(arch, ctx, head_dim, block_size):
    d, cache, rows = standalone(ctx, head_dim, block_size)
    P = softmax_rows(rows, cache)
    out, run = run_pv("pv_int8", P, cache, arch=arch, trace=False)
    assert_no_findings(run)
    # exact: integer MMACs, acc_0*sW_0 + acc_1*sW_1 per chunk as numpy does, and the chunks added in
    # the kernel's order (per wave, then the waves in order)
    W, V = padded_w_v(P, cache)
    np.testing.assert_array_equal(out, sum_in_wave_order(R.pv_int8_chunks(W, V, "fragment")))
    for m in pv_instructions(run):
        chunk, j = min(m.token_set("B")) // 64 * 64, (min(m.token_set("B")) % 16) // 8
        assert m.token_set("A") == m.token_set("B") == \
            {chunk + 16 * r + 8 * j + b for r in range(4) for b in range(8)} & set(range(ctx))


@pytest.mark.parametrize("arch", ARCHS)
def test_contiguous_pv_int8_names_the_mixed_tokens_of_every_instruction(arch):
    ctx = 300                            # the last chunk (256-299) has tokens in both contiguous groups
    d, cache, rows = standalone(ctx)
    P = softmax_rows(rows, cache)
    out, run = run_pv("pv_int8", P, cache, arch=arch, grouping="contiguous", trace=False)
    found = {f.instruction: f for f in run.findings_of("scale-group-mismatch")}
    assert len(found) == len(run.findings_of("scale-group-mismatch"))       # one finding per instruction
    expected = {}
    for m in pv_instructions(run):      # independent of the debugger: tokens consumed vs group t//32 used
        k = m.token_set("B")
        chunk, j = min(k) // 64 * 64, (min(k) % 16) // 8
        group = set(range(chunk + 32 * j, min(chunk + 32 * j + 32, ctx)))
        expected[m.index] = sorted(k - group)
    assert all(expected.values()) and set(found) == set(expected)           # every instruction is affected
    for idx, foreign in expected.items():
        assert found[idx].details["foreign"] == foreign
        assert len(found[idx].details["lanes"]) == 64                      # all 16 rows' scales
    assert run.findings_of("scale-group-mismatch") == run.findings
    W, V = padded_w_v(P, cache)
    np.testing.assert_array_equal(out, sum_in_wave_order(R.pv_int8_chunks(W, V, "contiguous")))
    fragment, _ = run_pv("pv_int8", P, cache, arch=arch, trace=False, provenance=False)
    exact = (P.astype(np.float64) @ d["v"][0, :ctx, 0].astype(np.float64))
    assert R.metrics(out, exact)["max_abs"] >= 10 * R.metrics(fragment, exact)["max_abs"]


# ---- pv_bf16 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ctx,head_dim,block_size", [(300, 64, 16), (100, 128, 32)])
def test_pv_bf16_matches_its_reference_without_findings(arch, ctx, head_dim, block_size):
    d, cache, rows = standalone(ctx, head_dim, block_size)
    P = softmax_rows(rows, cache)
    out, run = run_pv("pv_bf16", P, cache, arch=arch, trace=False)
    assert_no_findings(run)              # no scale groups to mismatch, no K-slot or coverage findings
    W, V = padded_w_v(P, cache)
    ref = sum_in_wave_order(R.pv_bf16_chunks(W, V))
    np.testing.assert_allclose(out, ref, rtol=0, atol=ULPS * np.abs(ref).max())
    # instruction m of a chunk takes the lane's tokens 16*rowid + 4m .. +3: 4 per 64 tokens and tile
    pv = run.mmacs()
    assert len(pv) == -(-ctx // 64) * 4 * (head_dim // 16)
    for e in pv:
        chunk, m = min(e.token_set("B")) // 64 * 64, (min(e.token_set("B")) % 16) // 4
        assert e.token_set("A") == e.token_set("B") == \
            {chunk + 16 * r + 4 * m + c for r in range(4) for c in range(4)} & set(range(ctx))


# ---- prefix_prefill ------------------------------------------------------------------------------

def prefill_case(ctx, nq, heads, kv_heads, head_dim, block_size=16, seed=0):
    d = make_attention_inputs(seed=seed, num_seqs=len(ctx), num_heads=heads, num_kv_heads=kv_heads,
                              head_dim=head_dim, context_lens=ctx, num_queries=nq)
    return d, make_cache(d["k"], d["v"], d["context_lens"], block_size=block_size, smooth_k=True, seed=seed)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ctx,nq,heads,kv_heads,head_dim,block_size", [
    ([150], 40, 2, 1, 64, 16),         # GQA 2; 3 waves, the third with 8 rows; partial chunks
    ([100], 100, 1, 1, 128, 32),       # only new tokens (position 0 is a query); two workgroup row tiles
    ([70, 130], 20, 2, 2, 64, 16),     # two sequences, two kv heads
])
def test_fragment_prefill_has_no_findings_and_matches_reference_int8(arch, ctx, nq, heads, kv_heads, head_dim,
                                                                     block_size):
    d, cache = prefill_case(ctx, nq, heads, kv_heads, head_dim, block_size)
    out, runs = run_prefill(d["q"], cache, arch=arch, trace=False)
    assert_no_findings(runs)
    ref = R.attention_int8(d["q"], cache, grouping="fragment")
    np.testing.assert_allclose(out, ref, rtol=0, atol=ULPS * np.abs(ref).max())
    pv = [m for r in runs for m in pv_instructions(r)]
    assert pv and all(m.token_set("A") == m.token_set("B") for m in pv)


@pytest.mark.parametrize("arch", ARCHS)
def test_contiguous_prefill_names_the_mixed_tokens(arch):
    ctx, nq = 150, 40
    d, cache = prefill_case([ctx], nq, 1, 1, 64)
    out, (run,) = run_prefill(d["q"], cache, arch=arch, grouping="contiguous", trace=False)
    found = {f.instruction: f for f in run.findings_of("scale-group-mismatch")}
    assert_findings(run, {"scale-group-mismatch": None})
    expected = {}
    for m in pv_instructions(run):
        k = m.token_set("B")
        # the wave walks tokens t < wave_end (the last of its 16 rows' positions + 1)
        wave_end = ctx - nq + min(16 * (4 * m.workgroup[0] + m.wave) + 16, nq)
        chunk, j = min(k) // 64 * 64, (min(k) % 16) // 8
        group = set(range(chunk + 32 * j, min(chunk + 32 * j + 32, wave_end)))
        # A group with no token left (tail chunks shorter than 33) gives a scale computed over
        # nothing: the instruction's tokens are all foreign to it, and that is reported too. A
        # group that covers more than the instruction consumed is harmless: not a finding.
        if not k <= group:
            expected[m.index] = (sorted(k - group), sorted(group - k))
    assert set(found) == set(expected)
    for idx, (foreign, extra) in expected.items():
        assert (found[idx].details["foreign"], found[idx].details["extra"]) == (foreign, extra)
    np.testing.assert_allclose(out, R.attention_int8(d["q"], cache, grouping="contiguous"), rtol=0,
                               atol=ULPS * np.abs(out).max())


def test_prefill_with_the_other_archs_formula_is_caught():
    d, cache = prefill_case([100], 32, 1, 1, 64)
    _, (run,) = run_prefill(d["q"], cache, arch="gfx942", formula="gfx936", trace=False)
    assert run.findings_of("scale-group-mismatch")


# ---- int8_kv_cache ------------------------------------------------------------------------------

@pytest.mark.parametrize("head_dim,block_size,kv_heads,arch", [(64, 16, 2, "gfx936"), (128, 32, 1, "gfx942"),
                                                               (128, 16, 2, "gfx942"), (64, 32, 1, "gfx936")])
def test_producer_writes_the_reference_cache_bit_for_bit(head_dim, block_size, kv_heads, arch):
    rng = np.random.default_rng(head_dim + block_size)
    n = 200
    num_blocks = -(-n // block_size) + 3
    key = (rng.standard_normal((n, kv_heads, head_dim)) * 4).astype(np.float32)
    value = rng.standard_normal((n, kv_heads, head_dim)).astype(np.float32)
    key[3], value[4] = 0, 1e-38          # amax 0, and one below 127/FLT_MAX: scale 0, q 0
    slots = rng.permutation(num_blocks * block_size)[:n].astype(np.int32)
    slots[::7] = -1                      # padding tokens: skipped, their slots stay poisoned
    got, run = run_int8_kv_cache(key, value, slots, num_blocks=num_blocks, block_size=block_size, arch=arch,
                                 trace=False)
    assert_no_findings(run)
    ref = empty_cache(num_blocks, kv_heads, head_dim, block_size)
    int8_kv_cache_ref(key, value, slots, *ref)
    for name, a, b in zip(("k_cache", "v_cache", "k_scale", "v_scale"), got, ref):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), name      # NaN poison compared as bytes
    assert run.grid[:2] == (n, kv_heads)


# ---- gfxsim run ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel,keys", [
    ("qk_int8", {"vs_fp32", "vs_bf16", "vs_reference_int8"}),
    ("pv_int8", {"vs_fp32", "vs_bf16", "vs_reference_int8"}),
    ("pv_bf16", {"vs_fp32", "vs_bf16", "vs_reference_bf16_pv"}),
    ("prefix_prefill", {"vs_fp32", "vs_bf16", "vs_reference_int8"}),
    ("int8_kv_cache", {"vs_fp32", "vs_reference_int8"}),
])
def test_registered_runners_report_their_references(kernel, keys):
    kr = run_kernel(kernel, context=90, heads=2, kv_heads=1, head_dim=64, arch="gfx942")
    m = kr.metrics()
    assert set(m) == keys and kr.findings == []
    ref = "vs_reference_bf16_pv" if kernel == "pv_bf16" else "vs_reference_int8"
    assert m[ref]["max_abs"] <= ULPS * np.abs(kr.refs[ref[3:]]).max()
    assert m["vs_fp32"]["cos_sim"] > 0.99


def _kv_wrong_block_size(w, *args, block_size, **kw):
    """The producer told another block size than the cache's: its stores land in other slots."""
    from kernels_py.int8_kv_cache import int8_kv_cache
    return int8_kv_cache(w, *args, block_size=block_size // 2, **kw)


@pytest.mark.parametrize("kernel_fn", [None, _kv_wrong_block_size])
def test_the_kv_cache_runners_int8_reference_is_the_numpy_caches_dequantized(kernel_fn):
    """The INT8 reference is the numpy producer's cache dequantized, whether the kernel's bytes
    equal it (then a read-only view of out) or not (made from the numpy cache)."""
    from kernels_py.host.config import RunConfig
    from kernels_py.host.runners import _inputs_and_cache, dequantized_kv
    params = dict(context=90, heads=2, kv_heads=1, head_dim=64, arch="gfx942", provenance=False)
    kr = run_kernel("int8_kv_cache", kernel_fn=kernel_fn, **params)
    d, ref = _inputs_and_cache(RunConfig(**params), None)
    want = dequantized_kv(ref, np.array([0, 90]))
    got = kr.refs["reference_int8"]
    assert got.dtype == want.dtype and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.array_equal(kr.out.view(np.uint32), want.view(np.uint32)) == (kernel_fn is None)
    assert np.shares_memory(got, kr.out) == (kernel_fn is None) and got.flags.writeable == (kernel_fn is not None)


def test_cli_runs_the_seeds_bug_on_pv_int8(capsys):
    from gfxsim.cli import main
    assert main(["run", "pv_int8", "--grouping", "contiguous", "--context", "300", "--head-dim", "64",
                 "--heads", "1", "--report", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    f = [x for x in rep["findings"] if x["kind"] == "scale-group-mismatch"]
    assert rep["kernel"] == "pv_int8" and len(f) == len(rep["mmacs"]) == 5 * 2 * 4
    assert rep["metrics"]["vs_reference_int8"]["max_abs"] == 0


# ---- bad shapes and parameters -------------------------------------------------------------------

def test_bad_shapes_and_parameters_are_named():
    d, cache, rows = standalone(70)
    P = softmax_rows(rows, cache)
    cases = [
        (lambda: run_qk_int8(rows[:8], cache), r"q must be \[16, head_dim 64\], got shape \(8, 64\)"),
        (lambda: run_pv("pv_int8", P[:, :60], cache), r"P must be \[16, context_len 70\], got shape \(16, 60\)"),
        (lambda: run_pv("pv_bf16", P, cache, grouping="contiguous"), "pv_bf16 has no W scale: grouping"),
        (lambda: run_pv("pv_fp8", P, cache), "kernel must be one of"),
        (lambda: run_pv("pv_int8", P, cache, grouping="rows"), "grouping must be one of"),
        (lambda: run_prefill(d["q"][:, 0], cache), r"prefix_prefill needs q \[num_seqs, num_queries"),
        (lambda: run_prefill(np.zeros((1, 71, 1, 64)), cache), "num_queries 71 must be 1..context_len"),
        (lambda: run_prefill(np.zeros((1, 4, 1, 128)), cache), "q head_dim 128 != cache head_dim 64"),
        (lambda: run_prefill(np.zeros((2, 4, 1, 64)), cache), "q has 2 sequences, the cache 1"),
        (lambda: run_kernel("prefix_prefill", inputs=dict(q=np.zeros((1, 2, 64), np.float32), k=d["k"], v=d["v"],
                                                          context_lens=d["context_lens"])),
         "prefix_prefill needs q"),
        (lambda: run_kernel("pv_int8", context=64, grouping="rows"), "grouping"),
    ]
    key = np.zeros((3, 1, 64), np.float32)
    slots = np.array([0, 1, 2], np.int32)
    cases += [
        (lambda: run_int8_kv_cache(key, key[:, :, :32], slots, num_blocks=1, block_size=16), "key and value"),
        (lambda: run_int8_kv_cache(np.zeros((3, 1, 96)), np.zeros((3, 1, 96)), slots, num_blocks=1, block_size=16),
         "head_dim 96 not in"),
        (lambda: run_int8_kv_cache(key, key, slots, num_blocks=1, block_size=8), "block_size 8 not in"),
        (lambda: run_int8_kv_cache(key, key, np.array([0, 16, 2]), num_blocks=1, block_size=16),
         r"slot_mapping\[1\] = 16 is outside \[0, 16\)"),
        (lambda: run_int8_kv_cache(key, key, np.array([0, 2, 2]), num_blocks=1, block_size=16), "one slot twice"),
        (lambda: run_int8_kv_cache(key, key, slots[:2], num_blocks=1, block_size=16), "slot_mapping must be"),
    ]
    for fn, msg in cases:
        with pytest.raises(ValueError, match=msg):
            fn()
