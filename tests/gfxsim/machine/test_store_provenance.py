"""Store provenance: a matrix instruction's D[m][n] carries A row m's identities and
B column n's (through the instruction's output layout, and through C), arithmetic keeps them where
the operands agree, and every harness tags its inputs and outputs so that each stored value names
the element it belongs to."""
import numpy as np
import pytest

from gfxsim import Buffer, launch
from kernels_py.workloads.data import make_attention_inputs
from kernels_py.fragments import DLayout
from kernels_py.host.buffers import decode_buffers, make_cache
from kernels_py.host import twins as H

MMAC = "v_mmac_i32_16x16x32_i8"          # gfx936: D[m][n] at lane m + 16*(n % 4), reg n / 4


def _pv_tile(transposed=False, tail=False, via_c=False):
    """A = W [16 rows][32 tokens] (tagged row, token), B = V [32 tokens][16 dims] (tagged dim,
    token): D[m][n] is row m, dim n. ``tail``: the last 8 tokens are never loaded (the zeros past a
    context carry no tags); ``via_c``: D is scaled by an untagged 2 and fed as C to an instruction
    whose A and B carry nothing; ``transposed``: D[m][n] is stored to out[n][m]."""
    rows, toks, dims = np.arange(16), np.arange(32), np.arange(16)
    a = Buffer("w", np.ones((16, 32), np.int8), {"row": rows[:, None], "token": toks[None, :]})
    b = Buffer("v", np.ones((16, 32), np.int8), {"dim": dims[:, None], "token": toks[None, :]})
    out = Buffer.empty("out", (16, 16), "i32", tags={"row": rows[:, None], "dim": dims[None, :]})

    def pv_tile(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        av, bv = w.zeros("i8", 8), w.zeros("i8", 8)
        with w.if_(r < (3 if tail else 4)):
            av[:] = w.global_load(a, c * 32 + 8 * r, 8, "i8")       # A[m = c][k = 8r + b]
            bv[:] = w.global_load(b, c * 32 + 8 * r, 8, "i8")       # B[k = 8r + b][n = c]
        d = w.mma(MMAC, av, bv)
        if via_c:
            d = w.mma(MMAC, w.zeros("i8", 8), w.zeros("i8", 8), d * 2)
        lay = DLayout(w, w.insn(MMAC))
        m, n = lay.rows(), lay.cols()
        addr = (n * 16 + m) * 4 if transposed else (m * 16 + n) * 4
        for i in range(lay.n_regs):
            w.global_store(out, addr[i], d[i])
    return launch(pv_tile, arch="gfx936"), out


@pytest.mark.parametrize("tail, via_c", [(False, False), (True, False), (False, True)])
def test_d_carries_a_rows_and_b_columns_to_the_store(tail, via_c):
    run, out = _pv_tile(tail=tail, via_c=via_c)
    assert run.findings == []
    ids = out.prov.ids                    # what the stores left: every element names its own (row, dim)
    per_elem = {f: ids[f].reshape(16, 16, -1)[:, :, 0] for f in ("row", "dim")}
    assert (per_elem["row"] == np.arange(16)[:, None]).all() and (per_elem["dim"] == np.arange(16)[None, :]).all()


@pytest.mark.parametrize("tail", [False, True])
def test_a_transposed_store_is_a_store_mismatch_naming_lane_register_element_and_value(tail):
    run, _ = _pv_tile(transposed=True, tail=tail)
    found = run.findings_of("store-mismatch")
    assert {f.kind for f in run.findings} == {"store-mismatch"}
    assert {f.details["field"] for f in found} == {"row", "dim"}
    for f in found:
        d = f.details
        e = d["element"]                       # out[n][m] received D[m][n]
        assert d["tags"] == {"row": e[0], "dim": e[1]}
        assert d["value"] == {"row": e[1], "dim": e[0]}
        assert e[0] != e[1]
        lane, reg = f.lane, d["register"]
        assert (lane % 16, lane // 16) == (e[1], e[0] % 4)        # the lane holding D[m][n] on gfx936
        assert f"lane {lane} {reg} holds" in f.message
        assert f"holds row {e[1]}, dim {e[0]}, the element is row {e[0]}, dim {e[1]}" in f.message


def _written_identity(buf):
    """{field: (fraction of the written elements tagged with it whose value carries it, whether all
    agree with the tags)}."""
    p, out = buf.prov, {}
    assert p is not None, f"{buf.name}: no provenance was stored"
    per = buf.itemsize // p.unit
    wr = np.ones(buf.array.size, bool) if buf.written is None else buf.written.reshape(buf.array.size, -1).all(axis=1)
    for f, t in buf.tags.items():
        ids = p.ids.get(f)
        if ids is None:
            out[f] = (0.0, True)
            continue
        v = ids.reshape(buf.array.size, per)[:, 0]
        mine = wr & (t >= 0)                  # written elements the field names (not a cache's unused slot)
        have = mine & (v >= 0)
        out[f] = (have.sum() / max(mine.sum(), 1), bool((v[have] == t[have]).all()))
    return out


@pytest.fixture(scope="module")
def small():
    d = make_attention_inputs(seed=0, num_seqs=1, num_heads=4, num_kv_heads=1, head_dim=64, context_lens=[100],
                              num_queries=16)
    cache = make_cache(d["k"], d["v"], d["context_lens"])
    return d, cache


def _harness_outputs(name, d, cache):
    from kernels_py.int8_kv_cache import int8_kv_cache
    from kernels_py.paged_attention_decode import paged_attention_decode, paged_attention_reduce
    from kernels_py.prefix_prefill import prefix_prefill
    from kernels_py.pv_bf16 import pv_bf16
    from kernels_py.pv_int8 import pv_int8
    from kernels_py.qk_int8 import qk_int8
    rows = H.query_rows(d["q"], 1)
    if name in ("pv_int8", "pv_bf16"):
        s = H.pv_buffers(H.softmax_rows(rows, cache), cache)
        s.launch(pv_int8 if name == "pv_int8" else pv_bf16, trace=False)
        return [s.buffers["out"]]
    if name == "qk_int8":
        s = H.qk_buffers(rows, cache)
        s.launch(qk_int8, trace=False)
        return [s.buffers["s_out"]]
    if name == "prefix_prefill":
        s = H.prefill_buffers(d["q"], cache, 0)
        s.launch(prefix_prefill, trace=False)
        return [s.buffers["out"]]
    if name == "int8_kv_cache":
        n = int(cache.context_lens[0])
        kv = np.stack([d["k"][0, :n, 0], d["v"][0, :n, 0]], 1)     # two kv heads
        s = H.kv_cache_buffers(kv, kv, np.arange(n)[::-1].copy(), num_blocks=8, block_size=16)
        s.launch(int8_kv_cache, trace=False)
        return [s.buffers[b] for b in s.outputs]
    s = decode_buffers(d["q"][:, -1], cache)
    s.decode.launch(paged_attention_decode, trace=False)
    s.reduce.launch(paged_attention_reduce, trace=False)
    return [s.buffers[b] for b in ("tmp_out", "max_logits", "exp_sums", "out")]


EXPECTED_TAGS = {"pv_int8": {"out": {"row", "dim"}}, "pv_bf16": {"out": {"row", "dim"}},
                 "qk_int8": {"s_out": {"row", "token"}},
                 "prefix_prefill": {"out": {"query", "head", "dim"}},          # one sequence: no seq tag
                 "int8_kv_cache": {"k_cache": {"token", "kv_head", "dim"}, "v_cache": {"token", "kv_head", "dim"},
                                   "k_scale": {"token", "kv_head"}, "v_scale": {"token", "kv_head"}},
                 "paged_attention_decode": {"tmp_out": {"head", "dim"}, "max_logits": {"head"},
                                            "exp_sums": {"head"}, "out": {"head", "dim"}}}


@pytest.mark.parametrize("name", sorted(EXPECTED_TAGS))
def test_every_harness_output_is_tagged_and_every_stored_value_names_its_element(name, small):
    """Each output element's tags, and what the faithful kernel stored there: every written element
    holds a value naming exactly that element in every tagged field."""
    for buf in _harness_outputs(name, *small):
        assert set(buf.tags) == EXPECTED_TAGS[name][buf.name], buf.name
        got = _written_identity(buf)
        for f, (present, agree) in got.items():
            assert agree, f"{name} {buf.name}: {f} disagrees"
            assert present == 1.0, f"{name} {buf.name}: only {present:.0%} of the written elements carry {f}"


def test_the_v_cache_carries_its_head_element_and_the_q_rows_their_row(small):
    d, cache = small
    v = H.cache_buffers(cache)["v_cache"]
    assert (v.tags["dim"].reshape(cache.v_cache.shape) == np.arange(cache.head_dim)[None, None, :, None]).all()
    q = H.qk_buffers(H.query_rows(d["q"], 1), cache).buffers["q"]
    assert (q.tags["row"].reshape(16, -1) == np.arange(16)[:, None]).all()
    p = H.pv_buffers(H.softmax_rows(H.query_rows(d["q"], 1), cache), cache).buffers["p"]
    assert (p.tags["row"].reshape(16, -1) == np.arange(16)[:, None]).all()


@pytest.mark.parametrize("shape", [(6, 2, 8, 4, 16), (5, 3, 7)])
def test_tags_at_equals_the_materialised_tags(shape):
    """Buffer.tags_at looks each tag up on the axes where it varies (shift/mask for power-of-two
    extents, the first row only where every lane's bytes share the tag's coordinates) and gives
    exactly the materialised tag of every element, for 1-D and [bytes, lanes] element arrays."""
    rng = np.random.default_rng(len(shape))
    arr = np.zeros(shape, np.int8)
    tags = {"token": rng.integers(-1, 500, (shape[0], 1, 1) + ((shape[3], 1) if len(shape) == 5 else ())),
            "dim": np.arange(shape[-1]).reshape((1,) * (len(shape) - 1) + (shape[-1],)),
            "seq": np.zeros((1,) * len(shape), int)}
    buf = Buffer("x", arr, tags=tags)
    full = buf.tags
    lanes = rng.integers(0, arr.size // shape[-1], 40) * shape[-1]           # lanes at the start of a run
    anywhere = rng.integers(0, arr.size - 4, 40)                              # runs across coordinates
    inner = lanes[lanes < arr.size - shape[-1]]
    for e in (rng.integers(0, arr.size, 100), lanes[None, :] + np.arange(4)[:, None],
              rng.integers(0, arr.size, (3, 40)), anywhere[None, :] + np.arange(5)[:, None],
              (lanes + 1)[None, :] + np.arange(2)[:, None], np.sort(rng.integers(0, arr.size, (3, 40)), axis=0),
              (lanes + shape[-1] - 4)[None, :] + np.arange(4)[:, None],       # a run's last 4 elements
              (inner + shape[-1] - 3)[None, :] + np.arange(4)[:, None]):      # one past it
        got, views = buf.tags_at(e), buf.tags_at(e, views=True)
        for f in tags:
            np.testing.assert_array_equal(got[f], full[f][e])
            np.testing.assert_array_equal(views[f], full[f][e])
            assert got[f].flags.writeable and not np.shares_memory(got[f], views[f])
