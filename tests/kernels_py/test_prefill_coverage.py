"""The prefill's output declaration (each query consumes the tokens up to its own) over a context
wider than one footprint window: its elements' token sets are wide (WideSets), checked per distinct
(set, range) and in slices of the output (consumed.CHECK_SLICE), with the findings of the check
element by element; the lean check (every element checked and named) against the general one."""
import json

import pytest

from gfxsim.machine import consumed
from kernels_py.host import twins as H
from kernels_py.host.buffers import make_cache
from kernels_py.prefix_prefill import prefix_prefill
from kernels_py.workloads.data import make_attention_inputs

CTX, NQ = 400, 70


def _short_context(w, *args, context_len, **kw):
    """The prefill told a context one token shorter: every query row misses its last token."""
    return prefix_prefill(w, *args, context_len=context_len - 1, **kw)


@pytest.fixture(scope="module")
def inputs():
    d = make_attention_inputs(seed=2, num_seqs=1, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[CTX],
                              num_queries=NQ)
    return d, make_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True, seed=2)


def _coverage(inputs, kernel):
    d, cache = inputs
    run = H.prefill_buffers(d["q"], cache, 0).launch(kernel, trace=False)
    return [f for f in run.findings if f.kind == "token-coverage"]


@pytest.mark.parametrize("slice_", [None, 7])
def test_a_prefill_over_a_wide_context_is_silent(inputs, monkeypatch, slice_):
    if slice_:                 # the common case's per-row test slice by slice too
        monkeypatch.setattr(consumed, "CHECK_SLICE", slice_)
    assert CTX > 256 and _coverage(inputs, prefix_prefill) == []


def test_a_query_that_misses_its_own_token_is_named(inputs, monkeypatch):
    found = _coverage(inputs, _short_context)
    assert found
    for f in found:
        queries = {e[0] for e in f.details["elements"]}
        assert len(queries) == 1 and f.details["never"] == [CTX - NQ + queries.pop()], f.message
    monkeypatch.setattr(consumed, "CHECK_SLICE", 7)          # slices that split rows and heads
    sliced = _coverage(inputs, _short_context)
    same = lambda fs: [json.dumps(f.to_dict(), sort_keys=True, default=str) for f in fs]     # noqa: E731
    assert same(sliced) == same(found)


def test_the_lean_check_finds_what_the_general_one_finds(inputs, monkeypatch):
    """Every element checked and named: the check's views (consumed.LEAN_CHECK) find what the
    positions and copies of the general path find, message for message."""
    same = lambda fs: [json.dumps(f.to_dict(), sort_keys=True, default=str) for f in fs]     # noqa: E731
    lean = _coverage(inputs, _short_context)
    monkeypatch.setattr(consumed, "LEAN_CHECK", False)
    assert lean and same(_coverage(inputs, _short_context)) == same(lean)


def test_the_check_reads_the_names_without_making_the_outputs_tag_planes(inputs):
    """The check reads @mma and @mn only (MemProv.field_plane): the output's tag planes, which every
    store wrote as its tags, stay unmade (12 B an element of a prefill's output)."""
    d, cache = inputs
    setup = H.prefill_buffers(d["q"], cache, 0)
    run = setup.launch(prefix_prefill, trace=False)
    prov = setup.buffers["out"].prov
    assert not [f for f in run.findings if f.kind == "token-coverage"]
    assert {"query", "head", "dim"} <= set(prov.lazy) and prov.has("@mma")


def test_footprints_of_int32_names_are_those_of_int64_names(inputs):
    """The check hands footprints the planes' int32 names as they are: the same cells and sets as
    the int64 copies it made before."""
    import numpy as np
    d, cache = inputs
    setup = H.prefill_buffers(d["q"], cache, 0)
    run = setup.launch(prefix_prefill, trace=False)
    prov = setup.buffers["out"].prov
    ids, mn = prov.field_plane("@mma"), prov.field_plane("@mn")
    assert ids.dtype == np.int32 and (ids >= 0).all()
    log = run.machine.mma_log
    c32, fp32 = consumed.footprints(log, ids, mn)
    c64, fp64 = consumed.footprints(log, ids.astype(np.int64), mn.astype(np.int64))
    assert np.array_equal(c32, c64) and fp32.keys() == fp64.keys() == {"token"}
    for f in fp32:
        for a, b in zip(fp32[f], fp64[f]):
            assert (a is None) == (b is None)
            if a is not None:
                ma, mb = a.mask(), b.mask()
                assert all(np.array_equal(x, y) for x, y in zip((ma.base, ma.bits, ma.wide), (mb.base, mb.bits, mb.wide)))
