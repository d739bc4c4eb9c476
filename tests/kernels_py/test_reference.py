"""The numpy references against each other, against the spec written out naively, and the project's figures."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from kernels_py.workloads.accuracy import accuracy_row
from kernels_py.workloads.data import make_attention_inputs
from kernels_py.reference.int8_cache import build_paged_cache, without_smooth_k
from kernels_py.reference.attention import (attention_bf16, attention_fp32, attention_int8, contiguous_group,
                                  decode_int8_partials, metrics, mmac_set, pv_int8_chunks, quantize_w,
                                  reduce_partitions)

SMALL = dict(num_seqs=2, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[300, 131])


def naive_attention(q, k, v, lens):
    """Float64 loop over (seq, query, head), straight from the definition."""
    q4 = q[:, None] if q.ndim == 3 else q
    out = np.zeros(q4.shape)
    ratio = q4.shape[2] // k.shape[2]
    for s, n in enumerate(lens):
        for i in range(q4.shape[1]):
            pos = n - q4.shape[1] + i
            for h in range(q4.shape[2]):
                kk = k[s, :pos + 1, h // ratio].astype(np.float64)
                sc = kk @ q4[s, i, h].astype(np.float64) / np.sqrt(q4.shape[-1])
                p = np.exp(sc - sc.max())
                out[s, i, h] = p @ v[s, :pos + 1, h // ratio] / p.sum()
    return out.reshape(q.shape)


@pytest.mark.parametrize("num_queries", [None, 5])
def test_fp32_reference_matches_naive_loop(num_queries):
    d = make_attention_inputs(3, num_queries=num_queries, **SMALL)
    got = attention_fp32(d["q"], d["k"], d["v"], d["context_lens"])
    np.testing.assert_allclose(got, naive_attention(d["q"], d["k"], d["v"], d["context_lens"]),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("num_queries", [None, 5])
def test_bf16_reference_is_within_bf16_error_of_fp32(num_queries):
    d = make_attention_inputs(4, num_queries=num_queries, **SMALL)
    m = metrics(attention_bf16(d["q"], d["k"], d["v"], d["context_lens"]),
                attention_fp32(d["q"], d["k"], d["v"], d["context_lens"]))
    assert m["rel_l1"] < 8 * 2.0**-9 and m["cos_sim"] > 0.9999       # a few bf16 ulps


@pytest.mark.parametrize("head_dim,block_size,num_heads,num_kv_heads,num_queries", [
    (128, 16, 8, 1, None), (64, 32, 4, 2, None), (128, 32, 16, 1, None), (64, 16, 4, 4, 7)])
def test_int8_reference_within_quantization_error_of_fp32(head_dim, block_size, num_heads,
                                                         num_kv_heads, num_queries):
    d = make_attention_inputs(5, num_seqs=2, num_heads=num_heads, num_kv_heads=num_kv_heads,
                              head_dim=head_dim, context_lens=[700, 259], num_queries=num_queries)
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=block_size, smooth_k=True)
    m = metrics(attention_int8(d["q"], cache), attention_fp32(d["q"], d["k"], d["v"], d["context_lens"]))
    assert m["rel_l1"] < 0.04 and m["cos_sim"] > 0.999


def test_decode_partitions_equal_one_partition():
    d = make_attention_inputs(6, **SMALL)
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], smooth_k=True)
    many = attention_int8(d["q"], cache)                                   # 2 and 1 partitions of 256
    one = attention_int8(d["q"], cache, partition_size=320)                # one partition each
    # W differs between the two only by a per-(row, partition) factor, which the group scales absorb.
    np.testing.assert_allclose(many, one, atol=1e-6)


def test_decode_reduce_weights_partitions_by_their_mass():
    d = make_attention_inputs(7, context_lens=600)
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"])
    p = decode_int8_partials(d["q"], cache)
    assert p.tmp_out.shape[2] == 3 and np.all(np.isfinite(p.max_logits))
    w = p.exp_sums * np.exp(p.max_logits - p.max_logits.max(-1, keepdims=True))
    want = np.einsum("shp,shpd->shd", w / w.sum(-1, keepdims=True), p.tmp_out)
    np.testing.assert_allclose(reduce_partitions(p), want, rtol=1e-5, atol=1e-7)


def test_prefill_with_one_query_equals_decode():
    d = make_attention_inputs(8, **SMALL)
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=32)
    np.testing.assert_allclose(attention_int8(d["q"][:, None], cache)[:, 0], attention_int8(d["q"], cache),
                               atol=1e-6)


@pytest.mark.parametrize("num_queries", [None, 3])
def test_gqa_maps_query_head_h_to_kv_head_h_over_ratio(num_queries):
    d = make_attention_inputs(9, num_seqs=1, num_heads=6, num_kv_heads=2, head_dim=64,
                              context_lens=200, num_queries=num_queries)
    q, k, v, lens = d["q"], d["k"], d["v"], d["context_lens"]
    k_rep, v_rep = np.repeat(k, 3, axis=2), np.repeat(v, 3, axis=2)     # one kv head per query head
    np.testing.assert_allclose(attention_fp32(q, k, v, lens), attention_fp32(q, k_rep, v_rep, lens), rtol=1e-6)
    np.testing.assert_array_equal(attention_bf16(q, k, v, lens), attention_bf16(q, k_rep, v_rep, lens))
    gqa = attention_int8(q, build_paged_cache(k, v, lens))
    rep = attention_int8(q, build_paged_cache(k_rep, v_rep, lens))
    np.testing.assert_allclose(gqa, rep, rtol=1e-6, atol=1e-7)
    swapped = attention_int8(q, build_paged_cache(k[:, :, ::-1], v[:, :, ::-1], lens))
    assert metrics(swapped, gqa)["rel_l1"] > 0.1                        # the mapping is really exercised


def test_smooth_k_leaves_softmax_unchanged():
    d = make_attention_inputs(10, **SMALL)
    q, k, v, lens = d["q"], d["k"], d["v"], d["context_lens"]
    cache = build_paged_cache(k, v, lens, smooth_k=True)
    smoothed = k - cache.k_mean[:, None]
    np.testing.assert_allclose(attention_fp32(q, smoothed, v, lens), attention_fp32(q, k, v, lens),
                               rtol=1e-4, atol=1e-6)


def test_without_smooth_k_equals_a_cache_built_without_it():
    """The run's "without smooth-K" figure re-quantizes K alone and shares V: byte for byte what
    build_paged_cache(smooth_k=False) makes on the same block tables, and not the smoothed K."""
    d = make_attention_inputs(11, **SMALL)
    smooth = build_paged_cache(d["k"], d["v"], d["context_lens"], smooth_k=True, seed=4)
    plain = build_paged_cache(d["k"], d["v"], d["context_lens"], smooth_k=False, block_tables=smooth.block_tables)
    got = without_smooth_k(smooth, d["k"])
    for f in ("k_cache", "k_scale", "v_cache", "v_scale", "block_tables", "slot_mapping"):
        np.testing.assert_array_equal(getattr(got, f), getattr(plain, f), err_msg=f)
    assert got.v_cache is smooth.v_cache and got.k_mean is None
    assert not np.array_equal(got.k_cache, smooth.k_cache)


# -- the quantized PV against ALGORITHMS.md written out token by token --------------------------

def naive_pv(w, vq, grouping):
    """Per (row, chunk): scales over the grouping's token sets, each MMAC j sums its own token set
    {16r + 8j + b} in int, times the scale assigned to MMAC j."""
    rows, T = w.shape
    out = np.zeros((rows, vq.shape[1]), np.float64)
    t = np.arange(64)
    for r in range(rows):
        for c in range(T // 64):
            wc, vc = w[r, 64 * c:64 * c + 64].astype(np.float32), vq[64 * c:64 * c + 64].astype(np.int64)
            group = mmac_set(t) if grouping == "fragment" else contiguous_group(t)
            amax = np.array([np.abs(wc[group == g]).max() for g in (0, 1)], np.float32)
            scale = amax / np.float32(127)
            inv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
            wq = np.clip(np.rint(wc * inv[group]), -127, 127).astype(np.int64)
            for j in (0, 1):
                ks = mmac_set(t) == j
                out[r] += (wq[ks] @ vc[ks]).astype(np.float32) * scale[j]
    return out


@pytest.mark.parametrize("grouping", ["fragment", "contiguous"])
def test_grouped_pv_matches_token_by_token_spec(grouping):
    rng = np.random.default_rng(11)
    w = (rng.exponential(1, (3, 192)) * rng.lognormal(0, 1, 192)).astype(np.float32)
    w[1, 64:128] = 0                                        # an all-zero chunk: scale 0, no NaN
    vq = rng.integers(-127, 128, (192, 16)).astype(np.int8)
    got = pv_int8_chunks(w, vq, grouping).sum(axis=1)
    np.testing.assert_allclose(got, naive_pv(w, vq, grouping), rtol=1e-5, atol=1e-5)


def test_mmac_token_sets_are_the_seeds():
    t = np.arange(64)
    assert t[mmac_set(t) == 0].tolist() == [*range(0, 8), *range(16, 24), *range(32, 40), *range(48, 56)]
    assert t[contiguous_group(t) == 0].tolist() == list(range(32))


@settings(max_examples=50, deadline=None)
@given(arrays(np.float32, (2, 128), elements=st.floats(0, 1e3, width=32)))
def test_fragment_scales_are_each_mmac_sets_absmax(w):
    wq, sw = quantize_w(w, "fragment")
    t = np.arange(128)
    for c in range(2):
        for j in range(2):
            sel = (t // 64 == c) & (mmac_set(t) == j)
            amax = w[:, sel].max(axis=1)
            live = amax >= np.float32(127) / np.finfo(np.float32).max   # else 127/amax overflows: scale 0
            np.testing.assert_array_equal(sw[:, c, j], np.where(live, amax / np.float32(127), 0))
            assert np.all(np.abs(wq[:, sel].astype(np.float32) * sw[:, c, j, None] - w[:, sel])
                          <= sw[:, c, j, None] * 0.5000001 + 1e-30)


# -- metrics and the project's figures ------------------------------------------------------------

def test_metrics_definitions():
    rng = np.random.default_rng(12)
    ref = rng.standard_normal(1000)
    m = metrics(ref * 1.01, ref)
    assert m["rel_l1"] == pytest.approx(0.01) and m["cos_sim"] == pytest.approx(1.0)
    assert m["rms"] == pytest.approx(0.01 * np.sqrt(np.mean(ref**2)))
    assert m["max_abs"] == pytest.approx(0.01 * np.abs(ref).max())
    assert metrics(-ref, ref)["cos_sim"] == pytest.approx(-1.0)


@pytest.mark.parametrize("context_len", [4096, 8192, 16384])
def test_figures_fragment_within_seed_bound_and_contiguous_ten_times_worse(context_len):
    row = accuracy_row(context_len)
    # max_abs scales with V and moves with the seed (1.4e-3 to 4.6e-3 over seeds); rel L1 stays ~2%
    assert row["fragment_rel_l1"] <= 0.025 and row["fragment"] <= 3e-3, row
    assert row["contiguous"] >= 10 * row["fragment"], row
    assert row["fragment_no_smooth"] > row["fragment"], row          # smooth-K's gain is visible


def test_round_bf16_is_ml_dtypes_bfloat16_bit_for_bit():
    """The references' bf16 rounding (no ml_dtypes import on a run's path) equals ml_dtypes' cast:
    ties to even, subnormals, the largest finite values rounding to infinity, infinities, NaN."""
    import ml_dtypes
    from kernels_py.reference.attention import round_bf16
    rng = np.random.default_rng(0)
    bits = np.concatenate([rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32),
                           np.array([0, 0x80000000, 0x00008000, 0x00018000, 0x3F808000, 0x3F818000, 0x3F807FFF,
                                     0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0xFF7F8000, 0x7F7F7FFF, 0x7F800000,
                                     0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF], np.uint32)])
    x = bits.view(np.float32)
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    got = round_bf16(x)
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all()
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
    assert (np.signbit(got[nan]) == np.signbit(want[nan])).all()
    rows = x[:200_000].reshape(400, -1)[:, :100]           # a strided view rounds as its copy does
    np.testing.assert_array_equal(round_bf16(rows).view(np.uint32), round_bf16(rows.copy()).view(np.uint32))


def test_metrics_are_the_textbook_formulas_bit_for_bit_and_leave_their_inputs():
    """metrics reuses its float64 copies in place: the same numbers as the formulas written out,
    and neither argument (float32 or float64) is touched."""
    from kernels_py.reference.attention import metrics
    rng = np.random.default_rng(3)
    a = rng.normal(size=(4, 33)).astype(np.float32)
    for out, ref in ((a, a + np.float32(1e-3) * rng.normal(size=a.shape).astype(np.float32)),
                     (a.astype(np.float64), -a.astype(np.float64))):
        keep = out.copy(), ref.copy()
        o, r = out.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
        d = o - r
        want = dict(max_abs=float(np.abs(d).max()), rms=float(np.sqrt(np.mean(d * d))),
                    cos_sim=float(o @ r / np.sqrt((o @ o) * (r @ r))), rel_l1=float(np.abs(d).sum() / np.abs(r).sum()))
        assert metrics(out, ref) == want
        assert np.array_equal(out, keep[0]) and np.array_equal(ref, keep[1])


@pytest.mark.parametrize("parallel", [0, None])
def test_metrics_against_several_refs_is_metrics_of_each_bit_for_bit(monkeypatch, parallel):
    """metrics_against makes out's float64 copy once and reads a ref equal to out byte for byte
    through it: each ref's numbers are metrics' own (a ref off by noise, equal, equal with an inf
    or a NaN in both, +0 against -0, float64, strided, of another shape), and no input is touched;
    the first other ref's copy made beside out's (parallel 0: at every size) or after it."""
    from kernels_py.reference import attention
    from kernels_py.reference.attention import metrics, metrics_against
    if parallel is not None:
        monkeypatch.setattr(attention, "PARALLEL_COPY", parallel)
    rng = np.random.default_rng(4)
    a = rng.normal(size=(2, 40, 3, 16)).astype(np.float32)
    inf, nan = a.copy(), a.copy()
    inf[0, 3, 1, 2], nan[1, 0, 0, 5] = np.inf, np.nan
    big = a.astype(np.float64) * 1e160                    # float64: o @ o overflows, no inf in o
    cases = [(a, {"noise": a + np.float32(1e-3) * rng.normal(size=a.shape).astype(np.float32), "same": a.copy(),
                  "f64": a.astype(np.float64), "strided": np.ascontiguousarray(a.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3),
                  "flat": a.reshape(-1).copy(), "negated": -a}),
             (inf, {"same": inf.copy(), "other": a}), (nan, {"same": nan.copy()}),
             (big, {"same": big.copy(), "noise": a}),
             (a, {"other": -a, "same": a.copy(), "noise": a + np.float32(1e-3)}),     # others before and after same
             (np.zeros(8, np.float32), {"zero": np.zeros(8, np.float32), "minus_zero": -np.zeros(8, np.float32)})]
    for out, refs in cases:
        keep = out.copy(), {k: r.copy() for k, r in refs.items()}
        with np.errstate(all="ignore"):
            got = metrics_against(out, refs)
            want = {k: metrics(out, r) for k, r in refs.items()}
        assert got.keys() == want.keys()
        for k in want:
            assert {m: repr(v) for m, v in got[k].items()} == {m: repr(v) for m, v in want[k].items()}, k
        assert np.array_equal(out, keep[0], equal_nan=True)
        assert all(np.array_equal(r, keep[1][k], equal_nan=True) for k, r in refs.items())


@pytest.mark.parametrize("leaf", [128, 136, 1000, None])
def test_metrics_against_sums_leaf_by_leaf_as_numpy_sums_the_whole(monkeypatch, leaf):
    """Its sums, made a leaf at a time down numpy's pairwise tree, are np.add.reduce's over the
    whole array bit for bit: sizes around the splits, a NaN, an inf, wide magnitudes."""
    from kernels_py.reference import attention
    if leaf is not None:
        monkeypatch.setattr(attention, "LEAF", leaf)
    rng = np.random.default_rng(5)
    for n in [1, 7, 129, 1000, 4097, 3 * attention.LEAF + 37]:
        a = (rng.standard_normal(n) * np.exp(4 * rng.standard_normal(n))).astype(np.float32)
        refs = {"noise": a + np.float32(1e-2) * rng.normal(size=n).astype(np.float32), "same": a.copy()}
        bad = a.copy()
        bad[n // 2] = np.nan if n % 2 else np.inf
        for out in (a, bad):
            with np.errstate(all="ignore"):
                got = attention.metrics_against(out, refs)
                want = {k: attention.metrics(out, r) for k, r in refs.items()}
            for k in want:
                assert {m: repr(v) for m, v in got[k].items()} == {m: repr(v) for m, v in want[k].items()}, (n, k)


def test_the_kv_cache_runners_dequantized_caches_are_gather_kvs_bit_for_bit():
    """dequantized_kv writes gather_kv's products in place: the same floats, sequence after sequence."""
    from kernels_py.host.runners import dequantized_kv
    from kernels_py.reference.int8_cache import gather_kv
    d = make_attention_inputs(seed=2, num_seqs=2, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[40, 23])
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True, seed=2)
    kv = [gather_kv(cache, s, add_mean=False) for s in range(2)]
    want = np.stack([np.concatenate([k for k, _ in kv]), np.concatenate([v for _, v in kv])])
    got = dequantized_kv(cache, np.array([0, 40, 63]))
    assert got.dtype == want.dtype and np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_all_distinct_says_what_np_unique_says():
    """The cache's slot and block checks sort instead of calling np.unique (which imports numpy.ma)."""
    from kernels_py.reference.int8_cache import all_distinct
    rng = np.random.default_rng(5)
    for _ in range(500):
        a = rng.integers(-5, 60, int(rng.integers(0, 40)))
        assert all_distinct(a) == (np.unique(a).size == a.size)
    assert all_distinct(np.array([], np.int64)) and not all_distinct(np.array([[3, 1], [2, 3]]))


