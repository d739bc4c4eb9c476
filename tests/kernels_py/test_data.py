"""The data generator's documented traits and the INT8 cache producer's layout and rounding."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from kernels_py.workloads.data import AttentionDataSpec, make_attention_inputs
from kernels_py.reference.int8_cache import (POISON_I8, build_paged_cache, gather_int8, gather_kv, int8_kv_cache,
                                       make_block_tables, quantize_int8, quantize_with_amax)

SPEC = AttentionDataSpec()


def centred_logits(q, k):
    """[rows, ctx] q·(k - mean k)/sqrt(d) for one sequence and kv head."""
    kc = k - k.mean(axis=0)
    return q.astype(np.float64) @ kc.T / np.sqrt(k.shape[-1])


# -- generator ----------------------------------------------------------------------------------

def test_seeded_and_shaped():
    a = make_attention_inputs(1, num_seqs=2, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[100, 70])
    b = make_attention_inputs(1, num_seqs=2, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[100, 70])
    c = make_attention_inputs(2, num_seqs=2, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[100, 70])
    for n in a:
        np.testing.assert_array_equal(a[n], b[n])
    assert not np.allclose(a["q"], c["q"])
    assert a["q"].shape == (2, 4, 64) and a["k"].shape == a["v"].shape == (2, 100, 2, 64)
    assert a["q"].dtype == a["k"].dtype == np.float32 and a["context_lens"].tolist() == [100, 70]
    assert np.isnan(a["k"][1, 70:]).all() and np.isfinite(a["k"][1, :70]).all()   # poisoned padding
    p = make_attention_inputs(1, num_queries=9, context_lens=50, head_dim=64)
    assert p["q"].shape == (1, 9, 8, 64)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("case", [dict(num_seqs=1, context_lens=[100]), dict(num_seqs=3, context_lens=[100, 70, 33]),
                                  dict(num_seqs=2, context_lens=[20, 90], num_queries=5)])
def test_without_queries_k_v_and_lens_are_the_same_bits(monkeypatch, case, parallel):
    """queries=False (int8_kv_cache's inputs): no q, and k, v, context_lens byte for byte those made
    with the queries, one sequence or several (the draws a later sequence follows kept), V made
    beside K or after it."""
    from kernels_py.workloads import data
    monkeypatch.setattr(data, "_PARALLEL", 1 if parallel else 1 << 40)
    kw = dict(num_heads=4, num_kv_heads=2, head_dim=64, **case)
    full, bare = make_attention_inputs(3, **kw), make_attention_inputs(3, queries=False, **kw)
    assert "q" not in bare and set(bare) == set(full) - {"q"}
    for n in bare:
        assert bare[n].dtype == full[n].dtype and bare[n].shape == full[n].shape
        assert bare[n].tobytes() == full[n].tobytes(), n


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("case,heads", [(dict(num_seqs=1, context_lens=[100]), 1),
                                        (dict(num_seqs=1, context_lens=[100], num_queries=32), 1),
                                        (dict(num_seqs=3, context_lens=[100, 70, 33]), 3),
                                        (dict(num_seqs=2, context_lens=[20, 90], num_queries=5), 5),
                                        (dict(num_seqs=1, context_lens=[64], num_queries=4), 8)])
def test_the_first_query_heads_are_the_same_bits(monkeypatch, case, heads, parallel):
    """query_heads=H (sage_attention reads query head 0 alone): q of the first H heads, and k, v,
    context_lens, byte for byte those made with every head, one sequence or several (a sequence's
    draws made for every head where a later sequence follows them), V beside K or after it."""
    from kernels_py.workloads import data
    monkeypatch.setattr(data, "_PARALLEL", 1 if parallel else 1 << 40)
    kw = dict(num_heads=8, num_kv_heads=2, head_dim=64, **case)
    full, few = make_attention_inputs(3, **kw), make_attention_inputs(3, query_heads=heads, **kw)
    assert set(few) == set(full)
    assert few["q"].shape == full["q"][..., :heads, :].shape
    assert few["q"].tobytes() == np.ascontiguousarray(full["q"][..., :heads, :]).tobytes()
    for n in ("k", "v", "context_lens"):
        assert few[n].dtype == full[n].dtype and few[n].tobytes() == full[n].tobytes(), n


EARLY_SHAPE = dict(num_heads=8, num_kv_heads=2, head_dim=64)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("seed,context", [(3, 100), (0, 1), (11, 257)])
@pytest.mark.parametrize("asked", [dict(), dict(queries=False), dict(query_heads=1, num_queries=32),
                                   dict(num_queries=5)], ids=["decode", "kv_cache", "sage", "prefill"])
def test_normals_begun_early_are_taken_and_give_the_same_bits(monkeypatch, asked, seed, context, parallel):
    """start_normals (`gfxsim run` begins it before the runners load): the next make_attention_inputs
    of its key takes its block (k and v are views of it) and returns q, k, v, context_lens byte for
    byte those drawn in place, whatever queries the runner asks for, V filled beside K or after it."""
    from kernels_py.workloads import data
    monkeypatch.setattr(data, "_PARALLEL", 1 if parallel else 1 << 40)
    asked = {k: min(v, context) if k == "num_queries" else v for k, v in asked.items()}
    kw = dict(EARLY_SHAPE, num_seqs=1, context_lens=[context], **asked)
    drawn = make_attention_inputs(seed, **kw)
    data.start_normals(seed, context=context, **EARLY_SHAPE)
    (_, done), = data._EARLY
    early = make_attention_inputs(seed, **kw)
    assert data._EARLY == []
    block = done.result()
    assert early["k"].base is block and early["v"].base is block           # taken, not drawn again
    assert set(early) == set(drawn)
    for n in drawn:
        assert early[n].dtype == drawn[n].dtype and early[n].shape == drawn[n].shape
        assert early[n].tobytes() == drawn[n].tobytes(), n


@pytest.mark.parametrize("other", [dict(seed=4), dict(context_lens=[99]), dict(num_heads=16),
                                   dict(num_kv_heads=1), dict(head_dim=128), dict(num_seqs=2, context_lens=[100, 50]),
                                   dict(spec=AttentionDataSpec(v_std=1.0))])
def test_normals_begun_for_another_key_are_dropped(other):
    """A make_attention_inputs whose seed, shape or spec is not the early block's draws its own (the
    same bits as with nothing begun) and drops the block: none waits after it."""
    from kernels_py.workloads import data
    kw = dict(dict(EARLY_SHAPE, num_seqs=1, context_lens=[100]), **{k: v for k, v in other.items() if k != "seed"})
    seed = other.get("seed", 3)
    drawn = make_attention_inputs(seed, **kw)
    data.start_normals(3, context=100, **EARLY_SHAPE)
    (_, done), = data._EARLY
    got = make_attention_inputs(seed, **kw)
    assert data._EARLY == [] and got["k"].base is not done.result()
    for n in drawn:
        assert got[n].tobytes() == drawn[n].tobytes(), n


@pytest.mark.parametrize("rows", [16, 256])
@pytest.mark.parametrize("case", [dict(num_seqs=1, context_lens=[1000]), dict(num_seqs=2, context_lens=[700, 333]),
                                  dict(num_seqs=1, context_lens=[600], num_queries=5), dict(num_seqs=1, context_lens=[7])])
def test_k_passes_shared_with_v_thread_give_the_serial_bits(monkeypatch, case, rows):
    """K's scaling and its channel sums and squares, chunk by chunk on this thread and V's (once V is
    made), folded in token order: q, k and v byte for byte those of the serial loops."""
    from kernels_py.workloads import data
    kw = dict(num_heads=4, num_kv_heads=2, head_dim=64, **case)
    monkeypatch.setattr(data, "_ROWS", rows)
    monkeypatch.setattr(data, "_PARALLEL", 1 << 40)
    serial = make_attention_inputs(5, **kw)
    monkeypatch.setattr(data, "_PARALLEL", 1)
    parallel = make_attention_inputs(5, **kw)
    assert set(serial) == set(parallel)
    for n in serial:
        assert serial[n].dtype == parallel[n].dtype and serial[n].tobytes() == parallel[n].tobytes(), n


def test_each_chunk_is_in_order_whoever_computes_it():
    from concurrent.futures import ThreadPoolExecutor
    from kernels_py.workloads import data
    seen = []
    with ThreadPoolExecutor(1) as pool:
        got = data._each_chunk(lambda c, buf: (seen.append(c), c, buf)[1:], 5000, pool, scratch=lambda: "mine")
    assert [c for c, _ in got] == list(range(0, 5000, data._ROWS)) and all(b == "mine" for _, b in got)
    assert sorted(seen) == list(range(0, 5000, data._ROWS))          # each chunk once


def test_each_chunk_waits_only_for_the_chunks_the_other_thread_took():
    """A pool still busy (V being made) is not waited for; an error in a chunk is raised here,
    whichever thread met it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from kernels_py.workloads import data
    release = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        pool.submit(release.wait, 30)
        got = data._each_chunk(lambda c, buf: c, 3000, pool)     # returns while the pool is busy
        assert got == list(range(0, 3000, data._ROWS)) and not release.is_set()
        release.set()

    def boom(c, buf):
        if c == 2 * data._ROWS:
            raise ValueError("chunk 2")
        return c

    with ThreadPoolExecutor(1) as pool, pytest.raises(ValueError, match="chunk 2"):
        data._each_chunk(boom, 5000, pool)


