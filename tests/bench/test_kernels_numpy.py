"""The bench's numpy implementations (bench/kernels_numpy.py, bench/decode_numpy.py) compute what
the project's references compute, on the inputs `gfxsim run` generates (no timing here)."""
from types import SimpleNamespace

import pytest

from bench.yardstick import OWN, build


@pytest.mark.parametrize("kernel", OWN)
@pytest.mark.parametrize("context", [300, 1024])
def test_each_numpy_implementation_matches_the_reference(kernel, context):
    a = SimpleNamespace(context=context, heads=16, kv_heads=2, head_dim=128, block_size=16, arch="gfx936", seed=3,
                        inputs=None)
    _, diff, scale = build(kernel, a)
    assert diff <= 1e-6 * max(1.0, scale), (kernel, diff, scale)


def test_the_prefill_implementation_takes_a_long_prompt(tmp_path):
    import numpy as np

    from kernels_py.workloads.data import make_attention_inputs
    d = make_attention_inputs(seed=0, num_heads=16, num_kv_heads=2, head_dim=128, context_lens=[700], num_queries=300)
    np.savez(tmp_path / "in.npz", **d)
    a = SimpleNamespace(context=0, heads=16, kv_heads=2, head_dim=128, block_size=16, arch="gfx936", seed=0,
                        inputs=str(tmp_path / "in.npz"))
    _, diff, scale = build("prefix_prefill", a)
    assert diff <= 1e-6 * max(1.0, scale)


def test_the_prefill_implementation_by_query_tiles_is_the_whole_prompt_at_once():
    """Tiles skip the chunks no query of theirs sees, and a row's math is its own: the same bits."""
    import numpy as np

    from bench.kernels_numpy import prefix_prefill
    from kernels_py.reference.int8_cache import build_paged_cache
    from kernels_py.workloads.data import make_attention_inputs
    d = make_attention_inputs(seed=1, num_heads=8, num_kv_heads=2, head_dim=64, context_lens=[500], num_queries=300)
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True, seed=1)
    args = (d["q"][0], cache.k_cache, cache.v_cache, cache.k_scale, cache.v_scale, cache.block_tables[0, :32], 500)
    whole = prefix_prefill(*args, tile=300)
    assert np.isfinite(whole).all()
    for tile in (1, 64, 128):
        assert np.array_equal(prefix_prefill(*args, tile=tile).view(np.uint32), whole.view(np.uint32)), tile