@pytest.mark.parametrize("smooth_k", [True, False])
def test_the_kv_cache_runners_fp32_reference_is_k_less_its_mean_and_v_whether_generated_or_given(smooth_k):
    """Generated inputs of one sequence are K and V in one block, and the runner takes K's mean off
    in place there (_kv_block); given inputs are copied: either way the fp32 reference is K - k_mean
    and V byte for byte, the given arrays untouched, and the outputs the same."""
    from kernels_py.host.config import RunConfig
    from kernels_py.host.runners import KERNELS, Swap, _kv_block
    from kernels_py.workloads.inputs import prepare_inputs
    cfg = RunConfig(context=48, heads=4, kv_heads=2, head_dim=64, smooth_k=smooth_k, provenance=False)
    given = prepare_inputs(inputs=None, queries=False, **cfg.shape())
    keep = {n: a.copy() for n, a in given.items()}
    assert _kv_block(given["k"], given["v"], 48) is not None
    cache = build_paged_cache(keep["k"], keep["v"], keep["context_lens"], block_size=16, smooth_k=smooth_k, seed=0)
    mean = cache.k_mean[0] if smooth_k else np.zeros_like(keep["k"][0, 0])
    want = np.stack([keep["k"][0] - mean, keep["v"][0]])
    made = KERNELS["int8_kv_cache"](cfg, None, Swap())
    from_given = KERNELS["int8_kv_cache"](cfg, given, Swap())
    for ran in (made, from_given):
        assert ran.refs["fp32"].tobytes() == want.tobytes()
    assert made.out.tobytes() == from_given.out.tobytes()
    assert all(given[n].tobytes() == keep[n].tobytes() for n in keep)