def test_rows_are_peaked_on_the_sink_and_the_planted_keys():
    d = make_attention_inputs(0, context_lens=4096)
    s = centred_logits(d["q"][0], d["k"][0, :, 0])
    # The sink's and the planted keys' logits are exact by construction.
    assert np.all(s[:, 0] >= 0.8 * SPEC.sink_logit - 1e-3)
    top = np.sort(s[:, 1:], axis=1)[:, -SPEC.peaks:]
    assert np.all(top >= 0.7 * SPEC.peak_logit - 1e-3)
    bulk = np.median(np.abs(s - np.median(s, axis=1, keepdims=True)), axis=1) * 1.4826   # robust std
    assert np.all((bulk > 1.2) & (bulk < 2.0)), bulk
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    assert np.all((p[:, 0] > 0.2) & (p[:, 0] < 0.8))                      # sink mass at 4K
    rest = p[:, 1:]
    assert np.all(rest.max(axis=1) > 15 * rest.mean(axis=1))              # peaked beyond the sink


def test_prefill_peaks_are_visible_to_their_query():
    d = make_attention_inputs(1, num_queries=16, context_lens=64, head_dim=64, num_heads=2)
    for i in range(16):
        pos = 64 - 16 + i
        s = centred_logits(d["q"][0, i], d["k"][0, :, 0])
        assert np.all(np.sort(s[:, 1:pos + 1], axis=1)[:, -SPEC.peaks:] >= 0.7 * SPEC.peak_logit - 1e-3)


