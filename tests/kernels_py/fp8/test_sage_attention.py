"""SageAttention2 on sm_89/sm_90: the twin kernel equals its numpy reference,
its indices come from the records, and a per-thread scale group taken from the wrong layout is a
scale-group-mismatch while the fixed twin is silent."""
import numpy as np
import pytest

from gfxsim.arch import get_instruction
from gfxsim.arch.groups import lane_groups
from kernels_py.fp8.sage_attention import run_sage_attention, swapped_d_layout
from kernels_py.fp8.sage_layout import PV_MMA, QK_MMA, pv_a_from_qk, row_slots
from kernels_py.fp8.sage_reference import SageConfig, sage_head, sage_prefill
from support import DEFECTIVE


def data(T=128, d=64, seed=0, v_off=0.0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(32, d)).astype(np.float32)
    k = (rng.normal(size=(T, d)) + rng.normal(size=d) * 3).astype(np.float32)       # channel offsets (smooth-K)
    v = (rng.normal(size=(T, d)) + v_off).astype(np.float32)
    return q, k, v


@pytest.mark.parametrize("arch", ["sm_89", "sm_90"])
def test_lane_groups_are_sageattention2s_indices(arch):
    """q_scale_idx = lane / 4, k_scale_idx = lane % 4 (qk_int_sv_f8_cuda_sm89.cuh l.113/129)."""
    for qk in QK_MMA:
        rg, cg = lane_groups(get_instruction(arch, QK_MMA[qk]).operand("D"), 32, 64)
        lane = np.arange(32)
        assert np.array_equal(rg, lane // 4) and np.array_equal(cg, lane % 4)


def test_the_wrong_layout_gives_other_lane_groups():
    lay = swapped_d_layout(get_instruction("sm_89", QK_MMA["int8"]).operand("D"))
    rg, _ = lane_groups(lay, 32, 64)
    assert np.array_equal(rg, np.arange(32) % 8)


def test_v_permutation_is_derived_and_is_sageattention2s():
    """The QK accumulator feeds PV's A as it is when V's K slot k holds token perm[k];
    fused.cu TransposePadPermuteKernel: token m of 16 goes to row (m/8)*2 + ((m/2)%4)*4 + m%2."""
    for arch in ("sm_89", "sm_90"):
        src, perm = pv_a_from_qk(get_instruction(arch, QK_MMA["int8"]), get_instruction(arch, PV_MMA))
        m = np.arange(16)
        row = (m // 8) * 2 + ((m // 2) % 4) * 4 + m % 2
        inv = np.empty(32, int)
        inv[perm] = np.arange(32)
        assert np.array_equal(inv[:16], row) and np.array_equal(inv[16:], row + 16)
        assert len(src) == 16 and row_slots(get_instruction(arch, QK_MMA["int8"])) == [[0, 1], [2, 3]]


CASES = [  # (config, causal row-0 position)
    (SageConfig(q_block=32), None),
    (SageConfig(arch="sm_90", qk="int4", q_block=32), None),
    (SageConfig(arch="sm_90", two_level=False, smooth_v=True, q_block=32), 96),
]


@pytest.mark.parametrize("cfg,pos", CASES, ids=["sm89-int8", "sm90-int4", "sm90-onelevel-smoothv-causal"])
def test_kernel_equals_reference_and_is_silent(cfg, pos):
    q, k, v = data(v_off=2.0)
    out, run = run_sage_attention(q, k, v, cfg, q_pos0=pos)
    ref = sage_head(q, k, v, cfg, q_pos=None if pos is None else pos + np.arange(32))
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-6)
    assert run.findings == []
    names = {m.op for m in run.mmacs()}
    assert names == {QK_MMA[cfg.qk], PV_MMA}


def test_per_thread_group_from_the_wrong_layout_is_a_scale_group_mismatch():
    q, k, v = data()
    cfg = SageConfig(q_block=32)
    lay = swapped_d_layout(get_instruction("sm_89", QK_MMA["int8"]).operand("D"))
    out, run = run_sage_attention(q, k, v, cfg, q_layout=lay)
    f = run.findings_of("scale-group-mismatch")
    assert f and len(f) == len(run.findings)
    qk_insns = {m.index for m in run.mmacs() if m.op == QK_MMA["int8"]}
    assert {x.details["mma_event"] for x in f} <= qk_insns
    x = f[0]
    assert x.details["field"] == "row" and "not in that group" in x.message
    # lane 1 holds row 0 but took row group {1, 9, 17, 25}'s scale (lane % 8 instead of lane / 4)
    assert {"k_set": [0], "scale_over": [1, 9, 17, 25]} in [
        {"k_set": m["k_set"], "scale_over": m["scale_over"]} for m in x.details["mismatches"]]
    ref = sage_head(q, k, v, cfg)
    assert np.abs(out - ref).max() > 1e-3          # and the numbers are wrong


def test_reference_granularity_and_smoothing_order_on_default_data():
    """Per-thread INT4 is far better than per-block and close to per-token; smoothing helps INT4."""
    from kernels_py.workloads.data import make_attention_inputs
    from kernels_py.reference.attention import attention_fp32, metrics
    d = make_attention_inputs(0, context_lens=256, num_queries=64, num_heads=2, head_dim=64)
    ref = attention_fp32(d["q"], d["k"], d["v"], d["context_lens"])

    def err(**kw):
        return metrics(sage_prefill(d["q"], d["k"], d["v"], d["context_lens"], SageConfig(**kw)), ref)["rel_l1"]
    block, thread, token = (err(qk="int4", granularity=g) for g in ("block", "thread", "token"))
    assert token <= thread < block
    assert err(qk="int4", smooth_q=False, smooth_k=False) > 2 * thread
    assert err(qk="int8") < thread


def test_two_level_bounds_the_fp22_error_along_the_sequence():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(32, 64)).astype(np.float32)
    k = rng.normal(size=(4096, 64)).astype(np.float32) * 0.3
    v = (rng.normal(size=(4096, 64)) + 4).astype(np.float32)
    from kernels_py.reference.attention import metrics
    two = sage_head(q, k, v, SageConfig(arch="sm_89", q_block=32, two_level=True))
    one = sage_head(q, k, v, SageConfig(arch="sm_89", q_block=32, two_level=False))
    f32 = sage_head(q, k, v, SageConfig(arch="sm_89", q_block=32, two_level=False, pv_accumulator="exact"))
    assert metrics(two, f32)["rel_l1"] * 4 < metrics(one, f32)["rel_l1"]


