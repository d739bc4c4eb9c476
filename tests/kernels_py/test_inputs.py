"""Loading user tensors from .npz: round trips, the packed form, and errors that name the problem."""
import numpy as np
import pytest

from kernels_py.workloads.data import make_attention_inputs
from kernels_py.workloads.inputs import InputError, load_inputs, validate_inputs
from kernels_py.reference.int8_cache import build_paged_cache


@pytest.fixture
def decode():
    d = make_attention_inputs(0, num_seqs=2, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[40, 25])
    d["k"], d["v"] = np.nan_to_num(d["k"]), np.nan_to_num(d["v"])        # users pad with zeros
    return d


@pytest.mark.parametrize("num_queries", [None, 6])
def test_npz_round_trip(tmp_path, num_queries):
    d = make_attention_inputs(1, num_seqs=2, num_heads=4, num_kv_heads=1, head_dim=128,
                              context_lens=[50, 20], num_queries=num_queries)
    path = tmp_path / "in.npz"
    np.savez(path, **d)
    got = load_inputs(path)
    assert set(got) == {"q", "k", "v", "context_lens"}
    for n in d:
        np.testing.assert_array_equal(got[n], d[n])


def test_packed_kv_is_padded(decode):
    lens = decode["context_lens"]
    packed = {n: np.concatenate([decode[n][s, :c] for s, c in enumerate(lens)]) for n in ("k", "v")}
    got = validate_inputs(dict(q=decode["q"], context_lens=lens, **packed))
    np.testing.assert_array_equal(got["k"][1, :25], decode["k"][1, :25])
    assert np.isnan(got["v"][1, 25:]).all()


def test_context_lens_default_to_the_padded_length(decode):
    got = validate_inputs(dict(q=decode["q"], k=decode["k"], v=decode["v"]))
    assert got["context_lens"].tolist() == [40, 40]


def test_block_tables_reach_the_cache(decode):
    bt = np.array([[3, 0, 7], [5, 1, -1]], np.int32)
    got = validate_inputs(dict(decode, block_tables=bt))
    cache = build_paged_cache(got["k"], got["v"], got["context_lens"], block_tables=got["block_tables"])
    np.testing.assert_array_equal(cache.block_tables, bt)
    with pytest.raises(ValueError, match="used twice"):
        build_paged_cache(got["k"], got["v"], got["context_lens"], block_tables=np.array([[3, 0, 7], [3, 1, -1]]))


def _change(d, **kw):
    out = {n: a for n, a in d.items()}
    for n, a in kw.items():
        if a is None:
            out.pop(n)
        else:
            out[n] = a
    return out


BAD = {
    "missing v": (lambda d: _change(d, v=None), ["'v'", "missing"]),
    "unknown name": (lambda d: _change(d, context_len=d["context_lens"]), ["'context_len'", "unknown"]),
    "q ndim": (lambda d: _change(d, q=d["q"][0]), ["'q'", "ndim 2", "[num_seqs, num_heads, head_dim]"]),
    "head_dim": (lambda d: _change(d, q=d["q"][..., :48], k=d["k"][..., :48], v=d["v"][..., :48]),
                 ["'q'", "head_dim", "(64, 128)", "found 48"]),
    "k head_dim": (lambda d: _change(d, k=np.concatenate([d["k"]] * 2, -1), v=np.concatenate([d["v"]] * 2, -1)),
                   ["'k'", "head_dim", "64"]),
    "v shape": (lambda d: _change(d, v=d["v"][:, :30]), ["'v'", "shape of 'k'", "(2, 30, 2, 64)"]),
    "gqa multiple": (lambda d: _change(d, q=d["q"][:, :3]), ["num_heads 3", "multiple of num_kv_heads 2"]),
    "gqa ratio": (lambda d: _change(d, q=np.concatenate([d["q"]] * 9, 1)), ["GQA ratio", "18", "16"]),
    "context too long": (lambda d: _change(d, context_lens=np.array([41, 25])), ["'context_lens'", "41", "max_context 40"]),
    "context_lens shape": (lambda d: _change(d, context_lens=np.array([40])), ["'context_lens'", "(2,)", "(1,)"]),
    "context_lens dtype": (lambda d: _change(d, context_lens=np.array([40.0, 25.0])), ["'context_lens'", "integer", "float64"]),
    "q dtype": (lambda d: _change(d, q=d["q"].astype(np.int32)), ["'q'", "float dtype", "int32"]),
    "k dtype": (lambda d: _change(d, k=d["k"].astype(np.int8)), ["'k'", "float dtype", "int8"]),
    "num_seqs": (lambda d: _change(d, k=d["k"][:1], v=d["v"][:1]), ["'k'", "num_seqs", "2"]),
    "non-finite": (lambda d: _change(d, k=np.where(np.arange(40)[None, :, None, None] == 3, np.inf, d["k"])),
                   ["'k'", "non-finite", "(0, 3, 0, 0)"]),
    "block_tables shape": (lambda d: _change(d, block_tables=np.zeros((2,), np.int32)), ["'block_tables'", "(2,)"]),
    "block_tables short": (lambda d: _change(d, block_tables=np.zeros((2, 1), np.int32)), ["'block_tables'", "too few", "40"]),
    "packed without lens": (lambda d: _change(d, k=d["k"][0], v=d["v"][0], context_lens=None),
                            ["packed", "'context_lens'"]),
    "packed sum": (lambda d: _change(d, k=d["k"][0], v=d["v"][0]), ["'context_lens'", "sum to", "40", "65"]),
    "prefill longer than context": (lambda d: _change(d, q=np.repeat(d["q"][:, None], 30, 1)),
                                    ["'context_lens'", "num_queries=30", "25"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_inputs_name_the_problem(decode, case, tmp_path):
    make, words = BAD[case]
    path = tmp_path / "bad.npz"
    np.savez(path, **make(decode))
    with pytest.raises(InputError) as e:
        load_inputs(path)
    msg = str(e.value)
    assert str(path) in msg
    for w in words:
        assert w in msg, (w, msg)


def test_unreadable_file(tmp_path):
    path = tmp_path / "x.npz"
    path.write_text("not a zip")
    with pytest.raises(InputError, match="cannot read"):
        load_inputs(path)
