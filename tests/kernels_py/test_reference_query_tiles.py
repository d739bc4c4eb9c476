"""The prefill's references (fp32 and the kernels' INT8 math) run QUERY_TILE queries at a time so
that a long prompt's [rows, context] arrays stay small: a row's math is its own, so any tiling gives
the same bits as the whole prompt at once."""
import numpy as np
import pytest

from kernels_py.reference import attention as R
from kernels_py.reference.int8_cache import build_paged_cache
from kernels_py.workloads.data import make_attention_inputs


@pytest.mark.parametrize("tile", [1, 7, 64])
def test_query_tiles_give_the_bits_of_the_whole_prompt(monkeypatch, tile):
    d = make_attention_inputs(seed=4, num_seqs=2, num_heads=8, num_kv_heads=2, head_dim=64, context_lens=[150, 203],
                              num_queries=90)
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True, seed=4)
    refs = lambda: (R.attention_int8(d["q"], cache), R.attention_fp32(d["q"], d["k"], d["v"], d["context_lens"]))  # noqa: E731
    monkeypatch.setattr(R, "QUERY_TILE", 1000)
    monkeypatch.setattr(R, "INT8_QUERY_TILE", 1000)
    whole = refs()
    monkeypatch.setattr(R, "QUERY_TILE", tile)
    monkeypatch.setattr(R, "INT8_QUERY_TILE", tile)
    for a, b in zip(refs(), whole):
        assert np.isfinite(b).all()
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("tile", [16, 64, 128])
def test_bf16_query_tiles_give_the_bits_of_the_whole_prompt(monkeypatch, tile):
    """The BF16 reference's products are float32 GEMMs, whose bits hold under tiling only while a
    tile's rows start where the BLAS kernel's row blocks do (tiles of 1 or 7 rows give other bits):
    BF16_QUERY_TILE is a multiple of 16; the last tile here is a partial one (90 or 203 queries)."""
    for nq, lens in ((90, [150, 203]), (203, [203, 260])):
        d = make_attention_inputs(seed=5, num_seqs=2, num_heads=8, num_kv_heads=2, head_dim=64, context_lens=lens,
                                  num_queries=nq)
        monkeypatch.setattr(R, "BF16_QUERY_TILE", 1000)
        whole = R.attention_bf16(d["q"], d["k"], d["v"], d["context_lens"])
        monkeypatch.setattr(R, "BF16_QUERY_TILE", tile)
        got = R.attention_bf16(d["q"], d["k"], d["v"], d["context_lens"])
        assert np.isfinite(whole).all()
        assert np.array_equal(got.view(np.uint32), whole.view(np.uint32))