def test_k_has_outlier_channels_that_smooth_k_removes_from_the_absmax():
    d = make_attention_inputs(0, context_lens=2048, num_kv_heads=2, num_heads=8)
    k = d["k"][0]
    mean = np.abs(k.mean(axis=0))                                          # [kv_heads, d]
    for g in range(2):
        assert np.sum(mean[g] > 0.75 * SPEC.k_outlier_offset - 1) == SPEC.k_outliers
    amax = np.abs(k).max(axis=-1)
    amax_smooth = np.abs(k - k.mean(axis=0)).max(axis=-1)
    assert np.median(amax / amax_smooth) > 2


def test_v_per_token_scale_spread_is_log_normal():
    d = make_attention_inputs(0, context_lens=8192)
    norms = np.linalg.norm(d["v"][0, 1:, 0], axis=-1)                      # the sink's V is scaled down
    assert np.std(np.log(norms)) == pytest.approx(SPEC.v_token_sigma, rel=0.1)
    assert np.median(norms) / np.sqrt(128) == pytest.approx(SPEC.v_std, rel=0.1)


def test_bad_generator_arguments_raise():
    with pytest.raises(ValueError, match="head_dim"):
        make_attention_inputs(head_dim=96)
    with pytest.raises(ValueError, match="multiple"):
        make_attention_inputs(num_heads=6, num_kv_heads=4)
    with pytest.raises(ValueError, match="num_queries"):
        make_attention_inputs(context_lens=4, num_queries=8)