@pytest.mark.parametrize("grouping,partition_size,pv", [("fragment", 256, "int8"), ("contiguous", 256, "int8"),
                                                        ("fragment", 512, "int8"), ("fragment", 256, "bf16")])
def test_int8_references_sharing_v_give_the_bits_of_each_alone(grouping, partition_size, pv):
    """attention_int8_of on a cache and its without_smooth_k twin (V's operands made once): each
    output the bytes of attention_int8 on that cache alone; caches holding other V are refused."""
    from gfxsim.errors import ArgumentError
    from kernels_py.reference.attention import attention_int8_of, decode_int8_partials_of
    d = make_attention_inputs(11, num_seqs=2, num_heads=8, num_kv_heads=2, head_dim=64, context_lens=[700, 259])
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], smooth_k=True)
    plain = without_smooth_k(cache, d["k"])
    kw = dict(grouping=grouping, partition_size=partition_size, pv=pv)
    both = attention_int8_of(d["q"], (cache, plain), **kw)
    alone = [attention_int8(d["q"], c, **kw) for c in (cache, plain)]
    assert len(both) == 2 and all(b.tobytes() == a.tobytes() for b, a in zip(both, alone))
    assert both[0].tobytes() != both[1].tobytes()                  # smooth-K moves the numbers
    parts = decode_int8_partials_of(d["q"], (plain, cache), **kw)
    for p, c in zip(parts, (plain, cache)):
        one = decode_int8_partials(d["q"], c, **kw)
        for name in ("tmp_out", "max_logits", "exp_sums"):
            assert getattr(p, name).tobytes() == getattr(one, name).tobytes()
    other = build_paged_cache(d["k"], d["v"] * 2, d["context_lens"], smooth_k=True)
    with pytest.raises(ArgumentError):
        attention_int8_of(d["q"], (cache, other), **kw)


