"""The Triton INT8-KV-cache paged decode against kernels_py's decode reference, both groupings:
the fragment-aligned W scales are silent, the contiguous ones are scale-group findings naming the
tokens and the Triton source line of the dequant."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import support.triton_local  # noqa: F401  (skips the module without triton)

from gfxsim.arch.kslots import format_token_set
from kernels_py.reference.attention import decode_int8_partials
from kernels_py.reference.int8_cache import build_paged_cache
from kernels_triton import paged_decode_int8 as pd

H, KVH, D, BS = 4, 1, 64, 16
CTX = 200                         # one partition: chunks 0-2 full, chunk 3 masked past token 200


def decode(grouping: str):
    rng = np.random.default_rng(4)
    k, v = (rng.standard_normal((1, CTX, KVH, D)).astype(np.float32) for _ in range(2))
    q = rng.standard_normal((1, H, D)).astype(np.float32)
    cache = build_paged_cache(k, v, [CTX], block_size=BS)
    out, r = pd.launch(q, cache, grouping)
    return out, r, q, cache


def dequant_line() -> int:
    src, first = inspect.getsourcelines(pd.paged_decode_int8.fn)
    return first + next(i for i, s in enumerate(src) if "o += acc0 * sw0[:, None]" in s)


@pytest.mark.parametrize("grouping", ["fragment", "contiguous"])
def test_paged_decode_int8(grouping):
    out, r, q, cache = decode(grouping)
    ref = decode_int8_partials(q, cache, grouping=grouping)
    other = decode_int8_partials(q, cache, grouping="contiguous" if grouping == "fragment" else "fragment")
    np.testing.assert_array_equal(out["max_logits"], ref.max_logits)
    np.testing.assert_allclose(out["exp_sums"], ref.exp_sums, rtol=1e-5)
    scale = np.abs(ref.tmp_out).max()
    np.testing.assert_allclose(out["tmp_out"], ref.tmp_out, rtol=0, atol=1e-5 * scale)
    assert np.abs(out["tmp_out"] - other.tmp_out).max() > 1e-3 * scale      # the groupings differ
    assert {f.kind for f in r.findings if not f.is_performance} <= {"scale-group-mismatch"}
    mism = [f for f in r.findings if f.kind == "scale-group-mismatch"]
    if grouping == "fragment":
        assert mism == []
        # the PV dots' K slots (Wq in A, the V cache in B) hold kernels_py's MFMA token sets (reference.attention.mmac_set)
        sets = set()
        for rec in r.records:
            a, b = rec.k_slots("A"), rec.k_slots("B")
            if a is not None and b is not None and (b[0] >= 0).sum() > 1:
                a, b = a[0], b[0]
                assert a.tolist() == b.tolist()
                sets.add(format_token_set(b[b >= 0]))
        j_sets = [16 * (i // 8) + 8 * j + i % 8 for j in range(2) for i in [np.arange(32)]]
        want = {format_token_set(64 * c + t) for c in range(3) for t in j_sets} | {"{192-199}"}
        assert sets == want
        return
    # every chunk's two dots: group 0 (tokens 0-31) scaled dot 0's K set, group 1 dot 1's
    msgs = {f.message for f in mism}
    assert any("computed over tokens {0-31}" in m and "consumed {0-7,16-23,32-39,48-55}" in m for m in msgs), msgs
    assert any("computed over tokens {32-63}" in m and "consumed {8-15,24-31,40-47,56-63}" in m for m in msgs), msgs
    assert all(f.source.endswith(f"paged_decode_int8.py:{dequant_line()}") for f in mism), {f.source for f in mism}


def test_two_sequences_two_partitions():
    """Sequence 0 spans two partitions (300 tokens), sequence 1 one (70); its second partition's
    program ends at once and leaves its row as the host set it."""
    rng = np.random.default_rng(6)
    lens = [300, 70]
    k, v = (rng.standard_normal((2, 300, KVH, D)).astype(np.float32) for _ in range(2))
    q = rng.standard_normal((2, H, D)).astype(np.float32)
    cache = build_paged_cache(k, v, lens, block_size=BS)
    out, r = pd.launch(q, cache, "fragment")
    ref = decode_int8_partials(q, cache, grouping="fragment")
    np.testing.assert_array_equal(out["max_logits"], ref.max_logits)
    np.testing.assert_allclose(out["exp_sums"], ref.exp_sums, rtol=1e-5)
    np.testing.assert_allclose(out["tmp_out"], ref.tmp_out, rtol=0, atol=1e-5 * np.abs(ref.tmp_out).max())
    assert [f for f in r.findings if not f.is_performance] == []