# -- quantization and the paged cache -------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(arrays(np.float32, (4, 64), elements=st.floats(-1e4, 1e4, width=32)))
def test_per_token_quantization_round_trip_bound(x):
    q, scale = quantize_int8(x)
    assert q.dtype == np.int8 and np.all(np.abs(q.astype(int)) <= 127)
    err = np.abs(q.astype(np.float32) * scale[:, None] - x)
    assert np.all(err <= scale[:, None] * np.float32(0.5 + 1e-5) + 1e-35)   # half a step
    amax = np.abs(x).max(axis=1)
    hit = amax >= np.float32(127) / np.finfo(np.float32).max                 # else scale 0, q 0
    assert np.all(np.abs(q[hit]).max(axis=1) == 127)                          # the absmax lands on ±127


def test_quantization_rounds_half_to_even_and_zero_amax_gives_zero_scale():
    q, s = quantize_with_amax(np.float32([0.5, 1.5, 2.5, -0.5, -2.5]), np.float32(127))
    assert q.tolist() == [0, 2, 2, 0, -2] and s == 1
    q, s = quantize_int8(np.zeros((2, 16), np.float32))
    assert np.all(q == 0) and np.all(s == 0)


@pytest.mark.parametrize("block_size,head_dim,smooth_k", [(16, 128, False), (32, 64, True)])
def test_cache_layout_and_round_trip(block_size, head_dim, smooth_k):
    d = make_attention_inputs(3, num_seqs=3, num_heads=4, num_kv_heads=2, head_dim=head_dim,
                              context_lens=[75, 130, 33])
    k, v, lens = d["k"], d["v"], d["context_lens"]
    cache = build_paged_cache(k, v, lens, block_size=block_size, smooth_k=smooth_k, seed=5)
    assert cache.k_cache.shape[1:] == (2, head_dim // 16, block_size, 16)
    assert cache.v_cache.shape[1:] == (2, head_dim, block_size)
    # Blocks are shuffled, distinct across sequences, and not the identity.
    used = np.concatenate([cache.block_tables[s, :-(-n // block_size)] for s, n in enumerate(lens)])
    assert np.unique(used).size == used.size and not np.array_equal(used, np.arange(used.size))
    # The index formulas of ALGORITHMS.md, element by element, for one token.
    s, t, g = 1, 100, 1
    kk = k[s, t, g] - (cache.k_mean[s, g] if smooth_k else 0)
    kq, ks = quantize_int8(kk)
    vq, vs = quantize_int8(v[s, t, g])
    blk, off = cache.block_tables[s, t // block_size], t % block_size
    assert cache.slot_mapping[lens[0] + t] == blk * block_size + off
    for dd in range(head_dim):
        assert cache.k_cache[blk, g, dd // 16, off, dd % 16] == kq[dd]
        assert cache.v_cache[blk, g, dd, off] == vq[dd]
    assert cache.k_scale[blk, g, off] == ks and cache.v_scale[blk, g, off] == vs
    # Gathering back: within half a step of the inputs.
    for s, n in enumerate(lens):
        kd, vd = gather_kv(cache, s)
        _, ksc, _, vsc = gather_int8(cache, s)
        assert np.all(np.abs(kd - k[s, :n]) <= ksc[..., None] * 0.51 + 1e-6)
        assert np.all(np.abs(vd - v[s, :n]) <= vsc[..., None] * 0.51 + 1e-6)
    # Slots nobody wrote stay poisoned.
    written = np.zeros(cache.k_scale.shape[0] * block_size, bool)
    written[cache.slot_mapping] = True
    written = written.reshape(-1, block_size)
    assert np.all(np.isnan(cache.k_scale[:, 0][~written]))
    assert np.all(cache.v_cache.transpose(0, 3, 1, 2)[~written] == POISON_I8)


def test_producer_skips_slot_minus_one():
    tables, nb = make_block_tables([32], 16, seed=0)
    k_cache = np.zeros((nb, 1, 4, 16, 16), np.int8)
    v_cache = np.zeros((nb, 1, 64, 16), np.int8)
    k_scale, v_scale = np.zeros((nb, 1, 16), np.float32), np.zeros((nb, 1, 16), np.float32)
    x = np.ones((2, 1, 64), np.float32)
    int8_kv_cache(x, x, np.array([-1, 5], np.int32), k_cache, v_cache, k_scale, v_scale)
    assert k_scale[0, 0, 5] == np.float32(1 / 127) and np.count_nonzero(k_scale) == 1
