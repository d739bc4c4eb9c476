"""int8_kv_cache's runner fills the numpy producer's cache on a thread while the kernel is
simulated (runners.PRODUCER_BESIDE), from K already less its mean where the runner took it off in
place, and begins the metrics' float64 work there too (runners.METRICS_AHEAD,
attention.MetricsAhead): the cache's bytes are build_paged_cache's, and the run (output,
references, metrics, findings) is the one with all of it after, generated or given inputs, smooth-K
on or off; metrics_against with a MetricsAhead gives its numbers without one, bit for bit."""
import numpy as np
import pytest

from kernels_py.reference.int8_cache import build_paged_cache, fill_paged_cache
from kernels_py.workloads.data import make_attention_inputs

CACHE = ("k_cache", "v_cache", "k_scale", "v_scale")


def _same_cache(a, b):
    for name in CACHE:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name


@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("smooth_k", [True, False])
def test_filled_later_from_k_less_its_mean_is_build_paged_cache(block_size, smooth_k):
    """Uneven contexts (whole blocks and single slots), several sequences: filling afterwards,
    with the mean given or from K already less it, gives build_paged_cache's bytes."""
    d = make_attention_inputs(3, num_seqs=3, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[300, 37, 129],
                              queries=False)
    want = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=block_size, smooth_k=smooth_k, seed=2)
    lens = d["context_lens"]
    for less in (False, True):
        got = build_paged_cache(d["k"], d["v"], lens, block_size=block_size, smooth_k=smooth_k, seed=2, fill=False)
        assert all(not np.array_equal(getattr(got, n), getattr(want, n), equal_nan=True) for n in CACHE)
        if less:                                  # the runner's block: K - mean taken off in f32 first
            mean = got.k_mean if smooth_k else np.zeros((3,) + d["k"].shape[2:], np.float32)
            k_rows = [d["k"][s, :n] - mean[s] for s, n in enumerate(lens)]
            fill_paged_cache(got, k_rows, [d["v"][s, :n] for s, n in enumerate(lens)])
        else:
            fill_paged_cache(got, [d["k"][s, :n] for s, n in enumerate(lens)],
                             [d["v"][s, :n] for s, n in enumerate(lens)], key_offset=got.k_mean)
        _same_cache(got, want)


def _run(monkeypatch, beside, cfg, inputs):
    from kernels_py.host import runners
    monkeypatch.setattr(runners, "PRODUCER_BESIDE", beside)
    monkeypatch.setattr(runners, "METRICS_AHEAD", beside)
    return runners.KERNELS["int8_kv_cache"](cfg, inputs, runners.Swap())


@pytest.mark.parametrize("smooth_k", [True, False])
@pytest.mark.parametrize("given", [False, True])
def test_the_run_is_the_one_with_the_producer_first(monkeypatch, smooth_k, given):
    from kernels_py.host.config import RunConfig
    from kernels_py.reference.attention import metrics_against
    cfg = RunConfig(context=80, heads=4, kv_heads=2, head_dim=64, smooth_k=smooth_k, provenance=True)
    inputs = None
    if given:
        inputs = make_attention_inputs(4, num_seqs=2, num_heads=4, num_kv_heads=2, head_dim=64,
                                       context_lens=[80, 51])
        inputs["block_tables"] = np.array([[4, 0, 2, 6, 9], [1, 3, 7, 5, -1]], np.int32)
    ran = {}
    for beside in (True, False):
        ran[beside] = _run(monkeypatch, beside, cfg,
                           None if inputs is None else {n: a.copy() for n, a in inputs.items()})
    a, b = ran[True], ran[False]
    assert a.out.tobytes() == b.out.tobytes()
    assert a.refs.keys() == b.refs.keys() and all(a.refs[n].tobytes() == b.refs[n].tobytes() for n in a.refs)
    assert a.metrics_ahead is not None and b.metrics_ahead is None
    assert metrics_against(a.out, a.refs, a.metrics_ahead) == metrics_against(b.out, b.refs)
    assert [str(f) for r in a.runs for f in r.findings] == [str(f) for r in b.runs for f in r.findings]
    # the kernel wrote the numpy producer's bytes: the INT8 reference is out itself (runners._kv_cache)
    assert np.shares_memory(a.refs["reference_int8"], a.out)


def _bits(m):
    return {n: {k: np.float64(v).tobytes() for k, v in d.items()} for n, d in m.items()}


def test_metrics_ahead_gives_the_metrics_without_it():
    """The prepared ref (its copy and dot, out's buffer) or, for anything else (another array, a
    size that differs, a second call), the metrics made as without it; several refs, one of them
    out's bytes, one a scratch copy after the prepared one."""
    from kernels_py.reference.attention import PARALLEL_COPY, MetricsAhead, metrics_against
    rng = np.random.default_rng(8)
    shape = (2, PARALLEL_COPY // 64 + 3, 8, 4)
    out = rng.normal(size=shape).astype(np.float32)
    fp32 = (out + rng.normal(size=shape).astype(np.float32) * np.float32(1e-3)).astype(np.float32)
    other = (out * np.float32(1.01)).astype(np.float32)
    for refs in ({"fp32": fp32, "reference_int8": out.view()}, {"fp32": fp32, "other": other, "same": out.copy()},
                 {"same": out.copy(), "fp32": fp32}):
        want = _bits(metrics_against(out, refs))
        ahead = MetricsAhead(fp32, fp32.size)
        assert _bits(metrics_against(out, refs, ahead)) == want
        assert ahead.take(fp32, fp32.size) is None                    # taken once
        assert _bits(metrics_against(out, refs, ahead)) == want       # the second call: its own
    assert MetricsAhead(fp32, fp32.size).take(fp32.copy(), fp32.size) is None       # another array
    assert MetricsAhead(fp32, fp32.size - 1).take(fp32, fp32.size) is None          # another size
    small = {"fp32": fp32[:, :3], "reference_int8": out[:, :3]}
    assert _bits(metrics_against(out[:, :3], small, MetricsAhead(small["fp32"], small["fp32"].size))) == \
        _bits(metrics_against(out[:, :3], small))


def test_dequantized_kv_into_a_given_array_writes_every_element():
    """The runner's out, touched beside the simulation, filled with something else first: every
    element is written, the bytes those of a fresh array; a wrong shape or dtype is not used."""
    from kernels_py.host.runners import dequantized_kv
    d = make_attention_inputs(6, num_seqs=2, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[70, 33],
                              queries=False)
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], smooth_k=True)
    starts = np.array([0, 70, 103])
    want = dequantized_kv(cache, starts)
    given = np.full(want.shape, np.nan, np.float32)
    got = dequantized_kv(cache, starts, given)
    assert got is given and got.tobytes() == want.tobytes()
    for wrong in (np.zeros(want.shape, np.float64), np.zeros((2, 102, 2, 64), np.float32)):
        assert dequantized_kv(cache, starts, wrong).tobytes() == want.tobytes()
