"""Inputs of the standalone twins: 16 query rows of one head and one sequence's cache."""
import numpy as np

from kernels_py.host import twins as H
from kernels_py.host.buffers import make_cache
from kernels_py.host.twins import query_rows
from kernels_py.int8_kv_cache import int8_kv_cache
from kernels_py.workloads.data import make_attention_inputs


def standalone(ctx, head_dim=64, block_size=16, seed=0):
    """16 query rows (the last 16 positions, one head) and the cache of one sequence."""
    d = make_attention_inputs(seed=seed, num_heads=1, head_dim=head_dim, context_lens=[ctx], num_queries=16)
    cache = make_cache(d["k"], d["v"], d["context_lens"], block_size=block_size, smooth_k=True, seed=seed)
    return d, cache, query_rows(d["q"], 1)


def same_either_way(twin: str, module, switch: str) -> None:
    """A compiled twin's first launch (bench.tinygrad_side's harness, provenance off) with
    ``module.<switch>`` True and False leaves the same buffers, findings, lane count and events."""
    import numpy as np

    from bench.tinygrad_side import Capture, harness
    run = harness(twin)
    out = {}
    for on in (True, False):
        setattr(module, switch, on)
        cap = Capture()
        try:
            r = run()
        finally:
            cap.restore()
            setattr(module, switch, True)
        out[on] = (r, {b.name: b.raw.copy() for b in cap.first["space"].buffers})
    (a, bufs_a), (b, bufs_b) = out[True], out[False]
    assert bufs_a.keys() == bufs_b.keys()
    for n in bufs_a:
        np.testing.assert_array_equal(bufs_a[n], bufs_b[n], err_msg=n)
    assert [(f.kind, f.message) for f in a.findings] == [(f.kind, f.message) for f in b.findings]
    assert a.lane_instructions == b.lane_instructions and a.trace.n_events == b.trace.n_events


def kv_setup():
    """40 tokens of two kv heads, two of them padding (slot -1), into a shuffled paged cache
    (int8_kv_cache's batched launches)."""
    rng = np.random.default_rng(3)
    key, value = (rng.standard_normal((40, 2, 64)).astype(np.float32) for _ in range(2))
    slots = rng.permutation(64)[:40].astype(np.int32)
    slots[[5, 17]] = -1
    return H.kv_cache_buffers(key, value, slots, num_blocks=4, block_size=16)


def prefill_setup():
    """70 queries (two query blocks, the second a tail) of 4 heads on 2 kv heads over a 100-token context."""
    d = make_attention_inputs(seed=2, num_seqs=1, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[100],
                              num_queries=70)
    cache = make_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True, seed=2)
    return H.prefill_buffers(d["q"], cache, 0)


def wrong_block_size(w, *args, block_size, **kw):
    """The producer told another block size than the cache's: its stores land in other slots (findings)."""
    return int8_kv_cache(w, *args, block_size=block_size // 2, **kw)