@pytest.mark.parametrize("k_blocks", [1, 3, 64])
@pytest.mark.parametrize("block_size", [16, 32])
def test_qk_scores_from_the_cache_in_tiles_are_the_whole_k_scores_bit_for_bit(monkeypatch, k_blocks, block_size):
    """qk_int8_scores_of (K converted a few blocks at a time) gives the bytes of qk_int8_scores on
    the whole kv head's K, for every sequence and kv head: tails that end inside a block and inside
    a tile, K bytes over the whole int8 range (the largest exact products)."""
    from kernels_py.reference import attention as R
    from kernels_py.reference.int8_cache import quantize_int8
    monkeypatch.setattr(R, "K_BLOCKS", k_blocks)
    d = make_attention_inputs(5, num_seqs=3, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[700, 97, 33])
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=block_size, smooth_k=True)
    rng = np.random.default_rng(0)
    cache.k_cache[...] = rng.integers(-127, 128, cache.k_cache.shape)
    cache.k_cache.flat[::7] = 127
    for s in range(3):
        for g in range(2):
            qq, sq = quantize_int8(d["q"][s, 2 * g:2 * g + 2])
            qq[0, ::3] = -127
            whole = R.qk_int8_scores(qq, sq, *R._k_operands(cache, s, g))
            tiled = R.qk_int8_scores_of(cache, s, g, qq, sq)
            assert tiled.dtype == whole.dtype and tiled.shape == whole.shape
            assert tiled.tobytes() == whole.tobytes()