def test_config_and_kernel_input_errors():
    with pytest.raises(ValueError, match="granularity"):
        SageConfig(granularity="warp")
    with pytest.raises(ValueError, match="qk"):
        SageConfig(qk="int2")
    with pytest.raises(ValueError, match="pv_accumulator"):
        SageConfig(pv_accumulator="fp16")
    q, k, v = data()
    with pytest.raises(ValueError, match="per thread"):
        run_sage_attention(q, k, v, SageConfig(granularity="block", q_block=32))
    with pytest.raises(ValueError, match="32 rows"):
        run_sage_attention(q[:16], k, v, SageConfig(q_block=32))


# -- gfxsim run sage_attention ----------------------------------------------------------------------

def _run_json(capsys, *argv):
    import json
    from gfxsim.cli import main
    assert main(["run", "sage_attention", "--context", "128", "--head-dim", "64", *argv, "--report", "json",
                 "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


DEFECTIVE = DEFECTIVE / "sage_wrong_groups.py"


def test_gfxsim_run_sage_attention_on_sm_90(capsys):
    r = _run_json(capsys, "--arch", "sm_90")
    assert r["arch"] == "sm_90" and r["findings"] == []
    assert r["metrics"]["vs_sage_reference"]["max_abs"] < 1e-5
    assert r["metrics"]["vs_fp32"]["cos_sim"] > 0.99


def test_gfxsim_run_user_kernel_with_wrong_groups_is_found_and_its_fix_is_silent(capsys):
    bad = _run_json(capsys, "--arch", "sm_89", "--kernel-fn", f"{DEFECTIVE}:sage_wrong_groups")
    assert bad["findings"] and {f["kind"] for f in bad["findings"]} == {"scale-group-mismatch"}
    good = _run_json(capsys, "--arch", "sm_89", "--kernel-fn", f"{DEFECTIVE}:sage_fixed")
    assert good["findings"] == [] and good["metrics"]["vs_sage_reference"]["max_abs"] < 1e-5


def test_gfxsim_run_sage_attention_refuses_a_gfx9_arch():
    from kernels_py.host.runs import run_kernel
    with pytest.raises(ValueError, match="NVIDIA warp32"):
        run_kernel("sage_attention", arch="gfx942", context=128, head_dim=64)
    with pytest.raises(ValueError, match="multiple of 64"):
        run_kernel("sage_attention", arch="sm_90", context=100, head_dim=64)


def _amax_one_by_one(w, vals):
    a = abs(vals[0])
    for e in range(1, vals.n):
        a = w.max(a, abs(vals[e]))
    return a


@pytest.mark.parametrize("n", [7, 8])
def test_amax_by_halves_equals_the_one_by_one_chain_with_provenance(n):
    """The kernel's amax maxes register halves (log2(n) statements): the same value, footprint,
    identities and quantization marks as the chain max(max(|x0|, |x1|), |x2|) ... it replaces."""
    from gfxsim import Buffer, launch
    from gfxsim.machine import qdir
    from kernels_py.fp8.sage_attention import _amax
    from support.fold import same_buffers
    T, d = 32, n
    x = np.random.default_rng(1).normal(size=(T, d)).astype(np.float32)
    x[3, 2] = np.nan                              # max ignores a NaN whichever way it pairs
    toks = np.broadcast_to(np.arange(T)[:, None], (T, d))
    dims = np.broadcast_to(np.arange(d), (T, d))
    src = Buffer("x", x, tags={"token": toks, "dim": dims})
    tok = (np.arange(32)[:, None] + 5 * np.arange(d)) % T            # a lane's elements: several tokens
    addr = ((tok * d + np.arange(d)) * 4).astype(np.int32)
    outs = [Buffer.empty(name, (32,), np.float32) for name in ("chain", "halves", "chain_q", "halves_q")]

    def kernel(w, x, chain, halves, chain_q, halves_q):
        vals = w.cat(*[w.global_load(x, w.from_lanes(addr[:, e], "i32"), 4, "f32") for e in range(d)])
        for amax, o, oq in ((_amax_one_by_one, chain, chain_q), (_amax, halves, halves_q)):
            a = amax(w, vals)
            w.global_store(o, w.lane_id * 4, a)
            w.global_store(oq, w.lane_id * 4, vals[0] * w.rcp(a))     # carries the amax^-1 mark
    run = launch(kernel, arch="sm_90", args=(src, *outs), provenance=True)
    assert run.findings == []
    np.testing.assert_array_equal(outs[0].array, np.nanmax(np.abs(x[tok, np.arange(d)]), axis=1))
    for a, b in ((outs[0], outs[1]), (outs[2], outs[3])):
        same_buffers(a, b, run.machine.wide, run.machine.wide)
    fp = outs[0].prov._planes().fp
    assert fp["token"].nonempty().all() and fp["dim"].nonempty().all()     # footprints were compared
    assert (outs[2].prov._planes().flags & qdir.MARKS).any()              # and the marks


@pytest.mark.parametrize("n", [6, 8])
def test_maxes_side_by_side_equal_each_max_alone_with_provenance(n):
    """The kernel's row maxes run their chains side by side (_max_of's width): chain h's max has
    the value, footprint and identities of the same halving of chain h alone."""
    from gfxsim import Buffer, launch
    from kernels_py.fp8.sage_attention import _max_of
    from support.fold import same_buffers
    T, width = 32, 3
    x = np.random.default_rng(2).normal(size=(T, n * width)).astype(np.float32)
    toks = np.broadcast_to(np.arange(T)[:, None], x.shape)
    src = Buffer("x", x, tags={"token": toks})
    tok = (np.arange(32)[:, None] + 7 * np.arange(n * width)) % T
    addr = ((tok * n * width + np.arange(n * width)) * 4).astype(np.int32)
    alone = [Buffer.empty(f"alone{h}", (32,), np.float32) for h in range(width)]
    side = [Buffer.empty(f"side{h}", (32,), np.float32) for h in range(width)]

    def kernel(w, x, *outs):
        vals = w.cat(*[w.global_load(x, w.from_lanes(addr[:, e], "i32"), 4, "f32") for e in range(n * width)])
        together = _max_of(w, vals, width)                 # element t * width + h: term t of chain h
        for h in range(width):
            w.global_store(outs[h], w.lane_id * 4, _max_of(w, vals[list(range(h, n * width, width))]))
            w.global_store(outs[width + h], w.lane_id * 4, together[h])
    run = launch(kernel, arch="sm_90", args=(src, *alone, *side), provenance=True)
    assert run.findings == []
    for h in range(width):
        np.testing.assert_array_equal(alone[h].array, x[tok[:, h::width], np.arange(h, n * width, width)].max(axis=1))
        same_buffers(alone[h], side[h], run.machine.wide, run.machine.wide)
    assert alone[0].prov._planes().fp["token"].nonempty().all()          # footprints were compared


def test_amax_with_neighbours_first_equals_the_amax_in_token_order_with_provenance():
    """V's amax maxes its elements in _near_first's order (tokens of one K step meet first): the
    same value, footprint and identities as the halving of the elements in token order, over a
    lane's tokens spread across the whole context (footprints wider than one window)."""
    from gfxsim import Buffer, launch
    from kernels_py.fp8.sage_attention import _amax, _near_first
    from support.fold import same_buffers
    T, n = 1024, 16
    assert sorted(_near_first(n)) == list(range(n)) and _near_first(n) != list(range(n))
    x = np.random.default_rng(4).normal(size=(T, 1)).astype(np.float32)
    src = Buffer("x", x, tags={"token": np.arange(T)[:, None], "dim": np.zeros((T, 1), int)})
    tok = np.arange(32)[:, None] + 64 * np.arange(n)                 # lane l: tokens l, l + 64, ...
    outs = [Buffer.empty(name, (32,), np.float32) for name in ("in_order", "near_first")]

    def kernel(w, x, in_order, near_first):
        vals = w.cat(*[w.global_load(x, w.from_lanes(tok[:, e] * 4, "i32"), 4, "f32") for e in range(n)])
        w.global_store(in_order, w.lane_id * 4, _amax(w, vals))
        w.global_store(near_first, w.lane_id * 4, _amax(w, vals[_near_first(n)]))
    run = launch(kernel, arch="sm_90", args=(src, *outs), provenance=True)
    assert run.findings == []
    np.testing.assert_array_equal(outs[0].array, np.abs(x[tok, 0]).max(axis=1))
    same_buffers(outs[0], outs[1], run.machine.wide, run.machine.wide)
    assert outs[0].prov._planes().fp["token"].wide.any()               # wide footprints were compared
